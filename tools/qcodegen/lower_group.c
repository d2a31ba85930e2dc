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
 * A group with several reductions over the same axes of its result (softmax,
 * log-softmax, layer norm, with their elementwise producers) is a row group
 * instead (compose_rows, lower_rows): one warp per row, a box of rows per
 * block (qir_row_blocking_of, as the group's whole plan says); the row the first
 * reduction reads is computed once into shared memory (the `smem` edge); each
 * reduction walks the row lane-strided and is combined across the warp; then
 * the result is written.  A group of one reduction with a staged prologue
 * (qir_group_stages_prologue: a value before it marked smem that computes
 * something) goes to the staged composer first (compose_stages,
 * lower_stages), so the prologue is computed once per block into shared
 * memory, not inlined at every step of the reduction.  What composes neither way (reductions over other
 * axes, a reshape inside a group) runs as its ops, one kernel each, after a
 * warning: the numbers stay right. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "rprogram.h"

#define MAX_SEGMENTS 8

typedef struct {
  cg_ctx *cg;
  qir_op *kernel;
  qir_region *body;
  const qir_op *anchor;         /* the compute with a reduction, or NULL */
  int acc_operand;              /* marker operand for the anchor's value in the epilogue */
  bool in_epilogue;
  const char *why;              /* why it does not compose */
  int depth;
  /* row groups */
  bool rows;
  int n_stages;
  qir_op *stages[8];
  const qir_value *staged;      /* the row computed once into shared memory, or NULL */
  const qir_op *point;          /* a reduction read only by the staged row, at its point */
  const qir_op *tail;           /* a contraction over the rows of the row result (@V), or NULL */
  const qir_value *tail_row;    /* the row result the tail reads */
  bool in_tail;
  bool expanding_staged;
  const qir_compute *ctx;       /* the compute whose variables the indices use */
  bool ctx_stage;               /* ctx is a stage: its reduction variables walk the row */
  bool reduced[QIR_MAX_RANK];
  int rank;
  /* staged groups: values computed into shared memory, read as operands tile_base + i */
  int n_tiles, tile_base;
  const qir_value *tile_vals[MAX_SEGMENTS];
  const qir_value *seg_root;    /* the segment being composed */
} composer;

/* idx (in ctx's variables) is the row's own point: kept axes their variable,
 * reduced axes the variable walking the row (exact), or for a reduction's
 * value (!exact) index 0 / an axis of extent 1. */
static bool row_point(const composer *cm, qir_expr *const *idx, int n_idx, bool exact) {
  if (n_idx != cm->rank) return false;
  int m = 0;
  for (int d = 0; d < n_idx; d++) {
    const qir_expr *e = idx[d];
    if (!cm->reduced[d]) {
      if (e->kind != QIR_EX_VAR || e->var != d) return false;
      continue;
    }
    int walk = cm->ctx_stage ? cm->rank + m : d;
    m++;
    if (exact) {
      if (e->kind != QIR_EX_VAR || e->var != walk) return false;
    } else if (!(e->kind == QIR_EX_INT && e->ival == 0) &&
               !(e->kind == QIR_EX_VAR && e->var >= 0 && e->var < cm->ctx->n_axes + cm->ctx->n_red &&
                 cm->ctx->axis_extents[e->var] == 1)) {
      return false;
    }
  }
  return true;
}

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
  int tile = -1;
  for (int t = 0; t < cm->n_tiles; t++)
    if (v == cm->tile_vals[t] && v != cm->seg_root) tile = t;
  if (tile >= 0) {
    r = qir_expr_access(m, cm->tile_base + tile, n_idx, idx);
  } else if (cm->in_tail && v == cm->tail_row) {
    /* the tail walks each row's result: kept axes at its own point, the row's
     * axes by its reduction variables in order (P[b, h, i, j] in P @ V) */
    bool ok = n_idx == cm->rank;
    for (int d = 0, k = 0; ok && d < n_idx; d++) {
      int want = cm->reduced[d] ? cm->tail->comp->n_axes + k++ : d;
      ok = idx[d]->kind == QIR_EX_VAR && idx[d]->var == want;
    }
    if (!ok) cm->why = "the row result is read by the contraction after it away from its row";
    else r = qir_expr_access(m, cm->acc_operand + cm->n_stages + 2, n_idx, idx);
  } else if (cm->in_tail && (v == cm->staged || (v->def && v->def->parent == cm->body && v->def->code == QIR_OP_COMPUTE &&
                                                   v->def->comp && v->def->comp->n_red > 0))) {
    /* the row's own values are gone by then: only its result is staged for the tail */
    cm->why = "the contraction after the rows reads a value of the rows other than their result";
  } else if (cm->rows && v == cm->staged && !cm->expanding_staged) {
    if (!row_point(cm, idx, n_idx, true)) cm->why = "the staged row is read away from the row's point";
    else r = qir_expr_access(m, cm->acc_operand + cm->n_stages, n_idx, idx);
  } else if (v->arg_of == cm->body) {
    r = qir_expr_access(m, v->arg_index, n_idx, idx);
  } else if (!v->def || v->def->parent != cm->body) {
    cm->why = "a value from outside the group";
  } else if (v->def->code != QIR_OP_COMPUTE || !v->def->comp) {
    cm->why = qir_sprintf(m, "'%s' has no compute form to inline", qir_opinfo_get(v->def->code)->name);
  } else if (cm->rows && v->def == cm->point) {
    if (!cm->expanding_staged || !row_point(cm, idx, n_idx, true))
      cm->why = "a reduction read elsewhere than by the staged row at its point";
    else
      r = qir_expr_access(m, cm->acc_operand + cm->n_stages + 1, n_idx, idx);
  } else if (cm->rows && v->def->comp->n_red > 0) {
    int k = 0;
    while (k < cm->n_stages && cm->stages[k] != v->def) k++;
    if (k == cm->n_stages) cm->why = "a reduction that is not a stage of the row";
    else if (!row_point(cm, idx, n_idx, false)) cm->why = "a row reduction read away from its row";
    else r = qir_expr_access(m, cm->acc_operand + k, n_idx, idx);
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

/* The anchor's form mc (op lead's) with the producers it reads inlined: its
 * axes and reduction as they are, the body substituted. */
static qir_compute *anchor_form(composer *cm, const qir_op *lead, const qir_compute *mc) {
  qir_compute *c = qir_compute_new(cm->cg->m, mc->n_axes, mc->n_red);
  for (int v = 0; v < mc->n_axes + mc->n_red; v++) {
    c->axis_names[v] = mc->axis_names[v];
    c->axis_extents[v] = mc->axis_extents[v];
  }
  c->reduce = mc->reduce;
  cm->in_epilogue = false;
  c->body = substitute(cm, lead, mc->body, identity_vars(cm->cg->m, mc->n_axes + mc->n_red), mc->n_axes + mc->n_red);
  return c;
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
  qir_compute *c = anchor_form(cm, lead, mc);
  qir_expr *epilogue = NULL;
  if (c->body && cm->anchor && cm->anchor != root) {
    cm->in_epilogue = true;
    epilogue = expand(cm, out, identity_vars(m, out->type.rank), out->type.rank);
  }
  if (cm->why) return NULL;
  qir_op *op = qir_op_new(m, QIR_OP_COMPUTE, k->n_operands, k->operands, 1, &out->type, k->loc);
  op->comp = c;
  const qir_attr *tile = qir_op_attr(k, "tile");
  /* a plan for the staged or row composer (#tile{composer = ...}) is not this kernel's */
  const qir_attr *bands = qir_op_attr(k, "tile_bands");   /* its plans for smaller runs (-welder: the anchor's) */
  if (!tile || (tile->val.kind == QIR_ATTR_DICT && qir_attr_dict_get(&tile->val, "composer"))) tile = qir_op_attr(lead, "tile"), bands = NULL;
  if (tile) qir_op_set_attr(m, op, "tile", tile->val, true);
  if (tile && bands) qir_op_set_attr(m, op, "tile_bands", bands->val, true);
  qir_op_insert_before(k, op);
  add_group(cm->cg, (cg_group){.op = op, .name = k->sym ? k->sym : "?", .epilogue = epilogue,
                               .acc_operand = cm->acc_operand,
                               .acc_dtype = cm->anchor ? cm->anchor->results[0]->type.dtype : out->type.dtype});
  return op;
}

/* The first value the first stage reads that has the result's shape: the
 * row every stage walks, worth computing once into shared memory. */
static const qir_value *row_to_stage(composer *cm, const qir_op *stage, const qir_expr *e, const qir_type *t) {
  if (!e) return NULL;
  if (e->kind == QIR_EX_ACCESS && e->operand >= 0 && e->operand < stage->n_operands) {
    const qir_value *v = stage->operands[e->operand];
    /* an elementwise value of the group, or the point reduction itself (a
     * gemm's logits straight into a softmax): computed once per row */
    bool inner = v->arg_of == cm->body ||
                 (v->def && v->def->parent == cm->body && v->def->code == QIR_OP_COMPUTE && v->def->comp &&
                  (v->def->comp->n_red == 0 || v->def == cm->point));
    if (inner && v->type.rank == t->rank && !memcmp(v->type.dims, t->dims, sizeof(int64_t) * (size_t)t->rank)) return v;
  }
  for (int i = 0; i < e->n_args; i++) {
    const qir_value *v = row_to_stage(cm, stage, e->args[i], t);
    if (v) return v;
  }
  return NULL;
}

/* A group of reductions over the same axes of its result (softmax, layer
 * norm, ...): one warp per row, the stages one after another, each reduced
 * across the warp; the row computed once into shared memory. */
static qir_op *compose_rows(composer *cm) {
  qir_module *m = cm->cg->m;
  qir_op *k = cm->kernel;
  cm->why = NULL;
  cm->anchor = NULL;
  cm->depth = 0;
  cm->rows = true;
  qir_value *out = cm->body->last->operands[0];
  const qir_type *result_type = &out->type;
  if (out->def && out->def->parent == cm->body && out->def->code == QIR_OP_COMPUTE && out->def->comp &&
      out->def->comp->n_red > 0) {
    /* a contraction over the rows of the row result (attention's @V): the
     * tail, run by each row's warp from the row result staged in shared memory */
    cm->tail = out->def;
    for (int i = 0; i < cm->tail->n_operands; i++) {
      qir_value *v = cm->tail->operands[i];
      if (!v->def || v->def->parent != cm->body || v->def->code != QIR_OP_COMPUTE || !v->def->comp ||
          v->def->comp->n_red || v->type.rank != out->type.rank || v == cm->tail_row)
        continue;
      /* a row's result reads the row's reductions (a softmax's sum, a norm's variance) */
      bool reads_reduction = false;
      for (int j = 0; j < v->def->n_operands; j++) {
        const qir_op *d = v->def->operands[j]->def;
        reads_reduction |= d && d->parent == cm->body && d->code == QIR_OP_COMPUTE && d->comp && d->comp->n_red > 0;
      }
      if (!reads_reduction) continue;
      if (cm->tail_row) {
        cm->why = "a contraction reading two results of the group";
        return NULL;
      }
      cm->tail_row = v;
    }
    if (!cm->tail_row) {
      cm->why = "a row group's result must be elementwise over the row";
      return NULL;
    }
    out = (qir_value *)cm->tail_row;
  }
  const qir_op *root = out->def;
  if (!root || root->parent != cm->body || root->code != QIR_OP_COMPUTE || root->comp->n_red) {
    cm->why = "a row group's result must be elementwise over the row";
    return NULL;
  }
  int n = out->type.rank;
  const int64_t *E = out->type.dims;
  cm->rank = n;
  for (qir_op *op = cm->body->first; op; op = op->next) {
    if (op->code != QIR_OP_COMPUTE || !op->comp || !op->comp->n_red || op == cm->tail) continue;
    const qir_type *rt = &op->results[0]->type;
    if (rt->rank == n && !memcmp(rt->dims, E, sizeof(int64_t) * (size_t)n) && op->comp->n_axes == n) {
      if (cm->point) {
        cm->why = "two reductions at the row's points";
        return NULL;
      }
      cm->point = op;           /* one value per point of the row: computed while staging */
      continue;
    }
    if (cm->n_stages == 8) {
      cm->why = "more than 8 row reductions";
      return NULL;
    }
    cm->stages[cm->n_stages++] = op;
  }
  if (cm->n_stages == 0) {
    cm->why = "no reduction over the rows";
    return NULL;
  }
  int n_red = 0;
  for (int d = 0; d < n; d++) {
    const qir_compute *c0 = cm->stages[0]->comp;
    cm->reduced[d] = c0->n_axes == n && c0->axis_extents[d] == 1 && E[d] > 1;
    if (cm->reduced[d]) n_red++;
  }
  for (int s = 0; s < cm->n_stages; s++) {
    const qir_compute *c = cm->stages[s]->comp;
    bool ok = c->n_axes == n && c->n_red == n_red && n_red > 0 && n + n_red <= MAX_AXES;
    for (int d = 0, r = 0; ok && d < n; d++) {
      ok = c->axis_extents[d] == (cm->reduced[d] ? 1 : E[d]);
      if (ok && cm->reduced[d]) ok = c->axis_extents[n + r++] == E[d];
    }
    if (!ok) {
      cm->why = "reductions over different axes of the result";
      return NULL;
    }
  }
  cm->staged = row_to_stage(cm, cm->stages[0], cm->stages[0]->comp->body, &out->type);
  cg_rows *rows = qir_alloc(m, sizeof *rows);
  memset(rows, 0, sizeof *rows);
  /* the rows of a block: the group's block over the kept axes (a box of
   * rows, the last ones maybe partial), as the whole plan says (qir/rprogram.h) */
  int64_t blk[QIR_MAX_RANK];
  bool have_blk = qir_group_block(k, blk);
  qir_row_blocking rb;
  if (!qir_row_blocking_of(n, E, cm->reduced, have_blk ? blk : NULL,
                           cm->staged ? qir_dtype_size(cm->staged->type.dtype) : 0,
                           cm->tail ? qir_dtype_size(out->type.dtype) : 0, cm->cg->warp, &rb)) {
    cm->why = "a row too long to stage for the contraction after it";
    return NULL;
  }
  if (!rb.staged) cm->staged = NULL;
  if (cm->point && !cm->staged) {
    cm->why = "a reduction at the row's points without a staged row";
    return NULL;
  }
  cm->acc_operand = k->n_operands;
  memcpy(rows->kept_block, rb.kept_block, sizeof rows->kept_block);
  rows->point_unroll = cm->point ? 4 : 1;
  rows->n_stages = cm->n_stages;
  rows->marker_base = cm->acc_operand;
  memcpy(rows->reduced, cm->reduced, sizeof rows->reduced);
  const qir_compute **stages = qir_alloc(m, sizeof *stages * (size_t)cm->n_stages);
  qir_dtype *dtypes = qir_alloc(m, sizeof *dtypes * (size_t)(cm->n_stages + 3));
  dtypes[cm->n_stages] = dtypes[cm->n_stages + 1] = dtypes[cm->n_stages + 2] = out->type.dtype;
  cm->ctx_stage = true;
  for (int s = 0; s < cm->n_stages && !cm->why; s++) {
    const qir_op *st = cm->stages[s];
    qir_compute *c = qir_compute_new(m, n, n_red);
    for (int v = 0; v < n + n_red; v++) {
      c->axis_names[v] = st->comp->axis_names[v];
      c->axis_extents[v] = st->comp->axis_extents[v];
    }
    c->reduce = st->comp->reduce;
    cm->ctx = st->comp;
    c->body = substitute(cm, st, st->comp->body, identity_vars(m, n + n_red), n + n_red);
    stages[s] = c;
    dtypes[s] = st->results[0]->type.dtype;
  }
  cm->ctx_stage = false;
  cm->ctx = root->comp;
  qir_compute *fc = qir_compute_new(m, n, 0);
  for (int v = 0; v < n; v++) {
    fc->axis_names[v] = root->comp->axis_names[v];
    fc->axis_extents[v] = root->comp->axis_extents[v];
  }
  if (!cm->why) fc->body = substitute(cm, root, root->comp->body, identity_vars(m, n), n);
  if (!cm->why && cm->point) {
    const qir_compute *pc = cm->point->comp;
    qir_compute *c = qir_compute_new(m, n, pc->n_red);
    for (int v = 0; v < n + pc->n_red; v++) {
      c->axis_names[v] = pc->axis_names[v];
      c->axis_extents[v] = pc->axis_extents[v];
    }
    c->reduce = pc->reduce;
    cm->ctx = pc;
    c->body = substitute(cm, cm->point, pc->body, identity_vars(m, n + pc->n_red), n + pc->n_red);
    cm->ctx = root->comp;
    rows->point = c;
    dtypes[cm->n_stages + 1] = cm->point->results[0]->type.dtype;
  }
  if (!cm->why && cm->staged) {
    cm->expanding_staged = true;
    rows->staged = expand(cm, cm->staged, identity_vars(m, n), n);
    cm->expanding_staged = false;
    dtypes[cm->n_stages] = cm->staged->type.dtype;
  }
  if (!cm->why && cm->tail) {
    /* the tail's axes: the row's kept axes, then its own where the row is reduced */
    const qir_compute *tc = cm->tail->comp;
    bool ok = tc->n_axes == n && tc->n_red == n_red && n + n_red <= MAX_AXES;
    for (int d = 0, r = 0; ok && d < n; d++) {
      ok = cm->reduced[d] ? tc->axis_extents[n + r++] == E[d] : tc->axis_extents[d] == E[d];
    }
    if (!ok) {
      cm->why = "a contraction after the rows that does not walk them";
    } else {
      qir_compute *c = qir_compute_new(m, n, n_red);
      for (int v = 0; v < n + n_red; v++) {
        c->axis_names[v] = tc->axis_names[v];
        c->axis_extents[v] = tc->axis_extents[v];
      }
      c->reduce = tc->reduce;
      cm->ctx = tc;
      cm->in_tail = true;
      c->body = substitute(cm, cm->tail, tc->body, identity_vars(m, n + n_red), n + n_red);
      cm->in_tail = false;
      cm->ctx = root->comp;
      rows->row = fc;
      rows->tail_dtype = cm->tail->results[0]->type.dtype;
      fc = c;                 /* the kernel's form: the tail's, over the result */
    }
  }
  if (cm->why) return NULL;
  rows->stages = stages;
  rows->dtypes = dtypes;
  qir_op *op = qir_op_new(m, QIR_OP_COMPUTE, k->n_operands, k->operands, 1, result_type, k->loc);
  op->comp = fc;
  qir_op_insert_before(k, op);
  add_group(cm->cg, (cg_group){.op = op, .name = k->sym ? k->sym : "?", .acc_operand = -1, .rows = rows});
  return op;
}

/* The indices of the row's point at flat position pos over its reduced axes
 * (extents ext): each reduced axis's index declared once as a local in body
 * (a lane's walks share it), the kept axes at the row's own index row[d]. */
static void row_point_at(lower_env *env, kstmt *body, const bool *reduced, int n, kexpr *const *row, kexpr *pos,
                         const int64_t *ext, int nr, kexpr **at) {
  kbuilder *b = env->b;
  kexpr *c_[MAX_AXES];
  decompose(env, pos, ext, nr, c_);
  for (int d = 0, m = 0; d < n; d++) {
    if (!reduced[d]) {
      at[d] = row[d];
      continue;
    }
    kexpr *c = c_[m++];
    if (c->kind != KE_INT) {
      kvar *cv = kvar_new(b, env->k, "q", b->index_type, 0, KV_LOCAL);
      ks_add(b, body, ks_decl(b, cv, c));
      c = ke_var(b, cv);
    }
    at[d] = c;
  }
}

/* The loops of reduction pc's reduction axes (variables n + a) nested in
 * body; the innermost body (body itself when there are none). */
static kstmt *reduction_loops(lower_env *env, kstmt *body, const qir_compute *pc, int n) {
  kbuilder *b = env->b;
  kstmt *cur = body;
  for (int a = 0; a < pc->n_red; a++) {
    kvar *r = kvar_new(b, env->k, "r", b->index_type, 0, KV_LOCAL);
    env->vars[n + a] = ke_var(b, r);
    kstmt *lb = ks_seq(b);
    ks_add(b, cur, ks_for(b, r, ke_int(b, 0), ke_int(b, pc->axis_extents[n + a]), 1, lb));
    cur = lb;
  }
  return cur;
}

void lower_rows(lower_env *env, const cg_rows *rows) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *F = rows->row ? rows->row : env->comp, *tail = rows->row ? env->comp : NULL;
  int n = F->n_axes, W = env->cg->warp;
  int64_t kept[MAX_AXES], red[MAX_AXES], n_rows = 1, len = 1;
  int nk = 0, nr = 0;
  for (int d = 0; d < n; d++) {
    if (rows->reduced[d]) red[nr++] = F->axis_extents[d], len *= F->axis_extents[d];
    else kept[nk++] = F->axis_extents[d], n_rows *= F->axis_extents[d];
  }
  int64_t R = 1, kb[MAX_AXES], nbk[MAX_AXES], grid = 1;
  for (int d = 0, i = 0; d < n; d++)
    if (!rows->reduced[d]) {
      kb[i] = rows->kept_block[d] > 1 ? rows->kept_block[d] : 1;
      nbk[i] = ceil_div(kept[i], kb[i]);
      R *= kb[i];
      grid *= nbk[i++];
    }
  k->grid = grid;
  if (n && !rows->reduced[0] && k->args[0]->type.rank == n) kkernel_rows(k, 1, kb[0], grid / nbk[0]);
  if (k->args[0]->type.rank == n) {
    int kept_axis[MAX_AXES];
    for (int d = 0, i = 0; d < n; d++)
      if (!rows->reduced[d]) kept_axis[i++] = d;
    kkernel_tile_grid(k, nk, kept_axis, nbk, kb);
  }
  k->threads = (int)(W * R);
  ktype t = ktype_of_dtype(k->args[0]->type.dtype);
  env->marker_base = rows->marker_base;
  env->n_markers = tail ? rows->n_stages + 3 : rows->n_stages + (rows->staged ? 1 : 0) + (rows->point ? 1 : 0);
  env->marker_dtypes = rows->dtypes;
  env->marker_values = qir_alloc(b->m, sizeof(kexpr *) * (size_t)(env->n_markers + 1));
  kexpr *bc[MAX_AXES], *wc[MAX_AXES], *row[MAX_AXES], *valid = NULL;
  /* warp w of block b: the row at the block's corner plus w's offset in its box;
   * a warp past the edge of a partial box walks the last row and stores nothing */
  kexpr *warp = R > 1 ? ke_var(b, let(env, "w", ke_div(b, ke_tid(b), ke_int(b, W)))) : ke_int(b, 0);
  decompose(env, ke_bid(b), nbk, nk, bc);
  decompose(env, warp, kb, nk, wc);
  for (int i = 0, d = 0; d < n; d++) {
    if (rows->reduced[d]) continue;
    kexpr *r = ke_add(b, ke_mul(b, bc[i], ke_int(b, kb[i])), wc[i]);
    if (kept[i] % kb[i]) {
      kvar *rv = let(env, "rowu", r);
      valid = ke_and(b, valid, ke_lt(b, ke_var(b, rv), ke_int(b, kept[i])));
      r = ke_pick(b, ke_lt(b, ke_var(b, rv), ke_int(b, kept[i])), ke_var(b, rv), ke_int(b, kept[i] - 1));
    }
    row[d] = r->kind == KE_INT ? r : ke_var(b, let(env, "row", r));
    i++;
  }
  if (valid) valid = ke_var(b, let(env, "valid", valid));
  kvar *lane = let(env, "lane", ke_mod(b, ke_tid(b), ke_int(b, W)));
  kvar *smem = rows->staged ? kvar_new(b, k, "rowtile", ktype_of_dtype(rows->dtypes[rows->n_stages]), len * R, KV_SHARED) : NULL;
  kexpr *row0 = ke_mul(b, warp, ke_int(b, len));   /* the warp's row in the tile */
  /* one lane-strided walk over the row; `stage` < 0: the result's variables */
  #define ROW_LOOP(p, body, stage)                                                          \
    do {                                                                                  \
      p = kvar_new(b, k, "pt", b->index_type, 0, KV_LOCAL);                                       \
      body = ks_seq(b);                                                                   \
      kexpr *pc_[MAX_AXES];                                                               \
      decompose(env, ke_var(b, p), red, nr, pc_);                                         \
      for (int d_ = 0, m_ = 0; d_ < n; d_++) {                                            \
        if (!rows->reduced[d_]) { env->vars[d_] = row[d_]; continue; }                     \
        kexpr *c_ = pc_[m_];                                                              \
        if (c_->kind != KE_INT) {                                                         \
          kvar *cv_ = kvar_new(b, k, "q", b->index_type, 0, KV_LOCAL);                            \
          ks_add(b, body, ks_decl(b, cv_, c_));                                           \
          c_ = ke_var(b, cv_);                                                            \
        }                                                                                 \
        if ((stage) >= 0) env->vars[d_] = ke_int(b, 0), env->vars[n + m_] = c_;           \
        else env->vars[d_] = c_;                                                          \
        m_++;                                                                             \
      }                                                                                   \
      if (smem) env->marker_values[rows->n_stages] = ke_elem(b, smem, ke_add(b, row0, ke_var(b, p))); \
    } while (0)
  kvar *p;
  kstmt *body;
  /* points beyond the row (its length no multiple of W x U) compute its last
   * point and store nothing */
  int64_t U = rows->point_unroll > 8 ? 8 : rows->point_unroll;
  while (U > 1 && W * U > len) U /= 2;
  kexpr *pvalid[8] = {NULL};
  if (smem && rows->point && U > 1) {
    /* each lane U points of the row at once (lane, lane + W, ...), one walk of
     * the reduction: what they read alike (the row's own operand, Q[i, k] in
     * QK^T) is loaded once for all of them */
    const qir_compute *pc = rows->point;
    qir_dtype pd = rows->dtypes[rows->n_stages + 1];
    ktype pt = ktype_of_dtype(pd);
    p = kvar_new(b, k, "pt", b->index_type, 0, KV_LOCAL);
    body = ks_seq(b);
    kexpr *at[8][MAX_AXES], *pos[8];
    kvar *pacc[8];
    for (int u = 0; u < U; u++) {
      kvar *pu = kvar_new(b, k, "pu", b->index_type, 0, KV_LOCAL);
      kexpr *at_u = ke_add(b, ke_var(b, p), ke_int(b, u * W));
      if (u && len % (W * U)) {
        pvalid[u] = ke_lt(b, at_u, ke_int(b, len));
        at_u = ke_pick(b, pvalid[u], at_u, ke_int(b, len - 1));
      }
      ks_add(b, body, ks_decl(b, pu, at_u));
      pos[u] = ke_var(b, pu);
      row_point_at(env, body, rows->reduced, n, row, pos[u], red, nr, at[u]);
      pacc[u] = kvar_new(b, k, "pacc", pt, 0, KV_LOCAL);
      ks_add(b, body, ks_decl(b, pacc[u], reduce_identity(b, pc->reduce, pt)));
    }
    kstmt *cur = reduction_loops(env, body, pc, n);
    for (int u = 0; u < U; u++) {
      for (int d = 0; d < n; d++) env->vars[d] = at[u][d];
      ks_add(b, cur, ks_assign(b, pacc[u], NULL, reduce_combine(b, pc->reduce, ke_var(b, pacc[u]), tr_as(env, pc->body, pt), pt)));
    }
    for (int u = 0; u < U; u++) {
      for (int d = 0; d < n; d++) env->vars[d] = at[u][d];
      env->marker_values[rows->n_stages + 1] = ke_cast_dtype(b, ke_var(b, pacc[u]), pd);
      kstmt *st = ks_assign(b, smem, ke_add(b, row0, pos[u]), tr_as(env, rows->staged, smem->type));
      ks_add(b, body, pvalid[u] ? ks_if(b, pvalid[u], st, NULL) : st);
    }
    ks_add(b, k->body, ks_for(b, p, ke_var(b, lane), ke_int(b, len), W * U, body));
    ks_add(b, k->body, ks_barrier(b));
  } else if (smem) {                    /* the row, computed once into shared memory */
    ROW_LOOP(p, body, -1);
    if (rows->point) {                  /* its reduction, at this point of the row */
      const qir_compute *pc = rows->point;
      qir_dtype pd = rows->dtypes[rows->n_stages + 1];
      ktype pt = ktype_of_dtype(pd);
      kvar *pacc = kvar_new(b, k, "pacc", pt, 0, KV_LOCAL);
      ks_add(b, body, ks_decl(b, pacc, reduce_identity(b, pc->reduce, pt)));
      kstmt *cur = reduction_loops(env, body, pc, n);
      ks_add(b, cur, ks_assign(b, pacc, NULL, reduce_combine(b, pc->reduce, ke_var(b, pacc), tr_as(env, pc->body, pt), pt)));
      env->marker_values[rows->n_stages + 1] = ke_cast_dtype(b, ke_var(b, pacc), pd);
    }
    ks_add(b, body, ks_assign(b, smem, ke_add(b, row0, ke_var(b, p)), tr_as(env, rows->staged, smem->type)));
    ks_add(b, k->body, ks_for(b, p, ke_var(b, lane), ke_int(b, len), W, body));
    ks_add(b, k->body, ks_barrier(b));
  }
  for (int s = 0; s < rows->n_stages; s++) {
    const qir_compute *c = rows->stages[s];
    ktype at = ktype_of_dtype(rows->dtypes[s]);
    kvar *acc = kvar_new(b, k, "acc", at, 0, KV_THREAD);
    ks_add(b, k->body, ks_assign(b, acc, NULL, reduce_identity(b, c->reduce, at)));
    ROW_LOOP(p, body, s);
    const qir_compute *saved = env->comp;
    env->comp = c;
    ks_add(b, body, ks_assign(b, acc, NULL, reduce_combine(b, c->reduce, ke_var(b, acc), tr_as(env, c->body, at), at)));
    env->comp = saved;
    ks_add(b, k->body, ks_for(b, p, ke_var(b, lane), ke_int(b, len), W, body));
    ks_add(b, k->body, ks_warp_reduce(b, acc, reduce_fn_of(c->reduce), 0));
    /* what the stage stores, as the unfused kernel would */
    env->marker_values[s] = ke_cast_dtype(b, ke_var(b, acc), rows->dtypes[s]);
  }
  ROW_LOOP(p, body, -1);
  kexpr *full[MAX_AXES];
  for (int d = 0; d < n; d++) full[d] = env->vars[d];
  kvar *ptile = NULL;
  if (tail) {                           /* the row's result, for the tail */
    ktype pt = ktype_of_dtype(rows->dtypes[rows->n_stages + 2]);
    ptile = kvar_new(b, k, "prow", pt, len * R, KV_SHARED);
    env->comp = F;
    ks_add(b, body, ks_assign(b, ptile, ke_add(b, row0, ke_var(b, p)),
                              ke_cast_dtype(b, tr_as(env, F->body, pt), rows->dtypes[rows->n_stages + 2])));
  } else {
    kstmt *st = ks_store(b, 0, out_index(env, full), tr_as(env, F->body, t));
    ks_add(b, body, valid ? ks_if(b, valid, st, NULL) : st);
  }
  ks_add(b, k->body, ks_for(b, p, ke_var(b, lane), ke_int(b, len), W, body));
  #undef ROW_LOOP
  if (tail) {
    /* each lane a point of the row's result of the tail, its reduction walking the staged row */
    ks_add(b, k->body, ks_barrier(b));
    env->comp = tail;
    kvar *q = kvar_new(b, k, "pt", b->index_type, 0, KV_LOCAL);
    kstmt *tb = ks_seq(b);
    int64_t own[MAX_AXES], n_own = 1;
    for (int d = 0, m = 0; d < n; d++)
      if (rows->reduced[d]) own[m++] = tail->axis_extents[d], n_own *= tail->axis_extents[d];
    /* U points a lane (q, q + W, ...) in one walk: the row's result, read alike, loaded once */
    int64_t TU = 4;
    while (TU > 1 && W * TU > n_own) TU /= 2;
    kexpr *at[4][MAX_AXES], *tvalid[4] = {NULL};
    kvar *acc[4];
    ktype at_t = ktype_of_dtype(rows->tail_dtype);
    for (int u = 0; u < TU; u++) {
      kexpr *pos = ke_var(b, q);
      if (u) {
        kvar *pu = kvar_new(b, k, "pu", b->index_type, 0, KV_LOCAL);
        kexpr *at_u = ke_add(b, ke_var(b, q), ke_int(b, u * W));
        if (n_own % (W * TU)) {
          tvalid[u] = ke_lt(b, at_u, ke_int(b, n_own));
          at_u = ke_pick(b, tvalid[u], at_u, ke_int(b, n_own - 1));
        }
        ks_add(b, tb, ks_decl(b, pu, at_u));
        pos = ke_var(b, pu);
      }
      row_point_at(env, tb, rows->reduced, n, row, pos, own, nr, at[u]);
      acc[u] = kvar_new(b, k, "tacc", at_t, 0, KV_LOCAL);
      ks_add(b, tb, ks_decl(b, acc[u], reduce_identity(b, tail->reduce, at_t)));
    }
    kstmt *cur = tb;
    kexpr *at_row = NULL;
    for (int a = 0; a < tail->n_red; a++) {
      kvar *r = kvar_new(b, k, "r", b->index_type, 0, KV_LOCAL);
      env->vars[n + a] = ke_var(b, r);
      at_row = at_row ? ke_add(b, ke_mul(b, at_row, ke_int(b, tail->axis_extents[n + a])), ke_var(b, r)) : ke_var(b, r);
      kstmt *lb = ks_seq(b);
      ks_add(b, cur, ks_for(b, r, ke_int(b, 0), ke_int(b, tail->axis_extents[n + a]), 1, lb));
      cur = lb;
    }
    env->marker_values[rows->n_stages + 2] = ke_elem(b, ptile, ke_add(b, row0, at_row ? at_row : ke_int(b, 0)));
    for (int u = 0; u < TU; u++) {
      for (int d = 0; d < n; d++) env->vars[d] = at[u][d];
      ks_add(b, cur, ks_assign(b, acc[u], NULL,
                               reduce_combine(b, tail->reduce, ke_var(b, acc[u]), tr_as(env, tail->body, at_t), at_t)));
    }
    for (int u = 0; u < TU; u++)
    {
      kstmt *st = ks_store(b, 0, out_index(env, at[u]), ke_cast(b, ke_cast_dtype(b, ke_var(b, acc[u]), rows->tail_dtype), t));
      kexpr *ok = tvalid[u] ? ke_and(b, valid, tvalid[u]) : valid;
      ks_add(b, tb, ok ? ks_if(b, ok, st, NULL) : st);
    }
    ks_add(b, k->body, ks_for(b, q, ke_var(b, lane), ke_int(b, n_own), W * TU, tb));
  }
  k->summary = qir_sprintf(b->m, "rows: %" PRId64 " rows of %" PRId64 ", one warp each%s, %d reductions%s%s%s", n_rows, len,
                           R > 1 ? qir_sprintf(b->m, " (%" PRId64 " per block)", R) : "", rows->n_stages, smem ? ", the row staged in shared memory" : "",
                           rows->point ? " (computed from a reduction at each point)" : "",
                           tail ? ", then a contraction over each row's result" : "");
}

/* ---------------------------------------------------------------- staged groups */

/* The reductions reachable from v through the group's elementwise ops, not
 * crossing a staged value: at most one may be the segment's anchor. */
static void segment_reductions(composer *cm, const qir_value *v, const qir_op **seen, int *n_seen, const qir_op **red,
                               int *n_red) {
  const qir_op *d = v->def;
  if (!d || d->parent != cm->body || d->code != QIR_OP_COMPUTE || !d->comp) return;
  for (int t = 0; t < cm->n_tiles; t++)
    if (v == cm->tile_vals[t] && v != cm->seg_root) return;
  for (int i = 0; i < *n_seen; i++)
    if (seen[i] == d) return;
  if (*n_seen == 64) return;
  seen[(*n_seen)++] = d;
  if (d->comp->n_red > 0) {
    if (*n_red < 2) red[*n_red] = d;
    (*n_red)++;
    return;
  }
  for (int k = 0; k < d->n_operands; k++) segment_reductions(cm, d->operands[k], seen, n_seen, red, n_red);
}

/* Segment `root` as a compute over its axes (the anchor's reduction, if any)
 * and an epilogue; staged values it reads are tile operands. */
static bool compose_segment(composer *cm, const qir_value *root, cg_segment *seg) {
  qir_module *m = cm->cg->m;
  cm->seg_root = root;
  cm->anchor = NULL;
  cm->depth = 0;
  const qir_op *seen[64], *red[2];
  int n_seen = 0, n_red = 0;
  segment_reductions(cm, root, seen, &n_seen, red, &n_red);
  if (n_red > 1) {
    cm->why = "two reductions in one segment of a staged group";
    return false;
  }
  int n = root->type.rank;
  if (n_red == 1) cm->anchor = red[0];
  const qir_op *lead = cm->anchor ? cm->anchor : root->def;
  const qir_compute *mc = lead->comp;
  if (!mc || !mc->body) {
    cm->why = "a staged value without a compute form";
    return false;
  }
  if (mc->n_axes != n || (cm->anchor && cm->anchor->results[0]->type.rank != n)) {
    cm->why = "a staged segment whose reduction changes the shape";
    return false;
  }
  for (int d = 0; d < n; d++)
    if (mc->axis_extents[d] != root->type.dims[d]) {
      cm->why = "a staged segment whose reduction changes the shape";
      return false;
    }
  qir_compute *c = anchor_form(cm, lead, mc);
  seg->epilogue = NULL;
  if (c->body && cm->anchor && cm->anchor->results[0] != root) {
    cm->in_epilogue = true;
    seg->epilogue = expand(cm, root, identity_vars(m, n), n);
  }
  if (cm->why) return false;
  seg->comp = c;
  seg->acc_dtype = (cm->anchor ? cm->anchor->results[0] : root)->type.dtype;
  seg->dtype = root->type.dtype;
  seg->type = &root->type;
  return true;
}

/* Every read of operand k in e is at [i0, i1, ..] (rank indices). */
static bool identity_reads(const qir_expr *e, int k, int rank) {
  if (!e) return true;
  if (e->kind == QIR_EX_ACCESS && e->operand == k) {
    qir_expr *const *idx = e->args;
    if (!is_identity(idx, e->n_args, rank)) return false;
  }
  for (int i = 0; i < e->n_args; i++)
    if (!identity_reads(e->args[i], k, rank)) return false;
  return true;
}

/* Adds the box of staged value t that a read `e` (index expressions over the
 * variables of segment s's compute `c`) covers when s's axes range over its
 * own box (reduction axes over their extent). */
static bool box_read(composer *cm, cg_stages *st, int s, const qir_compute *c, const qir_expr *e) {
  if (e->kind == QIR_EX_ACCESS && e->operand >= st->tile_base && e->operand < st->tile_base + st->n - 1) {
    int t = e->operand - st->tile_base;
    cg_segment *src = &st->seg[s], *dst = &st->seg[t];
    int rank = dst->type->rank;
    if (t >= s || e->n_args != rank) {
      cm->why = "a staged value read before it is computed";
      return false;
    }
    for (int j = 0; j < rank; j++) {
      int64_t o0, oc[QIR_MAX_RANK], ext;
      if (!qir_read_range(c, e->args[j], src->oconst, src->ext, (const int64_t(*)[QIR_MAX_RANK])src->ocoef, &o0, oc, &ext)) {
        cm->why = "a staged value read at an index that is not affine";
        return false;
      }
      if (dst->ext[j] == 0) {
        dst->oconst[j] = o0;
        memcpy(dst->ocoef[j], oc, sizeof oc);
        dst->ext[j] = ext;
        continue;
      }
      if (memcmp(dst->ocoef[j], oc, sizeof oc)) {
        cm->why = "a staged value read at boxes that move differently with the block";
        return false;
      }
      int64_t lo = o0 < dst->oconst[j] ? o0 : dst->oconst[j];
      int64_t hi = o0 + ext > dst->oconst[j] + dst->ext[j] ? o0 + ext : dst->oconst[j] + dst->ext[j];
      dst->oconst[j] = lo;
      dst->ext[j] = hi - lo;
    }
  }
  for (int i = 0; i < e->n_args; i++)
    if (!box_read(cm, st, s, c, e->args[i])) return false;
  return true;
}

/* Whether reduction value v can anchor a segment: every read of it is an
 * elementwise op's at its own point, on the way (through more such ops) to a
 * marked value or the result, which become its epilogue. */
static bool anchors_epilogue(const composer *cm, const qir_value *v, const qir_value *const *marked, int n_marked,
                             const qir_value *out, int depth) {
  if (depth > 64 || !v->uses) return false;
  for (const qir_use *u = v->uses; u; u = u->next) {
    const qir_op *user = u->user;
    if (user->parent != cm->body || user->code != QIR_OP_COMPUTE || !user->comp || user->comp->n_red > 0 ||
        user->n_results != 1)
      return false;
    const qir_value *r = user->results[0];
    if (r->type.rank != v->type.rank || memcmp(r->type.dims, v->type.dims, sizeof(int64_t) * (size_t)v->type.rank))
      return false;
    if (!identity_reads(user->comp->body, u->operand_index, v->type.rank)) return false;
    bool root = r == out;
    for (int t = 0; t < n_marked; t++) root |= marked[t] == r;
    if (!root && !anchors_epilogue(cm, r, marked, n_marked, out, depth + 1)) return false;
  }
  return true;
}

/* A group whose reductions chain through values marked #fuse=smem (a pooling
 * or LRN after a convolution): each such value and the result are segments. */
static qir_op *compose_stages(composer *cm) {
  qir_module *m = cm->cg->m;
  qir_op *k = cm->kernel;
  cm->why = NULL;
  qir_value *out = cm->body->last->operands[0];
  if (!out->def || out->def->parent != cm->body || out->def->code != QIR_OP_COMPUTE) {
    cm->why = "a result that is not computed in the group";
    return NULL;
  }
  for (qir_op *op = cm->body->first; op; op = op->next) {
    const qir_attr *f = qir_op_attr(op, "fuse");
    if (!f || (f->val.kind != QIR_ATTR_WORD && f->val.kind != QIR_ATTR_STRING) || strcmp(f->val.s, "smem") != 0) continue;
    if (op->code != QIR_OP_COMPUTE || op->n_results != 1 || op->results[0] == out) continue;
    if (cm->n_tiles == MAX_SEGMENTS - 1) {
      cm->why = "more staged values than a group takes";
      return NULL;
    }
    cm->tile_vals[cm->n_tiles++] = op->results[0];
  }
  if (cm->n_tiles == 0) {
    cm->why = "a second reduction without a shared-memory edge";
    return NULL;
  }
  /* a reduction that is no segment's anchor (read by another reduction, or
   * away from its own point: a softmax's row max and sum) is staged too */
  const qir_value *marked[MAX_SEGMENTS];
  int n_marked = cm->n_tiles;
  memcpy(marked, cm->tile_vals, sizeof *marked * (size_t)n_marked);
  cm->n_tiles = 0;
  for (qir_op *op = cm->body->first; op; op = op->next) {
    if (op->code != QIR_OP_COMPUTE || op->n_results != 1 || op->results[0] == out) continue;
    bool take = false;
    for (int t = 0; t < n_marked; t++) take |= marked[t] == op->results[0];
    if (!take && op->comp && op->comp->n_red > 0) take = !anchors_epilogue(cm, op->results[0], marked, n_marked, out, 0);
    if (!take) continue;
    if (cm->n_tiles == MAX_SEGMENTS - 1) {
      cm->why = "more staged values than a group takes";
      return NULL;
    }
    cm->tile_vals[cm->n_tiles++] = op->results[0];
  }
  cg_stages *st = qir_alloc(m, sizeof *st);
  memset(st, 0, sizeof *st);
  st->n = cm->n_tiles + 1;
  st->seg = qir_alloc(m, sizeof *st->seg * (size_t)st->n);
  memset(st->seg, 0, sizeof *st->seg * (size_t)st->n);
  st->acc_operand = cm->acc_operand = k->n_operands;
  st->tile_base = cm->tile_base = k->n_operands + 1;
  for (int s = 0; s < st->n; s++)
    if (!compose_segment(cm, s < cm->n_tiles ? cm->tile_vals[s] : out, &st->seg[s])) return NULL;
  /* the result's block tile: the group's plan, else 8 x 8 over its last two axes */
  int n = out->type.rank;
  const qir_attr *tile = qir_op_attr(k, "tile");
  const qir_attr_val *blk = tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, "block") : NULL;
  int64_t per_block = 1;
  for (int d = 0; d < n; d++) {
    int64_t b = d >= n - 2 ? 8 : 1;
    if (blk && blk->kind == QIR_ATTR_LIST && blk->n == n && blk->items[d].kind == QIR_ATTR_INT) b = blk->items[d].i;
    if (b < 1) b = 1;
    if (b > out->type.dims[d]) b = out->type.dims[d] > 0 ? out->type.dims[d] : 1;
    st->block[d] = b;
    per_block *= b;
  }
  /* boxes, from the result back: a value's readers all come after it */
  cg_segment *last = &st->seg[st->n - 1];
  for (int d = 0; d < n; d++) {
    last->ext[d] = st->block[d];
    last->ocoef[d][d] = 1;
  }
  int64_t bytes = 0;
  for (int s = st->n - 1; s >= 0; s--) {
    cg_segment *g = &st->seg[s];
    if (s < st->n - 1) {
      int64_t elems = 1;
      for (int j = 0; j < g->type->rank; j++) {
        if (g->ext[j] <= 0) {
          cm->why = "a staged value no later segment reads";
          return NULL;
        }
        elems *= g->ext[j];
      }
      bytes += elems * (qir_dtype_size(g->dtype) > 4 ? 8 : 4);
      if (bytes > QIR_STAGE_SMEM_LIMIT) {
        cm->why = qir_sprintf(m, "staged tiles of %" PRId64 " bytes per block: more than %d", bytes, QIR_STAGE_SMEM_LIMIT);
        return NULL;
      }
    }
    if (!box_read(cm, st, s, g->comp, g->comp->body)) return NULL;
    if (g->epilogue && !box_read(cm, st, s, g->comp, g->epilogue)) return NULL;
  }
  /* threads: enough for the largest box (each thread then takes a register
   * tile of the reductions' points, one point of the others per pass) */
  int64_t most = per_block;
  for (int s = 0; s < st->n - 1; s++) {
    int64_t elems = 1;
    for (int j = 0; j < st->seg[s].type->rank; j++) elems *= st->seg[s].ext[j];
    if (elems > most) most = elems;
  }
  st->threads = qir_stage_threads(most);
  st->plan = tile ? &tile->val : NULL;
  qir_op *op = qir_op_new(m, QIR_OP_COMPUTE, k->n_operands, k->operands, 1, &out->type, k->loc);
  op->comp = last->comp;
  qir_op_insert_before(k, op);
  add_group(cm->cg, (cg_group){.op = op, .name = k->sym ? k->sym : "?", .acc_operand = -1, .stages = st});
  return op;
}

/* Segment g's epilogue on its accumulated value v at the point env->vars,
 * rounded to the value's type: the accumulator read is v. */
static kexpr *apply_epilogue(lower_env *env, const cg_stages *st, const cg_segment *g, kexpr *v) {
  cg_group acc_only = {.acc_operand = st->acc_operand, .acc_dtype = g->acc_dtype};
  const cg_group *saved = env->group;
  env->group = &acc_only;
  env->acc_value = v;
  v = ke_cast_dtype(env->b, tr_as(env, g->epilogue, ktype_of_dtype(g->dtype)), g->dtype);
  env->acc_value = NULL;
  env->group = saved;
  return v;
}

/* Segment g's value at the point env->vars[0..n): its reduction's loops added
 * to `seq`, the value (rounded to the value's type) returned. */
static kexpr *segment_value(lower_env *env, const cg_stages *st, const cg_segment *g, kstmt *seq) {
  kbuilder *b = env->b;
  const qir_compute *c = g->comp;
  env->comp = c;
  kexpr *v;
  if (c->n_red > 0) {
    ktype at = ktype_of_dtype(g->acc_dtype);
    kvar *acc = kvar_new(b, env->k, "acc", at, 0, KV_LOCAL);
    ks_add(b, seq, ks_decl(b, acc, reduce_identity(b, c->reduce, at)));
    kstmt *cur = reduction_loops(env, seq, c, c->n_axes);
    ks_add(b, cur, ks_assign(b, acc, NULL, reduce_combine(b, c->reduce, ke_var(b, acc), tr_as(env, c->body, at), at)));
    v = ke_cast_dtype(b, ke_var(b, acc), g->acc_dtype);
  } else {
    v = ke_cast_dtype(b, tr_as(env, c->body, ktype_of_dtype(g->dtype)), g->dtype);
  }
  return g->epilogue ? apply_epilogue(env, st, g, v) : v;
}

static int64_t gcd64(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* A staged segment's tile as lower_tile_block computes it: where its slots go. */
typedef struct {
  const cg_stages *st;
  const cg_segment *g;
  const stage_tile *tl;         /* the shared tile it fills, or NULL: the group's output */
  kexpr *const *origin;         /* the box (the block's outputs, or tl's) */
  const int64_t *ext;
  bool shift[MAX_AXES];         /* along d the computed range was moved inside the value: test the box */
} segment_store;

/* Segment g's value at point idx from its accumulated value v (its epilogue
 * applied), rounded to the value's type. */
static kexpr *segment_epilogue(lower_env *env, const cg_stages *st, const cg_segment *g, kexpr *const *idx, kexpr *v) {
  kbuilder *b = env->b;
  const qir_compute *c = g->comp;
  v = ke_cast_dtype(b, v, g->acc_dtype);
  if (!g->epilogue) return v;
  kexpr *saved[MAX_AXES];
  memcpy(saved, env->vars, sizeof saved);
  for (int d = 0; d < c->n_axes; d++) env->vars[d] = idx[d];
  v = apply_epilogue(env, st, g, v);
  memcpy(env->vars, saved, sizeof saved);
  return v;
}

static kstmt *store_segment(lower_env *env, const tile_block *tb, kexpr *const *idx, kexpr *v) {
  kbuilder *b = env->b;
  const segment_store *ss = tb->ctx;
  const cg_segment *g = ss->g;
  int n = g->comp->n_axes;
  kexpr *in = NULL;             /* the point is in the box (it always is in the value) */
  for (int d = 0; d < n; d++)
    if (ss->shift[d])
      in = ke_and(b, in, ke_and(b, ke_bin(b, QIR_FN_GE, idx[d], ss->origin[d], KT_BOOL),
                                ke_lt(b, idx[d], ke_add(b, ss->origin[d], ke_int(b, ss->ext[d])))));
  kstmt *put;
  if (!ss->tl) {
    put = ks_store(b, 0, out_index(env, idx), segment_epilogue(env, ss->st, g, idx, v));
  } else {
    const stage_tile *tl = ss->tl;
    kexpr *off[QIR_MAX_RANK];
    for (int j = 0; j < tl->rank; j++) off[j] = ke_sub(b, idx[j], tl->origin[j]);
    put = ks_assign(b, tl->smem, strides_linear(env, off, tl->ext, tl->rank), segment_epilogue(env, ss->st, g, idx, v));
  }
  return in ? ks_if(b, in, put, NULL) : put;
}

/* Segment g (its reduction) over the box from origin over ext (the block's
 * outputs when tl is NULL, else staged tile tl) by the schedule -welder
 * models (qir_stage_schedule): register tiles, the reused operands staged
 * cooperatively per reduction step.  Along an axis where some block's box
 * leaves the value, the computed range is the box's length clipped to the
 * value's, moved inside the value (so no point outside it is computed), its
 * points clamped into the box; tl's points outside the value are set to 0; a
 * block whose box misses the value skips the work.  False (nothing emitted)
 * when the box takes no such schedule. */
static bool tiled_segment(lower_env *env, const cg_stages *st, const cg_segment *g, const stage_tile *tl, kexpr *const *origin,
                          const int64_t *ext, const int64_t *ostep, const double *omin, const double *omax, int64_t budget,
                          const tile_plan *pipe, kstmt *seq) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *c = g->comp;
  int n = c->n_axes;
  ktype at = ktype_of_dtype(g->acc_dtype);
  if (c->n_red == 0 || n > MAX_AXES || n > QIR_MAX_RANK) return false;
  segment_store ss = {.st = st, .g = g, .tl = tl, .origin = origin, .ext = ext};
  int64_t len[QIR_MAX_RANK];
  for (int d = 0; d < n; d++) {
    int64_t dim = g->type->dims[d];
    len[d] = ext[d] < dim ? ext[d] : dim;
    ss.shift[d] = omin[d] < 0 || omax[d] + (double)ext[d] - 1 > (double)(dim - 1);
  }
  qir_stage_sched sc;
  if (!qir_stage_schedule(c, len, k->threads, k->n_params - 1, at == KT_F64 || at == KT_I64 || at == KT_U64 ? 8 : 4, budget, &sc))
    return false;
  tile_plan p = {.pad = 0, .vec = 1, .smem_budget = budget, .rsplit = 1, .stage = sc.stage, .min_reuse = QIR_SCHED_MIN_REUSE};
  /* the global operands' staging pipelined (lower_simt_pipe.c) where the target has cp.async */
  p.simt_pipe = p.simt_async = pipe->simt_async;
  p.smem_cap = pipe->smem_cap;
  for (int d = 0; d < n; d++) p.lo_step[d] = ss.shift[d] ? 1 : ostep[d];
  int64_t thr[MAX_AXES];
  for (int d = 0; d < n; d++) {
    p.block[d] = sc.tile[d];
    p.thread[d] = sc.thread[d];
    thr[d] = sc.tile[d] / sc.thread[d];
  }
  for (int a = 0; a < c->n_red; a++) p.rstep[a] = sc.rstep[a];
  tile_block tb = {.p = &p, .t = at, .store = store_segment, .ctx = &ss};
  kexpr *tc[MAX_AXES];
  decompose(env, ke_tid(b), thr, n, tc);
  if (sc.threads_used < k->threads) tb.active = ke_lt(b, ke_tid(b), ke_int(b, sc.threads_used));
  kexpr *outside = NULL;        /* a point of tl's box outside the value (zero fill) */
  for (int d = 0; d < n; d++) {
    int64_t dim = g->type->dims[d];
    kexpr *start = origin[d];
    tb.vlo[d] = omin[d];
    tb.vhi[d] = omax[d] + (double)sc.tile[d] - 1;
    if (ss.shift[d]) {
      /* the computed range: len points inside the value covering the box's part in it */
      start = ke_max(b, ke_min(b, origin[d], ke_int(b, dim - len[d])), ke_int(b, 0));
      if (start->kind != KE_INT) start = ke_var(b, let(env, "c", start));
      double lo = omin[d] < (double)(dim - len[d]) ? omin[d] : (double)(dim - len[d]);
      double hi = omax[d] < (double)(dim - len[d]) ? omax[d] : (double)(dim - len[d]);
      tb.vlo[d] = lo > 0 ? lo : 0;
      tb.vhi[d] = (hi > 0 ? hi : 0) + (double)sc.tile[d] - 1;
      /* computing points inside the box and the value (inside the value when they miss) */
      kexpr *h = ke_min(b, ke_add(b, origin[d], ke_int(b, ext[d] - 1)), ke_int(b, dim - 1));
      kexpr *l = ke_min(b, ke_max(b, origin[d], ke_int(b, 0)), ke_int(b, dim - 1));
      tb.clamp_hi[d] = h->kind == KE_INT ? h : ke_var(b, let(env, "h", h));
      tb.clamp_lo[d] = l->kind == KE_INT ? l : ke_var(b, let(env, "l", l));
      /* a block whose box misses the value computes nothing */
      if (omax[d] > (double)(dim - 1)) tb.work = ke_and(b, tb.work, ke_lt(b, origin[d], ke_int(b, dim)));
      if (omin[d] + (double)ext[d] - 1 < 0)
        tb.work = ke_and(b, tb.work, ke_bin(b, QIR_FN_GE, origin[d], ke_int(b, 1 - ext[d]), KT_BOOL));
    } else if (sc.tile[d] > len[d]) {
      tb.clamp_hi[d] = ke_add(b, origin[d], ke_int(b, len[d] - 1));
      if (tb.clamp_hi[d]->kind != KE_INT && tb.clamp_hi[d]->kind != KE_VAR) tb.clamp_hi[d] = ke_var(b, let(env, "h", tb.clamp_hi[d]));
    }
    tb.lo[d] = start;
    kexpr *bs = ke_add(b, start, tc[d]);
    tb.base[d] = bs->kind == KE_INT ? bs : ke_var(b, let(env, "t", bs));
    if (sc.tile[d] > len[d]) tb.limit[d] = ke_add(b, start, ke_int(b, len[d]));
  }
  if (tl) {
    /* the box's points outside the value: 0 (never read); the slots store the others */
    kvar *f = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL);
    kstmt *body = ks_seq(b);
    kexpr *off[QIR_MAX_RANK];
    decompose(env, ke_var(b, f), tl->ext, tl->rank, off);
    for (int j = 0; j < tl->rank; j++) {
      if (!ss.shift[j]) continue;
      kvar *gv = kvar_new(b, k, "g", b->index_type, 0, KV_LOCAL);
      ks_add(b, body, ks_decl(b, gv, ke_add(b, tl->origin[j], off[j])));
      kexpr *out = ke_bin(b, QIR_FN_OR, ke_lt(b, ke_var(b, gv), ke_int(b, 0)),
                          ke_bin(b, QIR_FN_GE, ke_var(b, gv), ke_int(b, g->type->dims[j]), KT_BOOL), KT_BOOL);
      outside = outside ? ke_bin(b, QIR_FN_OR, outside, out, KT_BOOL) : out;
    }
    if (outside) {
      int64_t elems = 1;
      for (int j = 0; j < tl->rank; j++) elems *= tl->ext[j];
      ks_add(b, body, ks_if(b, outside, ks_assign(b, tl->smem, ke_var(b, f), ke_cast(b, ke_int(b, 0), tl->smem->type)), NULL));
      ks_add(b, seq, ks_for(b, f, ke_tid(b), ke_int(b, elems), k->threads, body));
    }
  }
  const qir_expr *body = env->body, *bias = env->bias;
  const qir_compute *comp = env->comp;
  env->comp = c;
  env->body = c->body;
  env->bias = qir_compute_bias_term(c, &env->body);
  if (!env->bias) env->body = c->body;
  lower_tile_block(env, &tb, seq);
  env->comp = comp;
  env->body = body;
  env->bias = bias;
  return true;
}

void lower_stages(lower_env *env, const cg_stages *st) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_type *ot = &k->args[0]->type;
  int n = ot->rank;
  int64_t nb[QIR_MAX_RANK], grid = 1, per_block = 1;
  for (int d = 0; d < n; d++) {
    nb[d] = ceil_div(ot->dims[d], st->block[d]);
    grid *= nb[d];
    per_block *= st->block[d];
  }
  k->grid = grid;
  if (n) kkernel_rows(k, 1, st->block[0], grid / nb[0]);
  kkernel_tile_grid(k, n, NULL, nb, st->block);
  k->threads = st->threads;
  kexpr *bc[QIR_MAX_RANK], *bstart[QIR_MAX_RANK];
  /* shared memory left by the staged tiles, shared by the reductions' staging */
  int64_t tile_bytes = 0, n_red_segs = 0;
  for (int s = 0; s < st->n; s++) {
    const cg_segment *g = &st->seg[s];
    n_red_segs += g->comp->n_red > 0;
    if (s == st->n - 1) continue;
    int64_t elems = 1;
    for (int j = 0; j < g->type->rank; j++) elems *= g->ext[j];
    tile_bytes += elems * (qir_dtype_size(g->dtype) > 4 ? 8 : 4);
  }
  int64_t budget = qir_stage_budget(tile_bytes, (int)n_red_segs);
  /* Pipelined staging (CUDA sm_80 and later, and C emulating it; HIP keeps
   * one slot): each reduction's slots take its share of what the target's
   * shared memory leaves beside the staged tiles. */
  tile_plan pipe = {0};
  simt_target_of(env, st->plan, &pipe);
  if (n_red_segs > 0 && pipe.simt_async) pipe.smem_cap = (pipe.smem_cap - tile_bytes) / n_red_segs;
  else pipe.simt_async = false;
  int tiled = 0;
  decompose(env, ke_bid(b), nb, n, bc);
  for (int d = 0; d < n; d++) {
    kexpr *s = ke_mul(b, bc[d], ke_int(b, st->block[d]));
    bstart[d] = s->kind == KE_INT ? s : ke_var(b, let(env, "b", s));
  }
  stage_tile *tiles = qir_alloc(b->m, sizeof *tiles * (size_t)st->n);
  env->tiles = tiles;
  env->tile_base = st->tile_base;
  env->n_tiles = 0;
  /* the markers' types (expr_type): the staged values' */
  qir_dtype *dts = qir_alloc(b->m, sizeof *dts * (size_t)st->n);
  for (int s = 0; s < st->n; s++) dts[s] = st->seg[s].dtype;
  env->marker_base = st->tile_base;
  env->n_markers = st->n - 1;
  env->marker_dtypes = dts;
  int64_t staged_elems = 0;
  for (int s = 0; s < st->n - 1; s++) {
    const cg_segment *g = &st->seg[s];
    stage_tile *tl = &tiles[s];
    tl->rank = g->type->rank;
    int64_t elems = 1;
    for (int j = 0; j < tl->rank; j++) {
      kexpr *o = ke_int(b, g->oconst[j]);
      for (int d = 0; d < n; d++)
        if (g->ocoef[j][d]) o = ke_add(b, o, ke_mul(b, ke_int(b, g->ocoef[j][d]), bstart[d]));
      tl->origin[j] = o->kind == KE_INT ? o : ke_var(b, let(env, "o", o));
      tl->ext[j] = g->ext[j];
      elems *= g->ext[j];
    }
    staged_elems += elems;
    tl->smem = kvar_new(b, k, "st", ktype_of_dtype(g->dtype), elems, KV_SHARED);
    /* the box's origin over every block: oconst + ocoef . block start */
    double omin[QIR_MAX_RANK], omax[QIR_MAX_RANK];
    for (int j = 0; j < tl->rank; j++) {
      omin[j] = omax[j] = (double)g->oconst[j];
      for (int d = 0; d < n; d++) {
        double far = (double)g->ocoef[j][d] * (double)((nb[d] - 1) * st->block[d]);
        if (far < 0) omin[j] += far;
        else omax[j] += far;
      }
    }
    /* the box's origin moves by multiples of ostep over the blocks */
    int64_t ostep[QIR_MAX_RANK];
    for (int j = 0; j < tl->rank; j++) {
      ostep[j] = g->oconst[j] < 0 ? -g->oconst[j] : g->oconst[j];
      for (int d = 0; d < n; d++) ostep[j] = gcd64(ostep[j], g->ocoef[j][d] * st->block[d]);
    }
    if (tiled_segment(env, st, g, tl, tl->origin, tl->ext, ostep, omin, omax, budget, &pipe, k->body)) {
      ks_add(b, k->body, ks_barrier(b));
      env->n_tiles = s + 1;
      tiled++;
      continue;
    }
    /* every element of the box: the value where it lies inside the tensor, else 0 (never read) */
    kvar *f = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL);
    kstmt *body = ks_seq(b);
    kexpr *off[QIR_MAX_RANK], *inb = NULL;
    decompose(env, ke_var(b, f), tl->ext, tl->rank, off);
    for (int j = 0; j < tl->rank; j++) {
      kvar *gv = kvar_new(b, k, "g", b->index_type, 0, KV_LOCAL);
      ks_add(b, body, ks_decl(b, gv, ke_add(b, tl->origin[j], off[j])));
      env->vars[j] = ke_var(b, gv);
      inb = ke_and(b, inb, ke_and(b, ke_bin(b, QIR_FN_GE, env->vars[j], ke_int(b, 0), KT_BOOL),
                                  ke_lt(b, env->vars[j], ke_int(b, g->type->dims[j]))));
    }
    kstmt *then = ks_seq(b);
    kexpr *v = segment_value(env, st, g, then);
    ks_add(b, then, ks_assign(b, tl->smem, ke_var(b, f), v));
    ks_add(b, body, ks_if(b, inb, then, ks_assign(b, tl->smem, ke_var(b, f), ke_cast(b, ke_int(b, 0), tl->smem->type))));
    ks_add(b, k->body, ks_for(b, f, ke_tid(b), ke_int(b, elems), k->threads, body));
    ks_add(b, k->body, ks_barrier(b));
    env->n_tiles = s + 1;
  }
  /* the block's outputs */
  const cg_segment *res = &st->seg[st->n - 1];
  double omin[QIR_MAX_RANK] = {0}, omax[QIR_MAX_RANK] = {0};
  for (int d = 0; d < n; d++) omin[d] = 0, omax[d] = (double)((nb[d] - 1) * st->block[d]);
  if (tiled_segment(env, st, res, NULL, bstart, st->block, st->block, omin, omax, budget, &pipe, k->body)) {
    tiled++;
  } else {
  kvar *f = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL);
  kstmt *body = ks_seq(b);
  kexpr *off[QIR_MAX_RANK], *guard = NULL, *idx[QIR_MAX_RANK];
  decompose(env, ke_var(b, f), st->block, n, off);
  for (int d = 0; d < n; d++) {
    kvar *gv = kvar_new(b, k, "i", b->index_type, 0, KV_LOCAL);
    ks_add(b, body, ks_decl(b, gv, ke_add(b, bstart[d], off[d])));
    idx[d] = env->vars[d] = ke_var(b, gv);
    if (ot->dims[d] % st->block[d]) guard = ke_and(b, guard, ke_lt(b, idx[d], ke_int(b, ot->dims[d])));
  }
  kstmt *then = ks_seq(b);
  kexpr *v = segment_value(env, st, &st->seg[st->n - 1], then);
  ks_add(b, then, ks_store(b, 0, out_index(env, idx), v));
  ks_add(b, body, guard ? ks_if(b, guard, then, NULL) : then);
  ks_add(b, k->body, ks_for(b, f, ke_tid(b), ke_int(b, per_block), k->threads, body));
  }
  char blk[128];
  int len = 0;
  for (int d = 0; d < n && len < (int)sizeof blk - 24; d++)
    len += snprintf(blk + len, sizeof blk - (size_t)len, "%s%" PRId64, d ? "," : "", st->block[d]);
  k->summary = qir_sprintf(b->m, "staged: block [%s], %d value%s staged in shared memory (%" PRId64 " elements per block, halo "
                           "included), grid %" PRId64 " threads %d, %d of %" PRId64 " reductions register-tiled", blk, st->n - 1,
                           st->n == 2 ? "" : "s", staged_elems, grid, k->threads, tiled, n_red_segs);
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
    /* a staged prologue is computed once per block, not at every step of
     * the reduction (-welder and -rammer plan for the same composer) */
    qir_op *fused = NULL;
    if (op->n_results == 1 && qir_group_stages_prologue(cg->m, op)) {
      composer staged = {.cg = cg, .kernel = op, .body = op->regions[0]};
      fused = compose_stages(&staged);
    }
    if (!fused) fused = compose(&cm);
    if (!fused && cm.anchor && op->n_results == 1) {
      /* more than one reduction, or one read away from the output's point: rows? */
      const char *why = cm.why;
      composer rows = {.cg = cg, .kernel = op, .body = op->regions[0]};
      fused = compose_rows(&rows);
      if (!fused) {
        /* reductions chained through shared memory (a pooling after a convolution)? */
        composer staged = {.cg = cg, .kernel = op, .body = op->regions[0]};
        fused = compose_stages(&staged);
        if (!fused && staged.n_tiles) why = staged.why;
      }
      cm.why = fused ? NULL : why;
    }
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
