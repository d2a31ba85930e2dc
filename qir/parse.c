/* parse.c: the glue between the flex scanner, the bison grammar and the IR.
 *
 * The grammar (grammar/qir.y) calls the qp_* helpers below to build the module;
 * they resolve names, check what the op table says about operand, result and
 * region counts, convert literals exactly, and report every problem as a
 * located error.  The first error ends the parse. */
#include "qir.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "qir.tab.h"
#include "lex.yy.h"

/* A name in the module's one namespace.  Names stay after their region
 * closes (alive = false) so redefinitions are still caught. */
typedef struct {
  const char *name;
  qir_value *value;
  qir_loc loc;
  bool alive;
} qp_sym;

struct qp_ctx {
  qir_module *m;
  qir_diag *d;
  const char *file;             /* interned in m */
  const char *src;              /* the text being scanned */
  size_t src_len;
  int line, col;                /* position of the next byte */
  size_t pos;
  size_t tok_pos, tok_len;      /* the last token, for syntax errors */
  int depth;                    /* open brackets */
  bool failed;

  qp_sym *syms;                 /* open-addressing hash table (malloc'd) */
  size_t sym_cap, sym_count;
  qp_vec defs;                  /* size_t: slots in definition order */
  qp_vec scope_marks;           /* int: defs.n at each open region */
  qp_vec regions;               /* qir_region *: open regions */

  struct {                      /* the compute op being parsed */
    qp_vec names;               /* const char * */
    qp_vec extents;             /* int64_t */
    qp_vec dims;                /* const qir_dim *: symbolic extents (NULL: static) */
    qp_vec operands;            /* qir_value * */
    int n_out;
    bool in_reduce;
    qir_reduce_kind reduce;
    qir_loc reduce_loc;
  } comp;
};

qir_module *qp_module(qp_ctx *c) { return c->m; }

/* ---------------------------------------------------------------- helpers */

void qp_vec_push(qp_ctx *c, qp_vec *v, const void *item, size_t size) {
  if (v->used + size > v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 8 * size;
    while (cap < v->used + size) cap *= 2;
    void *data = qir_alloc(c->m, cap);
    if (v->used) memcpy(data, v->data, v->used);
    v->data = data;
    v->cap = cap;
  }
  memcpy((char *)v->data + v->used, item, size);
  v->used += size;
  v->n++;
}

#define VEC_AT(v, T, i) (((T *)(v)->data)[i])

qir_loc qp_loc(qp_ctx *c, const QIR_YYLTYPE *l) {
  qir_loc loc = {c->file, l->first_line, l->first_column};
  return loc;
}

void qp_error(qp_ctx *c, qir_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  qir_diag_vreport(c->d, QIR_SEV_ERROR, loc, fmt, ap);
  va_end(ap);
  c->failed = true;
}

static qir_loc lloc_at(qp_ctx *c, const QIR_YYLTYPE *l, size_t offset) {
  qir_loc loc = {c->file, l->first_line, l->first_column + (int)offset};
  return loc;
}

/* Length of the valid UTF-8 sequence at s (1 for ASCII), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  if (s[0] < 0x80) return 1;
  size_t len;
  unsigned lo = 0x80, hi = 0xBF;
  if (s[0] >= 0xC2 && s[0] <= 0xDF) len = 2;
  else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
    len = 3;
    if (s[0] == 0xE0) lo = 0xA0;
    if (s[0] == 0xED) hi = 0x9F;
  } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
    len = 4;
    if (s[0] == 0xF0) lo = 0x90;
    if (s[0] == 0xF4) hi = 0x8F;
  } else return 0;
  if (n < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return len;
}

/* ---------------------------------------------------------------- scanner callbacks */

void qp_lex_advance(qp_ctx *c, QIR_YYLTYPE *l, const char *text, size_t len) {
  l->first_line = c->line;
  l->first_column = c->col;
  c->tok_pos = c->pos;
  c->tok_len = len;
  for (size_t i = 0; i < len; i++) {
    if (text[i] == '\n') {
      if (c->line < INT_MAX) c->line++;
      c->col = 1;
    } else if (c->col < INT_MAX) {
      c->col++;
    }
  }
  c->pos += len;
  l->last_line = c->line;
  l->last_column = c->col;
}

void qp_lex_eof(qp_ctx *c, QIR_YYLTYPE *l) {
  l->first_line = l->last_line = c->line;
  l->first_column = l->last_column = c->col;
  /* After a final newline, point just past the last line's text so the
   * message can show that line. */
  if (c->line > 1 && c->col == 1 && c->pos > 0 && c->src[c->pos - 1] == '\n') {
    size_t start = c->pos - 1;
    while (start > 0 && c->src[start - 1] != '\n') start--;
    size_t width = c->pos - 1 - start;
    l->first_line = l->last_line = c->line - 1;
    l->first_column = l->last_column = width < INT_MAX ? (int)width + 1 : INT_MAX;
  }
  c->tok_pos = c->pos;
  c->tok_len = 0;
}

bool qp_lex_comment(qp_ctx *c, const char *text, size_t len, const QIR_YYLTYPE *l) {
  const unsigned char *s = (const unsigned char *)text;
  for (size_t i = 0; i < len;) {
    size_t k = s[i] ? utf8_seq(s + i, len - i) : 0;
    if (!k) {
      qp_error(c, lloc_at(c, l, i), "invalid byte 0x%02X in comment (the file must be UTF-8 text)", s[i]);
      return false;
    }
    i += k;
  }
  return true;
}

bool qp_lex_int(qp_ctx *c, const char *text, size_t len, const QIR_YYLTYPE *l, uint64_t *out) {
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned dgt = (unsigned)(text[i] - '0');
    if (v > (UINT64_MAX - dgt) / 10) {
      qp_error(c, qp_loc(c, l), "integer literal is too large");
      return false;
    }
    v = v * 10 + dgt;
  }
  *out = v;
  return true;
}

bool qp_lex_float(qp_ctx *c, const char *text, size_t len, const QIR_YYLTYPE *l, double *out) {
  char buf[64];
  if (len >= sizeof buf) { /* strtod needs a terminated copy; long literals are rare */
    char *p = malloc(len + 1);
    if (!p) abort();
    memcpy(p, text, len);
    p[len] = 0;
    *out = strtod(p, NULL);
    free(p);
  } else {
    memcpy(buf, text, len);
    buf[len] = 0;
    *out = strtod(buf, NULL);
  }
  if (isinf(*out)) {
    qp_error(c, qp_loc(c, l), "float literal is out of range (write inf for infinity)");
    return false;
  }
  return true;
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* Decodes a quoted string token: escapes \" \\ \n \t \xHH; raw bytes must be
 * UTF-8 and not control characters; NUL is refused (C strings). */
const char *qp_lex_string(qp_ctx *c, const char *text, size_t len, const QIR_YYLTYPE *l) {
  const unsigned char *s = (const unsigned char *)text;
  char *out = qir_alloc(c->m, len);
  size_t n = 0;
  for (size_t i = 1; i + 1 < len;) {
    if (s[i] == '\\') {
      unsigned char e = s[i + 1];
      if (e == '"' || e == '\\') out[n++] = (char)e;
      else if (e == 'n') out[n++] = '\n';
      else if (e == 't') out[n++] = '\t';
      else if (e == 'x') {
        int h1 = i + 2 < len - 1 ? hexval(text[i + 2]) : -1;
        int h2 = i + 3 < len - 1 ? hexval(text[i + 3]) : -1;
        if (h1 < 0 || h2 < 0) {
          qp_error(c, lloc_at(c, l, i), "\\x in a string needs two hex digits");
          return NULL;
        }
        if (h1 == 0 && h2 == 0) {
          qp_error(c, lloc_at(c, l, i), "NUL byte in a string");
          return NULL;
        }
        out[n++] = (char)(h1 * 16 + h2);
        i += 4;
        continue;
      } else {
        if (e >= 32 && e < 127) qp_error(c, lloc_at(c, l, i), "unknown escape '\\%c' in a string", e);
        else qp_error(c, lloc_at(c, l, i), "unknown escape in a string");
        return NULL;
      }
      i += 2;
      continue;
    }
    if (s[i] < 32 && s[i] != '\t') {
      qp_error(c, lloc_at(c, l, i), "control character 0x%02X in a string (use an escape)", s[i]);
      return NULL;
    }
    size_t k = utf8_seq(s + i, len - 1 - i);
    if (!k) {
      qp_error(c, lloc_at(c, l, i), "invalid byte 0x%02X in a string (the file must be UTF-8 text)", s[i]);
      return NULL;
    }
    memcpy(out + n, s + i, k);
    n += k;
    i += k;
  }
  out[n] = 0;
  return out;
}

const char *qp_lex_name(qp_ctx *c, const char *text, size_t len) { return qir_strndup(c->m, text, len); }

bool qp_lex_open(qp_ctx *c, const QIR_YYLTYPE *l) {
  if (++c->depth > QP_MAX_DEPTH) {
    qp_error(c, qp_loc(c, l), "brackets nested deeper than %d levels", QP_MAX_DEPTH);
    return false;
  }
  return true;
}

void qp_lex_close(qp_ctx *c) {
  if (c->depth > 0) c->depth--;
}

void qp_lex_bad(qp_ctx *c, const char *text, size_t len, const QIR_YYLTYPE *l, const char *what) {
  (void)len;
  unsigned char ch = (unsigned char)text[0];
  if (what) qp_error(c, qp_loc(c, l), "%s", what);
  else if (ch >= 0x80) {
    size_t k = utf8_seq((const unsigned char *)c->src + c->tok_pos, c->src_len - c->tok_pos);
    if (k) qp_error(c, qp_loc(c, l), "unexpected non-ASCII character (allowed only in strings and comments)");
    else qp_error(c, qp_loc(c, l), "invalid byte 0x%02X (the file must be UTF-8 text)", ch);
  } else if (ch < 32 || ch == 127) qp_error(c, qp_loc(c, l), "unexpected control character 0x%02X", ch);
  else qp_error(c, qp_loc(c, l), "unexpected character '%c'", ch);
}

/* ---------------------------------------------------------------- syntax errors */

/* Bison names tokens by their aliases: "'module'" or "identifier". */
static void token_name(char *buf, size_t n, const char *name) {
  size_t len = strlen(name);
  if (len >= 2 && name[0] == '"' && name[len - 1] == '"') snprintf(buf, n, "%.*s", (int)(len - 2), name + 1);
  else snprintf(buf, n, "%s", name);
}

void qp_syntax_error(qp_ctx *c, qir_loc loc, const char *unexpected, const char **expected, int n_expected) {
  if (c->failed) return; /* the scanner already said what is wrong */
  char msg[512], name[64];
  int w = snprintf(msg, sizeof msg, "syntax error");
  if (unexpected) {
    token_name(name, sizeof name, unexpected);
    w += snprintf(msg + w, sizeof msg - (size_t)w, ": unexpected %s", name);
    /* Quote the text of tokens whose name does not say it. */
    bool show = name[0] != '\'' && c->tok_len > 0 && strcmp(name, "string") != 0;
    for (size_t i = 0; show && i < c->tok_len; i++) {
      unsigned char ch = (unsigned char)c->src[c->tok_pos + i];
      if (ch < 32 || ch >= 127) show = false;
    }
    if (show) {
      int tl = c->tok_len > 40 ? 40 : (int)c->tok_len;
      w += snprintf(msg + w, sizeof msg - (size_t)w, " '%.*s%s'", tl, c->src + c->tok_pos, c->tok_len > 40 ? "..." : "");
    }
  }
  for (int i = 0; i < n_expected && w < (int)sizeof msg; i++) {
    token_name(name, sizeof name, expected[i]);
    w += snprintf(msg + w, sizeof msg - (size_t)w, "%s%s", i == 0 ? ", expected " : i == n_expected - 1 ? " or " : ", ",
                  name);
  }
  qp_error(c, loc, "%s", msg);
}

/* ---------------------------------------------------------------- names and scopes */

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static size_t sym_slot(qp_ctx *c, const char *name) {
  size_t mask = c->sym_cap - 1, i = (size_t)hash_name(name) & mask;
  while (c->syms[i].name && strcmp(c->syms[i].name, name) != 0) i = (i + 1) & mask;
  return i;
}

static void sym_grow(qp_ctx *c) {
  qp_sym *old = c->syms;
  size_t old_cap = c->sym_cap;
  c->sym_cap = old_cap ? old_cap * 2 : 256;
  c->syms = calloc(c->sym_cap, sizeof *c->syms);
  if (!c->syms) abort();
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].name) c->syms[sym_slot(c, old[i].name)] = old[i];
  /* defs hold slots: rebuild them */
  for (int i = 0; i < c->defs.n; i++) {
    size_t *slot = &VEC_AT(&c->defs, size_t, i);
    *slot = sym_slot(c, old[*slot].name);
  }
  free(old);
}

static qp_sym *sym_find(qp_ctx *c, const char *name) {
  if (!c->sym_cap) return NULL;
  qp_sym *s = &c->syms[sym_slot(c, name)];
  return s->name ? s : NULL;
}

static bool define(qp_ctx *c, const char *name, qir_loc loc, qir_value *v) {
  qp_sym *old = sym_find(c, name);
  if (old) {
    qp_error(c, loc, "redefinition of value '%%%s'", name);
    qir_diag_report(c->d, QIR_SEV_NOTE, old->loc, "previous definition is here");
    return false;
  }
  if ((c->sym_count + 1) * 2 > c->sym_cap) sym_grow(c);
  size_t slot = sym_slot(c, name);
  c->syms[slot] = (qp_sym){name, v, loc, true};
  c->sym_count++;
  qp_vec_push(c, &c->defs, &slot, sizeof slot);
  v->name = name;
  return true;
}

qir_value *qp_use(qp_ctx *c, const char *name, qir_loc loc) {
  qp_sym *s = sym_find(c, name);
  if (!s) {
    qp_error(c, loc, "use of undefined value '%%%s'", name);
    return NULL;
  }
  if (!s->alive) {
    qp_error(c, loc, "value '%%%s' is not visible here: it is defined inside a region that has ended", name);
    qir_diag_report(c->d, QIR_SEV_NOTE, s->loc, "'%%%s' is defined here", name);
    return NULL;
  }
  return s->value;
}

bool qp_region_begin(qp_ctx *c) {
  qir_region *r = c->regions.n == 0 ? c->m->body : qir_region_new(c->m, NULL);
  qp_vec_push(c, &c->regions, &r, sizeof r);
  int mark = c->defs.n;
  qp_vec_push(c, &c->scope_marks, &mark, sizeof mark);
  return true;
}

bool qp_region_arg(qp_ctx *c, const char *name, qir_loc loc, const qir_type *t) {
  qir_region *r = VEC_AT(&c->regions, qir_region *, c->regions.n - 1);
  qir_value *v = qir_region_add_arg(c->m, r, *t, NULL);
  return define(c, name, loc, v);
}

bool qp_regions_allowed(qp_ctx *c, const char *op_name, qir_loc loc) {
  qir_opcode code;
  if (!qir_opcode_from_name(op_name, strlen(op_name), &code) || qir_opinfo_get(code)->n_regions != 0) return true;
  qp_error(c, loc, "op '%s' takes no regions (attributes go before the ':' and the types)", op_name);
  return false;
}

qir_region *qp_region_end(qp_ctx *c) {
  int mark = VEC_AT(&c->scope_marks, int, c->scope_marks.n - 1);
  for (int i = mark; i < c->defs.n; i++) c->syms[VEC_AT(&c->defs, size_t, i)].alive = false;
  c->defs.n = mark;
  c->defs.used = (size_t)mark * sizeof(size_t);
  c->scope_marks.n--;
  c->scope_marks.used -= sizeof(int);
  qir_region *r = VEC_AT(&c->regions, qir_region *, c->regions.n - 1);
  c->regions.n--;
  c->regions.used -= sizeof r;
  return r;
}

/* ---------------------------------------------------------------- module, types, numbers */

bool qp_module_name(qp_ctx *c, const char *name, qir_loc loc) {
  c->m->name = name;
  c->m->loc = loc;
  return true;
}

bool qp_weights(qp_ctx *c, const char *path, qir_loc loc) {
  if (!path[0]) {
    qp_error(c, loc, "empty weights path");
    return false;
  }
  c->m->weights_path = path;
  return true;
}

bool qp_signed(qp_ctx *c, uint64_t mag, bool neg, qir_loc loc, int64_t *out) {
  if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX) {
    qp_error(c, loc, "integer literal does not fit in 64 bits");
    return false;
  }
  *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  return true;
}

bool qp_offset(qp_ctx *c, const char *digits, qir_loc loc, int64_t *out) {
  uint64_t v = 0;
  for (const char *p = digits; *p; p++) {
    unsigned dgt = (unsigned)(*p - '0');
    if (v > ((uint64_t)INT64_MAX - dgt) / 10) {
      qp_error(c, loc, "weights offset is too large");
      return false;
    }
    v = v * 10 + dgt;
  }
  *out = (int64_t)v;
  return true;
}

/* ------------------------------------------------------- dimension symbols */

bool qp_dimsym(qp_ctx *c, const char *name, qir_loc loc, int64_t lo, int64_t hi, int64_t step, qir_loc rloc) {
  if (lo < 0 || hi < lo || hi > ((int64_t)1 << 40)) {
    qp_error(c, rloc, "dimension '%s' needs 0 <= MIN <= MAX <= 2^40, not [%lld, %lld]", name, (long long)lo,
             (long long)hi);
    return false;
  }
  if (step < 1 || (hi - lo) % step) {
    qp_error(c, rloc, "dimension '%s': step %lld must be positive and divide MAX - MIN = %lld", name, (long long)step,
             (long long)(hi - lo));
    return false;
  }
  if (qir_dimsym_add(c->m, name, lo, hi, step, loc) < 0) {
    qp_error(c, loc, "dimension '%s' is declared twice", name);
    return false;
  }
  return true;
}

const qir_dim *qp_dim_int(qp_ctx *c, uint64_t v, qir_loc loc) {
  if (v > (uint64_t)INT64_MAX) {
    qp_error(c, loc, "integer literal does not fit in 64 bits");
    return NULL;
  }
  return qir_dim_const(c->m, (int64_t)v);
}

const qir_dim *qp_dim_name(qp_ctx *c, const char *name, qir_loc loc) {
  int k = qir_dimsym_find(c->m, name);
  if (k < 0) {
    qp_error(c, loc, "unknown dimension '%s' (declare it first: dim %s = [MIN, MAX])", name, name);
    return NULL;
  }
  return qir_dim_sym(c->m, k);
}

const qir_dim *qp_dim_call(qp_ctx *c, const char *fn, qir_loc loc, const qir_dim *a, const qir_dim *b) {
  if (strcmp(fn, "min") == 0) return qir_dim_binary(c->m, QIR_DIM_MIN, a, b);
  if (strcmp(fn, "max") == 0) return qir_dim_binary(c->m, QIR_DIM_MAX, a, b);
  qp_error(c, loc, "unknown extent function '%s' (expected min or max)", fn);
  return NULL;
}

const qir_dim *qp_dim_div(qp_ctx *c, const qir_dim *a, const qir_dim *b, qir_loc loc) {
  const qir_dim *q = qir_dim_binary(c->m, QIR_DIM_FLOORDIV, a, b);
  if (!q) qp_error(c, loc, "an extent may be divided only by a positive constant");
  return q;
}

bool qp_dim_of(qp_ctx *c, const qir_dim *e, qir_loc loc, int64_t bound, qp_dim *out) {
  *out = (qp_dim){e->kind == QIR_DIM_CONST ? e->c : e->hi, loc, false, e->kind == QIR_DIM_CONST ? NULL : e};
  if (e->kind == QIR_DIM_CONST) {
    if (bound >= 0) {
      qp_error(c, loc, "a constant extent takes no bound '<=N'");
      return false;
    }
    return true;
  }
  if (e->lo < 0) {
    char buf[256];
    qir_dim_format(e, buf, sizeof buf);
    qp_error(c, loc, "extent '%s' may be negative (its least value is %lld)", buf, (long long)e->lo);
    return false;
  }
  if (bound >= 0 && bound != e->hi) {
    char buf[256];
    qir_dim_format(e, buf, sizeof buf);
    qp_error(c, loc, "extent '%s' has bound %lld over its dimensions' ranges, not %lld", buf, (long long)e->hi,
             (long long)bound);
    return false;
  }
  return true;
}

bool qp_type(qp_ctx *c, const char *dtype, qir_loc dloc, qp_vec *dims, qir_type *out) {
  qir_dtype dt;
  if (!qir_dtype_from_name(dtype, strlen(dtype), &dt)) {
    qp_error(c, dloc, "unknown element type '%s'", dtype);
    return false;
  }
  int rank = dims ? dims->n : 0;
  memset(out, 0, sizeof *out);
  out->dtype = dt;
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) {
    qp_dim *d = &VEC_AT(dims, qp_dim, i);
    if (i >= QIR_MAX_RANK) {
      qp_error(c, d->loc, "too many dimensions (at most %d)", QIR_MAX_RANK);
      return false;
    }
    if (d->v < 0) {
      qp_error(c, d->loc, "negative dimension %lld", (long long)d->v);
      return false;
    }
    if (__builtin_mul_overflow(numel, d->v, &numel) || numel > INT64_MAX / 8) {
      qp_error(c, d->loc, "tensor type has too many elements");
      return false;
    }
    if (d->bound && i != 0) {
      qp_error(c, d->loc, "only axis 0 may have a bounded extent '<=N'");
      return false;
    }
    out->bounded |= d->bound;
    out->dims[i] = d->v;
    out->sym[i] = d->sym;
  }
  out->rank = rank;
  if (out->bounded && qir_type_is_symbolic(out)) {
    qp_error(c, dloc, "a type with a '<=N' extent (a loop's scan output) may not also have symbolic extents");
    return false;
  }
  return true;
}

/* ---------------------------------------------------------------- attributes */

bool qp_attr_add(qp_ctx *c, qp_vec *v, const char *key, qir_loc loc, qir_attr_val val, bool sched) {
  for (int i = 0; i < v->n; i++)
    if (strcmp(VEC_AT(v, qir_attr, i).key, key) == 0) {
      qp_error(c, loc, "duplicate attribute '%s'", key);
      return false;
    }
  qir_attr a = {.key = key, .val = val, .sched = sched, .loc = loc};
  qp_vec_push(c, v, &a, sizeof a);
  return true;
}

qir_attr_val qp_attr_dict(qp_ctx *c, qp_vec *entries) {
  return qir_attr_dict(c->m, entries->n, entries->data);
}

qir_attr_val qp_attr_list(qp_ctx *c, qp_vec *items) { return qir_attr_list(c->m, items->n, items->data); }

bool qp_attr_number(qp_ctx *c, const qp_num *n, qir_attr_val *out) {
  if (n->is_float) {
    *out = qir_attr_float(n->f);
    return true;
  }
  int64_t i;
  if (!qp_signed(c, n->mag, n->neg, n->loc, &i)) return false;
  *out = qir_attr_int(i);
  return true;
}

/* ---------------------------------------------------------------- ops */

static void set_attrs(qir_module *m, qir_op *op, qp_vec *attrs) {
  if (!attrs || !attrs->n) return;
  op->n_attrs = attrs->n;
  op->attrs = qir_alloc(m, sizeof *op->attrs * (size_t)attrs->n);
  memcpy(op->attrs, attrs->data, sizeof *op->attrs * (size_t)attrs->n);
}

static const char *plural(int n, const char *one, const char *many) { return n == 1 ? one : many; }

/* An op of the generic form; sym is the `@name` after the op name (kernel
 * only, where it is required). */
static qir_op *op_generic(qp_ctx *c, const char *name, qir_loc loc, const char *sym, qir_loc sym_loc, qp_vec *operands,
                          qp_vec *attrs, qp_vec *types, qp_vec *regions) {
  qir_opcode code;
  if (!qir_opcode_from_name(name, strlen(name), &code)) {
    qp_error(c, loc, "unknown op '%s'", name);
    return NULL;
  }
  const qir_opinfo *info = qir_opinfo_get(code);
  if (code == QIR_OP_CONST || code == QIR_OP_COMPUTE) {
    qp_error(c, loc, "'%s' is written in its own syntax (see docs/qir.md)", name);
    return NULL;
  }
  if (sym && code != QIR_OP_KERNEL) {
    qp_error(c, sym_loc, "only 'kernel' takes a name ('@%s') after the op name", sym);
    return NULL;
  }
  if (!sym && code == QIR_OP_KERNEL) {
    qp_error(c, loc, "'kernel' needs a name: kernel @NAME %%operands... : types (args) { ops }");
    return NULL;
  }
  int n_operands = operands ? operands->n : 0;
  if (n_operands < info->min_operands || (info->max_operands >= 0 && n_operands > info->max_operands)) {
    if (info->max_operands < 0)
      qp_error(c, loc, "op '%s' takes at least %d %s, got %d", name, info->min_operands,
               plural(info->min_operands, "operand", "operands"), n_operands);
    else if (info->min_operands == info->max_operands)
      qp_error(c, loc, "op '%s' takes %d %s, got %d", name, info->min_operands,
               plural(info->min_operands, "operand", "operands"), n_operands);
    else
      qp_error(c, loc, "op '%s' takes %d to %d operands, got %d", name, info->min_operands, info->max_operands,
               n_operands);
    return NULL;
  }
  int n_types = types ? types->n : 0;
  bool variadic = info->flags & QIR_OPF_VARIADIC_RESULTS;
  if (variadic ? n_types < info->n_results : n_types != info->n_results) {
    qp_error(c, loc, "op '%s' has %s%d %s, got %d result %s", name, variadic ? "at least " : "", info->n_results,
             plural(info->n_results, "result", "results"), n_types, plural(n_types, "type", "types"));
    return NULL;
  }
  int n_regions = regions ? regions->n : 0;
  if (info->n_regions < 0 ? n_regions < 1 : n_regions != info->n_regions) {
    if (info->n_regions < 0) qp_error(c, loc, "op '%s' takes one or more regions, got none", name);
    else
      qp_error(c, loc, "op '%s' takes %d %s, got %d", name, info->n_regions, plural(info->n_regions, "region", "regions"),
               n_regions);
    return NULL;
  }
  qir_op *op = qir_op_new(c->m, code, n_operands, operands ? operands->data : NULL, n_types,
                          types ? types->data : NULL, loc);
  if (info->n_regions < 0) {   /* as many as written */
    op->regions = qir_alloc(c->m, sizeof *op->regions * (size_t)n_regions);
    op->n_regions = n_regions;
  }
  set_attrs(c->m, op, attrs);
  for (int i = 0; i < n_regions; i++) {
    qir_region *r = VEC_AT(regions, qir_region *, i);
    r->parent_op = op;
    op->regions[i] = r;
  }
  op->sym = sym;
  return op;
}

qir_op *qp_op_generic(qp_ctx *c, const char *name, qir_loc loc, qp_vec *operands, qp_vec *attrs, qp_vec *types,
                      qp_vec *regions) {
  return op_generic(c, name, loc, NULL, loc, operands, attrs, types, regions);
}

qir_op *qp_op_symbol(qp_ctx *c, const char *name, qir_loc loc, const char *sym, qir_loc sym_loc, qp_vec *operands,
                     qp_vec *attrs, qp_vec *types, qp_vec *regions) {
  return op_generic(c, name, loc, sym, sym_loc, operands, attrs, types, regions);
}

/* Stores number n as element i of a constant of type dt. */
static bool store_number(qp_ctx *c, const qp_num *n, qir_dtype dt, void *data, int64_t i) {
  const char *dn = qir_dtype_name(dt);
  if (qir_dtype_is_float(dt)) {
    if (n->is_bool) {
      qp_error(c, n->loc, "expected a number for a %s constant", dn);
      return false;
    }
    double v = n->is_float ? n->f : n->neg ? -(double)n->mag : (double)n->mag;
    if (qir_dtype_is_narrow(dt)) { /* no silent saturation: a value the type cannot hold is an error */
      uint8_t code = qir_narrow_from_double(dt, v, false);
      double back = qir_narrow_to_double(dt, code);
      if (isnan(back) != isnan(v) || isinf(back) != isinf(v) || (v < 0 && back > 0)) {
        qp_error(c, n->loc, "value %g is out of range for %s", v, dn);
        return false;
      }
      ((uint8_t *)data)[i] = code;
      return true;
    }
    qir_store_elem(dt, data, i, v);
    return true;
  }
  if (n->is_float) {
    qp_error(c, n->loc, "expected an integer for a %s constant, got a float", dn);
    return false;
  }
  if (dt == QIR_BOOL) {
    if (n->mag > 1 || (n->neg && n->mag)) {
      qp_error(c, n->loc, "expected true, false, 0 or 1 for a bool constant");
      return false;
    }
    ((unsigned char *)data)[i] = (unsigned char)n->mag;
    return true;
  }
  if (n->is_bool) {
    qp_error(c, n->loc, "expected an integer for a %s constant", dn);
    return false;
  }
  int bits = qir_dtype_bits(dt);
  bool ok;
  if (qir_dtype_is_signed_int(dt)) ok = n->neg ? n->mag <= (1ull << (bits - 1)) : n->mag <= (1ull << (bits - 1)) - 1;
  else ok = (!n->neg || n->mag == 0) && (bits == 64 || n->mag <= (1ull << bits) - 1);
  if (!ok) {
    qp_error(c, n->loc, "value %s%llu is out of range for %s", n->neg ? "-" : "", (unsigned long long)n->mag, dn);
    return false;
  }
  uint64_t u = n->neg ? 0 - n->mag : n->mag; /* two's complement, truncated below */
  unsigned char *p = (unsigned char *)data + i * qir_dtype_size(dt);
  for (int b = 0; b < qir_dtype_size(dt); b++) p[b] = (unsigned char)(u >> (8 * b)); /* little-endian; i4/i2 sign-extended */
  return true;
}

static bool one_result_type(qp_ctx *c, const char *what, qir_loc loc, qp_vec *types) {
  if (types->n != 1) {
    qp_error(c, loc, "'%s' has 1 result, got %d result %s", what, types->n, plural(types->n, "type", "types"));
    return false;
  }
  return true;
}

qir_op *qp_op_const(qp_ctx *c, qir_loc loc, int64_t offset, qp_vec *dense, bool splat, qp_vec *attrs,
                    qp_vec *types) {
  if (!one_result_type(c, "const", loc, types)) return NULL;
  qir_type t = VEC_AT(types, qir_type, 0);
  qir_op *op;
  if (offset >= 0) op = qir_const_new_offset(c->m, t, offset, loc);
  else {
    int64_t numel = qir_type_numel(&t);
    size_t es = (size_t)qir_dtype_size(t.dtype);
    if (!splat && dense->n != numel) {
      char ts[256];
      qir_type_format(&t, ts, sizeof ts);
      qp_error(c, loc, "dense constant has %d %s but type %s has %lld", dense->n,
               plural(dense->n, "element", "elements"), ts, (long long)numel);
      return NULL;
    }
    size_t count = splat ? 1 : (size_t)dense->n;
    void *data = qir_alloc(c->m, count * es);
    for (size_t i = 0; i < count; i++)
      if (!store_number(c, &VEC_AT(dense, qp_num, i), t.dtype, data, (int64_t)i)) return NULL;
    op = qir_const_new_data(c->m, t, data, count * es, loc);
    op->cst->splat = splat;
  }
  set_attrs(c->m, op, attrs);
  return op;
}

bool qp_op_finish(qp_ctx *c, qp_vec *names, qir_op *op) {
  int n = names ? names->n : 0;
  if (n != op->n_results) {
    qp_error(c, op->loc, "%d result %s for %d result %s", n, plural(n, "name", "names"), op->n_results,
             plural(op->n_results, "type", "types"));
    return false;
  }
  for (int i = 0; i < n; i++) {
    qp_name *nm = &VEC_AT(names, qp_name, i);
    if (!define(c, nm->name, nm->loc, op->results[i])) return false;
  }
  qir_op_append(VEC_AT(&c->regions, qir_region *, c->regions.n - 1), op);
  return true;
}

/* ---------------------------------------------------------------- compute */

void qp_compute_begin(qp_ctx *c) { memset(&c->comp, 0, sizeof c->comp); }

bool qp_compute_axis(qp_ctx *c, const char *name, qir_loc loc, const qp_dim *extent) {
  for (int i = 0; i < c->comp.names.n; i++)
    if (strcmp(VEC_AT(&c->comp.names, const char *, i), name) == 0) {
      qp_error(c, loc, "duplicate loop variable '%s'", name);
      return false;
    }
  if (extent->bound) {
    qp_error(c, extent->loc, "a loop extent may not be '<=N' (write the symbolic extent it bounds)");
    return false;
  }
  if (extent->v < 0) {
    qp_error(c, extent->loc, "negative loop extent %lld", (long long)extent->v);
    return false;
  }
  int64_t e = extent->v;
  qp_vec_push(c, &c->comp.names, &name, sizeof name);
  qp_vec_push(c, &c->comp.extents, &e, sizeof e);
  qp_vec_push(c, &c->comp.dims, &extent->sym, sizeof extent->sym);
  if (!c->comp.in_reduce) c->comp.n_out++;
  return true;
}

void qp_compute_reduce_axes(qp_ctx *c) { c->comp.in_reduce = true; }

bool qp_compute_reduce_kind(qp_ctx *c, const char *name, qir_loc loc) {
  static const qir_reduce_kind kinds[] = {QIR_REDUCE_SUM, QIR_REDUCE_MAX, QIR_REDUCE_MIN, QIR_REDUCE_PROD};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(qir_reduce_name(kinds[i]), name) == 0) {
      c->comp.reduce = kinds[i];
      c->comp.reduce_loc = loc;
      if (c->comp.names.n == c->comp.n_out) {
        qp_error(c, loc, "'reduce' needs at least one reduction axis");
        return false;
      }
      return true;
    }
  qp_error(c, loc, "unknown reduction '%s' (expected sum, max, min or prod)", name);
  return false;
}

qir_op *qp_op_compute(qp_ctx *c, qir_loc loc, qp_ex body, qp_vec *attrs, qp_vec *types) {
  if (!one_result_type(c, "compute", loc, types)) return NULL;
  int n_red = c->comp.names.n - c->comp.n_out;
  qir_compute *comp = qir_compute_new(c->m, c->comp.n_out, n_red);
  for (int i = 0; i < c->comp.names.n; i++) {
    comp->axis_names[i] = VEC_AT(&c->comp.names, const char *, i);
    comp->axis_extents[i] = VEC_AT(&c->comp.extents, int64_t, i);
    comp->axis_dims[i] = VEC_AT(&c->comp.dims, const qir_dim *, i);
  }
  comp->reduce = c->comp.reduce;
  comp->body = body.e;
  qir_op *op = qir_op_new(c->m, QIR_OP_COMPUTE, c->comp.operands.n, c->comp.operands.data, 1, types->data, loc);
  op->comp = comp;
  set_attrs(c->m, op, attrs);
  return op;
}

/* ---------------------------------------------------------------- expressions */

static bool ex_depth(qp_ctx *c, qir_loc loc, int depth) {
  if (depth > QP_MAX_DEPTH) {
    qp_error(c, loc, "expression nested deeper than %d levels", QP_MAX_DEPTH);
    return false;
  }
  return true;
}

bool qp_ex_check(qp_ctx *c, qp_ex a) {
  if (a.big) {
    qp_error(c, a.e->loc, "integer literal does not fit in 64 bits");
    return false;
  }
  return true;
}

bool qp_ex_int(qp_ctx *c, uint64_t mag, qir_loc loc, qp_ex *out) {
  if (mag > (uint64_t)INT64_MAX + 1) {
    qp_error(c, loc, "integer literal does not fit in 64 bits");
    return false;
  }
  out->e = qir_expr_int(c->m, mag > (uint64_t)INT64_MAX ? INT64_MIN : (int64_t)mag);
  out->e->loc = loc;
  out->depth = 1;
  out->big = mag > (uint64_t)INT64_MAX;
  return true;
}

bool qp_ex_float(qp_ctx *c, double f, qir_loc loc, qp_ex *out) {
  out->e = qir_expr_float(c->m, f);
  out->e->loc = loc;
  out->depth = 1;
  out->big = false;
  return true;
}

bool qp_ex_var(qp_ctx *c, const char *name, qir_loc loc, qp_ex *out) {
  for (int i = 0; i < c->comp.names.n; i++)
    if (strcmp(VEC_AT(&c->comp.names, const char *, i), name) == 0) {
      out->e = qir_expr_var(c->m, i);
      out->e->loc = loc;
      out->depth = 1;
      out->big = false;
      return true;
    }
  qp_error(c, loc, "unknown loop variable '%s'", name);
  return false;
}

static int max_depth(qp_vec *args) {
  int d = 0;
  for (int i = 0; args && i < args->n; i++)
    if (VEC_AT(args, qp_ex, i).depth > d) d = VEC_AT(args, qp_ex, i).depth;
  return d;
}

bool qp_ex_access(qp_ctx *c, const char *name, qir_loc loc, qp_vec *idx, qp_ex *out) {
  qir_value *v = qp_use(c, name, loc);
  if (!v) return false;
  int k = 0;
  while (k < c->comp.operands.n && VEC_AT(&c->comp.operands, qir_value *, k) != v) k++;
  if (k == c->comp.operands.n) qp_vec_push(c, &c->comp.operands, &v, sizeof v);
  int n = idx->n;
  qir_expr **args = qir_alloc(c->m, sizeof *args * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) args[i] = VEC_AT(idx, qp_ex, i).e;
  out->e = qir_expr_access(c->m, k, n, args);
  out->e->loc = loc;
  out->depth = 1 + max_depth(idx);
  out->big = false;
  return ex_depth(c, loc, out->depth);
}

bool qp_ex_call(qp_ctx *c, const char *name, qir_loc loc, qp_vec *args, qp_ex *out) {
  int n = args->n;
  qp_ex *a = args->data;
  qir_dtype dt;
  int want;
  if (strcmp(name, "select") == 0) want = 3;
  else if (qir_dtype_from_name(name, strlen(name), &dt)) want = 1;
  else {
    int fn = 0;
    while (fn < QIR_FN_COUNT && strcmp(qir_expr_fn_spelling((qir_expr_fn)fn), name) != 0) fn++;
    if (fn == QIR_FN_COUNT) {
      qp_error(c, loc, "unknown function '%s'", name);
      return false;
    }
    want = qir_expr_fn_is_binary((qir_expr_fn)fn) ? 2 : 1;
    if (n != want) goto bad_count;
    if (want == 1) return qp_ex_unary(c, (qir_expr_fn)fn, loc, a[0], out);
    return qp_ex_binary(c, (qir_expr_fn)fn, loc, a[0], a[1], out);
  }
  if (n != want) goto bad_count;
  out->e = want == 3 ? qir_expr_select(c->m, a[0].e, a[1].e, a[2].e) : qir_expr_cast(c->m, dt, a[0].e);
  out->e->loc = loc;
  out->depth = 1 + max_depth(args);
  out->big = false;
  return ex_depth(c, loc, out->depth);
bad_count:
  qp_error(c, loc, "'%s' takes %d %s, got %d", name, want, plural(want, "argument", "arguments"), n);
  return false;
}

/* Unary minus folds into literals, so `-1` is the literal -1 (the printer
 * relies on this to write negative literals back). */
bool qp_ex_unary(qp_ctx *c, qir_expr_fn fn, qir_loc loc, qp_ex a, qp_ex *out) {
  out->big = false;
  if (fn == QIR_FN_NEG && a.big) {
    *out = a;
    out->big = false;
    out->e->loc = loc;
    return true;
  }
  if (!qp_ex_check(c, a)) return false;
  if (fn == QIR_FN_NEG && a.e->kind == QIR_EX_INT && a.e->ival != INT64_MIN) {
    out->e = qir_expr_int(c->m, -a.e->ival);
    out->depth = 1;
  } else if (fn == QIR_FN_NEG && a.e->kind == QIR_EX_FLOAT) {
    out->e = qir_expr_float(c->m, -a.e->fval);
    out->depth = 1;
  } else {
    out->e = qir_expr_unary(c->m, fn, a.e);
    out->depth = a.depth + 1;
  }
  out->e->loc = loc;
  return ex_depth(c, loc, out->depth);
}

bool qp_ex_binary(qp_ctx *c, qir_expr_fn fn, qir_loc loc, qp_ex a, qp_ex b, qp_ex *out) {
  if (!qp_ex_check(c, a) || !qp_ex_check(c, b)) return false;
  out->e = qir_expr_binary(c->m, fn, a.e, b.e);
  out->e->loc = loc;
  out->depth = 1 + (a.depth > b.depth ? a.depth : b.depth);
  out->big = false;
  return ex_depth(c, loc, out->depth);
}

/* ---------------------------------------------------------------- entry points */

int qir_yyparse(yyscan_t scanner, qp_ctx *ctx);

qir_module *qir_parse(const char *text, size_t len, const char *file, const char *base_dir, qir_diag *d) {
  if (!file) file = "<input>";
  d->source = text;
  d->source_len = len;
  d->file = file;
  qir_module *m = qir_module_new(NULL);
  if (base_dir) m->base_dir = qir_strdup(m, base_dir);
  qp_ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.d = d;
  c.file = qir_strdup(m, file);
  c.src = text;
  c.src_len = len;
  c.line = c.col = 1;
  int errors_before = d->n_errors;
  if (len > INT_MAX - 2) {
    qir_loc loc = {c.file, 0, 0};
    qp_error(&c, loc, "file is too large");
  } else {
    yyscan_t scanner;
    if (qir_yylex_init_extra(&c, &scanner) != 0) abort();
    YY_BUFFER_STATE buf = qir_yy_scan_bytes(text, (int)len, scanner);
    int rc = qir_yyparse(scanner, &c);
    qir_yy_delete_buffer(buf, scanner);
    qir_yylex_destroy(scanner);
    if (rc != 0 && !c.failed) {
      qir_loc loc = {c.file, c.line, c.col};
      qp_error(&c, loc, "syntax error");
    }
  }
  free(c.syms);
  if (c.failed || d->n_errors > errors_before) {
    qir_module_free(m);
    return NULL;
  }
  return m;
}

qir_module *qir_parse_file(const char *path, qir_diag *d) {
  bool is_stdin = strcmp(path, "-") == 0;
  const char *name = is_stdin ? "<stdin>" : path;
  qir_loc noloc = {name, 0, 0};
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f) {
    qir_error(d, noloc, "cannot open file: %s", strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  if (!buf) abort();
  for (;;) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n < cap) break;
    cap *= 2;
    char *nb = realloc(buf, cap);
    if (!nb) abort();
    buf = nb;
  }
  int err = ferror(f) ? errno : 0;
  if (!is_stdin) fclose(f);
  if (err) {
    free(buf);
    qir_error(d, noloc, "cannot read file: %s", strerror(err));
    return NULL;
  }
  char *dir = NULL;
  if (!is_stdin) {
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    dir = malloc(dl + 1);
    if (!dir) abort();
    memcpy(dir, slash ? path : ".", dl);
    dir[dl] = 0;
  }
  qir_module *m = qir_parse(buf, n, name, dir, d);
  free(dir);
  if (m) {
    /* Keep the text for carets in later diagnostics, as long as the module lives. */
    d->source = qir_strndup(m, buf, n);
  } else {
    d->source = NULL;
    d->source_len = 0;
  }
  free(buf);
  return m;
}
