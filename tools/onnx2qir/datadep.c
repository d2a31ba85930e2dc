/* datadep.c: operators whose output shape depends on input values (NonZero,
 * Compress, Unique, NonMaxSuppression).  qir's shapes are static, so the
 * importer evaluates them when the deciding inputs are constants (weights, or
 * graph inputs bound with --bind) and otherwise refuses them with the usual
 * located error naming the inputs to bind: never a guessed shape.  Compress
 * only needs its condition: the data is gathered at run time. */
#include "onnx2qir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(k) ((k) < nc->n_in ? nc->in[k] : NULL)
#define IMP (nc->imp)


static int64_t *alloc_i64(int64_t n) {
  int64_t *p = malloc(sizeof *p * (size_t)(n > 0 ? n : 1));
  if (!p) abort();
  return p;
}

static qir_value *const_i64_tensor(importer *imp, int rank, const int64_t *dims, const int64_t *data) {
  return const_data(imp, qir_type_make(QIR_I64, rank, dims), data);
}

/* NonZero: the coordinates of the non-zero elements, [rank, count], row-major. */
static bool cv_non_zero(node_ctx *nc) {
  qir_value *x = need_const_input(nc, 0);
  if (!x) return false;
  int r = x->type.rank > 0 ? x->type.rank : 1;
  int64_t n = qir_type_numel(&x->type), count = 0;
  if (n > FOLD_LIMIT) return node_fail(nc, "input too large to evaluate at import");
  for (int64_t i = 0; i < n; i++) count += const_elem(IMP, x, i) != 0;
  int64_t *out = alloc_i64((int64_t)r * count), idx[QIR_MAX_RANK] = {0}, k = 0;
  for (int64_t i = 0; i < n; i++) {
    if (const_elem(IMP, x, i) != 0) {
      for (int d = 0; d < r; d++) out[d * count + k] = x->type.rank ? idx[d] : 0;
      k++;
    }
    for (int d = x->type.rank - 1; d >= 0; d--) {
      if (++idx[d] < x->type.dims[d]) break;
      idx[d] = 0;
    }
  }
  int64_t dims[2] = {r, count};
  qir_value *v = const_i64_tensor(IMP, 2, dims, out);
  free(out);
  if (nc->n_out > 0) nc->out[0] = v;
  return v != NULL;
}

/* Compress: the slices along axis (or elements of the flattened input) whose
 * condition is true; the condition must be constant, the data need not be. */
/* The node's `axis` when it has one; else x flattened to 1-D and axis 0
 * (Compress and Unique without an axis work on the flattened input). */
static bool axis_or_flat(node_ctx *nc, bool has_axis, qir_value **x, int64_t *axis) {
  if (has_axis) {
    *axis = norm_axis(attr_int(nc, "axis", 0), (*x)->type.rank);
    return *axis >= 0 || node_fail(nc, "axis out of range");
  }
  int64_t n = qir_type_numel(&(*x)->type);
  *x = emit_reshape(IMP, *x, 1, &n);
  *axis = 0;
  return *x != NULL;
}

static bool cv_compress(node_ctx *nc) {
  if (!IN(0)) return node_fail(nc, "required input 0 is missing");
  qir_value *x = IN(0), *cond = need_const_input(nc, 1);
  if (!cond) return false;
  bool has_axis = attr_find(nc, "axis") != NULL;
  int64_t axis = 0;
  if (!axis_or_flat(nc, has_axis, &x, &axis)) return false;
  int64_t len = x->type.dims[axis], n_cond = qir_type_numel(&cond->type);
  if (cond->type.rank != 1) return node_fail(nc, "condition must be 1-D");
  if (n_cond > len) return node_fail(nc, "condition is longer than the compressed axis");
  int64_t *idx = alloc_i64(n_cond), k = 0;
  for (int64_t i = 0; i < n_cond; i++)
    if (const_elem(IMP, cond, i) != 0) idx[k++] = i;
  qir_value *in[2] = {x, const_i64s(IMP, (int)k, idx)};
  free(idx);
  qir_op *op = op_begin(IMP, QIR_OP_GATHER, 2, in);
  set_i(IMP, op, "axis", axis);
  qir_value *y = op_end(IMP, op, NULL);
  if (y && nc->n_out > 0) nc->out[0] = y;
  return y != NULL;
}

/* ---------------------------------------------------------------- Unique */

typedef struct {
  importer *imp;
  qir_value *x;
  int64_t outer, len, inner; /* x as [outer, len, inner]; slices along len */
} slices;

static double slice_elem(const slices *s, int64_t slice, int64_t k) {
  int64_t o = k / s->inner, i = k % s->inner;
  return const_elem(s->imp, s->x, (o * s->len + slice) * s->inner + i);
}

/* numpy's order of slices: lexicographic on their elements */
static int slice_cmp(const slices *s, int64_t a, int64_t b) {
  for (int64_t k = 0; k < s->outer * s->inner; k++) {
    double p = slice_elem(s, a, k), q = slice_elem(s, b, k);
    if (p < q) return -1;
    if (p > q) return 1;
  }
  return 0;
}

/* Unique: the distinct elements (or slices along axis), sorted or in order of
 * first occurrence, with the first index, the inverse map and the counts. */
static bool cv_unique(node_ctx *nc) {
  qir_value *x0 = need_const_input(nc, 0);
  if (!x0) return false;
  if (qir_type_numel(&x0->type) > 4096) return node_fail(nc, "input too large to evaluate at import (at most 4096 elements)");
  qir_value *x = x0;
  bool has_axis = attr_find(nc, "axis") != NULL, sorted = attr_int(nc, "sorted", 1) != 0;
  int64_t axis = 0;
  if (!axis_or_flat(nc, has_axis, &x, &axis)) return false;
  slices s = {IMP, x, 1, x->type.dims[axis], 1};
  for (int i = 0; i < x->type.rank; i++)
    if (i < axis) s.outer *= x->type.dims[i];
    else if (i > axis) s.inner *= x->type.dims[i];
  int64_t M = s.len, nu = 0;
  int64_t *first = alloc_i64(M), *inverse = alloc_i64(M), *counts = alloc_i64(M), *order = alloc_i64(M);
  /* distinct slices in order of first occurrence */
  for (int64_t i = 0; i < M; i++) {
    int64_t u = 0;
    while (u < nu && slice_cmp(&s, first[u], i) != 0) u++;
    if (u == nu) first[nu] = i, counts[nu++] = 0;
    counts[u]++;
    inverse[i] = u;
  }
  /* order[j]: the j-th output's first-occurrence number (insertion sort: few) */
  for (int64_t j = 0; j < nu; j++) order[j] = j;
  if (sorted)
    for (int64_t j = 1; j < nu; j++)
      for (int64_t k = j; k > 0 && slice_cmp(&s, first[order[k - 1]], first[order[k]]) > 0; k--) {
        int64_t t = order[k];
        order[k] = order[k - 1];
        order[k - 1] = t;
      }
  int64_t *rank_of = alloc_i64(nu), *idx = alloc_i64(nu), *cnt = alloc_i64(nu), *inv = alloc_i64(M);
  for (int64_t j = 0; j < nu; j++) rank_of[order[j]] = j, idx[j] = first[order[j]], cnt[j] = counts[order[j]];
  for (int64_t i = 0; i < M; i++) inv[i] = rank_of[inverse[i]];
  qir_value *in[2] = {x, const_i64s(IMP, (int)nu, idx)};
  qir_op *op = op_begin(IMP, QIR_OP_GATHER, 2, in);
  set_i(IMP, op, "axis", axis);
  qir_value *y = op_end(IMP, op, NULL);
  qir_value *outs[4] = {y, const_i64s(IMP, (int)nu, idx), const_i64s(IMP, (int)M, inv), const_i64s(IMP, (int)nu, cnt)};
  free(first), free(inverse), free(counts), free(order), free(rank_of), free(idx), free(cnt), free(inv);
  for (int k = 0; k < 4 && k < nc->n_out; k++) nc->out[k] = outs[k];
  return y != NULL;
}

/* ---------------------------------------------------------------- NonMaxSuppression */

typedef struct {
  double y1, x1, y2, x2;
} box;

static box read_box(importer *imp, qir_value *b, int64_t at, bool center) {
  double v[4];
  for (int k = 0; k < 4; k++) v[k] = const_elem(imp, b, at * 4 + k);
  box r;
  if (center) { /* [x_center, y_center, width, height] */
    r.x1 = v[0] - v[2] / 2, r.x2 = v[0] + v[2] / 2, r.y1 = v[1] - v[3] / 2, r.y2 = v[1] + v[3] / 2;
  } else { /* [y1, x1, y2, x2], either diagonal */
    r.y1 = fmin(v[0], v[2]), r.y2 = fmax(v[0], v[2]), r.x1 = fmin(v[1], v[3]), r.x2 = fmax(v[1], v[3]);
  }
  return r;
}

static double iou(box a, box b) {
  double ih = fmin(a.y2, b.y2) - fmax(a.y1, b.y1), iw = fmin(a.x2, b.x2) - fmax(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return 0;
  double inter = ih * iw, uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) - inter;
  return uni > 0 ? inter / uni : 0;
}

/* NonMaxSuppression: per batch and class, boxes by descending score (ties by
 * index) above score_threshold, each kept unless it overlaps a kept one by
 * more than iou_threshold, at most max_output_boxes_per_class; the result
 * lists [batch, class, box] rows. */
static bool cv_nms(node_ctx *nc) {
  qir_value *boxes = need_const_input(nc, 0), *scores = boxes ? need_const_input(nc, 1) : NULL;
  if (!boxes || !scores) return false;
  int64_t max_out = 0;
  double iou_thr = 0, score_thr = -INFINITY;
  int n;
  if (IN(2) && qir_type_numel(&IN(2)->type) > 0 && !need_const_ints(nc, 2, &max_out, 1, &n)) return false;
  if (IN(3) && qir_type_numel(&IN(3)->type) > 0 && !need_const_floats(nc, 3, &iou_thr, 1, &n)) return false;
  if (IN(4) && qir_type_numel(&IN(4)->type) > 0 && !need_const_floats(nc, 4, &score_thr, 1, &n)) return false;
  if (boxes->type.rank != 3 || boxes->type.dims[2] != 4 || scores->type.rank != 3 ||
      scores->type.dims[0] != boxes->type.dims[0] || scores->type.dims[2] != boxes->type.dims[1])
    return node_fail(nc, "boxes must be [B, N, 4] and scores [B, C, N]");
  bool center = attr_int(nc, "center_point_box", 0) != 0;
  int64_t B = boxes->type.dims[0], C = scores->type.dims[1], N = boxes->type.dims[1];
  if (B * C * N > FOLD_LIMIT) return node_fail(nc, "too many boxes to evaluate at import");
  int64_t *sel = alloc_i64(3 * B * C * (N > 0 ? N : 1)), n_sel = 0, *cand = alloc_i64(N), *kept = alloc_i64(N);
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++) {
      int64_t n_cand = 0, nk = 0;
      for (int64_t i = 0; i < N; i++)
        if (const_elem(IMP, scores, (b * C + c) * N + i) > score_thr) cand[n_cand++] = i;
      /* stable insertion sort by descending score */
      for (int64_t j = 1; j < n_cand; j++)
        for (int64_t k = j; k > 0; k--) {
          double p = const_elem(IMP, scores, (b * C + c) * N + cand[k - 1]), q = const_elem(IMP, scores, (b * C + c) * N + cand[k]);
          if (!(q > p)) break;
          int64_t t = cand[k];
          cand[k] = cand[k - 1];
          cand[k - 1] = t;
        }
      for (int64_t j = 0; j < n_cand && nk < max_out; j++) {
        box bj = read_box(IMP, boxes, b * N + cand[j], center);
        bool keep = true;
        for (int64_t k = 0; k < nk && keep; k++) keep = !(iou(bj, read_box(IMP, boxes, b * N + kept[k], center)) > iou_thr);
        if (!keep) continue;
        kept[nk++] = cand[j];
        sel[3 * n_sel] = b, sel[3 * n_sel + 1] = c, sel[3 * n_sel + 2] = cand[j];
        n_sel++;
      }
    }
  int64_t dims[2] = {n_sel, 3};
  qir_value *v = const_i64_tensor(IMP, 2, dims, sel);
  free(sel), free(cand), free(kept);
  if (nc->n_out > 0) nc->out[0] = v;
  return v != NULL;
}

static const converter_entry datadep_ops[] = {
    {"NonZero", cv_non_zero, ""},
    {"Compress", cv_compress, "axis"},
    {"Unique", cv_unique, "axis,sorted"},
    {"NonMaxSuppression", cv_nms, "center_point_box"},
};

bool find_datadep_op(const char *op_type, convert_fn *fn, const char **attrs) {
  return converter_lookup(datadep_ops, sizeof datadep_ops / sizeof *datadep_ops, op_type, fn, attrs);
}
