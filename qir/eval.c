/* eval.c: the reference semantics of every op of ops.def on host buffers.
 *
 * This is the numeric oracle of the project (qrun, constant folding, checking
 * -lower and the code generators), so it favours plain, checkable code over
 * speed and shares nothing with te.c or the code generators.  Floating-point
 * work is done in double and rounded once to the result type; integer dtypes
 * take exact int64 paths (u64 as its bit pattern) so i64 arithmetic never
 * loses bits.  The hot loops of real models (conv, matmul, gemm) run over
 * contiguous memory so that whole networks evaluate in seconds.
 *
 * Every op checks the shapes it indexes with, so a malformed module gives a
 * located diagnostic, never an out-of-bounds access. */
#include "qir.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

typedef struct {
  qir_module *m;
  const qir_op *op;
  qir_diag *d;
} ev;

#define FAIL(e, ...) (qir_error((e)->d, (e)->op->loc, __VA_ARGS__), false)

static const char *opname(const qir_op *op) {
  const qir_opinfo *info = qir_opinfo_get(op->code);
  return info ? info->name : "?";
}

static const char *type_str(const qir_type *t, char *buf, size_t n) {
  qir_type_format(t, buf, n);
  return buf;
}

void qir_tensor_free(qir_tensor *t) {
  if (!t) return;
  free(t->data);
  t->data = NULL;
}

/* Largest tensor the evaluator allocates: guards against absurd static shapes. */
#define MAX_TENSOR_BYTES ((int64_t)1 << 36)

static bool numel_checked(const qir_type *t, int64_t *out) {
  int64_t n = 1;
  if (t->rank < 0 || t->rank > QIR_MAX_RANK) return false;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] < 0) return false;
    if (t->dims[i] && n > MAX_TENSOR_BYTES / t->dims[i]) return false;
    n *= t->dims[i];
  }
  *out = n;
  return n * qir_dtype_size(t->dtype) <= MAX_TENSOR_BYTES;
}

/* Whether n bytes may be asked of malloc: more than the machine's memory fails
 * with a message instead (an ASan build aborts on such requests, and a
 * release build would be killed by the OOM killer when it touches them). */
static bool fits_in_memory(size_t n) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return n <= (size_t)MAX_TENSOR_BYTES;
  return n <= (size_t)MAX_TENSOR_BYTES && n / (size_t)page <= (size_t)pages;
}

static bool tensor_alloc(ev *e, qir_tensor *t, const qir_type *ty) {
  int64_t n;
  char buf[128];
  t->data = NULL;
  t->type = *ty;
  if ((unsigned)ty->dtype >= QIR_DTYPE_COUNT || !numel_checked(ty, &n))
    return FAIL(e, "'%s': tensor type %s is too large or invalid", opname(e->op), type_str(ty, buf, sizeof buf));
  size_t bytes = (size_t)n * (size_t)qir_dtype_size(ty->dtype);
  t->data = fits_in_memory(bytes) ? calloc(bytes ? bytes : 1, 1) : NULL;
  if (!t->data) return FAIL(e, "'%s': out of memory allocating %zu bytes", opname(e->op), bytes);
  return true;
}

static int64_t numel(const qir_type *t) { return qir_type_numel(t); }
static size_t esize(const qir_type *t) { return (size_t)qir_dtype_size(t->dtype); }
static bool is_float(qir_dtype t) { return qir_dtype_is_float(t); }
static bool is_uns(qir_dtype t) { return qir_dtype_is_unsigned_int(t); }

static void *xmalloc(ev *e, size_t n) {
  void *p = fits_in_memory(n) ? malloc(n ? n : 1) : NULL;
  if (!p) qir_error(e->d, e->op->loc, "'%s': out of memory allocating %zu bytes", opname(e->op), n);
  return p;
}
static void *xcalloc(ev *e, size_t count, size_t size) {
  void *p = size && count > SIZE_MAX / size ? NULL : fits_in_memory(count * size) ? calloc(count ? count : 1, size ? size : 1) : NULL;
  if (!p) qir_error(e->d, e->op->loc, "'%s': out of memory", opname(e->op));
  return p;
}

/* Exact integer element access: signed values sign-extend, unsigned values
 * zero-extend (u64 keeps its bit pattern), floats truncate toward zero. */
static int64_t load_int(qir_dtype t, const void *base, int64_t i) {
  const unsigned char *p = (const unsigned char *)base + i * qir_dtype_size(t);
  switch (t) {
  case QIR_I64: { int64_t v; memcpy(&v, p, 8); return v; }
  case QIR_I32: { int32_t v; memcpy(&v, p, 4); return v; }
  case QIR_I16: { int16_t v; memcpy(&v, p, 2); return v; }
  case QIR_I8: { int8_t v; memcpy(&v, p, 1); return v; }
  case QIR_U64: { uint64_t v; memcpy(&v, p, 8); return (int64_t)v; }
  case QIR_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
  case QIR_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
  case QIR_U8: return *p;
  case QIR_BOOL: return *p != 0;
  default: {
    double v = qir_load_elem(t, base, i);
    if (isnan(v)) return 0;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    return (int64_t)v;
  }
  }
}

static double int_to_double(int64_t v, bool uns) { return uns ? (double)(uint64_t)v : (double)v; }

/* Stores an integer: integer dtypes wrap (two's complement, as C casts do),
 * bool is v != 0, floats round.  `uns` says how to read v for floats. */
static void store_int(qir_dtype t, void *base, int64_t i, int64_t v, bool uns) {
  unsigned char *p = (unsigned char *)base + i * qir_dtype_size(t);
  uint64_t u = (uint64_t)v;
  switch (t) {
  case QIR_I64: case QIR_U64: memcpy(p, &u, 8); break;
  case QIR_I32: case QIR_U32: { uint32_t x = (uint32_t)u; memcpy(p, &x, 4); break; }
  case QIR_I16: case QIR_U16: { uint16_t x = (uint16_t)u; memcpy(p, &x, 2); break; }
  case QIR_I8: case QIR_U8: *p = (unsigned char)u; break;
  case QIR_BOOL: *p = v != 0; break;
  default: qir_store_elem(t, base, i, int_to_double(v, uns)); break;
  }
}

/* Loads a whole tensor as doubles (malloc'd). */
static double *load_f64(ev *e, const qir_tensor *t) {
  int64_t n = numel(&t->type);
  double *p = xmalloc(e, (size_t)n * sizeof *p);
  if (!p) return NULL;
  if (t->type.dtype == QIR_F32) {
    const float *f = t->data;
    for (int64_t i = 0; i < n; i++) p[i] = f[i];
  } else if (t->type.dtype == QIR_F64) {
    memcpy(p, t->data, (size_t)n * sizeof *p);
  } else if (!is_float(t->type.dtype)) {
    bool u = is_uns(t->type.dtype);
    for (int64_t i = 0; i < n; i++) p[i] = int_to_double(load_int(t->type.dtype, t->data, i), u);
  } else {
    for (int64_t i = 0; i < n; i++) p[i] = qir_load_elem(t->type.dtype, t->data, i);
  }
  return p;
}

/* Stores doubles into a tensor of any dtype (rounding once). */
static void store_f64(qir_tensor *t, const double *v) {
  int64_t n = numel(&t->type);
  if (t->type.dtype == QIR_F32) {
    float *f = t->data;
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
  } else if (t->type.dtype == QIR_F64) {
    memcpy(t->data, v, (size_t)n * sizeof *v);
  } else {
    for (int64_t i = 0; i < n; i++) qir_store_elem(t->type.dtype, t->data, i, v[i]);
  }
}

static int64_t *load_i64(ev *e, const qir_tensor *t) {
  int64_t n = numel(&t->type);
  int64_t *p = xmalloc(e, (size_t)n * sizeof *p);
  if (!p) return NULL;
  for (int64_t i = 0; i < n; i++) p[i] = load_int(t->type.dtype, t->data, i);
  return p;
}

static void store_i64(qir_tensor *t, const int64_t *v, bool uns) {
  int64_t n = numel(&t->type);
  for (int64_t i = 0; i < n; i++) store_int(t->type.dtype, t->data, i, v[i], uns);
}

/* Row-major strides of a type. */
static void strides_of(const qir_type *t, int64_t *st) {
  int64_t s = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    st[i] = s;
    s *= t->dims[i];
  }
}

/* Advances a multi-index in row-major order; false after the last one. */
static bool next_index(int64_t *idx, const int64_t *dims, int rank) {
  for (int i = rank - 1; i >= 0; i--) {
    if (++idx[i] < dims[i]) return true;
    idx[i] = 0;
  }
  return false;
}

/* Whether `in` broadcasts (numpy rules, right-aligned) to `out`. */
static bool broadcasts_to(const qir_type *in, const qir_type *out) {
  if (in->rank > out->rank) return false;
  for (int i = 0; i < in->rank; i++) {
    int64_t a = in->dims[in->rank - 1 - i], b = out->dims[out->rank - 1 - i];
    if (a != b && a != 1) return false;
  }
  return true;
}

/* For every element of `out` (row-major), the flat index of the element of
 * `in` that broadcasts to it.  `in` must broadcast to `out`. */
static int64_t *bcast_index(ev *e, const qir_type *in, const qir_type *out) {
  int64_t n = numel(out);
  int64_t *map = xmalloc(e, (size_t)n * sizeof *map);
  if (!map) return NULL;
  int64_t ist[QIR_MAX_RANK] = {0}, st[QIR_MAX_RANK] = {0}, idx[QIR_MAX_RANK] = {0};
  strides_of(in, ist);
  int off = out->rank - in->rank;
  for (int i = 0; i < out->rank; i++) {
    int j = i - off;
    st[i] = (j >= 0 && in->dims[j] != 1) ? ist[j] : 0;
  }
  if (n == 0) return map;
  int64_t flat = 0;
  for (int64_t k = 0; k < n; k++) {
    map[k] = flat;
    for (int i = out->rank - 1; i >= 0; i--) {
      if (++idx[i] < out->dims[i]) {
        flat += st[i];
        break;
      }
      flat -= st[i] * (idx[i] - 1);
      idx[i] = 0;
    }
  }
  return map;
}

static double *expand_f64(ev *e, const qir_tensor *t, const qir_type *out) {
  double *src = load_f64(e, t);
  if (!src) return NULL;
  if (qir_type_numel(&t->type) == numel(out) && t->type.rank == out->rank) {
    bool same = true;
    for (int i = 0; i < out->rank; i++) same = same && t->type.dims[i] == out->dims[i];
    if (same) return src;
  }
  int64_t *map = bcast_index(e, &t->type, out);
  double *dst = map ? xmalloc(e, (size_t)numel(out) * sizeof *dst) : NULL;
  if (dst)
    for (int64_t k = 0; k < numel(out); k++) dst[k] = src[map[k]];
  free(map);
  free(src);
  return dst;
}

static int64_t *expand_i64(ev *e, const qir_tensor *t, const qir_type *out) {
  int64_t *map = bcast_index(e, &t->type, out);
  int64_t *dst = map ? xmalloc(e, (size_t)numel(out) * sizeof *dst) : NULL;
  if (dst)
    for (int64_t k = 0; k < numel(out); k++) dst[k] = load_int(t->type.dtype, t->data, map[k]);
  free(map);
  return dst;
}

static bool check_bcast(ev *e, const qir_tensor *in, const qir_type *out, int which) {
  char a[128], b[128];
  if (!broadcasts_to(&in->type, out))
    return FAIL(e, "'%s': operand %d of type %s does not broadcast to the result type %s", opname(e->op), which,
                type_str(&in->type, a, sizeof a), type_str(out, b, sizeof b));
  return true;
}

static bool same_shape(const qir_type *a, const qir_type *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static bool check_same_shape(ev *e, const qir_type *a, const qir_type *b, const char *what) {
  char x[128], y[128];
  if (!same_shape(a, b))
    return FAIL(e, "'%s': %s: shapes %s and %s differ", opname(e->op), what, type_str(a, x, sizeof x),
                type_str(b, y, sizeof y));
  return true;
}

static int64_t attr_int(ev *e, const char *k, int64_t dflt) { return qir_op_attr_int(e->op, k, dflt); }
static double attr_f(ev *e, const char *k, double dflt) { return qir_op_attr_float(e->op, k, dflt); }
static const char *attr_s(ev *e, const char *k, const char *dflt) { return qir_op_attr_str(e->op, k, dflt); }

/* Reads an integer-list attribute into out[cap]; missing gives `dflt` for
 * every entry.  Fails when present with the wrong length. */
static bool attr_ints_n(ev *e, const char *k, int64_t *out, int n, int64_t dflt) {
  for (int i = 0; i < n; i++) out[i] = dflt;
  if (!qir_op_attr(e->op, k)) return true;
  int64_t tmp[2 * QIR_MAX_RANK + 2];
  int got = qir_op_attr_ints(e->op, k, tmp, 2 * QIR_MAX_RANK + 2);
  if (got != n) return FAIL(e, "'%s': attribute '%s' must be a list of %d integers", opname(e->op), k, n);
  memcpy(out, tmp, sizeof *out * (size_t)n);
  return true;
}

static bool check_axis(ev *e, int64_t axis, int rank, const char *what) {
  if (axis < 0 || axis >= rank)
    return FAIL(e, "'%s': %s %lld is out of range for rank %d", opname(e->op), what, (long long)axis, rank);
  return true;
}

/* Axis attribute, negative values counted from the end. */
static bool get_axis(ev *e, const char *k, int64_t dflt, int rank, int64_t *axis) {
  int64_t a = attr_int(e, k, dflt);
  if (a < 0) a += rank;
  *axis = a;
  return check_axis(e, a, rank, k);
}

/* ------------------------------------------------------------ elementwise */

static double sigmoid(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }
static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double signum(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; }  /* keeps NaN and -0 */
/* round half to even, as ONNX Round (the default rounding mode; keeps -0) */
static double round_even(double x) { return nearbyint(x); }
static double fmax_nan(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double fmin_nan(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }

static bool unary_float(ev *e, double *v, int64_t n) {
  const qir_op *op = e->op;
  switch (op->code) {
  case QIR_OP_NEG: for (int64_t i = 0; i < n; i++) v[i] = -v[i]; break;
  case QIR_OP_ABS: for (int64_t i = 0; i < n; i++) v[i] = fabs(v[i]); break;
  case QIR_OP_EXP: for (int64_t i = 0; i < n; i++) v[i] = exp(v[i]); break;
  case QIR_OP_LOG: for (int64_t i = 0; i < n; i++) v[i] = log(v[i]); break;
  case QIR_OP_SQRT: for (int64_t i = 0; i < n; i++) v[i] = sqrt(v[i]); break;
  case QIR_OP_RECIPROCAL: for (int64_t i = 0; i < n; i++) v[i] = 1 / v[i]; break;
  case QIR_OP_SIGMOID: for (int64_t i = 0; i < n; i++) v[i] = sigmoid(v[i]); break;
  case QIR_OP_TANH: for (int64_t i = 0; i < n; i++) v[i] = tanh(v[i]); break;
  case QIR_OP_RELU: for (int64_t i = 0; i < n; i++) v[i] = v[i] > 0 ? v[i] : (isnan(v[i]) ? v[i] : 0); break;
  case QIR_OP_ERF: for (int64_t i = 0; i < n; i++) v[i] = erf(v[i]); break;
  case QIR_OP_CEIL: for (int64_t i = 0; i < n; i++) v[i] = ceil(v[i]); break;
  case QIR_OP_FLOOR: for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]); break;
  case QIR_OP_ROUND: for (int64_t i = 0; i < n; i++) v[i] = round_even(v[i]); break;
  case QIR_OP_SIN: for (int64_t i = 0; i < n; i++) v[i] = sin(v[i]); break;
  case QIR_OP_COS: for (int64_t i = 0; i < n; i++) v[i] = cos(v[i]); break;
  case QIR_OP_ASIN: for (int64_t i = 0; i < n; i++) v[i] = asin(v[i]); break;
  case QIR_OP_ACOS: for (int64_t i = 0; i < n; i++) v[i] = acos(v[i]); break;
  case QIR_OP_ATAN: for (int64_t i = 0; i < n; i++) v[i] = atan(v[i]); break;
  case QIR_OP_SINH: for (int64_t i = 0; i < n; i++) v[i] = sinh(v[i]); break;
  case QIR_OP_COSH: for (int64_t i = 0; i < n; i++) v[i] = cosh(v[i]); break;
  case QIR_OP_ASINH: for (int64_t i = 0; i < n; i++) v[i] = asinh(v[i]); break;
  case QIR_OP_ACOSH: for (int64_t i = 0; i < n; i++) v[i] = acosh(v[i]); break;
  case QIR_OP_ATANH: for (int64_t i = 0; i < n; i++) v[i] = atanh(v[i]); break;
  case QIR_OP_SIGN: for (int64_t i = 0; i < n; i++) v[i] = signum(v[i]); break;
  case QIR_OP_NOT: for (int64_t i = 0; i < n; i++) v[i] = v[i] == 0; break;
  case QIR_OP_ISNAN: for (int64_t i = 0; i < n; i++) v[i] = isnan(v[i]) ? 1 : 0; break;
  case QIR_OP_LEAKY_RELU: {
    double a = attr_f(e, "alpha", 0.01);
    for (int64_t i = 0; i < n; i++) v[i] = v[i] < 0 ? a * v[i] : v[i];
    break;
  }
  case QIR_OP_ELU: {
    double a = attr_f(e, "alpha", 1.0);
    for (int64_t i = 0; i < n; i++) v[i] = v[i] < 0 ? a * (exp(v[i]) - 1) : v[i];
    break;
  }
  case QIR_OP_SELU: {
    double a = attr_f(e, "alpha", 1.67326319217681884765625), g = attr_f(e, "gamma", 1.05070102214813232421875);
    for (int64_t i = 0; i < n; i++) v[i] = v[i] <= 0 ? g * (a * exp(v[i]) - a) : g * v[i];
    break;
  }
  case QIR_OP_HARD_SIGMOID: {
    double a = attr_f(e, "alpha", 0.2), b = attr_f(e, "beta", 0.5);
    for (int64_t i = 0; i < n; i++) v[i] = fmax_nan(0, fmin_nan(1, a * v[i] + b)); /* NaN stays NaN */
    break;
  }
  case QIR_OP_HARD_SWISH:
    for (int64_t i = 0; i < n; i++) v[i] = v[i] * fmax_nan(0, fmin_nan(1, v[i] / 6 + 0.5));
    break;
  case QIR_OP_SOFTPLUS: for (int64_t i = 0; i < n; i++) v[i] = softplus(v[i]); break;
  case QIR_OP_GELU: {
    const char *approx = attr_s(e, "approximate", "none");
    if (strcmp(approx, "tanh") == 0) {
      double c = sqrt(2 / 3.14159265358979323846);
      for (int64_t i = 0; i < n; i++) v[i] = 0.5 * v[i] * (1 + tanh(c * (v[i] + 0.044715 * v[i] * v[i] * v[i])));
    } else if (strcmp(approx, "none") == 0) {
      for (int64_t i = 0; i < n; i++) v[i] = 0.5 * v[i] * (1 + erf(v[i] / sqrt(2)));
    } else {
      return FAIL(e, "'gelu': unknown approximate='%s' (none or tanh)", approx);
    }
    break;
  }
  default: return FAIL(e, "'%s': no floating-point evaluation", opname(op));
  }
  return true;
}

/* Integer forms of the unary ops that keep integers exact. */
static bool unary_int_ok(qir_opcode c) {
  switch (c) {
  case QIR_OP_NEG: case QIR_OP_ABS: case QIR_OP_SIGN: case QIR_OP_RELU: case QIR_OP_NOT: case QIR_OP_CEIL:
  case QIR_OP_FLOOR: case QIR_OP_ROUND: case QIR_OP_ISNAN: case QIR_OP_BITWISE_NOT: return true;
  default: return false;
  }
}

static void unary_int(qir_opcode c, int64_t *v, int64_t n, bool uns) {
  for (int64_t i = 0; i < n; i++) {
    int64_t x = v[i];
    switch (c) {
    case QIR_OP_NEG: x = (int64_t)(0 - (uint64_t)x); break;
    case QIR_OP_ABS: x = (uns || x >= 0) ? x : (int64_t)(0 - (uint64_t)x); break;
    case QIR_OP_SIGN: x = uns ? (x != 0) : (x > 0) - (x < 0); break;
    case QIR_OP_RELU: x = (uns || x > 0) ? x : 0; break;
    case QIR_OP_NOT: x = x == 0; break;
    case QIR_OP_ISNAN: x = 0; break;
    case QIR_OP_BITWISE_NOT: x = (int64_t)~(uint64_t)x; break; /* the store keeps the type's bits */
    default: break;
    }
    v[i] = x;
  }
}

static bool eval_unary(ev *e, const qir_tensor *a, qir_tensor *r) {
  if (!check_same_shape(e, &a->type, &r->type, "operand and result")) return false;
  int64_t n = numel(&r->type);
  qir_dtype dt = a->type.dtype;
  if (e->op->code == QIR_OP_IDENTITY && dt == r->type.dtype) {
    memcpy(r->data, a->data, (size_t)n * esize(&r->type));
    return true;
  }
  if (e->op->code == QIR_OP_CAST || e->op->code == QIR_OP_IDENTITY) {
    qir_dtype to = r->type.dtype;
    if (qir_dtype_is_narrow(to)) { /* float8 honours saturate; i4/u4/i2/u2 wrap */
      bool sat = attr_int(e, "saturate", 1) != 0;
      for (int64_t i = 0; i < n; i++) {
        double v = is_float(dt) ? qir_load_elem(dt, a->data, i) : int_to_double(load_int(dt, a->data, i), is_uns(dt));
        ((uint8_t *)r->data)[i] = qir_narrow_from_double(to, v, sat);
      }
    } else if (!is_float(dt)) {
      bool u = is_uns(dt);
      for (int64_t i = 0; i < n; i++) store_int(to, r->data, i, load_int(dt, a->data, i), u);
    } else if (!is_float(to) && to != QIR_BOOL) {
      /* float -> integer truncates toward zero; out-of-range saturates, negatives
       * into unsigned types too (ONNX leaves it undefined), as compute casts do */
      for (int64_t i = 0; i < n; i++) qir_store_elem(to, r->data, i, trunc(qir_load_elem(dt, a->data, i)));
    } else {
      for (int64_t i = 0; i < n; i++) qir_store_elem(to, r->data, i, qir_load_elem(dt, a->data, i));
    }
    return true;
  }
  if (!is_float(dt) && unary_int_ok(e->op->code)) {
    int64_t *v = load_i64(e, a);
    if (!v) return false;
    unary_int(e->op->code, v, n, is_uns(dt));
    store_i64(r, v, is_uns(dt));
    free(v);
    return true;
  }
  double *v = load_f64(e, a);
  if (!v) return false;
  bool ok = unary_float(e, v, n);
  if (ok) store_f64(r, v);
  free(v);
  return ok;
}

/* Clip: min/max are scalars (any shape of one element accepted). */
static bool eval_clip(ev *e, const qir_tensor *x, const qir_tensor *lo, const qir_tensor *hi, qir_tensor *r) {
  if (!check_same_shape(e, &x->type, &r->type, "operand and result")) return false;
  if (numel(&lo->type) != 1 || numel(&hi->type) != 1) return FAIL(e, "'clip': min and max must be scalars");
  int64_t n = numel(&r->type);
  qir_dtype dt = x->type.dtype;
  if (!is_float(dt)) {
    bool u = is_uns(dt);
    int64_t l = load_int(lo->type.dtype, lo->data, 0), h = load_int(hi->type.dtype, hi->data, 0);
    for (int64_t i = 0; i < n; i++) {
      int64_t v = load_int(dt, x->data, i);
      if (u ? (uint64_t)v < (uint64_t)l : v < l) v = l;
      if (u ? (uint64_t)v > (uint64_t)h : v > h) v = h;
      store_int(r->type.dtype, r->data, i, v, u);
    }
    return true;
  }
  double l = qir_load_elem(lo->type.dtype, lo->data, 0), h = qir_load_elem(hi->type.dtype, hi->data, 0);
  double *v = load_f64(e, x);
  if (!v) return false;
  for (int64_t i = 0; i < n; i++) v[i] = fmin_nan(fmax_nan(v[i], l), h); /* np.clip: NaN bounds give NaN */
  store_f64(r, v);
  free(v);
  return true;
}

/* Binary op on int64 (u64 read as unsigned when `u`).  False on division by zero. */
static bool binary_int(qir_opcode c, int64_t a, int64_t b, bool u, int64_t fmod_attr, int64_t *out) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (c) {
  case QIR_OP_ADD: case QIR_OP_SUM: *out = (int64_t)(ua + ub); return true;
  case QIR_OP_SUB: *out = (int64_t)(ua - ub); return true;
  case QIR_OP_MUL: *out = (int64_t)(ua * ub); return true;
  case QIR_OP_DIV:
    if (b == 0) return false;
    if (u) *out = (int64_t)(ua / ub);
    else if (a == INT64_MIN && b == -1) *out = INT64_MIN;
    else *out = a / b; /* C truncates toward zero, as ONNX integer Div */
    return true;
  case QIR_OP_MOD:
    if (b == 0) return false;
    if (u) { *out = (int64_t)(ua % ub); return true; }
    if (b == -1) { *out = 0; return true; }
    *out = a % b;
    if (!fmod_attr && *out != 0 && ((*out < 0) != (b < 0))) *out += b; /* sign of the divisor */
    return true;
  case QIR_OP_POW: {
    /* exact for non-negative exponents; negative ones (u: the exponent's type
     * is unsigned) go through double, saturating (0^-1 is inf) */
    if (!u && b < 0) {
      double p = pow((double)a, (double)b);
      *out = isnan(p) ? 0 : p >= 0x1p63 ? INT64_MAX : p < -0x1p63 ? INT64_MIN : (int64_t)p;
      return true;
    }
    uint64_t r = 1, base = ua, ex = ub;
    while (ex) {
      if (ex & 1) r *= base;
      base *= base;
      ex >>= 1;
    }
    *out = (int64_t)r;
    return true;
  }
  case QIR_OP_MAX: *out = (u ? ua > ub : a > b) ? a : b; return true;
  case QIR_OP_MIN: *out = (u ? ua < ub : a < b) ? a : b; return true;
  case QIR_OP_EQUAL: *out = a == b; return true;
  case QIR_OP_LESS: *out = u ? ua < ub : a < b; return true;
  case QIR_OP_LESS_EQUAL: *out = u ? ua <= ub : a <= b; return true;
  case QIR_OP_GREATER: *out = u ? ua > ub : a > b; return true;
  case QIR_OP_GREATER_EQUAL: *out = u ? ua >= ub : a >= b; return true;
  case QIR_OP_AND: *out = a && b; return true;
  case QIR_OP_OR: *out = a || b; return true;
  case QIR_OP_XOR: *out = (a != 0) != (b != 0); return true;
  case QIR_OP_PRELU: *out = (!u && a < 0) ? (int64_t)(ua * ub) : a; return true;
  case QIR_OP_BITWISE_AND: *out = (int64_t)(ua & ub); return true;
  case QIR_OP_BITWISE_OR: *out = (int64_t)(ua | ub); return true;
  case QIR_OP_BITWISE_XOR: *out = (int64_t)(ua ^ ub); return true;
  case QIR_OP_BIT_SHIFT: /* shift amounts past 63 shift everything out */
    *out = ub > 63 ? 0 : (int64_t)(fmod_attr ? ua >> ub : ua << ub);
    return true;
  default: *out = 0; return true;
  }
}

static double binary_float(qir_opcode c, double a, double b, int64_t fmod_attr) {
  switch (c) {
  case QIR_OP_ADD: case QIR_OP_SUM: return a + b;
  case QIR_OP_SUB: return a - b;
  case QIR_OP_MUL: return a * b;
  case QIR_OP_DIV: return a / b;
  case QIR_OP_MOD: {
    /* fmod=0 is numpy's np.mod (ONNX's reference): the divisor's sign, zero included */
    double r = fmod(a, b);
    if (fmod_attr) return r;
    if (r == 0) return b < 0 ? -0.0 : 0.0;
    if ((r < 0) != (b < 0)) r += b;
    return r;
  }
  case QIR_OP_POW: return pow(a, b);
  case QIR_OP_MAX: return fmax_nan(a, b);
  case QIR_OP_MIN: return fmin_nan(a, b);
  case QIR_OP_EQUAL: return a == b;
  case QIR_OP_LESS: return a < b;
  case QIR_OP_LESS_EQUAL: return a <= b;
  case QIR_OP_GREATER: return a > b;
  case QIR_OP_GREATER_EQUAL: return a >= b;
  case QIR_OP_AND: return a != 0 && b != 0;
  case QIR_OP_OR: return a != 0 || b != 0;
  case QIR_OP_XOR: return (a != 0) != (b != 0);
  case QIR_OP_PRELU: return a < 0 ? a * b : a;
  default: return 0;
  }
}

/* Binary and n-ary elementwise ops with numpy broadcasting. */
static bool eval_nary(ev *e, const qir_tensor *in, int n_in, qir_tensor *r) {
  qir_opcode c = e->op->code;
  const qir_type *out = &r->type;
  int64_t n = numel(out);
  /* binary_int's mode flag: fmod for mod, right (1) or left (0) for bit_shift */
  int64_t fm = c == QIR_OP_BIT_SHIFT ? !strcmp(attr_s(e, "direction", ""), "right") : attr_int(e, "fmod", 0);
  if (c == QIR_OP_BIT_SHIFT && strcmp(attr_s(e, "direction", ""), "right") && strcmp(attr_s(e, "direction", ""), "left"))
    return FAIL(e, "'bit_shift': direction must be left or right");
  for (int k = 0; k < n_in; k++) {
    /* prelu's slope broadcasts to x (unidirectional) */
    if (!check_bcast(e, &in[k], out, k)) return false;
  }
  /* Integer path when every operand is an integer or bool (pow: when the base is). */
  bool int_mode = true;
  for (int k = 0; k < n_in; k++) int_mode = int_mode && !is_float(in[k].type.dtype);
  if (int_mode) {
    /* integer mean: the wrapping sum divided by the count, truncating (as ONNX's
     * reference: integer adds, then the division cast back) */
    bool u = is_uns(in[0].type.dtype), ub = c == QIR_OP_POW ? is_uns(in[1].type.dtype) : u;
    qir_opcode cc = c == QIR_OP_MEAN ? QIR_OP_ADD : c;
    int64_t *acc = expand_i64(e, &in[0], out);
    if (!acc) return false;
    if (n_in == 1 && c != QIR_OP_MAX && c != QIR_OP_MIN && c != QIR_OP_SUM && c != QIR_OP_MEAN) {
      free(acc);
      return FAIL(e, "'%s' needs two operands", opname(e->op));
    }
    for (int k = 1; k < n_in; k++) {
      int64_t *b = expand_i64(e, &in[k], out);
      if (!b) { free(acc); return false; }
      for (int64_t i = 0; i < n; i++)
        if (!binary_int(cc, acc[i], b[i], ub, fm, &acc[i])) {
          free(b);
          free(acc);
          return FAIL(e, "'%s': integer division by zero", opname(e->op));
        }
      free(b);
    }
    if (c == QIR_OP_MEAN)
      for (int64_t i = 0; i < n; i++) acc[i] = u ? (int64_t)((uint64_t)acc[i] / (uint64_t)n_in) : acc[i] / n_in;
    store_i64(r, acc, u);
    free(acc);
    return true;
  }
  double *acc = expand_f64(e, &in[0], out);
  if (!acc) return false;
  for (int k = 1; k < n_in; k++) {
    double *b = expand_f64(e, &in[k], out);
    if (!b) { free(acc); return false; }
    qir_opcode cc = c == QIR_OP_MEAN ? QIR_OP_ADD : c;
    for (int64_t i = 0; i < n; i++) acc[i] = binary_float(cc, acc[i], b[i], fm);
    free(b);
  }
  if (c == QIR_OP_MEAN)
    for (int64_t i = 0; i < n; i++) acc[i] /= n_in;
  store_f64(r, acc);
  free(acc);
  return true;
}

/* where %cond, %x, %y: a byte copy from the chosen side. */
static bool eval_where(ev *e, const qir_tensor *in, qir_tensor *r) {
  for (int k = 0; k < 3; k++)
    if (!check_bcast(e, &in[k], &r->type, k)) return false;
  if (in[1].type.dtype != r->type.dtype || in[2].type.dtype != r->type.dtype)
    return FAIL(e, "'where': x and y must have the result's element type");
  int64_t n = numel(&r->type);
  int64_t *mc = bcast_index(e, &in[0].type, &r->type), *mx = bcast_index(e, &in[1].type, &r->type),
          *my = bcast_index(e, &in[2].type, &r->type);
  bool ok = mc && mx && my;
  size_t es = esize(&r->type);
  if (ok)
    for (int64_t i = 0; i < n; i++) {
      bool cnd = load_int(in[0].type.dtype, in[0].data, mc[i]) != 0;
      const qir_tensor *s = cnd ? &in[1] : &in[2];
      memcpy((char *)r->data + i * es, (const char *)s->data + (cnd ? mx[i] : my[i]) * es, es);
    }
  free(mc);
  free(mx);
  free(my);
  return ok;
}

/* ------------------------------------------------------------ reductions */

/* Which axes a reduction reduces: the `axes` attribute or all. */
static bool reduce_axes(ev *e, int rank, bool *red) {
  int64_t axes[QIR_MAX_RANK + 1];
  for (int i = 0; i < rank; i++) red[i] = false;
  int n = qir_op_attr(e->op, "axes") ? qir_op_attr_ints(e->op, "axes", axes, QIR_MAX_RANK + 1) : -2;
  if (n == -1 || n > QIR_MAX_RANK) return FAIL(e, "'%s': 'axes' must be a list of integers", opname(e->op));
  if (n == -2) {
    for (int i = 0; i < rank; i++) red[i] = true;
    return true;
  }
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (!check_axis(e, a, rank, "reduction axis")) return false;
    red[a] = true;
  }
  return true;
}

/* Checks the result shape of a reduction (keepdims or not) and gives, for
 * every input axis, the stride of its position in the result (0 if reduced). */
static bool reduce_layout(ev *e, const qir_type *in, const qir_type *out, const bool *red, int64_t *ost) {
  qir_type want = *in;
  int64_t keep = attr_int(e, "keepdims", 1);
  want.rank = 0;
  for (int i = 0; i < in->rank; i++) {
    if (red[i] && !keep) continue;
    want.dims[want.rank++] = red[i] ? 1 : in->dims[i];
  }
  want.dtype = out->dtype;
  if (!check_same_shape(e, &want, out, "expected result shape and result type")) return false;
  int64_t s = 1;
  for (int i = in->rank - 1; i >= 0; i--) {
    ost[i] = red[i] ? 0 : s;
    if (!red[i]) s *= in->dims[i];
  }
  return true;
}

/* For every input element (row-major), the flat index of its result element. */
static int64_t *reduce_map(ev *e, const qir_type *in, const int64_t *ost) {
  int64_t n = numel(in), idx[QIR_MAX_RANK] = {0}, o = 0;
  int64_t *map = xmalloc(e, (size_t)n * sizeof *map);
  if (!map) return NULL;
  for (int64_t i = 0; i < n; i++) {
    map[i] = o;
    for (int a = in->rank - 1; a >= 0; a--) {
      if (++idx[a] < in->dims[a]) { o += ost[a]; break; }
      o -= ost[a] * (idx[a] - 1);
      idx[a] = 0;
    }
  }
  return map;
}

static bool eval_reduce(ev *e, const qir_tensor *x, qir_tensor *r) {
  bool red[QIR_MAX_RANK];
  int64_t ost[QIR_MAX_RANK];
  if (!reduce_axes(e, x->type.rank, red) || !reduce_layout(e, &x->type, &r->type, red, ost)) return false;
  qir_opcode c = e->op->code;
  int64_t no = numel(&r->type), ni = numel(&x->type);
  int64_t count = no ? ni / no : 0;
  qir_dtype dt = x->type.dtype;
  int64_t *omap = reduce_map(e, &x->type, ost);
  if (!omap) return false;
  if (!is_float(dt) && c != QIR_OP_REDUCE_MEAN && c != QIR_OP_REDUCE_L2) {
    bool u = is_uns(dt);
    int64_t *acc = xmalloc(e, (size_t)no * sizeof *acc);
    bool *seen = xcalloc(e, (size_t)no, 1);
    if (!acc || !seen) { free(acc); free(seen); free(omap); return false; }
    for (int64_t i = 0; i < no; i++) acc[i] = c == QIR_OP_REDUCE_PROD ? 1 : 0;
    for (int64_t in_flat = 0; in_flat < ni; in_flat++) {
      int64_t out_flat = omap[in_flat];
      int64_t v = load_int(dt, x->data, in_flat), *a = &acc[out_flat];
      switch (c) {
      case QIR_OP_REDUCE_SUM: *a = (int64_t)((uint64_t)*a + (uint64_t)v); break;
      case QIR_OP_REDUCE_PROD: *a = (int64_t)((uint64_t)*a * (uint64_t)v); break;
      case QIR_OP_REDUCE_MAX: if (!seen[out_flat] || (u ? (uint64_t)v > (uint64_t)*a : v > *a)) *a = v; break;
      default: if (!seen[out_flat] || (u ? (uint64_t)v < (uint64_t)*a : v < *a)) *a = v; break;
      }
      seen[out_flat] = true;
    }
    store_i64(r, acc, u);
    free(acc);
    free(seen);
    free(omap);
    return true;
  }
  double *xv = load_f64(e, x), *acc = xmalloc(e, (size_t)no * sizeof *acc);
  if (!xv || !acc) { free(xv); free(acc); free(omap); return false; }
  double init = c == QIR_OP_REDUCE_PROD ? 1 : c == QIR_OP_REDUCE_MAX ? -INFINITY : c == QIR_OP_REDUCE_MIN ? INFINITY : 0;
  for (int64_t i = 0; i < no; i++) acc[i] = init;
  for (int64_t in_flat = 0; in_flat < ni; in_flat++) {
    double v = xv[in_flat], *a = &acc[omap[in_flat]];
    switch (c) {
    case QIR_OP_REDUCE_SUM: case QIR_OP_REDUCE_MEAN: *a += v; break;
    case QIR_OP_REDUCE_PROD: *a *= v; break;
    case QIR_OP_REDUCE_MAX: *a = fmax_nan(*a, v); break;
    case QIR_OP_REDUCE_MIN: *a = fmin_nan(*a, v); break;
    default: *a += v * v; break; /* L2 */
    }
  }
  free(omap);
  if (c == QIR_OP_REDUCE_MEAN)
    for (int64_t i = 0; i < no; i++) acc[i] /= (double)count;
  if (c == QIR_OP_REDUCE_L2)
    for (int64_t i = 0; i < no; i++) acc[i] = sqrt(acc[i]);
  store_f64(r, acc);
  free(xv);
  free(acc);
  return true;
}

/* Splits a shape around `axis` into outer * len * inner. */
static void around_axis(const qir_type *t, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= t->dims[i];
  for (int i = axis + 1; i < t->rank; i++) *inner *= t->dims[i];
  *len = t->dims[axis];
}

static bool eval_argmax(ev *e, const qir_tensor *x, qir_tensor *r) {
  int64_t axis;
  if (!get_axis(e, "axis", 0, x->type.rank, &axis)) return false;
  bool red[QIR_MAX_RANK] = {false};
  int64_t ost[QIR_MAX_RANK];
  red[axis] = true;
  if (!reduce_layout(e, &x->type, &r->type, red, ost)) return false;
  bool is_max = e->op->code == QIR_OP_ARGMAX, last = attr_int(e, "select_last_index", 0) != 0;
  int64_t outer, len, inner;
  around_axis(&x->type, (int)axis, &outer, &len, &inner);
  double *v = load_f64(e, x);
  int64_t *res = xmalloc(e, (size_t)(outer * inner) * sizeof *res);
  if (!v || !res) { free(v); free(res); return false; }
  bool ints = !is_float(x->type.dtype) && (x->type.dtype == QIR_I64 || x->type.dtype == QIR_U64);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t best = 0;
      for (int64_t k = 1; k < len; k++) {
        int64_t pb = (o * len + best) * inner + in, pk = (o * len + k) * inner + in;
        int cmp;
        if (ints) { /* exact for 64-bit integers */
          int64_t a = load_int(x->type.dtype, x->data, pk), b = load_int(x->type.dtype, x->data, pb);
          bool u = is_uns(x->type.dtype);
          cmp = (u ? (uint64_t)a > (uint64_t)b : a > b) ? 1 : a == b ? 0 : -1;
          if (!is_max) cmp = -cmp;
        } else if (isnan(v[pk]) || isnan(v[pb])) {
          /* NaN is the extreme of both, as numpy's argmax/argmin (ONNX's reference) */
          cmp = isnan(v[pk]) && isnan(v[pb]) ? 0 : isnan(v[pk]) ? 1 : -1;
        } else {
          cmp = v[pk] > v[pb] ? 1 : v[pk] == v[pb] ? 0 : -1;
          if (!is_max) cmp = -cmp;
        }
        if (cmp > 0 || (cmp == 0 && last)) best = k;
      }
      res[o * inner + in] = best;
    }
  store_i64(r, res, false);
  free(v);
  free(res);
  return true;
}

static bool eval_softmax(ev *e, const qir_tensor *x, qir_tensor *r) {
  int64_t axis;
  if (!check_same_shape(e, &x->type, &r->type, "operand and result")) return false;
  if (!get_axis(e, "axis", x->type.rank - 1, x->type.rank, &axis)) return false;
  int64_t outer, len, inner;
  around_axis(&x->type, (int)axis, &outer, &len, &inner);
  double *v = load_f64(e, x);
  if (!v) return false;
  bool logsm = e->op->code == QIR_OP_LOG_SOFTMAX;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      double *p = v + o * len * inner + in;
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < len; k++) mx = fmax(mx, p[k * inner]);
      for (int64_t k = 0; k < len; k++) sum += exp(p[k * inner] - mx);
      for (int64_t k = 0; k < len; k++)
        p[k * inner] = logsm ? p[k * inner] - mx - log(sum) : exp(p[k * inner] - mx) / sum;
    }
  store_f64(r, v);
  free(v);
  return true;
}

/* attention: per (batch, query head, query), the scores over the keys, their
 * softmax and the weighted sum of values, in double.  Layout bshd swaps the
 * head and sequence axes of q, k, v and y; causal hides key j from query i
 * unless j <= i + (T - S). */
static bool eval_attention(ev *e, const qir_tensor *q, const qir_tensor *k, const qir_tensor *v, const qir_tensor *b,
                           qir_tensor *r) {
  const int64_t *qd = q->type.dims, *kd = k->type.dims, *vd = v->type.dims;
  bool bshd = qir_attention_bshd(e->op), causal = attr_int(e, "causal", 0) != 0;
  int h_ax = bshd ? 2 : 1, s_ax = bshd ? 1 : 2;
  int64_t B = qd[0], H = qd[h_ax], S = qd[s_ax], D = qd[3], Hkv = kd[h_ax], T = kd[s_ax], Dv = vd[3], G = H / Hkv;
  /* element strides of the head and sequence axes of q/y (per D or Dv) and k/v */
  int64_t qh = bshd ? 1 : S, qs = bshd ? H : 1, kh = bshd ? 1 : T, ks = bshd ? Hkv : 1;
  double scale = attr_f(e, "scale", 1), cap = attr_f(e, "softcap", 0), root = sqrt(fabs(scale));
  /* the bias's strides over [B, H, S, T] (0 where it broadcasts) */
  int64_t bs[4] = {0, 0, 0, 0}, st = 1;
  for (int i = b->type.rank - 1, a = 3; i >= 0; i--, a--) {
    if (b->type.dims[i] != 1) bs[a] = st;
    st *= b->type.dims[i];
  }
  double *qv = load_f64(e, q), *kv = qv ? load_f64(e, k) : NULL, *vv = kv ? load_f64(e, v) : NULL;
  double *bv = vv ? load_f64(e, b) : NULL, *s = bv ? xmalloc(e, (size_t)(T ? T : 1) * sizeof *s) : NULL;
  double *y = s ? xmalloc(e, (size_t)(numel(&r->type) ? numel(&r->type) : 1) * sizeof *y) : NULL;
  if (y) {
    for (int64_t bb = 0; bb < B; bb++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < S; i++) {
          int64_t qrow = bb * H * S + h * qh + i * qs;
          const double *qr = qv + qrow * D;
          double mx = -INFINITY, sum = 0;
          for (int64_t j = 0; j < T; j++) {
            const double *kr = kv + (bb * Hkv * T + (h / G) * kh + j * ks) * D;
            double dot = 0;
            for (int64_t d = 0; d < D; d++) dot += qr[d] * root * (kr[d] * root); /* as ONNX: Q·√scale times K·√scale */
            if (scale < 0) dot = -dot;
            if (cap > 0) dot = cap * tanh(dot / cap);
            if (causal && j > i + (T - S)) dot = -INFINITY;
            s[j] = dot + bv[bb * bs[0] + h * bs[1] + i * bs[2] + j * bs[3]];
            mx = fmax(mx, s[j]);
          }
          for (int64_t j = 0; j < T; j++) sum += exp(s[j] - mx);
          double *yr = y + qrow * Dv;
          for (int64_t d = 0; d < Dv; d++) yr[d] = 0;
          for (int64_t j = 0; j < T; j++) {
            double p = exp(s[j] - mx) / sum;
            const double *vr = vv + (bb * Hkv * T + (h / G) * kh + j * ks) * Dv;
            for (int64_t d = 0; d < Dv; d++) yr[d] += p * vr[d];
          }
        }
    store_f64(r, y);
  }
  bool ok = y != NULL;
  free(qv), free(kv), free(vv), free(bv), free(s), free(y);
  return ok;
}

static bool eval_cumsum(ev *e, const qir_tensor *x, qir_tensor *r) {
  int64_t axis;
  if (!check_same_shape(e, &x->type, &r->type, "operand and result")) return false;
  if (!get_axis(e, "axis", 0, x->type.rank, &axis)) return false;
  bool excl = attr_int(e, "exclusive", 0) != 0, rev = attr_int(e, "reverse", 0) != 0;
  int64_t outer, len, inner;
  around_axis(&x->type, (int)axis, &outer, &len, &inner);
  bool ints = !is_float(x->type.dtype), prod = e->op->code == QIR_OP_CUMPROD;
  double *v = ints ? NULL : load_f64(e, x);
  int64_t *w = ints ? load_i64(e, x) : NULL;
  if (!v && !w) return false;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      double s = prod ? 1 : 0;
      uint64_t si = prod ? 1 : 0;
      for (int64_t kk = 0; kk < len; kk++) {
        int64_t k = rev ? len - 1 - kk : kk, p = (o * len + k) * inner + in;
        if (ints) {
          uint64_t cur = (uint64_t)w[p];
          if (excl) w[p] = (int64_t)si;
          si = prod ? si * cur : si + cur;
          if (!excl) w[p] = (int64_t)si;
        } else {
          double cur = v[p];
          if (excl) v[p] = s;
          s = prod ? s * cur : s + cur;
          if (!excl) v[p] = s;
        }
      }
    }
  if (ints) store_i64(r, w, is_uns(x->type.dtype));
  else store_f64(r, v);
  free(v);
  free(w);
  return true;
}

/* top_k: a stable merge sort of each slice's indices, best first. */
typedef struct {
  const double *v;      /* values as doubles (float operands) */
  const int64_t *w;     /* values as integers (integer operands) */
  bool uns, largest;
  int64_t inner;        /* stride of the axis */
} topk_order;

/* a before b?  Equal values keep index order (the sort is stable); NaN is
 * the largest value, as numpy's sort. */
static bool topk_before(const topk_order *o, int64_t a, int64_t b) {
  int cmp;
  if (o->w) {
    int64_t x = o->w[a * o->inner], y = o->w[b * o->inner];
    cmp = (o->uns ? (uint64_t)x > (uint64_t)y : x > y) ? 1 : x == y ? 0 : -1;
  } else {
    double x = o->v[a * o->inner], y = o->v[b * o->inner];
    cmp = isnan(x) ? (isnan(y) ? 0 : 1) : isnan(y) ? -1 : x > y ? 1 : x == y ? 0 : -1;
  }
  return o->largest ? cmp > 0 : cmp < 0;
}

static void topk_sort(const topk_order *o, int64_t *idx, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2;
  topk_sort(o, idx, tmp, h);
  topk_sort(o, idx + h, tmp, n - h);
  int64_t i = 0, j = h, k = 0;
  while (i < h && j < n) tmp[k++] = topk_before(o, idx[j], idx[i]) ? idx[j++] : idx[i++];
  while (i < h) tmp[k++] = idx[i++];
  while (j < n) tmp[k++] = idx[j++];
  memcpy(idx, tmp, sizeof *idx * (size_t)n);
}

static bool eval_top_k(ev *e, const qir_tensor *x, qir_tensor *vals, qir_tensor *inds) {
  int64_t axis, outer, len, inner, k = attr_int(e, "k", -1);
  if (!get_axis(e, "axis", x->type.rank - 1, x->type.rank, &axis)) return false;
  around_axis(&x->type, (int)axis, &outer, &len, &inner);
  if (k < 0 || k > len || vals->type.dims[axis] != k) return FAIL(e, "'top_k': k = %lld does not fit the types", (long long)k);
  bool ints = !is_float(x->type.dtype);
  double *v = ints ? NULL : load_f64(e, x);
  int64_t *w = ints ? load_i64(e, x) : NULL;
  int64_t *idx = xmalloc(e, sizeof *idx * (size_t)(2 * len + 1));
  if ((!v && !w) || !idx) { free(v); free(w); free(idx); return false; }
  size_t es = esize(&x->type);
  int64_t *out_i = (int64_t *)inds->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * len * inner + in;
      topk_order ord = {v ? v + base : NULL, w ? w + base : NULL, is_uns(x->type.dtype), attr_int(e, "largest", 1) != 0, inner};
      for (int64_t i = 0; i < len; i++) idx[i] = i;
      topk_sort(&ord, idx, idx + len, len);
      for (int64_t j = 0; j < k; j++) {
        int64_t dst = (o * k + j) * inner + in;
        memcpy((char *)vals->data + (size_t)dst * es, (const char *)x->data + (size_t)(base + idx[j] * inner) * es, es);
        out_i[dst] = idx[j];
      }
    }
  free(v);
  free(w);
  free(idx);
  return true;
}

/* ------------------------------------------------------------ data movement */

/* Maps a result multi-index to the flat source index; returns false when the
 * element comes from nowhere (padding), -1 on an error already reported. */
typedef int (*src_fn)(ev *e, const int64_t *oidx, const void *ctx, int64_t *src);

/* Copies elements (as bytes, so every dtype is exact); `fill` (one element of
 * the result dtype) is used where fn returns 0. */
static bool copy_by_index(ev *e, const qir_tensor *x, qir_tensor *r, src_fn fn, const void *ctx, const void *fill) {
  if (x->type.dtype != r->type.dtype) return FAIL(e, "'%s': operand and result element types differ", opname(e->op));
  size_t es = esize(&r->type);
  int64_t n = numel(&r->type), xn = numel(&x->type), idx[QIR_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t s = 0;
    int got = fn(e, idx, ctx, &s);
    if (got < 0) return false;
    if (got && (s < 0 || s >= xn)) return FAIL(e, "'%s': internal error: source index out of range", opname(e->op));
    memcpy((char *)r->data + (size_t)i * es, got ? (const char *)x->data + (size_t)s * es : (const char *)fill, es);
    next_index(idx, r->type.dims, r->type.rank);
  }
  return true;
}

typedef struct {
  int rank;
  int64_t st[QIR_MAX_RANK];      /* source strides, per result axis */
  int64_t start[QIR_MAX_RANK];
  int64_t step[QIR_MAX_RANK];
  int64_t dims[QIR_MAX_RANK];    /* source dims, per result axis */
  int axis;
  int64_t offset;
  const char *mode;
} move_ctx;

static int src_strided(ev *e, const int64_t *o, const void *vc, int64_t *src) {
  (void)e;
  const move_ctx *c = vc;
  int64_t s = 0;
  for (int i = 0; i < c->rank; i++) s += (c->start[i] + o[i] * c->step[i]) * c->st[i];
  *src = s;
  return 1;
}

static bool eval_transpose(ev *e, const qir_tensor *x, qir_tensor *r) {
  int rank = x->type.rank;
  int64_t perm[QIR_MAX_RANK], xst[QIR_MAX_RANK];
  if (r->type.rank != rank) return FAIL(e, "'transpose': result rank differs from operand rank");
  if (qir_op_attr(e->op, "perm")) {
    if (!attr_ints_n(e, "perm", perm, rank, 0)) return false;
  } else {
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
  }
  bool used[QIR_MAX_RANK] = {false};
  strides_of(&x->type, xst);
  move_ctx c = {.rank = rank};
  for (int i = 0; i < rank; i++) {
    if (perm[i] < 0 || perm[i] >= rank || used[perm[i]]) return FAIL(e, "'transpose': 'perm' is not a permutation");
    used[perm[i]] = true;
    if (r->type.dims[i] != x->type.dims[perm[i]]) return FAIL(e, "'transpose': result shape does not match 'perm'");
    c.st[i] = xst[perm[i]];
    c.step[i] = 1;
  }
  return copy_by_index(e, x, r, src_strided, &c, NULL);
}

static bool eval_slice(ev *e, const qir_tensor *x, qir_tensor *r) {
  int rank = x->type.rank;
  move_ctx c = {.rank = rank};
  if (r->type.rank != rank) return FAIL(e, "'slice': result rank differs from operand rank");
  if (!attr_ints_n(e, "starts", c.start, rank, 0) || !attr_ints_n(e, "steps", c.step, rank, 1)) return false;
  strides_of(&x->type, c.st);
  for (int i = 0; i < rank; i++) {
    int64_t n = r->type.dims[i], L = x->type.dims[i];
    if (c.step[i] == 0) return FAIL(e, "'slice': step 0 on axis %d", i);
    if (n > 0) {
      int64_t last = c.start[i] + (n - 1) * c.step[i];
      if (c.start[i] < 0 || c.start[i] >= L || last < 0 || last >= L)
        return FAIL(e, "'slice': axis %d: %lld elements from %lld step %lld leave the operand extent %lld", i,
                    (long long)n, (long long)c.start[i], (long long)c.step[i], (long long)L);
    }
  }
  return copy_by_index(e, x, r, src_strided, &c, NULL);
}

static int src_expand(ev *e, const int64_t *o, const void *vc, int64_t *src) {
  (void)e;
  const move_ctx *c = vc; /* st: source strides right-aligned, dims: source dims */
  int64_t s = 0;
  for (int i = 0; i < c->rank; i++) s += (c->dims[i] == 1 ? 0 : o[i] % c->dims[i]) * c->st[i];
  *src = s;
  return 1;
}

/* expand (broadcast) and tile (repeat) share the index rule: source index =
 * result index mod operand extent. */
static bool eval_expand_tile(ev *e, const qir_tensor *x, qir_tensor *r) {
  int rank = r->type.rank, off = rank - x->type.rank;
  int64_t xst[QIR_MAX_RANK];
  bool tile = e->op->code == QIR_OP_TILE;
  if (off < 0 || (tile && off != 0)) return FAIL(e, "'%s': result rank is smaller than the operand's", opname(e->op));
  strides_of(&x->type, xst);
  move_ctx c = {.rank = rank};
  for (int i = 0; i < rank; i++) {
    int64_t d = i >= off ? x->type.dims[i - off] : 1, o = r->type.dims[i];
    c.dims[i] = d;
    c.st[i] = i >= off ? xst[i - off] : 0;
    bool ok = tile ? (d == 0 ? o == 0 : o % d == 0) : (d == o || d == 1);
    if (!ok) return FAIL(e, "'%s': operand extent %lld does not fit result extent %lld on axis %d", opname(e->op), (long long)d, (long long)o, i);
  }
  return copy_by_index(e, x, r, src_expand, &c, NULL);
}

static bool eval_reshape(ev *e, const qir_tensor *x, qir_tensor *r) {
  if (numel(&x->type) != numel(&r->type)) return FAIL(e, "'reshape': operand and result have different element counts");
  if (x->type.dtype != r->type.dtype) return FAIL(e, "'reshape': operand and result element types differ");
  memcpy(r->data, x->data, (size_t)numel(&r->type) * esize(&r->type));
  return true;
}

/* concat and split: every part matches the whole except on the axis, where
 * the parts' extents add up to the whole's.  part/whole name them in errors. */
static bool check_axis_parts(ev *e, const char *opname, int64_t axis, const qir_type *whole, const qir_tensor *parts,
                             int n_parts, const char *part, const char *whole_name) {
  int64_t total = 0;
  for (int k = 0; k < n_parts; k++) {
    const qir_type *t = &parts[k].type;
    if (t->rank != whole->rank || t->dtype != whole->dtype)
      return FAIL(e, "'%s': %s %d has another rank or element type", opname, part, k);
    for (int i = 0; i < t->rank; i++)
      if (i != axis && t->dims[i] != whole->dims[i])
        return FAIL(e, "'%s': %s %d differs from the %s off the axis", opname, part, k, whole_name);
    total += t->dims[axis];
  }
  if (total != whole->dims[axis])
    return FAIL(e, "'%s': %s extents on the axis do not add up to the %s's", opname, part, whole_name);
  return true;
}

static bool eval_concat(ev *e, const qir_tensor *in, int n_in, qir_tensor *r) {
  int64_t axis;
  if (!get_axis(e, "axis", 0, r->type.rank, &axis)) return false;
  if (!check_axis_parts(e, "concat", axis, &r->type, in, n_in, "operand", "result")) return false;
  int64_t outer, len, inner;
  around_axis(&r->type, (int)axis, &outer, &len, &inner);
  size_t es = esize(&r->type);
  int64_t pos = 0;
  for (int k = 0; k < n_in; k++) {
    int64_t l = in[k].type.dims[axis];
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)r->data + ((size_t)(o * len + pos) * (size_t)inner) * es,
             (const char *)in[k].data + (size_t)(o * l * inner) * es, (size_t)(l * inner) * es);
    pos += l;
  }
  return true;
}

static bool eval_split(ev *e, const qir_tensor *x, qir_tensor *res, int n_res) {
  int64_t axis;
  if (!get_axis(e, "axis", 0, x->type.rank, &axis)) return false;
  if (!check_axis_parts(e, "split", axis, &x->type, res, n_res, "result", "operand")) return false;
  int64_t outer, len, inner;
  around_axis(&x->type, (int)axis, &outer, &len, &inner);
  size_t es = esize(&x->type);
  int64_t pos = 0;
  for (int k = 0; k < n_res; k++) {
    int64_t l = res[k].type.dims[axis];
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)res[k].data + (size_t)(o * l * inner) * es,
             (const char *)x->data + ((size_t)(o * len + pos) * (size_t)inner) * es, (size_t)(l * inner) * es);
    pos += l;
  }
  return true;
}

static int src_pad(ev *e, const int64_t *o, const void *vc, int64_t *src) {
  (void)e;
  const move_ctx *c = vc; /* start = begin pads, dims = operand dims, st = strides */
  int64_t s = 0;
  for (int i = 0; i < c->rank; i++) {
    int64_t L = c->dims[i], p = o[i] - c->start[i];
    if (p < 0 || p >= L) {
      if (c->mode[0] == 'c' || L == 0) return 0;
      if (c->mode[0] == 'e') p = p < 0 ? 0 : L - 1;
      else if (c->mode[0] == 'w') p = ((p % L) + L) % L;
      else { /* reflect: mirror without repeating the edge */
        if (L == 1) p = 0;
        else {
          int64_t period = 2 * (L - 1);
          p = ((p % period) + period) % period;
          if (p >= L) p = period - p;
        }
      }
    }
    s += p * c->st[i];
  }
  *src = s;
  return 1;
}

static bool eval_pad(ev *e, const qir_tensor *x, const qir_tensor *val, qir_tensor *r) {
  int rank = x->type.rank;
  int64_t pads[2 * QIR_MAX_RANK];
  if (r->type.rank != rank) return FAIL(e, "'pad': result rank differs from operand rank");
  if (!attr_ints_n(e, "pads", pads, 2 * rank, 0)) return false;
  move_ctx c = {.rank = rank, .mode = attr_s(e, "mode", "constant")};
  if (strcmp(c.mode, "constant") && strcmp(c.mode, "reflect") && strcmp(c.mode, "edge") && strcmp(c.mode, "wrap"))
    return FAIL(e, "'pad': unknown mode '%s'", c.mode);
  strides_of(&x->type, c.st);
  for (int i = 0; i < rank; i++) {
    c.start[i] = pads[i];
    c.dims[i] = x->type.dims[i];
    if (x->type.dims[i] + pads[i] + pads[i + rank] != r->type.dims[i]) return FAIL(e, "'pad': result extent on axis %d does not match the pads", i);
    if (c.mode[0] != 'c' && x->type.dims[i] == 0 && r->type.dims[i] > 0) return FAIL(e, "'pad': cannot %s-pad an empty axis", c.mode);
  }
  if (numel(&val->type) != 1 || val->type.dtype != x->type.dtype) return FAIL(e, "'pad': the value must be a scalar of the operand's element type");
  return copy_by_index(e, x, r, src_pad, &c, val->data);
}

/* Index i of an index tensor, negative values wrapping; -1 on a bad index. */
static int64_t index_at(ev *e, const qir_tensor *ind, int64_t i, int64_t extent) {
  int64_t v = load_int(ind->type.dtype, ind->data, i), w = v < 0 ? v + extent : v;
  if (w < 0 || w >= extent) {
    qir_error(e->d, e->op->loc, "'%s': index %lld is out of range for extent %lld", opname(e->op), (long long)v, (long long)extent);
    return -1;
  }
  return w;
}

static bool eval_gather(ev *e, const qir_tensor *x, const qir_tensor *ind, qir_tensor *r) {
  int64_t axis;
  if (!get_axis(e, "axis", 0, x->type.rank, &axis)) return false;
  if (is_float(ind->type.dtype)) return FAIL(e, "'gather': indices must be integers");
  qir_type want = x->type;
  want.rank = 0;
  for (int i = 0; i < axis; i++) want.dims[want.rank++] = x->type.dims[i];
  for (int i = 0; i < ind->type.rank; i++) want.dims[want.rank++] = ind->type.dims[i];
  for (int i = (int)axis + 1; i < x->type.rank; i++) want.dims[want.rank++] = x->type.dims[i];
  if (x->type.rank + ind->type.rank - 1 > QIR_MAX_RANK || !same_shape(&want, &r->type))
    return FAIL(e, "'gather': result shape does not match data and indices");
  if (x->type.dtype != r->type.dtype) return FAIL(e, "'gather': element types differ");
  int64_t outer, len, inner, ni = numel(&ind->type);
  around_axis(&x->type, (int)axis, &outer, &len, &inner);
  size_t es = esize(&x->type);
  for (int64_t k = 0; k < ni; k++) {
    int64_t j = index_at(e, ind, k, len);
    if (j < 0) return false;
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)r->data + (size_t)((o * ni + k) * inner) * es, (const char *)x->data + (size_t)((o * len + j) * inner) * es,
             (size_t)inner * es);
  }
  return true;
}

static bool eval_gather_elements(ev *e, const qir_tensor *x, const qir_tensor *ind, qir_tensor *r) {
  int64_t axis;
  if (!get_axis(e, "axis", 0, x->type.rank, &axis)) return false;
  if (!check_same_shape(e, &ind->type, &r->type, "indices and result")) return false;
  if (ind->type.rank != x->type.rank) return FAIL(e, "'gather_elements': indices and data ranks differ");
  for (int i = 0; i < x->type.rank; i++)
    if (i != axis && ind->type.dims[i] > x->type.dims[i]) return FAIL(e, "'gather_elements': indices exceed data on axis %d", i);
  if (x->type.dtype != r->type.dtype) return FAIL(e, "'gather_elements': element types differ");
  int64_t xst[QIR_MAX_RANK], idx[QIR_MAX_RANK] = {0}, n = numel(&r->type);
  strides_of(&x->type, xst);
  size_t es = esize(&x->type);
  for (int64_t k = 0; k < n; k++) {
    int64_t j = index_at(e, ind, k, x->type.dims[axis]), s = 0;
    if (j < 0) return false;
    for (int i = 0; i < x->type.rank; i++) s += (i == axis ? j : idx[i]) * xst[i];
    memcpy((char *)r->data + (size_t)k * es, (const char *)x->data + (size_t)s * es, es);
    next_index(idx, r->type.dims, r->type.rank);
  }
  return true;
}

static bool eval_gather_nd(ev *e, const qir_tensor *x, const qir_tensor *ind, qir_tensor *r) {
  int64_t b = attr_int(e, "batch_dims", 0), q = ind->type.rank, m = q ? ind->type.dims[q - 1] : 0;
  if (q < 1 || b < 0 || b >= q || m < 1 || b + m > x->type.rank || x->type.dtype != r->type.dtype)
    return FAIL(e, "'gather_nd': data, indices and result do not fit");
  int64_t xst[QIR_MAX_RANK], inner = 1;
  strides_of(&x->type, xst);
  for (int64_t i = b + m; i < x->type.rank; i++) inner *= x->type.dims[i];
  int64_t n_tuples = numel(&ind->type) / m, bst = 1;
  for (int64_t i = b; i < q - 1; i++) bst *= ind->type.dims[i]; /* tuples per batch */
  if (n_tuples * inner != numel(&r->type)) return FAIL(e, "'gather_nd': result shape does not match");
  size_t es = esize(&x->type);
  for (int64_t t = 0; t < n_tuples; t++) {
    /* batch coordinates of tuple t, then its m indices */
    int64_t bi = t / bst, off = 0;
    for (int64_t i = b - 1; i >= 0; i--) {
      off += (bi % x->type.dims[i]) * xst[i];
      bi /= x->type.dims[i];
    }
    for (int64_t k = 0; k < m; k++) {
      int64_t j = index_at(e, ind, t * m + k, x->type.dims[b + k]);
      if (j < 0) return false;
      off += j * xst[b + k];
    }
    memcpy((char *)r->data + (size_t)(t * inner) * es, (const char *)x->data + (size_t)off * es, (size_t)inner * es);
  }
  return true;
}

/* One update into element p of the result (already holding data). */
static void scatter_combine(qir_tensor *r, int64_t p, const qir_tensor *upd, int64_t u, const char *red) {
  qir_dtype dt = r->type.dtype;
  if (!strcmp(red, "none")) {
    size_t es = esize(&r->type);
    memcpy((char *)r->data + (size_t)p * es, (const char *)upd->data + (size_t)u * es, es);
    return;
  }
  if (!is_float(dt)) {
    bool us = is_uns(dt);
    int64_t a = load_int(dt, r->data, p), v = load_int(dt, upd->data, u), o;
    if (!strcmp(red, "add")) o = (int64_t)((uint64_t)a + (uint64_t)v);
    else if (!strcmp(red, "mul")) o = (int64_t)((uint64_t)a * (uint64_t)v);
    else if (!strcmp(red, "max")) o = (us ? (uint64_t)v > (uint64_t)a : v > a) ? v : a;
    else o = (us ? (uint64_t)v < (uint64_t)a : v < a) ? v : a;
    store_int(dt, r->data, p, o, us);
    return;
  }
  double a = qir_load_elem(dt, r->data, p), v = qir_load_elem(dt, upd->data, u), o;
  if (!strcmp(red, "add")) o = a + v;
  else if (!strcmp(red, "mul")) o = a * v;
  else if (!strcmp(red, "max")) o = fmax_nan(a, v);
  else o = fmin_nan(a, v);
  qir_store_elem(dt, r->data, p, o);
}

static bool eval_scatter(ev *e, const qir_tensor *x, const qir_tensor *ind, const qir_tensor *upd, qir_tensor *r) {
  if (!check_same_shape(e, &x->type, &r->type, "data and result")) return false;
  const char *red = attr_s(e, "reduction", "none");
  if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") && strcmp(red, "min"))
    return FAIL(e, "'%s': unknown reduction '%s'", opname(e->op), red);
  memcpy(r->data, x->data, (size_t)numel(&x->type) * esize(&x->type));
  int64_t xst[QIR_MAX_RANK];
  strides_of(&x->type, xst);
  if (e->op->code == QIR_OP_SCATTER_ELEMENTS) {
    int64_t axis, idx[QIR_MAX_RANK] = {0}, n = numel(&ind->type);
    if (!get_axis(e, "axis", 0, x->type.rank, &axis)) return false;
    if (ind->type.rank != x->type.rank || !same_shape(&ind->type, &upd->type))
      return FAIL(e, "'scatter_elements': indices and updates do not fit data");
    for (int i = 0; i < x->type.rank; i++)
      if (i != axis && ind->type.dims[i] > x->type.dims[i]) return FAIL(e, "'scatter_elements': indices exceed data on axis %d", i);
    for (int64_t k = 0; k < n; k++) {
      int64_t j = index_at(e, ind, k, x->type.dims[axis]), p = 0;
      if (j < 0) return false;
      for (int i = 0; i < x->type.rank; i++) p += (i == axis ? j : idx[i]) * xst[i];
      scatter_combine(r, p, upd, k, red);
      next_index(idx, ind->type.dims, ind->type.rank);
    }
    return true;
  }
  int64_t q = ind->type.rank, m = q ? ind->type.dims[q - 1] : 0, inner = 1;
  if (q < 1 || m < 1 || m > x->type.rank) return FAIL(e, "'scatter_nd': indices do not fit data");
  for (int64_t i = m; i < x->type.rank; i++) inner *= x->type.dims[i];
  int64_t n_tuples = numel(&ind->type) / m;
  if (n_tuples * inner != numel(&upd->type)) return FAIL(e, "'scatter_nd': updates do not fit");
  for (int64_t t = 0; t < n_tuples; t++) {
    int64_t off = 0;
    for (int64_t k = 0; k < m; k++) {
      int64_t j = index_at(e, ind, t * m + k, x->type.dims[k]);
      if (j < 0) return false;
      off += j * xst[k];
    }
    for (int64_t i = 0; i < inner; i++) scatter_combine(r, off + i, upd, t * inner + i, red);
  }
  return true;
}

/* grid_sample, after ONNX's reference: coordinates denormalised, moved into
 * [lo, hi] (border: clamped to the pixels; reflection: reflected) when outside,
 * then each tap read with the padding mode. */
static double gs_reflect(double x, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    double dx = lo - x, n = floor(dx / rng), r = dx - n * rng;
    return fmod(n, 2) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi, n = floor(dx / rng), r = dx - n * rng;
    return fmod(n, 2) == 0 ? hi - r : lo + r;
  }
  return x;
}

static void gs_cubic(double t, double *w) {
  const double a = -0.75;
  double x = fabs(t);
  w[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  w[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  w[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  w[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

static bool eval_grid_sample(ev *e, const qir_tensor *x, const qir_tensor *g, qir_tensor *r) {
  const char *mode = attr_s(e, "mode", "linear"), *pad = attr_s(e, "padding_mode", "zeros");
  bool align = attr_int(e, "align_corners", 0) != 0;
  int k = x->type.rank - 2, gr = g->type.rank;
  if (k < 1 || gr != r->type.rank || g->type.dims[gr - 1] != k) return FAIL(e, "'grid_sample': x, grid and result do not fit");
  int taps1 = !strcmp(mode, "nearest") ? 1 : !strcmp(mode, "linear") ? 2 : 4, taps = 1;
  for (int d = 0; d < k; d++) taps *= taps1;
  int64_t N = x->type.dims[0], C = x->type.dims[1], P = numel(&g->type) / (N * k), plane = 1, xst[QIR_MAX_RANK];
  for (int d = 0; d < k; d++) plane *= x->type.dims[2 + d];
  strides_of(&x->type, xst);
  double *xv = load_f64(e, x), *gv = load_f64(e, g), *out = xmalloc(e, sizeof *out * (size_t)(N * C * P + 1));
  if (!xv || !gv || !out) { free(xv); free(gv); free(out); return false; }
  for (int64_t n = 0; n < N; n++)
    for (int64_t p = 0; p < P; p++) {
      double w[QIR_MAX_RANK][4];
      int64_t base[QIR_MAX_RANK];
      for (int d = 0; d < k; d++) {
        double D = (double)x->type.dims[2 + d], gn = gv[(n * P + p) * k + (k - 1 - d)];
        double v = align ? (gn + 1) / 2 * (D - 1) : ((gn + 1) * D - 1) / 2;
        double lo = align ? 0 : -0.5, hi = align ? D - 1 : D - 0.5;
        if (taps1 == 1) v = nearbyint(v); /* half to even, in every rank */
        if (v < lo || v > hi) {
          if (!strcmp(pad, "border")) v = v < 0 ? 0 : v > D - 1 ? D - 1 : v;
          else if (!strcmp(pad, "reflection")) v = gs_reflect(v, lo, hi);
        }
        if (taps1 == 1) {
          base[d] = (int64_t)v; /* truncates, as the reference's int cast */
          w[d][0] = 1;
        } else {
          double f = floor(v), t = v - f;
          base[d] = (int64_t)f - (taps1 == 4);
          if (taps1 == 2) w[d][0] = 1 - t, w[d][1] = t;
          else gs_cubic(t, w[d]);
        }
      }
      for (int64_t c = 0; c < C; c++) {
        double acc = 0;
        for (int tp = 0; tp < taps; tp++) {
          double wt = 1;
          int64_t off = (n * C + c) * plane;
          bool zero = false;
          for (int d = 0, rem = tp; d < k; d++, rem /= taps1) {
            int j = rem % taps1;
            int64_t i = base[d] + j, D = x->type.dims[2 + d];
            wt *= w[d][j];
            if (i < 0 || i >= D) {
              if (!strcmp(pad, "zeros")) zero = true;
              else if (!strcmp(pad, "border")) i = i < 0 ? 0 : D - 1;
              else i = (int64_t)gs_reflect((double)i, align ? 0 : -0.5, align ? (double)D - 1 : (double)D - 0.5);
            }
            if (i < 0) i = 0; /* the reflection of an index can land on -0.5: the reference's int() gives 0 */
            if (i >= D) i = D - 1;
            off += i * xst[2 + d];
          }
          if (!zero) acc += wt * xv[off];
        }
        out[(n * C + c) * P + p] = acc;
      }
    }
  store_f64(r, out);
  free(xv);
  free(gv);
  free(out);
  return true;
}

static int src_d2s(ev *e, const int64_t *o, const void *vc, int64_t *src) {
  (void)e;
  const move_ctx *c = vc; /* dims: operand dims [N,C,H,W]; offset = blocksize; mode */
  int64_t b = c->offset, C = c->dims[1], H = c->dims[2], W = c->dims[3];
  int64_t n = o[0], ch, h, w;
  if (c->axis == 0) { /* depth_to_space: o = [n, c', H*b, W*b] */
    int64_t cc = o[1], i = o[2] % b, j = o[3] % b, Cq = C / (b * b);
    h = o[2] / b;
    w = o[3] / b;
    ch = c->mode[0] == 'C' ? cc * b * b + i * b + j : (i * b + j) * Cq + cc;
  } else { /* space_to_depth: o = [n, C*b*b, H/b, W/b] */
    int64_t cc = o[1] % C, blk = o[1] / C;
    ch = cc;
    h = o[2] * b + blk / b;
    w = o[3] * b + blk % b;
  }
  *src = ((n * C + ch) * H + h) * W + w;
  return 1;
}

static bool eval_depth_space(ev *e, const qir_tensor *x, qir_tensor *r) {
  bool d2s = e->op->code == QIR_OP_DEPTH_TO_SPACE;
  int64_t b = attr_int(e, "blocksize", 0);
  if (x->type.rank != 4 || r->type.rank != 4 || b <= 0) return FAIL(e, "'%s' needs rank-4 tensors and blocksize > 0", opname(e->op));
  const int64_t *xd = x->type.dims, *rd = r->type.dims;
  bool ok = d2s ? (xd[1] % (b * b) == 0 && rd[0] == xd[0] && rd[1] == xd[1] / (b * b) && rd[2] == xd[2] * b && rd[3] == xd[3] * b)
                : (xd[2] % b == 0 && xd[3] % b == 0 && rd[0] == xd[0] && rd[1] == xd[1] * b * b && rd[2] == xd[2] / b && rd[3] == xd[3] / b);
  if (!ok) return FAIL(e, "'%s': result shape does not match the operand and blocksize", opname(e->op));
  move_ctx c = {.rank = 4, .axis = d2s ? 0 : 1, .offset = b, .mode = attr_s(e, "mode", "DCR")};
  memcpy(c.dims, xd, sizeof c.dims[0] * 4);
  return copy_by_index(e, x, r, src_d2s, &c, NULL);
}

static bool eval_range(ev *e, const qir_tensor *in, qir_tensor *r) {
  if (r->type.rank != 1) return FAIL(e, "'range': result must be 1-D");
  for (int k = 0; k < 3; k++)
    if (numel(&in[k].type) != 1) return FAIL(e, "'range': start, limit and delta must be scalars");
  int64_t n = r->type.dims[0];
  qir_dtype dt = r->type.dtype;
  if (!is_float(dt)) {
    int64_t s = load_int(in[0].type.dtype, in[0].data, 0), l = load_int(in[1].type.dtype, in[1].data, 0),
            d = load_int(in[2].type.dtype, in[2].data, 0);
    if (d == 0) return FAIL(e, "'range': delta is 0");
    int64_t want = (d > 0 ? (l > s ? (l - s + d - 1) / d : 0) : (s > l ? (s - l - d - 1) / -d : 0));
    if (want != n) return FAIL(e, "'range': produces %lld elements but the result has %lld", (long long)want, (long long)n);
    for (int64_t i = 0; i < n; i++) store_int(dt, r->data, i, s + i * d, false);
    return true;
  }
  double s = qir_load_elem(in[0].type.dtype, in[0].data, 0), l = qir_load_elem(in[1].type.dtype, in[1].data, 0),
         d = qir_load_elem(in[2].type.dtype, in[2].data, 0);
  double want = ceil((l - s) / d);
  if (!(want >= 0)) want = 0;
  if ((int64_t)want != n) return FAIL(e, "'range': produces %.0f elements but the result has %lld", want, (long long)n);
  for (int64_t i = 0; i < n; i++) qir_store_elem(dt, r->data, i, s + (double)i * d);
  return true;
}

static bool eval_trilu(ev *e, const qir_tensor *x, qir_tensor *r) {
  if (!check_same_shape(e, &x->type, &r->type, "operand and result")) return false;
  if (x->type.rank < 2) return FAIL(e, "'trilu' needs rank >= 2");
  bool upper = attr_int(e, "upper", 1) != 0;
  int64_t k = attr_int(e, "k", 0), rows = x->type.dims[x->type.rank - 2], cols = x->type.dims[x->type.rank - 1];
  int64_t n = numel(&x->type);
  size_t es = esize(&x->type);
  memcpy(r->data, x->data, (size_t)n * es);
  for (int64_t p = 0; p < n; p++) {
    int64_t j = p % cols, i = (p / cols) % rows;
    bool keep = upper ? j - i >= k : j - i <= k;
    if (!keep) memset((char *)r->data + (size_t)p * es, 0, es);
  }
  return true;
}

static bool eval_one_hot(ev *e, const qir_tensor *ind, const qir_tensor *vals, qir_tensor *r) {
  int64_t axis;
  if (!get_axis(e, "axis", r->type.rank - 1, r->type.rank, &axis)) return false;
  if (numel(&vals->type) != 2 || vals->type.dtype != r->type.dtype) return FAIL(e, "'one_hot': values must be [off, on] of the result type");
  if (r->type.rank != ind->type.rank + 1) return FAIL(e, "'one_hot': result rank must be indices rank + 1");
  for (int i = 0, j = 0; i < r->type.rank; i++)
    if (i != axis && r->type.dims[i] != ind->type.dims[j++]) return FAIL(e, "'one_hot': result shape does not match indices");
  int64_t depth = r->type.dims[axis], outer, len, inner;
  around_axis(&r->type, (int)axis, &outer, &len, &inner);
  size_t es = esize(&r->type);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      /* ONNX: cast to int (truncating; saturating here, NaN 0), then negatives wrap */
      double v = trunc(qir_load_elem(ind->type.dtype, ind->data, o * inner + in));
      int64_t hot = isnan(v) ? 0 : v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN : (int64_t)v;
      if (hot < 0) hot += depth;
      for (int64_t k = 0; k < depth; k++)
        memcpy((char *)r->data + (size_t)((o * len + k) * inner + in) * es, (const char *)vals->data + (k == hot ? es : 0), es);
    }
  return true;
}

/* ------------------------------------------------------------ linear algebra */

/* C[M,N] (+)= A[M,K] * B[K,N], all row-major with the given row strides. */
static void gemm_nn(int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *C) {
  for (int64_t i = 0; i < M; i++) {
    double *c = C + i * N;
    for (int64_t k = 0; k < K; k++) {
      double a = A[i * K + k];
      const double *b = B + k * N;
      if (a == 0) continue;
      for (int64_t j = 0; j < N; j++) c[j] += a * b[j];
    }
  }
}

static bool eval_matmul(ev *e, const qir_tensor *a, const qir_tensor *b, qir_tensor *r) {
  qir_type ta = a->type, tb = b->type;
  if (ta.rank == 0 || tb.rank == 0) return FAIL(e, "'matmul': operands must have rank >= 1");
  bool a1 = ta.rank == 1, b1 = tb.rank == 1;
  if (a1) { ta.rank = 2; ta.dims[1] = ta.dims[0]; ta.dims[0] = 1; }
  if (b1) { tb.rank = 2; tb.dims[1] = 1; }
  int64_t M = ta.dims[ta.rank - 2], K = ta.dims[ta.rank - 1], N = tb.dims[tb.rank - 1];
  if (tb.dims[tb.rank - 2] != K) return FAIL(e, "'matmul': inner extents %lld and %lld differ", (long long)K, (long long)tb.dims[tb.rank - 2]);
  /* batch shapes broadcast */
  qir_type ba = ta, bb = tb, bo;
  ba.rank -= 2;
  bb.rank -= 2;
  bo = ba.rank > bb.rank ? ba : bb;
  for (int i = 0; i < bo.rank; i++) {
    int ia = i - (bo.rank - ba.rank), ib = i - (bo.rank - bb.rank);
    int64_t da = ia >= 0 ? ba.dims[ia] : 1, db = ib >= 0 ? bb.dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return FAIL(e, "'matmul': batch extents %lld and %lld do not broadcast", (long long)da, (long long)db);
    bo.dims[i] = da == 1 ? db : da;
  }
  qir_type want = bo;
  if (!a1) want.dims[want.rank++] = M;
  if (!b1) want.dims[want.rank++] = N;
  if (!same_shape(&want, &r->type)) return FAIL(e, "'matmul': result shape does not match the operands");
  int64_t nb = numel(&bo);
  int64_t *ma = bcast_index(e, &ba, &bo), *mb = bcast_index(e, &bb, &bo);
  if (!is_float(a->type.dtype) && !is_float(b->type.dtype)) { /* exact integer path (wrapping) */
    int64_t *IA = load_i64(e, a), *IB = load_i64(e, b), *IC = xcalloc(e, (size_t)(nb * M * N), sizeof(int64_t));
    bool ok = ma && mb && IA && IB && IC;
    for (int64_t k = 0; ok && k < nb; k++) {
      const int64_t *pa = IA + ma[k] * M * K, *pb = IB + mb[k] * K * N;
      int64_t *pc = IC + k * M * N;
      for (int64_t i = 0; i < M; i++)
        for (int64_t kk = 0; kk < K; kk++)
          for (int64_t j = 0; j < N; j++)
            pc[i * N + j] = (int64_t)((uint64_t)pc[i * N + j] + (uint64_t)pa[i * K + kk] * (uint64_t)pb[kk * N + j]);
    }
    if (ok) store_i64(r, IC, is_uns(a->type.dtype));
    free(ma); free(mb); free(IA); free(IB); free(IC);
    return ok;
  }
  double *A = load_f64(e, a), *B = load_f64(e, b), *C = xcalloc(e, (size_t)(nb * M * N), sizeof(double));
  bool ok = ma && mb && A && B && C;
  if (ok)
    for (int64_t k = 0; k < nb; k++) gemm_nn(M, N, K, A + ma[k] * M * K, B + mb[k] * K * N, C + k * M * N);
  if (ok) store_f64(r, C);
  free(ma); free(mb); free(A); free(B); free(C);
  return ok;
}

static bool eval_gemm(ev *e, const qir_tensor *a, const qir_tensor *b, const qir_tensor *c, qir_tensor *r) {
  if (a->type.rank != 2 || b->type.rank != 2 || r->type.rank != 2) return FAIL(e, "'gemm' needs 2-D operands");
  bool ta = attr_int(e, "transA", 0) != 0, tb = attr_int(e, "transB", 0) != 0;
  double alpha = attr_f(e, "alpha", 1.0), beta = attr_f(e, "beta", 1.0);
  int64_t M = a->type.dims[ta ? 1 : 0], K = a->type.dims[ta ? 0 : 1], N = b->type.dims[tb ? 0 : 1];
  if (b->type.dims[tb ? 1 : 0] != K) return FAIL(e, "'gemm': inner extents differ");
  if (r->type.dims[0] != M || r->type.dims[1] != N) return FAIL(e, "'gemm': result shape does not match the operands");
  if (!check_bcast(e, c, &r->type, 2)) return false;
  double *A = load_f64(e, a), *B = load_f64(e, b), *C = expand_f64(e, c, &r->type), *Y = xcalloc(e, (size_t)(M * N), sizeof(double));
  bool ok = A && B && C && Y;
  if (ok) {
    if (ta) { /* make A row-major [M,K] */
      double *t = xmalloc(e, (size_t)(M * K) * sizeof *t);
      if (!t) ok = false;
      else {
        for (int64_t i = 0; i < M; i++)
          for (int64_t k = 0; k < K; k++) t[i * K + k] = A[k * M + i];
        free(A);
        A = t;
      }
    }
  }
  if (ok) {
    if (tb) { /* B is [N,K]: dot products over contiguous rows */
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          const double *x = A + i * K, *y = B + j * K;
          double s = 0;
          for (int64_t k = 0; k < K; k++) s += x[k] * y[k];
          Y[i * N + j] = s;
        }
    } else {
      gemm_nn(M, N, K, A, B, Y);
    }
    for (int64_t i = 0; i < M * N; i++) Y[i] = alpha * Y[i] + beta * C[i];
    store_f64(r, Y);
  }
  free(A); free(B); free(C); free(Y);
  return ok;
}

/* einsum: any equation, ellipsis included.  Every label gets an extent; the
 * result is the sum over the labels missing from the output of the product
 * of the operands. */
#define EINSUM_MAX_LABELS 64
static bool eval_einsum(ev *e, const qir_tensor *in, int n_in, qir_tensor *r) {
  const char *eq = attr_s(e, "equation", NULL);
  if (!eq) return FAIL(e, "'einsum' needs an 'equation'");
  /* labels: letters map to 0..51; ellipsis dims to 52.. */
  int lab[16][QIR_MAX_RANK], nlab[16] = {0}, ell_pos[16], out_lab[QIR_MAX_RANK + 1], n_out = 0;
  int64_t extent[EINSUM_MAX_LABELS];
  bool has_arrow = strstr(eq, "->") != NULL, out_ell = false;
  int n_ell = 0, count[EINSUM_MAX_LABELS] = {0};
  if (n_in > 16) return FAIL(e, "'einsum': too many operands");
  for (int i = 0; i < EINSUM_MAX_LABELS; i++) extent[i] = -1;
  const char *p = eq;
  int k = 0;
  for (k = 0; k < n_in; k++) {
    ell_pos[k] = -1;
    int letters = 0;
    const char *q = p;
    while (*q && *q != ',' && *q != '-') {
      if (isalpha((unsigned char)*q)) letters++;
      q++;
    }
    int rank = in[k].type.rank, ell_rank = -1;
    for (; *p && *p != ',' && *p != '-'; p++) {
      if (*p == ' ') continue;
      if (strncmp(p, "...", 3) == 0) {
        ell_rank = rank - letters;
        if (ell_rank < 0 || ell_pos[k] >= 0) return FAIL(e, "'einsum': bad ellipsis in operand %d", k);
        ell_pos[k] = nlab[k];
        if (ell_rank > n_ell) n_ell = ell_rank;
        for (int j = 0; j < ell_rank; j++) lab[k][nlab[k]++] = -1 - (ell_rank - 1 - j); /* right-aligned placeholder */
        p += 2;
        continue;
      }
      if (!isalpha((unsigned char)*p)) return FAIL(e, "'einsum': bad character '%c' in the equation", *p);
      if (nlab[k] >= QIR_MAX_RANK) return FAIL(e, "'einsum': operand %d has too many labels", k);
      lab[k][nlab[k]++] = isupper((unsigned char)*p) ? 26 + (*p - 'A') : *p - 'a';
    }
    if (nlab[k] != rank) return FAIL(e, "'einsum': operand %d has rank %d but %d labels", k, rank, nlab[k]);
    if (*p == ',') p++;
    else { k++; break; }
  }
  if (k != n_in) return FAIL(e, "'einsum': the equation names %d operands, the op has %d", k, n_in);
  /* resolve extents; ellipsis placeholder -1-j means the j-th ellipsis dim from the right */
  for (k = 0; k < n_in; k++)
    for (int j = 0; j < nlab[k]; j++) {
      int l = lab[k][j];
      if (l < 0) l = 52 + (n_ell - 1 - (-1 - l)), lab[k][j] = l;
      int64_t d = in[k].type.dims[j];
      if (l >= EINSUM_MAX_LABELS) return FAIL(e, "'einsum': too many ellipsis dims");
      if (extent[l] < 0 || extent[l] == 1) extent[l] = d;
      else if (d != extent[l] && !(l >= 52 && d == 1)) return FAIL(e, "'einsum': label extents disagree");
      count[l]++;
    }
  if (has_arrow) {
    p = strstr(eq, "->") + 2;
    for (; *p; p++) {
      if (*p == ' ') continue;
      if (strncmp(p, "...", 3) == 0) {
        for (int j = 0; j < n_ell; j++) out_lab[n_out++] = 52 + j;
        out_ell = true;
        p += 2;
        continue;
      }
      if (!isalpha((unsigned char)*p) || n_out >= QIR_MAX_RANK) return FAIL(e, "'einsum': bad output in the equation");
      int l = isupper((unsigned char)*p) ? 26 + (*p - 'A') : *p - 'a';
      if (extent[l] < 0) return FAIL(e, "'einsum': output label '%c' is not in any input", *p);
      out_lab[n_out++] = l;
    }
  } else { /* implicit: ellipsis dims, then labels seen once, alphabetically */
    for (int j = 0; j < n_ell; j++) out_lab[n_out++] = 52 + j;
    out_ell = true;
    for (int l = 0; l < 52; l++)
      if (count[l] == 1) {
        if (n_out >= QIR_MAX_RANK) return FAIL(e, "'einsum': result rank too large");
        out_lab[n_out++] = l;
      }
  }
  if (!out_ell && n_ell > 0) { /* ellipsis dims summed when missing from the output */ }
  if (r->type.rank != n_out) return FAIL(e, "'einsum': result rank %d but the equation gives %d", r->type.rank, n_out);
  bool in_out[EINSUM_MAX_LABELS] = {false};
  for (int j = 0; j < n_out; j++) {
    if (r->type.dims[j] != extent[out_lab[j]]) return FAIL(e, "'einsum': result extent on axis %d does not match", j);
    in_out[out_lab[j]] = true;
  }
  int sum_lab[EINSUM_MAX_LABELS], n_sum = 0;
  for (int l = 0; l < EINSUM_MAX_LABELS; l++)
    if (extent[l] >= 0 && !in_out[l]) sum_lab[n_sum++] = l;
  /* stride of each label in each operand (repeated labels add: diagonals) */
  int64_t (*lst)[EINSUM_MAX_LABELS] = xcalloc(e, (size_t)n_in, sizeof *lst);
  double **val = xcalloc(e, (size_t)n_in, sizeof *val);
  bool ok = lst && val;
  for (k = 0; ok && k < n_in; k++) {
    int64_t st[QIR_MAX_RANK];
    strides_of(&in[k].type, st);
    for (int j = 0; j < nlab[k]; j++)
      if (in[k].type.dims[j] != 1 || extent[lab[k][j]] == 1) lst[k][lab[k][j]] += st[j];
    val[k] = load_f64(e, &in[k]);
    ok = val[k] != NULL;
  }
  int64_t no = numel(&r->type), ns = 1;
  for (int j = 0; j < n_sum; j++) ns *= extent[sum_lab[j]];
  double *res = ok ? xmalloc(e, (size_t)no * sizeof *res) : NULL;
  ok = ok && res;
  if (ok) {
    int64_t oidx[QIR_MAX_RANK] = {0}, sidx[EINSUM_MAX_LABELS], sdims[EINSUM_MAX_LABELS];
    for (int j = 0; j < n_sum; j++) sdims[j] = extent[sum_lab[j]];
    for (int64_t o = 0; o < no; o++) {
      int64_t base[16];
      for (k = 0; k < n_in; k++) {
        base[k] = 0;
        for (int j = 0; j < n_out; j++) base[k] += oidx[j] * lst[k][out_lab[j]];
      }
      double acc = 0;
      for (int j = 0; j < n_sum; j++) sidx[j] = 0;
      for (int64_t s = 0; s < ns; s++) {
        double prod = 1;
        for (k = 0; k < n_in; k++) {
          int64_t off = base[k];
          for (int j = 0; j < n_sum; j++) off += sidx[j] * lst[k][sum_lab[j]];
          prod *= val[k][off];
        }
        acc += prod;
        next_index(sidx, sdims, n_sum);
      }
      res[o] = acc;
      next_index(oidx, r->type.dims, r->type.rank);
    }
    store_f64(r, res);
  }
  for (k = 0; val && k < n_in; k++) free(val[k]);
  free(val); free(lst); free(res);
  return ok;
}

/* ------------------------------------------------------------ convolution and pooling */

typedef struct {
  int ns;                                     /* spatial rank */
  int64_t k[QIR_MAX_RANK], s[QIR_MAX_RANK], d[QIR_MAX_RANK], pb[QIR_MAX_RANK], pe[QIR_MAX_RANK];
} window;

/* Reads kernel/strides/dilations/pads for `ns` spatial dims. */
static bool get_window(ev *e, int ns, const int64_t *kernel, window *w) {
  int64_t pads[2 * QIR_MAX_RANK];
  w->ns = ns;
  if (kernel) memcpy(w->k, kernel, sizeof *kernel * (size_t)ns);
  else if (!attr_ints_n(e, "kernel_shape", w->k, ns, 1) || !qir_op_attr(e->op, "kernel_shape"))
    return FAIL(e, "'%s' needs 'kernel_shape' with %d entries", opname(e->op), ns);
  if (!attr_ints_n(e, "strides", w->s, ns, 1) || !attr_ints_n(e, "dilations", w->d, ns, 1) ||
      !attr_ints_n(e, "pads", pads, 2 * ns, 0))
    return false;
  for (int i = 0; i < ns; i++) {
    w->pb[i] = pads[i];
    w->pe[i] = pads[i + ns];
    if (w->k[i] <= 0 || w->s[i] <= 0 || w->d[i] <= 0 || w->pb[i] < 0 || w->pe[i] < 0)
      return FAIL(e, "'%s': kernel, strides and dilations must be positive and pads non-negative", opname(e->op));
  }
  return true;
}

/* Checks the spatial result extents against the window (floor or ceil mode). */
static bool check_window_out(ev *e, const window *w, const int64_t *in, const int64_t *out, bool ceil_ok) {
  for (int i = 0; i < w->ns; i++) {
    int64_t span = (w->k[i] - 1) * w->d[i] + 1, room = in[i] + w->pb[i] + w->pe[i] - span;
    int64_t lo = room < 0 ? 0 : room / w->s[i] + 1, hi = room < 0 ? 0 : (room + w->s[i] - 1) / w->s[i] + 1;
    if (out[i] != lo && !(ceil_ok && out[i] == hi))
      return FAIL(e, "'%s': spatial result extent %lld on axis %d does not match the window (expected %lld)", opname(e->op),
                  (long long)out[i], i + 2, (long long)lo);
  }
  return true;
}

/* Y[M,N] = bias + A[M,K] * B[K,N] (row-major, Y with leading dimension ldy):
 * 4x8 register blocks, the reduction innermost. */
static void gemm_bias(int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *Y, int64_t ldy,
                      const double *bias) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) {
    const double *a0 = A + m * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
    int64_t j = 0;
    for (; j + 8 <= N; j += 8) {
      double c0[8] = {0}, c1[8] = {0}, c2[8] = {0}, c3[8] = {0};
      for (int64_t k = 0; k < K; k++) {
        const double *bk = B + k * N + j;
        double x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
        for (int t = 0; t < 8; t++) {
          c0[t] += x0 * bk[t];
          c1[t] += x1 * bk[t];
          c2[t] += x2 * bk[t];
          c3[t] += x3 * bk[t];
        }
      }
      for (int t = 0; t < 8; t++) {
        Y[m * ldy + j + t] = bias[m] + c0[t];
        Y[(m + 1) * ldy + j + t] = bias[m + 1] + c1[t];
        Y[(m + 2) * ldy + j + t] = bias[m + 2] + c2[t];
        Y[(m + 3) * ldy + j + t] = bias[m + 3] + c3[t];
      }
    }
    for (; j < N; j++)
      for (int r = 0; r < 4; r++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) acc += A[(m + r) * K + k] * B[k * N + j];
        Y[(m + r) * ldy + j] = bias[m + r] + acc;
      }
  }
  for (; m < M; m++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++) acc += A[m * K + k] * B[k * N + j];
      Y[m * ldy + j] = bias[m] + acc;
    }
}

/* conv: per output row (all spatial axes but the innermost fixed), the input
 * patches of that row are gathered into col[Cg*kvol][OW] (zeros where the
 * window leaves the image); the row of every output channel of the group is
 * then W[Mg, Cg*kvol] * col, whose rows are exactly the weights' layout. */
static bool eval_conv(ev *e, const qir_tensor *x, const qir_tensor *wt, const qir_tensor *b, qir_tensor *r) {
  const qir_type *xt = &x->type, *wtt = &wt->type, *rt = &r->type;
  if (xt->rank < 3 || wtt->rank != xt->rank || rt->rank != xt->rank) return FAIL(e, "'conv': x, w and result must have the same rank >= 3");
  int ns = xt->rank - 2;
  window w;
  if (!get_window(e, ns, wtt->dims + 2, &w)) return false;
  if (qir_op_attr(e->op, "kernel_shape")) {
    int64_t ks[QIR_MAX_RANK];
    if (!attr_ints_n(e, "kernel_shape", ks, ns, 1)) return false;
    for (int i = 0; i < ns; i++)
      if (ks[i] != w.k[i]) return FAIL(e, "'conv': kernel_shape does not match the weights");
  }
  int64_t G = attr_int(e, "group", 1), N = xt->dims[0], C = xt->dims[1], M = wtt->dims[0], Cg = wtt->dims[1];
  if (G <= 0 || C != Cg * G || M % G != 0 || rt->dims[0] != N || rt->dims[1] != M)
    return FAIL(e, "'conv': channels do not match (x %lld, w %lldx%lld, group %lld, result %lld)", (long long)C, (long long)M,
                (long long)Cg, (long long)G, (long long)rt->dims[1]);
  if (numel(&b->type) != M) return FAIL(e, "'conv': bias must have %lld elements", (long long)M);
  if (!check_window_out(e, &w, xt->dims + 2, rt->dims + 2, false)) return false;
  int64_t Mg = M / G, in_plane = 1, out_plane = 1, kvol = 1;
  for (int i = 0; i < ns; i++) {
    in_plane *= xt->dims[2 + i];
    out_plane *= rt->dims[2 + i];
    kvol *= w.k[i];
  }
  double *X = load_f64(e, x), *W = load_f64(e, wt), *B = load_f64(e, b), *Y = xmalloc(e, (size_t)numel(rt) * sizeof *Y);
  const int64_t *id = xt->dims + 2, *od = rt->dims + 2;
  int last = ns - 1;
  int64_t OW = od[last], IW = id[last], Kd = Cg * kvol;
  int64_t OWp = (OW + 7) / 8 * 8; /* col rows padded with zeros to whole 8-wide blocks */
  int64_t outer_o = OW ? out_plane / OW : 0;
  double *col = xcalloc(e, (size_t)(Kd * (OWp ? OWp : 1)), sizeof *col), *rowy = xmalloc(e, (size_t)(Mg * (OWp ? OWp : 1)) * sizeof *rowy);
  if (!X || !W || !B || !Y || !col || !rowy) { free(X); free(W); free(B); free(Y); free(col); free(rowy); return false; }
  int64_t ist[QIR_MAX_RANK];
  { int64_t st = 1; for (int i = ns - 1; i >= 0; i--) { ist[i] = st; st *= id[i]; } }
  for (int64_t n = 0; n < N; n++)
    for (int64_t g = 0; g < G; g++) {
      int64_t oidx[QIR_MAX_RANK] = {0};
      for (int64_t oo = 0; oo < outer_o; oo++) {
        /* gather col: row (c, kernel tap) holds the inputs the tap sees along the row */
        int64_t kidx[QIR_MAX_RANK] = {0};
        for (int64_t kk = 0; kk < kvol; kk++) {
          int64_t base = 0;
          bool inside = true;
          for (int a = 0; a < last; a++) {
            int64_t ii = oidx[a] * w.s[a] + kidx[a] * w.d[a] - w.pb[a];
            if (ii < 0 || ii >= id[a]) { inside = false; break; }
            base += ii * ist[a];
          }
          int64_t shift = kidx[last] * w.d[last] - w.pb[last], s = w.s[last];
          for (int64_t c = 0; c < Cg; c++) {
            double *dst = col + (c * kvol + kk) * OWp;
            const double *src = X + (n * C + g * Cg + c) * in_plane + base;
            for (int64_t o = 0; o < OW; o++) {
              int64_t iw = o * s + shift;
              dst[o] = (inside && iw >= 0 && iw < IW) ? src[iw] : 0;
            }
          }
          next_index(kidx, w.k, ns);
        }
        gemm_bias(Mg, OWp, Kd, W + g * Mg * Kd, col, rowy, OWp, B + g * Mg);
        for (int64_t m = 0; m < Mg; m++)
          memcpy(Y + ((n * M + g * Mg + m) * out_plane + oo * OW), rowy + m * OWp, (size_t)OW * sizeof *Y);
        next_index(oidx, od, last);
      }
    }
  store_f64(r, Y);
  free(X); free(W); free(B); free(Y); free(col); free(rowy);
  return true;
}

/* conv_transpose: every input element scatters x * w into the output. */
static bool eval_conv_transpose(ev *e, const qir_tensor *x, const qir_tensor *wt, const qir_tensor *b, qir_tensor *r) {
  const qir_type *xt = &x->type, *wtt = &wt->type, *rt = &r->type;
  if (xt->rank < 3 || wtt->rank != xt->rank || rt->rank != xt->rank) return FAIL(e, "'conv_transpose': x, w and result must have the same rank >= 3");
  int ns = xt->rank - 2;
  window w;
  if (!get_window(e, ns, wtt->dims + 2, &w)) return false;
  int64_t G = attr_int(e, "group", 1), N = xt->dims[0], C = xt->dims[1], Mg = wtt->dims[1], M = Mg * G;
  int64_t outpad[QIR_MAX_RANK];
  if (!attr_ints_n(e, "output_padding", outpad, ns, 0)) return false;
  if (G <= 0 || wtt->dims[0] != C || C % G != 0 || rt->dims[0] != N || rt->dims[1] != M)
    return FAIL(e, "'conv_transpose': channels do not match");
  if (numel(&b->type) != M) return FAIL(e, "'conv_transpose': bias must have %lld elements", (long long)M);
  for (int i = 0; i < ns; i++) {
    int64_t want = w.s[i] * (xt->dims[2 + i] - 1) + outpad[i] + (w.k[i] - 1) * w.d[i] + 1 - w.pb[i] - w.pe[i];
    if (rt->dims[2 + i] != want)
      return FAIL(e, "'conv_transpose': spatial result extent %lld on axis %d (expected %lld)", (long long)rt->dims[2 + i], i + 2, (long long)want);
  }
  int64_t Cg = C / G, in_plane = 1, out_plane = 1, kvol = 1;
  for (int i = 0; i < ns; i++) {
    in_plane *= xt->dims[2 + i];
    out_plane *= rt->dims[2 + i];
    kvol *= w.k[i];
  }
  double *X = load_f64(e, x), *W = load_f64(e, wt), *B = load_f64(e, b), *Y = xmalloc(e, (size_t)numel(rt) * sizeof *Y);
  if (!X || !W || !B || !Y) { free(X); free(W); free(B); free(Y); return false; }
  int64_t ost[QIR_MAX_RANK];
  { int64_t st = 1; for (int i = ns - 1; i >= 0; i--) { ost[i] = st; st *= rt->dims[2 + i]; } }
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++) {
      double *y = Y + (n * M + m) * out_plane;
      for (int64_t i = 0; i < out_plane; i++) y[i] = B[m];
    }
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      int64_t g = c / Cg;
      const double *xp = X + (n * C + c) * in_plane;
      int64_t iidx[QIR_MAX_RANK] = {0};
      for (int64_t ii = 0; ii < in_plane; ii++) {
        double xv = xp[ii];
        int64_t kidx[QIR_MAX_RANK] = {0};
        for (int64_t kk = 0; kk < kvol; kk++) {
          int64_t off = 0;
          bool inside = true;
          for (int a = 0; a < ns; a++) {
            int64_t o = iidx[a] * w.s[a] + kidx[a] * w.d[a] - w.pb[a];
            if (o < 0 || o >= rt->dims[2 + a]) { inside = false; break; }
            off += o * ost[a];
          }
          if (inside)
            for (int64_t mm = 0; mm < Mg; mm++)
              Y[(n * M + g * Mg + mm) * out_plane + off] += xv * W[(c * Mg + mm) * kvol + kk];
          next_index(kidx, w.k, ns);
        }
        next_index(iidx, xt->dims + 2, ns);
      }
    }
  store_f64(r, Y);
  free(X); free(W); free(B); free(Y);
  return true;
}

/* max_pool / avg_pool / global pools, N-D. */
static bool eval_pool(ev *e, const qir_tensor *x, qir_tensor *res, int n_res) {
  const qir_type *xt = &x->type, *rt = &res[0].type;
  qir_opcode c = e->op->code;
  bool global = c == QIR_OP_GLOBAL_AVG_POOL || c == QIR_OP_GLOBAL_MAX_POOL;
  bool is_max = c == QIR_OP_MAX_POOL || c == QIR_OP_GLOBAL_MAX_POOL;
  if (xt->rank < 3 || rt->rank != xt->rank || rt->dims[0] != xt->dims[0] || rt->dims[1] != xt->dims[1])
    return FAIL(e, "'%s': operand and result must be [N, C, spatial...] with equal N and C", opname(e->op));
  int ns = xt->rank - 2;
  window w;
  if (global) {
    w.ns = ns;
    for (int i = 0; i < ns; i++) {
      w.k[i] = xt->dims[2 + i];
      w.s[i] = w.d[i] = 1;
      w.pb[i] = w.pe[i] = 0;
    }
  } else if (!get_window(e, ns, NULL, &w)) {
    return false;
  }
  bool ceil_mode = attr_int(e, "ceil_mode", 0) != 0, incl = attr_int(e, "count_include_pad", 0) != 0;
  if (!check_window_out(e, &w, xt->dims + 2, rt->dims + 2, ceil_mode)) return false;
  if (n_res > 2 || (n_res == 2 && (!is_max || global || !same_shape(&res[1].type, rt))))
    return FAIL(e, "'%s': bad second result (max_pool indices have the result's shape)", opname(e->op));
  int64_t storage = attr_int(e, "storage_order", 0);
  int64_t in_plane = 1, out_plane = 1, kvol = 1, NC = xt->dims[0] * xt->dims[1];
  int64_t ist[QIR_MAX_RANK], cst[QIR_MAX_RANK]; /* row-major and column-major strides */
  for (int i = 0; i < ns; i++) {
    in_plane *= xt->dims[2 + i];
    out_plane *= rt->dims[2 + i];
    kvol *= w.k[i];
  }
  { int64_t st = 1; for (int i = ns - 1; i >= 0; i--) { ist[i] = st; st *= xt->dims[2 + i]; } }
  { int64_t st = 1; for (int i = 0; i < ns; i++) { cst[i] = st; st *= xt->dims[2 + i]; } }
  double *X = load_f64(e, x), *Y = xmalloc(e, (size_t)numel(rt) * sizeof *Y);
  int64_t *I = n_res == 2 ? xmalloc(e, (size_t)numel(rt) * sizeof *I) : NULL;
  if (!X || !Y || (n_res == 2 && !I)) { free(X); free(Y); free(I); return false; }
  for (int64_t nc = 0; nc < NC; nc++) {
    const double *xp = X + nc * in_plane;
    int64_t oidx[QIR_MAX_RANK] = {0};
    for (int64_t oo = 0; oo < out_plane; oo++) {
      double acc = is_max ? -INFINITY : 0;
      int64_t valid = 0, padded = 0, best = -1;
      int64_t kidx[QIR_MAX_RANK] = {0};
      for (int64_t kk = 0; kk < kvol; kk++) {
        int64_t off = 0, coff = 0;
        bool inside = true, in_pad = true;
        for (int a = 0; a < ns; a++) {
          int64_t ii = oidx[a] * w.s[a] + kidx[a] * w.d[a] - w.pb[a];
          if (ii < 0 || ii >= xt->dims[2 + a]) {
            inside = false;
            if (ii < -w.pb[a] || ii >= xt->dims[2 + a] + w.pe[a]) in_pad = false;
          }
          off += ii * ist[a];
          coff += ii * cst[a];
        }
        if (inside) {
          double v = xp[off];
          valid++;
          if (is_max) {
            /* a NaN wins (and the first one stays), as reduce_max and np.max */
            if (best < 0 || v > acc || (isnan(v) && !isnan(acc))) { acc = v; best = storage ? coff : off; }
          } else {
            acc += v;
          }
        } else if (in_pad) {
          padded++;
        }
        next_index(kidx, w.k, ns);
      }
      int64_t k = nc * out_plane + oo;
      if (is_max) {
        Y[k] = valid ? acc : -INFINITY;
        if (I) I[k] = nc * in_plane + (best < 0 ? 0 : best);
      } else {
        int64_t cnt = incl ? valid + padded : valid;
        Y[k] = cnt ? acc / (double)cnt : NAN;
      }
      next_index(oidx, rt->dims + 2, ns);
    }
  }
  store_f64(&res[0], Y);
  if (I) store_i64(&res[1], I, false);
  free(X); free(Y); free(I);
  return true;
}

/* ------------------------------------------------------------ normalisation */

/* Per-channel affine: y = (x - mean) / sqrt(var + eps) * scale + bias. */
static bool eval_batch_norm(ev *e, const qir_tensor *in, qir_tensor *r) {
  const qir_type *xt = &in[0].type;
  if (!check_same_shape(e, xt, &r->type, "operand and result")) return false;
  if (xt->rank < 2) return FAIL(e, "'batch_norm' needs rank >= 2");
  int64_t C = xt->dims[1], outer, len, inner;
  for (int k = 1; k < 5; k++)
    if (numel(&in[k].type) != C) return FAIL(e, "'batch_norm': operand %d must have %lld elements", k, (long long)C);
  double eps = attr_f(e, "epsilon", 1e-5);
  around_axis(xt, 1, &outer, &len, &inner);
  double *X = load_f64(e, &in[0]), *S = load_f64(e, &in[1]), *B = load_f64(e, &in[2]), *Mn = load_f64(e, &in[3]), *V = load_f64(e, &in[4]);
  bool ok = X && S && B && Mn && V;
  if (ok) {
    for (int64_t o = 0; o < outer; o++)
      for (int64_t c = 0; c < C; c++) {
        double a = S[c] / sqrt(V[c] + eps), sh = B[c] - Mn[c] * a;
        double *p = X + (o * C + c) * inner;
        for (int64_t i = 0; i < inner; i++) p[i] = p[i] * a + sh;
      }
    store_f64(r, X);
  }
  free(X); free(S); free(B); free(Mn); free(V);
  return ok;
}

static bool eval_instance_norm(ev *e, const qir_tensor *in, qir_tensor *r) {
  const qir_type *xt = &in[0].type;
  if (!check_same_shape(e, xt, &r->type, "operand and result")) return false;
  if (xt->rank < 2) return FAIL(e, "'instance_norm' needs rank >= 2");
  int64_t C = xt->dims[1], outer, len, inner;
  if (numel(&in[1].type) != C || numel(&in[2].type) != C) return FAIL(e, "'instance_norm': scale and bias must have %lld elements", (long long)C);
  double eps = attr_f(e, "epsilon", 1e-5);
  around_axis(xt, 1, &outer, &len, &inner);
  double *X = load_f64(e, &in[0]), *S = load_f64(e, &in[1]), *B = load_f64(e, &in[2]);
  bool ok = X && S && B;
  if (ok) {
    for (int64_t o = 0; o < outer; o++)
      for (int64_t c = 0; c < C; c++) {
        double *p = X + (o * C + c) * inner, mean = 0, var = 0;
        for (int64_t i = 0; i < inner; i++) mean += p[i];
        mean /= (double)inner;
        for (int64_t i = 0; i < inner; i++) var += (p[i] - mean) * (p[i] - mean);
        var /= (double)inner;
        double a = S[c] / sqrt(var + eps);
        for (int64_t i = 0; i < inner; i++) p[i] = (p[i] - mean) * a + B[c];
      }
    store_f64(r, X);
  }
  free(X); free(S); free(B);
  return ok;
}

/* layer_norm over axes [axis, rank); scale and bias broadcast to them. */
static bool eval_layer_norm(ev *e, const qir_tensor *in, qir_tensor *res, int n_res) {
  const qir_type *xt = &in[0].type;
  if (!check_same_shape(e, xt, &res[0].type, "operand and result")) return false;
  int64_t axis;
  if (!get_axis(e, "axis", -1, xt->rank, &axis)) return false;
  double eps = attr_f(e, "epsilon", 1e-5);
  qir_type norm = *xt;
  norm.rank = xt->rank - (int)axis;
  for (int i = 0; i < norm.rank; i++) norm.dims[i] = xt->dims[axis + i];
  if (!check_bcast(e, &in[1], &norm, 1) || !check_bcast(e, &in[2], &norm, 2)) return false;
  int64_t outer = 1, inner = numel(&norm);
  for (int i = 0; i < axis; i++) outer *= xt->dims[i];
  for (int k = 1; k < n_res; k++)
    if (numel(&res[k].type) != outer) return FAIL(e, "'layer_norm': result %d must have %lld elements", k, (long long)outer);
  if (n_res > 3) return FAIL(e, "'layer_norm' has at most 3 results");
  double *X = load_f64(e, &in[0]), *S = expand_f64(e, &in[1], &norm), *B = expand_f64(e, &in[2], &norm);
  double *Mn = xmalloc(e, (size_t)outer * sizeof *Mn), *Is = xmalloc(e, (size_t)outer * sizeof *Is);
  bool ok = X && S && B && Mn && Is;
  if (ok) {
    for (int64_t o = 0; o < outer; o++) {
      double *p = X + o * inner, mean = 0, var = 0;
      for (int64_t i = 0; i < inner; i++) mean += p[i];
      mean /= (double)inner;
      for (int64_t i = 0; i < inner; i++) var += (p[i] - mean) * (p[i] - mean);
      var /= (double)inner;
      double is = 1 / sqrt(var + eps);
      for (int64_t i = 0; i < inner; i++) p[i] = (p[i] - mean) * is * S[i] + B[i];
      Mn[o] = mean;
      Is[o] = is;
    }
    store_f64(&res[0], X);
    if (n_res > 1) store_f64(&res[1], Mn);
    if (n_res > 2) store_f64(&res[2], Is);
  }
  free(X); free(S); free(B); free(Mn); free(Is);
  return ok;
}

static bool eval_lrn(ev *e, const qir_tensor *x, qir_tensor *r) {
  const qir_type *xt = &x->type;
  if (!check_same_shape(e, xt, &r->type, "operand and result")) return false;
  if (xt->rank < 2) return FAIL(e, "'lrn' needs rank >= 2");
  int64_t size = attr_int(e, "size", 0);
  if (size <= 0) return FAIL(e, "'lrn' needs size > 0");
  double alpha = attr_f(e, "alpha", 1e-4), beta = attr_f(e, "beta", 0.75), bias = attr_f(e, "bias", 1.0);
  int64_t C = xt->dims[1], outer, len, inner, lo = (size - 1) / 2, hi = size - 1 - lo;
  around_axis(xt, 1, &outer, &len, &inner);
  double *X = load_f64(e, x), *Y = xmalloc(e, (size_t)numel(xt) * sizeof *Y);
  if (!X || !Y) { free(X); free(Y); return false; }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < inner; i++) {
        double sq = 0;
        /* the window clipped to the channels first: size may be near INT64_MAX */
        int64_t from = c - lo < 0 ? 0 : c - lo, to = hi > C - 1 - c ? C - 1 : c + hi;
        for (int64_t cc = from; cc <= to; cc++)
          if (cc >= 0 && cc < C) {
            double v = X[(o * C + cc) * inner + i];
            sq += v * v;
          }
        int64_t k = (o * C + c) * inner + i;
        Y[k] = X[k] / pow(bias + alpha / (double)size * sq, beta);
      }
  store_f64(r, Y);
  free(X); free(Y);
  return true;
}

static bool eval_lp_norm(ev *e, const qir_tensor *x, qir_tensor *r) {
  if (!check_same_shape(e, &x->type, &r->type, "operand and result")) return false;
  int64_t axis, p = attr_int(e, "p", 2), outer, len, inner;
  if (!get_axis(e, "axis", -1, x->type.rank, &axis)) return false;
  if (p != 1 && p != 2) return FAIL(e, "'lp_normalization': p must be 1 or 2");
  around_axis(&x->type, (int)axis, &outer, &len, &inner);
  double *X = load_f64(e, x);
  if (!X) return false;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double s = 0;
      for (int64_t k = 0; k < len; k++) {
        double v = X[(o * len + k) * inner + i];
        s += p == 1 ? fabs(v) : v * v;
      }
      if (p == 2) s = sqrt(s);
      for (int64_t k = 0; k < len; k++) /* a zero norm gives 0, as ONNX's reference */
        X[(o * len + k) * inner + i] = s == 0 ? 0 : X[(o * len + k) * inner + i] / s;
    }
  store_f64(r, X);
  free(X);
  return true;
}

/* ------------------------------------------------------------ resize
 * ONNX Resize as its reference implementation defines it: separable, every
 * axis maps an output coordinate to an input coordinate, then takes the n
 * nearest input samples (edge-padded, preferring the smaller index) with
 * nearest / linear / cubic weights.  Each axis gets a tap table. */

typedef struct {
  int n;                 /* taps per output position */
  int64_t *idx;          /* [out][n] input indices (clamped) */
  double *wt;            /* [out][n] weights */
  bool *outside;         /* [out]: extrapolated (tf_crop_and_resize) */
} resize_axis;

static void cubic_coeffs(double r, double A, double *c) {
  c[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
  c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
  c[2] = ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1;
  c[3] = ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A;
}

/* Antialiased linear / cubic (downsampling): the kernel stretched by 1/scale,
 * n = 2 - 2*start taps, weights normalised (ONNX's reference). */
static int antialias_start(char mode, double scale) {
  double s = scale < 1 ? scale : 1;
  return (int)floor((mode == 'c' ? -2 : -1) / s) + 1;
}

static double antialias_kernel(char mode, double A, double x) {
  x = fabs(x);
  if (mode == 'l') return x < 1 ? 1 - x : 0;
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0;
}

static bool resize_build_axis(ev *e, resize_axis *ax, int64_t in_len, int64_t out_len, double scale, const double *roi,
                              char mode, const char *ctm, const char *nmode, double A, bool excl, bool antialias) {
  antialias = antialias && mode != 'n';
  int aa_start = antialias ? antialias_start(mode, scale) : 0;
  if (antialias && 2 - 2 * aa_start > 1 << 16) return FAIL(e, "'resize': the antialiasing kernel is too wide");
  ax->n = antialias ? 2 - 2 * aa_start : mode == 'c' ? 4 : 2;
  ax->idx = xmalloc(e, (size_t)(out_len * ax->n) * sizeof *ax->idx);
  ax->wt = xmalloc(e, (size_t)(out_len * ax->n) * sizeof *ax->wt);
  ax->outside = xcalloc(e, (size_t)out_len, sizeof *ax->outside);
  if (!ax->idx || !ax->wt || !ax->outside) return false;
  double out_w = scale * (double)in_len; /* the reference uses the real-valued output extent */
  for (int64_t x = 0; x < out_len; x++) {
    double xo;
    if (!strcmp(ctm, "half_pixel")) xo = ((double)x + 0.5) / scale - 0.5;
    else if (!strcmp(ctm, "half_pixel_symmetric")) {
      double adj = (double)out_len / out_w, center = (double)in_len / 2, offset = center * (1 - adj);
      xo = offset + ((double)x + 0.5) / scale - 0.5;
    } else if (!strcmp(ctm, "pytorch_half_pixel")) xo = out_w > 1 ? ((double)x + 0.5) / scale - 0.5 : 0;
    else if (!strcmp(ctm, "align_corners")) xo = out_w == 1 ? 0 : (double)x * (double)(in_len - 1) / (out_w - 1);
    else if (!strcmp(ctm, "asymmetric")) xo = (double)x / scale;
    else if (!strcmp(ctm, "tf_crop_and_resize")) {
      double r0 = roi ? roi[0] : 0, r1 = roi ? roi[1] : 1;
      xo = out_w == 1 ? (r1 - r0) * (double)(in_len - 1) / 2 : (double)x * (r1 - r0) * (double)(in_len - 1) / (out_w - 1);
      xo += r0 * (double)(in_len - 1);
      if (xo < 0 || xo > (double)(in_len - 1)) ax->outside[x] = true;
    } else {
      return FAIL(e, "'resize': unknown coordinate_transformation_mode '%s'", ctm);
    }
    double fl = floor(xo), ratio = xo == fl ? 1 : xo - fl, c4[4], *c = c4;
    if (antialias) {
      c = xmalloc(e, sizeof *c * (size_t)ax->n);
      if (!c) return false;
      double s = scale < 1 ? scale : 1, sum = 0;
      for (int t = 0; t < ax->n; t++) sum += c[t] = antialias_kernel(mode, A, ((double)(aa_start + t) - ratio) * s);
      for (int t = 0; t < ax->n; t++) c[t] /= sum;
    } else if (mode == 'c') cubic_coeffs(ratio, A, c);
    else if (mode == 'l') { c[0] = 1 - ratio; c[1] = ratio; }
    else {
      bool up;
      if (ratio == 1) up = true;
      else if (!strcmp(nmode, "round_prefer_floor")) up = ratio > 0.5;
      else if (!strcmp(nmode, "round_prefer_ceil")) up = ratio >= 0.5;
      else if (!strcmp(nmode, "floor")) up = false;
      else if (!strcmp(nmode, "ceil")) up = true;
      else return FAIL(e, "'resize': unknown nearest_mode '%s'", nmode);
      c[0] = up ? 0 : 1;
      c[1] = up ? 1 : 0;
    }
    /* the n nearest samples of the edge-padded input, preferring smaller ones */
    int n = ax->n, pad = (n + 1) / 2;
    double xp = xo + pad;
    int64_t limit = in_len + 2 * pad, start;
    if (!(fabs(xp) < 4e18)) start = 0; /* inf / NaN coordinates: any window, weights decide */
    else if (xp == floor(xp)) start = (int64_t)xp - n / 2;
    else start = (int64_t)floor(xp) - n / 2 + 1;
    if (start > limit - n) start = limit - n;
    if (start < 0) start = 0;
    double sum = 0;
    for (int t = 0; t < n; t++) {
      int64_t i = start + t - pad;
      if (excl && (i < 0 || i >= in_len)) c[t] = 0;
      sum += c[t];
      ax->idx[x * n + t] = i < 0 ? 0 : i >= in_len ? in_len - 1 : i;
    }
    for (int t = 0; t < n; t++) ax->wt[x * n + t] = excl ? (sum != 0 ? c[t] / sum : 0) : c[t];
    if (c != c4) free(c);
  }
  return true;
}

static bool eval_resize(ev *e, const qir_tensor *x, qir_tensor *r) {
  const qir_type *xt = &x->type, *rt = &r->type;
  int rank = xt->rank;
  if (rt->rank != rank) return FAIL(e, "'resize': result rank differs from operand rank");
  const char *mode_s = attr_s(e, "mode", "nearest"), *ctm = attr_s(e, "coordinate_transformation_mode", "half_pixel");
  const char *nmode = attr_s(e, "nearest_mode", "round_prefer_floor");
  char mode = !strcmp(mode_s, "nearest") ? 'n' : !strcmp(mode_s, "linear") ? 'l' : !strcmp(mode_s, "cubic") ? 'c' : 0;
  if (!mode) return FAIL(e, "'resize': unknown mode '%s'", mode_s);
  bool antialias = attr_int(e, "antialias", 0) != 0;
  double A = attr_f(e, "cubic_coeff_a", -0.75), extrap = attr_f(e, "extrapolation_value", 0.0);
  bool excl = attr_int(e, "exclude_outside", 0) != 0;
  double scales[QIR_MAX_RANK], roi[2 * QIR_MAX_RANK];
  int ns = qir_op_attr(e->op, "scales") ? qir_op_attr_floats(e->op, "scales", scales, QIR_MAX_RANK) : -2;
  if (ns == -2) {
    for (int i = 0; i < rank; i++) scales[i] = xt->dims[i] ? (double)rt->dims[i] / (double)xt->dims[i] : 1;
  } else if (ns != rank) {
    return FAIL(e, "'resize': 'scales' must have %d numbers", rank);
  }
  int nr = qir_op_attr(e->op, "roi") ? qir_op_attr_floats(e->op, "roi", roi, 2 * QIR_MAX_RANK) : -2;
  if (nr != -2 && nr != 2 * rank) return FAIL(e, "'resize': 'roi' must have %d numbers", 2 * rank);
  for (int i = 0; i < rank; i++) {
    if (!(scales[i] > 0)) return FAIL(e, "'resize': scales must be positive");
    if (xt->dims[i] == 0 && rt->dims[i] != 0) return FAIL(e, "'resize': cannot resize an empty axis");
  }
  resize_axis ax[QIR_MAX_RANK];
  memset(ax, 0, sizeof ax);
  bool ok = true;
  for (int i = 0; ok && i < rank; i++) {
    double rr[2] = {nr == -2 ? 0 : roi[i], nr == -2 ? 1 : roi[i + rank]};
    /* axes kept as they are are not resized, antialias or not */
    bool same = xt->dims[i] == rt->dims[i] && scales[i] == 1;
    ok = resize_build_axis(e, &ax[i], xt->dims[i], rt->dims[i], scales[i], rr, mode, ctm, nmode, A, excl, antialias && !same);
  }
  double *X = ok ? load_f64(e, x) : NULL, *Y = ok ? xmalloc(e, (size_t)numel(rt) * sizeof *Y) : NULL;
  ok = ok && X && Y;
  if (ok) {
    int64_t xst[QIR_MAX_RANK], oidx[QIR_MAX_RANK] = {0}, n = numel(rt), taps = 1, tdims[QIR_MAX_RANK];
    strides_of(xt, xst);
    for (int i = 0; i < rank; i++) { tdims[i] = ax[i].n; taps *= ax[i].n; }
    for (int64_t o = 0; o < n; o++) {
      bool outside = false;
      for (int i = 0; i < rank; i++) outside = outside || ax[i].outside[oidx[i]];
      double acc = 0;
      if (outside) acc = extrap;
      else {
        int64_t t[QIR_MAX_RANK] = {0};
        for (int64_t k = 0; k < taps; k++) {
          double wgt = 1;
          int64_t off = 0;
          for (int i = 0; i < rank; i++) {
            int64_t j = oidx[i] * ax[i].n + t[i];
            wgt *= ax[i].wt[j];
            off += ax[i].idx[j] * xst[i];
          }
          if (wgt != 0) acc += wgt * X[off];
          next_index(t, tdims, rank);
        }
      }
      Y[o] = acc;
      next_index(oidx, rt->dims, rank);
    }
    store_f64(r, Y);
  }
  for (int i = 0; i < rank; i++) { free(ax[i].idx); free(ax[i].wt); free(ax[i].outside); }
  free(X); free(Y);
  return ok;
}

/* ------------------------------------------------------------ recurrent ops (ONNX LSTM, GRU, RNN) */

typedef struct {
  char name[24];
  double alpha, beta;
} rnn_act;

static double act_apply(const rnn_act *a, double x) {
  const char *n = a->name;
  if (!strcmp(n, "sigmoid")) return sigmoid(x);
  if (!strcmp(n, "tanh")) return tanh(x);
  if (!strcmp(n, "relu")) return x > 0 ? x : 0;
  if (!strcmp(n, "affine")) return a->alpha * x + a->beta;
  if (!strcmp(n, "leakyrelu")) return x < 0 ? a->alpha * x : x;
  if (!strcmp(n, "thresholdedrelu")) return x > a->alpha ? x : 0;
  if (!strcmp(n, "scaledtanh")) return a->alpha * tanh(a->beta * x);
  if (!strcmp(n, "hardsigmoid")) return fmax(0, fmin(1, a->alpha * x + a->beta));
  if (!strcmp(n, "elu")) return x < 0 ? a->alpha * (exp(x) - 1) : x;
  if (!strcmp(n, "softsign")) return x / (1 + fabs(x));
  return softplus(x); /* "softplus": the only name left after validation */
}

static bool act_known(const char *n, double *alpha, double *beta) {
  static const struct { const char *n; double a, b; } tab[] = {
      {"sigmoid", 0, 0}, {"tanh", 0, 0}, {"relu", 0, 0}, {"affine", 1, 0}, {"leakyrelu", 0.01, 0},
      {"thresholdedrelu", 1, 0}, {"scaledtanh", 1, 1}, {"hardsigmoid", 0.2, 0.5}, {"elu", 1, 0},
      {"softsign", 0, 0}, {"softplus", 0, 0}};
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
    if (!strcmp(tab[i].n, n)) { *alpha = tab[i].a; *beta = tab[i].b; return true; }
  return false;
}

/* Activations for `nd` directions with `per` functions each. */
static bool get_acts(ev *e, int nd, int per, const char *const *dflt, rnn_act *acts) {
  const qir_attr *a = qir_op_attr(e->op, "activations");
  double al[16], be[16];
  int nal = qir_op_attr(e->op, "activation_alpha") ? qir_op_attr_floats(e->op, "activation_alpha", al, 16) : 0;
  int nbe = qir_op_attr(e->op, "activation_beta") ? qir_op_attr_floats(e->op, "activation_beta", be, 16) : 0;
  int n = nd * per;
  if (a && (a->val.kind != QIR_ATTR_LIST || (a->val.n != n && a->val.n != per)))
    return FAIL(e, "'%s': 'activations' must list %d functions", opname(e->op), n);
  for (int i = 0; i < n; i++) {
    const char *s = dflt[i % per];
    if (a) {
      const qir_attr_val *it = &a->val.items[a->val.n == n ? i : i % per];
      if (it->kind != QIR_ATTR_STRING && it->kind != QIR_ATTR_WORD) return FAIL(e, "'%s': activations must be names", opname(e->op));
      s = it->s;
    }
    size_t k = 0;
    for (; s[k] && k + 1 < sizeof acts[i].name; k++) acts[i].name[k] = (char)tolower((unsigned char)s[k]);
    acts[i].name[k] = 0;
    if (!act_known(acts[i].name, &acts[i].alpha, &acts[i].beta)) return FAIL(e, "'%s': unknown activation '%s'", opname(e->op), s);
    if (i < nal) acts[i].alpha = al[i];
    if (i < nbe) acts[i].beta = be[i];
  }
  return true;
}

/* All three recurrences share the layout handling and the time loop; `kind`
 * says which cell: 'l' LSTM (gates i,o,f,c), 'g' GRU (z,r,h), 'r' RNN. */
static bool eval_rnn(ev *e, const qir_tensor *in, qir_tensor *res, int n_res) {
  char kind = e->op->code == QIR_OP_LSTM ? 'l' : e->op->code == QIR_OP_GRU ? 'g' : 'r';
  int ngates = kind == 'l' ? 4 : kind == 'g' ? 3 : 1;
  const char *dir = attr_s(e, "direction", "forward");
  int nd = !strcmp(dir, "bidirectional") ? 2 : 1;
  if (nd == 1 && strcmp(dir, "forward") && strcmp(dir, "reverse")) return FAIL(e, "'%s': unknown direction '%s'", opname(e->op), dir);
  int64_t H = attr_int(e, "hidden_size", 0), layout = attr_int(e, "layout", 0);
  double clip = attr_f(e, "clip", 0);
  bool has_clip = qir_op_attr(e->op, "clip") != NULL, input_forget = attr_int(e, "input_forget", 0) != 0;
  bool lbr = attr_int(e, "linear_before_reset", 0) != 0;
  const qir_type *xt = &in[0].type;
  if (xt->rank != 3) return FAIL(e, "'%s': X must be 3-D", opname(e->op));
  int64_t T = layout ? xt->dims[1] : xt->dims[0], Bn = layout ? xt->dims[0] : xt->dims[1], I = xt->dims[2];
  if (H <= 0) H = in[2].type.rank == 3 ? in[2].type.dims[2] : 0;
  if (H <= 0) return FAIL(e, "'%s' needs hidden_size", opname(e->op));
  int64_t G = ngates * H;
  /* operand element counts */
  struct { int k; int64_t n; const char *what; } need[] = {
      {1, nd * G * I, "W"}, {2, nd * G * H, "R"}, {3, nd * 2 * G, "B"}, {4, Bn, "sequence_lens"},
      {5, nd * Bn * H, "initial_h"}, {6, nd * Bn * H, "initial_c"}, {7, nd * 3 * H, "P"}};
  int n_ops = kind == 'l' ? 8 : 6;
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (need[i].k < n_ops && numel(&in[need[i].k].type) != need[i].n)
      return FAIL(e, "'%s': %s must have %lld elements", opname(e->op), need[i].what, (long long)need[i].n);
  int want_res = kind == 'l' ? 3 : 2;
  if (n_res != want_res) return FAIL(e, "'%s' has %d results", opname(e->op), want_res);
  int64_t ny = T * nd * Bn * H;
  if (numel(&res[0].type) != ny) return FAIL(e, "'%s': Y must have %lld elements", opname(e->op), (long long)ny);
  for (int k = 1; k < n_res; k++)
    if (numel(&res[k].type) != nd * Bn * H) return FAIL(e, "'%s': result %d must have %lld elements", opname(e->op), k, (long long)(nd * Bn * H));
  static const char *const lstm_d[] = {"Sigmoid", "Tanh", "Tanh"}, *const gru_d[] = {"Sigmoid", "Tanh"}, *const rnn_d[] = {"Tanh"};
  int per = kind == 'l' ? 3 : kind == 'g' ? 2 : 1;
  rnn_act acts[6];
  if (!get_acts(e, nd, per, kind == 'l' ? lstm_d : kind == 'g' ? gru_d : rnn_d, acts)) return false;
  double *X = load_f64(e, &in[0]), *W = load_f64(e, &in[1]), *R = load_f64(e, &in[2]), *Bv = load_f64(e, &in[3]);
  int64_t *L = load_i64(e, &in[4]);
  double *H0 = load_f64(e, &in[5]), *C0 = kind == 'l' ? load_f64(e, &in[6]) : NULL, *P = kind == 'l' ? load_f64(e, &in[7]) : NULL;
  double *Y = xcalloc(e, (size_t)ny, sizeof *Y), *Yh = xcalloc(e, (size_t)(nd * Bn * H), sizeof *Yh);
  double *Yc = xcalloc(e, (size_t)(nd * Bn * H), sizeof *Yc);
  double *h = xmalloc(e, (size_t)H * sizeof *h), *c = xmalloc(e, (size_t)H * sizeof *c), *gx = xmalloc(e, (size_t)G * sizeof *gx),
         *gh = xmalloc(e, (size_t)G * sizeof *gh), *hn = xmalloc(e, (size_t)H * sizeof *hn);
  bool ok = X && W && R && Bv && L && H0 && (kind != 'l' || (C0 && P)) && Y && Yh && Yc && h && c && gx && gh && hn;
  for (int64_t b = 0; ok && b < Bn; b++)
    if (L[b] < 0 || L[b] > T) ok = FAIL(e, "'%s': sequence length %lld out of range [0, %lld]", opname(e->op), (long long)L[b], (long long)T);
  for (int d = 0; ok && d < nd; d++) {
    bool rev = nd == 2 ? d == 1 : !strcmp(dir, "reverse");
    const double *Wd = W + d * G * I, *Rd = R + d * G * H, *Wb = Bv + d * 2 * G, *Rb = Wb + G, *Pd = P ? P + d * 3 * H : NULL;
    const rnn_act *f = &acts[d * per], *g = per > 1 ? &acts[d * per + 1] : NULL, *ha = per > 2 ? &acts[d * per + 2] : NULL;
    for (int64_t b = 0; b < Bn; b++) {
      int64_t hoff = layout ? (b * nd + d) * H : (d * Bn + b) * H;
      memcpy(h, H0 + hoff, (size_t)H * sizeof *h);
      if (C0) memcpy(c, C0 + hoff, (size_t)H * sizeof *c);
      for (int64_t s = 0; s < L[b]; s++) {
        int64_t t = rev ? L[b] - 1 - s : s;
        const double *xt_ = X + (layout ? (b * T + t) * I : (t * Bn + b) * I);
        for (int64_t j = 0; j < G; j++) {
          double ax = Wb[j], ah = Rb[j];
          for (int64_t i = 0; i < I; i++) ax += Wd[j * I + i] * xt_[i];
          for (int64_t i = 0; i < H; i++) ah += Rd[j * H + i] * h[i];
          gx[j] = ax;
          gh[j] = ah;
        }
#define CLIPV(v) (has_clip ? fmax(-clip, fmin(clip, (v))) : (v))
        if (kind == 'l') {
          for (int64_t j = 0; j < H; j++) {
            double gi = gx[j] + gh[j] + Pd[j] * c[j], go, gf = gx[2 * H + j] + gh[2 * H + j] + Pd[2 * H + j] * c[j],
                   gc = gx[3 * H + j] + gh[3 * H + j];
            double it = act_apply(f, CLIPV(gi)), ft = act_apply(f, CLIPV(gf)), ct = act_apply(g, CLIPV(gc));
            if (input_forget) ft = 1 - it;
            c[j] = ft * c[j] + it * ct;
            go = gx[H + j] + gh[H + j] + Pd[H + j] * c[j];
            double ot = act_apply(f, CLIPV(go));
            hn[j] = ot * act_apply(ha, c[j]);
          }
        } else if (kind == 'g') {
          for (int64_t j = 0; j < H; j++) c[j] = act_apply(f, CLIPV(gx[H + j] + gh[H + j])); /* reset gate */
          for (int64_t j = 0; j < H; j++) {
            double z = act_apply(f, CLIPV(gx[j] + gh[j])), pre;
            if (lbr) pre = gx[2 * H + j] + c[j] * gh[2 * H + j];
            else {
              double s2 = Rb[2 * H + j];
              for (int64_t i = 0; i < H; i++) s2 += Rd[(2 * H + j) * H + i] * (c[i] * h[i]);
              pre = gx[2 * H + j] + s2;
            }
            hn[j] = (1 - z) * act_apply(g, CLIPV(pre)) + z * h[j];
          }
        } else {
          for (int64_t j = 0; j < H; j++) hn[j] = act_apply(f, CLIPV(gx[j] + gh[j]));
        }
#undef CLIPV
        memcpy(h, hn, (size_t)H * sizeof *h);
        double *yp = Y + (layout ? ((b * T + t) * nd + d) * H : ((t * nd + d) * Bn + b) * H);
        memcpy(yp, h, (size_t)H * sizeof *h);
      }
      memcpy(Yh + hoff, h, (size_t)H * sizeof *h);
      if (C0) memcpy(Yc + hoff, c, (size_t)H * sizeof *c);
    }
  }
  if (ok) {
    store_f64(&res[0], Y);
    store_f64(&res[1], Yh);
    if (kind == 'l') store_f64(&res[2], Yc);
  }
  free(X); free(W); free(R); free(Bv); free(L); free(H0); free(C0); free(P);
  free(Y); free(Yh); free(Yc); free(h); free(c); free(gx); free(gh); free(hn);
  return ok;
}

/* ------------------------------------------------------------ compute
 * The general form `compute [axes] reduce [axes] R(body)`, evaluated straight
 * from the expression tree, independent of te.c, so it can check what -lower
 * produces.
 *
 * Typing is static, as in C: literals of integers, loop variables and accesses
 * to integer or bool tensors are integers (exact int64); integer op integer
 * stays integer (`/` truncates and `%` takes the dividend's sign, as in C;
 * floordiv floors; comparisons and && || ! give 0/1); anything with a real is
 * real (double); select is real when either side is; cast<T> rounds to T.
 * `select`, `&&` and `||` evaluate only what they take, so guarded
 * out-of-range accesses are fine; an unguarded one is an error.  A reduction
 * accumulates in the result's kind (double for float results, int64
 * otherwise) in the order of the reduction axes, innermost fastest.
 *
 * To keep the interpretation cheap the body is evaluated for a whole row of
 * points at once: the lanes run along the last output axis (or, for scalar
 * results, the last reduction axis); subtrees that do not depend on that axis
 * are evaluated once per row.  Every lane sees exactly the scalar semantics. */

typedef struct vnode vnode;
struct vnode {
  const qir_expr *x;
  bool is_int;                  /* static type: int64 or double */
  bool uniform;                 /* does not depend on the lane variable: lane 0 only */
  int64_t *iv;                  /* lane values (int nodes) */
  double *fv;                   /* lane values (real nodes) */
  unsigned char *m1, *m2;       /* lane masks for select / && / || */
  int64_t *off;                 /* lane offsets (accesses) */
  vnode *a[3];
  int n_args;
};

typedef struct {
  ev *e;
  const qir_tensor *ops;
  int64_t (*ost)[QIR_MAX_RANK];
  int64_t *vars;                /* current loop variable values */
  int lane_lo, lane_hi;         /* variables [lane_lo, lane_hi) run along the lanes */
  int64_t **lane_tab;           /* per variable: its value in each lane (lane variables only) */
  int64_t L;                    /* lanes */
  bool failed;
  vnode *pool;
  int n_nodes, cap_nodes;
  void **bufs;                  /* every buffer, for freeing */
  int n_bufs, cap_bufs;
} vctx;

static void *vbuf(vctx *c, size_t n) {
  if (c->n_bufs == c->cap_bufs) {
    int cap = c->cap_bufs ? 2 * c->cap_bufs : 64;
    void **nb = realloc(c->bufs, sizeof *nb * (size_t)cap);
    if (!nb) return NULL;
    c->bufs = nb;
    c->cap_bufs = cap;
  }
  void *p = fits_in_memory(n) ? calloc(n ? n : 1, 1) : NULL;
  if (p) c->bufs[c->n_bufs++] = p;
  return p;
}

static bool fn_keeps_int(qir_expr_fn fn) {
  switch (fn) {
  case QIR_FN_NEG: case QIR_FN_ABS: case QIR_FN_SIGN: case QIR_FN_FLOOR: case QIR_FN_CEIL: case QIR_FN_ROUND: return true;
  default: return false;
  }
}

static bool fn_gives_int(qir_expr_fn fn) {
  switch (fn) {
  case QIR_FN_LT: case QIR_FN_LE: case QIR_FN_GT: case QIR_FN_GE: case QIR_FN_EQ: case QIR_FN_NE:
  case QIR_FN_AND: case QIR_FN_OR: case QIR_FN_NOT: case QIR_FN_ISNAN: case QIR_FN_ISINF: return true;
  default: return false;
  }
}

/* Builds the typed lane tree of x (already checked by compute_check). */
static vnode *vbuild(vctx *c, const qir_expr *x) {
  if (c->n_nodes == c->cap_nodes) return NULL; /* pool sized by the caller */
  vnode *n = &c->pool[c->n_nodes++];
  memset(n, 0, sizeof *n);
  n->x = x;
  n->n_args = x->n_args > 3 || x->kind == QIR_EX_ACCESS ? 0 : x->n_args;
  bool uniform = true, all_int = true;
  for (int k = 0; k < n->n_args; k++) {
    if (!(n->a[k] = vbuild(c, x->args[k]))) return NULL;
    uniform = uniform && n->a[k]->uniform;
    all_int = all_int && n->a[k]->is_int;
  }
  switch (x->kind) {
  case QIR_EX_INT: n->is_int = true; break;
  case QIR_EX_FLOAT: n->is_int = false; break;
  case QIR_EX_VAR: n->is_int = true; uniform = x->var < c->lane_lo || x->var >= c->lane_hi; break;
  case QIR_EX_ACCESS: {
    n->is_int = !is_float(c->ops[x->operand].type.dtype);
    /* the indices are kept apart: an access can have more than 3 */
    vnode **idx = vbuf(c, sizeof *idx * (size_t)(x->n_args ? x->n_args : 1));
    if (!idx) return NULL;
    for (int k = 0; k < x->n_args; k++) {
      if (!(idx[k] = vbuild(c, x->args[k]))) return NULL;
      uniform = uniform && idx[k]->uniform;
    }
    n->a[0] = (vnode *)idx; /* the index nodes (n_args stays 0) */
    n->off = vbuf(c, (size_t)c->L * sizeof *n->off);
    if (!n->off) return NULL;
    break;
  }
  case QIR_EX_UNARY: n->is_int = fn_gives_int(x->fn) || (all_int && fn_keeps_int(x->fn)); break;
  case QIR_EX_BINARY: n->is_int = fn_gives_int(x->fn) || (all_int && x->fn != QIR_FN_ATAN2); break;
  case QIR_EX_SELECT: n->is_int = n->a[1]->is_int && n->a[2]->is_int; break;
  case QIR_EX_CAST: n->is_int = !is_float(x->cast_to); break;
  }
  n->uniform = uniform;
  size_t lanes = (size_t)(uniform ? 1 : c->L);
  if (n->is_int) n->iv = vbuf(c, lanes * sizeof *n->iv);
  else n->fv = vbuf(c, lanes * sizeof *n->fv);
  if (x->kind == QIR_EX_SELECT || x->kind == QIR_EX_BINARY) {
    n->m1 = vbuf(c, (size_t)c->L);
    n->m2 = vbuf(c, (size_t)c->L);
    if (!n->m1 || !n->m2) return NULL;
  }
  return (n->iv || n->fv) ? n : NULL;
}

static size_t vcount(const qir_expr *x) {
  size_t n = 1;
  for (int k = 0; k < x->n_args; k++) n += vcount(x->args[k]);
  return n;
}

#define LANE(n, l) ((n)->uniform ? 0 : (l))
#define GI(n, l) ((n)->iv[LANE(n, l)])
#define GF(n, l) ((n)->is_int ? (double)GI(n, l) : (n)->fv[LANE(n, l)])
/* lanes of node n to compute under mask m */
#define FOR_LANES(n, m, l)                                                                             \
  for (int64_t l = 0, l##_end = (n)->uniform ? 1 : c->L; l < l##_end; l++)                            \
    if ((n)->uniform || !(m) || (m)[l])

/* Runs BODY (using lane l) on the lanes node n computes under mask m, with
 * the dispatch outside the loop. */
#define LANES_DO(n, m, ...)                                                                            \
  do {                                                                                                 \
    if ((n)->uniform) {                                                                                \
      int64_t l = 0;                                                                                   \
      __VA_ARGS__;                                                                                     \
    } else if (!(m)) {                                                                                 \
      for (int64_t l = 0; l < c->L; l++) { __VA_ARGS__; }                                              \
    } else {                                                                                           \
      for (int64_t l = 0; l < c->L; l++)                                                               \
        if ((m)[l]) { __VA_ARGS__; }                                                                   \
    }                                                                                                  \
  } while (0)

static bool any_lane(const vctx *c, const unsigned char *m) {
  if (!m) return true;
  for (int64_t l = 0; l < c->L; l++)
    if (m[l]) return true;
  return false;
}

static void vfail(vctx *c, const qir_expr *x, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void vfail(vctx *c, const qir_expr *x, const char *fmt, ...) {
  if (c->failed) return;
  c->failed = true;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  qir_error(c->e->d, x->loc.line ? x->loc : c->e->op->loc, "'compute': %s", msg);
}

/* Rounds a value to what dtype t holds (cast<t>). */
static double real_to_dtype(double v, qir_dtype t) {
  unsigned char buf[8];
  if (qir_dtype_is_narrow(t)) return qir_narrow_to_double(t, qir_narrow_from_double(t, v, true)); /* casts saturate */
  qir_store_elem(t, buf, 0, v);
  return qir_load_elem(t, buf, 0);
}
static int64_t int_to_dtype(int64_t v, qir_dtype t) {
  unsigned char buf[8];
  store_int(t, buf, 0, v, false);
  return load_int(t, buf, 0);
}
static int64_t realcast_to_int(double v, qir_dtype t) {
  unsigned char buf[8];
  if (t == QIR_BOOL) return v != 0;
  qir_store_elem(t, buf, 0, trunc(v)); /* saturates; NaN gives 0 */
  return load_int(t, buf, 0);
}

static void veval(vctx *c, vnode *n, const unsigned char *m);

static bool truthy(const vnode *n, int64_t l) { return n->is_int ? GI(n, l) != 0 : GF(n, l) != 0; }

/* && / || / select: evaluate the second part only on the lanes that need it. */
static void veval_masked(vctx *c, vnode *n, const unsigned char *m) {
  const qir_expr *x = n->x;
  vnode *a = n->a[0];
  veval(c, a, m);
  if (c->failed) return;
  if (a->uniform) { /* one decision for every lane: no masks needed */
    bool t = truthy(a, 0);
    if (x->kind == QIR_EX_SELECT) {
      vnode *s = n->a[t ? 1 : 2];
      veval(c, s, m);
      if (c->failed) return;
      if (n->is_int) LANES_DO(n, m, n->iv[l] = GI(s, l));
      else LANES_DO(n, m, n->fv[l] = GF(s, l));
      return;
    }
    vnode *b = n->a[1];
    if (t == (x->fn == QIR_FN_OR)) { /* true || _, false && _ */
      LANES_DO(n, m, n->iv[l] = t);
      return;
    }
    veval(c, b, m);
    if (c->failed) return;
    LANES_DO(n, m, n->iv[l] = truthy(b, l));
    return;
  }
  for (int64_t l = 0; l < c->L; l++) {
    bool on = !m || m[l], t = on && truthy(a, l);
    n->m1[l] = t;
    n->m2[l] = on && !t;
  }
  if (x->kind == QIR_EX_SELECT) {
    vnode *p = n->a[1], *q = n->a[2];
    if (any_lane(c, n->m1)) veval(c, p, n->m1);
    if (!c->failed && any_lane(c, n->m2)) veval(c, q, n->m2);
    if (c->failed) return;
    FOR_LANES(n, m, l) {
      vnode *s = truthy(a, l) ? p : q;
      if (n->is_int) n->iv[l] = GI(s, l);
      else n->fv[l] = GF(s, l);
    }
    return;
  }
  /* AND needs b where a is true, OR where a is false */
  vnode *b = n->a[1];
  unsigned char *need = x->fn == QIR_FN_AND ? n->m1 : n->m2;
  if (any_lane(c, need)) veval(c, b, need);
  if (c->failed) return;
  FOR_LANES(n, m, l) n->iv[l] = x->fn == QIR_FN_AND ? (truthy(a, l) && truthy(b, l)) : (truthy(a, l) || truthy(b, l));
}

static void veval(vctx *c, vnode *n, const unsigned char *m) {
  const qir_expr *x = n->x;
  if (c->failed) return;
  if (n->uniform && !any_lane(c, m)) return;
  switch (x->kind) {
  case QIR_EX_INT: n->iv[0] = x->ival; if (!n->uniform) FOR_LANES(n, m, l) n->iv[l] = x->ival; return;
  case QIR_EX_FLOAT: n->fv[0] = x->fval; if (!n->uniform) FOR_LANES(n, m, l) n->fv[l] = x->fval; return;
  case QIR_EX_VAR:
    if (n->uniform) n->iv[0] = c->vars[x->var];
    else memcpy(n->iv, c->lane_tab[x->var], (size_t)c->L * sizeof *n->iv);
    return;
  case QIR_EX_ACCESS: {
    vnode **idx = (vnode **)n->a[0];
    const qir_tensor *t = &c->ops[x->operand];
    for (int k = 0; k < x->n_args; k++) veval(c, idx[k], m);
    if (c->failed) return;
    qir_dtype dt = t->type.dtype;
    int64_t nl = n->uniform ? 1 : c->L, *off = n->off;
    /* offsets axis by axis (tight loops), checking every active lane's index */
    for (int64_t l = 0; l < nl; l++) off[l] = 0;
    for (int k = 0; k < x->n_args; k++) {
      vnode *ix = idx[k];
      int64_t st = c->ost[x->operand][k], ext = t->type.dims[k];
      if (!ix->is_int) { vfail(c, x, "tensor index is not an integer on axis %d", k); return; }
      if (ix->uniform) {
        int64_t i = ix->iv[0];
        if (i < 0 || i >= ext) {
          vfail(c, x, "index %lld out of range [0, %lld) on axis %d of operand %d", (long long)i, (long long)ext, k, x->operand);
          return;
        }
        for (int64_t l = 0; l < nl; l++) off[l] += i * st;
        continue;
      }
      const int64_t *iv = ix->iv;
      bool bad = false;
      for (int64_t l = 0; l < nl; l++) {
        bool on = !m || m[l];
        bad |= on && (iv[l] < 0 || iv[l] >= ext);
        off[l] = (int64_t)((uint64_t)off[l] + (uint64_t)iv[l] * (uint64_t)st); /* idle lanes may hold stale values */
      }
      if (bad)
        for (int64_t l = 0; l < nl; l++)
          if ((!m || m[l]) && (iv[l] < 0 || iv[l] >= ext)) {
            vfail(c, x, "index %lld out of range [0, %lld) on axis %d of operand %d", (long long)iv[l], (long long)ext, k, x->operand);
            return;
          }
    }
    if (n->is_int) {
      FOR_LANES(n, m, l) n->iv[l] = load_int(dt, t->data, off[l]);
    } else if (dt == QIR_F32) {
      const float *src = t->data;
      if (!m || n->uniform) for (int64_t l = 0; l < nl; l++) n->fv[l] = src[off[l]];
      else for (int64_t l = 0; l < nl; l++) n->fv[l] = m[l] ? src[off[l]] : 0;
    } else {
      FOR_LANES(n, m, l) n->fv[l] = qir_load_elem(dt, t->data, off[l]);
    }
    return;
  }
  case QIR_EX_CAST: {
    vnode *a = n->a[0];
    veval(c, a, m);
    if (c->failed) return;
    qir_dtype to = x->cast_to;
    FOR_LANES(n, m, l) {
      if (n->is_int) n->iv[l] = a->is_int ? int_to_dtype(GI(a, l), to) : realcast_to_int(GF(a, l), to);
      else n->fv[l] = real_to_dtype(GF(a, l), to);
    }
    return;
  }
  case QIR_EX_SELECT: veval_masked(c, n, m); return;
  case QIR_EX_UNARY: {
    vnode *a = n->a[0];
    veval(c, a, m);
    if (c->failed) return;
    if (a->is_int && (fn_keeps_int(x->fn) || fn_gives_int(x->fn))) {
      FOR_LANES(n, m, l) {
        int64_t v = GI(a, l);
        switch (x->fn) {
        case QIR_FN_NEG: v = (int64_t)(0 - (uint64_t)v); break;
        case QIR_FN_ABS: v = v < 0 ? (int64_t)(0 - (uint64_t)v) : v; break;
        case QIR_FN_SIGN: v = (v > 0) - (v < 0); break;
        case QIR_FN_NOT: v = v == 0; break;
        case QIR_FN_ISNAN: case QIR_FN_ISINF: v = 0; break;
        default: break; /* floor, ceil, round of an integer */
        }
        n->iv[l] = v;
      }
      return;
    }
#define FU(EXPR) LANES_DO(n, m, { double f = GF(a, l); n->fv[l] = (EXPR); })
#define CU(EXPR) LANES_DO(n, m, { double f = GF(a, l); n->iv[l] = (EXPR); })
    switch (x->fn) {
    case QIR_FN_NEG: FU(-f); break;
    case QIR_FN_NOT: CU(f == 0); break;
    case QIR_FN_ISNAN: CU(isnan(f) != 0); break;
    case QIR_FN_ISINF: CU(isinf(f) != 0); break;
    case QIR_FN_EXP: FU(exp(f)); break;
    case QIR_FN_LOG: FU(log(f)); break;
    case QIR_FN_SQRT: FU(sqrt(f)); break;
    case QIR_FN_RSQRT: FU(1 / sqrt(f)); break;
    case QIR_FN_TANH: FU(tanh(f)); break;
    case QIR_FN_SIGMOID: FU(sigmoid(f)); break;
    case QIR_FN_ERF: FU(erf(f)); break;
    case QIR_FN_ABS: FU(fabs(f)); break;
    case QIR_FN_FLOOR: FU(floor(f)); break;
    case QIR_FN_CEIL: FU(ceil(f)); break;
    case QIR_FN_ROUND: FU(round_even(f)); break;
    case QIR_FN_SIN: FU(sin(f)); break;
    case QIR_FN_COS: FU(cos(f)); break;
    case QIR_FN_ASIN: FU(asin(f)); break;
    case QIR_FN_ACOS: FU(acos(f)); break;
    case QIR_FN_ATAN: FU(atan(f)); break;
    case QIR_FN_SINH: FU(sinh(f)); break;
    case QIR_FN_COSH: FU(cosh(f)); break;
    case QIR_FN_ASINH: FU(asinh(f)); break;
    case QIR_FN_ACOSH: FU(acosh(f)); break;
    case QIR_FN_ATANH: FU(atanh(f)); break;
    case QIR_FN_RECIP: FU(1 / f); break;
    case QIR_FN_SIGN: FU(signum(f)); break;
    default: vfail(c, x, "bad unary function %d", (int)x->fn); return;
    }
#undef FU
#undef CU
    return;
  }
  case QIR_EX_BINARY: {
    if (x->fn == QIR_FN_AND || x->fn == QIR_FN_OR) { veval_masked(c, n, m); return; }
    vnode *a = n->a[0], *b = n->a[1];
    veval(c, a, m);
    veval(c, b, m);
    if (c->failed) return;
    if (a->is_int && b->is_int && x->fn != QIR_FN_ATAN2) {
      int64_t *o = n->iv;
#define IB(EXPR) LANES_DO(n, m, { int64_t p = GI(a, l), q = GI(b, l); o[l] = (EXPR); })
      switch (x->fn) {
      case QIR_FN_ADD: IB((int64_t)((uint64_t)p + (uint64_t)q)); break;
      case QIR_FN_SUB: IB((int64_t)((uint64_t)p - (uint64_t)q)); break;
      case QIR_FN_MUL: IB((int64_t)((uint64_t)p * (uint64_t)q)); break;
      case QIR_FN_LT: IB(p < q); break;
      case QIR_FN_LE: IB(p <= q); break;
      case QIR_FN_GT: IB(p > q); break;
      case QIR_FN_GE: IB(p >= q); break;
      case QIR_FN_EQ: IB(p == q); break;
      case QIR_FN_NE: IB(p != q); break;
      case QIR_FN_MAX: IB(p > q ? p : q); break;
      case QIR_FN_MIN: IB(p < q ? p : q); break;
      case QIR_FN_BITAND: IB((int64_t)((uint64_t)p & (uint64_t)q)); break;
      case QIR_FN_BITOR: IB((int64_t)((uint64_t)p | (uint64_t)q)); break;
      case QIR_FN_BITXOR: IB((int64_t)((uint64_t)p ^ (uint64_t)q)); break;
      case QIR_FN_SHL: IB((uint64_t)q > 63 ? 0 : (int64_t)((uint64_t)p << q)); break;
      case QIR_FN_SHR: IB((uint64_t)q > 63 ? 0 : (int64_t)((uint64_t)p >> q)); break;
      case QIR_FN_DIV: case QIR_FN_MOD: case QIR_FN_FLOORDIV: case QIR_FN_FMOD: case QIR_FN_POW:
        FOR_LANES(n, m, l) {
          int64_t p = GI(a, l), q = GI(b, l), r = 0;
          uint64_t up = (uint64_t)p;
          if (x->fn == QIR_FN_POW) {
            binary_int(QIR_OP_POW, p, q, false, 0, &r);
          } else if (q == 0) {
            vfail(c, x, "integer division by zero (%lld / 0)", (long long)p);
            return;
          } else if (q == -1) {
            r = (x->fn == QIR_FN_DIV || x->fn == QIR_FN_FLOORDIV) ? (int64_t)(0 - up) : 0;
          } else if (x->fn == QIR_FN_DIV) {
            r = p / q;
          } else if (x->fn != QIR_FN_FLOORDIV) {
            r = p % q;
          } else {
            r = p / q;
            if (p % q != 0 && ((p < 0) != (q < 0))) r--;
          }
          o[l] = r;
        }
        break;
      default: vfail(c, x, "bad binary function %d", (int)x->fn); return;
      }
#undef IB
      return;
    }
#define FB(EXPR) LANES_DO(n, m, { double p = GF(a, l), q = GF(b, l); n->fv[l] = (EXPR); })
#define CB(EXPR) LANES_DO(n, m, { double p = GF(a, l), q = GF(b, l); n->iv[l] = (EXPR); })
    switch (x->fn) {
    case QIR_FN_ADD: FB(p + q); break;
    case QIR_FN_SUB: FB(p - q); break;
    case QIR_FN_MUL: FB(p * q); break;
    case QIR_FN_DIV: FB(p / q); break;
    case QIR_FN_MOD: case QIR_FN_FMOD: FB(fmod(p, q)); break;
    case QIR_FN_FLOORDIV: FB(floor(p / q)); break;
    case QIR_FN_LT: CB(p < q); break;
    case QIR_FN_LE: CB(p <= q); break;
    case QIR_FN_GT: CB(p > q); break;
    case QIR_FN_GE: CB(p >= q); break;
    case QIR_FN_EQ: CB(p == q); break;
    case QIR_FN_NE: CB(p != q); break;
    case QIR_FN_MAX: FB(fmax_nan(p, q)); break;
    case QIR_FN_MIN: FB(fmin_nan(p, q)); break;
    case QIR_FN_POW: FB(pow(p, q)); break;
    case QIR_FN_ATAN2: FB(atan2(p, q)); break;
    default: vfail(c, x, "bad binary function %d", (int)x->fn); return;
    }
#undef FB
#undef CB
    return;
  }
  }
  vfail(c, x, "bad expression kind %d", (int)x->kind);
}

/* Checks variable numbers and access ranks of a body once, up front. */
static bool compute_check(ev *e, const qir_compute *cp, const qir_expr *x, const qir_tensor *ops, int n_ops) {
  if (!x) return FAIL(e, "'compute': missing expression");
  if (x->kind == QIR_EX_VAR && (x->var < 0 || x->var >= cp->n_axes + cp->n_red)) return FAIL(e, "'compute': bad loop variable %d", x->var);
  if (x->kind == QIR_EX_ACCESS) {
    if (x->operand < 0 || x->operand >= n_ops) return FAIL(e, "'compute': access to operand %d of %d", x->operand, n_ops);
    if (x->n_args != ops[x->operand].type.rank)
      return FAIL(e, "'compute': operand %d has rank %d but is indexed with %d subscripts", x->operand, ops[x->operand].type.rank, x->n_args);
  }
  if ((x->kind == QIR_EX_UNARY || x->kind == QIR_EX_CAST) && x->n_args != 1) return FAIL(e, "'compute': malformed expression");
  if (x->kind == QIR_EX_BINARY && x->n_args != 2) return FAIL(e, "'compute': malformed expression");
  if (x->kind == QIR_EX_SELECT && x->n_args != 3) return FAIL(e, "'compute': malformed expression");
  if ((x->kind == QIR_EX_INT || x->kind == QIR_EX_FLOAT || x->kind == QIR_EX_VAR) && x->n_args != 0) return FAIL(e, "'compute': malformed expression");
  if ((unsigned)x->kind > QIR_EX_CAST) return FAIL(e, "'compute': bad expression kind");
  if ((x->kind == QIR_EX_UNARY || x->kind == QIR_EX_BINARY) && (unsigned)x->fn >= QIR_FN_COUNT) return FAIL(e, "'compute': bad function");
  if (x->kind == QIR_EX_CAST && (unsigned)x->cast_to >= QIR_DTYPE_COUNT) return FAIL(e, "'compute': bad cast type");
  for (int k = 0; k < x->n_args; k++)
    if (!compute_check(e, cp, x->args[k], ops, n_ops)) return false;
  return true;
}

/* Most (output x reduction) points one compute op may take: about an hour. */
#define MAX_COMPUTE_POINTS ((int64_t)1 << 40)

static bool eval_compute(ev *e, const qir_tensor *ops, int n_ops, qir_tensor *r) {
  const qir_compute *cp = e->op->comp;
  if (!cp) return FAIL(e, "'compute' op without a body");
  if (cp->n_axes != r->type.rank) return FAIL(e, "'compute': %d output axes but the result has rank %d", cp->n_axes, r->type.rank);
  for (int i = 0; i < cp->n_axes; i++)
    if (cp->axis_extents[i] != r->type.dims[i]) return FAIL(e, "'compute': axis %d has extent %lld but the result %lld", i,
                                                             (long long)cp->axis_extents[i], (long long)r->type.dims[i]);
  if ((cp->n_red > 0) != (cp->reduce != QIR_REDUCE_NONE)) return FAIL(e, "'compute': reduction axes and reduction kind disagree");
  if (cp->n_red > QIR_MAX_RANK) return FAIL(e, "'compute': too many reduction axes");
  for (int i = 0; i < cp->n_red; i++)
    if (cp->axis_extents[cp->n_axes + i] < 0) return FAIL(e, "'compute': negative extent");
  if (!compute_check(e, cp, cp->body, ops, n_ops)) return false;
  int64_t n_out = numel(&r->type), nred = 1, rdims[QIR_MAX_RANK], points;
  bool too_many = false;
  for (int i = 0; i < cp->n_red; i++) {
    rdims[i] = cp->axis_extents[cp->n_axes + i];
    too_many |= __builtin_mul_overflow(nred, rdims[i], &nred);
  }
  if (n_out == 0) return true;
  /* a reduction of 2^63 steps is not an error in the IR, but no run would end */
  too_many |= __builtin_mul_overflow(n_out, nred, &points);
  if (too_many || points > MAX_COMPUTE_POINTS)
    return FAIL(e, "'compute': %s iteration points, more than the interpreter runs (at most 2^40)",
                too_many ? "over 2^63" : "too many");
  /* lanes: along the trailing output axes (up to a few thousand points), or
   * for scalar results along the last reduction axis */
  bool lanes_out = cp->n_axes > 0;
  int lane_lo = cp->n_axes, lane_hi = cp->n_axes;
  int64_t L = 1;
  if (lanes_out) {
    lane_hi = cp->n_axes;
    lane_lo = cp->n_axes - 1;
    L = cp->axis_extents[lane_lo];
    while (lane_lo > 0 && L * cp->axis_extents[lane_lo - 1] <= 4096) L *= cp->axis_extents[--lane_lo];
  } else if (cp->n_red > 0 && nred > 0) {
    lane_lo = cp->n_axes + cp->n_red - 1;
    lane_hi = lane_lo + 1;
    L = cp->axis_extents[lane_lo];
  }
  int64_t vars[2 * QIR_MAX_RANK] = {0};
  int64_t *lane_tab[2 * QIR_MAX_RANK] = {NULL};
  vctx c = {.e = e, .ops = ops, .vars = vars, .lane_lo = lane_lo, .lane_hi = lane_hi, .lane_tab = lane_tab, .L = L};
  bool tabs_ok = true;
  for (int v = lane_lo; v < lane_hi; v++) { /* lane -> value of each lane variable */
    int64_t inner_prod = 1;
    for (int u = v + 1; u < lane_hi; u++) inner_prod *= cp->axis_extents[u];
    lane_tab[v] = vbuf(&c, (size_t)L * sizeof(int64_t));
    if (!lane_tab[v]) { tabs_ok = false; break; }
    for (int64_t l = 0; l < L; l++) lane_tab[v][l] = (l / inner_prod) % cp->axis_extents[v];
  }
  c.cap_nodes = (int)vcount(cp->body);
  c.pool = calloc((size_t)c.cap_nodes, sizeof *c.pool);
  c.ost = xcalloc(e, (size_t)(n_ops ? n_ops : 1), sizeof *c.ost);
  vnode *root = tabs_ok && c.pool && c.ost ? vbuild(&c, cp->body) : NULL;
  bool real = is_float(r->type.dtype);
  double *fa = xmalloc(e, (size_t)L * sizeof *fa);
  int64_t *ia = xmalloc(e, (size_t)L * sizeof *ia);
  if (!root || !fa || !ia) {
    if (c.pool && c.ost && fa && ia) qir_error(e->d, e->op->loc, "'compute': out of memory");
    goto done;
  }
  for (int k = 0; k < n_ops; k++) strides_of(&ops[k].type, c.ost[k]);
  qir_dtype dt = r->type.dtype;
  int n_outer = lanes_out ? lane_lo : cp->n_axes;  /* output axes walked one by one */
  int n_rw = lanes_out ? cp->n_red : (cp->n_red > 0 ? cp->n_red - 1 : 0); /* reduction axes walked */
  int64_t rows = lanes_out ? n_out / L : n_out, nrw = 1;
  for (int i = 0; i < n_rw; i++) nrw *= rdims[i];
  if (cp->n_red == 0) nrw = 1;
  int64_t *rv = vars + cp->n_axes;
  double finit = cp->reduce == QIR_REDUCE_PROD ? 1 : cp->reduce == QIR_REDUCE_MAX ? -INFINITY : cp->reduce == QIR_REDUCE_MIN ? INFINITY : 0;
  int64_t iinit = cp->reduce == QIR_REDUCE_PROD ? 1 : cp->reduce == QIR_REDUCE_MAX ? INT64_MIN : cp->reduce == QIR_REDUCE_MIN ? INT64_MAX : 0;
  for (int64_t row = 0; row < rows && !c.failed; row++) {
    int64_t lanes_here = lanes_out ? L : 1;
    for (int64_t l = 0; l < lanes_here; l++) { fa[l] = finit; ia[l] = iinit; }
    for (int i = 0; i < cp->n_red; i++) rv[i] = 0;
    bool empty = cp->n_red > 0 && nred == 0;
    for (int64_t k = 0; k < nrw && !c.failed && !empty; k++) {
      veval(&c, root, NULL);
      if (c.failed) break;
      /* fold: with lanes on the output, lane l is output l; else lanes are the last reduction axis, in order */
      int64_t nl = lanes_out ? L : (cp->n_red > 0 ? L : 1);
      for (int64_t l = 0; l < nl; l++) {
        int64_t dst = lanes_out ? l : 0;
        if (cp->n_red == 0) {
          if (real) fa[dst] = GF(root, l);
          else ia[dst] = root->is_int ? GI(root, l) : realcast_to_int(GF(root, l), dt);
          continue;
        }
        if (real) {
          double f = GF(root, l), *a = &fa[dst];
          switch (cp->reduce) {
          case QIR_REDUCE_SUM: *a += f; break;
          case QIR_REDUCE_PROD: *a *= f; break;
          case QIR_REDUCE_MAX: *a = fmax_nan(*a, f); break;
          default: *a = fmin_nan(*a, f); break;
          }
        } else {
          int64_t v = root->is_int ? GI(root, l) : realcast_to_int(GF(root, l), QIR_I64), *a = &ia[dst];
          switch (cp->reduce) {
          case QIR_REDUCE_SUM: *a = (int64_t)((uint64_t)*a + (uint64_t)v); break;
          case QIR_REDUCE_PROD: *a = (int64_t)((uint64_t)*a * (uint64_t)v); break;
          case QIR_REDUCE_MAX: *a = v > *a ? v : *a; break;
          default: *a = v < *a ? v : *a; break;
          }
        }
      }
      next_index(rv, rdims, n_rw);
    }
    if (c.failed) break;
    int64_t base = lanes_out ? row * L : row;
    for (int64_t l = 0; l < lanes_here; l++) {
      if (real) qir_store_elem(dt, r->data, base + l, fa[l]);
      else store_int(dt, r->data, base + l, int_to_dtype(ia[l], dt), false);
    }
    next_index(vars, r->type.dims, n_outer);
  }
done:
  for (int i = 0; i < c.n_bufs; i++) free(c.bufs[i]);
  free(c.bufs); free(c.pool); free(c.ost); free(fa); free(ia);
  return root && fa && ia && !c.failed;
}

/* ------------------------------------------------------------ one op */

static bool eval_const(ev *e, qir_tensor *r) {
  qir_op *op = (qir_op *)e->op; /* loading sidecar bytes caches them in the op */
  if (!op->cst) return FAIL(e, "'const' without a payload");
  size_t want = (size_t)numel(&r->type) * esize(&r->type);
  if (op->cst->splat) {
    size_t es = esize(&r->type);
    if (op->cst->nbytes < es || !op->cst->data) return FAIL(e, "'const': splat payload too short");
    for (size_t i = 0; i < want; i += es) memcpy((char *)r->data + i, op->cst->data, es);
    return true;
  }
  if (op->cst->offset < 0 && op->cst->nbytes != want)
    return FAIL(e, "'const': payload has %zu bytes, its type needs %zu", op->cst->nbytes, want);
  const void *p = qir_const_data(e->m, op, e->d);
  if (!p) return false;
  memcpy(r->data, p, want);
  return true;
}

static bool dispatch(ev *e, const qir_tensor *in, int n_in, qir_tensor *res, int n_res) {
  const qir_op *op = e->op;
  switch (op->code) {
  case QIR_OP_CONST: return eval_const(e, &res[0]);
  case QIR_OP_COMPUTE: return eval_compute(e, in, n_in, &res[0]);
  case QIR_OP_IDENTITY: case QIR_OP_NEG: case QIR_OP_ABS: case QIR_OP_EXP: case QIR_OP_LOG: case QIR_OP_SQRT:
  case QIR_OP_RECIPROCAL: case QIR_OP_SIGMOID: case QIR_OP_TANH: case QIR_OP_RELU: case QIR_OP_ERF: case QIR_OP_CEIL:
  case QIR_OP_FLOOR: case QIR_OP_ROUND: case QIR_OP_SIN: case QIR_OP_COS: case QIR_OP_SIGN: case QIR_OP_NOT:
  case QIR_OP_ASIN: case QIR_OP_ACOS: case QIR_OP_ATAN: case QIR_OP_SINH: case QIR_OP_COSH: case QIR_OP_ASINH: case QIR_OP_ACOSH: case QIR_OP_ATANH:
  case QIR_OP_ISNAN: case QIR_OP_CAST: case QIR_OP_LEAKY_RELU: case QIR_OP_ELU: case QIR_OP_SELU:
  case QIR_OP_HARD_SIGMOID: case QIR_OP_HARD_SWISH: case QIR_OP_SOFTPLUS: case QIR_OP_GELU: case QIR_OP_BITWISE_NOT:
    return eval_unary(e, &in[0], &res[0]);
  case QIR_OP_CLIP: return eval_clip(e, &in[0], &in[1], &in[2], &res[0]);
  case QIR_OP_ADD: case QIR_OP_SUB: case QIR_OP_MUL: case QIR_OP_DIV: case QIR_OP_MOD: case QIR_OP_POW:
  case QIR_OP_MAX: case QIR_OP_MIN: case QIR_OP_SUM: case QIR_OP_MEAN: case QIR_OP_EQUAL: case QIR_OP_LESS:
  case QIR_OP_LESS_EQUAL: case QIR_OP_GREATER: case QIR_OP_GREATER_EQUAL: case QIR_OP_AND: case QIR_OP_OR:
  case QIR_OP_XOR: case QIR_OP_PRELU: case QIR_OP_BITWISE_AND: case QIR_OP_BITWISE_OR: case QIR_OP_BITWISE_XOR:
  case QIR_OP_BIT_SHIFT:
    return eval_nary(e, in, n_in, &res[0]);
  case QIR_OP_WHERE: return eval_where(e, in, &res[0]);
  case QIR_OP_REDUCE_SUM: case QIR_OP_REDUCE_MEAN: case QIR_OP_REDUCE_MAX: case QIR_OP_REDUCE_MIN:
  case QIR_OP_REDUCE_PROD: case QIR_OP_REDUCE_L2:
    return eval_reduce(e, &in[0], &res[0]);
  case QIR_OP_ARGMAX: case QIR_OP_ARGMIN: return eval_argmax(e, &in[0], &res[0]);
  case QIR_OP_TOP_K: return n_res == 2 ? eval_top_k(e, &in[0], &res[0], &res[1]) : FAIL(e, "'top_k' has two results");
  case QIR_OP_RESHAPE: return eval_reshape(e, &in[0], &res[0]);
  case QIR_OP_TRANSPOSE: return eval_transpose(e, &in[0], &res[0]);
  case QIR_OP_CONCAT: return eval_concat(e, in, n_in, &res[0]);
  case QIR_OP_SPLIT: return eval_split(e, &in[0], res, n_res);
  case QIR_OP_SLICE: return eval_slice(e, &in[0], &res[0]);
  case QIR_OP_PAD: return eval_pad(e, &in[0], &in[1], &res[0]);
  case QIR_OP_EXPAND: case QIR_OP_TILE: return eval_expand_tile(e, &in[0], &res[0]);
  case QIR_OP_GATHER: return eval_gather(e, &in[0], &in[1], &res[0]);
  case QIR_OP_GATHER_ELEMENTS: return eval_gather_elements(e, &in[0], &in[1], &res[0]);
  case QIR_OP_GATHER_ND: return eval_gather_nd(e, &in[0], &in[1], &res[0]);
  case QIR_OP_SCATTER_ELEMENTS: case QIR_OP_SCATTER_ND: return eval_scatter(e, &in[0], &in[1], &in[2], &res[0]);
  case QIR_OP_RESIZE: return eval_resize(e, &in[0], &res[0]);
  case QIR_OP_GRID_SAMPLE: return eval_grid_sample(e, &in[0], &in[1], &res[0]);
  case QIR_OP_DEPTH_TO_SPACE: case QIR_OP_SPACE_TO_DEPTH: return eval_depth_space(e, &in[0], &res[0]);
  case QIR_OP_RANGE: return eval_range(e, in, &res[0]);
  case QIR_OP_TRILU: return eval_trilu(e, &in[0], &res[0]);
  case QIR_OP_CUMSUM: case QIR_OP_CUMPROD: return eval_cumsum(e, &in[0], &res[0]);
  case QIR_OP_ONE_HOT: return eval_one_hot(e, &in[0], &in[1], &res[0]);
  case QIR_OP_MATMUL: return eval_matmul(e, &in[0], &in[1], &res[0]);
  case QIR_OP_GEMM: return eval_gemm(e, &in[0], &in[1], &in[2], &res[0]);
  case QIR_OP_EINSUM: return eval_einsum(e, in, n_in, &res[0]);
  case QIR_OP_CONV: return eval_conv(e, &in[0], &in[1], &in[2], &res[0]);
  case QIR_OP_CONV_TRANSPOSE: return eval_conv_transpose(e, &in[0], &in[1], &in[2], &res[0]);
  case QIR_OP_MAX_POOL: case QIR_OP_AVG_POOL: case QIR_OP_GLOBAL_AVG_POOL: case QIR_OP_GLOBAL_MAX_POOL:
    return eval_pool(e, &in[0], res, n_res);
  case QIR_OP_LP_NORMALIZATION: return eval_lp_norm(e, &in[0], &res[0]);
  case QIR_OP_BATCH_NORM: return eval_batch_norm(e, in, &res[0]);
  case QIR_OP_INSTANCE_NORM: return eval_instance_norm(e, in, &res[0]);
  case QIR_OP_LAYER_NORM: return eval_layer_norm(e, in, res, n_res);
  case QIR_OP_LRN: return eval_lrn(e, &in[0], &res[0]);
  case QIR_OP_SOFTMAX: case QIR_OP_LOG_SOFTMAX: return eval_softmax(e, &in[0], &res[0]);
  case QIR_OP_ATTENTION: return eval_attention(e, &in[0], &in[1], &in[2], &in[3], &res[0]);
  case QIR_OP_BITCAST: /* the same bytes (the shape rule checked the sizes) */
    if (numel(&in[0].type) != numel(&res[0].type) || esize(&in[0].type) != esize(&res[0].type))
      return FAIL(e, "'bitcast': operand and result sizes differ");
    memcpy(res[0].data, in[0].data, (size_t)numel(&res[0].type) * esize(&res[0].type));
    return true;
  case QIR_OP_LSTM: case QIR_OP_GRU: case QIR_OP_RNN: return eval_rnn(e, in, res, n_res);
  default: return FAIL(e, "'%s' cannot be evaluated on its own", opname(op));
  }
}

bool qir_eval_op(qir_module *m, const qir_op *op, const qir_tensor *operands, qir_tensor *results, qir_diag *d) {
  ev e = {.m = m, .op = op, .d = d};
  const qir_opinfo *info = qir_opinfo_get(op->code);
  char a[128], b[128];
  for (int i = 0; i < op->n_results; i++) results[i].data = NULL;
  if (!info) return FAIL(&e, "unknown op code %d", (int)op->code);
  if (op->n_regions) return FAIL(&e, "'%s' has regions: evaluate it with qir_eval_module", info->name);
  int max_ops = info->max_operands < 0 ? op->n_operands : info->max_operands;
  if (op->n_operands < info->min_operands || op->n_operands > max_ops)
    return FAIL(&e, "'%s' has %d operands", info->name, op->n_operands);
  if (op->n_results < info->n_results || (!(info->flags & QIR_OPF_VARIADIC_RESULTS) && op->n_results != info->n_results))
    return FAIL(&e, "'%s' has %d results", info->name, op->n_results);
  for (int i = 0; i < op->n_operands; i++) {
    if (!operands[i].data) return FAIL(&e, "'%s': operand %d has no data", info->name, i);
    if (op->operands[i] && !qir_type_equal(&operands[i].type, &op->operands[i]->type))
      return FAIL(&e, "'%s': operand %d is %s but the op expects %s", info->name, i, type_str(&operands[i].type, a, sizeof a),
                  type_str(&op->operands[i]->type, b, sizeof b));
    int64_t n;
    if (!numel_checked(&operands[i].type, &n)) return FAIL(&e, "'%s': operand %d has an invalid type", info->name, i);
  }
  for (int i = 0; i < op->n_results; i++)
    if (!tensor_alloc(&e, &results[i], &op->results[i]->type)) {
      for (int j = 0; j < i; j++) qir_tensor_free(&results[j]);
      return false;
    }
  if (!dispatch(&e, operands, op->n_operands, results, op->n_results)) {
    for (int i = 0; i < op->n_results; i++) qir_tensor_free(&results[i]);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------ the module
 * Values live in a table indexed by qir_value id.  Each region gets, once, a
 * list per op of the values defined in the region whose last use (nested
 * regions included) is that op, so tensors are freed as soon as possible. */

typedef struct region_plan {
  const qir_region *r;
  int n_ops;
  int *start;                   /* [n_ops + 1] into ids */
  int *ids;                     /* values to free after op i */
  struct region_plan *next;
} region_plan;

typedef struct {
  qir_module *m;
  qir_diag *d;
  int n_vals;
  qir_tensor *vals;             /* data NULL = not live */
  region_plan *plans;
  const qir_tensor *inputs;
  int n_inputs, next_input;
  qir_tensor *outputs;
  int n_outputs, next_output;
} mctx;

static bool mfail(mctx *c, const qir_op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool mfail(mctx *c, const qir_op *op, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  qir_diag_vreport(c->d, QIR_SEV_ERROR, op ? op->loc : (qir_loc){0}, fmt, ap);
  va_end(ap);
  return false;
}

static bool tensor_copy(mctx *c, const qir_op *op, const qir_tensor *src, qir_tensor *dst) {
  size_t n = (size_t)numel(&src->type) * esize(&src->type);
  dst->type = src->type;
  dst->data = malloc(n ? n : 1);
  if (!dst->data) return mfail(c, op, "out of memory copying a tensor of %zu bytes", n);
  memcpy(dst->data, src->data, n);
  return true;
}

static void note_uses(const qir_region *r, const qir_op *op, int index, int *last, int n_vals) {
  for (int i = 0; i < op->n_operands; i++) {
    const qir_value *v = op->operands[i];
    if (v && v->id >= 0 && v->id < n_vals && v->def && v->def->parent == r) last[v->id] = index;
  }
  for (int k = 0; k < op->n_regions; k++)
    for (const qir_op *o = op->regions[k]->first; o; o = o->next) note_uses(r, o, index, last, n_vals);
}

static region_plan *plan_for(mctx *c, const qir_region *r) {
  for (region_plan *p = c->plans; p; p = p->next)
    if (p->r == r) return p;
  region_plan *p = calloc(1, sizeof *p);
  int n = 0;
  for (const qir_op *o = r->first; o; o = o->next) n++;
  int *last = malloc(sizeof *last * (size_t)(c->n_vals ? c->n_vals : 1));
  if (!p || !last) { free(p); free(last); return NULL; }
  for (int i = 0; i < c->n_vals; i++) last[i] = -1;
  int i = 0, n_ids = 0;
  for (const qir_op *o = r->first; o; o = o->next, i++) {
    for (int k = 0; k < o->n_results; k++) /* unused results die right away */
      if (o->results[k]->id >= 0 && o->results[k]->id < c->n_vals) last[o->results[k]->id] = i, n_ids++;
    note_uses(r, o, i, last, c->n_vals);
  }
  p->r = r;
  p->n_ops = n;
  p->start = calloc((size_t)n + 2, sizeof *p->start);
  p->ids = malloc(sizeof *p->ids * (size_t)(n_ids + 1));
  if (!p->start || !p->ids) { free(p->start); free(p->ids); free(p); free(last); return NULL; }
  /* counting sort of the values by last use */
  i = 0;
  for (const qir_op *o = r->first; o; o = o->next, i++)
    for (int k = 0; k < o->n_results; k++) {
      int id = o->results[k]->id;
      if (id >= 0 && id < c->n_vals) p->start[last[id] + 1]++;
    }
  for (int j = 0; j < n; j++) p->start[j + 1] += p->start[j];
  int *fill = calloc((size_t)n + 1, sizeof *fill);
  if (!fill) { free(p->start); free(p->ids); free(p); free(last); return NULL; }
  i = 0;
  for (const qir_op *o = r->first; o; o = o->next, i++)
    for (int k = 0; k < o->n_results; k++) {
      int id = o->results[k]->id;
      if (id >= 0 && id < c->n_vals) p->ids[p->start[last[id]] + fill[last[id]]++] = id;
    }
  free(fill);
  free(last);
  p->next = c->plans;
  c->plans = p;
  return p;
}

static qir_tensor *value_tensor(mctx *c, const qir_op *op, const qir_value *v) {
  if (!v || v->id < 0 || v->id >= c->n_vals || !c->vals[v->id].data) {
    mfail(c, op, "'%s': operand %%%s has no value here (used before it is defined?)", opname(op), v && v->name ? v->name : "?");
    return NULL;
  }
  return &c->vals[v->id];
}

static bool set_value(mctx *c, const qir_op *op, const qir_value *v, qir_tensor t) {
  if (v->id < 0 || v->id >= c->n_vals) {
    free(t.data);
    return mfail(c, op, "value id %d out of range", v->id);
  }
  qir_tensor_free(&c->vals[v->id]);
  c->vals[v->id] = t;
  return true;
}

static bool eval_region(mctx *c, const qir_region *r, qir_tensor *args, qir_tensor *yields, int n_yields);

static bool scalar_of(mctx *c, const qir_op *op, const qir_value *v, int64_t *out) {
  qir_tensor *t = value_tensor(c, op, v);
  if (!t) return false;
  if (numel(&t->type) != 1) return mfail(c, op, "'%s': %%%s must be a scalar", opname(op), v->name ? v->name : "?");
  *out = load_int(t->type.dtype, t->data, 0);
  return true;
}

static bool make_scalar(mctx *c, const qir_op *op, qir_dtype dt, int64_t v, qir_tensor *t) {
  t->type = qir_type_make(dt, 0, NULL);
  t->data = calloc(1, 8);
  if (!t->data) return mfail(c, op, "out of memory");
  store_int(dt, t->data, 0, v, false);
  return true;
}

static void free_all(qir_tensor *t, int n) {
  for (int i = 0; t && i < n; i++) qir_tensor_free(&t[i]);
}

/* ONNX Loop: see ops.def. */
static bool eval_loop(mctx *c, const qir_op *op) {
  const qir_region *body = op->regions[0];
  int n_car = op->n_operands - 2, n_scan = op->n_results - n_car;
  if (n_car < 0 || n_scan < 0) return mfail(c, op, "'loop': %d results for %d carried values", op->n_results, n_car);
  if (body->n_args != 2 + n_car) return mfail(c, op, "'loop': body has %d arguments, expected %d", body->n_args, 2 + n_car);
  int64_t trip, cond;
  if (!scalar_of(c, op, op->operands[0], &trip) || !scalar_of(c, op, op->operands[1], &cond)) return false;
  int n_y = 1 + n_car + n_scan;
  qir_tensor *car = calloc((size_t)n_car + 1, sizeof *car), *scan = calloc((size_t)n_scan + 1, sizeof *scan);
  qir_tensor *args = calloc((size_t)n_car + 2, sizeof *args), *ys = calloc((size_t)n_y, sizeof *ys);
  bool ok = car && scan && args && ys;
  if (!ok) mfail(c, op, "out of memory");
  for (int k = 0; ok && k < n_car; k++) {
    qir_tensor *t = value_tensor(c, op, op->operands[2 + k]);
    ok = t && tensor_copy(c, op, t, &car[k]);
    if (ok && !qir_type_equal(&car[k].type, &op->results[k]->type)) ok = mfail(c, op, "'loop': carried value %d and result %d differ in type", k, k);
  }
  ev e = {.m = c->m, .op = op, .d = c->d};
  for (int k = 0; ok && k < n_scan; k++) {
    const qir_type *st = &op->results[n_car + k]->type;
    if (st->rank < 1) ok = mfail(c, op, "'loop': scan output %d must have rank >= 1", k);
    else ok = tensor_alloc(&e, &scan[k], st);
  }
  int64_t it = 0;
  for (; ok && it < trip && cond; it++) {
    ok = make_scalar(c, op, QIR_I64, it, &args[0]) && make_scalar(c, op, QIR_BOOL, 1, &args[1]);
    for (int k = 0; k < n_car; k++) { args[2 + k] = car[k]; car[k].data = NULL; }
    if (ok) ok = eval_region(c, body, args, ys, n_y);
    else free_all(args, 2 + n_car);
    if (!ok) break;
    cond = load_int(ys[0].type.dtype, ys[0].data, 0);
    if (numel(&ys[0].type) != 1) ok = mfail(c, op, "'loop': the body must yield a scalar condition first");
    for (int k = 0; ok && k < n_car; k++) {
      if (!qir_type_equal(&ys[1 + k].type, &op->results[k]->type)) ok = mfail(c, op, "'loop': yielded value %d changes type", k + 1);
      car[k] = ys[1 + k];
      ys[1 + k].data = NULL;
    }
    for (int k = 0; ok && k < n_scan; k++) {
      const qir_tensor *y = &ys[1 + n_car + k];
      qir_tensor *s = &scan[k];
      int64_t per = s->type.dims[0] ? numel(&s->type) / s->type.dims[0] : 0;
      if (y->type.dtype != s->type.dtype || numel(&y->type) != per || y->type.rank != s->type.rank - 1)
        ok = mfail(c, op, "'loop': scan value %d does not fit scan output %d", k, k);
      else if (it >= s->type.dims[0])
        ok = mfail(c, op, "'loop': iteration %lld exceeds the static scan extent %lld", (long long)it, (long long)s->type.dims[0]);
      else
        memcpy((char *)s->data + (size_t)(it * per) * esize(&s->type), y->data, (size_t)per * esize(&s->type));
    }
    free_all(ys, n_y);
  }
  for (int k = 0; ok && k < n_scan; k++) {
    if (scan[k].type.bounded && it <= scan[k].type.dims[0]) {
      /* a bounded extent: the rows produced, within the memory of the bound */
      scan[k].type.dims[0] = it;
      scan[k].type.bounded = false;
    } else if (scan[k].type.dims[0] != it)
      ok = mfail(c, op, "'loop' ran %lld iterations but scan output %d has static extent %lld", (long long)it, k, (long long)scan[k].type.dims[0]);
  }
  for (int k = 0; ok && k < n_car; k++) { ok = set_value(c, op, op->results[k], car[k]); car[k].data = NULL; }
  for (int k = 0; ok && k < n_scan; k++) { ok = set_value(c, op, op->results[n_car + k], scan[k]); scan[k].data = NULL; }
  free_all(car, n_car);
  free_all(scan, n_scan);
  free(car); free(scan); free(args); free(ys);
  return ok;
}

static bool eval_if(mctx *c, const qir_op *op) {
  int64_t cond;
  if (!scalar_of(c, op, op->operands[0], &cond)) return false;
  const qir_region *r = op->regions[cond ? 0 : 1];
  if (r->n_args) return mfail(c, op, "'if' regions take no arguments");
  /* The importer keeps a branch it could not type for these shapes as a
   * placeholder: taking it would give made-up numbers, so it is an error. */
  const char *dead = qir_op_attr_str(op, "onnx_dead_branch", NULL);
  if (dead && strcmp(dead, cond ? "then" : "else") == 0)
    return mfail(c, op, "'if' takes its %s branch, which was not imported for these input shapes", dead);
  qir_tensor *ys = calloc((size_t)op->n_results + 1, sizeof *ys);
  if (!ys) return mfail(c, op, "out of memory");
  bool ok = eval_region(c, r, NULL, ys, op->n_results);
  for (int k = 0; ok && k < op->n_results; k++) {
    if (!qir_type_equal(&ys[k].type, &op->results[k]->type)) ok = mfail(c, op, "'if': branch yields value %d of another type", k);
    else { ok = set_value(c, op, op->results[k], ys[k]); ys[k].data = NULL; }
  }
  free_all(ys, op->n_results);
  free(ys);
  return ok;
}

/* A region whose arguments are bound in order to op's operands (a kernel
 * group's, a version's), its yields op's results. */
static bool eval_bound_region(mctx *c, const qir_op *op, const qir_region *r, const char *what) {
  if (r->n_args != op->n_operands) return mfail(c, op, "'%s': %d operands for %d region arguments", what, op->n_operands, r->n_args);
  qir_tensor *args = calloc((size_t)op->n_operands + 1, sizeof *args);
  qir_tensor *ys = calloc((size_t)op->n_results + 1, sizeof *ys);
  bool ok = args && ys;
  if (!ok) mfail(c, op, "out of memory");
  int copied = 0;
  for (; ok && copied < op->n_operands; copied++) {
    qir_tensor *t = value_tensor(c, op, op->operands[copied]);
    ok = t && tensor_copy(c, op, t, &args[copied]);
  }
  if (ok) ok = eval_region(c, r, args, ys, op->n_results);
  else if (args) free_all(args, copied);
  for (int k = 0; ok && k < op->n_results; k++) {
    if (!qir_type_equal(&ys[k].type, &op->results[k]->type)) ok = mfail(c, op, "'%s': its region yields value %d of another type", what, k);
    else { ok = set_value(c, op, op->results[k], ys[k]); ys[k].data = NULL; }
  }
  if (ys) free_all(ys, op->n_results);
  free(ys);
  free(args);
  return ok;
}

/* A kernel group computes what its ops compute, in order: the fusion levels
 * decide where tiles live on a device, never the numbers. */
static bool eval_kernel(mctx *c, const qir_op *op) { return eval_bound_region(c, op, op->regions[0], "kernel"); }

/* versions: qrun specializes a module with symbols before it runs (the
 * region a run takes replaces the op); in a static module, the first region
 * whose arguments have the operands' types. */
static bool eval_versions(mctx *c, const qir_op *op) {
  for (int k = 0; k < op->n_regions; k++) {
    const qir_region *r = op->regions[k];
    bool fits = r->n_args == op->n_operands;
    for (int i = 0; fits && i < r->n_args; i++) fits = qir_type_equal(&r->args[i]->type, &op->operands[i]->type);
    if (fits) return eval_bound_region(c, op, r, "versions");
  }
  return mfail(c, op, "'versions': no region takes operands of these types");
}

static bool eval_plain_op(mctx *c, const qir_op *op) {
  qir_tensor in_small[8], res_small[8];
  qir_tensor *in = op->n_operands <= 8 ? in_small : malloc(sizeof *in * (size_t)op->n_operands);
  qir_tensor *res = op->n_results <= 8 ? res_small : calloc((size_t)op->n_results, sizeof *res);
  bool ok = in && res;
  if (!ok) mfail(c, op, "out of memory");
  for (int i = 0; ok && i < op->n_operands; i++) {
    qir_tensor *t = value_tensor(c, op, op->operands[i]);
    if (!t) ok = false;
    else in[i] = *t;
  }
  if (ok) ok = qir_eval_op(c->m, op, in, res, c->d);
  for (int i = 0; ok && i < op->n_results; i++) ok = set_value(c, op, op->results[i], res[i]);
  if (in != in_small) free(in);
  if (res != res_small) free(res);
  return ok;
}

/* Runs region r: takes ownership of args; fills yields (fresh copies). */
static bool eval_region(mctx *c, const qir_region *r, qir_tensor *args, qir_tensor *yields, int n_yields) {
  bool ok = true;
  for (int k = 0; k < r->n_args; k++) {
    if (ok) ok = set_value(c, NULL, r->args[k], args[k]);
    else qir_tensor_free(&args[k]);
  }
  region_plan *plan = ok ? plan_for(c, r) : NULL;
  if (ok && !plan) ok = mfail(c, r->parent_op, "out of memory");
  bool yielded = r->parent_op == NULL;
  int i = 0;
  for (const qir_op *op = r->first; ok && op; op = op->next, i++) {
    switch (op->code) {
    case QIR_OP_INPUT:
      if (r->parent_op) ok = mfail(c, op, "'input' inside a region");
      else if (c->next_input >= c->n_inputs) ok = mfail(c, op, "the module has more inputs than the %d given", c->n_inputs);
      else {
        const qir_tensor *src = &c->inputs[c->next_input++];
        char a[128], b[128];
        qir_tensor t;
        if (!qir_type_equal(&src->type, &op->results[0]->type))
          ok = mfail(c, op, "input %d is %s but the module expects %s", c->next_input - 1, type_str(&src->type, a, sizeof a),
                     type_str(&op->results[0]->type, b, sizeof b));
        else ok = tensor_copy(c, op, src, &t) && set_value(c, op, op->results[0], t);
      }
      break;
    case QIR_OP_OUTPUT: {
      qir_tensor *t = value_tensor(c, op, op->operands[0]);
      if (!t) ok = false;
      else if (r->parent_op) ok = mfail(c, op, "'output' inside a region");
      else if (c->next_output >= c->n_outputs) ok = mfail(c, op, "the module has more outputs than the %d expected", c->n_outputs);
      else ok = tensor_copy(c, op, t, &c->outputs[c->next_output++]);
      break;
    }
    case QIR_OP_YIELD:
      if (op->n_operands != n_yields) ok = mfail(c, op, "'yield' has %d values, expected %d", op->n_operands, n_yields);
      for (int k = 0; ok && k < op->n_operands; k++) {
        qir_tensor *t = value_tensor(c, op, op->operands[k]);
        ok = t && tensor_copy(c, op, t, &yields[k]);
      }
      yielded = true;
      break;
    case QIR_OP_LOOP: ok = eval_loop(c, op); break;
    case QIR_OP_IF: ok = eval_if(c, op); break;
    case QIR_OP_KERNEL: ok = eval_kernel(c, op); break;
    case QIR_OP_VERSIONS: ok = eval_versions(c, op); break;
    case QIR_OP_RPROGRAM: break;   /* a schedule: its kernels were evaluated where they stand */
    default: ok = eval_plain_op(c, op); break;
    }
    if (ok && plan && i < plan->n_ops)
      for (int j = plan->start[i]; j < plan->start[i + 1]; j++) qir_tensor_free(&c->vals[plan->ids[j]]);
  }
  if (ok && !yielded) ok = mfail(c, r->parent_op, "region ends without 'yield'");
  /* everything defined here dies with the region */
  for (int k = 0; k < r->n_args; k++)
    if (r->args[k]->id >= 0 && r->args[k]->id < c->n_vals) qir_tensor_free(&c->vals[r->args[k]->id]);
  for (const qir_op *op = r->first; op; op = op->next)
    for (int k = 0; k < op->n_results; k++)
      if (op->results[k]->id >= 0 && op->results[k]->id < c->n_vals) qir_tensor_free(&c->vals[op->results[k]->id]);
  if (!ok && yields && r->parent_op) free_all(yields, n_yields);
  return ok;
}

bool qir_eval_module(qir_module *m, const qir_tensor *inputs, int n_inputs, qir_tensor *outputs, int n_outputs, qir_diag *d) {
  mctx c = {.m = m, .d = d, .n_vals = m->next_value_id, .inputs = inputs, .n_inputs = n_inputs, .outputs = outputs,
            .n_outputs = n_outputs};
  for (int k = 0; k < n_outputs; k++) outputs[k].data = NULL;
  c.vals = calloc((size_t)c.n_vals + 1, sizeof *c.vals);
  if (!c.vals) {
    qir_error(d, (qir_loc){0}, "out of memory");
    return false;
  }
  bool ok = eval_region(&c, m->body, NULL, NULL, 0);
  if (ok && c.next_input != n_inputs) ok = mfail(&c, NULL, "the module has %d inputs but %d were given", c.next_input, n_inputs);
  if (ok && c.next_output != n_outputs) ok = mfail(&c, NULL, "the module has %d outputs but %d were expected", c.next_output, n_outputs);
  free_all(c.vals, c.n_vals);
  free(c.vals);
  for (region_plan *p = c.plans, *n; p; p = n) {
    n = p->next;
    free(p->start);
    free(p->ids);
    free(p);
  }
  if (!ok) free_all(outputs, n_outputs);
  return ok;
}
