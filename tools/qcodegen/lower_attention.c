/* lower_attention.c: an `attention` op as one kernel, FlashAttention-2 style,
 * from the plan qopt -roller writes (roller_flash.c):
 *   #tile{flash = [BQ, BKV], flash_mma = [16, 8, 16] or [64, BKV, 16], stages = S, threads, grid, ...}
 *
 *   - Rows.  A kv head's G query heads and S positions are G * S packed rows
 *     (qir/attention.h); a block owns BQ of them (a warp per 16), so each key
 *     and value tile is read once per group of query heads (GQA, MQA).
 *     Blocks run the last row tiles first: under a causal mask those walk
 *     the most keys.
 *   - Q.  The block's Q tile goes to shared memory once (cp.async), and each
 *     warp keeps its 16 rows as A fragments in registers (ldmatrix.x4).
 *   - Keys.  The block walks its key tiles (BKV keys; under a causal mask
 *     only those up to its last row's diagonal: the rest are never loaded),
 *     K and V tiles in a ring of S shared slots filled by cp.async S - 1
 *     tiles ahead; the tiles are XOR-swizzled (pipe_tile) for ldmatrix.
 *   - Scores.  S = Q K^T by mma.sync.m16n8k16 (K stored [key][d]: B in
 *     column-major order, plain ldmatrix), f32 accumulators in registers,
 *     then scaled (softcap), biased, and masked (-inf) past the last key or
 *     the causal diagonal.
 *   - Online softmax.  Lane (g, t) holds rows g and g + 8 of its warp's 16;
 *     the row max is reduced over the 4 lanes of a quad (shuffles); the old
 *     sum and output are rescaled by exp(m_old - m_new); P = exp(S - m_new)
 *     is added to the lane's share of the row sum (reduced once, at the end).
 *   - P V.  The score accumulators of two n8 tiles are exactly the A
 *     fragment of one k16 slice (rows g, g+8; columns 2t, 2t+1 and + 8), so P
 *     goes to the matrix units from registers, rounded to the input type
 *     (cvt.rn.f16x2.f32); V tiles load with ldmatrix.trans.
 *   - Epilogue.  y = O / l per lane, stored where the fragment layout puts it.
 *   - Splits (flash-decoding).  With splits = P each row tile's keys are
 *     shared by P blocks; each writes its unnormalised O, row max and row sum
 *     to a buffer, and a second kernel (cg_lower_attention_combine) weighs
 *     them by exp(m_p - max m).
 *   - In place.  A q, k or v that is a slice of a fused projection
 *     (qir_attention_operand_view) is read from the slice's source at its
 *     offset and row stride; the slice launches nothing.
 *   - wgmma (flash_mma = [64, BKV, 16], sm_90a).  The same walk with a
 *     warpgroup per 64 rows (warp w of it: rows 16 w .., as above): the
 *     tiles sit in wgmma's canonical 128B-swizzled layout (tile_at); K and
 *     V come by tensor copies (kv_tmaps, issue_kv: the block's first thread,
 *     after the barrier that follows every warpgroup's wait for the slot's
 *     last wgmma; one mbarrier a stage, waited for by all), Q too where a
 *     block's rows are one head's (issue_q, its own mbarrier); otherwise Q,
 *     and a cache read in place, by cp.async, fenced for the async proxy; S = Q K^T
 *     is D / 16 wgmma m64nBKVk16 from two K-major descriptors (Q stays in
 *     shared memory); wgmma's accumulator layout is mma.sync's per n8
 *     tile, so the softmax above runs unchanged, and P's registers are the
 *     RS form's A operand of O += P V (V's descriptor MN-major, N = DV).
 *     With tensor copies and registers to spare (overlapped_walk), P V of
 *     one tile runs while the next tile's scores are masked and
 *     exponentiated, as FlashAttention-3 overlaps them within a warpgroup;
 *     otherwise each product is waited for before its accumulators are read.
 * The C printer runs the same kernel with the instructions emulated per lane
 * and the copies landing at the wait that retires them.  Without the matrix
 * units (f32; HIP) the SIMT kernel below walks the keys the same way. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attention.h"
#include "lower.h"

#define W 32                    /* lanes per warp: mma.sync */

typedef struct {
  lower_env *env;
  kbuilder *b;
  kkernel *k;
  qir_attention_shape s;
  int64_t BQ, BKV, warps, stages, R;      /* R = G * S packed rows per kv head */
  int64_t splits, per_split;              /* the keys' tiles split over `splits` blocks, per_split tiles each */
  bool async;                             /* SIMT: the plan's target has cp.async (CUDA sm_80 and up) */
  bool wg;                                /* both contractions on wgmma (flash_mma = [64, bkv, 16], sm_90a) */
  bool tma;                               /* wg: K and V tiles by tensor copies (kv_tmaps), completing on mb */
  bool q_tma;                             /* tma: Q's tile too (tensor map 2, mbarrier `stages`) */
  bool overlap;                           /* tma: P V in flight during the next tile's softmax (overlapped_walk) */
  kvar *mb;                               /* tma: one mbarrier per stage */
  bool view[3];                           /* q, k, v read in place from a slice's source (qir_attention_view) */
  int64_t view_offset[3], view_stride[3];
  bool cache[2];                          /* k, v: concat(past, new) read in place, `present` written
                                           * as the tiles load (qir_attention_cache) */
  int64_t past_len[2];
  int p_new[2], p_present[2];             /* their parameters (past is k's or v's own) */
  pipe_tile tq, tk, tv;
  kvar *sq, *sk, *sv;
  kexpr *bb, *kvh, *r0;                   /* block: batch, kv head, first packed row */
  kexpr *split;                           /* block: its split of the keys (0 without splits) */
  kexpr *lane, *warp, *g, *t4;
  kexpr *head[2], *pos[2], *valid[2];     /* the lane's two rows (g, g + 8): query head, position, r < R */
} flash;

static kstmt *unrolled(kbuilder *b, kvar *v, int64_t trips, kstmt *body, bool uniform) {
  if (body->kind != KS_SEQ) {   /* the C printer walks a block-level loop's body as a sequence */
    kstmt *seq = ks_seq(b);
    ks_add(b, seq, body);
    body = seq;
  }
  kstmt *l = ks_for(b, v, ke_int(b, 0), ke_int(b, trips), 1, body);
  l->unroll = true;
  l->uniform = uniform;
  return l;
}

static kexpr *idx_t(flash *f, kexpr *e) { return ke_cast(f->b, e, f->b->index_type); }

/* Flat element of q or y (head h, position i, column c) and of k or v (kv head, key j, column c). */
static kexpr *index_of(flash *f, kexpr *bb, kexpr *h, kexpr *i, kexpr *c, int64_t heads, int64_t len, int64_t width) {
  kbuilder *b = f->b;
  kexpr *bh = f->s.bshd ? ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, bb, ke_int(b, len)), idx_t(f, i)), ke_int(b, heads)), idx_t(f, h))
                        : ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, bb, ke_int(b, heads)), idx_t(f, h)), ke_int(b, len)), idx_t(f, i));
  return ke_add(b, ke_mul(b, bh, ke_int(b, width)), idx_t(f, c));
}

static kexpr *rows_index(flash *f, kexpr *h, kexpr *i, kexpr *c, int64_t heads, int64_t len, int64_t width) {
  return index_of(f, f->bb, h, i, c, heads, len, width);
}

/* Flat element of operand `which` (0: q, 1: k, 2: v) at head h, position i,
 * column c: in its own layout, or in place in a slice's source. */
static kexpr *operand_index(flash *f, int which, kexpr *h, kexpr *i, kexpr *c, int64_t heads, int64_t len, int64_t width) {
  if (!f->view[which]) return rows_index(f, h, i, c, heads, len, width);
  kbuilder *b = f->b;
  kexpr *row = ke_add(b, ke_mul(b, f->bb, ke_int(b, len)), idx_t(f, i));
  kexpr *col = ke_add(b, ke_add(b, ke_int(b, f->view_offset[which]), ke_mul(b, idx_t(f, h), ke_int(b, width))), idx_t(f, c));
  return ke_add(b, ke_mul(b, row, ke_int(b, f->view_stride[which])), col);
}

/* Packed row r (block-relative o) as query head and position. */
static void row_coords(flash *f, kexpr *o, kexpr **h, kexpr **i) {
  kbuilder *b = f->b;
  kexpr *r = ke_add(b, f->r0, idx_t(f, o));
  *h = ke_add(b, ke_mul(b, f->kvh, ke_int(b, f->s.G)), ke_div(b, r, ke_int(b, f->s.S)));
  *i = ke_mod(b, r, ke_int(b, f->s.S));
}

/* Split p's partial result for packed row `row` of the block's kv head: f32
 * [splits][B * Hkv][R][DV + 2], O unnormalised, then the row's max and sum. */
static kexpr *partial_at(flash *f, kexpr *bb, kexpr *kvh, kexpr *p, kexpr *row) {
  kbuilder *b = f->b;
  kexpr *head = ke_add(b, ke_mul(b, idx_t(f, bb), ke_int(b, f->s.Hkv)), idx_t(f, kvh));
  kexpr *line = ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, idx_t(f, p), ke_int(b, f->s.B * f->s.Hkv)), head), ke_int(b, f->R)), idx_t(f, row));
  return ke_mul(b, line, ke_int(b, f->s.DV + 2));
}

static kexpr *partial_row(flash *f, kexpr *p, kexpr *row) { return partial_at(f, f->bb, f->kvh, p, row); }

/* Which tile a copy moves: the block's Q rows, or the K or V rows of the key tile from key0. */
typedef enum { TILE_Q, TILE_K, TILE_V } tile_kind;

/* The flat index of column 0 of tile row o, and whether the row exists. */
static kexpr *tile_row(flash *f, tile_kind kind, kexpr *key0, kexpr *o, kexpr **inside) {
  kbuilder *b = f->b;
  if (kind == TILE_Q) {
    kexpr *h, *i;
    row_coords(f, o, &h, &i);
    *inside = ke_lt(b, ke_add(b, f->r0, idx_t(f, o)), ke_int(b, f->R));
    return operand_index(f, 0, h, i, ke_int(b, 0), f->s.Hq, f->s.S, f->s.D);
  }
  kexpr *j = ke_add(b, key0, idx_t(f, o));
  *inside = ke_lt(b, j, ke_int(b, f->s.T));
  return operand_index(f, kind == TILE_K ? 1 : 2, f->kvh, j, ke_int(b, 0), f->s.Hkv, f->s.T, kind == TILE_K ? f->s.D : f->s.DV);
}

/* The copy of `width` consecutive elements (1, or one 16-byte cp.async
 * chunk) of tile row o from column c into shared `at`: zeros past the data;
 * raw: 16-bit values as they are (the mma kernel's tiles), else converted to
 * f32.  A folded cache (f->cache) reads rows before its past length from
 * past and the rest from new, and writes them to `present` as well. */
static void copy_elems(flash *f, kstmt *body, tile_kind kind, kexpr *key0, kexpr *o, kexpr *c, kvar *smem, kexpr *at,
                       int width, bool async, bool raw) {
  kbuilder *b = f->b;
  kkernel *k = f->k;
  int param = kind == TILE_Q ? 1 : kind == TILE_K ? 2 : 3, kv = kind == TILE_K ? 0 : 1;
  kexpr *zero = raw ? ke_cast(b, ke_int(b, 0), KT_U32) : ke_float(b, 0, KT_F32);
  if (kind == TILE_Q || !f->cache[kv]) {
    kexpr *inside = NULL, *src = ke_add(b, tile_row(f, kind, key0, o, &inside), idx_t(f, c));
    if (async) ks_add(b, body, ks_cp_async_n(b, smem, at, param, src, inside, width * qir_dtype_size(f->s.dtype)));
    else ks_add(b, body, ks_assign(b, smem, at, ke_select(b, inside, raw ? ke_load_raw(b, param, src) : ke_load(b, k, param, src), zero,
                                                          raw ? KT_U32 : KT_F32)));
    return;
  }
  int64_t P = f->past_len[kv], T = f->s.T, wd = kind == TILE_K ? f->s.D : f->s.DV;
  kexpr *j = ke_add(b, key0, idx_t(f, o));
  kexpr *in_past = ke_lt(b, j, ke_int(b, P)), *inside = ke_lt(b, j, ke_int(b, T));
  kexpr *past = index_of(f, f->bb, f->kvh, j, c, f->s.Hkv, P, wd);
  kexpr *now = index_of(f, f->bb, f->kvh, ke_sub(b, j, ke_int(b, P)), c, f->s.Hkv, T - P, wd);
  if (async) {
    int bytes = width * qir_dtype_size(f->s.dtype);
    ks_add(b, body, ks_if(b, in_past, ks_cp_async_n(b, smem, at, param, past, NULL, bytes),
                          ks_cp_async_n(b, smem, at, f->p_new[kv], now, inside, bytes)));
  } else {
    kexpr *from_now = ke_select(b, inside, raw ? ke_load_raw(b, f->p_new[kv], now) : ke_load(b, k, f->p_new[kv], now), zero,
                                raw ? KT_U32 : KT_F32);
    kexpr *val = ke_select(b, in_past, raw ? ke_load_raw(b, param, past) : ke_load(b, k, param, past), from_now, raw ? KT_U32 : KT_F32);
    ks_add(b, body, ks_assign(b, smem, at, val));
  }
  /* present[.., j, c ..] = the same values (the cache written once, by the block that loads the tile) */
  kexpr *pres = index_of(f, f->bb, f->kvh, j, c, f->s.Hkv, T, wd);
  kstmt *st = ks_seq(b);
  for (int e = 0; e < width; e++) {
    kexpr *v = ke_select(b, in_past, ke_load(b, k, param, ke_add(b, past, ke_int(b, e))),
                         ke_load(b, k, f->p_new[kv], ke_add(b, now, ke_int(b, e))), KT_F32);
    ks_add(b, st, ks_store(b, f->p_present[kv], ke_add(b, pres, ke_int(b, e)), v));
  }
  ks_add(b, body, ks_if(b, inside, st, NULL));
}

/* Element `within` of 16-byte chunk `chunk` of row o of a tile in stage
 * `slot`: mma.sync's XOR-swizzled rows (pipe_tile), or wgmma's canonical
 * K-major layout with the 128-byte swizzle: 64-column atoms of all the
 * tile's rows (128 bytes each; chunk ^ row % 8), every atom and slot on a
 * 1024-byte boundary.  The same bytes serve a descriptor that reads them
 * MN-major (V: N = its columns, K = its keys). */
static kexpr *tile_at(flash *f, const pipe_tile *t, kexpr *slot, kexpr *o, kexpr *chunk, kexpr *within) {
  kbuilder *b = f->b;
  if (!f->wg) return pipe_tile_at(b, t, slot, o, chunk, within);
  kexpr *atom_row = ke_add(b, ke_mul(b, ke_div(b, chunk, ke_int(b, 8)), ke_int(b, t->outer)), o);
  kexpr *swz = ke_bin(b, QIR_FN_BITXOR, ke_mod(b, chunk, ke_int(b, 8)), ke_mod(b, o, ke_int(b, 8)), KT_I32);
  kexpr *at = ke_add(b, ke_mul(b, atom_row, ke_int(b, 64)), ke_mul(b, swz, ke_int(b, 8)));
  return ke_add(b, ke_add(b, ke_mul(b, slot, ke_int(b, t->slot)), at), within);
}

/* The copy of one tile into stage `slot` of its shared ring: 16-byte
 * cp.async chunks (async), else 16-bit loads stored at once.  Rows past the
 * data are zeros. */
static kstmt *copy_rows(flash *f, tile_kind kind, kexpr *key0, kexpr *slot, bool async) {
  kbuilder *b = f->b;
  kkernel *k = f->k;
  const pipe_tile *t = kind == TILE_Q ? &f->tq : kind == TILE_K ? &f->tk : &f->tv;
  kvar *smem = kind == TILE_Q ? f->sq : kind == TILE_K ? f->sk : f->sv;
  int64_t per_row = async ? t->chunks : t->inner, total = t->outer * per_row;
  kvar *fv = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL);
  kvar *ov = kvar_new(b, k, "o", KT_I32, 0, KV_LOCAL), *cv = kvar_new(b, k, "c", KT_I32, 0, KV_LOCAL);
  kstmt *body = ks_seq(b);
  ks_add(b, body, ks_decl(b, ov, ke_div(b, ke_var(b, fv), ke_int(b, per_row))));
  ks_add(b, body, ks_decl(b, cv, ke_mod(b, ke_var(b, fv), ke_int(b, per_row))));
  kexpr *o = ke_var(b, ov), *c = ke_var(b, cv);
  if (async)
    copy_elems(f, body, kind, key0, o, ke_mul(b, c, ke_int(b, t->epc)), smem, tile_at(f, t, slot, o, c, ke_int(b, 0)),
               (int)t->epc, true, true);
  else
    copy_elems(f, body, kind, key0, o, c, smem,
               tile_at(f, t, slot, o, ke_div(b, c, ke_int(b, t->epc)), ke_mod(b, c, ke_int(b, t->epc))), 1, false, true);
  return ks_for(b, fv, ke_tid(b), ke_int(b, total), k->threads, body);
}

/* Whether every tensor a tile copy reads starts 16-byte aligned (every row
 * then does: head sizes are multiples of 16, or of 4 for f32 rows). */
static kexpr *all_aligned(flash *f) {
  kbuilder *b = f->b;
  kexpr *ok = ke_and(b, ke_aligned16(b, 1), ke_and(b, ke_aligned16(b, 2), ke_aligned16(b, 3)));
  for (int kv = 0; kv < 2; kv++)
    if (f->cache[kv]) ok = ke_and(b, ok, ke_aligned16(b, f->p_new[kv]));
  return ok;
}

/* cp.async where every source is 16-byte aligned, else the direct copy. */
static kstmt *copy_tile(flash *f, tile_kind kind, kexpr *key0, kexpr *slot) {
  return ks_if(f->b, all_aligned(f), copy_rows(f, kind, key0, slot, true), copy_rows(f, kind, key0, slot, false));
}

/* ldmatrix.x4 of the 16 x 16 block at (row0, col0) of a stored tile into
 * regs[index ..]: matrices (rows 0-7, cols 0-7), (rows 8-15, cols 0-7),
 * (rows 0-7, cols 8-15), (rows 8-15, cols 8-15) when `rows_first`, else the
 * two middle ones swapped; lane l gives row l % 8 of matrix l / 8. */
static kstmt *ldmatrix16(flash *f, kvar *regs, kexpr *index, const pipe_tile *t, kvar *mem, kexpr *slot, kexpr *row0,
                         kexpr *col0, bool rows_first, bool trans) {
  kbuilder *b = f->b;
  kexpr *j = ke_div(b, f->lane, ke_int(b, 8)), *r = ke_mod(b, f->lane, ke_int(b, 8));
  kexpr *j_lo = ke_mod(b, j, ke_int(b, 2)), *j_hi = ke_div(b, j, ke_int(b, 2));
  kexpr *dr = rows_first ? j_lo : j_hi, *dc = rows_first ? j_hi : j_lo;
  kexpr *row = ke_add(b, ke_add(b, row0, ke_mul(b, dr, ke_int(b, 8))), r);
  kexpr *chunk = ke_div(b, ke_add(b, col0, ke_mul(b, dc, ke_int(b, 8))), ke_int(b, 8));
  return ks_ldmatrix(b, regs, index, 4, trans, mem, pipe_tile_at(b, t, slot, row, chunk, ke_int(b, 0)));
}

/* The summary's words on where q, k and v come from. */
static const char *layout_note(const flash *f) {
  const char *views = f->view[0] || f->view[1] || f->view[2] ? ", q/k/v read in place from a fused projection" : "";
  const char *cache = f->cache[0] || f->cache[1] ? ", the KV cache's past and new read in place and present written" : "";
  return qir_sprintf(f->b->m, "%s%s%s", f->s.bshd ? "layout bshd" : "layout bhsd", views, cache);
}

/* acc += A B on mma.sync over ksteps slices of 16 (A: 4 registers a slice
 * in a) and nsteps pairs of n8 tiles (acc: 4 registers a tile), B's 16 x 16
 * blocks by ldmatrix.x4 from slot `slot` of tile t.  K (the scores) is stored
 * [key][d]: B (d x key) column-major, rows = the n pair's keys; V (the
 * output) [key][dv]: B row-major, rows = the k slice's keys, .trans. */
static kstmt *mma_product(flash *f, kvar *acc, kvar *a, kvar *kb, const pipe_tile *t, kvar *mem, kexpr *slot, int64_t ksteps,
                          int64_t nsteps, bool v_tile) {
  kbuilder *b = f->b;
  kvar *ks = kvar_new(b, f->k, "kk", KT_I32, 0, KV_BLOCK), *ns = kvar_new(b, f->k, "nj", KT_I32, 0, KV_BLOCK);
  kexpr *k16 = ke_mul(b, ke_var(b, ks), ke_int(b, 16)), *n16 = ke_mul(b, ke_var(b, ns), ke_int(b, 16));
  kstmt *one = ks_seq(b);
  ks_add(b, one, ldmatrix16(f, kb, ke_int(b, 0), t, mem, slot, v_tile ? k16 : n16, v_tile ? n16 : k16, v_tile, v_tile));
  for (int half = 0; half < 2; half++)
    ks_add(b, one, ks_mma16816(b, acc, ke_mul(b, ke_add(b, ke_mul(b, ke_var(b, ns), ke_int(b, 2)), ke_int(b, half)), ke_int(b, 4)), a,
                               ke_mul(b, ke_var(b, ks), ke_int(b, 4)), kb, ke_int(b, 2 * half), f->s.dtype));
  return unrolled(b, ks, ksteps, unrolled(b, ns, nsteps, one, true), true);
}

/* Operand `which` (0: q, 1: k, 2: v) as a tensor map's dimensions,
 * innermost first, in its own layout (bhsd: [B * heads][len][width]; bshd:
 * [B][len][heads][width]) or in place in a fused projection's rows
 * ([B][len][stride], the head's columns at offset + h * width); a box of
 * 64 columns by `rows` positions of one head.  Rows past len are the box's
 * zero fill. */
static void operand_tmap(const flash *f, int which, int64_t rows, ktmap *m) {
  const qir_attention_shape *s = &f->s;
  int64_t heads = which ? s->Hkv : s->Hq, len = which ? s->T : s->S, width = which == 2 ? s->DV : s->D;
  *m = (ktmap){.param = 1 + which, .swizzle = 128};
  int64_t dims[4], box[4] = {64, rows, 1, 1};
  if (f->view[which])
    m->rank = 3, dims[0] = f->view_stride[which], dims[1] = len, dims[2] = s->B;
  else if (s->bshd)
    m->rank = 4, dims[0] = width, dims[1] = heads, dims[2] = len, dims[3] = s->B, box[1] = 1, box[2] = rows;
  else
    m->rank = 3, dims[0] = width, dims[1] = len, dims[2] = s->B * heads;
  int64_t stride = 2;
  for (int d = 0; d < m->rank; d++) {
    m->dims[d] = dims[d], m->box[d] = box[d], m->estride[d] = 1;
    m->strides[d] = stride;   /* bytes between consecutive indices ([0]: the element) */
    stride = d ? stride * dims[d] : 2 * dims[0];
  }
}

/* The coordinates (innermost first) of atom `atom` (64 columns) of operand
 * `which`'s box at head h (i32), first position pos (i32): operand_tmap's
 * dimensions. */
static int operand_coords(const flash *f, int which, kexpr *h, kexpr *pos, int64_t atom, kexpr **coord) {
  kbuilder *b = f->b;
  const qir_attention_shape *s = &f->s;
  int64_t width = which == 2 ? s->DV : s->D;
  kexpr *bb = ke_cast(b, f->bb, KT_I32), *col = ke_int(b, 64 * atom);
  if (f->view[which]) {
    coord[0] = ke_add(b, ke_int(b, f->view_offset[which] + 64 * atom), ke_mul(b, h, ke_int(b, width)));
    coord[1] = pos, coord[2] = bb;
    return 3;
  }
  if (s->bshd) {
    coord[0] = col, coord[1] = h, coord[2] = pos, coord[3] = bb;
    return 4;
  }
  coord[0] = col, coord[1] = pos, coord[2] = ke_add(b, ke_mul(b, bb, ke_int(b, which ? s->Hkv : s->Hq)), h);
  return 3;
}

/* A slice read in place whose copies would start off the 16-byte grid along its contiguous dimension. */
static bool view_misaligned(const flash *f, int which) {
  return f->view[which] && (f->view_offset[which] % 8 || f->view_stride[which] % 8);
}

/* wgmma: whether K and V can come by tensor copies, and their maps (k->tmaps
 * 0 and 1); Q's too (map 2, f->q_tma) where a block's packed rows never
 * cross heads (one query head a kv head, or positions a multiple of the
 * rows).  Not for a cache read in place (two sources), nor for a slice
 * whose copies would leave the 16-byte grid. */
static bool kv_tmaps(flash *f) {
  const qir_attention_shape *s = &f->s;
  for (int kv = 0; kv < 2; kv++)
    if (f->cache[kv] || view_misaligned(f, 1 + kv)) return false;
  kkernel *k = f->k;
  k->tmaps = qir_alloc(f->b->m, sizeof *k->tmaps * 3);
  for (int kv = 0; kv < 2; kv++) operand_tmap(f, 1 + kv, f->BKV, &k->tmaps[k->n_tmaps++]);
  f->q_tma = (s->G == 1 || s->S % f->BQ == 0) && !view_misaligned(f, 0);
  if (f->q_tma) operand_tmap(f, 0, f->BQ, &k->tmaps[k->n_tmaps++]);
  return true;
}

/* q_tma: the block's Q tile (its first packed row r0: query head kvh G + r0 / S,
 * position r0 % S), completing on mb[stages]. */
static kstmt *issue_q(flash *f) {
  kbuilder *b = f->b;
  const qir_attention_shape *s = &f->s;
  kstmt *st = ks_seq(b);
  kexpr *bar = ke_int(b, f->stages);
  ks_add(b, st, ks_mbar(b, KS_MBAR_ARRIVE, f->mb, bar, f->BQ * s->D * 2, NULL));
  kexpr *h = ke_cast(b, ke_add(b, ke_mul(b, f->kvh, ke_int(b, s->G)), ke_div(b, f->r0, ke_int(b, s->S))), KT_I32);
  kexpr *pos = ke_cast(b, ke_mod(b, f->r0, ke_int(b, s->S)), KT_I32);
  for (int64_t a = 0; a < s->D / 64; a++) {
    kexpr *coord[4];
    int rank = operand_coords(f, 0, h, pos, a, coord);
    ks_add(b, st, ks_tma_load(b, 2, f->sq, ke_int(b, a * f->BQ * 64), f->mb, bar, coord, rank));
  }
  return st;
}

/* tma: the K and V tiles of key tile `tile` into stage `slot` (the block's
 * first thread): arrive.expect_tx of their bytes on mb[slot], then a tensor
 * copy per 64-column atom (tile_at's layout is what the 128B swizzle writes). */
static kstmt *issue_kv(flash *f, kexpr *tile, kexpr *slot) {
  kbuilder *b = f->b;
  const qir_attention_shape *s = &f->s;
  kstmt *st = ks_seq(b);
  ks_add(b, st, ks_mbar(b, KS_MBAR_ARRIVE, f->mb, slot, f->BKV * (s->D + s->DV) * 2, NULL));
  kexpr *key0 = ke_cast(b, ke_mul(b, tile, ke_int(b, f->BKV)), KT_I32), *h = ke_cast(b, f->kvh, KT_I32);
  for (int kv = 0; kv < 2; kv++) {
    const pipe_tile *t = kv ? &f->tv : &f->tk;
    for (int64_t a = 0; a < (kv ? s->DV : s->D) / 64; a++) {
      kexpr *coord[4];
      int rank = operand_coords(f, 1 + kv, h, key0, a, coord);
      kexpr *at = ke_add(b, ke_mul(b, slot, ke_int(b, t->slot)), ke_int(b, a * t->outer * 64));
      ks_add(b, st, ks_tma_load(b, kv, kv ? f->sv : f->sk, at, f->mb, slot, coord, rank));
    }
  }
  return st;
}

/* wgmma: S = Q K^T for the warpgroup's 64 rows, D / 16 steps of k16, Q
 * (A) and K (B) both K-major from shared memory; the scores are read next,
 * so the wait retires them all. */
static kstmt *issue_scores(flash *f, const kwgmma *w, kvar *sacc, kexpr *slot, int64_t ksteps) {
  kbuilder *b = f->b;
  kvar *kk = kvar_new(b, f->k, "kk", KT_I32, 0, KV_BLOCK);
  kexpr *k16 = ke_var(b, kk), *atom = ke_div(b, k16, ke_int(b, 4)), *in_atom = ke_mul(b, ke_mod(b, k16, ke_int(b, 4)), ke_int(b, 16));
  /* Q: the warpgroup's 64 rows of atom kk / 4; K: the slot's keys of the same atom */
  kexpr *qrow = ke_mul(b, ke_div(b, ke_tid(b), ke_int(b, 128)), ke_int(b, 64));
  kexpr *qa = ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, atom, ke_int(b, f->BQ)), qrow), ke_int(b, 64)), in_atom);
  kexpr *ka = ke_add(b, ke_add(b, ke_mul(b, slot, ke_int(b, f->tk.slot)), ke_mul(b, atom, ke_int(b, f->BKV * 64))), in_atom);
  return unrolled(b, kk, ksteps, ks_wgmma(b, KS_WGMMA, w, sacc, ke_int(b, 0), f->sq, qa, f->sk, ka, 0), true);
}

static kstmt *wgmma_scores(flash *f, const kwgmma *w, kvar *sacc, kexpr *slot, int64_t ksteps) {
  kbuilder *b = f->b;
  kstmt *s = ks_seq(b);
  ks_add(b, s, ks_wgmma(b, KS_WGMMA_FENCE, w, sacc, NULL, NULL, NULL, NULL, NULL, 0));   /* the zeroed accumulators */
  ks_add(b, s, issue_scores(f, w, sacc, slot, ksteps));
  ks_add(b, s, ks_wgmma(b, KS_WGMMA_COMMIT, w, NULL, NULL, NULL, NULL, NULL, NULL, 0));
  ks_add(b, s, ks_wgmma(b, KS_WGMMA_WAIT, w, sacc, NULL, NULL, NULL, NULL, NULL, 0));
  return s;
}

/* wgmma: O += P V, P (A) from the registers the softmax packed (the score
 * accumulators' layout is the A fragment's: lower_attention's comment), V
 * (B) read MN-major from shared memory, one k16 step per 16 keys. */
static kstmt *issue_output(flash *f, const kwgmma *w, kvar *oacc, kvar *pa, kexpr *slot, int64_t ksteps) {
  kbuilder *b = f->b;
  kvar *kp = kvar_new(b, f->k, "kp", KT_I32, 0, KV_BLOCK);
  kexpr *va = ke_add(b, ke_mul(b, slot, ke_int(b, f->tv.slot)), ke_mul(b, ke_var(b, kp), ke_int(b, 16 * 64)));
  return unrolled(b, kp, ksteps, ks_wgmma(b, KS_WGMMA, w, oacc, ke_int(b, 0), pa, ke_mul(b, ke_var(b, kp), ke_int(b, 4)), f->sv, va, 0), true);
}

static kstmt *wgmma_output(flash *f, const kwgmma *w, kvar *oacc, kvar *pa, kexpr *slot, int64_t ksteps) {
  kbuilder *b = f->b;
  kstmt *s = ks_seq(b);
  ks_add(b, s, ks_wgmma(b, KS_WGMMA_FENCE, w, oacc, NULL, pa, NULL, NULL, NULL, 0));   /* P and the rescaled O written */
  ks_add(b, s, issue_output(f, w, oacc, pa, slot, ksteps));
  ks_add(b, s, ks_wgmma(b, KS_WGMMA_COMMIT, w, NULL, NULL, NULL, NULL, NULL, NULL, 0));
  ks_add(b, s, ks_wgmma(b, KS_WGMMA_WAIT, w, oacc, NULL, NULL, NULL, NULL, NULL, 0));
  return s;
}

static bool plan_int(const qir_attr_val *dict, const char *key, int at, int64_t *out) {
  const qir_attr_val *v = qir_attr_dict_get(dict, key);
  if (v && v->kind == QIR_ATTR_LIST) v = at < v->n ? &v->items[at] : NULL;
  else if (at > 0) v = NULL;
  if (!v || v->kind != QIR_ATTR_INT) return false;
  *out = v->i;
  return true;
}

static kkernel *fail(cg_ctx *cg, const qir_op *op, const char *why) {
  qir_error(cg->d, op->loc, "attention #tile flash plan: %s", why);
  return NULL;
}

/* The plan's common part (flash, stages, threads, splits) into f; *mma: it
 * names flash_mma (the matrix units), else the SIMT kernel. */
static bool read_plan(cg_ctx *cg, const qir_op *op, qir_value *partial, flash *f, int64_t *threads, bool *mma) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  if (!qir_attention_shape_of(op, &f->s)) return fail(cg, op, "the op is no 4-D attention of matching shapes");
  if (!plan_int(&tile->val, "flash", 0, &f->BQ) || !plan_int(&tile->val, "flash", 1, &f->BKV) ||
      !plan_int(&tile->val, "stages", 0, &f->stages) || !plan_int(&tile->val, "threads", 0, threads))
    return fail(cg, op, "it needs flash = [rows, keys], stages and threads");
  *mma = qir_attr_dict_get(&tile->val, "flash_mma") != NULL;
  if (*mma) {
    int64_t shape[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++)
      if (!plan_int(&tile->val, "flash_mma", i, &shape[i])) return fail(cg, op, "flash_mma must be [16, 8, 16] or [64, keys, 16]");
    f->wg = shape[0] == 64;
    if (!(shape[0] == 16 && shape[1] == 8 && shape[2] == 16) && !(shape[0] == 64 && shape[1] == f->BKV && shape[2] == 16))
      return fail(cg, op, "flash_mma must be [16, 8, 16] (mma.sync.m16n8k16) or [64, keys, 16] (wgmma.m64nNk16, N = the keys per step)");
  }
  if (f->BKV < 16 || f->BKV % 16 || f->BKV > 256) return fail(cg, op, "keys per step must be a multiple of 16 up to 256");
  if (f->stages < 2 || f->stages > 4) return fail(cg, op, "stages must be 2 to 4");
  f->splits = 1;
  if (qir_attr_dict_get(&tile->val, "splits") && (!plan_int(&tile->val, "splits", 0, &f->splits) || f->splits < 1))
    return fail(cg, op, "splits must be a positive integer");
  if ((f->splits > 1) != (partial != NULL)) return fail(cg, op, "internal: a split plan needs its partial results' buffer");
  return true;
}

/* The kernel: parameters out (the result, or a split plan's partial
 * results), q, k, v, bias; f->R, f->per_split, the grid. */
static kkernel *new_kernel(cg_ctx *cg, const qir_op *op, qir_value *partial, flash *f, int64_t threads, lower_env *env) {
  kbuilder *b = &cg->kb;
  qir_attention_cache cache[2];
  int n_params = 5;
  for (int kv = 0; kv < 2; kv++)
    if ((f->cache[kv] = qir_attention_operand_cache(op, 1 + kv, &cache[kv]))) {
      f->past_len[kv] = cache[kv].past_len;
      f->p_new[kv] = n_params++;
      f->p_present[kv] = n_params++;
    }
  kkernel *k = kkernel_new(b, qir_sprintf(cg->m, "k%d", cg->n_kernels), n_params);
  f->b = b;
  f->k = k;
  k->warp = cg->warp;
  k->threads = (int)threads;
  static const char *const names[5] = {"out", "q", "k", "v", "bias"};
  for (int i = 0; i < 5; i++) {
    qir_value *v = i ? op->operands[i - 1] : partial ? partial : op->results[0];
    qir_attention_view view;
    if (i >= 1 && i <= 3 && qir_attention_operand_view(op, i - 1, &view)) {   /* read in place: no copy of the slice */
      v = view.src;
      f->view[i - 1] = true;
      f->view_offset[i - 1] = view.offset;
      f->view_stride[i - 1] = view.row_stride;
    }
    if (i >= 2 && i <= 3 && f->cache[i - 2]) v = cache[i - 2].past;   /* the cache read in place */
    k->params[i] = (kparam){.name = names[i], .dtype = v->type.dtype, .numel = qir_type_numel(&v->type), .written = i == 0};
    k->args[i] = v;
  }
  for (int kv = 0; kv < 2; kv++) {
    if (!f->cache[kv]) continue;
    static const char *const cache_names[2][2] = {{"k_new", "k_present"}, {"v_new", "v_present"}};
    qir_value *nv = cache[kv].now, *pv = cache[kv].present;
    k->params[f->p_new[kv]] = (kparam){.name = cache_names[kv][0], .dtype = nv->type.dtype, .numel = qir_type_numel(&nv->type)};
    k->args[f->p_new[kv]] = nv;
    k->params[f->p_present[kv]] = (kparam){.name = cache_names[kv][1], .dtype = pv->type.dtype, .numel = qir_type_numel(&pv->type),
                                           .written = true};
    k->args[f->p_present[kv]] = pv;
  }
  kkernel_choose_index(b, k, f->s.T);
  *env = (lower_env){.cg = cg, .b = b, .k = k, .loc = op->loc};
  f->env = env;
  f->R = f->s.G * f->s.S;
  f->per_split = ceil_div(ceil_div(f->s.T, f->BKV), f->splits);
  k->grid = f->s.B * f->s.Hkv * ceil_div(f->R, f->BQ) * f->splits;
  return k;
}

/* The block's coordinates (f->split, kvh, bb, r0: lets) and its key tiles
 * [t_lo, t_hi): all, or up to its last row's diagonal under a causal mask,
 * or one split's share (expressions of the block index alone: the C printer
 * sees them uniform).  The last row tiles run first: under a causal mask
 * they walk the most keys. */
static void block_coords(flash *f, kexpr **t_lo, kexpr **t_hi) {
  kbuilder *b = f->b;
  const qir_attention_shape *s = &f->s;
  int64_t nqt = ceil_div(f->R, f->BQ), BKV = f->BKV;
  kexpr *bid = ke_bid(b), *split = ke_int(b, 0);
  if (f->splits > 1) {   /* split p of the keys: the fastest-moving coordinate */
    split = ke_mod(b, bid, ke_int(b, f->splits));
    bid = ke_div(b, bid, ke_int(b, f->splits));
  }
  f->split = split->kind == KE_INT ? split : ke_var(b, let(f->env, "split", split));
  kexpr *qt = ke_sub(b, ke_int(b, nqt - 1), ke_mod(b, bid, ke_int(b, nqt)));
  kexpr *rest = ke_div(b, bid, ke_int(b, nqt));
  f->kvh = ke_var(b, let(f->env, "kvh", ke_mod(b, rest, ke_int(b, s->Hkv))));
  f->bb = ke_var(b, let(f->env, "bb", ke_div(b, rest, ke_int(b, s->Hkv))));
  kexpr *r0 = ke_mul(b, qt, ke_int(b, f->BQ));
  f->r0 = ke_var(b, let(f->env, "r0", r0));
  kexpr *tiles = ke_int(b, ceil_div(s->T, BKV));
  if (s->causal) {
    kexpr *last = ke_sub(b, ke_min(b, ke_add(b, r0, ke_int(b, f->BQ)), ke_int(b, f->R)), ke_int(b, 1));
    kexpr *spans = ke_lt(b, ke_div(b, r0, ke_int(b, s->S)), ke_div(b, last, ke_int(b, s->S)));
    kexpr *imax = ke_pick(b, spans, ke_int(b, s->S - 1), ke_mod(b, last, ke_int(b, s->S)));
    kexpr *keys = ke_add(b, imax, ke_int(b, s->T - s->S + 1));
    kexpr *need = ke_div(b, ke_add(b, keys, ke_int(b, BKV - 1)), ke_int(b, BKV));
    tiles = ke_max(b, ke_int(b, 0), ke_min(b, need, tiles));
  }
  *t_lo = ke_cast(b, ke_mul(b, split, ke_int(b, f->per_split)), KT_I32);
  *t_hi = ke_cast(b, f->splits > 1 ? ke_min(b, tiles, ke_add(b, ke_mul(b, split, ke_int(b, f->per_split)), ke_int(b, f->per_split))) : tiles, KT_I32);
}

/* Score of a row (query head, position; valid: the row exists) and key from
 * its raw dot product x: scaled, softcapped, biased, and -inf past the last
 * key or the causal diagonal. */
static kexpr *score_of(flash *f, kexpr *x, kexpr *head, kexpr *pos, kexpr *valid, kexpr *key) {
  kbuilder *b = f->b;
  const qir_attention_shape *s = &f->s;
  x = ke_bin(b, QIR_FN_MUL, x, ke_float(b, s->scale, KT_F32), KT_F32);
  if (s->softcap > 0)
    x = ke_bin(b, QIR_FN_MUL, ke_float(b, s->softcap, KT_F32),
               ke_un(b, QIR_FN_TANH, ke_bin(b, QIR_FN_DIV, x, ke_float(b, s->softcap, KT_F32), KT_F32), KT_F32), KT_F32);
  if (s->has_bias) {
    const qir_type *bt = &f->k->args[4]->type;
    kexpr *coord[4] = {f->bb, idx_t(f, head), idx_t(f, pos), idx_t(f, key)};
    kexpr *flat = ke_int(b, 0);
    for (int a = 0, off = 4 - bt->rank; a < bt->rank; a++)
      flat = ke_add(b, ke_mul(b, flat, ke_int(b, bt->dims[a])), bt->dims[a] == 1 ? ke_int(b, 0) : coord[a + off]);
    kexpr *ok = ke_and(b, ke_lt(b, key, ke_int(b, s->T)), valid);
    x = ke_bin(b, QIR_FN_ADD, x, ke_select(b, ok, ke_load(b, f->k, 4, flat), ke_float(b, 0, KT_F32), KT_F32), KT_F32);
  }
  kexpr *masked = s->T % f->BKV ? ke_lt(b, ke_int(b, s->T - 1), key) : NULL;
  if (s->causal) {
    kexpr *past = ke_lt(b, ke_add(b, pos, ke_int(b, s->T - s->S)), key);
    masked = masked ? ke_bin(b, QIR_FN_OR, masked, past, KT_BOOL) : past;
  }
  return masked ? ke_select(b, masked, ke_float(b, -INFINITY, KT_F32), x, KT_F32) : x;
}

static kkernel *lower_attention_simt(cg_ctx *cg, const qir_op *op, qir_value *partial, flash *f, int64_t threads);

/* The matrix-unit kernels' registers: scores (n8 tiles of 4), the output,
 * P's A fragments, and each of the lane's two rows' running max, sum, new
 * max and correction. */
typedef struct {
  kvar *sacc, *oacc, *pa;
  kvar *m[2], *l[2], *mx[2], *corr[2];
  int64_t NS, NO, KP;
} flash_regs;

/* Scale, softcap, bias and mask the scores of key tile t; each row's new max over the quad. */
static void scores_max(flash *f, const flash_regs *r, kstmt *iter, kexpr *t) {
  kbuilder *b = f->b;
  kkernel *k = f->k;
  kvar *jn = kvar_new(b, k, "jn", KT_I32, 0, KV_LOCAL), *e = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kstmt *one = ks_seq(b);
  kexpr *at = ke_add(b, ke_mul(b, ke_var(b, jn), ke_int(b, 4)), ke_var(b, e));
  kexpr *key = ke_add(b, ke_add(b, ke_mul(b, t, ke_int(b, f->BKV)), ke_mul(b, ke_var(b, jn), ke_int(b, 8))),
                      ke_add(b, ke_mul(b, f->t4, ke_int(b, 2)), ke_mod(b, ke_var(b, e), ke_int(b, 2))));
  kvar *keyv = kvar_new(b, k, "key", KT_I32, 0, KV_LOCAL);
  ks_add(b, one, ks_decl(b, keyv, key));
  kexpr *kj = ke_var(b, keyv);
  kexpr *lo = ke_lt(b, ke_var(b, e), ke_int(b, 2));   /* registers 0, 1: row g; 2, 3: row g + 8 */
  kexpr *x = score_of(f, ke_elem(b, r->sacc, at), ke_pick(b, lo, f->head[0], f->head[1]), ke_pick(b, lo, f->pos[0], f->pos[1]),
                      ke_pick(b, lo, f->valid[0], f->valid[1]), kj);
  ks_add(b, one, ks_assign(b, r->sacc, at, x));
  for (int h = 0; h < 2; h++) {
    kexpr *grown = ke_bin(b, QIR_FN_MAX, ke_var(b, r->mx[h]), ke_elem(b, r->sacc, at), KT_F32);
    ks_add(b, one, ks_assign(b, r->mx[h], NULL, ke_pick(b, lo, h ? ke_var(b, r->mx[h]) : grown, h ? grown : ke_var(b, r->mx[h]))));
  }
  kstmt *pass = ks_seq(b);
  for (int h = 0; h < 2; h++) ks_add(b, pass, ks_assign(b, r->mx[h], NULL, ke_var(b, r->m[h])));
  ks_add(b, pass, unrolled(b, jn, r->NS, unrolled(b, e, 4, one, false), false));
  ks_add_flat(b, iter, pass);
  for (int h = 0; h < 2; h++) ks_add(b, iter, ks_warp_reduce(b, r->mx[h], QIR_FN_MAX, 4));
}

/* The online softmax's first half: each row's correction exp(m_old - m_new),
 * the new max, the old sum rescaled, P = exp(S - m) in the score registers
 * and the lane's share of the row sums. */
static void softmax_exp(flash *f, const flash_regs *r, kstmt *iter) {
  kbuilder *b = f->b;
  kkernel *k = f->k;
  kexpr *ninf = ke_float(b, -INFINITY, KT_F32), *zero = ke_float(b, 0, KT_F32);
  kstmt *pass = ks_seq(b);
  kexpr *base[2];
  for (int h = 0; h < 2; h++) {
    /* a row with nothing visible yet keeps m = -inf: subtract 0 (exp(-inf) = 0, no NaN) */
    kvar *bv = kvar_new(b, k, h ? "base1" : "base0", KT_F32, 0, KV_LOCAL);
    ks_add(b, pass, ks_decl(b, bv, ke_select(b, ke_bin(b, QIR_FN_EQ, ke_var(b, r->mx[h]), ninf, KT_BOOL), zero, ke_var(b, r->mx[h]), KT_F32)));
    base[h] = ke_var(b, bv);
    ks_add(b, pass, ks_assign(b, r->corr[h], NULL, ke_un(b, QIR_FN_EXP, ke_bin(b, QIR_FN_SUB, ke_var(b, r->m[h]), base[h], KT_F32), KT_F32)));
    ks_add(b, pass, ks_assign(b, r->m[h], NULL, ke_var(b, r->mx[h])));
    ks_add(b, pass, ks_assign(b, r->l[h], NULL, ke_bin(b, QIR_FN_MUL, ke_var(b, r->l[h]), ke_var(b, r->corr[h]), KT_F32)));
  }
  kvar *jn = kvar_new(b, k, "jn", KT_I32, 0, KV_LOCAL), *e = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kexpr *at = ke_add(b, ke_mul(b, ke_var(b, jn), ke_int(b, 4)), ke_var(b, e));
  kexpr *lo = ke_lt(b, ke_var(b, e), ke_int(b, 2));
  kstmt *one = ks_seq(b);
  kexpr *p = ke_un(b, QIR_FN_EXP, ke_bin(b, QIR_FN_SUB, ke_elem(b, r->sacc, at), ke_select(b, lo, base[0], base[1], KT_F32), KT_F32), KT_F32);
  ks_add(b, one, ks_assign(b, r->sacc, at, p));
  for (int h = 0; h < 2; h++)
    ks_add(b, one, ks_assign(b, r->l[h], NULL, ke_bin(b, QIR_FN_ADD, ke_var(b, r->l[h]),
                                                      ke_select(b, h ? lo : ke_lt(b, ke_int(b, 1), ke_var(b, e)), zero, ke_elem(b, r->sacc, at), KT_F32), KT_F32)));
  ks_add(b, pass, unrolled(b, jn, r->NS, unrolled(b, e, 4, one, false), false));
  ks_add_flat(b, iter, pass);
}

/* The second half: O *= corr, then P packed as A fragments (n8 tiles 2 kp
 * and 2 kp + 1 of the scores are the A fragment of key slice kp). */
static void rescale_pack(flash *f, const flash_regs *r, kstmt *iter) {
  kbuilder *b = f->b;
  kkernel *k = f->k;
  kstmt *pass = ks_seq(b);
  kvar *jd = kvar_new(b, k, "jd", KT_I32, 0, KV_LOCAL), *e2 = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kexpr *oat = ke_add(b, ke_mul(b, ke_var(b, jd), ke_int(b, 4)), ke_var(b, e2));
  kexpr *c = ke_select(b, ke_lt(b, ke_var(b, e2), ke_int(b, 2)), ke_var(b, r->corr[0]), ke_var(b, r->corr[1]), KT_F32);
  ks_add(b, pass, unrolled(b, jd, r->NO, unrolled(b, e2, 4, ks_assign(b, r->oacc, oat, ke_bin(b, QIR_FN_MUL, ke_elem(b, r->oacc, oat), c, KT_F32)), false), false));
  kvar *kp = kvar_new(b, k, "kp", KT_I32, 0, KV_LOCAL);
  kstmt *frag = ks_seq(b);
  for (int q = 0; q < 4; q++) {
    kexpr *src = ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, ke_var(b, kp), ke_int(b, 2)), ke_int(b, q / 2)), ke_int(b, 4)), ke_int(b, (q % 2) * 2));
    ks_add(b, frag, ks_assign(b, r->pa, ke_add(b, ke_mul(b, ke_var(b, kp), ke_int(b, 4)), ke_int(b, q)),
                              ke_pack16(b, ke_elem(b, r->sacc, src), ke_elem(b, r->sacc, ke_add(b, src, ke_int(b, 1))), f->s.dtype)));
  }
  ks_add(b, pass, unrolled(b, kp, r->KP, frag, false));
  ks_add_flat(b, iter, pass);
}

static kstmt *zero_scores(flash *f, const flash_regs *r) {
  kbuilder *b = f->b;
  kvar *i = kvar_new(b, f->k, "i", KT_I32, 0, KV_LOCAL);
  return unrolled(b, i, r->NS * 4, ks_assign(b, r->sacc, ke_var(b, i), ke_float(b, 0, KT_F32)), false);
}

/* A uniform loop of min(n, 1) trips: a block-level `if (n > 0)` (the C
 * printer runs block-level loops, not ifs, around collectives). */
static kstmt *if_any(flash *f, kexpr *n, kstmt *body) {
  kbuilder *b = f->b;
  kvar *once = kvar_new(b, f->k, "once", KT_I32, 0, KV_BLOCK);
  kstmt *l = ks_for(b, once, ke_int(b, 0), ke_min(b, n, ke_int(b, 1)), 1, body);
  l->uniform = true;
  return l;
}

/* wgmma with tensor copies: the walk of key tiles 0 .. n-1 (n = t_hi - t_lo),
 * P V of tile u - 1 in flight while the softmax of tile u runs (as
 * FlashAttention-3 overlaps them within a warpgroup).  Tile 0's scores and
 * softmax come first; step u (1 .. n-1) waits for its tile, issues S = Q K_u^T
 * and then O += P_{u-1} V_{u-1} (two groups), waits for the first, masks and
 * exponentiates S, waits for the second, rescales O and packs P_u; after a
 * barrier (every warpgroup's wait retired P V's reads of slot u - 1) the
 * block's first thread refills that slot with tile u - 1 + S.  The last
 * tile's P V follows the loop.  The prologue issued tiles 0 .. S-1. */
static void overlapped_walk(flash *f, const flash_regs *r, kstmt *body, kexpr *t_lo, kexpr *t_hi, const kwgmma *wqk,
                            const kwgmma *wpv, int64_t KQ) {
  kbuilder *b = f->b;
  kkernel *k = f->k;
  int64_t S = f->stages;
  kexpr *n = ke_sub(b, t_hi, t_lo);
  kexpr *first = ke_bin(b, QIR_FN_EQ, ke_tid(b), ke_int(b, 0), KT_BOOL);
  kstmt *head = ks_seq(b);
  ks_add(b, head, ks_mbar(b, KS_MBAR_WAIT, f->mb, ke_int(b, 0), 0, ke_int(b, 0)));
  ks_add(b, head, zero_scores(f, r));
  ks_add_flat(b, head, wgmma_scores(f, wqk, r->sacc, ke_int(b, 0), KQ));
  scores_max(f, r, head, t_lo);
  softmax_exp(f, r, head);
  rescale_pack(f, r, head);
  ks_add(b, body, if_any(f, n, head));

  kvar *uv = kvar_new(b, k, "u", KT_I32, 0, KV_BLOCK);
  kexpr *u = ke_var(b, uv), *prev = ke_sub(b, u, ke_int(b, 1));
  kexpr *slot = ke_mod(b, u, ke_int(b, S)), *prev_slot = ke_mod(b, prev, ke_int(b, S));
  kstmt *iter = ks_seq(b);
  ks_add(b, iter, ks_mbar(b, KS_MBAR_WAIT, f->mb, slot, 0, ke_mod(b, ke_div(b, u, ke_int(b, S)), ke_int(b, 2))));   /* tile u landed */
  ks_add(b, iter, zero_scores(f, r));
  ks_add(b, iter, ks_wgmma(b, KS_WGMMA_FENCE, wqk, r->sacc, NULL, r->pa, NULL, NULL, NULL, 0));
  ks_add(b, iter, ks_wgmma(b, KS_WGMMA_FENCE, wpv, r->oacc, NULL, NULL, NULL, NULL, NULL, 0));
  ks_add(b, iter, issue_scores(f, wqk, r->sacc, slot, KQ));
  ks_add(b, iter, ks_wgmma(b, KS_WGMMA_COMMIT, wqk, NULL, NULL, NULL, NULL, NULL, NULL, 0));
  ks_add(b, iter, issue_output(f, wpv, r->oacc, r->pa, prev_slot, r->KP));
  ks_add(b, iter, ks_wgmma(b, KS_WGMMA_COMMIT, wpv, NULL, NULL, NULL, NULL, NULL, NULL, 0));
  ks_add(b, iter, ks_wgmma(b, KS_WGMMA_WAIT, wqk, r->sacc, NULL, NULL, NULL, NULL, NULL, 1));   /* S landed; P V in flight */
  scores_max(f, r, iter, ke_add(b, t_lo, u));
  softmax_exp(f, r, iter);
  ks_add(b, iter, ks_wgmma(b, KS_WGMMA_WAIT, wpv, r->oacc, NULL, NULL, NULL, NULL, NULL, 0));   /* P V retired: O and P free */
  rescale_pack(f, r, iter);
  ks_add(b, iter, ks_barrier(b));   /* every warpgroup's P V of slot u - 1 retired */
  kexpr *next = ke_add(b, prev, ke_int(b, S));
  ks_add(b, iter, ks_if(b, ke_and(b, first, ke_lt(b, next, n)), issue_kv(f, ke_add(b, t_lo, next), prev_slot), NULL));
  kstmt *loop = ks_for(b, uv, ke_int(b, 1), n, 1, iter);
  loop->uniform = true;
  ks_add(b, body, loop);

  kstmt *tail = ks_seq(b);
  ks_add_flat(b, tail, wgmma_output(f, wpv, r->oacc, r->pa, ke_mod(b, ke_sub(b, n, ke_int(b, 1)), ke_int(b, S)), r->KP));
  ks_add(b, body, if_any(f, n, tail));
}

/* The walk one product at a time: step u (tile t_lo + u, slot u % S) waits for
 * its tiles (tensor copies: their mbarrier; cp.async: its group, then a
 * barrier), has the next tile issued into the slot step u - 1 used, then
 * computes the scores, the softmax and O += P V, each product waited for. */
static void plain_walk(flash *f, const flash_regs *r, kstmt *body, kexpr *t_lo, kexpr *t_hi, const kwgmma *wqk,
                       const kwgmma *wpv, kvar *qa, kvar *kb, int64_t KQ) {
  kbuilder *b = f->b;
  kkernel *k = f->k;
  int64_t S = f->stages;
  kexpr *first = ke_bin(b, QIR_FN_EQ, ke_tid(b), ke_int(b, 0), KT_BOOL);
  /* step u walks tile t = t_lo + u from slot u % S */
  kvar *uv = kvar_new(b, k, "u", KT_I32, 0, KV_BLOCK);
  kexpr *u = ke_var(b, uv), *t = ke_add(b, t_lo, u);
  kstmt *iter = ks_seq(b);
  if (f->tma) {
    /* every warpgroup's wgmma of the slot refilled next retired (their wait_group 0) */
    ks_add(b, iter, ks_barrier(b));
    kexpr *next = ke_add(b, t, ke_int(b, S - 1));
    ks_add(b, iter, ks_if(b, ke_and(b, first, ke_lt(b, next, t_hi)),
                          issue_kv(f, next, ke_mod(b, ke_add(b, u, ke_int(b, S - 1)), ke_int(b, S))), NULL));
    ks_add(b, iter, ks_mbar(b, KS_MBAR_WAIT, f->mb, ke_mod(b, u, ke_int(b, S)), 0,
                            ke_mod(b, ke_div(b, u, ke_int(b, S)), ke_int(b, 2))));   /* tile t landed */
  } else {
    ks_add(b, iter, ks_cp_wait(b, (int)S - 2));   /* else the copies were plain loads and stores */
    if (f->wg) ks_add(b, iter, ks_mbar(b, KS_FENCE_PROXY_ASYNC, NULL, NULL, 0, NULL));   /* the landed tile, for wgmma */
    ks_add(b, iter, ks_barrier(b));   /* tile t landed for all; every warp is done with the slot refilled next */
    kexpr *next = ke_add(b, t, ke_int(b, S - 1));
    kstmt *issue = ks_seq(b);
    for (int kind = TILE_K; kind <= TILE_V; kind++)
      ks_add(b, issue, copy_tile(f, (tile_kind)kind, ke_mul(b, idx_t(f, next), ke_int(b, f->BKV)),
                                 ke_mod(b, ke_add(b, u, ke_int(b, S - 1)), ke_int(b, S))));
    ks_add(b, iter, ks_if(b, ke_lt(b, next, t_hi), issue, NULL));
    ks_add(b, iter, ks_cp_commit(b));
  }
  kexpr *slot = ke_mod(b, u, ke_int(b, S));

  /* scores: S = Q K^T */
  ks_add(b, iter, zero_scores(f, r));
  if (f->wg) ks_add_flat(b, iter, wgmma_scores(f, wqk, r->sacc, slot, KQ));
  else ks_add(b, iter, mma_product(f, r->sacc, qa, kb, &f->tk, f->sk, slot, KQ, r->KP, false));

  scores_max(f, r, iter, t);
  softmax_exp(f, r, iter);
  rescale_pack(f, r, iter);

  /* O += P V */
  if (f->wg) ks_add_flat(b, iter, wgmma_output(f, wpv, r->oacc, r->pa, slot, r->KP));
  else ks_add(b, iter, mma_product(f, r->oacc, r->pa, kb, &f->tv, f->sv, slot, r->KP, f->s.DV / 16, true));
  kstmt *loop = ks_for(b, uv, ke_int(b, 0), ke_sub(b, t_hi, t_lo), 1, iter);
  loop->uniform = true;
  ks_add(b, body, loop);
}

kkernel *cg_lower_attention(cg_ctx *cg, const qir_op *op, qir_value *partial) {
  flash fl = {0}, *f = &fl;
  int64_t threads = 0;
  bool mma = false;
  if (!read_plan(cg, op, partial, f, &threads, &mma)) return NULL;
  if (!mma) return lower_attention_simt(cg, op, partial, f, threads);
  const qir_attention_shape *s = &f->s;
  if (f->BQ < 16 || f->BQ % 16 || f->BQ > 256 || threads != f->BQ / 16 * W)
    return fail(cg, op, "rows must be a multiple of 16 up to 256, a warp (32 threads) per 16");
  if (f->wg && (f->BQ % 64 || f->BQ > 128 || s->D % 64 || s->DV % 64))
    return fail(cg, op, "wgmma: rows must be 64 or 128 (a warpgroup per 64), head sizes multiples of 64");
  if ((s->dtype != QIR_F16 && s->dtype != QIR_BF16) || op->operands[1]->type.dtype != s->dtype ||
      op->operands[2]->type.dtype != s->dtype || op->results[0]->type.dtype != s->dtype)
    return fail(cg, op, "q, k, v and the result must all be f16 or all bf16");
  if (s->D % 16 || s->DV % 16 || s->D > 256 || s->DV > 256) return fail(cg, op, "head sizes must be multiples of 16 up to 256");
  if (cg->warp != W || cg->backend == CG_HIP)
    return fail(cg, op, "it needs mma.sync (CUDA, or C with 32-lane warps); plan HIP targets without it");
  f->async = true;   /* mma.sync targets have cp.async: the copies and the ring below use it */
  lower_env env;
  kkernel *k = new_kernel(cg, op, partial, f, threads, &env);
  kbuilder *b = f->b;
  k->min_blocks = 1;   /* as the mma pipeline: without the bound ptxas may cap registers and spill */
  f->warps = f->BQ / 16;
  int64_t nqt = ceil_div(f->R, f->BQ), all_tiles = ceil_div(s->T, f->BKV);
  int64_t D = s->D, DV = s->DV, S = f->stages, BKV = f->BKV;
  f->tq = pipe_tile_make(f->BQ, D, 2);
  f->tk = pipe_tile_make(BKV, D, 2);
  f->tv = pipe_tile_make(BKV, DV, 2);
  f->sq = kvar_new_raw_shared(b, k, "sq", s->dtype, f->tq.slot);
  f->sk = kvar_new_raw_shared(b, k, "sk", s->dtype, S * f->tk.slot);
  f->sv = kvar_new_raw_shared(b, k, "sv", s->dtype, S * f->tv.slot);
  kwgmma *wqk = NULL, *wpv = NULL;
  if (f->wg) {
    /* each tile on a 1024-byte boundary (the swizzle's period: tile_at); K-major 128B descriptors:
     * LBO unused, SBO 8 rows of 128 bytes; V read MN-major: LBO from one 64-column atom to the next */
    int64_t k_off = (kvar_bytes(f->sq) + 1023) / 1024 * 1024, v_off = k_off + (kvar_bytes(f->sk) + 1023) / 1024 * 1024;
    f->sq->carve = 1;
    f->sk->carve = 1 + k_off;
    f->sv->carve = 1 + v_off;
    k->carved_smem = true;
    k->smem_bytes = v_off + kvar_bytes(f->sv);
    k->sm90a = true;
    if ((f->tma = kv_tmaps(f))) {   /* a stage's mbarrier past the tiles */
      f->overlap = qir_attention_wgmma_overlaps(BKV, DV);
      f->mb = kvar_new(b, k, "mb", KT_U64, S + f->q_tma, KV_SHARED);
      int64_t m_off = (k->smem_bytes + 15) / 16 * 16;
      f->mb->carve = 1 + m_off;
      k->smem_bytes = m_off + kvar_bytes(f->mb);
      k->n_mbars = (int)(S + f->q_tma);
    }
    if (k->smem_bytes > WG_SMEM_MAX)
      return fail(cg, op, qir_sprintf(cg->m, "wgmma: its tiles need %" PRId64 " bytes of shared memory, more than a block's %d",
                                      k->smem_bytes, WG_SMEM_MAX));
    kwgmma_desc kmajor = {.lbo = 16, .sbo = 1024, .swizzle = 128};
    kwgmma_desc mnmajor = {.mn_major = true, .lbo = BKV * 128, .sbo = 1024, .swizzle = 128};
    wqk = qir_alloc(b->m, sizeof *wqk);
    wpv = qir_alloc(b->m, sizeof *wpv);
    *wqk = (kwgmma){.n = (int)BKV, .dtype = s->dtype, .a = kmajor, .b = kmajor, .wg_first = 0, .wg_count = (int)(f->BQ / 64)};
    *wpv = (kwgmma){.n = (int)DV, .dtype = s->dtype, .b = mnmajor, .a_regs = true, .wg_first = 0, .wg_count = (int)(f->BQ / 64)};
  }
  kexpr *t_lo, *t_hi;
  block_coords(f, &t_lo, &t_hi);
  f->lane = ke_var(b, let(&env, "lane", ke_mod(b, ke_tid(b), ke_int(b, W))));
  f->warp = ke_var(b, let(&env, "warp", ke_div(b, ke_tid(b), ke_int(b, W))));
  f->g = ke_div(b, f->lane, ke_int(b, 4));
  f->t4 = ke_mod(b, f->lane, ke_int(b, 4));
  for (int hr = 0; hr < 2; hr++) {
    kexpr *o = ke_add(b, ke_add(b, ke_mul(b, f->warp, ke_int(b, 16)), f->g), ke_int(b, 8 * hr)), *h, *i;
    row_coords(f, o, &h, &i);
    f->head[hr] = ke_var(b, let(&env, hr ? "h1" : "h0", h));
    f->pos[hr] = ke_var(b, let(&env, hr ? "i1" : "i0", i));
    f->valid[hr] = ke_lt(b, ke_add(b, f->r0, idx_t(f, o)), ke_int(b, f->R));
  }

  int64_t NS = BKV / 8, NO = DV / 8, KQ = D / 16, KP = BKV / 16;
  kvar *qa = f->wg ? NULL : kvar_new(b, k, "qa", KT_U32, KQ * 4, KV_THREAD);   /* wgmma reads Q from shared memory */
  kvar *kb = f->wg ? NULL : kvar_new(b, k, "kb", KT_U32, 4, KV_THREAD);
  kvar *pa = kvar_new(b, k, "pa", KT_U32, KP * 4, KV_THREAD);
  kvar *sacc = kvar_new(b, k, "sc", KT_F32, NS * 4, KV_THREAD);
  kvar *oacc = kvar_new(b, k, "oc", KT_F32, NO * 4, KV_THREAD);
  kvar *m[2], *l[2], *mx[2], *corr[2];
  for (int hr = 0; hr < 2; hr++) {
    m[hr] = kvar_new(b, k, hr ? "m1" : "m0", KT_F32, 0, KV_THREAD);
    l[hr] = kvar_new(b, k, hr ? "l1" : "l0", KT_F32, 0, KV_THREAD);
    mx[hr] = kvar_new(b, k, hr ? "mx1" : "mx0", KT_F32, 0, KV_THREAD);
    corr[hr] = kvar_new(b, k, hr ? "cr1" : "cr0", KT_F32, 0, KV_THREAD);
  }
  kstmt *body = k->body;
  kexpr *ninf = ke_float(b, -INFINITY, KT_F32), *zero = ke_float(b, 0, KT_F32);
  flash_regs rg = {.sacc = sacc, .oacc = oacc, .pa = pa, .NS = NS, .NO = NO, .KP = KP};
  for (int hr = 0; hr < 2; hr++) rg.m[hr] = m[hr], rg.l[hr] = l[hr], rg.mx[hr] = mx[hr], rg.corr[hr] = corr[hr];

  /* state; Q in shared memory, then in registers */
  {
    kvar *i = kvar_new(b, k, "i", KT_I32, 0, KV_LOCAL);
    kstmt *init = ks_seq(b);
    for (int hr = 0; hr < 2; hr++) {
      ks_add(b, init, ks_assign(b, m[hr], NULL, ninf));
      ks_add(b, init, ks_assign(b, l[hr], NULL, zero));
    }
    ks_add(b, init, unrolled(b, i, NO * 4, ks_assign(b, oacc, ke_var(b, i), zero), false));
    ks_add_flat(b, body, init);
    if (!f->q_tma) {
      ks_add(b, body, copy_tile(f, TILE_Q, NULL, ke_int(b, 0)));
      ks_add(b, body, ks_cp_commit(b));
      ks_add(b, body, ks_cp_wait(b, 0));
      if (f->wg) ks_add(b, body, ks_mbar(b, KS_FENCE_PROXY_ASYNC, NULL, NULL, 0, NULL));   /* cp.async wrote through the generic proxy */
    }
    if (f->tma) {   /* the stages' barriers (and Q's): one arrival (the copying thread's) a phase */
      kstmt *init = ks_seq(b);
      for (int64_t st = 0; st < S + f->q_tma; st++) ks_add(b, init, ks_mbar(b, KS_MBAR_INIT, f->mb, ke_int(b, st), 1, NULL));
      ks_add(b, init, ks_mbar(b, KS_MBAR_FENCE_INIT, f->mb, ke_int(b, 0), 0, NULL));
      ks_add(b, body, ks_if(b, ke_bin(b, QIR_FN_EQ, ke_tid(b), ke_int(b, 0), KT_BOOL), init, NULL));
    }
    ks_add(b, body, ks_barrier(b));
    if (!f->wg) {
      kvar *kk = kvar_new(b, k, "kk", KT_I32, 0, KV_BLOCK);
      kstmt *one = ldmatrix16(f, qa, ke_mul(b, ke_var(b, kk), ke_int(b, 4)), &f->tq, f->sq, ke_int(b, 0),
                              ke_mul(b, f->warp, ke_int(b, 16)), ke_mul(b, ke_var(b, kk), ke_int(b, 16)), true, false);
      ks_add(b, body, unrolled(b, kk, KQ, one, true));
    }
  }

  /* prologue: key tiles t_lo .. t_lo + S-2, a group each (empty past the last tile) */
  kexpr *first = ke_bin(b, QIR_FN_EQ, ke_tid(b), ke_int(b, 0), KT_BOOL);
  if (f->q_tma) ks_add(b, body, ks_if(b, first, issue_q(f), NULL));
  for (int64_t p = 0; p < (f->overlap ? S : S - 1); p++) {   /* the overlapped walk refills a slot a step later */
    kstmt *issue = ks_seq(b);
    kexpr *tile_p = ke_add(b, t_lo, ke_int(b, p));
    if (f->tma) {
      ks_add(b, body, ks_if(b, ke_and(b, first, ke_lt(b, tile_p, t_hi)), issue_kv(f, tile_p, ke_int(b, p)), NULL));
      continue;
    }
    for (int kind = TILE_K; kind <= TILE_V; kind++)
      ks_add(b, issue, copy_tile(f, (tile_kind)kind, ke_mul(b, idx_t(f, tile_p), ke_int(b, BKV)), ke_int(b, p)));
    ks_add(b, body, ks_if(b, ke_lt(b, tile_p, t_hi), issue, NULL));
    ks_add(b, body, ks_cp_commit(b));
  }

  if (f->q_tma) {   /* Q was issued with the prologue's copies; it lands before the first scores */
    ks_add(b, body, ks_mbar(b, KS_MBAR_WAIT, f->mb, ke_int(b, S), 0, ke_int(b, 0)));
  }
  if (f->overlap) overlapped_walk(f, &rg, body, t_lo, t_hi, wqk, wpv, KQ);
  else plain_walk(f, &rg, body, t_lo, t_hi, wqk, wpv, qa, kb, KQ);
  ks_add(b, body, ks_cp_wait(b, 0));

  /* y = O / l: the row sums over the quad, then each lane's values */
  for (int r = 0; r < 2; r++) ks_add(b, body, ks_warp_reduce(b, l[r], QIR_FN_ADD, 4));
  {
    kvar *jd = kvar_new(b, k, "jd", KT_I32, 0, KV_LOCAL), *e = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
    kexpr *lo = ke_lt(b, ke_var(b, e), ke_int(b, 2));
    kexpr *col = ke_add(b, ke_add(b, ke_mul(b, ke_var(b, jd), ke_int(b, 8)), ke_mul(b, f->t4, ke_int(b, 2))), ke_mod(b, ke_var(b, e), ke_int(b, 2)));
    kexpr *at = ke_add(b, ke_mul(b, ke_var(b, jd), ke_int(b, 4)), ke_var(b, e));
    kexpr *valid = ke_pick(b, lo, f->valid[0], f->valid[1]);
    kstmt *pass = ks_seq(b);
    if (partial) {
      /* a split's partial result per row: O unnormalised, then its max and sum (combined by the second kernel) */
      kexpr *row = ke_add(b, f->r0, idx_t(f, ke_add(b, ke_add(b, ke_mul(b, f->warp, ke_int(b, 16)), f->g), ke_select(b, lo, ke_int(b, 0), ke_int(b, 8), KT_I32))));
      kexpr *at_row = partial_row(f, f->split, row);
      kstmt *st = ks_if(b, valid, ks_store(b, 0, ke_add(b, at_row, idx_t(f, col)), ke_elem(b, oacc, at)), NULL);
      ks_add(b, pass, unrolled(b, jd, NO, unrolled(b, e, 4, st, false), false));
      for (int r = 0; r < 2; r++) {
        kexpr *rr = ke_add(b, f->r0, idx_t(f, ke_add(b, ke_add(b, ke_mul(b, f->warp, ke_int(b, 16)), f->g), ke_int(b, 8 * r))));
        kexpr *base = partial_row(f, f->split, rr);
        kstmt *two = ks_seq(b);
        ks_add(b, two, ks_store(b, 0, ke_add(b, base, ke_int(b, DV)), ke_var(b, m[r])));
        ks_add(b, two, ks_store(b, 0, ke_add(b, base, ke_int(b, DV + 1)), ke_var(b, l[r])));
        ks_add(b, pass, ks_if(b, ke_and(b, f->valid[r], ke_lt(b, f->t4, ke_int(b, 1))), two, NULL));
      }
    } else {
      kexpr *val = ke_bin(b, QIR_FN_DIV, ke_elem(b, oacc, at), ke_select(b, lo, ke_var(b, l[0]), ke_var(b, l[1]), KT_F32), KT_F32);
      kexpr *where = rows_index(f, ke_pick(b, lo, f->head[0], f->head[1]), ke_pick(b, lo, f->pos[0], f->pos[1]), col, s->Hq, s->S, DV);
      kstmt *st = ks_if(b, valid, ks_store(b, 0, where, val), NULL);
      ks_add(b, pass, unrolled(b, jd, NO, unrolled(b, e, 4, st, false), false));
    }
    ks_add_flat(b, body, pass);
  }

  int64_t most, skipped = (nqt * all_tiles - qir_attention_tiles_visited(s, f->BQ, BKV, &most)) * s->B * s->Hkv;
  char buf[512];
  snprintf(buf, sizeof buf,
           "flash attention, %s %s: %" PRId64 " rows x %" PRId64 " keys per step (%" PRId64 " warps), %" PRId64
           " stages, %" PRId64 " key tiles%s%s skipped %" PRId64 " of %" PRId64 "%s; heads %" PRId64 " on %" PRId64 " kv heads%s, %s; grid %" PRId64
           " threads %d smem %" PRId64 "B",
           !f->wg ? "mma.sync m16n8k16"
           : f->tma ? qir_sprintf(cg->m, "wgmma m64nNk16 (K and V tiles by TMA on a stage's mbarrier, Q by %s; P from registers, V MN-major%s)",
                                  f->q_tma ? "TMA" : "cp.async", f->overlap ? "; P V in flight during the next tile's softmax" : "")
                    : "wgmma m64nNk16 (Q, K and V tiles by cp.async; P from registers, V MN-major)",
           s->dtype == QIR_BF16 ? "bf16" : "f16", f->BQ, BKV, f->warps, S, all_tiles, s->causal ? ", causal:" : "",
           s->causal ? "" : ",", skipped, s->B * s->Hkv * nqt * all_tiles,
           f->splits > 1 ? qir_sprintf(cg->m, "; keys split %" PRId64 " ways (%" PRId64 " tiles each), partial results combined by the next kernel",
                                       f->splits, f->per_split) : "",
           s->Hq, s->Hkv, s->G > 1 ? " (grouped: each kv tile read once per group)" : "",
           layout_note(f), k->grid, k->threads, k->smem_bytes);
  k->summary = qir_strdup(b->m, buf);
  b->index_type = KT_I32;
  return cg_finish_kernel(cg, k, op->results[0], op, "attention", op->loc);
}

/* ---------------------------------------------------------------- SIMT
 *
 * Without the matrix units (f32 inputs; targets without mma.sync) the same
 * walk runs on the ordinary cores.  16 lanes share each group of TR rows:
 * lane c of the group computes the scores of keys c, c + 16, ... (TC of
 * them) and the output columns c, c + 16, ... (TO), so a row's max and sum
 * are reductions over 16 aligned lanes.  Q, K and V tiles live in shared
 * memory as f32 (copied 16 bytes at a time by cp.async where the input is
 * f32 and its rows whole chunks, converted element by element otherwise),
 * rows padded by 4 values; P goes through shared memory between the two
 * contractions. */
#define SIMT_GROUP 16
#define SIMT_MAX_ROWS 16

/* A copy of rows [0, outer) of a tile into a padded f32 slot: cp.async
 * chunks, or converted loads. */
static kstmt *copy_rows_f32(flash *f, tile_kind kind, kexpr *key0, kvar *smem, kexpr *slot, int64_t outer, int64_t inner,
                            int64_t ld, bool async) {
  kbuilder *b = f->b;
  kkernel *k = f->k;
  int64_t width = async ? 4 : 1, per_row = inner / width, total = outer * per_row;
  kvar *fv = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL);
  kvar *ov = kvar_new(b, k, "o", KT_I32, 0, KV_LOCAL), *cv = kvar_new(b, k, "c", KT_I32, 0, KV_LOCAL);
  kstmt *body = ks_seq(b);
  ks_add(b, body, ks_decl(b, ov, ke_div(b, ke_var(b, fv), ke_int(b, per_row))));
  ks_add(b, body, ks_decl(b, cv, ke_mul(b, ke_mod(b, ke_var(b, fv), ke_int(b, per_row)), ke_int(b, width))));
  kexpr *o = ke_var(b, ov), *c = ke_var(b, cv);
  kexpr *at = ke_add(b, ke_add(b, ke_mul(b, slot, ke_int(b, outer * ld)), ke_mul(b, o, ke_int(b, ld))), c);
  copy_elems(f, body, kind, key0, o, c, smem, at, (int)width, async, false);
  return ks_for(b, fv, ke_tid(b), ke_int(b, total), k->threads, body);
}

static kstmt *copy_tile_f32(flash *f, tile_kind kind, kexpr *key0, kvar *smem, kexpr *slot, int64_t outer, int64_t inner, int64_t ld) {
  kbuilder *b = f->b;
  kstmt *direct = copy_rows_f32(f, kind, key0, smem, slot, outer, inner, ld, false);
  if (!f->async || f->s.dtype != QIR_F32 || inner % 4) return direct;
  return ks_if(b, all_aligned(f), copy_rows_f32(f, kind, key0, smem, slot, outer, inner, ld, true), direct);
}

static kstmt *simt_loop(kbuilder *b, kvar *v, int64_t trips, kstmt *body) {
  kstmt *l = ks_for(b, v, ke_int(b, 0), ke_int(b, trips), 1, body);
  l->unroll = trips <= 16;
  return l;
}

/* acc[r * ny + c] += x[r] * y[c]: a lane's register tile, one step of a contraction. */
static kstmt *outer_fma(flash *f, kvar *acc, kvar *x, int64_t nx, kvar *y, int64_t ny) {
  kbuilder *b = f->b;
  kvar *r = kvar_new(b, f->k, "r", KT_I32, 0, KV_LOCAL), *c = kvar_new(b, f->k, "c", KT_I32, 0, KV_LOCAL);
  kexpr *at = ke_add(b, ke_mul(b, ke_var(b, r), ke_int(b, ny)), ke_var(b, c));
  kexpr *prod = ke_bin(b, QIR_FN_MUL, ke_elem(b, x, ke_var(b, r)), ke_elem(b, y, ke_var(b, c)), KT_F32);
  return simt_loop(b, r, nx, simt_loop(b, c, ny, ks_assign(b, acc, at, ke_bin(b, QIR_FN_ADD, ke_elem(b, acc, at), prod, KT_F32))));
}

static kkernel *lower_attention_simt(cg_ctx *cg, const qir_op *op, qir_value *partial, flash *f, int64_t threads) {
  const qir_attention_shape *s = &f->s;
  int64_t groups = threads / SIMT_GROUP;
  if (threads < SIMT_GROUP || threads % cg->warp || threads > 1024 || f->BQ % groups || f->BQ / groups > SIMT_MAX_ROWS)
    return fail(cg, op, "SIMT: threads must be whole warps, rows a multiple of threads / 16, at most 16 rows a lane");
  if (op->operands[1]->type.dtype != s->dtype || op->operands[2]->type.dtype != s->dtype || !qir_dtype_is_float(s->dtype))
    return fail(cg, op, "q, k and v must be floats of one type");
  lower_env env;
  kkernel *k = new_kernel(cg, op, partial, f, threads, &env);
  kbuilder *b = f->b;
  tile_plan tp = {0};
  simt_target_of(&env, &qir_op_attr(op, "tile")->val, &tp);
  f->async = tp.simt_async;
  int64_t D = s->D, DV = s->DV, S = f->stages, BKV = f->BKV, BQ = f->BQ;
  int64_t TR = BQ / groups, TC = BKV / SIMT_GROUP, TO = ceil_div(DV, SIMT_GROUP);
  /* a lane's last column may pass DV (DV not a multiple of 16): it reads 0 and stores nothing */
  int64_t ldq = (D + 3) / 4 * 4 + 4, ldv = (DV + 3) / 4 * 4 + 4, ldp = BKV + 4;
  kvar *sq = kvar_new(b, k, "sq", KT_F32, BQ * ldq, KV_SHARED);
  kvar *sk = kvar_new(b, k, "sk", KT_F32, S * BKV * ldq, KV_SHARED);
  kvar *sv = kvar_new(b, k, "sv", KT_F32, S * BKV * ldv, KV_SHARED);
  kvar *sp = kvar_new(b, k, "sp", KT_F32, BQ * ldp, KV_SHARED);
  kexpr *t_lo, *t_hi;
  block_coords(f, &t_lo, &t_hi);
  kexpr *grp = ke_var(b, let(&env, "grp", ke_div(b, ke_tid(b), ke_int(b, SIMT_GROUP))));
  kexpr *lane = ke_var(b, let(&env, "gl", ke_mod(b, ke_tid(b), ke_int(b, SIMT_GROUP))));
  kexpr *head[SIMT_MAX_ROWS], *pos[SIMT_MAX_ROWS], *valid[SIMT_MAX_ROWS], *rowo[SIMT_MAX_ROWS];
  kvar *m[SIMT_MAX_ROWS], *l[SIMT_MAX_ROWS], *mx[SIMT_MAX_ROWS], *corr[SIMT_MAX_ROWS];
  for (int64_t r = 0; r < TR; r++) {
    kexpr *h, *i;
    rowo[r] = ke_add(b, ke_mul(b, grp, ke_int(b, TR)), ke_int(b, r));   /* the block's row */
    row_coords(f, rowo[r], &h, &i);
    head[r] = ke_var(b, let(&env, "h", h));
    pos[r] = ke_var(b, let(&env, "i", i));
    valid[r] = ke_lt(b, ke_add(b, f->r0, idx_t(f, rowo[r])), ke_int(b, f->R));
    m[r] = kvar_new(b, k, "m", KT_F32, 0, KV_THREAD);
    l[r] = kvar_new(b, k, "l", KT_F32, 0, KV_THREAD);
    mx[r] = kvar_new(b, k, "mx", KT_F32, 0, KV_THREAD);
    corr[r] = kvar_new(b, k, "cr", KT_F32, 0, KV_THREAD);
  }
  kvar *sc = kvar_new(b, k, "sc", KT_F32, TR * TC, KV_THREAD);
  kvar *oc = kvar_new(b, k, "oc", KT_F32, TR * TO, KV_THREAD);
  kstmt *body = k->body;
  kexpr *ninf = ke_float(b, -INFINITY, KT_F32), *zero = ke_float(b, 0, KT_F32);
  {
    kstmt *init = ks_seq(b);
    for (int64_t r = 0; r < TR; r++) {
      ks_add(b, init, ks_assign(b, m[r], NULL, ninf));
      ks_add(b, init, ks_assign(b, l[r], NULL, zero));
    }
    kvar *i = kvar_new(b, k, "i", KT_I32, 0, KV_LOCAL);
    ks_add(b, init, simt_loop(b, i, TR * TO, ks_assign(b, oc, ke_var(b, i), zero)));
    ks_add_flat(b, body, init);
  }
  /* Q's tile with the first key tiles' group */
  ks_add(b, body, copy_tile_f32(f, TILE_Q, NULL, sq, ke_int(b, 0), BQ, D, ldq));
  for (int64_t p = 0; p < S - 1; p++) {
    kstmt *issue = ks_seq(b);
    kexpr *tile_p = ke_add(b, t_lo, ke_int(b, p)), *key0 = ke_mul(b, idx_t(f, tile_p), ke_int(b, BKV));
    ks_add(b, issue, copy_tile_f32(f, TILE_K, key0, sk, ke_int(b, p), BKV, D, ldq));
    ks_add(b, issue, copy_tile_f32(f, TILE_V, key0, sv, ke_int(b, p), BKV, DV, ldv));
    ks_add(b, body, ks_if(b, ke_lt(b, tile_p, t_hi), issue, NULL));
    if (f->async) ks_add(b, body, ks_cp_commit(b));
  }
  kvar *uv = kvar_new(b, k, "u", KT_I32, 0, KV_BLOCK);
  kexpr *u = ke_var(b, uv), *t = ke_add(b, t_lo, u), *slot = ke_mod(b, u, ke_int(b, S));
  kstmt *iter = ks_seq(b);
  if (f->async) ks_add(b, iter, ks_cp_wait(b, (int)S - 2));   /* else the copies were plain loads and stores */
  ks_add(b, iter, ks_barrier(b));   /* tile t landed (and Q); every thread is done with the slot refilled next and with P */
  {
    kexpr *next = ke_add(b, t, ke_int(b, S - 1)), *key0 = ke_mul(b, idx_t(f, next), ke_int(b, BKV));
    kexpr *nslot = ke_mod(b, ke_add(b, u, ke_int(b, S - 1)), ke_int(b, S));
    kstmt *issue = ks_seq(b);
    ks_add(b, issue, copy_tile_f32(f, TILE_K, key0, sk, nslot, BKV, D, ldq));
    ks_add(b, issue, copy_tile_f32(f, TILE_V, key0, sv, nslot, BKV, DV, ldv));
    ks_add(b, iter, ks_if(b, ke_lt(b, next, t_hi), issue, NULL));
    if (f->async) ks_add(b, iter, ks_cp_commit(b));
  }
  /* scores of the lane's rows and keys, scaled, biased, masked; the rows' new maxima */
  {
    kstmt *pass = ks_seq(b);
    kvar *qv = kvar_new(b, k, "qv", KT_F32, TR, KV_LOCAL), *kv = kvar_new(b, k, "kv", KT_F32, TC, KV_LOCAL);
    kvar *i = kvar_new(b, k, "i", KT_I32, 0, KV_LOCAL), *d = kvar_new(b, k, "d", KT_I32, 0, KV_LOCAL);
    kvar *r = kvar_new(b, k, "r", KT_I32, 0, KV_LOCAL), *c = kvar_new(b, k, "c", KT_I32, 0, KV_LOCAL);
    ks_add(b, pass, simt_loop(b, i, TR * TC, ks_assign(b, sc, ke_var(b, i), zero)));
    ks_add(b, pass, ks_decl(b, qv, NULL));
    ks_add(b, pass, ks_decl(b, kv, NULL));
    kstmt *step = ks_seq(b);
    kexpr *qrow = ke_add(b, ke_mul(b, grp, ke_int(b, TR)), ke_var(b, r));
    ks_add(b, step, simt_loop(b, r, TR, ks_assign(b, qv, ke_var(b, r), ke_elem(b, sq, ke_add(b, ke_mul(b, qrow, ke_int(b, ldq)), ke_var(b, d))))));
    kexpr *kloc = ke_add(b, ke_mul(b, ke_var(b, c), ke_int(b, SIMT_GROUP)), lane);
    kexpr *kat = ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, slot, ke_int(b, BKV)), kloc), ke_int(b, ldq)), ke_var(b, d));
    ks_add(b, step, simt_loop(b, c, TC, ks_assign(b, kv, ke_var(b, c), ke_elem(b, sk, kat))));
    ks_add(b, step, outer_fma(f, sc, qv, TR, kv, TC));
    ks_add(b, pass, ks_for(b, d, ke_int(b, 0), ke_int(b, D), 1, step));
    for (int64_t rr = 0; rr < TR; rr++) {
      ks_add(b, pass, ks_assign(b, mx[rr], NULL, ke_var(b, m[rr])));
      kvar *c3 = kvar_new(b, k, "c", KT_I32, 0, KV_LOCAL);
      kexpr *key = ke_add(b, ke_mul(b, t, ke_int(b, BKV)), ke_add(b, ke_mul(b, ke_var(b, c3), ke_int(b, SIMT_GROUP)), lane));
      kexpr *at3 = ke_add(b, ke_int(b, rr * TC), ke_var(b, c3));
      kstmt *one = ks_seq(b);
      ks_add(b, one, ks_assign(b, sc, at3, score_of(f, ke_elem(b, sc, at3), head[rr], pos[rr], valid[rr], key)));
      ks_add(b, one, ks_assign(b, mx[rr], NULL, ke_bin(b, QIR_FN_MAX, ke_var(b, mx[rr]), ke_elem(b, sc, at3), KT_F32)));
      ks_add(b, pass, simt_loop(b, c3, TC, one));
    }
    ks_add_flat(b, iter, pass);
    for (int64_t rr = 0; rr < TR; rr++) ks_add(b, iter, ks_warp_reduce(b, mx[rr], QIR_FN_MAX, SIMT_GROUP));
  }
  /* the online softmax: rescale; P = exp(S - m) into shared memory; the lane's share of the row sums */
  {
    kstmt *pass = ks_seq(b);
    for (int64_t rr = 0; rr < TR; rr++) {
      kvar *bv = kvar_new(b, k, "base", KT_F32, 0, KV_LOCAL);
      ks_add(b, pass, ks_decl(b, bv, ke_select(b, ke_bin(b, QIR_FN_EQ, ke_var(b, mx[rr]), ninf, KT_BOOL), zero, ke_var(b, mx[rr]), KT_F32)));
      ks_add(b, pass, ks_assign(b, corr[rr], NULL, ke_un(b, QIR_FN_EXP, ke_bin(b, QIR_FN_SUB, ke_var(b, m[rr]), ke_var(b, bv), KT_F32), KT_F32)));
      ks_add(b, pass, ks_assign(b, m[rr], NULL, ke_var(b, mx[rr])));
      ks_add(b, pass, ks_assign(b, l[rr], NULL, ke_bin(b, QIR_FN_MUL, ke_var(b, l[rr]), ke_var(b, corr[rr]), KT_F32)));
      kvar *c = kvar_new(b, k, "c", KT_I32, 0, KV_LOCAL), *pv = kvar_new(b, k, "pt", KT_F32, 0, KV_LOCAL);
      kstmt *one = ks_seq(b);
      ks_add(b, one, ks_decl(b, pv, ke_un(b, QIR_FN_EXP, ke_bin(b, QIR_FN_SUB, ke_elem(b, sc, ke_add(b, ke_int(b, rr * TC), ke_var(b, c))),
                                                                  ke_var(b, bv), KT_F32), KT_F32)));
      ks_add(b, one, ks_assign(b, l[rr], NULL, ke_bin(b, QIR_FN_ADD, ke_var(b, l[rr]), ke_var(b, pv), KT_F32)));
      kexpr *pat = ke_add(b, ke_mul(b, rowo[rr], ke_int(b, ldp)), ke_add(b, ke_mul(b, ke_var(b, c), ke_int(b, SIMT_GROUP)), lane));
      ks_add(b, one, ks_assign(b, sp, pat, ke_var(b, pv)));
      ks_add(b, pass, simt_loop(b, c, TC, one));
      kvar *o = kvar_new(b, k, "o", KT_I32, 0, KV_LOCAL);
      kexpr *oat = ke_add(b, ke_int(b, rr * TO), ke_var(b, o));
      ks_add(b, pass, simt_loop(b, o, TO, ks_assign(b, oc, oat, ke_bin(b, QIR_FN_MUL, ke_elem(b, oc, oat), ke_var(b, corr[rr]), KT_F32))));
    }
    ks_add_flat(b, iter, pass);
    ks_add(b, iter, ks_barrier(b));   /* P complete */
  }
  /* O += P V: the lane's rows, its columns */
  {
    kstmt *pass = ks_seq(b);
    kvar *pv = kvar_new(b, k, "pv", KT_F32, TR, KV_LOCAL), *vv = kvar_new(b, k, "vv", KT_F32, TO, KV_LOCAL);
    kvar *j = kvar_new(b, k, "j", KT_I32, 0, KV_LOCAL), *r = kvar_new(b, k, "r", KT_I32, 0, KV_LOCAL), *o = kvar_new(b, k, "o", KT_I32, 0, KV_LOCAL);
    ks_add(b, pass, ks_decl(b, pv, NULL));
    ks_add(b, pass, ks_decl(b, vv, NULL));
    kstmt *step = ks_seq(b);
    kexpr *prow = ke_add(b, ke_mul(b, grp, ke_int(b, TR)), ke_var(b, r));
    ks_add(b, step, simt_loop(b, r, TR, ks_assign(b, pv, ke_var(b, r), ke_elem(b, sp, ke_add(b, ke_mul(b, prow, ke_int(b, ldp)), ke_var(b, j))))));
    kexpr *vat = ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, slot, ke_int(b, BKV)), ke_var(b, j)), ke_int(b, ldv)),
                        ke_add(b, ke_mul(b, ke_var(b, o), ke_int(b, SIMT_GROUP)), lane));
    kexpr *vval = ke_elem(b, sv, vat);
    if (DV % SIMT_GROUP)
      vval = ke_select(b, ke_lt(b, ke_add(b, ke_mul(b, ke_var(b, o), ke_int(b, SIMT_GROUP)), lane), ke_int(b, DV)), vval, zero, KT_F32);
    ks_add(b, step, simt_loop(b, o, TO, ks_assign(b, vv, ke_var(b, o), vval)));
    ks_add(b, step, outer_fma(f, oc, pv, TR, vv, TO));
    ks_add(b, pass, ks_for(b, j, ke_int(b, 0), ke_int(b, BKV), 1, step));
    ks_add_flat(b, iter, pass);
  }
  kstmt *loop = ks_for(b, uv, ke_int(b, 0), ke_sub(b, t_hi, t_lo), 1, iter);
  loop->uniform = true;
  ks_add(b, body, loop);
  if (f->async) ks_add(b, body, ks_cp_wait(b, 0));
  for (int64_t rr = 0; rr < TR; rr++) ks_add(b, body, ks_warp_reduce(b, l[rr], QIR_FN_ADD, SIMT_GROUP));
  {
    kstmt *pass = ks_seq(b);
    for (int64_t rr = 0; rr < TR; rr++) {
      kvar *o = kvar_new(b, k, "o", KT_I32, 0, KV_LOCAL);
      kexpr *col = ke_add(b, ke_mul(b, ke_var(b, o), ke_int(b, SIMT_GROUP)), lane);
      kexpr *oat = ke_add(b, ke_int(b, rr * TO), ke_var(b, o));
      kstmt *st;
      if (partial) {
        kexpr *base = partial_row(f, f->split, ke_add(b, f->r0, idx_t(f, rowo[rr])));
        st = ks_store(b, 0, ke_add(b, base, idx_t(f, col)), ke_elem(b, oc, oat));
        kstmt *two = ks_seq(b);
        ks_add(b, two, ks_store(b, 0, ke_add(b, base, ke_int(b, DV)), ke_var(b, m[rr])));
        ks_add(b, two, ks_store(b, 0, ke_add(b, base, ke_int(b, DV + 1)), ke_var(b, l[rr])));
        ks_add(b, pass, ks_if(b, ke_and(b, valid[rr], ke_lt(b, lane, ke_int(b, 1))), two, NULL));
      } else {
        kexpr *where = rows_index(f, head[rr], pos[rr], col, s->Hq, s->S, DV);
        st = ks_store(b, 0, where, ke_bin(b, QIR_FN_DIV, ke_elem(b, oc, oat), ke_var(b, l[rr]), KT_F32));
      }
      if (DV % SIMT_GROUP) st = ks_if(b, ke_lt(b, col, ke_int(b, DV)), st, NULL);
      ks_add(b, pass, ks_if(b, valid[rr], simt_loop(b, o, TO, st), NULL));
    }
    ks_add_flat(b, body, pass);
  }
  int64_t all_tiles = ceil_div(s->T, BKV), nqt = ceil_div(f->R, BQ), most;
  int64_t skipped = nqt * all_tiles - qir_attention_tiles_visited(s, BQ, BKV, &most);
  k->summary = qir_sprintf(cg->m,
                           "flash attention, SIMT %s: %" PRId64 " rows x %" PRId64 " keys per step, %" PRId64 " stages, 16 lanes per %" PRId64
                           " rows (%" PRId64 " scores, %" PRId64 " outputs each), %" PRId64 " key tiles%s skipped %" PRId64 " of %" PRId64 "%s; heads %" PRId64
                           " on %" PRId64 " kv heads, %s; grid %" PRId64 " threads %d smem %" PRId64 "B",
                           qir_dtype_name(s->dtype), BQ, BKV, S, TR, TR * TC, TR * TO, all_tiles, s->causal ? ", causal:" : ",",
                           skipped * s->B * s->Hkv, s->B * s->Hkv * nqt * all_tiles,
                           f->splits > 1 ? qir_sprintf(cg->m, "; keys split %" PRId64 " ways", f->splits) : "", s->Hq, s->Hkv,
                           layout_note(f), k->grid, k->threads, k->smem_bytes);
  b->index_type = KT_I32;
  return cg_finish_kernel(cg, k, op->results[0], op, "attention", op->loc);
}

/* The second kernel of a split plan (flash-decoding): per output element,
 * the splits' partial results combined, each weighted by exp(m_p - M) with
 * M the largest of their maxima: y = sum_p w_p O_p / sum_p w_p l_p. */
kkernel *cg_lower_attention_combine(cg_ctx *cg, const qir_op *op, qir_value *partial) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  flash fl = {0}, *f = &fl;
  if (!qir_attention_shape_of(op, &f->s)) return fail(cg, op, "the op is no 4-D attention of matching shapes");
  const qir_attention_shape *s = &f->s;
  if (!plan_int(&tile->val, "splits", 0, &f->splits) || f->splits < 2) return fail(cg, op, "internal: no splits to combine");
  f->R = s->G * s->S;
  kbuilder *b = &cg->kb;
  kkernel *k = kkernel_new(b, qir_sprintf(cg->m, "k%d", cg->n_kernels), 2);
  f->b = b;
  f->k = k;
  k->params[0] = (kparam){.name = "out", .dtype = op->results[0]->type.dtype, .numel = qir_type_numel(&op->results[0]->type), .written = true};
  k->args[0] = op->results[0];
  k->params[1] = (kparam){.name = "part", .dtype = partial->type.dtype, .numel = qir_type_numel(&partial->type)};
  k->args[1] = partial;
  kkernel_choose_index(b, k, 0);
  lower_env env = {.cg = cg, .b = b, .k = k, .loc = op->loc};
  f->env = &env;
  int64_t N = k->params[0].numel, DV = s->DV;
  k->threads = 256;
  k->grid = ceil_div(N, 256);
  kexpr *e = ke_var(b, let(&env, "e", ke_add(b, ke_mul(b, ke_bid(b), ke_int(b, 256)), idx_t(f, ke_tid(b)))));
  /* y's coordinates from its flat index, in its layout */
  kexpr *c = ke_mod(b, e, ke_int(b, DV)), *rest = ke_div(b, e, ke_int(b, DV)), *h, *i;
  if (s->bshd) {
    h = ke_mod(b, rest, ke_int(b, s->Hq));
    rest = ke_div(b, rest, ke_int(b, s->Hq));
    i = ke_mod(b, rest, ke_int(b, s->S));
  } else {
    i = ke_mod(b, rest, ke_int(b, s->S));
    rest = ke_div(b, rest, ke_int(b, s->S));
    h = ke_mod(b, rest, ke_int(b, s->Hq));
  }
  kexpr *bb = ke_div(b, rest, ke_int(b, s->bshd ? s->S : s->Hq));
  kexpr *kvh = ke_div(b, h, ke_int(b, s->G));
  kexpr *row = ke_add(b, ke_mul(b, ke_mod(b, h, ke_int(b, s->G)), ke_int(b, s->S)), i);
  kstmt *work = ks_seq(b);
  kvar *M = kvar_new(b, k, "mx", KT_F32, 0, KV_LOCAL), *L = kvar_new(b, k, "sum", KT_F32, 0, KV_LOCAL);
  kvar *acc = kvar_new(b, k, "acc", KT_F32, 0, KV_LOCAL), *pv = kvar_new(b, k, "pt", KT_I32, 0, KV_LOCAL);
  kvar *base = kvar_new(b, k, "base", KT_F32, 0, KV_LOCAL), *w = kvar_new(b, k, "w", KT_F32, 0, KV_LOCAL);
  kexpr *at = partial_at(f, bb, kvh, ke_var(b, pv), row);
  ks_add(b, work, ks_decl(b, M, ke_float(b, -INFINITY, KT_F32)));
  ks_add(b, work, ks_for(b, pv, ke_int(b, 0), ke_int(b, f->splits), 1,
                         ks_assign(b, M, NULL, ke_bin(b, QIR_FN_MAX, ke_var(b, M), ke_load(b, k, 1, ke_add(b, at, ke_int(b, DV))), KT_F32))));
  /* every split empty (no key visible): the weights are 0, y is 0 / 0 as the softmax of nothing */
  ks_add(b, work, ks_decl(b, base, ke_select(b, ke_bin(b, QIR_FN_EQ, ke_var(b, M), ke_float(b, -INFINITY, KT_F32), KT_BOOL),
                                             ke_float(b, 0, KT_F32), ke_var(b, M), KT_F32)));
  ks_add(b, work, ks_decl(b, L, ke_float(b, 0, KT_F32)));
  ks_add(b, work, ks_decl(b, acc, ke_float(b, 0, KT_F32)));
  kstmt *one = ks_seq(b);
  ks_add(b, one, ks_decl(b, w, ke_un(b, QIR_FN_EXP, ke_bin(b, QIR_FN_SUB, ke_load(b, k, 1, ke_add(b, at, ke_int(b, DV))), ke_var(b, base), KT_F32), KT_F32)));
  ks_add(b, one, ks_assign(b, L, NULL, ke_bin(b, QIR_FN_ADD, ke_var(b, L), ke_bin(b, QIR_FN_MUL, ke_var(b, w), ke_load(b, k, 1, ke_add(b, at, ke_int(b, DV + 1))), KT_F32), KT_F32)));
  ks_add(b, one, ks_assign(b, acc, NULL, ke_bin(b, QIR_FN_ADD, ke_var(b, acc), ke_bin(b, QIR_FN_MUL, ke_var(b, w), ke_load(b, k, 1, ke_add(b, at, idx_t(f, c))), KT_F32), KT_F32)));
  ks_add(b, work, ks_for(b, pv, ke_int(b, 0), ke_int(b, f->splits), 1, one));
  ks_add(b, work, ks_store(b, 0, e, ke_bin(b, QIR_FN_DIV, ke_var(b, acc), ke_var(b, L), KT_F32)));
  ks_add(b, k->body, N % 256 ? ks_if(b, ke_lt(b, e, ke_int(b, N)), work, NULL) : work);
  k->summary = qir_sprintf(cg->m, "flash-decoding combine: %" PRId64 " splits of the keys per output, weighted by exp(max_p - max); grid %" PRId64 " threads 256",
                           f->splits, k->grid);
  b->index_type = KT_I32;
  return cg_finish_kernel(cg, k, op->results[0], op, "attention", op->loc);
}
