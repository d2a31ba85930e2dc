/* target.h: device models, as data.
 *
 * A target describes one device the way a tile planner needs to see it: how
 * many compute units, how threads are grouped (warp / wavefront), the capacity
 * of each memory level (registers, shared memory / LDS, L2), the bandwidth of
 * each level, peak arithmetic rates per data type, and the facts that decide
 * alignment (global-memory transaction width, shared-memory banks, the matrix
 * instruction shape), and what a launch and a barrier cost.  Roller's micro
 * performance model, Welder's fusion model, Rammer's vEU count and model and
 * Grinder's read these numbers; nothing else about a device is hard-coded
 * anywhere.
 *
 * Built-in models: h100 (the default), h200, a100, v100, rtx4090, mi250
 * (one gfx90a GCD), mi300x (gfx942), cpu.  `qir_target_parse_file` reads a
 * model from `key = value` lines (see qir_target_print for the keys); a file
 * may start from a built-in with `base = NAME` and override some keys.
 */
#ifndef QIR_TARGET_H
#define QIR_TARGET_H

#include "qir.h"

/* Peak arithmetic rates a target lists.  VEC_* run on the ordinary ALUs,
 * MMA_* on tensor cores / matrix cores (dense, no sparsity).  MMA_TF32 is
 * what -roller rates f32 contractions at under -matmul-precision=high
 * (mma.sync m16n8k8 .tf32, on CUDA targets with the m16n8k16 shape): about
 * half of MMA_F16 on A100/H100; 0 (v100, mi250) keeps them on SIMT. */
#define QIR_PEAKS(X)                                                           \
  X(VEC_F64, "peak_f64") X(VEC_F32, "peak_f32") X(VEC_F16, "peak_f16")        \
  X(VEC_I32, "peak_i32")                                                       \
  X(MMA_F16, "peak_mma_f16") X(MMA_BF16, "peak_mma_bf16")                      \
  X(MMA_TF32, "peak_mma_tf32") X(MMA_I8, "peak_mma_i8")

typedef enum {
#define X(id, key) QIR_PEAK_##id,
  QIR_PEAKS(X)
#undef X
  QIR_PEAK_COUNT
} qir_peak_kind;

typedef struct {
  char name[32];                /* "h100" */
  char backend[8];              /* "cuda", "hip" or "c": which qcodegen output runs on it */
  char arch[16];                /* "sm_90", "gfx90a", "host" */
  int compute_units;            /* SMs / CUs / CPU cores */
  int warp_size;                /* threads scheduled together: 32 (warp), 64 (wavefront);
                                   CPU: f32 SIMD lanes */
  int max_threads_per_block;
  int max_threads_per_unit;     /* resident threads per SM / CU */
  int max_blocks_per_unit;      /* resident blocks per SM / CU */
  int regs_per_unit;            /* 32-bit registers per SM / CU */
  int max_regs_per_thread;
  int64_t smem_per_block;       /* bytes: the most shared memory one block may use */
  int64_t smem_per_unit;        /* bytes per SM / CU */
  int64_t l2_bytes;             /* last-level on-chip cache the whole device shares */
  double clock_ghz;             /* boost clock the peak rates are quoted at */
  double dram_gbs;              /* GB/s (1e9 bytes/s), whole device */
  double l2_gbs;                /* GB/s, whole device */
  double smem_gbs;              /* GB/s, all units together */
  double peak_gflops[QIR_PEAK_COUNT]; /* 0 = not supported */
  int transaction_bytes;        /* smallest global-memory transaction (sector) */
  int cache_line_bytes;
  int smem_banks;               /* 0 = no banked shared memory (CPU) */
  int bank_bytes;
  int mma_m, mma_n, mma_k;      /* f16/bf16 matrix instruction shape (f32 accumulate);
                                   0 = none.  16x8x16 (mma.sync, sm_80 and up): -roller
                                   writes pipelined plans (`stages`); 16x16x16: wmma / MFMA */
  /* host-side control-flow costs, us: a launch (what -welder and -rammer
   * charge per kernel unless -welder-launch-us / -rammer-launch-us are given,
   * and -grinder's model), a scalar read back with its sync, a cooperative
   * launch, a grid barrier (also -rammer's barrier between waves unless
   * -rammer-sync-us is given), a block barrier.  The GPU models' values are
   * assumptions; cpu's launch is measured on the C back end (see target.c). */
  double launch_us, read_back_us, coop_launch_us, grid_barrier_us, block_barrier_us;
  /* -roller's kernel model, in SM clock cycles: a global load's latency to
   * use (a reduction step waits for it unless stages hide it) and one block
   * barrier.  Optional in a target file: QIR_LOAD_LATENCY_CYCLES and
   * QIR_BARRIER_CYCLES without a base. */
  double load_latency_cycles, barrier_cycles;
  /* Hopper's warpgroup MMA (wgmma m64nNk16, sm_90a): the largest N, 0 = none.
   * Where it exists, the matrix peaks are wgmma's and mma.sync reaches
   * mma_sync_share of them (0 in a target file: 1).  wgmma_load_bytes_per_clk:
   * what its producer warpgroups' ordinary loads move into the swizzled stages
   * per SM and clock (operands no tensor map can copy; 0 in a target file:
   * QIR_WGMMA_LOAD_BYTES_PER_CLK). */
  int wgmma_n_max;
  double mma_sync_share;
  double wgmma_load_bytes_per_clk;
} qir_target;

#define QIR_WGMMA_LOAD_BYTES_PER_CLK 3.0   /* h100, h200, and a target file's default (target.c says why) */
#define QIR_LOAD_LATENCY_CYCLES 500.0
#define QIR_BARRIER_CYCLES 30.0

#define QIR_TARGET_DEFAULT "h100"

/* A built-in model by name (case-sensitive), or NULL. */
const qir_target *qir_target_get(const char *name);
/* The built-in models, for listings: i in [0, qir_target_count()). */
int qir_target_count(void);
const qir_target *qir_target_at(int i);

/* Reads a model from `key = value` lines ('#' starts a comment).  Keys are
 * those qir_target_print writes, plus `base = NAME` (first) to start from a
 * built-in.  Without a base every key except the peaks and mma_* is required.
 * Sizes accept the suffixes KiB, MiB, GiB.  Errors are located
 * (FILE:LINE:COL) and reported into d; returns false on any error. */
bool qir_target_parse(const char *text, size_t len, const char *file, qir_target *out,
                      qir_diag *d);
bool qir_target_parse_file(const char *path, qir_target *out, qir_diag *d);
/* Writes t in the file format (parse(print(t)) == t). */
void qir_target_print(FILE *out, const qir_target *t);

/* GFLOP/s for arithmetic on `dt` (on matrix units when `matrix`); 0 when the
 * target has no such unit.  Integer and f64 types map to their rows; types
 * without a row fall back to the f32 vector rate. */
double qir_target_peak(const qir_target *t, qir_dtype dt, bool matrix);

/* ---------------------------------------------------------- device plans
 * Where a `loop` or `if` runs, written by qopt -grinder (or by hand) as
 *   #device{level = grid, target = "h100", grid = 132, threads = 256, stages = 3}
 * level host: the host drives it (trip count and condition read back, the
 * body's kernels launched per iteration), as without #device; grid: one
 * persistent cooperative kernel of `grid` co-resident blocks of `threads`
 * threads runs the whole loop, with a grid-wide barrier between the body's
 * `stages`; block: one block runs it, with __syncthreads between stages.
 * device.c reads and checks it (the verifier's rules are listed there). */
typedef enum { QIR_LEVEL_HOST, QIR_LEVEL_GRID, QIR_LEVEL_BLOCK } qir_level;

typedef struct {
  bool present;                 /* the op has #device */
  qir_level level;
  const qir_target *target;     /* grid, block */
  int64_t grid, threads, stages;
} qir_device_plan;

const char *qir_level_name(qir_level l);    /* "host", "grid", "block" */
/* Blocks of `threads` threads the target keeps resident at once, all units
 * together: the most a cooperative (grid-barrier) launch may use. */
int64_t qir_target_coresident_blocks(const qir_target *t, int64_t threads);
/* Reads op's #device into *out (level host when absent).  A malformed plan is
 * reported into d (located at the attribute) and gives false. */
bool qir_device_plan_get(const qir_op *op, qir_device_plan *out, qir_diag *d);
/* The verifier's checks of op's plan inside an enclosing plan (outer: the
 * nearest enclosing loop/if's plan, NULL at the top level).  Reports into d. */
void qir_device_plan_check(const qir_op *op, const qir_device_plan *outer, qir_diag *d);

#endif /* QIR_TARGET_H */
