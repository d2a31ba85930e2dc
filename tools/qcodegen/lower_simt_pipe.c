/* lower_simt_pipe.c: the staging pipeline of the SIMT main loop (lower.c's
 * lower_tile_block), for #tile plans without `mma`: f32 matmul, batched
 * matmul, gemm (transB too), convolution as implicit GEMM, the Welder
 * groups they anchor, and the reductions of staged groups (lower_group.c's
 * tiled_segment: their global operands only, where the target has cp.async;
 * a box's origin there moves by lo_step, not by the block).
 *
 *   - Stages.  Each staged tile (plan_staging) gets `stages` slots: the plan's
 *     `stages`, else 2 on a GPU target when the slots fit the target's shared
 *     memory per block, else 1 (the unpipelined loop of lower.c).
 *   - Copies.  On CUDA sm_80 and later (and in C, which emulates it) the
 *     copies are cp.async: 16 bytes where the tile's rows are whole 16-byte
 *     chunks of the tensor (below) and the tensor starts 16-byte aligned
 *     (tested at run time), else 4 bytes per element; out-of-range elements
 *     and chunks are zero-filled.  Elsewhere (HIP, older CUDA, types the
 *     copy would have to convert) a thread loads and stores: 128-bit vector
 *     copies where the 16-byte path applies, one element otherwise, into the
 *     same slots, so the loads of step t+1 still overlap step t's compute.
 *   - Runs.  The trailing dimensions a tile covers whole (origin 0, no
 *     guard) merge with the one before them into one contiguous run in
 *     global memory (a convolution weight's [c][kh][kw] per output channel).
 *     A run of a whole number of 16-byte chunks, starting 16-byte aligned in
 *     every block and step, is copied a chunk at a time.
 *   - Layout.  Runs are stored row after row; with the plan's smem_pad the
 *     row stride is an odd number of 16-byte chunks, so that the rows eight
 *     lanes read at one reduction point fall in eight distinct bank groups
 *     (the compute reads a column of A-like tiles), while every row still
 *     starts 16-byte aligned for the copies.  Tiles without runs keep
 *     lower.c's layout (last dimension padded by smem_pad).
 */
#include <inttypes.h>

#include "lower.h"

kexpr *staged_origin(lower_env *env, const staged_access *sa, int j, kexpr *const *lo, const int64_t *size) {
  kbuilder *b = env->b;
  int nv = env->comp->n_axes + env->comp->n_red;
  kexpr *origin = ke_int(b, sa->k0[j]);
  for (int v = 0; v < nv; v++) {
    int64_t c = sa->coef[j][v];
    if (!c) continue;
    kexpr *at = c > 0 ? lo[v] : ke_add(b, lo[v], ke_int(b, size[v] - 1));
    origin = ke_add(b, origin, ke_mul(b, ke_int(b, c), at));
  }
  return origin;
}

/* 4-byte elements stored as they are (what cp.async and 16-byte copies move). */
static bool copies_as_is(qir_dtype dt) { return dt == QIR_F32 || dt == QIR_I32 || dt == QIR_U32; }

/* Granularity of each variable's start over blocks and steps (0: always 0). */
static int64_t start_step(const tile_plan *p, int n, int v, const bool *lo_zero) {
  if (lo_zero[v]) return 0;
  if (v < n) return p->lo_step[v] ? p->lo_step[v] : p->block[v];
  return p->rstep[v - n];
}

/* Chooses the run of dimensions copied 16 bytes at a time, and the layout. */
static void layout_runs(lower_env *env, const tile_plan *p, staged_access *sa, const bool *lo_zero) {
  const qir_compute *c = env->comp;
  int n = c->n_axes, nv = n + c->n_red, r = sa->rank;
  const qir_type *ty = &env->args[sa->access->operand]->type;
  sa->run_dim = -1;
  if (!copies_as_is(ty->dtype) || r == 0) return;
  bool zero[QIR_MAX_RANK];
  for (int j = 0; j < r; j++) {
    zero[j] = sa->k0[j] == 0;
    for (int v = 0; v < nv; v++) zero[j] &= !sa->coef[j][v] || lo_zero[v];
  }
  int j0 = r - 1;
  while (j0 > 0 && sa->ext[j0] == ty->dims[j0] && !sa->guard[j0] && zero[j0]) j0--;
  int64_t inner = 1, gstride[QIR_MAX_RANK], gs = 1;
  for (int j = r - 1; j > j0; j--) inner *= ty->dims[j];
  for (int j = r - 1; j >= 0; j--) gstride[j] = gs, gs *= ty->dims[j];
  int64_t run = sa->ext[j0] * inner;
  if (run % 4) return;
  for (int j = 0; j < j0; j++)
    if (gstride[j] % 4) return;
  /* the run's start, origin[j0] * inner, a multiple of 4 elements in every block and step */
  if ((sa->k0[j0] * inner) % 4) return;
  for (int v = 0; v < nv; v++)
    if (sa->coef[j0][v] && (sa->coef[j0][v] * start_step(p, n, v, lo_zero) * inner) % 4) return;
  /* a guarded run dimension: each chunk wholly inside or outside */
  if (sa->guard[j0] && inner % 4 && !(inner == 1 && ty->dims[j0] % 4 == 0)) return;
  int64_t pad = run;
  if (p->pad > 0 && j0 > 0 && (pad / 4) % 2 == 0) pad += 4;
  sa->run_dim = j0;
  sa->run = run;
  sa->run_pad = pad;
  int64_t s = 1;
  for (int j = r - 1; j > j0; j--) sa->stride[j] = s, s *= sa->ext[j];
  sa->stride[j0] = inner;
  s = pad;
  for (int j = j0 - 1; j >= 0; j--) sa->stride[j] = s, s *= sa->ext[j];
  sa->slot_elems = s;
}

/* lower.c's layout: row-major over the extents, the last dimension padded. */
static void layout_plain(const tile_plan *p, staged_access *sa) {
  int64_t s = 1;
  for (int j = sa->rank - 1; j >= 0; j--) {
    sa->pdims[j] = sa->ext[j] + (j == sa->rank - 1 ? p->pad : 0);
    sa->stride[j] = s;
    s *= sa->pdims[j];
  }
  sa->slot_elems = s;
  sa->run_dim = -1;
}

static int64_t elem_bytes(ktype t) { return t == KT_F64 || t == KT_I64 || t == KT_U64 ? 8 : 4; }

int simt_pipe_layout(lower_env *env, const tile_plan *p, const bool *lo_zero) {
  kbuilder *b = env->b;
  int S = 1;
  if (env->n_staged && !p->mma && (p->stages > 1 || (p->stages == 0 && p->simt_pipe))) {
    int64_t bytes = 0;
    for (int s = 0; s < env->n_staged; s++) {
      staged_access *sa = &env->staged[s];
      layout_runs(env, p, sa, lo_zero);
      bytes += sa->slot_elems * elem_bytes(ktype_of_dtype(env->args[sa->access->operand]->type.dtype));
    }
    S = p->stages ? p->stages : 2;
    int64_t cap = p->smem_cap > 0 ? p->smem_cap : SMEM_BUDGET;
    if (S * bytes > cap) {
      if (p->stages) {
        qir_error(env->cg->d, env->loc,
                  "#tile stages = %d needs %" PRId64 " bytes of shared memory per block, more than the %" PRId64 " its target has",
                  S, S * bytes, cap);
        env->failed = true;
      }
      S = 1;
    }
  }
  for (int s = 0; s < env->n_staged; s++) {
    staged_access *sa = &env->staged[s];
    if (S == 1) layout_plain(p, sa);
    sa->slot = NULL;
    sa->smem = kvar_new(b, env->k, "s", ktype_of_dtype(env->args[sa->access->operand]->type.dtype), S * sa->slot_elems, KV_SHARED);
  }
  return S;
}

/* Element by element: cp.async of 4 bytes, or a load and a shared store
 * (converted, zero where the index leaves the tensor). */
static kstmt *issue_elements(lower_env *env, const tile_plan *p, const staged_access *sa, kexpr *const *org, kexpr *slot) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_type *t = &env->args[sa->access->operand]->type;
  int64_t elems = 1;
  for (int j = 0; j < sa->rank; j++) elems *= sa->ext[j];
  kvar *f = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL);
  kstmt *body = ks_seq(b);
  kexpr *off[QIR_MAX_RANK], *g[QIR_MAX_RANK], *inb = NULL;
  decompose(env, ke_var(b, f), sa->ext, sa->rank, off);
  kexpr *at = ke_int(b, 0);
  for (int j = sa->rank - 1; j >= 0; j--) at = ke_add(b, ke_mul(b, off[j], ke_int(b, sa->stride[j])), at);
  at = ke_add(b, slot, at);
  for (int j = 0; j < sa->rank; j++) {
    kvar *gv = kvar_new(b, k, "g", b->index_type, 0, KV_LOCAL);
    ks_add(b, body, ks_decl(b, gv, ke_add(b, org[j], off[j])));
    g[j] = ke_var(b, gv);
    if (sa->guard[j])
      inb = ke_and(b, inb, ke_and(b, ke_bin(b, QIR_FN_GE, g[j], ke_int(b, 0), KT_BOOL), ke_lt(b, g[j], ke_int(b, t->dims[j]))));
  }
  kexpr *src = strides_linear(env, g, t->dims, t->rank);
  int param = 1 + sa->access->operand;
  if (p->simt_async && copies_as_is(t->dtype)) {
    ks_add(b, body, ks_cp_async_n(b, sa->smem, at, param, src, inb, 4));
  } else {
    kexpr *val = ke_load(b, k, param, src);
    if (inb) val = ke_select(b, inb, val, ke_cast(b, ke_int(b, 0), val->type), val->type);
    ks_add(b, body, ks_assign(b, sa->smem, at, val));
  }
  return ks_for(b, f, ke_tid(b), ke_int(b, elems), k->threads, body);
}

/* A run's 16-byte chunks: cp.async, or a 128-bit load and store. */
static kstmt *issue_chunks(lower_env *env, const tile_plan *p, const staged_access *sa, kexpr *const *org, kexpr *slot) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_type *t = &env->args[sa->access->operand]->type;
  int j0 = sa->run_dim;
  int64_t rows = 1, per_row = sa->run / 4, inner = sa->stride[j0];
  for (int j = 0; j < j0; j++) rows *= sa->ext[j];
  kvar *f = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL);
  kstmt *body = ks_seq(b);
  kvar *ev = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  ks_add(b, body, ks_decl(b, ev, ke_mul(b, ke_mod(b, ke_var(b, f), ke_int(b, per_row)), ke_int(b, 4))));
  kexpr *e0 = ke_var(b, ev);
  kexpr *off[QIR_MAX_RANK], *inb = NULL;
  if (j0 > 0) decompose(env, ke_div(b, ke_var(b, f), ke_int(b, per_row)), sa->ext, j0, off);
  kexpr *at = e0, *src = ke_add(b, ke_mul(b, org[j0], ke_int(b, inner)), ke_cast(b, e0, b->index_type));
  int64_t gs = 1;
  for (int j = t->rank - 1; j >= 0; j--) {
    if (j < j0) {
      kvar *gv = kvar_new(b, k, "g", b->index_type, 0, KV_LOCAL);
      ks_add(b, body, ks_decl(b, gv, ke_add(b, org[j], off[j])));
      kexpr *g = ke_var(b, gv);
      src = ke_add(b, ke_mul(b, g, ke_int(b, gs)), src);
      at = ke_add(b, ke_mul(b, off[j], ke_int(b, sa->stride[j])), at);
      if (sa->guard[j])
        inb = ke_and(b, inb, ke_and(b, ke_bin(b, QIR_FN_GE, g, ke_int(b, 0), KT_BOOL), ke_lt(b, g, ke_int(b, t->dims[j]))));
    }
    gs *= t->dims[j];
  }
  if (sa->guard[j0]) {
    kexpr *g = ke_add(b, org[j0], ke_cast(b, ke_div(b, e0, ke_int(b, inner)), b->index_type));
    inb = ke_and(b, inb, ke_and(b, ke_bin(b, QIR_FN_GE, g, ke_int(b, 0), KT_BOOL), ke_lt(b, g, ke_int(b, t->dims[j0]))));
  }
  at = ke_add(b, slot, at);
  int param = 1 + sa->access->operand;
  ks_add(b, body, p->simt_async ? ks_cp_async(b, sa->smem, at, param, src, inb) : ks_vcopy16(b, sa->smem, at, param, src, inb));
  return ks_for(b, f, ke_tid(b), ke_int(b, rows * per_row), k->threads, body);
}

kstmt *simt_issue_step(lower_env *env, const tile_plan *p, kexpr *const *lo, const int64_t *size, kexpr *slot, kexpr *work) {
  kbuilder *b = env->b;
  kstmt *seq = ks_seq(b);
  for (int s = 0; s < env->n_staged; s++) {
    const staged_access *sa = &env->staged[s];
    kexpr *org[QIR_MAX_RANK];
    for (int j = 0; j < sa->rank; j++) org[j] = staged_origin(env, sa, j, lo, size);
    kexpr *at = ke_mul(b, slot, ke_int(b, sa->slot_elems));
    kstmt *elements = issue_elements(env, p, sa, org, at);
    if (sa->run_dim >= 0)
      ks_add(b, seq, ks_if(b, ke_aligned16(b, 1 + sa->access->operand), issue_chunks(env, p, sa, org, at), elements));
    else
      ks_add(b, seq, elements);
  }
  return work ? ks_if(b, work, seq, NULL) : seq;
}
