/* roller_construct.c: Roller's construction of a SIMT tile plan (the
 * paper's rTile growth; roller.c's header comment says how), from a problem
 * roller.c analysed, every state rated by its model (rl_eval). */
#include "roller_impl.h"

#include <math.h>
#include <string.h>

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
    rl_group_box(g, pl->tile, p->n_vars, ext);
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
    if (p->g[i].staged) per += rl_group_box(&p->g[i], Et, p->n_vars, ext) * p->g[i].elem_bytes;
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
      int64_t regs = rl_plan_regs(p, &probe);
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


static double block_footprint(const rl_problem *p, const rl_plan *pl) {
  int64_t ext[QIR_MAX_RANK];
  double f = (double)rl_plan_step_smem(p, pl, 0);
  double outn = rl_group_box(&p->out, pl->tile, p->n_vars, ext);
  return f + outn * p->out.elem_bytes;
}

double rl_axis_waste(int64_t n, int64_t b) { return (double)(round_up(n, b) - n) / (double)n; }

/* Can the block along v grow to b?  Never past the extent rounded up to the
 * thread tile, and with the padding waste under RL_MAX_WASTE. */
static bool block_fits(const rl_problem *p, const rl_plan *pl, int v, int64_t b) {
  double unit_waste = rl_axis_waste(p->ext[v], pl->thr[v]);   /* a thread tile's own padding is allowed */
  return b <= round_up(p->ext[v], pl->thr[v]) &&
         rl_axis_waste(p->ext[v], b) <= (unit_waste > RL_MAX_WASTE ? unit_waste : RL_MAX_WASTE) + 1e-9;
}

/* Any block size along one axis (a multiple of its thread tile, block_fits)
 * that makes the threads a whole number of warps; the smallest change of
 * the block wins.  False if there is none. */
static bool resize_to_warp(const rl_problem *p, rl_plan *pl) {
  const qir_target *t = p->t;
  int64_t th = rl_plan_threads(p, pl), best_b = 0;
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
  return (double)rl_plan_blocks(p, pl) * (double)round_up(rl_plan_threads(p, pl), p->t->warp_size);
}

/* The warp rule of the #tile schema: threads are a whole number of warps,
 * unless the whole output is one block of fewer threads than a warp. */
static bool warp_rule_holds(const rl_problem *p, const rl_plan *pl) {
  int64_t th = rl_plan_threads(p, pl);
  return th % p->t->warp_size == 0 || (th < p->t->warp_size && rl_plan_blocks(p, pl) == 1);
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
    double est = rl_round_sig(c.est_us), dist = 0;
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
  if (warp_rule_holds(p, pl)) return rl_plan_threads(p, pl) <= p->t->max_threads_per_block;
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
    int64_t th = rl_plan_threads(p, pl);
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
double rl_plan_span(const rl_problem *p, const rl_plan *pl) {
  double s = 1;
  for (int v = 0; v < p->n_vars; v++) s *= (double)pl->tile[v];
  return s;
}

/* A #tile spans at most QIR_TILE_MAX elements (block x rstep; qir.h, the
 * verifier's rule: qcodegen counts a block's staging in 32 bits).  Halves the
 * longest reduction step (a multiple of its instruction shape) until the plan
 * fits; false when the block alone is too large.  A split reduction's lanes
 * walk the whole reduction whatever its rstep, so there it changes nothing. */
bool rl_fit_span(const rl_problem *p, rl_plan *pl) {
  while (rl_plan_span(p, pl) > QIR_TILE_MAX) {
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
      if (c.valid && c.smem <= smem_budget(p->t) && rl_plan_span(p, &c) <= QIR_TILE_MAX && c.est_us < best.est_us * 0.99)
        best = c;
    }
    if (best.est_us >= pl->est_us) break;
    *pl = best;
  }
}

static void add_plan(const rl_problem *p, rl_path *path, const rl_plan *state, bool shrink_first) {
  rl_plan pl = *state;
  if (!fix_threads(p, &pl, shrink_first) || !rl_fit_span(p, &pl)) return;
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
  while (rl_plan_threads(p, c) > p->t->max_threads_per_block) {
    int64_t nx = next_size(p->ext[v], out_mult(p, v), p->mma ? 128 : 16, c->thr[v]);
    while (nx && c->tile[v] % nx) nx = next_size(p->ext[v], out_mult(p, v), p->mma ? 128 : 16, nx);
    if (!nx) return false;
    c->thr[v] = nx;
    if (rl_plan_regs(p, c) > reg_budget(p->t)) return false;
  }
  return true;
}

void rl_construct(const rl_problem *p, rl_path *path) {
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
    rl_traffic_of(p, &pl, false, &tr);
    if (reuse_phase && tr.block_global_bytes > 0 && tr.flops_block / tr.block_global_bytes >= ridge)
      reuse_phase = false;                    /* compute-bound: more reuse does not pay */
    int64_t threads = rl_plan_threads(p, &pl), blocks = rl_plan_blocks(p, &pl);
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
      int64_t th = rl_plan_threads(p, &c), bl = rl_plan_blocks(p, &c);
      if (th > t->max_threads_per_block || rl_plan_smem(p, &c, 0) > smem_cap) continue;
      /* scale-out: keep a block per compute unit unless the block is still
       * short of one warp */
      if (bl < t->compute_units && bl < blocks && threads >= t->warp_size) continue;
      double s;
      if (reuse_phase) {
        rl_traffic tc;
        rl_traffic_of(p, &c, false, &tc);
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
        int64_t th = rl_plan_threads(p, &c), bl = rl_plan_blocks(p, &c);
        if (th > t->max_threads_per_block || rl_plan_smem(p, &c, 0) > smem_cap) continue;
        if (bl < t->compute_units && bl < blocks && threads >= t->warp_size) continue;
        best = v, best_size = nx;
      }
      if (best < 0) break;
    }
    pl.tile[best] = best_size;
  }
  finish_plan(p, path, &pl);
}
