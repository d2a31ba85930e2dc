/* lower.h: what lower.c shares with lower_mma.c (internal to qcodegen's lowering). */
#ifndef QCODEGEN_LOWER_H
#define QCODEGEN_LOWER_H

#include "kast.h"

#define MAX_AXES 16
#define MAX_STAGED 8
#define SMEM_BUDGET (40 * 1024)        /* staging without a plan's own figure */
#define HIP_LDS_LIMIT (64 * 1024)      /* per workgroup on gfx90a / gfx942 */

typedef struct {
  int64_t block[MAX_AXES], thread[MAX_AXES], rstep[MAX_AXES];
  int64_t pad, vec;
  bool stage;
  int64_t smem_budget;          /* bytes of staged tiles: the plan's `smem`, else SMEM_BUDGET */
  int64_t rsplit;               /* lanes sharing each output's reduction (1: none) */
  int64_t min_reuse;            /* an operand is staged when at least this many points of the
                                 * block read each element (0: 2) */
  bool mma;                     /* matrix units: thread = warp tile, mma_axes below */
  bool mma_sync;                /* mma = [16, 8, 16]: the sm_80 main loop (lower_mma_pipe.c) */
  bool wgmma;                   /* mma = [64, N, 16]: Hopper's warpgroup loop (lower_wgmma.c) */
  bool tf32;                    /* mma_precision = "tf32": mma = [16, 8, 8], f32 operands rounded to
                                 * TF32, the same loop (requires mma_sync) */
  int stages;                   /* mma_sync: shared-memory stages of the cp.async pipeline; a SIMT
                                 * plan: its `stages` (0: none given, lower_tile_block chooses) */
  bool simt_pipe;               /* SIMT: the plan's target is a GPU: stage 2 steps in flight by default */
  bool simt_async;              /* SIMT: ... by cp.async (CUDA sm_80 and later, and C emulating it) */
  int64_t smem_cap;             /* SIMT: the most shared memory a block may use on the plan's target */
  int64_t lo_step[MAX_AXES];    /* SIMT: every block's first point along output axis d is a multiple of
                                 * lo_step[d] (0: of block[d]); a staged group's boxes start anywhere */
  int mma_m, mma_n, mma_k;      /* output axis of M, of N; reduction axis (0-based) of K */
  int64_t persistent;           /* wgmma: blocks launched, each computing every P-th tile (lower_wgmma.c); 0: a block a tile */
  int mma_m2;                   /* wgmma: an outer output axis of M (its block: rows of a band whose
                                 * block[M] is all of M, lower_wgmma.c), or -1 */
} tile_plan;

typedef struct {
  const qir_expr *access;
  kvar *smem;
  int rank;
  kexpr *origin[QIR_MAX_RANK];
  int64_t ext[QIR_MAX_RANK];     /* footprint per dimension */
  int64_t pdims[QIR_MAX_RANK];   /* shared-array dimensions: ext, last one padded */
  bool guard[QIR_MAX_RANK];      /* the index may leave [0, dim) somewhere: test it */
  int64_t coef[QIR_MAX_RANK][MAX_AXES], k0[QIR_MAX_RANK];   /* index j = k0 + coef . variables */
  int64_t stride[QIR_MAX_RANK];  /* shared-array element stride per dimension */
  /* Pipelined staging (lower_simt_pipe.c): `stages` slots of slot_elems
   * elements; the computing step reads slot `slot` (an element offset, NULL:
   * one slot).  run_dim >= 0: dimensions run_dim.. form one contiguous run
   * of run elements in global memory, copied 16 bytes at a time where the
   * tensor is aligned; each row of runs padded to run_pad elements. */
  int64_t slot_elems;
  kexpr *slot;
  int run_dim;
  int64_t run, run_pad;
} staged_access;

/* A value of a staged group (lower_stages) computed into shared memory: the
 * box of its elements one block needs, from origin (per block) over ext. */
typedef struct {
  kvar *smem;
  int rank;
  kexpr *origin[QIR_MAX_RANK];
  int64_t ext[QIR_MAX_RANK];
} stage_tile;

typedef struct {
  cg_ctx *cg;
  kbuilder *b;
  kkernel *k;
  const qir_compute *comp;
  qir_value *const *args;
  kexpr *vars[MAX_AXES];        /* index expression of each compute variable */
  kexpr **raw_vars;             /* unclamped ones, for staged (shared) tiles; NULL = vars */
  int n_staged;
  staged_access staged[MAX_STAGED];
  bool failed;
  qir_loc loc;
  const qir_expr *body;         /* what the reduction accumulates: the compute's body, less a bias */
  const qir_expr *bias;         /* term counted once (qir_compute_bias_term), or NULL */
  const cg_group *group;        /* a composed Welder group with an epilogue, or NULL */
  kexpr *acc_value;             /* while the epilogue is translated: the accumulated value */
  int marker_base, n_markers;   /* reads of operands marker_base.. are values of the kernel: */
  const qir_dtype *marker_dtypes;
  kexpr **marker_values;        /* row reductions and a staged row (lower_rows) */
  int tile_base, n_tiles;       /* reads of operands tile_base.. are staged tiles (lower_stages), */
  const stage_tile *tiles;      /* indexed relative to the tile's origin */
} lower_env;

/* A row group (lower_group.c): reductions over the same axes of the result
 * (`reduced`), each read by the later ones and the result at the row's point;
 * stage k's value is operand marker_base + k of their bodies, and the staged
 * row (a value the first stage reads, computed once into shared memory),
 * when there is one, operand marker_base + n_stages. */
struct cg_rows {
  int n_stages;
  const qir_compute **stages;   /* output axes as the result's (reduced ones of extent 1),
                                 * reduction variables = the reduced axes in order */
  const qir_dtype *dtypes;      /* per stage, then the staged row's */
  int marker_base;
  const qir_expr *staged;       /* over the result's axes, or NULL */
  const qir_compute *point;     /* a reduction the staged row reads at its own point (QK^T before a
                                 * softmax), computed per point while staging: operand
                                 * marker_base + n_stages + 1; its dtype follows the staged row's */
  bool reduced[QIR_MAX_RANK];
  const qir_compute *row;       /* with a tail: the row's result (the kernel's own form is the tail's,
                                 * a contraction over each row of it, read as marker_base +
                                 * n_stages + 2), else NULL */
  qir_dtype tail_dtype;
  int64_t point_unroll;         /* points of the row each lane computes in one walk of the
                                 * point reduction (1, 2 or 4; used when the row is a multiple
                                 * of warp x this) */
  int64_t kept_block[QIR_MAX_RANK]; /* a block's box of rows (the group's block over the kept axes,
                                 * 1 over the reduced ones; partial at the edges), a warp each:
                                 * they share a point reduction's operands through the unit's cache */
};
void lower_rows(lower_env *env, const cg_rows *rows);

/* A group whose reductions are chained through shared memory (a pooling or
 * LRN after a convolution): each staged value is a segment (its reduction,
 * the anchor, and an elementwise epilogue), computed over the box of its
 * elements the block's output tile needs (halo included) into shared memory,
 * one barrier after each; the last segment computes the block's outputs.
 * Segment s reads staged value t as operand tile_base + t. */
typedef struct {
  qir_compute *comp;            /* over the value's axes, the anchor's reduction axes */
  const qir_expr *epilogue;     /* over the value's axes reading acc_operand, or NULL */
  qir_dtype acc_dtype, dtype;   /* the anchor's and the value's element types */
  const qir_type *type;         /* the value's type */
  int64_t oconst[QIR_MAX_RANK];                /* the box's origin: oconst + ocoef . block start */
  int64_t ocoef[QIR_MAX_RANK][QIR_MAX_RANK];
  int64_t ext[QIR_MAX_RANK];
} cg_segment;
struct cg_stages {
  int n;                        /* segments in program order; the last is the group's result */
  cg_segment *seg;
  int acc_operand, tile_base;
  int64_t block[QIR_MAX_RANK];  /* the result's block tile */
  int threads;
  const qir_attr_val *plan;     /* the kernel op's #tile (its target), or NULL */
};
void lower_stages(lower_env *env, const cg_stages *st);

/* One block's tile of env->comp's reduction, realising plan p (block: the
 * tile, a whole number of thread tiles; thread; rstep; staging) as
 * lower_tiled does for a kernel, for lower_tiled and a staged group's
 * segments alike: each thread accumulates its register slots (base[d] +
 * slot * threads along d), the reduction stepped, each step's reused operands
 * staged cooperatively by all the kernel's threads (a barrier after the load
 * and after the step), then `store` per slot below every limit.  Computing
 * indices are clamped (min clamp_hi, then max clamp_lo; NULL: not) so that a
 * slot past the data reads inside it.  Statements go to seq; returns how many
 * operands were staged. */
typedef struct tile_block tile_block;
struct tile_block {
  const tile_plan *p;
  kexpr *lo[MAX_AXES];          /* the tile's first point per output axis (block-uniform) */
  kexpr *base[MAX_AXES];        /* the thread's first point (lo + its coordinate) */
  kexpr *limit[MAX_AXES];       /* slots at or past it are not stored (NULL: none) */
  kexpr *clamp_lo[MAX_AXES], *clamp_hi[MAX_AXES];
  double vlo[MAX_AXES], vhi[MAX_AXES];   /* each output variable's range over all blocks */
  kexpr *active;                /* the thread has slots (NULL: every thread) */
  kexpr *work;                  /* block-uniform: the tile needs computing at all (NULL: always);
                                 * else the slots keep the reduction's identity */
  ktype t;                      /* the accumulators' type */
  kstmt *(*store)(lower_env *env, const tile_block *tb, kexpr *const *idx, kexpr *value);
  const void *ctx;              /* the store's */
};
int lower_tile_block(lower_env *env, const tile_block *tb, kstmt *seq);
qir_expr_fn reduce_fn_of(qir_reduce_kind r);
kexpr *reduce_identity(kbuilder *b, qir_reduce_kind r, ktype t);
kexpr *reduce_combine(kbuilder *b, qir_reduce_kind r, kexpr *acc, kexpr *v, ktype t);

kexpr *tr(lower_env *env, const qir_expr *e);              /* a body expression, as kernel code */
kexpr *tr_as(lower_env *env, const qir_expr *e, ktype t);
kexpr *strides_linear(lower_env *env, kexpr *const *idx, const int64_t *dims, int rank);
int64_t ceil_div(int64_t a, int64_t b);
kvar *let(lower_env *env, const char *stem, kexpr *init);  /* a per-thread let of the kernel */
/* Decomposes `flat` (row-major over extents ext[0..n-1]) into coordinates. */
void decompose(lower_env *env, kexpr *flat, const int64_t *ext, int n, kexpr **out);
kexpr *out_index(lower_env *env, kexpr *const *idx);
/* What is stored at output point idx (the compute's output axes): v, or the
 * group's epilogue applied to v; t is the output's compute type. */
kexpr *stored_value(lower_env *env, kexpr *const *idx, kexpr *v, ktype t);

/* lower_simt_pipe.c: the SIMT main loop's staging pipeline (see there). */
/* Origin of dimension j of a staged tile for a block and step whose
 * variables start at lo (extents size), as plan_staging computes it. */
kexpr *staged_origin(lower_env *env, const staged_access *sa, int j, kexpr *const *lo, const int64_t *size);
/* Lays out each staged tile for `stages` slots (runs of 16-byte chunks where
 * the tensor's rows allow, conflict-free row strides) when the plan asks for
 * a pipeline and its shared memory allows it; returns the stages (1: the
 * staged tiles were laid out as one slot each, the loop is not pipelined). */
int simt_pipe_layout(lower_env *env, const tile_plan *p, const bool *lo_zero);
/* What a #tile dictionary's target allows a SIMT main loop: simt_pipe, simt_async, smem_cap. */
void simt_target_of(lower_env *env, const qir_attr_val *dict, tile_plan *p);
/* The copies of every staged tile for the step whose variables start at lo
 * into slot `slot` (0 .. stages-1): cp.async (16 or 4 bytes) when the plan
 * is async, else loads and shared stores.  work: block-uniform guard or NULL. */
kstmt *simt_issue_step(lower_env *env, const tile_plan *p, kexpr *const *lo, const int64_t *size, kexpr *slot, kexpr *work);

/* lower_mma.c: a contraction on the matrix units from a #tile plan with `mma`. */
void lower_mma(lower_env *env, const tile_plan *p);
/* One operand of a matrix-unit contraction and its shared tile (lower_mma.c). */
typedef struct {
  const qir_expr *access;
  const qir_expr *mask;         /* padding condition on the variables, or NULL */
  qir_dtype dtype;
  int row_var, col_var;         /* compute variables along the tile's rows / columns (A: M, K; B: K, N) */
  int64_t rows, cols;           /* tile extent */
  int64_t row_ext, col_ext;     /* the variables' full extents (guards) */
  bool col_major;               /* stored [cols][rows] */
  int64_t ld;                   /* padded inner extent of the stored tile */
  kvar *smem;
} mma_operand;
/* Finds A (M x K) and B (K x N) in the body, and the bias term; reports and
 * returns false when the body is not such a contraction. */
bool mma_analyse(lower_env *env, const tile_plan *p, mma_operand *A, mma_operand *B, const qir_expr **bias);
/* Does e mention compute variable `var`? */
bool mma_mentions(const qir_expr *e, int var);
/* The global element of op at tile position (row0 + r, col0 + c): declares
 * its coordinates in `body`, points op's variables in env->vars at them, and
 * gives the flat index; *inb: inside the tensor and the padding mask. */
kexpr *mma_operand_source(lower_env *env, const mma_operand *op, kstmt *body, kexpr *row0, kexpr *col0, kexpr *r, kexpr *c,
                          kexpr **inb);
/* Blocks of an mma plan (nb: per output axis) and its warps (wpa: per output
 * axis, *warps in all). */
int64_t mma_grid(const lower_env *env, const tile_plan *p, int64_t *nb, int64_t *wpa, int64_t *warps);
/* "WHAT: block [..] warp tile [..]" into buf: the start of an mma kernel's
 * summary; returns its length. */
int mma_summary_tiles(char *buf, size_t size, const char *what, int n, const tile_plan *p);
/* What an mma kernel stores at output point oidx for accumulated value v:
 * plus the bias term (once per point), through the group's epilogue. */
kexpr *mma_final_value(lower_env *env, const qir_expr *bias, kexpr *const *oidx, kexpr *v);
/* The output point (row gm along M, column gn along N, blo, the block's origin,
 * on every other axis) into oidx; returns its guard (NULL: the blocks tile the
 * extents). */
kexpr *mma_output_point(lower_env *env, const tile_plan *p, kexpr *const *blo, kexpr *gm, kexpr *gn, kexpr **oidx);
/* Values per 16-byte store of the output (8 halves or 4 floats), or 0 where it
 * cannot take them: its innermost axis must be N, whole vectors long. */
int mma_vector_width(lower_env *env, const tile_plan *p);
/* vw outputs from (gm, gn) along N: src[base + e] plus the bias, through the
 * epilogue, stored as one 16-byte vector (a tensor not 16-byte aligned at run
 * time: a value at a time).  The caller guards the point. */
kstmt *mma_store_vector(lower_env *env, const tile_plan *p, kexpr *const *blo, const qir_expr *bias, kexpr *gm, kexpr *gn,
                        kvar *src, kexpr *base, int vw);
/* A loop of hi / step block-uniform trips (the matrix-unit loops: counters the
 * same in every thread; unroll: constant register indices). */
kstmt *mma_uniform_loop(kbuilder *b, kvar *v, int64_t hi, int64_t step, kstmt *body, bool unroll);
/* The reduction as one flat sequence of steps (the other reduction axes
 * outermost, count[a] steps each; K, axis ka, innermost in steps of rstep):
 * points env->vars at step `step`'s other reduction coordinates and returns
 * its K offset (in the kernel's index type). */
kexpr *mma_step_origin(lower_env *env, int ka, const int64_t *count, int64_t rstep, kexpr *step);
/* Whether the operand's tile rows can be copied 16 bytes at a time. */
bool mma_vector_loads_fit(lower_env *env, const mma_operand *op);
/* lower_mma_pipe.c: the sm_80 main loop (ldmatrix, mma.sync.m16n8k16, a
 * cp.async pipeline of p->stages shared tiles) for plans with mma = [16, 8, 16];
 * with p->tf32 (mma = [16, 8, 8]) f32 tiles and mma.sync.m16n8k8 .tf32. */
void lower_mma_pipe(lower_env *env, const tile_plan *p);
/* lower_wgmma.c: Hopper's main loop for plans with mma = [64, N, 16]: TMA
 * copies into a ring of stages on mbarriers, a producer warpgroup and
 * consumer warpgroups issuing wgmma (see there). */
void lower_wgmma(lower_env *env, const tile_plan *p);
/* How a tile is laid out in its shared slots: stored [outer][inner] with
 * inner contiguous, its 16-byte chunks XOR-swizzled so that the eight rows
 * one ldmatrix phase reads fall in eight distinct bank groups: chunk c of
 * row o lives at chunk c ^ ((o / rows_per_line) % xor_span). */
typedef struct {
  const mma_operand *op;        /* the operand it stages, or NULL */
  int64_t outer, inner;         /* stored [outer][inner]; inner is contiguous in memory */
  int64_t epc;                  /* elements per 16-byte chunk: 8 (16-bit), 4 (f32, tf32 plans) */
  int64_t chunks;               /* 16-byte chunks per row: inner / epc */
  int64_t xor_span;             /* chunks the swizzle permutes: a power of two dividing chunks, at most 8 */
  int64_t rows_per_line;        /* rows that share one 128-byte line of banks: 8 / xor_span */
  int64_t slot;                 /* elements per stage */
} pipe_tile;
#define WG_SMEM_MAX 232448      /* sm_90's dynamic shared memory per block (227 KiB): wgmma kernels' limit */
pipe_tile pipe_tile_make(int64_t outer, int64_t inner, int elem_bytes);
/* Element offset of (row o, inner position i) in stage `slot`, chunk = i / epc,
 * within = i % epc (0 for ldmatrix rows and 16-byte copies). */
kexpr *pipe_tile_at(kbuilder *b, const pipe_tile *t, kexpr *slot, kexpr *o, kexpr *chunk, kexpr *within);

/* Sets k->rows where k's output (parameter 0) has a symbolic axis 0 whose
 * blocks are the slowest: blocks = ceil(rows * num / den) * mul. */
void kkernel_rows(kkernel *k, int64_t num, int64_t den, int64_t mul);
/* Records k's blocks as tiles of its output: n tiles axes, tile i along
 * output axis axis[i] (NULL: axis i), nb[i] tiles of block[i] indices, the
 * block index row-major over them. */
void kkernel_tile_grid(kkernel *k, int n, const int *axis, const int64_t *nb, const int64_t *block);

#endif
