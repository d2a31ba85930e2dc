/* dot.c: text buffers, DOT/HTML label escaping and attribute formatting for qviz. */
#include "qviz.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- buffers */

static void buf_reserve(qviz_buf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1) cap *= 2;
  char *s = realloc(b->s, cap);
  if (!s) {
    fputs("qviz: error: out of memory\n", stderr);
    abort();
  }
  b->s = s;
  b->cap = cap;
}

void buf_printf(qviz_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  buf_reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void buf_puts(qviz_buf *b, const char *s) {
  size_t n = strlen(s);
  buf_reserve(b, n);
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}

void buf_clear(qviz_buf *b) {
  b->len = 0;
  if (b->s) b->s[0] = 0;
}

void buf_free(qviz_buf *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}

/* ---------------------------------------------------------------- escaping */

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *p) {
  unsigned char c = p[0];
  size_t n;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, min = 0x10000;
  else return 0;
  unsigned cp = c & (0x3F >> (n - 1));
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;   /* also stops at the terminating NUL */
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

/* Writes s with valid multi-byte UTF-8 kept as is, invalid bytes as '?', and
 * each ASCII byte through escape_ascii. */
static void put_escaped(FILE *out, const char *s, void (*escape_ascii)(FILE *out, unsigned char c)) {
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  while (*p) {
    size_t n = utf8_len(p);
    if (n == 0) {
      fputc('?', out);
      p++;
    } else if (n > 1) {
      fwrite(p, 1, n, out);
      p += n;
    } else {
      escape_ascii(out, *p++);
    }
  }
}

static void escape_dot_ascii(FILE *out, unsigned char c) {
  if (c == '"' || c == '\\') {
    fputc('\\', out);
    fputc(c, out);
  } else if (c == '\n') {
    fputs("\\n", out);
  } else if (c == '\t') {
    fputc(' ', out);
  } else if (c < 32 || c == 127) {
    fputc('?', out);
  } else {
    fputc(c, out);
  }
}

void dot_quoted(FILE *out, const char *s) {
  fputc('"', out);
  put_escaped(out, s, escape_dot_ascii);
  fputc('"', out);
}

static void escape_html_ascii(FILE *out, unsigned char c) {
  switch (c) {
  case '&': fputs("&amp;", out); break;
  case '<': fputs("&lt;", out); break;
  case '>': fputs("&gt;", out); break;
  case '"': fputs("&quot;", out); break;
  case '\'': fputs("&#39;", out); break;
  case '\n': fputs("<BR/>", out); break;
  case '\t': fputc(' ', out); break;
  default: fputc(c < 32 || c == 127 ? '?' : c, out);
  }
}

void dot_html(FILE *out, const char *s) { put_escaped(out, s, escape_html_ascii); }

void buf_put_clipped(qviz_buf *b, const char *s, size_t max) {
  size_t n = strlen(s);
  if (n <= max) {
    buf_puts(b, s);
    return;
  }
  /* Keep both ends: generated names (ONNX paths, numbered temporaries) differ
   * at the end as often as at the start.  Cuts step to UTF-8 lead bytes. */
  size_t keep = max > 3 ? max - 3 : 0, head = (keep + 1) / 2, tail_start = n - (keep - head);
  while (head > 0 && ((unsigned char)s[head] & 0xC0) == 0x80) head--;
  while (tail_start < n && ((unsigned char)s[tail_start] & 0xC0) == 0x80) tail_start++;
  buf_reserve(b, head + 3 + (n - tail_start));
  memcpy(b->s + b->len, s, head);
  b->len += head;
  memcpy(b->s + b->len, "...", 3);
  b->len += 3;
  memcpy(b->s + b->len, s + tail_start, n - tail_start);
  b->len += n - tail_start;
  b->s[b->len] = 0;
}

/* ---------------------------------------------------------------- formatting */

void fmt_type(qviz_buf *b, const qir_type *t) {
  buf_puts(b, qir_dtype_name(t->dtype));
  buf_puts(b, "[");
  for (int i = 0; i < t->rank; i++) buf_printf(b, "%s%s%lld", i ? "," : "", !i && t->bounded ? "<=" : "", (long long)t->dims[i]);
  buf_puts(b, "]");
}

void fmt_attr_val(qviz_buf *b, const qir_attr_val *v) {
  switch (v->kind) {
  case QIR_ATTR_INT: buf_printf(b, "%lld", (long long)v->i); break;
  case QIR_ATTR_FLOAT: buf_printf(b, "%g", v->f); break;
  case QIR_ATTR_STRING: buf_printf(b, "\"%s\"", v->s ? v->s : ""); break;
  case QIR_ATTR_WORD: buf_puts(b, v->s ? v->s : ""); break;
  case QIR_ATTR_LIST:
    buf_puts(b, "[");
    for (int i = 0; i < v->n; i++) {
      if (i) buf_puts(b, ",");
      fmt_attr_val(b, &v->items[i]);
    }
    buf_puts(b, "]");
    break;
  case QIR_ATTR_DICT:
    buf_puts(b, "{");
    for (int i = 0; i < v->n; i++) {
      buf_printf(b, "%s%s=", i ? ", " : "", v->entries[i].key);
      fmt_attr_val(b, &v->entries[i].val);
    }
    buf_puts(b, "}");
    break;
  }
}

void fmt_dims(qviz_buf *b, const qir_attr_val *v) {
  if (!v) {
    buf_puts(b, "-");
    return;
  }
  if (v->kind != QIR_ATTR_LIST) {
    fmt_attr_val(b, v);
    return;
  }
  if (v->n == 0) buf_puts(b, "none");
  for (int i = 0; i < v->n; i++) {
    if (i) buf_puts(b, "x");
    fmt_attr_val(b, &v->items[i]);
  }
}

/* ---------------------------------------------------------------- tiles */

static int64_t dict_int(const qir_attr_val *d, const char *key) {
  const qir_attr_val *v = qir_attr_dict_get(d, key);
  if (!v) return -1;
  if (v->kind == QIR_ATTR_INT) return v->i;
  if (v->kind == QIR_ATTR_FLOAT) return (int64_t)v->f;
  return -1;
}

static const qir_attr_val *dict_list(const qir_attr_val *d, const char *key) {
  const qir_attr_val *v = qir_attr_dict_get(d, key);
  return v && (v->kind == QIR_ATTR_LIST || v->kind == QIR_ATTR_INT) ? v : NULL;
}

qviz_tile tile_of(const qir_op *op) {
  qviz_tile t = {.threads = -1, .smem_pad = -1, .vec = -1, .smem = -1, .regs = -1, .rsplit = -1, .est_us = -1,
                 .stages = -1, .splits = -1, .skipped_tiles = -1};
  qir_attr *a = qir_op_attr(op, "tile");
  if (!a || a->val.kind != QIR_ATTR_DICT) return t;
  const qir_attr_val *d = &a->val;
  t.present = true;
  t.block = dict_list(d, "block");
  t.thread = dict_list(d, "thread");
  t.rstep = dict_list(d, "rstep");
  t.grid = dict_list(d, "grid");
  t.threads = dict_int(d, "threads");
  t.smem_pad = dict_int(d, "smem_pad");
  t.vec = dict_int(d, "vec");
  t.smem = dict_int(d, "smem");
  t.regs = dict_int(d, "regs");
  t.rsplit = dict_int(d, "rsplit");
  t.mma = dict_list(d, "mma");
  t.mma_axes = dict_list(d, "mma_axes");
  t.flash = dict_list(d, "flash");
  t.flash_mma = dict_list(d, "flash_mma");
  t.stages = dict_int(d, "stages");
  t.splits = dict_int(d, "splits");
  t.skipped_tiles = dict_int(d, "skipped_tiles");
  const qir_attr_val *e = qir_attr_dict_get(d, "est_us");
  if (e && e->kind == QIR_ATTR_FLOAT) t.est_us = e->f;
  else if (e && e->kind == QIR_ATTR_INT) t.est_us = (double)e->i;
  const qir_attr_val *tg = qir_attr_dict_get(d, "target");
  if (tg && (tg->kind == QIR_ATTR_STRING || tg->kind == QIR_ATTR_WORD)) t.target = tg->s;
  return t;
}

void fmt_tile_summary(qviz_buf *b, const qviz_tile *t) {
  if (!t->present) return;
  const char *sep = "";
  if (t->block) { buf_puts(b, "blk "); fmt_dims(b, t->block); sep = " "; }
  if (t->flash) {
    buf_puts(b, "flash "); fmt_dims(b, t->flash); sep = " ";
    if (t->splits > 1) buf_printf(b, " split %lld", (long long)t->splits);
  }
  if (t->thread) { buf_printf(b, "%sthr ", sep); fmt_dims(b, t->thread); sep = " "; }
  if (t->grid) { buf_printf(b, "%sgrid ", sep); fmt_dims(b, t->grid); sep = " "; }
  if (t->mma || t->flash_mma) { buf_printf(b, "%smma", sep); sep = " "; }
  if (t->rsplit > 1) { buf_printf(b, "%srsplit %lld", sep, (long long)t->rsplit); sep = " "; }
  if (t->est_us >= 0) buf_printf(b, "%s%.3gus", sep, t->est_us);
}

/* ---------------------------------------------------------------- op facts */

const char *op_name(const qir_op *op) {
  const qir_opinfo *info = qir_opinfo_get(op->code);
  return info ? info->name : "?";
}

bool op_is_named(const qir_op *op, const char *name) { return strcmp(op_name(op), name) == 0; }

const char *kernel_group_of(const qir_op *op) {
  const qir_op *k = op->parent ? op->parent->parent_op : NULL;
  return k && k->code == QIR_OP_KERNEL ? kernel_op_name(k) : NULL;
}

const char *kernel_op_name(const qir_op *op) { return op->sym ? op->sym : "?"; }

bool op_is_compute(const qir_op *op) {
  switch (op->code) {
  case QIR_OP_COMPUTE: case QIR_OP_MATMUL: case QIR_OP_GEMM: case QIR_OP_EINSUM:
  case QIR_OP_CONV: case QIR_OP_CONV_TRANSPOSE: case QIR_OP_MAX_POOL: case QIR_OP_AVG_POOL:
  case QIR_OP_GLOBAL_AVG_POOL: case QIR_OP_GLOBAL_MAX_POOL: case QIR_OP_REDUCE_SUM:
  case QIR_OP_REDUCE_MEAN: case QIR_OP_REDUCE_MAX: case QIR_OP_REDUCE_MIN: case QIR_OP_REDUCE_PROD:
  case QIR_OP_REDUCE_L2: case QIR_OP_ARGMAX: case QIR_OP_ARGMIN: case QIR_OP_SOFTMAX:
  case QIR_OP_LOG_SOFTMAX: case QIR_OP_BATCH_NORM: case QIR_OP_INSTANCE_NORM: case QIR_OP_LAYER_NORM:
  case QIR_OP_LRN: case QIR_OP_LP_NORMALIZATION: case QIR_OP_LSTM: case QIR_OP_GRU: case QIR_OP_RNN:
    return true;
  default:
    return false;
  }
}

const char *palette_color(int i) {
  static const char *colors[] = {"#fde2c4", "#d4ecd4", "#dbe4f5", "#f5d6e6", "#eeeac4",
                                 "#d6f0f0", "#e6dcf2", "#f2dcd0", "#dfeccd", "#e0e0e0"};
  int n = (int)(sizeof colors / sizeof *colors);
  return colors[((i % n) + n) % n];
}

/* ---------------------------------------------------------------- pointer map */

static size_t map_hash(const void *p, size_t cap) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 17;
  x *= 0x9E3779B97F4A7C15ull;
  return (size_t)(x >> 7) & (cap - 1);
}

int map_get(const qviz_map *m, const void *key) {
  if (!m->cap) return -1;
  for (size_t i = map_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key) return m->vals[i];
    if (!m->keys[i]) return -1;
  }
}

void map_put(qviz_map *m, const void *key, int val) {
  if ((m->n + 1) * 2 > m->cap) {
    qviz_map bigger = {.cap = m->cap ? m->cap * 2 : 64};
    bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
    bigger.vals = calloc(bigger.cap, sizeof *bigger.vals);
    if (!bigger.keys || !bigger.vals) {
      fputs("qviz: error: out of memory\n", stderr);
      abort();
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i]) map_put(&bigger, m->keys[i], m->vals[i]);
    map_free(m);
    *m = bigger;
  }
  size_t i = map_hash(key, m->cap);
  while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
  if (!m->keys[i]) m->n++;
  m->keys[i] = key;
  m->vals[i] = val;
}

void map_free(qviz_map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}
