/* tma.c: whether an operand read can be a tensor-memory-accelerator copy
 * (qir.h, qir_tma_view_of). */
#include "qir.h"

bool qir_tma_view_of(const qir_compute *c, const qir_expr *access, const qir_type *t, int inner_var, qir_tma_view *v,
                     const char **why) {
  int nv = c->n_axes + c->n_red;
  int64_t es = qir_dtype_size(t->dtype), stride = es;
  bool used[64] = {false};
  *v = (qir_tma_view){0};
  if (access->kind != QIR_EX_ACCESS || access->n_args != t->rank || nv > 64) {
    *why = "the operand is not a plain tensor read";
    return false;
  }
  for (int j = t->rank - 1; j >= 0; j--) {
    int64_t coef[64], k0;
    if (t->sym[j]) {
      *why = "a symbolic dimension (the tensor map is encoded once)";
      return false;
    }
    if (!qir_expr_affine(access->args[j], nv, coef, &k0)) {
      *why = "an index that is not affine";
      return false;
    }
    int var = -1, n_vars = 0;
    for (int x = 0; x < nv; x++)
      if (coef[x] && c->axis_extents[x] != 1) {   /* an axis of extent 1 (a 1x1 window's) is 0 */
        n_vars++;
        var = x;
      }
    bool keep = true;
    if (t->dims[j] == 1) {   /* index 0 wherever it is in range: no dimension of the map */
      continue;
    }
    if (n_vars == 0) {
      if (k0 < 0 || k0 >= t->dims[j]) {
        *why = "a constant index outside the tensor";
        return false;
      }
    } else if (n_vars > 1 || coef[var] != 1 || k0 != 0 || used[var]) {
      *why = "an index that is not one variable (a window, a stride or an offset: no tiled tensor map)";
      return false;
    }
    if (keep) {
      if (v->rank == QIR_TMA_MAX_RANK) {
        *why = "more than five dimensions";
        return false;
      }
      if (v->rank > 0 && stride % 16) {
        *why = "a stride that is not a multiple of 16 bytes";
        return false;
      }
      v->var[v->rank] = n_vars ? var : -1;
      v->cst[v->rank] = n_vars ? 0 : k0;
      v->dims[v->rank] = t->dims[j];
      v->strides[v->rank] = stride;
      v->rank++;
      if (n_vars) used[var] = true;
    }
    stride *= t->dims[j];
  }
  if (v->rank == 0 || v->var[0] < 0 || (inner_var >= 0 && v->var[0] != inner_var)) {
    *why = "its contiguous dimension is not the one the tile needs inside (K for K-major, M or N for MN-major)";
    return false;
  }
  return true;
}
