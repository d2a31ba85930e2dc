/* welder_siblings.h: -welder's horizontal step (welder_siblings.c). */
#ifndef QOPT_WELDER_SIBLINGS_H
#define QOPT_WELDER_SIBLINGS_H

#include "qir.h"
#include "rprogram.h"
#include "target.h"

typedef struct {
  qir_module *m;
  const qir_target *t;
  double launch_us;             /* -welder-launch-us */
} welder_siblings_ctx;

/* -welder's modelled time of op as a kernel of its own (welder.c): Roller's
 * estimate when it has a plan, else its traffic at DRAM speed. */
double welder_op_us(const qir_target *t, const qir_op *op);

/* Merges sibling contractions of region r (not its nested regions) where the
 * model rates it faster; returns how many merges it made. */
int welder_merge_siblings(const welder_siblings_ctx *w, qir_region *r);

#endif /* QOPT_WELDER_SIBLINGS_H */
