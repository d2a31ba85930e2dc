/* lower_mma.c: a contraction on the matrix units (tensor cores, MFMA) from a
 * #tile plan with `mma` (written by qopt -roller for f16/bf16 contractions).
 *
 * The body is sum(A[..] * B[..]) (casts aside; qir_compute_contraction),
 * possibly under a padding mask (a convolution's; it zeroes the staged tile of
 * the operand whose variables it mentions) and plus a bias term (Gemm's C, a
 * convolution's b), which the epilogue adds once.  M, N are the output axes and K the reduction axis named by
 * `mma_axes`: A moves with M and K, B with K and N.  Every other output axis has block 1 and every other reduction axis
 * rstep 1, so they are block coordinates and loops around the step.
 *
 *   - A warp owns a thread[M] x thread[N] tile: FM x FN accumulator fragments
 *     of 16x16 (`thread` is the warp tile in mma plans).
 *   - Per reduction step the block stages A's block[M] x rstep[K] tile and B's
 *     rstep[K] x block[N] tile in shared memory as raw 16-bit values.  Each is
 *     stored row- or column-major so that consecutive threads read consecutive
 *     elements of the operand (its innermost index decides); rows are padded
 *     to a multiple of 8 elements (the matrix loads need 16-byte rows; the
 *     skew also breaks bank conflicts).  Out-of-range elements are staged as
 *     zeros, so partial tiles need no guard in the inner loop.
 *   - Each warp loads its A and B fragments for every 16-wide slice of the
 *     step and runs FM x FN mma.
 *   - Epilogue: one fragment at a time goes through a per-warp 16x16 float
 *     buffer, and the lanes store its elements guarded and converted.
 * The C printer runs the same plan with the fragments emulated per warp.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lower.h"

bool mma_mentions(const qir_expr *e, int var) {
  if (e->kind == QIR_EX_VAR) return e->var == var;
  for (int i = 0; i < e->n_args; i++)
    if (mma_mentions(e->args[i], var)) return true;
  return false;
}

static bool fail(lower_env *env, const char *why) {
  qir_error(env->cg->d, env->loc, "#tile mma plan: %s", why);
  env->failed = true;
  return false;
}

/* The operand's innermost index that moves: trailing dimensions of extent 1
 * (a 1x1 convolution's kernel window) index nothing. */
static int innermost_dim(const lower_env *env, const qir_expr *access) {
  const qir_type *t = &env->args[access->operand]->type;
  int j = access->n_args - 1;
  while (j > 0 && t->dims[j] == 1) j--;
  return j;
}

/* Finds A and B in the body and checks the shape the lowering relies on. */
bool mma_analyse(lower_env *env, const tile_plan *p, mma_operand *A, mma_operand *B, const qir_expr **bias) {
  const qir_compute *c = env->comp;
  int nv = c->n_axes + c->n_red, vm = p->mma_m, vn = p->mma_n, vk = c->n_axes + p->mma_k;
  qir_contraction ct;
  if (!qir_compute_contraction(c, &ct))
    return fail(env, "the body is not a sum of products of tensor reads (with a padding mask, plus a bias)");
  const qir_expr *x = ct.a, *y = ct.b;
  *bias = ct.bias;
  if (!mma_mentions(x, vm)) {
    const qir_expr *t = x;
    x = y;
    y = t;
  }
  if (!mma_mentions(x, vm) || mma_mentions(x, vn) || !mma_mentions(y, vn) || mma_mentions(y, vm) || !mma_mentions(x, vk) || !mma_mentions(y, vk))
    return fail(env, "mma_axes do not split the operands into A (M, K) and B (K, N)");
  qir_dtype da = env->args[x->operand]->type.dtype, db = env->args[y->operand]->type.dtype;
  if (p->tf32 ? da != QIR_F32 || db != QIR_F32 : da != db || (da != QIR_F16 && da != QIR_BF16))
    return fail(env, p->tf32 ? "mma_precision = \"tf32\" needs both operands f32" : "operands must both be f16 or both bf16");
  for (int s = 0; s < 2; s++) {
    const qir_expr *acc = s ? y : x;
    for (int j = 0; j < acc->n_args; j++) {
      int64_t coef[MAX_AXES], k0;
      if (!qir_expr_affine(acc->args[j], nv, coef, &k0)) return fail(env, "operand indices must be affine");
    }
  }
  const int64_t *E = c->axis_extents;
  *A = (mma_operand){.access = x, .dtype = da, .row_var = vm, .col_var = vk, .rows = p->block[vm],
                     .cols = p->rstep[p->mma_k], .row_ext = E[vm], .col_ext = E[vk]};
  *B = (mma_operand){.access = y, .dtype = db, .row_var = vk, .col_var = vn, .rows = p->rstep[p->mma_k],
                     .cols = p->block[vn], .row_ext = E[vk], .col_ext = E[vn]};
  if (ct.mask) {                         /* padding: zeros in the tile of the operand it belongs to */
    bool output = false;                 /* does it mention an output axis at all? */
    for (int d = 0; d < c->n_axes && !output; d++) output = mma_mentions(ct.mask, d);
    if (!output) A->mask = B->mask = ct.mask;   /* over reductions alone (a symbolic K's r < the run's extent):
                                                 * past the run either operand may hold anything, NaN
                                                 * included, and 0 x NaN is NaN */
    else if (!mma_mentions(ct.mask, vn)) A->mask = ct.mask;
    else if (!mma_mentions(ct.mask, vm)) B->mask = ct.mask;
    else return fail(env, "the padding mask mentions both M and N");
  }
  /* layout: column-major when the operand's innermost index runs along the tile's rows */
  for (int s = 0; s < 2; s++) {
    mma_operand *op = s ? B : A;
    int64_t coef[MAX_AXES], k0;
    qir_expr_affine(op->access->args[innermost_dim(env, op->access)], nv, coef, &k0);
    op->col_major = coef[op->row_var] != 0 && coef[op->col_var] == 0;
    int64_t inner = op->col_major ? op->rows : op->cols;
    op->ld = (inner + p->pad + 7) / 8 * 8;
  }
  return true;
}

/* Loads of 16 bytes (V = 8 16-bit values, 4 f32) need every vector whole: the
 * operand's innermost index is the tile's inner variable plus a multiple of
 * V, its rows are multiples of V long, the inner extent and the guard's bound
 * are multiples of V (tile origins are, being multiples of 8 or 16), and no
 * padding mask applies.  The caller also checks at run time that the tensor
 * starts at a 16-byte boundary. */
bool mma_vector_loads_fit(lower_env *env, const mma_operand *op) {
  const qir_compute *c = env->comp;
  const qir_type *t = &env->args[op->access->operand]->type;
  int nv = c->n_axes + c->n_red, inner_var = op->col_major ? op->row_var : op->col_var;
  int64_t inner = op->col_major ? op->rows : op->cols, inner_ext = op->col_major ? op->row_ext : op->col_ext;
  int64_t coef[MAX_AXES], k0;
  if (op->mask || t->rank == 0) return false;
  int last = innermost_dim(env, op->access);
  int64_t V = 16 / qir_dtype_size(op->dtype);
  if (t->dims[last] % V || inner % V || inner_ext % V) return false;
  if (!qir_expr_affine(op->access->args[last], nv, coef, &k0) || k0 % V) return false;
  for (int v = 0; v < nv; v++)
    if (coef[v] != (v == inner_var)) return false;
  return true;
}

kexpr *mma_operand_source(lower_env *env, const mma_operand *op, kstmt *body, kexpr *row0, kexpr *col0, kexpr *r, kexpr *c,
                          kexpr **inb) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  kvar *gr = kvar_new(b, k, "g", b->index_type, 0, KV_LOCAL), *gc = kvar_new(b, k, "g", b->index_type, 0, KV_LOCAL);
  ks_add(b, body, ks_decl(b, gr, ke_add(b, row0, r)));
  ks_add(b, body, ks_decl(b, gc, ke_add(b, col0, c)));
  env->vars[op->row_var] = ke_var(b, gr);
  env->vars[op->col_var] = ke_var(b, gc);
  const qir_type *t = &env->args[op->access->operand]->type;
  kexpr *idx[QIR_MAX_RANK];
  for (int j = 0; j < op->access->n_args; j++) idx[j] = tr_as(env, op->access->args[j], b->index_type);
  *inb = ke_and(b, ke_lt(b, ke_var(b, gr), ke_int(b, op->row_ext)), ke_lt(b, ke_var(b, gc), ke_int(b, op->col_ext)));
  if (op->mask) *inb = ke_and(b, *inb, tr_as(env, op->mask, KT_BOOL));
  return strides_linear(env, idx, t->dims, t->rank);
}

int64_t mma_grid(const lower_env *env, const tile_plan *p, int64_t *nb, int64_t *wpa, int64_t *warps) {
  const qir_compute *c = env->comp;
  int64_t grid = 1;
  *warps = 1;
  for (int d = 0; d < c->n_axes; d++) {
    nb[d] = ceil_div(c->axis_extents[d], p->block[d]);
    wpa[d] = p->block[d] / p->thread[d];
    grid *= nb[d];
    *warps *= wpa[d];
  }
  return grid;
}

kexpr *mma_final_value(lower_env *env, const qir_expr *bias, kexpr *const *oidx, kexpr *v) {
  kbuilder *b = env->b;
  const qir_compute *c = env->comp;
  if (bias) {
    for (int d = 0; d < c->n_axes; d++) env->vars[d] = oidx[d];
    for (int a = 0; a < c->n_red; a++) env->vars[c->n_axes + a] = ke_int(b, 0);
    v = ke_bin(b, QIR_FN_ADD, v, tr_as(env, bias, KT_F32), KT_F32);
  }
  return stored_value(env, oidx, v, ktype_of_dtype(env->k->args[0]->type.dtype));
}

kexpr *mma_output_point(lower_env *env, const tile_plan *p, kexpr *const *blo, kexpr *gm, kexpr *gn, kexpr **oidx) {
  kbuilder *b = env->b;
  const qir_compute *c = env->comp;
  int vm = p->mma_m, vn = p->mma_n;
  for (int d = 0; d < c->n_axes; d++) oidx[d] = d == vm ? gm : d == vn ? gn : blo[d];
  kexpr *guard = NULL;
  if (c->axis_extents[vm] % p->block[vm]) guard = ke_lt(b, gm, ke_int(b, c->axis_extents[vm]));
  if (c->axis_extents[vn] % p->block[vn]) guard = ke_and(b, guard, ke_lt(b, gn, ke_int(b, c->axis_extents[vn])));
  return guard;
}

int mma_vector_width(lower_env *env, const tile_plan *p) {
  const qir_compute *c = env->comp;
  qir_dtype dt = env->k->params[0].dtype;
  int vw = dt == QIR_F32 ? 4 : dt == QIR_F16 || dt == QIR_BF16 ? 8 : 0;
  if (!vw || p->mma_n != c->n_axes - 1 || c->axis_extents[p->mma_n] % vw) return 0;
  return vw;
}

kstmt *mma_store_vector(lower_env *env, const tile_plan *p, kexpr *const *blo, const qir_expr *bias, kexpr *gm, kexpr *gn,
                        kvar *src, kexpr *base, int vw) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  kstmt *work = ks_seq(b);
  kvar *vals = kvar_new(b, k, "v", KT_F32, vw, KV_LOCAL), *ev = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kvar *sv = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kexpr *oidx[MAX_AXES], *pidx[MAX_AXES], *sidx[MAX_AXES];
  mma_output_point(env, p, blo, gm, gn, oidx);
  mma_output_point(env, p, blo, gm, ke_add(b, gn, ke_cast(b, ke_var(b, ev), b->index_type)), pidx);
  mma_output_point(env, p, blo, gm, ke_add(b, gn, ke_cast(b, ke_var(b, sv), b->index_type)), sidx);
  ks_add(b, work, ks_decl(b, vals, NULL));
  kstmt *fin = ks_for(b, ev, ke_int(b, 0), ke_int(b, vw), 1,
                      ks_assign(b, vals, ke_var(b, ev), mma_final_value(env, bias, pidx, ke_elem(b, src, ke_add(b, base, ke_var(b, ev))))));
  fin->unroll = true;
  ks_add(b, work, fin);
  kstmt *scalar = ks_for(b, sv, ke_int(b, 0), ke_int(b, vw), 1, ks_store(b, 0, out_index(env, sidx), ke_elem(b, vals, ke_var(b, sv))));
  scalar->unroll = true;
  ks_add(b, work, ks_if(b, ke_aligned16(b, 0), ks_vstore(b, 0, out_index(env, oidx), vals, vw), scalar));
  return work;
}

int mma_summary_tiles(char *buf, size_t size, const char *what, int n, const tile_plan *p) {
  int len = snprintf(buf, size, "%s: block [", what);
  for (int d = 0; d < n; d++) len += snprintf(buf + len, size - (size_t)len, "%s%" PRId64, d ? "," : "", p->block[d]);
  len += snprintf(buf + len, size - (size_t)len, "] warp tile [");
  for (int d = 0; d < n; d++) len += snprintf(buf + len, size - (size_t)len, "%s%" PRId64, d ? "," : "", p->thread[d]);
  return len;
}

/* Cooperative load of one operand tile for the step at (row0, col0), `width`
 * values (1, or 8 when vector_loads_fit) per thread and iteration; the other
 * compute variables are already in env->vars.  Out of range: zeros. */
static kstmt *stage(lower_env *env, mma_operand *op, kexpr *row0, kexpr *col0, int width) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  int64_t inner = op->col_major ? op->rows : op->cols, outer = op->col_major ? op->cols : op->rows;
  int64_t groups = inner / width;
  kvar *f = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL);
  kstmt *body = ks_seq(b);
  kvar *ov = kvar_new(b, k, "o", KT_I32, 0, KV_LOCAL), *iv = kvar_new(b, k, "i", KT_I32, 0, KV_LOCAL);
  ks_add(b, body, ks_decl(b, ov, ke_div(b, ke_var(b, f), ke_int(b, groups))));
  ks_add(b, body, ks_decl(b, iv, ke_mul(b, ke_mod(b, ke_var(b, f), ke_int(b, groups)), ke_int(b, width))));
  kexpr *inb, *src = mma_operand_source(env, op, body, row0, col0, ke_var(b, op->col_major ? iv : ov),
                                        ke_var(b, op->col_major ? ov : iv), &inb);
  kexpr *at = ke_add(b, ke_mul(b, ke_var(b, ov), ke_int(b, op->ld)), ke_var(b, iv));
  if (width > 1) {
    ks_add(b, body, ks_vcopy16(b, op->smem, at, 1 + op->access->operand, src, inb));
  } else {
    kexpr *val = ke_load_raw(b, 1 + op->access->operand, src);
    ks_add(b, body, ks_assign(b, op->smem, at, ke_select(b, inb, val, ke_cast(b, ke_int(b, 0), KT_U32), KT_U32)));
  }
  return ks_for(b, f, ke_tid(b), ke_int(b, outer * groups), k->threads, body);
}

/* Offset of tile element (r, c) in the stored layout. */
static kexpr *tile_offset(kbuilder *b, const mma_operand *op, kexpr *r, kexpr *c) {
  return op->col_major ? ke_add(b, ke_mul(b, c, ke_int(b, op->ld)), r) : ke_add(b, ke_mul(b, r, ke_int(b, op->ld)), c);
}

kstmt *mma_uniform_loop(kbuilder *b, kvar *v, int64_t hi, int64_t step, kstmt *body, bool unroll) {
  kstmt *l = ks_for(b, v, ke_int(b, 0), ke_int(b, hi), step, body);
  l->uniform = true;
  l->unroll = unroll;
  return l;
}

kexpr *mma_step_origin(lower_env *env, int ka, const int64_t *count, int64_t rstep, kexpr *step) {
  kbuilder *b = env->b;
  const qir_compute *c = env->comp;
  int n = c->n_axes;
  /* widened before it is scaled: K may pass 2^31 (64-bit index kernels) */
  kexpr *kofs = ke_mul(b, ke_cast(b, ke_mod(b, step, ke_int(b, count[ka])), b->index_type), ke_int(b, rstep));
  kexpr *rest = ke_div(b, step, ke_int(b, count[ka]));
  for (int a = c->n_red - 1; a >= 0; a--) {
    if (a == ka) continue;
    env->vars[n + a] = ke_cast(b, ke_mod(b, rest, ke_int(b, count[a])), b->index_type);
    rest = ke_div(b, rest, ke_int(b, count[a]));
  }
  return kofs;
}

void lower_mma(lower_env *env, const tile_plan *p) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *c = env->comp;
  int n = c->n_axes, m = c->n_red, vm = p->mma_m, vn = p->mma_n, ka = p->mma_k;
  const int64_t *E = c->axis_extents, *R = c->axis_extents + n;
  mma_operand A, B;
  const qir_expr *bias;
  if (!mma_analyse(env, p, &A, &B, &bias)) return;

  int64_t nb[MAX_AXES], wpa[MAX_AXES], warps, grid = mma_grid(env, p, nb, wpa, &warps);
  int W = k->warp;
  k->grid = grid;
  kkernel_rows(k, 1, p->block[0], grid / nb[0]);
  kkernel_tile_grid(k, n, NULL, nb, p->block);
  k->threads = (int)(warps * W);
  int64_t FM = p->thread[vm] / Q_MMA, FN = p->thread[vn] / Q_MMA, tm = p->thread[vm], tn = p->thread[vn];

  /* block coordinates (per-thread lets) and warp coordinates: KE_WARP in the
   * collective statements, tid / warp in per-thread code */
  kexpr *bc[MAX_AXES], *wc[MAX_AXES], *wt[MAX_AXES], *blo[MAX_AXES];
  decompose(env, ke_bid(b), nb, n, bc);
  decompose(env, ke_warp(b), wpa, n, wc);
  decompose(env, ke_div(b, ke_tid(b), ke_int(b, W)), wpa, n, wt);
  for (int d = 0; d < n; d++) {
    kexpr *start = ke_mul(b, bc[d], ke_int(b, p->block[d]));
    blo[d] = start->kind == KE_INT ? start : ke_var(b, let(env, "b", start));
    env->vars[d] = blo[d];              /* other output axes: block 1, the block's index */
  }

  A.smem = kvar_new_raw_shared(b, k, "sa", A.dtype, (A.col_major ? A.cols : A.rows) * A.ld);
  B.smem = kvar_new_raw_shared(b, k, "sb", B.dtype, (B.col_major ? B.cols : B.rows) * B.ld);
  kvar *fa = kvar_new_frag(b, k, "fa", KF_A, A.dtype, A.col_major, FM);
  kvar *fb = kvar_new_frag(b, k, "fb", KF_B, B.dtype, B.col_major, FN);
  kvar *acc = kvar_new_frag(b, k, "facc", KF_ACC, QIR_F32, false, FM * FN);

  kvar *fi = kvar_new(b, k, "fi", KT_I32, 0, KV_BLOCK);
  kstmt *fill = ks_seq(b);
  ks_add(b, fill, ks_mma_fill(b, acc, ke_var(b, fi)));
  ks_add(b, k->body, mma_uniform_loop(b, fi, FM * FN, 1, fill, true));

  /* reduction steps: K by rstep, the other reduction axes one at a time */
  kvar *ko[MAX_AXES];
  kstmt *cur = k->body;
  for (int a = 0; a < m; a++) {
    ko[a] = kvar_new(b, k, "ko", b->index_type, 0, KV_BLOCK);
    env->vars[n + a] = ke_var(b, ko[a]);
    kstmt *body = ks_seq(b);
    ks_add(b, cur, mma_uniform_loop(b, ko[a], R[a], a == ka ? p->rstep[a] : 1, body, false));
    cur = body;
  }
  for (int s = 0; s < 2; s++) {
    mma_operand *op = s ? &B : &A;
    kexpr *row0 = s ? ke_var(b, ko[ka]) : blo[vm], *col0 = s ? blo[vn] : ke_var(b, ko[ka]);
    kstmt *scalar = stage(env, op, row0, col0, 1);
    ks_add(b, cur, mma_vector_loads_fit(env, op) ? ks_if(b, ke_aligned16(b, 1 + op->access->operand),
                                                     stage(env, op, row0, col0, 8), scalar)
                                             : scalar);
  }
  ks_add(b, cur, ks_barrier(b));
  kvar *kk = kvar_new(b, k, "kk", KT_I32, 0, KV_BLOCK);
  kstmt *slice = ks_seq(b);
  kvar *li = kvar_new(b, k, "fi", KT_I32, 0, KV_BLOCK), *lj = kvar_new(b, k, "fj", KT_I32, 0, KV_BLOCK);
  kstmt *la = ks_seq(b), *lb = ks_seq(b);
  kexpr *arow = ke_add(b, ke_mul(b, wc[vm], ke_int(b, tm)), ke_mul(b, ke_var(b, li), ke_int(b, Q_MMA)));
  ks_add(b, la, ks_mma_load(b, fa, ke_var(b, li), A.smem, tile_offset(b, &A, arow, ke_var(b, kk)), A.ld));
  kexpr *bcol = ke_add(b, ke_mul(b, wc[vn], ke_int(b, tn)), ke_mul(b, ke_var(b, lj), ke_int(b, Q_MMA)));
  ks_add(b, lb, ks_mma_load(b, fb, ke_var(b, lj), B.smem, tile_offset(b, &B, ke_var(b, kk), bcol), B.ld));
  ks_add(b, slice, mma_uniform_loop(b, li, FM, 1, la, true));
  ks_add(b, slice, mma_uniform_loop(b, lj, FN, 1, lb, true));
  kvar *si = kvar_new(b, k, "fi", KT_I32, 0, KV_BLOCK), *sj = kvar_new(b, k, "fj", KT_I32, 0, KV_BLOCK);
  kstmt *inner = ks_seq(b), *outer = ks_seq(b);
  kexpr *ai = ke_add(b, ke_mul(b, ke_var(b, si), ke_int(b, FN)), ke_var(b, sj));
  ks_add(b, inner, ks_mma_sync(b, acc, ai, fa, ke_var(b, si), fb, ke_var(b, sj)));
  ks_add(b, outer, mma_uniform_loop(b, sj, FN, 1, inner, true));
  ks_add(b, slice, mma_uniform_loop(b, si, FM, 1, outer, true));
  ks_add(b, cur, mma_uniform_loop(b, kk, p->rstep[ka], Q_MMA, slice, true));
  ks_add(b, cur, ks_barrier(b));

  /* epilogue, a fragment at a time through the warp's 16x16 buffer */
  kvar *sc = kvar_new(b, k, "sc", KT_F32, warps * Q_MMA * Q_MMA, KV_SHARED);
  kvar *fo = kvar_new(b, k, "fo", KT_I32, 0, KV_BLOCK);
  kstmt *ep = ks_seq(b);
  ks_add(b, ep, ks_mma_store(b, sc, ke_mul(b, ke_warp(b), ke_int(b, Q_MMA * Q_MMA)), Q_MMA, acc, ke_var(b, fo)));
  ks_add(b, ep, ks_warp_barrier(b));
  kvar *e = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kstmt *st = ks_seq(b);
  kexpr *row = ke_div(b, ke_var(b, e), ke_int(b, Q_MMA)), *col = ke_mod(b, ke_var(b, e), ke_int(b, Q_MMA));
  kexpr *gm = ke_add(b, ke_add(b, blo[vm], ke_mul(b, wt[vm], ke_int(b, tm))),
                     ke_add(b, ke_mul(b, ke_div(b, ke_var(b, fo), ke_int(b, FN)), ke_int(b, Q_MMA)), row));
  kexpr *gn = ke_add(b, ke_add(b, blo[vn], ke_mul(b, wt[vn], ke_int(b, tn))),
                     ke_add(b, ke_mul(b, ke_mod(b, ke_var(b, fo), ke_int(b, FN)), ke_int(b, Q_MMA)), col));
  kvar *gmv = kvar_new(b, k, "gm", b->index_type, 0, KV_LOCAL), *gnv = kvar_new(b, k, "gn", b->index_type, 0, KV_LOCAL);
  ks_add(b, st, ks_decl(b, gmv, gm));
  ks_add(b, st, ks_decl(b, gnv, gn));
  kexpr *oidx[MAX_AXES];
  for (int d = 0; d < n; d++) oidx[d] = d == vm ? ke_var(b, gmv) : d == vn ? ke_var(b, gnv) : blo[d];
  kexpr *guard = NULL;
  if (E[vm] % p->block[vm]) guard = ke_lt(b, ke_var(b, gmv), ke_int(b, E[vm]));
  if (E[vn] % p->block[vn]) guard = ke_and(b, guard, ke_lt(b, ke_var(b, gnv), ke_int(b, E[vn])));
  kexpr *val = ke_elem(b, sc, ke_add(b, ke_mul(b, ke_div(b, ke_tid(b), ke_int(b, W)), ke_int(b, Q_MMA * Q_MMA)), ke_var(b, e)));
  if (bias) {                           /* Gemm's C: the first step's extra term, at this output point */
    for (int d = 0; d < n; d++) env->vars[d] = oidx[d];
    for (int a = 0; a < m; a++) env->vars[n + a] = ke_int(b, 0);
    val = ke_bin(b, QIR_FN_ADD, val, tr_as(env, bias, KT_F32), KT_F32);
  }
  kstmt *store = ks_store(b, 0, out_index(env, oidx), stored_value(env, oidx, val, ktype_of_dtype(k->args[0]->type.dtype)));
  ks_add(b, st, guard ? ks_if(b, guard, store, NULL) : store);
  ks_add(b, ep, ks_for(b, e, ke_mod(b, ke_tid(b), ke_int(b, W)), ke_int(b, Q_MMA * Q_MMA), W, st));
  ks_add(b, ep, ks_warp_barrier(b));
  ks_add(b, k->body, mma_uniform_loop(b, fo, FM * FN, 1, ep, true));

  char buf[512];
  int len = mma_summary_tiles(buf, sizeof buf, A.dtype == QIR_BF16 ? "mma bf16" : "mma f16", n, p);
  snprintf(buf + len, sizeof buf - (size_t)len,
           "] rstep %" PRId64 " grid %" PRId64 " threads %d (%" PRId64 " warps x %" PRId64 "x%" PRId64
           " fragments) A %s B %s smem %" PRId64 "B",
           p->rstep[ka], grid, k->threads, warps, FM, FN, A.col_major ? "col-major" : "row-major",
           B.col_major ? "col-major" : "row-major", k->smem_bytes);
  k->summary = qir_strdup(b->m, buf);
}
