/* roller.h: the -roller pass (tools/qopt/roller.c). */
#ifndef QOPT_ROLLER_H
#define QOPT_ROLLER_H

#include <stdio.h>

#include "qir.h"
#include "target.h"

typedef struct {
  int planned;                  /* ops that got a #tile */
  int skipped;                  /* ops with a compute form the planner could not use */
  int relaid;                   /* contractions relaid for tensor copies (roller_layout.c) */
  int transposes;               /* transposes those added */
} roller_stats;

/* Which plans -roller may choose: `model` lets the performance model pick. */
typedef enum { ROLLER_BY_MODEL, ROLLER_ALWAYS, ROLLER_NEVER } roller_choice;

typedef struct {
  int topk;                     /* plans kept per op (1: no #tile_alternatives) */
  roller_choice mma;            /* matrix units for f16/bf16 contractions */
  roller_choice split;          /* split reductions (rsplit); ALWAYS is not offered */
  bool relayout;                /* operands may be relaid for wgmma's tensor copies (roller_layout.c):
                                 * -roller itself, not the passes that plan again */
  bool estimate;                /* keep the plans on each op, re-rate them (est_us, bound) */
  bool tf32;                    /* -matmul-precision=high: f32 contractions may run in TF32 on the
                                 * matrix units (mma.sync m16n8k8 .tf32, CUDA sm_80 and up) */
} roller_options;

/* Writes #tile{...} (and #tile_alternatives when topk > 1) on every op of m
 * that has a tensor-expression form, planned for target t.  st may be NULL.
 * Returns false only after reporting an error into d. */
bool roller_run(qir_module *m, const qir_target *t, const roller_options *o, roller_stats *st, qir_diag *d);

/* The same for one op (a `compute` op or a named op with a compute form). */
bool roller_plan_op(qir_module *m, qir_op *op, const qir_target *t, const roller_options *o, roller_stats *st,
                    qir_diag *d);

/* roller_wgmma.c: Hopper's wgmma plans (mma = [64, N, 16]) for an f16/bf16
 * contraction over M, N (output axes vm, vn) and K (compute variable vk; other
 * reduction axes are steps of one), its operands copied by the tensor memory
 * accelerator where it can, else by the producer warpgroup's loads. */
typedef struct {
  int64_t m, n, k, batch;       /* extents of M, N, K; the product of the other output axes */
  int m2;                       /* an outer output axis of M whose rows can make a band (A K-major by a
                                 * tensor map walking M and it, B not moving with it), or -1 */
  int64_t m2_ext;
  int64_t red_steps;            /* the product of the other reduction axes (steps of one: a window) */
  bool a_mn_major, b_mn_major;  /* A contiguous along M, B along N (wgmma's imm-trans), copied by TMA */
  bool a_generic, b_generic;    /* copied by the producer warpgroup's loads (no tensor map) */
  int64_t a_mn_es, m2_es;       /* A's traversal strides along M and M2 (a strided window's): a box
                                 * traverses at most 256 elements a dimension */
  double peak_gflops;           /* the target's matrix peak for the operands' type */
  int out_elem_bytes;
  double in_bytes;              /* A and B once */
  bool symbolic;                /* the result has symbolic extents: a run's blocks are its tiles (no persistent blocks) */
} roller_wgmma_problem;
typedef struct {
  int64_t bm, wm, bn;           /* block along M, a consumer warpgroup's rows (64 or 128), N (the instruction's) */
  int64_t rows2;                /* a band: rows of M2 (all of M each), bm their rows rounded up to wm; 0: none */
  int stages;
  /* persistent blocks: -1 lets roller_wgmma_eval choose (one resident wave of blocks, each
   * computing every P-th tile, where the tiles are more), 0 none, P > 0 that count */
  int64_t persistent;
  /* derived by roller_wgmma_eval */
  bool valid;
  int64_t threads, smem, regs, blocks;
  double est_us, global_bytes;
  const char *bound;
} roller_wgmma_plan;
/* A plan's `bound`: the limiting term, with ", partial last wave" where the
 * last wave costs a tenth of the time or more (a static string). */
const char *roller_bound_text(const char *term, bool tail);
/* On Hopper (wgmma_n_max), with one block resident an SM, L2 serves a wave at a
 * time: past the first, a partial wave takes a whole wave's time (the SMs' own
 * ports, not the L2's total, bound its blocks; with several resident blocks the
 * tail smooths out).  The factor on a plan's L2 time, else 1.  Measured on the
 * H200 (2026-11-27): an 8192 x 768 x 768 GEMM ran 256 x 128 tiles (1.45 waves)
 * in 50 us, 128 x 192 (1.94 waves, 11% more traffic) in 41; with this factor the
 * measured plans of issue 28's 12 operators rank with rho 0.53 (-0.03 without),
 * the first within 10% of the best on 9 of 12 (5). */
double roller_l2_wave_factor(const qir_target *t, double blocks, double resident);
bool roller_wgmma_problem_of(const qir_op *op, const qir_target *t, int vm, int vn, int vk, roller_wgmma_problem *w);
void roller_wgmma_eval(const qir_target *t, const roller_wgmma_problem *w, roller_wgmma_plan *pl);
int roller_wgmma_plans(const qir_target *t, const roller_wgmma_problem *w, roller_wgmma_plan *out, int cap);
/* roller_layout.c: the contraction `form` (op's compute form) over operands
 * with K's dimension (variable vk) moved innermost: constants permuted,
 * other values through `transpose` ops (made unlinked, or shared: one
 * already before op).  NULL where no operand needs it.  The new compute op is
 * unlinked: roller_relayout_commit puts it and what it reads in op's place,
 * roller_relayout_discard drops them. */
typedef struct {
  int n_made;
  qir_op *made[2];              /* a permuted constant or a transpose per operand moved */
  bool shared[2];               /* a transpose that was there already */
} roller_relayout;
qir_op *roller_relaid_form(qir_module *m, qir_op *op, const qir_op *form, int vk, roller_relayout *out, qir_diag *d);
void roller_relayout_commit(qir_module *m, qir_op *op, qir_op *relaid, const roller_relayout *r);
void roller_relayout_discard(qir_op *relaid, const roller_relayout *r);
/* roller_flash.c: a flash-attention plan (#tile{flash = [..], ...}) for an
 * `attention` op where the target and the op's types allow one, and its next
 * topk - 1 as #tile_alternatives; false (the op untouched) otherwise. */
bool roller_plan_attention(qir_module *m, qir_op *op, const qir_target *t, int topk, roller_stats *st);
/* One line on `out` saying what an attention op became (the -stats report):
 * its flash plan (tiles, stages, grouped heads, causal skip, key splits,
 * modelled time) or that it has none.  Nothing for other ops. */
void roller_flash_report(FILE *out, const qir_op *op);

/* The options -roller-topk, -roller-mma, -roller-split and -matmul-precision give (what -roller
 * plans with; -welder plans the ops it creates the same way).  False after an
 * error into ctx->diag. */
struct qopt_ctx;
bool roller_options_of(struct qopt_ctx *ctx, roller_options *o);

#endif /* QOPT_ROLLER_H */
