/* lower_mma_pipe.c: the sm_80 main loop of a contraction on the tensor cores,
 * from a #tile plan with mma = [16, 8, 16] (qopt -roller writes them for CUDA
 * targets).  The body is what lower_mma.c takes (mma_analyse): A (M x K)
 * times B (K x N), maybe a padding mask and a bias; the other output axes
 * are block coordinates and the other reduction axes steps of 1.
 *
 *   - Steps.  The reduction runs as one flat sequence of steps: the other
 *     reduction axes outside, K inside by rstep.  Each step's A tile
 *     (block[M] x rstep) and B tile (rstep x block[N]) go to one of `stages`
 *     shared slots.
 *   - Pipeline.  The prologue issues steps 0 .. stages-2.  Iteration t waits
 *     until step t's copies landed (cp.async.wait_group stages-2), meets the
 *     block at one barrier (which also retires every warp's reads of the slot
 *     about to be refilled), issues step t+stages-1 into that slot, and
 *     computes step t.  A thread always commits a group, empty or not, so
 *     that group t is step t.
 *   - Copies.  Rows whose 16-byte chunks are whole (mma_vector_loads_fit)
 *     and a tensor that starts 16-byte aligned (checked at run time) go by
 *     cp.async, out-of-range chunks zero-filled; otherwise each thread loads
 *     16-bit values (a padding mask, an unaligned window): a step ahead into
 *     registers, stored to their slot after the compute, while they fit
 *     PIPE_PREFETCH_REGS, else straight into the slot.
 *   - Layout.  A tile is stored [outer][inner] with inner the operand's
 *     contiguous dimension (no padding).  16-byte chunk c of row o lives at
 *     chunk c ^ ((o / rows_per_line) % xor_span): the eight rows one ldmatrix
 *     phase reads fall in eight distinct bank groups.
 *   - Fragments.  Each warp owns thread[M] x thread[N] of the block: FM
 *     16-row A fragments and FN 8-column accumulators, in registers.  Per
 *     16-wide slice of the step, ldmatrix.x4 loads each A fragment (.trans
 *     when A is stored K-major) and each pair of B fragments (.trans when B is
 *     stored N-major), and FM x FN mma.sync.m16n8k16 accumulate in f32.
 *   - Epilogue.  The bias and the group's epilogue apply per value.  Where
 *     the output's innermost axis is N, whole 16-byte vectors long, each warp
 *     passes its accumulators through its own f32 tile (taking the stages'
 *     place in shared memory) and every lane stores 16 bytes at once
 *     (epilogue_vector); otherwise each lane stores its accumulators where
 *     the PTX ISA puts them (rows g, g+8 of a fragment, columns 2t, 2t+1).
 *   - TF32 (mma = [16, 8, 8], mma_precision = "tf32": qopt
 *     -matmul-precision=high).  The same loop on f32 operands: the tiles hold
 *     f32 (16-byte chunks of 4), each lane reads its own fragment values
 *     (tf32_fragments) and rounds them with cvt.rna.tf32.f32, and FM x FN
 *     mma.sync.m16n8k8 .tf32 run per 8-wide slice of the step.
 * The C printer runs the same code with the instructions emulated per lane
 * (runtime/), copies landing only at the wait that retires them (and TF32
 * operands rounded by the same q_tf32).
 */
#include <inttypes.h>
#include <stdio.h>

#include "lower.h"

/* Registers a thread may hold a step ahead for operands without cp.async;
 * past them an operand is loaded straight into its slot when it is issued
 * (ptxas spilled a 3x3 convolution's 64x64x64 tiles: 32 + 32 per thread). */
#define PIPE_PREFETCH_REGS 32

static pipe_tile tile_of(const mma_operand *op) {
  pipe_tile t = pipe_tile_make(op->col_major ? op->cols : op->rows, op->col_major ? op->rows : op->cols, qir_dtype_size(op->dtype));
  t.op = op;
  return t;
}

pipe_tile pipe_tile_make(int64_t outer, int64_t inner, int elem_bytes) {
  pipe_tile t = {.outer = outer, .inner = inner};
  t.epc = 16 / elem_bytes;
  t.chunks = t.inner / t.epc;
  t.xor_span = 1;
  while (t.xor_span < 8 && t.chunks % (2 * t.xor_span) == 0) t.xor_span *= 2;
  t.rows_per_line = 8 / t.xor_span;
  t.slot = t.outer * t.inner;
  return t;
}

kexpr *pipe_tile_at(kbuilder *b, const pipe_tile *t, kexpr *slot, kexpr *o, kexpr *chunk, kexpr *within) {
  kexpr *c = chunk;
  if (t->xor_span > 1) {
    kexpr *sw = ke_mod(b, ke_div(b, o, ke_int(b, t->rows_per_line)), ke_int(b, t->xor_span));
    c = ke_bin(b, QIR_FN_BITXOR, chunk, sw, KT_I32);
  }
  kexpr *at = ke_add(b, ke_mul(b, o, ke_int(b, t->inner)), ke_mul(b, c, ke_int(b, t->epc)));
  return ke_add(b, ke_add(b, ke_mul(b, slot, ke_int(b, t->slot)), at), within);
}

/* How a thread moves its part of one operand's tile for a step. */
typedef enum {
  COPY_ASYNC,                   /* 16-byte cp.async chunks */
  COPY_DIRECT,                  /* 16-bit loads stored to shared memory at once */
  COPY_TO_REGS,                 /* 16-bit loads into registers (in flight while the warps compute) */
  COPY_FROM_REGS,               /* those registers to shared memory */
} copy_mode;

/* The copy of one operand's tile for the step whose origin is (row0, col0)
 * (the other compute variables already in env->vars) into stage `slot`.
 * Register modes give each thread the same fixed elements: pass q of
 * ceil(tile / threads) holds element tid + q * threads in regs[q]. */
static kstmt *copy_tile(lower_env *env, const pipe_tile *t, kvar *smem, kvar *regs, kexpr *slot, kexpr *row0, kexpr *col0,
                        copy_mode mode) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const mma_operand *op = t->op;
  int width = mode == COPY_ASYNC ? (int)t->epc : 1;
  bool f32 = op->dtype == QIR_F32;   /* tf32 plans stage f32 values; else raw 16-bit bits */
  int64_t per_row = t->inner / width, total = t->outer * per_row;
  kvar *f = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL), *q = NULL;
  kstmt *body = ks_seq(b), *loop;
  if (regs) {
    q = kvar_new(b, k, "q", KT_I32, 0, KV_LOCAL);
    kstmt *pass = ks_seq(b);
    ks_add(b, pass, ks_decl(b, f, ke_add(b, ke_tid(b), ke_mul(b, ke_var(b, q), ke_int(b, k->threads)))));
    ks_add(b, pass, total % k->threads ? ks_if(b, ke_lt(b, ke_var(b, f), ke_int(b, total)), body, NULL) : body);
    loop = ks_for(b, q, ke_int(b, 0), ke_int(b, ceil_div(total, k->threads)), 1, pass);
    loop->unroll = true;
  } else {
    loop = ks_for(b, f, ke_tid(b), ke_int(b, total), k->threads, body);
  }
  kvar *ov = kvar_new(b, k, "o", KT_I32, 0, KV_LOCAL), *iv = kvar_new(b, k, "i", KT_I32, 0, KV_LOCAL);
  ks_add(b, body, ks_decl(b, ov, ke_div(b, ke_var(b, f), ke_int(b, per_row))));
  ks_add(b, body, ks_decl(b, iv, ke_mul(b, ke_mod(b, ke_var(b, f), ke_int(b, per_row)), ke_int(b, width))));
  kexpr *i = ke_var(b, iv);
  kexpr *at = pipe_tile_at(b, t, slot, ke_var(b, ov), ke_div(b, i, ke_int(b, t->epc)),
                      width == t->epc ? ke_int(b, 0) : ke_mod(b, i, ke_int(b, t->epc)));
  if (mode == COPY_FROM_REGS) {
    ks_add(b, body, ks_assign(b, smem, at, ke_elem(b, regs, ke_var(b, q))));
    return loop;
  }
  kexpr *inb, *src = mma_operand_source(env, op, body, row0, col0, ke_var(b, op->col_major ? iv : ov),
                                        ke_var(b, op->col_major ? ov : iv), &inb);
  if (mode == COPY_ASYNC) {
    ks_add(b, body, ks_cp_async(b, smem, at, 1 + op->access->operand, src, inb));
    return loop;
  }
  kexpr *val = f32 ? ke_select(b, inb, ke_load(b, k, 1 + op->access->operand, src), ke_float(b, 0, KT_F32), KT_F32)
                   : ke_select(b, inb, ke_load_raw(b, 1 + op->access->operand, src), ke_cast(b, ke_int(b, 0), KT_U32), KT_U32);
  ks_add(b, body, mode == COPY_TO_REGS ? ks_assign(b, regs, ke_var(b, q), val) : ks_assign(b, smem, at, val));
  return loop;
}


typedef struct {
  lower_env *env;
  const tile_plan *p;
  pipe_tile ta, tb;
  kvar *sa, *sb;
  bool async[2];                /* A, B: whole 16-byte chunks (cp.async where the tensor is aligned) */
  kvar *regs[2];                /* A, B without: the registers their next step waits in */
  kexpr *blo[MAX_AXES];         /* the block's origin per output axis */
  int64_t count[MAX_AXES];      /* steps per reduction axis (K: by rstep) */
  const qir_expr *bias;
  int64_t FM, FN, warps;        /* a warp's m16 rows and n8 columns of fragments; warps per block */
  kexpr *lane, *wm, *wn;        /* the thread's lane, its warp's first row and column in the block */
  kvar *acc;                    /* the accumulators: fragment (fi, fj) register r at (fi * FN + fj) * 4 + r */
} pipe;

/* The value at (row, col) of an operand's tile (row, col in A's M x K or B's
 * K x N terms), rounded to TF32. */
static kexpr *tf32_at(kbuilder *b, const pipe_tile *t, kvar *smem, kexpr *slot, kexpr *row, kexpr *col) {
  kexpr *o = t->op->col_major ? col : row, *in = t->op->col_major ? row : col;
  kexpr *at = pipe_tile_at(b, t, slot, o, ke_div(b, in, ke_int(b, t->epc)), ke_mod(b, in, ke_int(b, t->epc)));
  return ke_tf32(b, ke_elem(b, smem, at));
}

/* The tf32 fragments of one 8-wide K slice at k8 of stage `slot`, each lane
 * loading its own values from the f32 tiles and rounding them (cvt.rna.tf32.f32):
 * per the PTX ISA's m16n8k8 .tf32 layout, lane (g, t) = (lane / 4, lane % 4)
 * holds A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4] of each 16-row A fragment
 * (fa[4 fi + r]) and B[t][g], B[t+4][g] of each 8-column B fragment
 * (fb[2 fj + r]).  ldmatrix moves 16-bit halves, so 32-bit values are read
 * singly: a warp's A reads fall in 32 distinct banks (8 rows whose chunks
 * the swizzle spreads). */
static void tf32_fragments(pipe *pp, kstmt *slice, kexpr *slot, kexpr *k8, kvar *fa, kvar *fb) {
  kbuilder *b = pp->env->b;
  kkernel *k = pp->env->k;
  kexpr *g = ke_div(b, pp->lane, ke_int(b, 4)), *tq = ke_mod(b, pp->lane, ke_int(b, 4));
  kvar *fi = kvar_new(b, k, "fi", KT_I32, 0, KV_LOCAL), *fj = kvar_new(b, k, "fj", KT_I32, 0, KV_LOCAL);
  kstmt *a_body = ks_seq(b), *b_body = ks_seq(b);
  for (int r = 0; r < 4; r++) {   /* a0..a3: rows g, g+8; columns t, t+4 */
    kexpr *row = ke_add(b, ke_add(b, pp->wm, ke_mul(b, ke_var(b, fi), ke_int(b, 16))), ke_add(b, g, ke_int(b, (r & 1) * 8)));
    kexpr *col = ke_add(b, k8, ke_add(b, tq, ke_int(b, (r >> 1) * 4)));
    ks_add(b, a_body, ks_assign(b, fa, ke_add(b, ke_mul(b, ke_var(b, fi), ke_int(b, 4)), ke_int(b, r)),
                                tf32_at(b, &pp->ta, pp->sa, slot, row, col)));
  }
  for (int r = 0; r < 2; r++) {   /* b0, b1: k rows t, t+4; column g */
    kexpr *krow = ke_add(b, k8, ke_add(b, tq, ke_int(b, r * 4)));
    kexpr *ncol = ke_add(b, ke_add(b, pp->wn, ke_mul(b, ke_var(b, fj), ke_int(b, 8))), g);
    ks_add(b, b_body, ks_assign(b, fb, ke_add(b, ke_mul(b, ke_var(b, fj), ke_int(b, 2)), ke_int(b, r)),
                                tf32_at(b, &pp->tb, pp->sb, slot, krow, ncol)));
  }
  kstmt *la = ks_for(b, fi, ke_int(b, 0), ke_int(b, pp->FM), 1, a_body), *lb = ks_for(b, fj, ke_int(b, 0), ke_int(b, pp->FN), 1, b_body);
  la->unroll = lb->unroll = true;   /* constant register indices */
  ks_add(b, slice, la);
  ks_add(b, slice, lb);
}

/* Sets env->vars to the origin of flat step `step` (the other reduction axes
 * outermost, K innermost) and returns K's. */
static kexpr *step_origin(pipe *pp, kexpr *step) {
  return mma_step_origin(pp->env, pp->p->mma_k, pp->count, pp->p->rstep[pp->p->mma_k], step);
}

/* The copies of operand s (0: A, 1: B) for a step at K offset k0 into `slot`:
 * cp.async (16-bit loads where the tensor is not 16-byte aligned), or for an
 * operand without whole chunks `reg_mode`: direct, or either half of the
 * copy through registers. */
static kstmt *copy_operand(pipe *pp, int s, kexpr *slot, kexpr *k0, copy_mode reg_mode) {
  lower_env *env = pp->env;
  kbuilder *b = env->b;
  const pipe_tile *t = s ? &pp->tb : &pp->ta;
  kvar *smem = s ? pp->sb : pp->sa;
  kexpr *row0 = s ? k0 : pp->blo[pp->p->mma_m], *col0 = s ? pp->blo[pp->p->mma_n] : k0;
  if (!pp->async[s] && !pp->regs[s])   /* no registers to spare: straight into the slot when issued */
    return reg_mode == COPY_FROM_REGS ? ks_seq(b) : copy_tile(env, t, smem, NULL, slot, row0, col0, COPY_DIRECT);
  if (!pp->async[s]) return copy_tile(env, t, smem, reg_mode == COPY_DIRECT ? NULL : pp->regs[s], slot, row0, col0, reg_mode);
  kstmt *direct = copy_tile(env, t, smem, NULL, slot, row0, col0, COPY_DIRECT);
  return ks_if(b, ke_aligned16(b, 1 + t->op->access->operand), copy_tile(env, t, smem, NULL, slot, row0, col0, COPY_ASYNC), direct);
}

/* What is stored at output point oidx for accumulated value v: plus the bias
 * term (Gemm's C, a convolution's b: once per point), through the group's
 * epilogue. */
static kexpr *final_value(pipe *pp, kexpr *const *oidx, kexpr *v) { return mma_final_value(pp->env, pp->bias, oidx, v); }

static kstmt *unrolled(kbuilder *b, kvar *v, int64_t trips, kstmt *body) {
  kstmt *l = ks_for(b, v, ke_int(b, 0), ke_int(b, trips), 1, body);
  l->unroll = true;
  return l;
}

/* Epilogue from the registers: lane (g, t) holds rows g and g+8, columns 2t
 * and 2t+1 of each fragment; it stores them one at a time. */
static void epilogue_registers(pipe *pp) {
  lower_env *env = pp->env;
  kbuilder *b = env->b;
  kkernel *k = env->k;
  kvar *ei = kvar_new(b, k, "fi", KT_I32, 0, KV_LOCAL), *ej = kvar_new(b, k, "fj", KT_I32, 0, KV_LOCAL);
  kvar *eh = kvar_new(b, k, "h", KT_I32, 0, KV_LOCAL), *ee = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kexpr *g = ke_div(b, pp->lane, ke_int(b, 4)), *tq = ke_mod(b, pp->lane, ke_int(b, 4));
  kvar *gmv = kvar_new(b, k, "gm", b->index_type, 0, KV_LOCAL), *gnv = kvar_new(b, k, "gn", b->index_type, 0, KV_LOCAL);
  kexpr *gm = ke_add(b, ke_add(b, pp->blo[pp->p->mma_m], ke_cast(b, pp->wm, b->index_type)),
                     ke_cast(b, ke_add(b, ke_add(b, ke_mul(b, ke_var(b, ei), ke_int(b, 16)), g), ke_mul(b, ke_var(b, eh), ke_int(b, 8))),
                             b->index_type));
  kexpr *gn = ke_add(b, ke_add(b, pp->blo[pp->p->mma_n], ke_cast(b, pp->wn, b->index_type)),
                     ke_cast(b, ke_add(b, ke_add(b, ke_mul(b, ke_var(b, ej), ke_int(b, 8)), ke_mul(b, tq, ke_int(b, 2))), ke_var(b, ee)),
                             b->index_type));
  kstmt *st = ks_seq(b);
  ks_add(b, st, ks_decl(b, gmv, gm));
  ks_add(b, st, ks_decl(b, gnv, gn));
  kexpr *oidx[MAX_AXES];
  kexpr *guard = mma_output_point(env, pp->p, pp->blo, ke_var(b, gmv), ke_var(b, gnv), oidx);
  kexpr *slot = ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, ke_var(b, ei), ke_int(b, pp->FN)), ke_var(b, ej)), ke_int(b, 4)),
                       ke_add(b, ke_mul(b, ke_var(b, eh), ke_int(b, 2)), ke_var(b, ee)));
  kstmt *store = ks_store(b, 0, out_index(env, oidx), final_value(pp, oidx, ke_elem(b, pp->acc, slot)));
  ks_add(b, st, guard ? ks_if(b, guard, store, NULL) : store);
  ks_add(b, k->body, unrolled(b, ei, pp->FM, unrolled(b, ej, pp->FN, unrolled(b, eh, 2, unrolled(b, ee, 2, st)))));
}

/* Epilogue through shared memory, 16 bytes per store: per 8-row half of a
 * fragment row, each warp writes its accumulators to its own f32 tile of
 * 8 x (WN + 4) (the pad spreads the rows over the banks; the tiles take the
 * stages' place in shared memory), then its lanes
 * read vw consecutive values of a row each (128-bit shared reads), apply the
 * bias and the epilogue and store them at once: 8 halves (f16, bf16) or 4
 * floats.  A tensor that does not start 16-byte aligned (checked at run
 * time) is stored a value at a time. */
static void epilogue_vector(pipe *pp, int vw) {
  lower_env *env = pp->env;
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const tile_plan *p = pp->p;
  int64_t WN = p->thread[p->mma_n], ld = WN + 4, per_row = WN / vw, segs = 8 * per_row, passes = ceil_div(segs, 32);
  kvar *se = kvar_new(b, k, "se", KT_F32, pp->warps * 8 * ld, KV_SHARED);
  /* GPU: the tiles reuse the stages' bytes (one dynamic buffer, carved; the
   * caller's barrier retires the last step's reads first); C keeps them apart */
  int64_t a_bytes = (kvar_bytes(pp->sa) + 127) / 128 * 128, end = a_bytes + kvar_bytes(pp->sb);
  pp->sa->carve = 1;
  pp->sb->carve = 1 + a_bytes;
  se->carve = 1;
  k->carved_smem = true;
  k->smem_bytes = end > kvar_bytes(se) ? end : kvar_bytes(se);
  kexpr *mine = ke_mul(b, ke_div(b, ke_tid(b), ke_int(b, 32)), ke_int(b, 8 * ld));   /* the warp's tile */
  kvar *half = kvar_new(b, k, "hr", KT_I32, 0, KV_BLOCK);   /* 2 * fi + h: rows 16 fi + 8 h .. + 8 of the warp */
  kstmt *body = ks_seq(b);

  /* the lanes' accumulators of those rows into the tile */
  kvar *ej = kvar_new(b, k, "fj", KT_I32, 0, KV_LOCAL), *ee = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kexpr *g = ke_div(b, pp->lane, ke_int(b, 4)), *tq = ke_mod(b, pp->lane, ke_int(b, 4));
  kexpr *fi = ke_div(b, ke_var(b, half), ke_int(b, 2)), *h = ke_mod(b, ke_var(b, half), ke_int(b, 2));
  kexpr *at = ke_add(b, ke_add(b, mine, ke_mul(b, g, ke_int(b, ld))),
                     ke_add(b, ke_add(b, ke_mul(b, ke_var(b, ej), ke_int(b, 8)), ke_mul(b, tq, ke_int(b, 2))), ke_var(b, ee)));
  kexpr *slot = ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, fi, ke_int(b, pp->FN)), ke_var(b, ej)), ke_int(b, 4)),
                       ke_add(b, ke_mul(b, h, ke_int(b, 2)), ke_var(b, ee)));
  ks_add(b, body, unrolled(b, ej, pp->FN, unrolled(b, ee, 2, ks_assign(b, se, at, ke_elem(b, pp->acc, slot)))));
  ks_add(b, body, ks_warp_barrier(b));

  /* segment q * 32 + lane: row seg / per_row, columns from (seg % per_row) * vw */
  kvar *q = kvar_new(b, k, "q", KT_I32, 0, KV_LOCAL), *sg = kvar_new(b, k, "s", KT_I32, 0, KV_LOCAL);
  kstmt *seg = ks_seq(b), *work = ks_seq(b);
  ks_add(b, seg, ks_decl(b, sg, ke_add(b, pp->lane, ke_mul(b, ke_var(b, q), ke_int(b, 32)))));
  kexpr *row = ke_div(b, ke_var(b, sg), ke_int(b, per_row)), *col = ke_mul(b, ke_mod(b, ke_var(b, sg), ke_int(b, per_row)), ke_int(b, vw));
  kvar *gmv = kvar_new(b, k, "gm", b->index_type, 0, KV_LOCAL), *gnv = kvar_new(b, k, "gn", b->index_type, 0, KV_LOCAL);
  kexpr *gm = ke_add(b, ke_add(b, pp->blo[p->mma_m], ke_cast(b, pp->wm, b->index_type)),
                     ke_cast(b, ke_add(b, ke_mul(b, ke_var(b, half), ke_int(b, 8)), row), b->index_type));
  kexpr *gn = ke_add(b, ke_add(b, pp->blo[p->mma_n], ke_cast(b, pp->wn, b->index_type)), ke_cast(b, col, b->index_type));
  ks_add(b, seg, ks_decl(b, gmv, gm));   /* the guard reads them */
  ks_add(b, seg, ks_decl(b, gnv, gn));
  kexpr *base = ke_add(b, ke_add(b, mine, ke_mul(b, row, ke_int(b, ld))), col);
  kexpr *oidx[MAX_AXES];
  kexpr *guard = mma_output_point(env, p, pp->blo, ke_var(b, gmv), ke_var(b, gnv), oidx);   /* vw divides N: a vector is all in or all out */
  ks_add(b, work, mma_store_vector(env, p, pp->blo, pp->bias, ke_var(b, gmv), ke_var(b, gnv), se, base, vw));
  kexpr *live = guard;
  if (segs % 32) live = ke_and(b, ke_lt(b, ke_var(b, sg), ke_int(b, segs)), live);
  ks_add(b, seg, live ? ks_if(b, live, work, NULL) : work);
  ks_add(b, body, unrolled(b, q, passes, seg));
  ks_add(b, body, ks_warp_barrier(b));
  kstmt *l = ks_for(b, half, ke_int(b, 0), ke_int(b, 2 * pp->FM), 1, body);
  l->uniform = true;
  l->unroll = true;             /* the accumulators stay registers: constant indices */
  ks_add(b, k->body, l);
}

/* The fragments of one 16-wide K slice (k16) of stage `slot` by ldmatrix.x4:
 * each A fragment fi (.trans when A is stored K-major) into fa[4 fi ..], each
 * pair of B fragments 2fj, 2fj+1 (.trans when B is stored N-major) into fb[4 fj ..]. */
static void ldmatrix_fragments(pipe *pp, kstmt *slice, kexpr *slot, kexpr *k16, kvar *fa, kvar *fb) {
  kbuilder *b = pp->env->b;
  kkernel *k = pp->env->k;
  const mma_operand *A = pp->ta.op, *B = pp->tb.op;
  kexpr *lane = pp->lane, *wm = pp->wm, *wn = pp->wn;
  int64_t FM = pp->FM, FN = pp->FN;
  kexpr *j = ke_div(b, lane, ke_int(b, 8)), *r = ke_mod(b, lane, ke_int(b, 8));
  kexpr *j_lo = ke_mod(b, j, ke_int(b, 2)), *j_hi = ke_div(b, j, ke_int(b, 2));   /* matrix j = 2 * j_hi + j_lo */
  {
    /* A fragment fi: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) */
    kvar *fi = kvar_new(b, k, "fi", KT_I32, 0, KV_BLOCK);
    kexpr *row = ke_add(b, ke_add(b, wm, ke_mul(b, ke_var(b, fi), ke_int(b, 16))), ke_mul(b, j_lo, ke_int(b, 8)));
    kexpr *col = ke_add(b, k16, ke_mul(b, j_hi, ke_int(b, 8)));
    kexpr *o, *ch;
    if (A->col_major) {       /* stored [K][M]: lane r gives k row col + r, chunk (row / 8) */
      o = ke_add(b, col, r);
      ch = ke_div(b, row, ke_int(b, 8));
    } else {
      o = ke_add(b, row, r);
      ch = ke_div(b, col, ke_int(b, 8));
    }
    kstmt *l = ks_ldmatrix(b, fa, ke_mul(b, ke_var(b, fi), ke_int(b, 4)), 4, A->col_major, pp->sa,
                           pipe_tile_at(b, &pp->ta, slot, o, ch, ke_int(b, 0)));
    kstmt *body = ks_seq(b);
    ks_add(b, body, l);
    ks_add(b, slice, mma_uniform_loop(b, fi, FM, 1, body, true));
  }
  {
    /* B fragments 2fj, 2fj+1 (16 columns): matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) */
    kvar *fj = kvar_new(b, k, "fj", KT_I32, 0, KV_BLOCK);
    kexpr *ncol = ke_add(b, ke_add(b, wn, ke_mul(b, ke_var(b, fj), ke_int(b, 16))), ke_mul(b, j_hi, ke_int(b, 8)));
    kexpr *krow = ke_add(b, k16, ke_mul(b, j_lo, ke_int(b, 8)));
    kexpr *o, *ch;
    if (B->col_major) {       /* stored [N][K] */
      o = ke_add(b, ncol, r);
      ch = ke_div(b, krow, ke_int(b, 8));
    } else {                 /* stored [K][N]: transposed loads */
      o = ke_add(b, krow, r);
      ch = ke_div(b, ncol, ke_int(b, 8));
    }
    kstmt *l = ks_ldmatrix(b, fb, ke_mul(b, ke_var(b, fj), ke_int(b, 4)), 4, !B->col_major, pp->sb,
                           pipe_tile_at(b, &pp->tb, slot, o, ch, ke_int(b, 0)));
    kstmt *body = ks_seq(b);
    ks_add(b, body, l);
    ks_add(b, slice, mma_uniform_loop(b, fj, FN / 2, 1, body, true));
  }
}

void lower_mma_pipe(lower_env *env, const tile_plan *p) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *c = env->comp;
  int n = c->n_axes, m = c->n_red, vm = p->mma_m, vn = p->mma_n, ka = p->mma_k, S = p->stages;
  const int64_t *R = c->axis_extents + n;
  mma_operand A, B;
  const qir_expr *bias;
  if (!mma_analyse(env, p, &A, &B, &bias)) return;
  pipe pp = {.env = env, .p = p, .ta = tile_of(&A), .tb = tile_of(&B)};

  int64_t nb[MAX_AXES], wpa[MAX_AXES], warps, grid = mma_grid(env, p, nb, wpa, &warps);
  const int W = 32;
  k->grid = grid;
  kkernel_rows(k, 1, p->block[0], grid / nb[0]);
  kkernel_tile_grid(k, n, NULL, nb, p->block);
  k->threads = (int)(warps * W);
  /* one block per SM is enough: without the bound ptxas (13.0, sm_90) caps
   * some of these kernels at 64 registers and spills */
  k->min_blocks = 1;
  int64_t WM = p->thread[vm], WN = p->thread[vn], FM = WM / 16, FN = WN / 8, BK = p->rstep[ka];

  kexpr *bc[MAX_AXES], *wt[MAX_AXES];
  decompose(env, ke_bid(b), nb, n, bc);
  decompose(env, ke_div(b, ke_tid(b), ke_int(b, W)), wpa, n, wt);
  for (int d = 0; d < n; d++) {
    kexpr *start = ke_mul(b, bc[d], ke_int(b, p->block[d]));
    pp.blo[d] = start->kind == KE_INT ? start : ke_var(b, let(env, "b", start));
    env->vars[d] = pp.blo[d];
  }
  kexpr *lane = ke_var(b, let(env, "lane", ke_mod(b, ke_tid(b), ke_int(b, W))));
  kexpr *wm = ke_mul(b, wt[vm], ke_int(b, WM)), *wn = ke_mul(b, wt[vn], ke_int(b, WN));
  pp.bias = bias;
  pp.FM = FM;
  pp.FN = FN;
  pp.warps = warps;
  pp.lane = lane;
  pp.wm = wm;
  pp.wn = wn;

  bool tf32 = p->tf32;
  if (tf32) {   /* f32 values, rounded to TF32 as the fragments load them */
    pp.sa = kvar_new(b, k, "sa", KT_F32, S * pp.ta.slot, KV_SHARED);
    pp.sb = kvar_new(b, k, "sb", KT_F32, S * pp.tb.slot, KV_SHARED);
  } else {
    pp.sa = kvar_new_raw_shared(b, k, "sa", A.dtype, S * pp.ta.slot);
    pp.sb = kvar_new_raw_shared(b, k, "sb", B.dtype, S * pp.tb.slot);
  }
  int64_t reg_budget = PIPE_PREFETCH_REGS;
  for (int o = 0; o < 2; o++) {
    const pipe_tile *t = o ? &pp.tb : &pp.ta;
    int64_t per_thread = ceil_div(t->slot, k->threads);
    pp.async[o] = mma_vector_loads_fit(env, t->op);
    if (!pp.async[o] && per_thread <= reg_budget) {
      pp.regs[o] = kvar_new(b, k, o ? "pb" : "pa", tf32 ? KT_F32 : KT_U32, per_thread, KV_THREAD);
      reg_budget -= per_thread;
    }
  }
  kvar *fa = kvar_new(b, k, "fa", KT_U32, FM * 4, KV_THREAD);
  kvar *fb = kvar_new(b, k, "fb", KT_U32, FN / 2 * 4, KV_THREAD);
  kvar *acc = kvar_new(b, k, "acc", KT_F32, FM * FN * 4, KV_THREAD);
  pp.acc = acc;

  kvar *zi = kvar_new(b, k, "i", KT_I32, 0, KV_LOCAL);
  kstmt *zero = ks_for(b, zi, ke_int(b, 0), ke_int(b, FM * FN * 4), 1, ks_assign(b, acc, ke_var(b, zi), ke_float(b, 0, KT_F32)));
  zero->unroll = true;
  ks_add(b, k->body, zero);

  int64_t steps = 1;
  for (int a = 0; a < m; a++) {
    pp.count[a] = a == ka ? ceil_div(R[a], BK) : R[a];
    steps *= pp.count[a];
  }

  /* prologue: steps 0 .. S-2, a group each (empty past the last step) */
  for (int s = 0; s < S - 1; s++) {
    if (s < steps) {
      kexpr *k0 = step_origin(&pp, ke_int(b, s));
      for (int o = 0; o < 2; o++) ks_add(b, k->body, copy_operand(&pp, o, ke_int(b, s), k0, COPY_DIRECT));
    }
    ks_add(b, k->body, ks_cp_commit(b));
  }

  kvar *t = kvar_new(b, k, "t", KT_I32, 0, KV_BLOCK);
  kstmt *iter = ks_seq(b);
  ks_add(b, iter, ks_cp_wait(b, S - 2));
  ks_add(b, iter, ks_barrier(b));
  kexpr *next = ke_add(b, ke_var(b, t), ke_int(b, S - 1));
  kexpr *refill = ke_lt(b, next, ke_int(b, steps)), *next_slot = ke_mod(b, next, ke_int(b, S));
  kstmt *issue = ks_seq(b), *land = ks_seq(b);
  kexpr *k0 = step_origin(&pp, next);
  for (int o = 0; o < 2; o++) {
    ks_add(b, issue, copy_operand(&pp, o, next_slot, k0, COPY_TO_REGS));
    if (pp.regs[o]) ks_add(b, land, copy_operand(&pp, o, next_slot, k0, COPY_FROM_REGS));
  }
  ks_add(b, iter, ks_if(b, refill, issue, NULL));
  ks_add(b, iter, ks_cp_commit(b));

  /* compute step t from slot t % S, 16 of K at a time (tf32: 8) */
  int64_t IK = tf32 ? 8 : 16;
  kexpr *slot = ke_mod(b, ke_var(b, t), ke_int(b, S));
  kvar *kk = kvar_new(b, k, "kk", KT_I32, 0, KV_BLOCK);
  kstmt *slice = ks_seq(b);
  if (tf32) tf32_fragments(&pp, slice, slot, ke_mul(b, ke_var(b, kk), ke_int(b, 8)), fa, fb);
  else ldmatrix_fragments(&pp, slice, slot, ke_mul(b, ke_var(b, kk), ke_int(b, 16)), fa, fb);
  {
    kvar *si = kvar_new(b, k, "fi", KT_I32, 0, KV_BLOCK), *sj = kvar_new(b, k, "fj", KT_I32, 0, KV_BLOCK);
    kexpr *ai = ke_mul(b, ke_add(b, ke_mul(b, ke_var(b, si), ke_int(b, FN)), ke_var(b, sj)), ke_int(b, 4));
    /* B fragment fj's two registers: tf32 loads them in order; ldmatrix.x4 gave fj pairs */
    kexpr *bi = tf32 ? ke_mul(b, ke_var(b, sj), ke_int(b, 2))
                     : ke_add(b, ke_mul(b, ke_div(b, ke_var(b, sj), ke_int(b, 2)), ke_int(b, 4)),
                              ke_mul(b, ke_mod(b, ke_var(b, sj), ke_int(b, 2)), ke_int(b, 2)));
    kstmt *inner = ks_seq(b), *outer = ks_seq(b);
    ks_add(b, inner, ks_mma16816(b, acc, ai, fa, ke_mul(b, ke_var(b, si), ke_int(b, 4)), fb, bi, A.dtype));   /* F32: tf32 */
    ks_add(b, outer, mma_uniform_loop(b, sj, FN, 1, inner, true));
    ks_add(b, slice, mma_uniform_loop(b, si, FM, 1, outer, true));
  }
  /* tf32: the slices stay a loop; unrolled, ptxas (13, sm_90) hoisted every
   * slice's loads and spilled 32x32 warp tiles at 255 registers */
  ks_add(b, iter, mma_uniform_loop(b, kk, BK / IK, 1, slice, !tf32));
  /* operands without cp.async: their loads were in flight during the
   * compute; the slot they land in was last read before this step's barrier */
  if (land->n_items) ks_add(b, iter, ks_if(b, refill, land, NULL));
  ks_add(b, k->body, mma_uniform_loop(b, t, steps, 1, iter, false));
  ks_add(b, k->body, ks_cp_wait(b, 0));

  int vw = mma_vector_width(env, p);
  if (vw) {
    ks_add(b, k->body, ks_barrier(b));   /* every warp is done with the stages the epilogue reuses */
    epilogue_vector(&pp, vw);
  } else {
    epilogue_registers(&pp);
  }

  char buf[512];
  int len = mma_summary_tiles(buf, sizeof buf,
                              tf32 ? "mma.sync m16n8k8 tf32" : A.dtype == QIR_BF16 ? "mma.sync m16n8k16 bf16" : "mma.sync m16n8k16 f16", n, p);
  snprintf(buf + len, sizeof buf - (size_t)len,
           "] rstep %" PRId64 " stages %d steps %" PRId64 " grid %" PRId64 " threads %d (%" PRId64 " warps x %" PRId64 "x%" PRId64
           " m16n8 tiles) A %s %s B %s %s smem %" PRId64 "B",
           BK, S, steps, grid, k->threads, warps, FM, FN, A.col_major ? "[K][M]" : "[M][K]",
           pp.async[0] ? "cp.async" : pp.regs[0] ? "via registers" : "ld/st", B.col_major ? "[N][K]" : "[K][N]",
           pp.async[1] ? "cp.async" : pp.regs[1] ? "via registers" : "ld/st", k->smem_bytes);
  k->summary = qir_strdup(b->m, buf);
}
