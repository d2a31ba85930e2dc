/* ir.c: the module arena, values, ops, use lists, attributes, constants and
 * expressions.  Everything a module owns comes from its arena. */
/* realpath() is an XSI function. */
#define _XOPEN_SOURCE 700
#include "qir.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- arena */

typedef struct qir_arena_chunk {
  struct qir_arena_chunk *next;
  size_t used, cap;
  max_align_t data[];
} qir_arena_chunk;

struct qir_arena {
  qir_arena_chunk *head;
};

static void *arena_alloc(struct qir_arena *a, size_t n) {
  n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  if (!a->head || a->head->cap - a->head->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    qir_arena_chunk *c = malloc(sizeof *c + cap);
    if (!c) {
      fputs("qir: out of memory\n", stderr);
      abort();
    }
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  void *p = (char *)a->head->data + a->head->used;
  a->head->used += n;
  memset(p, 0, n);
  return p;
}

void *qir_alloc(qir_module *m, size_t n) { return arena_alloc(m->arena, n ? n : 1); }

const char *qir_strndup(qir_module *m, const char *s, size_t n) {
  char *p = qir_alloc(m, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

const char *qir_strdup(qir_module *m, const char *s) { return s ? qir_strndup(m, s, strlen(s)) : NULL; }

const char *qir_sprintf(qir_module *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = qir_alloc(m, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

/* ---------------------------------------------------------------- types */

static const struct {
  const char *name;
  int size;
} dtype_table[] = {
#define X(id, name, size) {name, size},
    QIR_DTYPES(X)
#undef X
};

const char *qir_dtype_name(qir_dtype t) { return t < QIR_DTYPE_COUNT ? dtype_table[t].name : "?"; }
int qir_dtype_size(qir_dtype t) { return t < QIR_DTYPE_COUNT ? dtype_table[t].size : 0; }

int qir_dtype_bits(qir_dtype t) {
  switch (t) {
  case QIR_F4E2M1: case QIR_I4: case QIR_U4: return 4;
  case QIR_I2: case QIR_U2: return 2;
  default: return 8 * qir_dtype_size(t);
  }
}

bool qir_dtype_is_narrow(qir_dtype t) { return t >= QIR_F8E4M3FN && t <= QIR_U2; }

bool qir_dtype_from_name(const char *s, size_t len, qir_dtype *out) {
  for (int i = 0; i < QIR_DTYPE_COUNT; i++)
    if (strlen(dtype_table[i].name) == len && memcmp(dtype_table[i].name, s, len) == 0) {
      *out = (qir_dtype)i;
      return true;
    }
  return false;
}

bool qir_dtype_is_float(qir_dtype t) {
  return t == QIR_F64 || t == QIR_F32 || t == QIR_F16 || t == QIR_BF16 || (t >= QIR_F8E4M3FN && t <= QIR_F4E2M1);
}
bool qir_dtype_is_signed_int(qir_dtype t) {
  return t == QIR_I64 || t == QIR_I32 || t == QIR_I16 || t == QIR_I8 || t == QIR_I4 || t == QIR_I2;
}
bool qir_dtype_is_unsigned_int(qir_dtype t) {
  return t == QIR_U64 || t == QIR_U32 || t == QIR_U16 || t == QIR_U8 || t == QIR_U4 || t == QIR_U2;
}

qir_type qir_type_make(qir_dtype dt, int rank, const int64_t *dims) {
  qir_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank;
  for (int i = 0; i < rank && i < QIR_MAX_RANK; i++) t.dims[i] = dims[i];
  return t;
}

int64_t qir_type_numel(const qir_type *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

bool qir_type_equal(const qir_type *a, const qir_type *b) {
  if (a->dtype != b->dtype || a->rank != b->rank || a->bounded != b->bounded) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i] || a->sym[i] != b->sym[i]) return false;
  return true;
}

#define REST(w) (buf + ((size_t)(w) < n ? (size_t)(w) : n)), ((size_t)(w) < n ? n - (size_t)(w) : 0)

int qir_type_format(const qir_type *t, char *buf, size_t n) {
  int w = snprintf(buf, n, "%s[", qir_dtype_name(t->dtype));
  for (int i = 0; i < t->rank; i++) {
    if (i) w += snprintf(REST(w), ",");
    if (t->sym[i]) {
      w += qir_dim_format(t->sym[i], REST(w));
      w += snprintf(REST(w), "<=%lld", (long long)t->dims[i]);
    } else
      w += snprintf(REST(w), !i && t->bounded ? "<=%lld" : "%lld", (long long)t->dims[i]);
  }
  w += snprintf(REST(w), "]");
  return w;
}
#undef REST

float qir_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else { /* subnormal: renormalise */
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; exp--; }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000 | (mant << 13);
  else bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t qir_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = (int32_t)((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffff;
  if (exp == 255) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) { /* subnormal or zero in f16 */
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into exponent: correct */
  return (uint16_t)(sign | h);
}

float qir_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t qir_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return (uint16_t)((x + rounding) >> 16);
}

/* ---------------------------------------------------------------- narrow types */

/* A narrow float format: exponent bias, mantissa bits, largest finite value,
 * whether it has infinities (f8e5m2) and whether it is "fnuz" (no -0, one NaN
 * 0x80). */
typedef struct {
  int bias, man_bits;
  double max;
  bool has_inf, fnuz;
} narrow_float;

static bool narrow_float_of(qir_dtype t, narrow_float *f) {
  switch (t) {
  case QIR_F8E4M3FN: *f = (narrow_float){7, 3, 448, false, false}; return true;
  case QIR_F8E4M3FNUZ: *f = (narrow_float){8, 3, 240, false, true}; return true;
  case QIR_F8E5M2: *f = (narrow_float){15, 2, 57344, true, false}; return true;
  case QIR_F8E5M2FNUZ: *f = (narrow_float){16, 2, 57344, false, true}; return true;
  case QIR_F4E2M1: *f = (narrow_float){1, 1, 6, false, false}; return true;
  default: return false;
  }
}

double qir_narrow_to_double(qir_dtype t, uint8_t c) {
  narrow_float f;
  switch (t) {
  case QIR_I4: return (int8_t)(uint8_t)(c << 4) >> 4;
  case QIR_U4: return c & 15;
  case QIR_I2: return (int8_t)(uint8_t)(c << 6) >> 6;
  case QIR_U2: return c & 3;
  case QIR_F8E8M0: return c == 0xFF ? NAN : ldexp(1.0, (int)c - 127);
  default: break;
  }
  if (!narrow_float_of(t, &f)) return 0;
  int width = t == QIR_F4E2M1 ? 4 : 8, exp_bits = width - 1 - f.man_bits;
  unsigned sign_bit = 1u << (width - 1), e = (c >> f.man_bits) & ((1u << exp_bits) - 1), m = c & ((1u << f.man_bits) - 1);
  c &= (uint8_t)((1u << width) - 1);
  if (f.fnuz && c == sign_bit) return NAN;
  if (t == QIR_F8E4M3FN && (c & 0x7F) == 0x7F) return (c & sign_bit) ? -NAN : NAN;
  if (f.has_inf && e == (1u << exp_bits) - 1) return m ? ((c & sign_bit) ? -NAN : NAN) : (c & sign_bit) ? -INFINITY : INFINITY;
  double mag = e == 0 ? ldexp((double)m, 1 - f.bias - f.man_bits) : ldexp((double)(m | (1u << f.man_bits)), (int)e - f.bias - f.man_bits);
  return (c & sign_bit) ? -mag : mag;
}

/* Bits of a value of a narrow float format, |v| finite and already rounded. */
static uint8_t narrow_float_bits(const narrow_float *f, double a) {
  if (a == 0) return 0;
  int e;
  frexp(a, &e);                      /* a = m * 2^e, 0.5 <= m < 1 */
  int be = e - 1 + f->bias;          /* biased exponent of a normal number */
  if (be <= 0) return (uint8_t)ldexp(a, f->bias - 1 + f->man_bits);                   /* subnormal */
  return (uint8_t)((unsigned)be << f->man_bits | ((unsigned)ldexp(a, f->man_bits - (e - 1)) & ((1u << f->man_bits) - 1)));
}

uint8_t qir_narrow_from_double(qir_dtype t, double v, bool saturate) {
  narrow_float f;
  switch (t) {
  case QIR_I4: case QIR_U4: case QIR_I2: case QIR_U2: {
    int64_t x = isnan(v) ? 0 : v <= -9.2e18 ? INT64_MIN : v >= 9.2e18 ? INT64_MAX : (int64_t)v;
    int bits = qir_dtype_bits(t);
    uint8_t low = (uint8_t)((uint64_t)x & ((1u << bits) - 1));
    if ((t == QIR_I4 || t == QIR_I2) && (low >> (bits - 1))) low |= (uint8_t)(0xFF << bits); /* sign-extend */
    return low;
  }
  case QIR_F8E8M0: { /* round_mode "up": the smallest power of two >= |v| */
    if (isnan(v)) return 0xFF;
    double a = fabs(v);
    if (isinf(a)) return saturate ? 0xFE : 0xFF;
    if (a < 0x1p-127) return 0;
    int e;
    double m = frexp(a, &e);         /* a = m * 2^e */
    int be = (m == 0.5 ? e - 1 : e) + 127;
    if (be > 254) return saturate ? 0xFE : 0xFF;
    return (uint8_t)be;
  }
  default: break;
  }
  if (!narrow_float_of(t, &f)) return 0;
  bool f4 = t == QIR_F4E2M1;
  uint8_t sign = signbit(v) ? (f4 ? 0x8 : 0x80) : 0;
  uint8_t nan = f.fnuz ? 0x80 : t == QIR_F8E5M2 ? (uint8_t)(0x7E | sign) : (uint8_t)(0x7F | sign);
  if (f4 && isnan(v)) return 0x8; /* no NaN in f4e2m1: ONNX's reference gives -0 */
  if (isnan(v)) return nan;
  double a = fabs(v), r;
  if (isinf(a)) {
    r = a;
  } else { /* round to nearest even at the quantum of a's binade (subnormals: the smallest) */
    int e;
    frexp(a, &e);
    int q = (e - 1 < 1 - f.bias ? 1 - f.bias : e - 1) - f.man_bits;
    r = ldexp(nearbyint(ldexp(a, -q)), q);
  }
  if (r > f.max) {
    if (saturate || f4) return (uint8_t)(sign | narrow_float_bits(&f, f.max));
    return f.has_inf ? (uint8_t)(sign | 0x7C) : nan;
  }
  uint8_t bits = narrow_float_bits(&f, r);
  if (bits == 0 && f.fnuz) return 0; /* fnuz has no -0 */
  return (uint8_t)(sign | bits);
}

/* Saturating conversion from double to an integer type: NaN gives 0, as the
 * usual C implementations of ONNX's Cast do not define it either. */
#define CLAMP_TO(T, lo, hi) (isnan(v) ? (T)0 : v <= (double)(lo) ? (T)(lo) : v >= (double)(hi) ? (T)(hi) : (T)v)

double qir_load_elem(qir_dtype t, const void *base, int64_t i) {
  const unsigned char *p = (const unsigned char *)base + i * qir_dtype_size(t);
  switch (t) {
  case QIR_F64: { double v; memcpy(&v, p, 8); return v; }
  case QIR_F32: { float v; memcpy(&v, p, 4); return v; }
  case QIR_F16: { uint16_t v; memcpy(&v, p, 2); return qir_f16_to_f32(v); }
  case QIR_BF16: { uint16_t v; memcpy(&v, p, 2); return qir_bf16_to_f32(v); }
  case QIR_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
  case QIR_I32: { int32_t v; memcpy(&v, p, 4); return v; }
  case QIR_I16: { int16_t v; memcpy(&v, p, 2); return v; }
  case QIR_I8: { int8_t v; memcpy(&v, p, 1); return v; }
  case QIR_U64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
  case QIR_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
  case QIR_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
  case QIR_U8: return *p;
  case QIR_BOOL: return *p != 0;
  default: return qir_narrow_to_double(t, *p);
  }
}

void qir_store_elem(qir_dtype t, void *base, int64_t i, double v) {
  unsigned char *p = (unsigned char *)base + i * qir_dtype_size(t);
  switch (t) {
  case QIR_F64: memcpy(p, &v, 8); break;
  case QIR_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
  case QIR_F16: { uint16_t h = qir_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
  case QIR_BF16: { uint16_t h = qir_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
  case QIR_I64: { int64_t x = CLAMP_TO(int64_t, INT64_MIN, INT64_MAX); memcpy(p, &x, 8); break; }
  case QIR_I32: { int32_t x = CLAMP_TO(int32_t, INT32_MIN, INT32_MAX); memcpy(p, &x, 4); break; }
  case QIR_I16: { int16_t x = CLAMP_TO(int16_t, INT16_MIN, INT16_MAX); memcpy(p, &x, 2); break; }
  case QIR_I8: { int8_t x = CLAMP_TO(int8_t, INT8_MIN, INT8_MAX); memcpy(p, &x, 1); break; }
  case QIR_U64: { uint64_t x = CLAMP_TO(uint64_t, 0, UINT64_MAX); memcpy(p, &x, 8); break; }
  case QIR_U32: { uint32_t x = CLAMP_TO(uint32_t, 0, UINT32_MAX); memcpy(p, &x, 4); break; }
  case QIR_U16: { uint16_t x = CLAMP_TO(uint16_t, 0, UINT16_MAX); memcpy(p, &x, 2); break; }
  case QIR_U8: { uint8_t x = CLAMP_TO(uint8_t, 0, UINT8_MAX); *p = x; break; }
  case QIR_BOOL: *p = v != 0; break;
  default: *p = qir_narrow_from_double(t, v, false); break; /* IEEE-like overflow; casts saturate (qir.h) */
  }
}

/* ---------------------------------------------------------------- module */

qir_module *qir_module_new(const char *name) {
  struct qir_arena *a = calloc(1, sizeof *a);
  qir_module *m0 = a ? calloc(1, sizeof *m0) : NULL;
  if (!m0) {
    fputs("qir: out of memory\n", stderr);
    abort();
  }
  m0->arena = a;
  m0->name = qir_strdup(m0, name ? name : "main");
  m0->body = qir_region_new(m0, NULL);
  return m0;
}

void qir_module_free(qir_module *m) {
  if (!m) return;
  for (qir_arena_chunk *c = m->arena->head, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  free(m->arena);
  free(m);
}

void qir_module_rebase_weights(qir_module *m, const char *out_dir) {
  if (!m->weights_path || m->weights_path[0] == '/') return;
  char *from = realpath(m->base_dir && m->base_dir[0] ? m->base_dir : ".", NULL);
  char *to = realpath(out_dir && out_dir[0] ? out_dir : ".", NULL);
  if (from && to && strcmp(from, to) != 0) {
    const char *joined = qir_sprintf(m, "%s/%s", from, m->weights_path);
    char *canonical = realpath(joined, NULL);
    m->weights_path = canonical ? qir_strdup(m, canonical) : joined;
    m->base_dir = qir_strdup(m, to);
    free(canonical);
  }
  free(from);
  free(to);
}

qir_region *qir_region_new(qir_module *m, qir_op *parent_op) {
  qir_region *r = qir_alloc(m, sizeof *r);
  r->parent_op = parent_op;
  return r;
}

qir_value *qir_value_new(qir_module *m, qir_type t, const char *name) {
  qir_value *v = qir_alloc(m, sizeof *v);
  v->id = m->next_value_id++;
  v->type = t;
  v->name = name ? qir_strdup(m, name) : NULL;
  return v;
}

qir_value *qir_region_add_arg(qir_module *m, qir_region *r, qir_type t, const char *name) {
  qir_value *v = qir_value_new(m, t, name);
  qir_value **args = qir_alloc(m, sizeof *args * (size_t)(r->n_args + 1));
  if (r->n_args) memcpy(args, r->args, sizeof *args * (size_t)r->n_args);
  v->arg_of = r;
  v->arg_index = r->n_args;
  args[r->n_args++] = v;
  r->args = args;
  return v;
}

static void use_add(qir_module *m, qir_value *v, qir_op *user, int index) {
  if (!v) return;
  qir_use *u = qir_alloc(m, sizeof *u);
  u->user = user;
  u->operand_index = index;
  u->next = v->uses;
  v->uses = u;
}

/* Unlinked uses are not freed: the arena owns them. */
static void use_remove(qir_value *v, qir_op *user, int index) {
  if (!v) return;
  for (qir_use **p = &v->uses; *p; p = &(*p)->next)
    if ((*p)->user == user && (*p)->operand_index == index) {
      *p = (*p)->next;
      return;
    }
}

qir_op *qir_op_new(qir_module *m, qir_opcode code, int n_operands, qir_value *const *operands,
                   int n_results, const qir_type *result_types, qir_loc loc) {
  qir_op *op = qir_alloc(m, sizeof *op);
  op->code = code;
  op->loc = loc;
  op->n_operands = n_operands;
  op->operands = qir_alloc(m, sizeof *op->operands * (size_t)(n_operands + 1));
  for (int i = 0; i < n_operands; i++) {
    op->operands[i] = operands[i];
    use_add(m, operands[i], op, i);
  }
  op->n_results = n_results;
  op->results = qir_alloc(m, sizeof *op->results * (size_t)(n_results + 1));
  for (int i = 0; i < n_results; i++) {
    qir_value *v = qir_value_new(m, result_types[i], NULL);
    v->def = op;
    v->result_index = i;
    op->results[i] = v;
  }
  const qir_opinfo *info = qir_opinfo_get(code);
  op->n_regions = info && info->n_regions > 0 ? info->n_regions : 0;   /* a variable count (-1): the parser's */
  if (op->n_regions) {
    op->regions = qir_alloc(m, sizeof *op->regions * (size_t)op->n_regions);
    for (int i = 0; i < op->n_regions; i++) op->regions[i] = qir_region_new(m, op);
  }
  return op;
}

qir_op *qir_op_copy_single(qir_module *m, const qir_op *op, qir_value *const *operands) {
  qir_op *c = qir_op_new(m, op->code, op->n_operands, operands, 1, &op->results[0]->type, op->loc);
  c->comp = op->comp;
  c->cst = op->cst;
  c->n_attrs = op->n_attrs;
  c->attrs = qir_alloc(m, sizeof *c->attrs * (size_t)(op->n_attrs + 1));
  if (op->n_attrs) memcpy(c->attrs, op->attrs, sizeof *c->attrs * (size_t)op->n_attrs);
  c->results[0]->name = op->results[0]->name;
  return c;
}

void qir_op_append(qir_region *r, qir_op *op) {
  op->parent = r;
  op->prev = r->last;
  op->next = NULL;
  if (r->last) r->last->next = op;
  else r->first = op;
  r->last = op;
}

void qir_op_insert_before(qir_op *before, qir_op *op) {
  qir_region *r = before->parent;
  op->parent = r;
  op->next = before;
  op->prev = before->prev;
  if (before->prev) before->prev->next = op;
  else r->first = op;
  before->prev = op;
}

void qir_op_unlink(qir_op *op) {
  for (int i = 0; i < op->n_operands; i++) use_remove(op->operands[i], op, i);
  qir_region *r = op->parent;
  if (r) {
    if (op->prev) op->prev->next = op->next;
    else r->first = op->next;
    if (op->next) op->next->prev = op->prev;
    else r->last = op->prev;
  }
  op->parent = NULL;
  op->prev = op->next = NULL;
}

void qir_op_set_operand(qir_module *m, qir_op *op, int i, qir_value *v) {
  if (op->operands[i] == v) return;
  use_remove(op->operands[i], op, i);
  op->operands[i] = v;
  use_add(m, v, op, i);
}

void qir_op_add_operand(qir_module *m, qir_op *op, qir_value *v) {
  qir_value **ops = qir_alloc(m, sizeof *ops * (size_t)(op->n_operands + 2));
  if (op->n_operands) memcpy(ops, op->operands, sizeof *ops * (size_t)op->n_operands);
  ops[op->n_operands] = v;
  op->operands = ops;
  use_add(m, v, op, op->n_operands);
  op->n_operands++;
}

void qir_value_replace_uses(qir_module *m, qir_value *from, qir_value *to) {
  if (from == to) return;
  while (from->uses) {
    qir_use *u = from->uses;
    qir_op_set_operand(m, u->user, u->operand_index, to);
  }
}

bool qir_value_is_zero_const(const qir_value *v) {
  const qir_op *c = v->def;
  if (!c || c->code != QIR_OP_CONST || !c->cst || !c->cst->data) return false;
  int64_t n = c->cst->splat ? 1 : qir_type_numel(&v->type);
  if ((size_t)(n * qir_dtype_size(v->type.dtype)) > c->cst->nbytes) return false;
  for (int64_t i = 0; i < n; i++)
    if (qir_load_elem(v->type.dtype, c->cst->data, i) != 0) return false;
  return true;
}

int qir_value_use_count(const qir_value *v) {
  int n = 0;
  for (const qir_use *u = v->uses; u; u = u->next) n++;
  return n;
}

bool qir_walk(qir_region *r, qir_op_visitor fn, void *ctx) {
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next; /* the visitor may unlink op */
    if (!fn(op, ctx)) return false;
    for (int i = 0; i < op->n_regions; i++)
      if (!qir_walk(op->regions[i], fn, ctx)) return false;
  }
  return true;
}

/* ---------------------------------------------------------------- attributes */

qir_attr *qir_op_attr(const qir_op *op, const char *key) {
  for (int i = 0; i < op->n_attrs; i++)
    if (strcmp(op->attrs[i].key, key) == 0) return &op->attrs[i];
  return NULL;
}

void qir_op_set_attr(qir_module *m, qir_op *op, const char *key, qir_attr_val v, bool sched) {
  qir_attr *a = qir_op_attr(op, key);
  if (!a) {
    qir_attr *attrs = qir_alloc(m, sizeof *attrs * (size_t)(op->n_attrs + 1));
    if (op->n_attrs) memcpy(attrs, op->attrs, sizeof *attrs * (size_t)op->n_attrs);
    op->attrs = attrs;
    a = &attrs[op->n_attrs++];
    a->key = qir_strdup(m, key);
  }
  a->val = v;
  a->sched = sched;
}

bool qir_op_remove_attr(qir_op *op, const char *key) {
  for (int i = 0; i < op->n_attrs; i++)
    if (strcmp(op->attrs[i].key, key) == 0) {
      memmove(&op->attrs[i], &op->attrs[i + 1], sizeof *op->attrs * (size_t)(op->n_attrs - i - 1));
      op->n_attrs--;
      return true;
    }
  return false;
}

qir_attr_val qir_attr_int(int64_t i) {
  qir_attr_val v = {.kind = QIR_ATTR_INT, .i = i, .f = (double)i};
  return v;
}

qir_attr_val qir_attr_float(double f) {
  qir_attr_val v = {.kind = QIR_ATTR_FLOAT, .f = f};
  return v;
}

qir_attr_val qir_attr_string(qir_module *m, const char *s) {
  qir_attr_val v = {.kind = QIR_ATTR_STRING, .s = qir_strdup(m, s)};
  return v;
}

qir_attr_val qir_attr_word(qir_module *m, const char *s) {
  qir_attr_val v = {.kind = QIR_ATTR_WORD, .s = qir_strdup(m, s)};
  return v;
}

qir_attr_val qir_attr_list(qir_module *m, int n, const qir_attr_val *items) {
  qir_attr_val v = {.kind = QIR_ATTR_LIST, .n = n};
  v.items = qir_alloc(m, sizeof *v.items * (size_t)(n ? n : 1));
  if (n) memcpy(v.items, items, sizeof *items * (size_t)n);
  return v;
}

qir_attr_val qir_attr_ints(qir_module *m, int n, const int64_t *vals) {
  qir_attr_val v = {.kind = QIR_ATTR_LIST, .n = n};
  v.items = qir_alloc(m, sizeof *v.items * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) v.items[i] = qir_attr_int(vals[i]);
  return v;
}

qir_attr_val qir_attr_floats(qir_module *m, int n, const double *vals) {
  qir_attr_val v = {.kind = QIR_ATTR_LIST, .n = n};
  v.items = qir_alloc(m, sizeof *v.items * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) v.items[i] = qir_attr_float(vals[i]);
  return v;
}

qir_attr_val qir_attr_dict(qir_module *m, int n, const qir_attr *entries) {
  qir_attr_val v = {.kind = QIR_ATTR_DICT, .n = n};
  v.entries = qir_alloc(m, sizeof *v.entries * (size_t)(n ? n : 1));
  if (n) memcpy(v.entries, entries, sizeof *entries * (size_t)n);
  return v;
}

const qir_attr_val *qir_attr_dict_get(const qir_attr_val *dict, const char *key) {
  if (!dict || dict->kind != QIR_ATTR_DICT) return NULL;
  for (int i = 0; i < dict->n; i++)
    if (strcmp(dict->entries[i].key, key) == 0) return &dict->entries[i].val;
  return NULL;
}

int64_t qir_op_attr_int(const qir_op *op, const char *key, int64_t dflt) {
  qir_attr *a = qir_op_attr(op, key);
  if (!a) return dflt;
  if (a->val.kind == QIR_ATTR_INT) return a->val.i;
  if (a->val.kind == QIR_ATTR_FLOAT) return (int64_t)a->val.f;
  return dflt;
}

double qir_op_attr_float(const qir_op *op, const char *key, double dflt) {
  qir_attr *a = qir_op_attr(op, key);
  if (!a) return dflt;
  if (a->val.kind == QIR_ATTR_FLOAT) return a->val.f;
  if (a->val.kind == QIR_ATTR_INT) return (double)a->val.i;
  return dflt;
}

const char *qir_op_attr_str(const qir_op *op, const char *key, const char *dflt) {
  qir_attr *a = qir_op_attr(op, key);
  if (!a || (a->val.kind != QIR_ATTR_STRING && a->val.kind != QIR_ATTR_WORD)) return dflt;
  return a->val.s;
}

int qir_op_attr_ints(const qir_op *op, const char *key, int64_t *out, int cap) {
  qir_attr *a = qir_op_attr(op, key);
  if (!a || a->val.kind != QIR_ATTR_LIST) return -1;
  for (int i = 0; i < a->val.n; i++) {
    const qir_attr_val *it = &a->val.items[i];
    if (it->kind != QIR_ATTR_INT) return -1;
    if (i < cap) out[i] = it->i;
  }
  return a->val.n;
}

int qir_op_attr_floats(const qir_op *op, const char *key, double *out, int cap) {
  qir_attr *a = qir_op_attr(op, key);
  if (!a || a->val.kind != QIR_ATTR_LIST) return -1;
  for (int i = 0; i < a->val.n; i++) {
    const qir_attr_val *it = &a->val.items[i];
    if (it->kind != QIR_ATTR_INT && it->kind != QIR_ATTR_FLOAT) return -1;
    if (i < cap) out[i] = it->kind == QIR_ATTR_INT ? (double)it->i : it->f;
  }
  return a->val.n;
}

/* ---------------------------------------------------------------- constants */

static qir_op *const_new(qir_module *m, qir_type t, qir_loc loc) {
  qir_op *op = qir_op_new(m, QIR_OP_CONST, 0, NULL, 1, &t, loc);
  op->cst = qir_alloc(m, sizeof *op->cst);
  op->cst->offset = -1;
  return op;
}

qir_op *qir_const_new_data(qir_module *m, qir_type t, const void *data, size_t nbytes, qir_loc loc) {
  qir_op *op = const_new(m, t, loc);
  op->cst->data = qir_alloc(m, nbytes);
  if (nbytes) memcpy(op->cst->data, data, nbytes);
  op->cst->nbytes = nbytes;
  return op;
}

qir_op *qir_const_new_splat(qir_module *m, qir_type t, double value, qir_loc loc) {
  qir_op *op = const_new(m, t, loc);
  op->cst->splat = true;
  op->cst->nbytes = (size_t)qir_dtype_size(t.dtype);
  op->cst->data = qir_alloc(m, op->cst->nbytes);
  qir_store_elem(t.dtype, op->cst->data, 0, value);
  return op;
}

qir_op *qir_const_new_offset(qir_module *m, qir_type t, int64_t offset, qir_loc loc) {
  qir_op *op = const_new(m, t, loc);
  op->cst->offset = offset;
  return op;
}

/* Reads `n` bytes at `offset` of the weights file. */
static void *read_weights(qir_module *m, int64_t offset, size_t n, qir_loc loc, qir_diag *d) {
  if (!m->weights_path) {
    if (d) qir_error(d, loc, "constant at offset %lld but the module names no weights file", (long long)offset);
    return NULL;
  }
  const char *path = m->weights_path;
  if (path[0] != '/' && m->base_dir && m->base_dir[0]) path = qir_sprintf(m, "%s/%s", m->base_dir, m->weights_path);
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (d) qir_error(d, loc, "cannot open weights file '%s': %s", path, strerror(errno));
    return NULL;
  }
  void *buf = qir_alloc(m, n);
  bool ok = fseeko(f, (off_t)offset, SEEK_SET) == 0 && fread(buf, 1, n, f) == n;
  fclose(f);
  if (!ok) {
    if (d) qir_error(d, loc, "weights file '%s' has no %zu bytes at offset %lld", path, n, (long long)offset);
    return NULL;
  }
  return buf;
}

const void *qir_const_data(qir_module *m, qir_op *op, qir_diag *d) {
  qir_const *c = op->cst;
  const qir_type *t = &op->results[0]->type;
  size_t want = (size_t)qir_type_numel(t) * (size_t)qir_dtype_size(t->dtype);
  if (c->splat) {
    char *buf = qir_alloc(m, want);
    size_t es = (size_t)qir_dtype_size(t->dtype);
    for (size_t i = 0; i < want; i += es) memcpy(buf + i, c->data, es);
    c->splat = false;
    c->data = buf;
    c->nbytes = want;
    return buf;
  }
  if (!c->data && c->offset >= 0) {
    c->data = read_weights(m, c->offset, want, op->loc, d);
    if (!c->data) return NULL;
    c->nbytes = want;
  }
  return c->data;
}

double qir_const_elem(qir_module *m, qir_op *op, int64_t i, qir_diag *d) {
  qir_const *c = op->cst;
  qir_dtype dt = op->results[0]->type.dtype;
  if (c->splat) return qir_load_elem(dt, c->data, 0);
  const void *p = qir_const_data(m, op, d);
  return p ? qir_load_elem(dt, p, i) : 0;
}

/* ---------------------------------------------------------------- expressions */

static const char *const fn_spelling[] = {
#define X(id, spelling) spelling,
    QIR_EXPR_FNS(X)
#undef X
};

const char *qir_expr_fn_spelling(qir_expr_fn fn) { return fn < QIR_FN_COUNT ? fn_spelling[fn] : "?"; }

bool qir_expr_fn_is_binary(qir_expr_fn fn) { return fn <= QIR_FN_ATAN2; }

const char *qir_reduce_name(qir_reduce_kind k) {
  switch (k) {
  case QIR_REDUCE_SUM: return "sum";
  case QIR_REDUCE_MAX: return "max";
  case QIR_REDUCE_MIN: return "min";
  case QIR_REDUCE_PROD: return "prod";
  default: return NULL;
  }
}

static qir_expr *expr_new(qir_module *m, qir_expr_kind k, int n_args) {
  qir_expr *e = qir_alloc(m, sizeof *e);
  e->kind = k;
  e->n_args = n_args;
  e->args = qir_alloc(m, sizeof *e->args * (size_t)(n_args ? n_args : 1));
  return e;
}

qir_expr *qir_expr_int(qir_module *m, int64_t v) {
  qir_expr *e = expr_new(m, QIR_EX_INT, 0);
  e->ival = v;
  return e;
}

qir_expr *qir_expr_float(qir_module *m, double v) {
  qir_expr *e = expr_new(m, QIR_EX_FLOAT, 0);
  e->fval = v;
  return e;
}

qir_expr *qir_expr_var(qir_module *m, int var) {
  qir_expr *e = expr_new(m, QIR_EX_VAR, 0);
  e->var = var;
  return e;
}

qir_expr *qir_expr_access(qir_module *m, int operand, int n_idx, qir_expr *const *idx) {
  qir_expr *e = expr_new(m, QIR_EX_ACCESS, n_idx);
  e->operand = operand;
  for (int i = 0; i < n_idx; i++) e->args[i] = idx[i];
  return e;
}

qir_expr *qir_expr_unary(qir_module *m, qir_expr_fn fn, qir_expr *a) {
  qir_expr *e = expr_new(m, QIR_EX_UNARY, 1);
  e->fn = fn;
  e->args[0] = a;
  return e;
}

qir_expr *qir_expr_binary(qir_module *m, qir_expr_fn fn, qir_expr *a, qir_expr *b) {
  qir_expr *e = expr_new(m, QIR_EX_BINARY, 2);
  e->fn = fn;
  e->args[0] = a;
  e->args[1] = b;
  return e;
}

qir_expr *qir_expr_select(qir_module *m, qir_expr *c, qir_expr *a, qir_expr *b) {
  qir_expr *e = expr_new(m, QIR_EX_SELECT, 3);
  e->args[0] = c;
  e->args[1] = a;
  e->args[2] = b;
  return e;
}

qir_expr *qir_expr_cast(qir_module *m, qir_dtype to, qir_expr *a) {
  qir_expr *e = expr_new(m, QIR_EX_CAST, 1);
  e->cast_to = to;
  e->args[0] = a;
  return e;
}

qir_compute *qir_compute_new(qir_module *m, int n_axes, int n_red) {
  qir_compute *c = qir_alloc(m, sizeof *c);
  int n = n_axes + n_red;
  c->n_axes = n_axes;
  c->n_red = n_red;
  c->axis_names = qir_alloc(m, sizeof *c->axis_names * (size_t)(n ? n : 1));
  c->axis_extents = qir_alloc(m, sizeof *c->axis_extents * (size_t)(n ? n : 1));
  c->axis_dims = qir_alloc(m, sizeof *c->axis_dims * (size_t)(n ? n : 1));
  return c;
}

/* ---------------------------------------------------------------- op table */

static const qir_opinfo op_table[] = {
#define QIR_OP(id, name, min_operands, max_operands, n_results, n_regions, flags) \
  {name, min_operands, max_operands, n_results, n_regions, flags},
#include "ops.def"
#undef QIR_OP
};

const qir_opinfo *qir_opinfo_get(qir_opcode code) { return code < QIR_OP_COUNT ? &op_table[code] : NULL; }

bool qir_opcode_from_name(const char *s, size_t len, qir_opcode *out) {
  for (int i = 0; i < QIR_OP_COUNT; i++)
    if (strlen(op_table[i].name) == len && memcmp(op_table[i].name, s, len) == 0) {
      *out = (qir_opcode)i;
      return true;
    }
  return false;
}

int qir_input_dims_note(const qir_op *input, char *buf, size_t cap) {
  const qir_attr *params = qir_op_attr(input, "dim_params"), *sources = qir_op_attr(input, "dim_source");
  if (cap) buf[0] = 0;
  if (!params || !sources || input->n_results != 1 || params->val.kind != QIR_ATTR_LIST ||
      sources->val.kind != QIR_ATTR_LIST)
    return 0;
  const qir_type *t = &input->results[0]->type;
  if (params->val.n != t->rank || sources->val.n != t->rank) return 0;
  const char *name = qir_op_attr_str(input, "name", input->results[0]->name ? input->results[0]->name : "");
  size_t w = 0;
  for (int k = 0; k < t->rank; k++) {
    const qir_attr_val *p = &params->val.items[k], *s = &sources->val.items[k];
    if ((p->kind != QIR_ATTR_STRING && p->kind != QIR_ATTR_WORD) || (s->kind != QIR_ATTR_STRING && s->kind != QIR_ATTR_WORD))
      continue;
    bool by_default = strcmp(s->s, "default") == 0, by_dim = strcmp(s->s, "dim") == 0;
    if (!by_default && !by_dim && strcmp(s->s, "shape") != 0) continue;
    char what[160], flag[400];
    if (p->s[0]) snprintf(what, sizeof what, "axis %d ('%.100s')", k, p->s);
    else snprintf(what, sizeof what, "axis %d", k);
    if (p->s[0]) {
      snprintf(flag, sizeof flag, "--dim %.100s=SIZE", p->s);
    } else { /* an unnamed axis: the whole shape, SIZE at this axis */
      int f = snprintf(flag, sizeof flag, "--shape %.100s=", name);
      for (int j = 0; j < t->rank && f > 0 && (size_t)f < sizeof flag; j++) {
        if (j == k) f += snprintf(flag + f, sizeof flag - (size_t)f, "%sSIZE", j ? "," : "");
        else f += snprintf(flag + f, sizeof flag - (size_t)f, "%s%" PRId64, j ? "," : "", t->dims[j]);
      }
    }
    int n;
    if (t->sym[k]) { /* a range: the extent is the run's */
      char e[256];
      qir_dim_format(t->sym[k], e, sizeof e);
      n = snprintf(buf + w, w < cap ? cap - w : 0, "%s%s is '%s', any size in [%" PRId64 ", %" PRId64 "]%s at import",
                   w ? "; " : "", what, e, t->sym[k]->lo, t->sym[k]->hi, by_dim ? " by --dim" : " by --shape");
    } else
      n = snprintf(buf + w, w < cap ? cap - w : 0, "%s%s was set to %" PRId64 " %s at import; onnx2qir %s changes it",
                   w ? "; " : "", what, t->dims[k], by_default ? "by default" : by_dim ? "by --dim" : "by --shape", flag);
    if (n < 0) break;
    w += (size_t)n;
    if (w >= cap) {
      w = cap ? cap - 1 : 0;
      break;
    }
  }
  return (int)w;
}

bool qir_expr_equal(const qir_expr *a, const qir_expr *b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || a->n_args != b->n_args) return false;
  switch (a->kind) {
  case QIR_EX_INT: if (a->ival != b->ival) return false; break;
  case QIR_EX_FLOAT: if (a->fval != b->fval && !(a->fval != a->fval && b->fval != b->fval)) return false; break;
  case QIR_EX_VAR: if (a->var != b->var) return false; break;
  case QIR_EX_ACCESS: if (a->operand != b->operand) return false; break;
  case QIR_EX_UNARY: case QIR_EX_BINARY: if (a->fn != b->fn) return false; break;
  case QIR_EX_CAST: if (a->cast_to != b->cast_to) return false; break;
  default: break;
  }
  for (int i = 0; i < a->n_args; i++)
    if (!qir_expr_equal(a->args[i], b->args[i])) return false;
  return true;
}
