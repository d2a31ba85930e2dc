/* rprogram.h: Rammer's rProgram (`rprogram` op), read into a plain struct.
 *
 *   rprogram %a, %b, %c {target = "h100", veus = 4, waves = [
 *       {run = [{kernel = 0, tasks = [0, 8], veus = [0, 3]}, {kernel = 1, tasks = [0, 2], veus = [0, 1]}]},
 *       {barrier = 1, run = [{kernel = 2, tasks = [0, 4], veus = [0, 3]}]}]}
 *
 * The operands are results of the packed kernels (rOperators: ops with a
 * #tile plan, or Welder `kernel` groups with one; their grid is their count
 * of rTasks).  `kernel = I` names
 * operand I's op.  vEU v of an entry {kernel, veus = [v0, v1], tasks = [t0, t1)}
 * runs tasks t0 + (v - v0), t0 + (v - v0) + n, ... (n = v1 - v0 + 1) in
 * order; a vEU runs its entries of a wave in the listed order and its waves
 * in order.  Between vEUs, order comes only from synchronisation:
 *   barrier = 1          no vEU starts this wave before every vEU finished
 *                        the waves before it;
 *   wait = [{kernel = I, tasks = [t0, t1)}, ...]
 *                        no vEU starts this wave before those tasks (run in
 *                        earlier waves) are complete.
 * qir_rprogram_check (called by the verifier) proves that every task runs
 * once, every wait can be met, every consumer kernel's tasks are ordered
 * after all tasks of the packed kernels it reads, and the vEUs fit the
 * target's co-resident capacity for the kernels' threads and shared memory
 * and the persistent kernel's registers (qir_rprogram_regs).
 */
#ifndef QIR_RPROGRAM_H
#define QIR_RPROGRAM_H

#include "qir.h"
#include "target.h"

typedef struct {
  int kernel;                   /* operand index */
  int64_t veu_lo, veu_hi;       /* inclusive */
  int64_t task_lo, task_hi;     /* [lo, hi) */
  qir_loc loc;
} qir_rp_run;

typedef struct {
  int kernel;
  int64_t task_lo, task_hi;
  qir_loc loc;
} qir_rp_wait;

typedef struct {
  bool barrier;
  int n_runs, n_waits;
  qir_rp_run *runs;
  qir_rp_wait *waits;
  qir_loc loc;
} qir_rp_wave;

/* Resources of one packed kernel, from its #tile plan. */
typedef struct {
  const qir_op *op;
  int64_t tasks;                /* product of the plan's grid */
  int64_t threads, regs, smem;  /* per block; smem in bytes */
} qir_rp_kernel;

typedef struct qir_rprogram {
  const qir_op *op;
  const char *target;           /* the `target` attribute, or "h100" */
  int64_t veus;
  int n_kernels;
  qir_rp_kernel *kernels;
  int n_waves;
  qir_rp_wave *waves;
} qir_rprogram;

/* Reads op's attributes (arena memory of m).  false after a located error. */
bool qir_rprogram_read(qir_module *m, const qir_op *op, qir_rprogram *out, qir_diag *d);

/* The kernel facts of an op with a #tile plan (false: no usable plan): a
 * plain op, or a Welder `kernel` group (its tasks are the group's blocks). */
bool qir_rprogram_kernel_of(const qir_op *op, qir_rp_kernel *out);

/* The same facts of one plan (a #tile or #tile_alternatives dict); out->op is NULL. */
bool qir_rprogram_kernel_of_plan(const qir_attr_val *tile, qir_rp_kernel *out);

/* Co-resident blocks per compute unit of the target for blocks of the given
 * threads, registers per thread (allocated in units of 8) and shared-memory
 * bytes (0: none fit). */
int64_t qir_rprogram_blocks_per_unit(const qir_target *t, int64_t threads, int64_t regs, int64_t smem);

/* Registers per thread a persistent kernel needs whose largest packed kernel's
 * plan estimates member_regs: more than that member alone (see rprogram.c). */
int64_t qir_rprogram_regs(const qir_target *t, int64_t member_regs);

/* The largest resources over the kernels of p (its persistent block needs
 * those threads and shared memory, and qir_rprogram_regs of those registers). */
void qir_rprogram_block_needs(const qir_rprogram *p, int64_t *threads, int64_t *regs, int64_t *smem);

/* Ops that launch no kernel and through which a producer's data reaches its
 * consumer unchanged: reshapes and identities (their result is their
 * operand's bytes: qcodegen aliases them), and slices a flash attention reads
 * in place (qir_attention_folds_slice). */
bool qir_op_is_view(const qir_op *op);

/* Whether an rprogram packs op (uses one of its results): its plan's blocks
 * are that program's tasks, so passes that re-plan or regroup kernels keep it. */
bool qir_rprogram_packs(const qir_op *op);
/* Modules with dimension symbols: whether a run at the symbols' values `at`
 * launches rprogram rp's members one by one (#unpacked_upto, written by
 * -rammer: every symbol at most its value there) instead of the program. */
bool qir_rprogram_unpacked_at(const qir_op *rp, const int64_t *at);

/* The semantic checks (every task once, waits, dependences, capacity) on a
 * program read by qir_rprogram_read.  Returns the number of errors. */
int qir_rprogram_check(qir_module *m, const qir_rprogram *p, qir_diag *d);


/* Shared memory a row group's staged rows may take: within every GPU's
 * static limit (qcodegen's row composer and the whole plan alike). */
#define QIR_ROW_SMEM_LIMIT (32 * 1024)

/* How a row group (softmax, norm, attention rows) runs, as qcodegen's row
 * composer (compose_rows, lower_rows) runs it and its whole plan says. */
typedef struct {
  bool staged;                      /* the row is computed once into shared memory */
  int64_t kept_block[QIR_MAX_RANK]; /* a block's box of rows: 1 on the reduced axes */
  int64_t grid[QIR_MAX_RANK];       /* blocks along each axis: 1 on the reduced axes */
  int64_t rows, blocks, threads, smem;
} qir_row_blocking;

/* The row blocking of a row group whose rows are the axes `reduced` of dims
 * (rank axes): the group's block (NULL: none) over the kept axes, halved
 * along its largest axis while its warps exceed 1024 threads or its staged
 * rows QIR_ROW_SMEM_LIMIT; a warp per row.  staged_size: bytes of an element
 * of the row the first reduction reads (0: none to stage; it is staged when a
 * row fits the limit); tail_size: bytes of an element of the row result a
 * tail contraction (@V) walks, staged too (0: no tail); staged as qcodegen
 * computes them, an element of 4 bytes or fewer takes 4.  false: a tail's row
 * does not fit. */
bool qir_row_blocking_of(int rank, const int64_t *dims, const bool *reduced, const int64_t *group_block,
                         int64_t staged_size, int64_t tail_size, int warp, qir_row_blocking *out);

/* Whether qcodegen's fused composer takes Welder group k (the one it tries
 * first): at most one reduction among its computes (named ops expanded),
 * of the group's result type, it and what is computed from it read only at
 * the readers' own points, and no staged prologue (a #fuse=smem value before
 * the reduction that computes something, not only a view: the staged
 * composer computes it once per block).  Otherwise k is a row or a staged
 * group. */
bool qir_group_composes_fused(qir_module *m, const qir_op *k);

/* Whether group k has one reduction and, before it, a staged prologue: a
 * #fuse=smem value that computes something (not only a view of its operand).
 * qcodegen composes such a group with its staged composer first, the value
 * computed once per block into shared memory (a BN + ReLU before a conv). */
bool qir_group_stages_prologue(qir_module *m, const qir_op *k);

/* A whole plan (#tile{block, composer, est_us, grid, regs, smem, target,
 * threads}: composer = staged | rows names the composer it is for) for
 * Welder group k that qcodegen composes as a staged group (#fuse=smem members:
 * the group's block tile over its result, one staged box per smem value) or
 * as a row group (a softmax / norm root, or a contraction over such a root's
 * rows: qir_row_blocking_of, a warp per row of a box of rows): the grid and
 * threads qcodegen emits, an upper bound of its shared memory, a register
 * estimate, est_us as given.  false: k is neither (a fused group's plan is its
 * anchor's), or a staged group without a block tile. */
bool qir_group_whole_plan(qir_module *m, const qir_op *k, const qir_target *t, double est_us, qir_attr_val *out);

#endif
