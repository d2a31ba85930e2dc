/* kast.h: the kernel AST of qcodegen, and everything the lowering, the three
 * printers and the host-code generator share.
 *
 * A kernel is a grid of blocks of threads (CUDA's model).  Its body is a tree of
 * statements over scalar expressions.  Barriers and warp reductions may only
 * appear at the top level of the body or inside block-uniform loops (`uniform`:
 * bounds that do not depend on the thread), so a printer without threads (C)
 * can run the body as phases: each barrier-free stretch becomes a loop over the
 * block's threads.  Values that live across a barrier are KV_THREAD variables
 * (registers on a GPU, an array indexed by thread in C); block-uniform values
 * (uniform loop counters, block coordinates) are KV_BLOCK.
 *
 * The same AST carries a Welder group (several stores, shared buffers between
 * stages), an rProgram (block-uniform task loops per wave) or, on CUDA/HIP, a
 * device loop (grid-uniform loops and ifs around task loops, grid barriers
 * between them): those are statements of this tree, not new kernel kinds.
 */
#ifndef QCODEGEN_KAST_H
#define QCODEGEN_KAST_H

#include "qir.h"

/* Scalar types of expressions (compute types: f16/bf16 compute in f32, narrow
 * integers in 32 bits, bool as int). */
typedef enum { KT_BOOL, KT_I32, KT_U32, KT_I64, KT_U64, KT_F32, KT_F64 } ktype;

const char *ktype_c(ktype t);                 /* "float", "int64_t", ... */
const char *ktype_suffix(ktype t);            /* helper-function suffix: f, d, i, l, ... */
ktype ktype_of_dtype(qir_dtype dt);           /* compute type of a storage type */
bool ktype_is_float(ktype t);
const char *kdtype_c(qir_dtype dt);           /* storage C type: uint16_t for f16, ... */

typedef enum {
  KV_LOCAL,                     /* per thread, within one phase */
  KV_THREAD,                    /* per thread, survives barriers (registers) */
  KV_SHARED,                    /* per block (shared memory / LDS) */
  KV_BLOCK,                     /* block-uniform scalar */
  KV_FRAG,                      /* matrix-unit fragments of a warp (size = fragment count) */
} kvar_space;

/* Matrix-unit (tensor core / MFMA) fragments: Q_MMA x Q_MMA x Q_MMA, operands
 * of 16-bit floats, f32 accumulators.  Every target of qir/target.c has this shape. */
#define Q_MMA 16
typedef enum { KF_A, KF_B, KF_ACC } kfrag_role;

typedef struct kvar {
  const char *name;
  ktype type;
  int64_t size;                 /* 0: scalar, else array elements */
  kvar_space space;
  qir_dtype raw;                /* KV_SHARED: QIR_F16/QIR_BF16 = holds raw 16-bit values, else 0 */
  kfrag_role frag;              /* KV_FRAG: which operand */
  qir_dtype frag_dtype;         /* KV_FRAG A/B: QIR_F16 or QIR_BF16 */
  bool col_major;               /* KV_FRAG A/B: layout of the shared tile it loads from */
  int64_t carve;                /* KV_SHARED in an rprogram's kernel: 1 + its byte offset in the
                                 * buffer every task carves its own tiles from; 0: none */
  signed char assigned;         /* assigned after its declaration: 1 yes, -1 no (kkernel_prune
                                 * marks its kernel's once), 0 not known (the printer looks) */
} kvar;

/* A kernel parameter: a global tensor. */
typedef struct {
  const char *name;
  qir_dtype dtype;
  int64_t numel;
  bool written;
  bool aliased;                 /* its bytes overlap another parameter's in the same launch
                                 * (a view, or arena memory reused within one rprogram):
                                 * no restrict, and on a GPU no read-only path */
  bool nc;                      /* GPU: read through const __restrict__ (the non-coherent
                                 * path): nothing may write these bytes during the launch */
} kparam;

typedef enum {
  KE_INT, KE_FLOAT,
  KE_VAR,                       /* scalar variable */
  KE_ELEM,                      /* var[a]: register or shared array element */
  KE_LOAD,                      /* param[a], converted to the compute type */
  KE_TID, KE_BID,               /* thread index in block, block index (flat) */
  KE_WARP,                      /* warp index in block (in matrix-unit statements only) */
  KE_UNARY, KE_BINARY,          /* fn from qir_expr_fn */
  KE_SELECT,                    /* a ? b : c */
  KE_CAST,                      /* to .type */
  KE_ALIGNED16,                 /* tensor parameter `param` starts at a 16-byte boundary (bool) */
  KE_TF32,                      /* f32 `a` rounded to TF32 as cvt.rna.tf32.f32 does (10 mantissa bits,
                                 * ties away from zero), its bits as KT_U32 (q_tf32) */
  KE_PACK16,                    /* f32 `a` and `b` rounded to `dtype` (QIR_F16 or QIR_BF16, to nearest even),
                                 * packed as KT_U32 with `a` in the low half: a 16-bit register pair of
                                 * mma.sync (cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32) */
} kexpr_kind;

typedef struct kexpr kexpr;
struct kexpr {
  kexpr_kind kind;
  ktype type;
  int64_t ival;
  double fval;
  kvar *var;
  int param;
  qir_expr_fn fn;
  qir_dtype dtype;              /* CAST: the exact target type (rounds to f16, wraps to i8, ...) */
  bool raw;                     /* LOAD: the stored bits, unconverted (16-bit types into raw shared tiles) */
  kexpr *a, *b, *c;
};

typedef enum {
  KS_SEQ,
  KS_FOR,                       /* for (var = lo; var < hi; var += step) body */
  KS_IF,                        /* if (cond) body else els */
  KS_DECL,                      /* declare var (KV_LOCAL/KV_BLOCK), = init if any */
  KS_ASSIGN,                    /* var = value, or var[index] = value */
  KS_STORE,                     /* param[index] = value (converted to storage) */
  KS_BARRIER,                   /* warp_only: the lanes of a warp (a full barrier in C) */
  KS_WARP_REDUCE,               /* var (KV_THREAD scalar) = reduction over aligned groups of `step`
                                 * lanes (0: the whole warp) */
  KS_COMMENT,
  /* Matrix-unit statements: collective over a warp, at block level only
   * (like barriers); offsets use KE_WARP, uniform counters and constants. */
  KS_MMA_FILL,                  /* var[index] = 0 (accumulator fragment) */
  KS_MMA_LOAD,                  /* var[index] = tile of shared `mem` at offset `lo`, leading dimension `step` */
  KS_MMA_SYNC,                  /* var[index] += fa[ia] * fb[ib] */
  KS_MMA_STORE,                 /* f32 shared `mem` at `lo`, row-major, leading dimension `step` = var[index] */
  /* Warp-level matrix instructions of sm_80 (lower_mma_pipe.c), collective like
   * the above; the fragments are per-lane registers: KV_THREAD arrays of u32
   * (two 16-bit values each) and f32, in the PTX ISA's lane layouts. */
  KS_LDMATRIX,                  /* ldmatrix: var[index + j] (u32), j < step (1, 2 or 4) = lane's part of 8x8
                                 * matrix j of raw shared `mem`; lane l gives, in `lo` (an element offset
                                 * computed from tid), row l % 8 of matrix l / 8; `trans`: transposed */
  KS_MMA16816,                  /* mma.sync.m16n8k16: var[index..index+3] (f32 C/D) += fa[ia..ia+3] (A, 16x16)
                                 * x fb[ib..ib+1] (B, 16x8), 16-bit operands of type `dtype`; dtype
                                 * QIR_F32: mma.sync.m16n8k8 .tf32 (A 16x8, B 8x8, one TF32 value per
                                 * register, as KE_TF32 gives them) */
  KS_VCOPY16,                   /* 16 bytes: raw shared var[index..] = cond ? param[lo..] : 0 (both
                                 * 16-byte aligned; one vector load and store on a GPU) */
  /* Asynchronous copies global -> shared (cp.async, sm_80+), per thread: a
   * copy lands at the KS_CP_WAIT that retires its group, not before. */
  KS_CP_ASYNC,                  /* `step` bytes (4, 8 or 16): shared var[index..] = cond ? param[lo..] : zeros (both
                                 * aligned to the size) */
  KS_CP_COMMIT,                 /* closes the thread's open group of copies */
  KS_CP_WAIT,                   /* waits until at most `step` of the thread's committed groups are in flight */
  KS_VSTORE,                    /* 16 bytes: param[index .. index+step) = local array var[0 .. step), converted
                                 * (f32, f16, bf16 tensors; index a multiple of step, the tensor 16-byte aligned) */
  /* rProgram synchronisation through the u64 tensor `param` (element 0: the
   * launch's generation; then barrier counters, then one flag per task);
   * block level, once per block (lower_rprogram.c). */
  KS_GRID_SYNC,                 /* every block: arrive at counter `index`, wait for `step` blocks */
  KS_FLAG_WAIT,                 /* wait until flags [lo, hi) hold this launch's generation (acquire);
                                 * C check: `text` lists the blocks (of kernel `step`) that ran them */
  KS_FLAG_SET,                  /* flag `index` = this launch's generation (release) */
  /* Device loops (lower_device_loop.c), GPU kernels only: C runs a device
   * loop as its phases, one launch each. */
  KS_GRID_BARRIER,              /* every thread of the grid (cooperative_groups grid sync) */
  KS_BREAK,                     /* leaves the innermost loop (a grid-uniform early exit) */
  /* Hopper (lower_wgmma.c, print_sm90.c; C: the emulation of runtime/
   * mbarrier.h, tma.h, wgmma.h).  mbarriers are elements of a shared u64
   * array `var`; C keeps their state beside it (q_mbar_block). */
  KS_MBAR_INIT,                 /* mbarrier var[index] expects `step` arrivals per phase (one thread) */
  KS_MBAR_FENCE_INIT,           /* fence.mbarrier_init: the inits visible before the barrier after it */
  KS_MBAR_ARRIVE,               /* arrive on var[index]; step > 0: arrive.expect_tx of `step` bytes */
  KS_MBAR_WAIT,                 /* wait until the phase of var[index] with parity `value` completed */
  KS_TMA_LOAD,                  /* cp.async.bulk.tensor: the box of tensor map `step` (k->tmaps) at
                                 * coord[] into shared var[index ..], completing on mbarrier mem[ia] */
  KS_FENCE_PROXY_ASYNC,         /* fence.proxy.async.shared::cta: this thread's shared stores
                                 * visible to the async proxy (TMA, wgmma) */
  /* collectives of warpgroups wg->wg_first .. + wg_count (4 warps each) */
  KS_WGMMA,                     /* wgmma.mma_async m64nNk16: var[index ..] (f32 accumulators, N/2 per
                                 * thread) += A (shared mem[ia ..], descriptor wg->a; wg->a_regs: the
                                 * thread's u32 registers mem[ia .. ia + 3]) x B (shared fb[ib ..],
                                 * descriptor wg->b) */
  KS_WGMMA_FENCE,               /* wgmma.fence: accumulator registers ready for the next wgmma (GPU: var,
                                 * mem: registers just written, fenced as operands first) */
  KS_WGMMA_COMMIT,              /* closes the warpgroup's open group of wgmma */
  KS_WGMMA_WAIT,                /* waits until at most `step` of its committed groups are in flight */
  KS_SETMAXNREG,                /* GPU: setmaxnreg.inc (value non-NULL) or .dec to `step` registers
                                 * (the warpgroup's role branch; nothing in C) */
} kstmt_kind;

/* The shared-memory layout a wgmma descriptor states (PTX ISA "matrix
 * descriptor"): byte offsets between core-matrix groups and the swizzle. */
typedef struct {
  bool mn_major;                /* the tile's contiguous dimension is M (A) or N (B): imm-trans 1 */
  int64_t lbo, sbo;             /* leading / stride dimension byte offsets */
  int swizzle;                  /* bytes: 128, 64, 32, or 0 (interleaved) */
} kwgmma_desc;

typedef struct {
  int n;                        /* N of m64nNk16 */
  qir_dtype dtype;              /* QIR_F16 or QIR_BF16 */
  kwgmma_desc a, b;
  bool a_regs;                  /* A from registers (mma.m16n8k16's A fragment per warp of 16 rows); a unused */
  int wg_first, wg_count;       /* the warpgroups that run it */
  bool in_role;                 /* GPU: inside its warpgroups' role branch (no guard of its own) */
} kwgmma;

/* A TMA tensor map of a kernel (cuTensorMapEncodeTiled on the host): the
 * tensor of parameter `param` seen as `rank` dimensions, innermost first. */
#define KTMAP_MAX_RANK 5
typedef struct {
  int param;
  int rank;
  int64_t dims[KTMAP_MAX_RANK];
  int64_t strides[KTMAP_MAX_RANK];   /* bytes between consecutive indices of each dimension ([0]: element) */
  int64_t box[KTMAP_MAX_RANK];       /* elements traversed: those copied times estride */
  int64_t estride[KTMAP_MAX_RANK];   /* traversal stride (1: every element; [0] always 1) */
  int swizzle;                       /* bytes: 128, 64, 32 or 0 */
} ktmap;

typedef struct kstmt kstmt;
struct kstmt {
  kstmt_kind kind;
  kvar *var;
  kexpr *init, *lo, *hi, *cond, *index, *value;
  int64_t step;
  bool unroll;                  /* FOR: fully unroll (constant trip count) */
  bool uniform;                 /* FOR: same bounds in every thread of the block */
  int param;
  kstmt *body, *els;
  kstmt **items;                /* SEQ */
  int n_items, cap_items;
  qir_expr_fn red_fn;           /* WARP_REDUCE: ADD, MAX, MIN, MUL */
  const char *text;             /* COMMENT */
  bool warp_only;               /* BARRIER */
  kvar *mem, *fa, *fb;          /* MMA: shared tile; operand fragments of SYNC */
  kexpr *ia, *ib;               /* MMA_SYNC, MMA16816: operand fragment indices */
  bool trans;                   /* LDMATRIX: .trans */
  qir_dtype dtype;              /* MMA16816: QIR_F16 or QIR_BF16; QIR_F32: m16n8k8 .tf32 */
  kexpr *coord[KTMAP_MAX_RANK]; /* TMA_LOAD: the box's first element, innermost dimension first */
  const kwgmma *wg;             /* WGMMA*: the instruction and its warpgroups; IF: a role branch
                                 * (GPU: cond is warpgroup-uniform, read through a shuffle) */
  int active_warps;             /* a warp collective (ks_is_mma) of an rprogram's member with fewer
                                 * threads than the program's block: run by warps 0 .. active_warps-1
                                 * only (0: every warp) */
};

typedef struct {
  const char *name;
  const char *summary;          /* one line: op, plan, shapes (printed as a comment) */
  int n_params;
  kparam *params;
  qir_value **args;             /* the tensor bound to each parameter */
  int64_t grid;                 /* blocks */
  int threads;                  /* threads per block */
  int warp;                     /* lanes per warp/wavefront the body assumes */
  int n_vars;
  kvar **vars;                  /* KV_THREAD and KV_SHARED variables of the kernel */
  kstmt *lets;                  /* SEQ of per-thread KS_DECLs from tid/bid, re-evaluated per phase in C */
  kstmt *body;                  /* SEQ */
  int64_t smem_bytes;
  int id;                       /* its index among the module's kernels */
  qir_loc loc;                  /* the op it came from, for the checker's reports */
  const char *op_text;          /* that op, as "%y = conv" */
  bool unordered_launch;        /* planted bug: not ordered after the kernels before it */
  bool carved_smem;             /* its shared variables overlap in one dynamic buffer (kvar.carve) */
  bool unprinted;               /* no code path launches it (C: a kernel its rprogram's waves run) */
  int min_blocks;               /* CUDA: blocks per SM the registers must allow (__launch_bounds__); 0: any */
  int chk_kernel;               /* C check: an rprogram's wave reports as kernel chk_kernel, */
  long chk_block0;              /* block chk_block0 + bid (a vEU in a wave), when chk_group */
  bool chk_group;
  struct cg_check *chk;         /* C: print it instrumented (qcodegen -check) */
  bool cooperative;             /* GPU: launched cooperatively (grid barriers inside) */
  /* A run's blocks (modules with dimension symbols): where the output's axis 0
   * is symbolic (rows) and the blocks walk it slowest, the host launches
   * min(grid, ceil(rows at run time * rows_num / rows_den) * rows_mul) blocks;
   * the rest would only compute rows past the run's extent.  C takes the count
   * as a last parameter q_grid. */
  const qir_dim *rows;
  int64_t rows_num, rows_den, rows_mul;
  /* Its blocks as tiles of its output (kkernel_tile_grid): block index =
   * row-major over tile_nb[0..tile_axes-1]; tile i spans tile_block[i]
   * indices of output axis tile_axis[i].  Where an axis is symbolic, a block
   * whose tile starts past the run's extent skips its body (cg_lower_compute). */
  int tile_axes;
  int tile_axis[8];
  int64_t tile_nb[8], tile_block[8];
  /* Where a tile axis is symbolic: launched on its own (not as an rprogram's
   * task), the kernel gets only the run's tiles, not the bound's with most
   * skipping (an empty block still costs the scheduler).  The host launches
   * their count (run_tiles_c in host.c), and the kernel
   * numbers its block as the bound's grid would: q_vb = bid_remap over the raw
   * block index, which KE_BID then prints as.  A raw index past the run's count
   * maps to the bound's grid, a block that skips its tile. */
  const kexpr *bid_remap;
  const char *grid_text;        /* the host, for one launch: the block count as C */
  bool coherent;                /* GPU: tensors without const/__restrict__ (one kernel writes and
                                 * later reads them, maybe through two names) */
  bool chk_cover;               /* C check, with chk_group: its launch writes whole tensors */
  bool rp_sync;                 /* an rprogram's kernel: its last parameter is the sync tensor,
                                 * whose [0] counts finished launches (q_gen = [0] + 1 in this one) */
  const char *coop_fallback;    /* GPU, cooperative: the host flag a launch sets, instead of
                                 * failing, when the device cannot hold the grid at once */
  bool grid_phase;              /* C: a phase of a device loop, after a grid barrier */
  ktype index_type;             /* KT_I32, or KT_I64: it touches a tensor of KINDEX64_NUMEL elements or more */
  int n_tmaps;                  /* TMA tensor maps (GPU: __grid_constant__ parameters after the tensors) */
  ktmap *tmaps;
  bool sm90a;                   /* CUDA: needs compute_90a (wgmma, setmaxnreg) */
  int n_mbars;                  /* mbarriers (C: the emulation's per-block state) */
  kstmt *gpu_body;              /* CUDA: the body as warpgroup roles (lower_wgmma.c), NULL: body.
                                 * body runs the same statements interleaved, which C runs */
  /* lower_wgmma.c, in body: the step whose stage iteration t releases (t - 1), whether it has
   * one (t > 0), and t; plant.c's wgmma-early-release rewrites the first two */
  kexpr *wg_release_step, *wg_release_started, *wg_step;
} kkernel;

/* ---- index arithmetic
 * A kernel indexes with 32-bit integers unless it touches (reads or writes)
 * a tensor of KINDEX64_NUMEL elements or more, or walks a reduction that
 * long: then every variable and expression that holds a global coordinate, a
 * flat element number or a reduction position is 64-bit (KT_I64), as is the
 * block index it starts from.  The threshold leaves a factor of two below
 * 2^31 for what index arithmetic passes through beyond the last element
 * (rounded-up grids and tiles, padded windows, a loop counter's last step).
 * Counters inside one block's tile (shared-memory offsets, register slots,
 * fragments) stay 32-bit: a tile spans at most QIR_TILE_MAX elements. */
#define KINDEX64_NUMEL ((int64_t)1 << 30)

/* ---- construction (all memory from the module's arena) */
typedef struct {
  qir_module *m;
  int counter;                  /* for fresh names */
  ktype index_type;             /* index arithmetic of the kernel being lowered: KT_I32 or KT_I64
                                 * (set by kkernel_choose_index, reset by kkernel_new) */
} kbuilder;

/* A variable named STEM followed by a fresh number.  STEM must not be "p": the
 * persistent (rprogram) and device-loop kernels name their parameters p0, p1, ...,
 * and a local p3 would hide parameter p3 (a compile error nvcc found on the device
 * in BERT-base's embedding row group). */
kvar *kvar_new(kbuilder *b, kkernel *k, const char *stem, ktype t, int64_t size, kvar_space sp);
kvar *kvar_new_raw_shared(kbuilder *b, kkernel *k, const char *stem, qir_dtype dt, int64_t size);
kvar *kvar_new_frag(kbuilder *b, kkernel *k, const char *stem, kfrag_role role, qir_dtype dt, bool col_major, int64_t count);
int64_t kvar_bytes(const kvar *v);            /* shared-memory bytes of a KV_SHARED variable */
const char *kvar_elem_c(const kvar *v);       /* C type of its elements: uint16_t for raw tiles */
kexpr *ke_int(kbuilder *b, int64_t v);
kexpr *ke_long(kbuilder *b, int64_t v);          /* i64-typed literal */
kexpr *ke_float(kbuilder *b, double v, ktype t);
kexpr *ke_var(kbuilder *b, kvar *v);
kexpr *ke_elem(kbuilder *b, kvar *v, kexpr *index);
kexpr *ke_load(kbuilder *b, kkernel *k, int param, kexpr *index);
kexpr *ke_load_raw(kbuilder *b, int param, kexpr *index);  /* 16-bit bits, as KT_U32 */
kexpr *ke_warp(kbuilder *b);
kexpr *ke_tid(kbuilder *b);
kexpr *ke_bid(kbuilder *b);                      /* the block index, in b->index_type */
kexpr *ke_un(kbuilder *b, qir_expr_fn fn, kexpr *a, ktype t);
kexpr *ke_bin(kbuilder *b, qir_expr_fn fn, kexpr *a, kexpr *c, ktype t);
kexpr *ke_select(kbuilder *b, kexpr *cond, kexpr *a, kexpr *c, ktype t);
kexpr *ke_cast(kbuilder *b, kexpr *a, ktype t);
kexpr *ke_cast_dtype(kbuilder *b, kexpr *a, qir_dtype dt);  /* value rounded/wrapped to dt */
/* Index arithmetic with constant folding (int32 unless an operand is i64). */
kexpr *ke_add(kbuilder *b, kexpr *a, kexpr *c);
kexpr *ke_sub(kbuilder *b, kexpr *a, kexpr *c);
kexpr *ke_mul(kbuilder *b, kexpr *a, kexpr *c);
kexpr *ke_div(kbuilder *b, kexpr *a, kexpr *c);
kexpr *ke_mod(kbuilder *b, kexpr *a, kexpr *c);
kexpr *ke_min(kbuilder *b, kexpr *a, kexpr *c);
kexpr *ke_max(kbuilder *b, kexpr *a, kexpr *c);
kexpr *ke_pick(kbuilder *b, kexpr *cond, kexpr *a, kexpr *c);   /* cond ? a : c, an index */
kexpr *ke_lt(kbuilder *b, kexpr *a, kexpr *c);
kexpr *ke_and(kbuilder *b, kexpr *a, kexpr *c);    /* NULL operands mean true */
bool ke_is_int(const kexpr *e, int64_t v);

kstmt *ks_seq(kbuilder *b);
void ks_add(kbuilder *b, kstmt *seq, kstmt *s);
/* Appends s to seq, the items of a sequence one by one (recursively): the C
 * printer finds barriers and uniform loops only among a body's own items. */
void ks_add_flat(kbuilder *b, kstmt *seq, kstmt *s);
kstmt *ks_for(kbuilder *b, kvar *v, kexpr *lo, kexpr *hi, int64_t step, kstmt *body);
kstmt *ks_if(kbuilder *b, kexpr *cond, kstmt *then, kstmt *els);
kstmt *ks_decl(kbuilder *b, kvar *v, kexpr *init);
kstmt *ks_assign(kbuilder *b, kvar *v, kexpr *index, kexpr *value);
kstmt *ks_store(kbuilder *b, int param, kexpr *index, kexpr *value);
kstmt *ks_barrier(kbuilder *b);
kstmt *ks_warp_reduce(kbuilder *b, kvar *v, qir_expr_fn fn, int width);  /* width 0: the warp */
kstmt *ks_warp_barrier(kbuilder *b);
kstmt *ks_mma_fill(kbuilder *b, kvar *acc, kexpr *index);
kstmt *ks_mma_load(kbuilder *b, kvar *frag, kexpr *index, kvar *mem, kexpr *offset, int64_t ld);
kstmt *ks_mma_sync(kbuilder *b, kvar *acc, kexpr *index, kvar *fa, kexpr *ia, kvar *fb, kexpr *ib);
kstmt *ks_mma_store(kbuilder *b, kvar *mem, kexpr *offset, int64_t ld, kvar *acc, kexpr *index);
kstmt *ks_vcopy16(kbuilder *b, kvar *mem, kexpr *index, int param, kexpr *src, kexpr *cond);
kexpr *ke_aligned16(kbuilder *b, int param);
kexpr *ke_tf32(kbuilder *b, kexpr *f32);         /* cvt.rna.tf32.f32: the TF32 bits (KT_U32) */
kexpr *ke_pack16(kbuilder *b, kexpr *lo, kexpr *hi, qir_dtype dt);   /* KE_PACK16 */
kstmt *ks_ldmatrix(kbuilder *b, kvar *regs, kexpr *index, int count, bool trans, kvar *mem, kexpr *lane_offset);
kstmt *ks_mma16816(kbuilder *b, kvar *acc, kexpr *index, kvar *fa, kexpr *ia, kvar *fb, kexpr *ib, qir_dtype dt);
kstmt *ks_cp_async(kbuilder *b, kvar *mem, kexpr *index, int param, kexpr *src, kexpr *cond);
/* The same for `bytes` 4, 8 or 16 (cp.async.ca; 16 is cp.async.cg); the statement's step. */
kstmt *ks_cp_async_n(kbuilder *b, kvar *mem, kexpr *index, int param, kexpr *src, kexpr *cond, int bytes);
kstmt *ks_cp_commit(kbuilder *b);
kstmt *ks_cp_wait(kbuilder *b, int pending);
kstmt *ks_vstore(kbuilder *b, int param, kexpr *index, kvar *values, int count);
/* Hopper statements (KS_MBAR_* .. KS_WGMMA_WAIT above) */
kstmt *ks_mbar(kbuilder *b, kstmt_kind kind, kvar *bars, kexpr *index, int64_t step, kexpr *parity);
kstmt *ks_tma_load(kbuilder *b, int tmap, kvar *dst, kexpr *index, kvar *bars, kexpr *bar, kexpr *const *coord, int rank);
kstmt *ks_wgmma(kbuilder *b, kstmt_kind kind, const kwgmma *wg, kvar *acc, kexpr *index, kvar *sa, kexpr *ia, kvar *sb, kexpr *ib,
                int64_t step);
bool ks_is_wgmma(const kstmt *s);             /* a collective of warpgroups (KS_WGMMA .. KS_WGMMA_WAIT) */
bool ks_is_mma(const kstmt *s);               /* a matrix-unit statement (collective over a warp) */
bool ks_contains(const kstmt *s, kstmt_kind kind);
kstmt *ks_comment(kbuilder *b, const char *text);
bool ks_has_sync(const kstmt *s);             /* contains a barrier or warp reduction */
bool ks_uses_var(const kstmt *s, const kvar *v);
bool ks_uses_param(const kstmt *s, int param);  /* loads or stores tensor parameter `param` */
bool ke_uses_var(const kexpr *e, const kvar *v);

kkernel *kkernel_new(kbuilder *b, const char *name, int n_params);
void kkernel_prune(kkernel *k);               /* drops unread local declarations */
/* Once k's parameters are set: k->index_type (and b's) from their element
 * counts and `span`, the longest walk (a reduction) the kernel makes. */
void kkernel_choose_index(kbuilder *b, kkernel *k, int64_t span);
/* A 32-bit index expression of k that can leave int32's range (a bound of
 * its values over the launch, from the kernel's loops and declarations), or
 * NULL: the static check every lowered kernel passes.  *bound: that bound. */
const kexpr *kkernel_index_overflow(const kkernel *k, double *bound);

/* ---- lowering (lower.c) */
typedef enum { CG_C, CG_CUDA, CG_HIP } cg_backend;

/* A Welder group composed into one compute op (lower_group.c): the kernel's
 * name, and the epilogue applied to the accumulator before each store: an
 * expression over the output axes in which an access of operand acc_operand
 * (one past the compute's operands) is the accumulated value, rounded to
 * acc_dtype.  NULL epilogue: the compute's result is stored as it is. */
typedef struct cg_rows cg_rows;   /* lower.h: a group of row reductions */
typedef struct cg_stages cg_stages; /* lower.h: a group with values staged in shared memory */
typedef struct {
  const qir_op *op;             /* the composed compute op */
  const char *name;
  const qir_expr *epilogue;
  int acc_operand;
  qir_dtype acc_dtype;
  const cg_rows *rows;          /* a row group (softmax, norms): one warp per row */
  const cg_stages *stages;      /* a group of reductions chained through shared memory */
} cg_group;

typedef struct {
  qir_module *m;
  qir_diag *d;
  cg_backend backend;
  int warp;                     /* 32 (CUDA, C) or 64 (HIP) */
  kbuilder kb;
  int n_kernels, cap_kernels;
  kkernel **kernels;
  int n_groups, cap_groups;
  cg_group *groups;
  qir_value *run_dims;          /* modules with dimension symbols: the run's symbol values (q_dims) */
} cg_ctx;

/* Lowers one compute op (payload `comp`, operands `args`, result `out`) into a
 * kernel, realising its #tile plan (attribute `tile` of `plan_op`, may be NULL)
 * exactly.  Reports and returns NULL if the plan is invalid. */
kkernel *cg_lower_compute(cg_ctx *cg, const qir_op *plan_op, const qir_compute *comp, int n_args,
                          qir_value *const *args, qir_value *out, const char *what);
/* The checks and bookkeeping every lowered kernel k (computing `out`) ends
 * with: unused locals pruned, 32-bit indexes proven in range, the summary
 * prefixed by `what`, the kernel registered in cg.  NULL after an error. */
kkernel *cg_finish_kernel(cg_ctx *cg, kkernel *k, const qir_value *out, const qir_op *plan_op, const char *what,
                          qir_loc loc);
/* lower_attention.c: an `attention` op with a flash plan (#tile{flash = ..},
 * qir_attention_flash_planned) as one kernel; with splits = P > 1 in the
 * plan (flash-decoding), two: the first writes each split's partial result
 * into `partial` (f32 [P][B * Hkv][G * S][DV + 2]: O, max, sum per row), the
 * second (_combine) reduces them into the op's result. */
kkernel *cg_lower_attention(cg_ctx *cg, const qir_op *op, qir_value *partial);
kkernel *cg_lower_attention_combine(cg_ctx *cg, const qir_op *op, qir_value *partial);

/* ---- kernel groups (lower_group.c) */
/* Replaces every `kernel` op under r by one compute op (the composed group,
 * registered in cg->groups), or, when its ops do not compose into one kernel
 * yet, by its ops (with a warning).  False after reporting an error. */
bool cg_compose_groups(cg_ctx *cg, qir_region *r);
const cg_group *cg_group_of(const cg_ctx *cg, const qir_op *op);

/* ---- printers (print_c.c, print_cuda.c, print_hip.c) */
typedef struct cg_printer {
  cg_backend backend;
  void (*prelude)(FILE *o);                     /* includes, runtime macros, helpers */
  void (*kernel)(FILE *o, const kkernel *k);    /* the kernel definition */
  void (*launch)(FILE *o, const kkernel *k, const char *const *argv, const char *indent);
  /* qir_init: sets `flag` to 1 when `k->grid` blocks of k are co-resident on the device */
  void (*coresident)(FILE *o, const kkernel *k, const char *flag, const char *indent);
} cg_printer;

extern const cg_printer cg_printer_c, cg_printer_cuda, cg_printer_hip;

/* ---- the race, bounds and barrier checker (check.c): C back end, -check */
typedef struct cg_check cg_check;
cg_check *cg_check_new(qir_module *m, const char *file);
/* A new access site of kernel k, described by fmt (e.g. "read of shared `As3`"). */
int cg_check_site(cg_check *c, const kkernel *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same, for an access of shared array `mem` that reports name (cp.async hazards). */
int cg_check_shared_site(cg_check *c, const kkernel *k, const char *mem, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void cg_check_prelude(FILE *o);                   /* the runtime the checked program carries */
void cg_check_trailer(FILE *o, const cg_check *c); /* the site table and q_check_report() */

/* ---- planted bugs (plant.c): prove the checker fires; "KIND:N", see qcodegen --help */
bool cg_plant(cg_ctx *cg, const char *spec);

/* Shared by the printers: expression and device-helper text. */
typedef struct {
  cg_check *chk;                /* C: instrument every access (qcodegen -check) */
  bool c_threads;               /* C: KV_THREAD variables are indexed by tid */
  bool hip;
  bool bid_remap;               /* KE_BID prints as q_vb (kkernel.bid_remap) */
  int c_tid_split;              /* C: > 0: the thread loop is split as tid = ty * this + tx,
                                 * and tid % this prints as tx, tid / this as ty */
} kprint_style;
void kprint_expr(FILE *o, const kexpr *e, const kkernel *k, const kprint_style *st);
void kprint_stmt(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int indent);
void kprint_helpers(FILE *o);                 /* q_* scalar helpers, QDEV-qualified */
void kprint_var_decl(FILE *o, const kvar *v, const kkernel *k, const kprint_style *st, int indent);
const char *kprint_stack_align(const kprint_style *st);   /* "_Alignas(64) " in C, else "" */
void kprint_lets(FILE *o, const kkernel *k, const kstmt *uses, const kprint_style *st, int indent);
void kprint_gpu_kernel(FILE *o, const kkernel *k, bool hip);   /* print_cuda.c */
void kprint_coop_launch(FILE *o, const kkernel *k, const char *const *argv, const char *indent, const char *api, const char *too_large,
                        int64_t dyn);                           /* print_cuda.c, for HIP too */
void kprint_coop_args(FILE *o, const kkernel *k, const char *const *argv, const char *indent);   /* print_cuda.c */
void kprint_mma_stmt(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st);  /* one line, no indent */
/* print_sm80.c: cp.async, ldmatrix and mma.sync.m16n8k16 as inline PTX (GPU, any statement) or
 * as calls of the C emulation (per-thread statements); C runs the collectives once per warp. */
void kprint_sm80_stmt(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int indent);
void kprint_sm80_collective_c(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int indent);
void kprint_sm80_runtime(FILE *o);            /* C: the emulation (the files of runtime/) */
/* print_sm90.c: the Hopper statements as inline PTX (GPU) or calls of the C
 * emulation; C runs the warpgroup collectives once per warpgroup. */
void kprint_sm90_stmt(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int indent);
void kprint_sm90_collective_c(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int indent);
void kprint_sm90_runtime(FILE *o);
/* CUDA: the kernel's tensor-map parameters; the host's encoding of them before a launch */
void kprint_sm90_tmap_params(FILE *o, const kkernel *k);
void kprint_sm90_tmap_encode(FILE *o, const kkernel *k, const char *const *argv, const char *indent);
int64_t kkernel_dynamic_smem(const kkernel *k, int64_t static_limit);  /* bytes, 0 if static fits */
int64_t kvar_dynamic_offset(const kkernel *k, const kvar *v);         /* of a shared var in that buffer */

/* ---- rProgram (lower_rprogram.c): the persistent kernel of an rprogram op
 * whose packed kernels were lowered to `members` (one each).  `sync` is the
 * u64 tensor of its launch count, barrier counters and task flags
 * (lower_rprogram_sync_size elements).  CUDA/HIP: one kernel; C: one per wave
 * (waves as phases, flags checked).  Returns the count written to out (at
 * most n_waves), 0 with a reason in *why when it cannot be packed (the host
 * then launches the members). */
struct qir_rprogram;
/* The sync tensor's layout (lower_rprogram.c): launches finished, blocks
 * finished, then a counter per barrier and a flag per task. */
enum { RP_SYNC_DONE_LAUNCHES = 0, RP_SYNC_DONE_BLOCKS = 1, RP_SYNC_BARRIER0 = 2 };
int64_t lower_rprogram_sync_size(const struct qir_rprogram *p);
/* The host's storage decisions: the value whose memory v is (itself, or what
 * a view of it names). */
typedef struct {
  qir_value *(*root)(void *ctx, qir_value *v);
  void *ctx;
} cg_storage;
int lower_rprogram(cg_ctx *cg, const struct qir_rprogram *p, kkernel *const *members, qir_value *sync, const cg_storage *storage,
                   kkernel **out, const char **why);

/* lower_rprogram.c, shared with device loops: tasks [t0, t1) of mk on the
 * blocks [v0, v1] of a persistent kernel of `threads` threads (see there). */
kstmt *lower_run_tasks(kbuilder *b, const kkernel *mk, const int *pmap, int64_t v0, int64_t v1, int64_t t0, int64_t t1, int threads,
                       kstmt *lets, bool barrier, const char *what, kvar **task);
const char *lower_run_unfit(qir_module *m, const kkernel *mk, int threads, int warp);

/* ---- device loops (lower_device_loop.c): a loop/if with a #device plan of
 * level grid or block (qopt -grinder), run on the device as a program of
 * phases: each phase is a kernel whose blocks are spread over the plan's
 * blocks (grid-stride), a barrier after each; loops and ifs of it are
 * decided on the device from the `ctl` tensor (i64: [0] error code, [1] its
 * iteration, then per loop: iteration, trip count, condition).  CUDA/HIP:
 * one persistent kernel (cooperative launch, grid barriers; one block and
 * __syncthreads at level block); C: the phases launched by a driver that
 * reads ctl as every block does after a barrier. */
typedef enum { DN_SEQ, DN_PHASE, DN_LOOP, DN_IF } dl_node_kind;
typedef struct dl_node dl_node;
struct dl_node {
  dl_node_kind kind;
  kkernel *k;                   /* PHASE: its kernel (C: the phase's launch) */
  bool no_barrier;              /* PHASE: runs without a barrier after the phase before it */
  const qir_op *op;             /* LOOP, IF */
  int64_t slot;                 /* LOOP: its iteration, trip count, condition at ctl[slot..slot+2] */
  qir_value *cond;              /* IF: the condition */
  dl_node *body, *els;          /* LOOP: its iterations; IF: the branches */
  int n_items, cap_items;       /* SEQ */
  dl_node **items;
};
typedef struct cg_dloop {
  qir_op *op;                   /* the outermost device-level loop/if */
  int id;
  int64_t grid;                 /* blocks (1 at level block) */
  int threads;
  bool block_level;
  qir_value *ctl;               /* i64[ctl_size] */
  int64_t ctl_size;
  int n_loops;                  /* loops in it, with a temporary per carried value each */
  const qir_op **loops;
  qir_value ***tmp;
  int n_errors;                 /* error code 1 + i: errors[i] (%lld: the iteration) */
  const char **errors;
  int n_pre, n_post;            /* kernel ops next to op that run as its first and last phases */
  const qir_op **pre, **post;   /* (set by host.c before cg_dloop_build; one launch in all) */
  dl_node *root;
  kkernel *kernel;              /* CUDA/HIP: the persistent kernel */
  const char *why;              /* not realised (the host drives it): the reason */
} cg_dloop;
/* Before storage is assigned: the op's ctl tensor and temporaries, or NULL
 * when the op is host-level (or its plan unreadable). */
cg_dloop *cg_dloop_prepare(cg_ctx *cg, qir_op *op, int id);
/* After every op's kernels are lowered (kernels_of gives them): the phases
 * (C: a kernel each).  False with dl->why set when it
 * cannot be realised (the host then drives the op as without a plan). */
bool cg_dloop_build(cg_ctx *cg, cg_dloop *dl, kkernel **(*kernels_of)(void *ctx, const qir_op *op, int *n), void *ctx);
qir_value *cg_dloop_tmp(const cg_dloop *dl, const qir_op *loop, int i);
/* After memory is planned (the no_barrier marks set): CUDA/HIP build the
 * persistent kernel; C marks the phases without a barrier before them. */
void cg_dloop_finish(cg_ctx *cg, cg_dloop *dl);

/* ---- host code (host.c) */
typedef struct {
  bool main_program;
  bool embed_weights;
  bool check;                   /* C: the race, bounds and barrier checker */
  const char *plant;            /* a bug to plant (debug), or NULL */
  bool wavefront64;             /* C: lower for 64-lane warps, as for HIP (to check HIP's plans) */
} cg_options;
int cg_generate(qir_module *m, qir_diag *d, cg_backend be, const cg_options *opt, FILE *out);

#endif
