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
#include "roller.h"
#include "rprogram.h"
#include "qopt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RL_MAX_VARS 16          /* output + reduction axes */
#define RL_MAX_GROUPS 16        /* distinct operands read */
#define RL_MAX_ACC 8            /* accesses of one operand */
#define RL_MAX_CAND 64          /* candidate sizes per axis */
#define RL_MAX_PLANS 64
#define RL_MAX_WASTE 0.15       /* padding waste allowed relative to the real extent */
#define RL_SUBPARTITIONS 4      /* warp schedulers (and tensor-core slices) per SM, sm_80 and up */
#define RL_MMA_ADDR_REGS 40     /* pipelined mma kernel: stage offsets, global pointers, loop state */
#define RL_TF32_ADDR_REGS 32    /* tf32: each lane loads its fragment values singly, from addresses of their
                                 * own (ptxas 13, sm_90: a padded convolution's 64x64 warp tiles spilled; 32x64 fit) */
#define RL_MMA_BLOCK_MAX 256    /* block tile along M or N */
#define RL_MMA_BLOCK_AREA (256 * 128)
#define RL_MMA_WARPS_MAX 8

/* ------------------------------------------------------------ analysis */

typedef struct {
  double coef[QIR_MAX_RANK][RL_MAX_VARS];
  double cst[QIR_MAX_RANK];
  bool affine[QIR_MAX_RANK];
  bool vars[QIR_MAX_RANK][RL_MAX_VARS]; /* non-affine dims: the variables they mention */
} rl_access;

/* Every access of one tensor (or of the output), whose footprints are unioned. */
typedef struct {
  int operand;                  /* compute operand index; -1 for the output */
  int rank;
  int64_t dims[QIR_MAX_RANK];
  int elem_bytes;
  int n_acc;
  rl_access acc[RL_MAX_ACC];
  bool staged;                  /* depends on a reduction axis: staged through smem per step */
} rl_group;

typedef struct {
  const qir_target *t;
  bool tf32_ok;                 /* -matmul-precision=high: f32 contractions may take TF32 plans */
  int n_out, n_red, n_vars;
  int64_t ext[RL_MAX_VARS];
  int n_groups;
  rl_group g[RL_MAX_GROUPS];
  rl_group out;
  double flops_per_point;
  double peak_gflops;           /* of the unit the op runs on */
  double simt_gflops;           /* without the matrix units */
  bool mma;
  bool pipelined;               /* mma.sync 16x8x16 in a cp.async pipeline (`stages`); else wmma / MFMA */
  bool tf32;                    /* f32 operands on the matrix units in TF32 (-matmul-precision=high):
                                 * mma.sync m16n8k8, pipelined, operands staged as 4-byte f32 */
  int mma_m, mma_n, mma_k;      /* the instruction shape (the target's, or m16n8k8 with tf32) */
  int op_bytes;                 /* bytes per staged A / B element (2: f16/bf16; 4: tf32) */
  bool simt_pipe;               /* GPU target: qcodegen stages a SIMT plan's tiles twice (simt_stages) */
  int mma_axis[3];              /* var of M (output), N (output), K (reduction) */
  bool wgmma_ok;                /* the target has wgmma and the operands suit it (roller_wgmma.c) */
  bool scalar[2];               /* A, B: the mma.sync loop stages them a value at a time (a padding
                                 * mask, or an innermost index that is not its tile variable on
                                 * 16-byte boundaries: qcodegen's mma_vector_loads_fit) */
  roller_wgmma_problem wg;
  double unique_in_bytes, out_bytes;
  int vec_max;                  /* widest vector along the innermost output axis */
} rl_problem;

typedef struct {
  int64_t tile[RL_MAX_VARS];    /* block tile (output vars), rstep (reduction vars) */
  int64_t thr[RL_MAX_VARS];     /* thread (or warp) tile, output vars */
  int64_t rsplit;               /* lanes sharing each output's reduction (0, 1: none) */
  int stages;                   /* pipelined mma plans: shared tiles in flight (0: not pipelined) */
  bool wgmma;                   /* mma = [64, N, 16] (roller_wgmma.c): rated by roller_wgmma_eval */
  bool band;                    /* wgmma over a band: tile[M] all of M, tile[M2] its rows (mma_axes [M, N, K, M2]) */
  double global_bytes;          /* pipelined mma plans: the traffic, to break ties (less first) */
  const char *bound;            /* pipelined mma plans: the model's limiting term */
  /* derived by rl_eval */
  bool valid;
  int64_t threads, smem, regs, blocks;
  int smem_pad, vec;
  double est_us;
} rl_plan;

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
static double group_box(const rl_group *g, const int64_t *E, int n_vars, int64_t *ext) {
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
static double round_sig(double x) {
  if (!(x > 0) || !isfinite(x)) return 0;
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g", x);
  return strtod(buf, NULL);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* ------------------------------------------------------------ the model */

typedef struct {
  double global_bytes;          /* all blocks, transaction-aligned */
  double block_global_bytes;
  double smem_bytes;            /* smem -> register traffic, all blocks */
  double flops_block;
  int64_t chunks;
} rl_traffic;

static int64_t owners_per_block(const rl_problem *p, const rl_plan *pl) {
  int64_t n = 1;
  for (int v = 0; v < p->n_out; v++) n *= ceil_div(pl->tile[v], pl->thr[v]);
  return n;
}

static int64_t plan_threads(const rl_problem *p, const rl_plan *pl) {
  return owners_per_block(p, pl) * (p->mma ? p->t->warp_size : 1) * (pl->rsplit > 1 ? pl->rsplit : 1);
}

static int64_t plan_blocks(const rl_problem *p, const rl_plan *pl) {
  int64_t n = 1;
  for (int v = 0; v < p->n_out; v++) n *= ceil_div(p->ext[v], pl->tile[v]);
  return n;
}

/* Global traffic of a plan.  union_taps (pipelined mma plans whose taps fit
 * the cache, see tap_union_bytes): the steps along the reduction axes pinned
 * at 1 (a convolution's taps) re-read the sectors of one K step, served by
 * L1, so each staged operand costs its box over all taps once per K step. */
static void traffic(const rl_problem *p, const rl_plan *pl, bool union_taps, rl_traffic *tr) {
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
  double blocks = (double)plan_blocks(p, pl), owners = (double)owners_per_block(p, pl);
  int txn = p->t->transaction_bytes;
  double per_block = 0, smem = 0;
  for (int i = 0; i < p->n_groups; i++) {
    const rl_group *g = &p->g[i];
    if (g->staged && pl->rsplit <= 1 && union_taps) {
      double n = group_box(g, Eu, p->n_vars, ext);
      per_block += (double)k_chunks * aligned_bytes(g, ext, n, txn);
      smem += owners * R * group_box(g, Et, p->n_vars, ext) * g->elem_bytes;
    } else if (g->staged && pl->rsplit <= 1) {
      double n = group_box(g, E, p->n_vars, ext);
      per_block += (double)tr->chunks * aligned_bytes(g, ext, n, txn);
      smem += owners * R * group_box(g, Et, p->n_vars, ext) * g->elem_bytes;
    } else {
      double n = group_box(g, Ef, p->n_vars, ext);
      per_block += aligned_bytes(g, ext, n, txn);
    }
  }
  double outn = group_box(&p->out, E, p->n_vars, ext);
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
static int64_t plan_step_smem(const rl_problem *p, const rl_plan *pl, int pad) {
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
    int64_t warps = plan_threads(p, pl) / p->t->warp_size;
    int64_t a_row = bm * ((rk + pad + 7) / 8 * 8), a_col = rk * ((bm + pad + 7) / 8 * 8);
    int64_t b_row = rk * ((bn + pad + 7) / 8 * 8), b_col = bn * ((rk + pad + 7) / 8 * 8);
    return ((a_row > a_col ? a_row : a_col) + (b_row > b_col ? b_row : b_col)) * 2 + warps * 256 * 4;
  }
  for (int i = 0; i < p->n_groups; i++) {
    const rl_group *g = &p->g[i];
    if (!g->staged) continue;
    group_box(g, pl->tile, p->n_vars, ext);
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
static int64_t plan_smem(const rl_problem *p, const rl_plan *pl, int pad) {
  int64_t step = plan_step_smem(p, pl, pad);
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
    double n = group_box(g, pl->tile, p->n_vars, ext);
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

static int64_t plan_regs(const rl_problem *p, const rl_plan *pl) {
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
      double n = group_box(g, Et, p->n_vars, ext);
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
  for (int i = 0; i < p->n_groups; i++) b += group_box(&p->g[i], E, p->n_vars, ext) * p->g[i].elem_bytes;
  return b;
}

/* Bytes of the staged operands' boxes over all taps of one K step (the
 * reduction axes a pipelined mma plan pins at step 1), transaction-aligned. */
static double tap_union_bytes(const rl_problem *p, const rl_plan *pl) {
  int64_t Eu[RL_MAX_VARS], ext[QIR_MAX_RANK];
  for (int v = 0; v < p->n_vars; v++) Eu[v] = v >= p->n_out && v != p->mma_axis[2] ? p->ext[v] : pl->tile[v];
  double b = 0;
  for (int i = 0; i < p->n_groups; i++)
    if (p->g[i].staged) b += aligned_bytes(&p->g[i], ext, group_box(&p->g[i], Eu, p->n_vars, ext), p->t->transaction_bytes);
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
  traffic(p, pl, tap_union_bytes(p, pl) <= l1_free, &tr);
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
  roller_wgmma_plan w = {.bm = pl->tile[vm], .wm = pl->thr[vm], .bn = pl->tile[p->mma_axis[1]], .stages = pl->stages};
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
}

/* Fills the derived fields and the estimate; valid = within every limit. */
static void rl_eval(const rl_problem *p, rl_plan *pl) {
  const qir_target *t = p->t;
  if (pl->wgmma) {
    wgmma_eval(p, pl);
    return;
  }
  pl->threads = plan_threads(p, pl);
  pl->blocks = plan_blocks(p, pl);
  pl->smem_pad = plan_pad(p, pl);
  int64_t step_smem = plan_step_smem(p, pl, pl->smem_pad);
  int copies = p->pipelined || p->mma ? 1 : simt_stages(p, step_smem);
  pl->smem = step_smem * copies;
  pl->regs = plan_regs(p, pl);
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
  traffic(p, pl, false, &tr);
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

/* ------------------------------------------------------------ construction */

/* Candidate tile sizes along an axis of extent n, multiples of `mult`:
 * powers of two and divisors (times mult) whose padding waste stays under
 * RL_MAX_WASTE, plus the whole (rounded) extent.  Sorted, unique. */
static int candidates(int64_t n, int64_t mult, int64_t cap, int64_t *out) {
  int k = 0;
  int64_t full = round_up(n, mult), q = full / mult;
  for (int64_t c = 1; c <= q && k < RL_MAX_CAND - 2; c++) {
    bool pow2 = (c & (c - 1)) == 0;
    if (!pow2 && q % c != 0) {
      if (c > 4096) c = q - 1;                /* only the extent is left */
      continue;
    }
    int64_t s = c * mult;
    if (s > cap && s != mult) break;
    double waste = (double)(round_up(n, s) - n) / (double)n;
    if (waste <= RL_MAX_WASTE || s == mult) out[k++] = s;
  }
  if (full <= cap && (k == 0 || out[k - 1] != full)) out[k++] = full;
  if (k == 0) out[k++] = mult;
  return k;
}

/* Next candidate above `cur`, or 0. */
static int64_t next_size(int64_t n, int64_t mult, int64_t cap, int64_t cur) {
  int64_t c[RL_MAX_CAND];
  int k = candidates(n, mult, cap, c);
  for (int i = 0; i < k; i++)
    if (c[i] > cur) return c[i];
  return 0;
}

static double run_sim(double a, double b) { return 2 * a * b / (a * a + b * b); }

/* Coalescing score of the staged reads for the current rstep: how close each
 * staged box's contiguous run is to whole transactions. */
static double rstep_score(const rl_problem *p, const rl_plan *pl) {
  int64_t ext[QIR_MAX_RANK];
  double s = 0;
  for (int i = 0; i < p->n_groups; i++) {
    const rl_group *g = &p->g[i];
    if (!g->staged || g->rank == 0) continue;
    group_box(g, pl->tile, p->n_vars, ext);
    double run = (double)ext[g->rank - 1];
    for (int d = g->rank - 2; d >= 0 && ext[d + 1] == g->dims[d + 1]; d--) run *= (double)ext[d];
    double want = (double)p->t->transaction_bytes / g->elem_bytes;
    s += run >= want ? 1 : run_sim(run, want);
  }
  return s;
}

/* With matrix units only M, N and K are tiled: qcodegen's mma kernels keep
 * every other output axis at block 1 and every other reduction axis at step 1. */
static bool mma_pinned(const rl_problem *p, int v) {
  return p->mma && v != p->mma_axis[0] && v != p->mma_axis[1] && v != p->mma_axis[2];
}

static int64_t red_mult(const rl_problem *p, int v) {
  return p->mma && v == p->mma_axis[2] ? p->mma_k : 1;
}

static int64_t out_mult(const rl_problem *p, int v) {
  if (p->mma && v == p->mma_axis[0]) return p->mma_m;
  if (p->mma && v == p->mma_axis[1]) return p->mma_n;
  return 1;
}

/* rstep: from the unit step, grow the reduction axis that most improves
 * transaction coalescing of the staged reads. */
static void align_rstep(const rl_problem *p, rl_plan *pl) {
  for (int v = p->n_out; v < p->n_vars; v++) pl->tile[v] = red_mult(p, v) <= p->ext[v] ? red_mult(p, v) : p->ext[v];
  double cur = rstep_score(p, pl);
  for (int iter = 0; iter < 64; iter++) {
    int best = -1;
    int64_t best_size = 0;
    double best_score = cur;
    for (int v = p->n_vars - 1; v >= p->n_out; v--) {
      int64_t nx = mma_pinned(p, v) ? 0 : next_size(p->ext[v], red_mult(p, v), p->ext[v] * 2, pl->tile[v]);
      if (!nx) continue;
      int64_t old = pl->tile[v];
      pl->tile[v] = nx;
      double s = rstep_score(p, pl);
      pl->tile[v] = old;
      if (s > best_score + 1e-9) best = v, best_score = s, best_size = nx;
    }
    if (best < 0) break;
    pl->tile[best] = best_size;
    cur = best_score;
  }
}

/* Register-level traffic (smem -> registers, whole op) and footprint of a
 * thread tile; only staged data is reused across the reduction. */
static void reg_level(const rl_problem *p, const int64_t *thr, double *q, double *f, double *flops, double *bytes) {
  int64_t Et[RL_MAX_VARS], ext[QIR_MAX_RANK];
  double owners = 1, pts = 1;
  for (int v = 0; v < p->n_vars; v++) Et[v] = v < p->n_out ? thr[v] : 1;
  for (int v = 0; v < p->n_out; v++) owners *= ceil((double)p->ext[v] / (double)thr[v]), pts *= (double)thr[v];
  double per = 0;
  for (int i = 0; i < p->n_groups; i++)
    if (p->g[i].staged) per += group_box(&p->g[i], Et, p->n_vars, ext) * p->g[i].elem_bytes;
  *q = owners * per;
  *f = per + pts * 4;
  *flops = pts * p->flops_per_point;
  *bytes = per;
}

/* Registers a thread may use and still leave room for 512 threads per unit. */
static int64_t reg_budget(const qir_target *t) {
  int64_t b = t->regs_per_unit / 512;
  return b < t->max_regs_per_thread ? b : t->max_regs_per_thread;
}

static int64_t smem_budget(const qir_target *t) {
  return t->smem_per_block < t->smem_per_unit / 2 ? t->smem_per_block : t->smem_per_unit / 2;
}

static void thread_tile(const rl_problem *p, rl_plan *pl) {
  const qir_target *t = p->t;
  for (int v = 0; v < p->n_out; v++) pl->thr[v] = out_mult(p, v) <= p->ext[v] ? out_mult(p, v) : 1;
  if (p->n_out > 0 && !p->mma) {
    int last = p->n_out - 1;
    int vec = 1;
    while (vec * 2 <= p->vec_max && p->ext[last] % (vec * 2) == 0) vec *= 2;
    pl->thr[last] = vec;
  }
  if (p->n_red == 0) return;                  /* no reuse across a reduction: vec only */
  int64_t budget = reg_budget(t);
  double ridge = p->peak_gflops / t->smem_gbs;
  int64_t cap = p->mma ? 128 : 16;
  for (int iter = 0; iter < 64; iter++) {
    double q, f, fl, by;
    reg_level(p, pl->thr, &q, &f, &fl, &by);
    if (by > 0 && fl / by >= ridge) break;    /* compute-bound at the register level */
    int best = -1;
    int64_t best_size = 0;
    double best_score = 0;
    for (int v = p->n_out - 1; v >= 0; v--) {
      int64_t nx = mma_pinned(p, v) ? 0 : next_size(p->ext[v], pl->thr[v] > out_mult(p, v) ? pl->thr[v] : out_mult(p, v),
                             cap, pl->thr[v]);
      if (!nx || nx > cap) continue;
      int64_t old = pl->thr[v];
      pl->thr[v] = nx;
      double q2, f2, fl2, by2;
      reg_level(p, pl->thr, &q2, &f2, &fl2, &by2);
      rl_plan probe = *pl;
      for (int u = 0; u < p->n_out; u++) probe.tile[u] = probe.thr[u];
      int64_t regs = plan_regs(p, &probe);
      /* a warp tile keeps a warp's worth of work per fragment: grow it only
       * while the problem still has 4 warps per compute unit */
      double warps = 1;
      for (int u = 0; u < p->n_out; u++) warps *= ceil((double)p->ext[u] / (double)pl->thr[u]);
      pl->thr[v] = old;
      if (regs > budget || f2 <= f || (p->mma && warps < 4.0 * t->compute_units)) continue;
      double s = (q - q2) / (f2 - f);
      if (s > best_score + 1e-12) best = v, best_score = s, best_size = nx;
    }
    if (best < 0) break;
    pl->thr[best] = best_size;
  }
}

typedef struct {
  rl_plan plans[RL_MAX_PLANS];
  int n;
} rl_path;

static double block_footprint(const rl_problem *p, const rl_plan *pl) {
  int64_t ext[QIR_MAX_RANK];
  double f = (double)plan_step_smem(p, pl, 0);
  double outn = group_box(&p->out, pl->tile, p->n_vars, ext);
  return f + outn * p->out.elem_bytes;
}

static double axis_waste(int64_t n, int64_t b) { return (double)(round_up(n, b) - n) / (double)n; }

/* Can the block along v grow to b?  Never past the extent rounded up to the
 * thread tile, and with the padding waste under RL_MAX_WASTE. */
static bool block_fits(const rl_problem *p, const rl_plan *pl, int v, int64_t b) {
  double unit_waste = axis_waste(p->ext[v], pl->thr[v]);   /* a thread tile's own padding is allowed */
  return b <= round_up(p->ext[v], pl->thr[v]) &&
         axis_waste(p->ext[v], b) <= (unit_waste > RL_MAX_WASTE ? unit_waste : RL_MAX_WASTE) + 1e-9;
}

/* Any block size along one axis (a multiple of its thread tile, block_fits)
 * that makes the threads a whole number of warps; the smallest change of
 * the block wins.  False if there is none. */
static bool resize_to_warp(const rl_problem *p, rl_plan *pl) {
  const qir_target *t = p->t;
  int64_t th = plan_threads(p, pl), best_b = 0;
  int best = -1;
  double best_d = 0;
  for (int v = 0; v < p->n_out; v++) {
    int64_t rest = th / ceil_div(pl->tile[v], pl->thr[v]);
    for (int64_t k = 1; k * rest <= t->max_threads_per_block && k * pl->thr[v] <= round_up(p->ext[v], pl->thr[v]); k++) {
      int64_t b = k * pl->thr[v];
      if ((k * rest) % t->warp_size || b == pl->tile[v] || !block_fits(p, pl, v, b)) continue;
      double d = fabs(log((double)b / (double)pl->tile[v]));
      if (best < 0 || d < best_d - 1e-12) best = v, best_b = b, best_d = d;
    }
  }
  if (best < 0) return false;
  pl->tile[best] = best_b;
  return true;
}

/* A smaller thread tile t along v; the block is trimmed to the extent rounded
 * up to t, so no thread along v is left without a point of its own. */
static void shrink_thread(const rl_problem *p, rl_plan *pl, int v, int64_t t) {
  pl->thr[v] = t;
  if (pl->tile[v] > round_up(p->ext[v], t)) pl->tile[v] = round_up(p->ext[v], t);
}

/* Lanes a plan occupies: blocks times its threads rounded up to whole warps
 * (a partial warp takes a whole warp's issue slots). */
static double plan_lanes(const rl_problem *p, const rl_plan *pl) {
  return (double)plan_blocks(p, pl) * (double)round_up(plan_threads(p, pl), p->t->warp_size);
}

/* The warp rule of the #tile schema: threads are a whole number of warps,
 * unless the whole output is one block of fewer threads than a warp. */
static bool warp_rule_holds(const rl_problem *p, const rl_plan *pl) {
  int64_t th = plan_threads(p, pl);
  return th % p->t->warp_size == 0 || (th < p->t->warp_size && plan_blocks(p, pl) == 1);
}

typedef struct {
  const rl_problem *p;
  rl_plan cur;                  /* the candidate being built, axis by axis */
  const rl_plan *from;          /* the block it replaces */
  double lane_cap;              /* 0: the first pass, finding min_lanes; else the lanes allowed */
  double min_lanes;
  rl_plan best;
  double best_est, best_lanes, best_dist;
  int best_over;
  bool found;
} warp_search;

/* The warp rule's candidates: blocks of owners_v thread tiles along output
 * axis v, for owners_v a power of two up to the axis's thread count rounded up
 * to one, that count itself, or the current one, within the threads a block
 * may have.  The first pass finds the fewest lanes any of them takes; the
 * second keeps, among those within RL_MAX_WASTE of it, the one with the
 * fewest axes past the padding limits (block_fits), then the model's best,
 * then fewer lanes, then the least change. */
static void search_warp_blocks(warp_search *s, int v, int64_t threads) {
  const rl_problem *p = s->p;
  const qir_target *t = p->t;
  if (v == p->n_out) {
    if (!warp_rule_holds(p, &s->cur)) return;
    double lanes = plan_lanes(p, &s->cur);
    if (s->lane_cap == 0) {
      if (!s->found || lanes < s->min_lanes) s->min_lanes = lanes, s->found = true;
      return;
    }
    if (lanes > s->lane_cap) return;
    rl_plan c = s->cur;
    rl_eval(p, &c);
    if (!c.valid) return;
    double est = round_sig(c.est_us), dist = 0;
    int over = 0;                              /* axes past the padding limits */
    for (int u = 0; u < p->n_out; u++) {
      over += !block_fits(p, &c, u, c.tile[u]);
      dist += fabs(log((double)c.tile[u] / (double)s->from->tile[u]));
    }
    if (s->found) {
      if (over != s->best_over) { if (over > s->best_over) return; }
      else if (est != s->best_est) { if (est > s->best_est) return; }
      else if (lanes != s->best_lanes) { if (lanes > s->best_lanes) return; }
      else if (dist >= s->best_dist - 1e-12) return;
    }
    s->best = c, s->best_est = est, s->best_lanes = lanes, s->best_dist = dist, s->best_over = over, s->found = true;
    return;
  }
  int64_t n = ceil_div(p->ext[v], s->cur.thr[v]), now = ceil_div(s->from->tile[v], s->from->thr[v]);
  for (int64_t c = 1;; c = c * 2) {
    bool last = c >= n;                       /* the power of two that covers the axis */
    int64_t opts[3] = {c, 0, 0};
    int k = 1;
    if (c < n && n < c * 2) opts[k++] = n;    /* the axis's own count, between two powers */
    if (now != c && now > c / 2 && now < c && now != n) opts[k++] = now;
    for (int i = 0; i < k; i++) {
      if (threads * opts[i] > t->max_threads_per_block) continue;
      s->cur.tile[v] = opts[i] * s->cur.thr[v];
      search_warp_blocks(s, v + 1, threads * opts[i]);
    }
    if (last || threads * c * 2 > t->max_threads_per_block) break;
  }
  s->cur.tile[v] = s->from->tile[v];
}

/* fix_threads' last resort, when no block within the padding limit gives
 * whole warps: the plan is tiny (one block, fewer threads than a warp) and
 * stays, or its block is re-sized, along any output axes, to a block that
 * obeys the warp rule, past the padding limit or its extent if need be.  A
 * partial warp idles its missing lanes just as a guarded thread does, so the
 * lanes (blocks times threads rounded up to a warp) are what padding costs:
 * of the blocks within RL_MAX_WASTE of the fewest lanes, one with the fewest
 * axes past the limits, and of those the model's best.
 * False if none fits. */
static bool pad_to_warps(const rl_problem *p, rl_plan *pl) {
  if (warp_rule_holds(p, pl)) return plan_threads(p, pl) <= p->t->max_threads_per_block;
  warp_search s = {.p = p, .cur = *pl, .from = pl};
  search_warp_blocks(&s, 0, 1);
  if (!s.found) return false;
  s.lane_cap = s.min_lanes * (1 + RL_MAX_WASTE) + 1e-9;
  s.found = false;
  search_warp_blocks(&s, 0, 1);
  if (!s.found) return false;
  *pl = s.best;
  return true;
}

/* Threads should be a multiple of the warp.  In order of preference: widen
 * the block along an axis where it stays within its extent (block_fits);
 * halve a thread tile (more threads, less register reuse; the innermost axis
 * last, it holds the vector) -- or these two the other way round: the
 * construction keeps both variants and lets the model choose; resize the
 * block along one axis to any size that fits and gives whole warps; shrink a
 * thread tile to its unit (tiny shapes: every point its own thread).  When none of
 * these helps, pad_to_warps: a tiny plan keeps its partial warp, any other
 * block is padded (past the padding limit, or its extent) to whole warps. */
static bool fix_threads(const rl_problem *p, rl_plan *pl, bool shrink_first) {
  const qir_target *t = p->t;
  if (p->n_out == 0) return true;
  for (int iter = 0; iter < 64; iter++) {
    int64_t th = plan_threads(p, pl);
    if (th % t->warp_size == 0) return th <= t->max_threads_per_block;
    int64_t g = th, w = t->warp_size;
    while (w) { int64_t r = g % w; g = w; w = r; }   /* gcd(threads, warp) */
    int64_t need = t->warp_size / g;
    int best = -1;
    double best_vol = 0;
    for (int v = 0; v < p->n_out; v++) {
      int64_t b = pl->tile[v] * need;
      if (!block_fits(p, pl, v, b) || th * need > t->max_threads_per_block) continue;
      double vol = (double)round_up(p->ext[v], b) / (double)round_up(p->ext[v], pl->tile[v]);
      if (best < 0 || vol < best_vol) best = v, best_vol = vol;
    }
    if (best >= 0 && !shrink_first) { pl->tile[best] *= need; continue; }
    bool changed = false;
    for (int k = 0; k < p->n_out && !changed; k++) {
      int v = k < p->n_out - 1 ? k : p->n_out - 1;
      int64_t m = out_mult(p, v), h = pl->thr[v] / 2;
      if (pl->thr[v] % 2 == 0 && h >= m && h % m == 0 && pl->tile[v] % h == 0) {
        shrink_thread(p, pl, v, h);
        changed = true;
      }
    }
    if (changed) continue;
    if (best >= 0) { pl->tile[best] *= need; continue; }
    if (resize_to_warp(p, pl)) continue;
    for (int k = 0; k < p->n_out && !changed; k++) {
      int64_t m = out_mult(p, k), b = pl->tile[k] < round_up(p->ext[k], m) ? pl->tile[k] : round_up(p->ext[k], m);
      if (pl->thr[k] > m && b % m == 0 && th / ceil_div(pl->tile[k], pl->thr[k]) * (b / m) <= t->max_threads_per_block) {
        shrink_thread(p, pl, k, m);
        changed = true;
      }
    }
    if (!changed) return pad_to_warps(p, pl);
  }
  return false;
}

/* What a plan's block tile times its reduction step spans (elements). */
static double plan_span(const rl_problem *p, const rl_plan *pl) {
  double s = 1;
  for (int v = 0; v < p->n_vars; v++) s *= (double)pl->tile[v];
  return s;
}

/* A #tile spans at most QIR_TILE_MAX elements (block x rstep; qir.h, the
 * verifier's rule: qcodegen counts a block's staging in 32 bits).  Halves the
 * longest reduction step (a multiple of its instruction shape) until the plan
 * fits; false when the block alone is too large.  A split reduction's lanes
 * walk the whole reduction whatever its rstep, so there it changes nothing. */
static bool fit_span(const rl_problem *p, rl_plan *pl) {
  while (plan_span(p, pl) > QIR_TILE_MAX) {
    int best = -1;
    for (int v = p->n_out; v < p->n_vars; v++)
      if (pl->tile[v] > red_mult(p, v) && (best < 0 || pl->tile[v] > pl->tile[best])) best = v;
    if (best < 0) return false;
    int64_t m = red_mult(p, best), half = round_up(ceil_div(pl->tile[best], 2), m);
    pl->tile[best] = half < pl->tile[best] ? half : m;
  }
  return true;
}

/* Grows the reduction step while the model improves, shared memory fits and
 * the plan's span stays within QIR_TILE_MAX. */
static void expand_rstep(const rl_problem *p, rl_plan *pl) {
  rl_eval(p, pl);
  for (int iter = 0; iter < 64 && pl->valid; iter++) {
    rl_plan best = *pl;
    for (int v = p->n_vars - 1; v >= p->n_out; v--) {
      int64_t nx = mma_pinned(p, v) ? 0 : next_size(p->ext[v], red_mult(p, v), p->ext[v] * 2, pl->tile[v]);
      if (!nx) continue;
      rl_plan c = *pl;
      c.tile[v] = nx;
      rl_eval(p, &c);
      if (c.valid && c.smem <= smem_budget(p->t) && plan_span(p, &c) <= QIR_TILE_MAX && c.est_us < best.est_us * 0.99)
        best = c;
    }
    if (best.est_us >= pl->est_us) break;
    *pl = best;
  }
}

static void add_plan(const rl_problem *p, rl_path *path, const rl_plan *state, bool shrink_first) {
  rl_plan pl = *state;
  if (!fix_threads(p, &pl, shrink_first) || !fit_span(p, &pl)) return;
  for (int i = 0; i < path->n; i++)
    if (memcmp(path->plans[i].tile, pl.tile, sizeof pl.tile) == 0 &&
        memcmp(path->plans[i].thr, pl.thr, sizeof pl.thr) == 0) return;
  expand_rstep(p, &pl);
  if (!pl.valid || path->n == RL_MAX_PLANS) return;
  for (int i = 0; i < path->n; i++)
    if (memcmp(path->plans[i].tile, pl.tile, sizeof pl.tile) == 0 &&
        memcmp(path->plans[i].thr, pl.thr, sizeof pl.thr) == 0) return;
  path->plans[path->n++] = pl;
}

/* A state of the construction becomes a full plan: warp-multiple threads,
 * then the reduction step grown by the model. */
static void finish_plan(const rl_problem *p, rl_path *path, const rl_plan *state) {
  add_plan(p, path, state, false);
  add_plan(p, path, state, true);
}

/* When a larger block would need more threads than a block may have, the
 * thread tile along the same axis grows with it (within the register budget). */
static bool grow_thread_to_fit(const rl_problem *p, rl_plan *c, int v) {
  while (plan_threads(p, c) > p->t->max_threads_per_block) {
    int64_t nx = next_size(p->ext[v], out_mult(p, v), p->mma ? 128 : 16, c->thr[v]);
    while (nx && c->tile[v] % nx) nx = next_size(p->ext[v], out_mult(p, v), p->mma ? 128 : 16, nx);
    if (!nx) return false;
    c->thr[v] = nx;
    if (plan_regs(p, c) > reg_budget(p->t)) return false;
  }
  return true;
}

static void construct(const rl_problem *p, rl_path *path) {
  const qir_target *t = p->t;
  rl_plan pl;
  memset(&pl, 0, sizeof pl);
  align_rstep(p, &pl);
  thread_tile(p, &pl);
  /* the block tile starts as one thread's tile, its innermost extent grown
   * to a whole transaction of the output */
  for (int v = 0; v < p->n_out; v++) pl.tile[v] = pl.thr[v];
  if (p->n_out > 0 && !mma_pinned(p, p->n_out - 1)) {
    int last = p->n_out - 1;
    int64_t want = t->transaction_bytes / p->out.elem_bytes;
    while (pl.tile[last] < want) {
      int64_t nx = next_size(p->ext[last], pl.thr[last], 1 << 20, pl.tile[last]);
      if (!nx) break;
      pl.tile[last] = nx;
    }
  }
  int64_t smem_cap = smem_budget(t);
  int64_t target_threads = 4 * t->warp_size > 128 ? 4 * t->warp_size : 128;
  if (target_threads > t->max_threads_per_block) target_threads = t->max_threads_per_block;
  double ridge = p->peak_gflops / t->dram_gbs;
  bool reuse_phase = true;
  for (int iter = 0; iter < 200; iter++) {
    finish_plan(p, path, &pl);
    rl_traffic tr;
    traffic(p, &pl, false, &tr);
    if (reuse_phase && tr.block_global_bytes > 0 && tr.flops_block / tr.block_global_bytes >= ridge)
      reuse_phase = false;                    /* compute-bound: more reuse does not pay */
    int64_t threads = plan_threads(p, &pl), blocks = plan_blocks(p, &pl);
    double f = block_footprint(p, &pl);
    int best = -1;
    int64_t best_size = 0;
    double best_score = 0;
    for (int v = p->n_out - 1; v >= 0; v--) {
      int64_t nx = mma_pinned(p, v) ? 0 : next_size(p->ext[v], pl.thr[v], 1 << 20, pl.tile[v]);
      if (!nx) continue;
      rl_plan c = pl;
      c.tile[v] = nx;
      if (!grow_thread_to_fit(p, &c, v)) continue;
      int64_t th = plan_threads(p, &c), bl = plan_blocks(p, &c);
      if (th > t->max_threads_per_block || plan_smem(p, &c, 0) > smem_cap) continue;
      /* scale-out: keep a block per compute unit unless the block is still
       * short of one warp */
      if (bl < t->compute_units && bl < blocks && threads >= t->warp_size) continue;
      double s;
      if (reuse_phase) {
        rl_traffic tc;
        traffic(p, &c, false, &tc);
        double f2 = block_footprint(p, &c);
        s = f2 > f ? (tr.global_bytes - tc.global_bytes) / (f2 - f) : 0;
      } else {
        s = 0;
      }
      if (s > best_score + 1e-12) best = v, best_score = s, best_size = nx;
    }
    if (best < 0) {
      reuse_phase = false;
      /* parallelism: grow the innermost axis that can, until the block has
       * enough threads to hide latency */
      if (threads >= target_threads) break;
      for (int v = p->n_out - 1; v >= 0 && best < 0; v--) {
        int64_t nx = mma_pinned(p, v) ? 0 : next_size(p->ext[v], pl.thr[v], 1 << 20, pl.tile[v]);
        if (!nx) continue;
        rl_plan c = pl;
        c.tile[v] = nx;
        int64_t th = plan_threads(p, &c), bl = plan_blocks(p, &c);
        if (th > t->max_threads_per_block || plan_smem(p, &c, 0) > smem_cap) continue;
        if (bl < t->compute_units && bl < blocks && threads >= t->warp_size) continue;
        best = v, best_size = nx;
      }
      if (best < 0) break;
    }
    pl.tile[best] = best_size;
  }
  finish_plan(p, path, &pl);
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
  double unit_waste = axis_waste(p->ext[v], 16);
  return b <= round_up(p->ext[v], w) && axis_waste(p->ext[v], b) <= fmax(unit_waste, RL_MAX_WASTE) + 1e-9;
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
            if (rk > p->mma_k && (rk > round_up(p->ext[vk], p->mma_k) || axis_waste(p->ext[vk], rk) > RL_MAX_WASTE)) break;
            /* S - 1 tiles in flight: no more than the block has steps */
            int64_t steps = ceil_div(p->ext[vk], rk);
            for (int64_t st = 2; st <= QIR_MAX_STAGES && (st == 2 || st - 1 <= steps); st++) {
              pl.tile[vm] = bm, pl.tile[vn] = bn, pl.tile[vk] = rk;
              pl.thr[vm] = tm, pl.thr[vn] = tn;
              pl.stages = (int)st;
              if (plan_span(p, &pl) > QIR_TILE_MAX) continue;
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
    pl.wgmma = true;
    if (plan_span(p, &pl) > QIR_TILE_MAX) continue;
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
    if (!fit_span(p, &pl)) break;
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
    if (!fit_span(p, &pl)) break;
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
  double ex = round_sig(x->est_us), ey = round_sig(y->est_us);
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
  e[n++] = (qir_attr){.key = "est_us", .val = qir_attr_float(round_sig(pl->est_us))};
  if (full) {
    e[n++] = (qir_attr){.key = "target", .val = qir_attr_string(m, target)};
    if (p->mma) {
      int64_t shape[3] = {pl->wgmma ? 64 : p->mma_m, pl->wgmma ? pl->tile[p->mma_axis[1]] : p->mma_n, p->mma_k};
      int64_t axes[4] = {p->mma_axis[0], p->mma_axis[1], p->mma_axis[2] - p->n_out, p->wg.m2};
      e[n++] = (qir_attr){.key = "mma", .val = qir_attr_ints(m, 3, shape)};
      e[n++] = (qir_attr){.key = "mma_axes", .val = qir_attr_ints(m, pl->band ? 4 : 3, axes)};
      if (p->tf32) e[n++] = (qir_attr){.key = "mma_precision", .val = qir_attr_string(m, "tf32")};
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
  if (est) *est = qir_attr_float(round_sig(pl.est_us));
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
                             const qir_target *t, const roller_options *o, FILE *quiet) {
  if (t->wgmma_n_max <= 0 || !p->mma || !p->pipelined || p->tf32 || o->mma == ROLLER_NEVER || !o->relayout ||
      !op->parent || o->estimate)
    return false;
  qir_diag d;
  qir_diag_init_quiet(&d);
  roller_relayout r;
  qir_op *k = roller_relaid_form(m, op, form, p->mma_axis[2], &r, &d);
  if (!k) return false;
  roller_options one = *o;
  double extra = 0;
  for (int i = 0; i < r.n_made; i++)
    if (!r.shared[i] && r.made[i]->code == QIR_OP_TRANSPOSE) {
      plan_op(m, r.made[i], t, &(roller_options){.topk = 1, .mma = o->mma, .split = o->split}, NULL, quiet);
      extra += tile_est(r.made[i]) + t->launch_us;
    }
  plan_op(m, k, t, &one, NULL, quiet);
  const qir_attr *tile = qir_op_attr(k, "tile");
  const qir_attr_val *mma = tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, "mma") : NULL;
  bool wgmma = mma && mma->kind == QIR_ATTR_LIST && mma->n == 3 && mma->items[0].i == 64;
  if (!wgmma || !(tile_est(k) + extra < best_us)) {
    roller_relayout_discard(k, &r);
    return false;
  }
  roller_relayout_commit(m, op, k, &r);
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
  else construct(&p, &path);
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
    construct(&simt, &alt);
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
  if (relaid_is_faster(m, op, form, &as_contraction, path.plans[0].est_us, t, o, quiet)) {
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
    /* the bound's grid for these tiles */
    qir_attr *entries = qir_alloc(m, sizeof *entries * (size_t)plan.n);
    memcpy(entries, plan.entries, sizeof *entries * (size_t)plan.n);
    for (int i = 0; i < plan.n; i++)
      if (!strcmp(entries[i].key, "grid") && entries[i].val.kind == QIR_ATTR_LIST && entries[i].val.n == rt->rank) {
        int64_t g[QIR_MAX_RANK];
        for (int d = 0; d < rt->rank; d++) g[d] = (rt->dims[d] + blk->items[d].i - 1) / (blk->items[d].i > 0 ? blk->items[d].i : 1);
        entries[i].val = qir_attr_ints(m, rt->rank, g);
      }
    qir_attr band[2] = {{.key = "points", .val = qir_attr_int(points)},
                        {.key = "tile", .val = qir_attr_dict(m, plan.n, entries)}};
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
  return roller_run(m, t, &o, NULL, ctx->diag);
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
