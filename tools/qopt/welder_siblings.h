/* welder_siblings.h: -welder's horizontal step (welder_siblings.c). */
#ifndef QOPT_WELDER_SIBLINGS_H
#define QOPT_WELDER_SIBLINGS_H

#include "qir.h"
#include "rprogram.h"
#include "roller.h"
#include "target.h"

typedef struct {
  qir_module *m;
  const qir_target *t;
  double launch_us;             /* -welder-launch-us */
  roller_options plan;          /* how -roller plans (its options): the merged ops are planned alike */
} welder_siblings_ctx;

/* -welder's modelled time of op as a kernel of its own (welder.c): Roller's
 * estimate when it has a plan, else its traffic at DRAM speed. */
double welder_op_us(const qir_target *t, const qir_op *op);

/* The siblings op leads (op a matmul, the others after it in its region over
 * the same A operand): whether the step's own model rates merging them
 * faster, and, when apply, the merge done. */
bool welder_siblings_merge(const welder_siblings_ctx *w, qir_op *op, bool apply);

#endif /* QOPT_WELDER_SIBLINGS_H */
