/* print.c: the canonical text form.
 *
 * print(parse(print(m))) == print(m): attributes are sorted by key (plain dict
 * first, then schedule keys), numbers are written in the shortest form that
 * reads back to the same bits, constants whose elements all print alike become
 * splats, and value names are made valid and unique (unnamed values get fresh
 * numbers that collide with no existing name).  Two spaces of indent per
 * region level. */
#include "qir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- a set of strings */

typedef struct {
  char **keys;
  size_t cap, count;
} strset;

static uint64_t str_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static size_t strset_slot(const strset *s, const char *k) {
  size_t mask = s->cap - 1, i = (size_t)str_hash(k) & mask;
  while (s->keys[i] && strcmp(s->keys[i], k) != 0) i = (i + 1) & mask;
  return i;
}

static bool strset_has(const strset *s, const char *k) { return s->cap && s->keys[strset_slot(s, k)]; }

/* Adds a copy of k (owned by the set). */
static void strset_add(strset *s, const char *k) {
  if ((s->count + 1) * 2 > s->cap) {
    strset old = *s;
    s->cap = old.cap ? old.cap * 2 : 256;
    s->keys = calloc(s->cap, sizeof *s->keys);
    if (!s->keys) abort();
    for (size_t i = 0; i < old.cap; i++)
      if (old.keys[i]) s->keys[strset_slot(s, old.keys[i])] = old.keys[i];
    free(old.keys);
  }
  size_t i = strset_slot(s, k);
  if (s->keys[i]) return;
  s->keys[i] = strdup(k);
  if (!s->keys[i]) abort();
  s->count++;
}

static void strset_free(strset *s) {
  for (size_t i = 0; i < s->cap; i++) free(s->keys[i]);
  free(s->keys);
}

/* ---------------------------------------------------------------- value names */

typedef struct {
  FILE *out;
  qir_module *m;
  char **names;                 /* by value id (malloc'd) */
  int n_ids;
  strset reserved;              /* every name the module already uses */
  strset taken;                 /* names given out */
  long next_number;
} printer;

static bool name_char(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
         ch == '.' || ch == '$';
}

/* The name made of valid characters only (others become '_'); NULL if none. */
static char *sanitize(const char *name) {
  if (!name || !name[0]) return NULL;
  char *s = strdup(name);
  if (!s) abort();
  for (char *p = s; *p; p++)
    if (!name_char((unsigned char)*p)) *p = '_';
  return s;
}

static char *fresh_name(printer *p, const char *base) {
  char buf[64];
  char *s = NULL;
  if (base) {
    for (long k = 1;; k++) {
      free(s);
      size_t n = strlen(base) + 24;
      s = malloc(n);
      if (!s) abort();
      snprintf(s, n, "%s.%ld", base, k);
      if (!strset_has(&p->reserved, s) && !strset_has(&p->taken, s)) break;
    }
  } else {
    do snprintf(buf, sizeof buf, "%ld", p->next_number++);
    while (strset_has(&p->reserved, buf) || strset_has(&p->taken, buf));
    s = strdup(buf);
    if (!s) abort();
  }
  strset_add(&p->taken, s);
  return s;
}

static void assign_name(printer *p, qir_value *v) {
  if (!v || v->id < 0 || v->id >= p->n_ids || p->names[v->id]) return;
  char *s = sanitize(v->name);
  if (s && !strset_has(&p->taken, s)) {
    strset_add(&p->taken, s);
    p->names[v->id] = s;
  } else {
    p->names[v->id] = fresh_name(p, s);
    free(s);
  }
}

static bool reserve_visit(qir_op *op, void *ctx) {
  printer *p = ctx;
  for (int i = 0; i < op->n_results; i++) {
    char *s = sanitize(op->results[i]->name);
    if (s) strset_add(&p->reserved, s);
    free(s);
  }
  for (int r = 0; r < op->n_regions; r++)
    for (int i = 0; i < op->regions[r]->n_args; i++) {
      char *s = sanitize(op->regions[r]->args[i]->name);
      if (s) strset_add(&p->reserved, s);
      free(s);
    }
  return true;
}

/* Names in print order: an op's results, then its regions' arguments and ops. */
static bool assign_visit(qir_op *op, void *ctx) {
  printer *p = ctx;
  for (int i = 0; i < op->n_results; i++) assign_name(p, op->results[i]);
  for (int r = 0; r < op->n_regions; r++)
    for (int i = 0; i < op->regions[r]->n_args; i++) assign_name(p, op->regions[r]->args[i]);
  return true;
}

static const char *value_name(printer *p, qir_value *v) {
  if (!v) return "<null>";
  if (v->id < 0 || v->id >= p->n_ids) return "<bad>";
  assign_name(p, v); /* a value defined nowhere in the module still gets a name */
  return p->names[v->id];
}

/* ---------------------------------------------------------------- numbers and strings */

/* The bits `v` has once stored as dtype dt, the way the parser stores it. */
static uint64_t stored_bits(double v, qir_dtype dt) {
  uint64_t bits = 0;
  qir_store_elem(dt, &bits, 0, v);
  return bits;
}

/* Shortest "%.*g" that reads back (through strtod and a store as dt, as the
 * parser does) to the same bits. */
static void fmt_real(char *buf, size_t n, double v, qir_dtype dt) {
  if (isnan(v)) {
    snprintf(buf, n, "%s", signbit(v) ? "-nan" : "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, n, "%s", v < 0 ? "-inf" : "inf");
    return;
  }
  /* %.15g / %.6g already give the shortest digits when there are that few;
   * a little more precision may still give a shorter text (65504 rather than
   * 6.55e+04), so look two steps further and keep the shortest. */
  int prec = dt == QIR_F64 ? 15 : dt == QIR_F32 ? 6 : 1, last = 17;
  if (qir_dtype_is_narrow(dt)) { /* few values, each printed exactly (57344, not 6e+04) */
    if (v == floor(v) && fabs(v) < 1e15) {
      snprintf(buf, n, "%.0f", v);
      return;
    }
    for (prec = 1; prec < 17; prec++) {
      snprintf(buf, n, "%.*g", prec, v);
      if (strtod(buf, NULL) == v) return;
    }
    snprintf(buf, n, "%.17g", v);
    return;
  }
  uint64_t want = stored_bits(v, dt);
  char best[64] = "";
  for (; prec <= last; prec++) {
    char cand[64];
    snprintf(cand, sizeof cand, "%.*g", prec, v);
    if (stored_bits(strtod(cand, NULL), dt) != want) continue;
    if (!best[0]) last = prec + 2 < 17 ? prec + 2 : 17;
    if (!best[0] || strlen(cand) < strlen(best)) memcpy(best, cand, sizeof best);
  }
  snprintf(buf, n, "%s", best);
}

/* A float that must read back as a float, not an integer. */
static void fmt_float_literal(char *buf, size_t n, double v) {
  fmt_real(buf, n, v, QIR_F64);
  if (!strpbrk(buf, ".eni")) strncat(buf, ".0", n - strlen(buf) - 1);
}

static void print_string(FILE *out, const char *s) {
  fputc('"', out);
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned char ch = *p;
    if (ch == '"' || ch == '\\') {
      fputc('\\', out);
      fputc(ch, out);
      p++;
    } else if (ch == '\n') {
      fputs("\\n", out);
      p++;
    } else if (ch == '\t') {
      fputs("\\t", out);
      p++;
    } else if (ch < 32 || ch == 127) {
      fprintf(out, "\\x%02X", ch);
      p++;
    } else if (ch < 128) {
      fputc(ch, out);
      p++;
    } else {
      /* Valid UTF-8 goes out as is, anything else escaped. */
      size_t len = ch >= 0xC2 && ch <= 0xDF ? 2 : ch >= 0xE0 && ch <= 0xEF ? 3 : ch >= 0xF0 && ch <= 0xF4 ? 4 : 0;
      unsigned lo = ch == 0xE0 ? 0xA0 : ch == 0xF0 ? 0x90 : 0x80, hi = ch == 0xED ? 0x9F : ch == 0xF4 ? 0x8F : 0xBF;
      bool ok = len > 0 && p[1] >= lo && p[1] <= hi;
      for (size_t i = 2; ok && i < len; i++) ok = p[i] >= 0x80 && p[i] <= 0xBF;
      if (ok) {
        fwrite(p, 1, len, out);
        p += len;
      } else {
        fprintf(out, "\\x%02X", ch);
        p++;
      }
    }
  }
  fputc('"', out);
}

static bool ident_chars(const char *s) {
  if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
  for (const char *p = s; *p; p++)
    if (!(name_char((unsigned char)*p) && *p != '.' && *p != '$')) return false;
  return true;
}

/* Scans as an identifier (inf and nan scan as floats). */
static bool is_ident(const char *s) { return ident_chars(s) && strcmp(s, "inf") != 0 && strcmp(s, "nan") != 0; }

/* ---------------------------------------------------------------- attributes */

static int attr_cmp(const void *a, const void *b) {
  const qir_attr *x = *(const qir_attr *const *)a, *y = *(const qir_attr *const *)b;
  return strcmp(x->key ? x->key : "", y->key ? y->key : "");
}

static void print_key(FILE *out, const char *key) {
  if (is_ident(key)) fputs(key, out);
  else print_string(out, key ? key : "");
}

static void print_attr_val(FILE *out, const qir_attr_val *v);

static void print_dict(FILE *out, const qir_attr *entries, int n) {
  const qir_attr **sorted = malloc(sizeof *sorted * (size_t)(n ? n : 1));
  if (!sorted) abort();
  for (int i = 0; i < n; i++) sorted[i] = &entries[i];
  qsort(sorted, (size_t)n, sizeof *sorted, attr_cmp);
  fputc('{', out);
  for (int i = 0; i < n; i++) {
    if (i) fputs(", ", out);
    print_key(out, sorted[i]->key);
    fputs(" = ", out);
    print_attr_val(out, &sorted[i]->val);
  }
  fputc('}', out);
  free(sorted);
}

static void print_attr_val(FILE *out, const qir_attr_val *v) {
  char buf[64];
  switch (v->kind) {
  case QIR_ATTR_INT: fprintf(out, "%lld", (long long)v->i); break;
  case QIR_ATTR_FLOAT:
    fmt_float_literal(buf, sizeof buf, v->f);
    fputs(buf, out);
    break;
  case QIR_ATTR_STRING: print_string(out, v->s ? v->s : ""); break;
  case QIR_ATTR_WORD:
    if (is_ident(v->s)) fputs(v->s, out);
    else print_string(out, v->s ? v->s : "");
    break;
  case QIR_ATTR_LIST:
    fputc('[', out);
    for (int i = 0; i < v->n; i++) {
      if (i) fputs(", ", out);
      print_attr_val(out, &v->items[i]);
    }
    fputc(']', out);
    break;
  case QIR_ATTR_DICT: print_dict(out, v->entries, v->n); break;
  }
}

/* An rprogram's waves, one per line (level: the op's indent). */
static void print_waves(FILE *out, const qir_attr_val *v, int level) {
  fputc('[', out);
  for (int i = 0; i < v->n; i++) {
    fputs(i ? ",\n" : "\n", out);
    for (int k = 0; k < level + 2; k++) fputs("  ", out);
    print_attr_val(out, &v->items[i]);
  }
  fputc(']', out);
}

static void print_attrs(FILE *out, const qir_op *op, int level) {
  int n = op->n_attrs, n_plain = 0;
  if (!n) return;
  const qir_attr **sorted = malloc(sizeof *sorted * (size_t)n);
  if (!sorted) abort();
  for (int i = 0; i < n; i++) sorted[i] = &op->attrs[i];
  qsort(sorted, (size_t)n, sizeof *sorted, attr_cmp);
  for (int i = 0; i < n; i++) n_plain += !sorted[i]->sched;
  if (n_plain) {
    fputs(" {", out);
    for (int i = 0, k = 0; i < n; i++) {
      if (sorted[i]->sched) continue;
      if (k++) fputs(", ", out);
      print_key(out, sorted[i]->key);
      fputs(" = ", out);
      if (op->code == QIR_OP_RPROGRAM && !strcmp(sorted[i]->key, "waves") && sorted[i]->val.kind == QIR_ATTR_LIST)
        print_waves(out, &sorted[i]->val, level);
      else
        print_attr_val(out, &sorted[i]->val);
    }
    fputc('}', out);
  }
  for (int i = 0; i < n; i++) {
    if (!sorted[i]->sched) continue;
    fputs(" #", out);
    /* A schedule key must be an identifier; anything else is made one. */
    const char *k = sorted[i]->key ? sorted[i]->key : "";
    if (ident_chars(k)) fputs(k, out);
    else {
      fputc('_', out);
      for (const char *p = k; *p; p++) fputc(name_char((unsigned char)*p) && *p != '.' && *p != '$' ? *p : '_', out);
    }
    if (sorted[i]->val.kind == QIR_ATTR_DICT) print_dict(out, sorted[i]->val.entries, sorted[i]->val.n);
    else {
      fputc('=', out);
      print_attr_val(out, &sorted[i]->val);
    }
  }
  free(sorted);
}

/* ---------------------------------------------------------------- constants */

static void fmt_elem(char *buf, size_t n, qir_dtype dt, const unsigned char *p) {
  switch (dt) {
  case QIR_F64: { double v; memcpy(&v, p, 8); fmt_real(buf, n, v, dt); break; }
  case QIR_F32: { float v; memcpy(&v, p, 4); fmt_real(buf, n, v, dt); break; }
  case QIR_F16: { uint16_t v; memcpy(&v, p, 2); fmt_real(buf, n, qir_f16_to_f32(v), dt); break; }
  case QIR_BF16: { uint16_t v; memcpy(&v, p, 2); fmt_real(buf, n, qir_bf16_to_f32(v), dt); break; }
  case QIR_I64: { int64_t v; memcpy(&v, p, 8); snprintf(buf, n, "%lld", (long long)v); break; }
  case QIR_I32: { int32_t v; memcpy(&v, p, 4); snprintf(buf, n, "%d", v); break; }
  case QIR_I16: { int16_t v; memcpy(&v, p, 2); snprintf(buf, n, "%d", v); break; }
  case QIR_I8: { int8_t v; memcpy(&v, p, 1); snprintf(buf, n, "%d", v); break; }
  case QIR_U64: { uint64_t v; memcpy(&v, p, 8); snprintf(buf, n, "%llu", (unsigned long long)v); break; }
  case QIR_U32: { uint32_t v; memcpy(&v, p, 4); snprintf(buf, n, "%u", v); break; }
  case QIR_U16: { uint16_t v; memcpy(&v, p, 2); snprintf(buf, n, "%u", v); break; }
  case QIR_U8: snprintf(buf, n, "%u", p[0]); break;
  case QIR_BOOL: snprintf(buf, n, "%s", p[0] ? "true" : "false"); break;
  default: /* the narrow types */
    if (qir_dtype_is_float(dt)) fmt_real(buf, n, qir_narrow_to_double(dt, p[0]), dt);
    else snprintf(buf, n, "%d", (int)qir_narrow_to_double(dt, p[0]));
    break;
  }
}

static void print_const(FILE *out, const qir_op *op) {
  const qir_const *c = op->cst;
  if (!c) {
    fputs(" dense<[]>", out);
    return;
  }
  if (c->offset >= 0) {
    fprintf(out, " @%lld", (long long)c->offset);
    return;
  }
  qir_dtype dt = op->n_results ? op->results[0]->type.dtype : QIR_F32;
  int64_t numel = op->n_results ? qir_type_numel(&op->results[0]->type) : 0;
  size_t es = (size_t)qir_dtype_size(dt);
  const unsigned char *data = c->data;
  int64_t have = data && es ? (int64_t)(c->nbytes / es) : 0;
  char first[64], buf[64];
  if (numel > 0 && have > 0) {
    fmt_elem(first, sizeof first, dt, data);
    bool splat = c->splat || have >= numel;
    for (int64_t i = 1; splat && !c->splat && i < numel; i++) {
      fmt_elem(buf, sizeof buf, dt, data + (size_t)i * es);
      splat = strcmp(buf, first) == 0;
    }
    if (splat) {
      fprintf(out, " dense<%s>", first);
      return;
    }
  }
  /* The list form; a short payload (a broken op) prints short and fails to re-parse. */
  if (c->splat) have = 0;
  fputs(" dense<[", out);
  for (int64_t i = 0; i < numel && i < have; i++) {
    fmt_elem(buf, sizeof buf, dt, data + (size_t)i * es);
    if (i) fputs(", ", out);
    fputs(buf, out);
  }
  fputs("]>", out);
}

/* ---------------------------------------------------------------- expressions */

enum { PREC_OR = 1, PREC_AND, PREC_EQ, PREC_REL, PREC_ADD, PREC_MUL, PREC_UNARY, PREC_PRIMARY };

static int infix_prec(qir_expr_fn fn) {
  switch (fn) {
  case QIR_FN_OR: return PREC_OR;
  case QIR_FN_AND: return PREC_AND;
  case QIR_FN_EQ: case QIR_FN_NE: return PREC_EQ;
  case QIR_FN_LT: case QIR_FN_LE: case QIR_FN_GT: case QIR_FN_GE: return PREC_REL;
  case QIR_FN_ADD: case QIR_FN_SUB: return PREC_ADD;
  case QIR_FN_MUL: case QIR_FN_DIV: case QIR_FN_MOD: return PREC_MUL;
  default: return 0; /* a call */
  }
}

/* The parser folds unary minus into literals; the printer writes such trees as
 * the literal it would read back.  Returns false if e is no literal. */
static bool literal_of(const qir_expr *e, bool *is_int, int64_t *iv, double *fv) {
  if (!e) return false;
  if (e->kind == QIR_EX_INT) {
    *is_int = true;
    *iv = e->ival;
    return true;
  }
  if (e->kind == QIR_EX_FLOAT) {
    *is_int = false;
    *fv = e->fval;
    return true;
  }
  if (e->kind == QIR_EX_UNARY && e->fn == QIR_FN_NEG && e->n_args == 1 && literal_of(e->args[0], is_int, iv, fv)) {
    if (*is_int) {
      if (*iv == INT64_MIN) return false;
      *iv = -*iv;
    } else *fv = -*fv;
    return true;
  }
  return false;
}

static int expr_prec(const qir_expr *e) {
  bool is_int;
  int64_t iv;
  double fv;
  if (literal_of(e, &is_int, &iv, &fv)) return PREC_PRIMARY;
  if (e->kind == QIR_EX_BINARY && infix_prec(e->fn)) return infix_prec(e->fn);
  if (e->kind == QIR_EX_UNARY && (e->fn == QIR_FN_NEG || e->fn == QIR_FN_NOT)) return PREC_UNARY;
  return PREC_PRIMARY;
}

static void print_expr(printer *p, const qir_op *op, const qir_expr *e);

static void print_operand(printer *p, const qir_op *op, const qir_expr *e, bool parens) {
  if (parens) fputc('(', p->out);
  print_expr(p, op, e);
  if (parens) fputc(')', p->out);
}

static void print_args(printer *p, const qir_op *op, const qir_expr *e) {
  for (int i = 0; i < e->n_args; i++) {
    if (i) fputs(", ", p->out);
    print_expr(p, op, e->args[i]);
  }
}

static void print_expr(printer *p, const qir_op *op, const qir_expr *e) {
  FILE *out = p->out;
  char buf[64];
  bool is_int;
  int64_t iv;
  double fv;
  if (!e) {
    fputs("<null>", out);
    return;
  }
  if (literal_of(e, &is_int, &iv, &fv)) {
    if (is_int) fprintf(out, "%lld", (long long)iv);
    else {
      fmt_float_literal(buf, sizeof buf, fv);
      fputs(buf, out);
    }
    return;
  }
  const qir_compute *c = op->comp;
  switch (e->kind) {
  case QIR_EX_VAR:
    if (c && e->var >= 0 && e->var < c->n_axes + c->n_red && c->axis_names[e->var]) fputs(c->axis_names[e->var], out);
    else fprintf(out, "<var%d>", e->var);
    break;
  case QIR_EX_ACCESS:
    fputc('%', out);
    fputs(e->operand >= 0 && e->operand < op->n_operands ? value_name(p, op->operands[e->operand]) : "<bad>", out);
    fputc('[', out);
    print_args(p, op, e);
    fputc(']', out);
    break;
  case QIR_EX_UNARY:
    if ((e->fn == QIR_FN_NEG || e->fn == QIR_FN_NOT) && e->n_args == 1) {
      fputc(e->fn == QIR_FN_NEG ? '-' : '!', out);
      print_operand(p, op, e->args[0], expr_prec(e->args[0]) < PREC_UNARY);
    } else {
      fprintf(out, "%s(", qir_expr_fn_spelling(e->fn));
      print_args(p, op, e);
      fputc(')', out);
    }
    break;
  case QIR_EX_BINARY: {
    int prec = infix_prec(e->fn);
    if (prec && e->n_args == 2) {
      print_operand(p, op, e->args[0], expr_prec(e->args[0]) < prec);
      fprintf(out, " %s ", qir_expr_fn_spelling(e->fn));
      print_operand(p, op, e->args[1], expr_prec(e->args[1]) <= prec);
    } else {
      fprintf(out, "%s(", qir_expr_fn_spelling(e->fn));
      print_args(p, op, e);
      fputc(')', out);
    }
    break;
  }
  case QIR_EX_SELECT:
    fputs("select(", out);
    print_args(p, op, e);
    fputc(')', out);
    break;
  case QIR_EX_CAST:
    fprintf(out, "%s(", qir_dtype_name(e->cast_to));
    print_args(p, op, e);
    fputc(')', out);
    break;
  default: fputs("<bad>", out); break;
  }
}

static void print_axes(FILE *out, const qir_compute *c, int from, int to) {
  fputc('[', out);
  for (int i = from; i < to; i++) {
    if (i > from) fputs(", ", out);
    fprintf(out, "%s:", c->axis_names[i] ? c->axis_names[i] : "<axis>");
    if (c->axis_dims && c->axis_dims[i]) {
      char buf[1024];
      qir_dim_format(c->axis_dims[i], buf, sizeof buf);
      fprintf(out, "%s<=%lld", buf, (long long)c->axis_extents[i]);
    } else fprintf(out, "%lld", (long long)c->axis_extents[i]);
  }
  fputc(']', out);
}

static void print_compute(printer *p, const qir_op *op) {
  const qir_compute *c = op->comp;
  if (!c) {
    fputs(" [] (<null>)", p->out);
    return;
  }
  fputc(' ', p->out);
  print_axes(p->out, c, 0, c->n_axes);
  if (c->n_red > 0 || c->reduce != QIR_REDUCE_NONE) {
    fputs(" reduce ", p->out);
    print_axes(p->out, c, c->n_axes, c->n_axes + c->n_red);
    const char *r = qir_reduce_name(c->reduce);
    fprintf(p->out, " %s(", r ? r : "<none>");
  } else fputs(" (", p->out);
  print_expr(p, op, c->body);
  fputc(')', p->out);
}

/* ---------------------------------------------------------------- ops and regions */

static void print_type(FILE *out, const qir_type *t) {
  char buf[2048];
  qir_type_format(t, buf, sizeof buf);
  fputs(buf, out);
}

static void indent(FILE *out, int level) {
  for (int i = 0; i < level; i++) fputs("  ", out);
}

static void print_region_ops(printer *p, const qir_region *r, int level);

static void print_op(printer *p, const qir_op *op, int level) {
  FILE *out = p->out;
  const qir_opinfo *info = qir_opinfo_get(op->code);
  indent(out, level);
  for (int i = 0; i < op->n_results; i++) fprintf(out, "%s%%%s", i ? ", " : "", value_name(p, op->results[i]));
  if (op->n_results) fputs(" = ", out);
  fputs(info ? info->name : "<unknown>", out);
  if (op->code == QIR_OP_CONST) print_const(out, op);
  else if (op->code == QIR_OP_COMPUTE) print_compute(p, op);
  else {
    if (op->sym) {
      char *sym = sanitize(op->sym);
      fprintf(out, " @%s", sym ? sym : "kernel");
      free(sym);
    }
    for (int i = 0; i < op->n_operands; i++) fprintf(out, "%s%%%s", i ? ", " : " ", value_name(p, op->operands[i]));
  }
  print_attrs(out, op, level);
  if (op->n_results) {
    fputs(" : ", out);
    for (int i = 0; i < op->n_results; i++) {
      if (i) fputs(", ", out);
      print_type(out, &op->results[i]->type);
    }
  } else if (op->n_regions) fputs(" : ()", out);
  for (int r = 0; r < op->n_regions; r++) {
    const qir_region *reg = op->regions[r];
    if (r) fputs(" else", out);
    if (reg && reg->n_args) {
      fputs(" (", out);
      for (int i = 0; i < reg->n_args; i++) {
        fprintf(out, "%s%%%s: ", i ? ", " : "", value_name(p, reg->args[i]));
        print_type(out, &reg->args[i]->type);
      }
      fputc(')', out);
    }
    fputs(" {\n", out);
    if (reg) print_region_ops(p, reg, level + 1);
    indent(out, level);
    fputc('}', out);
  }
  fputc('\n', out);
}

static void print_region_ops(printer *p, const qir_region *r, int level) {
  for (const qir_op *op = r->first; op; op = op->next) print_op(p, op, level);
}

void qir_print(FILE *out, qir_module *m) {
  printer p;
  memset(&p, 0, sizeof p);
  p.out = out;
  p.m = m;
  p.n_ids = m->next_value_id;
  p.names = calloc((size_t)(p.n_ids ? p.n_ids : 1), sizeof *p.names);
  if (!p.names) abort();
  qir_walk(m->body, reserve_visit, &p);
  qir_walk(m->body, assign_visit, &p);

  char *mod = sanitize(m->name);
  fprintf(out, "module @%s {\n", mod ? mod : "main");
  free(mod);
  if (m->weights_path) {
    fputs("  weights ", out);
    print_string(out, m->weights_path);
    fputc('\n', out);
  }
  for (int i = 0; i < m->n_syms; i++)
    fprintf(out, m->syms[i].step > 1 ? "  dim %s = [%lld, %lld] %% %lld\n" : "  dim %s = [%lld, %lld]\n", m->syms[i].name,
            (long long)m->syms[i].lo, (long long)m->syms[i].hi, (long long)m->syms[i].step);
  print_region_ops(&p, m->body, 1);
  fputs("}\n", out);
  strset_free(&p.reserved);
  strset_free(&p.taken);
  for (int i = 0; i < p.n_ids; i++) free(p.names[i]);
  free(p.names);
}

char *qir_print_to_string(qir_module *m, size_t *len) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) abort();
  qir_print(f, m);
  fclose(f);
  if (len) *len = n;
  return buf;
}
