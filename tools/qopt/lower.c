/* lower.c: -lower.  Every named op with a tensor-expression definition (te.c)
 * becomes its compute op, or its short chain of computes (softmax, layer_norm,
 * ...), multi-result ops included (split, max_pool with indices, layer_norm
 * with its statistics); ops without one (control flow, recurrent ops, inputs,
 * constants) stay.  The computes of the results keep the results' names, and
 * the one of result 0 the op's schedule attributes,
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
    if (op->code == QIR_OP_COMPUTE || op->code == QIR_OP_CONST || op->n_results < 1 || op->n_regions) continue;
    qir_op *chain[MAX_CHAIN];
    qir_value **results = qir_alloc(l->m, sizeof *results * (size_t)op->n_results);
    int n = qir_op_expand_results(l->m, op, chain, MAX_CHAIN, results, l->d);
    if (n == 0) continue;
    for (int i = 0; i < n; i++) qir_op_insert_before(op, chain[i]);
    for (int r = 0; r < op->n_results; r++) {
      results[r]->name = op->results[r]->name;
      qir_value_replace_uses(l->m, op->results[r], results[r]);
    }
    qir_op *last = results[0]->def;
    for (int i = 0; i < op->n_attrs; i++)
      if (op->attrs[i].sched) qir_op_set_attr(l->m, last, op->attrs[i].key, op->attrs[i].val, true);
    qir_op_unlink(op);
  }
}

bool qopt_lower(qopt_ctx *ctx, qir_module *m) {
  lowering l = {m, ctx->diag};
  int before = ctx->diag->n_errors;
  lower_region(&l, m->body);
  return ctx->diag->n_errors == before;
}
