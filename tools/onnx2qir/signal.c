/* signal.c: the signal-processing operators (DFT, STFT, the window
 * functions) built from primitive ops.  A DFT along one axis is two matmuls
 * with constant cosine and sine matrices, so it reaches every back end as an
 * ordinary contraction; the windows are constants. */
#include "onnx2qir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(k) ((k) < nc->n_in ? nc->in[k] : NULL)
#define IMP (nc->imp)
#define PI 3.14159265358979323846



/* x[..., start:end] of the last axis */
static qir_value *last_range(importer *imp, qir_value *x, int64_t start, int64_t end) {
  if (!x) return NULL;
  int r = x->type.rank;
  int64_t s[QIR_MAX_RANK], e[QIR_MAX_RANK], st[QIR_MAX_RANK];
  for (int i = 0; i < r; i++) s[i] = 0, e[i] = x->type.dims[i], st[i] = 1;
  s[r - 1] = start, e[r - 1] = end;
  qir_op *op = op_begin(imp, QIR_OP_SLICE, 1, &x);
  set_ints(imp, op, "starts", r, s);
  set_ints(imp, op, "ends", r, e);
  set_ints(imp, op, "steps", r, st);
  return op_end(imp, op, NULL);
}

/* A [rows, cols] constant of dtype dt with entry f(r, c). */
static qir_value *const_matrix(importer *imp, qir_dtype dt, int64_t rows, int64_t cols, double (*f)(int64_t, int64_t, const void *),
                               const void *ctx) {
  char *buf = calloc((size_t)(rows * cols + 1), (size_t)qir_dtype_size(dt));
  if (!buf) abort();
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) qir_store_elem(dt, buf, i * cols + j, f(i, j, ctx));
  int64_t d[2] = {rows, cols};
  qir_value *v = const_data(imp, qir_type_make(dt, 2, d), buf);
  free(buf);
  return v;
}

typedef struct {
  int64_t L;   /* transform length: input samples past it are dropped */
  bool sine;
} dft_basis;

/* cos or sin of 2 pi k n / L at row n (sample), column k (frequency); 0 for
 * samples past L (the transform truncates) */
static double dft_entry(int64_t n, int64_t k, const void *vctx) {
  const dft_basis *b = vctx;
  if (n >= b->L) return 0;
  double a = 2 * PI * (double)((n * k) % b->L) / (double)b->L;
  return b->sine ? sin(a) : cos(a);
}

/* perm moves `axis` of the first n axes last, the others in order; inv undoes it. */
static void axis_last(int n, int axis, int64_t *perm, int64_t *inv) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (i != axis) perm[k++] = i;
  perm[k] = axis;
  for (int i = 0; i < n; i++) inv[perm[i]] = i;
}

/* DFT of x [..., c] (c = 1: real, 2: complex) along `axis` (< rank-1) with
 * length L (zero-padded or truncated), keeping the first K frequencies;
 * inverse: the conjugate transform divided by L.  Result [..., K at axis, ..., 2]. */
static qir_value *dft(node_ctx *nc, qir_value *x, int axis, int64_t L, int64_t K, bool inverse) {
  importer *imp = IMP;
  int r = x->type.rank;
  int64_t c = x->type.dims[r - 1];
  if (c != 1 && c != 2) {
    node_fail(nc, "the last dimension must be 1 (real) or 2 (complex)");
    return NULL;
  }
  if (L < 1 || L > 1 << 16) {
    node_fail(nc, "dft_length must be in [1, 65536]");
    return NULL;
  }
  qir_dtype dt = x->type.dtype;
  /* real and imaginary parts with the transformed axis last: [..., n] */
  int64_t perm[QIR_MAX_RANK], inv[QIR_MAX_RANK];
  axis_last(r - 1, axis, perm, inv);
  qir_value *part[2] = {NULL, NULL};
  for (int p = 0; p < c; p++) {
    qir_value *v = c == 1 ? x : last_range(imp, x, p, p + 1);
    v = v ? emit_reshape(imp, v, r - 1, x->type.dims) : NULL;
    part[p] = emit_transpose(imp, v, r - 1, perm);
    if (!part[p]) return NULL;
  }
  int64_t n = x->type.dims[axis];
  dft_basis bc = {L, false}, bs = {L, true};
  qir_value *C = const_matrix(imp, dt, n, K, dft_entry, &bc), *S = const_matrix(imp, dt, n, K, dft_entry, &bs);
  /* forward: (re + i im)(cos - i sin); inverse: (re + i im)(cos + i sin) / L */
  qir_value *re = emit2(imp, QIR_OP_MATMUL, part[0], C);
  qir_value *im = emit1(imp, QIR_OP_NEG, emit2(imp, QIR_OP_MATMUL, part[0], S));
  if (inverse) im = emit1(imp, QIR_OP_NEG, im);
  if (part[1]) {
    qir_value *ic = emit2(imp, QIR_OP_MATMUL, part[1], C), *is = emit2(imp, QIR_OP_MATMUL, part[1], S);
    re = inverse ? emit2(imp, QIR_OP_SUB, re, is) : emit2(imp, QIR_OP_ADD, re, is);
    im = emit2(imp, QIR_OP_ADD, im, ic);
  }
  if (inverse) {
    qir_value *l = const_scalar(imp, dt, (double)L);
    re = emit2(imp, QIR_OP_DIV, re, l);
    im = emit2(imp, QIR_OP_DIV, im, l);
  }
  re = emit_insert_unit_axis(imp, emit_transpose(imp, re, r - 1, inv), r - 1);
  im = emit_insert_unit_axis(imp, emit_transpose(imp, im, r - 1, inv), r - 1);
  if (!re || !im) return NULL;
  qir_value *both[2] = {re, im};
  qir_op *op = op_begin(imp, QIR_OP_CONCAT, 2, both);
  set_i(imp, op, "axis", r - 1);
  return op_end(imp, op, NULL);
}

typedef struct {
  int64_t L, K; /* output samples; bins read */
  bool sine;
} irfft_basis;

/* row k (bin), column n (sample): the weight of bin k in sample n of a real
 * signal whose spectrum is Hermitian (bins past L/2 mirror the others) */
static double irfft_entry(int64_t k, int64_t n, const void *vctx) {
  const irfft_basis *b = vctx;
  if (k >= b->K) return 0;
  double w = (k == 0 || 2 * k == b->L) ? 1 : 2, a = 2 * PI * (double)((k * n) % b->L) / (double)b->L;
  return (b->sine ? -sin(a) : cos(a)) * w / (double)b->L;
}

/* inverse and onesided: the real signal of length L from its first bins;
 * result [..., L at axis, ..., 1] */
static qir_value *irfft(node_ctx *nc, qir_value *x, int axis, int64_t L) {
  importer *imp = IMP;
  int r = x->type.rank;
  int64_t c = x->type.dims[r - 1], n = x->type.dims[axis];
  if (c != 2) {
    node_fail(nc, "an inverse onesided DFT needs a complex input");
    return NULL;
  }
  if (L < 1 || L > 1 << 16) {
    node_fail(nc, "dft_length must be in [1, 65536]");
    return NULL;
  }
  qir_dtype dt = x->type.dtype;
  int64_t perm[QIR_MAX_RANK], inv[QIR_MAX_RANK];
  axis_last(r - 1, axis, perm, inv);
  irfft_basis bc = {L, L / 2 + 1 < n ? L / 2 + 1 : n, false}, bs = bc;
  bs.sine = true;
  qir_value *y = NULL;
  for (int p = 0; p < 2; p++) {
    qir_value *v = emit_transpose(imp, emit_reshape(imp, last_range(imp, x, p, p + 1), r - 1, x->type.dims), r - 1, perm);
    qir_value *t = emit2(imp, QIR_OP_MATMUL, v, const_matrix(imp, dt, n, L, irfft_entry, p ? &bs : &bc));
    y = y ? emit2(imp, QIR_OP_ADD, y, t) : t;
  }
  return emit_insert_unit_axis(imp, emit_transpose(imp, y, r - 1, inv), r - 1);
}

static bool cv_dft(node_ctx *nc) {
  qir_value *x = IN(0);
  if (!x) return node_fail(nc, "required input 0 is missing");
  int r = x->type.rank;
  if (r < 2) return node_fail(nc, "input must have a signal axis and the complex axis");
  int64_t axis, L;
  int n;
  if (nc->opset >= 20) {
    if (attr_find(nc, "axis")) return node_fail(nc, "from opset 20 the axis is an input, not an attribute");
    axis = -2;
    if (IN(2) && !need_const_ints(nc, 2, &axis, 1, &n)) return false;
  } else {
    axis = attr_int(nc, "axis", 1);
  }
  axis = norm_axis(axis, r);
  if (axis < 0 || axis >= r - 1) return node_fail(nc, "axis must name a signal dimension (not the last one)");
  bool onesided = attr_int(nc, "onesided", 0) != 0, inverse = attr_int(nc, "inverse", 0) != 0;
  /* an inverse onesided transform reads half a spectrum: by default of 2(n-1) samples */
  L = inverse && onesided ? 2 * (x->type.dims[axis] - 1) : x->type.dims[axis];
  if (IN(1) && qir_type_numel(&IN(1)->type) > 0 && !need_const_ints(nc, 1, &L, 1, &n)) return false;
  if (inverse && onesided) return node_set_out(nc, 0, irfft(nc, x, (int)axis, L));
  return node_set_out(nc, 0, dft(nc, x, (int)axis, L, onesided ? L / 2 + 1 : L, inverse));
}

/* STFT: frames of the signal (zero past its end), times the window, each
 * transformed along the frame. */
static bool cv_stft(node_ctx *nc) {
  qir_value *x = IN(0), *window = IN(2);
  if (!x || !IN(1)) return node_fail(nc, "signal and frame_step are required");
  importer *imp = IMP;
  if (x->type.rank != 3) return node_fail(nc, "signal must be [batch, length, 1 or 2]");
  int64_t step, flen = -1;
  int n;
  if (!need_const_ints(nc, 1, &step, 1, &n)) return false;
  if (IN(3) && !need_const_ints(nc, 3, &flen, 1, &n)) return false;
  int64_t len = x->type.dims[1];
  if (flen < 0) flen = window ? window->type.dims[0] : len;
  if (window && (window->type.rank != 1)) return node_fail(nc, "window must be 1-D");
  int64_t W = window ? window->type.dims[0] : flen;
  if (step < 1 || flen < 1 || flen > len) return node_fail(nc, "frame_step and frame_length must be positive, the frame no longer than the signal");
  int64_t frames = 1 + (len - flen) / step;
  if (frames * W > (1 << 20)) return node_fail(nc, "too many frames to index");
  int64_t need = (frames - 1) * step + W;
  if (need > len) {
    int64_t pads[6] = {0, 0, 0, 0, need - len, 0};
    qir_value *in[2] = {x, const_scalar(imp, x->type.dtype, 0)};
    qir_op *op = op_begin(imp, QIR_OP_PAD, 2, in);
    set_ints(imp, op, "pads", 6, pads);
    set_w(imp, op, "mode", "constant");
    x = op_end(imp, op, NULL);
  }
  int64_t *idx = malloc(sizeof *idx * (size_t)(frames * W));
  if (!idx) abort();
  for (int64_t f = 0; f < frames; f++)
    for (int64_t w = 0; w < W; w++) idx[f * W + w] = f * step + w;
  int64_t id[2] = {frames, W};
  qir_value *ind = const_data(imp, qir_type_make(QIR_I64, 2, id), idx);
  free(idx);
  qir_value *in[2] = {x, ind};
  qir_op *op = op_begin(imp, QIR_OP_GATHER, 2, in);
  set_i(imp, op, "axis", 1);
  qir_value *fr = op_end(imp, op, NULL); /* [batch, frames, W, c] */
  if (window) {
    int64_t wd[4] = {1, 1, W, 1};
    fr = emit2(imp, QIR_OP_MUL, fr, emit_reshape(imp, window, 4, wd));
  }
  if (!fr) return false;
  bool onesided = attr_int(nc, "onesided", 1) != 0;
  return node_set_out(nc, 0, dft(nc, fr, 2, flen, onesided ? flen / 2 + 1 : flen, false));
}

/* HannWindow, HammingWindow, BlackmanWindow: a constant of `size` samples. */
static bool cv_window(node_ctx *nc) {
  int64_t size;
  int n;
  if (!IN(0)) return node_fail(nc, "size is required");
  if (!need_const_ints(nc, 0, &size, 1, &n)) return false;
  if (size < 0 || size > (1 << 20)) return node_fail(nc, "size must be in [0, 2^20]");
  qir_dtype dt = QIR_F32;
  const Onnx__AttributeProto *od = attr_find(nc, "output_datatype");
  if (od && !onnx_dtype_to_qir((int32_t)od->i, &dt)) return node_fail(nc, "unsupported output_datatype");
  double N = attr_int(nc, "periodic", 1) ? (double)size : (double)size - 1;
  const char *t = nc->node->op_type;
  char *buf = calloc((size_t)size + 1, (size_t)qir_dtype_size(dt));
  if (!buf) abort();
  for (int64_t i = 0; i < size; i++) {
    double a = N > 0 ? 2 * PI * (double)i / N : 0, v;
    if (!strcmp(t, "HannWindow")) v = 0.5 - 0.5 * cos(a);
    else if (!strcmp(t, "HammingWindow")) v = 25.0 / 46 - 21.0 / 46 * cos(a);
    else v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2 * a);
    qir_store_elem(dt, buf, i, v);
  }
  qir_value *w = const_data(IMP, qir_type_make(dt, 1, &size), buf);
  free(buf);
  return node_set_out(nc, 0, w);
}

/* MelWeightMatrix: the triangular mel filter bank [dft_length/2+1, bins], a
 * constant of constant inputs, after ONNX's reference (bin edges floored to
 * spectrogram bins). */
static bool cv_mel_weight_matrix(node_ctx *nc) {
  int64_t bins, dft_len, rate;
  double lo, hi;
  int n;
  for (int i = 0; i < 5; i++)
    if (!IN(i)) return node_fail(nc, "all five inputs are required");
  if (!need_const_ints(nc, 0, &bins, 1, &n) || !need_const_ints(nc, 1, &dft_len, 1, &n) ||
      !need_const_ints(nc, 2, &rate, 1, &n) || !need_const_floats(nc, 3, &lo, 1, &n) || !need_const_floats(nc, 4, &hi, 1, &n))
    return false;
  if (bins < 1 || dft_len < 1 || rate < 1 || bins > 4096 || dft_len > (1 << 16)) return node_fail(nc, "sizes out of range");
  qir_dtype dt = QIR_F32;
  const Onnx__AttributeProto *od = attr_find(nc, "output_datatype");
  if (od && !onnx_dtype_to_qir((int32_t)od->i, &dt)) return node_fail(nc, "unsupported output_datatype");
  int64_t spec = dft_len / 2 + 1, *edge = malloc(sizeof *edge * (size_t)(bins + 2));
  double *w = calloc((size_t)(spec * bins), sizeof *w);
  if (!edge || !w) abort();
  double mlo = 2595 * log10(1 + lo / 700), mhi = 2595 * log10(1 + hi / 700), step = (mhi - mlo) / (double)(bins + 2);
  for (int64_t i = 0; i < bins + 2; i++) {
    double hz = 700 * (pow(10, ((double)i * step + mlo) / 2595) - 1);
    edge[i] = (int64_t)floor((double)(dft_len + 1) * hz / (double)rate);
  }
  bool ok = true;
  for (int64_t i = 0; i < bins && ok; i++) {
    int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
    if (l < 0 || c < l || h < c || h > spec || c >= spec) ok = false;
    else if (c == l) w[c * bins + i] = 1;
    else
      for (int64_t j = l; j <= c; j++) w[j * bins + i] = (double)(j - l) / (double)(c - l);
    if (ok && h > c)
      for (int64_t j = c; j < h; j++) w[j * bins + i] = (double)(h - j) / (double)(h - c);
  }
  qir_value *v = NULL;
  if (ok) {
    char *buf = calloc((size_t)(spec * bins), (size_t)qir_dtype_size(dt));
    if (!buf) abort();
    for (int64_t i = 0; i < spec * bins; i++) qir_store_elem(dt, buf, i, w[i]);
    int64_t d[2] = {spec, bins};
    v = const_data(IMP, qir_type_make(dt, 2, d), buf);
    free(buf);
  }
  free(edge);
  free(w);
  if (!ok) return node_fail(nc, "the band edges fall outside the spectrogram bins");
  return node_set_out(nc, 0, v);
}

static const converter_entry signal_ops[] = {
    {"MelWeightMatrix", cv_mel_weight_matrix, "output_datatype"},
    {"DFT", cv_dft, "axis,inverse,onesided"},
    {"STFT", cv_stft, "onesided"},
    {"HannWindow", cv_window, "output_datatype,periodic"},
    {"HammingWindow", cv_window, "output_datatype,periodic"},
    {"BlackmanWindow", cv_window, "output_datatype,periodic"},
};

bool find_signal_op(const char *op_type, convert_fn *fn, const char **attrs) {
  return converter_lookup(signal_ops, sizeof signal_ops / sizeof *signal_ops, op_type, fn, attrs);
}
