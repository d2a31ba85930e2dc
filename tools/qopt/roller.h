/* roller.h: the -roller pass (tools/qopt/roller.c). */
#ifndef QOPT_ROLLER_H
#define QOPT_ROLLER_H

#include "qir.h"
#include "target.h"

typedef struct {
  int planned;                  /* ops that got a #tile */
  int skipped;                  /* ops with a compute form the planner could not use */
} roller_stats;

/* Writes #tile{...} (and #tile_alternatives when topk > 1) on every op of m
 * that has a tensor-expression form, planned for target t.  st may be NULL.
 * Returns false only after reporting an error into d. */
bool roller_run(qir_module *m, const qir_target *t, int topk, roller_stats *st, qir_diag *d);

/* The same for one op (a `compute` op or a named op with a compute form). */
bool roller_plan_op(qir_module *m, qir_op *op, const qir_target *t, int topk, roller_stats *st,
                    qir_diag *d);

#endif /* QOPT_ROLLER_H */
