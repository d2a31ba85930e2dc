/* lower.c: -lower.  Every named op with a tensor-expression definition (te.c)
 * becomes its compute op, or its short chain of computes (softmax, layer_norm,
 * ...), multi-result ops included (split, max_pool with indices, layer_norm
 * with its statistics); ops without one (control flow, recurrent ops, inputs,
 * constants) stay.  The computes of the results keep the results' names, and
 * the one of result 0 the op's schedule attributes,
 * so the rest of the pipeline sees the same values.  Inside a kernel group
 * every compute of a chain that feeds another op states a level, as the
 * verifier asks: the lowered op's own, else smem (a chain's inner values are
 * reductions' results, which a row or staged kernel holds in shared memory). */
#include "qopt.h"
#include "rprogram.h"

#define MAX_CHAIN 8

typedef struct {
  qir_module *m;
  qir_diag *d;
} lowering;

static bool feeds_an_op(const qir_op *op) {
  for (int k = 0; k < op->n_results; k++)
    for (const qir_use *u = op->results[k]->uses; u; u = u->next)
      if (u->user->code != QIR_OP_YIELD) return true;
  return false;
}

/* The computes of a chain lowered inside a kernel group get a level. */
static void give_chain_levels(lowering *l, qir_region *r, const qir_op *op, qir_op **chain, int n) {
  if (!r->parent_op || r->parent_op->code != QIR_OP_KERNEL) return;
  const qir_attr *own = qir_op_attr(op, "fuse");
  qir_attr_val level = own ? own->val : qir_attr_word(l->m, "smem");
  for (int i = 0; i < n; i++)
    if (!qir_op_attr(chain[i], "fuse") && feeds_an_op(chain[i])) qir_op_set_attr(l->m, chain[i], "fuse", level, true);
}

static void lower_region(lowering *l, qir_region *r) {
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    for (int i = 0; i < op->n_regions; i++) lower_region(l, op->regions[i]);
    if (op->code == QIR_OP_COMPUTE || op->code == QIR_OP_CONST || op->n_results < 1 || op->n_regions) continue;
    /* a view of what an rprogram computes later stays a view (a compute
     * would read it before the rprogram runs) */
    if (qir_op_is_view(op) && op->operands[0]->def && qir_rprogram_packs(op->operands[0]->def)) continue;
    /* symbolic extents: a row-wise op lowers at the bound, its results keep
     * their extents; another stays as it is (qcodegen writes it for the
     * run's extents, qir_op_expand_symbolic) */
    bool symbolic = false;
    for (int i = 0; i < op->n_results; i++) symbolic |= qir_type_is_symbolic(&op->results[i]->type);
    for (int i = 0; i < op->n_operands; i++) symbolic |= op->operands[i] && qir_type_is_symbolic(&op->operands[i]->type);
    const char *why;
    if (symbolic && !qir_op_row_wise(l->m, op, &why)) continue;
    qir_op *chain[MAX_CHAIN];
    qir_value **results = qir_alloc(l->m, sizeof *results * (size_t)op->n_results);
    int n = qir_op_expand_results(l->m, op, chain, MAX_CHAIN, results, l->d);
    if (n == 0) continue;
    for (int i = 0; i < n; i++) qir_op_insert_before(op, chain[i]);
    for (int r = 0; r < op->n_results; r++) {
      results[r]->name = op->results[r]->name;
      if (symbolic) results[r]->type = op->results[r]->type;
      qir_value_replace_uses(l->m, op->results[r], results[r]);
    }
    /* a row-wise op's computes run over the rows its results' types name
     * (te.c writes the chain's other results with those extents too) */
    for (int i = 0; symbolic && i < n; i++) {
      const qir_type *t = &chain[i]->results[0]->type;
      for (int a = 0; a < chain[i]->comp->n_axes && a < t->rank; a++) chain[i]->comp->axis_dims[a] = t->sym[a];
    }
    qir_op *last = results[0]->def;
    for (int i = 0; i < op->n_attrs; i++)
      if (op->attrs[i].sched) qir_op_set_attr(l->m, last, op->attrs[i].key, op->attrs[i].val, true);
    qir_op_unlink(op);
    give_chain_levels(l, r, op, chain, n);
  }
}

bool qopt_lower(qopt_ctx *ctx, qir_module *m) {
  lowering l = {m, ctx->diag};
  int before = ctx->diag->n_errors;
  lower_region(&l, m->body);
  return ctx->diag->n_errors == before;
}
