/* tma.c: whether an operand read can be a tensor-memory-accelerator copy
 * (qir.h, qir_tma_view_of). */
#include "qir.h"

/* The affine form of access index j: coefficients over the nv variables
 * (those of extent 1 dropped: they are 0) and the constant. */
static bool index_form(const qir_compute *c, const qir_expr *e, int nv, int64_t *coef, int64_t *k0) {
  if (!qir_expr_affine(e, nv, coef, k0)) return false;
  for (int x = 0; x < nv; x++)
    if (c->axis_extents[x] == 1) coef[x] = 0;
  return true;
}

/* The least and greatest value of an affine index over the variables' extents. */
static void index_range(const qir_compute *c, int nv, const int64_t *coef, int64_t k0, int64_t *lo, int64_t *hi) {
  *lo = *hi = k0;
  for (int x = 0; x < nv; x++) {
    int64_t far = coef[x] * (c->axis_extents[x] - 1);
    if (far < 0) *lo += far;
    else *hi += far;
  }
}

/* Which bound of index j a conjunct `l CMP r` is: bit 1 for idx >= 0, bit 2
 * for idx < extent, 0 for anything else (a stricter or looser bound, another
 * index, another condition). */
static int bound_of(const qir_compute *c, const qir_expr *e, int nv, const int64_t *icoef, int64_t ik, int64_t extent) {
  if (e->kind != QIR_EX_BINARY || e->n_args != 2) return 0;
  qir_expr_fn fn = e->fn;
  if (fn != QIR_FN_LT && fn != QIR_FN_LE && fn != QIR_FN_GT && fn != QIR_FN_GE) return 0;
  int64_t lc[64], rc[64], lk, rk;
  if (!index_form(c, e->args[0], nv, lc, &lk) || !index_form(c, e->args[1], nv, rc, &rk)) return 0;
  /* d = l - r; the conjunct is d CMP 0 */
  int sign = 0;
  for (int x = 0; x < nv; x++) {
    int64_t d = lc[x] - rc[x];
    int s = d == icoef[x] ? 1 : d == -icoef[x] ? -1 : 0;
    if (!s || (sign && s != sign && icoef[x])) return 0;
    if (icoef[x]) sign = s;
  }
  if (!sign) return 0;
  /* sign * (idx - ik) + (lk - rk) CMP 0: as idx CMP' bound */
  int64_t off = lk - rk - sign * ik;   /* sign * idx + off CMP 0 */
  if (sign < 0) {   /* -idx + off CMP 0  <=>  idx CMP~ off */
    fn = fn == QIR_FN_LT ? QIR_FN_GT : fn == QIR_FN_LE ? QIR_FN_GE : fn == QIR_FN_GT ? QIR_FN_LT : QIR_FN_LE;
    off = -off;
  }
  /* idx + off CMP 0, i.e. idx CMP -off */
  int64_t b = -off;
  if ((fn == QIR_FN_GE && b == 0) || (fn == QIR_FN_GT && b == -1)) return 1;
  if ((fn == QIR_FN_LT && b == extent) || (fn == QIR_FN_LE && b == extent - 1)) return 2;
  return 0;
}

/* Every conjunct of the mask bounds one index of the access exactly; the
 * bounds found are or-ed into covered[j]. */
static bool mask_bounds(const qir_compute *c, const qir_expr *m, const qir_expr *access, const qir_type *t, int nv, int *covered) {
  if (m->kind == QIR_EX_BINARY && m->fn == QIR_FN_AND)
    return mask_bounds(c, m->args[0], access, t, nv, covered) && mask_bounds(c, m->args[1], access, t, nv, covered);
  for (int j = 0; j < access->n_args; j++) {
    int64_t coef[64], k0;
    bool any = false;
    if (!index_form(c, access->args[j], nv, coef, &k0)) continue;
    for (int x = 0; x < nv; x++) any |= coef[x] != 0;
    int b = any ? bound_of(c, m, nv, coef, k0, t->dims[j]) : 0;
    if (b) {
      covered[j] |= b;
      return true;
    }
  }
  return false;
}

bool qir_tma_view_of(const qir_compute *c, const qir_expr *access, const qir_type *t, const qir_expr *mask, uint64_t stepped,
                     int inner_var, qir_tma_view *v, const char **why) {
  int nv = c->n_axes + c->n_red;
  int64_t es = qir_dtype_size(t->dtype), stride = es;
  bool used[64] = {false};
  int covered[QIR_MAX_RANK] = {0};
  *v = (qir_tma_view){0};
  if (access->kind != QIR_EX_ACCESS || access->n_args != t->rank || nv > 64 || t->rank > QIR_MAX_RANK) {
    *why = "the operand is not a plain tensor read";
    return false;
  }
  if (mask && !mask_bounds(c, mask, access, t, nv, covered)) {
    *why = "a mask that is not the operand's padding (its indices' bounds)";
    return false;
  }
  for (int j = t->rank - 1; j >= 0; j--) {
    int64_t coef[64], k0;
    if (t->sym[j]) {
      *why = "a symbolic dimension (the tensor map is encoded once)";
      return false;
    }
    if (!index_form(c, access->args[j], nv, coef, &k0)) {
      *why = "an index that is not affine";
      return false;
    }
    int64_t lo, hi;
    index_range(c, nv, coef, k0, &lo, &hi);
    if ((lo < 0 && !(covered[j] & 1)) || (hi >= t->dims[j] && !(covered[j] & 2))) {
      *why = "an index that can leave the tensor unmasked";
      return false;
    }
    if (t->dims[j] == 1 && lo == 0 && hi == 0) continue;   /* index 0 throughout: no dimension of the map */
    if (v->rank == QIR_TMA_MAX_RANK) {
      *why = "more than five dimensions";
      return false;
    }
    int var = -1, n_walk = 0, n_shift = 0, d = v->rank;
    for (int x = 0; x < nv; x++) {
      if (!coef[x]) continue;
      if ((stepped >> x) & 1) {
        if (n_shift == QIR_TMA_MAX_SHIFTS) {
          *why = "an index of too many window variables";
          return false;
        }
        v->shift_var[d][n_shift] = x;
        v->shift_coef[d][n_shift++] = coef[x];
      } else {
        n_walk++;
        var = x;
      }
    }
    /* a traversal stride (1 to 8) past dimension 0, where TMA has none */
    if (n_walk > 1 || (n_walk && (coef[var] < 1 || coef[var] > (v->rank ? 8 : 1) || used[var]))) {
      *why = v->rank ? "an index that is not one variable (plus window steps and an offset): a stride over 8, or two tile variables"
                     : "a strided contiguous dimension (TMA steps only the outer ones)";
      return false;
    }
    /* the copy's start along the contiguous dimension must be 16-byte aligned (the H200 raised an
     * illegal instruction on a 3x3 NCHW window's taps, 2026-11-28): so must its offset and steps */
    bool misaligned = !v->rank && (k0 * es) % 16;
    for (int s = 0; s < n_shift && !v->rank; s++) misaligned |= (v->shift_coef[d][s] * es) % 16 != 0;
    if (misaligned) {
      *why = "an offset or window step along the contiguous dimension that is not a multiple of 16 bytes";
      return false;
    }
    if (v->rank > 0 && stride % 16) {
      *why = "a stride that is not a multiple of 16 bytes";
      return false;
    }
    v->var[v->rank] = var;
    v->estride[v->rank] = var >= 0 ? coef[var] : 1;
    v->cst[v->rank] = k0;
    v->n_shifts[v->rank] = n_shift;
    v->dims[v->rank] = t->dims[j];
    v->strides[v->rank] = stride;
    v->rank++;
    if (var >= 0) used[var] = true;
    stride *= t->dims[j];
  }
  if (v->rank == 0 || v->var[0] < 0 || (inner_var >= 0 && v->var[0] != inner_var)) {
    *why = "its contiguous dimension is not the one the tile needs inside (K for K-major, M or N for MN-major)";
    return false;
  }
  return true;
}
