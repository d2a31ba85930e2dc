/* roller_impl.h: Roller's problem and plan, shared by the pass
 * (tools/qopt/roller.c: analysis, the performance model, the mma and wgmma
 * plan families, the pass) and its construction of SIMT tile plans
 * (roller_construct.c).  Private to -roller. */
#ifndef QOPT_ROLLER_IMPL_H
#define QOPT_ROLLER_IMPL_H

#include "roller.h"

#include <stdbool.h>
#include <stdint.h>

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
  int64_t persistent;           /* wgmma: persistent blocks (roller_wgmma_plan's), 0 none */
  double global_bytes;          /* pipelined mma plans: the traffic, to break ties (less first) */
  const char *bound;            /* pipelined mma plans: the model's limiting term */
  /* derived by rl_eval */
  bool valid;
  int64_t threads, smem, regs, blocks;
  int smem_pad, vec;
  double est_us;
} rl_plan;

typedef struct {
  double global_bytes;          /* all blocks, transaction-aligned */
  double block_global_bytes;
  double smem_bytes;            /* smem -> register traffic, all blocks */
  double flops_block;
  int64_t chunks;
} rl_traffic;
typedef struct {
  rl_plan plans[RL_MAX_PLANS];
  int n;
} rl_path;

static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* roller.c: the model */
double rl_group_box(const rl_group *g, const int64_t *E, int n_vars, int64_t *ext);
int64_t rl_plan_blocks(const rl_problem *p, const rl_plan *pl);
int64_t rl_plan_regs(const rl_problem *p, const rl_plan *pl);
int64_t rl_plan_smem(const rl_problem *p, const rl_plan *pl, int pad);
int64_t rl_plan_step_smem(const rl_problem *p, const rl_plan *pl, int pad);
int64_t rl_plan_threads(const rl_problem *p, const rl_plan *pl);
double rl_round_sig(double x);
void rl_traffic_of(const rl_problem *p, const rl_plan *pl, bool union_taps, rl_traffic *tr);
/* Fills the derived fields and the estimate; valid = within every limit. */
void rl_eval(const rl_problem *p, rl_plan *pl);

/* roller_construct.c: the construction */
double rl_axis_waste(int64_t n, int64_t b);
double rl_plan_span(const rl_problem *p, const rl_plan *pl);
bool rl_fit_span(const rl_problem *p, rl_plan *pl);
void rl_construct(const rl_problem *p, rl_path *path);

#endif
