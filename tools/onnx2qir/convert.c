/* convert.c: one converter per ONNX operator.  Each reads nc->in (NULL for an
 * absent input) and the node's attributes, builds qir ops with op_begin/op_end
 * and sets nc->out.  Inputs that decide shapes are read as constants
 * (need_const_ints); absent optional inputs are materialised as constants.
 * Opset differences (attributes that became inputs, changed defaults) are
 * handled here, so the IR always has the latest form. */
#include "onnx2qir.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(k) ((k) < nc->n_in ? nc->in[k] : NULL)
#define IMP (nc->imp)

bool node_fail(node_ctx *nc, const char *msg) {
  imp_error(nc->imp, "%s", msg);
  return false;
}

bool node_need_inputs(node_ctx *nc, int n) {
  for (int i = 0; i < n; i++)
    if (!IN(i)) {
      imp_error(nc->imp, "required input %d is missing", i);
      return false;
    }
  return true;
}

bool node_set_out(node_ctx *nc, int k, qir_value *v) {
  if (!v) return false;
  if (k < nc->n_out) nc->out[k] = v;
  return true;
}





/* Lowest / highest value of a dtype (infinities for floats). */
static double dtype_lowest(qir_dtype dt) {
  switch (dt) {
  case QIR_F64: case QIR_F32: case QIR_F16: case QIR_BF16: return -INFINITY;
  case QIR_I64: return (double)INT64_MIN;
  case QIR_I32: return INT32_MIN;
  case QIR_I16: return INT16_MIN;
  case QIR_I8: return INT8_MIN;
  default: return 0;
  }
}

static double dtype_highest(qir_dtype dt) {
  switch (dt) {
  case QIR_F64: case QIR_F32: case QIR_F16: case QIR_BF16: return INFINITY;
  case QIR_I64: return 9223372036854775807.0;
  case QIR_I32: return INT32_MAX;
  case QIR_I16: return INT16_MAX;
  case QIR_I8: return INT8_MAX;
  case QIR_U64: return 18446744073709551615.0;
  case QIR_U32: return UINT32_MAX;
  case QIR_U16: return UINT16_MAX;
  case QIR_U8: return UINT8_MAX;
  case QIR_BOOL: return 1;
  default: return 0;
  }
}

/* A scalar (rank 0) view of a one-element operand such as Clip's min. */
static qir_value *as_scalar(importer *imp, qir_value *v) {
  if (!v || v->type.rank == 0) return v;
  if (qir_type_numel(&v->type) != 1) return NULL;
  return emit_reshape(imp, v, 0, NULL);
}

/* ---------------------------------------------------------------- elementwise */

static const struct {
  const char *onnx;
  qir_opcode code;
} simple_ops[] = {
    {"Neg", QIR_OP_NEG}, {"Abs", QIR_OP_ABS}, {"Exp", QIR_OP_EXP}, {"Log", QIR_OP_LOG},
    {"Sqrt", QIR_OP_SQRT}, {"Reciprocal", QIR_OP_RECIPROCAL}, {"Sigmoid", QIR_OP_SIGMOID},
    {"Tanh", QIR_OP_TANH}, {"Relu", QIR_OP_RELU}, {"Erf", QIR_OP_ERF}, {"Ceil", QIR_OP_CEIL},
    {"Floor", QIR_OP_FLOOR}, {"Round", QIR_OP_ROUND}, {"Sin", QIR_OP_SIN}, {"Cos", QIR_OP_COS},
    {"Asin", QIR_OP_ASIN}, {"Acos", QIR_OP_ACOS}, {"Atan", QIR_OP_ATAN}, {"Sinh", QIR_OP_SINH},
    {"Cosh", QIR_OP_COSH}, {"Asinh", QIR_OP_ASINH}, {"Acosh", QIR_OP_ACOSH}, {"Atanh", QIR_OP_ATANH},
    {"Sign", QIR_OP_SIGN}, {"Not", QIR_OP_NOT}, {"IsNaN", QIR_OP_ISNAN}, {"Softplus", QIR_OP_SOFTPLUS},
    {"HardSwish", QIR_OP_HARD_SWISH},
    {"Add", QIR_OP_ADD}, {"Sub", QIR_OP_SUB}, {"Mul", QIR_OP_MUL}, {"Div", QIR_OP_DIV},
    {"Pow", QIR_OP_POW}, {"Equal", QIR_OP_EQUAL}, {"Less", QIR_OP_LESS},
    {"LessOrEqual", QIR_OP_LESS_EQUAL}, {"Greater", QIR_OP_GREATER},
    {"GreaterOrEqual", QIR_OP_GREATER_EQUAL}, {"And", QIR_OP_AND}, {"Or", QIR_OP_OR},
    {"Xor", QIR_OP_XOR},
    {"BitwiseAnd", QIR_OP_BITWISE_AND}, {"BitwiseOr", QIR_OP_BITWISE_OR}, {"BitwiseXor", QIR_OP_BITWISE_XOR},
    {"BitwiseNot", QIR_OP_BITWISE_NOT}, {"Where", QIR_OP_WHERE}, {"PRelu", QIR_OP_PRELU},
    {"MatMul", QIR_OP_MATMUL},
    {"Max", QIR_OP_MAX}, {"Min", QIR_OP_MIN}, {"Sum", QIR_OP_SUM}, {"Mean", QIR_OP_MEAN},
    {"GlobalAveragePool", QIR_OP_GLOBAL_AVG_POOL}, {"GlobalMaxPool", QIR_OP_GLOBAL_MAX_POOL},
};

static qir_opcode simple_code(const char *op_type) {
  for (size_t i = 0; i < sizeof simple_ops / sizeof *simple_ops; i++)
    if (strcmp(simple_ops[i].onnx, op_type) == 0) return simple_ops[i].code;
  return QIR_OP_COUNT;
}

/* Unary, binary, ternary and n-ary ops with no attributes. */
static bool cv_simple(node_ctx *nc) {
  qir_opcode code = simple_code(nc->node->op_type);
  const qir_opinfo *info = qir_opinfo_get(code);
  int n = nc->n_in;
  if (n < info->min_operands || (info->max_operands >= 0 && n > info->max_operands)) {
    imp_error(IMP, "expects %d input%s, has %d", info->min_operands, info->min_operands == 1 ? "" : "s", n);
    return false;
  }
  if (!node_need_inputs(nc, n)) return false;
  qir_op *op = op_begin(IMP, code, n, nc->in);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_identity(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  return node_set_out(nc, 0, nc->in[0]);
}

static bool cv_mod(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_op *op = op_begin(IMP, QIR_OP_MOD, 2, nc->in);
  set_i(IMP, op, "fmod", attr_int(nc, "fmod", 0));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_bit_shift(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  const char *a = attr_str(nc, "direction", "");
  const char *dir = !strcmp(a, "LEFT") ? "left" : !strcmp(a, "RIGHT") ? "right" : NULL;
  if (!dir) return node_fail(nc, "direction must be LEFT or RIGHT");
  qir_op *op = op_begin(IMP, QIR_OP_BIT_SHIFT, 2, nc->in);
  set_w(IMP, op, "direction", dir);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_activation(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  const char *t = nc->node->op_type;
  qir_value *x = IN(0);
  qir_op *op;
  if (strcmp(t, "LeakyRelu") == 0) {
    op = op_begin(IMP, QIR_OP_LEAKY_RELU, 1, &x);
    set_f(IMP, op, "alpha", attr_float(nc, "alpha", 0.01));
  } else if (strcmp(t, "Elu") == 0) {
    op = op_begin(IMP, QIR_OP_ELU, 1, &x);
    set_f(IMP, op, "alpha", attr_float(nc, "alpha", 1.0));
  } else if (strcmp(t, "Selu") == 0) {
    op = op_begin(IMP, QIR_OP_SELU, 1, &x);
    set_f(IMP, op, "alpha", attr_float(nc, "alpha", 1.67326319217681884765625));
    set_f(IMP, op, "gamma", attr_float(nc, "gamma", 1.05070102214813232421875));
  } else if (strcmp(t, "HardSigmoid") == 0) {
    op = op_begin(IMP, QIR_OP_HARD_SIGMOID, 1, &x);
    set_f(IMP, op, "alpha", attr_float(nc, "alpha", 0.2));
    set_f(IMP, op, "beta", attr_float(nc, "beta", 0.5));
  } else if (strcmp(t, "Gelu") == 0) {
    const char *ap = attr_str(nc, "approximate", "none");
    if (strcmp(ap, "none") != 0 && strcmp(ap, "tanh") != 0) return node_fail(nc, "unsupported approximate value");
    op = op_begin(IMP, QIR_OP_GELU, 1, &x);
    set_w(IMP, op, "approximate", ap);
  } else {
    return false;
  }
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* Activations built from primitive ops. */
static bool cv_composite(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  const char *t = nc->node->op_type;
  qir_value *x = IN(0);
  qir_dtype dt = x->type.dtype;
  qir_value *r = NULL;
  if (strcmp(t, "Softsign") == 0) {
    r = emit2(IMP, QIR_OP_DIV, x, emit2(IMP, QIR_OP_ADD, emit1(IMP, QIR_OP_ABS, x), const_scalar(IMP, dt, 1)));
  } else if (strcmp(t, "ThresholdedRelu") == 0) {
    qir_value *gt = emit2(IMP, QIR_OP_GREATER, x, const_scalar(IMP, dt, attr_float(nc, "alpha", 1.0)));
    r = emit3(IMP, QIR_OP_WHERE, gt, x, const_scalar(IMP, dt, 0));
  } else if (strcmp(t, "Mish") == 0) {
    r = emit2(IMP, QIR_OP_MUL, x, emit1(IMP, QIR_OP_TANH, emit1(IMP, QIR_OP_SOFTPLUS, x)));
  } else if (strcmp(t, "Celu") == 0) {
    double alpha = attr_float(nc, "alpha", 1.0);
    qir_value *e = emit1(IMP, QIR_OP_EXP, emit2(IMP, QIR_OP_DIV, x, const_scalar(IMP, dt, alpha)));
    qir_value *neg = emit2(IMP, QIR_OP_MUL, const_scalar(IMP, dt, alpha), emit2(IMP, QIR_OP_SUB, e, const_scalar(IMP, dt, 1)));
    qir_value *in2[2] = {const_scalar(IMP, dt, 0), neg};
    qir_value *mn = op_end(IMP, op_begin(IMP, QIR_OP_MIN, 2, in2), NULL);
    qir_value *in3[2] = {const_scalar(IMP, dt, 0), x};
    qir_value *mx = op_end(IMP, op_begin(IMP, QIR_OP_MAX, 2, in3), NULL);
    r = emit2(IMP, QIR_OP_ADD, mx, mn);
  } else if (strcmp(t, "IsInf") == 0) {
    qir_value *pos = NULL, *neg = NULL;
    if (attr_int(nc, "detect_positive", 1)) pos = emit2(IMP, QIR_OP_EQUAL, x, const_scalar(IMP, dt, INFINITY));
    if (attr_int(nc, "detect_negative", 1)) neg = emit2(IMP, QIR_OP_EQUAL, x, const_scalar(IMP, dt, -INFINITY));
    if (pos && neg) r = emit2(IMP, QIR_OP_OR, pos, neg);
    else r = pos ? pos : neg ? neg : const_splat(IMP, qir_type_make(QIR_BOOL, x->type.rank, x->type.dims), 0);
  } else if (strcmp(t, "Tan") == 0) {
    r = emit2(IMP, QIR_OP_DIV, emit1(IMP, QIR_OP_SIN, x), emit1(IMP, QIR_OP_COS, x));
  }
  return node_set_out(nc, 0, r);
}

static bool cv_cast(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_dtype to;
  if (strcmp(nc->node->op_type, "CastLike") == 0) {
    if (!node_need_inputs(nc, 2)) return false;
    to = IN(1)->type.dtype;
  } else {
    const Onnx__AttributeProto *a = attr_find(nc, "to");
    if (!a || !a->has_i) return node_fail(nc, "attribute 'to' is missing");
    if (!onnx_dtype_to_qir((int32_t)a->i, &to)) {
      imp_error(IMP, "cast to %s is not supported", onnx_dtype_name((int32_t)a->i));
      return false;
    }
  }
  if (IN(0)->type.dtype == to) return node_set_out(nc, 0, IN(0));
  int64_t saturate = attr_int(nc, "saturate", 1);
  if (saturate != 0 && saturate != 1) return node_fail(nc, "attribute 'saturate' must be 0 or 1");
  const Onnx__AttributeProto *rm = attr_find(nc, "round_mode");
  if (rm && (!rm->s.data || rm->s.len != 2 || memcmp(rm->s.data, "up", 2) != 0)) {
    imp_error(IMP, "round_mode '%.*s' is not supported (only 'up', the default)", rm->s.data ? (int)rm->s.len : 0,
              rm->s.data ? (const char *)rm->s.data : "");
    return false;
  }
  qir_type t = IN(0)->type;
  t.dtype = to;
  qir_op *op = op_begin_typed(IMP, QIR_OP_CAST, 1, nc->in, 1, &t);
  set_w(IMP, op, "to", qir_dtype_name(to));
  /* only the float8 types read it (ONNX); recorded only where it matters */
  if (!saturate && to >= QIR_F8E4M3FN && to <= QIR_F8E8M0) set_i(IMP, op, "saturate", 0);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* BitCast (opset 26): the same bytes as element type `to` (one bitcast op;
 * sizes must agree). */
static bool cv_bitcast(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  const Onnx__AttributeProto *a = attr_find(nc, "to");
  qir_dtype to;
  if (!a || !a->has_i) return node_fail(nc, "attribute 'to' is missing");
  if (!onnx_dtype_to_qir((int32_t)a->i, &to)) {
    imp_error(IMP, "bitcast to %s is not supported", onnx_dtype_name((int32_t)a->i));
    return false;
  }
  qir_dtype from = IN(0)->type.dtype;
  if (qir_dtype_size(to) != qir_dtype_size(from) || qir_dtype_bits(to) != qir_dtype_bits(from) || qir_dtype_bits(to) < 8)
    return node_fail(nc, "input and output element types must have the same size (8 bits or more)");
  if (to == QIR_BOOL && from != QIR_BOOL) return node_fail(nc, "bitcast to bool is supported from bool only");
  if (to == from) return node_set_out(nc, 0, IN(0));
  qir_type t = IN(0)->type;
  t.dtype = to;
  qir_op *op = op_begin_typed(IMP, QIR_OP_BITCAST, 1, nc->in, 1, &t);
  set_w(IMP, op, "to", qir_dtype_name(to));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_clip(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  qir_dtype dt = x->type.dtype;
  qir_value *lo, *hi;
  if (nc->opset < 11) {
    lo = const_scalar(IMP, dt, attr_float(nc, "min", dtype_lowest(dt)));
    hi = const_scalar(IMP, dt, attr_float(nc, "max", dtype_highest(dt)));
  } else {
    lo = IN(1) ? as_scalar(IMP, IN(1)) : const_scalar(IMP, dt, dtype_lowest(dt));
    hi = IN(2) ? as_scalar(IMP, IN(2)) : const_scalar(IMP, dt, dtype_highest(dt));
    if (!lo || !hi) return node_fail(nc, "min and max must have one element");
  }
  return node_set_out(nc, 0, emit3(IMP, QIR_OP_CLIP, x, lo, hi));
}

/* ---------------------------------------------------------------- reductions */

static bool reduce_axes(node_ctx *nc, int axes_from_input_opset, int64_t *axes, int *n_axes, bool *all,
                        bool *noop) {
  qir_value *x = IN(0);
  int r = x->type.rank;
  int n = -1;
  *noop = false;
  if (nc->opset >= axes_from_input_opset) {
    if (IN(1)) {
      if (!need_const_ints(nc, 1, axes, QIR_MAX_RANK, &n)) return false;
    }
  } else {
    n = attr_ints(nc, "axes", axes, QIR_MAX_RANK);
  }
  if (n <= 0) {
    if (n == 0 && attr_int(nc, "noop_with_empty_axes", 0)) {
      *noop = true;
      return true;
    }
    if (n < 0 && nc->opset >= axes_from_input_opset && attr_int(nc, "noop_with_empty_axes", 0)) {
      *noop = true;
      return true;
    }
    *all = true;
    *n_axes = r;
    for (int i = 0; i < r; i++) axes[i] = i;
    return true;
  }
  bool seen[QIR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int64_t a = norm_axis(axes[i], r);
    if (a < 0) {
      imp_error(IMP, "axis %lld is out of range for rank %d", (long long)axes[i], r);
      return false;
    }
    seen[a] = true;
  }
  *n_axes = 0;
  for (int i = 0; i < r; i++)
    if (seen[i]) axes[(*n_axes)++] = i;
  *all = *n_axes == r;
  return true;
}

static qir_value *emit_reduce(importer *imp, qir_opcode code, qir_value *x, int n_axes, const int64_t *axes, bool all,
                              int64_t keepdims) {
  (void)all; /* all axes are listed explicitly: the same meaning, one spelling */
  qir_op *op = op_begin(imp, code, 1, &x);
  set_ints(imp, op, "axes", n_axes, axes);
  set_i(imp, op, "keepdims", keepdims);
  return op_end(imp, op, NULL);
}

static bool cv_reduce(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  const char *t = nc->node->op_type;
  int from_input = strcmp(t, "ReduceSum") == 0 ? 13 : 18;
  int64_t axes[QIR_MAX_RANK];
  int n_axes = 0;
  bool all = false, noop = false;
  if (!reduce_axes(nc, from_input, axes, &n_axes, &all, &noop)) return false;
  qir_value *x = IN(0);
  int64_t keep = attr_int(nc, "keepdims", 1);
  qir_opcode code;
  qir_value *pre = x;
  int post = 0; /* 1: log */
  if (strcmp(t, "ReduceSum") == 0) code = QIR_OP_REDUCE_SUM;
  else if (strcmp(t, "ReduceMean") == 0) code = QIR_OP_REDUCE_MEAN;
  else if (strcmp(t, "ReduceMax") == 0) code = QIR_OP_REDUCE_MAX;
  else if (strcmp(t, "ReduceMin") == 0) code = QIR_OP_REDUCE_MIN;
  else if (strcmp(t, "ReduceProd") == 0) code = QIR_OP_REDUCE_PROD;
  else if (strcmp(t, "ReduceL2") == 0) code = QIR_OP_REDUCE_L2;
  else if (strcmp(t, "ReduceL1") == 0) { code = QIR_OP_REDUCE_SUM; pre = noop ? x : emit1(IMP, QIR_OP_ABS, x); }
  else if (strcmp(t, "ReduceSumSquare") == 0) { code = QIR_OP_REDUCE_SUM; pre = emit2(IMP, QIR_OP_MUL, x, x); }
  else if (strcmp(t, "ReduceLogSum") == 0) { code = QIR_OP_REDUCE_SUM; post = 1; }
  else if (strcmp(t, "ReduceLogSumExp") == 0) { code = QIR_OP_REDUCE_SUM; pre = emit1(IMP, QIR_OP_EXP, x); post = 1; }
  else return false;
  if (noop) return node_set_out(nc, 0, pre);
  if (pre && pre->type.dtype == QIR_BOOL && (code == QIR_OP_REDUCE_MAX || code == QIR_OP_REDUCE_MIN)) {
    /* max/min of booleans are or/and: reduce them as u8 */
    qir_value *r8 = emit_reduce(IMP, code, emit_cast(IMP, pre, QIR_U8), n_axes, axes, all, keep);
    return node_set_out(nc, 0, emit_cast(IMP, r8, QIR_BOOL));
  }
  qir_value *r = emit_reduce(IMP, code, pre, n_axes, axes, all, keep);
  if (r && post) r = emit1(IMP, QIR_OP_LOG, r);
  return node_set_out(nc, 0, r);
}

static bool cv_arg(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int64_t axis = norm_axis(attr_int(nc, "axis", 0), x->type.rank);
  if (axis < 0) return node_fail(nc, "axis out of range");
  qir_op *op = op_begin(IMP, strcmp(nc->node->op_type, "ArgMax") == 0 ? QIR_OP_ARGMAX : QIR_OP_ARGMIN, 1, &x);
  set_i(IMP, op, "axis", axis);
  set_i(IMP, op, "keepdims", attr_int(nc, "keepdims", 1));
  set_i(IMP, op, "select_last_index", attr_int(nc, "select_last_index", 0));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* TopK with a constant k (a runtime k would give a data-dependent shape). */
static bool cv_top_k(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int64_t k = 0;
  int n = 1;
  if (nc->opset < 10) {
    if (!attr_find(nc, "k")) return node_fail(nc, "attribute 'k' is missing");
    k = attr_int(nc, "k", 0);
  } else {
    if (!node_need_inputs(nc, 2)) return false;
    if (!need_const_ints(nc, 1, &k, 1, &n)) return false;
    if (n != 1) return node_fail(nc, "K must have one element");
  }
  int64_t axis = norm_axis(attr_int(nc, "axis", -1), x->type.rank);
  if (axis < 0) return node_fail(nc, "axis out of range");
  if (k < 0 || k > x->type.dims[axis]) return node_fail(nc, "k is negative or larger than the axis");
  qir_op *op = op_begin_n(IMP, QIR_OP_TOP_K, 1, &x, 2);
  set_i(IMP, op, "axis", axis);
  set_i(IMP, op, "k", k);
  set_i(IMP, op, "largest", attr_int(nc, "largest", 1) != 0);
  set_i(IMP, op, "sorted", attr_int(nc, "sorted", 1) != 0);
  qir_value *outs[2];
  if (!op_end(IMP, op, outs)) return false;
  nc->out[0] = outs[0];
  if (nc->n_out > 1) nc->out[1] = outs[1];
  return true;
}

/* ---------------------------------------------------------------- shapes */

/* Reshape of an input with symbolic extents: a 0 copies the input's extent
 * (symbolic or not), a -1 takes what is left of the element count, which
 * must be a product of whole extents of the input times a constant. */
static bool reshape_symbolic(node_ctx *nc, qir_value *x, int n, const int64_t *shape, bool allowzero) {
  qir_module *m = IMP->m;
  const qir_dim *left[QIR_MAX_RANK]; /* the input's symbolic extents not yet placed */
  int n_left = 0;
  int64_t left_static = 1;
  for (int i = 0; i < x->type.rank; i++) {
    if (x->type.sym[i]) left[n_left++] = x->type.sym[i];
    else left_static *= x->type.dims[i];
  }
  qir_type t = qir_type_make(x->type.dtype, n, shape);
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= x->type.rank) return node_fail(nc, "shape has a 0 beyond the input's rank");
      qir_type_set_dim(&t, i, qir_type_dim(m, &x->type, i));
      if (x->type.sym[i]) {
        int k = 0;
        while (k < n_left && left[k] != x->type.sym[i]) k++;
        if (k == n_left) return node_fail(nc, "shape repeats a symbolic extent");
        left[k] = left[--n_left];
      } else known *= x->type.dims[i];
    } else if (shape[i] == -1) {
      if (infer >= 0) return node_fail(nc, "shape has more than one -1");
      infer = i;
    } else if (shape[i] < 0) {
      return node_fail(nc, "shape has a negative dimension");
    } else
      known *= shape[i];
  }
  if (infer < 0 && (n_left || known != left_static))
    return node_fail(nc, "reshape to constant extents of an input with symbolic extents: its element count varies "
                         "(write -1 or 0 for the symbolic part)");
  if (infer >= 0) {
    if (known == 0 || left_static % known)
      return node_fail(nc, "cannot infer the -1 dimension from the input's symbolic extents");
    const qir_dim *e = qir_dim_const(m, left_static / known);
    for (int k = 0; k < n_left; k++) e = qir_dim_binary(m, QIR_DIM_MUL, left[k], e);
    qir_type_set_dim(&t, infer, e);
  }
  return node_set_out(nc, 0, emit_reshape_type(IMP, x, &t));
}

static bool cv_reshape(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int64_t shape[QIR_MAX_RANK + 1];
  int n;
  if (nc->opset < 5) {
    n = attr_ints(nc, "shape", shape, QIR_MAX_RANK + 1);
    if (n < 0) return node_fail(nc, "attribute 'shape' is missing");
  } else {
    if (!node_need_inputs(nc, 2)) return false;
    if (!need_const_ints(nc, 1, shape, QIR_MAX_RANK + 1, &n)) return false;
  }
  if (n > QIR_MAX_RANK) return node_fail(nc, "target rank too large");
  bool allowzero = attr_int(nc, "allowzero", 0) != 0;
  if (qir_type_is_symbolic(&x->type)) return reshape_symbolic(nc, x, n, shape, allowzero);
  int64_t known = 1;
  int infer = -1;
  for (int i = 0; i < n; i++) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= x->type.rank) return node_fail(nc, "shape has a 0 beyond the input's rank");
      shape[i] = x->type.dims[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) return node_fail(nc, "shape has more than one -1");
      infer = i;
    } else if (shape[i] < 0) {
      return node_fail(nc, "shape has a negative dimension");
    } else {
      known *= shape[i];
    }
  }
  int64_t numel = qir_type_numel(&x->type);
  if (infer >= 0) {
    if (known == 0 || numel % known) return node_fail(nc, "cannot infer the -1 dimension");
    shape[infer] = numel / known;
  } else if (known != numel) {
    imp_error(IMP, "cannot reshape %lld elements into %lld", (long long)numel, (long long)known);
    return false;
  }
  return node_set_out(nc, 0, emit_reshape(IMP, x, n, shape));
}

static bool cv_flatten(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  int64_t axis = attr_int(nc, "axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return node_fail(nc, "axis out of range");
  int64_t d[2] = {1, 1};
  for (int i = 0; i < r; i++) d[i < axis ? 0 : 1] *= x->type.dims[i];
  qir_type t = qir_type_make(x->type.dtype, 2, d);
  const qir_dim *e[2] = {qir_dim_const(IMP->m, 1), qir_dim_const(IMP->m, 1)};
  for (int i = 0; i < r; i++) e[i < axis ? 0 : 1] = qir_dim_binary(IMP->m, QIR_DIM_MUL, e[i < axis ? 0 : 1], qir_type_dim(IMP->m, &x->type, i));
  for (int k = 0; k < 2; k++) qir_type_set_dim(&t, k, e[k]);
  return node_set_out(nc, 0, emit_reshape_type(IMP, x, &t));
}

static bool axes_of(node_ctx *nc, int input, int input_opset, int64_t *axes, int *n) {
  *n = -1;
  if (nc->opset >= input_opset) {
    if (IN(input)) return need_const_ints(nc, input, axes, QIR_MAX_RANK, n);
    return true;
  }
  *n = attr_ints(nc, "axes", axes, QIR_MAX_RANK);
  return true;
}

static bool cv_squeeze(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  int64_t axes[QIR_MAX_RANK];
  int n;
  if (!axes_of(nc, 1, 13, axes, &n)) return false;
  bool drop[QIR_MAX_RANK] = {false};
  if (n < 0) {
    for (int i = 0; i < r; i++) drop[i] = x->type.dims[i] == 1;
  } else {
    for (int i = 0; i < n; i++) {
      int64_t a = norm_axis(axes[i], r);
      if (a < 0) return node_fail(nc, "axis out of range");
      if (x->type.dims[a] != 1) {
        imp_error(IMP, "cannot squeeze dimension %lld of size %lld", (long long)a, (long long)x->type.dims[a]);
        return false;
      }
      drop[a] = true;
    }
  }
  int64_t d[QIR_MAX_RANK];
  int k = 0;
  for (int i = 0; i < r; i++)
    if (!drop[i]) d[k++] = x->type.dims[i];
  return node_set_out(nc, 0, emit_reshape(IMP, x, k, d));
}

static bool cv_unsqueeze(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  int64_t axes[QIR_MAX_RANK];
  int n;
  if (!axes_of(nc, 1, 13, axes, &n)) return false;
  if (n < 0) return node_fail(nc, "axes are missing");
  int out_r = r + n;
  if (out_r > QIR_MAX_RANK) return node_fail(nc, "result rank too large");
  bool ins[QIR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int64_t a = norm_axis(axes[i], out_r);
    if (a < 0 || ins[a]) return node_fail(nc, "axis out of range or repeated");
    ins[a] = true;
  }
  int64_t d[QIR_MAX_RANK];
  for (int i = 0, k = 0; i < out_r; i++) d[i] = ins[i] ? 1 : x->type.dims[k++];
  return node_set_out(nc, 0, emit_reshape(IMP, x, out_r, d));
}

static bool cv_transpose(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  int64_t perm[QIR_MAX_RANK];
  int n = attr_ints(nc, "perm", perm, QIR_MAX_RANK);
  if (n < 0) {
    n = r;
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
  }
  if (n != r) return node_fail(nc, "perm does not match the input rank");
  bool seen[QIR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    perm[i] = norm_axis(perm[i], r);
    if (perm[i] < 0 || seen[perm[i]]) return node_fail(nc, "perm is not a permutation");
    seen[perm[i]] = true;
  }
  qir_op *op = op_begin(IMP, QIR_OP_TRANSPOSE, 1, &x);
  set_ints(IMP, op, "perm", n, perm);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_concat(node_ctx *nc) {
  if (nc->n_in < 1 || !node_need_inputs(nc, nc->n_in)) return false;
  int r = IN(0)->type.rank;
  int64_t axis = norm_axis(attr_int(nc, "axis", nc->opset < 4 ? 1 : 0), r);
  if (axis < 0) return node_fail(nc, "axis out of range");
  if (nc->n_in == 1) return node_set_out(nc, 0, IN(0));
  qir_op *op = op_begin(IMP, QIR_OP_CONCAT, nc->n_in, nc->in);
  set_i(IMP, op, "axis", axis);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_split(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  int64_t axis = norm_axis(attr_int(nc, "axis", 0), r);
  if (axis < 0) return node_fail(nc, "axis out of range");
  int n_out = nc->n_out;
  if (n_out < 1 || n_out > 4096) return node_fail(nc, "bad number of outputs");
  int64_t *sizes = calloc((size_t)n_out + 1, sizeof *sizes);
  int n = -1;
  if (nc->opset >= 13) {
    if (IN(1) && !need_const_ints(nc, 1, sizes, n_out, &n)) {
      free(sizes);
      return false;
    }
  } else {
    n = attr_ints(nc, "split", sizes, n_out);
  }
  int64_t dim = x->type.dims[axis];
  if (n < 0) {
    int64_t parts = nc->opset >= 18 && attr_find(nc, "num_outputs") ? attr_int(nc, "num_outputs", n_out) : n_out;
    if (parts != n_out) {
      free(sizes);
      return node_fail(nc, "num_outputs does not match the outputs");
    }
    int64_t each = nc->opset >= 18 ? (dim + parts - 1) / parts : dim / parts;
    if (nc->opset < 18 && dim % parts) {
      free(sizes);
      return node_fail(nc, "the dimension does not split evenly");
    }
    for (int i = 0; i < n_out; i++) {
      int64_t left = dim - each * i;
      sizes[i] = left < each ? (left > 0 ? left : 0) : each;
    }
    n = n_out;
  }
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += sizes[i];
  if (n != n_out || total != dim) {
    free(sizes);
    return node_fail(nc, "split sizes do not add up to the dimension");
  }
  qir_type *types = calloc((size_t)n_out, sizeof *types);
  for (int i = 0; i < n_out; i++) {
    types[i] = x->type;
    types[i].dims[axis] = sizes[i];
  }
  qir_op *op = op_begin_typed(IMP, QIR_OP_SPLIT, 1, &x, n_out, types);
  set_i(IMP, op, "axis", axis);
  qir_value **outs = calloc((size_t)n_out, sizeof *outs);
  bool ok = op_end(IMP, op, outs) != NULL;
  for (int i = 0; ok && i < n_out; i++) nc->out[i] = outs[i];
  free(outs);
  free(types);
  free(sizes);
  return ok;
}

static bool cv_slice(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  int64_t starts[QIR_MAX_RANK], ends[QIR_MAX_RANK], axes[QIR_MAX_RANK], steps[QIR_MAX_RANK];
  int ns, ne, na = -1, nst = -1;
  if (nc->opset < 10) {
    ns = attr_ints(nc, "starts", starts, QIR_MAX_RANK);
    ne = attr_ints(nc, "ends", ends, QIR_MAX_RANK);
    na = attr_ints(nc, "axes", axes, QIR_MAX_RANK);
    if (ns < 0 || ne < 0) return node_fail(nc, "starts and ends are required");
  } else {
    if (!node_need_inputs(nc, 3)) return false;
    if (!need_const_ints(nc, 1, starts, QIR_MAX_RANK, &ns)) return false;
    if (!need_const_ints(nc, 2, ends, QIR_MAX_RANK, &ne)) return false;
    if (IN(3) && !need_const_ints(nc, 3, axes, QIR_MAX_RANK, &na)) return false;
    if (IN(4) && !need_const_ints(nc, 4, steps, QIR_MAX_RANK, &nst)) return false;
  }
  if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns)) return node_fail(nc, "starts, ends, axes and steps differ in length");
  int64_t s[QIR_MAX_RANK], e[QIR_MAX_RANK], st[QIR_MAX_RANK], d[QIR_MAX_RANK];
  for (int i = 0; i < r; i++) {
    s[i] = 0;
    e[i] = x->type.dims[i];
    st[i] = 1;
  }
  for (int i = 0; i < ns; i++) {
    int64_t a = norm_axis(na >= 0 ? axes[i] : i, r);
    if (a < 0) return node_fail(nc, "axis out of range");
    int64_t dim = x->type.dims[a];
    int64_t step = nst >= 0 ? steps[i] : 1;
    if (step == 0) return node_fail(nc, "step is 0");
    int64_t b = starts[i], en = ends[i];
    if (b < 0) b += dim;
    if (en < 0) en += dim;
    if (step > 0) {
      b = b < 0 ? 0 : b > dim ? dim : b;
      en = en < 0 ? 0 : en > dim ? dim : en;
    } else {
      b = b < 0 ? 0 : b > dim - 1 ? dim - 1 : b;
      en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
    }
    s[a] = b;
    e[a] = en;
    st[a] = step;
  }
  for (int i = 0; i < r; i++) {
    int64_t len = st[i] > 0 ? (e[i] - s[i] + st[i] - 1) / st[i] : (s[i] - e[i] + (-st[i]) - 1) / (-st[i]);
    d[i] = len > 0 ? len : 0;
    if (d[i] == 0) e[i] = s[i];
  }
  qir_type t = qir_type_make(x->type.dtype, r, d);
  bool noop = qir_type_equal(&t, &x->type);
  for (int i = 0; i < r; i++)
    if (st[i] != 1) noop = false;
  if (noop) return node_set_out(nc, 0, x);
  qir_op *op = op_begin_typed(IMP, QIR_OP_SLICE, 1, &x, 1, &t);
  set_ints(IMP, op, "starts", r, s);
  set_ints(IMP, op, "ends", r, e);
  set_ints(IMP, op, "steps", r, st);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_pad(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  const char *mode = attr_str(nc, "mode", "constant");
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "wrap"))
    return node_fail(nc, "unsupported pad mode");
  int64_t pads_in[2 * QIR_MAX_RANK], axes[QIR_MAX_RANK], pads[2 * QIR_MAX_RANK] = {0};
  int np, na = -1;
  qir_value *value;
  if (nc->opset < 11) {
    np = attr_ints(nc, nc->opset < 2 ? "paddings" : "pads", pads_in, 2 * QIR_MAX_RANK);
    if (np < 0) return node_fail(nc, "pads are missing");
    value = const_scalar(IMP, x->type.dtype, attr_float(nc, "value", 0));
  } else {
    if (!node_need_inputs(nc, 2)) return false;
    if (!need_const_ints(nc, 1, pads_in, 2 * QIR_MAX_RANK, &np)) return false;
    if (IN(3) && !need_const_ints(nc, 3, axes, QIR_MAX_RANK, &na)) return false;
    value = IN(2) ? as_scalar(IMP, IN(2)) : const_scalar(IMP, x->type.dtype, 0);
    if (!value) return node_fail(nc, "constant_value must have one element");
  }
  int n_ax = na >= 0 ? na : r;
  if (np != 2 * n_ax) return node_fail(nc, "pads has the wrong length");
  for (int i = 0; i < n_ax; i++) {
    int64_t a = norm_axis(na >= 0 ? axes[i] : i, r);
    if (a < 0) return node_fail(nc, "axis out of range");
    pads[a] = pads_in[i];
    pads[r + a] = pads_in[n_ax + i];
  }
  qir_value *in[2] = {x, value};
  qir_op *op = op_begin(IMP, QIR_OP_PAD, 2, in);
  set_ints(IMP, op, "pads", 2 * r, pads);
  set_w(IMP, op, "mode", mode);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_expand(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0);
  int64_t shape[QIR_MAX_RANK];
  int n;
  if (!need_const_ints(nc, 1, shape, QIR_MAX_RANK, &n)) return false;
  int r = x->type.rank, out_r = n > r ? n : r;
  int64_t d[QIR_MAX_RANK];
  for (int i = 0; i < out_r; i++) {
    int64_t a = i - (out_r - r) >= 0 ? x->type.dims[i - (out_r - r)] : 1;
    int64_t b = i - (out_r - n) >= 0 ? shape[i - (out_r - n)] : 1;
    if (a != b && a != 1 && b != 1) return node_fail(nc, "shapes do not broadcast");
    d[i] = a == 1 ? b : a;
  }
  qir_type t = qir_type_make(x->type.dtype, out_r, d);
  if (qir_type_equal(&t, &x->type)) return node_set_out(nc, 0, x);
  return node_set_out(nc, 0, op_end(IMP, op_begin_typed(IMP, QIR_OP_EXPAND, 1, &x, 1, &t), NULL));
}

static bool cv_tile(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0);
  int64_t rep[QIR_MAX_RANK];
  int n;
  if (!need_const_ints(nc, 1, rep, QIR_MAX_RANK, &n)) return false;
  if (n != x->type.rank) return node_fail(nc, "repeats does not match the input rank");
  qir_type t = x->type;
  for (int i = 0; i < n; i++) {
    if (rep[i] < 0) return node_fail(nc, "negative repeat");
    t.dims[i] *= rep[i];
  }
  return node_set_out(nc, 0, op_end(IMP, op_begin_typed(IMP, QIR_OP_TILE, 1, &x, 1, &t), NULL));
}

static bool cv_gather(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  bool elems = strcmp(nc->node->op_type, "GatherElements") == 0;
  int64_t axis = norm_axis(attr_int(nc, "axis", 0), IN(0)->type.rank);
  if (axis < 0) return node_fail(nc, "axis out of range");
  qir_op *op = op_begin(IMP, elems ? QIR_OP_GATHER_ELEMENTS : QIR_OP_GATHER, 2, nc->in);
  set_i(IMP, op, "axis", axis);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_gather_nd(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_op *op = op_begin(IMP, QIR_OP_GATHER_ND, 2, nc->in);
  set_i(IMP, op, "batch_dims", attr_int(nc, "batch_dims", 0));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* ScatterElements, ScatterND and the deprecated Scatter (= ScatterElements). */
static bool cv_scatter(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  bool nd = strcmp(nc->node->op_type, "ScatterND") == 0;
  qir_op *op = op_begin(IMP, nd ? QIR_OP_SCATTER_ND : QIR_OP_SCATTER_ELEMENTS, 3, nc->in);
  if (!nd) {
    int64_t axis = norm_axis(attr_int(nc, "axis", 0), IN(0)->type.rank);
    if (axis < 0) {
      qir_op_unlink(op);
      return node_fail(nc, "axis out of range");
    }
    set_i(IMP, op, "axis", axis);
  }
  set_w(IMP, op, "reduction", attr_str(nc, "reduction", "none"));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_shape(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  int64_t start = attr_int(nc, "start", 0), end = attr_int(nc, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = start < 0 ? 0 : start > r ? r : start;
  end = end < 0 ? 0 : end > r ? r : end;
  int n = end > start ? (int)(end - start) : 0;
  return node_set_out(nc, 0, const_i64s(IMP, n, x->type.dims + start));
}

static bool cv_size(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  int64_t n = qir_type_numel(&IN(0)->type);
  return node_set_out(nc, 0, const_data(IMP, qir_type_make(QIR_I64, 0, NULL), &n));
}

static bool cv_constant(node_ctx *nc) {
  const Onnx__AttributeProto *a;
  if ((a = attr_find(nc, "value")) && a->t) {
    qir_op *c = tensor_to_const(IMP, a->t, "the value attribute");
    return c && node_set_out(nc, 0, add_const_op(IMP, c));
  }
  if ((a = attr_find(nc, "value_float"))) return node_set_out(nc, 0, const_scalar(IMP, QIR_F32, a->f));
  if ((a = attr_find(nc, "value_int"))) {
    int64_t v = a->i;
    return node_set_out(nc, 0, const_data(IMP, qir_type_make(QIR_I64, 0, NULL), &v));
  }
  if ((a = attr_find(nc, "value_ints"))) return node_set_out(nc, 0, const_i64s(IMP, (int)a->n_ints, a->ints));
  if ((a = attr_find(nc, "value_floats"))) {
    int64_t d = (int64_t)a->n_floats;
    return node_set_out(nc, 0, const_data(IMP, qir_type_make(QIR_F32, 1, &d), a->floats));
  }
  if (attr_find(nc, "value_string") || attr_find(nc, "value_strings")) return node_fail(nc, "string constants are not supported");
  if (attr_find(nc, "sparse_value")) return node_fail(nc, "sparse constants are not supported");
  return node_fail(nc, "constant has no value");
}

static bool cv_constant_of_shape(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  int64_t shape[QIR_MAX_RANK];
  int n;
  if (!need_const_ints(nc, 0, shape, QIR_MAX_RANK, &n)) return false;
  int64_t numel = 1;
  for (int i = 0; i < n; i++) {
    if (shape[i] < 0 || shape[i] > MAX_NUMEL || (shape[i] && numel > MAX_NUMEL / shape[i]))
      return node_fail(nc, "invalid or absurd shape");
    numel *= shape[i];
  }
  qir_dtype dt = QIR_F32;
  double v = 0;
  const Onnx__AttributeProto *a = attr_find(nc, "value");
  if (a && a->t) {
    qir_op *c = tensor_to_const(IMP, a->t, "the value attribute");
    if (!c) return false;
    if (qir_type_numel(&c->results[0]->type) != 1) return node_fail(nc, "value must have one element");
    dt = c->results[0]->type.dtype;
    v = qir_load_elem(dt, c->cst->data, 0);
  }
  return node_set_out(nc, 0, const_splat(IMP, qir_type_make(dt, n, shape), v));
}

static bool cv_range(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  double v[3];
  for (int i = 0; i < 3; i++) {
    int n;
    if (!need_const_floats(nc, i, &v[i], 1, &n)) return false;
    if (n != 1) return node_fail(nc, "start, limit and delta must be scalars");
  }
  if (v[2] == 0) return node_fail(nc, "delta is 0");
  double cnt = ceil((v[1] - v[0]) / v[2]);
  if (qir_dtype_is_float(IN(0)->type.dtype) == false) {
    int64_t s = (int64_t)v[0], l = (int64_t)v[1], d = (int64_t)v[2];
    cnt = (double)((l - s) / d + (((l - s) % d) != 0 && ((l - s) > 0) == (d > 0) ? 1 : 0));
  }
  if (!(cnt > 0)) cnt = 0;
  if (cnt > (double)MAX_NUMEL) return node_fail(nc, "absurd range length");
  int64_t n = (int64_t)cnt;
  qir_type t = qir_type_make(IN(0)->type.dtype, 1, &n);
  qir_value *in[3] = {as_scalar(IMP, IN(0)), as_scalar(IMP, IN(1)), as_scalar(IMP, IN(2))};
  return node_set_out(nc, 0, op_end(IMP, op_begin_typed(IMP, QIR_OP_RANGE, 3, in, 1, &t), NULL));
}

static bool cv_depth_space(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  bool d2s = strcmp(nc->node->op_type, "DepthToSpace") == 0;
  qir_op *op = op_begin(IMP, d2s ? QIR_OP_DEPTH_TO_SPACE : QIR_OP_SPACE_TO_DEPTH, 1, nc->in);
  set_i(IMP, op, "blocksize", attr_int(nc, "blocksize", 1));
  if (d2s) set_w(IMP, op, "mode", attr_str(nc, "mode", "DCR"));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_trilu(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  int64_t k = 0;
  int n;
  if (IN(1) && !need_const_ints(nc, 1, &k, 1, &n)) return false;
  qir_op *op = op_begin(IMP, QIR_OP_TRILU, 1, nc->in);
  set_i(IMP, op, "upper", attr_int(nc, "upper", 1));
  set_i(IMP, op, "k", k);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_cumsum(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  int64_t axis;
  int n;
  if (!need_const_ints(nc, 1, &axis, 1, &n)) return false;
  axis = norm_axis(axis, IN(0)->type.rank);
  if (axis < 0) return node_fail(nc, "axis out of range");
  qir_op *op = op_begin(IMP, strcmp(nc->node->op_type, "CumProd") ? QIR_OP_CUMSUM : QIR_OP_CUMPROD, 1, nc->in);
  set_i(IMP, op, "axis", axis);
  set_i(IMP, op, "exclusive", attr_int(nc, "exclusive", 0));
  set_i(IMP, op, "reverse", attr_int(nc, "reverse", 0));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_one_hot(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  double depth;
  int n;
  if (!need_const_floats(nc, 1, &depth, 1, &n)) return false;
  qir_value *ind = IN(0), *vals = IN(2);
  int r = ind->type.rank;
  int64_t axis = norm_axis(attr_int(nc, "axis", -1), r + 1);
  if (axis < 0 || depth < 1 || depth > (double)MAX_NUMEL) return node_fail(nc, "bad axis or depth");
  int64_t d[QIR_MAX_RANK];
  if (r + 1 > QIR_MAX_RANK) return node_fail(nc, "rank too large");
  for (int i = 0, k = 0; i <= r; i++) d[i] = i == axis ? (int64_t)depth : ind->type.dims[k++];
  qir_type t = qir_type_make(vals->type.dtype, r + 1, d);
  qir_value *in[2] = {ind, vals};
  qir_op *op = op_begin_typed(IMP, QIR_OP_ONE_HOT, 2, in, 1, &t);
  set_i(IMP, op, "axis", axis);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* ---------------------------------------------------------------- linear algebra */

static bool cv_gemm(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *a = IN(0), *b = IN(1), *c = IN(2);
  if (a->type.rank != 2 || b->type.rank != 2) return node_fail(nc, "A and B must be matrices");
  int64_t ta = attr_int(nc, "transA", 0), tb = attr_int(nc, "transB", 0);
  int64_t d[2] = {a->type.dims[ta ? 1 : 0], b->type.dims[tb ? 0 : 1]};
  /* a constant cannot have a symbolic extent: the zero C broadcasts along it */
  if (a->type.sym[ta ? 1 : 0]) d[0] = 1;
  if (b->type.sym[tb ? 0 : 1]) d[1] = 1;
  if (!c) c = const_splat(IMP, qir_type_make(a->type.dtype, 2, d), 0);
  qir_value *in[3] = {a, b, c};
  qir_op *op = op_begin(IMP, QIR_OP_GEMM, 3, in);
  set_f(IMP, op, "alpha", attr_float(nc, "alpha", 1.0));
  set_f(IMP, op, "beta", attr_float(nc, "beta", 1.0));
  set_i(IMP, op, "transA", ta);
  set_i(IMP, op, "transB", tb);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_einsum(node_ctx *nc) {
  if (nc->n_in < 1 || !node_need_inputs(nc, nc->n_in)) return false;
  const char *eq = attr_str(nc, "equation", NULL);
  if (!eq) return node_fail(nc, "equation is missing");
  char *clean = malloc(strlen(eq) + 1);
  size_t k = 0;
  for (const char *p = eq; *p; p++)
    if (*p != ' ') clean[k++] = *p;
  clean[k] = 0;
  qir_op *op = op_begin(IMP, QIR_OP_EINSUM, nc->n_in, nc->in);
  set_s(IMP, op, "equation", clean);
  free(clean);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* Spatial attributes of conv / pool: kernel, strides, dilations, pads with
 * auto_pad resolved. */
typedef struct {
  int n;
  int64_t kernel[QIR_MAX_RANK], strides[QIR_MAX_RANK], dilations[QIR_MAX_RANK], pads[2 * QIR_MAX_RANK];
} window;

static bool window_attrs(node_ctx *nc, qir_value *x, const int64_t *kernel_from_w, window *w, bool transpose) {
  int n = x->type.rank - 2;
  if (n < 1) return node_fail(nc, "input must have a batch, a channel and spatial dimensions");
  w->n = n;
  int k = attr_ints(nc, "kernel_shape", w->kernel, QIR_MAX_RANK);
  if (k < 0) {
    if (!kernel_from_w) return node_fail(nc, "kernel_shape is missing");
    for (int i = 0; i < n; i++) w->kernel[i] = kernel_from_w[i];
  } else if (k != n) {
    return node_fail(nc, "kernel_shape has the wrong length");
  }
  if (attr_ints(nc, "strides", w->strides, QIR_MAX_RANK) < 0)
    for (int i = 0; i < n; i++) w->strides[i] = 1;
  if (attr_ints(nc, "dilations", w->dilations, QIR_MAX_RANK) < 0)
    for (int i = 0; i < n; i++) w->dilations[i] = 1;
  int np = attr_ints(nc, "pads", w->pads, 2 * QIR_MAX_RANK);
  if (np < 0)
    for (int i = 0; i < 2 * n; i++) w->pads[i] = 0;
  else if (np != 2 * n)
    return node_fail(nc, "pads has the wrong length");
  for (int i = 0; i < n; i++)
    if (w->strides[i] < 1 || w->dilations[i] < 1 || w->kernel[i] < 1) return node_fail(nc, "invalid kernel, stride or dilation");
    else if (w->strides[i] > INT32_MAX || w->dilations[i] > INT32_MAX || w->kernel[i] > INT32_MAX)
      return node_fail(nc, "kernel, stride or dilation out of range"); /* the auto_pad arithmetic must not overflow */
  const char *ap = attr_str(nc, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET") == 0) return true;
  if (strcmp(ap, "VALID") == 0) {
    for (int i = 0; i < 2 * n; i++) w->pads[i] = 0;
    return true;
  }
  bool upper = strcmp(ap, "SAME_UPPER") == 0;
  if (!upper && strcmp(ap, "SAME_LOWER") != 0) return node_fail(nc, "unsupported auto_pad");
  if (transpose) return true; /* ConvTranspose resolves its own */
  for (int i = 0; i < n; i++) {
    int64_t in = x->type.dims[2 + i], s = w->strides[i];
    int64_t out = (in + s - 1) / s;
    int64_t total = (out - 1) * s + (w->kernel[i] - 1) * w->dilations[i] + 1 - in;
    if (total < 0) total = 0;
    w->pads[i] = upper ? total / 2 : total - total / 2;
    w->pads[n + i] = total - w->pads[i];
  }
  return true;
}

static void set_window(importer *imp, qir_op *op, const window *w, bool kernel) {
  if (kernel) set_ints(imp, op, "kernel_shape", w->n, w->kernel);
  set_ints(imp, op, "strides", w->n, w->strides);
  set_ints(imp, op, "pads", 2 * w->n, w->pads);
  set_ints(imp, op, "dilations", w->n, w->dilations);
}

static bool cv_conv(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0), *wt = IN(1), *b = IN(2);
  if (wt->type.rank != x->type.rank) return node_fail(nc, "weights rank differs from input rank");
  window w;
  if (!window_attrs(nc, x, wt->type.dims + 2, &w, false)) return false;
  int64_t m = wt->type.dims[0];
  if (!b) b = const_splat(IMP, qir_type_make(x->type.dtype, 1, &m), 0);
  qir_value *in[3] = {x, wt, b};
  qir_op *op = op_begin(IMP, QIR_OP_CONV, 3, in);
  set_window(IMP, op, &w, false);
  set_i(IMP, op, "group", attr_int(nc, "group", 1));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* ConvInteger: (x - x_zero_point) conv (w - w_zero_point) in i32; the weight
 * zero point may be per output channel. */
static bool cv_conv_integer(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = emit_cast(IMP, IN(0), QIR_I32), *wt = emit_cast(IMP, IN(1), QIR_I32);
  if (!x || !wt) return false;
  if (wt->type.rank != x->type.rank) return node_fail(nc, "weights rank differs from input rank");
  if (IN(2)) {
    if (qir_type_numel(&IN(2)->type) != 1) return node_fail(nc, "x_zero_point must be a scalar");
    x = emit2(IMP, QIR_OP_SUB, x, emit_reshape(IMP, emit_cast(IMP, IN(2), QIR_I32), 0, NULL));
  }
  if (IN(3)) {
    int64_t m = wt->type.dims[0], n = qir_type_numel(&IN(3)->type), d[QIR_MAX_RANK];
    if (n != 1 && n != m) return node_fail(nc, "w_zero_point must be a scalar or have one entry per output channel");
    for (int i = 0; i < wt->type.rank; i++) d[i] = i == 0 ? n : 1;
    wt = emit2(IMP, QIR_OP_SUB, wt, emit_reshape(IMP, emit_cast(IMP, IN(3), QIR_I32), wt->type.rank, d));
  }
  window w;
  if (!x || !wt || !window_attrs(nc, x, wt->type.dims + 2, &w, false)) return false;
  int64_t m = wt->type.dims[0];
  qir_value *in[3] = {x, wt, const_splat(IMP, qir_type_make(QIR_I32, 1, &m), 0)};
  qir_op *op = op_begin(IMP, QIR_OP_CONV, 3, in);
  set_window(IMP, op, &w, false);
  set_i(IMP, op, "group", attr_int(nc, "group", 1));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_conv_transpose(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0), *wt = IN(1), *b = IN(2);
  if (wt->type.rank != x->type.rank) return node_fail(nc, "weights rank differs from input rank");
  window w;
  if (!window_attrs(nc, x, wt->type.dims + 2, &w, true)) return false;
  int n = w.n;
  int64_t group = attr_int(nc, "group", 1);
  int64_t outpad[QIR_MAX_RANK] = {0}, oshape[QIR_MAX_RANK];
  attr_ints(nc, "output_padding", outpad, QIR_MAX_RANK);
  int nos = attr_ints(nc, "output_shape", oshape, QIR_MAX_RANK);
  const char *ap = attr_str(nc, "auto_pad", "NOTSET");
  bool same = strncmp(ap, "SAME", 4) == 0;
  if (nos > 0 || same) {
    if (nos > 0 && nos != n) {
      if (nos == n + 2) memmove(oshape, oshape + 2, sizeof *oshape * (size_t)n);
      else return node_fail(nc, "output_shape has the wrong length");
    }
    for (int i = 0; i < n; i++) {
      int64_t in = x->type.dims[2 + i];
      int64_t want = nos > 0 ? oshape[i] : in * w.strides[i];
      int64_t total = w.strides[i] * (in - 1) + outpad[i] + ((w.kernel[i] - 1) * w.dilations[i] + 1) - want;
      /* floor division, as the reference */
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (strcmp(ap, "SAME_UPPER") == 0) {
        w.pads[i] = half;
        w.pads[n + i] = total - half;
      } else {
        w.pads[i] = total - half;
        w.pads[n + i] = half;
      }
      /* a negative end pad grows the output: the same as output padding */
      if (w.pads[n + i] < 0) {
        outpad[i] += -w.pads[n + i];
        w.pads[n + i] = 0;
      }
      if (w.pads[i] < 0) return node_fail(nc, "output_shape needs a negative leading pad: not supported");
    }
  }
  int64_t m = wt->type.dims[1] * group;
  if (!b) b = const_splat(IMP, qir_type_make(x->type.dtype, 1, &m), 0);
  qir_value *in[3] = {x, wt, b};
  qir_op *op = op_begin(IMP, QIR_OP_CONV_TRANSPOSE, 3, in);
  set_window(IMP, op, &w, false);
  set_i(IMP, op, "group", group);
  set_ints(IMP, op, "output_padding", n, outpad);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_pool(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  bool max = strcmp(nc->node->op_type, "MaxPool") == 0;
  window w;
  if (!window_attrs(nc, x, NULL, &w, false)) return false;
  int n_res = max && nc->n_out > 1 && nc->node->output[1][0] ? 2 : 1;
  qir_op *op = op_begin_n(IMP, max ? QIR_OP_MAX_POOL : QIR_OP_AVG_POOL, 1, &x, n_res);
  set_window(IMP, op, &w, true);
  set_i(IMP, op, "ceil_mode", attr_int(nc, "ceil_mode", 0));
  if (max) set_i(IMP, op, "storage_order", attr_int(nc, "storage_order", 0));
  else set_i(IMP, op, "count_include_pad", attr_int(nc, "count_include_pad", 0));
  qir_value *outs[2];
  if (!op_end(IMP, op, outs)) return false;
  nc->out[0] = outs[0];
  if (n_res > 1) nc->out[1] = outs[1];
  return true;
}

/* LpPool: (sum over the window of |x|^p)^(1/p), the sum being an average
 * pool that counts the padding, times the window size. */
static bool cv_lp_pool(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  if (!qir_dtype_is_float(x->type.dtype)) return node_fail(nc, "input must be a float tensor");
  window w;
  if (!window_attrs(nc, x, NULL, &w, false)) return false;
  double p = (double)attr_int(nc, "p", 2);
  if (p <= 0) return node_fail(nc, "p must be positive");
  qir_dtype dt = x->type.dtype;
  qir_value *ax = emit1(IMP, QIR_OP_ABS, x);
  qir_value *xp = p == 1 ? ax : p == 2 ? emit2(IMP, QIR_OP_MUL, x, x) : emit2(IMP, QIR_OP_POW, ax, const_scalar(IMP, dt, p));
  qir_op *op = op_begin(IMP, QIR_OP_AVG_POOL, 1, &xp);
  set_window(IMP, op, &w, true);
  set_i(IMP, op, "ceil_mode", attr_int(nc, "ceil_mode", 0));
  set_i(IMP, op, "count_include_pad", 1);
  int64_t taps = 1;
  for (int i = 0; i < w.n; i++) taps *= w.kernel[i];
  qir_value *sum = emit2(IMP, QIR_OP_MUL, op_end(IMP, op, NULL), const_scalar(IMP, dt, (double)taps));
  if (p == 1) return node_set_out(nc, 0, sum);
  if (p == 2) return node_set_out(nc, 0, emit1(IMP, QIR_OP_SQRT, sum));
  return node_set_out(nc, 0, emit2(IMP, QIR_OP_POW, sum, const_scalar(IMP, dt, 1 / p)));
}

static bool cv_lp_norm(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  int64_t axis = norm_axis(attr_int(nc, "axis", -1), IN(0)->type.rank);
  if (axis < 0) return node_fail(nc, "axis out of range");
  qir_op *op = op_begin(IMP, QIR_OP_LP_NORMALIZATION, 1, nc->in);
  set_i(IMP, op, "axis", axis);
  set_i(IMP, op, "p", attr_int(nc, "p", 2));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* ---------------------------------------------------------------- normalisation */

static bool cv_batch_norm(node_ctx *nc) {
  if (!node_need_inputs(nc, 5)) return false;
  double eps = attr_float(nc, "epsilon", 1e-5);
  bool training = attr_int(nc, "training_mode", 0) != 0;
  if (nc->opset < 14 && nc->n_out > 1) training = nc->opset >= 7 ? true : !attr_int(nc, "is_test", 0);
  if (nc->opset < 9 && attr_int(nc, "spatial", 1) == 0) return node_fail(nc, "spatial=0 is not supported");
  qir_value *x = IN(0);
  if (!training) {
    qir_op *op = op_begin(IMP, QIR_OP_BATCH_NORM, 5, nc->in);
    set_f(IMP, op, "epsilon", eps);
    return node_set_out(nc, 0, op_end(IMP, op, NULL));
  }
  /* Training mode: normalise with the batch's statistics and update the
   * running ones, as the ONNX reference. */
  int r = x->type.rank;
  int64_t axes[QIR_MAX_RANK];
  int na = 0;
  for (int i = 0; i < r; i++)
    if (i != 1) axes[na++] = i;
  double mom = attr_float(nc, "momentum", 0.9);
  qir_value *mean = emit_reduce(IMP, QIR_OP_REDUCE_MEAN, x, na, axes, false, 0);
  qir_value *mean_k = emit_reduce(IMP, QIR_OP_REDUCE_MEAN, x, na, axes, false, 1);
  qir_value *diff = emit2(IMP, QIR_OP_SUB, x, mean_k);
  qir_value *var = emit_reduce(IMP, QIR_OP_REDUCE_MEAN, emit2(IMP, QIR_OP_MUL, diff, diff), na, axes, false, 0);
  if (!mean || !var) return false;
  qir_value *in[5] = {x, IN(1), IN(2), mean, var};
  qir_op *op = op_begin(IMP, QIR_OP_BATCH_NORM, 5, in);
  set_f(IMP, op, "epsilon", eps);
  if (!node_set_out(nc, 0, op_end(IMP, op, NULL))) return false;
  qir_dtype dt = x->type.dtype;
  qir_value *m1 = const_scalar(IMP, dt, mom), *m2 = const_scalar(IMP, dt, 1 - mom);
  if (nc->n_out > 1)
    nc->out[1] = emit2(IMP, QIR_OP_ADD, emit2(IMP, QIR_OP_MUL, IN(3), m1), emit2(IMP, QIR_OP_MUL, mean, m2));
  if (nc->n_out > 2)
    nc->out[2] = emit2(IMP, QIR_OP_ADD, emit2(IMP, QIR_OP_MUL, IN(4), m1), emit2(IMP, QIR_OP_MUL, var, m2));
  return true;
}

static bool cv_instance_norm(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  qir_op *op = op_begin(IMP, QIR_OP_INSTANCE_NORM, 3, nc->in);
  set_f(IMP, op, "epsilon", attr_float(nc, "epsilon", 1e-5));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_layer_norm(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0), *scale = IN(1), *bias = IN(2);
  int64_t axis = norm_axis(attr_int(nc, "axis", -1), x->type.rank);
  if (axis < 0) return node_fail(nc, "axis out of range");
  if (!bias) bias = const_splat(IMP, scale->type, 0);
  int n_res = 1;
  for (int k = 1; k < nc->n_out && k < 3; k++)
    if (nc->node->output[k][0]) n_res = k + 1;
  qir_value *in[3] = {x, scale, bias};
  qir_op *op = op_begin_n(IMP, QIR_OP_LAYER_NORM, 3, in, n_res);
  set_i(IMP, op, "axis", axis);
  set_f(IMP, op, "epsilon", attr_float(nc, "epsilon", 1e-5));
  qir_value *outs[3];
  if (!op_end(IMP, op, outs)) return false;
  for (int k = 0; k < n_res; k++) nc->out[k] = outs[k];
  return true;
}

static bool cv_lrn(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_op *op = op_begin(IMP, QIR_OP_LRN, 1, nc->in);
  if (!attr_find(nc, "size")) return node_fail(nc, "size is missing");
  set_i(IMP, op, "size", attr_int(nc, "size", 1));
  set_f(IMP, op, "alpha", attr_float(nc, "alpha", 1e-4));
  set_f(IMP, op, "beta", attr_float(nc, "beta", 0.75));
  set_f(IMP, op, "bias", attr_float(nc, "bias", 1.0));
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

static bool cv_softmax(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  bool log = strcmp(nc->node->op_type, "LogSoftmax") == 0;
  qir_opcode code = log ? QIR_OP_LOG_SOFTMAX : QIR_OP_SOFTMAX;
  if (nc->opset >= 13) {
    int64_t axis = norm_axis(attr_int(nc, "axis", -1), r);
    if (axis < 0) return node_fail(nc, "axis out of range");
    qir_op *op = op_begin(IMP, code, 1, &x);
    set_i(IMP, op, "axis", axis);
    return node_set_out(nc, 0, op_end(IMP, op, NULL));
  }
  /* Before opset 13 the input is coerced to 2-D at the axis. */
  int64_t axis = attr_int(nc, "axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return node_fail(nc, "axis out of range");
  int64_t d[2] = {1, 1};
  for (int i = 0; i < r; i++) d[i < axis ? 0 : 1] *= x->type.dims[i];
  qir_value *x2 = emit_reshape(IMP, x, 2, d);
  if (!x2) return false;
  qir_op *op = op_begin(IMP, code, 1, &x2);
  set_i(IMP, op, "axis", 1);
  qir_value *y = op_end(IMP, op, NULL);
  return node_set_out(nc, 0, y ? emit_reshape(IMP, y, r, x->type.dims) : NULL);
}

static bool cv_dropout(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  bool training = false;
  double ratio = 0.5;
  if (nc->opset >= 12) {
    if (IN(2)) {
      int n;
      double t;
      if (!need_const_floats(nc, 2, &t, 1, &n)) return false;
      training = t != 0;
    }
    if (IN(1) && training) {
      int n;
      if (!need_const_floats(nc, 1, &ratio, 1, &n)) return false;
    }
  } else {
    ratio = attr_float(nc, "ratio", 0.5);
    if (nc->opset < 7 && !attr_int(nc, "is_test", 0)) training = true;
  }
  if (training && ratio != 0) return node_fail(nc, "training-mode Dropout (random mask) is not supported");
  nc->out[0] = x;
  if (nc->n_out > 1 && nc->node->output[1][0]) nc->out[1] = const_splat(IMP, qir_type_make(QIR_BOOL, x->type.rank, x->type.dims), 1);
  return true;
}

/* ---------------------------------------------------------------- resize */

static bool cv_resize(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  bool upsample = strcmp(nc->node->op_type, "Upsample") == 0;
  double scales[QIR_MAX_RANK];
  int64_t sizes[QIR_MAX_RANK];
  int n_sc = -1, n_sz = -1;
  const char *mode = attr_str(nc, "mode", "nearest");
  const char *ctm = "half_pixel", *nearest_mode = "round_prefer_floor";
  if (upsample && nc->opset < 9) {
    n_sc = attr_floats(nc, "scales", scales, QIR_MAX_RANK);
    if (n_sc < 0) return node_fail(nc, "scales are missing");
  } else if (upsample || nc->opset < 11) {
    if (!node_need_inputs(nc, 2) || !need_const_floats(nc, 1, scales, QIR_MAX_RANK, &n_sc)) return false;
  } else {
    if (IN(2) && qir_type_numel(&IN(2)->type) > 0 && !need_const_floats(nc, 2, scales, QIR_MAX_RANK, &n_sc)) return false;
    if (IN(3) && qir_type_numel(&IN(3)->type) > 0 && !need_const_ints(nc, 3, sizes, QIR_MAX_RANK, &n_sz)) return false;
    ctm = attr_str(nc, "coordinate_transformation_mode", "half_pixel");
    nearest_mode = attr_str(nc, "nearest_mode", "round_prefer_floor");
  }
  if (upsample || nc->opset < 11) {
    ctm = "asymmetric";
    nearest_mode = "floor";
  }
  if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic") && strcmp(mode, "bilinear"))
    return node_fail(nc, "unsupported mode");
  if (strcmp(mode, "bilinear") == 0) mode = "linear";
  bool crop = strcmp(ctm, "tf_crop_and_resize") == 0;
  int64_t axes[QIR_MAX_RANK];
  int na = attr_ints(nc, "axes", axes, QIR_MAX_RANK);
  const char *policy = attr_str(nc, "keep_aspect_ratio_policy", "stretch");
  if (strcmp(policy, "stretch") && strcmp(policy, "not_larger") && strcmp(policy, "not_smaller"))
    return node_fail(nc, "keep_aspect_ratio_policy must be stretch, not_larger or not_smaller");
  int n_ax = na >= 0 ? na : r;
  /* roi: [starts.., ends..] over the axes (tf_crop_and_resize only) */
  double roi_in[2 * QIR_MAX_RANK], roi[2 * QIR_MAX_RANK];
  int n_roi = -1;
  if (crop) {
    if (!IN(1) || qir_type_numel(&IN(1)->type) == 0) return node_fail(nc, "tf_crop_and_resize needs roi");
    if (!need_const_floats(nc, 1, roi_in, 2 * QIR_MAX_RANK, &n_roi)) return false;
    if (n_roi != 2 * n_ax) return node_fail(nc, "roi needs a start and an end per axis");
  }
  for (int i = 0; i < r; i++) roi[i] = 0, roi[r + i] = 1;
  double full_sc[QIR_MAX_RANK];
  int64_t d[QIR_MAX_RANK];
  for (int i = 0; i < r; i++) {
    full_sc[i] = 1;
    d[i] = x->type.dims[i];
  }
  if (n_sz > 0) {
    if (n_sz != n_ax) return node_fail(nc, "sizes has the wrong length");
  } else if (n_sc > 0) {
    if (n_sc != n_ax) return node_fail(nc, "scales has the wrong length");
  } else {
    return node_fail(nc, "neither scales nor sizes is given");
  }
  /* keep_aspect_ratio_policy: one scale for every axis, the smallest
   * (not_larger) or largest (not_smaller) of the sizes' ratios */
  double keep = -1;
  if (n_sz > 0 && strcmp(policy, "stretch")) {
    for (int i = 0; i < n_ax; i++) {
      int64_t a = norm_axis(na >= 0 ? axes[i] : i, r);
      if (a < 0 || x->type.dims[a] == 0) return node_fail(nc, "axis out of range or empty");
      double s = (double)sizes[i] / (double)x->type.dims[a];
      if (keep < 0 || (!strcmp(policy, "not_larger") ? s < keep : s > keep)) keep = s;
    }
  }
  for (int i = 0; i < n_ax; i++) {
    int64_t a = norm_axis(na >= 0 ? axes[i] : i, r);
    if (a < 0) return node_fail(nc, "axis out of range");
    if (crop) roi[a] = roi_in[i], roi[r + a] = roi_in[n_ax + i];
    if (keep >= 0) {
      full_sc[a] = keep;
      d[a] = (int64_t)floor(keep * (double)x->type.dims[a] + 0.5);
    } else if (n_sz > 0) {
      if (sizes[i] < 0) return node_fail(nc, "negative size");
      d[a] = sizes[i];
      full_sc[a] = x->type.dims[a] ? (double)sizes[i] / (double)x->type.dims[a] : 1;
    } else {
      if (!(scales[i] > 0)) return node_fail(nc, "scales must be positive");
      full_sc[a] = scales[i];
      d[a] = (int64_t)floor((double)x->type.dims[a] * scales[i]);
    }
  }
  qir_type t = qir_type_make(x->type.dtype, r, d);
  qir_op *op = op_begin_typed(IMP, QIR_OP_RESIZE, 1, &x, 1, &t);
  set_w(IMP, op, "mode", mode);
  set_w(IMP, op, "coordinate_transformation_mode", ctm);
  set_w(IMP, op, "nearest_mode", nearest_mode);
  set_f(IMP, op, "cubic_coeff_a", attr_float(nc, "cubic_coeff_a", -0.75));
  set_i(IMP, op, "exclude_outside", attr_int(nc, "exclude_outside", 0));
  set_f(IMP, op, "extrapolation_value", attr_float(nc, "extrapolation_value", 0));
  set_floats(IMP, op, "scales", r, full_sc);
  if (crop) set_floats(IMP, op, "roi", 2 * r, roi);
  if (attr_int(nc, "antialias", 0) && strcmp(mode, "nearest")) set_i(IMP, op, "antialias", 1);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* GridSample: opset 16's bilinear / bicubic are opset 20's linear / cubic. */
static bool cv_grid_sample(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  const char *mode = attr_str(nc, "mode", nc->opset >= 20 ? "linear" : "bilinear");
  if (!strcmp(mode, "bilinear")) mode = "linear";
  else if (!strcmp(mode, "bicubic")) mode = "cubic";
  if (strcmp(mode, "linear") && strcmp(mode, "nearest") && strcmp(mode, "cubic")) return node_fail(nc, "unsupported mode");
  qir_op *op = op_begin(IMP, QIR_OP_GRID_SAMPLE, 2, nc->in);
  set_w(IMP, op, "mode", mode);
  const char *pad = attr_str(nc, "padding_mode", "zeros");
  if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection")) {
    qir_op_unlink(op);
    return node_fail(nc, "unsupported padding_mode");
  }
  set_w(IMP, op, "padding_mode", pad);
  set_i(IMP, op, "align_corners", attr_int(nc, "align_corners", 0) != 0);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* ---------------------------------------------------------------- table */

/* attrs NULL: any attribute */
static const converter_entry converters[] = {
    {"Identity", cv_identity, ""},
    {"Neg", cv_simple, "consumed_inputs"}, {"Abs", cv_simple, "consumed_inputs"}, {"Exp", cv_simple, "consumed_inputs"},
    {"Log", cv_simple, "consumed_inputs"}, {"Sqrt", cv_simple, "consumed_inputs"},
    {"Reciprocal", cv_simple, "consumed_inputs"}, {"Sigmoid", cv_simple, "consumed_inputs"},
    {"Tanh", cv_simple, "consumed_inputs"}, {"Relu", cv_simple, "consumed_inputs"}, {"Erf", cv_simple, ""},
    {"Ceil", cv_simple, "consumed_inputs"}, {"Floor", cv_simple, "consumed_inputs"}, {"Round", cv_simple, ""},
    {"Sin", cv_simple, ""}, {"Cos", cv_simple, ""}, {"Asin", cv_simple, ""}, {"Acos", cv_simple, ""},
    {"Atan", cv_simple, ""}, {"Sinh", cv_simple, ""}, {"Cosh", cv_simple, ""}, {"Asinh", cv_simple, ""},
    {"Acosh", cv_simple, ""}, {"Atanh", cv_simple, ""}, {"Sign", cv_simple, ""}, {"Not", cv_simple, ""},
    {"IsNaN", cv_simple, ""}, {"Softplus", cv_simple, ""}, {"HardSwish", cv_simple, ""},
    {"Add", cv_simple, "consumed_inputs"}, {"Sub", cv_simple, "consumed_inputs"},
    {"Mul", cv_simple, "consumed_inputs"}, {"Div", cv_simple, "consumed_inputs"}, {"Pow", cv_simple, ""},
    {"Equal", cv_simple, ""}, {"Less", cv_simple, ""}, {"LessOrEqual", cv_simple, ""},
    {"Greater", cv_simple, ""}, {"GreaterOrEqual", cv_simple, ""}, {"And", cv_simple, ""},
    {"Or", cv_simple, ""}, {"Xor", cv_simple, ""}, {"BitwiseAnd", cv_simple, ""}, {"BitwiseOr", cv_simple, ""},
    {"BitwiseXor", cv_simple, ""}, {"BitwiseNot", cv_simple, ""}, {"BitShift", cv_bit_shift, "direction"}, {"Where", cv_simple, ""}, {"PRelu", cv_simple, "consumed_inputs"},
    {"MatMul", cv_simple, ""}, {"Max", cv_simple, "consumed_inputs"}, {"Min", cv_simple, "consumed_inputs"},
    {"Sum", cv_simple, "consumed_inputs"}, {"Mean", cv_simple, "consumed_inputs"},
    {"GlobalAveragePool", cv_simple, ""}, {"GlobalMaxPool", cv_simple, ""},
    {"Mod", cv_mod, "fmod"},
    {"LeakyRelu", cv_activation, "alpha,consumed_inputs"}, {"Elu", cv_activation, "alpha,consumed_inputs"},
    {"Selu", cv_activation, "alpha,gamma,consumed_inputs"},
    {"HardSigmoid", cv_activation, "alpha,beta,consumed_inputs"}, {"Gelu", cv_activation, "approximate"},
    {"Softsign", cv_composite, ""}, {"ThresholdedRelu", cv_composite, "alpha"}, {"Mish", cv_composite, ""},
    {"Celu", cv_composite, "alpha"}, {"IsInf", cv_composite, "detect_positive,detect_negative"},
    {"Tan", cv_composite, ""},
    {"Cast", cv_cast, "to,saturate,round_mode"}, {"BitCast", cv_bitcast, "to"}, {"CastLike", cv_cast, "saturate,round_mode"},
    {"Clip", cv_clip, "min,max,consumed_inputs"},
    {"ReduceSum", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMean", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMax", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMin", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceProd", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceL2", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceL1", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceSumSquare", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceLogSum", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceLogSumExp", cv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ArgMax", cv_arg, "axis,keepdims,select_last_index"}, {"TopK", cv_top_k, "axis,k,largest,sorted"}, {"ArgMin", cv_arg, "axis,keepdims,select_last_index"},
    {"Reshape", cv_reshape, "shape,allowzero,consumed_inputs"}, {"Flatten", cv_flatten, "axis"},
    {"Squeeze", cv_squeeze, "axes"}, {"Unsqueeze", cv_unsqueeze, "axes"}, {"Transpose", cv_transpose, "perm"},
    {"Concat", cv_concat, "axis"}, {"Split", cv_split, "axis,split,num_outputs"},
    {"Slice", cv_slice, "starts,ends,axes"}, {"Pad", cv_pad, "mode,pads,paddings,value"},
    {"Expand", cv_expand, ""}, {"Tile", cv_tile, ""}, {"Gather", cv_gather, "axis"},
    {"GatherElements", cv_gather, "axis"}, {"GatherND", cv_gather_nd, "batch_dims"},
    {"ScatterElements", cv_scatter, "axis,reduction"}, {"Scatter", cv_scatter, "axis"},
    {"ScatterND", cv_scatter, "reduction"}, {"Shape", cv_shape, "start,end"}, {"Size", cv_size, ""},
    {"Constant", cv_constant, NULL}, {"ConstantOfShape", cv_constant_of_shape, "value"},
    {"Range", cv_range, ""}, {"DepthToSpace", cv_depth_space, "blocksize,mode"},
    {"SpaceToDepth", cv_depth_space, "blocksize"}, {"Trilu", cv_trilu, "upper"},
    {"CumSum", cv_cumsum, "exclusive,reverse"}, {"CumProd", cv_cumsum, "exclusive,reverse"}, {"OneHot", cv_one_hot, "axis"},
    {"ConvInteger", cv_conv_integer, "auto_pad,dilations,group,kernel_shape,pads,strides"},
    {"Gemm", cv_gemm, "alpha,beta,transA,transB,broadcast"}, {"Einsum", cv_einsum, "equation"},
    {"Conv", cv_conv, "auto_pad,dilations,group,kernel_shape,pads,strides"},
    {"ConvTranspose", cv_conv_transpose, "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides"},
    {"MaxPool", cv_pool, "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides"},
    {"AveragePool", cv_pool, "auto_pad,ceil_mode,count_include_pad,dilations,kernel_shape,pads,strides"},
    {"LpNormalization", cv_lp_norm, "axis,p"},
    {"LpPool", cv_lp_pool, "auto_pad,ceil_mode,dilations,kernel_shape,p,pads,strides"},
    {"BatchNormalization", cv_batch_norm, "epsilon,momentum,spatial,training_mode,is_test,consumed_inputs"},
    {"InstanceNormalization", cv_instance_norm, "epsilon"},
    {"LayerNormalization", cv_layer_norm, "axis,epsilon,stash_type"}, {"LRN", cv_lrn, "alpha,beta,bias,size"},
    {"Softmax", cv_softmax, "axis"}, {"LogSoftmax", cv_softmax, "axis"},
    {"Dropout", cv_dropout, "ratio,seed,is_test,consumed_inputs"},
    {"Resize", cv_resize, "mode,coordinate_transformation_mode,nearest_mode,cubic_coeff_a,exclude_outside,"
                          "extrapolation_value,antialias,axes,keep_aspect_ratio_policy"},
    {"Upsample", cv_resize, "mode,scales"},
    {"GridSample", cv_grid_sample, "align_corners,mode,padding_mode"},
    {"If", convert_if, "then_branch,else_branch"}, {"Loop", convert_loop, "body"},
    {"Scan", convert_scan, "body,num_scan_inputs,scan_input_axes,scan_input_directions,scan_output_axes,"
                           "scan_output_directions,directions"},
    {"LSTM", convert_rnn, "activation_alpha,activation_beta,activations,clip,direction,hidden_size,input_forget,layout"},
    {"GRU", convert_rnn, "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout,linear_before_reset"},
    {"RNN", convert_rnn, "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout"},
};

bool converter_lookup(const converter_entry *table, size_t n, const char *op_type, convert_fn *fn, const char **attrs) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(table[i].op_type, op_type) == 0) {
      *fn = table[i].fn;
      *attrs = table[i].attrs;
      return true;
    }
  return false;
}

bool find_converter(const char *op_type, convert_fn *fn, const char **attrs) {
  return converter_lookup(converters, sizeof converters / sizeof *converters, op_type, fn, attrs) ||
         find_composite(op_type, fn, attrs) || find_signal_op(op_type, fn, attrs) || find_datadep_op(op_type, fn, attrs);
}
