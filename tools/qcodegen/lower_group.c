/* lower_group.c: one kernel per Welder group (a `kernel` op, docs/qir.md).
 *
 * After host.c has replaced the group's named ops by their compute forms, the
 * group is composed into one compute op plus an epilogue:
 *   - a `reg` producer without a reduction is inlined per thread: each read
 *     %p[e0, e1, ..] becomes p's body with its loop variables replaced by the
 *     index expressions, rounded to p's element type as a store would round it;
 *   - at most one reduction (the anchor: a contraction, a convolution, a pooling,
 *     a row reduction) gives the kernel its loops and plan; what the group does
 *     after it (bias, batch norm, activation, residual add, ...) is the
 *     epilogue, applied to the accumulator at each output point before the
 *     store, reading its other operands there.  The anchor must be read at
 *     exactly the output point (identity access) and have the result's type.
 * The composed compute op then goes through cg_lower_compute like any other,
 * with the group's #tile (else the anchor's or the root's) as its plan: one
 * kernel, on C, CUDA and HIP alike.
 *
 * What does not compose yet (two reductions in one group, e.g. a softmax row
 * meant for shared memory; a reshape inside a group) runs as its ops, one
 * kernel each, after a warning: the numbers stay right. */
#include <stdlib.h>
#include <string.h>

#include "kast.h"

typedef struct {
  cg_ctx *cg;
  qir_op *kernel;
  qir_region *body;
  const qir_op *anchor;         /* the compute with a reduction, or NULL */
  int acc_operand;              /* marker operand for the anchor's value in the epilogue */
  bool in_epilogue;
  const char *why;              /* why it does not compose */
  int depth;
} composer;

static qir_expr *expand(composer *cm, const qir_value *v, qir_expr *const *idx, int n_idx);

/* e with loop variable i replaced by sub[i] and each read expanded. */
static qir_expr *substitute(composer *cm, const qir_op *op, const qir_expr *e, qir_expr *const *sub, int n_sub) {
  qir_module *m = cm->cg->m;
  if (!e || cm->why) return NULL;
  switch (e->kind) {
  case QIR_EX_VAR:
    if (e->var < 0 || e->var >= n_sub) {
      cm->why = "a loop variable out of range";
      return NULL;
    }
    return sub[e->var];
  case QIR_EX_ACCESS: {
    qir_expr *idx[QIR_MAX_RANK];
    if (e->n_args > QIR_MAX_RANK || e->operand < 0 || e->operand >= op->n_operands) {
      cm->why = "a malformed read";
      return NULL;
    }
    for (int j = 0; j < e->n_args; j++)
      if (!(idx[j] = substitute(cm, op, e->args[j], sub, n_sub))) return NULL;
    return expand(cm, op->operands[e->operand], idx, e->n_args);
  }
  default: break;
  }
  qir_expr *c = qir_alloc(m, sizeof *c);
  *c = *e;
  if (e->n_args) {
    c->args = qir_alloc(m, sizeof *c->args * (size_t)e->n_args);
    for (int i = 0; i < e->n_args; i++)
      if (!(c->args[i] = substitute(cm, op, e->args[i], sub, n_sub))) return NULL;
  }
  return c;
}

static bool is_identity(qir_expr *const *idx, int n_idx, int rank) {
  if (n_idx != rank) return false;
  for (int j = 0; j < n_idx; j++)
    if (idx[j]->kind != QIR_EX_VAR || idx[j]->var != j) return false;
  return true;
}

/* The value v at index idx, as an expression over the group's operands. */
static qir_expr *expand(composer *cm, const qir_value *v, qir_expr *const *idx, int n_idx) {
  qir_module *m = cm->cg->m;
  if (cm->why) return NULL;
  if (++cm->depth > 200) {
    cm->why = "a chain too deep to inline";
    return NULL;
  }
  qir_expr *r = NULL;
  if (v->arg_of == cm->body) {
    r = qir_expr_access(m, v->arg_index, n_idx, idx);
  } else if (!v->def || v->def->parent != cm->body) {
    cm->why = "a value from outside the group";
  } else if (v->def->code != QIR_OP_COMPUTE || !v->def->comp) {
    cm->why = qir_sprintf(m, "'%s' has no compute form to inline", qir_opinfo_get(v->def->code)->name);
  } else if (v->def == cm->anchor) {
    if (!cm->in_epilogue || !is_identity(idx, n_idx, cm->anchor->comp->n_axes))
      cm->why = "the reduction is read at other points than the output's";
    else
      r = qir_expr_access(m, cm->acc_operand, n_idx, idx);
  } else if (v->def->comp->n_red > 0) {
    cm->why = "a second reduction (shared-memory edges are not composed yet)";
  } else if (n_idx != v->def->comp->n_axes) {
    cm->why = "a read with the wrong number of indices";
  } else {
    qir_expr *body = substitute(cm, v->def, v->def->comp->body, idx, n_idx);
    if (body) r = qir_expr_cast(m, v->type.dtype, body);
  }
  cm->depth--;
  return r;
}

static qir_expr **identity_vars(qir_module *m, int n) {
  qir_expr **v = qir_alloc(m, sizeof *v * (size_t)(n + 1));
  for (int i = 0; i < n; i++) v[i] = qir_expr_var(m, i);
  return v;
}

static void add_group(cg_ctx *cg, cg_group g) {
  if (cg->n_groups == cg->cap_groups) {
    int cap = cg->cap_groups ? cg->cap_groups * 2 : 16;
    cg_group *gs = qir_alloc(cg->m, sizeof *gs * (size_t)cap);
    if (cg->n_groups) memcpy(gs, cg->groups, sizeof *gs * (size_t)cg->n_groups);
    cg->groups = gs;
    cg->cap_groups = cap;
  }
  cg->groups[cg->n_groups++] = g;
}

const cg_group *cg_group_of(const cg_ctx *cg, const qir_op *op) {
  for (int i = 0; i < cg->n_groups; i++)
    if (cg->groups[i].op == op) return &cg->groups[i];
  return NULL;
}

/* The group as one compute op (inserted before the kernel op), or NULL with
 * cm->why set. */
static qir_op *compose(composer *cm) {
  qir_module *m = cm->cg->m;
  qir_op *k = cm->kernel;
  qir_op *y = cm->body->last;
  if (k->n_results != 1 || !y || y->code != QIR_OP_YIELD || y->n_operands != 1) {
    cm->why = "a group with more than one result";
    return NULL;
  }
  qir_value *out = y->operands[0];
  if (!out->def || out->def->parent != cm->body || out->def->code != QIR_OP_COMPUTE) {
    cm->why = "a result that is not computed in the group";
    return NULL;
  }
  const qir_op *root = out->def;
  for (qir_op *op = cm->body->first; op; op = op->next) {
    if (op->code != QIR_OP_COMPUTE || !op->comp || op->comp->n_red == 0) continue;
    if (cm->anchor) {
      cm->why = "a second reduction (shared-memory edges are not composed yet)";
      return NULL;
    }
    cm->anchor = op;
  }
  const qir_op *lead = cm->anchor ? cm->anchor : root;
  const qir_compute *mc = lead->comp;
  if (cm->anchor && cm->anchor != root &&
      (cm->anchor->results[0]->type.dtype != out->type.dtype || mc->n_axes != out->type.rank ||
       memcmp(cm->anchor->results[0]->type.dims, out->type.dims, sizeof(int64_t) * (size_t)out->type.rank))) {
    cm->why = "an epilogue that changes the reduction's type or shape";
    return NULL;
  }
  cm->acc_operand = k->n_operands;
  qir_compute *c = qir_compute_new(m, mc->n_axes, mc->n_red);
  for (int v = 0; v < mc->n_axes + mc->n_red; v++) {
    c->axis_names[v] = mc->axis_names[v];
    c->axis_extents[v] = mc->axis_extents[v];
  }
  c->reduce = mc->reduce;
  cm->in_epilogue = false;
  c->body = substitute(cm, lead, mc->body, identity_vars(m, mc->n_axes + mc->n_red), mc->n_axes + mc->n_red);
  qir_expr *epilogue = NULL;
  if (c->body && cm->anchor && cm->anchor != root) {
    cm->in_epilogue = true;
    epilogue = expand(cm, out, identity_vars(m, out->type.rank), out->type.rank);
  }
  if (cm->why) return NULL;
  qir_op *op = qir_op_new(m, QIR_OP_COMPUTE, k->n_operands, k->operands, 1, &out->type, k->loc);
  op->comp = c;
  const qir_attr *tile = qir_op_attr(k, "tile");
  if (!tile) tile = qir_op_attr(lead, "tile");
  if (tile) qir_op_set_attr(m, op, "tile", tile->val, true);
  qir_op_insert_before(k, op);
  add_group(cm->cg, (cg_group){.op = op, .name = k->sym ? k->sym : "?", .epilogue = epilogue,
                               .acc_operand = cm->acc_operand,
                               .acc_dtype = cm->anchor ? cm->anchor->results[0]->type.dtype : out->type.dtype});
  return op;
}

/* Runs the group's ops as they are: moved out before the kernel op, reading
 * its operands instead of the region arguments. */
static void dissolve(cg_ctx *cg, qir_op *k) {
  qir_region *body = k->regions[0];
  qir_op *y = body->last && body->last->code == QIR_OP_YIELD ? body->last : NULL;
  qir_value **results = qir_alloc(cg->m, sizeof *results * (size_t)(k->n_results + 1));
  for (int i = 0; i < k->n_results && y && i < y->n_operands; i++) results[i] = y->operands[i];
  if (y) qir_op_unlink(y);
  for (qir_op *op = body->first, *next; op; op = next) {
    next = op->next;
    qir_op_unlink(op);
    qir_op_insert_before(k, op);
    for (int j = 0; j < op->n_operands; j++) {
      qir_value *v = op->operands[j];
      if (v->arg_of == body) v = k->operands[v->arg_index];
      op->operands[j] = NULL;                 /* unlink dropped the use: add it again */
      qir_op_set_operand(cg->m, op, j, v);
    }
  }
  for (int i = 0; i < k->n_results; i++) {
    qir_value *r = results[i];
    if (r && r->arg_of == body) r = k->operands[r->arg_index];
    if (r) qir_value_replace_uses(cg->m, k->results[i], r);
  }
  qir_op_unlink(k);
}

bool cg_compose_groups(cg_ctx *cg, qir_region *r) {
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    if (op->code != QIR_OP_KERNEL) {
      for (int i = 0; i < op->n_regions; i++)
        if (!cg_compose_groups(cg, op->regions[i])) return false;
      continue;
    }
    composer cm = {.cg = cg, .kernel = op, .body = op->regions[0]};
    qir_op *fused = compose(&cm);
    if (fused) {
      qir_value_replace_uses(cg->m, op->results[0], fused->results[0]);
      qir_op_unlink(op);
    } else {
      qir_diag_report(cg->d, QIR_SEV_WARNING, op->loc, "kernel @%s runs as separate kernels: %s", op->sym ? op->sym : "?",
                      cm.why ? cm.why : "it does not compose");
      dissolve(cg, op);
    }
  }
  return true;
}
