/* roller.c: -roller, tile plans constructed from a hardware model (Roller, OSDI'22).
 *
 * For every operator with a tensor-expression form (a `compute` op, or a named
 * op through qir_op_to_compute, which is analysed and not replaced) this pass
 * constructs an rTile program and writes it as `#tile{...}`:
 *
 *   1. Analysis, from the expression alone: the loop nest (output axes,
 *      reduction axes), every tensor access as an affine map of the loop
 *      variables (x[n, c, h*2+kh, w*2+kw] -> coefficients per index dim), the
 *      arithmetic per point.  New operators need no new code here.
 *   2. Alignment: tile sizes per axis come from a candidate list that keeps
 *      padding waste under RL_MAX_WASTE of the real extent; the innermost
 *      contiguous extent of staged data is grown to the global-memory
 *      transaction width; shared-memory rows are padded against bank
 *      conflicts; threads are a multiple of the warp / wavefront.
 *   3. Construction, level by level: the register (thread) tile and then the
 *      shared-memory (block) tile start from the aligned unit tile and grow
 *      along the axis with the best reuse score (traffic saved at the level
 *      below per byte of extra footprint), until a capacity (registers,
 *      shared memory, threads per block) is reached or the tile is
 *      compute-bound at that level; scale-out keeps at least one block per
 *      compute unit where the problem allows.  The reduction step is then
 *      enlarged while the model says it pays.
 *   4. Micro performance model: compute at peak (tensor cores for f16/bf16
 *      contractions) against traffic at each level's bandwidth (DRAM with L2
 *      reuse, L2, shared memory), times waves given occupancy, plus a load
 *      latency per reduction step.  The states on the construction path are
 *      ranked by it; the best is the plan, the next ones (-roller-topk N)
 *      are printed as #tile_alternatives.
 *   5. Pipelined tensor-core plans (targets with mma.sync.m16n8k16, sm_80 and
 *      up): the space (warp tile, warps, K step, stages) is small, so every
 *      plan is constructed (mma_pipeline_plans) and ranked by a model of that
 *      loop (pipeline_us: tensor cores, ldmatrix / cp.async shared-memory
 *      traffic, issue, latency hidden by S - 1 stages in flight, occupancy
 *      from registers and shared memory, L2 and DRAM); #tile_alternatives
 *      lead with the best variants in stages only and in warp tile only.
 *      With -matmul-precision=high f32 contractions get the same space with
 *      mma.sync m16n8k8 .tf32 (detect_mma): K steps from 8, 4-byte staged
 *      tiles, the TF32 rate, and each lane's fragment loads as issue.
 *
 * The #tile schema (shared with qcodegen, which realises it exactly):
 *   block    = [b0, ..]  block tile per output axis (elements)
 *   thread   = [t0, ..]  register tile per output axis; threads per block =
 *                        prod(ceil(block/thread)).  With `mma` the thread
 *                        entry is the tile of one warp, and threads per block
 *                        = prod(block/thread) * warp size.
 *   rstep    = [r0, ..]  reduction step per reduction axis ([] if none)
 *   grid     = [g0, ..]  blocks per output axis = ceil(extent / block)
 *   threads  = N         threads per block
 *   smem_pad = N         elements added to the innermost extent of every
 *                        tile staged in shared memory (0 with stages:
 *                        the pipelined tiles are XOR-swizzled)
 *   vec      = N         vector width (elements) of loads/stores along the
 *                        innermost output axis
 *   smem     = BYTES     shared memory: the (block, rstep) box of every input
 *                        that depends on a reduction axis, padded rows, on a
 *                        GPU target twice where two fit (simt_stages: the
 *                        copies qcodegen's SIMT pipeline keeps); with
 *                        stages: stages * (bM * rK + rK * bN) * 2 (tf32: * 4)
 *   regs     = N         estimated registers per thread
 *   est_us   = F         model estimate of the kernel time
 *   target   = "h100"
 *   mma      = [m, n, k] (f16/bf16 contractions on targets with matrix
 *                        units; f32 ones too with -matmul-precision=high,
 *                        see mma_precision) instruction shape; the block and warp tiles
 *                        along the M axis / N axis and the rstep along the K
 *                        axis are multiples of it (mma_axes = [iM, iN, iK]:
 *                        output axis of M, output axis of N, reduce axis of K);
 *                        every other axis stays at block / rstep 1.  Such a
 *                        plan is kept only when the model rates it above the
 *                        best SIMT plan of the same op (-roller-mma overrides).
 *                        The target's shape: [16, 8, 16] (mma.sync, sm_80+:
 *                        the pipelined loop, with stages) or [16, 16, 16]
 *                        (wmma on sm_70, MFMA on HIP: no stages)
 *   mma_precision = "tf32"  (f32 operands, -matmul-precision=high, CUDA
 *                        targets with mma.sync and a peak_mma_tf32) the
 *                        operands are rounded to TF32 (cvt.rna.tf32.f32: 10
 *                        mantissa bits, ties away from zero) and multiplied
 *                        by mma.sync m16n8k8 .tf32 with f32 accumulators:
 *                        mma = [16, 8, 8], pipelined with stages, the tiles
 *                        staged as 4-byte f32; rated at the target's
 *                        peak_mma_tf32.  Absent: 16-bit operands as they are.
 *                        Targets without TF32 (MI250, V100; MI300X's xf32
 *                        has no lowering) keep f32 contractions on SIMT.
 *   stages   = S         (mma = [16, 8, 16] or tf32's [16, 8, 8] only) 2 <= S
 *                        <= 4 cp.async stages of the A and B tiles, S - 1 in
 *                        flight; the warp tile along M and N is a multiple
 *                        of 16 and rstep along K of the instruction's k, the
 *                        block a multiple of the warp tile
 *   bound    = "..."     (with stages) the model's limiting term: tensor cores,
 *                        shared memory, issue, latency, L2 bandwidth or DRAM
 *                        bandwidth (", partial last wave" where the tail wave
 *                        costs a tenth or more); informational
 *   rsplit   = N         (split reductions, N > 1) lanes per output point,
 *                        thread tile 1, rstep the whole reduction (as far as
 *                        QIR_TILE_MAX allows: the lanes walk all of it), threads =
 *                        prod(block) * N; offered by split_plans, ranked with
 *                        the rest (-roller-split=never leaves them out)
 * A block tile need not divide its extent: the last block is guarded.  It
 * does not exceed the extent rounded up to the thread tile, nor pad the last
 * block by more than RL_MAX_WASTE (block_fits), unless the warp rule needs
 * it.  The warp rule: threads are a whole number of warps, unless the whole
 * output is one block of fewer threads than a warp (a tiny plan); where no
 * block within those limits gives whole warps, pad_to_warps pads the block.
 */
#include "roller_impl.h"
#include "rprogram.h"
#include "qopt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Affine form of an index expression; false when it is not affine (data-
 * dependent, modulo, ...).  Integer division by a constant scales. */
static bool affine_of(const qir_expr *e, int n_vars, double *coef, double *cst) {
  double ca[RL_MAX_VARS], cb[RL_MAX_VARS], ka = 0, kb = 0;
  switch (e->kind) {
  case QIR_EX_INT: *cst = (double)e->ival; memset(coef, 0, sizeof(double) * RL_MAX_VARS); return true;
  case QIR_EX_FLOAT: *cst = e->fval; memset(coef, 0, sizeof(double) * RL_MAX_VARS); return true;
  case QIR_EX_VAR:
    if (e->var < 0 || e->var >= n_vars) return false;
    memset(coef, 0, sizeof(double) * RL_MAX_VARS);
    coef[e->var] = 1;
    *cst = 0;
    return true;
  case QIR_EX_CAST: return e->n_args == 1 && affine_of(e->args[0], n_vars, coef, cst);
  case QIR_EX_UNARY:
    if (e->fn == QIR_FN_NEG && affine_of(e->args[0], n_vars, coef, cst)) {
      for (int v = 0; v < RL_MAX_VARS; v++) coef[v] = -coef[v];
      *cst = -*cst;
      return true;
    }
    return false;
  case QIR_EX_SELECT:
    /* select(in_bounds, x[...], pad): the footprint is that of the taken side */
    return affine_of(e->args[1], n_vars, coef, cst) || affine_of(e->args[2], n_vars, coef, cst);
  case QIR_EX_BINARY: break;
  default: return false;
  }
  bool a = affine_of(e->args[0], n_vars, ca, &ka), b = affine_of(e->args[1], n_vars, cb, &kb);
  bool a_const = a, b_const = b;
  for (int v = 0; v < RL_MAX_VARS; v++) {
    if (ca[v] != 0) a_const = false;
    if (cb[v] != 0) b_const = false;
  }
  switch (e->fn) {
  case QIR_FN_ADD: case QIR_FN_SUB: {
    if (!a || !b) return false;
    double s = e->fn == QIR_FN_ADD ? 1 : -1;
    for (int v = 0; v < RL_MAX_VARS; v++) coef[v] = ca[v] + s * cb[v];
    *cst = ka + s * kb;
    return true;
  }
  case QIR_FN_MUL:
    if (a && b_const) { for (int v = 0; v < RL_MAX_VARS; v++) coef[v] = ca[v] * kb; *cst = ka * kb; return true; }
    if (b && a_const) { for (int v = 0; v < RL_MAX_VARS; v++) coef[v] = cb[v] * ka; *cst = kb * ka; return true; }
    return false;
  case QIR_FN_DIV: case QIR_FN_FLOORDIV:
    if (a && b_const && kb != 0) { for (int v = 0; v < RL_MAX_VARS; v++) coef[v] = ca[v] / kb; *cst = ka / kb; return true; }
    return false;
  case QIR_FN_MIN: case QIR_FN_MAX:
    /* clamps (edge padding): the side with variables bounds the footprint */
    if (a && b_const) { memcpy(coef, ca, sizeof ca); *cst = ka; return true; }
    if (b && a_const) { memcpy(coef, cb, sizeof cb); *cst = kb; return true; }
    return false;
  default: return false;
  }
}

typedef struct {
  rl_problem *p;
  const qir_op *op;
  bool ok;
} walk_ctx;

/* Which loop variables an expression mentions (for non-affine indices). */
static void vars_of(const qir_expr *e, bool *used, int n_vars) {
  if (e->kind == QIR_EX_VAR && e->var >= 0 && e->var < n_vars) used[e->var] = true;
  for (int i = 0; i < e->n_args; i++) vars_of(e->args[i], used, n_vars);
}

static void add_access(walk_ctx *w, const qir_expr *e) {
  rl_problem *p = w->p;
  const qir_op *op = w->op;
  if (e->operand < 0 || e->operand >= op->n_operands || !op->operands[e->operand]) { w->ok = false; return; }
  const qir_type *ty = &op->operands[e->operand]->type;
  rl_group *g = NULL;
  for (int i = 0; i < p->n_groups; i++)
    if (p->g[i].operand == e->operand) g = &p->g[i];
  if (!g) {
    if (p->n_groups == RL_MAX_GROUPS) { w->ok = false; return; }
    g = &p->g[p->n_groups++];
    memset(g, 0, sizeof *g);
    g->operand = e->operand;
    g->rank = ty->rank;
    for (int d = 0; d < ty->rank; d++) g->dims[d] = ty->dims[d] > 0 ? ty->dims[d] : 1;
    g->elem_bytes = qir_dtype_size(ty->dtype);
  }
  if (e->n_args != g->rank) { w->ok = false; return; }
  rl_access a;
  memset(&a, 0, sizeof a);
  for (int d = 0; d < g->rank; d++) {
    a.affine[d] = affine_of(e->args[d], p->n_vars, a.coef[d], &a.cst[d]);
    if (!a.affine[d]) {
      memset(a.coef[d], 0, sizeof a.coef[d]);
      vars_of(e->args[d], a.vars[d], p->n_vars);
    }
  }
  for (int i = 0; i < g->n_acc; i++)
    if (memcmp(&g->acc[i], &a, sizeof a) == 0) return;
  if (g->n_acc == RL_MAX_ACC) { w->ok = false; return; }
  g->acc[g->n_acc++] = a;
}

static double fn_cost(qir_expr_fn fn) {
  switch (fn) {
  case QIR_FN_EXP: case QIR_FN_LOG: case QIR_FN_TANH: case QIR_FN_SIGMOID: case QIR_FN_ERF:
  case QIR_FN_SIN: case QIR_FN_COS: case QIR_FN_POW: case QIR_FN_ATAN2: return 8;
  case QIR_FN_ASIN: case QIR_FN_ACOS: case QIR_FN_ATAN: case QIR_FN_SINH: case QIR_FN_COSH: case QIR_FN_ASINH: case QIR_FN_ACOSH: case QIR_FN_ATANH: return 8;
  case QIR_FN_DIV: case QIR_FN_SQRT: case QIR_FN_RSQRT: case QIR_FN_RECIP: case QIR_FN_FMOD: return 4;
  default: return 1;
  }
}

/* Walks the body: collects accesses (including those nested in indices) and
 * counts arithmetic.  Index arithmetic is not counted as work. */
static void walk_body(walk_ctx *w, const qir_expr *e, bool in_index) {
  if (!w->ok) return;
  switch (e->kind) {
  case QIR_EX_ACCESS:
    add_access(w, e);
    for (int i = 0; i < e->n_args; i++) walk_body(w, e->args[i], true);
    return;
  case QIR_EX_UNARY: case QIR_EX_BINARY:
    if (!in_index) w->p->flops_per_point += fn_cost(e->fn);
    break;
  case QIR_EX_SELECT:
    /* the condition is a bounds predicate (padding) a kernel hoists out of
     * the inner loop: its arithmetic is not counted as work */
    if (!in_index) w->p->flops_per_point += 1;
    walk_body(w, e->args[0], true);
    walk_body(w, e->args[1], in_index);
    walk_body(w, e->args[2], in_index);
    return;
  default: break;
  }
  for (int i = 0; i < e->n_args; i++) walk_body(w, e->args[i], in_index);
}

/* Variables an expression mentions (bit per variable). */
static uint64_t vars_mentioned(const qir_expr *e) {
  uint64_t m = e->kind == QIR_EX_VAR && e->var >= 0 && e->var < 64 ? (uint64_t)1 << e->var : 0;
  for (int i = 0; i < e->n_args; i++) m |= vars_mentioned(e->args[i]);
  return m;
}

/* A contraction of f16/bf16 reads with affine indices (qir_compute_contraction:
 * a matmul, a Gemm with its bias, a convolution with padding and bias) can use
 * the matrix units: M = an output axis only A indexes, N = one only B indexes,
 * K = a reduction axis both index; each chosen as the innermost such axis (by
 * A's, B's layout) with extent >= the instruction, else the longest one (its
 * tile then padded with zeros: the model counts the wasted work).  A padding
 * mask may not mention both M and N (qcodegen applies it to one operand's tile).
 * With -matmul-precision=high (p->tf32_ok) f32 reads qualify too, on targets
 * that have TF32 and the pipelined mma.sync loop (CUDA sm_80 and up): the
 * instruction is m16n8k8 .tf32 at the target's peak_mma_tf32.  HIP targets
 * (MI300X's xf32 MFMA) are not offered it: qcodegen has no xf32 lowering. */
/* Whether the mma.sync loop stages operand `role` (0: A, moving with M; 1: B)
 * a value at a time: qcodegen's mma_vector_loads_fit at the problem's level
 * (a mask the operand carries, or its innermost moving index other than its
 * tile's inner variable alone at a multiple of 16 bytes). */
static bool staged_by_values(const rl_problem *p, const qir_op *op, const qir_expr *acc, const qir_expr *mask, const int *best,
                             int role) {
  const qir_type *t = &op->operands[acc->operand]->type;
  int vm = best[0], vn = best[1], vk = best[2], mn = role ? vn : vm;
  if (mask) {   /* whose it is, as mma_analyse decides */
    uint64_t mv = vars_mentioned(mask);
    bool output = (mv & (p->n_out >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << p->n_out) - 1))) != 0;
    bool mine = !output || (role == 0 ? !((mv >> vn) & 1) : !((mv >> vm) & 1));
    if (mine) return true;
  }
  int last = acc->n_args - 1;
  while (last > 0 && t->dims[last] == 1) last--;
  double coef[RL_MAX_VARS], k0;
  if (last < 0 || !affine_of(acc->args[last], p->n_vars, coef, &k0)) return true;
  int inner = coef[mn] != 0 && coef[vk] == 0 ? mn : vk;   /* column-major when the innermost index runs along M or N */
  int64_t V = 16 / qir_dtype_size(t->dtype);
  if (t->dims[last] % V || p->ext[inner] % V || fmod(k0, (double)V) != 0) return true;
  for (int v = 0; v < p->n_vars; v++)
    if (coef[v] != (v == inner ? 1 : 0)) return true;
  return false;
}

static void detect_mma(rl_problem *p, const qir_compute *c, const qir_op *op) {
  const qir_target *t = p->t;
  qir_contraction ct;
  if (t->mma_m <= 0 || !qir_compute_contraction(c, &ct)) return;
  bool sync_target = t->mma_m == 16 && t->mma_n == 8 && t->mma_k == 16 && !strcmp(t->backend, "cuda");
  bool tf32 = p->tf32_ok && sync_target && op->operands[ct.a->operand]->type.dtype == QIR_F32;
  const qir_expr *ab[2] = {ct.a, ct.b};
  int pos[2][RL_MAX_VARS];                      /* innermost index position of each var in A, B; -1 */
  for (int s = 0; s < 2; s++) {
    qir_dtype dt = op->operands[ab[s]->operand]->type.dtype;
    if ((tf32 ? dt != QIR_F32 : dt != QIR_F16 && dt != QIR_BF16) || qir_target_peak(t, dt, true) <= 0) return;
    for (int v = 0; v < RL_MAX_VARS; v++) pos[s][v] = -1;
    for (int i = 0; i < ab[s]->n_args; i++) {
      double coef[RL_MAX_VARS], cst;
      if (!affine_of(ab[s]->args[i], p->n_vars, coef, &cst)) return;
      for (int v = 0; v < p->n_vars; v++)
        if (coef[v] != 0) pos[s][v] = i;
    }
  }
  /* the instructions take A and B of one type */
  if (op->operands[ab[0]->operand]->type.dtype != op->operands[ab[1]->operand]->type.dtype) return;
  qir_dtype out_dt = op->results[0]->type.dtype;
  if (out_dt != QIR_F32 && out_dt != QIR_F16 && out_dt != QIR_BF16) return;
  int best[3] = {-1, -1, -1}, inner[3] = {-1, -1, -1}, short_best[3] = {-1, -1, -1};
  int need[3] = {t->mma_m, t->mma_n, tf32 ? 8 : t->mma_k};
  for (int v = 0; v < p->n_vars; v++) {
    int role = -1, at = 0;
    bool red = v >= p->n_out;
    if (!red && pos[0][v] >= 0 && pos[1][v] < 0) role = 0, at = pos[0][v];
    else if (!red && pos[1][v] >= 0 && pos[0][v] < 0) role = 1, at = pos[1][v];
    else if (red && pos[0][v] >= 0 && pos[1][v] >= 0) role = 2, at = pos[0][v];
    if (role < 0) continue;
    /* no axis as long as the instruction: the longest one, its tile padded
     * with zeros (a 7x7 feature map's w, a 3-channel image's c) */
    if (p->ext[v] < need[role]) {
      if (p->ext[v] >= 2 && (short_best[role] < 0 || p->ext[v] > p->ext[short_best[role]])) short_best[role] = v;
      continue;
    }
    if (at > inner[role]) inner[role] = at, best[role] = v;
  }
  for (int r = 0; r < 3; r++)
    if (best[r] < 0) best[r] = short_best[r];
  if (best[0] < 0 || best[1] < 0 || best[2] < 0 || best[0] >= 64 || best[1] >= 64) return;
  if (ct.mask) {
    uint64_t mv = vars_mentioned(ct.mask);
    if (((mv >> best[0]) & 1) && ((mv >> best[1]) & 1)) return;
  }
  p->mma = true;
  /* mma.sync.m16n8k16 (sm_80 and up): the lowering pipelines it (cp.async
   * stages, ldmatrix, swizzled tiles, accumulators in registers) */
  p->pipelined = sync_target;
  p->tf32 = tf32;
  p->mma_m = t->mma_m;
  p->mma_n = t->mma_n;
  p->mma_k = tf32 ? 8 : t->mma_k;
  p->op_bytes = tf32 ? 4 : 2;
  memcpy(p->mma_axis, best, sizeof best);
  p->peak_gflops = qir_target_peak(t, op->operands[ab[0]->operand]->type.dtype, true);
  p->wgmma_ok = sync_target && !tf32 && roller_wgmma_problem_of(op, t, best[0], best[1], best[2], &p->wg);
  for (int s = 0; s < 2; s++) p->scalar[s] = staged_by_values(p, op, ab[s], ct.mask, best, s);
}

static bool analyse(rl_problem *p, const qir_op *op, const qir_target *t, bool tf32_ok) {
  const qir_compute *c = op->comp;
  memset(p, 0, sizeof *p);
  p->t = t;
  p->tf32_ok = tf32_ok;
  if (!c || !c->body || op->n_results != 1) return false;
  p->n_out = c->n_axes;
  p->n_red = c->n_red;
  p->n_vars = c->n_axes + c->n_red;
  if (p->n_vars > RL_MAX_VARS || c->n_axes > QIR_MAX_RANK) return false;
  double points = 1;
  for (int v = 0; v < p->n_vars; v++) {
    if (c->axis_extents[v] <= 0) return false;
    p->ext[v] = c->axis_extents[v];
    points *= (double)p->ext[v];
  }
  if (points > 9e15) return false;            /* beyond exact integer arithmetic */
  walk_ctx w = {p, op, true};
  walk_body(&w, c->body, false);
  if (!w.ok) return false;
  if (p->n_red) p->flops_per_point += 1;      /* the accumulation */
  if (p->flops_per_point < 1) p->flops_per_point = 1;
  for (int i = 0; i < p->n_groups; i++) {
    rl_group *g = &p->g[i];
    for (int a = 0; a < g->n_acc; a++)
      for (int d = 0; d < g->rank; d++)
        for (int v = p->n_out; v < p->n_vars; v++)
          if (g->acc[a].coef[d][v] != 0) g->staged = true;
    /* a non-affine index that mentions a reduction variable */
    for (int a = 0; a < g->n_acc; a++)
      for (int d = 0; d < g->rank; d++)
        for (int v = p->n_out; v < p->n_vars; v++)
          if (!g->acc[a].affine[d] && g->acc[a].vars[d][v]) g->staged = true;
    double n = 1;
    for (int d = 0; d < g->rank; d++) n *= (double)g->dims[d];
    p->unique_in_bytes += n * g->elem_bytes;
  }
  const qir_type *rt = &op->results[0]->type;
  rl_group *o = &p->out;
  o->operand = -1;
  o->rank = p->n_out;
  o->elem_bytes = qir_dtype_size(rt->dtype);
  o->n_acc = 1;
  double n = 1;
  for (int d = 0; d < p->n_out; d++) {
    o->dims[d] = p->ext[d];
    o->acc[0].affine[d] = true;
    o->acc[0].coef[d][d] = 1;
    n *= (double)p->ext[d];
  }
  p->out_bytes = n * o->elem_bytes;
  /* qcodegen computes 16-bit floats in f32 on the SIMT cores */
  p->peak_gflops = qir_target_peak(t, rt->dtype == QIR_F16 || rt->dtype == QIR_BF16 ? QIR_F32 : rt->dtype, false);
  p->simt_gflops = p->peak_gflops;
  p->vec_max = 16 / (o->elem_bytes > 0 ? o->elem_bytes : 4);
  if (p->vec_max < 1) p->vec_max = 1;
  p->simt_pipe = !strcmp(t->backend, "cuda") || !strcmp(t->backend, "hip");
  detect_mma(p, c, op);
  return true;
}

/* ------------------------------------------------------------ footprints */

/* Box of a group for loop extents E (per var): per index dim, the span of the
 * union of its accesses, clipped to the tensor. */
double rl_group_box(const rl_group *g, const int64_t *E, int n_vars, int64_t *ext) {
  double total = 1;
  for (int d = 0; d < g->rank; d++) {
    double lo = 1e300, hi = -1e300;
    bool full = false;
    for (int a = 0; a < g->n_acc; a++) {
      const rl_access *x = &g->acc[a];
      if (!x->affine[d]) {
        /* data-dependent or modular: at most one value per combination of
         * the variables it mentions, at most the whole dim */
        double n = 1;
        for (int v = 0; v < n_vars; v++)
          if (x->vars[d][v]) n *= (double)E[v];
        if (n >= (double)g->dims[d]) { full = true; break; }
        if (n - 1 > hi - lo || hi < lo) lo = 0, hi = n - 1;
        continue;
      }
      double l = x->cst[d], h = x->cst[d];
      for (int v = 0; v < n_vars; v++) {
        double s = x->coef[d][v] * (double)(E[v] - 1);
        if (s < 0) l += s;
        else h += s;
      }
      if (l < lo) lo = l;
      if (h > hi) hi = h;
    }
    int64_t e = full ? g->dims[d] : (int64_t)ceil(hi - lo - 1e-9) + 1;
    if (e > g->dims[d]) e = g->dims[d];
    if (e < 1) e = 1;
    ext[d] = e;
    total *= (double)e;
  }
  return total;
}

/* Bytes moved from global memory for one box, in whole transactions: rows of
 * the contiguous run are rounded up to the transaction width. */
static double aligned_bytes(const rl_group *g, const int64_t *ext, double total, int txn) {
  if (g->rank == 0) return (double)txn;
  double run = (double)ext[g->rank - 1];
  for (int d = g->rank - 2; d >= 0 && ext[d + 1] == g->dims[d + 1]; d--) run *= (double)ext[d];
  double rows = total / run;
  double b = run * g->elem_bytes;
  return rows * ceil(b / txn) * txn;
}

/* Three significant digits, as the nearest double to the decimal text, so
 * the printed estimate is short and stable. */
double rl_round_sig(double x) {
  if (!(x > 0) || !isfinite(x)) return 0;
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g", x);
  return strtod(buf, NULL);
}


/* ------------------------------------------------------------ the model */


static int64_t owners_per_block(const rl_problem *p, const rl_plan *pl) {
  int64_t n = 1;
  for (int v = 0; v < p->n_out; v++) n *= ceil_div(pl->tile[v], pl->thr[v]);
  return n;
}

int64_t rl_plan_threads(const rl_problem *p, const rl_plan *pl) {
  return owners_per_block(p, pl) * (p->mma ? p->t->warp_size : 1) * (pl->rsplit > 1 ? pl->rsplit : 1);
}

int64_t rl_plan_blocks(const rl_problem *p, const rl_plan *pl) {
  int64_t n = 1;
  for (int v = 0; v < p->n_out; v++) n *= ceil_div(p->ext[v], pl->tile[v]);
  return n;
}

/* Global traffic of a plan.  union_taps (pipelined mma plans whose taps fit
 * the cache, see tap_union_bytes): the steps along the reduction axes pinned
 * at 1 (a convolution's taps) re-read the sectors of one K step, served by
 * L1, so each staged operand costs its box over all taps once per K step. */
void rl_traffic_of(const rl_problem *p, const rl_plan *pl, bool union_taps, rl_traffic *tr) {
  int64_t E[RL_MAX_VARS], Ef[RL_MAX_VARS], Et[RL_MAX_VARS], Eu[RL_MAX_VARS], ext[QIR_MAX_RANK];
  double R = 1;
  int64_t k_chunks = 1;
  tr->chunks = 1;
  for (int v = 0; v < p->n_vars; v++) {
    E[v] = pl->tile[v];
    Eu[v] = v >= p->n_out && v != p->mma_axis[2] ? p->ext[v] : pl->tile[v];
    if (v >= p->n_out && v == p->mma_axis[2] && pl->rsplit <= 1) k_chunks = ceil_div(p->ext[v], pl->tile[v]);
    Ef[v] = v < p->n_out ? pl->tile[v] : p->ext[v];
    Et[v] = v < p->n_out ? pl->thr[v] : 1;
    if (v >= p->n_out && pl->rsplit > 1) {
      R *= (double)p->ext[v];                 /* lanes walk the whole reduction: no steps */
    } else if (v >= p->n_out) {
      tr->chunks *= ceil_div(p->ext[v], pl->tile[v]);
      R *= (double)round_up(p->ext[v], pl->tile[v]);
    }
  }
  double blocks = (double)rl_plan_blocks(p, pl), owners = (double)owners_per_block(p, pl);
  int txn = p->t->transaction_bytes;
  double per_block = 0, smem = 0;
  for (int i = 0; i < p->n_groups; i++) {
    const rl_group *g = &p->g[i];
    if (g->staged && pl->rsplit <= 1 && union_taps) {
      double n = rl_group_box(g, Eu, p->n_vars, ext);
      per_block += (double)k_chunks * aligned_bytes(g, ext, n, txn);
      smem += owners * R * rl_group_box(g, Et, p->n_vars, ext) * g->elem_bytes;
    } else if (g->staged && pl->rsplit <= 1) {
      double n = rl_group_box(g, E, p->n_vars, ext);
      per_block += (double)tr->chunks * aligned_bytes(g, ext, n, txn);
      smem += owners * R * rl_group_box(g, Et, p->n_vars, ext) * g->elem_bytes;
    } else {
      double n = rl_group_box(g, Ef, p->n_vars, ext);
      per_block += aligned_bytes(g, ext, n, txn);
    }
  }
  double outn = rl_group_box(&p->out, E, p->n_vars, ext);
  per_block += aligned_bytes(&p->out, ext, outn, txn);
  double pts = 1;
  for (int v = 0; v < p->n_out; v++) pts *= (double)pl->tile[v];
  tr->block_global_bytes = per_block;
  tr->global_bytes = blocks * per_block;
  tr->smem_bytes = blocks * smem;
  tr->flops_block = pts * R * p->flops_per_point;
}

/* Copies of a SIMT plan's staged tiles that qcodegen keeps in shared memory
 * (lower_simt_pipe.c): on a GPU two, the next step's copies in flight while
 * this one computes, where two fit the target's shared memory per block;
 * else one.  `stage_bytes`: the tiles of one step. */
static int simt_stages(const rl_problem *p, int64_t stage_bytes) {
  return p->simt_pipe && stage_bytes > 0 && 2 * stage_bytes <= p->t->smem_per_block ? 2 : 1;
}

/* Shared memory of one step of a plan: staged boxes with padded innermost
 * rows (a pipelined mma plan: all its stages). */
int64_t rl_plan_step_smem(const rl_problem *p, const rl_plan *pl, int pad) {
  int64_t ext[QIR_MAX_RANK];
  int64_t total = 0;
  if (pl->rsplit > 1) return 0;               /* lanes read their points directly */
  if (p->pipelined) {
    /* stages x (A: block M x rstep K, B: rstep K x block N) of 16-bit values,
     * XOR-swizzled (no padding) */
    int64_t bm = pl->tile[p->mma_axis[0]], bn = pl->tile[p->mma_axis[1]], rk = pl->tile[p->mma_axis[2]];
    int64_t stages = (int64_t)pl->stages * (bm * rk + rk * bn) * p->op_bytes;
    /* the epilogue's per-warp f32 tiles (8 rows of the warp tile, padded by
     * 4) reuse those bytes: the larger of the two */
    int64_t warps = bm / pl->thr[p->mma_axis[0]] * (bn / pl->thr[p->mma_axis[1]]);
    int64_t epilogue = warps * 8 * (pl->thr[p->mma_axis[1]] + 4) * 4;
    return stages > epilogue ? stages : epilogue;
  }
  if (p->mma) {
    /* qcodegen's mma kernel: A (M x K) and B (K x N) tiles of 16-bit values,
     * stored row- or column-major as the operand's layout goes, the inner
     * extent padded to a multiple of 8 (16-byte rows for the matrix loads;
     * counted for the larger of the two layouts), plus a 16x16 f32 epilogue
     * buffer per warp */
    int64_t bm = pl->tile[p->mma_axis[0]], bn = pl->tile[p->mma_axis[1]], rk = pl->tile[p->mma_axis[2]];
    int64_t warps = rl_plan_threads(p, pl) / p->t->warp_size;
    int64_t a_row = bm * ((rk + pad + 7) / 8 * 8), a_col = rk * ((bm + pad + 7) / 8 * 8);
    int64_t b_row = rk * ((bn + pad + 7) / 8 * 8), b_col = bn * ((rk + pad + 7) / 8 * 8);
    return ((a_row > a_col ? a_row : a_col) + (b_row > b_col ? b_row : b_col)) * 2 + warps * 256 * 4;
  }
  for (int i = 0; i < p->n_groups; i++) {
    const rl_group *g = &p->g[i];
    if (!g->staged) continue;
    rl_group_box(g, pl->tile, p->n_vars, ext);
    int64_t n = 1, inner = g->rank ? ext[g->rank - 1] : 1;
    for (int d = 0; d + 1 < g->rank; d++) n *= ext[d];
    /* qcodegen's SIMT pipeline stores 4-byte rows of whole 16-byte chunks at
     * a stride of an odd number of chunks (lower_simt_pipe.c); other rows get
     * the plan's padding */
    if (p->simt_pipe && pad > 0 && g->elem_bytes == 4 && inner % 4 == 0) n *= (inner / 4) % 2 ? inner : inner + 4;
    else n *= inner + pad;
    total += n * g->elem_bytes;
  }
  return total;
}

/* Shared memory of a plan: its step's, times the copies a SIMT plan's
 * pipeline keeps. */
int64_t rl_plan_smem(const rl_problem *p, const rl_plan *pl, int pad) {
  int64_t step = rl_plan_step_smem(p, pl, pad);
  return p->pipelined || p->mma ? step : step * simt_stages(p, step);
}

/* Padding (elements) against bank conflicts: when a staged box has several
 * rows whose length is an even number of banks' words, threads walking a
 * column would hit the same banks; one bank's worth of padding skews rows. */
static int plan_pad(const rl_problem *p, const rl_plan *pl) {
  const qir_target *t = p->t;
  if (p->pipelined) return 0;                 /* swizzled, not padded */
  if (p->mma) return 8;                       /* rows of 16 bytes more: aligned and skewed */
  if (pl->rsplit > 1) return 0;
  if (t->smem_banks <= 0) return 0;
  int64_t ext[QIR_MAX_RANK];
  int pad = 0;
  for (int i = 0; i < p->n_groups; i++) {
    const rl_group *g = &p->g[i];
    if (!g->staged || g->rank < 2) continue;
    double n = rl_group_box(g, pl->tile, p->n_vars, ext);
    int64_t row = ext[g->rank - 1];
    if (n / (double)row < 2) continue;
    int64_t words = row * g->elem_bytes / t->bank_bytes;
    if (words > 0 && (row * g->elem_bytes) % t->bank_bytes == 0 && words % 2 == 0) {
      int e = t->bank_bytes / g->elem_bytes;
      if (e < 1) e = 1;
      if (e > pad) pad = e;
    }
  }
  return pad;
}

int64_t rl_plan_regs(const rl_problem *p, const rl_plan *pl) {
  int64_t Et[RL_MAX_VARS], ext[QIR_MAX_RANK];
  double pts = 1;
  for (int v = 0; v < p->n_vars; v++) Et[v] = v < p->n_out ? pl->thr[v] : 1;
  for (int v = 0; v < p->n_out; v++) pts *= (double)pl->thr[v];
  double words = 0;
  if (p->pipelined) {
    /* f32 accumulators of the warp tile (tm x tn / 32 per lane), the A and B
     * fragments of one 16-wide k slice (m16k16: 4 registers per 16 rows,
     * k16n8: 2 per 8 columns) twice over (the next slice's ldmatrix overlaps
     * this slice's mma), and the stage offsets, pointers and loop state */
    double mt = (double)pl->thr[p->mma_axis[0]], nt = (double)pl->thr[p->mma_axis[1]];
    return (int64_t)ceil(mt * nt / p->t->warp_size + 2 * (mt / 16 * 4 + nt / 8 * 2)) + RL_MMA_ADDR_REGS +
           (p->tf32 ? RL_TF32_ADDR_REGS : 0);
  }
  if (p->mma) {
    /* fp32 accumulators of the warp tile spread over the warp, plus one
     * k-slice of A and B fragments */
    int w = p->t->warp_size;
    double mt = (double)pl->thr[p->mma_axis[0]], nt = (double)pl->thr[p->mma_axis[1]];
    words = pts / w + (mt + nt) * p->mma_k * 2.0 / 4.0 / w;
  } else {
    words = pts * (p->out.elem_bytes > 4 ? 2 : 1);
    for (int i = 0; i < p->n_groups; i++) {
      const rl_group *g = &p->g[i];
      double n = rl_group_box(g, Et, p->n_vars, ext);
      words += n * (g->elem_bytes > 4 ? 2.0 : g->elem_bytes / 4.0);
    }
  }
  /* + indices and addresses; an mma kernel also keeps fragment addresses and
   * the staging loop live (ptxas: 80-132 registers where the fragments need 40-88) */
  return (int64_t)ceil(words) + (p->mma ? 48 : 16);
}

static int plan_vec(const rl_problem *p, const rl_plan *pl) {
  if (p->n_out == 0 || p->mma || pl->rsplit > 1) return 1;
  int last = p->n_out - 1;
  int v = 1;
  while (v * 2 <= p->vec_max && pl->thr[last] % (v * 2) == 0 && p->ext[last] % (v * 2) == 0) v *= 2;
  return v;
}

/* DRAM time of the whole kernel: what the blocks move, less what L2 keeps
 * (operands re-read by several blocks hit in L2 as far as they fit it). */
static double dram_seconds(const rl_problem *p, double global_bytes, double mem_eff) {
  double extra = global_bytes - (p->unique_in_bytes + p->out_bytes), dram = global_bytes;
  if (extra > 0) {
    double miss = p->unique_in_bytes > 0 ? 1 - (double)p->t->l2_bytes / p->unique_in_bytes : 0;
    dram = p->unique_in_bytes + p->out_bytes + extra * (miss > 0 ? miss : 0);
  }
  return dram / (p->t->dram_gbs * 1e9 * mem_eff);
}

/* Bytes the first `wave` blocks (raster order, innermost output axis
 * fastest) read over the whole reduction: the box of every input for the
 * output region they cover. */
static double wave_bytes(const rl_problem *p, const rl_plan *pl, double wave) {
  int64_t E[RL_MAX_VARS], ext[QIR_MAX_RANK];
  double left = wave;
  for (int v = p->n_vars - 1; v >= 0; v--) {
    if (v >= p->n_out) { E[v] = p->ext[v]; continue; }
    double g = (double)ceil_div(p->ext[v], pl->tile[v]), take = left < g ? ceil(left) : g;
    E[v] = (int64_t)fmin((double)p->ext[v], take * (double)pl->tile[v]);
    left = left / g > 1 ? ceil(left / g) : 1;
  }
  double b = 0;
  for (int i = 0; i < p->n_groups; i++) b += rl_group_box(&p->g[i], E, p->n_vars, ext) * p->g[i].elem_bytes;
  return b;
}

/* Bytes of the staged operands' boxes over all taps of one K step (the
 * reduction axes a pipelined mma plan pins at step 1), transaction-aligned. */
static double tap_union_bytes(const rl_problem *p, const rl_plan *pl) {
  int64_t Eu[RL_MAX_VARS], ext[QIR_MAX_RANK];
  for (int v = 0; v < p->n_vars; v++) Eu[v] = v >= p->n_out && v != p->mma_axis[2] ? p->ext[v] : pl->tile[v];
  double b = 0;
  for (int i = 0; i < p->n_groups; i++)
    if (p->g[i].staged) b += aligned_bytes(&p->g[i], ext, rl_group_box(&p->g[i], Eu, p->n_vars, ext), p->t->transaction_bytes);
  return b;
}

/* The model of a pipelined mma plan (qcodegen's mma.sync.m16n8k16 loop),
 * in SM clock cycles per reduction step of one block:
 *   tensor cores: the step's m16n8k16 instructions at the target's dense
 *     f16/bf16 rate per SM (tf32: m16n8k8 at peak_mma_tf32), on as many
 *     sub-partitions as resident warps fill;
 *   shared memory: ldmatrix reads (every warp its tm x rk and rk x tn
 *     slices) and the cp.async writes of both tiles, at banks x 4 B per clock;
 *   issue: mma, ldmatrix.x4, cp.async (16 B per lane) and the loop's
 *     addressing, one instruction per scheduler per clock;
 *   latency: with S stages, S - 1 tiles are in flight, so a block's step
 *     takes at least the target's load_latency_cycles / (S - 1), and at least its own work
 *     plus one barrier; resident blocks overlap each other's latency.
 * Global memory: the plan's traffic (tap_union_bytes: a convolution's taps
 * served by L1 when the shared memory the plan leaves free can hold them)
 * against L2 and DRAM bandwidth.  Each wave of blocks pays one latency to
 * fill the pipeline.  The estimate is the largest of SM time, L2 time and
 * DRAM time plus the fill; pl->bound names the largest, pl->global_bytes is
 * the traffic (ties go to less). */
static double pipeline_us(const rl_problem *p, rl_plan *pl, double per_unit, double conc, double active) {
  const qir_target *t = p->t;
  double units = (double)t->compute_units, clk = t->clock_ghz * 1e9, ws = (double)t->warp_size;
  double bm = (double)pl->tile[p->mma_axis[0]], bn = (double)pl->tile[p->mma_axis[1]];
  double rk = (double)pl->tile[p->mma_axis[2]];
  double tm = (double)pl->thr[p->mma_axis[0]], tn = (double)pl->thr[p->mma_axis[1]];
  double warps = (double)pl->threads / ws, resident = conc * warps;
  double mma_flops = 2.0 * p->mma_m * p->mma_n * p->mma_k, eb = p->op_bytes;
  double tc_per_clk = p->peak_gflops * 1e9 / (units * clk);   /* flops per clock per SM */
  if (t->wgmma_n_max > 0 && t->mma_sync_share > 0) tc_per_clk *= t->mma_sync_share;   /* the peak is wgmma's */
  double n_mma = bm / p->mma_m * (bn / p->mma_n) * (rk / p->mma_k);
  double r_tc = n_mma * mma_flops / tc_per_clk;
  double smem_per_clk = t->smem_gbs * 1e9 / (units * clk);
  double r_smem = (warps * (tm + tn) * rk * eb + (bm + bn) * rk * eb) / smem_per_clk;
  double cp_async = ceil((bm + bn) * rk * eb / 16 / (double)pl->threads);
  double slices = rk / p->mma_k;
  /* per slice: the mma, and the fragment loads: one ldmatrix.x4 per 16 rows
   * of A and per 16 columns of B; tf32 loads each lane's 4 + 2 values per
   * fragment singly and rounds each (cvt.rna) */
  double frag_loads = p->tf32 ? 2 * (tm / 16 * 4 + tn / 8 * 2) : tm / 16 + tn / 16;
  double warp_instr = slices * (tm / p->mma_m * (tn / p->mma_n) + frag_loads) + 3 * cp_async + 8;
  double sub = RL_SUBPARTITIONS;
  double busy_sm = resident < sub ? resident : sub, busy_block = warps < sub ? warps : sub;
  /* operands staged a value at a time (plain loads and stores, not cp.async): on Hopper at
   * the target's wgmma_load_bytes_per_clk per SM (an NCHW 3x3 convolution's mma.sync plan
   * ran 428.7 us on the H200, 2026-11-27: 2.7 bytes a clock per SM) */
  double by_values = (p->scalar[0] ? bm * rk : 0) + (p->scalar[1] ? rk * bn : 0);
  double r_loads = t->wgmma_load_bytes_per_clk > 0 ? by_values * eb / t->wgmma_load_bytes_per_clk : 0;
  double sm_step = fmax(fmax(r_tc * sub / busy_sm, r_loads), fmax(r_smem, warps * warp_instr / busy_sm));
  double alone = fmax(fmax(r_tc * sub / busy_block, r_loads * conc), fmax(r_smem, warps * warp_instr / busy_block));
  double period = fmax(alone + t->barrier_cycles, t->load_latency_cycles / (pl->stages - 1));
  double step = fmax(sm_step, period / conc);
  rl_traffic tr;
  double l1_free = ((double)t->smem_per_unit - conc * (double)pl->smem) / conc;
  rl_traffic_of(p, pl, tap_union_bytes(p, pl) <= l1_free, &tr);
  double t_main = per_unit * (double)tr.chunks * step / clk;
  double t_fill = ceil(per_unit / conc) * (t->load_latency_cycles + 2 * t->barrier_cycles) / clk;
  double mem_eff = fmin(2.0 * active / units, 1) * fmin(resident / 4.0, 1);
  /* blocks run in raster order (the innermost output axis fastest): when
   * what one wave of resident blocks reads over the whole reduction fits in
   * L2, every operand comes from DRAM once */
  double t_dram = wave_bytes(p, pl, units * conc) <= (double)t->l2_bytes
                      ? fmin(tr.global_bytes, p->unique_in_bytes + p->out_bytes) / (t->dram_gbs * 1e9 * mem_eff)
                      : dram_seconds(p, tr.global_bytes, mem_eff);
  double t_l2 = tr.global_bytes / (t->l2_gbs * 1e9 * mem_eff);
  t_l2 *= roller_l2_wave_factor(t, (double)pl->blocks, conc);
  /* the limiting term: the SM's (of all resident blocks, else of one block
   * alone, else the latency the stages leave exposed) or a bandwidth; a last
   * wave that costs a tenth of the time or more is said too */
  bool sm_bound = sm_step >= period / conc, own = !sm_bound && alone + t->barrier_cycles >= t->load_latency_cycles / (pl->stages - 1);
  double tc = sm_bound ? r_tc * sub / busy_sm : r_tc * sub / busy_block;
  const char *term = !sm_bound && !own ? "latency" : (sm_bound ? sm_step : alone) == tc ? "tensor cores"
                     : (sm_bound ? sm_step : alone) == r_smem                      ? "shared memory"
                     : r_loads > 0 && (sm_bound ? sm_step == r_loads : alone == r_loads * conc) ? "loads by values"
                                                                                   : "issue";
  bool tail = (per_unit - (double)pl->blocks / units) / per_unit >= 0.1;
  if (t_main < t_l2 || t_main < t_dram) term = t_l2 >= t_dram ? "L2 bandwidth" : "DRAM bandwidth";
  pl->bound = roller_bound_text(term, tail);
  pl->global_bytes = tr.global_bytes;
  return fmax(t_main, fmax(t_dram, t_l2)) + t_fill;
}

double roller_l2_wave_factor(const qir_target *t, double blocks, double resident) {
  double waves = blocks / (double)t->compute_units;
  return t->wgmma_n_max > 0 && resident == 1 && waves > 1 ? ceil(waves) / waves : 1;
}

const char *roller_bound_text(const char *term, bool tail) {
  static const char *const tails[][2] = {
      {"tensor cores", "tensor cores, partial last wave"},     {"shared memory", "shared memory, partial last wave"},
      {"issue", "issue, partial last wave"},                   {"latency", "latency, partial last wave"},
      {"producer loads", "producer loads, partial last wave"},
  };
  for (size_t i = 0; tail && i < sizeof tails / sizeof *tails; i++)
    if (!strcmp(term, tails[i][0])) return tails[i][1];
  return term;   /* a bandwidth: the last wave's share does not change it */
}

/* A wgmma plan's derived fields from roller_wgmma_eval. */
static void wgmma_eval(const rl_problem *p, rl_plan *pl) {
  int vm = p->mma_axis[0], m2 = p->wg.m2;
  roller_wgmma_plan w = {.bm = pl->tile[vm], .wm = pl->thr[vm], .bn = pl->tile[p->mma_axis[1]], .stages = pl->stages,
                         .persistent = pl->persistent};
  if (pl->band && m2 >= 0 && w.wm > 0) {   /* the band's rows, in whole warpgroups' tiles */
    w.rows2 = pl->tile[m2];
    w.bm = (pl->tile[vm] * w.rows2 + w.wm - 1) / w.wm * w.wm;
  } else if (pl->band) {
    pl->valid = false;
    pl->est_us = INFINITY;
    return;
  }
  roller_wgmma_eval(p->t, &p->wg, &w);
  pl->valid = w.valid;
  pl->threads = w.threads;
  pl->smem = w.smem;
  pl->regs = w.regs;
  pl->blocks = w.blocks;
  pl->smem_pad = 0;
  pl->vec = 0;
  pl->est_us = w.est_us;
  pl->global_bytes = w.global_bytes;
  pl->bound = w.bound;
  pl->persistent = w.persistent;
}

/* Fills the derived fields and the estimate; valid = within every limit. */
void rl_eval(const rl_problem *p, rl_plan *pl) {
  const qir_target *t = p->t;
  if (pl->wgmma) {
    wgmma_eval(p, pl);
    return;
  }
  pl->threads = rl_plan_threads(p, pl);
  pl->blocks = rl_plan_blocks(p, pl);
  pl->smem_pad = plan_pad(p, pl);
  int64_t step_smem = rl_plan_step_smem(p, pl, pl->smem_pad);
  int copies = p->pipelined || p->mma ? 1 : simt_stages(p, step_smem);
  pl->smem = step_smem * copies;
  pl->regs = rl_plan_regs(p, pl);
  pl->vec = plan_vec(p, pl);
  pl->valid = pl->threads <= t->max_threads_per_block && pl->smem <= t->smem_per_block &&
              pl->regs <= t->max_regs_per_thread;
  if (!pl->valid) { pl->est_us = INFINITY; return; }
  /* occupancy: resident blocks per unit (registers are allocated per warp
   * in steps of 8 per thread; counted so for the pipelined plans) */
  int64_t bpu = t->max_blocks_per_unit;
  int64_t by_threads = t->max_threads_per_unit / pl->threads;
  if (by_threads < bpu) bpu = by_threads;
  if (pl->smem > 0 && t->smem_per_unit / pl->smem < bpu) bpu = t->smem_per_unit / pl->smem;
  int64_t regs_block = (p->pipelined ? round_up(pl->regs, 8) : pl->regs) * pl->threads;
  if (regs_block > 0 && t->regs_per_unit / regs_block < bpu) bpu = t->regs_per_unit / regs_block;
  if (bpu < 1) { pl->valid = false; pl->est_us = INFINITY; return; }
  double units = (double)t->compute_units;
  double per_unit = ceil((double)pl->blocks / units);          /* blocks each unit runs */
  double conc = per_unit < (double)bpu ? per_unit : (double)bpu;
  double active = (double)pl->blocks < units ? (double)pl->blocks : units;
  if (p->pipelined) {
    pl->est_us = pipeline_us(p, pl, per_unit, conc, active) * 1e6;
    return;
  }
  rl_traffic tr;
  rl_traffic_of(p, pl, false, &tr);
  double warps = conc * ceil((double)pl->threads / t->warp_size);
  double eff = warps / 8.0 < 1 ? warps / 8.0 : 1;             /* 4 schedulers x 2 warps to hide latency */
  double peak_unit = p->peak_gflops * 1e9 / units;
  /* a partial warp (only a tiny plan's, by the warp rule; scalar results
   * have their one thread by construction) still takes whole issue slots */
  double lanes = p->n_out == 0 ? 1 : ceil((double)pl->threads / t->warp_size) * t->warp_size / (double)pl->threads;
  double t_compute = per_unit * tr.flops_block * lanes / (peak_unit * eff);
  double mem_eff = (2.0 * active / units < 1 ? 2.0 * active / units : 1) * (warps / 4.0 < 1 ? warps / 4.0 : 1);
  double t_dram = dram_seconds(p, tr.global_bytes, mem_eff);
  double t_l2 = tr.global_bytes / (t->l2_gbs * 1e9 * mem_eff);
  double t_smem = tr.smem_bytes / (t->smem_gbs * 1e9 * active / units);
  /* each step waits for its loads; with two copies (a SIMT plan's pipeline)
   * the next step's are in flight meanwhile, so half the latency shows */
  double t_lat = per_unit / conc * (double)tr.chunks * (t->load_latency_cycles / (double)copies + 2 * t->barrier_cycles) /
                 (t->clock_ghz * 1e9);
  double tm = t_compute;
  if (t_dram > tm) tm = t_dram;
  if (t_l2 > tm) tm = t_l2;
  if (t_smem > tm) tm = t_smem;
  pl->est_us = (tm + t_lat) * 1e6;
}

/* Keeps the RL_MAX_PLANS best plans of the path, in rank order. */
static int cmp_plan_in(const rl_problem *p, const rl_plan *x, const rl_plan *y);
static void keep_best(const rl_problem *p, rl_path *path, const rl_plan *pl) {
  int at = path->n;
  if (at == RL_MAX_PLANS) {
    if (cmp_plan_in(p, pl, &path->plans[--at]) >= 0) return;
  } else {
    path->n++;
  }
  while (at > 0 && cmp_plan_in(p, pl, &path->plans[at - 1]) < 0) path->plans[at] = path->plans[at - 1], at--;
  path->plans[at] = *pl;
}

/* Can a pipelined plan's block along v be b (a multiple of the warp tile w)?
 * Within the extent rounded up to the warp tile, and padding the last block
 * by at most RL_MAX_WASTE (or no more than one instruction tile would). */
static bool mma_block_fits(const rl_problem *p, int v, int64_t b, int64_t w) {
  double unit_waste = rl_axis_waste(p->ext[v], 16);
  return b <= round_up(p->ext[v], w) && rl_axis_waste(p->ext[v], b) <= fmax(unit_waste, RL_MAX_WASTE) + 1e-9;
}

/* Pipelined mma plans (mma.sync 16x8x16): the space is small enough to
 * construct every plan and let the model rank them.  Warp tiles of 16 to
 * 128 along M and N (the accumulators must fit the registers: 64x64 is the
 * largest that does), 1 to RL_MMA_WARPS_MAX warps, blocks up to
 * RL_MMA_BLOCK_MAX along M or N and RL_MMA_BLOCK_AREA in all, K steps of 16,
 * 32 or 64, and 2 to QIR_MAX_STAGES stages (no more tiles in flight than
 * K steps; the taps of a convolution wait on the same stages); shared memory within the block's
 * limit; every other axis at block / rstep 1. */
static void mma_pipeline_plans(const rl_problem *p, rl_path *path) {
  const qir_target *t = p->t;
  static const int64_t warp_tiles[] = {16, 32, 64, 128}, ksteps[] = {8, 16, 32, 64};
  int vm = p->mma_axis[0], vn = p->mma_axis[1], vk = p->mma_axis[2];
  rl_plan pl;
  memset(&pl, 0, sizeof pl);
  for (int v = 0; v < p->n_vars; v++) pl.tile[v] = 1;
  for (int v = 0; v < p->n_out; v++) pl.thr[v] = 1;
  for (int a = 0; a < 4; a++) {
    int64_t tm = warp_tiles[a];
    if (tm > round_up(p->ext[vm], 16)) break;
    for (int b = 0; b < 4; b++) {
      int64_t tn = warp_tiles[b];
      if (tn > round_up(p->ext[vn], 16)) break;
      for (int64_t wm = 1; wm <= RL_MMA_WARPS_MAX; wm *= 2) {
        int64_t bm = tm * wm;
        if (bm > RL_MMA_BLOCK_MAX || !mma_block_fits(p, vm, bm, tm)) continue;
        for (int64_t wn = 1; wm * wn <= RL_MMA_WARPS_MAX; wn *= 2) {
          int64_t bn = tn * wn;
          if (bn > RL_MMA_BLOCK_MAX || bm * bn > RL_MMA_BLOCK_AREA || wm * wn * t->warp_size > t->max_threads_per_block ||
              !mma_block_fits(p, vn, bn, tn))
            continue;
          for (int k = 0; k < 4; k++) {
            int64_t rk = ksteps[k];
            if (rk < p->mma_k) continue;    /* 8: tf32's k8 only */
            if (rk > p->mma_k && (rk > round_up(p->ext[vk], p->mma_k) || rl_axis_waste(p->ext[vk], rk) > RL_MAX_WASTE)) break;
            /* S - 1 tiles in flight: no more than the block has steps */
            int64_t steps = ceil_div(p->ext[vk], rk);
            for (int64_t st = 2; st <= QIR_MAX_STAGES && (st == 2 || st - 1 <= steps); st++) {
              pl.tile[vm] = bm, pl.tile[vn] = bn, pl.tile[vk] = rk;
              pl.thr[vm] = tm, pl.thr[vn] = tn;
              pl.stages = (int)st;
              if (rl_plan_span(p, &pl) > QIR_TILE_MAX) continue;
              rl_eval(p, &pl);
              if (pl.valid) keep_best(p, path, &pl);
            }
          }
        }
      }
    }
  }
}

/* Hopper's wgmma plans (roller_wgmma.c), ranked with the mma.sync ones. */
static void wgmma_plans(const rl_problem *p, rl_path *path) {
  roller_wgmma_plan w[256];
  int n = roller_wgmma_plans(p->t, &p->wg, w, 256);
  int vm = p->mma_axis[0], vn = p->mma_axis[1], vk = p->mma_axis[2];
  for (int i = 0; i < n; i++) {
    rl_plan pl;
    memset(&pl, 0, sizeof pl);
    for (int v = 0; v < p->n_vars; v++) pl.tile[v] = 1;
    for (int v = 0; v < p->n_out; v++) pl.thr[v] = 1;
    pl.tile[vm] = w[i].bm, pl.tile[vn] = w[i].bn, pl.tile[vk] = p->ext[vk] < 64 ? p->ext[vk] : 64;
    pl.thr[vm] = w[i].wm, pl.thr[vn] = w[i].bn;
    if (w[i].rows2) {   /* a band: all of M by rows2 rows of M2 */
      pl.band = true;
      pl.tile[vm] = p->ext[vm];
      pl.tile[p->wg.m2] = w[i].rows2;
    }
    pl.stages = w[i].stages;
    pl.persistent = w[i].persistent;
    pl.wgmma = true;
    if (rl_plan_span(p, &pl) > QIR_TILE_MAX) continue;
    wgmma_eval(p, &pl);
    if (pl.valid) keep_best(p, path, &pl);
  }
}

/* Split reductions: with few output points, one thread per point leaves the
 * machine idle while each runs a long serial loop.  A group of lanes can
 * share each point's reduction instead (strided over the flattened
 * reduction, combined by shuffles within each warp, and through shared memory
 * when the group is several warps).  Candidates: 1 to 32 points per block,
 * grown from the innermost output axis, with a warp per point; with one
 * point per block also 4, 16 and 32 warps per point, for reductions long
 * enough to give each lane a few points.  The model ranks them with the
 * other plans. */
static void split_plans(const rl_problem *p, rl_path *path) {
  const qir_target *t = p->t;
  double rtot = 1;
  for (int v = p->n_out; v < p->n_vars; v++) rtot *= (double)p->ext[v];
  if (p->mma || p->n_red == 0 || rtot < 2.0 * t->warp_size) return;
  static const int warps_per_point[] = {4, 16, 32};
  for (int i = 0; i < 3 && path->n < RL_MAX_PLANS; i++) {
    int64_t lanes = warps_per_point[i] * t->warp_size;
    if (lanes > t->max_threads_per_block || rtot < 4.0 * lanes) break;
    rl_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.rsplit = lanes;
    for (int v = 0; v < p->n_out; v++) pl.tile[v] = pl.thr[v] = 1;
    for (int v = p->n_out; v < p->n_vars; v++) pl.tile[v] = p->ext[v];
    if (!rl_fit_span(p, &pl)) break;
    rl_eval(p, &pl);
    if (pl.valid) path->plans[path->n++] = pl;
  }
  for (int64_t want = 1; want <= 32 && path->n < RL_MAX_PLANS; want *= 2) {
    rl_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.rsplit = t->warp_size;
    int64_t have = 1;
    for (int v = p->n_out - 1; v >= 0; v--) {
      int64_t take = want / have < p->ext[v] ? want / have : p->ext[v];
      pl.tile[v] = take > 0 ? take : 1;
      pl.thr[v] = 1;
      have *= pl.tile[v];
    }
    if (have < want && want > 1) break;       /* no more points to put in a block */
    for (int v = p->n_out; v < p->n_vars; v++) pl.tile[v] = p->ext[v];
    if (!rl_fit_span(p, &pl)) break;
    rl_eval(p, &pl);
    if (pl.valid) path->plans[path->n++] = pl;
  }
}

/* Ranking: the estimate (to the three digits printed); on a tie, wider
 * vectors, less padding, threads nearer 256, the tile itself, then more
 * stages. */
static double padded_volume(const rl_problem *p, const rl_plan *pl) {
  double v = 1;
  for (int i = 0; i < p->n_vars; i++) v *= (double)round_up(p->ext[i], pl->tile[i]);
  return v;
}

static int cmp_plan_in(const rl_problem *p, const rl_plan *x, const rl_plan *y) {
  double ex = rl_round_sig(x->est_us), ey = rl_round_sig(y->est_us);
  if (ex != ey) return ex < ey ? -1 : 1;
  if (x->vec != y->vec) return x->vec > y->vec ? -1 : 1;
  double px = padded_volume(p, x), py = padded_volume(p, y);
  if (px != py) return px < py ? -1 : 1;
  if (x->global_bytes != y->global_bytes) return x->global_bytes < y->global_bytes ? -1 : 1;
  if (x->regs != y->regs) return x->regs < y->regs ? -1 : 1;
  if (p->pipelined && x->tile[p->mma_axis[2]] != y->tile[p->mma_axis[2]])   /* fewer steps and barriers */
    return x->tile[p->mma_axis[2]] > y->tile[p->mma_axis[2]] ? -1 : 1;
  double dx = fabs(log2((double)x->threads / 256)), dy = fabs(log2((double)y->threads / 256));
  if (dx != dy) return dx < dy ? -1 : 1;
  int c = memcmp(x->tile, y->tile, sizeof x->tile);
  if (c) return c;
  /* the same estimate (occupancy included): the deeper pipeline, which
   * still hides a copy slower than the model's latency */
  if (x->stages != y->stages) return x->stages > y->stages ? -1 : 1;
  return memcmp(x->thr, y->thr, sizeof x->thr);
}

static void sort_plans(const rl_problem *p, rl_plan *plans, int n) {
  /* insertion sort: n is small, and no global comparator state is needed */
  for (int i = 1; i < n; i++) {
    rl_plan x = plans[i];
    int j = i;
    while (j > 0 && cmp_plan_in(p, &x, &plans[j - 1]) < 0) plans[j] = plans[j - 1], j--;
    plans[j] = x;
  }
}

/* ------------------------------------------------------------ output */

static qir_attr_val plan_dict(qir_module *m, const rl_problem *p, const rl_plan *pl, const char *target,
                              bool full) {
  int64_t tmp[RL_MAX_VARS];
  qir_attr e[20];
  int n = 0;
  e[n++] = (qir_attr){.key = "block", .val = qir_attr_ints(m, p->n_out, pl->tile)};
  e[n++] = (qir_attr){.key = "thread", .val = qir_attr_ints(m, p->n_out, pl->thr)};
  e[n++] = (qir_attr){.key = "rstep", .val = qir_attr_ints(m, p->n_red, pl->tile + p->n_out)};
  if (full) {
    for (int v = 0; v < p->n_out; v++) tmp[v] = ceil_div(p->ext[v], pl->tile[v]);
    e[n++] = (qir_attr){.key = "grid", .val = qir_attr_ints(m, p->n_out, tmp)};
  }
  e[n++] = (qir_attr){.key = "threads", .val = qir_attr_int(pl->threads)};
  if (full) {
    e[n++] = (qir_attr){.key = "smem_pad", .val = qir_attr_int(pl->smem_pad)};
    e[n++] = (qir_attr){.key = "vec", .val = qir_attr_int(pl->vec)};
    e[n++] = (qir_attr){.key = "smem", .val = qir_attr_int(pl->smem)};
    e[n++] = (qir_attr){.key = "regs", .val = qir_attr_int(pl->regs)};
  }
  if (pl->rsplit > 1) e[n++] = (qir_attr){.key = "rsplit", .val = qir_attr_int(pl->rsplit)};
  if (pl->stages > 0) e[n++] = (qir_attr){.key = "stages", .val = qir_attr_int(pl->stages)};
  if (full && pl->stages > 0 && pl->bound) e[n++] = (qir_attr){.key = "bound", .val = qir_attr_string(m, pl->bound)};
  e[n++] = (qir_attr){.key = "est_us", .val = qir_attr_float(rl_round_sig(pl->est_us))};
  if (full) {
    e[n++] = (qir_attr){.key = "target", .val = qir_attr_string(m, target)};
    if (p->mma) {
      int64_t shape[3] = {pl->wgmma ? 64 : p->mma_m, pl->wgmma ? pl->tile[p->mma_axis[1]] : p->mma_n, p->mma_k};
      int64_t axes[4] = {p->mma_axis[0], p->mma_axis[1], p->mma_axis[2] - p->n_out, p->wg.m2};
      e[n++] = (qir_attr){.key = "mma", .val = qir_attr_ints(m, 3, shape)};
      e[n++] = (qir_attr){.key = "mma_axes", .val = qir_attr_ints(m, pl->band ? 4 : 3, axes)};
      if (p->tf32) e[n++] = (qir_attr){.key = "mma_precision", .val = qir_attr_string(m, "tf32")};
      if (pl->persistent > 0) e[n++] = (qir_attr){.key = "persistent", .val = qir_attr_int(pl->persistent)};
    }
  }
  for (int i = 0; i < n; i++) e[i].sched = false;
  return qir_attr_dict(m, n, e);
}

/* The `n` alternatives to the best plan (path->plans[0]), as indices in rank
 * order: the next plans by the model, except that for a pipelined mma plan
 * the best plan differing from it only in stages and the best differing
 * only in the warp tile come first, so that the alternatives show what
 * those choices cost. */
static void pick_alternatives(const rl_problem *p, const rl_path *path, int n, int *pick) {
  bool taken[RL_MAX_PLANS] = {false};
  int k = 0;
  const rl_plan *best = &path->plans[0];
  if (p->pipelined) {
    for (int kind = 0; kind < 2 && k < n; kind++)
      for (int i = 1; i < path->n; i++) {
        const rl_plan *x = &path->plans[i];
        bool same_tile = memcmp(x->tile, best->tile, sizeof x->tile) == 0;
        bool same_thr = memcmp(x->thr, best->thr, sizeof x->thr) == 0;
        if (same_tile && (kind == 0 ? same_thr && x->stages != best->stages : !same_thr && x->stages == best->stages)) {
          taken[i] = true, k++;
          break;
        }
      }
  }
  for (int i = 1; i < path->n && k < n; i++)
    if (!taken[i]) taken[i] = true, k++;
  k = 0;
  for (int i = 1; i < path->n && k < n; i++)
    if (taken[i]) pick[k++] = i;
}

/* The dict entry `key` of a plan, to rewrite in place (NULL: absent). */
static qir_attr_val *plan_entry(qir_attr_val *dict, const char *key) {
  for (int i = 0; dict->kind == QIR_ATTR_DICT && i < dict->n; i++)
    if (!strcmp(dict->entries[i].key, key)) return &dict->entries[i].val;
  return NULL;
}

/* A plan's list of integers: its length, or -1 when it is not one or longer than cap. */
static int plan_ints(const qir_attr_val *dict, const char *key, int64_t *out, int cap) {
  const qir_attr_val *v = qir_attr_dict_get(dict, key);
  if (!v || v->kind != QIR_ATTR_LIST) return v ? -1 : 0;
  if (v->n > cap) return -1;
  int n = 0;
  for (int i = 0; i < v->n && n < cap; i++) {
    if (v->items[i].kind != QIR_ATTR_INT) return -1;
    out[n++] = v->items[i].i;
  }
  return n;
}

/* -roller-estimate: one plan written before (by -roller, by hand, by another
 * target's model) rated by this target's model: its est_us, bound and
 * target rewritten, the plan kept.  A plan that does not fit the op (axes, matrix
 * units the op or target lacks) or the target's limits keeps what it had. */
static void estimate_plan(qir_module *m, const rl_problem *p0, qir_attr_val *dict) {
  rl_problem p = *p0;
  rl_plan pl;
  memset(&pl, 0, sizeof pl);
  const qir_attr_val *rsplit = qir_attr_dict_get(dict, "rsplit"), *stages = qir_attr_dict_get(dict, "stages");
  if (!qir_attr_dict_get(dict, "mma")) {
    p.mma = p.pipelined = p.tf32 = false;
    p.peak_gflops = p.simt_gflops;
  } else if (!p.mma || p.pipelined != (stages != NULL)) {
    return;
  } else {
    const qir_attr_val *prec = qir_attr_dict_get(dict, "mma_precision");
    bool plan_tf32 = prec && prec->kind == QIR_ATTR_STRING && !strcmp(prec->s, "tf32");
    if (plan_tf32 != p.tf32) return;          /* an f32 op's plan without tf32: not one the target runs */
  }
  if (plan_ints(dict, "block", pl.tile, p.n_out) != p.n_out || plan_ints(dict, "thread", pl.thr, p.n_out) != p.n_out ||
      plan_ints(dict, "rstep", pl.tile + p.n_out, p.n_red) != p.n_red)
    return;
  pl.rsplit = rsplit && rsplit->kind == QIR_ATTR_INT ? rsplit->i : 0;
  pl.stages = stages && stages->kind == QIR_ATTR_INT ? (int)stages->i : 0;
  int64_t shape[3];
  if (p.mma && plan_ints(dict, "mma", shape, 3) == 3 && shape[0] == 64) {
    if (!p.wgmma_ok) return;                  /* a wgmma plan the target or the operands cannot take */
    pl.wgmma = true;
    const qir_attr_val *pv = qir_attr_dict_get(dict, "persistent");
    pl.persistent = pv && pv->kind == QIR_ATTR_INT && pv->i > 0 ? pv->i : 0;
    int64_t axes[4];
    if (plan_ints(dict, "mma_axes", axes, 4) == 4) {   /* a band: over M2 the problem must allow */
      if (axes[3] != p.wg.m2) return;
      pl.band = true;
    }
  }
  rl_eval(&p, &pl);
  if (!pl.valid) return;
  qir_attr_val *est = plan_entry(dict, "est_us"), *bound = plan_entry(dict, "bound");
  qir_attr_val *target = plan_entry(dict, "target");
  if (est) *est = qir_attr_float(rl_round_sig(pl.est_us));
  if (bound && pl.bound) *bound = qir_attr_string(m, pl.bound);
  if (target) *target = qir_attr_string(m, p.t->name);   /* the model the estimate is from */
}

static void estimate_plans(qir_module *m, qir_op *op, const rl_problem *p) {
  qir_attr *tile = qir_op_attr(op, "tile"), *alts = qir_op_attr(op, "tile_alternatives");
  if (tile) estimate_plan(m, p, &tile->val);
  for (int i = 0; alts && alts->val.kind == QIR_ATTR_LIST && i < alts->val.n; i++)
    estimate_plan(m, p, &alts->val.items[i]);
}

static bool plan_op(qir_module *m, qir_op *op, const qir_target *t, const roller_options *o, roller_stats *st, FILE *quiet);

static double tile_est(const qir_op *op) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  const qir_attr_val *e = tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, "est_us") : NULL;
  return e && e->kind == QIR_ATTR_FLOAT ? e->f : e && e->kind == QIR_ATTR_INT ? (double)e->i : INFINITY;
}

/* On a target with wgmma, an f16/bf16 contraction whose operands' K is not
 * innermost: the same contraction over them relaid (roller_layout.c), put in
 * op's place, planned, where its plan is on wgmma and rated with its new
 * transposes (their plans and launches) faster than `best_us`. */
static bool relaid_is_faster(qir_module *m, qir_op *op, const qir_op *form, const rl_problem *p, double best_us,
                             const qir_target *t, const roller_options *o, roller_stats *st, FILE *quiet) {
  if (t->wgmma_n_max <= 0 || !p->mma || !p->pipelined || p->tf32 || o->mma == ROLLER_NEVER || !o->relayout ||
      !op->parent || o->estimate || (op->parent->parent_op && op->parent->parent_op->code == QIR_OP_KERNEL))
    return false;   /* (a kernel group's member: the group is planned as a whole) */
  qir_diag d;
  qir_diag_init_quiet(&d);
  roller_relayout r;
  qir_op *k = roller_relaid_form(m, op, form, p->mma_axis[2], &r, &d);
  if (!k) return false;
  double extra = 0;
  for (int i = 0; i < r.n_made; i++)
    if (!r.shared[i] && r.made[i]->code != QIR_OP_CONST) {   /* a transpose, or a strided gather */
      plan_op(m, r.made[i], t, &(roller_options){.topk = 1, .mma = o->mma, .split = o->split}, NULL, quiet);
      extra += tile_est(r.made[i]) + t->launch_us;
    }
  plan_op(m, k, t, o, NULL, quiet);
  const qir_attr *tile = qir_op_attr(k, "tile");
  const qir_attr_val *mma = tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, "mma") : NULL;
  bool wgmma = mma && mma->kind == QIR_ATTR_LIST && mma->n == 3 && mma->items[0].i == 64;
  if (!wgmma || !(tile_est(k) + extra < best_us)) {
    roller_relayout_discard(k, &r);
    return false;
  }
  roller_relayout_commit(m, op, k, &r);
  if (st) {
    st->relaid++;
    for (int i = 0; i < r.n_made; i++) st->transposes += !r.shared[i] && r.made[i]->code != QIR_OP_CONST;
  }
  return true;
}

/* Plans one op; `quiet` receives what qir_op_to_compute says about ops that
 * have no compute form (those are simply not planned). */
static bool plan_op(qir_module *m, qir_op *op, const qir_target *t, const roller_options *o, roller_stats *st,
                    FILE *quiet) {
  int topk = o->topk < 1 ? 1 : o->topk;
  qir_op *form = op;
  if (op->code != QIR_OP_COMPUTE) {
    switch (op->code) {
    case QIR_OP_INPUT: case QIR_OP_OUTPUT: case QIR_OP_CONST: case QIR_OP_YIELD:
    case QIR_OP_LOOP: case QIR_OP_IF: case QIR_OP_KERNEL:
      return true;
    default: break;
    }
    if (op->n_results != 1 || !quiet) return true;
    if (op->code == QIR_OP_ATTENTION && !o->estimate && roller_plan_attention(m, op, t, topk, st)) return true;
    /* analyse the op's tensor-expression form without replacing the op; the
     * temporary is unlinked so it leaves no uses behind */
    qir_diag qd;
    qir_diag_init(&qd, quiet, NULL, NULL, 0);
    form = qir_op_to_compute(m, op, &qd);
    if (!form) return true;
  }
  rl_problem p;
  /* -roller-estimate re-rates tf32 plans written before whatever the option says */
  bool ok = analyse(&p, form, t, o->tf32 || o->estimate);
  if (form != op) qir_op_unlink(form);
  if (!ok) {
    if (st) st->skipped++;
    return true;
  }
  if (o->estimate) {
    estimate_plans(m, op, &p);
    return true;
  }
  rl_path path;
  path.n = 0;
  if (p.mma && o->mma == ROLLER_NEVER) {
    p.mma = p.pipelined = p.tf32 = false;
    p.peak_gflops = p.simt_gflops;
  }
  if (p.pipelined) mma_pipeline_plans(&p, &path);
  else rl_construct(&p, &path);
  if (p.pipelined && p.wgmma_ok) wgmma_plans(&p, &path);
  if (o->split != ROLLER_NEVER) split_plans(&p, &path);
  sort_plans(&p, path.plans, path.n);
  rl_problem as_contraction = p;   /* before the SIMT cores may take it */
  if (p.mma && o->mma == ROLLER_BY_MODEL) {
    /* the matrix units only where the model says they pay: a small or
     * thin contraction (few blocks, many short steps) can be faster on the
     * SIMT cores */
    rl_problem simt = p;
    simt.mma = simt.pipelined = simt.tf32 = false;
    simt.peak_gflops = p.simt_gflops;
    rl_path alt;
    alt.n = 0;
    rl_construct(&simt, &alt);
    sort_plans(&simt, alt.plans, alt.n);
    if (alt.n && (path.n == 0 || alt.plans[0].est_us < path.plans[0].est_us)) {
      p = simt;
      path = alt;
    }
  }
  if (path.n == 0) {
    if (st) st->skipped++;
    return true;
  }
  if (relaid_is_faster(m, op, form, &as_contraction, path.plans[0].est_us, t, o, st, quiet)) {
    if (st) st->planned++;
    return true;
  }
  qir_op_set_attr(m, op, "tile", plan_dict(m, &p, &path.plans[0], t->name, true), true);
  qir_op_remove_attr(op, "tile_alternatives");
  int alts = topk - 1 < path.n - 1 ? topk - 1 : path.n - 1;
  if (alts > 0) {
    int pick[RL_MAX_PLANS];
    pick_alternatives(&p, &path, alts, pick);
    qir_attr_val *items = qir_alloc(m, sizeof *items * (size_t)alts);
    /* whole plans (grid, smem, regs, ...): -rammer may make one of them the #tile */
    for (int i = 0; i < alts; i++) items[i] = plan_dict(m, &p, &path.plans[pick[i]], t->name, true);
    qir_op_set_attr(m, op, "tile_alternatives", qir_attr_list(m, alts, items), true);
  }
  if (st) st->planned++;
  return true;
}

bool roller_plan_op(qir_module *m, qir_op *op, const qir_target *t, const roller_options *o, roller_stats *st,
                    qir_diag *d) {
  (void)d;
  FILE *quiet = fopen("/dev/null", "w");
  bool ok = plan_op(m, op, t, o, st, quiet);
  if (quiet) fclose(quiet);
  return ok;
}

typedef struct {
  qir_module *m;
  const qir_target *t;
  const roller_options *o;
  roller_stats *st;
  FILE *quiet;
  bool ok;
} pass_ctx;

/* The symbols an extent names (a bit each). */
static uint64_t dim_symbols(const qir_dim *e) {
  if (!e) return 0;
  if (e->kind == QIR_DIM_SYM) return e->sym < 64 ? (uint64_t)1 << e->sym : 0;
  return dim_symbols(e->a) | dim_symbols(e->b);
}

/* Plans for smaller runs (#tile_bands), for an op whose result has symbolic
 * extents: with every symbol its extents name at lo, then each step 4x the
 * points (x4 for one symbol, x2 each for two, ...) up to the bound, the op
 * planned at that size, kept where its estimate beats the bound's plan run at
 * that size by a fifth.  A band is keyed by its points: the product of the
 * result's symbolic extents there.  Each band's plan keeps its tiles with the
 * grid of the bound (qcodegen lowers it at the bound; blocks past the run's
 * extents skip); the host picks the first band whose points the run's do not
 * exceed.  The op's own plan stays the last resort. */
static void plan_bands(pass_ctx *c, qir_op *op) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  if (!tile || tile->val.kind != QIR_ATTR_DICT || op->n_results != 1 || c->o->estimate) return;
  qir_type *rt = &op->results[0]->type;
  uint64_t used = 0;
  for (int d = 0; d < rt->rank; d++) used |= dim_symbols(rt->sym[d]);
  if (!used) return;
  const qir_attr_val *e = qir_attr_dict_get(&tile->val, "est_us");
  if (!e || (e->kind != QIR_ATTR_FLOAT && e->kind != QIR_ATTR_INT)) return;
  double full = e->kind == QIR_ATTR_FLOAT ? e->f : (double)e->i;
  qir_module *m = c->m;
  int64_t steps[4][QOPT_MAX_SYMS];
  int n_steps = qopt_size_steps(m, used, 4, steps);
  qir_attr_val bound_tile = tile->val, bands[4];
  const qir_attr *alts = qir_op_attr(op, "tile_alternatives");
  qir_attr_val bound_alts = alts ? alts->val : (qir_attr_val){0};   /* planning at a size drops them */
  int n_bands = 0;
  for (int step = 0; step < n_steps; step++) {
    const int64_t *at = steps[step];
    int64_t points = 1;
    for (int d = 0; d < rt->rank; d++)
      if (rt->sym[d]) points *= qir_dim_eval(rt->sym[d], at);
    int n = op->n_operands + op->n_results, n_ax = op->comp ? op->comp->n_axes + op->comp->n_red : 0;
    qir_type saved[n ? n : 1];
    int64_t saved_ext[n_ax ? n_ax : 1];
    qir_op_types_at(op, at, saved, saved_ext);
    qir_op_remove_attr(op, "tile");
    plan_op(m, op, c->t, &(roller_options){.topk = 1, .mma = c->o->mma, .split = c->o->split, .tf32 = c->o->tf32}, NULL, c->quiet);
    const qir_attr *small = qir_op_attr(op, "tile");
    qir_attr_val plan = small ? small->val : (qir_attr_val){0};
    qir_op_types_restore(op, saved, saved_ext);
    qir_op_set_attr(m, op, "tile", bound_tile, true);
    const qir_attr_val *se = small ? qir_attr_dict_get(&plan, "est_us") : NULL, *blk = small ? qir_attr_dict_get(&plan, "block") : NULL;
    if (!se || !blk || blk->kind != QIR_ATTR_LIST || blk->n != rt->rank) continue;
    double est = se->kind == QIR_ATTR_FLOAT ? se->f : (double)se->i;
    if (!(est < 0.8 * full * qopt_run_share(c->t, op, at))) continue;
    /* the bound's grid for these tiles, and a block a tile (persistent blocks need a fixed grid) */
    qir_attr *entries = qir_alloc(m, sizeof *entries * (size_t)plan.n);
    int n_entries = 0;
    for (int i = 0; i < plan.n; i++)
      if (strcmp(plan.entries[i].key, "persistent")) entries[n_entries++] = plan.entries[i];
    for (int i = 0; i < n_entries; i++)
      if (!strcmp(entries[i].key, "grid") && entries[i].val.kind == QIR_ATTR_LIST && entries[i].val.n == rt->rank) {
        int64_t g[QIR_MAX_RANK];
        for (int d = 0; d < rt->rank; d++) g[d] = (rt->dims[d] + blk->items[d].i - 1) / (blk->items[d].i > 0 ? blk->items[d].i : 1);
        entries[i].val = qir_attr_ints(m, rt->rank, g);
      }
    qir_attr band[2] = {{.key = "points", .val = qir_attr_int(points)},
                        {.key = "tile", .val = qir_attr_dict(m, n_entries, entries)}};
    bands[n_bands++] = qir_attr_dict(m, 2, band);
  }
  if (alts) qir_op_set_attr(m, op, "tile_alternatives", bound_alts, true);
  if (n_bands) qir_op_set_attr(m, op, "tile_bands", qir_attr_list(m, n_bands, bands), true);
  else qir_op_remove_attr(op, "tile_bands");
}

static bool visit(qir_op *op, void *vctx) {
  pass_ctx *c = vctx;
  if (qir_rprogram_packs(op)) return true;   /* its blocks are an rprogram's tasks: keep its plan */
  c->ok &= plan_op(c->m, op, c->t, c->o, c->st, c->quiet);
  if (c->m->n_syms) plan_bands(c, op);
  return true;
}

bool roller_run(qir_module *m, const qir_target *t, const roller_options *o, roller_stats *st, qir_diag *d) {
  (void)d;
  pass_ctx c = {m, t, o, st, fopen("/dev/null", "w"), true};
  qir_walk(m->body, visit, &c);
  if (c.quiet) fclose(c.quiet);
  return c.ok;
}

/* -roller-mma / -roller-split: model, always or never (split: not always). */
static bool choice_option(qopt_ctx *ctx, const char *name, bool always_ok, roller_choice *out) {
  const char *v = qopt_option_str(ctx, name);
  if (!strcmp(v, "model")) *out = ROLLER_BY_MODEL;
  else if (!strcmp(v, "never")) *out = ROLLER_NEVER;
  else if (always_ok && !strcmp(v, "always")) *out = ROLLER_ALWAYS;
  else {
    qir_loc none = {0};
    qir_error(ctx->diag, none, "-%s must be model%s or never, not '%s'", name, always_ok ? ", always" : "", v);
    return false;
  }
  return true;
}

/* The -roller pass: options -target / -target-file pick the device model,
 * -roller-topk how many plans to keep, -roller-mma / -roller-split which
 * kinds of plan it may choose. */
bool qopt_roller(qopt_ctx *ctx, qir_module *m) {
  qir_target from_file;
  const qir_target *t;
  const char *file = qopt_option_str(ctx, "target-file");
  if (file && *file) {
    if (!qir_target_parse_file(file, &from_file, ctx->diag)) return false;
    t = &from_file;
  } else {
    const char *name = qopt_option_str(ctx, "target");
    t = qir_target_get(name);
    if (!t) {
      char known[256] = "";
      for (int i = 0; i < qir_target_count(); i++) {
        if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
        strncat(known, qir_target_at(i)->name, sizeof known - strlen(known) - 1);
      }
      qir_loc none = {0};
      qir_error(ctx->diag, none, "unknown target '%s' (known: %s; or -target-file FILE)", name, known);
      return false;
    }
  }
  roller_options o;
  if (!roller_options_of(ctx, &o)) return false;
  roller_stats st = {0};
  if (!roller_run(m, t, &o, &st, ctx->diag)) return false;
  if (qopt_option_bool(ctx, "stats"))
    fprintf(stderr, "roller: @%s on %s: ops planned %d, relaid for tensor copies %d, transposes added %d\n",
            m->name ? m->name : "main", t->name, st.planned, st.relaid, st.transposes);
  return true;
}

bool roller_options_of(qopt_ctx *ctx, roller_options *o) {
  int64_t topk = qopt_option_int(ctx, "roller-topk");
  if (topk < 1 || topk > RL_MAX_PLANS) {
    qir_loc none = {0};
    qir_error(ctx->diag, none, "-roller-topk must be between 1 and %d", RL_MAX_PLANS);
    return false;
  }
  *o = (roller_options){.topk = (int)topk, .estimate = qopt_option_bool(ctx, "roller-estimate")};
  const char *prec = qopt_option_str(ctx, "matmul-precision");
  if (!strcmp(prec, "high")) o->tf32 = true;
  else if (strcmp(prec, "highest")) {
    qir_loc none = {0};
    qir_error(ctx->diag, none, "-matmul-precision must be highest (f32 contractions in f32) or high (TF32 on the matrix units), not '%s'", prec);
    return false;
  }
  roller_choice relayout;
  if (!choice_option(ctx, "roller-mma", true, &o->mma) || !choice_option(ctx, "roller-split", false, &o->split) ||
      !choice_option(ctx, "roller-relayout", false, &relayout))
    return false;
  o->relayout = relayout == ROLLER_BY_MODEL;
  return true;
}
