/* grinder.c: -grinder (Cocktailer): where each `loop` and `if` runs.
 *
 * Writes #device{level, target, grid, threads, stages} (target.h) on every
 * loop/if, chosen by a cost model per control-flow op:
 *
 *   host   per iteration: each body kernel is launched from the host, and the
 *          condition is read back (a device-to-host copy and a sync):
 *            iters * (kernels * launch + read_back + work)
 *   grid   one persistent cooperative kernel of G co-resident blocks runs the
 *          whole loop; the body's stages (its ops by dependence level) end in
 *          grid barriers; an op of b blocks runs in ceil(b / G) waves instead
 *          of ceil(b / capacity) for a launch of its own:
 *            coop_launch + iters * (barriers * grid_barrier + work')
 *   block  when every body op fits one block (its #tile grid is 1 block), one
 *          block runs the loop with block barriers only:
 *            launch + iters * (barriers * block_barrier + work)
 *          (plus one read back for a loop with bounded scan outputs: their rows)
 *
 * work is the sum of the body ops' #tile est_us (roller's estimate; 1 us per op
 * without a plan).  iters is the constant trip count, else max_trip, else the
 * scan extent, else 64 (an assumption, reported).  The grid is the largest
 * body op's block count, at most the blocks the target keeps co-resident at the
 * plan's threads (the largest #tile threads of the body, rounded up to a warp);
 * `if` is a loop of one iteration.  Control flow nested in a device-resident op
 * runs inside the same kernel: it inherits the plan (its own stage count); in
 * a host-level op each nested one is decided on its own.  The per-launch costs
 * come from the target table (qir/target.c): guesses per back end, not
 * measurements (no GPU was available to calibrate them).
 *
 * -grinder-report prints, per loop/if, the numbers behind the choice and the
 * kernel launches (and host round trips) per inference before and after. */
#include "qopt.h"
#include "target.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define ASSUMED_ITERS 64
#define MAX_STAGES 1000000000

typedef struct {
  qopt_ctx *ctx;
  qir_module *m;
  const qir_target *t;
  bool report;
  double launches_before, launches_after, trips_before, trips_after; /* per inference (counts can be huge) */
} grinder;

typedef struct {
  double kernels;               /* launching ops per iteration (nested bodies times their iterations) */
  int64_t stages;               /* dependence levels of the body (a nested loop/if: one level) */
  double barriers;              /* barriers one iteration waits on (a nested loop's times its iterations) */
  double work_us;               /* est_us sum per iteration */
  int64_t max_blocks;           /* the largest body op's blocks */
  int64_t max_threads;          /* the largest body op's threads */
  double waves_base;            /* sum over ops of est_us / ceil(b / cap): work per wave, for the grid model */
  double nested_trips;          /* host round trips of nested control flow per iteration, when on the host */
} body_stats;

static const qir_attr_val *tile_key(const qir_op *op, const char *key) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  return tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, key) : NULL;
}

static int64_t op_blocks(const qir_op *op) {
  const qir_attr_val *g = tile_key(op, "grid");
  if (g && g->kind == QIR_ATTR_LIST) {
    int64_t b = 1;
    for (int i = 0; i < g->n; i++)
      if (g->items[i].kind == QIR_ATTR_INT && g->items[i].i > 0) b *= g->items[i].i;
    return b;
  }
  /* no plan: one block of 256 threads per 256 result elements */
  int64_t n = op->n_results ? qir_type_numel(&op->results[0]->type) : 1;
  return n > 256 ? (n + 255) / 256 : 1;
}

static int64_t op_threads(const qir_op *op) {
  const qir_attr_val *th = tile_key(op, "threads");
  return th && th->kind == QIR_ATTR_INT ? th->i : 256;
}

static double op_est_us(const qir_op *op) {
  const qir_attr_val *e = tile_key(op, "est_us");
  return e && (e->kind == QIR_ATTR_FLOAT || e->kind == QIR_ATTR_INT) ? (e->kind == QIR_ATTR_FLOAT ? e->f : (double)e->i) : 1.0;
}

/* Iterations of a loop as far as the module tells; *assumed when it does not. */
static int64_t loop_iters(qir_module *m, const qir_op *op, bool *assumed) {
  *assumed = false;
  if (op->code != QIR_OP_LOOP) return 1;
  qir_value *trip = op->operands[0];
  /* a constant held in the module (splat or inline data: reading it cannot fail) */
  if (trip->def && trip->def->code == QIR_OP_CONST && trip->def->cst && (trip->def->cst->splat || trip->def->cst->data) &&
      qir_type_numel(&trip->type) == 1) {
    double v = qir_const_elem(m, trip->def, 0, NULL);
    if (v >= 0 && v < 1e12) return (int64_t)v;
  }
  int64_t mt = qir_op_attr_int(op, "max_trip", -1);
  if (mt >= 0) return mt;
  int n_carried = op->n_operands - 2;
  if (op->n_results > n_carried && op->results[n_carried]->type.rank) return op->results[n_carried]->type.dims[0];
  *assumed = true;
  return ASSUMED_ITERS;
}

static bool is_control(const qir_op *op) { return op->code == QIR_OP_LOOP || op->code == QIR_OP_IF; }
/* (An rprogram only schedules the kernels it packs, which count themselves.) */
static bool launches(const qir_op *op) {
  return op->code != QIR_OP_CONST && op->code != QIR_OP_YIELD && op->code != QIR_OP_INPUT && op->code != QIR_OP_OUTPUT &&
         op->code != QIR_OP_RPROGRAM && !is_control(op);
}

static void region_stats(const qir_region *r, body_stats *s, int64_t *stage_of, double *barrier_of, qir_module *m);

static body_stats region_stats_fresh(const qir_region *r, qir_module *m) {
  body_stats s = {0};
  size_t n = (size_t)(m->next_value_id + 1);
  int64_t *stage_of = qir_alloc(m, sizeof *stage_of * n);
  double *barrier_of = qir_alloc(m, sizeof *barrier_of * n);
  memset(stage_of, 0, sizeof *stage_of * n);
  memset(barrier_of, 0, sizeof *barrier_of * n);
  region_stats(r, &s, stage_of, barrier_of, m);
  return s;
}

/* Stats of one control op's regions (an if: the larger branch). */
static body_stats control_stats(const qir_op *op, qir_module *m) {
  body_stats best = {0};
  for (int i = 0; i < op->n_regions; i++) {
    body_stats s = region_stats_fresh(op->regions[i], m);
    if (i == 0 || s.work_us + s.kernels > best.work_us + best.kernels) best = s;
  }
  return best;
}

/* Stages: dependence levels of the region's ops (0 for region arguments and
 * outer values), a nested loop/if one level after everything before it (its
 * regions may read any earlier value).  Barriers: the same, counting a nested
 * op's own barriers times its iterations (what one iteration waits on). */
static void region_stats(const qir_region *r, body_stats *s, int64_t *stage_of, double *barrier_of, qir_module *m) {
  for (const qir_op *op = r->first; op; op = op->next) {
    int64_t stage = 0;
    double barrier = 0;
    for (int i = 0; i < op->n_operands; i++)
      if (op->operands[i]) {
        if (stage_of[op->operands[i]->id] > stage) stage = stage_of[op->operands[i]->id];
        if (barrier_of[op->operands[i]->id] > barrier) barrier = barrier_of[op->operands[i]->id];
      }
    if (launches(op)) {
      stage++;
      barrier++;
      s->kernels++;
      s->work_us += op_est_us(op);
      int64_t b = op_blocks(op), th = op_threads(op);
      if (b > s->max_blocks) s->max_blocks = b;
      if (th > s->max_threads) s->max_threads = th;
    } else if (is_control(op)) {
      bool assumed;
      int64_t it = loop_iters(m, op, &assumed);
      body_stats in = control_stats(op, m);
      stage = (s->stages < MAX_STAGES ? s->stages : MAX_STAGES) + 1;
      barrier = s->barriers + in.barriers * (double)it + 1;
      s->kernels += in.kernels * (double)it;
      s->work_us += in.work_us * (double)it;
      s->nested_trips += (double)it * (1 + in.nested_trips);
      if (in.max_blocks > s->max_blocks) s->max_blocks = in.max_blocks;
      if (in.max_threads > s->max_threads) s->max_threads = in.max_threads;
    }
    for (int i = 0; i < op->n_results; i++) {
      stage_of[op->results[i]->id] = stage;
      barrier_of[op->results[i]->id] = barrier;
    }
    if (stage > s->stages) s->stages = stage;
    if (barrier > s->barriers) s->barriers = barrier;
  }
  if (s->stages < 1) s->stages = 1;
  if (s->barriers < 1) s->barriers = 1;
}

/* Grid-loop work per iteration: each op in ceil(b / grid) waves instead of
 * ceil(b / cap) when launched alone. */
static double grid_work(qir_module *m, const qir_region *r, int64_t grid, const qir_target *t) {
  double w = 0;
  for (const qir_op *op = r->first; op; op = op->next) {
    if (launches(op)) {
      int64_t b = op_blocks(op), cap = qir_target_coresident_blocks(t, op_threads(op));
      if (cap < 1) cap = 1;
      double alone = (double)((b + cap - 1) / cap), inside = (double)((b + grid - 1) / grid);
      w += op_est_us(op) * inside / alone;
    } else if (is_control(op)) {
      bool assumed;
      double it = (double)loop_iters(m, op, &assumed), most = 0;
      for (int i = 0; i < op->n_regions; i++) {
        double x = grid_work(m, op->regions[i], grid, t);
        if (x > most) most = x;
      }
      w += it * most;
    }
  }
  return w;
}

static void set_plan(grinder *g, qir_op *op, qir_level level, int64_t grid, int64_t threads, int64_t stages) {
  qir_attr e[5];
  int n = 0;
  e[n++] = (qir_attr){.key = "level", .val = qir_attr_word(g->m, qir_level_name(level))};
  if (level != QIR_LEVEL_HOST) {
    e[n++] = (qir_attr){.key = "target", .val = qir_attr_string(g->m, g->t->name)};
    e[n++] = (qir_attr){.key = "grid", .val = qir_attr_int(grid)};
    e[n++] = (qir_attr){.key = "threads", .val = qir_attr_int(threads)};
    e[n++] = (qir_attr){.key = "stages", .val = qir_attr_int(stages)};
  }
  qir_op_set_attr(g->m, op, "device", qir_attr_dict(g->m, n, e), true);
}

/* Inside a device-resident op: every nested loop/if runs in the same kernel. */
static void inherit(grinder *g, qir_region *r, qir_level level, int64_t grid, int64_t threads) {
  for (qir_op *op = r->first; op; op = op->next)
    if (is_control(op)) {
      body_stats s = control_stats(op, g->m);
      set_plan(g, op, level, grid, threads, s.stages);
      for (int i = 0; i < op->n_regions; i++) inherit(g, op->regions[i], level, grid, threads);
    }
}

static const char *loc_str(grinder *g, const qir_op *op) {
  return qir_sprintf(g->m, "%s:%d:%d", op->loc.file ? op->loc.file : "<module>", op->loc.line, op->loc.col);
}

/* Decides op (a loop/if the host reaches); `mult` is how often the host runs it
 * per inference.  Counts launches and round trips before and after. */
static void decide(grinder *g, qir_op *op, double mult);

static void walk_host(grinder *g, qir_region *r, double mult) {
  for (qir_op *op = r->first; op; op = op->next) {
    if (is_control(op)) decide(g, op, mult);
    else if (launches(op)) {
      g->launches_before += mult;
      g->launches_after += mult;
    }
  }
}

static void decide(grinder *g, qir_op *op, double mult) {
  const qir_target *t = g->t;   /* its launch_us .. block_barrier_us: guesses, said so in qir/target.c */
  bool assumed;
  int64_t iters = loop_iters(g->m, op, &assumed);
  body_stats s = control_stats(op, g->m);
  int64_t threads = s.max_threads < t->warp_size ? t->warp_size : s.max_threads;
  threads = (threads + t->warp_size - 1) / t->warp_size * t->warp_size;
  if (threads > t->max_threads_per_block) threads = t->max_threads_per_block;
  int64_t cap = qir_target_coresident_blocks(t, threads);
  int64_t grid = s.max_blocks < 1 ? 1 : s.max_blocks;
  if (grid > cap) grid = cap;
  double n = (double)iters;
  /* host: per iteration every kernel launched, the condition read back (if: once) */
  double host_us = n * (s.kernels * t->launch_us + t->read_back_us + s.work_us) + s.nested_trips * n * t->read_back_us;
  double work_grid = 0;
  for (int i = 0; i < op->n_regions; i++) {
    double w = grid_work(g->m, op->regions[i], grid, t);
    if (w > work_grid) work_grid = w;
  }
  /* on the device nothing comes back to the host but the rows of bounded scan outputs */
  bool bounded = false;
  for (int i = 0; i < op->n_results; i++) bounded |= op->results[i]->type.bounded;
  double back = bounded ? t->read_back_us : 0;
  double grid_us = cap >= 1 ? t->coop_launch_us + back + n * (s.barriers * t->grid_barrier_us + work_grid) : INFINITY;
  bool fits_block = s.max_blocks <= 1;
  double block_us = fits_block ? t->launch_us + back + n * (s.barriers * t->block_barrier_us + s.work_us) : INFINITY;
  qir_level level = QIR_LEVEL_HOST;
  double best = host_us;
  if (block_us < best) { level = QIR_LEVEL_BLOCK; best = block_us; }
  if (grid_us < best) { level = QIR_LEVEL_GRID; best = grid_us; }
  double host_launches = n * s.kernels, host_trips = n * (1 + s.nested_trips);
  if (level == QIR_LEVEL_HOST) {
    set_plan(g, op, level, 0, 0, 0);
    /* the body stays host-driven: its kernels and its own control flow (decided
     * on its own) are counted by walking it; an if counts its larger branch */
    g->trips_before += mult * n;
    g->trips_after += mult * n;
    int counted = 0;
    if (op->code == QIR_OP_IF && op->n_regions == 2) {
      body_stats b0 = region_stats_fresh(op->regions[0], g->m), b1 = region_stats_fresh(op->regions[1], g->m);
      counted = b1.work_us + b1.kernels > b0.work_us + b0.kernels;
    }
    for (int i = 0; i < op->n_regions; i++) walk_host(g, op->regions[i], i == counted ? mult * n : 0);
  } else {
    int64_t blocks = level == QIR_LEVEL_BLOCK ? 1 : grid;
    set_plan(g, op, level, blocks, threads, s.stages);
    for (int i = 0; i < op->n_regions; i++) inherit(g, op->regions[i], level, blocks, threads);
    g->launches_before += mult * host_launches;
    g->trips_before += mult * host_trips;
    g->launches_after += mult;
    if (bounded) g->trips_after += mult; /* the rows it produced */
  }
  if (g->report) {
    const char *what = qir_op_attr_str(op, "onnx_op", NULL);
    fprintf(stderr,
            "%s: %s%s%s: %lld iteration%s%s, %.0f kernels in %lld stages (%.0f barriers) per iteration, at most %lld blocks per op: host %.1f us, "
            "block %s us, grid %s us -> %s",
            loc_str(g, op), op->code == QIR_OP_LOOP ? "loop" : "if", what ? " from " : "", what ? what : "", (long long)iters,
            iters == 1 ? "" : "s", assumed ? " (assumed)" : "", s.kernels, (long long)s.stages, s.barriers, (long long)s.max_blocks, host_us,
            fits_block ? qir_sprintf(g->m, "%.1f", block_us) : "-", cap >= 1 ? qir_sprintf(g->m, "%.1f", grid_us) : "-",
            qir_level_name(level));
    if (level != QIR_LEVEL_HOST)
      fprintf(stderr, " (%lld x %lld threads): %.0f launches and %.0f host round trips become 1 launch\n",
              (long long)(level == QIR_LEVEL_BLOCK ? 1 : grid), (long long)threads, mult * host_launches, mult * host_trips);
    else
      fputc('\n', stderr);
  }
}

bool qopt_grinder(qopt_ctx *ctx, qir_module *m) {
  const char *name = qopt_option_str(ctx, "target");
  const qir_target *t = qir_target_get(name);
  qir_loc none = {0};
  if (*qopt_option_str(ctx, "target-file")) {
    qir_error(ctx->diag, none, "-grinder needs a built-in -target: #device plans name their target");
    return false;
  }
  if (!t) {
    qir_error(ctx->diag, none, "unknown target '%s'", name);
    return false;
  }
  if (t->launch_us <= 0) {
    qir_error(ctx->diag, none, "-grinder: target '%s' has no launch costs (launch_us)", t->name);
    return false;
  }
  grinder g = {.ctx = ctx, .m = m, .t = t, .report = qopt_option_bool(ctx, "grinder-report")};
  walk_host(&g, m->body, 1);
  if (g.report)
    fprintf(stderr, "grinder: %s: kernel launches per inference %.0f -> %.0f, host round trips %.0f -> %.0f\n",
            m->name ? m->name : "module", g.launches_before, g.launches_after, g.trips_before, g.trips_after);
  return true;
}
