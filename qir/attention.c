/* attention.c: the shape of an `attention` op (attention.h). */
#include "attention.h"

#include <string.h>

bool qir_attention_shape_of(const qir_op *op, qir_attention_shape *s) {
  if (op->code != QIR_OP_ATTENTION || op->n_operands != 4 || op->n_results != 1) return false;
  const qir_type *q = &op->operands[0]->type, *k = &op->operands[1]->type, *v = &op->operands[2]->type;
  const qir_type *y = &op->results[0]->type;
  if (q->rank != 4 || k->rank != 4 || v->rank != 4 || y->rank != 4) return false;
  const qir_attr *layout = qir_op_attr(op, "layout");
  bool bshd = layout && (layout->val.kind == QIR_ATTR_WORD || layout->val.kind == QIR_ATTR_STRING) &&
              layout->val.s && !strcmp(layout->val.s, "bshd");
  int h = bshd ? 2 : 1, p = bshd ? 1 : 2;   /* the heads' and the positions' dimensions */
  *s = (qir_attention_shape){.B = q->dims[0], .Hq = q->dims[h], .Hkv = k->dims[h], .S = q->dims[p], .T = k->dims[p],
                             .D = q->dims[3], .DV = v->dims[3], .bshd = bshd, .dtype = q->dtype};
  if (s->Hkv <= 0 || s->Hq % s->Hkv || k->dims[3] != s->D || v->dims[h] != s->Hkv || v->dims[p] != s->T) return false;
  s->G = s->Hq / s->Hkv;
  s->causal = qir_op_attr_int(op, "causal", 0) != 0;
  s->scale = qir_op_attr_float(op, "scale", 1);
  s->softcap = qir_op_attr_float(op, "softcap", 0);
  s->has_bias = !qir_value_is_zero_const(op->operands[3]);
  return true;
}

int64_t qir_attention_tiles_needed(const qir_attention_shape *s, int64_t r0, int64_t rows, int64_t bkv) {
  int64_t all = (s->T + bkv - 1) / bkv;
  if (!s->causal || rows <= 0) return all;
  int64_t last = r0 + rows - 1;   /* the largest position among the rows */
  int64_t imax = last / s->S != r0 / s->S ? s->S - 1 : last % s->S;
  int64_t keys = imax + (s->T - s->S) + 1;   /* keys 0 .. imax + T - S are visible */
  if (keys <= 0) return 0;
  int64_t need = (keys + bkv - 1) / bkv;
  return need < all ? need : all;
}

int64_t qir_attention_tiles_visited(const qir_attention_shape *s, int64_t bq, int64_t bkv, int64_t *most) {
  int64_t rows = s->G * s->S, sum = 0;
  *most = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += bq) {
    int64_t t = qir_attention_tiles_needed(s, r0, rows - r0 < bq ? rows - r0 : bq, bkv);
    sum += t;
    if (t > *most) *most = t;
  }
  return sum;
}

bool qir_attention_flash_planned(const qir_op *op) {
  const qir_attr *t = op->code == QIR_OP_ATTENTION ? qir_op_attr(op, "tile") : NULL;
  return t && t->val.kind == QIR_ATTR_DICT && qir_attr_dict_get(&t->val, "flash");
}

int64_t qir_attention_flash_splits(const qir_op *op) {
  if (!qir_attention_flash_planned(op)) return 1;
  const qir_attr_val *v = qir_attr_dict_get(&qir_op_attr(op, "tile")->val, "splits");
  return v && v->kind == QIR_ATTR_INT && v->i > 1 ? v->i : 1;
}

static const qir_use *only_use(const qir_value *v) { return v->uses && !v->uses->next ? v->uses : NULL; }

bool qir_attention_operand_view(const qir_op *att, int operand, qir_attention_view *v) {
  qir_attention_shape s;
  if (operand < 0 || operand > 2 || !qir_attention_flash_planned(att) || !qir_attention_shape_of(att, &s) || !s.bshd) return false;
  const qir_value *x = att->operands[operand];
  const qir_type *at = &x->type;
  if (qir_value_use_count(x) != 1) return false;
  while (x->def && (x->def->code == QIR_OP_RESHAPE || x->def->code == QIR_OP_IDENTITY) && x->def->n_operands == 1 &&
         x->def->operands[0]->type.dtype == x->type.dtype && only_use(x->def->operands[0]))
    x = x->def->operands[0];
  const qir_op *sl = x->def;
  if (!sl || sl->code != QIR_OP_SLICE || sl->n_operands != 1 || !only_use(x)) return false;
  const qir_value *src = sl->operands[0];
  const qir_type *st = &src->type, *rt = &x->type;
  int r = st->rank;
  int64_t starts[QIR_MAX_RANK], ends[QIR_MAX_RANK], steps[QIR_MAX_RANK];
  if (r < 1 || rt->rank != r || src->type.dtype != at->dtype || qir_op_attr_ints(sl, "starts", starts, QIR_MAX_RANK) != r ||
      qir_op_attr_ints(sl, "ends", ends, QIR_MAX_RANK) != r)
    return false;
  int n_steps = qir_op_attr_ints(sl, "steps", steps, QIR_MAX_RANK);
  for (int i = 0; i < r; i++) {
    if (n_steps == r && steps[i] != 1) return false;
    if (i < r - 1 && (starts[i] != 0 || rt->dims[i] != st->dims[i])) return false;
  }
  /* the operand's rows [b, s] of H * D values are the slice's rows */
  int64_t width = at->dims[2] * at->dims[3], rows = at->dims[0] * at->dims[1];
  if (rt->dims[r - 1] != width || qir_type_numel(rt) != rows * width || starts[r - 1] < 0 ||
      starts[r - 1] + width > st->dims[r - 1])
    return false;
  *v = (qir_attention_view){.src = (qir_value *)src, .slice = sl, .offset = starts[r - 1], .row_stride = st->dims[r - 1]};
  return true;
}

bool qir_attention_folds_slice(const qir_op *op) {
  if (op->code != QIR_OP_SLICE || op->n_results != 1) return false;
  const qir_value *v = op->results[0];
  const qir_use *u = only_use(v);
  while (u && (u->user->code == QIR_OP_RESHAPE || u->user->code == QIR_OP_IDENTITY) && u->user->n_results == 1)
    u = only_use(u->user->results[0]);
  if (!u || u->user->code != QIR_OP_ATTENTION) return false;
  for (int i = 0; i < 3; i++) {
    qir_attention_view view;
    if (u->user->operands[i] && qir_attention_operand_view(u->user, i, &view) && view.slice == op) return true;
  }
  return false;
}

bool qir_attention_operand_cache(const qir_op *att, int operand, qir_attention_cache *c) {
  qir_attention_shape s;
  if (operand < 1 || operand > 2 || !qir_attention_flash_planned(att) || !qir_attention_shape_of(att, &s)) return false;
  qir_value *v = att->operands[operand];
  const qir_op *cat = v->def;
  if (!cat || cat->code != QIR_OP_CONCAT || cat->n_operands != 2 || cat->n_results != 1) return false;
  int axis = s.bshd ? 1 : 2;
  int64_t a = qir_op_attr_int(cat, "axis", -100);
  if (a < 0) a += 4;
  if (a != axis) return false;
  const qir_type *pt = &cat->operands[0]->type, *nt = &cat->operands[1]->type;
  if (pt->rank != 4 || nt->rank != 4 || pt->dtype != v->type.dtype || nt->dtype != v->type.dtype) return false;
  for (int d = 0; d < 4; d++)
    if (d != axis && (pt->dims[d] != v->type.dims[d] || nt->dims[d] != v->type.dims[d])) return false;
  for (const qir_use *u = v->uses; u; u = u->next)   /* else only outputs: nothing reads it before the kernel wrote it */
    if (!(u->user == att && u->operand_index == operand) && u->user->code != QIR_OP_OUTPUT) return false;
  /* each key tile walked by exactly one block: one row tile per kv head, every tile visited */
  const qir_attr_val *fl = qir_attr_dict_get(&qir_op_attr(att, "tile")->val, "flash");
  if (!fl || fl->kind != QIR_ATTR_LIST || fl->n != 2 || fl->items[0].kind != QIR_ATTR_INT || fl->items[1].kind != QIR_ATTR_INT)
    return false;
  int64_t bq = fl->items[0].i, bkv = fl->items[1].i;
  if (bq < s.G * s.S || bkv < 1 || qir_attention_tiles_needed(&s, 0, s.G * s.S, bkv) != (s.T + bkv - 1) / bkv) return false;
  *c = (qir_attention_cache){.past = cat->operands[0], .now = cat->operands[1], .present = v, .concat = cat, .past_len = pt->dims[axis]};
  return true;
}

bool qir_attention_reads_cache(const qir_op *att) {
  qir_attention_cache c;
  return att->code == QIR_OP_ATTENTION && (qir_attention_operand_cache(att, 1, &c) || qir_attention_operand_cache(att, 2, &c));
}

bool qir_attention_folds_concat(const qir_op *op) {
  if (op->code != QIR_OP_CONCAT || op->n_results != 1) return false;
  for (const qir_use *u = op->results[0]->uses; u; u = u->next) {
    qir_attention_cache c;
    if (u->user->code == QIR_OP_ATTENTION && qir_attention_operand_cache(u->user, u->operand_index, &c) && c.concat == op)
      return true;
  }
  return false;
}
