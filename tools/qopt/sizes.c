/* sizes.c: what a run of smaller extents costs, in the model of a module
 * with dimension symbols (-stats's sizes lines, -roller's bands). */
#include <math.h>

#include "qopt.h"
#include "rprogram.h"
#include "target.h"

int qopt_run_tiles(const qir_op *op, const int64_t *at, int64_t *nb, int64_t *live) {
  if (op->n_results != 1) return 0;
  const qir_type *t = &op->results[0]->type;
  const qir_attr *plan = qir_op_attr(op, "tile");
  const qir_attr_val *blk = plan && plan->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&plan->val, "block") : NULL;
  if (!blk || blk->kind != QIR_ATTR_LIST || blk->n != t->rank) return 0;
  for (int d = 0; d < t->rank; d++) {
    int64_t tile = blk->items[d].kind == QIR_ATTR_INT && blk->items[d].i > 0 ? blk->items[d].i : 1;
    nb[d] = (t->dims[d] + tile - 1) / tile;
    live[d] = t->sym[d] ? (qir_dim_eval(t->sym[d], at) + tile - 1) / tile : nb[d];
  }
  return t->rank;
}

/* The share of an op's blocks that do work in a run at `at`.  qcodegen
 * launches a kernel whose blocks walk its output's symbolic axis 0 slowest
 * for the run's rows only, and a block of a tiled plan whose tile starts past
 * the run's extent along any symbolic axis skips its body (an early exit the
 * model counts as free).  A plan without block tiles (flat kernels) skips
 * along axis 0 only. */
static double live_blocks(const qir_op *op, const int64_t *at, int64_t tasks) {
  const qir_type *t = &op->results[0]->type;
  int64_t nb[QIR_MAX_RANK], live_tiles[QIR_MAX_RANK];
  int tiled = qopt_run_tiles(op, at, nb, live_tiles);
  double live = (double)tasks;
  for (int d = 0; d < t->rank && (tiled || d == 0); d++) {
    if (!t->sym[d] || t->dims[d] <= 0) continue;
    int64_t tiles_run = tiled ? live_tiles[d] : qir_dim_eval(t->sym[d], at), tiles_bound = tiled ? nb[d] : t->dims[d];
    live *= (double)(tiles_run > 0 ? tiles_run : 1) / (double)tiles_bound;
  }
  return ceil(live);
}

double qopt_run_share(const qir_target *target, const qir_op *op, const int64_t *at) {
  if (op->n_results != 1 || op->code == QIR_OP_ATTENTION) return 1;
  const qir_type *t = &op->results[0]->type;
  bool symbolic = false;
  for (int d = 0; d < t->rank; d++) symbolic |= t->sym[d] && t->dims[d] > 0;
  if (!symbolic) return 1;
  /* in waves of the blocks the device keeps resident: a kernel that fills
   * less than one wave at the bound takes as long with fewer blocks */
  qir_rp_kernel k;
  if (!qir_rprogram_kernel_of(op, &k) || k.tasks < 1) {
    double share = 1;
    for (int d = 0; d < t->rank; d++)
      if (t->sym[d] && t->dims[d] > 0) share *= (double)qir_dim_eval(t->sym[d], at) / (double)t->dims[d];
    return share;
  }
  int64_t slots = qir_target_coresident_blocks(target, k.threads);
  if (slots < 1) return (double)live_blocks(op, at, k.tasks) / (double)k.tasks;
  int64_t blocks = (int64_t)live_blocks(op, at, k.tasks);
  int64_t waves = (blocks + slots - 1) / slots, bound_waves = (k.tasks + slots - 1) / slots;
  /* one wave of fewer blocks: each unit shares its throughput among fewer
   * of them (as -rammer's packed tasks do), down to QOPT_OCC_FLOOR */
  int64_t units = target->compute_units > 0 ? target->compute_units : 1;
  int64_t per_unit = slots / units > 0 ? slots / units : 1;
  int64_t own = (k.tasks + units - 1) / units, run = (blocks + units - 1) / units;
  if (own > per_unit) own = per_unit;
  double f = waves == 1 && run < own ? (double)run / (double)own : 1;
  return (double)waves * (f > QOPT_OCC_FLOOR ? f : QOPT_OCC_FLOOR) / (double)bound_waves;
}

int qopt_size_steps(const qir_module *m, uint64_t used, int max, int64_t (*at)[QOPT_MAX_SYMS]) {
  int n_used = 0;
  for (int k = 0; k < m->n_syms && k < QOPT_MAX_SYMS; k++) n_used += (used >> k) & 1;
  return qopt_size_steps_by(m, used, n_used == 1 ? 4 : 2, max, at);
}

int qopt_size_steps_by(const qir_module *m, uint64_t used, double factor, int max, int64_t (*at)[QOPT_MAX_SYMS]) {
  int n_used = 0, n = 0;
  if (m->n_syms > QOPT_MAX_SYMS || !(factor > 1)) return 0;
  for (int k = 0; k < m->n_syms; k++) n_used += (used >> k) & 1;
  bool whole = factor == floor(factor);   /* a whole factor keeps to the step below; a fraction rounds up */
  double scale = 1;
  for (int i = 0; n < max && n_used && i < 64; i++, scale *= factor) {
    bool below = false, same = n > 0;   /* some symbol short of its bound; the step the last one again */
    for (int k = 0; k < m->n_syms; k++) {
      const qir_dimsym *s = &m->syms[k];
      double lo = s->lo < 1 ? 1 : (double)s->lo, v = lo * scale;
      int64_t x;
      if (!((used >> k) & 1) || v >= (double)s->hi) x = s->hi;
      else if (whole) x = s->lo + ((int64_t)v - s->lo) / s->step * s->step;
      else x = s->lo + ((int64_t)ceil(v - 1e-9) - s->lo + s->step - 1) / s->step * s->step;
      at[n][k] = x < s->hi ? x : s->hi;
      below |= at[n][k] < s->hi;
      same = same && at[n][k] == at[n - 1][k];
    }
    if (!below) break;
    if (!same) n++;
  }
  return n;
}

double qopt_band_share(const qir_op *op, const int64_t *at) {
  const qir_attr *bands = qir_op_attr(op, "tile_bands");
  const qir_type *rt = op->n_results == 1 ? &op->results[0]->type : NULL;
  if (!bands || bands->val.kind != QIR_ATTR_LIST || !rt) return -1;
  int64_t run = 1;   /* the run's points: its symbolic extents' product */
  for (int d = 0; d < rt->rank; d++)
    if (rt->sym[d]) run *= qir_dim_eval(rt->sym[d], at);
  double full = qir_op_attr_float(op, "est_us", -1);
  const qir_attr *tile = qir_op_attr(op, "tile");
  const qir_attr_val *e = tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, "est_us") : NULL;
  if (full < 0 && e) full = e->kind == QIR_ATTR_FLOAT ? e->f : (double)e->i;
  for (int i = 0; full > 0 && i < bands->val.n; i++) {
    const qir_attr_val *b = &bands->val.items[i], *points = qir_attr_dict_get(b, "points"), *bt = qir_attr_dict_get(b, "tile");
    const qir_attr_val *be = bt && bt->kind == QIR_ATTR_DICT ? qir_attr_dict_get(bt, "est_us") : NULL;
    if (points && points->kind == QIR_ATTR_INT && run <= points->i && be && (be->kind == QIR_ATTR_FLOAT || be->kind == QIR_ATTR_INT))
      return (be->kind == QIR_ATTR_FLOAT ? be->f : (double)be->i) / full;
  }
  return -1;
}
