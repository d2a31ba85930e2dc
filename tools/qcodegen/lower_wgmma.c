/* lower_wgmma.c: Hopper's main loop of a contraction (sm_90a), from a #tile
 * plan with mma = [64, N, 16] (qopt -roller writes them for the h100 and h200
 * targets).  The body is what lower_mma.c takes (mma_analyse): K in steps of
 * 64, every other reduction axis (a convolution's window) in steps of one.
 *
 *   - Warpgroups.  C = block[M] / thread[M] consumer warpgroups (1 or 2), then
 *     one producer warpgroup (the last: the C back end runs threads in order,
 *     and the producer must see the consumers' releases of a stage before it
 *     refills it).  Consumer c owns thread[M] = 64 or 128 rows of the block
 *     (one or two m64 tiles) and all its N = block[N] columns: N / 2 f32
 *     accumulators per thread and tile.
 *   - Stages.  A ring of `stages` slots of 64 of K: A's block[M] x 64 and B's
 *     64 x block[N], each in 128-byte rows with the 128B swizzle, every slot
 *     and atom on a 1024-byte boundary, K-major (K contiguous: rows along M or
 *     N) or MN-major (64-wide atoms of 64 rows of K; wgmma's imm-trans).
 *   - Copies.  An operand a tensor map can copy (qir_tma_view_of: a window's
 *     taps and offsets shift the coordinates, its padding mask is the copy's
 *     zero fill, a stride the map's traversal stride) comes by
 *     cp.async.bulk.tensor from the producer's first thread, one copy per
 *     slot or per atom; any other (rows no map can stride, a stride along the
 *     contiguous dimension) by the producer warpgroup's 128 threads, each
 *     storing its share where the swizzle puts it, then fence.proxy.async.
 *   - Bands (mma_axes [M, N, K, M2]).  block[M] is all of M and block[M2]
 *     rows of another output axis A's map walks (an NHWC image's rows, or its
 *     batch): the M tile is their block[M] x block[M2] rows in the map's
 *     order, one box a stage; the rows past them are zeroed once (fenced),
 *     the epilogue maps each row back (band_point).
 *   - Barriers.  full[s]: an arrival per copying producer thread (the first's
 *     is arrive.expect_tx of the tensor copies' bytes, which complete its
 *     transactions); empty[s]: lane 0 of each consumer warp, once the wgmma
 *     reading the slot retired.
 *   - Loop.  Step t: the consumers wait for full[t % S] (parity (t / S) & 1),
 *     issue four wgmma per m64 tile (K = 64) from the slot's descriptors,
 *     commit, and wait until one group is in flight: step t-1's wgmma retired,
 *     so they release its slot on empty[(t-1) % S]; the producer waits for
 *     that release and refills the slot with step t-1+S.  The prologue fills
 *     slots 0 .. S-1.
 *   - Epilogue.  After wait_group 0 each consumer thread stores its
 *     accumulators where the PTX ISA puts them (row 16w + g + 8h, column
 *     8j + 2q + e), plus the bias, through the group's epilogue.
 *   - Persistent blocks (#tile persistent = P, fewer than the tiles): P
 *     blocks, block b computing tiles b, b + P, ...; the ring's step count
 *     runs on across its tiles (step g: tile b + P (g / steps), its step
 *     g % steps), so the producer copies the next tile's first stages while
 *     the consumers finish a tile and store it, and a tile's pipeline fill is
 *     paid once a block rather than once a tile.  The consumers release a
 *     tile's last slot at the next tile's first step, as any other.
 *   - Two bodies of the same statements: the GPU's is two role branches of one
 *     if (producer, consumers; setmaxnreg 40 / 232 with two consumers), C's
 *     interleaves them in one loop, which the C printer runs with the
 *     instructions emulated (runtime/ mbarrier.h, tma.h, wgmma.h): copies land
 *     when their phase is found complete and wgmma run at the wait that
 *     retires them. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lower.h"

#define WG_THREADS 128
#define WG_BK 64                /* K per stage: one 128-byte swizzle row of 16-bit values */
#define WG_ATOM_ELEMS 4096      /* an MN-major atom: 64 of M or N by 64 of K (8 KiB) */
#define WG_SWIZZLE 128

typedef struct {
  const mma_operand *op;
  qir_tma_view view;
  bool generic;                 /* copied by the producer warpgroup's ordinary loads and stores (a
                                 * window, a padding mask, rows a tensor map cannot stride) */
  bool mn_major;                /* contiguous along M (A) or N (B) in shared memory: imm-trans 1 */
  int mn_var, k_var;            /* compute variables of its M or N, and of K */
  int64_t mn;                   /* the tile's extent along M or N (rows computed: a band's, rounded up) */
  int m2_var;                   /* A of a band: M's outer axis, its box band_rows; else -1 */
  int64_t box_mn, box_m2;       /* a band's box: all of M, block[M2] rows of M2 */
  bool m2_inner;                /* a band's M2 is the map's inner dimension of the two: rows M-major */
  int64_t slot;                 /* elements per stage: mn * 64 */
  int tmap;                     /* its tensor map (one per operand) */
  int64_t copies;               /* tensor copies per stage: 1, or mn / 64 atoms */
} wg_operand;

/* A tensor map's copy where the read allows one; else the producer warpgroup's
 * loads, laid out MN-major where the operand's innermost index moves with M or N
 * (coalesced reads) and the tile is whole 64-wide atoms, K-major otherwise. */
static void setup_operand(lower_env *env, const mma_operand *op, const mma_operand *other, bool is_b, int mn_var, int k_var, int64_t mn,
                          wg_operand *w) {
  const qir_compute *c = env->comp;
  const char *why;
  *w = (wg_operand){.op = op, .mn_var = mn_var, .k_var = k_var, .mn = mn, .slot = mn * WG_BK, .m2_var = -1, .box_mn = mn};
  uint64_t stepped = 0;   /* the other reduction axes: a step each */
  for (int v = c->n_axes; v < c->n_axes + c->n_red && v < 64; v++)
    if (v != k_var) stepped |= (uint64_t)1 << v;
  /* a padding mask of this operand alone is the copy's zero fill outside the tensor */
  bool tma = !(op->mask && other->mask) &&
             qir_tma_view_of(c, op->access, &env->args[op->access->operand]->type, op->mask, stepped, -1, &w->view, &why);
  if (tma && w->view.var[0] != mn_var && w->view.var[0] != k_var) tma = false;   /* contiguous along another axis */
  if (tma && w->view.var[0] == mn_var && mn % 64) tma = false;                     /* MN-major copies whole atoms */
  /* a box traverses at most 256 elements a dimension: a strided one, estride x what it copies */
  for (int d = 0; tma && d < w->view.rank; d++) {
    int v = w->view.var[d];
    int64_t copied = d == 0 ? 64 : v == k_var ? WG_BK : v == mn_var ? mn : 1;
    tma = copied * w->view.estride[d] <= 256;
  }
  if (!tma) {
    w->generic = true;
    w->mn_major = (is_b ? !op->col_major : op->col_major) && mn % 64 == 0;
    return;
  }
  w->mn_major = w->view.var[0] == mn_var;
  w->copies = w->mn_major ? mn / 64 : 1;
}

/* A band's A: K-major by a tensor map whose box is all of M (block[M] = M's
 * extent: the rows of the band follow each other without gaps) by
 * block[M2] rows of M2, one copy per stage, its rows in the map's order (the
 * outer of the two dimensions slower); B does not move with M2. */
static bool band_operand(lower_env *env, wg_operand *a, int m2, int64_t W, int64_t R, bool b_moves) {
  const qir_compute *c = env->comp;
  int dim_m = -1, dim_m2 = -1;
  for (int d = 0; !a->generic && d < a->view.rank; d++) {
    if (a->view.var[d] == m2) dim_m2 = d;
    if (a->view.var[d] == a->mn_var) dim_m = d;
  }
  if (a->generic || a->mn_major || dim_m2 < 0 || dim_m < 0 || b_moves || W != c->axis_extents[a->mn_var] || W * R > a->mn ||
      W * a->view.estride[dim_m] > 256 || R * a->view.estride[dim_m2] > 256) {
    qir_error(env->cg->d, env->loc,
              "#tile mma_axes [M, N, K, M2] (a band of rows) needs A K-major by a tensor map walking M and M2, B not moving "
              "with M2, and block[M] all of M");
    env->failed = true;
    return false;
  }
  a->m2_var = m2;
  a->m2_inner = dim_m2 < dim_m;
  a->box_mn = W;
  a->box_m2 = R;
  a->copies = 1;
  return true;
}

/* The operand's tensor map: the box is 64 along its contiguous variable,
 * the tile's rows along the other tile variable, 1 elsewhere (a batch, or
 * another reduction axis, which a step walks one at a time). */
static void add_tmap(kkernel *k, wg_operand *w) {
  ktmap *m = &k->tmaps[k->n_tmaps];
  m->param = 1 + w->op->access->operand;
  m->rank = w->view.rank;
  m->swizzle = WG_SWIZZLE;
  for (int d = 0; d < m->rank; d++) {
    int v = w->view.var[d];
    m->dims[d] = w->view.dims[d];
    m->strides[d] = w->view.strides[d];
    int64_t copied = d == 0 ? 64 : v == w->k_var ? WG_BK : v == w->mn_var ? w->box_mn : v == w->m2_var && v >= 0 ? w->box_m2 : 1;
    m->estride[d] = w->view.estride[d] > 0 ? w->view.estride[d] : 1;
    m->box[d] = copied * m->estride[d];   /* a strided window traverses estride x what it copies */
  }
  w->tmap = k->n_tmaps++;
}

typedef struct {
  lower_env *env;
  const tile_plan *p;
  wg_operand a, b;
  kvar *sa, *sb, *mb, *acc;
  kexpr *blo[MAX_AXES];
  int S;
  int64_t tma_bytes;            /* per stage, the operands copied by tensor maps */
  int64_t C, MW, steps;         /* consumer warpgroups, m64 tiles each; steps (K by 64, other reduction axes by 1) */
  int64_t count[MAX_AXES];      /* steps per reduction axis */
  int producers;                /* producer threads that copy: 128 with an operand by loads, else 1 */
  const qir_expr *bias;
  const kwgmma *w;
  kvar *se;                     /* the epilogue's staging tiles (epilogue_staged), or NULL */
  int m2;                       /* a band's outer axis of M (mma_axes[3]), or -1 */
  int64_t band_rows;            /* a band: the rows it computes, block[M] x block[M2] (the rest of
                                 * the C x MW m64 tiles are zeros) */
  int64_t P;                    /* persistent blocks (#tile persistent), or 0: a block a tile */
  int64_t nb[MAX_AXES];         /* tiles along each output axis */
  kexpr *turns;                 /* persistent: the tiles this block computes */
  kexpr *total;                 /* the steps this block runs: `steps`, or steps x turns */
} wg;

/* The origin of output tile `tile` (row-major over nb) in blo. */
static void tile_origin(wg *g, kexpr *tile, kexpr **blo) {
  kbuilder *b = g->env->b;
  int n = g->env->comp->n_axes;
  kexpr *bc[MAX_AXES];
  decompose(g->env, tile, g->nb, n, bc);
  for (int d = 0; d < n; d++) blo[d] = ke_mul(b, bc[d], ke_int(b, g->p->block[d]));
}

/* Persistent blocks: the tile of this block's i-th turn (b + P i). */
static kexpr *turn_tile(wg *g, kexpr *i) {
  kbuilder *b = g->env->b;
  return ke_add(b, ke_bid(b), ke_mul(b, i, ke_int(b, g->P)));
}

/* Row `row` of the block's M (of the m64 tiles) as output coordinates: its
 * point along M in *gm (declared in st), and in blo2 the block's origin with a
 * band's row along M2; returns the guard a band needs (the row within it, M2
 * within the tensor), or NULL. */
static kexpr *band_point(wg *g, kstmt *st, kexpr *row, kvar *gm, kexpr **blo2) {
  lower_env *env = g->env;
  kbuilder *b = env->b;
  int vm = g->p->mma_m, n = env->comp->n_axes;
  for (int d = 0; d < n; d++) blo2[d] = g->blo[d];
  if (g->m2 < 0) {
    ks_add(b, st, ks_decl(b, gm, ke_add(b, g->blo[vm], ke_cast(b, row, b->index_type))));
    return NULL;
  }
  int64_t W = g->p->block[vm], R = g->p->block[g->m2];
  kvar *gh = kvar_new(b, env->k, "gh", b->index_type, 0, KV_LOCAL);
  kexpr *m_at = g->a.m2_inner ? ke_div(b, row, ke_int(b, R)) : ke_mod(b, row, ke_int(b, W));
  kexpr *m2_at = g->a.m2_inner ? ke_mod(b, row, ke_int(b, R)) : ke_div(b, row, ke_int(b, W));
  ks_add(b, st, ks_decl(b, gm, ke_cast(b, m_at, b->index_type)));
  ks_add(b, st, ks_decl(b, gh, ke_add(b, g->blo[g->m2], ke_cast(b, m2_at, b->index_type))));
  blo2[g->m2] = ke_var(b, gh);
  kexpr *guard = g->band_rows < g->C * g->MW * 64 ? ke_lt(b, row, ke_int(b, g->band_rows)) : NULL;
  if (env->comp->axis_extents[g->m2] % R) guard = ke_and(b, guard, ke_lt(b, ke_var(b, gh), ke_int(b, env->comp->axis_extents[g->m2])));
  return guard;
}

/* Points env->vars at step `step`'s origin (the other reduction axes
 * outermost, K innermost; the output axes at the block's) and returns K's. */
static kexpr *step_origin(wg *g, kexpr *step) {
  lower_env *env = g->env;
  int n = env->comp->n_axes, ka = g->p->mma_k;
  for (int d = 0; d < n; d++) env->vars[d] = g->blo[d];
  return env->vars[n + ka] = mma_step_origin(env, ka, g->count, WG_BK, step);
}

/* The producer thread p's share of an operand's tile by loads: elements p,
 * p + 128, ... of the slot, each read where the operand says (zero outside
 * the tensor or the mask) and stored where the 128B swizzle puts it, as a
 * tensor copy would: K-major, row r (of M or N) chunk c of 8 at chunk
 * c ^ (r % 8); MN-major, atom a of 64, row k, chunk c at chunk c ^ (k % 8). */
static kstmt *copy_by_loads(wg *g, const wg_operand *w, kvar *dst, kexpr *slot, kexpr *k0, kexpr *p) {
  lower_env *env = g->env;
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const mma_operand *op = w->op;
  bool is_b = w == &g->b;
  kvar *e = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kstmt *body = ks_seq(b);
  kexpr *ev = ke_var(b, e), *mn, *kk, *at;
  if (w->mn_major) {
    kexpr *atom = ke_div(b, ev, ke_int(b, WG_ATOM_ELEMS)), *in = ke_mod(b, ev, ke_int(b, WG_ATOM_ELEMS));
    kk = ke_div(b, in, ke_int(b, 64));
    kexpr *m64 = ke_mod(b, in, ke_int(b, 64));
    mn = ke_add(b, ke_mul(b, atom, ke_int(b, 64)), m64);
    kexpr *chunk = ke_bin(b, QIR_FN_BITXOR, ke_div(b, m64, ke_int(b, 8)), ke_mod(b, kk, ke_int(b, 8)), KT_I32);
    at = ke_add(b, ke_add(b, ke_mul(b, atom, ke_int(b, WG_ATOM_ELEMS)), ke_mul(b, kk, ke_int(b, 64))),
                ke_add(b, ke_mul(b, chunk, ke_int(b, 8)), ke_mod(b, m64, ke_int(b, 8))));
  } else {
    mn = ke_div(b, ev, ke_int(b, WG_BK));
    kk = ke_mod(b, ev, ke_int(b, WG_BK));
    kexpr *chunk = ke_bin(b, QIR_FN_BITXOR, ke_div(b, kk, ke_int(b, 8)), ke_mod(b, mn, ke_int(b, 8)), KT_I32);
    at = ke_add(b, ke_mul(b, mn, ke_int(b, WG_BK)), ke_add(b, ke_mul(b, chunk, ke_int(b, 8)), ke_mod(b, kk, ke_int(b, 8))));
  }
  at = ke_add(b, ke_mul(b, slot, ke_int(b, w->slot)), at);
  /* A's rows are M and columns K; B's rows K and columns N */
  kexpr *row0 = is_b ? k0 : g->blo[g->p->mma_m], *col0 = is_b ? g->blo[g->p->mma_n] : k0;
  kexpr *inb, *src = mma_operand_source(env, op, body, row0, col0, is_b ? kk : mn, is_b ? mn : kk, &inb);
  ks_add(b, body, ks_assign(b, dst, at, ke_select(b, inb, ke_load_raw(b, 1 + op->access->operand, src), ke_cast(b, ke_int(b, 0), KT_U32), KT_U32)));
  return ks_for(b, e, p, ke_int(b, w->slot), WG_THREADS, body);
}

/* Step `step` into slot `slot`, announced on full[slot], by producer thread
 * p: its share of the operands copied by loads, fenced for the async proxy
 * (wgmma reads them), then its arrival; the first producer thread's arrival
 * announces the tensor copies' bytes, which it then issues. */
static kstmt *issue_step(wg *g, kexpr *step, kexpr *slot, kexpr *p) {
  kbuilder *b = g->env->b;
  kstmt *s = ks_seq(b), *first = ks_seq(b);
  kexpr *blo[MAX_AXES];
  int n = g->env->comp->n_axes;
  memcpy(blo, g->blo, sizeof blo);
  if (g->P) {   /* the ring's step g: step g % steps of the block's tile g / steps */
    tile_origin(g, turn_tile(g, ke_div(b, step, ke_int(b, g->steps))), g->blo);
    step = ke_mod(b, step, ke_int(b, g->steps));
  }
  kexpr *k0 = step_origin(g, step);
  for (int o = 0; o < 2; o++) {
    wg_operand *w = o ? &g->b : &g->a;
    if (w->generic) ks_add(b, s, copy_by_loads(g, w, o ? g->sb : g->sa, slot, k0, p));
  }
  if (g->producers > 1) ks_add(b, s, ks_mbar(b, KS_FENCE_PROXY_ASYNC, NULL, NULL, 0, NULL));
  step_origin(g, step);   /* the copies by loads pointed the variables at their own coordinates */
  ks_add(b, first, ks_mbar(b, KS_MBAR_ARRIVE, g->mb, slot, g->tma_bytes, NULL));
  for (int o = 0; o < 2; o++) {
    wg_operand *w = o ? &g->b : &g->a;
    kvar *dst = o ? g->sb : g->sa;
    for (int64_t j = 0; !w->generic && j < w->copies; j++) {
      kexpr *coord[KTMAP_MAX_RANK];
      for (int d = 0; d < w->view.rank; d++) {
        int v = w->view.var[d];
        int64_t es = w->view.estride[d] > 0 ? w->view.estride[d] : 1;
        kexpr *x = ke_int(b, w->view.cst[d] + (v == w->mn_var && w->mn_major ? 64 * j * es : 0));
        if (v >= 0) x = ke_add(b, es == 1 ? g->env->vars[v] : ke_mul(b, g->env->vars[v], ke_int(b, es)), x);
        for (int s = 0; s < w->view.n_shifts[d]; s++)   /* a window's step */
          x = ke_add(b, x, ke_mul(b, g->env->vars[w->view.shift_var[d][s]], ke_int(b, w->view.shift_coef[d][s])));
        coord[d] = ke_cast(b, x, KT_I32);
      }
      kexpr *at = ke_add(b, ke_mul(b, slot, ke_int(b, w->slot)), ke_int(b, j * WG_ATOM_ELEMS));
      ks_add(b, first, ks_tma_load(b, w->tmap, dst, at, g->mb, slot, coord, w->view.rank));
    }
  }
  memcpy(g->blo, blo, sizeof *blo * (size_t)n);
  if (g->producers == 1) return first;
  kstmt *plain = ks_mbar(b, KS_MBAR_ARRIVE, g->mb, slot, 0, NULL);
  ks_add(b, s, g->a.generic && g->b.generic ? plain : ks_if(b, ke_lt(b, p, ke_int(b, 1)), first, plain));
  return s;
}

/* Where slice kk (16 of K) of an operand's tile starts in slot `slot`, for
 * A's 64-row tile `c` (B: c NULL). */
static kexpr *slice_at(kbuilder *b, const wg_operand *w, kexpr *slot, kexpr *kk, kexpr *c) {
  kexpr *at = ke_mul(b, slot, ke_int(b, w->slot));
  /* K-major: 32 bytes along the swizzled row; MN-major: 16 rows of 128 bytes */
  at = ke_add(b, at, ke_mul(b, kk, ke_int(b, w->mn_major ? 1024 : 16)));
  if (c) at = ke_add(b, at, ke_mul(b, c, ke_int(b, w->mn_major ? WG_ATOM_ELEMS : 64 * WG_BK)));
  return at;
}

static kwgmma_desc desc_of(const wg_operand *w) {
  /* K-major 128B: LBO unused (the PTX ISA assumes 1), SBO 8 rows of 128 bytes;
   * MN-major 128B: LBO from one 64-wide atom to the next, SBO 8 rows of K */
  return (kwgmma_desc){.mn_major = w->mn_major, .lbo = w->mn_major ? 2 * WG_ATOM_ELEMS : 16, .sbo = 1024, .swizzle = WG_SWIZZLE};
}

static kexpr *eq(kbuilder *b, kexpr *x, int64_t v) { return ke_bin(b, QIR_FN_EQ, x, ke_int(b, v), KT_BOOL); }

static kstmt *zero_acc(wg *g) {
  kbuilder *b = g->env->b;
  kvar *zi = kvar_new(b, g->env->k, "i", KT_I32, 0, KV_LOCAL);
  kstmt *zero = ks_for(b, zi, ke_int(b, 0), ke_int(b, g->MW * g->p->block[g->p->mma_n] / 2), 1,
                       ks_assign(b, g->acc, ke_var(b, zi), ke_float(b, 0, KT_F32)));
  zero->unroll = true;
  return zero;
}

/* A band's rows past band_rows, which no copy writes, are zeros in every slot
 * (wgmma computes them; the epilogue stores none), stored once by all the
 * block's threads before the first barrier and fenced for the async proxy. */
static kstmt *zero_band_padding(wg *g) {
  kbuilder *b = g->env->b;
  int64_t pad = (g->a.mn - g->band_rows) * WG_BK;
  kvar *e = kvar_new(b, g->env->k, "e", KT_I32, 0, KV_LOCAL);
  kexpr *ev = ke_var(b, e);
  kexpr *at = ke_add(b, ke_mul(b, ke_div(b, ev, ke_int(b, pad)), ke_int(b, g->a.slot)),
                     ke_add(b, ke_int(b, g->band_rows * WG_BK), ke_mod(b, ev, ke_int(b, pad))));
  kstmt *z = ks_seq(b);
  ks_add(b, z, ks_for(b, e, ke_tid(b), ke_int(b, g->S * pad), (int)g->env->k->threads, ks_assign(b, g->sa, at, ke_cast(b, ke_int(b, 0), KT_U32))));
  ks_add(b, z, ks_mbar(b, KS_FENCE_PROXY_ASYNC, NULL, NULL, 0, NULL));
  return z;
}

/* Slots 0 .. min(S, steps) - 1, by producer thread p. */
static kstmt *prologue(wg *g, kexpr *p) {
  kbuilder *b = g->env->b;
  kstmt *pro = ks_seq(b);
  for (int s = 0; s < g->S && (g->P || s < g->steps); s++) {
    kstmt *one = issue_step(g, ke_int(b, s), ke_int(b, s), p);
    /* persistent: a block's first tile has `steps` steps, its later ones may be absent */
    ks_add(b, pro, s < g->steps ? one : ks_if(b, ke_lt(b, ke_int(b, s), g->total), one, NULL));
  }
  return pro;
}

/* Iteration t of producer thread p: once step prev = t-1's slot is
 * released, refill it with step t-1+S (started: t > 0). */
static kstmt *refill(wg *g, kexpr *prev, kexpr *started, kexpr *p) {
  kbuilder *b = g->env->b;
  kexpr *prev_slot = ke_mod(b, prev, ke_int(b, g->S));
  kstmt *r = ks_seq(b);
  ks_add(b, r, ks_mbar(b, KS_MBAR_WAIT, g->mb, ke_add(b, prev_slot, ke_int(b, g->S)), 0,
                       ke_mod(b, ke_div(b, prev, ke_int(b, g->S)), ke_int(b, 2))));
  ks_add(b, r, issue_step(g, ke_add(b, prev, ke_int(b, g->S)), prev_slot, p));
  kexpr *live = ke_and(b, started, ke_lt(b, ke_add(b, prev, ke_int(b, g->S)), g->total));
  return ks_if(b, live, r, NULL);
}

/* Iteration t of the consumer warpgroups (guard: the per-thread statements'
 * condition, NULL inside their role branch): step prev = t-1's slot is
 * released once its wgmma retired (started: t > 0). */
static void consume(wg *g, kstmt *iter, kexpr *tv, kexpr *prev, kexpr *started, const kwgmma *w, kexpr *guard) {
  lower_env *env = g->env;
  kbuilder *b = env->b;
  kexpr *tid = ke_tid(b), *slot = ke_mod(b, tv, ke_int(b, g->S));
  kstmt *wait = ks_mbar(b, KS_MBAR_WAIT, g->mb, slot, 0, ke_mod(b, ke_div(b, tv, ke_int(b, g->S)), ke_int(b, 2)));
  ks_add(b, iter, guard ? ks_if(b, guard, wait, NULL) : wait);
  ks_add(b, iter, ks_wgmma(b, KS_WGMMA_FENCE, w, NULL, NULL, NULL, NULL, NULL, NULL, 0));
  kvar *kk = kvar_new(b, env->k, "kk", KT_I32, 0, KV_BLOCK);
  kexpr *wgi = ke_div(b, tid, ke_int(b, WG_THREADS));
  kstmt *one = ks_seq(b);
  int64_t BN = g->p->block[g->p->mma_n];
  for (int64_t j = 0; j < g->MW; j++) {   /* the warpgroup's m64 tiles: rows 64 (MW c + j) of the block */
    kexpr *tile = ke_add(b, ke_mul(b, wgi, ke_int(b, g->MW)), ke_int(b, j));
    ks_add(b, one, ks_wgmma(b, KS_WGMMA, w, g->acc, ke_int(b, j * BN / 2), g->sa, slice_at(b, &g->a, slot, ke_var(b, kk), tile), g->sb,
                            slice_at(b, &g->b, slot, ke_var(b, kk), NULL), 0));
  }
  ks_add(b, iter, mma_uniform_loop(b, kk, WG_BK / 16, 1, one, true));
  ks_add(b, iter, ks_wgmma(b, KS_WGMMA_COMMIT, w, NULL, NULL, NULL, NULL, NULL, NULL, 0));
  ks_add(b, iter, ks_wgmma(b, KS_WGMMA_WAIT, w, NULL, NULL, NULL, NULL, NULL, NULL, 1));
  /* step t-1's wgmma retired: lane 0 of each warp releases its slot */
  kexpr *prev_slot = ke_mod(b, prev, ke_int(b, g->S));
  kexpr *release = ke_and(b, ke_and(b, guard, eq(b, ke_mod(b, tid, ke_int(b, 32)), 0)), started);
  ks_add(b, iter, ks_if(b, release, ks_mbar(b, KS_MBAR_ARRIVE, g->mb, ke_add(b, prev_slot, ke_int(b, g->S)), 0, NULL), NULL));
}

/* The consumers' stores: register i of thread (warp w4, lane g q) is row
 * 16 w4 + g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 q + i % 2.  Loops over
 * m64 tile j and half h (a row each: its point along M, a band's along M2,
 * found once), then the row's columns: i = j N / 2 + 4 c + 2 h + e. */
static kstmt *epilogue(wg *g) {
  lower_env *env = g->env;
  kbuilder *b = env->b;
  kkernel *k = env->k;
  int vn = g->p->mma_n;
  int64_t BN = g->p->block[vn];
  kexpr *tid = ke_tid(b), *lane = ke_mod(b, tid, ke_int(b, 32));
  kvar *jv = kvar_new(b, k, "j", KT_I32, 0, KV_LOCAL), *hv = kvar_new(b, k, "h", KT_I32, 0, KV_LOCAL);
  kvar *cv = kvar_new(b, k, "c", KT_I32, 0, KV_LOCAL), *ev = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kexpr *tile = ke_add(b, ke_mul(b, ke_div(b, tid, ke_int(b, WG_THREADS)), ke_int(b, g->MW)), ke_var(b, jv));
  kexpr *row = ke_add(b, ke_add(b, ke_mul(b, tile, ke_int(b, 64)),
                                ke_mul(b, ke_mod(b, ke_div(b, tid, ke_int(b, 32)), ke_int(b, 4)), ke_int(b, 16))),
                      ke_add(b, ke_div(b, lane, ke_int(b, 4)), ke_mul(b, ke_var(b, hv), ke_int(b, 8))));
  kexpr *col = ke_add(b, ke_mul(b, ke_var(b, cv), ke_int(b, 8)), ke_add(b, ke_mul(b, ke_mod(b, lane, ke_int(b, 4)), ke_int(b, 2)), ke_var(b, ev)));
  kexpr *reg = ke_add(b, ke_add(b, ke_mul(b, ke_var(b, jv), ke_int(b, BN / 2)), ke_mul(b, ke_var(b, cv), ke_int(b, 4))),
                      ke_add(b, ke_mul(b, ke_var(b, hv), ke_int(b, 2)), ke_var(b, ev)));
  kvar *gmv = kvar_new(b, k, "gm", b->index_type, 0, KV_LOCAL), *gnv = kvar_new(b, k, "gn", b->index_type, 0, KV_LOCAL);
  kstmt *per_row = ks_seq(b), *st = ks_seq(b);
  kexpr *blo2[MAX_AXES];
  kexpr *in_band = band_point(g, per_row, row, gmv, blo2);
  ks_add(b, st, ks_decl(b, gnv, ke_add(b, g->blo[vn], ke_cast(b, col, b->index_type))));
  kexpr *oidx[MAX_AXES];
  kexpr *guard = ke_and(b, in_band, mma_output_point(env, g->p, blo2, ke_var(b, gmv), ke_var(b, gnv), oidx));
  kstmt *store = ks_store(b, 0, out_index(env, oidx), mma_final_value(env, g->bias, oidx, ke_elem(b, g->acc, reg)));
  ks_add(b, st, guard ? ks_if(b, guard, store, NULL) : store);
  kstmt *l = ks_for(b, ev, ke_int(b, 0), ke_int(b, 2), 1, st);
  l->unroll = true;
  l = ks_for(b, cv, ke_int(b, 0), ke_int(b, BN / 8), 1, l);
  l->unroll = true;
  ks_add(b, per_row, l);
  l = ks_for(b, hv, ke_int(b, 0), ke_int(b, 2), 1, per_row);
  l->unroll = true;
  l = ks_for(b, jv, ke_int(b, 0), ke_int(b, g->MW), 1, l);
  l->unroll = true;
  return l;
}

/* Columns staged at a time: block[N], halved down to at most 128 (192: 96) */
static int64_t staged_chunk(int64_t BN) {
  int64_t CW = BN;
  while (CW > 128 && CW % 2 == 0) CW /= 2;
  return CW;
}

/* Values per 16-byte store of the staged epilogue, or 0 */
static int staged_width(wg *g) {
  int64_t BN = g->p->block[g->p->mma_n], CW = staged_chunk(BN);
  int vw = mma_vector_width(g->env, g->p);
  return !vw || CW % vw || BN % CW ? 0 : vw;
}

/* The staging tiles past the kernel's shared memory so far, or NULL */
static kvar *staging_tiles(wg *g) {
  kbuilder *b = g->env->b;
  kkernel *k = g->env->k;
  int64_t BN = g->p->block[g->p->mma_n], CW = staged_chunk(BN);
  int64_t at = (k->smem_bytes + 15) / 16 * 16, elems = 4 * g->C * 8 * (CW + 4);
  if (!staged_width(g) || at + elems * 4 > WG_SMEM_MAX) return NULL;
  kvar *se = kvar_new(b, k, "se", KT_F32, elems, KV_SHARED);
  se->carve = 1 + at;
  k->smem_bytes = at + elems * 4;
  return se;
}

/* The consumers' stores through shared memory, 16 bytes at a time, where the
 * output's innermost axis is N (whole vectors of vw: 8 halves or 4 floats):
 * per m64 tile, 8-row half h (rows 16 w4 + 8 h ..) and chunk of up to 128
 * columns (staged_chunk), each consumer warp writes its accumulators to its
 * own f32 tile of 8 x (chunk + 4) (the pad spreads rows over the banks), then
 * each lane reads vw consecutive values of a row back, applies the bias and
 * the epilogue and stores them at once (a tensor not 16-byte aligned at run
 * time: a value at a time).  On the device, direct stores of two-byte values
 * at a four-byte stride took 30 of 125 us of BERT-base's QKV GEMM at batch 64
 * (H200, 2026-11-27).  The tiles lie past the mbarriers (the ring may still be
 * read by the other consumer warpgroup); staging_tiles gives none where they
 * do not fit beside it or the output has no such vectors.  `guard` (C's
 * interleaved body): the consumers' statements; the warp barriers stay at
 * block level. */
static kstmt *epilogue_staged(wg *g, kexpr *guard) {
  lower_env *env = g->env;
  kbuilder *b = env->b;
  kkernel *k = env->k;
  int vn = g->p->mma_n, vw = staged_width(g);
  int64_t BN = g->p->block[vn], CW = staged_chunk(BN);
  int64_t ld = CW + 4, tile_elems = 8 * ld;
  kvar *se = g->se;
  kexpr *tid = ke_tid(b), *lane = ke_mod(b, tid, ke_int(b, 32)), *warp = ke_div(b, tid, ke_int(b, 32));
  kexpr *mine = ke_mul(b, warp, ke_int(b, tile_elems));
  kexpr *gq = ke_div(b, lane, ke_int(b, 4)), *tq = ke_mod(b, lane, ke_int(b, 4));
  /* part = (j * 2 + h) * chunks + cc: m64 tile j of the warpgroup, half h, column chunk cc */
  int64_t chunks = BN / CW, parts = g->MW * 2 * chunks;
  kvar *part = kvar_new(b, k, "hr", KT_I32, 0, KV_BLOCK);
  kexpr *cc = ke_mod(b, ke_var(b, part), ke_int(b, chunks)), *jh = ke_div(b, ke_var(b, part), ke_int(b, chunks));
  kexpr *j = ke_div(b, jh, ke_int(b, 2)), *h = ke_mod(b, jh, ke_int(b, 2));
  kstmt *body = ks_seq(b);

  /* register 4 (col / 8) + 2 h + e of tile j holds row g + 8 h, column col = 8 (col / 8) + 2 q + e */
  kvar *jj = kvar_new(b, k, "fj", KT_I32, 0, KV_LOCAL), *ee = kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL);
  kexpr *scol = ke_add(b, ke_add(b, ke_mul(b, ke_var(b, jj), ke_int(b, 8)), ke_mul(b, tq, ke_int(b, 2))), ke_var(b, ee));
  kexpr *reg = ke_add(b, ke_add(b, ke_mul(b, j, ke_int(b, BN / 2)),
                                ke_mul(b, ke_add(b, ke_mul(b, cc, ke_int(b, CW / 8)), ke_var(b, jj)), ke_int(b, 4))),
                      ke_add(b, ke_mul(b, h, ke_int(b, 2)), ke_var(b, ee)));
  kstmt *put = ks_for(b, ee, ke_int(b, 0), ke_int(b, 2), 1,
                      ks_assign(b, se, ke_add(b, ke_add(b, mine, ke_mul(b, gq, ke_int(b, ld))), scol), ke_elem(b, g->acc, reg)));
  put->unroll = true;
  put = ks_for(b, jj, ke_int(b, 0), ke_int(b, CW / 8), 1, put);
  put->unroll = true;
  ks_add(b, body, guard ? ks_if(b, guard, put, NULL) : put);
  ks_add(b, body, ks_warp_barrier(b));

  /* segment q * 32 + lane: row seg / per_row of the 8, columns from (seg % per_row) * vw */
  int64_t per_row = CW / vw, segs = 8 * per_row, passes = ceil_div(segs, 32);
  kvar *q = kvar_new(b, k, "q", KT_I32, 0, KV_LOCAL), *sg = kvar_new(b, k, "s", KT_I32, 0, KV_LOCAL);
  kstmt *seg = ks_seq(b), *work = ks_seq(b);
  ks_add(b, seg, ks_decl(b, sg, ke_add(b, lane, ke_mul(b, ke_var(b, q), ke_int(b, 32)))));
  kexpr *row = ke_div(b, ke_var(b, sg), ke_int(b, per_row)), *col = ke_mul(b, ke_mod(b, ke_var(b, sg), ke_int(b, per_row)), ke_int(b, vw));
  kexpr *tile = ke_add(b, ke_mul(b, ke_div(b, tid, ke_int(b, WG_THREADS)), ke_int(b, g->MW)), j);
  kexpr *brow = ke_add(b, ke_add(b, ke_mul(b, tile, ke_int(b, 64)), ke_mul(b, ke_mod(b, warp, ke_int(b, 4)), ke_int(b, 16))),
                       ke_add(b, ke_mul(b, h, ke_int(b, 8)), row));
  kvar *gmv = kvar_new(b, k, "gm", b->index_type, 0, KV_LOCAL), *gnv = kvar_new(b, k, "gn", b->index_type, 0, KV_LOCAL);
  kexpr *blo2[MAX_AXES];
  kexpr *in_band = band_point(g, seg, brow, gmv, blo2);
  ks_add(b, seg, ks_decl(b, gnv, ke_add(b, g->blo[vn], ke_cast(b, ke_add(b, ke_mul(b, cc, ke_int(b, CW)), col), b->index_type))));
  kexpr *base = ke_add(b, ke_add(b, mine, ke_mul(b, row, ke_int(b, ld))), col);
  ks_add(b, work, mma_store_vector(env, g->p, blo2, g->bias, ke_var(b, gmv), ke_var(b, gnv), se, base, vw));
  kexpr *oidx[MAX_AXES];
  /* vw divides N: a vector is all in or all out */
  kexpr *live = ke_and(b, in_band, mma_output_point(env, g->p, blo2, ke_var(b, gmv), ke_var(b, gnv), oidx));
  if (segs % 32) live = ke_and(b, ke_lt(b, ke_var(b, sg), ke_int(b, segs)), live);
  ks_add(b, seg, live ? ks_if(b, live, work, NULL) : work);
  kstmt *each = ks_for(b, q, ke_int(b, 0), ke_int(b, passes), 1, seg);
  each->unroll = true;
  ks_add(b, body, guard ? ks_if(b, guard, each, NULL) : each);
  ks_add(b, body, ks_warp_barrier(b));
  return mma_uniform_loop(b, part, parts, 1, body, true);   /* unrolled: the accumulators stay registers */
}

/* C's body: every role's statements in one loop, consumers before the
 * producer in each iteration (the order the emulation needs). */
static void interleaved(wg *g, kstmt *body) {
  kbuilder *b = g->env->b;
  kkernel *k = g->env->k;
  kexpr *tid = ke_tid(b);
  int producer = (int)(g->C * WG_THREADS);
  kexpr *consumer = ke_lt(b, tid, ke_int(b, producer)), *p = ke_sub(b, tid, ke_int(b, producer));
  kexpr *is_producer = ke_and(b, ke_lt(b, ke_int(b, producer - 1), tid), ke_lt(b, p, ke_int(b, g->producers)));
  kvar *turn = g->P ? kvar_new(b, k, "tn", KT_I32, 0, KV_BLOCK) : NULL;
  kstmt *tile = g->P ? ks_seq(b) : body;
  if (!g->P) ks_add(b, body, zero_acc(g));
  ks_add(b, body, ks_if(b, is_producer, prologue(g, p), NULL));
  if (g->P) ks_add(b, tile, zero_acc(g));
  kvar *t = kvar_new(b, k, "t", KT_I32, 0, KV_BLOCK);
  kstmt *iter = ks_seq(b);
  /* the ring's step: t, or with persistent blocks the turn's steps after the earlier turns' */
  kexpr *step = g->P ? ke_add(b, ke_mul(b, ke_var(b, turn), ke_int(b, g->steps)), ke_var(b, t)) : ke_var(b, t);
  /* one node each for the released step and its guard, which the consumers'
   * release and the producer's refill share: plant.c's wgmma-early-release
   * rewrites them (t, true) to release a stage its wgmma still reads */
  kexpr *prev = ke_sub(b, step, ke_int(b, 1)), *started = ke_lt(b, ke_int(b, 0), step);
  k->wg_release_step = prev;
  k->wg_release_started = started;
  k->wg_step = step;
  consume(g, iter, step, prev, started, g->w, consumer);
  ks_add(b, iter, ks_if(b, is_producer, refill(g, prev, started, p), NULL));
  ks_add(b, tile, mma_uniform_loop(b, t, g->steps, 1, iter, false));
  ks_add(b, tile, ks_wgmma(b, KS_WGMMA_WAIT, g->w, NULL, NULL, NULL, NULL, NULL, NULL, 0));
  if (g->P) tile_origin(g, turn_tile(g, ke_var(b, turn)), g->blo);
  ks_add(b, tile, g->se ? epilogue_staged(g, consumer) : ks_if(b, consumer, epilogue(g), NULL));
  if (g->P) {
    kstmt *turns = ks_for(b, turn, ke_int(b, 0), g->turns, 1, tile);
    turns->uniform = true;
    ks_add(b, body, turns);
  }
}

/* The GPU's body: the producer warpgroup's branch (its first thread issues
 * the tensor copies; all its threads copy the operands read by loads) and
 * the consumers' (wgmma and the epilogue), which meet only
 * at the mbarriers; with two consumer warpgroups, setmaxnreg moves registers
 * from the producer to them. */
static kstmt *role_split(wg *g) {
  kbuilder *b = g->env->b;
  kkernel *k = g->env->k;
  kexpr *tid = ke_tid(b);
  int producer = (int)(g->C * WG_THREADS);
  kwgmma *w = qir_alloc(b->m, sizeof *w);
  *w = *g->w;
  w->in_role = true;
  kstmt *prod = ks_seq(b), *cons = ks_seq(b);
  if (g->C == 2) {   /* 384 threads: 170 registers each at entry; 40 + 2 x 232 per thread of each warpgroup */
    ks_add(b, prod, ks_mbar(b, KS_SETMAXNREG, NULL, NULL, 40, NULL));
    ks_add(b, cons, ks_mbar(b, KS_SETMAXNREG, NULL, NULL, 232, ke_int(b, 1)));
  }
  kstmt *issue = ks_seq(b);
  kexpr *p = ke_sub(b, tid, ke_int(b, producer));
  ks_add(b, issue, prologue(g, p));
  kvar *t = kvar_new(b, k, "t", KT_I32, 0, KV_LOCAL);
  ks_add(b, issue, ks_for(b, t, ke_int(b, 1), g->total, 1,
                          refill(g, ke_sub(b, ke_var(b, t), ke_int(b, 1)), ke_lt(b, ke_int(b, 0), ke_var(b, t)), p)));
  ks_add(b, prod, g->producers > 1 ? issue : ks_if(b, eq(b, tid, producer), issue, NULL));
  kvar *turn = g->P ? kvar_new(b, k, "tn", KT_I32, 0, KV_LOCAL) : NULL;
  kstmt *tile = g->P ? ks_seq(b) : cons;
  ks_add(b, tile, zero_acc(g));
  kvar *tc = kvar_new(b, k, "t", KT_I32, 0, KV_LOCAL);
  kstmt *iter = ks_seq(b);
  kexpr *step = g->P ? ke_add(b, ke_mul(b, ke_var(b, turn), ke_int(b, g->steps)), ke_var(b, tc)) : ke_var(b, tc);
  consume(g, iter, step, ke_sub(b, step, ke_int(b, 1)), ke_lt(b, ke_int(b, 0), step), w, NULL);
  ks_add(b, tile, ks_for(b, tc, ke_int(b, 0), ke_int(b, g->steps), 1, iter));
  ks_add(b, tile, ks_wgmma(b, KS_WGMMA_WAIT, w, g->acc, NULL, NULL, NULL, NULL, NULL, 0));   /* with its operand fence */
  if (g->P) tile_origin(g, turn_tile(g, ke_var(b, turn)), g->blo);
  ks_add(b, tile, g->se ? epilogue_staged(g, NULL) : epilogue(g));
  if (g->P) ks_add(b, cons, ks_for(b, turn, ke_int(b, 0), g->turns, 1, tile));
  kstmt *role = ks_if(b, ke_lt(b, tid, ke_int(b, producer)), cons, prod);
  role->wg = w;
  return role;
}

void lower_wgmma(lower_env *env, const tile_plan *p) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *c = env->comp;
  int n = c->n_axes, vm = p->mma_m, vn = p->mma_n, S = p->stages;
  mma_operand A, B;
  const qir_expr *bias;
  if (!mma_analyse(env, p, &A, &B, &bias)) return;
  int64_t BM = p->block[vm], BN = p->block[vn], WM = p->thread[vm], MW = WM / 64;
  int m2 = p->mma_m2;
  /* a band: block[M] (all of M) x block[M2] rows, computed as whole consumer warpgroups' tiles */
  int64_t band_rows = m2 >= 0 ? p->block[vm] * p->block[m2] : 0;
  if (m2 >= 0 && WM > 0) BM = (band_rows + WM - 1) / WM * WM;
  int64_t C = WM > 0 ? BM / WM : 0;
  int64_t rk = p->rstep[p->mma_k];   /* 64, or all of a shorter K (the plan's rstep, rounded up to 16) */
  if ((WM != 64 && WM != 128) || BM % WM || C < 1 || C > 2 || p->thread[vn] != BN || BN % 8 || BN > 256 || MW * BN > 256 ||
      (rk != WG_BK && rk < c->axis_extents[n + p->mma_k])) {
    qir_error(env->cg->d, env->loc,
              "#tile mma = [64, N, 16]: thread[M] (a consumer warpgroup's rows) must be 64 or 128 and block[M] (with M2: "
              "block[M] x block[M2]) one or two of it, thread[N] = block[N] a multiple of 8 up to 256 (128 with 128 rows), "
              "rstep[K] = 64 (or all of a shorter K)");
    env->failed = true;
    return;
  }
  wg g = {.env = env, .p = p, .S = S, .C = C, .MW = MW, .bias = bias, .m2 = m2, .band_rows = band_rows};
  int vk = n + p->mma_k;
  setup_operand(env, &A, &B, false, vm, vk, BM, &g.a);
  setup_operand(env, &B, &A, true, vn, vk, BN, &g.b);
  if (m2 >= 0 && !band_operand(env, &g.a, m2, p->block[vm], p->block[m2], mma_mentions(B.access, m2))) return;
  g.producers = g.a.generic || g.b.generic ? WG_THREADS : 1;
  g.tma_bytes = (g.a.generic ? 0 : (m2 >= 0 ? band_rows : BM) * WG_BK * 2) + (g.b.generic ? 0 : BN * WG_BK * 2);

  /* steps: K by 64, every other reduction axis by 1 (a convolution's window) */
  int64_t nb[MAX_AXES], grid = 1, steps = 1;
  for (int a = 0; a < c->n_red; a++) {
    g.count[a] = a == p->mma_k ? ceil_div(c->axis_extents[n + a], WG_BK) : c->axis_extents[n + a];
    steps *= g.count[a];
  }
  for (int d = 0; d < n; d++) {
    nb[d] = ceil_div(c->axis_extents[d], p->block[d]);
    grid *= nb[d];
  }
  memcpy(g.nb, nb, sizeof nb);
  /* persistent blocks: fewer than the tiles, and not with dimension symbols (a run's blocks are its tiles) */
  g.P = p->persistent > 0 && p->persistent < grid && !env->cg->run_dims ? p->persistent : 0;
  g.steps = steps;
  g.turns = g.P ? ke_div(b, ke_sub(b, ke_int(b, grid + g.P - 1), ke_bid(b)), ke_int(b, g.P)) : NULL;
  g.total = g.P ? ke_mul(b, g.turns, ke_int(b, steps)) : ke_int(b, steps);
  k->grid = g.P ? g.P : grid;
  if (!g.P) kkernel_tile_grid(k, n, NULL, nb, p->block);
  int producer = (int)(C * WG_THREADS);
  k->threads = producer + WG_THREADS;
  k->min_blocks = 1;
  k->sm90a = true;
  k->tmaps = qir_alloc(b->m, sizeof *k->tmaps * 2);
  if (!g.a.generic) add_tmap(k, &g.a);
  if (!g.b.generic) add_tmap(k, &g.b);

  kexpr *bc[MAX_AXES];
  decompose(env, ke_bid(b), nb, n, bc);
  for (int d = 0; d < n && !g.P; d++) {   /* persistent: each turn's (tile_origin) */
    kexpr *start = ke_mul(b, bc[d], ke_int(b, p->block[d]));
    g.blo[d] = start->kind == KE_INT ? start : ke_var(b, let(env, "b", start));
  }
  if (g.P) tile_origin(&g, ke_bid(b), g.blo);

  /* shared memory: A's slots at 0, B's at the next 1024-byte boundary, then the barriers */
  g.sa = kvar_new_raw_shared(b, k, "sa", A.dtype, S * g.a.slot);
  g.sb = kvar_new_raw_shared(b, k, "sb", B.dtype, S * g.b.slot);
  g.mb = kvar_new(b, k, "mb", KT_U64, 2 * S, KV_SHARED);
  int64_t b_off = (kvar_bytes(g.sa) + 1023) / 1024 * 1024, m_off = b_off + (kvar_bytes(g.sb) + 1023) / 1024 * 1024;
  g.sa->carve = 1;
  g.sb->carve = 1 + b_off;
  g.mb->carve = 1 + m_off;
  k->carved_smem = true;
  k->smem_bytes = m_off + kvar_bytes(g.mb);
  g.se = staging_tiles(&g);
  k->n_mbars = 2 * S;
  kvar *acc = kvar_new(b, k, "acc", KT_F32, MW * BN / 2, KV_THREAD);
  kwgmma *w = qir_alloc(b->m, sizeof *w);
  *w = (kwgmma){.n = (int)BN, .dtype = A.dtype, .a = desc_of(&g.a), .b = desc_of(&g.b), .wg_first = 0, .wg_count = (int)C};
  g.w = w;

  g.acc = acc;
  kexpr *tid = ke_tid(b);
  /* barriers: full[s] = s (each producer thread that copies), empty[s] = S + s (each consumer warp) */
  kstmt *init = ks_seq(b);
  for (int s = 0; s < S; s++) {
    ks_add(b, init, ks_mbar(b, KS_MBAR_INIT, g.mb, ke_int(b, s), g.producers, NULL));
    ks_add(b, init, ks_mbar(b, KS_MBAR_INIT, g.mb, ke_int(b, S + s), 4 * C, NULL));
  }
  ks_add(b, init, ks_mbar(b, KS_MBAR_FENCE_INIT, g.mb, ke_int(b, 0), 0, NULL));
  for (int gpu = 0; gpu < 2; gpu++) {
    kstmt *body = gpu ? ks_seq(b) : k->body;
    ks_add(b, body, ks_if(b, eq(b, tid, 0), init, NULL));
    if (m2 >= 0 && band_rows < BM) ks_add(b, body, zero_band_padding(&g));
    ks_add(b, body, ks_barrier(b));
    if (gpu) {
      ks_add(b, body, role_split(&g));
      k->gpu_body = body;
    } else {
      interleaved(&g, body);
    }
  }

  char buf[512];
  int len = mma_summary_tiles(buf, sizeof buf, A.dtype == QIR_BF16 ? "wgmma m64nNk16 bf16" : "wgmma m64nNk16 f16", n, p);
  const char *by_a = g.a.generic == g.b.generic ? "" : g.a.generic ? " by loads" : " by TMA";
  const char *by_b = g.a.generic == g.b.generic ? (g.a.generic ? " by loads" : " by TMA") : g.b.generic ? " by loads" : " by TMA";
  snprintf(buf + len, sizeof buf - (size_t)len,
           "] N %" PRId64 " rstep 64 stages %d steps %" PRId64 " grid %" PRId64 "%s threads %d (%" PRId64
           " consumer warpgroups, 1 producer) A %s%s B %s%s (128B swizzle) smem %" PRId64 "B",
           BN, S, steps, k->grid, g.P ? qir_sprintf(b->m, " (persistent: %" PRId64 " tiles)", grid) : "", k->threads, C, g.a.mn_major ? "MN-major" : "K-major", by_a, g.b.mn_major ? "MN-major" : "K-major", by_b,
           k->smem_bytes);
  k->summary = qir_strdup(b->m, buf);
}
