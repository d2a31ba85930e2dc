/* roller_layout.c: operands in the layout Hopper's tensor copies want.
 *
 * wgmma reads A and B from shared memory K-major (K contiguous) or MN-major,
 * and a tensor map copies a tile only where the operand's innermost dimension
 * is one of them.  An NCHW convolution's image has the width innermost (its
 * rows of 28, 14 or 7 halves are strides no tensor map takes) and its OIHW
 * weights the window's kw: both then go by the producer's loads, which ran at
 * 3 bytes a clock per SM on the H200.  cuDNN transposes such a convolution's
 * image to NHWC first (nchwToNhwcKernel, 2026-11-27).
 *
 * roller_relaid_form builds the same contraction over operands with K's
 * dimension moved innermost (the others keep their order: NCHW -> NHWC, OIHW
 * -> OHWI = KRSC): a constant is permuted here, any other value goes through
 * a `transpose` op (one per value and order, shared by later readers); either
 * is named for its order (%w.t0231: w's dimensions 0, 2, 3, 1).  A read at a
 * stride without a window (a 1x1 convolution of stride 2) goes through a
 * compute that gathers only what is read (%x.strided).  The caller plans it and keeps it where the model rates it, the transposes
 * included, faster than the op as it was; the decision is the IR itself (the
 * transpose ops, the permuted constants, the compute reading them). */
#include <string.h>

#include "roller.h"

/* The dimension of access `acc` indexed by variable vk alone, if it is not
 * already innermost (trailing dimensions of extent 1 aside); else -1. */
static int k_dim_to_move(const qir_expr *acc, const qir_type *t, int vk, int nv) {
  int kd = -1, last = acc->n_args - 1;
  while (last > 0 && t->dims[last] == 1) last--;
  for (int j = 0; j < acc->n_args; j++) {
    int64_t coef[64], k0;
    if (!qir_expr_affine(acc->args[j], nv, coef, &k0)) return -1;
    bool alone = k0 == 0 && coef[vk] == 1;
    for (int v = 0; v < nv && alone; v++) alone = v == vk || coef[v] == 0;
    if (alone) kd = j;
  }
  return kd >= 0 && kd != last ? kd : -1;
}

/* perm moving dimension kd of a rank-r tensor last. */
static void perm_moving_last(int r, int kd, int64_t *perm) {
  int n = 0;
  for (int j = 0; j < r; j++)
    if (j != kd) perm[n++] = j;
  perm[n] = kd;
}

static qir_type permuted_type(const qir_type *t, const int64_t *perm) {
  qir_type p = *t;
  for (int j = 0; j < t->rank; j++) p.dims[j] = t->dims[perm[j]];
  return p;
}

/* A constant's values in the permuted order. */
static qir_op *permuted_const(qir_module *m, qir_op *cst, const int64_t *perm, qir_diag *d) {
  const qir_type *t = &cst->results[0]->type;
  if (cst->cst->splat) {   /* one value everywhere: the same value */
    qir_type pt = permuted_type(t, perm);
    return qir_const_new_splat(m, pt, qir_const_elem(m, cst, 0, d), cst->loc);
  }
  const unsigned char *src = qir_const_data(m, cst, d);
  if (!src) return NULL;
  size_t es = (size_t)qir_dtype_size(t->dtype);
  int64_t n = qir_type_numel(t), stride[QIR_MAX_RANK];
  qir_type pt = permuted_type(t, perm);
  unsigned char *dst = qir_alloc(m, (size_t)n * es + 1);
  for (int j = t->rank - 1, s = 1; j >= 0; j--) stride[j] = s, s *= (int)t->dims[j];
  for (int64_t i = 0; i < n; i++) {   /* i in the permuted order: its source element */
    int64_t rest = i, at = 0;
    for (int j = t->rank - 1; j >= 0; j--) {
      at += rest % pt.dims[j] * stride[perm[j]];
      rest /= pt.dims[j];
    }
    memcpy(dst + (size_t)i * es, src + (size_t)at * es, es);
  }
  qir_op *k = qir_const_new_data(m, pt, dst, (size_t)n * es, cst->loc);
  k->cst->spill = cst->cst->offset >= 0 || cst->cst->spill;   /* weights stay in the sidecar */
  return k;
}

/* An existing transpose of v by perm before `before` in its region. */
static qir_op *shared_transpose(const qir_value *v, const int64_t *perm, const qir_op *before) {
  for (const qir_use *u = v->uses; u; u = u->next) {
    qir_op *x = u->user;
    if (x->code != QIR_OP_TRANSPOSE || x->parent != before->parent) continue;
    int64_t p[QIR_MAX_RANK];
    if (qir_op_attr_ints(x, "perm", p, QIR_MAX_RANK) != v->type.rank || memcmp(p, perm, sizeof *p * (size_t)v->type.rank)) continue;
    for (const qir_op *y = x; y; y = y->next)
      if (y == before) return x;
  }
  return NULL;
}

static qir_expr *copy_permuting(qir_module *m, const qir_expr *e, int operand, const int64_t *perm) {
  qir_expr *c = qir_alloc(m, sizeof *c);
  *c = *e;
  c->args = e->n_args ? qir_alloc(m, sizeof *c->args * (size_t)e->n_args) : NULL;
  for (int i = 0; i < e->n_args; i++) {
    int src = e->kind == QIR_EX_ACCESS && e->operand == operand ? (int)perm[i] : i;
    c->args[i] = copy_permuting(m, e->args[src], operand, perm);
  }
  return c;
}

/* Reads of `operand` in e. */
static int reads_of(const qir_expr *e, int operand) {
  int n = e->kind == QIR_EX_ACCESS && e->operand == operand;
  for (int i = 0; i < e->n_args; i++) n += reads_of(e->args[i], operand);
  return n;
}

/* Dimensions of access `acc` read at a stride: c v + k0 for an output
 * variable v alone, c > 1, within the tensor (a 1x1 convolution's stride).
 * A relaid copy need only hold what is read there: ext(v) of them, at v.
 * var[j] = v, or -1 where dimension j is read otherwise. */
static bool strided_dims(const qir_compute *c, const qir_expr *acc, const qir_type *t, int *var, int64_t *coef_out, int64_t *k_out) {
  int nv = c->n_axes + c->n_red;
  bool any = false;
  for (int j = 0; j < acc->n_args; j++) {
    int64_t coef[64], k0;
    var[j] = -1;
    if (nv > 64 || !qir_expr_affine(acc->args[j], nv, coef, &k0)) return false;
    int v = -1, n = 0;
    for (int x = 0; x < nv; x++)
      if (coef[x] && c->axis_extents[x] > 1) v = x, n++;
    if (n != 1 || v >= c->n_axes || coef[v] < 2 || k0 < 0 || coef[v] * (c->axis_extents[v] - 1) + k0 >= t->dims[j]) continue;
    var[j] = v, coef_out[j] = coef[v], k_out[j] = k0;
    any = true;
  }
  return any;
}

/* The strided gather of x (strided_dims) in the order perm: a compute op
 * g[i0, ...] = x[...], dimension j at its stride. */
static qir_op *strided_copy(qir_module *m, qir_value *x, const qir_compute *c, const int64_t *perm, const int *var, const int64_t *coef,
                            const int64_t *k0, qir_loc loc) {
  int r = x->type.rank;
  qir_type gt = x->type;
  qir_compute *g = qir_compute_new(m, r, 0);
  int pos[QIR_MAX_RANK];
  for (int i = 0; i < r; i++) {
    int j = (int)perm[i];
    pos[j] = i;
    gt.dims[i] = var[j] >= 0 ? c->axis_extents[var[j]] : x->type.dims[j];
    g->axis_names[i] = qir_sprintf(m, "i%d", i);
    g->axis_extents[i] = gt.dims[i];
  }
  qir_expr *idx[QIR_MAX_RANK];
  for (int j = 0; j < r; j++) {
    qir_expr *v = qir_expr_var(m, pos[j]);
    qir_expr *at = var[j] < 0 ? v : qir_expr_binary(m, QIR_FN_MUL, v, qir_expr_int(m, coef[j]));
    idx[j] = var[j] >= 0 && k0[j] ? qir_expr_binary(m, QIR_FN_ADD, at, qir_expr_int(m, k0[j])) : at;
  }
  g->body = qir_expr_access(m, 0, r, idx);
  qir_op *k = qir_op_new(m, QIR_OP_COMPUTE, 1, &x, 1, &gt, loc);
  k->comp = g;
  return k;
}

/* The read `acc` of the gathered copy: its dimensions in the order perm, a
 * strided one indexed by its variable alone. */
static qir_expr *gathered_read(qir_module *m, const qir_expr *acc, const int64_t *perm, const int *var) {
  qir_expr *idx[QIR_MAX_RANK];
  for (int i = 0; i < acc->n_args; i++) {
    int j = (int)perm[i];
    idx[i] = var[j] >= 0 ? qir_expr_var(m, var[j]) : copy_permuting(m, acc->args[j], -1, perm);
  }
  return qir_expr_access(m, acc->operand, acc->n_args, idx);
}

static qir_expr *replace_read(qir_module *m, const qir_expr *e, const qir_expr *from, qir_expr *to) {
  if (e == from) return to;
  qir_expr *c = qir_alloc(m, sizeof *c);
  *c = *e;
  c->args = e->n_args ? qir_alloc(m, sizeof *c->args * (size_t)e->n_args) : NULL;
  for (int i = 0; i < e->n_args; i++) c->args[i] = replace_read(m, e->args[i], from, to);
  return c;
}

qir_op *roller_relaid_form(qir_module *m, qir_op *op, const qir_op *form, int vk, roller_relayout *out, qir_diag *d) {
  const qir_compute *c = form->comp;
  qir_contraction ct;
  memset(out, 0, sizeof *out);
  if (!c || !qir_compute_contraction(c, &ct) || !op->parent) return NULL;
  int nv = c->n_axes + c->n_red;
  for (int i = 0; i < form->n_operands; i++)
    for (int j = 0; j < form->operands[i]->type.rank; j++)
      if (form->operands[i]->type.sym[j]) return NULL;   /* a tensor map is encoded once: static shapes */
  qir_value **operands = qir_alloc(m, sizeof *operands * (size_t)(form->n_operands + 1));
  memcpy(operands, form->operands, sizeof *operands * (size_t)form->n_operands);
  qir_expr *body = c->body;
  const qir_expr *reads[2] = {ct.a, ct.b};
  for (int s = 0; s < 2; s++) {
    int o = reads[s]->operand;
    qir_value *v = form->operands[o];
    int kd = k_dim_to_move(reads[s], &v->type, vk, nv);
    if (kd < 0 || v->type.rank > QIR_TMA_MAX_RANK) continue;
    int64_t perm[QIR_MAX_RANK];
    perm_moving_last(v->type.rank, kd, perm);
    qir_op *made = NULL;
    int var[QIR_MAX_RANK];
    int64_t coef[QIR_MAX_RANK], k0[QIR_MAX_RANK];
    bool gather = !(v->def && v->def->code == QIR_OP_CONST) && reads_of(c->body, o) == 1 &&
                  strided_dims(c, reads[s], &v->type, var, coef, k0);
    if (gather) {   /* a 1x1 convolution's stride: the copy holds only what is read */
      made = strided_copy(m, v, c, perm, var, coef, k0, op->loc);
      if (v->name) made->results[0]->name = qir_sprintf(m, "%s.strided", v->name);
      out->made[out->n_made++] = made;
      operands[o] = made->results[0];
      body = replace_read(m, body, reads[s], gathered_read(m, reads[s], perm, var));
      continue;
    }
    if (v->def && v->def->code == QIR_OP_CONST && v->def->cst) {
      made = permuted_const(m, v->def, perm, d);
      if (!made) continue;
    } else if ((made = shared_transpose(v, perm, op))) {
      out->shared[out->n_made] = true;
    } else {
      qir_type pt = permuted_type(&v->type, perm);
      made = qir_op_new(m, QIR_OP_TRANSPOSE, 1, &v, 1, &pt, op->loc);
      qir_op_set_attr(m, made, "perm", qir_attr_ints(m, v->type.rank, perm), false);
    }
    if (!out->shared[out->n_made] && v->name) {   /* %x.t0231: x with its dimensions in that order */
      char order[QIR_MAX_RANK + 1];
      for (int j = 0; j < v->type.rank; j++) order[j] = (char)('0' + perm[j]);
      order[v->type.rank] = 0;
      made->results[0]->name = qir_sprintf(m, "%s.t%s", v->name, order);
    }
    out->made[out->n_made++] = made;
    operands[o] = made->results[0];
    body = copy_permuting(m, body, o, perm);   /* every read of the operand, alike */
  }
  if (!out->n_made) return NULL;
  qir_op *k = qir_op_new(m, QIR_OP_COMPUTE, form->n_operands, operands, 1, &op->results[0]->type, op->loc);
  qir_compute *kc = qir_compute_new(m, c->n_axes, c->n_red);
  memcpy(kc->axis_names, c->axis_names, sizeof *kc->axis_names * (size_t)nv);
  memcpy(kc->axis_extents, c->axis_extents, sizeof *kc->axis_extents * (size_t)nv);
  memcpy(kc->axis_dims, c->axis_dims, sizeof *kc->axis_dims * (size_t)nv);
  kc->reduce = c->reduce;
  kc->body = body;
  k->comp = kc;
  k->results[0]->name = op->results[0]->name;
  return k;
}

void roller_relayout_commit(qir_module *m, qir_op *op, qir_op *relaid, const roller_relayout *r) {
  for (int i = 0; i < r->n_made; i++)
    if (!r->shared[i]) qir_op_insert_before(op, r->made[i]);
  qir_op_insert_before(op, relaid);
  qir_value_replace_uses(m, op->results[0], relaid->results[0]);
  qir_value *was[16];
  int n_was = 0;
  for (int i = 0; i < op->n_operands && n_was < 16; i++) was[n_was++] = op->operands[i];
  qir_op_unlink(op);
  /* a constant only the op read (its weights, now permuted) */
  for (int i = 0; i < n_was; i++)
    if (was[i]->def && was[i]->def->code == QIR_OP_CONST && !was[i]->uses && was[i]->def->parent) qir_op_unlink(was[i]->def);
}

void roller_relayout_discard(qir_op *relaid, const roller_relayout *r) {
  qir_op_unlink(relaid);   /* drops the uses it made */
  for (int i = 0; i < r->n_made; i++)
    if (!r->shared[i]) qir_op_unlink(r->made[i]);
}
