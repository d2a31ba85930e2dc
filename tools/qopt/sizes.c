/* sizes.c: what a run of fewer rows costs, in the model of a module with
 * dimension symbols (-stats's sizes lines, -roller's bands). */
#include <math.h>

#include "qopt.h"
#include "rprogram.h"
#include "target.h"

double qopt_run_share(const qir_target *target, const qir_op *op, const int64_t *at) {
  if (op->n_results != 1 || op->code == QIR_OP_ATTENTION) return 1;
  const qir_type *t = &op->results[0]->type;
  if (!t->rank || !t->sym[0] || t->dims[0] <= 0) return 1;
  double rows = (double)qir_dim_eval(t->sym[0], at) / (double)t->dims[0];
  /* in waves of the blocks the device keeps resident: a kernel that fills
   * less than one wave at the bound takes as long with fewer rows */
  qir_rp_kernel k;
  if (!qir_rprogram_kernel_of(op, &k) || k.tasks < 1) return rows;
  int64_t slots = qir_target_coresident_blocks(target, k.threads);
  if (slots < 1) return rows;
  /* the blocks of the run's rows: whole block tiles along axis 0 */
  int64_t run = qir_dim_eval(t->sym[0], at), bound = t->dims[0], tile = 1;
  const qir_attr *plan = qir_op_attr(op, "tile");
  const qir_attr_val *blk = plan && plan->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&plan->val, "block") : NULL;
  if (blk && blk->kind == QIR_ATTR_LIST && blk->n > 0 && blk->items[0].kind == QIR_ATTR_INT && blk->items[0].i > 0)
    tile = blk->items[0].i;
  int64_t tiles_bound = (bound + tile - 1) / tile, tiles_run = (run + tile - 1) / tile;
  int64_t blocks = k.tasks % tiles_bound ? (int64_t)ceil((double)k.tasks * rows) : k.tasks / tiles_bound * (tiles_run > 0 ? tiles_run : 1);
  return (double)((blocks + slots - 1) / slots) / (double)((k.tasks + slots - 1) / slots);
}
