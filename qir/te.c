/* te.c: the tensor-expression definition of every named op that has one.
 *
 * qir_op_to_compute() builds one `compute` op computing the same result as a
 * named op; qir_op_expand_computes() also covers ops that need a short chain
 * of computes (softmax = max, sum of exp, divide).  The computes keep the
 * named op's operands in order, so access n of the body reads operand n.
 *
 * Expression semantics these definitions rely on (C-like, as qcodegen emits
 * them): loop variables, integer literals and accesses of integer/bool tensors
 * are i64; float literals and accesses of float tensors are double; a binary
 * op on two i64 stays i64 (`/` truncates, `%` is C's remainder), mixed operands
 * are double; comparisons, && || not give 0/1; abs, neg, min, max, select keep
 * i64 when their operands are; the math functions give double; round is half
 * to even (ONNX Round); cast<T>(e) converts to T's values; the body's value is
 * converted to the result's element type once.  select evaluates only the
 * taken side, so an out-of-bounds access guarded by a select is never read.
 *
 * Compute axes must have positive extents, so ops with an empty result have no
 * compute form (NULL).  Ops without one at all: control flow, lstm/gru/rnn,
 * resize with both antialias and exclude_outside, bitcast (a view in qcodegen).  The multi-stage ops (attention, softmax,
 * log_softmax, layer_norm, instance_norm, lp_normalization, lrn, reduce_l2,
 * argmax/argmin) have a chain through qir_op_expand_computes only; the
 * multi-result ops (split, max_pool with indices, layer_norm with statistics,
 * top_k) through qir_op_expand_results. */
#include "opsutil.h"

#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846

typedef struct {
  qir_module *m;
  const qir_op *op;
  qir_diag *d;
  int n_axes, n_red;
  int64_t extent[2 * QIR_MAX_RANK];
} te;

static const char *const axis_names[2][QIR_MAX_RANK] = {
    {"i", "j", "k", "l", "m", "n", "o", "p"},
    {"r", "s", "t", "u", "v", "w", "x", "y"},
};

/* ---------------------------------------------------------------- expression helpers */

static qir_expr *var(te *t, int i) { return qir_expr_var(t->m, i); }
static qir_expr *lit(te *t, int64_t v) { return qir_expr_int(t->m, v); }
static qir_expr *flit(te *t, double v) { return qir_expr_float(t->m, v); }
static qir_expr *bin(te *t, qir_expr_fn fn, qir_expr *a, qir_expr *b) { return qir_expr_binary(t->m, fn, a, b); }
static qir_expr *un(te *t, qir_expr_fn fn, qir_expr *a) { return qir_expr_unary(t->m, fn, a); }
static qir_expr *sel(te *t, qir_expr *c, qir_expr *a, qir_expr *b) { return qir_expr_select(t->m, c, a, b); }
static qir_expr *add(te *t, qir_expr *a, qir_expr *b) { return bin(t, QIR_FN_ADD, a, b); }
static qir_expr *sub(te *t, qir_expr *a, qir_expr *b) { return bin(t, QIR_FN_SUB, a, b); }
static qir_expr *mul(te *t, qir_expr *a, qir_expr *b) { return bin(t, QIR_FN_MUL, a, b); }
static qir_expr *dv(te *t, qir_expr *a, qir_expr *b) { return bin(t, QIR_FN_DIV, a, b); }

/* a && b, where either may be NULL (= true). */
static qir_expr *and_(te *t, qir_expr *a, qir_expr *b) { return !a ? b : !b ? a : bin(t, QIR_FN_AND, a, b); }

/* Index arithmetic that folds the common constants away (x + 0, x * 1). */
static qir_expr *iadd(te *t, qir_expr *a, int64_t c) {
  if (c == 0) return a;
  if (a->kind == QIR_EX_INT) return lit(t, a->ival + c);
  return c > 0 ? add(t, a, lit(t, c)) : sub(t, a, lit(t, -c));
}
static qir_expr *imul(te *t, qir_expr *a, int64_t c) {
  if (c == 1) return a;
  if (a->kind == QIR_EX_INT) return lit(t, a->ival * c);
  return mul(t, a, lit(t, c));
}

static qir_expr *access(te *t, int operand, int n, qir_expr *const *idx) { return qir_expr_access(t->m, operand, n, idx); }

static const qir_type *operand_type(te *t, int i) { return &t->op->operands[i]->type; }
static const qir_type *result_type(te *t) { return &t->op->results[0]->type; }

/* A literal of the value kind that operand i's elements have. */
static qir_expr *lit_like(te *t, qir_dtype dt, double v) {
  return qir_dtype_is_float(dt) ? flit(t, v) : lit(t, (int64_t)v);
}

/* Operand i read at result position (numpy broadcasting against the output
 * axes 0..n_axes-1: leading dims dropped, broadcast dims read at 0). */
static qir_expr *bcast(te *t, int i) {
  const qir_type *x = operand_type(t, i);
  qir_expr *idx[QIR_MAX_RANK];
  int off = t->n_axes - x->rank;
  for (int k = 0; k < x->rank; k++)
    idx[k] = x->dims[k] == 1 && t->extent[k + off] != 1 ? lit(t, 0) : var(t, k + off);
  return access(t, i, x->rank, idx);
}

/* A scalar operand (rank 0 or all dims 1). */
static qir_expr *scalar(te *t, int i) {
  const qir_type *x = operand_type(t, i);
  qir_expr *idx[QIR_MAX_RANK];
  for (int k = 0; k < x->rank; k++) idx[k] = lit(t, 0);
  return access(t, i, x->rank, idx);
}

/* Operand i indexed by `vars` (one output/reduce variable per dim). */
static qir_expr *at_vars(te *t, int i, const int *vars) {
  qir_expr *idx[QIR_MAX_RANK];
  for (int k = 0; k < operand_type(t, i)->rank; k++) idx[k] = vars[k] < 0 ? lit(t, 0) : var(t, vars[k]);
  return access(t, i, operand_type(t, i)->rank, idx);
}

/* Is value v a constant whose every element is zero (an absent bias)? */

/* True on the first iteration of the reduction (all reduce vars 0): a term
 * added under it is added exactly once, which puts a bias inside a sum. */
static qir_expr *first_iteration(te *t) {
  qir_expr *c = NULL;
  for (int r = 0; r < t->n_red; r++) c = and_(t, c, bin(t, QIR_FN_EQ, var(t, t->n_axes + r), lit(t, 0)));
  return c;
}

static double attr_f(te *t, const char *k, double dflt) { return qir_op_attr_float(t->op, k, dflt); }
static int64_t attr_i(te *t, const char *k, int64_t dflt) { return qir_op_attr_int(t->op, k, dflt); }

/* ---------------------------------------------------------------- building the op */

static void set_axes(te *t, const qir_type *out) {
  t->n_axes = out->rank;
  t->n_red = 0;
  for (int i = 0; i < out->rank; i++) t->extent[i] = out->dims[i];
}

static int add_red(te *t, int64_t extent) {
  t->extent[t->n_axes + t->n_red] = extent;
  return t->n_axes + t->n_red++;
}

/* A new unlinked compute op of type `type` over `operands`. */
/* A tree copy of e: the builders share subexpressions (x in select(x < 0,
 * a*x, x)); the stored body is a tree, so passes may rewrite it in place. */
static qir_expr *tree_copy(te *t, const qir_expr *e) {
  qir_expr *c = qir_alloc(t->m, sizeof *c);
  *c = *e;
  c->args = qir_alloc(t->m, sizeof *c->args * (size_t)(e->n_args ? e->n_args : 1));
  for (int i = 0; i < e->n_args; i++) c->args[i] = tree_copy(t, e->args[i]);
  return c;
}

static qir_op *make_compute(te *t, int n_operands, qir_value *const *operands, const qir_type *type, qir_expr *body,
                            qir_reduce_kind reduce) {
  for (int i = 0; i < t->n_axes + t->n_red; i++)
    if (t->extent[i] <= 0) return NULL; /* empty tensors have no compute form */
  qir_compute *c = qir_compute_new(t->m, t->n_axes, t->n_red);
  for (int i = 0; i < t->n_axes; i++) c->axis_names[i] = axis_names[0][i];
  for (int i = 0; i < t->n_red; i++) c->axis_names[t->n_axes + i] = axis_names[1][i];
  memcpy(c->axis_extents, t->extent, sizeof(int64_t) * (size_t)(t->n_axes + t->n_red));
  c->reduce = t->n_red ? reduce : QIR_REDUCE_NONE;
  c->body = tree_copy(t, body);
  qir_op *op = qir_op_new(t->m, QIR_OP_COMPUTE, n_operands, operands, 1, type, t->op->loc);
  op->comp = c;
  return op;
}

static qir_op *finish(te *t, qir_expr *body, qir_reduce_kind reduce) {
  if (!body) return NULL;
  return make_compute(t, t->op->n_operands, t->op->operands, result_type(t), body, reduce);
}

/* ---------------------------------------------------------------- elementwise */

/* u64 values read as i64 (those >= 2^63 negative): unsigned a < b, and a as
 * a double. */
static qir_expr *u64_less(te *t, qir_expr *a, qir_expr *b) {
  qir_expr *a_hi = bin(t, QIR_FN_LT, a, lit(t, 0)), *b_hi = bin(t, QIR_FN_LT, b, lit(t, 0));
  return sel(t, bin(t, QIR_FN_EQ, a_hi, b_hi), bin(t, QIR_FN_LT, a, b), b_hi);
}
static qir_expr *u64_real(te *t, qir_expr *a) {
  qir_expr *f = qir_expr_cast(t->m, QIR_F64, a);
  return sel(t, bin(t, QIR_FN_LT, a, lit(t, 0)), add(t, f, flit(t, 18446744073709551616.0)), f);
}

/* The ops whose u64 form differs from the i64 one. */
static qir_expr *elementwise_u64(te *t, qir_expr **a, int n) {
  qir_expr *x = a[0], *acc = x;
  switch (t->op->code) {
  case QIR_OP_ABS: case QIR_OP_RELU: return x;
  case QIR_OP_SIGN: return sel(t, bin(t, QIR_FN_NE, x, lit(t, 0)), lit(t, 1), lit(t, 0));
  case QIR_OP_LESS: return u64_less(t, x, a[1]);
  case QIR_OP_GREATER: return u64_less(t, a[1], x);
  case QIR_OP_LESS_EQUAL: return un(t, QIR_FN_NOT, u64_less(t, a[1], x));
  case QIR_OP_GREATER_EQUAL: return un(t, QIR_FN_NOT, u64_less(t, x, a[1]));
  case QIR_OP_MAX: case QIR_OP_MIN:
    for (int i = 1; i < n; i++)
      acc = t->op->code == QIR_OP_MAX ? sel(t, u64_less(t, acc, a[i]), a[i], acc) : sel(t, u64_less(t, a[i], acc), a[i], acc);
    return acc;
  case QIR_OP_CLIP:
    acc = sel(t, u64_less(t, x, a[1]), a[1], x);
    return sel(t, u64_less(t, a[2], acc), a[2], acc);
  case QIR_OP_CAST:
    if (qir_dtype_is_float(result_type(t)->dtype)) return qir_expr_cast(t->m, result_type(t)->dtype, u64_real(t, x));
    return NULL;
  default: return NULL;
  }
}

/* cast: saturating, except an f8 cast with saturate = 0, where a value that
 * rounds beyond the largest finite one (or is infinite) gives NaN, or inf of
 * its sign for f8e5m2.  `|x| > T` or `>= T`: T is the midpoint above the
 * largest value, which rounds down (ties to even) when its mantissa is even. */
static qir_expr *cast_body(te *t, qir_expr *x) {
  qir_dtype to = result_type(t)->dtype;
  qir_expr *c = qir_expr_cast(t->m, to, x);
  if (attr_i(t, "saturate", 1) != 0 || !qir_dtype_is_narrow(to) || !qir_dtype_is_float(to) || to == QIR_F4E2M1) return c;
  double bound;
  bool inclusive;
  switch (to) {
  case QIR_F8E4M3FN: bound = 464, inclusive = false; break;
  case QIR_F8E4M3FNUZ: bound = 248, inclusive = true; break;
  case QIR_F8E5M2: case QIR_F8E5M2FNUZ: bound = 61440, inclusive = true; break;
  default: bound = 0x1p127, inclusive = false; break; /* f8e8m0 rounds up */
  }
  qir_expr *over = bin(t, inclusive ? QIR_FN_GE : QIR_FN_GT, un(t, QIR_FN_ABS, x), flit(t, bound));
  qir_expr *ovf = to == QIR_F8E5M2 ? sel(t, bin(t, QIR_FN_LT, x, flit(t, 0)), flit(t, -INFINITY), flit(t, INFINITY)) : flit(t, NAN);
  return sel(t, over, ovf, c);
}

/* The scalar function of an elementwise op applied to its operand values. */
static qir_expr *elementwise_body(te *t, qir_expr **a, int n) {
  const qir_op *op = t->op;
  qir_dtype dt = operand_type(t, op->code == QIR_OP_WHERE ? 1 : 0)->dtype;
  qir_expr *x = a[0];
  if (dt == QIR_U64) {
    qir_expr *u = elementwise_u64(t, a, n);
    if (u) return u;
  }
#define ZERO lit_like(t, dt, 0)
#define ONE lit_like(t, dt, 1)
  switch (op->code) {
  case QIR_OP_IDENTITY: return x;
  case QIR_OP_NEG: return un(t, QIR_FN_NEG, x);
  case QIR_OP_ABS: return un(t, QIR_FN_ABS, x);
  case QIR_OP_EXP: return un(t, QIR_FN_EXP, x);
  case QIR_OP_LOG: return un(t, QIR_FN_LOG, x);
  case QIR_OP_SQRT: return un(t, QIR_FN_SQRT, x);
  case QIR_OP_RECIPROCAL: return un(t, QIR_FN_RECIP, x);
  case QIR_OP_SIGMOID: return un(t, QIR_FN_SIGMOID, x);
  case QIR_OP_TANH: return un(t, QIR_FN_TANH, x);
  case QIR_OP_RELU: return bin(t, QIR_FN_MAX, x, ZERO);
  case QIR_OP_ERF: return un(t, QIR_FN_ERF, x);
  case QIR_OP_CEIL: return un(t, QIR_FN_CEIL, x);
  case QIR_OP_FLOOR: return un(t, QIR_FN_FLOOR, x);
  case QIR_OP_ROUND: return un(t, QIR_FN_ROUND, x);
  case QIR_OP_SIN: return un(t, QIR_FN_SIN, x);
  case QIR_OP_COS: return un(t, QIR_FN_COS, x);
  case QIR_OP_ASIN: return un(t, QIR_FN_ASIN, x);
  case QIR_OP_ACOS: return un(t, QIR_FN_ACOS, x);
  case QIR_OP_ATAN: return un(t, QIR_FN_ATAN, x);
  case QIR_OP_SINH: return un(t, QIR_FN_SINH, x);
  case QIR_OP_COSH: return un(t, QIR_FN_COSH, x);
  case QIR_OP_ASINH: return un(t, QIR_FN_ASINH, x);
  case QIR_OP_ACOSH: return un(t, QIR_FN_ACOSH, x);
  case QIR_OP_ATANH: return un(t, QIR_FN_ATANH, x);
  case QIR_OP_SIGN: return un(t, QIR_FN_SIGN, x);
  case QIR_OP_NOT: return un(t, QIR_FN_NOT, x);
  case QIR_OP_ISNAN: return un(t, QIR_FN_ISNAN, x);
  case QIR_OP_CAST: return cast_body(t, x);
  case QIR_OP_LEAKY_RELU:
    return sel(t, bin(t, QIR_FN_LT, x, ZERO), mul(t, flit(t, attr_f(t, "alpha", 0.01)), x), x);
  case QIR_OP_ELU:
    return sel(t, bin(t, QIR_FN_LT, x, ZERO), mul(t, flit(t, attr_f(t, "alpha", 1.0)), sub(t, un(t, QIR_FN_EXP, x), flit(t, 1))), x);
  case QIR_OP_SELU: {
    double alpha = attr_f(t, "alpha", 1.67326319217681884765625), gamma = attr_f(t, "gamma", 1.05070102214813232421875);
    qir_expr *neg = sub(t, mul(t, flit(t, alpha), un(t, QIR_FN_EXP, x)), flit(t, alpha));
    return mul(t, flit(t, gamma), sel(t, bin(t, QIR_FN_LE, x, ZERO), neg, x));
  }
  case QIR_OP_HARD_SIGMOID: {
    qir_expr *lin = add(t, mul(t, flit(t, attr_f(t, "alpha", 0.2)), x), flit(t, attr_f(t, "beta", 0.5)));
    return bin(t, QIR_FN_MAX, flit(t, 0), bin(t, QIR_FN_MIN, flit(t, 1), lin));
  }
  case QIR_OP_HARD_SWISH: {
    qir_expr *lin = add(t, dv(t, x, flit(t, 6)), flit(t, 0.5));
    return mul(t, x, bin(t, QIR_FN_MAX, flit(t, 0), bin(t, QIR_FN_MIN, flit(t, 1), lin)));
  }
  case QIR_OP_SOFTPLUS: {
    /* max(x, 0) + log1p(exp(-|x|)): no overflow for large x (log(exp(x) + 1)
     * is inf at x = 1e30), log1p as Kahan's log(w) * u / (w - 1), w = 1 + u */
    qir_expr *u = un(t, QIR_FN_EXP, un(t, QIR_FN_NEG, un(t, QIR_FN_ABS, x))), *w = add(t, flit(t, 1), u);
    qir_expr *log1p = sel(t, bin(t, QIR_FN_EQ, w, flit(t, 1)), u, dv(t, mul(t, un(t, QIR_FN_LOG, w), u), sub(t, w, flit(t, 1))));
    return add(t, bin(t, QIR_FN_MAX, x, flit(t, 0)), log1p);
  }
  case QIR_OP_GELU: {
    const char *approx = qir_op_attr_str(t->op, "approximate", "none");
    qir_expr *inner;
    /* the reference evaluator's order of operations, so f64 agrees to the bit */
    if (!strcmp(approx, "tanh")) {
      qir_expr *cube = mul(t, mul(t, mul(t, flit(t, 0.044715), x), x), x);
      inner = un(t, QIR_FN_TANH, mul(t, flit(t, sqrt(2 / PI)), add(t, x, cube)));
    } else {
      inner = un(t, QIR_FN_ERF, dv(t, x, flit(t, sqrt(2.0))));
    }
    return mul(t, mul(t, flit(t, 0.5), x), add(t, flit(t, 1), inner));
  }
  case QIR_OP_CLIP: return bin(t, QIR_FN_MIN, bin(t, QIR_FN_MAX, x, a[1]), a[2]);
  case QIR_OP_ADD: return add(t, x, a[1]);
  case QIR_OP_SUB: return sub(t, x, a[1]);
  case QIR_OP_MUL: return mul(t, x, a[1]);
  case QIR_OP_DIV: return dv(t, x, a[1]);
  case QIR_OP_MOD:
    if (attr_i(t, "fmod", 0)) return bin(t, QIR_FN_FMOD, x, a[1]);
    if (qir_dtype_is_float(dt)) {
      /* numpy's np.mod (ONNX's reference): the divisor's sign, a zero included */
      qir_expr *r = bin(t, QIR_FN_FMOD, x, a[1]), *b_neg = bin(t, QIR_FN_LT, a[1], flit(t, 0));
      qir_expr *fix = bin(t, QIR_FN_NE, bin(t, QIR_FN_LT, r, flit(t, 0)), b_neg);
      return sel(t, bin(t, QIR_FN_EQ, r, flit(t, 0)), sel(t, b_neg, flit(t, -0.0), flit(t, 0)),
                 sel(t, fix, add(t, r, a[1]), r));
    }
    /* integer mod takes the divisor's sign: fix up C's remainder */
    {
      qir_expr *r = bin(t, QIR_FN_MOD, x, a[1]);
      qir_expr *fix = and_(t, bin(t, QIR_FN_NE, r, lit(t, 0)),
                           bin(t, QIR_FN_NE, bin(t, QIR_FN_LT, r, lit(t, 0)), bin(t, QIR_FN_LT, a[1], lit(t, 0))));
      return sel(t, fix, add(t, r, a[1]), r);
    }
  case QIR_OP_POW: {
    /* a u64 against a float goes through its real value */
    bool fb = qir_dtype_is_float(dt), fe = qir_dtype_is_float(operand_type(t, 1)->dtype);
    qir_expr *b = a[1];
    if (dt == QIR_U64 && fe) x = u64_real(t, x);
    if (operand_type(t, 1)->dtype == QIR_U64 && fb) b = u64_real(t, b);
    return bin(t, QIR_FN_POW, x, b);
  }
  case QIR_OP_MAX: case QIR_OP_MIN: case QIR_OP_SUM: case QIR_OP_MEAN: {
    qir_expr_fn fn = op->code == QIR_OP_MAX ? QIR_FN_MAX : op->code == QIR_OP_MIN ? QIR_FN_MIN : QIR_FN_ADD;
    qir_expr *acc = x;
    for (int i = 1; i < n; i++) acc = bin(t, fn, acc, a[i]);
    if (op->code == QIR_OP_MEAN && n > 1) acc = dv(t, acc, lit_like(t, dt, n));
    return acc;
  }
  case QIR_OP_EQUAL: return bin(t, QIR_FN_EQ, x, a[1]);
  case QIR_OP_LESS: return bin(t, QIR_FN_LT, x, a[1]);
  case QIR_OP_LESS_EQUAL: return bin(t, QIR_FN_LE, x, a[1]);
  case QIR_OP_GREATER: return bin(t, QIR_FN_GT, x, a[1]);
  case QIR_OP_GREATER_EQUAL: return bin(t, QIR_FN_GE, x, a[1]);
  case QIR_OP_AND: return bin(t, QIR_FN_AND, x, a[1]);
  case QIR_OP_OR: return bin(t, QIR_FN_OR, x, a[1]);
  case QIR_OP_XOR: return bin(t, QIR_FN_NE, x, a[1]);
  case QIR_OP_WHERE: return sel(t, x, a[1], a[2]);
  case QIR_OP_PRELU: return sel(t, bin(t, QIR_FN_LT, x, ZERO), mul(t, a[1], x), x);
  case QIR_OP_BITWISE_AND: return bin(t, QIR_FN_BITAND, x, a[1]);
  case QIR_OP_BITWISE_OR: return bin(t, QIR_FN_BITOR, x, a[1]);
  case QIR_OP_BITWISE_XOR: return bin(t, QIR_FN_BITXOR, x, a[1]);
  case QIR_OP_BIT_SHIFT:
    return bin(t, strcmp(qir_op_attr_str(op, "direction", ""), "right") ? QIR_FN_SHL : QIR_FN_SHR, x, a[1]);
  case QIR_OP_BITWISE_NOT: return bin(t, QIR_FN_BITXOR, x, lit(t, -1)); /* the result's type keeps its bits */
  default: return NULL;
  }
#undef ZERO
#undef ONE
}

static qir_op *te_elementwise(te *t) {
  set_axes(t, result_type(t));
  qir_expr *a[16];
  int n = t->op->n_operands;
  if (n > 16) return NULL;
  for (int i = 0; i < n; i++)
    a[i] = t->op->code == QIR_OP_CLIP && i > 0 ? scalar(t, i) : bcast(t, i);
  return finish(t, elementwise_body(t, a, n), QIR_REDUCE_NONE);
}

/* batch_norm: elementwise over x with per-channel parameters. */
static qir_op *te_batch_norm(te *t) {
  set_axes(t, result_type(t));
  qir_expr *p[5];
  int c_only[QIR_MAX_RANK] = {1};
  for (int i = 1; i < 5; i++) p[i] = at_vars(t, i, c_only);
  qir_expr *x = bcast(t, 0), *eps = flit(t, attr_f(t, "epsilon", 1e-5));
  qir_expr *norm = dv(t, sub(t, x, p[3]), un(t, QIR_FN_SQRT, add(t, p[4], eps)));
  return finish(t, add(t, mul(t, norm, p[1]), p[2]), QIR_REDUCE_NONE);
}

/* ---------------------------------------------------------------- reductions */

static qir_op *te_reduce(te *t) {
  const qir_type *x = operand_type(t, 0), *out = result_type(t);
  int64_t axes[QIR_MAX_RANK];
  int n = qir_op_attr_ints(t->op, "axes", axes, QIR_MAX_RANK);
  bool keep = attr_i(t, "keepdims", 1) != 0, reduced[QIR_MAX_RANK] = {false};
  for (int i = 0; i < x->rank; i++) reduced[i] = n < 0;
  for (int i = 0; i < n; i++) reduced[axes[i]] = true;
  set_axes(t, out);
  int vars[QIR_MAX_RANK], o = 0;
  int64_t count = 1;
  for (int i = 0; i < x->rank; i++) {
    if (reduced[i]) {
      vars[i] = add_red(t, x->dims[i]);
      count *= x->dims[i];
      if (keep) o++;
    } else {
      vars[i] = o++;
    }
  }
  qir_expr *v = at_vars(t, 0, vars);
  switch (t->op->code) {
  case QIR_OP_REDUCE_SUM: return finish(t, v, QIR_REDUCE_SUM);
  case QIR_OP_REDUCE_MAX: return finish(t, v, QIR_REDUCE_MAX);
  case QIR_OP_REDUCE_MIN: return finish(t, v, QIR_REDUCE_MIN);
  case QIR_OP_REDUCE_PROD: return finish(t, v, QIR_REDUCE_PROD);
  case QIR_OP_REDUCE_MEAN:
    if (!qir_dtype_is_float(x->dtype)) return NULL; /* integer mean divides once, after the sum */
    return finish(t, dv(t, v, flit(t, (double)count)), QIR_REDUCE_SUM);
  default: return NULL;
  }
}

/* global_avg_pool / global_max_pool: reduce every spatial dim, kept as 1. */
static qir_op *te_global_pool(te *t) {
  const qir_type *x = operand_type(t, 0);
  set_axes(t, result_type(t));
  int vars[QIR_MAX_RANK] = {0, 1};
  int64_t count = 1;
  for (int i = 2; i < x->rank; i++) vars[i] = add_red(t, x->dims[i]), count *= x->dims[i];
  qir_expr *v = at_vars(t, 0, vars);
  if (t->op->code == QIR_OP_GLOBAL_MAX_POOL) return finish(t, v, QIR_REDUCE_MAX);
  if (!qir_dtype_is_float(x->dtype)) return NULL;
  return finish(t, dv(t, v, flit(t, (double)count)), QIR_REDUCE_SUM);
}

/* ---------------------------------------------------------------- linear algebra */

static qir_op *te_matmul(te *t) {
  const qir_type *a = operand_type(t, 0), *b = operand_type(t, 1), *out = result_type(t);
  set_axes(t, out);
  int64_t K = a->dims[a->rank - 1];
  int k = add_red(t, K);
  /* output axes: batch..., then m (if a is not 1-D), then n (if b is not 1-D) */
  int n_batch = out->rank - (a->rank > 1) - (b->rank > 1);
  int m_var = a->rank > 1 ? n_batch : -1, n_var = b->rank > 1 ? out->rank - 1 : -1;
  qir_expr *ia[QIR_MAX_RANK], *ib[QIR_MAX_RANK];
  for (int i = 0; i < a->rank - 2; i++) {
    int o = i + n_batch - (a->rank - 2);
    ia[i] = a->dims[i] == 1 && out->dims[o] != 1 ? lit(t, 0) : var(t, o);
  }
  for (int i = 0; i < b->rank - 2; i++) {
    int o = i + n_batch - (b->rank - 2);
    ib[i] = b->dims[i] == 1 && out->dims[o] != 1 ? lit(t, 0) : var(t, o);
  }
  if (a->rank > 1) ia[a->rank - 2] = var(t, m_var);
  ia[a->rank - 1] = var(t, k);
  if (b->rank > 1) ib[b->rank - 1] = var(t, n_var), ib[b->rank - 2] = var(t, k);
  else ib[0] = var(t, k);
  return finish(t, mul(t, access(t, 0, a->rank, ia), access(t, 1, b->rank, ib)), QIR_REDUCE_SUM);
}

static qir_op *te_gemm(te *t) {
  const qir_type *a = operand_type(t, 0);
  bool ta = attr_i(t, "transA", 0), tb = attr_i(t, "transB", 0);
  double alpha = attr_f(t, "alpha", 1), beta = attr_f(t, "beta", 1);
  set_axes(t, result_type(t));
  int k = add_red(t, ta ? a->dims[0] : a->dims[1]);
  qir_expr *ia[2] = {var(t, ta ? k : 0), var(t, ta ? 0 : k)};
  qir_expr *ib[2] = {var(t, tb ? 1 : k), var(t, tb ? k : 1)};
  qir_expr *prod = mul(t, access(t, 0, 2, ia), access(t, 1, 2, ib));
  if (alpha != 1) prod = mul(t, flit(t, alpha), prod);
  if (beta != 0 && !qir_value_is_zero_const(t->op->operands[2])) {
    qir_expr *c = bcast(t, 2);
    if (beta != 1) c = mul(t, flit(t, beta), c);
    prod = add(t, prod, sel(t, first_iteration(t), c, lit_like(t, a->dtype, 0)));
  }
  return finish(t, prod, QIR_REDUCE_SUM);
}

static qir_op *te_einsum(te *t) {
  const char *eq = qir_op_attr_str(t->op, "equation", "");
  int n = t->op->n_operands;
  if (n > QIR_EINSUM_MAX_TERMS) return NULL;
  const qir_type *in[QIR_EINSUM_MAX_TERMS];
  for (int i = 0; i < n; i++) in[i] = operand_type(t, i);
  qir_einsum e;
  char err[200];
  if (!qir_einsum_parse(eq, n, in, &e, err, sizeof err)) return NULL;
  set_axes(t, result_type(t));
  /* variable of each letter and of each ellipsis dim */
  int letter_var[52], ell_var[QIR_MAX_RANK];
  for (int l = 0; l < 52; l++) letter_var[l] = -1;
  for (int k = 0; k < e.ell_rank; k++) ell_var[k] = -1;
  int o = 0;
  for (int i = 0; i < e.n_labels[n]; i++) {
    int l = e.labels[n][i];
    if (l == QIR_EINSUM_ELLIPSIS)
      for (int k = 0; k < e.ell_rank; k++) ell_var[k] = o++;
    else
      letter_var[l] = o++;
  }
  for (int k = 0; k < e.ell_rank; k++)
    if (ell_var[k] < 0) {
      if (t->n_axes + t->n_red >= 2 * QIR_MAX_RANK) return NULL;
      ell_var[k] = add_red(t, e.ell_dims[k]);
    }
  for (int l = 0; l < 52; l++)
    if (e.used[l] && letter_var[l] < 0) {
      if (t->n_axes + t->n_red >= 2 * QIR_MAX_RANK) return NULL;
      letter_var[l] = add_red(t, e.extent[l]);
    }
  qir_expr *body = NULL;
  for (int i = 0; i < n; i++) {
    qir_expr *idx[QIR_MAX_RANK];
    int dim = 0;
    for (int k = 0; k < e.n_labels[i]; k++) {
      int l = e.labels[i][k];
      if (l != QIR_EINSUM_ELLIPSIS) {
        idx[dim++] = var(t, letter_var[l]);
        continue;
      }
      int er = e.in_ell_rank[i];
      for (int j = 0; j < er; j++, dim++) {
        int ev = ell_var[e.ell_rank - er + j];
        idx[dim] = in[i]->dims[dim] == 1 && e.ell_dims[e.ell_rank - er + j] != 1 ? lit(t, 0) : var(t, ev);
      }
    }
    qir_expr *a = access(t, i, in[i]->rank, idx);
    body = body ? mul(t, body, a) : a;
  }
  return finish(t, body, QIR_REDUCE_SUM);
}

/* ---------------------------------------------------------------- windows */

/* in-bounds test 0 <= e < extent, only for the sides that can fail */
static qir_expr *in_bounds(te *t, qir_expr *e, int64_t extent, bool low, bool high) {
  qir_expr *c = NULL;
  if (low) c = and_(t, c, bin(t, QIR_FN_GE, e, lit(t, 0)));
  if (high) c = and_(t, c, bin(t, QIR_FN_LT, e, lit(t, extent)));
  return c;
}

static qir_op *te_conv(te *t) {
  const qir_type *x = operand_type(t, 0), *w = operand_type(t, 1), *out = result_type(t);
  int ns = x->rank - 2;
  qir_window win;
  if (!qir_window_read(t->op, ns, w->dims + 2, &win, NULL)) return NULL;
  set_axes(t, out);
  bool transpose = t->op->code == QIR_OP_CONV_TRANSPOSE;
  int64_t C = x->dims[1], M = out->dims[1], g = win.group, Cg = C / g, Mg = M / g;
  int c = add_red(t, transpose ? Cg : w->dims[1]);
  int kv[QIR_MAX_RANK];
  for (int i = 0; i < ns; i++) kv[i] = add_red(t, win.kernel[i]);
  /* channel of x read for output channel m and reduce channel c */
  qir_expr *group = g == 1 ? NULL : bin(t, QIR_FN_DIV, var(t, 1), lit(t, Mg));
  qir_expr *xc = group ? add(t, imul(t, group, Cg), var(t, c)) : var(t, c);
  qir_expr *ix[QIR_MAX_RANK], *iw[QIR_MAX_RANK], *guard = NULL;
  ix[0] = var(t, 0);
  ix[1] = xc;
  if (!transpose) {
    iw[0] = var(t, 1);
    iw[1] = var(t, c);
    for (int i = 0; i < ns; i++) {
      /* x position o*s + k*d - pad_begin */
      qir_expr *p = iadd(t, add(t, imul(t, var(t, 2 + i), win.strides[i]), imul(t, var(t, kv[i]), win.dilations[i])),
                         -win.pads_begin[i]);
      guard = and_(t, guard, in_bounds(t, p, x->dims[2 + i], win.pads_begin[i] > 0, win.pads_end[i] > 0));
      ix[2 + i] = p;
      iw[2 + i] = var(t, kv[i]);
    }
  } else {
    /* y[o] gathers x[i] * w[k] over o = i*s + k*d - pad_begin */
    iw[0] = xc;
    iw[1] = g == 1 ? var(t, 1) : bin(t, QIR_FN_MOD, var(t, 1), lit(t, Mg));
    for (int i = 0; i < ns; i++) {
      qir_expr *num = iadd(t, sub(t, var(t, 2 + i), imul(t, var(t, kv[i]), win.dilations[i])), win.pads_begin[i]);
      qir_expr *pos = win.strides[i] == 1 ? num : bin(t, QIR_FN_DIV, num, lit(t, win.strides[i]));
      qir_expr *ok = bin(t, QIR_FN_GE, num, lit(t, 0));
      if (win.strides[i] != 1) ok = and_(t, ok, bin(t, QIR_FN_EQ, bin(t, QIR_FN_MOD, num, lit(t, win.strides[i])), lit(t, 0)));
      ok = and_(t, ok, bin(t, QIR_FN_LT, pos, lit(t, x->dims[2 + i])));
      guard = and_(t, guard, ok);
      ix[2 + i] = pos;
      iw[2 + i] = var(t, kv[i]);
    }
  }
  qir_expr *prod = mul(t, access(t, 0, x->rank, ix), access(t, 1, w->rank, iw));
  if (guard) prod = sel(t, guard, prod, lit_like(t, x->dtype, 0));
  if (!qir_value_is_zero_const(t->op->operands[2])) {
    qir_expr *b1 = var(t, 1);
    prod = add(t, prod, sel(t, first_iteration(t), access(t, 2, 1, &b1), lit_like(t, x->dtype, 0)));
  }
  return finish(t, prod, QIR_REDUCE_SUM);
}

/* Number of window taps st + k*d (k < K) inside [lo, hi), as an expression of
 * the window start st. */
static qir_expr *taps_inside(te *t, qir_expr *st, int64_t K, int64_t d, int64_t lo, int64_t hi) {
  qir_expr *first = bin(t, QIR_FN_MAX, lit(t, 0), bin(t, QIR_FN_FLOORDIV, sub(t, lit(t, lo + d - 1), st), lit(t, d)));
  qir_expr *last = bin(t, QIR_FN_MIN, lit(t, K - 1), bin(t, QIR_FN_FLOORDIV, sub(t, lit(t, hi - 1), st), lit(t, d)));
  return bin(t, QIR_FN_MAX, lit(t, 0), iadd(t, sub(t, last, first), 1));
}

/* The taps of a pooling window: output axes, one reduce axis per spatial dim,
 * x's index per dim, the in-bounds guard, and avg's divisor. */
typedef struct {
  qir_window win;
  qir_expr *ix[QIR_MAX_RANK], *guard, *count;
  int64_t full;
  bool all_full;
} pool_taps;

static bool pool_read(te *t, pool_taps *p) {
  const qir_type *x = operand_type(t, 0), *out = result_type(t);
  int ns = x->rank - 2;
  if (!qir_window_read(t->op, ns, NULL, &p->win, NULL)) return false;
  const qir_window *win = &p->win;
  set_axes(t, out);
  p->guard = p->count = NULL;
  p->ix[0] = var(t, 0);
  p->ix[1] = var(t, 1);
  p->full = 1;
  p->all_full = true;
  for (int i = 0; i < ns; i++) {
    int k = add_red(t, win->kernel[i]);
    int64_t D = x->dims[2 + i], s = win->strides[i], d = win->dilations[i], K = win->kernel[i];
    int64_t last_tap = (out->dims[2 + i] - 1) * s + (K - 1) * d - win->pads_begin[i]; /* largest index read */
    qir_expr *st = iadd(t, imul(t, var(t, 2 + i), s), -win->pads_begin[i]);
    qir_expr *pos = add(t, st, imul(t, var(t, k), d));
    p->guard = and_(t, p->guard, in_bounds(t, pos, D, win->pads_begin[i] > 0, last_tap >= D));
    p->ix[2 + i] = pos;
    p->full *= K;
    /* avg divisor: taps inside the input, or inside the padded input */
    int64_t lo = win->count_include_pad ? -win->pads_begin[i] : 0, hi = win->count_include_pad ? D + win->pads_end[i] : D;
    bool always_full = -win->pads_begin[i] >= lo && last_tap < hi;
    if (!always_full) p->all_full = false;
    qir_expr *taps = always_full ? lit(t, K) : taps_inside(t, st, K, d, lo, hi);
    p->count = p->count ? mul(t, p->count, taps) : taps;
  }
  return true;
}

/* The body of max_pool / avg_pool over the taps of pool_read. */
static qir_expr *pool_body(te *t, pool_taps *p, qir_reduce_kind *reduce) {
  const qir_type *x = operand_type(t, 0);
  qir_expr *v = access(t, 0, x->rank, p->ix);
  if (t->op->code == QIR_OP_MAX_POOL) {
    qir_expr *lowest = qir_dtype_is_float(x->dtype) ? flit(t, -INFINITY)
                       : qir_dtype_is_unsigned_int(x->dtype) || x->dtype == QIR_BOOL ? lit(t, 0)
                                                                                     : lit(t, INT64_MIN);
    *reduce = QIR_REDUCE_MAX;
    return p->guard ? sel(t, p->guard, v, lowest) : v;
  }
  if (!qir_dtype_is_float(x->dtype)) return NULL;
  *reduce = QIR_REDUCE_SUM;
  if (p->guard) v = sel(t, p->guard, v, flit(t, 0));
  return dv(t, v, p->all_full ? flit(t, (double)p->full) : p->count);
}

static qir_op *te_pool(te *t) {
  if (t->op->n_results != 1) return NULL; /* max_pool with indices: qir_op_expand_results */
  pool_taps p;
  qir_reduce_kind reduce = QIR_REDUCE_NONE;
  if (!pool_read(t, &p)) return NULL;
  qir_expr *body = pool_body(t, &p, &reduce);
  return finish(t, body, reduce);
}

/* ---------------------------------------------------------------- data movement */

static qir_op *te_transpose(te *t) {
  const qir_type *x = operand_type(t, 0);
  int64_t perm[QIR_MAX_RANK];
  int n = qir_op_attr_ints(t->op, "perm", perm, QIR_MAX_RANK);
  if (n < 0)
    for (int i = 0; i < x->rank; i++) perm[i] = x->rank - 1 - i;
  set_axes(t, result_type(t));
  int vars[QIR_MAX_RANK];
  for (int j = 0; j < x->rank; j++) vars[perm[j]] = j;
  return finish(t, at_vars(t, 0, vars), QIR_REDUCE_NONE);
}

/* reshape: when the non-1 dims agree, a direct index map; otherwise the
 * result's linear index, delinearised over the operand's dims. */
static qir_op *te_reshape(te *t) {
  const qir_type *x = operand_type(t, 0), *out = result_type(t);
  set_axes(t, out);
  int vars[QIR_MAX_RANK], j = 0;
  bool direct = true;
  for (int i = 0; i < x->rank && direct; i++) {
    if (x->dims[i] == 1) {
      vars[i] = -1;
      continue;
    }
    while (j < out->rank && out->dims[j] == 1) j++;
    if (j >= out->rank || out->dims[j] != x->dims[i]) direct = false;
    else vars[i] = j++;
  }
  while (direct && j < out->rank && out->dims[j] == 1) j++;
  if (direct && j == out->rank) return finish(t, at_vars(t, 0, vars), QIR_REDUCE_NONE);
  qir_expr *lin = NULL;
  for (int i = 0; i < out->rank; i++) {
    if (out->dims[i] == 1) continue;
    lin = lin ? add(t, imul(t, lin, out->dims[i]), var(t, i)) : var(t, i);
  }
  if (!lin) lin = lit(t, 0);
  qir_expr *idx[QIR_MAX_RANK];
  int64_t stride = 1;
  for (int i = x->rank - 1; i >= 0; i--) {
    qir_expr *e = stride == 1 ? lin : bin(t, QIR_FN_DIV, lin, lit(t, stride));
    if (i > 0 && x->dims[i] != 1) e = bin(t, QIR_FN_MOD, e, lit(t, x->dims[i]));
    idx[i] = x->dims[i] == 1 ? lit(t, 0) : e;
    stride *= x->dims[i];
  }
  return finish(t, access(t, 0, x->rank, idx), QIR_REDUCE_NONE);
}

/* An access of operand i at the result position with dim `axis` replaced. */
static qir_expr *at_with(te *t, int i, int axis, qir_expr *e) {
  qir_expr *idx[QIR_MAX_RANK];
  for (int k = 0; k < operand_type(t, i)->rank; k++) idx[k] = k == axis ? e : var(t, k);
  return access(t, i, operand_type(t, i)->rank, idx);
}

static qir_op *te_concat(te *t) {
  int axis = (int)attr_i(t, "axis", 0), n = t->op->n_operands;
  set_axes(t, result_type(t));
  int64_t off[64];
  if (n > 63) return NULL;
  off[0] = 0;
  for (int i = 0; i < n; i++) off[i + 1] = off[i] + operand_type(t, i)->dims[axis];
  /* from the last operand backwards: select(v < off[i+1], x_i[v - off[i]], rest) */
  qir_expr *body = NULL;
  for (int i = n - 1; i >= 0; i--) {
    if (operand_type(t, i)->dims[axis] == 0) continue;
    qir_expr *here = at_with(t, i, axis, iadd(t, var(t, axis), -off[i]));
    body = body ? sel(t, bin(t, QIR_FN_LT, var(t, axis), lit(t, off[i + 1])), here, body) : here;
  }
  return finish(t, body, QIR_REDUCE_NONE);
}

static qir_op *te_slice(te *t) {
  const qir_type *x = operand_type(t, 0);
  int64_t starts[QIR_MAX_RANK], steps[QIR_MAX_RANK];
  qir_op_attr_ints(t->op, "starts", starts, QIR_MAX_RANK);
  if (qir_op_attr_ints(t->op, "steps", steps, QIR_MAX_RANK) < 0)
    for (int i = 0; i < x->rank; i++) steps[i] = 1;
  set_axes(t, result_type(t));
  qir_expr *idx[QIR_MAX_RANK];
  for (int i = 0; i < x->rank; i++) idx[i] = iadd(t, imul(t, var(t, i), steps[i]), starts[i]);
  return finish(t, access(t, 0, x->rank, idx), QIR_REDUCE_NONE);
}

static qir_op *te_pad(te *t) {
  const qir_type *x = operand_type(t, 0);
  int64_t pads[2 * QIR_MAX_RANK];
  if (qir_op_attr_ints(t->op, "pads", pads, 2 * QIR_MAX_RANK) != 2 * x->rank) return NULL;
  const char *mode = qir_op_attr_str(t->op, "mode", "constant");
  set_axes(t, result_type(t));
  qir_expr *idx[QIR_MAX_RANK], *guard = NULL;
  for (int i = 0; i < x->rank; i++) {
    int64_t D = x->dims[i], b = pads[i], e = pads[i + x->rank];
    qir_expr *p = iadd(t, var(t, i), -b);
    if (b <= 0 && e <= 0) {
      idx[i] = p;
    } else if (!strcmp(mode, "constant")) {
      guard = and_(t, guard, in_bounds(t, p, D, b > 0, e > 0));
      idx[i] = p;
    } else if (D == 0) {
      return NULL;
    } else if (!strcmp(mode, "edge")) {
      idx[i] = bin(t, QIR_FN_MIN, bin(t, QIR_FN_MAX, p, lit(t, 0)), lit(t, D - 1));
    } else if (!strcmp(mode, "reflect")) {
      /* one reflection at each end: D-1 - |D-1 - |p|| */
      idx[i] = sub(t, lit(t, D - 1), un(t, QIR_FN_ABS, sub(t, lit(t, D - 1), un(t, QIR_FN_ABS, p))));
    } else { /* wrap */
      idx[i] = bin(t, QIR_FN_MOD, iadd(t, bin(t, QIR_FN_MOD, p, lit(t, D)), D), lit(t, D));
    }
  }
  qir_expr *v = access(t, 0, x->rank, idx);
  return finish(t, guard ? sel(t, guard, v, scalar(t, 1)) : v, QIR_REDUCE_NONE);
}

static qir_op *te_expand(te *t) {
  set_axes(t, result_type(t));
  return finish(t, bcast(t, 0), QIR_REDUCE_NONE);
}

static qir_op *te_tile(te *t) {
  const qir_type *x = operand_type(t, 0), *out = result_type(t);
  set_axes(t, out);
  qir_expr *idx[QIR_MAX_RANK];
  for (int i = 0; i < x->rank; i++)
    idx[i] = x->dims[i] == out->dims[i] ? var(t, i) : x->dims[i] == 1 ? lit(t, 0) : bin(t, QIR_FN_MOD, var(t, i), lit(t, x->dims[i]));
  return finish(t, access(t, 0, x->rank, idx), QIR_REDUCE_NONE);
}

/* An index read from a tensor, negative values counted from the end. */
static qir_expr *wrapped(te *t, qir_expr *(*read)(te *, void *), void *ctx, int64_t extent) {
  return sel(t, bin(t, QIR_FN_LT, read(t, ctx), lit(t, 0)), iadd(t, read(t, ctx), extent), read(t, ctx));
}

typedef struct {
  int operand, n;
  int vars[QIR_MAX_RANK];
} index_read;

static qir_expr *read_index(te *t, void *ctx) {
  index_read *r = ctx;
  qir_expr *idx[QIR_MAX_RANK];
  for (int k = 0; k < r->n; k++) idx[k] = var(t, r->vars[k]);
  return access(t, r->operand, r->n, idx);
}

/* A float index tensor read as i64, truncated toward zero. */
static qir_expr *read_index_trunc(te *t, void *ctx) { return qir_expr_cast(t->m, QIR_I64, read_index(t, ctx)); }

static qir_op *te_gather(te *t) {
  const qir_type *x = operand_type(t, 0), *ind = operand_type(t, 1);
  int axis = (int)attr_i(t, "axis", 0);
  set_axes(t, result_type(t));
  index_read r = {1, ind->rank, {0}};
  qir_expr *idx[QIR_MAX_RANK];
  if (t->op->code == QIR_OP_GATHER_ELEMENTS) {
    for (int k = 0; k < ind->rank; k++) r.vars[k] = k;
    for (int k = 0; k < x->rank; k++) idx[k] = k == axis ? wrapped(t, read_index, &r, x->dims[axis]) : var(t, k);
  } else {
    for (int k = 0; k < ind->rank; k++) r.vars[k] = axis + k;
    for (int k = 0; k < axis; k++) idx[k] = var(t, k);
    idx[axis] = wrapped(t, read_index, &r, x->dims[axis]);
    for (int k = axis + 1; k < x->rank; k++) idx[k] = var(t, k + ind->rank - 1);
  }
  return finish(t, access(t, 0, x->rank, idx), QIR_REDUCE_NONE);
}

/* e, a possibly negative index into an axis of `extent`, wrapped */
static qir_expr *wrap_index(te *t, qir_expr *e, int64_t extent) {
  return sel(t, bin(t, QIR_FN_LT, e, lit(t, 0)), iadd(t, e, extent), e);
}

static qir_op *te_gather_nd(te *t) {
  const qir_type *x = operand_type(t, 0), *ind = operand_type(t, 1);
  int b = (int)attr_i(t, "batch_dims", 0), q = ind->rank;
  int64_t m = ind->dims[q - 1];
  set_axes(t, result_type(t));
  qir_expr *xi[QIR_MAX_RANK], *ii[QIR_MAX_RANK];
  for (int k = 0; k < q - 1; k++) ii[k] = var(t, k);
  for (int k = 0; k < b; k++) xi[k] = var(t, k);
  for (int64_t k = 0; k < m; k++) {
    ii[q - 1] = lit(t, k);
    xi[b + k] = wrap_index(t, access(t, 1, q, ii), x->dims[b + k]);
  }
  for (int64_t k = b + m; k < x->rank; k++) xi[k] = var(t, (int)(q - 1 + k - b - m));
  return finish(t, access(t, 0, x->rank, xi), QIR_REDUCE_NONE);
}

/* Scatter as reductions over the updates: for result element p, `hit` says
 * whether the update at the reduction variables lands on p; `upd` reads it
 * (only under hit) and `lin` numbers it in writing order. */
typedef struct {
  qir_expr *hit, *upd, *lin;
} scatter_terms;

static bool scatter_read(te *t, int upd_operand, scatter_terms *s) {
  const qir_type *x = operand_type(t, 0), *ind = operand_type(t, 1);
  qir_expr *ii[QIR_MAX_RANK], *guard = NULL;
  if (t->op->code == QIR_OP_SCATTER_ELEMENTS) {
    int axis = (int)attr_i(t, "axis", 0);
    int j = add_red(t, ind->dims[axis]);
    for (int k = 0; k < x->rank; k++) {
      ii[k] = k == axis ? var(t, j) : var(t, k);
      if (k != axis && ind->dims[k] < x->dims[k]) guard = and_(t, guard, bin(t, QIR_FN_LT, var(t, k), lit(t, ind->dims[k])));
    }
    qir_expr *on = bin(t, QIR_FN_EQ, wrap_index(t, access(t, 1, ind->rank, ii), x->dims[axis]), var(t, axis));
    s->hit = and_(t, guard, on);
    s->upd = access(t, upd_operand, ind->rank, ii);
    s->lin = var(t, j);
    return true;
  }
  int q = ind->rank;
  int64_t m = ind->dims[q - 1];
  if (x->rank + q - 1 > 2 * QIR_MAX_RANK) return false;
  qir_expr *ui[QIR_MAX_RANK], *lin = NULL;
  for (int k = 0; k < q - 1; k++) {
    int j = add_red(t, ind->dims[k]);
    ii[k] = ui[k] = var(t, j);
    lin = lin ? add(t, imul(t, lin, ind->dims[k]), var(t, j)) : var(t, j);
  }
  for (int64_t k = 0; k < m; k++) {
    ii[q - 1] = lit(t, k);
    guard = and_(t, guard, bin(t, QIR_FN_EQ, wrap_index(t, access(t, 1, q, ii), x->dims[k]), var(t, (int)k)));
  }
  for (int64_t k = m; k < x->rank; k++) ui[q - 1 + k - m] = var(t, (int)k);
  s->hit = guard;
  s->upd = access(t, upd_operand, (int)(q - 1 + x->rank - m), ui);
  s->lin = lin ? lin : lit(t, 0);
  return true;
}

/* scatter with add | mul | max | min: one reduction, data folded in */
static qir_op *te_scatter(te *t) {
  const char *red = qir_op_attr_str(t->op, "reduction", "none");
  qir_dtype dt = operand_type(t, 0)->dtype;
  set_axes(t, result_type(t));
  scatter_terms s;
  if (!strcmp(red, "none") || !scatter_read(t, 2, &s)) return NULL;
  qir_expr *data = bcast(t, 0);
  if (!strcmp(red, "add"))
    return finish(t, add(t, sel(t, first_iteration(t), data, lit_like(t, dt, 0)), sel(t, s.hit, s.upd, lit_like(t, dt, 0))),
                  QIR_REDUCE_SUM);
  if (!strcmp(red, "mul"))
    return finish(t, mul(t, sel(t, first_iteration(t), data, lit_like(t, dt, 1)), sel(t, s.hit, s.upd, lit_like(t, dt, 1))),
                  QIR_REDUCE_PROD);
  /* every term includes data, so it takes part even when all updates hit */
  bool mx = !strcmp(red, "max");
  return finish(t, sel(t, s.hit, bin(t, mx ? QIR_FN_MAX : QIR_FN_MIN, s.upd, data), data), mx ? QIR_REDUCE_MAX : QIR_REDUCE_MIN);
}

static qir_op *te_depth_space(te *t) {
  const qir_type *x = operand_type(t, 0), *out = result_type(t);
  int64_t b = attr_i(t, "blocksize", 1);
  set_axes(t, out);
  qir_expr *idx[4] = {var(t, 0), NULL, NULL, NULL};
  if (t->op->code == QIR_OP_DEPTH_TO_SPACE) {
    int64_t C = out->dims[1];
    qir_expr *bh = bin(t, QIR_FN_MOD, var(t, 2), lit(t, b)), *bw = bin(t, QIR_FN_MOD, var(t, 3), lit(t, b));
    if (!strcmp(qir_op_attr_str(t->op, "mode", "DCR"), "CRD"))
      idx[1] = add(t, add(t, imul(t, var(t, 1), b * b), imul(t, bh, b)), bw);
    else
      idx[1] = add(t, add(t, imul(t, bh, b * C), imul(t, bw, C)), var(t, 1));
    idx[2] = bin(t, QIR_FN_DIV, var(t, 2), lit(t, b));
    idx[3] = bin(t, QIR_FN_DIV, var(t, 3), lit(t, b));
  } else {
    int64_t C = x->dims[1];
    qir_expr *blk = bin(t, QIR_FN_DIV, var(t, 1), lit(t, C));
    idx[1] = bin(t, QIR_FN_MOD, var(t, 1), lit(t, C));
    idx[2] = add(t, imul(t, var(t, 2), b), bin(t, QIR_FN_DIV, blk, lit(t, b)));
    idx[3] = add(t, imul(t, var(t, 3), b), bin(t, QIR_FN_MOD, blk, lit(t, b)));
  }
  return finish(t, access(t, 0, 4, idx), QIR_REDUCE_NONE);
}

static qir_op *te_trilu(te *t) {
  const qir_type *x = operand_type(t, 0);
  set_axes(t, result_type(t));
  int64_t k = attr_i(t, "k", 0);
  qir_expr *diff = sub(t, var(t, x->rank - 1), var(t, x->rank - 2)); /* j - i */
  qir_expr *keep = attr_i(t, "upper", 1) ? bin(t, QIR_FN_GE, diff, lit(t, k)) : bin(t, QIR_FN_LE, diff, lit(t, k));
  return finish(t, sel(t, keep, bcast(t, 0), lit_like(t, x->dtype, 0)), QIR_REDUCE_NONE);
}

static qir_op *te_cumsum(te *t) {
  const qir_type *x = operand_type(t, 0);
  int axis = (int)attr_i(t, "axis", 0);
  bool exclusive = attr_i(t, "exclusive", 0), reverse = attr_i(t, "reverse", 0);
  set_axes(t, result_type(t));
  int j = add_red(t, x->dims[axis]);
  qir_expr_fn cmp = reverse ? (exclusive ? QIR_FN_GT : QIR_FN_GE) : (exclusive ? QIR_FN_LT : QIR_FN_LE);
  qir_expr *take = bin(t, cmp, var(t, j), var(t, axis));
  bool prod = t->op->code == QIR_OP_CUMPROD;
  return finish(t, sel(t, take, at_with(t, 0, axis, var(t, j)), lit_like(t, x->dtype, prod ? 1 : 0)),
                prod ? QIR_REDUCE_PROD : QIR_REDUCE_SUM);
}

static qir_op *te_one_hot(te *t) {
  const qir_type *ind = operand_type(t, 0), *out = result_type(t);
  int axis = (int)attr_i(t, "axis", ind->rank);
  int64_t depth = out->dims[axis];
  set_axes(t, out);
  index_read r = {0, ind->rank, {0}};
  for (int k = 0, o = 0; k < out->rank; k++)
    if (k != axis) r.vars[o++] = k;
  /* ONNX: indices are cast to int (truncating) before negatives wrap;
   * unsigned ones never wrap (a u64 above INT64_MAX reads negative as i64) */
  qir_expr *i = qir_dtype_is_float(ind->dtype) ? wrapped(t, read_index_trunc, &r, depth)
                : qir_dtype_is_unsigned_int(ind->dtype) ? read_index(t, &r)
                : wrapped(t, read_index, &r, depth);
  qir_expr *on = lit(t, 1), *off = lit(t, 0);
  on = access(t, 1, 1, &on);
  off = access(t, 1, 1, &off);
  return finish(t, sel(t, bin(t, QIR_FN_EQ, i, var(t, axis)), on, off), QIR_REDUCE_NONE);
}

static qir_op *te_range(te *t) {
  set_axes(t, result_type(t));
  return finish(t, add(t, scalar(t, 0), mul(t, var(t, 0), scalar(t, 2))), QIR_REDUCE_NONE);
}

/* resize: the input coordinate of output position o along one axis, as the
 * reference evaluator computes it (the real-valued output extent in*scale). */
static qir_expr *resize_source(te *t, const char *ctm, int64_t in, int64_t on, double s, qir_expr *o, const double *roi) {
  double out_w = s * (double)in;
  if (!strcmp(ctm, "tf_crop_and_resize")) {
    double r0 = roi[0], r1 = roi[1], span = (r1 - r0) * (double)(in - 1), start = r0 * (double)(in - 1);
    return out_w == 1 ? flit(t, span / 2 + start) : add(t, mul(t, o, flit(t, span / (out_w - 1))), flit(t, start));
  }
  if (!strcmp(ctm, "align_corners"))
    return out_w == 1 ? flit(t, 0) : mul(t, o, flit(t, (double)(in - 1) / (out_w - 1)));
  if (!strcmp(ctm, "asymmetric")) return dv(t, o, flit(t, s));
  if (!strcmp(ctm, "pytorch_half_pixel") && !(out_w > 1)) return flit(t, 0);
  qir_expr *half = sub(t, dv(t, add(t, o, flit(t, 0.5)), flit(t, s)), flit(t, 0.5));
  if (!strcmp(ctm, "half_pixel_symmetric")) {
    double adj = (double)on / out_w, center = (double)in / 2;
    return add(t, flit(t, center * (1 - adj)), half);
  }
  return half; /* half_pixel, pytorch_half_pixel */
}

/* Weight of a tap at distance d: linear 1-d, cubic with coefficient a. */
static qir_expr *resize_kernel(te *t, bool cubic, double a, qir_expr *d) {
  if (!cubic) return sub(t, flit(t, 1), d);
  qir_expr *near = add(t, mul(t, mul(t, sub(t, mul(t, flit(t, a + 2), d), flit(t, a + 3)), d), d), flit(t, 1));
  qir_expr *far = sub(t, mul(t, add(t, mul(t, sub(t, mul(t, flit(t, a), d), flit(t, 5 * a)), d), flit(t, 8 * a)), d), flit(t, 4 * a));
  return sel(t, bin(t, QIR_FN_LE, d, flit(t, 1)), near, sel(t, bin(t, QIR_FN_LT, d, flit(t, 2)), far, flit(t, 0)));
}

static qir_expr *clamp_index(te *t, qir_expr *i, int64_t in) {
  return bin(t, QIR_FN_MIN, bin(t, QIR_FN_MAX, i, lit(t, 0)), lit(t, in - 1));
}

/* resize: nearest reads one source index per axis; linear and cubic sum 2 or
 * 4 edge-clamped taps per resized axis (one reduce axis each), weighted by
 * the kernel of their distance to the source coordinate. */
static qir_op *te_resize(te *t) {
  const qir_type *x = operand_type(t, 0), *out = result_type(t);
  const char *mode = qir_op_attr_str(t->op, "mode", "nearest");
  const char *ctm = qir_op_attr_str(t->op, "coordinate_transformation_mode", "half_pixel");
  const char *nm = qir_op_attr_str(t->op, "nearest_mode", "round_prefer_floor");
  bool nearest = !strcmp(mode, "nearest"), cubic = !strcmp(mode, "cubic");
  bool exclude = qir_op_attr_int(t->op, "exclude_outside", 0) != 0;
  double a = attr_f(t, "cubic_coeff_a", -0.75);
  bool antialias = qir_op_attr_int(t->op, "antialias", 0) != 0 && !nearest;
  if (antialias && exclude) return NULL;
  double scales[QIR_MAX_RANK], roi[2 * QIR_MAX_RANK];
  if (qir_op_attr_floats(t->op, "scales", scales, QIR_MAX_RANK) != x->rank) return NULL;
  bool crop = !strcmp(ctm, "tf_crop_and_resize");
  if (crop && qir_op_attr_floats(t->op, "roi", roi, 2 * QIR_MAX_RANK) != 2 * x->rank) return NULL;
  set_axes(t, out);
  qir_expr *idx[QIR_MAX_RANK], *weight = NULL, *outside = NULL;
  for (int i = 0; i < x->rank; i++) {
    int64_t in = x->dims[i];
    if (in == out->dims[i] && scales[i] == 1 && (!crop || (roi[i] == 0 && roi[x->rank + i] == 1))) {
      idx[i] = var(t, i);
      continue;
    }
    double axis_roi[2] = {crop ? roi[i] : 0, crop ? roi[x->rank + i] : 1};
    qir_expr *src = resize_source(t, ctm, in, out->dims[i], scales[i], var(t, i), axis_roi);
    if (crop) { /* past the input: the extrapolation value */
      qir_expr *o = bin(t, QIR_FN_OR, bin(t, QIR_FN_LT, src, flit(t, 0)), bin(t, QIR_FN_GT, src, flit(t, (double)(in - 1))));
      outside = outside ? bin(t, QIR_FN_OR, outside, o) : o;
    }
    if (nearest) {
      qir_expr *r;
      if (!strcmp(nm, "floor")) r = un(t, QIR_FN_FLOOR, src);
      else if (!strcmp(nm, "ceil")) r = un(t, QIR_FN_CEIL, src);
      else if (!strcmp(nm, "round_prefer_ceil")) r = un(t, QIR_FN_FLOOR, add(t, src, flit(t, 0.5)));
      else r = un(t, QIR_FN_CEIL, sub(t, src, flit(t, 0.5))); /* round_prefer_floor */
      idx[i] = clamp_index(t, qir_expr_cast(t->m, QIR_I64, r), in);
      continue;
    }
    if (antialias) {
      /* the kernel stretched by 1/scale when downsampling: n = 2 - 2*start taps
       * around src (the left one first when src is integral), normalised */
      double s = scales[i] < 1 ? scales[i] : 1;
      int start = (int)floor((cubic ? -2 : -1) / s) + 1, n = 2 - 2 * start;
      if (n > 64 || t->n_axes + t->n_red >= 2 * QIR_MAX_RANK) return NULL;
      qir_expr *base = iadd(t, qir_expr_cast(t->m, QIR_I64, un(t, QIR_FN_CEIL, src)), start - 1);
      qir_expr *sum = NULL;
      for (int k = 0; k < n; k++) {
        qir_expr *d = mul(t, un(t, QIR_FN_ABS, sub(t, src, iadd(t, base, k))), flit(t, s));
        qir_expr *wk = cubic ? resize_kernel(t, true, a, d) : bin(t, QIR_FN_MAX, sub(t, flit(t, 1), d), flit(t, 0));
        sum = sum ? add(t, sum, wk) : wk;
      }
      int tau = add_red(t, n);
      qir_expr *tap = add(t, base, var(t, tau));
      qir_expr *d = mul(t, un(t, QIR_FN_ABS, sub(t, src, tap)), flit(t, s));
      qir_expr *w = dv(t, cubic ? resize_kernel(t, true, a, d) : bin(t, QIR_FN_MAX, sub(t, flit(t, 1), d), flit(t, 0)), sum);
      weight = weight ? mul(t, weight, w) : w;
      idx[i] = clamp_index(t, tap, in);
      continue;
    }
    int n_taps = cubic ? 4 : 2;
    int tau = add_red(t, n_taps);
    /* taps floor(src) - 1 .. + 2 (cubic) or floor(src) .. + 1 (linear) */
    qir_expr *base = iadd(t, qir_expr_cast(t->m, QIR_I64, un(t, QIR_FN_FLOOR, src)), cubic ? -1 : 0);
    qir_expr *tap = add(t, base, var(t, tau));
    qir_expr *w = resize_kernel(t, cubic, a, un(t, QIR_FN_ABS, sub(t, src, tap)));
    if (exclude) {
      /* taps outside the input weigh 0; the rest are renormalised */
      qir_expr *sum = NULL;
      for (int k = 0; k < n_taps; k++) {
        qir_expr *tk = iadd(t, base, k);
        qir_expr *wk = sel(t, in_bounds(t, tk, in, true, true), resize_kernel(t, cubic, a, un(t, QIR_FN_ABS, sub(t, src, tk))), flit(t, 0));
        sum = sum ? add(t, sum, wk) : wk;
      }
      w = dv(t, sel(t, in_bounds(t, tap, in, true, true), w, flit(t, 0)), sum);
    }
    weight = weight ? mul(t, weight, w) : w;
    idx[i] = clamp_index(t, tap, in);
  }
  qir_expr *v = access(t, 0, x->rank, idx);
  qir_expr *ex = flit(t, attr_f(t, "extrapolation_value", 0));
  if (nearest || !weight) return finish(t, outside ? sel(t, outside, ex, v) : v, QIR_REDUCE_NONE);
  qir_expr *body = mul(t, weight, v);
  if (outside) body = sel(t, outside, sel(t, first_iteration(t), ex, flit(t, 0)), body);
  return finish(t, body, QIR_REDUCE_SUM);
}

/* ---------------------------------------------------------------- dispatch */

typedef qir_op *(*te_fn)(te *t);

static te_fn te_for(qir_opcode code) {
  const qir_opinfo *info = qir_opinfo_get(code);
  if (info && (info->flags & QIR_OPF_ELEMENTWISE)) return te_elementwise;
  switch (code) {
  case QIR_OP_REDUCE_SUM: case QIR_OP_REDUCE_MEAN: case QIR_OP_REDUCE_MAX: case QIR_OP_REDUCE_MIN:
  case QIR_OP_REDUCE_PROD:
    return te_reduce;
  case QIR_OP_GLOBAL_AVG_POOL: case QIR_OP_GLOBAL_MAX_POOL: return te_global_pool;
  case QIR_OP_MATMUL: return te_matmul;
  case QIR_OP_GEMM: return te_gemm;
  case QIR_OP_EINSUM: return te_einsum;
  case QIR_OP_CONV: case QIR_OP_CONV_TRANSPOSE: return te_conv;
  case QIR_OP_MAX_POOL: case QIR_OP_AVG_POOL: return te_pool;
  case QIR_OP_BATCH_NORM: return te_batch_norm;
  case QIR_OP_TRANSPOSE: return te_transpose;
  case QIR_OP_RESHAPE: return te_reshape;
  case QIR_OP_CONCAT: return te_concat;
  case QIR_OP_SLICE: return te_slice;
  case QIR_OP_PAD: return te_pad;
  case QIR_OP_EXPAND: return te_expand;
  case QIR_OP_TILE: return te_tile;
  case QIR_OP_GATHER: case QIR_OP_GATHER_ELEMENTS: return te_gather;
  case QIR_OP_GATHER_ND: return te_gather_nd;
  case QIR_OP_SCATTER_ELEMENTS: case QIR_OP_SCATTER_ND: return te_scatter;
  case QIR_OP_DEPTH_TO_SPACE: case QIR_OP_SPACE_TO_DEPTH: return te_depth_space;
  case QIR_OP_TRILU: return te_trilu;
  case QIR_OP_CUMSUM: case QIR_OP_CUMPROD: return te_cumsum;
  case QIR_OP_ONE_HOT: return te_one_hot;
  case QIR_OP_RANGE: return te_range;
  case QIR_OP_RESIZE: return te_resize;
  default: return NULL;
  }
}

qir_op *qir_op_to_compute(qir_module *m, const qir_op *op, qir_diag *d) {
  te_fn fn = te_for(op->code);
  if (!fn || op->n_results != 1) return NULL;
  /* only well-typed ops: the definitions index with the op's shapes */
  qir_type *out = qir_alloc(m, sizeof *out * (size_t)(op->n_results + 1));
  if (!qir_infer_types(m, op, out, d)) return NULL;
  if (!qir_type_equal(&out[0], &op->results[0]->type)) return NULL;
  te t = {m, op, d, 0, 0, {0}};
  return fn(&t);
}

/* ---------------------------------------------------------------- multi-stage ops */

/* Element type of intermediate results: at least f32. */
/* Statistics of narrow floats in f32; of f64 and integers (reduce_l2) in f64. */
static qir_dtype stage_dtype(qir_dtype dt) { return qir_dtype_is_float(dt) && dt != QIR_F64 ? QIR_F32 : QIR_F64; }

typedef struct {
  te t;
  qir_op **out;
  int n, cap;
} chain;

static qir_value *push(chain *c, qir_op *op) {
  if (!op || c->n >= c->cap) return NULL;
  c->out[c->n++] = op;
  return op->results[0];
}

/* A reduction of x (operand of the named op) over `axes` into a keepdims
 * shape: fn(each element) combined by `reduce`. */
static qir_value *stage_reduce(chain *c, const bool *reduced, qir_expr *(*elem)(te *, qir_expr *, void *), void *ctx,
                               qir_reduce_kind reduce, int n_operands, qir_value *const *operands) {
  te *t = &c->t;
  const qir_type *x = operand_type(t, 0);
  qir_type st = *x;
  st.dtype = stage_dtype(x->dtype);
  for (int i = 0; i < x->rank; i++)
    if (reduced[i]) st.dims[i] = 1;
  set_axes(t, &st);
  int vars[QIR_MAX_RANK];
  for (int i = 0; i < x->rank; i++) vars[i] = reduced[i] ? add_red(t, x->dims[i]) : i;
  qir_expr *body = elem(t, at_vars(t, 0, vars), ctx);
  return push(c, make_compute(t, n_operands, operands, &st, body, reduce));
}

/* the keepdims statistic s (operand k of a compute) read at output position */
static qir_expr *stat_at(te *t, int k, const qir_type *s) {
  qir_expr *idx[QIR_MAX_RANK];
  for (int i = 0; i < s->rank; i++) idx[i] = s->dims[i] == 1 && t->extent[i] != 1 ? lit(t, 0) : var(t, i);
  return access(t, k, s->rank, idx);
}

/* ---- element functions of the reduction stages */
static qir_expr *el_id(te *t, qir_expr *x, void *ctx) {
  (void)t, (void)ctx;
  return x;
}
static qir_expr *el_square(te *t, qir_expr *x, void *ctx) {
  (void)ctx;
  qir_dtype dt = operand_type(t, 0)->dtype;
  if (!qir_dtype_is_float(dt)) x = dt == QIR_U64 ? u64_real(t, x) : qir_expr_cast(t->m, QIR_F64, x); /* no i64 overflow */
  return mul(t, x, x);
}
static qir_expr *el_abs(te *t, qir_expr *x, void *ctx) {
  (void)ctx;
  return un(t, QIR_FN_ABS, x);
}
static qir_expr *el_scaled(te *t, qir_expr *x, void *ctx) { return dv(t, x, flit(t, *(double *)ctx)); }

/* exp(x - max) with the max as compute operand 1, read at the reduced position */
typedef struct {
  const qir_type *stat;
  double n;
} stat_ctx;
static qir_expr *stat_reduced(te *t, const qir_type *s) {
  qir_expr *idx[QIR_MAX_RANK];
  for (int i = 0; i < s->rank; i++) idx[i] = var(t, i);
  return access(t, 1, s->rank, idx);
}
static qir_expr *el_exp_minus(te *t, qir_expr *x, void *ctx) {
  stat_ctx *s = ctx;
  return un(t, QIR_FN_EXP, sub(t, x, stat_reduced(t, s->stat)));
}
static qir_expr *el_sqdev(te *t, qir_expr *x, void *ctx) {
  stat_ctx *s = ctx;
  qir_expr *dev = sub(t, x, stat_reduced(t, s->stat));
  return dv(t, mul(t, dev, dev), flit(t, s->n));
}

/* The final elementwise stage over x's shape, with extra operands. */
static qir_op *stage_final(chain *c, int n_operands, qir_value *const *operands, qir_expr *body) {
  return make_compute(&c->t, n_operands, operands, result_type(&c->t), body, QIR_REDUCE_NONE);
}

static bool normalised_axes(const qir_op *op, const qir_type *x, bool *reduced) {
  memset(reduced, 0, sizeof(bool) * QIR_MAX_RANK);
  if (op->code == QIR_OP_LAYER_NORM) {
    int64_t axis = qir_op_attr_int(op, "axis", x->rank - 1);
    for (int i = (int)axis; i < x->rank; i++) reduced[i] = true;
  } else if (op->code == QIR_OP_INSTANCE_NORM) {
    for (int i = 2; i < x->rank; i++) reduced[i] = true;
  } else {
    reduced[qir_op_attr_int(op, "axis", x->rank - 1)] = true;
  }
  return true;
}

/* e reflected into [lo, hi] by its near border, as often as it takes */
static qir_expr *reflect_into(te *t, qir_expr *e, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return flit(t, lo);
  qir_expr *r[2];
  for (int side = 0; side < 2; side++) {
    qir_expr *dx = side ? sub(t, e, flit(t, hi)) : sub(t, flit(t, lo), e);
    qir_expr *n = un(t, QIR_FN_FLOOR, dv(t, dx, flit(t, rng)));
    qir_expr *rest = sub(t, dx, mul(t, n, flit(t, rng)));
    qir_expr *even = bin(t, QIR_FN_EQ, bin(t, QIR_FN_FMOD, n, flit(t, 2)), flit(t, 0));
    qir_expr *from_lo = add(t, flit(t, lo), rest), *from_hi = sub(t, flit(t, hi), rest);
    r[side] = side ? sel(t, even, from_hi, from_lo) : sel(t, even, from_lo, from_hi);
  }
  return sel(t, bin(t, QIR_FN_LT, e, flit(t, lo)), r[0], sel(t, bin(t, QIR_FN_GT, e, flit(t, hi)), r[1], e));
}

/* Keys' cubic weight of tap j (0..3) at fraction f, a = -0.75 */
static qir_expr *cubic_weight(te *t, int j, qir_expr *f) {
  const double a = -0.75;
  qir_expr *x = j == 0 ? add(t, f, flit(t, 1)) : j == 1 ? f : j == 2 ? sub(t, flit(t, 1), f) : sub(t, flit(t, 2), f);
  if (j == 1 || j == 2) /* ((a + 2) x - (a + 3)) x x + 1 */
    return add(t, mul(t, mul(t, sub(t, mul(t, flit(t, a + 2), x), flit(t, a + 3)), x), x), flit(t, 1));
  /* ((a x - 5a) x + 8a) x - 4a */
  return sub(t, mul(t, add(t, mul(t, sub(t, mul(t, flit(t, a), x), flit(t, 5 * a)), x), flit(t, 8 * a)), x), flit(t, 4 * a));
}

/* grid_sample: stage 1 the sampling position per output point and spatial
 * dim (denormalised, rounded for nearest, moved inside by border/reflection);
 * stage 2 the taps around it, weighted, read with the padding mode. */
static int expand_grid_sample(chain *c) {
  te *t = &c->t;
  const qir_op *op = t->op;
  const qir_type *x = operand_type(t, 0), *g = operand_type(t, 1);
  const char *mode = qir_op_attr_str(op, "mode", "linear"), *pad = qir_op_attr_str(op, "padding_mode", "zeros");
  bool align = qir_op_attr_int(op, "align_corners", 0) != 0;
  int k = x->rank - 2, m = g->rank - 2, taps1 = !strcmp(mode, "nearest") ? 1 : !strcmp(mode, "linear") ? 2 : 4;
  if (k > 3 || m + 2 + k > 2 * QIR_MAX_RANK) return 0;
  /* stage 1: pos [N, o1..om, k] */
  qir_type pt = *g;
  pt.dtype = stage_dtype(x->dtype);
  set_axes(t, &pt);
  qir_expr *body = NULL;
  for (int d = k - 1; d >= 0; d--) {
    double D = (double)x->dims[2 + d], lo = align ? 0 : -0.5, hi = align ? D - 1 : D - 0.5;
    qir_expr *gi[QIR_MAX_RANK];
    for (int i = 0; i <= m; i++) gi[i] = var(t, i);
    gi[m + 1] = lit(t, k - 1 - d); /* the grid lists the last spatial dim first */
    qir_expr *gn = add(t, access(t, 1, g->rank, gi), flit(t, 1));
    qir_expr *v = align ? mul(t, dv(t, gn, flit(t, 2)), flit(t, D - 1)) : dv(t, sub(t, mul(t, gn, flit(t, D)), flit(t, 1)), flit(t, 2));
    if (taps1 == 1) v = un(t, QIR_FN_ROUND, v);
    if (!strcmp(pad, "border")) {
      qir_expr *out = bin(t, QIR_FN_OR, bin(t, QIR_FN_LT, v, flit(t, lo)), bin(t, QIR_FN_GT, v, flit(t, hi)));
      v = sel(t, out, bin(t, QIR_FN_MIN, bin(t, QIR_FN_MAX, v, flit(t, 0)), flit(t, D - 1)), v);
    } else if (!strcmp(pad, "reflection")) {
      v = reflect_into(t, v, lo, hi);
    }
    body = body ? sel(t, bin(t, QIR_FN_EQ, var(t, m + 1), lit(t, d)), v, body) : v;
  }
  qir_value *pos = push(c, make_compute(t, 2, op->operands, &pt, body, QIR_REDUCE_NONE));
  if (!pos) return 0;
  /* stage 2 */
  set_axes(t, result_type(t));
  qir_expr *xi[QIR_MAX_RANK], *weight = NULL, *valid = NULL;
  xi[0] = var(t, 0);
  xi[1] = var(t, 1);
  for (int d = 0; d < k; d++) {
    int64_t D = x->dims[2 + d];
    qir_expr *pi[QIR_MAX_RANK];
    pi[0] = var(t, 0);
    for (int i = 0; i < m; i++) pi[1 + i] = var(t, 2 + i);
    pi[m + 1] = lit(t, d);
    qir_expr *v = access(t, 1, m + 2, pi), *i;
    if (taps1 == 1) {
      i = qir_expr_cast(t->m, QIR_I64, v); /* truncates, as the reference's int cast */
    } else {
      int r = add_red(t, taps1);
      qir_expr *f = un(t, QIR_FN_FLOOR, v), *frac = sub(t, v, f);
      i = add(t, qir_expr_cast(t->m, QIR_I64, f), iadd(t, var(t, r), taps1 == 4 ? -1 : 0));
      qir_expr *w;
      if (taps1 == 2) {
        w = sel(t, bin(t, QIR_FN_EQ, var(t, r), lit(t, 0)), sub(t, flit(t, 1), frac), frac);
      } else {
        w = cubic_weight(t, 3, frac);
        for (int j = 2; j >= 0; j--) w = sel(t, bin(t, QIR_FN_EQ, var(t, r), lit(t, j)), cubic_weight(t, j, frac), w);
      }
      weight = weight ? mul(t, weight, w) : w;
    }
    if (!strcmp(pad, "zeros")) {
      valid = and_(t, valid, and_(t, bin(t, QIR_FN_GE, i, lit(t, 0)), bin(t, QIR_FN_LT, i, lit(t, D))));
    } else {
      if (!strcmp(pad, "reflection"))
        i = qir_expr_cast(t->m, QIR_I64, reflect_into(t, qir_expr_cast(t->m, QIR_F64, i), align ? 0 : -0.5, align ? (double)D - 1 : (double)D - 0.5));
      i = bin(t, QIR_FN_MIN, bin(t, QIR_FN_MAX, i, lit(t, 0)), lit(t, D - 1));
    }
    xi[2 + d] = i;
  }
  qir_expr *val = access(t, 0, x->rank, xi);
  if (weight) val = mul(t, weight, val);
  if (valid) val = sel(t, valid, val, lit_like(t, x->dtype, 0));
  qir_value *ops2[2] = {op->operands[0], pos};
  return push(c, make_compute(t, 2, ops2, result_type(t), val, taps1 == 1 ? QIR_REDUCE_NONE : QIR_REDUCE_SUM)) ? c->n : 0;
}

/* attention: scores (a contraction over the head size), logits (softcap,
 * causal mask and bias; skipped when none), their max and sum of exp over the
 * keys, and the output (the normalised exp weighting the values, a
 * contraction over the keys).  Query head h reads kv head h / G.  The stages
 * are [B,H,S,T] in either layout; q, k, v and y are read and written in the
 * op's (bshd swaps the head and sequence axes). */
static qir_expr *at4(te *t, int operand, qir_expr *a, qir_expr *b, qir_expr *c_, qir_expr *d) {
  qir_expr *idx[4] = {a, b, c_, d};
  return access(t, operand, 4, idx);
}
/* operand (batch, head, seq, last) in the op's layout */
static qir_expr *at_bhsd(te *t, int operand, bool bshd, qir_expr *b, qir_expr *h, qir_expr *s, qir_expr *d) {
  return bshd ? at4(t, operand, b, s, h, d) : at4(t, operand, b, h, s, d);
}
static int expand_attention(chain *c) {
  te *t = &c->t;
  const qir_op *op = t->op;
  bool bshd = qir_attention_bshd(op), causal = qir_op_attr_int(op, "causal", 0) != 0;
  int h_ax = bshd ? 2 : 1, s_ax = bshd ? 1 : 2;
  const qir_type *q = operand_type(t, 0), *k = operand_type(t, 1), *bias = operand_type(t, 3);
  int64_t B = q->dims[0], H = q->dims[h_ax], S = q->dims[s_ax], D = q->dims[3], T = k->dims[s_ax], G = H / k->dims[h_ax];
  double scale = attr_f(t, "scale", 1), cap = attr_f(t, "softcap", 0), root = sqrt(fabs(scale));
  qir_dtype sd = stage_dtype(q->dtype);
  qir_type st = qir_type_make(sd, 4, (int64_t[4]){B, H, S, T}), row = qir_type_make(sd, 4, (int64_t[4]){B, H, S, 1});
  qir_expr *kvh = G == 1 ? var(t, 1) : dv(t, var(t, 1), lit(t, G));
  /* scores: sum_r (q·√scale)(k·√scale), as ONNX scales both */
  set_axes(t, &st);
  int r = add_red(t, D);
  qir_expr *dot = mul(t, mul(t, at_bhsd(t, 0, bshd, var(t, 0), var(t, 1), var(t, 2), var(t, r)), flit(t, root)),
                      mul(t, at_bhsd(t, 1, bshd, var(t, 0), kvh, var(t, 3), var(t, r)), flit(t, root)));
  if (scale < 0) dot = un(t, QIR_FN_NEG, dot);
  qir_value *qk_ops[2] = {op->operands[0], op->operands[1]};
  qir_value *logits = push(c, make_compute(t, 2, qk_ops, &st, dot, QIR_REDUCE_SUM));
  if (!logits) return 0;
  bool has_bias = !qir_value_is_zero_const(op->operands[3]);
  if (cap > 0 || causal || has_bias) {
    set_axes(t, &st);
    qir_expr *l = at4(t, 0, var(t, 0), var(t, 1), var(t, 2), var(t, 3));
    if (cap > 0) l = mul(t, flit(t, cap), un(t, QIR_FN_TANH, dv(t, l, flit(t, cap))));
    /* key j hidden from query i when j > i + (T - S) */
    if (causal) l = sel(t, bin(t, QIR_FN_LE, var(t, 3), iadd(t, var(t, 2), T - S)), l, flit(t, -INFINITY));
    if (has_bias) {
      qir_expr *bi[4];
      for (int a = 0, off = 4 - bias->rank; a < bias->rank; a++)
        bi[a] = bias->dims[a] == 1 && st.dims[a + off] != 1 ? lit(t, 0) : var(t, a + off);
      l = add(t, l, access(t, 1, bias->rank, bi));
    }
    qir_value *l_ops[2] = {logits, op->operands[3]};
    logits = push(c, make_compute(t, has_bias ? 2 : 1, l_ops, &st, l, QIR_REDUCE_NONE));
    if (!logits) return 0;
  }
  /* the row max and the sum of exp over the keys */
  set_axes(t, &row);
  r = add_red(t, T);
  qir_value *mx = push(c, make_compute(t, 1, &logits, &row, at4(t, 0, var(t, 0), var(t, 1), var(t, 2), var(t, r)), QIR_REDUCE_MAX));
  if (!mx) return 0;
  set_axes(t, &row);
  r = add_red(t, T);
  qir_value *z_ops[2] = {logits, mx};
  qir_expr *e = un(t, QIR_FN_EXP, sub(t, at4(t, 0, var(t, 0), var(t, 1), var(t, 2), var(t, r)), at4(t, 1, var(t, 0), var(t, 1), var(t, 2), lit(t, 0))));
  qir_value *z = push(c, make_compute(t, 2, z_ops, &row, e, QIR_REDUCE_SUM));
  if (!z) return 0;
  /* y = sum_r exp(l - max) / sum · v[.., kv head, r, i3]; y's axes are in the op's layout */
  set_axes(t, result_type(t));
  r = add_red(t, T);
  qir_value *y_ops[4] = {logits, mx, z, op->operands[2]};
  qir_expr *p = dv(t, un(t, QIR_FN_EXP, sub(t, at4(t, 0, var(t, 0), var(t, h_ax), var(t, s_ax), var(t, r)),
                                           at4(t, 1, var(t, 0), var(t, h_ax), var(t, s_ax), lit(t, 0)))),
                   at4(t, 2, var(t, 0), var(t, h_ax), var(t, s_ax), lit(t, 0)));
  qir_expr *kvh2 = G == 1 ? var(t, h_ax) : dv(t, var(t, h_ax), lit(t, G));
  qir_expr *y = mul(t, p, at_bhsd(t, 3, bshd, var(t, 0), kvh2, var(t, r), var(t, 3)));
  return push(c, make_compute(t, 4, y_ops, result_type(t), y, QIR_REDUCE_SUM)) ? c->n : 0;
}

static int expand_chain(chain *c) {
  te *t = &c->t;
  const qir_op *op = t->op;
  const qir_type *x = operand_type(t, 0);
  qir_value *xv = op->operands[0];
  bool reduced[QIR_MAX_RANK];
  switch (op->code) {
  case QIR_OP_ATTENTION: return expand_attention(c);
  case QIR_OP_SOFTMAX: case QIR_OP_LOG_SOFTMAX: {
    normalised_axes(op, x, reduced);
    qir_value *mx = stage_reduce(c, reduced, el_id, NULL, QIR_REDUCE_MAX, 1, &xv);
    if (!mx) return 0;
    stat_ctx sc = {&mx->type, 0};
    qir_value *ops2[2] = {xv, mx};
    qir_value *sum = stage_reduce(c, reduced, el_exp_minus, &sc, QIR_REDUCE_SUM, 2, ops2);
    if (!sum) return 0;
    set_axes(t, result_type(t));
    qir_value *ops3[3] = {xv, mx, sum};
    qir_expr *shifted = sub(t, bcast(t, 0), stat_at(t, 1, &mx->type));
    qir_expr *body = op->code == QIR_OP_SOFTMAX ? dv(t, un(t, QIR_FN_EXP, shifted), stat_at(t, 2, &sum->type))
                                                : sub(t, shifted, un(t, QIR_FN_LOG, stat_at(t, 2, &sum->type)));
    return push(c, stage_final(c, 3, ops3, body)) ? c->n : 0;
  }
  case QIR_OP_LAYER_NORM: case QIR_OP_INSTANCE_NORM: {
    normalised_axes(op, x, reduced);
    double n = 1;
    for (int i = 0; i < x->rank; i++)
      if (reduced[i]) n *= (double)x->dims[i];
    qir_value *mean = stage_reduce(c, reduced, el_scaled, &n, QIR_REDUCE_SUM, 1, &xv);
    if (!mean) return 0;
    stat_ctx sc = {&mean->type, n};
    qir_value *ops2[2] = {xv, mean};
    qir_value *var_ = stage_reduce(c, reduced, el_sqdev, &sc, QIR_REDUCE_SUM, 2, ops2);
    if (!var_) return 0;
    set_axes(t, result_type(t));
    qir_value *ops5[5] = {xv, op->operands[1], op->operands[2], mean, var_};
    qir_expr *eps = flit(t, attr_f(t, "epsilon", 1e-5));
    qir_expr *norm = mul(t, sub(t, bcast(t, 0), stat_at(t, 3, &mean->type)),
                         un(t, QIR_FN_RSQRT, add(t, stat_at(t, 4, &var_->type), eps)));
    qir_expr *scale, *bias;
    if (op->code == QIR_OP_INSTANCE_NORM) {
      int c_only[1] = {1};
      scale = at_vars(t, 1, c_only);
      bias = at_vars(t, 2, c_only);
    } else {
      scale = bcast(t, 1);
      bias = bcast(t, 2);
    }
    /* bcast of operands 1, 2 indexes the named op's operand types, which
     * are the same values at the same positions here */
    return push(c, stage_final(c, 5, ops5, add(t, mul(t, norm, scale), bias))) ? c->n : 0;
  }
  case QIR_OP_LP_NORMALIZATION: {
    normalised_axes(op, x, reduced);
    bool l1 = qir_op_attr_int(op, "p", 2) == 1;
    qir_value *nrm = stage_reduce(c, reduced, l1 ? el_abs : el_square, NULL, QIR_REDUCE_SUM, 1, &xv);
    if (!nrm) return 0;
    set_axes(t, result_type(t));
    qir_value *ops2[2] = {xv, nrm};
    qir_expr *den = stat_at(t, 1, &nrm->type);
    if (!l1) den = un(t, QIR_FN_SQRT, den);
    /* a zero norm gives 0 (ONNX's reference) */
    qir_expr *y = sel(t, bin(t, QIR_FN_EQ, den, flit(t, 0)), flit(t, 0), dv(t, bcast(t, 0), den));
    return push(c, stage_final(c, 2, ops2, y)) ? c->n : 0;
  }
  case QIR_OP_REDUCE_L2: {
    int64_t axes[QIR_MAX_RANK];
    int na = qir_op_attr_ints(op, "axes", axes, QIR_MAX_RANK);
    for (int i = 0; i < x->rank; i++) reduced[i] = na < 0;
    for (int i = 0; i < na; i++) reduced[axes[i]] = true;
    qir_value *ss = stage_reduce(c, reduced, el_square, NULL, QIR_REDUCE_SUM, 1, &xv);
    if (!ss) return 0;
    /* sqrt, read through a reshape-free map: the result drops or keeps the
     * reduced dims; index the keepdims statistic accordingly */
    set_axes(t, result_type(t));
    bool keep = qir_op_attr_int(op, "keepdims", 1) != 0;
    qir_expr *idx[QIR_MAX_RANK];
    for (int i = 0, o = 0; i < x->rank; i++) idx[i] = reduced[i] ? (keep ? (o++, lit(t, 0)) : lit(t, 0)) : var(t, o++);
    qir_value *ops1[1] = {ss};
    qir_expr *body = un(t, QIR_FN_SQRT, access(t, 0, x->rank, idx));
    return push(c, make_compute(t, 1, ops1, result_type(t), body, QIR_REDUCE_NONE)) ? c->n : 0;
  }
  case QIR_OP_ARGMAX: case QIR_OP_ARGMIN: {
    int axis = (int)qir_op_attr_int(op, "axis", 0);
    bool keep = qir_op_attr_int(op, "keepdims", 1) != 0, last = qir_op_attr_int(op, "select_last_index", 0) != 0;
    memset(reduced, 0, sizeof reduced);
    reduced[axis] = true;
    /* stage 1: the extreme value (kept in x's dtype so equality is exact) */
    qir_value *ext = stage_reduce(c, reduced, el_id, NULL, op->code == QIR_OP_ARGMAX ? QIR_REDUCE_MAX : QIR_REDUCE_MIN, 1, &xv);
    if (!ext) return 0;
    ext->type.dtype = x->dtype;
    /* stage 2: first (or last) index where x equals it */
    set_axes(t, result_type(t));
    int j = add_red(t, x->dims[axis]);
    qir_expr *xi[QIR_MAX_RANK], *ei[QIR_MAX_RANK];
    for (int i = 0, o = 0; i < x->rank; i++) {
      if (i == axis) {
        xi[i] = var(t, j);
        ei[i] = lit(t, 0);
        if (keep) o++;
      } else {
        xi[i] = ei[i] = var(t, o++);
      }
    }
    qir_expr *hit = bin(t, QIR_FN_EQ, access(t, 0, x->rank, xi), access(t, 1, x->rank, ei));
    /* a NaN extreme (max/min propagate NaN): the first (last) NaN, as numpy */
    if (qir_dtype_is_float(x->dtype))
      hit = sel(t, un(t, QIR_FN_ISNAN, access(t, 1, x->rank, ei)), un(t, QIR_FN_ISNAN, access(t, 0, x->rank, xi)), hit);
    qir_expr *body = sel(t, hit, var(t, j), lit(t, last ? -1 : x->dims[axis]));
    qir_value *ops2[2] = {xv, ext};
    return push(c, make_compute(t, 2, ops2, result_type(t), body, last ? QIR_REDUCE_MAX : QIR_REDUCE_MIN)) ? c->n : 0;
  }
  case QIR_OP_GRID_SAMPLE: return expand_grid_sample(c);
  case QIR_OP_SCATTER_ELEMENTS: case QIR_OP_SCATTER_ND: {
    /* reduction none: the last update landing on each element (its number in
     * writing order, -1 for none), then that update or the data */
    qir_type lt = *x;
    lt.dtype = QIR_I64;
    set_axes(t, &lt);
    scatter_terms s;
    if (!scatter_read(t, 2, &s)) return 0;
    qir_value *last = push(c, make_compute(t, 2, op->operands, &lt, sel(t, s.hit, s.lin, lit(t, -1)), QIR_REDUCE_MAX));
    if (!last) return 0;
    set_axes(t, result_type(t));
    const qir_type *ind = operand_type(t, 1);
    qir_expr *lv[QIR_MAX_RANK], *ui[QIR_MAX_RANK], *at = NULL;
    for (int k = 0; k < x->rank; k++) lv[k] = var(t, k);
    at = access(t, 2, x->rank, lv);
    int n_ui;
    if (op->code == QIR_OP_SCATTER_ELEMENTS) {
      int axis = (int)qir_op_attr_int(op, "axis", 0);
      for (int k = 0; k < x->rank; k++) ui[k] = k == axis ? at : var(t, k);
      n_ui = x->rank;
    } else {
      /* the update's leading coordinates from its number */
      int q = ind->rank;
      int64_t m = ind->dims[q - 1], stride = 1;
      for (int k = q - 2; k >= 0; k--) {
        ui[k] = bin(t, QIR_FN_MOD, bin(t, QIR_FN_DIV, at, lit(t, stride)), lit(t, ind->dims[k]));
        stride *= ind->dims[k];
      }
      for (int64_t k = m; k < x->rank; k++) ui[q - 1 + k - m] = var(t, (int)k);
      n_ui = (int)(q - 1 + x->rank - m);
    }
    qir_value *ops3[3] = {xv, op->operands[2], last};
    qir_expr *body = sel(t, bin(t, QIR_FN_GE, at, lit(t, 0)), access(t, 1, n_ui, ui), bcast(t, 0));
    return push(c, stage_final(c, 3, ops3, body)) ? c->n : 0;
  }
  case QIR_OP_LRN: {
    int64_t size = qir_op_attr_int(op, "size", 1), C = x->dims[1];
    double alpha = attr_f(t, "alpha", 1e-4), beta = attr_f(t, "beta", 0.75), bias = attr_f(t, "bias", 1);
    qir_type st = *x;
    st.dtype = stage_dtype(x->dtype);
    set_axes(t, &st);
    qir_expr *body;
    if (size <= C) {
      int j = add_red(t, size);
      /* channel c - floor((size-1)/2) + j, inside [0, C) */
      qir_expr *ch = iadd(t, add(t, var(t, 1), var(t, j)), -((size - 1) / 2));
      qir_expr *a = at_with(t, 0, 1, ch);
      body = sel(t, in_bounds(t, ch, C, true, true), mul(t, a, a), flit(t, 0));
    } else {
      /* a window wider than the channels (size may be near INT64_MAX): reduce
       * over the C channels, those inside the window: 0 <= j - c + lo < size */
      int j = add_red(t, C);
      qir_expr *a = at_with(t, 0, 1, var(t, j));
      qir_expr *off = iadd(t, sub(t, var(t, j), var(t, 1)), (size - 1) / 2);
      body = sel(t, in_bounds(t, off, size, true, true), mul(t, a, a), flit(t, 0));
    }
    qir_value *sq = push(c, make_compute(t, 1, &xv, &st, body, QIR_REDUCE_SUM));
    if (!sq) return 0;
    set_axes(t, result_type(t));
    qir_value *ops2[2] = {xv, sq};
    qir_expr *den = bin(t, QIR_FN_POW, add(t, flit(t, bias), mul(t, flit(t, alpha / (double)size), stat_at(t, 1, &sq->type))),
                        flit(t, beta));
    return push(c, stage_final(c, 2, ops2, dv(t, bcast(t, 0), den))) ? c->n : 0;
  }
  default:
    return 0;
  }
}

int qir_op_expand_computes(qir_module *m, const qir_op *op, qir_op **out, int cap, qir_diag *d) {
  if (cap < 1 || op->n_results != 1) return 0;
  qir_op *one = qir_op_to_compute(m, op, d);
  if (one) {
    out[0] = one;
    return 1;
  }
  switch (op->code) {
  case QIR_OP_SOFTMAX: case QIR_OP_LOG_SOFTMAX: case QIR_OP_LAYER_NORM: case QIR_OP_INSTANCE_NORM:
  case QIR_OP_LP_NORMALIZATION: case QIR_OP_REDUCE_L2: case QIR_OP_ARGMAX: case QIR_OP_ARGMIN: case QIR_OP_LRN:
  case QIR_OP_SCATTER_ELEMENTS: case QIR_OP_SCATTER_ND: case QIR_OP_GRID_SAMPLE: case QIR_OP_ATTENTION:
    break;
  default:
    return 0;
  }
  if (op->n_results < 1) return 0;
  qir_type *types = qir_alloc(m, sizeof *types * (size_t)(op->n_results + 1));
  if (!qir_infer_types(m, op, types, d) || !qir_type_equal(&types[0], &op->results[0]->type)) return 0;
  chain c = {{m, op, d, 0, 0, {0}}, out, 0, cap};
  int n = expand_chain(&c);
  if (n == 0)
    for (int i = 0; i < c.n; i++) qir_op_unlink(out[i]); /* drop the uses the partial chain took */
  return n;
}

/* ---------------------------------------------------------------- multi-result ops */

/* split: one slice compute per result. */
static int expand_split(chain *c, qir_value **results) {
  te *t = &c->t;
  const qir_op *op = t->op;
  int axis = (int)qir_op_attr_int(op, "axis", 0);
  int64_t off = 0;
  for (int r = 0; r < op->n_results; r++) {
    const qir_type *rt = &op->results[r]->type;
    set_axes(t, rt);
    qir_value *v = push(c, make_compute(t, 1, op->operands, rt, at_with(t, 0, axis, iadd(t, var(t, axis), off)), QIR_REDUCE_NONE));
    if (!v) return 0;
    results[r] = v;
    off += rt->dims[axis];
  }
  return c->n;
}

/* max_pool with indices: the max, then the smallest flat index (over the
 * whole tensor, spatial dims row- or column-major) of a tap holding it. */
static int expand_max_pool_indices(chain *c, qir_value **results) {
  te *t = &c->t;
  const qir_op *op = t->op;
  const qir_type *x = operand_type(t, 0);
  bool column_major = qir_op_attr_int(op, "storage_order", 0) != 0;
  pool_taps p;
  qir_reduce_kind reduce = QIR_REDUCE_NONE;
  if (!pool_read(t, &p)) return 0;
  qir_expr *value = pool_body(t, &p, &reduce);
  qir_value *mx = push(c, make_compute(t, 1, op->operands, &op->results[0]->type, value, reduce));
  if (!mx) return 0;
  if (!pool_read(t, &p)) return 0;
  /* (n*C + c) * plane + the spatial offset, row- or column-major (storage_order) */
  int64_t plane = 1, stride[QIR_MAX_RANK];
  for (int i = column_major ? 2 : x->rank - 1; column_major ? i < x->rank : i >= 2; i += column_major ? 1 : -1)
    stride[i] = plane, plane *= x->dims[i];
  qir_expr *flat = imul(t, add(t, imul(t, p.ix[0], x->dims[1]), p.ix[1]), plane);
  for (int i = 2; i < x->rank; i++) flat = add(t, flat, imul(t, p.ix[i], stride[i]));
  qir_expr *mi[QIR_MAX_RANK];
  for (int i = 0; i < x->rank; i++) mi[i] = var(t, i);
  qir_expr *hit = bin(t, QIR_FN_EQ, access(t, 0, x->rank, p.ix), access(t, 1, x->rank, mi));
  if (qir_dtype_is_float(x->dtype)) /* a NaN max: the first NaN tap */
    hit = sel(t, un(t, QIR_FN_ISNAN, access(t, 1, x->rank, mi)), un(t, QIR_FN_ISNAN, access(t, 0, x->rank, p.ix)), hit);
  qir_value *ops2[2] = {op->operands[0], mx};
  qir_expr *body = sel(t, and_(t, p.guard, hit), flat, lit(t, qir_type_numel(x)));
  qir_value *idx = push(c, make_compute(t, 2, ops2, &op->results[1]->type, body, QIR_REDUCE_MIN));
  if (!idx) return 0;
  results[0] = mx;
  results[1] = idx;
  return c->n;
}

/* top_k as two reductions: each element's rank along the axis (how many
 * elements go before it: better, or equal at a lower index), then the k
 * outputs pick the element of rank p (exactly one term of each sum is taken).
 * Quadratic in the axis extent; NaN orders as the largest value, as in qrun. */
static int expand_top_k(chain *c, qir_value **results) {
  te *t = &c->t;
  const qir_op *op = t->op;
  const qir_type *x = operand_type(t, 0);
  int axis = (int)qir_op_attr_int(op, "axis", x->rank - 1);
  bool largest = qir_op_attr_int(op, "largest", 1) != 0;
  qir_type rt = *x;
  rt.dtype = QIR_I64;
  set_axes(t, &rt);
  int j = add_red(t, x->dims[axis]);
  qir_expr *xi = at_with(t, 0, axis, var(t, axis)), *xj = at_with(t, 0, axis, var(t, j));
  qir_expr *better = x->dtype == QIR_U64 ? (largest ? u64_less(t, xi, xj) : u64_less(t, xj, xi))
                                         : bin(t, largest ? QIR_FN_GT : QIR_FN_LT, xj, xi);
  qir_expr *equal = bin(t, QIR_FN_EQ, xj, xi);
  if (qir_dtype_is_float(x->dtype)) { /* NaN is the largest value, equal to itself (as qrun, numpy's sort) */
    qir_expr *nj = un(t, QIR_FN_ISNAN, xj), *ni = un(t, QIR_FN_ISNAN, xi);
    qir_expr *nan_wins = largest ? bin(t, QIR_FN_AND, nj, un(t, QIR_FN_NOT, ni)) : bin(t, QIR_FN_AND, ni, un(t, QIR_FN_NOT, nj));
    better = bin(t, QIR_FN_OR, nan_wins, better);
    equal = bin(t, QIR_FN_OR, equal, bin(t, QIR_FN_AND, nj, ni));
  }
  qir_expr *tie = and_(t, equal, bin(t, QIR_FN_LT, var(t, j), var(t, axis)));
  qir_expr *before = bin(t, QIR_FN_OR, better, tie);
  qir_value *rank = push(c, make_compute(t, 1, op->operands, &rt, sel(t, before, lit(t, 1), lit(t, 0)), QIR_REDUCE_SUM));
  if (!rank) return 0;
  qir_value *ops2[2] = {op->operands[0], rank};
  for (int r = 0; r < 2; r++) {
    const qir_type *out = &op->results[r]->type;
    set_axes(t, out);
    int i = add_red(t, x->dims[axis]);
    qir_expr *idx[QIR_MAX_RANK];
    for (int k = 0; k < x->rank; k++) idx[k] = k == axis ? var(t, i) : var(t, k);
    qir_expr *hit = bin(t, QIR_FN_EQ, access(t, 1, x->rank, idx), var(t, axis));
    qir_expr *val = r == 0 ? access(t, 0, x->rank, idx) : var(t, i);
    qir_value *v = push(c, make_compute(t, 2, ops2, out, sel(t, hit, val, r == 0 ? lit_like(t, x->dtype, 0) : lit(t, 0)),
                                        QIR_REDUCE_SUM));
    if (!v) return 0;
    results[r] = v;
  }
  return c->n;
}

/* layer_norm with its mean and inv_std_dev results. */
static int expand_layer_norm_stats(chain *c, qir_value **results) {
  te *t = &c->t;
  const qir_op *op = t->op;
  /* the single-result chain is mean, variance, y */
  if (expand_chain(c) != 3) return 0;
  qir_value *mean = c->out[0]->results[0], *var_ = c->out[1]->results[0], *y = c->out[2]->results[0];
  if (!qir_type_equal(&mean->type, &op->results[1]->type)) return 0;
  if (op->n_results > 2) {
    if (!qir_type_equal(&var_->type, &op->results[2]->type)) return 0;
    set_axes(t, &var_->type);
    qir_expr *vi[QIR_MAX_RANK];
    for (int i = 0; i < var_->type.rank; i++) vi[i] = var(t, i);
    qir_expr *body = un(t, QIR_FN_RSQRT, add(t, access(t, 0, var_->type.rank, vi), flit(t, attr_f(t, "epsilon", 1e-5))));
    qir_value *inv = push(c, make_compute(t, 1, &var_, &var_->type, body, QIR_REDUCE_NONE));
    if (!inv) return 0;
    results[2] = inv;
  }
  results[0] = y;
  results[1] = mean;
  return c->n;
}

int qir_op_expand_results(qir_module *m, const qir_op *op, qir_op **out, int cap, qir_value **results, qir_diag *d) {
  if (op->n_results < 1 || cap < 1) return 0;
  if (op->n_results == 1) {
    int n = qir_op_expand_computes(m, op, out, cap, d);
    if (n > 0) results[0] = out[n - 1]->results[0];
    return n;
  }
  if (op->code != QIR_OP_SPLIT && op->code != QIR_OP_MAX_POOL && op->code != QIR_OP_LAYER_NORM && op->code != QIR_OP_TOP_K)
    return 0;
  qir_type *types = qir_alloc(m, sizeof *types * (size_t)(op->n_results + 1));
  if (!qir_infer_types(m, op, types, d)) return 0;
  for (int i = 0; i < op->n_results; i++) {
    if (!qir_type_equal(&types[i], &op->results[i]->type)) return 0;
    for (int k = 0; k < types[i].rank; k++)
      if (types[i].dims[k] <= 0) return 0;
  }
  chain c = {{m, op, d, 0, 0, {0}}, out, 0, cap};
  int n = op->code == QIR_OP_SPLIT ? expand_split(&c, results)
          : op->code == QIR_OP_MAX_POOL ? expand_max_pool_indices(&c, results)
          : op->code == QIR_OP_TOP_K ? expand_top_k(&c, results)
                                        : expand_layer_norm_stats(&c, results);
  if (n == 0)
    for (int i = 0; i < c.n; i++) qir_op_unlink(out[i]);
  return n;
}

/* ------------------------------------------------------- contractions */

static const qir_expr *strip_casts(const qir_expr *e) {
  while (e->kind == QIR_EX_CAST && e->n_args == 1) e = e->args[0];
  return e;
}

static bool is_zero(const qir_expr *e) {
  e = strip_casts(e);
  return (e->kind == QIR_EX_INT && e->ival == 0) || (e->kind == QIR_EX_FLOAT && e->fval == 0);
}

/* Marks the reduction variables of a conjunction of `r == 0` terms; false if
 * it has any other term. */
static bool zero_conjunction(const qir_compute *c, const qir_expr *e, bool *seen) {
  if (e->kind == QIR_EX_BINARY && e->fn == QIR_FN_AND && e->n_args == 2)
    return zero_conjunction(c, e->args[0], seen) && zero_conjunction(c, e->args[1], seen);
  if (e->kind != QIR_EX_BINARY || e->fn != QIR_FN_EQ || e->n_args != 2) return false;
  for (int s = 0; s < 2; s++) {
    const qir_expr *v = e->args[s], *z = e->args[1 - s];
    if (v->kind == QIR_EX_VAR && v->var >= c->n_axes && v->var < c->n_axes + c->n_red && v->var - c->n_axes < 64 &&
        z->kind == QIR_EX_INT && z->ival == 0) {
      seen[v->var - c->n_axes] = true;
      return true;
    }
  }
  return false;
}

/* select(r0 == 0 && .., x, 0) naming every reduction variable: x, else NULL */
static const qir_expr *first_step_term(const qir_compute *c, const qir_expr *e) {
  e = strip_casts(e);
  if (e->kind != QIR_EX_SELECT || e->n_args != 3 || !is_zero(e->args[2]) || c->n_red > 64) return NULL;
  bool seen[64] = {0};
  if (!zero_conjunction(c, e->args[0], seen)) return NULL;
  for (int r = 0; r < c->n_red; r++)
    if (!seen[r]) return NULL;
  return e->args[1];
}

/* e == rest + select(r0 == 0 && .., bias, 0) (either order): bias, *rest set;
 * else NULL. */
static const qir_expr *split_bias(const qir_compute *c, const qir_expr *e, const qir_expr **rest) {
  if (e->kind != QIR_EX_BINARY || e->fn != QIR_FN_ADD || e->n_args != 2) return NULL;
  for (int s = 0; s < 2; s++) {
    const qir_expr *bias = first_step_term(c, e->args[s]);
    if (bias) {
      *rest = e->args[1 - s];
      return bias;
    }
  }
  return NULL;
}

bool qir_compute_contraction(const qir_compute *c, qir_contraction *out) {
  memset(out, 0, sizeof *out);
  if (!c->body || c->reduce != QIR_REDUCE_SUM || c->n_red == 0) return false;
  const qir_expr *e = strip_casts(c->body), *rest;
  if (e->kind == QIR_EX_BINARY && e->fn == QIR_FN_ADD) {
    if (!(out->bias = split_bias(c, e, &rest))) return false;
    e = strip_casts(rest);
  }
  if (e->kind == QIR_EX_SELECT && e->n_args == 3 && is_zero(e->args[2])) {
    out->mask = e->args[0];
    e = strip_casts(e->args[1]);
  }
  if (e->kind != QIR_EX_BINARY || e->fn != QIR_FN_MUL || e->n_args != 2) return false;
  out->a = strip_casts(e->args[0]);
  out->b = strip_casts(e->args[1]);
  return out->a->kind == QIR_EX_ACCESS && out->b->kind == QIR_EX_ACCESS;
}

const qir_expr *qir_compute_bias_term(const qir_compute *c, const qir_expr **rest) {
  if (!c->body || c->reduce != QIR_REDUCE_SUM || c->n_red == 0) return NULL;
  return split_bias(c, c->body, rest);
}
