/* rnn.c: LSTM, GRU and RNN as `loop` regions over time built from primitive
 * ops (matmul, add, sigmoid, tanh, mul, where, ...), one loop per direction,
 * so later passes can move the recurrence to the device.  The input
 * projection X*W^T + b of all time steps is one matmul before the loop; the
 * body does H*R^T, the gates and the state update.  sequence_lens masks the
 * state update and zeroes Y past each sequence's end (for the reverse
 * direction too: masked steps keep the initial state).  The loop carries
 * {onnx_op = "LSTM"} etc. */
#include "onnx2qir.h"

#include <stdlib.h>
#include <string.h>

#define IN(k) ((k) < nc->n_in ? nc->in[k] : NULL)

typedef struct {
  const char *name;
  double alpha, beta;
} activation;

static qir_value *apply_act(importer *imp, const activation *a, qir_value *x) {
  if (!x) return NULL;
  qir_dtype dt = x->type.dtype;
  const char *n = a->name;
  if (strcmp(n, "Sigmoid") == 0) return emit1(imp, QIR_OP_SIGMOID, x);
  if (strcmp(n, "Tanh") == 0) return emit1(imp, QIR_OP_TANH, x);
  if (strcmp(n, "Relu") == 0) return emit1(imp, QIR_OP_RELU, x);
  if (strcmp(n, "Softplus") == 0) return emit1(imp, QIR_OP_SOFTPLUS, x);
  if (strcmp(n, "LeakyRelu") == 0 || strcmp(n, "Elu") == 0) {
    qir_op *op = op_begin(imp, n[0] == 'L' ? QIR_OP_LEAKY_RELU : QIR_OP_ELU, 1, &x);
    set_f(imp, op, "alpha", a->alpha);
    return op_end(imp, op, NULL);
  }
  if (strcmp(n, "HardSigmoid") == 0) {
    qir_op *op = op_begin(imp, QIR_OP_HARD_SIGMOID, 1, &x);
    set_f(imp, op, "alpha", a->alpha);
    set_f(imp, op, "beta", a->beta);
    return op_end(imp, op, NULL);
  }
  if (strcmp(n, "ThresholdedRelu") == 0)
    return emit3(imp, QIR_OP_WHERE, emit2(imp, QIR_OP_GREATER, x, const_scalar(imp, dt, a->alpha)), x,
                 const_scalar(imp, dt, 0));
  if (strcmp(n, "ScaledTanh") == 0)
    return emit2(imp, QIR_OP_MUL, const_scalar(imp, dt, a->alpha),
                 emit1(imp, QIR_OP_TANH, emit2(imp, QIR_OP_MUL, x, const_scalar(imp, dt, a->beta))));
  if (strcmp(n, "Affine") == 0)
    return emit2(imp, QIR_OP_ADD, emit2(imp, QIR_OP_MUL, x, const_scalar(imp, dt, a->alpha)), const_scalar(imp, dt, a->beta));
  if (strcmp(n, "Softsign") == 0)
    return emit2(imp, QIR_OP_DIV, x, emit2(imp, QIR_OP_ADD, emit1(imp, QIR_OP_ABS, x), const_scalar(imp, dt, 1)));
  return NULL;
}

static bool act_known(const char *n) {
  static const char *const names[] = {"Sigmoid", "Tanh", "Relu", "Softplus", "LeakyRelu", "Elu", "HardSigmoid",
                                      "ThresholdedRelu", "ScaledTanh", "Affine", "Softsign"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strcmp(names[i], n) == 0) return true;
  return false;
}

static void act_defaults(activation *a) {
  const char *n = a->name;
  if (strcmp(n, "LeakyRelu") == 0) a->alpha = 0.01;
  else if (strcmp(n, "HardSigmoid") == 0) a->alpha = 0.2, a->beta = 0.5;
  else a->alpha = 1.0, a->beta = strcmp(n, "Affine") == 0 ? 0.0 : 1.0;
}

static bool act_takes_alpha(const char *n) {
  return strcmp(n, "LeakyRelu") == 0 || strcmp(n, "ThresholdedRelu") == 0 || strcmp(n, "ScaledTanh") == 0 ||
         strcmp(n, "HardSigmoid") == 0 || strcmp(n, "Elu") == 0 || strcmp(n, "Affine") == 0;
}

static bool act_takes_beta(const char *n) {
  return strcmp(n, "ScaledTanh") == 0 || strcmp(n, "HardSigmoid") == 0 || strcmp(n, "Affine") == 0;
}

/* x[k] along axis 0, axis removed. */
static qir_value *take(importer *imp, qir_value *x, int64_t k) {
  int64_t kk = k;
  qir_value *idx = const_data(imp, qir_type_make(QIR_I64, 0, NULL), &kk);
  qir_value *in[2] = {x, idx};
  qir_op *op = op_begin(imp, QIR_OP_GATHER, 2, in);
  set_i(imp, op, "axis", 0);
  return op_end(imp, op, NULL);
}

static qir_value *slice1(importer *imp, qir_value *x, int axis, int64_t start, int64_t len) {
  if (!x) return NULL;
  int r = x->type.rank;
  int64_t s[QIR_MAX_RANK], e[QIR_MAX_RANK], st[QIR_MAX_RANK];
  qir_type t = x->type;
  for (int i = 0; i < r; i++) {
    s[i] = 0;
    e[i] = x->type.dims[i];
    st[i] = 1;
  }
  s[axis] = start;
  e[axis] = start + len;
  t.dims[axis] = len;
  qir_op *op = op_begin_typed(imp, QIR_OP_SLICE, 1, &x, 1, &t);
  set_ints(imp, op, "starts", r, s);
  set_ints(imp, op, "ends", r, e);
  set_ints(imp, op, "steps", r, st);
  return op_end(imp, op, NULL);
}

static qir_value *transpose2(importer *imp, qir_value *x) {
  int64_t perm[2] = {1, 0};
  return emit_transpose(imp, x, 2, perm);
}

static qir_value *clip_gate(importer *imp, qir_value *x, double clip) {
  if (!x || clip <= 0) return x;
  qir_dtype dt = x->type.dtype;
  return emit3(imp, QIR_OP_CLIP, x, const_scalar(imp, dt, -clip), const_scalar(imp, dt, clip));
}

typedef enum { K_LSTM, K_GRU, K_RNN } rnn_kind;

typedef struct {
  rnn_kind kind;
  int64_t T, B, I, H;
  int gates;
  double clip;
  int64_t input_forget, linear_before_reset;
  activation act[3];     /* f, g, h of this direction */
} rnn_info;

/* One direction: returns Y [T,B,H], Y_h [B,H], Y_c [B,H]. */
static bool one_direction(node_ctx *nc, const rnn_info *ri, int d, bool reverse, qir_value *X, qir_value *seq,
                          qir_value **Y, qir_value **Yh, qir_value **Yc) {
  importer *imp = nc->imp;
  qir_dtype dt = X->type.dtype;
  int64_t T = ri->T, B = ri->B, H = ri->H, G = ri->gates;
  qir_value *W = take(imp, IN(1), d), *R = take(imp, IN(2), d);
  qir_value *WT = transpose2(imp, W), *RT = transpose2(imp, R);
  qir_value *bw = NULL, *br = NULL;
  if (IN(3)) {
    qir_value *b = take(imp, IN(3), d);
    bw = slice1(imp, b, 0, 0, G * H);
    br = slice1(imp, b, 0, G * H, G * H);
  }
  /* XW = X * W^T + Wb (+ Rb unless GRU's linear_before_reset needs Rbh apart) */
  qir_value *XW = emit2(imp, QIR_OP_MATMUL, X, WT);
  qir_value *rbh = NULL;
  if (bw) {
    qir_value *bias = bw;
    if (ri->kind == K_GRU && ri->linear_before_reset) {
      /* z and r get both biases up front; h's recurrent bias goes inside r*(...) */
      qir_value *rzr = slice1(imp, br, 0, 0, 2 * H);
      qir_value *zero = const_splat(imp, qir_type_make(dt, 1, &H), 0);
      qir_value *parts[2] = {rzr, zero};
      qir_op *op = op_begin(imp, QIR_OP_CONCAT, 2, parts);
      set_i(imp, op, "axis", 0);
      bias = emit2(imp, QIR_OP_ADD, bw, op_end(imp, op, NULL));
      rbh = slice1(imp, br, 0, 2 * H, H);
    } else {
      bias = emit2(imp, QIR_OP_ADD, bw, br);
    }
    XW = emit2(imp, QIR_OP_ADD, XW, bias);
  }
  qir_value *Pi = NULL, *Po = NULL, *Pf = NULL;
  if (ri->kind == K_LSTM && IN(7)) {
    qir_value *P = take(imp, IN(7), d);
    Pi = slice1(imp, P, 0, 0, H);
    Po = slice1(imp, P, 0, H, H);
    Pf = slice1(imp, P, 0, 2 * H, H);
  }
  int64_t bh[2] = {B, H};
  qir_type tbh = qir_type_make(dt, 2, bh);
  qir_value *h0 = IN(5) ? take(imp, IN(5), d) : const_splat(imp, tbh, 0); /* initial_h */
  qir_value *c0 = NULL;
  if (ri->kind == K_LSTM) c0 = IN(6) ? take(imp, IN(6), d) : const_splat(imp, tbh, 0);
  if (!XW || !RT || !h0 || (ri->kind == K_LSTM && !c0)) return false;

  /* the loop body */
  qir_region *r = region_detached(imp);
  qir_region *saved = imp->region;
  imp->region = r;
  qir_value *iter = qir_region_add_arg(imp->m, r, qir_type_make(QIR_I64, 0, NULL), NULL);
  qir_value *cond = qir_region_add_arg(imp->m, r, qir_type_make(QIR_BOOL, 0, NULL), NULL);
  qir_value *h = qir_region_add_arg(imp->m, r, tbh, NULL);
  qir_value *c = ri->kind == K_LSTM ? qir_region_add_arg(imp->m, r, tbh, NULL) : NULL;
  qir_value *t = reverse ? emit2(imp, QIR_OP_SUB, const_scalar(imp, QIR_I64, (double)(T - 1)), iter) : iter;
  qir_value *in2[2] = {XW, t};
  qir_op *gop = op_begin(imp, QIR_OP_GATHER, 2, in2);
  set_i(imp, gop, "axis", 0);
  qir_value *xw = op_end(imp, gop, NULL);
  qir_value *hr = emit2(imp, QIR_OP_MATMUL, h, RT);
  qir_value *gate[4] = {NULL, NULL, NULL, NULL}, *hgate[4] = {NULL, NULL, NULL, NULL};
  bool ok = xw && hr;
  if (ok) {
    qir_type parts[4] = {tbh, tbh, tbh, tbh};
    qir_value *sum = ri->kind == K_GRU ? xw : emit2(imp, QIR_OP_ADD, xw, hr);
    qir_op *sp = op_begin_typed(imp, QIR_OP_SPLIT, 1, &sum, (int)G, parts);
    set_i(imp, sp, "axis", 1);
    ok = sum && op_end(imp, sp, gate) != NULL;
    if (ok && ri->kind == K_GRU) {
      qir_op *sp2 = op_begin_typed(imp, QIR_OP_SPLIT, 1, &hr, (int)G, parts);
      set_i(imp, sp2, "axis", 1);
      ok = op_end(imp, sp2, hgate) != NULL;
    }
  }
  qir_value *hn = NULL, *cn = NULL;
  const activation *f = &ri->act[0], *g = &ri->act[1], *hact = &ri->act[2];
  if (ok && ri->kind == K_LSTM) {
    qir_value *gi = gate[0], *go = gate[1], *gf = gate[2], *gc = gate[3];
    if (Pi) gi = emit2(imp, QIR_OP_ADD, gi, emit2(imp, QIR_OP_MUL, Pi, c));
    if (Pf) gf = emit2(imp, QIR_OP_ADD, gf, emit2(imp, QIR_OP_MUL, Pf, c));
    qir_value *it = apply_act(imp, f, clip_gate(imp, gi, ri->clip));
    qir_value *ft = ri->input_forget ? emit2(imp, QIR_OP_SUB, const_scalar(imp, dt, 1), it)
                                     : apply_act(imp, f, clip_gate(imp, gf, ri->clip));
    qir_value *ct = apply_act(imp, g, clip_gate(imp, gc, ri->clip));
    cn = emit2(imp, QIR_OP_ADD, emit2(imp, QIR_OP_MUL, ft, c), emit2(imp, QIR_OP_MUL, it, ct));
    if (Po) go = emit2(imp, QIR_OP_ADD, go, emit2(imp, QIR_OP_MUL, Po, cn));
    qir_value *ot = apply_act(imp, f, clip_gate(imp, go, ri->clip));
    hn = emit2(imp, QIR_OP_MUL, ot, apply_act(imp, hact, cn));
  } else if (ok && ri->kind == K_GRU) {
    qir_value *zt = apply_act(imp, f, clip_gate(imp, emit2(imp, QIR_OP_ADD, gate[0], hgate[0]), ri->clip));
    qir_value *rt = apply_act(imp, f, clip_gate(imp, emit2(imp, QIR_OP_ADD, gate[1], hgate[1]), ri->clip));
    qir_value *pre;
    if (ri->linear_before_reset) {
      qir_value *hh = rbh ? emit2(imp, QIR_OP_ADD, hgate[2], rbh) : hgate[2];
      pre = emit2(imp, QIR_OP_ADD, gate[2], emit2(imp, QIR_OP_MUL, rt, hh));
    } else {
      qir_value *rh = emit2(imp, QIR_OP_MUL, rt, h);
      /* (r*h) * Rh^T: the last H columns of R^T */
      qir_value *rhT = slice1(imp, RT, 1, 2 * H, H);
      pre = emit2(imp, QIR_OP_ADD, gate[2], emit2(imp, QIR_OP_MATMUL, rh, rhT));
    }
    qir_value *ht = apply_act(imp, g, clip_gate(imp, pre, ri->clip));
    qir_value *one_minus_z = emit2(imp, QIR_OP_SUB, const_scalar(imp, dt, 1), zt);
    hn = emit2(imp, QIR_OP_ADD, emit2(imp, QIR_OP_MUL, one_minus_z, ht), emit2(imp, QIR_OP_MUL, zt, h));
  } else if (ok) {
    hn = apply_act(imp, f, clip_gate(imp, gate[0], ri->clip));
  }
  qir_value *yt = hn;
  if (hn && seq) {
    int64_t b1[2] = {B, 1};
    qir_value *mask = emit2(imp, QIR_OP_LESS, t, emit_reshape(imp, seq, 2, b1));
    yt = emit3(imp, QIR_OP_WHERE, mask, hn, const_scalar(imp, dt, 0));
    hn = emit3(imp, QIR_OP_WHERE, mask, hn, h);
    if (cn) cn = emit3(imp, QIR_OP_WHERE, mask, cn, c);
  }
  ok = ok && hn && yt && (ri->kind != K_LSTM || cn);
  imp->region = saved;
  if (!ok) return false;
  qir_value *yv[4] = {cond, hn, cn ? cn : yt, yt};
  int n_y = cn ? 4 : 3;
  qir_op *y = qir_op_new(imp->m, QIR_OP_YIELD, n_y, yv, 0, NULL, (qir_loc){0});
  qir_op_append(r, y);
  int64_t tbhd[3] = {T, B, H};
  qir_type types[3] = {tbh, tbh, qir_type_make(dt, 3, tbhd)};
  if (!cn) types[1] = types[2];
  int64_t Tv = T;
  qir_value *ops_in[4] = {const_data(imp, qir_type_make(QIR_I64, 0, NULL), &Tv), const_scalar(imp, QIR_BOOL, 1), h0, c0};
  qir_op *op = op_begin_typed(imp, QIR_OP_LOOP, cn ? 4 : 3, ops_in, cn ? 3 : 2, types);
  set_s(imp, op, "onnx_op", nc->node->op_type);
  if (reverse) set_w(imp, op, "direction", "reverse");
  region_adopt(op, 0, r);
  qir_value *res[3];
  if (!op_end(imp, op, res)) return false;
  *Yh = res[0];
  *Yc = cn ? res[1] : NULL;
  qir_value *yall = res[cn ? 2 : 1];
  if (reverse) yall = emit_reverse_axis0(imp, yall, T);
  *Y = yall;
  return yall != NULL;
}

static qir_value *concat_axis(importer *imp, int n, qir_value **v, int axis) {
  if (n == 1) return v[0];
  qir_op *op = op_begin(imp, QIR_OP_CONCAT, n, v);
  set_i(imp, op, "axis", axis);
  return op_end(imp, op, NULL);
}

bool convert_rnn(node_ctx *nc) {
  importer *imp = nc->imp;
  const char *op = nc->node->op_type;
  rnn_info ri;
  memset(&ri, 0, sizeof ri);
  ri.kind = strcmp(op, "LSTM") == 0 ? K_LSTM : strcmp(op, "GRU") == 0 ? K_GRU : K_RNN;
  ri.gates = ri.kind == K_LSTM ? 4 : ri.kind == K_GRU ? 3 : 1;
  for (int i = 0; i < 3; i++)
    if (!IN(i)) {
      imp_error(imp, "required input %d is missing", i);
      return false;
    }
  const char *dir = attr_str(nc, "direction", "forward");
  int nd = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
  if (nd == 1 && strcmp(dir, "forward") && strcmp(dir, "reverse")) {
    imp_error(imp, "unsupported direction '%s'", dir);
    return false;
  }
  int64_t layout = attr_int(nc, "layout", 0);
  qir_value *X = IN(0);
  if (X->type.rank != 3) {
    imp_error(imp, "X must have rank 3");
    return false;
  }
  if (layout) {
    int64_t perm[3] = {1, 0, 2};
    X = emit_transpose(imp, X, 3, perm);
    if (!X) return false;
  }
  ri.T = X->type.dims[0];
  ri.B = X->type.dims[1];
  ri.I = X->type.dims[2];
  ri.H = attr_int(nc, "hidden_size", IN(2)->type.rank == 3 ? IN(2)->type.dims[2] : 0);
  ri.clip = attr_float(nc, "clip", 0);
  ri.input_forget = attr_int(nc, "input_forget", 0);
  ri.linear_before_reset = attr_int(nc, "linear_before_reset", 0);
  if (ri.T < 1 || ri.H < 1) {
    imp_error(imp, "empty sequence or hidden size");
    return false;
  }
  if (ri.H > (1 << 24)) { /* G * H below must not overflow */
    imp_error(imp, "hidden_size %lld is out of range", (long long)ri.H);
    return false;
  }
  int64_t G = ri.gates, H = ri.H;
  if (IN(1)->type.rank != 3 || IN(1)->type.dims[0] != nd || IN(1)->type.dims[1] != G * H ||
      IN(1)->type.dims[2] != ri.I || IN(2)->type.rank != 3 || IN(2)->type.dims[0] != nd ||
      IN(2)->type.dims[1] != G * H || IN(2)->type.dims[2] != H) {
    imp_error(imp, "W or R has the wrong shape");
    return false;
  }
  /* initial states in [num_dir, B, H] */
  for (int k = 5; k <= (ri.kind == K_LSTM ? 6 : 5); k++) /* initial_h, initial_c */
    if (IN(k) && layout) {
      int64_t perm[3] = {1, 0, 2};
      nc->in[k] = emit_transpose(imp, IN(k), 3, perm);
      if (!nc->in[k]) return false;
    }
  /* activations */
  const char *names[6];
  int na = attr_strings(nc, "activations", names, 6);
  double alphas[6], betas[6];
  int n_alpha = attr_floats(nc, "activation_alpha", alphas, 6), n_beta = attr_floats(nc, "activation_beta", betas, 6);
  int per = ri.kind == K_LSTM ? 3 : ri.kind == K_GRU ? 2 : 1;
  activation acts[2][3];
  static const char *const lstm_def[3] = {"Sigmoid", "Tanh", "Tanh"}, *const gru_def[2] = {"Sigmoid", "Tanh"},
                           *const rnn_def[1] = {"Tanh"};
  if (na >= 0 && na != per * nd) {
    imp_error(imp, "expected %d activations, got %d", per * nd, na);
    return false;
  }
  int ai = 0, bi = 0;
  for (int d = 0; d < nd; d++)
    for (int k = 0; k < per; k++) {
      activation *a = &acts[d][k];
      a->name = na >= 0 ? names[d * per + k]
                        : ri.kind == K_LSTM ? lstm_def[k] : ri.kind == K_GRU ? gru_def[k] : rnn_def[k];
      /* spec spelling is case-sensitive, but some exporters write lower case */
      if (!act_known(a->name)) {
        imp_error(imp, "unsupported activation '%s'", a->name);
        return false;
      }
      act_defaults(a);
      if (act_takes_alpha(a->name) && ai < n_alpha) a->alpha = alphas[ai++];
      if (act_takes_beta(a->name) && bi < n_beta) a->beta = betas[bi++];
    }
  /* sequence lengths: dropped when all are T */
  qir_value *seq = IN(4);
  if (seq) {
    bool full = false;
    if (const_def(seq)) {
      full = true;
      for (int64_t b = 0; b < qir_type_numel(&seq->type); b++)
        if (const_int(imp, seq, b) != ri.T) full = false;
    }
    seq = full ? NULL : emit_cast(imp, seq, QIR_I64);
  }
  qir_value *Y[2], *Yh[2], *Yc[2];
  for (int d = 0; d < nd; d++) {
    memcpy(ri.act, acts[d], sizeof ri.act);
    bool reverse = d == 1 || strcmp(dir, "reverse") == 0;
    if (!one_direction(nc, &ri, d, reverse, X, seq, &Y[d], &Yh[d], &Yc[d])) return false;
  }
  /* Y [T, nd, B, H], Y_h and Y_c [nd, B, H] */
  qir_value *ys[2], *hs[2], *cs[2];
  for (int d = 0; d < nd; d++) {
    ys[d] = emit_insert_unit_axis(imp, Y[d], 1);
    hs[d] = emit_insert_unit_axis(imp, Yh[d], 0);
    cs[d] = ri.kind == K_LSTM ? emit_insert_unit_axis(imp, Yc[d], 0) : NULL;
  }
  qir_value *y = concat_axis(imp, nd, ys, 1), *yh = concat_axis(imp, nd, hs, 0);
  qir_value *yc = ri.kind == K_LSTM ? concat_axis(imp, nd, cs, 0) : NULL;
  if (layout) {
    int64_t p4[4] = {2, 0, 1, 3}, p3[3] = {1, 0, 2};
    y = emit_transpose(imp, y, 4, p4);
    yh = emit_transpose(imp, yh, 3, p3);
    if (yc) yc = emit_transpose(imp, yc, 3, p3);
  }
  if (nc->n_out > 0) nc->out[0] = y;
  if (nc->n_out > 1) nc->out[1] = yh;
  if (nc->n_out > 2) nc->out[2] = yc;
  return y && yh && (ri.kind != K_LSTM || yc);
}
