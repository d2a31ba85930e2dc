/* attention.c: the shape of an `attention` op (attention.h). */
#include "attention.h"

#include <string.h>

static bool zero_splat(const qir_value *v) {
  const qir_op *c = v->def;
  if (!c || c->code != QIR_OP_CONST || !c->cst || !c->cst->data) return false;
  int64_t n = c->cst->splat ? 1 : qir_type_numel(&v->type);
  if ((size_t)(n * qir_dtype_size(v->type.dtype)) > c->cst->nbytes) return false;
  for (int64_t i = 0; i < n; i++)
    if (qir_load_elem(v->type.dtype, c->cst->data, i) != 0) return false;
  return true;
}

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
  s->has_bias = !zero_splat(op->operands[3]);
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

bool qir_attention_flash_planned(const qir_op *op) {
  const qir_attr *t = op->code == QIR_OP_ATTENTION ? qir_op_attr(op, "tile") : NULL;
  return t && t->val.kind == QIR_ATTR_DICT && qir_attr_dict_get(&t->val, "flash");
}

int64_t qir_attention_flash_splits(const qir_op *op) {
  if (!qir_attention_flash_planned(op)) return 1;
  const qir_attr_val *v = qir_attr_dict_get(&qir_op_attr(op, "tile")->val, "splits");
  return v && v->kind == QIR_ATTR_INT && v->i > 1 ? v->i : 1;
}
