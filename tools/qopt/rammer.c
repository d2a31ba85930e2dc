/* rammer.c: -rammer, independent kernels packed onto virtual execution units
 * (Rammer, OSDI'20).
 *
 * Each op with a #tile plan is an rOperator whose rTasks are its blocks (the
 * plan's grid); so is a Welder `kernel` group with a whole plan (its blocks:
 * staged and row groups carry the plan qcodegen's composer runs them with,
 * qir_group_whole_plan).  An op without a plan gets its default schedule
 * first: roller's plan for it, with alternatives (roller_plan_op), or for a
 * staged or row group without one the composer's plan, or for a softmax, norm
 * or LRN (several computes, several kernels) a group of its own that is one
 * kernel (wrap), each kept only if the op ends up packed, so that
 * `qopt -rammer` alone packs a module without plans.
 * In every region, the pass cuts the op sequence into segments (a segment
 * ends before the first op that is neither a kernel nor a view and reads a
 * kernel of the segment: the rprogram must run before it), and packs each
 * segment of two or more kernels into one `rprogram` (qir/rprogram.h):
 *
 *   1. rOperators: every planned kernel joins the segment; one that fills the
 *      device several times over with every plan runs its tasks strided over
 *      its vEUs (where the vDevice costs it more than the launches saved, the
 *      split below leaves it out).
 *   2. vDevice: vEUs = compute units x co-resident blocks per unit for the
 *      largest threads / registers / shared memory of the plans in use.  One
 *      large block would leave few vEUs to every other kernel, so for each
 *      occupancy some plan allows, every kernel takes its fastest one-wave
 *      plan that allows it (a resource-efficient alternative where its own
 *      fastest needs more), and the occupancy the model rates fastest wins.
 *   3. Wavefront scheduling: a kernel's wave is one more than the latest wave
 *      of the kernels it reads (through views); a wave's kernels share the vEUs
 *      so that they finish together (all of them one task per vEU when they
 *      fit, else each its tasks over the rounds the least makespan allows,
 *      found by bisection, strided).
 *   4. Plan choice per wave: where a wave's tasks overfill the vDevice, each
 *      kernel may switch to another of its plans that needs no more than the
 *      vDevice's block and makes the modelled program shorter.  A kernel that
 *      runs another plan than the one it came with gets it as its #tile, the
 *      old plan taking its place in #tile_alternatives.
 *   5. Synchronisation and wave merging: waves start after a grid barrier; a
 *      barrier is replaced by waits on exactly the producer tasks the wave
 *      reads where the model rates that faster (vEUs that are done run ahead
 *      into the next wave: the waves overlap).
 *
 * The model.  A kernel's task (block) takes tau = est_us / hardware waves of
 * its own launch (roller's estimate spread over ceil(tasks / resident blocks)
 * waves), times the program's co-resident blocks per compute unit over its
 * own launch's where the program keeps fewer (the unit's throughput shared by
 * fewer blocks), but at least QOPT_OCC_FLOOR of it (latency).  A vEU's timeline
 * runs its tasks back to back; a barrier starts a wave at the latest vEU's
 * end plus -rammer-sync-us (default: the target's grid_barrier_us), a wait at
 * the waited tasks' end plus a quarter of it.  The program's time is its launch
 * (-rammer-launch-us, default: the target's launch_us) plus the later of the timelines' end and the device's
 * throughput bound (every kernel's est_us times the fraction of the device its
 * own launch keeps busy).  The unpacked time is the sum of the kernels' est_us
 * plus one launch each (with the plans they came with).  Both are written on
 * the rprogram (est_us, unpacked_us), and a segment is packed only when the
 * model says it pays.  -rammer-stats prints each segment (what closed it, the
 * packing, the throughput bound, where and why it is split) and the whole
 * module's launches and modelled time with and without the rprograms.
 */
#include "qopt.h"
#include "attention.h"
#include "roller.h"
#include "rprogram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A task that skips its tile (a run below the bound) still waits and publishes
 * its flag: it costs one grid barrier's time.  Chosen, not fitted: on an H100
 * (2026-11-27) PP-OCRv4 det built for 640 x 640 ran its four packed programs in
 * 4.8 ms at 96 x 160, where skipped tasks at no cost (and at a quarter of a
 * barrier) had modelled them faster than their members' own launches; at one
 * barrier they run apart there, and the whole model took 2.25 ms. */
#define SKIP_BARRIERS 1.0

/* One plan an rOperator may run with: its #tile or one of its alternatives. */
typedef struct {
  qir_attr_val val;
  qir_rp_kernel k;
  double est_us;
} rplan;

typedef struct {
  qir_op *op;
  qir_rp_kernel k;              /* of the plan in use */
  double est_us;
  double own_us;                /* est_us of the plan it came with (the unpacked time) */
  int n_plans, cur;             /* plans[0]: the #tile it came with, then its alternatives */
  rplan *plans;
  int wave;
  int n_deps;
  int *deps;                    /* indices of kernels of the segment it reads */
  int64_t veu_lo, n_veus;       /* its run in its wave */
  int seg_wave;                 /* its wave in the whole segment (parts are wave ranges of it) */
  /* in a run at rammer.at: its tasks that do work (0: not counted) and, where
   * its tasks are tiles of its output (qopt_run_tiles), per axis the tiles
   * and those the run reaches; tile_rank 0: every task works */
  int64_t live;
  int tile_rank;
  int64_t nb[QIR_MAX_RANK], run_tiles[QIR_MAX_RANK];
} rk;

typedef struct {
  qir_module *m;
  const qir_target *t;
  double launch_us, sync_us;
  int n;
  rk *ks;
  int64_t veus;
  int n_waves;
  bool *barrier;                /* per wave */
  int *wave_first, *wave_ks;    /* the kernels of wave w: wave_ks[wave_first[w] .. wave_first[w + 1]) */
  int n_packed, n_programs;
  bool stats;                   /* -rammer-stats: a line per segment and a total on stderr */
  qir_diag *diag;
  qir_diag *quiet;              /* what expanding and planning an op's computes says (not the user's business) */
  roller_options plan_opts;     /* ops without a plan get roller's (their default schedule) */
  int n_undo, cap_undo;
  qir_op **undo;                /* ops of the open segment that -rammer gave a plan: undone if it is not packed */
  const qir_attr_val **undo_old;   /* a kernel group's tile before (its block), or NULL */
  qir_op **undo_orig;           /* an op -rammer made a group of its own (the undo entry), or NULL */
  int n_wrapped;                /* groups made so far: their names */
  double total_packed_us, total_unpacked_us;
  const int64_t *at;            /* qopt_rprogram_us_at: the run's symbol values, or NULL (the bound) */
} rammer;

static double plan_est(const qir_attr_val *tile) {
  const qir_attr_val *e = qir_attr_dict_get(tile, "est_us");
  if (e && e->kind == QIR_ATTR_FLOAT && e->f > 0) return e->f;
  if (e && e->kind == QIR_ATTR_INT && e->i > 0) return (double)e->i;
  return 1.0;
}

static int64_t resident(const rammer *r, const qir_rp_kernel *k) {
  return r->t->compute_units * qir_rprogram_blocks_per_unit(r->t, k->threads, k->regs, k->smem);
}


/* one task's time in the program, and the fraction of the device its own
 * launch keeps busy */
static double task_us(const rammer *r, const rk *k) {
  int64_t cap = resident(r, &k->k);
  if (cap < 1) cap = 1;
  int64_t waves = (k->k.tasks + cap - 1) / cap;
  double tau = k->est_us / (double)(waves ? waves : 1);
  /* co-resident blocks per unit: in its own launch, and in the program's */
  int64_t units = r->t->compute_units > 0 ? r->t->compute_units : 1;
  int64_t own = (k->k.tasks + units - 1) / units, per_unit = cap / units;
  if (own > per_unit) own = per_unit;
  /* (a run with fewer live tasks than vEUs keeps fewer of them on the units) */
  int64_t busy = r->at && k->live > 0 && k->live < r->veus ? k->live : r->veus;
  int64_t packed = (busy + units - 1) / units;
  if (own < 1 || packed < 1 || packed >= own) return tau;
  double f = (double)packed / (double)own;
  return tau * (f > QOPT_OCC_FLOOR ? f : QOPT_OCC_FLOOR);
}

static double busy_us(const rammer *r, const rk *k) {
  int64_t cap = resident(r, &k->k);
  if (cap < 1) cap = 1;
  int64_t waves = (k->k.tasks + cap - 1) / cap;
  return k->est_us * (double)k->k.tasks / (double)((waves ? waves : 1) * cap);
}

/* Modules with dimension symbols: the kernel's tasks in a run at r->at.
 * qcodegen's member kernels skip a block whose tile starts past the run's
 * extent along a symbolic axis of the output; a plan whose grid is not its
 * output's tiles (flat and row kernels) runs every task. */
static void run_tasks(const rammer *r, rk *k) {
  k->tile_rank = qopt_run_tiles(k->op, r->at, k->nb, k->run_tiles);
  int64_t grid = 1, live = 1;
  for (int d = 0; d < k->tile_rank; d++) grid *= k->nb[d], live *= k->run_tiles[d];
  if (grid != k->k.tasks) k->tile_rank = 0;
  k->live = k->tile_rank ? live : k->k.tasks;
}

/* Whether task `task` of k works in the run (run_tasks). */
static bool task_live(const rk *k, int64_t task) {
  for (int d = k->tile_rank - 1; d >= 0; d--) {
    if (task % k->nb[d] >= k->run_tiles[d]) return false;
    task /= k->nb[d];
  }
  return true;
}

/* Of the `count` tasks vEU `v` (of the kernel's run) takes, strided, those that do work. */
static int64_t live_tasks(const rammer *r, const rk *k, int64_t v, int64_t count) {
  if (!r->at || !k->tile_rank) return count;
  int64_t live = 0;
  for (int64_t j = 0; j < count; j++) live += task_live(k, v + j * k->n_veus);
  return live;
}

static int producer_in(const rammer *r, const qir_value *v) {
  while (v && v->def) {
    for (int i = 0; i < r->n; i++)
      if (r->ks[i].op == v->def) return i;
    if (!qir_op_is_view(v->def)) return -1;
    v = v->def->operands[0];
  }
  return -1;
}

/* vEUs one kernel needs to run its tasks of tau us each within t us. */
static int64_t veus_within(int64_t tasks, double tau, double t) {
  double rounds = tau > 0 ? floor(t / tau * (1 + 1e-12)) : (double)tasks;
  if (rounds < 1) return INT64_MAX / 4;
  if (rounds >= (double)tasks) return 1;
  return (tasks + (int64_t)rounds - 1) / (int64_t)rounds;
}

/* vEUs of each kernel of wave w: one per task when they fit, else shares
 * that let the kernels finish together (the wave's makespan is the least
 * for which the kernels' shares, each its tasks over the rounds it can run
 * in that time, fit the vEUs), at least one each. */
static void assign_veus(rammer *r, int w) {
  const int *ks = r->wave_ks + r->wave_first[w];
  int count = r->wave_first[w + 1] - r->wave_first[w];
  int64_t total = 0;
  double tmax = 0, tsum = 0;
  for (int a = 0; a < count; a++) {
    const rk *k = &r->ks[ks[a]];
    double tau = task_us(r, k);
    total += k->k.tasks;
    tmax = fmax(tmax, tau);
    tsum += tau * (double)k->k.tasks;
  }
  if (!count) return;
  /* the least makespan (bisection between one round of the longest task and all work on one vEU) */
  double lo = tmax, hi = fmax(tsum, tmax);
  if (total > r->veus && count <= r->veus) {
    for (int it = 0; it < 60 && hi - lo > 1e-9 * hi; it++) {
      double mid = 0.5 * (lo + hi);
      int64_t need = 0;
      for (int a = 0; a < count && need <= r->veus; a++) need += veus_within(r->ks[ks[a]].k.tasks, task_us(r, &r->ks[ks[a]]), mid);
      if (need <= r->veus) hi = mid;
      else lo = mid;
    }
  }
  int64_t next = 0;
  for (int a = 0; a < count; a++) {
    rk *k = &r->ks[ks[a]];
    int64_t share = total <= r->veus ? k->k.tasks : count > r->veus ? 1 : veus_within(k->k.tasks, task_us(r, k), hi);
    if (share > k->k.tasks) share = k->k.tasks;
    if (share > r->veus) share = r->veus;
    if (share < 1) share = 1;
    if (next + share > r->veus) next = 0;   /* more kernels than vEUs: wrap (they run one after another) */
    k->veu_lo = next;
    k->n_veus = share;
    next += share;
  }
}

/* Producer tasks a wave must wait for when it has no barrier: every task of
 * every kernel its kernels read that no barrier or earlier wait completed.
 * ordered[i] = the first wave from which kernel i is complete for all vEUs. */
static void complete_waves(const rammer *r, int *ordered) {
  /* the first barrier after each wave, then the first wave that reads each kernel */
  int *next_barrier = malloc(sizeof *next_barrier * (size_t)(r->n_waves + 1));
  if (!next_barrier) abort();
  next_barrier[r->n_waves] = INT32_MAX;
  for (int w = r->n_waves - 1; w >= 0; w--)
    next_barrier[w] = w + 1 < r->n_waves && r->barrier[w + 1] ? w + 1 : next_barrier[w + 1];
  for (int i = 0; i < r->n; i++) ordered[i] = next_barrier[r->ks[i].wave];
  for (int i = 0; i < r->n; i++) {
    const rk *k = &r->ks[i];
    for (int j = 0; j < k->n_deps; j++)
      if (ordered[k->deps[j]] > k->wave) ordered[k->deps[j]] = k->wave;   /* a wait in k's wave */
  }
  free(next_barrier);
}

static bool waits_on(const rammer *r, const int *ordered, int w, int producer) {
  return !r->barrier[w] && ordered[producer] == w;
}

/* The modelled time of the program (launch included); *bound_us, if not
 * NULL, gets the device's throughput bound in it, and *util the fraction of
 * the vEUs' time (launch to the last vEU's end) they run tasks. */
static double program_us_parts(const rammer *r, double *bound_us, double *util) {
  double *clock = calloc((size_t)r->veus, sizeof *clock);   /* a vEU's end, or less: then `floor` */
  double *done = calloc((size_t)r->n + 1, sizeof *done);   /* end of a kernel's last task */
  double *ready = calloc((size_t)r->n_waves + 1, sizeof *ready);   /* the end of what wave w waits for */
  int *ordered = malloc(sizeof *ordered * (size_t)(r->n + 1));
  if (!clock || !done || !ready || !ordered) abort();
  complete_waves(r, ordered);
  double throughput = 0, floor_us = 0, end = 0, busy = 0;   /* no vEU starts before floor_us; end: the latest vEU's */
  for (int w = 0; w < r->n_waves; w++) {
    if (w > 0 && r->barrier[w]) {
      floor_us = end + r->sync_us;
    } else if (ready[w] > 0) {
      floor_us = fmax(floor_us, ready[w] + 0.25 * r->sync_us);
    }
    for (int a = r->wave_first[w]; a < r->wave_first[w + 1]; a++) {
      int i = r->wave_ks[a];
      rk *k = &r->ks[i];
      if (r->at) run_tasks(r, k);
      double tau = task_us(r, k);
      int64_t per = (k->k.tasks + k->n_veus - 1) / k->n_veus;
      double last = done[i];   /* (the hot loop: plain comparisons, no libm calls) */
      for (int64_t v = k->veu_lo; v < k->veu_lo + k->n_veus && v < r->veus; v++) {
        int64_t mine = per;
        if ((v - k->veu_lo) + (per - 1) * k->n_veus >= k->k.tasks) mine = per - 1;
        int64_t live = live_tasks(r, k, v - k->veu_lo, mine);
        double c = (clock[v] > floor_us ? clock[v] : floor_us) + (double)live * tau + (double)(mine - live) * SKIP_BARRIERS * r->sync_us;
        clock[v] = c;
        busy += (double)live * tau;
        if (c > last) last = c;
      }
      done[i] = last;
      if (last > end) end = last;
      throughput += busy_us(r, k) * (r->at ? (double)k->live / (double)k->k.tasks : 1);
      /* a wave that waits for this kernel starts after its last task */
      if (ordered[i] < r->n_waves && !r->barrier[ordered[i]]) ready[ordered[i]] = fmax(ready[ordered[i]], done[i]);
    }
  }
  free(clock);
  free(done);
  free(ready);
  free(ordered);
  if (bound_us) *bound_us = throughput;
  if (util) *util = end > 0 && r->veus > 0 ? busy / (end * (double)r->veus) : 0;
  return r->launch_us + fmax(end, throughput);
}

static double program_us(const rammer *r) { return program_us_parts(r, NULL, NULL); }

/* A kernel group's plan is its anchor's too (the member whose #tile has a grid). */
static void set_plan(qir_module *m, qir_op *op, qir_attr_val tile) {
  qir_op_set_attr(m, op, "tile", tile, true);
  if (op->code != QIR_OP_KERNEL) return;
  for (qir_op *x = op->regions[0]->first; x; x = x->next) {
    const qir_attr *t = qir_op_attr(x, "tile");
    if (t && t->val.kind == QIR_ATTR_DICT && qir_attr_dict_get(&t->val, "grid")) qir_op_set_attr(m, x, "tile", tile, true);
  }
  qir_group_rederive_tiles(m, op);   /* the members' tiles follow the new block */
}

static void use_plan(rk *k, int i) {
  k->cur = i;
  k->k = k->plans[i].k;
  k->k.op = k->op;
  k->est_us = k->plans[i].est_us;
}

/* The op's plans: its #tile, then every alternative that is a whole plan. */
/* A plan dict whose contractions run on wgmma: mma or flash_mma = [64, N, 16]. */
static bool plan_on_wgmma(const qir_attr_val *tile) {
  if (tile->kind != QIR_ATTR_DICT) return false;
  for (int i = 0; i < 2; i++) {
    const qir_attr_val *mma = qir_attr_dict_get(tile, i ? "flash_mma" : "mma");
    if (mma && mma->kind == QIR_ATTR_LIST && mma->n == 3 && mma->items[0].kind == QIR_ATTR_INT && mma->items[0].i == 64) return true;
  }
  return false;
}

static void read_plans(rammer *r, rk *k) {
  const qir_attr *tile = qir_op_attr(k->op, "tile");
  const qir_attr *alts = qir_op_attr(k->op, "tile_alternatives");
  int cap = 1 + (alts && alts->val.kind == QIR_ATTR_LIST ? alts->val.n : 0);
  k->plans = qir_alloc(r->m, sizeof *k->plans * (size_t)cap);
  k->n_plans = 0;
  for (int i = 0; i < cap; i++) {
    const qir_attr_val *v = i == 0 ? &tile->val : &alts->val.items[i - 1];
    rplan pl = {.val = *v, .est_us = plan_est(v)};
    if (!qir_rprogram_kernel_of_plan(v, &pl.k) || pl.k.tasks < 1 || plan_on_wgmma(v)) {   /* not packed: plan_is_wgmma */
      if (i == 0) return;
      continue;
    }
    k->plans[k->n_plans++] = pl;
  }
}

/* The segment is packed: a kernel running another plan than the one it came
 * with gets it as its #tile, the old plan taking its place in the list. */
static void write_plans(rammer *r) {
  for (int i = 0; i < r->n; i++) {
    rk *k = &r->ks[i];
    if (k->cur == 0) continue;
    qir_attr_val *items = qir_alloc(r->m, sizeof *items * (size_t)k->n_plans);
    for (int a = 1; a < k->n_plans; a++) items[a - 1] = a == k->cur ? k->plans[0].val : k->plans[a].val;
    qir_op_set_attr(r->m, k->op, "tile_alternatives", qir_attr_list(r->m, k->n_plans - 1, items), true);
    set_plan(r->m, k->op, k->plans[k->cur].val);
  }
}

/* The segment is not packed: ops that came without a plan lose the one
 * -rammer gave them. */
/* Undoes wrap(): the op stands where its group stood, read by the group's readers. */
static void unwrap(rammer *r, qir_op *k, qir_op *orig) {
  qir_op_insert_before(k, orig);
  for (int j = 0; j < orig->n_operands; j++) {   /* unlink dropped the uses: add them again */
    qir_value *v = orig->operands[j];
    orig->operands[j] = NULL;
    qir_op_set_operand(r->m, orig, j, v);
  }
  qir_value_replace_uses(r->m, k->results[0], orig->results[0]);
  qir_op_unlink(k);
}

static void undo_one(rammer *r, int i) {
  if (r->undo_orig[i]) {
    unwrap(r, r->undo[i], r->undo_orig[i]);
    return;
  }
  if (r->undo_old[i]) {
    qir_op_set_attr(r->m, r->undo[i], "tile", *r->undo_old[i], true);
    return;
  }
  qir_op_remove_attr(r->undo[i], "tile");
  qir_op_remove_attr(r->undo[i], "tile_alternatives");
}

static void undo_plans(rammer *r) {
  for (int i = 0; i < r->n_undo; i++) undo_one(r, i);
  r->n_undo = 0;
}

static bool fits(const rplan *pl, int64_t th, int64_t rg, int64_t sm) {
  return pl->k.threads <= th && pl->k.regs <= rg && pl->k.smem <= sm;
}

/* Wave w's tasks overfill the vDevice: try each kernel's other plans that
 * need no more than the vDevice's block and keep one where the model says so. */
static void choose_plans(rammer *r, int w, int64_t th, int64_t rg, int64_t sm) {
  int64_t total = 0;
  for (int a = r->wave_first[w]; a < r->wave_first[w + 1]; a++) total += r->ks[r->wave_ks[a]].k.tasks;
  if (total <= r->veus) return;
  for (int a = r->wave_first[w]; a < r->wave_first[w + 1]; a++) {
    rk *k = &r->ks[r->wave_ks[a]];
    for (int a = 0; a < k->n_plans; a++) {
      if (a == k->cur || !fits(&k->plans[a], th, rg, sm)) continue;
      double before = program_us(r);
      int old = k->cur;
      use_plan(k, a);
      assign_veus(r, w);
      if (program_us(r) < before) continue;
      use_plan(k, old);
      assign_veus(r, w);
    }
  }
}

static qir_attr_val range(qir_module *m, int64_t a, int64_t b) {
  int64_t v[2] = {a, b};
  return qir_attr_ints(m, 2, v);
}

static qir_attr entry(const char *key, qir_attr_val v) { return (qir_attr){.key = key, .val = v}; }

/* A member's own launch at the run's size (its band's plan, or its blocks
 * that do work), the launch included. */
static double own_launch_us(const rammer *r, const rk *k, const int64_t *at) {
  double band = qopt_band_share(k->op, at);
  return r->launch_us + k->est_us * (band >= 0 ? band : qopt_run_share(r->t, k->op, at));
}

/* Modules with dimension symbols: the program's tasks are its members'
 * bound-sized tiles, so at the small end of a range the members' own
 * launches, on their plans for smaller runs (#tile_bands), may be faster.
 * The largest of the sizes qopt_size_steps makes up to which they are (at
 * every step below too) is written as #unpacked_upto = [v0, v1, ...], one
 * value per symbol: qcodegen launches the members one by one, in wave order,
 * for a run whose every symbol is at most its value. */
static void unpacked_sizes(rammer *r, qir_op *rp) {
  if (!r->m->n_syms) return;
  uint64_t all = r->m->n_syms >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << r->m->n_syms) - 1;
  int64_t steps[8][QOPT_MAX_SYMS];
  int n = qopt_size_steps(r->m, all, 8, steps), upto = -1;
  for (int s = 0; s < n; s++) {
    double apart = 0;
    for (int i = 0; i < r->n; i++) apart += own_launch_us(r, &r->ks[i], steps[s]);
    r->at = steps[s];
    double packed = program_us(r);
    r->at = NULL;
    if (!(apart < packed)) break;
    upto = s;
  }
  if (upto >= 0) qir_op_set_attr(r->m, rp, "unpacked_upto", qir_attr_ints(r->m, r->m->n_syms, steps[upto]), false);
}

static void write_program(rammer *r, qir_op *before, double packed_us, double unpacked_us) {
  qir_module *m = r->m;
  qir_value **vals = qir_alloc(m, sizeof *vals * (size_t)r->n);
  for (int i = 0; i < r->n; i++) vals[i] = r->ks[i].op->results[0];
  qir_op *rp = qir_op_new(m, QIR_OP_RPROGRAM, r->n, vals, 0, NULL, before->loc);
  int *ordered = malloc(sizeof *ordered * (size_t)(r->n + 1));
  if (!ordered) abort();
  complete_waves(r, ordered);
  qir_attr_val *waves = qir_alloc(m, sizeof *waves * (size_t)r->n_waves);
  for (int w = 0; w < r->n_waves; w++) {
    int n_runs = 0, n_waits = 0;
    for (int i = 0; i < r->n; i++) n_runs += r->ks[i].wave == w, n_waits += waits_on(r, ordered, w, i);
    qir_attr_val *runs = qir_alloc(m, sizeof *runs * (size_t)(n_runs + 1));
    qir_attr_val *waits = qir_alloc(m, sizeof *waits * (size_t)(n_waits + 1));
    int a = 0, b = 0;
    for (int i = 0; i < r->n; i++) {
      const rk *k = &r->ks[i];
      if (k->wave == w) {
        qir_attr e[3] = {entry("kernel", qir_attr_int(i)), entry("tasks", range(m, 0, k->k.tasks)),
                         entry("veus", range(m, k->veu_lo, k->veu_lo + k->n_veus - 1))};
        runs[a++] = qir_attr_dict(m, 3, e);
      }
      if (waits_on(r, ordered, w, i)) {
        qir_attr e[2] = {entry("kernel", qir_attr_int(i)), entry("tasks", range(m, 0, k->k.tasks))};
        waits[b++] = qir_attr_dict(m, 2, e);
      }
    }
    qir_attr we[3];
    int n_we = 0;
    if (w > 0 && r->barrier[w]) we[n_we++] = entry("barrier", qir_attr_int(1));
    we[n_we++] = entry("run", qir_attr_list(m, n_runs, runs));
    if (n_waits) we[n_we++] = entry("wait", qir_attr_list(m, n_waits, waits));
    waves[w] = qir_attr_dict(m, n_we, we);
  }
  free(ordered);
  qir_op_set_attr(m, rp, "veus", qir_attr_int(r->veus), false);
  qir_op_set_attr(m, rp, "waves", qir_attr_list(m, r->n_waves, waves), false);
  qir_op_set_attr(m, rp, "target", qir_attr_string(m, r->t->name), false);
  qir_op_set_attr(m, rp, "est_us", qir_attr_float(round(packed_us * 1000) / 1000), false);
  qir_op_set_attr(m, rp, "unpacked_us", qir_attr_float(round(unpacked_us * 1000) / 1000), false);
  unpacked_sizes(r, rp);
  qir_op_insert_before(before, rp);
  r->n_programs++;
  r->n_packed += r->n;
}

/* The schedule of the segment with each kernel's plan in use: the vDevice
 * for the largest block, every kernel's vEUs in its wave; `full` also trades
 * plans in overfull waves and keeps a barrier only where the model rates it
 * above waits (quick: waits everywhere).  The modelled time, or INFINITY. */
static double schedule(rammer *r, bool full) {
  int64_t th = 0, rg = 0, sm = 0;
  for (int i = 0; i < r->n; i++) {
    const rk *k = &r->ks[i];
    if (k->k.threads > th) th = k->k.threads;
    if (k->k.regs > rg) rg = k->k.regs;
    if (k->k.smem > sm) sm = k->k.smem;
  }
  /* the persistent kernel needs more registers than its largest member (as the verifier counts them) */
  r->veus = r->t->compute_units * qir_rprogram_blocks_per_unit(r->t, th, qir_rprogram_regs(r->t, rg), sm);
  if (r->veus < 1) return INFINITY;
  for (int w = 0; w < r->n_waves; w++) r->barrier[w] = full && w > 0;
  for (int w = 0; w < r->n_waves; w++) assign_veus(r, w);
  if (full) {
    for (int w = 0; w < r->n_waves; w++) choose_plans(r, w, th, rg, sm);
    /* waits instead of barriers where they pay */
    for (int w = 1; w < r->n_waves; w++) {
      double with_barrier = program_us(r);
      r->barrier[w] = false;
      if (program_us(r) >= with_barrier) r->barrier[w] = true;
    }
  }
  /* the launch needs only the vEUs some wave uses: idle ones would only wait at barriers */
  int64_t used = 1;
  for (int i = 0; i < r->n; i++)
    if (r->ks[i].veu_lo + r->ks[i].n_veus > used) used = r->ks[i].veu_lo + r->ks[i].n_veus;
  if (used < r->veus) r->veus = used;
  return program_us(r);
}

/* Blocks per compute unit of a persistent kernel whose largest member is pk. */
static int64_t program_blocks_per_unit(const rammer *r, const qir_rp_kernel *pk) {
  return qir_rprogram_blocks_per_unit(r->t, pk->threads, qir_rprogram_regs(r->t, pk->regs), pk->smem);
}

/* Each kernel's fastest plan that runs in one hardware wave with at least
 * `per_unit` co-resident blocks per compute unit of the program (false: a
 * kernel has none). */
static bool plans_for_occupancy(rammer *r, int64_t per_unit) {
  for (int i = 0; i < r->n; i++) {
    rk *k = &r->ks[i];
    int best = -1;
    bool one_wave = false;   /* a plan that runs in one hardware wave of its own beats one that does not */
    for (int a = 0; a < k->n_plans; a++) {
      const qir_rp_kernel *pk = &k->plans[a].k;
      if (program_blocks_per_unit(r, pk) < per_unit) continue;
      bool ow = pk->tasks <= resident(r, pk);
      if (best < 0 || (ow && !one_wave) || (ow == one_wave && k->plans[a].est_us < k->plans[best].est_us)) best = a, one_wave = ow;
    }
    if (best < 0) return false;
    use_plan(k, best);
  }
  return true;
}

/* The wavefront of r->ks[0..n): a kernel's wave is one more than the latest
 * of the kernels of the set it reads. */
static void wavefront(rammer *r) {
  r->n_waves = 0;
  for (int i = 0; i < r->n; i++) {
    rk *k = &r->ks[i];
    k->deps = qir_alloc(r->m, sizeof *k->deps * (size_t)(k->op->n_operands + 1));
    k->n_deps = 0;
    k->wave = 0;
    for (int a = 0; a < k->op->n_operands; a++) {
      int p = producer_in(r, k->op->operands[a]);
      if (p < 0) continue;
      bool dup = false;
      for (int j = 0; j < k->n_deps; j++) dup |= k->deps[j] == p;
      if (!dup) k->deps[k->n_deps++] = p;
      if (r->ks[p].wave + 1 > k->wave) k->wave = r->ks[p].wave + 1;
    }
    if (k->wave + 1 > r->n_waves) r->n_waves = k->wave + 1;
  }
  r->barrier = qir_alloc(r->m, sizeof *r->barrier * (size_t)(r->n_waves + 1));
  /* each wave's kernels, in program order */
  r->wave_first = qir_alloc(r->m, sizeof *r->wave_first * (size_t)(r->n_waves + 2));
  r->wave_ks = qir_alloc(r->m, sizeof *r->wave_ks * (size_t)(r->n + 1));
  memset(r->wave_first, 0, sizeof *r->wave_first * (size_t)(r->n_waves + 2));
  for (int i = 0; i < r->n; i++) r->wave_first[r->ks[i].wave + 1]++;
  for (int w = 0; w < r->n_waves; w++) r->wave_first[w + 1] += r->wave_first[w];
  int *fill = malloc(sizeof *fill * (size_t)(r->n_waves + 1));
  if (!fill) abort();
  memcpy(fill, r->wave_first, sizeof *fill * (size_t)(r->n_waves + 1));
  for (int i = 0; i < r->n; i++) r->wave_ks[fill[r->ks[i].wave]++] = i;
  free(fill);
}

/* The kernels of segment waves [lo, hi) as r's set (copied into buf), their
 * wavefront and the best occupancy's plans; the quick modelled time of
 * packing them, INFINITY where no vDevice fits. */
static double take_part(rammer *r, const rk *all, int n_all, int lo, int hi, rk *buf) {
  r->ks = buf;
  r->n = 0;
  for (int i = 0; i < n_all; i++)
    if (all[i].seg_wave >= lo && all[i].seg_wave < hi) buf[r->n++] = all[i];
  if (r->n < 2) return INFINITY;
  wavefront(r);
  bool tried[65] = {false};
  int64_t best_n = 0;
  double best_us = INFINITY;
  for (int i = 0; i < r->n; i++)
    for (int a = 0; a < r->ks[i].n_plans; a++) {
      const qir_rp_kernel *pk = &r->ks[i].plans[a].k;
      int64_t n = program_blocks_per_unit(r, pk);
      if (n < 1 || n > 64 || tried[n]) continue;
      tried[n] = true;
      if (!plans_for_occupancy(r, n)) continue;
      double us = schedule(r, false);
      if (us < best_us) best_us = us, best_n = n;
    }
  if (best_n < 1 || !plans_for_occupancy(r, best_n)) return INFINITY;
  return best_us;
}

/* A part left unpacked after a packed one: its kernels (and the views of
 * them) move to just before `before`, after the programs written so far,
 * which they may read.  Nothing else between reads them (such an op would
 * have closed the segment), so the move keeps every value's meaning. */
static void move_part(rammer *r, const rk *all, int n_all, int lo, int hi, qir_op *start, qir_op *before) {
  int n = 0, cap = 16;
  qir_op **moved = qir_alloc(r->m, sizeof *moved * (size_t)cap);
  for (qir_op *op = start; op && op != before; op = op->next) {
    bool take = false;
    for (int i = 0; i < n_all && !take; i++) take = all[i].op == op && all[i].seg_wave >= lo && all[i].seg_wave < hi;
    if (!take && qir_op_is_view(op) && op->operands[0]->def)
      for (int i = 0; i < n && !take; i++) take = moved[i] == op->operands[0]->def;
    if (!take) continue;
    if (n == cap) {
      qir_op **more = qir_alloc(r->m, sizeof *more * (size_t)(2 * cap));
      memcpy(more, moved, sizeof *moved * (size_t)n);
      moved = more;
      cap *= 2;
    }
    moved[n++] = op;
  }
  for (int i = 0; i < n; i++) {
    qir_op *op = moved[i];
    qir_op_unlink(op);
    qir_op_insert_before(before, op);
    for (int j = 0; j < op->n_operands; j++) {   /* unlink dropped the uses: add them again */
      qir_value *v = op->operands[j];
      op->operands[j] = NULL;
      qir_op_set_operand(r->m, op, j, v);
    }
  }
}

static double unpacked_us(const rammer *r, const rk *all, int n_all, int lo, int hi) {
  double us = 0;
  for (int i = 0; i < n_all; i++)
    if (all[i].seg_wave >= lo && all[i].seg_wave < hi) us += all[i].own_us + r->launch_us;
  return us;
}

/* Packs the kernels ks[0..n) of one segment into rprograms before `before`.
 *
 * The vDevice's block is the largest of the kernels' plans: one kernel with
 * a large block would leave few vEUs to all the others.  So for every
 * occupancy some plan allows (blocks per unit), each kernel takes its
 * fastest plan that allows it (a resource-efficient alternative where its
 * own fastest needs more), and the occupancy whose schedule the model rates
 * fastest is kept.  Where the model says so, the segment is split into
 * consecutive ranges of its waves, each its own rprogram (or its kernels'
 * own launches): a range of large kernels (the early layers) and a range of
 * small ones pack best on different vDevices.  The split is chosen by
 * dynamic programming over at most MAX_CUTS cut points. */
#define MAX_CUTS 16
static void pack(rammer *r, qir_op *before) {
  if (r->stats && r->n >= 1) {
    const qir_opinfo *info = qir_opinfo_get(before->code);
    fprintf(stderr, "rammer: segment of %d kernels closed by '%s' at line %d\n", r->n, info ? info->name : "?", before->loc.line);
  }
  if (r->n < 2) {
    undo_plans(r);
    return;
  }
  qir_module *m = r->m;
  rk *all = r->ks;
  int n_all = r->n;
  /* where the segment starts (kernels of unpacked parts may move, this does not) */
  qir_op *start_prev = all[0].op->prev;
  qir_region *reg = all[0].op->parent;
  wavefront(r);
  int n_seg_waves = r->n_waves;
  for (int i = 0; i < n_all; i++) all[i].seg_wave = all[i].wave;
  rk *buf = qir_alloc(m, sizeof *buf * (size_t)(n_all + 1));
  /* cut points: every wave, or evenly spaced ones for long segments */
  int n_pts = n_seg_waves < MAX_CUTS ? n_seg_waves : MAX_CUTS;
  int pts[MAX_CUTS + 1];
  for (int i = 0; i <= n_pts; i++) pts[i] = (int)((int64_t)i * n_seg_waves / n_pts);
  /* best[j]: the modelled time of waves [0, pts[j]); from[j]: where its last part starts */
  double best[MAX_CUTS + 1];
  int from[MAX_CUTS + 1];
  best[0] = 0;
  for (int j = 1; j <= n_pts; j++) {
    best[j] = INFINITY;
    for (int i = 0; i < j; i++) {
      double un = unpacked_us(r, all, n_all, pts[i], pts[j]);
      double packed = take_part(r, all, n_all, pts[i], pts[j], buf);
      double us = best[i] + (packed < un ? packed : un);
      if (us < best[j]) best[j] = us, from[j] = i;
    }
  }
  int parts[MAX_CUTS + 1], n_parts = 0;
  for (int j = n_pts; j > 0; j = from[j]) parts[n_parts++] = j;
  /* the split was chosen by the quick model: keep it only if the full one agrees */
  double split_us = 0, whole_us = INFINITY;
  if (n_parts > 1) {
    for (int q = 0; q < n_parts; q++) {
      int j = parts[q];
      double un = unpacked_us(r, all, n_all, pts[from[j]], pts[j]);
      double us = take_part(r, all, n_all, pts[from[j]], pts[j], buf) < INFINITY ? schedule(r, true) : INFINITY;
      split_us += us < un ? us : un;
    }
    double un = unpacked_us(r, all, n_all, 0, n_seg_waves);
    whole_us = take_part(r, all, n_all, 0, n_seg_waves, buf) < INFINITY ? schedule(r, true) : INFINITY;
    if ((whole_us < un ? whole_us : un) <= split_us) {
      parts[0] = n_pts;
      from[n_pts] = 0;
      n_parts = 1;
    }
  }
  /* each part, in wave order: packed with its full schedule where that pays */
  int packed_parts = 0;
  for (int q = n_parts - 1; q >= 0; q--) {
    qir_op *start = start_prev ? start_prev->next : reg->first;
    int j = parts[q], lo = pts[from[j]], hi = pts[j];
    /* after a program, a part's kernels (packed or not) move after it */
    if (packed_parts) move_part(r, all, n_all, lo, hi, start, before);
    double unpacked = unpacked_us(r, all, n_all, lo, hi);
    if (take_part(r, all, n_all, lo, hi, buf) == INFINITY) continue;
    double packed = schedule(r, true);
    if (r->stats) {
      double bound, util;
      program_us_parts(r, &bound, &util);
      fprintf(stderr, "rammer: %d kernels, %d waves, %lld vEUs: modelled %.2f us packed (throughput bound %.2f us), %.2f us as %d launches%s; "
              "vEUs busy %.0f%%\n",
              r->n, r->n_waves, (long long)r->veus, packed, bound, unpacked, r->n, packed < unpacked ? "" : " (left unpacked)", 100 * util);
    }
    r->total_packed_us += packed < unpacked ? packed : unpacked;
    r->total_unpacked_us += unpacked;
    if (!(packed < unpacked)) continue;
    write_plans(r);
    write_program(r, before, packed, unpacked);
    packed_parts++;
  }
  if (r->stats && n_parts > 1) {
    /* where and why: the cut waves, and the model's times of the parts and of one program */
    fprintf(stderr, "rammer: the segment is split into %d parts by its waves (%d packed), cut before wave", n_parts, packed_parts);
    for (int q = n_parts - 2; q >= 0; q--) fprintf(stderr, "%s %d", q == n_parts - 2 ? "" : ",", pts[from[parts[q]]]);
    fprintf(stderr, " of %d: modelled %.2f us as parts, %.2f us as one program (its vDevice is sized for the largest block "
            "of all its kernels): the model rates the parts faster\n", n_seg_waves, split_us, whole_us);
  }
  /* ops -rammer gave a plan keep it only where they were packed */
  for (int i = 0; i < r->n_undo; i++)
    if (!qir_rprogram_packs(r->undo[i])) undo_one(r, i);
  r->n_undo = 0;
  r->ks = all;
  r->n = n_all;
}

static bool whole_plan(const qir_op *op) {
  const qir_attr *t = qir_op_attr(op, "tile");
  return t && t->val.kind == QIR_ATTR_DICT && qir_attr_dict_get(&t->val, "grid");
}

static bool row_or_lrn(const qir_op *op) {
  switch (op->code) {
  case QIR_OP_SOFTMAX: case QIR_OP_LOG_SOFTMAX: case QIR_OP_LAYER_NORM: case QIR_OP_INSTANCE_NORM: case QIR_OP_LP_NORMALIZATION:
  case QIR_OP_LRN:
    return op->n_results == 1 && op->results[0]->type.rank > 0 && qir_type_numel(&op->results[0]->type) > 0;
  default: return false;
  }
}

/* A softmax, norm or LRN op with no plan of its own (several computes, so
 * several kernels as it stands) as a Welder group of its own, which qcodegen
 * composes into one kernel: a row group (one warp per row), or for LRN a
 * fused kernel on roller's plan of its reduction.  Its plan is that kernel's,
 * its est_us the sum of roller's estimates of the computes.  The group
 * replaces op (unlinked, kept for unwrap); NULL where no plan follows. */
static qir_op *wrap(rammer *r, qir_op *op) {
  qir_module *m = r->m;
  qir_op *chain[8];
  int n = qir_op_expand_computes(m, op, chain, 8, r->quiet);
  if (n < 2) return NULL;
  double est = 0;
  const qir_attr *red_plan = NULL;
  for (int i = 0; i < n; i++) {
    if (!roller_plan_op(m, chain[i], r->t, &(roller_options){.topk = 1}, NULL, r->quiet)) return NULL;
    const qir_attr *t = qir_op_attr(chain[i], "tile");
    if (!t) return NULL;
    est += plan_est(&t->val);
    if (chain[i]->comp && chain[i]->comp->n_red > 0 && !red_plan) red_plan = t;
  }
  /* the group: op's operands (each once) bound to its arguments */
  qir_value **ext = qir_alloc(m, sizeof *ext * (size_t)(op->n_operands + 1));
  int n_ext = 0;
  for (int j = 0; j < op->n_operands; j++) {
    bool seen = false;
    for (int q = 0; q < n_ext; q++) seen |= ext[q] == op->operands[j];
    if (!seen) ext[n_ext++] = op->operands[j];
  }
  const qir_opinfo *info = qir_opinfo_get(op->code);
  qir_op *k = qir_op_new(m, QIR_OP_KERNEL, n_ext, ext, 1, &op->results[0]->type, op->loc);
  k->sym = qir_sprintf(m, "rammer%d_%s", r->n_wrapped, info ? info->name : "op");
  qir_region *body = k->regions[0];
  qir_value **args = qir_alloc(m, sizeof *args * (size_t)(n_ext + 1));
  for (int q = 0; q < n_ext; q++) args[q] = qir_region_add_arg(m, body, ext[q]->type, ext[q]->name);
  qir_value **opnds = qir_alloc(m, sizeof *opnds * (size_t)(op->n_operands + 1));
  for (int j = 0; j < op->n_operands; j++)
    for (int q = 0; q < n_ext; q++)
      if (ext[q] == op->operands[j]) opnds[j] = args[q];
  qir_op *c = qir_op_copy_single(m, op, opnds);
  qir_op_append(body, c);
  qir_op_append(body, qir_op_new(m, QIR_OP_YIELD, 1, &c->results[0], 0, NULL, op->loc));
  qir_attr_val plan;
  bool ok = qir_group_whole_plan(m, k, r->t, round(est * 1000) / 1000, &plan);
  if (!ok && op->code == QIR_OP_LRN && red_plan && qir_group_composes_fused(m, k)) {
    /* the fused kernel's loops are its reduction's: roller's plan of it */
    plan = red_plan->val;
    qir_attr_val *v = qir_alloc(m, sizeof *v * (size_t)(plan.n + 1));
    ok = true;
    for (int i = 0; i < plan.n; i++) {
      v[i] = plan.entries[i].val;
      if (plan.entries[i].key && !strcmp(plan.entries[i].key, "est_us")) v[i] = qir_attr_float(round(est * 1000) / 1000);
    }
    qir_attr *e = qir_alloc(m, sizeof *e * (size_t)(plan.n + 1));
    for (int i = 0; i < plan.n; i++) e[i] = (qir_attr){.key = plan.entries[i].key, .val = v[i], .loc = plan.entries[i].loc};
    plan = qir_attr_dict(m, plan.n, e);
  }
  if (!ok) return NULL;
  qir_op_set_attr(m, k, "tile", plan, true);
  qir_op_set_attr(m, k, "est_us", qir_attr_float(round(est * 1000) / 1000), true);
  r->n_wrapped++;
  k->results[0]->name = op->results[0]->name;
  qir_op_insert_before(op, k);
  qir_value_replace_uses(m, op->results[0], k->results[0]);
  qir_op_unlink(op);
  return k;
}

/* An op without a plan gets its default schedule: roller's plan (with
 * alternatives); a Welder group without a whole plan (hand-written, or a
 * block tile alone) the one qcodegen composes it with, where it is a staged
 * or row group (qir_group_whole_plan).  Kept only if the op ends up packed. */
static bool plan_default(rammer *r, qir_op **opp) {
  qir_op *op = *opp, *orig = NULL;
  const qir_attr *tile = qir_op_attr(op, "tile");
  qir_attr_val old_tile = tile ? tile->val : (qir_attr_val){0};
  const qir_attr *before = tile;
  switch (op->code) {
  case QIR_OP_INPUT: case QIR_OP_OUTPUT: case QIR_OP_CONST: case QIR_OP_YIELD: case QIR_OP_LOOP: case QIR_OP_IF:
  case QIR_OP_RPROGRAM:
    return false;
  case QIR_OP_KERNEL: {
    qir_attr_val plan;
    const qir_attr *est = qir_op_attr(op, "est_us");
    double us = !est ? 0 : est->val.kind == QIR_ATTR_FLOAT ? est->val.f : est->val.kind == QIR_ATTR_INT ? (double)est->val.i : 0;
    if (!qir_group_whole_plan(r->m, op, r->t, us, &plan)) return false;
    qir_op_set_attr(r->m, op, "tile", plan, true);
    break;
  }
  default:
    if (before || op->n_results != 1 || op->n_regions || qir_op_is_view(op)) return false;
    roller_plan_op(r->m, op, r->t, &r->plan_opts, NULL, r->diag);
    if (!qir_op_attr(op, "tile")) {
      qir_op *k = row_or_lrn(op) ? wrap(r, op) : NULL;
      if (!k) return false;
      orig = op;
      op = *opp = k;
      before = NULL;
    }
  }
  if (r->n_undo == r->cap_undo) {
    int cap = r->cap_undo ? 2 * r->cap_undo : 16;
    qir_op **u = qir_alloc(r->m, sizeof *u * (size_t)cap);
    const qir_attr_val **o = qir_alloc(r->m, sizeof *o * (size_t)cap);
    qir_op **w = qir_alloc(r->m, sizeof *w * (size_t)cap);
    if (r->n_undo) {
      memcpy(u, r->undo, sizeof *u * (size_t)r->n_undo);
      memcpy(o, r->undo_old, sizeof *o * (size_t)r->n_undo);
      memcpy(w, r->undo_orig, sizeof *w * (size_t)r->n_undo);
    }
    r->undo = u;
    r->undo_old = o;
    r->undo_orig = w;
    r->cap_undo = cap;
  }
  r->undo_old[r->n_undo] = NULL;
  r->undo_orig[r->n_undo] = orig;
  if (before) {   /* a copy: setting the plan may have rewritten the attribute in place */
    qir_attr_val *old = qir_alloc(r->m, sizeof *old);
    *old = old_tile;
    r->undo_old[r->n_undo] = old;
  }
  r->undo[r->n_undo++] = op;
  return true;
}

/* An rOperator: a kernel with a plan (its #tile, or its default schedule),
 * or one of its alternatives (a resource-efficient plan: fewer blocks).  A
 * kernel that fills the device several times over joins too (its tasks
 * strided over its vEUs); where the vDevice's block would cost it (and the
 * others) more than the launches saved, the model splits the segment. */
/* A plan on Hopper's wgmma on the op (mma or flash_mma = [64, N, 16]) or, for a kernel group,
 * on one of its ops: qcodegen launches such a kernel on its own (tensor maps, warpgroups). */
static bool plan_is_wgmma(const qir_op *op) {
  const qir_attr *t = qir_op_attr(op, "tile");
  if (t && plan_on_wgmma(&t->val)) return true;
  for (int i = 0; i < op->n_regions; i++)
    for (const qir_op *in = op->regions[i]->first; in; in = in->next)
      if (plan_is_wgmma(in)) return true;
  return false;
}

static bool is_kernel(rammer *r, qir_op **opp, rk *out) {
  qir_op *op = *opp;
  if (op->n_results < 1 || qir_op_is_view(op)) return false;
  if (plan_is_wgmma(op)) return false;
  /* a flash attention that reads a KV cache's past and new in place (and writes
   * its present) launches on its own; the concat launches nothing */
  if (qir_attention_reads_cache(op) || qir_attention_folds_concat(op)) return false;
  if (qir_attention_flash_splits(op) > 1) return false;   /* flash-decoding: two kernels, not one task set */
  /* qcodegen writes it for the run's extents: packed only as one compute with its
   * plan's tasks (qir_op_expands_to_one) */
  const char *why;
  if (!qir_op_row_wise(r->m, op, &why) && !qir_op_expands_to_one(r->m, op)) return false;
  bool planned_here = !whole_plan(op) && plan_default(r, opp);
  op = *opp;
  qir_rp_kernel k;
  if (qir_rprogram_kernel_of(op, &k) && k.tasks >= 1) {
    *out = (rk){.op = op};
    read_plans(r, out);
    if (out->n_plans > 0) {
      use_plan(out, 0);
      out->own_us = out->est_us;
      return true;
    }
  }
  if (planned_here) {
    bool wrapped = r->undo_orig[r->n_undo - 1] != NULL;
    undo_one(r, --r->n_undo);
    if (wrapped) *opp = r->undo_orig[r->n_undo];
  }
  return false;
}

/* reads, directly or in its regions, a kernel of the open segment? */
typedef struct {
  rammer *r;
  bool hit;
} reads_ctx;

static bool reads_visit(qir_op *op, void *vctx) {
  reads_ctx *c = vctx;
  for (int i = 0; i < op->n_operands && !c->hit; i++) c->hit = producer_in(c->r, op->operands[i]) >= 0;
  return !c->hit;
}

static void run_region(rammer *r, qir_region *reg) {
  int cap = 0;
  for (qir_op *op = reg->first; op; op = op->next) cap++;
  rk *ks = qir_alloc(r->m, sizeof *ks * (size_t)(cap + 1));
  r->ks = ks;
  r->n = 0;
  for (qir_op *op = reg->first, *next; op; op = next) {
    next = op->next;
    /* a kernel group's body is one kernel's, not a region of kernels */
    for (int i = 0; op->code != QIR_OP_KERNEL && i < op->n_regions; i++) {
      rammer inner = *r;
      inner.undo = NULL, inner.undo_old = NULL, inner.undo_orig = NULL, inner.n_undo = inner.cap_undo = 0;   /* the open segment's plans are not the region's */
      run_region(&inner, op->regions[i]);
      r->n_packed = inner.n_packed, r->n_programs = inner.n_programs, r->n_wrapped = inner.n_wrapped;
      r->total_packed_us = inner.total_packed_us, r->total_unpacked_us = inner.total_unpacked_us;
    }
    if (is_kernel(r, &op, &ks[r->n])) {
      r->n++;
      continue;
    }
    if (qir_op_is_view(op) || !r->n) continue;
    reads_ctx c = {.r = r};
    reads_visit(op, &c);
    for (int i = 0; i < op->n_regions && !c.hit; i++) qir_walk(op->regions[i], reads_visit, &c);
    if (!c.hit) continue;
    /* the body ends with its outputs: a program closed by one stands before them all */
    qir_op *at = op;
    while (at->code == QIR_OP_OUTPUT && at->prev && at->prev->code == QIR_OP_OUTPUT) at = at->prev;
    pack(r, at);
    ks += r->n;
    r->ks = ks;
    r->n = 0;
  }
  /* a nested region ends with its yield, the body with outputs: both read
   * what they return, so every segment has been closed above (but for
   * kernels nothing reads) */
  undo_plans(r);
}

/* The whole module as the model sees it (-rammer-stats): launches and
 * modelled time with its rprograms and without them. */
typedef struct {
  const rammer *r;
  int kernels, unplanned, launches_after;
  double before_us, after_us;
} totals;

static double attr_float(const qir_op *op, const char *key) {
  const qir_attr *a = qir_op_attr(op, key);
  return !a ? 0 : a->val.kind == QIR_ATTR_FLOAT ? a->val.f : a->val.kind == QIR_ATTR_INT ? (double)a->val.i : 0;
}

static void sum_region(totals *t, qir_region *reg) {
  for (qir_op *op = reg->first; op; op = op->next) {
    if (op->code == QIR_OP_RPROGRAM) {
      t->before_us += attr_float(op, "unpacked_us");
      t->after_us += attr_float(op, "est_us");
      t->kernels += op->n_operands;
      t->launches_after++;
      continue;
    }
    if (op->code != QIR_OP_KERNEL)
      for (int i = 0; i < op->n_regions; i++) sum_region(t, op->regions[i]);   /* a loop body: once */
    switch (op->code) {
    case QIR_OP_INPUT: case QIR_OP_OUTPUT: case QIR_OP_CONST: case QIR_OP_YIELD: case QIR_OP_LOOP: case QIR_OP_IF: continue;
    default: break;
    }
    if (qir_op_is_view(op) || qir_rprogram_packs(op)) continue;
    qir_rp_kernel k;
    if (qir_rprogram_kernel_of(op, &k)) {
      double us = plan_est(&qir_op_attr(op, "tile")->val) + t->r->launch_us;
      t->before_us += us;
      t->after_us += us;
      t->kernels++;
    } else {
      t->unplanned++;
    }
    t->launches_after++;
  }
}

/* The target's launch and grid-barrier costs unless the command line says otherwise. */
static void set_costs(qopt_ctx *ctx, rammer *r) {
  r->launch_us = qopt_option_given(ctx, "rammer-launch-us") ? qopt_option_float(ctx, "rammer-launch-us") : r->t->launch_us;
  r->sync_us = qopt_option_given(ctx, "rammer-sync-us") ? qopt_option_float(ctx, "rammer-sync-us") : r->t->grid_barrier_us;
}

/* The modelled time of rprogram `rp` in a run at `at` (the symbols' values):
 * its schedule as written, each task that skips its tile (task_live) taking
 * SKIP_BARRIERS grid barriers, or its members' own launches where
 * #unpacked_upto covers the run.
 * At the bound it is the est_us -rammer wrote. */
double qopt_rprogram_us_at(qopt_ctx *ctx, qir_module *m, const qir_op *rp, const int64_t *at) {
  double written = attr_float(rp, "est_us");
  const qir_target *t = qir_target_get(qopt_option_str(ctx, "target"));
  qir_diag quiet;
  qir_diag_init_quiet(&quiet);
  qir_rprogram p;
  if (!t || !qir_rprogram_read(m, rp, &p, &quiet)) return written;
  rammer r = {.m = m, .t = t, .at = at, .veus = p.veus};
  set_costs(ctx, &r);
  r.n = p.n_kernels;
  r.ks = qir_alloc(m, sizeof *r.ks * (size_t)(r.n + 1));
  memset(r.ks, 0, sizeof *r.ks * (size_t)(r.n + 1));
  for (int i = 0; i < r.n; i++) {
    rk *k = &r.ks[i];
    k->op = (qir_op *)p.kernels[i].op;
    if (!k->op || !qir_rprogram_kernel_of(k->op, &k->k)) return written;
    k->est_us = plan_est(&qir_op_attr(k->op, "tile")->val);
  }
  if (qir_rprogram_unpacked_at(rp, at)) {
    double us = 0;
    for (int i = 0; i < r.n; i++) us += own_launch_us(&r, &r.ks[i], at);
    return us;
  }
  wavefront(&r);   /* the kernels' dependences; the waves as written must be these */
  if (r.n_waves != p.n_waves) return written;
  for (int w = 0; w < p.n_waves; w++) {
    r.barrier[w] = p.waves[w].barrier;
    for (int a = 0; a < p.waves[w].n_runs; a++) {
      const qir_rp_run *run = &p.waves[w].runs[a];
      rk *k = &r.ks[run->kernel];
      if (k->wave != w || run->task_lo != 0 || run->task_hi != k->k.tasks) return written;
      k->veu_lo = run->veu_lo;
      k->n_veus = run->veu_hi - run->veu_lo + 1;
    }
  }
  return program_us(&r);
}

bool qopt_rammer(qopt_ctx *ctx, qir_module *m) {
  const char *name = qopt_option_str(ctx, "target");
  const qir_target *t = qir_target_get(name);
  if (!t) {
    qir_error(ctx->diag, (qir_loc){0}, "-rammer: unknown target '%s'", name);
    return false;
  }
  bool has = false;
  for (qir_op *op = m->body->first; op; op = op->next) has |= op->code == QIR_OP_RPROGRAM;
  if (has) return true;   /* packed already: a second -rammer keeps the first's programs */
  rammer r = {.m = m, .t = t};
  set_costs(ctx, &r);
  if (r.launch_us < 0 || r.sync_us < 0) {
    qir_error(ctx->diag, (qir_loc){0}, "-rammer-launch-us and -rammer-sync-us must not be negative");
    return false;
  }
  r.stats = qopt_option_bool(ctx, "rammer-stats");
  r.diag = ctx->diag;
  int64_t topk = qopt_option_int(ctx, "roller-topk");
  r.plan_opts = (roller_options){.topk = topk > 4 ? (int)topk : 4};
  FILE *sink = fopen("/dev/null", "w");
  qir_diag quiet;
  qir_diag_init(&quiet, sink ? sink : stderr, NULL, NULL, 0);
  r.quiet = &quiet;
  run_region(&r, m->body);
  if (sink) fclose(sink);
  if (r.stats) {
    totals t = {.r = &r};
    sum_region(&t, m->body);
    fprintf(stderr, "rammer: total: %d rprograms packing %d of %d planned kernels; modelled %.1f us for the packed segments' kernels, %.1f us unpacked\n",
            r.n_programs, r.n_packed, t.kernels, r.total_packed_us, r.total_unpacked_us);
    fprintf(stderr, "rammer: model: launches %d -> %d (%d of them ops without a plan, one launch each, no time); "
            "modelled %.1f us -> %.1f us (%.2fx) for the planned kernels, launches included\n",
            t.kernels + t.unplanned, t.launches_after, t.unplanned, t.before_us, t.after_us,
            t.after_us > 0 ? t.before_us / t.after_us : 1.0);
  }
  return true;
}
