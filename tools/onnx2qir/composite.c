/* composite.c: ONNX operators the importer builds out of qir's primitive ops
 * (losses, RMS normalisation, Shrink, Hardmax, EyeLike, quantisation).  Each
 * primitive has a shape rule, qrun semantics and a compute form, so these
 * operators reach Roller, Welder and qcodegen with nothing op-specific there.
 * The table at the end is consulted by find_converter after convert.c's. */
#include "onnx2qir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(k) ((k) < nc->n_in ? nc->in[k] : NULL)
#define IMP (nc->imp)




static bool wants_out(node_ctx *nc, int k) { return k < nc->n_out && nc->node->output[k][0]; }

static qir_value *reduce(importer *imp, qir_opcode code, qir_value *x, int n_axes, const int64_t *axes, int keep) {
  if (!x) return NULL;
  qir_op *op = op_begin(imp, code, 1, &x);
  set_ints(imp, op, "axes", n_axes, axes);
  set_i(imp, op, "keepdims", keep);
  return op_end(imp, op, NULL);
}

static qir_value *reduce_all(importer *imp, qir_opcode code, qir_value *x) {
  if (!x) return NULL;
  int64_t axes[QIR_MAX_RANK];
  for (int i = 0; i < x->type.rank; i++) axes[i] = i;
  return reduce(imp, code, x, x->type.rank, axes, 0);
}

static qir_value *with_axis(importer *imp, qir_opcode code, qir_value *x, int64_t axis) {
  if (!x) return NULL;
  qir_op *op = op_begin(imp, code, 1, &x);
  set_i(imp, op, "axis", axis);
  return op_end(imp, op, NULL);
}

static qir_value *gather(importer *imp, qir_opcode code, qir_value *x, qir_value *idx, int64_t axis) {
  if (!x || !idx) return NULL;
  qir_value *in[2] = {x, idx};
  qir_op *op = op_begin(imp, code, 2, in);
  set_i(imp, op, "axis", axis);
  return op_end(imp, op, NULL);
}

static qir_value *where(importer *imp, qir_value *c, qir_value *a, qir_value *b) {
  return emit3(imp, QIR_OP_WHERE, c, a, b);
}

static bool is_int_dtype(qir_dtype dt) { return !qir_dtype_is_float(dt) && dt != QIR_BOOL; }

static qir_value *quantize(node_ctx *nc, qir_value *x, qir_value *s, qir_value *zp, qir_dtype to);
static qir_value *reshape_to(importer *imp, qir_value *x, int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                             int64_t d4);

/* ---------------------------------------------------------------- losses */

/* NegativeLogLikelihoodLoss on log-probabilities lp [N, C, d1..] and targets
 * [N, d1..]: -lp[n, t, d..] * weight[t], zero where t == ignore_index, then
 * none | sum | mean (mean divides by the sum of the applied weights). */
static qir_value *nll_loss(node_ctx *nc, qir_value *lp, qir_value *target, qir_value *weight) {
  importer *imp = IMP;
  if (!lp || !target) return NULL;
  if (lp->type.rank < 2 || target->type.rank != lp->type.rank - 1 || !is_int_dtype(target->type.dtype)) {
    node_fail(nc, "expects input [N, C, d1..] and integer target [N, d1..]");
    return NULL;
  }
  for (int i = 0, k = 0; i < lp->type.rank; i++) {
    if (i == 1) continue;
    if (lp->type.dims[i] != target->type.dims[k++]) {
      node_fail(nc, "target's shape does not match the input's [N, d1..]");
      return NULL;
    }
  }
  int64_t C = lp->type.dims[1];
  if (weight && (weight->type.rank != 1 || weight->type.dims[0] != C)) {
    node_fail(nc, "weight must be a 1-D tensor of C elements");
    return NULL;
  }
  const char *red = attr_str(nc, "reduction", "mean");
  if (strcmp(red, "none") && strcmp(red, "sum") && strcmp(red, "mean")) {
    node_fail(nc, "reduction must be none, sum or mean");
    return NULL;
  }
  qir_dtype dt = lp->type.dtype;
  qir_value *t = emit_cast(imp, target, QIR_I64), *valid = NULL;
  if (attr_find(nc, "ignore_index")) {
    valid = emit1(imp, QIR_OP_NOT, emit2(imp, QIR_OP_EQUAL, t, const_scalar(imp, QIR_I64, (double)attr_int(nc, "ignore_index", 0))));
    t = where(imp, valid, t, const_scalar(imp, QIR_I64, 0)); /* an ignored target may be out of range */
  }
  qir_value *picked = gather(imp, QIR_OP_GATHER_ELEMENTS, lp, emit_insert_unit_axis(imp, t, 1), 1);
  qir_value *loss = emit1(imp, QIR_OP_NEG, emit_reshape(imp, picked, target->type.rank, target->type.dims));
  qir_value *w = NULL;
  if (weight) w = gather(imp, QIR_OP_GATHER, weight, t, 0);
  if (valid) w = where(imp, valid, w ? w : const_scalar(imp, dt, 1), const_scalar(imp, dt, 0));
  if (w) loss = emit2(imp, QIR_OP_MUL, loss, w);
  if (!strcmp(red, "none")) return loss;
  qir_value *sum = reduce_all(imp, QIR_OP_REDUCE_SUM, loss);
  if (!strcmp(red, "sum")) return sum;
  if (!w) return reduce_all(imp, QIR_OP_REDUCE_MEAN, loss);
  return emit2(imp, QIR_OP_DIV, sum, reduce_all(imp, QIR_OP_REDUCE_SUM, w));
}

static bool cv_nll_loss(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  return node_set_out(nc, 0, nll_loss(nc, IN(0), IN(1), IN(2)));
}

/* SoftmaxCrossEntropyLoss: log_softmax over the class axis, then NLL; the
 * second result is the log-probabilities. */
static bool cv_softmax_ce_loss(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  if (IN(0)->type.rank < 2) return node_fail(nc, "scores must be [N, C, d1..]");
  qir_value *lp = with_axis(IMP, QIR_OP_LOG_SOFTMAX, IN(0), 1);
  if (!node_set_out(nc, 0, nll_loss(nc, lp, IN(1), IN(2)))) return false;
  if (wants_out(nc, 1)) nc->out[1] = lp;
  return true;
}

/* ---------------------------------------------------------------- normalisation */

/* RMSNormalization: x / sqrt(mean(x^2 over axis..r-1) + epsilon) * scale,
 * computed in f32 (stash_type 1) or the input type. */
static bool cv_rms_norm(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0), *scale = IN(1);
  int r = x->type.rank;
  int64_t axis = norm_axis(attr_int(nc, "axis", -1), r);
  if (axis < 0) return node_fail(nc, "axis out of range");
  int64_t stash = attr_int(nc, "stash_type", 1);
  if (stash != 1 && stash != 11 && stash != 10 && stash != 16) return node_fail(nc, "unsupported stash_type");
  qir_dtype wide;
  if (!onnx_dtype_to_qir((int32_t)stash, &wide)) return node_fail(nc, "unsupported stash_type");
  if (!qir_dtype_is_float(x->type.dtype)) return node_fail(nc, "input must be a float tensor");
  int64_t axes[QIR_MAX_RANK];
  int n = 0;
  for (int64_t i = axis; i < r; i++) axes[n++] = i;
  qir_value *xw = emit_cast(IMP, x, wide);
  qir_value *ms = reduce(IMP, QIR_OP_REDUCE_MEAN, emit2(IMP, QIR_OP_MUL, xw, xw), n, axes, 1);
  qir_value *den = emit1(IMP, QIR_OP_SQRT, emit2(IMP, QIR_OP_ADD, ms, const_scalar(IMP, wide, attr_float(nc, "epsilon", 1e-5))));
  qir_value *y = emit_cast(IMP, emit2(IMP, QIR_OP_DIV, xw, den), x->type.dtype);
  return node_set_out(nc, 0, emit2(IMP, QIR_OP_MUL, y, scale));
}

/* MeanVarianceNormalization: (x - mean) / sqrt(var), statistics over axes. */
static bool cv_mvn(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int64_t axes[QIR_MAX_RANK] = {0, 2, 3};
  int n = attr_ints(nc, "axes", axes, QIR_MAX_RANK);
  if (n < 0) n = 3;
  bool seen[QIR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int64_t a = norm_axis(axes[i], x->type.rank);
    if (a < 0) return node_fail(nc, "axis out of range");
    seen[a] = true;
  }
  n = 0;
  for (int i = 0; i < x->type.rank; i++)
    if (seen[i]) axes[n++] = i;
  qir_value *mean = reduce(IMP, QIR_OP_REDUCE_MEAN, x, n, axes, 1);
  qir_value *d = emit2(IMP, QIR_OP_SUB, x, mean);
  qir_value *var = reduce(IMP, QIR_OP_REDUCE_MEAN, emit2(IMP, QIR_OP_MUL, d, d), n, axes, 1);
  qir_value *den = emit2(IMP, QIR_OP_ADD, emit1(IMP, QIR_OP_SQRT, var), const_scalar(IMP, x->type.dtype, 1e-9));
  return node_set_out(nc, 0, emit2(IMP, QIR_OP_DIV, d, den));
}

/* GroupNormalization (opset 21): statistics per (n, group) over the group's
 * channels and the spatial dims; per-channel scale and bias. */
static bool cv_group_norm(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  qir_value *x = IN(0), *scale = IN(1), *bias = IN(2);
  int r = x->type.rank;
  int64_t G = attr_int(nc, "num_groups", 0);
  if (!attr_find(nc, "num_groups")) return node_fail(nc, "num_groups is missing");
  if (r < 2 || G <= 0 || x->type.dims[1] % G) return node_fail(nc, "num_groups must divide the channel count");
  int64_t N = x->type.dims[0], C = x->type.dims[1], S = 1;
  for (int i = 2; i < r; i++) S *= x->type.dims[i];
  if (scale->type.rank != 1 || scale->type.dims[0] != C || bias->type.rank != 1 || bias->type.dims[0] != C)
    return node_fail(nc, "scale and bias must have C elements");
  qir_dtype wide;
  if (!onnx_dtype_to_qir((int32_t)attr_int(nc, "stash_type", 1), &wide) || !qir_dtype_is_float(wide))
    return node_fail(nc, "unsupported stash_type");
  int64_t g3[3] = {N, G, C / G * S}, ax = 2;
  qir_value *xg = emit_cast(IMP, emit_reshape(IMP, x, 3, g3), wide);
  qir_value *mean = reduce(IMP, QIR_OP_REDUCE_MEAN, xg, 1, &ax, 1);
  qir_value *d = emit2(IMP, QIR_OP_SUB, xg, mean);
  qir_value *var = reduce(IMP, QIR_OP_REDUCE_MEAN, emit2(IMP, QIR_OP_MUL, d, d), 1, &ax, 1);
  qir_value *den = emit1(IMP, QIR_OP_SQRT, emit2(IMP, QIR_OP_ADD, var, const_scalar(IMP, wide, attr_float(nc, "epsilon", 1e-5))));
  qir_value *y = emit_cast(IMP, emit_reshape(IMP, emit2(IMP, QIR_OP_DIV, d, den), r, x->type.dims), x->type.dtype);
  int64_t cshape[QIR_MAX_RANK];
  for (int i = 0; i < r; i++) cshape[i] = i == 1 ? C : 1;
  y = emit2(IMP, QIR_OP_MUL, y, emit_reshape(IMP, scale, r - 1, cshape + 1));
  return node_set_out(nc, 0, emit2(IMP, QIR_OP_ADD, y, emit_reshape(IMP, bias, r - 1, cshape + 1)));
}

/* ---------------------------------------------------------------- small ops */

static bool cv_shrink(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  qir_dtype dt = x->type.dtype;
  double lambd = attr_float(nc, "lambd", 0.5), bias = attr_float(nc, "bias", 0);
  qir_value *lo = emit2(IMP, QIR_OP_LESS, x, const_scalar(IMP, dt, -lambd));
  qir_value *hi = emit2(IMP, QIR_OP_GREATER, x, const_scalar(IMP, dt, lambd));
  qir_value *inner = where(IMP, hi, emit2(IMP, QIR_OP_SUB, x, const_scalar(IMP, dt, bias)), const_scalar(IMP, dt, 0));
  return node_set_out(nc, 0, where(IMP, lo, emit2(IMP, QIR_OP_ADD, x, const_scalar(IMP, dt, bias)), inner));
}

static bool cv_swish(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  qir_value *ax = emit2(IMP, QIR_OP_MUL, x, const_scalar(IMP, x->type.dtype, attr_float(nc, "alpha", 1.0)));
  return node_set_out(nc, 0, emit2(IMP, QIR_OP_MUL, x, emit1(IMP, QIR_OP_SIGMOID, ax)));
}

/* Hardmax: one-hot of the first maximum along axis. */
static bool cv_hardmax(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  if (nc->opset < 13) return node_fail(nc, "Hardmax before opset 13 (2-D coercion) is not supported");
  int64_t axis = norm_axis(attr_int(nc, "axis", -1), r);
  if (axis < 0) return node_fail(nc, "axis out of range");
  qir_op *op = op_begin(IMP, QIR_OP_ARGMAX, 1, &x);
  set_i(IMP, op, "axis", axis);
  set_i(IMP, op, "keepdims", 0);
  set_i(IMP, op, "select_last_index", 0);
  qir_value *idx = op_end(IMP, op, NULL);
  int64_t two = 2;
  double v01[2] = {0, 1};
  char buf[16];
  for (int i = 0; i < 2; i++) qir_store_elem(x->type.dtype, buf, i, v01[i]);
  qir_value *in[2] = {idx, const_data(IMP, qir_type_make(x->type.dtype, 1, &two), buf)};
  qir_op *oh = op_begin_typed(IMP, QIR_OP_ONE_HOT, 2, in, 1, &x->type);
  set_i(IMP, oh, "axis", axis);
  return node_set_out(nc, 0, op_end(IMP, oh, NULL));
}

/* EyeLike: a constant of the input's 2-D shape (only the shape is read). */
static bool cv_eye_like(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  if (x->type.rank != 2) return node_fail(nc, "input must be 2-D");
  qir_dtype dt = x->type.dtype;
  const Onnx__AttributeProto *a = attr_find(nc, "dtype");
  if (a && !onnx_dtype_to_qir((int32_t)a->i, &dt)) return node_fail(nc, "unsupported dtype");
  int64_t k = attr_int(nc, "k", 0), R = x->type.dims[0], C = x->type.dims[1];
  if (R * C > FOLD_LIMIT) return node_fail(nc, "result too large to materialise");
  qir_type t = qir_type_make(dt, 2, x->type.dims);
  char *buf = calloc((size_t)(R * C + 1), (size_t)qir_dtype_size(dt));
  if (!buf) abort();
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) qir_store_elem(dt, buf, i * C + j, j - i == k ? 1 : 0);
  qir_value *v = const_data(IMP, t, buf);
  free(buf);
  return node_set_out(nc, 0, v);
}

/* ReverseSequence: along time_axis, the first seq_lens[b] steps of batch b
 * reversed: a gather_elements with index where(t < len, len - 1 - t, t). */
static bool cv_reverse_sequence(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0), *lens = IN(1);
  int r = x->type.rank;
  int64_t ta = norm_axis(attr_int(nc, "time_axis", 0), r), ba = norm_axis(attr_int(nc, "batch_axis", 1), r);
  if (r < 2 || ta < 0 || ba < 0 || ta == ba) return node_fail(nc, "time_axis and batch_axis must be two distinct axes");
  int64_t T = x->type.dims[ta], B = x->type.dims[ba];
  if (lens->type.rank != 1 || lens->type.dims[0] != B || !is_int_dtype(lens->type.dtype))
    return node_fail(nc, "sequence_lens must be an integer tensor of batch size");
  int64_t dt_[QIR_MAX_RANK], db[QIR_MAX_RANK];
  for (int i = 0; i < r; i++) dt_[i] = i == ta ? T : 1, db[i] = i == ba ? B : 1;
  int64_t *tv = malloc(sizeof *tv * (size_t)(T + 1));
  if (!tv) abort();
  for (int64_t i = 0; i < T; i++) tv[i] = i;
  qir_value *t = const_data(IMP, qir_type_make(QIR_I64, r, dt_), tv);
  free(tv);
  qir_value *len = emit_reshape(IMP, emit_cast(IMP, lens, QIR_I64), r, db);
  qir_value *rev = emit2(IMP, QIR_OP_SUB, emit2(IMP, QIR_OP_SUB, len, const_scalar(IMP, QIR_I64, 1)), t);
  qir_value *idx = where(IMP, emit2(IMP, QIR_OP_LESS, t, len), rev, t);
  if (!idx) return false;
  qir_type full = qir_type_make(QIR_I64, r, x->type.dims);
  idx = op_end(IMP, op_begin_typed(IMP, QIR_OP_EXPAND, 1, &idx, 1, &full), NULL);
  return node_set_out(nc, 0, gather(IMP, QIR_OP_GATHER_ELEMENTS, x, idx, ta));
}

/* x[..., start:end:step] on the last axis */
static qir_value *slice_last(importer *imp, qir_value *x, int64_t start, int64_t end, int64_t step) {
  if (!x) return NULL;
  int r = x->type.rank;
  int64_t s[QIR_MAX_RANK], e[QIR_MAX_RANK], st[QIR_MAX_RANK];
  for (int i = 0; i < r; i++) s[i] = 0, e[i] = x->type.dims[i], st[i] = 1;
  s[r - 1] = start, e[r - 1] = end, st[r - 1] = step;
  qir_op *op = op_begin(imp, QIR_OP_SLICE, 1, &x);
  set_ints(imp, op, "starts", r, s);
  set_ints(imp, op, "ends", r, e);
  set_ints(imp, op, "steps", r, st);
  return op_end(imp, op, NULL);
}

static qir_value *concat2(importer *imp, qir_value *a, qir_value *b, int64_t axis) {
  if (!a || !b) return NULL;
  qir_value *in[2] = {a, b};
  qir_op *op = op_begin(imp, QIR_OP_CONCAT, 2, in);
  set_i(imp, op, "axis", axis);
  return op_end(imp, op, NULL);
}

/* CenterCropPad: per axis, a centred slice (crop) or a centred zero pad. */
static bool cv_center_crop_pad(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  int64_t shape[QIR_MAX_RANK], axes[QIR_MAX_RANK];
  int ns, na = attr_ints(nc, "axes", axes, QIR_MAX_RANK);
  if (!need_const_ints(nc, 1, shape, QIR_MAX_RANK, &ns)) return false;
  if (na < 0) {
    na = r;
    for (int i = 0; i < r; i++) axes[i] = i;
  }
  if (ns != na) return node_fail(nc, "shape needs one entry per axis");
  int64_t s[QIR_MAX_RANK], e[QIR_MAX_RANK], st[QIR_MAX_RANK], pads[2 * QIR_MAX_RANK] = {0};
  bool crop = false, pad = false;
  for (int i = 0; i < r; i++) s[i] = 0, e[i] = x->type.dims[i], st[i] = 1;
  for (int i = 0; i < na; i++) {
    int64_t a = norm_axis(axes[i], r), d;
    if (a < 0) return node_fail(nc, "axis out of range");
    if (shape[i] < 0) return node_fail(nc, "negative target size");
    d = x->type.dims[a];
    if (shape[i] < d) {
      s[a] = (d - shape[i]) / 2, e[a] = s[a] + shape[i], crop = true;
    } else if (shape[i] > d) {
      pads[a] = (shape[i] - d) / 2, pads[r + a] = shape[i] - d - pads[a], pad = true;
    }
  }
  if (crop) {
    qir_op *op = op_begin(IMP, QIR_OP_SLICE, 1, &x);
    set_ints(IMP, op, "starts", r, s);
    set_ints(IMP, op, "ends", r, e);
    set_ints(IMP, op, "steps", r, st);
    x = op_end(IMP, op, NULL);
  }
  if (pad && x) {
    qir_value *in[2] = {x, const_scalar(IMP, x->type.dtype, 0)};
    qir_op *op = op_begin(IMP, QIR_OP_PAD, 2, in);
    set_ints(IMP, op, "pads", 2 * r, pads);
    set_w(IMP, op, "mode", "constant");
    x = op_end(IMP, op, NULL);
  }
  return node_set_out(nc, 0, x);
}

/* RotaryEmbedding (opset 23): rotate pairs of the first rotary_embedding_dim
 * features of each head by the cached cos/sin of the token's position; pairs
 * are (i, i + dim/2), or adjacent with interleaved=1. */
static bool cv_rotary_embedding(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  importer *imp = IMP;
  qir_value *x = IN(0), *cosc = IN(1), *sinc = IN(2), *pos = IN(3);
  int r = x->type.rank;
  if (r != 3 && r != 4) return node_fail(nc, "input must be 3-D or 4-D");
  int64_t B = x->type.dims[0], S, H, hd;
  qir_value *xs; /* [B, S, H, hd] */
  static const int64_t perm[4] = {0, 2, 1, 3};
  if (r == 4) {
    H = x->type.dims[1], S = x->type.dims[2], hd = x->type.dims[3];
    xs = emit_transpose(imp, x, 4, perm);
  } else {
    H = attr_int(nc, "num_heads", 0), S = x->type.dims[1];
    if (H <= 0 || x->type.dims[2] % H) return node_fail(nc, "3-D input needs num_heads dividing the hidden size");
    hd = x->type.dims[2] / H;
    int64_t d[4] = {B, S, H, hd};
    xs = emit_reshape(imp, x, 4, d);
  }
  int64_t rot = attr_int(nc, "rotary_embedding_dim", 0);
  if (rot == 0) rot = hd;
  if (rot < 2 || rot > hd || rot % 2) return node_fail(nc, "rotary_embedding_dim must be even and at most the head size");
  int64_t half = rot / 2;
  qir_value *c = cosc, *s = sinc;
  if (pos) {
    if (cosc->type.rank != 2 || sinc->type.rank != 2) return node_fail(nc, "with position_ids, the caches must be 2-D");
    c = gather(imp, QIR_OP_GATHER, cosc, pos, 0);
    s = gather(imp, QIR_OP_GATHER, sinc, pos, 0);
  }
  if (!c || !s || c->type.rank != 3 || s->type.rank != 3 || c->type.dims[2] < half || s->type.dims[2] < half)
    return node_fail(nc, "cos/sin must give [batch, sequence, >= rotary_embedding_dim/2]");
  c = emit_insert_unit_axis(imp, slice_last(imp, c, 0, half, 1), 2); /* [B, S, 1, half] */
  s = emit_insert_unit_axis(imp, slice_last(imp, s, 0, half, 1), 2);
  bool inter = attr_int(nc, "interleaved", 0) != 0;
  qir_value *xr = rot == hd ? xs : slice_last(imp, xs, 0, rot, 1);
  qir_value *x1 = inter ? slice_last(imp, xr, 0, rot, 2) : slice_last(imp, xr, 0, half, 1);
  qir_value *x2 = inter ? slice_last(imp, xr, 1, rot, 2) : slice_last(imp, xr, half, rot, 1);
  qir_value *re = emit2(imp, QIR_OP_SUB, emit2(imp, QIR_OP_MUL, c, x1), emit2(imp, QIR_OP_MUL, s, x2));
  qir_value *im = emit2(imp, QIR_OP_ADD, emit2(imp, QIR_OP_MUL, s, x1), emit2(imp, QIR_OP_MUL, c, x2));
  qir_value *rotated;
  if (inter) {
    int64_t d5[5] = {B, S, H, half, 1}, d4[4] = {B, S, H, rot};
    rotated = emit_reshape(imp, concat2(imp, emit_reshape(imp, re, 5, d5), emit_reshape(imp, im, 5, d5), 4), 4, d4);
  } else {
    rotated = concat2(imp, re, im, 3);
  }
  qir_value *y = rot == hd ? rotated : concat2(imp, rotated, slice_last(imp, xs, rot, hd, 1), 3);
  if (!y) return false;
  if (r == 4) return node_set_out(nc, 0, emit_transpose(imp, y, 4, perm));
  return node_set_out(nc, 0, emit_reshape(imp, y, 3, x->type.dims));
}

/* Col2Im: a grouped transposed convolution of the columns with one-hot
 * weights (column channel c*K + k feeds image channel c at tap k). */
static bool cv_col2im(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  qir_value *x = IN(0);
  int64_t img[QIR_MAX_RANK], blk[QIR_MAX_RANK];
  int ni, nb;
  if (!need_const_ints(nc, 1, img, QIR_MAX_RANK, &ni) || !need_const_ints(nc, 2, blk, QIR_MAX_RANK, &nb)) return false;
  if (ni != nb || ni < 1 || ni + 2 > QIR_MAX_RANK) return node_fail(nc, "image_shape and block_shape must have one entry per spatial dim");
  if (x->type.rank != 3) return node_fail(nc, "input must be [N, C*prod(block_shape), L]");
  int64_t K = 1, strides[QIR_MAX_RANK], dil[QIR_MAX_RANK], pads[2 * QIR_MAX_RANK], L[QIR_MAX_RANK], nL = 1;
  for (int i = 0; i < nb; i++) {
    if (blk[i] < 1 || img[i] < 1) return node_fail(nc, "block and image sizes must be positive");
    K *= blk[i];
  }
  if (attr_ints(nc, "strides", strides, QIR_MAX_RANK) < 0) for (int i = 0; i < nb; i++) strides[i] = 1;
  if (attr_ints(nc, "dilations", dil, QIR_MAX_RANK) < 0) for (int i = 0; i < nb; i++) dil[i] = 1;
  if (attr_ints(nc, "pads", pads, 2 * QIR_MAX_RANK) < 0) for (int i = 0; i < 2 * nb; i++) pads[i] = 0;
  for (int i = 0; i < nb; i++) {
    if (strides[i] < 1 || dil[i] < 1) return node_fail(nc, "strides and dilations must be positive");
    L[i] = (img[i] + pads[i] + pads[nb + i] - dil[i] * (blk[i] - 1) - 1) / strides[i] + 1;
    if (L[i] < 1) return node_fail(nc, "no block fits the padded image");
    nL *= L[i];
  }
  int64_t N = x->type.dims[0], CK = x->type.dims[1];
  if (CK % K || x->type.dims[2] != nL) return node_fail(nc, "input shape does not match block_shape and image_shape");
  int64_t C = CK / K;
  if (CK * K > FOLD_LIMIT) return node_fail(nc, "block too large to materialise");
  int64_t xd[QIR_MAX_RANK] = {N, CK}, wd[QIR_MAX_RANK] = {CK, 1};
  for (int i = 0; i < nb; i++) xd[2 + i] = L[i], wd[2 + i] = blk[i];
  char *w = calloc((size_t)(CK * K), (size_t)qir_dtype_size(x->type.dtype));
  if (!w) abort();
  for (int64_t ch = 0; ch < CK; ch++) qir_store_elem(x->type.dtype, w, ch * K + ch % K, 1);
  qir_value *in[3] = {emit_reshape(IMP, x, 2 + nb, xd), const_data(IMP, qir_type_make(x->type.dtype, 2 + nb, wd), w),
                      const_splat(IMP, qir_type_make(x->type.dtype, 1, &C), 0)};
  free(w);
  int64_t outpad[QIR_MAX_RANK], od[QIR_MAX_RANK] = {N, C};
  for (int i = 0; i < nb; i++) {
    od[2 + i] = img[i];
    /* the transposed conv gives (L-1)*s + (k-1)*d + 1 - pads; the rest of the image is output padding */
    outpad[i] = img[i] - ((L[i] - 1) * strides[i] + (blk[i] - 1) * dil[i] + 1 - pads[i] - pads[nb + i]);
  }
  qir_type ot = qir_type_make(x->type.dtype, 2 + nb, od);
  qir_op *op = op_begin_typed(IMP, QIR_OP_CONV_TRANSPOSE, 3, in, 1, &ot);
  set_ints(IMP, op, "strides", nb, strides);
  set_ints(IMP, op, "pads", 2 * nb, pads);
  set_ints(IMP, op, "dilations", nb, dil);
  set_i(IMP, op, "group", C);
  set_ints(IMP, op, "output_padding", nb, outpad);
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* TensorScatter (opset 24): the KV-cache update.  update's sequence slices
 * land at write_indices[b] + s (wrapping with mode=circular) along axis. */
static bool cv_tensor_scatter(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *past = IN(0), *upd = IN(1), *wi = IN(2);
  int r = past->type.rank;
  int64_t axis = norm_axis(attr_int(nc, "axis", -2), r);
  if (axis <= 0) return node_fail(nc, "axis must name a dimension after the batch");
  if (upd->type.rank != r || upd->type.dtype != past->type.dtype) return node_fail(nc, "update must have the cache's rank and type");
  for (int i = 0; i < r; i++)
    if (i != axis && upd->type.dims[i] != past->type.dims[i]) return node_fail(nc, "update and cache differ outside the sequence axis");
  const char *mode = attr_str(nc, "mode", "linear");
  bool circular = !strcmp(mode, "circular");
  if (!circular && strcmp(mode, "linear")) return node_fail(nc, "mode must be linear or circular");
  int64_t B = past->type.dims[0], S = upd->type.dims[axis], M = past->type.dims[axis];
  if (S > M) return node_fail(nc, "update is longer than the cache");
  int64_t ds[QIR_MAX_RANK], db[QIR_MAX_RANK];
  for (int i = 0; i < r; i++) ds[i] = i == axis ? S : 1, db[i] = i == 0 ? B : 1;
  int64_t *sv = malloc(sizeof *sv * (size_t)(S + 1));
  if (!sv) abort();
  for (int64_t s = 0; s < S; s++) sv[s] = s;
  qir_value *idx = const_data(IMP, qir_type_make(QIR_I64, r, ds), sv);
  free(sv);
  if (wi) {
    if (wi->type.rank != 1 || wi->type.dims[0] != B || !is_int_dtype(wi->type.dtype)) return node_fail(nc, "write_indices must be [batch] integers");
    idx = emit2(IMP, QIR_OP_ADD, idx, emit_reshape(IMP, emit_cast(IMP, wi, QIR_I64), r, db));
  }
  if (circular) {
    qir_op *op = op_begin(IMP, QIR_OP_MOD, 2, (qir_value *[]){idx, const_scalar(IMP, QIR_I64, (double)M)});
    set_i(IMP, op, "fmod", 0);
    idx = op_end(IMP, op, NULL);
  }
  if (!idx) return false;
  qir_type full = qir_type_make(QIR_I64, r, upd->type.dims);
  idx = op_end(IMP, op_begin_typed(IMP, QIR_OP_EXPAND, 1, &idx, 1, &full), NULL);
  qir_op *op = op_begin(IMP, QIR_OP_SCATTER_ELEMENTS, 3, (qir_value *[]){past, idx, upd});
  set_i(IMP, op, "axis", axis);
  set_w(IMP, op, "reduction", "none");
  return node_set_out(nc, 0, op_end(IMP, op, NULL));
}

/* MaxUnpool: zeros with each x at its flat index (MaxPool's indices) into
 * the output: a scatter on the flattened output. */
static bool cv_max_unpool(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0), *ind = IN(1);
  int r = x->type.rank, ns = r - 2;
  if (ns < 1) return node_fail(nc, "input must be [N, C, spatial...]");
  if (ind->type.rank != r || !is_int_dtype(ind->type.dtype)) return node_fail(nc, "indices must be integers of the input's shape");
  for (int i = 0; i < r; i++)
    if (ind->type.dims[i] != x->type.dims[i]) return node_fail(nc, "indices must have the input's shape");
  int64_t od[QIR_MAX_RANK], k[QIR_MAX_RANK], st[QIR_MAX_RANK], pads[2 * QIR_MAX_RANK];
  if (attr_ints(nc, "kernel_shape", k, QIR_MAX_RANK) != ns) return node_fail(nc, "kernel_shape needs one entry per spatial dim");
  if (attr_ints(nc, "strides", st, QIR_MAX_RANK) < 0) for (int i = 0; i < ns; i++) st[i] = 1;
  if (attr_ints(nc, "pads", pads, 2 * QIR_MAX_RANK) < 0) for (int i = 0; i < 2 * ns; i++) pads[i] = 0;
  od[0] = x->type.dims[0], od[1] = x->type.dims[1];
  for (int i = 0; i < ns; i++) {
    if (k[i] < 1 || st[i] < 1) return node_fail(nc, "kernel and strides must be positive");
    od[2 + i] = (x->type.dims[2 + i] - 1) * st[i] + k[i] - pads[i] - pads[ns + i];
  }
  /* the indices address the inferred shape; a given output_shape extends it
   * with zeros at the end of each dim (or cuts it) */
  int64_t want[QIR_MAX_RANK];
  memcpy(want, od, sizeof want);
  if (IN(2)) {
    int n;
    if (!need_const_ints(nc, 2, want, QIR_MAX_RANK, &n)) return false;
    if (n != r) return node_fail(nc, "output_shape needs one entry per dimension");
    if (want[0] != od[0] || want[1] != od[1]) return node_fail(nc, "output_shape must keep N and C");
  }
  qir_type ot = qir_type_make(x->type.dtype, r, od);
  int64_t total = qir_type_numel(&ot), nx = qir_type_numel(&x->type);
  for (int i = 0; i < r; i++)
    if (od[i] < 0) return node_fail(nc, "negative output size");
  if (total > MAX_NUMEL) return node_fail(nc, "output is absurdly large");
  qir_value *zeros = const_splat(IMP, qir_type_make(x->type.dtype, 1, &total), 0);
  qir_op *op = op_begin(IMP, QIR_OP_SCATTER_ELEMENTS, 3,
                        (qir_value *[]){zeros, emit_reshape(IMP, emit_cast(IMP, ind, QIR_I64), 1, &nx), emit_reshape(IMP, x, 1, &nx)});
  set_i(IMP, op, "axis", 0);
  set_w(IMP, op, "reduction", "none");
  qir_value *y = emit_reshape(IMP, op_end(IMP, op, NULL), r, od);
  int64_t pads2[2 * QIR_MAX_RANK] = {0};
  bool pad = false;
  for (int i = 0; i < r; i++) {
    if (want[i] < 0) return node_fail(nc, "negative output size");
    pads2[r + i] = want[i] - od[i], pad |= want[i] != od[i];
  }
  if (pad && y) {
    qir_op *p = op_begin(IMP, QIR_OP_PAD, 2, (qir_value *[]){y, const_scalar(IMP, x->type.dtype, 0)});
    set_ints(IMP, p, "pads", 2 * r, pads2);
    set_w(IMP, p, "mode", "constant");
    y = op_end(IMP, p, NULL);
  }
  return node_set_out(nc, 0, y);
}

/* AffineGrid: the sampling grid theta x (x, y[, z], 1) over the normalised
 * pixel centres (or corners with align_corners). */
static bool cv_affine_grid(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *theta = IN(0);
  int64_t size[5];
  int n;
  if (!need_const_ints(nc, 1, size, 5, &n)) return false;
  if (n != 4 && n != 5) return node_fail(nc, "size must be [N, C, H, W] or [N, C, D, H, W]");
  int sd = n - 2; /* spatial dims */
  int64_t N = size[0];
  if (theta->type.rank != 3 || theta->type.dims[0] != N || theta->type.dims[1] != sd || theta->type.dims[2] != sd + 1)
    return node_fail(nc, "theta must be [N, 2, 3] (2-D) or [N, 3, 4] (3-D)");
  bool align = attr_int(nc, "align_corners", 0) != 0;
  int64_t P = 1;
  for (int i = 0; i < sd; i++) {
    if (size[2 + i] < 1) return node_fail(nc, "sizes must be positive");
    P *= size[2 + i];
  }
  if (P * (sd + 1) > FOLD_LIMIT) return node_fail(nc, "grid too large to materialise");
  qir_dtype dt = theta->type.dtype;
  char *buf = calloc((size_t)(P * (sd + 1)), (size_t)qir_dtype_size(dt));
  if (!buf) abort();
  for (int64_t p = 0; p < P; p++) {
    int64_t rem = p;
    /* p runs over (D,) H, W row-major; the grid's coordinates are (x, y[, z]) = (w, h[, d]) */
    for (int i = sd - 1; i >= 0; i--) {
      int64_t ext = size[2 + i], c = rem % ext;
      rem /= ext;
      double v = align ? (ext > 1 ? -1 + 2.0 * (double)c / (double)(ext - 1) : 0) : (2.0 * (double)c + 1) / (double)ext - 1;
      qir_store_elem(dt, buf, p * (sd + 1) + (sd - 1 - i), v);
    }
    qir_store_elem(dt, buf, p * (sd + 1) + sd, 1);
  }
  int64_t bd[2] = {P, sd + 1};
  qir_value *base = const_data(IMP, qir_type_make(dt, 2, bd), buf);
  free(buf);
  static const int64_t perm[3] = {0, 2, 1};
  qir_value *g = emit2(IMP, QIR_OP_MATMUL, base, emit_transpose(IMP, theta, 3, perm)); /* [N, P, sd] */
  int64_t gd[QIR_MAX_RANK];
  gd[0] = N;
  for (int i = 0; i < sd; i++) gd[1 + i] = size[2 + i];
  gd[1 + sd] = sd;
  return node_set_out(nc, 0, emit_reshape(IMP, g, sd + 2, gd));
}

/* Det of matrices larger than 4 x 4: LU elimination with partial pivoting,
 * unrolled over the n columns on x reshaped to [N, n, n].  Step j: the pivot
 * row p is the first of the largest |a[r, j]|, r >= j (argmax); rows j and p
 * swap (gather_elements with the swapping permutation), the determinant takes
 * the pivot and the swap's sign, and the rows below lose their multiple of
 * row j.  A zero pivot divides by 1 instead: the determinant is 0 already and
 * the rest stays finite. */
static qir_value *det_lu(importer *imp, qir_value *x, int64_t n) {
  int r = x->type.rank;
  int64_t N = 1;
  for (int i = 0; i < r - 2; i++) N *= x->type.dims[i];
  qir_dtype dt = x->type.dtype;
  int64_t d3[3] = {N, n, n};
  qir_value *a = emit_reshape(imp, x, 3, d3);
  int64_t *rows = malloc(sizeof *rows * (size_t)n);
  if (!rows) abort();
  for (int64_t i = 0; i < n; i++) rows[i] = i;
  int64_t rd[2] = {1, n}, zd[3] = {1, 1, n};
  qir_value *row = const_data(imp, qir_type_make(QIR_I64, 2, rd), rows); /* [1, n] */
  free(rows);
  qir_value *zeros = const_splat(imp, qir_type_make(QIR_I64, 3, zd), 0);
  qir_value *det = NULL, *zero = const_scalar(imp, dt, 0), *one = const_scalar(imp, dt, 1);
  for (int64_t j = 0; j < n; j++) {
    qir_value *jj = const_scalar(imp, QIR_I64, (double)j);
    qir_value *below = emit2(imp, QIR_OP_GREATER_EQUAL, row, jj);
    qir_value *cand = where(imp, below, emit1(imp, QIR_OP_ABS, gather(imp, QIR_OP_GATHER, a, jj, 2)), const_scalar(imp, dt, -1));
    qir_op *op = op_begin(imp, QIR_OP_ARGMAX, 1, &cand);
    set_i(imp, op, "axis", 1);
    set_i(imp, op, "keepdims", 1);
    set_i(imp, op, "select_last_index", 0);
    qir_value *p = op_end(imp, op, NULL); /* [N, 1] */
    qir_value *perm = where(imp, emit2(imp, QIR_OP_EQUAL, row, jj), p, where(imp, emit2(imp, QIR_OP_EQUAL, row, p), jj, row));
    int64_t pd[3] = {N, n, 1};
    qir_value *idx = emit2(imp, QIR_OP_ADD, emit_reshape(imp, perm, 3, pd), zeros); /* [N, n, n] */
    a = gather(imp, QIR_OP_GATHER_ELEMENTS, a, idx, 1);
    qir_value *rowj = gather(imp, QIR_OP_GATHER, a, jj, 1);     /* [N, n] */
    qir_value *piv = gather(imp, QIR_OP_GATHER, rowj, jj, 1);   /* [N] */
    qir_value *sign = where(imp, emit2(imp, QIR_OP_EQUAL, p, jj), one, const_scalar(imp, dt, -1)); /* [N, 1] */
    int64_t nd[1] = {N};
    qir_value *term = emit2(imp, QIR_OP_MUL, piv, emit_reshape(imp, sign, 1, nd));
    det = det ? emit2(imp, QIR_OP_MUL, det, term) : term;
    if (j + 1 == n) break;
    int64_t n1[2] = {N, 1};
    qir_value *safe = where(imp, emit2(imp, QIR_OP_EQUAL, piv, zero), one, piv);
    qir_value *colj = gather(imp, QIR_OP_GATHER, a, jj, 2); /* [N, n] */
    qir_value *factor = where(imp, emit2(imp, QIR_OP_GREATER, row, jj), emit2(imp, QIR_OP_DIV, colj, emit_reshape(imp, safe, 2, n1)), zero);
    int64_t fd[3] = {N, n, 1}, jd[3] = {N, 1, n};
    a = emit2(imp, QIR_OP_SUB, a, emit2(imp, QIR_OP_MUL, emit_reshape(imp, factor, 3, fd), emit_reshape(imp, rowj, 3, jd)));
  }
  return emit_reshape(imp, det, r - 2, x->type.dims);
}

/* Det: Leibniz's sum over permutations of the last two (square) dims for
 * matrices up to 4 x 4 (24 products of gathered elements), else det_lu. */
static bool cv_det(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  int r = x->type.rank;
  if (r < 2 || x->type.dims[r - 1] != x->type.dims[r - 2]) return node_fail(nc, "input must be [..., M, M]");
  if (!qir_dtype_is_float(x->type.dtype)) return node_fail(nc, "input must be a float tensor");
  int64_t n = x->type.dims[r - 1];
  if (n < 1) return node_fail(nc, "Det of an empty matrix");
  if (n > 256) return node_fail(nc, "Det of matrices larger than 256 x 256 is not supported (the elimination is unrolled)");
  if (n > 4) return node_set_out(nc, 0, det_lu(IMP, x, n));
  int64_t d[QIR_MAX_RANK];
  for (int i = 0; i < r - 2; i++) d[i] = x->type.dims[i];
  d[r - 2] = n * n;
  qir_value *flat = emit_reshape(IMP, x, r - 1, d), *sum = NULL;
  int perm[4] = {0, 1, 2, 3};
  int64_t count = 1;
  for (int64_t i = 2; i <= n; i++) count *= i;
  for (int64_t p = 0; p < count; p++) {
    /* the p-th permutation in lexicographic order (factorial number system) and its sign */
    int avail[4] = {0, 1, 2, 3}, m = (int)n;
    int64_t q = p, f = count;
    for (int i = 0; i < n; i++) {
      f /= (n - i);
      int k = (int)(q / f);
      q %= f;
      perm[i] = avail[k];
      for (int j = k; j < m - 1; j++) avail[j] = avail[j + 1];
      m--;
    }
    int inv = 0;
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++) inv += perm[i] > perm[j];
    qir_value *prod = NULL;
    for (int i = 0; i < n; i++) {
      qir_value *e = gather(IMP, QIR_OP_GATHER, flat, const_scalar(IMP, QIR_I64, (double)(i * n + perm[i])), r - 2);
      prod = prod ? emit2(IMP, QIR_OP_MUL, prod, e) : e;
    }
    sum = !sum ? (inv % 2 ? emit1(IMP, QIR_OP_NEG, prod) : prod) : emit2(IMP, inv % 2 ? QIR_OP_SUB : QIR_OP_ADD, sum, prod);
  }
  return node_set_out(nc, 0, sum);
}

/* CausalConvWithState (opset 27): past state (zeros if absent) prepended on
 * the time axis, a depthwise valid conv1d, optional SiLU; the new state is
 * the last k-1 steps of the padded input. */
static bool cv_causal_conv_with_state(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0), *w = IN(1), *b = IN(2), *past = IN(3);
  if (x->type.rank != 3 || w->type.rank != 3) return node_fail(nc, "input must be [B, C, L] and weight [C, 1, k]");
  int64_t B = x->type.dims[0], C = x->type.dims[1], L = x->type.dims[2], k = w->type.dims[2];
  if (w->type.dims[0] != C || w->type.dims[1] != 1 || k < 1) return node_fail(nc, "weight must be [C, 1, k]");
  const char *act = attr_str(nc, "activation", "none");
  if (strcmp(act, "none") && strcmp(act, "silu") && strcmp(act, "swish")) return node_fail(nc, "activation must be none, silu or swish");
  int64_t pd[3] = {B, C, k - 1};
  if (past && (past->type.rank != 3 || past->type.dims[0] != B || past->type.dims[1] != C || past->type.dims[2] != k - 1))
    return node_fail(nc, "past_state must be [B, C, k-1]");
  qir_value *padded = x;
  if (k > 1) padded = concat2(IMP, past ? past : const_splat(IMP, qir_type_make(x->type.dtype, 3, pd), 0), x, 2);
  if (!b) b = const_splat(IMP, qir_type_make(x->type.dtype, 1, &C), 0);
  int64_t one = 1, zero2[2] = {0, 0};
  qir_op *op = op_begin(IMP, QIR_OP_CONV, 3, (qir_value *[]){padded, w, b});
  set_ints(IMP, op, "strides", 1, &one);
  set_ints(IMP, op, "pads", 2, zero2);
  set_ints(IMP, op, "dilations", 1, &one);
  set_i(IMP, op, "group", C);
  qir_value *y = op_end(IMP, op, NULL);
  if (strcmp(act, "none")) y = emit2(IMP, QIR_OP_MUL, y, emit1(IMP, QIR_OP_SIGMOID, y));
  if (!node_set_out(nc, 0, y)) return false;
  if (wants_out(nc, 1)) nc->out[1] = slice_last(IMP, padded, L, L + k - 1, 1);
  return true;
}

/* QLinearConv: dequantise x and w (per-tensor, or per output channel for w),
 * convolve in f32 with the i32 bias scaled by x_scale * w_scale, quantise. */
static bool cv_qlinear_conv(node_ctx *nc) {
  if (!node_need_inputs(nc, 8)) return false;
  qir_value *x = IN(0), *w = IN(3);
  if (x->type.rank < 3 || w->type.rank != x->type.rank) return node_fail(nc, "x and w must be [N, C, ...] and [M, C/group, ...]");
  int r = x->type.rank;
  int64_t M = w->type.dims[0];
  qir_value *xs = emit_reshape(IMP, emit_cast(IMP, IN(1), QIR_F32), 0, NULL);
  qir_value *xf = emit2(IMP, QIR_OP_MUL, emit2(IMP, QIR_OP_SUB, emit_cast(IMP, x, QIR_F32), emit_reshape(IMP, emit_cast(IMP, IN(2), QIR_F32), 0, NULL)), xs);
  int64_t nw = qir_type_numel(&IN(4)->type);
  if (nw != 1 && nw != M) return node_fail(nc, "w_scale must be a scalar or one per output channel");
  qir_value *ws = emit_reshape(IMP, emit_cast(IMP, IN(4), QIR_F32), r, (int64_t[QIR_MAX_RANK]){nw, 1, 1, 1, 1, 1, 1, 1});
  qir_value *wz = emit_cast(IMP, IN(5), QIR_F32);
  wz = emit_reshape(IMP, wz, r, (int64_t[QIR_MAX_RANK]){qir_type_numel(&IN(5)->type), 1, 1, 1, 1, 1, 1, 1});
  qir_value *wf = emit2(IMP, QIR_OP_MUL, emit2(IMP, QIR_OP_SUB, emit_cast(IMP, w, QIR_F32), wz), ws);
  qir_value *bias = const_splat(IMP, qir_type_make(QIR_F32, 1, &M), 0);
  if (IN(8)) {
    qir_value *bs = emit2(IMP, QIR_OP_MUL, emit_reshape(IMP, emit_cast(IMP, IN(4), QIR_F32), 1, &nw), xs);
    bias = emit2(IMP, QIR_OP_MUL, emit_cast(IMP, IN(8), QIR_F32), bs);
    if (bias && bias->type.dims[0] != M) bias = emit2(IMP, QIR_OP_ADD, bias, const_splat(IMP, qir_type_make(QIR_F32, 1, &M), 0));
  }
  if (!xf || !wf || !bias) return false;
  int ns = r - 2;
  int64_t k[QIR_MAX_RANK], st[QIR_MAX_RANK], dil[QIR_MAX_RANK], pads[2 * QIR_MAX_RANK];
  if (attr_ints(nc, "kernel_shape", k, QIR_MAX_RANK) < 0) for (int i = 0; i < ns; i++) k[i] = w->type.dims[2 + i];
  if (attr_ints(nc, "strides", st, QIR_MAX_RANK) < 0) for (int i = 0; i < ns; i++) st[i] = 1;
  if (attr_ints(nc, "dilations", dil, QIR_MAX_RANK) < 0) for (int i = 0; i < ns; i++) dil[i] = 1;
  if (attr_ints(nc, "pads", pads, 2 * QIR_MAX_RANK) < 0) for (int i = 0; i < 2 * ns; i++) pads[i] = 0;
  if (strcmp(attr_str(nc, "auto_pad", "NOTSET"), "NOTSET")) return node_fail(nc, "QLinearConv with auto_pad is not supported");
  qir_op *op = op_begin(IMP, QIR_OP_CONV, 3, (qir_value *[]){xf, wf, bias});
  set_ints(IMP, op, "strides", ns, st);
  set_ints(IMP, op, "pads", 2 * ns, pads);
  set_ints(IMP, op, "dilations", ns, dil);
  set_i(IMP, op, "group", attr_int(nc, "group", 1));
  qir_value *y = op_end(IMP, op, NULL);
  qir_value *ys = emit_reshape(IMP, IN(6), 0, NULL), *yz = emit_reshape(IMP, IN(7), 0, NULL);
  return node_set_out(nc, 0, quantize(nc, y, ys, yz, IN(7)->type.dtype));
}

/* LinearAttention (opset 27): the recurrence over time steps, unrolled (the
 * step count is static): per step the state [B, Hkv, dk, dv] decays by
 * exp(decay) (gated rules), the value is corrected by what the state already
 * holds for the key (delta rules), the key-value outer product is added, and
 * each query head reads its KV head's state.  In f32. */
#define LINEAR_ATTENTION_MAX_STEPS 256
static bool cv_linear_attention(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  importer *imp = IMP;
  const char *rule = attr_str(nc, "update_rule", "gated_delta");
  bool gating = !strcmp(rule, "gated") || !strcmp(rule, "gated_delta"), delta = !strcmp(rule, "delta") || !strcmp(rule, "gated_delta");
  if (!gating && !delta && strcmp(rule, "linear")) return node_fail(nc, "update_rule must be linear, gated, delta or gated_delta");
  int64_t hq = attr_int(nc, "q_num_heads", 0), hkv = attr_int(nc, "kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv) return node_fail(nc, "q_num_heads must be a positive multiple of kv_num_heads");
  qir_value *q = IN(0), *k = IN(1), *v = IN(2), *past = IN(3), *decay = IN(4), *beta = IN(5), *erase = IN(6);
  if (gating != (decay != NULL)) return node_fail(nc, "decay is required by the gated rules and forbidden otherwise");
  if (delta != (beta != NULL)) return node_fail(nc, "beta is required by the delta rules and forbidden otherwise");
  if (erase && !delta) return node_fail(nc, "erase_gate needs a delta rule");
  if (q->type.rank != 3 || k->type.rank != 3 || v->type.rank != 3) return node_fail(nc, "query, key and value must be [B, T, H*D]");
  int64_t B = q->type.dims[0], T = q->type.dims[1];
  if (q->type.dims[2] % hq || k->type.dims[2] % hkv || v->type.dims[2] % hkv) return node_fail(nc, "hidden sizes must divide by the head counts");
  int64_t dk = q->type.dims[2] / hq, dv = v->type.dims[2] / hkv, G = hq / hkv;
  if (k->type.dims[2] != hkv * dk || k->type.dims[0] != B || v->type.dims[0] != B || k->type.dims[1] != T || v->type.dims[1] != T)
    return node_fail(nc, "query, key and value shapes do not match");
  if (T > LINEAR_ATTENTION_MAX_STEPS) return node_fail(nc, "more than 256 time steps (the recurrence is unrolled)");
  double scale = attr_float(nc, "scale", 0);
  if (scale == 0) scale = 1 / sqrt((double)dk);
  static const int64_t perm[4] = {0, 2, 1, 3};
  /* [B, T, H*D] -> f32 [B, H, T, D] */
  qir_value *q4 = emit_transpose(imp, reshape_to(imp, emit_cast(imp, q, QIR_F32), 4, B, T, hq, dk, 0), 4, perm);
  qir_value *k4 = emit_transpose(imp, reshape_to(imp, emit_cast(imp, k, QIR_F32), 4, B, T, hkv, dk, 0), 4, perm);
  qir_value *v4 = emit_transpose(imp, reshape_to(imp, emit_cast(imp, v, QIR_F32), 4, B, T, hkv, dv, 0), 4, perm);
  qir_value *d4 = NULL, *b4 = NULL, *e4 = NULL;
  int64_t dlast = 0, blast = 0;
  if (decay) {
    dlast = decay->type.rank == 3 ? decay->type.dims[2] : -1;
    if (dlast != hkv && dlast != hkv * dk) return node_fail(nc, "decay must be [B, T, kv_heads] or [B, T, kv_heads*d_k]");
    d4 = emit_transpose(imp, reshape_to(imp, emit_cast(imp, decay, QIR_F32), 4, B, T, hkv, dlast / hkv, 0), 4, perm);
  }
  if (beta) {
    blast = beta->type.rank == 3 ? beta->type.dims[2] : -1;
    if (blast != hkv && blast != 1) return node_fail(nc, "beta must be [B, T, kv_heads] or [B, T, 1]");
    b4 = emit_transpose(imp, reshape_to(imp, emit_cast(imp, beta, QIR_F32), 4, B, T, blast, 1, 0), 4, perm);
  }
  if (erase) {
    if (erase->type.rank != 3 || erase->type.dims[2] != hkv * dk) return node_fail(nc, "erase_gate must be [B, T, kv_heads*d_k]");
    e4 = emit_transpose(imp, reshape_to(imp, emit_cast(imp, erase, QIR_F32), 4, B, T, hkv, dk, 0), 4, perm);
  }
  qir_value *state;
  if (past) {
    if (past->type.rank != 4 || past->type.dims[0] != B || past->type.dims[1] != hkv || past->type.dims[2] != dk || past->type.dims[3] != dv)
      return node_fail(nc, "past_state must be [B, kv_heads, d_k, d_v]");
    state = emit_cast(imp, past, QIR_F32);
  } else {
    int64_t sd[4] = {B, hkv, dk, dv};
    state = const_splat(imp, qir_type_make(QIR_F32, 4, sd), 0);
  }
  qir_value **outs = calloc((size_t)T + 1, sizeof *outs);
  if (!outs) abort();
  for (int64_t t = 0; t < T && state; t++) {
    qir_value *ti = const_scalar(imp, QIR_I64, (double)t);
    qir_value *kt = gather(imp, QIR_OP_GATHER, k4, ti, 2), *vt = gather(imp, QIR_OP_GATHER, v4, ti, 2); /* [B, Hkv, D] */
    if (gating) {
      qir_value *g = gather(imp, QIR_OP_GATHER, d4, ti, 2); /* [B, Hkv, 1 | dk] */
      state = emit2(imp, QIR_OP_MUL, state, emit_insert_unit_axis(imp, emit1(imp, QIR_OP_EXP, g), 3));
    }
    if (delta) {
      qir_value *ke = erase ? emit2(imp, QIR_OP_MUL, gather(imp, QIR_OP_GATHER, e4, ti, 2), kt) : kt;
      qir_value *got = reshape_to(imp, emit2(imp, QIR_OP_MATMUL, emit_insert_unit_axis(imp, ke, 2), state), 3, B, hkv, dv, 0, 0);
      qir_value *bt = gather(imp, QIR_OP_GATHER, b4, ti, 2); /* [B, Hkv | 1, 1] */
      vt = emit2(imp, QIR_OP_MUL, bt, emit2(imp, QIR_OP_SUB, vt, got));
    }
    state = emit2(imp, QIR_OP_ADD, state, emit2(imp, QIR_OP_MUL, emit_insert_unit_axis(imp, kt, 3), emit_insert_unit_axis(imp, vt, 2)));
    qir_value *qt = reshape_to(imp, gather(imp, QIR_OP_GATHER, q4, ti, 2), 5, B, hkv, G, 1, dk);
    qir_value *read = emit2(imp, QIR_OP_MATMUL, qt, reshape_to(imp, state, 5, B, hkv, 1, dk, dv)); /* [B, Hkv, G, 1, dv] */
    outs[t] = emit2(imp, QIR_OP_MUL, reshape_to(imp, read, 4, B, hq, 1, dv, 0), const_scalar(imp, QIR_F32, scale));
    if (!outs[t]) state = NULL;
  }
  qir_value *y = NULL;
  if (state) {
    qir_op *op = op_begin(imp, QIR_OP_CONCAT, (int)T, outs);
    set_i(imp, op, "axis", 2);
    y = op_end(imp, op, NULL);
  }
  free(outs);
  y = reshape_to(imp, emit_transpose(imp, y, 4, perm), 3, B, T, hq * dv, 0, 0);
  if (!node_set_out(nc, 0, emit_cast(imp, y, q->type.dtype))) return false;
  if (wants_out(nc, 1)) nc->out[1] = emit_cast(imp, state, past ? past->type.dtype : q->type.dtype);
  return true;
}

/* RoiAlign mode max, as ONNX's reference and ONNX Runtime define it: per
 * sampling point the largest of its four bilinear corner terms w·x (not the
 * interpolated value), then the largest over the bin's points; points outside
 * [-1, D] count as 0.  A point is clamped to >= 0; at or past the last pixel
 * both corners are the last pixel.  The corners are read by nearest-pixel
 * grid_samples at integer coordinates. */
static qir_value *roi_align_max(importer *imp, qir_value *xr, qir_value *const coord[2], qir_value *const inside[2],
                                int64_t R, int64_t C, int64_t H, int64_t W, int64_t oh, int64_t ow, int64_t sr) {
  qir_dtype dt = xr->type.dtype;
  qir_value *pos[2][2], *wt[2][2]; /* per axis (0: y, 1: x): low / high pixel, and their weights */
  for (int a = 0; a < 2; a++) {
    double last = (double)((a ? W : H) - 1);
    qir_value *c = emit2(imp, QIR_OP_MAX, coord[a], const_scalar(imp, dt, 0));
    qir_value *lo = emit1(imp, QIR_OP_FLOOR, c);
    qir_value *edge = emit2(imp, QIR_OP_GREATER_EQUAL, lo, const_scalar(imp, dt, last));
    qir_value *l_ = const_scalar(imp, dt, last);
    lo = where(imp, edge, l_, lo);
    c = where(imp, edge, l_, c);
    pos[a][0] = lo;
    pos[a][1] = where(imp, edge, l_, emit2(imp, QIR_OP_ADD, lo, const_scalar(imp, dt, 1)));
    wt[a][1] = emit2(imp, QIR_OP_SUB, c, lo);                             /* l */
    wt[a][0] = emit2(imp, QIR_OP_SUB, const_scalar(imp, dt, 1), wt[a][1]); /* h = 1 - l */
  }
  int64_t MH = oh * sr, MW = ow * sr, fd[4] = {R, MH, MW, 1};
  qir_value *zeros = const_splat(imp, qir_type_make(dt, 4, fd), 0), *best = NULL;
  for (int cy = 0; cy < 2; cy++)
    for (int cx = 0; cx < 2; cx++) {
      qir_value *gx = emit2(imp, QIR_OP_SUB, emit2(imp, QIR_OP_MUL, pos[1][cx], const_scalar(imp, dt, 2.0 / (double)(W - 1))), const_scalar(imp, dt, 1));
      qir_value *gy = emit2(imp, QIR_OP_SUB, emit2(imp, QIR_OP_MUL, pos[0][cy], const_scalar(imp, dt, 2.0 / (double)(H - 1))), const_scalar(imp, dt, 1));
      gx = emit2(imp, QIR_OP_ADD, reshape_to(imp, gx, 4, R, 1, MW, 1, 0), zeros);
      gy = emit2(imp, QIR_OP_ADD, reshape_to(imp, gy, 4, R, MH, 1, 1, 0), zeros);
      qir_op *op = op_begin(imp, QIR_OP_GRID_SAMPLE, 2, (qir_value *[]){xr, concat2(imp, gx, gy, 3)});
      set_w(imp, op, "mode", "nearest");
      set_w(imp, op, "padding_mode", "border");
      set_i(imp, op, "align_corners", 1);
      qir_value *v = op_end(imp, op, NULL); /* [R, C, MH, MW] */
      qir_value *w = emit2(imp, QIR_OP_MUL, reshape_to(imp, wt[0][cy], 4, R, 1, MH, 1, 0), reshape_to(imp, wt[1][cx], 4, R, 1, 1, MW, 0));
      qir_value *term = emit2(imp, QIR_OP_MUL, w, v);
      best = best ? emit2(imp, QIR_OP_MAX, best, term) : term;
    }
  qir_value *mask = emit2(imp, QIR_OP_AND, reshape_to(imp, inside[0], 4, R, 1, MH, 1, 0), reshape_to(imp, inside[1], 4, R, 1, 1, MW, 0));
  best = where(imp, mask, best, const_scalar(imp, dt, 0));
  int64_t d6[6] = {R, C, oh, sr, ow, sr}, axes[2] = {3, 5};
  return reduce(imp, QIR_OP_REDUCE_MAX, emit_reshape(imp, best, 6, d6), 2, axes, 0);
}

/* RoiAlign (a fixed sampling_ratio; mode max: roi_align_max): mode avg takes
 * each RoI's sampling points as a grid_sample grid (pixel coordinates, align_corners, border: ONNX clamps
 * points in [-1, 0) and (D-1, D] to the edge), points farther out masked to 0,
 * then the mean over each bin's points. */
static bool cv_roi_align(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  importer *imp = IMP;
  qir_value *x = IN(0), *rois = IN(1), *bidx = IN(2);
  if (x->type.rank != 4 || !qir_dtype_is_float(x->type.dtype)) return node_fail(nc, "X must be a float [N, C, H, W]");
  if (rois->type.rank != 2 || rois->type.dims[1] != 4 || bidx->type.rank != 1 || bidx->type.dims[0] != rois->type.dims[0])
    return node_fail(nc, "rois must be [R, 4] and batch_indices [R]");
  const char *mode = attr_str(nc, "mode", "avg");
  bool max_mode = !strcmp(mode, "max");
  if (!max_mode && strcmp(mode, "avg")) return node_fail(nc, "mode must be avg or max");
  int64_t oh = attr_int(nc, "output_height", 1), ow = attr_int(nc, "output_width", 1), sr = attr_int(nc, "sampling_ratio", 0);
  if (oh < 1 || ow < 1) return node_fail(nc, "output_height and output_width must be positive");
  if (sr <= 0) return node_fail(nc, "sampling_ratio 0 (a per-RoI adaptive grid) is not supported");
  if (oh * sr > 4096 || ow * sr > 4096) return node_fail(nc, "sampling grid too large");
  bool half = !strcmp(attr_str(nc, "coordinate_transformation_mode", "half_pixel"), "half_pixel");
  double scale = attr_float(nc, "spatial_scale", 1), off = half ? 0.5 : 0;
  int64_t R = rois->type.dims[0], C = x->type.dims[1], H = x->type.dims[2], W = x->type.dims[3];
  if (H < 2 || W < 2) return node_fail(nc, "RoiAlign needs an image of at least 2 x 2");
  qir_dtype dt = x->type.dtype;
  qir_value *rf = emit_cast(imp, rois, dt);
  /* per RoI and axis (0: y, 1: x): sample coordinates [R, n*sr] */
  qir_value *coord[2], *inside[2];
  for (int a = 0; a < 2; a++) {
    int64_t n = a ? ow : oh, D = a ? W : H;
    qir_op *op;
    qir_value *lo = NULL, *hi = NULL;
    for (int e = 0; e < 2; e++) { /* rois are (x1, y1, x2, y2) */
      int64_t s[2] = {0, (a ? 0 : 1) + 2 * e}, en[2] = {R, s[1] + 1}, st[2] = {1, 1};
      op = op_begin(imp, QIR_OP_SLICE, 1, &rf);
      set_ints(imp, op, "starts", 2, s);
      set_ints(imp, op, "ends", 2, en);
      set_ints(imp, op, "steps", 2, st);
      qir_value *v = emit2(imp, QIR_OP_SUB, emit2(imp, QIR_OP_MUL, op_end(imp, op, NULL), const_scalar(imp, dt, scale)), const_scalar(imp, dt, off));
      if (e == 0) lo = v;
      else hi = v;
    }
    qir_value *len = emit2(imp, QIR_OP_SUB, hi, lo);
    if (!half) len = emit2(imp, QIR_OP_MAX, len, const_scalar(imp, dt, 1));
    qir_value *bin = emit2(imp, QIR_OP_DIV, len, const_scalar(imp, dt, (double)n)); /* [R, 1] */
    int64_t m = n * sr;
    char *buf = calloc((size_t)m, (size_t)qir_dtype_size(dt));
    if (!buf) abort();
    for (int64_t i = 0; i < m; i++) qir_store_elem(dt, buf, i, (double)(i / sr) + ((double)(i % sr) + 0.5) / (double)sr);
    int64_t md[2] = {1, m};
    qir_value *steps = const_data(imp, qir_type_make(dt, 2, md), buf);
    free(buf);
    coord[a] = emit2(imp, QIR_OP_ADD, lo, emit2(imp, QIR_OP_MUL, steps, bin)); /* [R, m] */
    inside[a] = emit2(imp, QIR_OP_AND, emit2(imp, QIR_OP_GREATER_EQUAL, coord[a], const_scalar(imp, dt, -1)),
                      emit2(imp, QIR_OP_LESS_EQUAL, coord[a], const_scalar(imp, dt, (double)D)));
  }
  int64_t MH = oh * sr, MW = ow * sr;
  /* grid [R, MH, MW, 2] = (x, y) normalised for align_corners: 2 v / (D - 1) - 1 */
  qir_value *gx = emit2(imp, QIR_OP_SUB, emit2(imp, QIR_OP_MUL, coord[1], const_scalar(imp, dt, 2.0 / (double)(W - 1))), const_scalar(imp, dt, 1));
  qir_value *gy = emit2(imp, QIR_OP_SUB, emit2(imp, QIR_OP_MUL, coord[0], const_scalar(imp, dt, 2.0 / (double)(H - 1))), const_scalar(imp, dt, 1));
  int64_t fd[4] = {R, MH, MW, 1};
  qir_value *zeros = const_splat(imp, qir_type_make(dt, 4, fd), 0);
  gx = emit2(imp, QIR_OP_ADD, reshape_to(imp, gx, 4, R, 1, MW, 1, 0), zeros);
  gy = emit2(imp, QIR_OP_ADD, reshape_to(imp, gy, 4, R, MH, 1, 1, 0), zeros);
  qir_value *grid = concat2(imp, gx, gy, 3);
  qir_value *xr = gather(imp, QIR_OP_GATHER, x, emit_cast(imp, bidx, QIR_I64), 0); /* [R, C, H, W] */
  if (!grid || !xr) return false;
  if (max_mode) return node_set_out(nc, 0, roi_align_max(imp, xr, coord, inside, R, C, H, W, oh, ow, sr));
  qir_op *op = op_begin(imp, QIR_OP_GRID_SAMPLE, 2, (qir_value *[]){xr, grid});
  set_w(imp, op, "mode", "linear");
  set_w(imp, op, "padding_mode", "border");
  set_i(imp, op, "align_corners", 1);
  qir_value *smp = op_end(imp, op, NULL); /* [R, C, MH, MW] */
  qir_value *mask = emit2(imp, QIR_OP_AND, reshape_to(imp, inside[0], 4, R, 1, MH, 1, 0), reshape_to(imp, inside[1], 4, R, 1, 1, MW, 0));
  smp = emit2(imp, QIR_OP_MUL, smp, emit_cast(imp, mask, dt));
  int64_t d6[6] = {R, C, oh, sr, ow, sr}, axes[2] = {3, 5};
  return node_set_out(nc, 0, reduce(imp, QIR_OP_REDUCE_MEAN, emit_reshape(imp, smp, 6, d6), 2, axes, 0));
}

/* DeformConv (2-D): each kernel tap's input sampled at its offset position
 * (bilinear, zero outside: a grid_sample with zeros padding on pixel
 * coordinates) per offset group, times the mask, then the grouped convolution
 * as one matmul of W [group, oC/group, C/group * taps] with the samples. */
static bool cv_deform_conv(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  importer *imp = IMP;
  qir_value *x = IN(0), *w = IN(1), *off = IN(2), *b = IN(3), *mask = IN(4);
  if (x->type.rank != 4 || w->type.rank != 4 || off->type.rank != 4) return node_fail(nc, "only 2-D DeformConv: X, W and offset must be 4-D");
  if (!qir_dtype_is_float(x->type.dtype)) return node_fail(nc, "X must be a float tensor");
  qir_dtype dt = x->type.dtype;
  int64_t N = x->type.dims[0], C = x->type.dims[1], H = x->type.dims[2], W = x->type.dims[3];
  int64_t OC = w->type.dims[0], kh = w->type.dims[2], kw = w->type.dims[3];
  int64_t ks[2] = {kh, kw}, st[2] = {1, 1}, dl[2] = {1, 1}, pd[4] = {0, 0, 0, 0};
  if (attr_ints(nc, "kernel_shape", ks, 2) == 2 && (ks[0] != kh || ks[1] != kw)) return node_fail(nc, "kernel_shape does not match W");
  int ns = attr_ints(nc, "strides", st, 2), nd = attr_ints(nc, "dilations", dl, 2), np = attr_ints(nc, "pads", pd, 4);
  if ((ns >= 0 && ns != 2) || (nd >= 0 && nd != 2) || (np >= 0 && np != 4)) return node_fail(nc, "strides, dilations and pads must have 2, 2 and 4 entries");
  int64_t group = attr_int(nc, "group", 1), og = attr_int(nc, "offset_group", 1);
  if (st[0] < 1 || st[1] < 1 || dl[0] < 1 || dl[1] < 1 || pd[0] < 0 || pd[1] < 0 || pd[2] < 0 || pd[3] < 0)
    return node_fail(nc, "strides and dilations must be positive, pads not negative");
  if (group < 1 || C % group || OC % group || w->type.dims[1] != C / group) return node_fail(nc, "group does not divide the channels of X and W");
  if (og < 1 || C % og) return node_fail(nc, "offset_group must divide the channels");
  if (H < 2 || W < 2) return node_fail(nc, "DeformConv needs an image of at least 2 x 2");
  int64_t oh = (H + pd[0] + pd[2] - (dl[0] * (kh - 1) + 1)) / st[0] + 1, ow = (W + pd[1] + pd[3] - (dl[1] * (kw - 1) + 1)) / st[1] + 1;
  int64_t K = kh * kw;
  if (oh < 1 || ow < 1) return node_fail(nc, "the kernel does not fit the padded image");
  if (off->type.dims[0] != N || off->type.dims[1] != og * 2 * K || off->type.dims[2] != oh || off->type.dims[3] != ow)
    return node_fail(nc, "offset must be [N, offset_group * 2 * kH * kW, oH, oW]");
  if (mask && (mask->type.rank != 4 || mask->type.dims[0] != N || mask->type.dims[1] != og * K || mask->type.dims[2] != oh || mask->type.dims[3] != ow))
    return node_fail(nc, "mask must be [N, offset_group * kH * kW, oH, oW]");
  if (b && (b->type.rank != 1 || b->type.dims[0] != OC)) return node_fail(nc, "B must be [oC]");
  if (N * og * K * oh * ow > FOLD_LIMIT * 64) return node_fail(nc, "sampling grid too large");
  /* positions: base (per tap and output row / column) + offset; offset is [N, og, K, 2 (dy, dx), oH, oW] */
  int64_t d6[6] = {N, og, K, 2, oh, ow};
  qir_value *o6 = emit_reshape(imp, emit_cast(imp, off, dt), 6, d6);
  qir_value *pos[2];
  for (int a = 0; a < 2; a++) {
    int64_t s6[6] = {0, 0, 0, a, 0, 0}, e6[6] = {N, og, K, a + 1, oh, ow}, t6[6] = {1, 1, 1, 1, 1, 1};
    qir_op *op = op_begin(imp, QIR_OP_SLICE, 1, &o6);
    set_ints(imp, op, "starts", 6, s6);
    set_ints(imp, op, "ends", 6, e6);
    set_ints(imp, op, "steps", 6, t6);
    int64_t d5[5] = {N, og, K, oh, ow};
    qir_value *d = emit_reshape(imp, op_end(imp, op, NULL), 5, d5);
    int64_t n_out = a ? ow : oh;
    char *buf = calloc((size_t)(K * n_out), (size_t)qir_dtype_size(dt));
    if (!buf) abort();
    for (int64_t k = 0; k < K; k++)
      for (int64_t o = 0; o < n_out; o++) {
        int64_t tap = a ? k % kw : k / kw;
        qir_store_elem(dt, buf, k * n_out + o, (double)(o * st[a] - pd[a] + tap * dl[a]));
      }
    int64_t bd[5] = {1, 1, K, a ? 1 : oh, a ? ow : 1};
    qir_value *bv = const_data(imp, qir_type_make(dt, 5, bd), buf);
    free(buf);
    double D = (double)(a ? W : H);
    /* normalised for align_corners: 2 p / (D - 1) - 1 */
    pos[a] = emit2(imp, QIR_OP_SUB, emit2(imp, QIR_OP_MUL, emit2(imp, QIR_OP_ADD, d, bv), const_scalar(imp, dt, 2.0 / (D - 1))), const_scalar(imp, dt, 1));
  }
  int64_t gd[5] = {N * og, K * oh, ow, 1, 0};
  qir_value *grid = concat2(imp, emit_reshape(imp, pos[1], 4, gd), emit_reshape(imp, pos[0], 4, gd), 3); /* (x, y) */
  int64_t xd[4] = {N * og, C / og, H, W};
  qir_value *xs = emit_reshape(imp, x, 4, xd);
  if (!grid || !xs) return false;
  qir_op *op = op_begin(imp, QIR_OP_GRID_SAMPLE, 2, (qir_value *[]){xs, grid});
  set_w(imp, op, "mode", "linear");
  set_w(imp, op, "padding_mode", "zeros");
  set_i(imp, op, "align_corners", 1);
  qir_value *smp = op_end(imp, op, NULL); /* [N*og, C/og, K*oH, oW] */
  int64_t sd[6] = {N, og, C / og, K, oh, ow};
  smp = emit_reshape(imp, smp, 6, sd);
  if (mask) {
    int64_t md[6] = {N, og, 1, K, oh, ow};
    smp = emit2(imp, QIR_OP_MUL, smp, emit_reshape(imp, emit_cast(imp, mask, dt), 6, md));
  }
  int64_t cg = C / group, ocg = OC / group;
  int64_t s4[4] = {N, group, cg * K, oh * ow}, w4[4] = {1, group, ocg, cg * K};
  qir_value *y = emit2(imp, QIR_OP_MATMUL, emit_reshape(imp, w, 4, w4), emit_reshape(imp, smp, 4, s4)); /* [N, group, ocg, oH*oW] */
  int64_t yd[4] = {N, OC, oh, ow};
  y = emit_reshape(imp, y, 4, yd);
  if (b) {
    int64_t bd[4] = {1, OC, 1, 1};
    y = emit2(imp, QIR_OP_ADD, y, emit_reshape(imp, b, 4, bd));
  }
  return node_set_out(nc, 0, y);
}

/* ---------------------------------------------------------------- ai.onnx.ml */

static bool cv_binarizer(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = IN(0);
  qir_value *gt = emit2(IMP, QIR_OP_GREATER, x, const_scalar(IMP, x->type.dtype, attr_float(nc, "threshold", 0)));
  return node_set_out(nc, 0, emit_cast(IMP, gt, x->type.dtype));
}

static bool cv_array_feature_extractor(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0);
  if (x->type.rank < 1) return node_fail(nc, "input must have rank >= 1");
  int64_t n = qir_type_numel(&IN(1)->type);
  return node_set_out(nc, 0, gather(IMP, QIR_OP_GATHER, x, emit_reshape(IMP, IN(1), 1, &n), x->type.rank - 1));
}

/* ---------------------------------------------------------------- ai.onnx.preview.training */

/* Adagrad, Momentum, Adam: one update of n tensors.  Inputs R (rate), T
 * (step count), then n X, n G and one or two n-lists of state; outputs the n
 * new X, then the new states. */
static bool cv_optimizer(node_ctx *nc) {
  const char *t = nc->node->op_type;
  int n_state = !strcmp(t, "Adam") ? 2 : 1, per = 2 + n_state;
  if (nc->n_in < 2 + per || (nc->n_in - 2) % per) return node_fail(nc, "expects R, T and a multiple of X, G and the state tensors");
  if (!node_need_inputs(nc, nc->n_in)) return false;
  int n = (nc->n_in - 2) / per;
  qir_value *R = emit_reshape(IMP, IN(0), 0, NULL), *T = emit_reshape(IMP, IN(1), 0, NULL);
  if (!R || !T || !qir_dtype_is_float(R->type.dtype)) return node_fail(nc, "R must be a float scalar");
  qir_dtype dt = R->type.dtype;
  double norm_coef = attr_float(nc, "norm_coefficient", 0);
  qir_value *Tf = emit_cast(IMP, T, dt), *t_pos = emit2(IMP, QIR_OP_GREATER, T, const_scalar(IMP, T->type.dtype, 0));
  for (int i = 0; i < n; i++) {
    qir_value *X = IN(2 + i), *G = IN(2 + n + i), *S1 = IN(2 + 2 * n + i), *S2 = n_state > 1 ? IN(2 + 3 * n + i) : NULL;
    qir_value *g = norm_coef != 0 ? emit2(IMP, QIR_OP_ADD, emit2(IMP, QIR_OP_MUL, const_scalar(IMP, dt, norm_coef), X), G) : G;
    qir_value *xn = NULL, *s1 = NULL, *s2 = NULL;
    if (!strcmp(t, "Adagrad")) {
      qir_value *r = emit2(IMP, QIR_OP_DIV, R, emit2(IMP, QIR_OP_ADD, const_scalar(IMP, dt, 1),
                                                       emit2(IMP, QIR_OP_MUL, Tf, const_scalar(IMP, dt, attr_float(nc, "decay_factor", 0)))));
      s1 = emit2(IMP, QIR_OP_ADD, S1, emit2(IMP, QIR_OP_MUL, g, g));
      qir_value *h = emit2(IMP, QIR_OP_ADD, emit1(IMP, QIR_OP_SQRT, s1), const_scalar(IMP, dt, attr_float(nc, "epsilon", 1e-6)));
      xn = emit2(IMP, QIR_OP_SUB, X, emit2(IMP, QIR_OP_DIV, emit2(IMP, QIR_OP_MUL, r, g), h));
    } else if (!strcmp(t, "Momentum")) {
      double alpha = attr_float(nc, "alpha", 0), beta = attr_float(nc, "beta", 0);
      const char *mode = attr_str(nc, "mode", "standard");
      if (strcmp(mode, "standard") && strcmp(mode, "nesterov")) return node_fail(nc, "mode must be standard or nesterov");
      qir_value *b = where(IMP, t_pos, const_scalar(IMP, dt, beta), const_scalar(IMP, dt, 1));
      s1 = emit2(IMP, QIR_OP_ADD, emit2(IMP, QIR_OP_MUL, const_scalar(IMP, dt, alpha), S1), emit2(IMP, QIR_OP_MUL, b, g));
      qir_value *step = !strcmp(mode, "standard") ? s1 : emit2(IMP, QIR_OP_ADD, g, emit2(IMP, QIR_OP_MUL, const_scalar(IMP, dt, alpha), s1));
      xn = emit2(IMP, QIR_OP_SUB, X, emit2(IMP, QIR_OP_MUL, R, step));
    } else {
      double alpha = attr_float(nc, "alpha", 0.9), beta = attr_float(nc, "beta", 0.999);
      s1 = emit2(IMP, QIR_OP_ADD, emit2(IMP, QIR_OP_MUL, const_scalar(IMP, dt, alpha), S1), emit2(IMP, QIR_OP_MUL, const_scalar(IMP, dt, 1 - alpha), g));
      s2 = emit2(IMP, QIR_OP_ADD, emit2(IMP, QIR_OP_MUL, const_scalar(IMP, dt, beta), S2),
                 emit2(IMP, QIR_OP_MUL, const_scalar(IMP, dt, 1 - beta), emit2(IMP, QIR_OP_MUL, g, g)));
      qir_value *h = emit2(IMP, QIR_OP_ADD, emit1(IMP, QIR_OP_SQRT, s2), const_scalar(IMP, dt, attr_float(nc, "epsilon", 1e-6)));
      qir_value *bc = emit1(IMP, QIR_OP_SQRT, emit2(IMP, QIR_OP_SUB, const_scalar(IMP, dt, 1), emit2(IMP, QIR_OP_POW, const_scalar(IMP, dt, beta), Tf)));
      qir_value *ac = emit2(IMP, QIR_OP_SUB, const_scalar(IMP, dt, 1), emit2(IMP, QIR_OP_POW, const_scalar(IMP, dt, alpha), Tf));
      qir_value *ra = where(IMP, t_pos, emit2(IMP, QIR_OP_DIV, emit2(IMP, QIR_OP_MUL, R, bc), ac), R);
      xn = emit2(IMP, QIR_OP_SUB, X, emit2(IMP, QIR_OP_MUL, ra, emit2(IMP, QIR_OP_DIV, s1, h)));
      double post = attr_float(nc, "norm_coefficient_post", 0);
      if (post != 0) xn = emit2(IMP, QIR_OP_MUL, xn, const_scalar(IMP, dt, 1 - post));
    }
    if (!xn || !s1 || (n_state > 1 && !s2)) return false;
    if (i < nc->n_out) nc->out[i] = xn;
    if (n + i < nc->n_out) nc->out[n + i] = s1;
    if (s2 && 2 * n + i < nc->n_out) nc->out[2 * n + i] = s2;
  }
  return true;
}

/* ---------------------------------------------------------------- quantisation */

/* A per-tensor, per-axis (1-D along axis) or blocked (same rank, block_size
 * along axis) parameter p brought to broadcast against x. */
static qir_value *quant_param(node_ctx *nc, qir_value *p, qir_value *x, int64_t axis, int64_t block) {
  if (!p) return NULL;
  int r = x->type.rank;
  if (qir_type_numel(&p->type) == 1 && block == 0) return emit_reshape(IMP, p, 0, NULL);
  if (axis < 0) {
    node_fail(nc, "axis out of range");
    return NULL;
  }
  if (block > 0) {
    if (p->type.rank != r) {
      node_fail(nc, "blocked quantisation wants a parameter of the input's rank");
      return NULL;
    }
    int64_t D = x->type.dims[axis];
    for (int i = 0; i < r; i++)
      if (i == axis ? p->type.dims[i] != (D + block - 1) / block : p->type.dims[i] != x->type.dims[i]) {
        node_fail(nc, "parameter shape does not match block_size");
        return NULL;
      }
    int64_t *idx = malloc(sizeof *idx * (size_t)(D + 1));
    if (!idx) abort();
    for (int64_t i = 0; i < D; i++) idx[i] = i / block;
    qir_value *g = gather(IMP, QIR_OP_GATHER, p, const_i64s(IMP, (int)D, idx), axis);
    free(idx);
    return g;
  }
  if (p->type.rank != 1 || p->type.dims[0] != x->type.dims[axis]) {
    node_fail(nc, "per-axis parameter must be 1-D with the axis' extent");
    return NULL;
  }
  int64_t d[QIR_MAX_RANK];
  for (int i = axis; i < r; i++) d[i - axis] = i == axis ? p->type.dims[0] : 1;
  return emit_reshape(IMP, p, r - (int)axis, d);
}

static bool quant_axis(node_ctx *nc, qir_value *x, int64_t *axis, int64_t *block) {
  /* -1 when out of range: only per-axis and blocked parameters read it */
  *axis = norm_axis(attr_int(nc, "axis", 1), x->type.rank);
  *block = attr_int(nc, "block_size", 0);
  if (*block < 0) return node_fail(nc, "block_size must not be negative");
  return true;
}

static qir_value *dequantize(node_ctx *nc, qir_value *x, qir_value *scale, qir_value *zp, int64_t axis, int64_t block) {
  qir_dtype fdt = scale->type.dtype;
  if (!qir_dtype_is_float(fdt)) {
    node_fail(nc, "scale must be a float tensor");
    return NULL;
  }
  qir_value *s = quant_param(nc, scale, x, axis, block);
  qir_value *xf = emit_cast(IMP, x, QIR_F32);
  if (zp) xf = emit2(IMP, QIR_OP_SUB, xf, emit_cast(IMP, quant_param(nc, zp, x, axis, block), QIR_F32));
  return emit_cast(IMP, emit2(IMP, QIR_OP_MUL, xf, emit_cast(IMP, s, QIR_F32)), fdt);
}

static bool quant_range(qir_dtype dt, double *lo, double *hi) {
  switch (dt) {
  case QIR_U8: *lo = 0, *hi = 255; return true;
  case QIR_I8: *lo = -128, *hi = 127; return true;
  case QIR_U16: *lo = 0, *hi = 65535; return true;
  case QIR_I16: *lo = -32768, *hi = 32767; return true;
  case QIR_U4: *lo = 0, *hi = 15; return true;
  case QIR_I4: *lo = -8, *hi = 7; return true;
  case QIR_U2: *lo = 0, *hi = 3; return true;
  case QIR_I2: *lo = -2, *hi = 1; return true;
  default: return false;
  }
}

/* saturate(round_half_even(x / scale) + zp) in the zero point's type; for the
 * narrow float types cast(x / scale + zp) with the node's saturate. */
static qir_value *quantize(node_ctx *nc, qir_value *x, qir_value *s, qir_value *zp, qir_dtype to) {
  double lo, hi;
  if (qir_dtype_is_float(to) && qir_dtype_is_narrow(to) && to != QIR_F8E8M0) {
    int64_t saturate = attr_int(nc, "saturate", 1);
    if (saturate != 0 && saturate != 1) {
      node_fail(nc, "attribute 'saturate' must be 0 or 1");
      return NULL;
    }
    qir_value *q = emit2(IMP, QIR_OP_DIV, emit_cast(IMP, x, QIR_F32), emit_cast(IMP, s, QIR_F32));
    if (zp) q = emit2(IMP, QIR_OP_ADD, q, emit_cast(IMP, zp, QIR_F32));
    qir_type t = q->type;
    t.dtype = to;
    qir_op *op = op_begin_typed(IMP, QIR_OP_CAST, 1, &q, 1, &t);
    set_w(IMP, op, "to", qir_dtype_name(to));
    if (!saturate && to != QIR_F4E2M1) set_i(IMP, op, "saturate", 0);
    return op_end(IMP, op, NULL);
  }
  if (!quant_range(to, &lo, &hi)) {
    imp_error(IMP, "quantisation to %s is not supported (8-, 16-, 4- and 2-bit integer and the float8/float4 targets only)",
              qir_dtype_name(to));
    return NULL;
  }
  qir_value *q = emit1(IMP, QIR_OP_ROUND, emit2(IMP, QIR_OP_DIV, emit_cast(IMP, x, QIR_F32), emit_cast(IMP, s, QIR_F32)));
  if (zp) q = emit2(IMP, QIR_OP_ADD, q, emit_cast(IMP, zp, QIR_F32));
  q = emit3(IMP, QIR_OP_CLIP, q, const_scalar(IMP, QIR_F32, lo), const_scalar(IMP, QIR_F32, hi));
  return emit_cast(IMP, q, to);
}

static bool cv_dequantize(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  int64_t axis, block;
  if (!quant_axis(nc, IN(0), &axis, &block)) return false;
  return node_set_out(nc, 0, dequantize(nc, IN(0), IN(1), IN(2), axis, block));
}

static bool cv_quantize(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *x = IN(0);
  int64_t axis, block;
  if (!quant_axis(nc, x, &axis, &block)) return false;
  qir_dtype to = QIR_U8;
  const Onnx__AttributeProto *od = attr_find(nc, "output_dtype");
  if (IN(2)) to = IN(2)->type.dtype;
  else if (od && od->i && !onnx_dtype_to_qir((int32_t)od->i, &to)) return node_fail(nc, "output_dtype has no qir element type");
  qir_value *s = quant_param(nc, IN(1), x, axis, block);
  if (!s) return false;
  qir_value *zp = IN(2) ? quant_param(nc, IN(2), x, axis, block) : NULL;
  if (IN(2) && !zp) return false;
  return node_set_out(nc, 0, quantize(nc, x, s, zp, to));
}

/* DynamicQuantizeLinear: u8 with scale and zero point from the data's range
 * (which always includes 0). */
static bool cv_dynamic_quantize(node_ctx *nc) {
  if (!node_need_inputs(nc, 1)) return false;
  qir_value *x = emit_cast(IMP, IN(0), QIR_F32), *zero = const_scalar(IMP, QIR_F32, 0);
  qir_value *mx = emit2(IMP, QIR_OP_MAX, reduce_all(IMP, QIR_OP_REDUCE_MAX, x), zero);
  qir_value *mn = emit2(IMP, QIR_OP_MIN, reduce_all(IMP, QIR_OP_REDUCE_MIN, x), zero);
  qir_value *scale = emit2(IMP, QIR_OP_DIV, emit2(IMP, QIR_OP_SUB, mx, mn), const_scalar(IMP, QIR_F32, 255));
  qir_value *zpf = emit1(IMP, QIR_OP_ROUND, emit2(IMP, QIR_OP_SUB, zero, emit2(IMP, QIR_OP_DIV, mn, scale)));
  zpf = emit3(IMP, QIR_OP_CLIP, zpf, const_scalar(IMP, QIR_F32, 0), const_scalar(IMP, QIR_F32, 255));
  qir_value *zp = emit_cast(IMP, zpf, QIR_U8);
  if (!node_set_out(nc, 0, quantize(nc, x, scale, zp, QIR_U8))) return false;
  if (nc->n_out > 1) nc->out[1] = scale;
  if (nc->n_out > 2) nc->out[2] = zp;
  return scale && zp;
}

/* x - zero point in i32 (zp per tensor, or per row of a / column of b). */
static qir_value *int_centered(node_ctx *nc, qir_value *x, qir_value *zp, bool per_row) {
  qir_value *xi = emit_cast(IMP, x, QIR_I32);
  if (!zp) return xi;
  qir_value *z = emit_cast(IMP, zp, QIR_I32);
  if (qir_type_numel(&zp->type) == 1) z = emit_reshape(IMP, z, 0, NULL);
  else if (per_row && zp->type.rank == 1) {
    int64_t d[2] = {zp->type.dims[0], 1};
    z = emit_reshape(IMP, z, 2, d);
  }
  return emit2(IMP, QIR_OP_SUB, xi, z);
}

static bool cv_matmul_integer(node_ctx *nc) {
  if (!node_need_inputs(nc, 2)) return false;
  qir_value *a = int_centered(nc, IN(0), IN(2), true), *b = int_centered(nc, IN(1), IN(3), false);
  return node_set_out(nc, 0, emit2(IMP, QIR_OP_MATMUL, a, b));
}

/* QLinearMatMul: dequantise both sides (per-tensor, per-row of a, per-column
 * of b), multiply in f32, quantise to y's zero point type. */
static bool cv_qlinear_matmul(node_ctx *nc) {
  if (!node_need_inputs(nc, 8)) return false;
  qir_value *a = int_centered(nc, IN(0), IN(2), true), *b = int_centered(nc, IN(3), IN(5), false);
  qir_value *sa = emit_cast(IMP, IN(1), QIR_F32), *sb = emit_cast(IMP, IN(4), QIR_F32);
  if (qir_type_numel(&IN(1)->type) == 1) sa = emit_reshape(IMP, sa, 0, NULL);
  else if (IN(1)->type.rank == 1) {
    int64_t d[2] = {IN(1)->type.dims[0], 1};
    sa = emit_reshape(IMP, sa, 2, d);
  }
  if (qir_type_numel(&IN(4)->type) == 1) sb = emit_reshape(IMP, sb, 0, NULL);
  qir_value *af = emit2(IMP, QIR_OP_MUL, emit_cast(IMP, a, QIR_F32), sa);
  qir_value *bf = emit2(IMP, QIR_OP_MUL, emit_cast(IMP, b, QIR_F32), sb);
  qir_value *y = emit2(IMP, QIR_OP_MATMUL, af, bf);
  qir_value *zp = IN(7) && qir_type_numel(&IN(7)->type) == 1 ? emit_reshape(IMP, IN(7), 0, NULL) : IN(7);
  qir_value *ys = qir_type_numel(&IN(6)->type) == 1 ? emit_reshape(IMP, IN(6), 0, NULL) : IN(6);
  return node_set_out(nc, 0, quantize(nc, y, ys, zp, IN(7)->type.dtype));
}


/* ---------------------------------------------------------------- attention */

static qir_value *reshape_to(importer *imp, qir_value *x, int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                             int64_t d4) {
  int64_t d[5] = {d0, d1, d2, d3, d4};
  return emit_reshape(imp, x, rank, d);
}

/* [B, S, H*d] -> [B, H, S, d] */
static qir_value *split_heads(importer *imp, qir_value *x, int64_t heads) {
  const int64_t *d = x->type.dims;
  static const int64_t perm[4] = {0, 2, 1, 3};
  return emit_transpose(imp, reshape_to(imp, x, 4, d[0], d[1], heads, d[2] / heads, 0), 4, perm);
}

/* Attention (opset 23/24): softmax(Q K^T * scale + bias) V over heads, with
 * grouped KV heads (each KV head serves q_heads / kv_heads query heads, by a
 * 5-D broadcasting matmul, no copies), past/present KV concatenation, bool or
 * additive masks (padded with "masked" up to the total KV length), causal
 * masking aligned bottom-right to the past length, softcap (applied to the
 * scores before the bias) and the four qk_matmul_output modes. */
/* Attention's outputs: Y ([B, H, S, dv], back to [B, S, H*dv] for 3-D
 * inputs), present key and value (the concatenated K and V). */
static bool attention_outputs(node_ctx *nc, qir_value *y, int r, int64_t B, int64_t Hq, int64_t Sq, int64_t dv,
                              qir_value *k, qir_value *v) {
  if (r == 3) {
    static const int64_t perm[4] = {0, 2, 1, 3};
    y = reshape_to(IMP, emit_transpose(IMP, y, 4, perm), 3, B, Sq, Hq * dv, 0, 0);
  }
  if (!node_set_out(nc, 0, y)) return false;
  if (wants_out(nc, 1)) nc->out[1] = k;
  if (wants_out(nc, 2)) nc->out[2] = v;
  return true;
}

static bool cv_attention(node_ctx *nc) {
  if (!node_need_inputs(nc, 3)) return false;
  importer *imp = IMP;
  qir_value *q = IN(0), *k = IN(1), *v = IN(2), *mask = IN(3), *past_k = IN(4), *past_v = IN(5), *nonpad = IN(6);
  int r = q->type.rank;
  if (r != 3 && r != 4) return node_fail(nc, "Q must be 3-D or 4-D");
  if (k->type.rank != r || v->type.rank != r) return node_fail(nc, "Q, K and V must have the same rank");
  if (!qir_dtype_is_float(q->type.dtype)) return node_fail(nc, "Q must be a float tensor");
  if ((past_k == NULL) != (past_v == NULL)) return node_fail(nc, "past_key and past_value go together");
  int64_t B = q->type.dims[0];
  if (k->type.dims[0] != B || v->type.dims[0] != B) return node_fail(nc, "batch sizes differ");
  if (r == 3) {
    int64_t hq = attr_int(nc, "q_num_heads", 0), hkv = attr_int(nc, "kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0) return node_fail(nc, "3-D inputs need positive q_num_heads and kv_num_heads");
    if (q->type.dims[2] % hq || k->type.dims[2] % hkv || v->type.dims[2] % hkv)
      return node_fail(nc, "hidden sizes must be divisible by the head counts");
    q = split_heads(imp, q, hq);
    k = split_heads(imp, k, hkv);
    v = split_heads(imp, v, hkv);
    if (!q || !k || !v) return false;
  }
  int64_t Hq = q->type.dims[1], Sq = q->type.dims[2], dq = q->type.dims[3];
  int64_t Hkv = k->type.dims[1], dv = v->type.dims[3];
  if (k->type.dims[3] != dq) return node_fail(nc, "Q and K head sizes differ");
  if (v->type.dims[1] != Hkv || v->type.dims[2] != k->type.dims[2]) return node_fail(nc, "K and V shapes do not match");
  if (Hkv <= 0 || Hq % Hkv) return node_fail(nc, "q heads must be a multiple of kv heads");
  int64_t P = 0;
  if (past_k) {
    if (past_k->type.rank != 4 || past_v->type.rank != 4 || past_k->type.dims[1] != Hkv || past_k->type.dims[3] != dq ||
        past_v->type.dims[1] != Hkv || past_v->type.dims[3] != dv || past_k->type.dims[2] != past_v->type.dims[2])
      return node_fail(nc, "past_key/past_value must be [B, kv_heads, P, head_size]");
    P = past_k->type.dims[2];
    qir_value *ck[2] = {past_k, k}, *cv[2] = {past_v, v};
    qir_op *op = op_begin(imp, QIR_OP_CONCAT, 2, ck);
    set_i(imp, op, "axis", 2);
    k = op_end(imp, op, NULL);
    op = op_begin(imp, QIR_OP_CONCAT, 2, cv);
    set_i(imp, op, "axis", 2);
    v = op_end(imp, op, NULL);
    if (!k || !v) return false;
  }
  int64_t T = k->type.dims[2], G = Hq / Hkv;
  qir_dtype dt = q->type.dtype;
  double scale = attr_find(nc, "scale") ? attr_float(nc, "scale", 1) : 1 / sqrt((double)dq);
  double softcap = attr_float(nc, "softcap", 0);
  const Onnx__AttributeProto *prec = attr_find(nc, "softmax_precision");
  qir_dtype pdt = dt;
  if (prec && prec->i && (!onnx_dtype_to_qir((int32_t)prec->i, &pdt) || !qir_dtype_is_float(pdt)))
    return node_fail(nc, "softmax_precision must be a float type");
  if (!isfinite(scale)) return node_fail(nc, "scale must be a finite number");
  if (!(softcap >= 0)) return node_fail(nc, "softcap must not be negative");
  /* one `attention` op unless the scores are an output (qk_matmul_output) or
   * the softmax runs in a type other than its f32 / f64 stages */
  bool one_op = !wants_out(nc, 3) && (pdt == dt || pdt == (dt == QIR_F64 ? QIR_F64 : QIR_F32));
  qir_value *qk = NULL;
  if (!one_op) {
    qir_value *sq = const_scalar(imp, dt, sqrt(scale));
    static const int64_t kt_perm[4] = {0, 1, 3, 2};
    qir_value *qg = reshape_to(imp, emit2(imp, QIR_OP_MUL, q, sq), 5, B, Hkv, G, Sq, dq);
    qir_value *ktg = reshape_to(imp, emit_transpose(imp, emit2(imp, QIR_OP_MUL, k, sq), 4, kt_perm), 5, B, Hkv, 1, dq, T);
    qk = reshape_to(imp, emit2(imp, QIR_OP_MATMUL, qg, ktg), 4, B, Hq, Sq, T, 0);
  }

  /* the additive bias: mask, causal, KV padding */
  qir_value *bias = NULL;
  if (mask) {
    int mr = mask->type.rank;
    if (mr < 2 || mr > 4 || mask->type.dims[mr - 1] > T) return node_fail(nc, "attn_mask must be 2-D to 4-D with at most the total KV length");
    bool is_bool = mask->type.dtype == QIR_BOOL;
    if (mask->type.dims[mr - 1] < T) {
      int64_t pads[8] = {0};
      pads[mr + mr - 1] = T - mask->type.dims[mr - 1];
      qir_value *in[2] = {mask, const_scalar(imp, mask->type.dtype, is_bool ? 0 : -INFINITY)};
      qir_op *op = op_begin(imp, QIR_OP_PAD, 2, in);
      set_ints(imp, op, "pads", 2 * mr, pads);
      set_w(imp, op, "mode", "constant");
      mask = op_end(imp, op, NULL);
    }
    bias = is_bool ? where(imp, mask, const_scalar(imp, dt, 0), const_scalar(imp, dt, -INFINITY)) : emit_cast(imp, mask, dt);
  }
  /* is_causal on the one op is its causal attribute, not a materialised mask,
   * where the two agree: ONNX aligns the mask to the past length P (key j
   * visible from query i when j <= i + P), the op bottom-right (j <= i + T - S) */
  bool causal_attr = one_op && !nonpad && attr_int(nc, "is_causal", 0) && T - Sq == P;
  if (attr_int(nc, "is_causal", 0) && !causal_attr) {
    qir_value *causal;
    if (!past_k && nonpad) {
      /* per batch: key j is visible from query i when j <= i + nonpad[b] - Sq */
      int64_t *iv = malloc(sizeof *iv * (size_t)(Sq + T));
      if (!iv) abort();
      for (int64_t i = 0; i < Sq; i++) iv[i] = i - Sq;
      for (int64_t j = 0; j < T; j++) iv[Sq + j] = j;
      int64_t di[3] = {1, Sq, 1}, dj[3] = {1, 1, T}, db[3] = {B, 1, 1};
      qir_value *ii = const_data(imp, qir_type_make(QIR_I64, 3, di), iv);
      qir_value *jj = const_data(imp, qir_type_make(QIR_I64, 3, dj), iv + Sq);
      free(iv);
      qir_value *off = emit_reshape(imp, emit_cast(imp, nonpad, QIR_I64), 3, db);
      qir_value *ok = emit2(imp, QIR_OP_LESS_EQUAL, jj, emit2(imp, QIR_OP_ADD, ii, off));
      causal = reshape_to(imp, where(imp, ok, const_scalar(imp, dt, 0), const_scalar(imp, dt, -INFINITY)), 4, B, 1, Sq, T, 0);
    } else {
      if (Sq * T > FOLD_LIMIT) return node_fail(nc, "causal mask too large to materialise");
      char *buf = calloc((size_t)(Sq * T), (size_t)qir_dtype_size(dt));
      if (!buf) abort();
      for (int64_t i = 0; i < Sq; i++)
        for (int64_t j = 0; j < T; j++) qir_store_elem(dt, buf, i * T + j, j > i + P ? -INFINITY : 0);
      int64_t d[2] = {Sq, T};
      causal = const_data(imp, qir_type_make(dt, 2, d), buf);
      free(buf);
    }
    bias = bias ? emit2(imp, QIR_OP_ADD, bias, causal) : causal;
  }
  if (nonpad) {
    if (nonpad->type.rank != 1 || nonpad->type.dims[0] != B) return node_fail(nc, "nonpad_kv_seqlen must be [B]");
    int64_t *jv = malloc(sizeof *jv * (size_t)T);
    if (!jv) abort();
    for (int64_t j = 0; j < T; j++) jv[j] = j;
    int64_t dj[2] = {1, T}, db[2] = {B, 1};
    qir_value *jj = const_data(imp, qir_type_make(QIR_I64, 2, dj), jv);
    free(jv);
    qir_value *ok = emit2(imp, QIR_OP_LESS, jj, emit_reshape(imp, emit_cast(imp, nonpad, QIR_I64), 2, db));
    qir_value *pad = reshape_to(imp, where(imp, ok, const_scalar(imp, dt, 0), const_scalar(imp, dt, -INFINITY)), 4, B, 1, 1, T, 0);
    bias = bias ? emit2(imp, QIR_OP_ADD, bias, pad) : pad;
  }
  qir_value *y;
  if (one_op) {
    qir_value *ops[4] = {q, k, v, bias ? bias : const_scalar(imp, dt, 0)};
    qir_op *op = op_begin(imp, QIR_OP_ATTENTION, 4, ops);
    set_f(imp, op, "scale", scale);
    if (softcap > 0) set_f(imp, op, "softcap", softcap);
    if (causal_attr) set_i(imp, op, "causal", 1);
    y = op_end(imp, op, NULL);
    if (!y) return false;
    return attention_outputs(nc, y, r, B, Hq, Sq, dv, k, v);
  }
  /* softcap before the bias, so masked (-inf) scores stay -inf */
  qir_value *capped = qk;
  if (softcap > 0) {
    qir_value *c = const_scalar(imp, dt, softcap);
    capped = emit2(imp, QIR_OP_MUL, emit1(imp, QIR_OP_TANH, emit2(imp, QIR_OP_DIV, qk, c)), c);
  }
  qir_value *with_bias = bias ? emit2(imp, QIR_OP_ADD, capped, bias) : capped;
  qir_value *sm_in = pdt != dt ? emit_cast(imp, with_bias, pdt) : with_bias;
  qir_value *sm = emit_cast(imp, with_axis(imp, QIR_OP_SOFTMAX, sm_in, 3), dt);
  y = emit2(imp, QIR_OP_MATMUL, reshape_to(imp, sm, 5, B, Hkv, G, Sq, T), reshape_to(imp, v, 5, B, Hkv, 1, T, dv));
  y = reshape_to(imp, y, 4, B, Hq, Sq, dv, 0);
  if (!attention_outputs(nc, y, r, B, Hq, Sq, dv, k, v)) return false;
  if (wants_out(nc, 3)) {
    int64_t mode = attr_int(nc, "qk_matmul_output_mode", 0);
    /* 0, 1: the (softcapped) scores; 2: with the bias; 3: the softmax */
    qir_value *outs[4] = {capped, capped, with_bias, sm};
    if (mode < 0 || mode > 3) return node_fail(nc, "qk_matmul_output_mode must be 0..3");
    nc->out[3] = outs[mode];
  }
  return true;
}

/* ---------------------------------------------------------------- table */

static const converter_entry composites[] = {
    {"NegativeLogLikelihoodLoss", cv_nll_loss, "ignore_index,reduction"},
    {"SoftmaxCrossEntropyLoss", cv_softmax_ce_loss, "ignore_index,reduction"},
    {"RMSNormalization", cv_rms_norm, "axis,epsilon,stash_type"},
    {"MeanVarianceNormalization", cv_mvn, "axes"},
    {"GroupNormalization", cv_group_norm, "epsilon,num_groups,stash_type"},
    {"Shrink", cv_shrink, "bias,lambd"},
    {"Swish", cv_swish, "alpha"},
    {"Hardmax", cv_hardmax, "axis"},
    {"EyeLike", cv_eye_like, "dtype,k"},
    {"ReverseSequence", cv_reverse_sequence, "batch_axis,time_axis"},
    {"CenterCropPad", cv_center_crop_pad, "axes"},
    {"RotaryEmbedding", cv_rotary_embedding, "interleaved,num_heads,rotary_embedding_dim"},
    {"Col2Im", cv_col2im, "dilations,pads,strides"},
    {"TensorScatter", cv_tensor_scatter, "axis,mode"},
    {"MaxUnpool", cv_max_unpool, "kernel_shape,pads,strides"},
    {"AffineGrid", cv_affine_grid, "align_corners"},
    {"Det", cv_det, ""},
    {"DeformConv", cv_deform_conv, "dilations,group,kernel_shape,offset_group,pads,strides"},
    {"RoiAlign", cv_roi_align, "coordinate_transformation_mode,mode,output_height,output_width,sampling_ratio,spatial_scale"},
    {"LinearAttention", cv_linear_attention, "chunk_size,kv_num_heads,q_num_heads,scale,update_rule"},
    {"CausalConvWithState", cv_causal_conv_with_state, "activation"},
    {"QLinearConv", cv_qlinear_conv, "auto_pad,dilations,group,kernel_shape,pads,strides"},
    {"DequantizeLinear", cv_dequantize, "axis,block_size,output_dtype"},
    {"QuantizeLinear", cv_quantize, "axis,block_size,output_dtype,saturate,precision"},
    {"DynamicQuantizeLinear", cv_dynamic_quantize, ""},
    {"MatMulInteger", cv_matmul_integer, ""},
    {"QLinearMatMul", cv_qlinear_matmul, ""},
    {"Attention", cv_attention, "is_causal,kv_num_heads,q_num_heads,qk_matmul_output_mode,scale,softcap,softmax_precision"},
};

static const struct {
  const char *domain, *op_type;
  convert_fn fn;
  const char *attrs;
} domain_ops[] = {
    {"ai.onnx.ml", "Binarizer", cv_binarizer, "threshold"},
    {"ai.onnx.ml", "ArrayFeatureExtractor", cv_array_feature_extractor, ""},
    {"ai.onnx.preview.training", "Adagrad", cv_optimizer, "decay_factor,epsilon,norm_coefficient"},
    {"ai.onnx.preview.training", "Momentum", cv_optimizer, "alpha,beta,mode,norm_coefficient"},
    {"ai.onnx.preview.training", "Adam", cv_optimizer, "alpha,beta,epsilon,norm_coefficient,norm_coefficient_post"},
};

bool find_domain_op(const char *domain, const char *op_type, convert_fn *fn, const char **attrs) {
  for (size_t i = 0; i < sizeof domain_ops / sizeof *domain_ops; i++)
    if (!strcmp(domain_ops[i].domain, domain) && !strcmp(domain_ops[i].op_type, op_type)) {
      *fn = domain_ops[i].fn;
      *attrs = domain_ops[i].attrs;
      return true;
    }
  return false;
}

bool find_composite(const char *op_type, convert_fn *fn, const char **attrs) {
  return converter_lookup(composites, sizeof composites / sizeof *composites, op_type, fn, attrs);
}
