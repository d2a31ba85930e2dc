/* lower.c: -lower.  Every named op with a tensor-expression definition (te.c)
 * becomes its compute op, or its short chain of computes (softmax, layer_norm,
 * ...); ops without one (control flow, recurrent ops, inputs, constants) stay.
 * The final compute keeps the result's name and the op's schedule attributes,
 * so the rest of the pipeline sees the same values. */
#include "qopt.h"

#define MAX_CHAIN 8

typedef struct {
  qir_module *m;
  qir_diag *d;
} lowering;

static void lower_region(lowering *l, qir_region *r) {
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    for (int i = 0; i < op->n_regions; i++) lower_region(l, op->regions[i]);
    if (op->code == QIR_OP_COMPUTE || op->code == QIR_OP_CONST || op->n_results != 1 || op->n_regions) continue;
    qir_op *chain[MAX_CHAIN];
    int n = qir_op_expand_computes(l->m, op, chain, MAX_CHAIN, l->d);
    if (n == 0) continue;
    for (int i = 0; i < n; i++) qir_op_insert_before(op, chain[i]);
    qir_value *old = op->results[0], *neu = chain[n - 1]->results[0];
    neu->name = old->name;
    for (int i = 0; i < op->n_attrs; i++)
      if (op->attrs[i].sched) qir_op_set_attr(l->m, chain[n - 1], op->attrs[i].key, op->attrs[i].val, true);
    qir_value_replace_uses(l->m, old, neu);
    qir_op_unlink(op);
  }
}

bool qopt_lower(qopt_ctx *ctx, qir_module *m) {
  lowering l = {m, ctx->diag};
  int before = ctx->diag->n_errors;
  lower_region(&l, m->body);
  return ctx->diag->n_errors == before;
}
