/* canonicalize.c: -canonicalize.
 *   1. no-op removal: identity, cast to the same type, reshape/expand to the
 *      same type, transpose by the identity, full slices, zero pads,
 *      single-operand concat; reshape of reshape and transpose of transpose
 *      read the original operand (composed permutation); a transpose that
 *      moves only dimensions of extent 1 becomes a reshape;
 *   2. constant folding: a pure op whose operands are all constants becomes a
 *      constant, evaluated by the reference semantics (qir_eval_op), when the
 *      result is small enough to live inline (-fold-limit elements);
 *   3. attention recognition (attention_match.c): the chain exporters write
 *      becomes one `attention` op;
 *   4. dead-code elimination: pure ops whose results have no uses.
 * Nested regions are canonicalized too. */
#include "qopt.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  qopt_ctx *ctx;
  qir_module *m;
  int64_t fold_limit;
  qir_diag quiet;               /* eval failures only mean "do not fold" */
  int changes;
} canon;

/* ---------------------------------------------------------------- no-ops */

static bool is_identity_perm(const int64_t *p, int n) {
  for (int i = 0; i < n; i++)
    if (p[i] != i) return false;
  return true;
}

/* Replace op's result by v when their types agree. */
static bool forward(canon *c, qir_op *op, qir_value *v) {
  if (!qir_type_equal(&op->results[0]->type, &v->type)) return false;
  qir_value_replace_uses(c->m, op->results[0], v);
  qir_op_unlink(op);
  c->changes++;
  return true;
}

static bool all_zero(const int64_t *v, int n) {
  for (int i = 0; i < n; i++)
    if (v[i]) return false;
  return true;
}

static void simplify(canon *c, qir_op *op) {
  if (op->n_results != 1 || op->n_operands < 1) return;
  qir_value *x = op->operands[0];
  const qir_type *xt = &x->type;
  int64_t a[2 * QIR_MAX_RANK], b[QIR_MAX_RANK], s[QIR_MAX_RANK];
  switch (op->code) {
  case QIR_OP_IDENTITY: case QIR_OP_CAST: case QIR_OP_RESHAPE: case QIR_OP_EXPAND: case QIR_OP_TILE:
    if (forward(c, op, x)) return;
    if (op->code == QIR_OP_RESHAPE && x->def && x->def->code == QIR_OP_RESHAPE) {
      qir_op_set_operand(c->m, op, 0, x->def->operands[0]);
      c->changes++;
      if (forward(c, op, op->operands[0])) return;
    }
    return;
  case QIR_OP_CONCAT:
    if (op->n_operands == 1) forward(c, op, x);
    return;
  case QIR_OP_TRANSPOSE: {
    int n = qir_op_attr_ints(op, "perm", a, QIR_MAX_RANK);
    if (n != xt->rank) return;
    if (x->def && x->def->code == QIR_OP_TRANSPOSE && qir_op_attr_ints(x->def, "perm", b, QIR_MAX_RANK) == n) {
      /* out[i] = inner[a[i]] = x0[b[a[i]]] */
      int64_t q[QIR_MAX_RANK];
      for (int i = 0; i < n; i++) q[i] = b[a[i]];
      qir_op_set_operand(c->m, op, 0, x->def->operands[0]);
      qir_op_set_attr(c->m, op, "perm", qir_attr_ints(c->m, n, q), false);
      memcpy(a, q, sizeof q);
      c->changes++;
    }
    if (is_identity_perm(a, n)) {
      forward(c, op, op->operands[0]);
      return;
    }
    /* moving only dimensions of extent 1 moves no data: a reshape (a view,
     * no kernel), e.g. a decode step's [1, 1, H, D] query to [1, H, 1, D] */
    const qir_type *yt = &op->results[0]->type;
    int last = -1;
    for (int i = 0; i < n; i++) {
      if (yt->dims[i] == 1) continue;
      if (a[i] < last) return;
      last = (int)a[i];
    }
    qir_op *r = qir_op_new(c->m, QIR_OP_RESHAPE, 1, &op->operands[0], 1, yt, op->loc);
    r->results[0]->name = op->results[0]->name;
    qir_op_insert_before(op, r);
    qir_value_replace_uses(c->m, op->results[0], r->results[0]);
    qir_op_unlink(op);
    c->changes++;
    return;
  }
  case QIR_OP_SLICE: {
    int n = qir_op_attr_ints(op, "starts", a, QIR_MAX_RANK);
    if (n != xt->rank || qir_op_attr_ints(op, "ends", b, QIR_MAX_RANK) != n) return;
    int ns = qir_op_attr_ints(op, "steps", s, QIR_MAX_RANK);
    for (int i = 0; i < n; i++)
      if (a[i] != 0 || b[i] != xt->dims[i] || (ns == n && s[i] != 1)) return;
    forward(c, op, x);
    return;
  }
  case QIR_OP_PAD: {
    int n = qir_op_attr_ints(op, "pads", a, 2 * QIR_MAX_RANK);
    if (n == 2 * xt->rank && all_zero(a, n)) forward(c, op, x);
    return;
  }
  default:
    return;
  }
}

/* ---------------------------------------------------------------- folding */

static bool defined_by_const(const qir_value *v) { return v && v->def && v->def->code == QIR_OP_CONST && v->def->cst; }

static void fold(canon *c, qir_op *op) {
  const qir_opinfo *info = qir_opinfo_get(op->code);
  if (!info || !(info->flags & QIR_OPF_PURE) || op->code == QIR_OP_CONST || op->n_regions || op->n_results < 1) return;
  int64_t total = 0;
  for (int i = 0; i < op->n_results; i++) total += qir_type_numel(&op->results[i]->type);
  if (total > c->fold_limit) return;
  for (int i = 0; i < op->n_operands; i++)
    if (!defined_by_const(op->operands[i])) return;
  qir_tensor *in = calloc((size_t)op->n_operands + 1, sizeof *in);
  qir_tensor *out = calloc((size_t)op->n_results, sizeof *out);
  bool ok = in && out;
  for (int i = 0; ok && i < op->n_operands; i++) {
    qir_value *v = op->operands[i];
    const void *data = qir_const_data(c->m, v->def, &c->quiet);
    size_t bytes = (size_t)qir_type_numel(&v->type) * (size_t)qir_dtype_size(v->type.dtype);
    in[i].type = v->type;
    in[i].data = malloc(bytes ? bytes : 1);
    ok = data && in[i].data;
    if (ok && bytes) memcpy(in[i].data, data, bytes);
  }
  ok = ok && qir_eval_op(c->m, op, in, out, &c->quiet);
  if (ok) {
    for (int i = 0; i < op->n_results; i++) {
      qir_value *r = op->results[i];
      size_t bytes = (size_t)qir_type_numel(&r->type) * (size_t)qir_dtype_size(r->type.dtype);
      qir_op *k = qir_const_new_data(c->m, r->type, out[i].data, bytes, op->loc);
      qir_op_insert_before(op, k);
      if (r->name) k->results[0]->name = r->name;
      qir_value_replace_uses(c->m, r, k->results[0]);
    }
    qir_op_unlink(op);
    c->changes++;
    for (int i = 0; i < op->n_results; i++) qir_tensor_free(&out[i]);
  }
  for (int i = 0; in && i < op->n_operands; i++) free(in[i].data);
  free(in);
  free(out);
}

/* ---------------------------------------------------------------- DCE */

static bool is_dead(const qir_op *op) {
  const qir_opinfo *info = qir_opinfo_get(op->code);
  if (!info || !(info->flags & QIR_OPF_PURE) || op->n_regions) return false;
  for (int i = 0; i < op->n_results; i++)
    if (op->results[i]->uses) return false;
  return true;
}

/* Backwards, so removing a user can free its operands' definitions in the same sweep. */
static void dce_region(canon *c, qir_region *r) {
  for (qir_op *op = r->last, *prev; op; op = prev) {
    prev = op->prev;
    for (int i = 0; i < op->n_regions; i++) dce_region(c, op->regions[i]);
    if (is_dead(op)) {
      qir_op_unlink(op);
      c->changes++;
    }
  }
}

/* ---------------------------------------------------------------- driver */

static void canon_region(canon *c, qir_region *r) {
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    for (int i = 0; i < op->n_regions; i++) canon_region(c, op->regions[i]);
    simplify(c, op);
    if (op->parent != r) continue; /* removed */
    fold(c, op);
  }
}

bool qopt_canonicalize(qopt_ctx *ctx, qir_module *m) {
  canon c = {ctx, m, qopt_option_int(ctx, "fold-limit"), {0}, 0};
  char *sink_buf = NULL;
  size_t sink_len = 0;
  FILE *sink = open_memstream(&sink_buf, &sink_len);
  if (!sink) {
    qir_error(ctx->diag, (qir_loc){0}, "-canonicalize: cannot open a message sink");
    return false;
  }
  qir_diag_init(&c.quiet, sink, ctx->diag->file, NULL, 0);
  c.quiet.max_errors = 1000000;
  canon_region(&c, m->body);
  /* after folding: the importer's masks are constants by now */
  bool ok = qopt_match_attention(ctx, m, "canonicalize");
  dce_region(&c, m->body);
  fclose(sink);
  free(sink_buf);
  return ok;
}
