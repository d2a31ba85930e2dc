/* attention_match.c: the attention chain exporters write, as one `attention`
 * op (run by -canonicalize, and first by -welder).
 *
 *   y = matmul(softmax(L, axis = last), V)   (or cast(softmax(cast(L) to f32)))
 *   L = S, S·c or S/c (a scalar constant), then softcap·tanh(L/softcap), then any of
 *       + M                   an additive mask (either operand order)
 *       where(m, NEG, S')     NEG a scalar -inf or constant <= -1e4 (HF: the
 *       where(keep, S', NEG)  type's min)
 *   S = matmul(Q, Kᵀ)        Q [B,H,S,D], Kᵀ [B,Hk,D,T], V [B,Hk,T,Dv], Hk = H or 1
 *
 * Q, Kᵀ and V are followed back through transposes and scalar multiplies (a
 * scale on Q or K joins the op's scale).  When Q and V are transposes by
 * [0,2,1,3] and Kᵀ one by [0,2,3,1] of [B,S,H,D] tensors (BERT's
 * transpose(reshape(linear))), the op reads those with layout = bshd and a
 * transpose [0,2,1,3] of y, y's only use, folds away; otherwise the operands
 * are (transposed to) bhsd.  The importer's grouped-query form (5-D matmuls
 * over [B,Hkv,G,S,D] and [B,Hkv,1,D,T] between reshapes) is recognised too,
 * and K and V repeated per query head (HF's repeat_kv: reshape, expand,
 * reshape) are read as the kv heads they repeat.
 *
 * A constant mask (bool or additive, any shape broadcast to [B,H,S,T]) whose
 * masked set is exactly {j > i + (T - S)} becomes causal = 1; any other mask
 * becomes the bias operand (the additive mask itself; where(m, NEG, 0) as a
 * constant for a constant m, else as a where op).  Only when every type
 * matches exactly and the scores, logits and probabilities have no other use.
 * The op computes in double what the chain computes in its own type: the same
 * values up to the chain's roundings. */
#include "opsutil.h"
#include "qopt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a mask value at or below this (or -inf) hides its key */
#define MASKED_AT (-1e4)
#define MAX_MASKS 4
#define MAX_WALK 8

typedef struct {
  qir_module *m;
  qir_diag quiet;
  qopt_attention_stats *st;
} matcher;

typedef enum { MASK_ADD, MASK_WHERE } mask_kind;

typedef struct {
  mask_kind kind;
  qir_value *mask;      /* ADD: the additive mask; WHERE: the condition */
  double neg;           /* WHERE: the value a hidden score takes */
  bool hide_when_true;  /* WHERE: where(m, NEG, s) hides where m */
  qir_op *op;           /* the add / where */
} mask_step;

/* value = scale · transpose(src, perm) (perm of src's rank) */
typedef struct {
  qir_value *src;
  int64_t perm[QIR_MAX_RANK];
  double scale;
} path;

typedef struct {
  qir_op *pv_mm, *softmax, *qk_mm;        /* y = matmul(P, V), P = softmax, S = matmul */
  qir_op *scale_ops[MAX_WALK];
  int n_scale_ops;
  double scale;                           /* on the scores */
  double softcap;                         /* 0: none */
  qir_op *cap_ops[3];                     /* its mul, tanh and div */
  qir_op *casts[2];                       /* a wider softmax's casts back and to, or NULL */
  mask_step masks[MAX_MASKS];
  int n_masks;
  qir_value *qx, *ktx, *vx;               /* bhsd-shaped q, kᵀ, v as the chain reads them */
  qir_op *gqa_ops[8];                     /* the grouped-query form's reshapes and 5-D matmul */
  int n_gqa_ops;
  qir_value *y;                           /* the chain's result, [B,H,S,Dv] */
} chain;

static bool is_const(const qir_value *v) { return v && v->def && v->def->code == QIR_OP_CONST && v->def->cst; }

static bool one_use(const qir_value *v) { return v->uses && !v->uses->next; }

static bool scalar_const(matcher *mt, qir_value *v, double *out) {
  if (!is_const(v) || qir_type_numel(&v->type) != 1) return false;
  *out = qir_const_elem(mt->m, v->def, 0, &mt->quiet);
  return true;
}

static bool is_perm(const int64_t *p, int n, const int64_t *want) {
  for (int i = 0; i < n; i++)
    if (p[i] != want[i]) return false;
  return true;
}

static bool is_identity(const int64_t *p, int n) {
  for (int i = 0; i < n; i++)
    if (p[i] != i) return false;
  return true;
}

/* Follows v back through transposes and multiplies/divides by a scalar
 * constant of v's own type (both commute with one another). */
static void walk_path(matcher *mt, qir_value *v, path *p) {
  p->src = v;
  p->scale = 1;
  for (int i = 0; i < v->type.rank; i++) p->perm[i] = i;
  for (int step = 0; step < MAX_WALK; step++) {
    qir_op *d = p->src->def;
    if (!d || d->n_operands < 1) return;
    qir_value *x = d->operands[0];
    double c;
    if (d->code == QIR_OP_TRANSPOSE) {
      int64_t a[QIR_MAX_RANK], np[QIR_MAX_RANK];
      int n = qir_op_attr_ints(d, "perm", a, QIR_MAX_RANK);
      if (n != v->type.rank || x->type.rank != n) return;
      /* cur[i] = src[perm[i]] = x[a[perm[i]]] */
      for (int i = 0; i < n; i++) np[i] = a[p->perm[i]];
      memcpy(p->perm, np, sizeof np);
      p->src = x;
    } else if ((d->code == QIR_OP_MUL || d->code == QIR_OP_DIV) && d->n_operands == 2) {
      int s = d->code == QIR_OP_MUL && scalar_const(mt, d->operands[0], &c) ? 0 : 1;
      if (!scalar_const(mt, d->operands[s], &c) || !qir_type_equal(&d->operands[1 - s]->type, &d->results[0]->type)) return;
      if (d->code == QIR_OP_DIV && s == 0) return;
      p->scale *= d->code == QIR_OP_DIV ? 1 / c : c;
      p->src = d->operands[1 - s];
    } else {
      return;
    }
  }
}

/* [B,H,S,D]-shaped operands of the scores matmul: its own operands, or in
 * the importer's grouped-query form S = reshape(matmul(reshape(Q) to
 * [B,Hk,G,S,D], reshape(Kᵀ) to [B,Hk,1,D,T])) to [B,Hk·G,S,T]. */
static bool match_scores(qir_value *s, chain *ch) {
  qir_op *d = s->def;
  if (d && d->code == QIR_OP_RESHAPE && one_use(d->operands[0]) && d->operands[0]->def &&
      d->operands[0]->def->code == QIR_OP_MATMUL && d->operands[0]->type.rank == 5 && s->type.rank == 4) {
    qir_op *mm = d->operands[0]->def;
    qir_value *q5 = mm->operands[0], *k5 = mm->operands[1];
    if (!q5->def || q5->def->code != QIR_OP_RESHAPE || !k5->def || k5->def->code != QIR_OP_RESHAPE || !one_use(q5) ||
        !one_use(k5))
      return false;
    qir_value *q = q5->def->operands[0], *kt = k5->def->operands[0];
    const int64_t *qd = q5->type.dims, *kd = k5->type.dims, *md = mm->results[0]->type.dims;
    if (q->type.rank != 4 || kt->type.rank != 4 || q5->type.rank != 5 || k5->type.rank != 5) return false;
    /* q [B,H,S,D] -> [B,Hk,G,S,D]; kᵀ [B,Hk,D,T] -> [B,Hk,1,D,T] */
    if (qd[0] != q->type.dims[0] || qd[1] * qd[2] != q->type.dims[1] || qd[3] != q->type.dims[2] || qd[4] != q->type.dims[3])
      return false;
    if (kd[0] != kt->type.dims[0] || kd[1] != kt->type.dims[1] || kd[2] != 1 || kd[3] != kt->type.dims[2] ||
        kd[4] != kt->type.dims[3] || kd[1] != qd[1] || md[2] != qd[2])
      return false;
    ch->qk_mm = mm;
    ch->gqa_ops[ch->n_gqa_ops++] = d;
    ch->gqa_ops[ch->n_gqa_ops++] = q5->def;
    ch->gqa_ops[ch->n_gqa_ops++] = k5->def;
    ch->qx = q, ch->ktx = kt;
    return true;
  }
  if (!d || d->code != QIR_OP_MATMUL || d->operands[0]->type.rank != 4 || d->operands[1]->type.rank != 4) return false;
  ch->qk_mm = d;
  ch->qx = d->operands[0], ch->ktx = d->operands[1];
  return true;
}

/* softcap·tanh(x / softcap) (one use of each step): x, else NULL */
static qir_value *softcapped(matcher *mt, qir_op *mul, double *cap) {
  double c, c2;
  int s = scalar_const(mt, mul->operands[0], &c) ? 0 : 1;
  qir_value *t = mul->operands[1 - s];
  if (!scalar_const(mt, mul->operands[s], &c) || !t->def || t->def->code != QIR_OP_TANH || !one_use(t)) return NULL;
  qir_value *q = t->def->operands[0];
  if (!q->def || q->def->code != QIR_OP_DIV || !one_use(q) || !scalar_const(mt, q->def->operands[1], &c2) || c2 != c ||
      !(c > 0) || !qir_type_equal(&q->def->operands[0]->type, &mul->results[0]->type))
    return NULL;
  *cap = c;
  return q->def->operands[0];
}

/* L (one use) back to the scores: masks, then a softcap, then scales, then
 * the matmul (stage: 0 masks allowed, 1 after the softcap, 2 after a scale). */
static bool match_logits(matcher *mt, qir_value *l, chain *ch, int stage) {
  qir_op *d = l->def;
  if (!d || !one_use(l)) return false;
  double c;
  bool scaled = stage > 0;
  switch (d->code) {
  case QIR_OP_MUL: case QIR_OP_DIV: {
    qir_value *x = d->code == QIR_OP_MUL && stage == 0 ? softcapped(mt, d, &c) : NULL;
    if (x) {
      ch->softcap = c;
      ch->cap_ops[0] = d, ch->cap_ops[1] = d->operands[0]->def && d->operands[0]->def->code == QIR_OP_TANH
                                               ? d->operands[0]->def : d->operands[1]->def;
      ch->cap_ops[2] = ch->cap_ops[1]->operands[0]->def;
      return match_logits(mt, x, ch, 1);
    }
    int s = d->code == QIR_OP_MUL && scalar_const(mt, d->operands[0], &c) ? 0 : 1;
    if (!scalar_const(mt, d->operands[s], &c) || (d->code == QIR_OP_DIV && s == 0) ||
        !qir_type_equal(&d->operands[1 - s]->type, &l->type) || ch->n_scale_ops == MAX_WALK)
      return false;
    ch->scale *= d->code == QIR_OP_DIV ? 1 / c : c;
    ch->scale_ops[ch->n_scale_ops++] = d;
    return match_logits(mt, d->operands[1 - s], ch, 2);
  }
  case QIR_OP_ADD:
    if (scaled || ch->n_masks == MAX_MASKS) return false; /* a mask under the scale would be scaled too */
    for (int side = 0; side < 2; side++) {
      qir_value *x = d->operands[side], *msk = d->operands[1 - side];
      if (!qir_type_equal(&x->type, &l->type) || msk->type.dtype != l->type.dtype || msk->type.rank > 4) continue;
      chain saved = *ch;
      ch->masks[ch->n_masks++] = (mask_step){MASK_ADD, msk, 0, false, d};
      if (match_logits(mt, x, ch, 0)) return true;
      *ch = saved;
    }
    return false;
  case QIR_OP_WHERE:
    if (scaled || ch->n_masks == MAX_MASKS || d->operands[0]->type.dtype != QIR_BOOL || d->operands[0]->type.rank > 4) return false;
    for (int side = 1; side <= 2; side++) {
      qir_value *x = d->operands[side];
      if (!qir_type_equal(&x->type, &l->type) || !scalar_const(mt, d->operands[3 - side], &c) || !(c <= MASKED_AT)) continue;
      chain saved = *ch;
      ch->masks[ch->n_masks++] = (mask_step){MASK_WHERE, d->operands[0], c, side == 2, d};
      if (match_logits(mt, x, ch, 0)) return true;
      *ch = saved;
    }
    return false;
  default:
    return match_scores(l, ch);
  }
}

/* y = matmul(P, V), or the grouped-query form y = reshape(matmul(reshape(P)
 * to [B,Hk,G,S,T], reshape(V) to [B,Hk,1,T,Dv])) to [B,H,S,Dv]. */
static qir_value *match_output(qir_op *op, chain *ch) {
  if (op->code == QIR_OP_RESHAPE && op->results[0]->type.rank == 4 && op->operands[0]->def &&
      op->operands[0]->def->code == QIR_OP_MATMUL && op->operands[0]->type.rank == 5 && one_use(op->operands[0])) {
    qir_op *mm = op->operands[0]->def;
    qir_value *p5 = mm->operands[0], *v5 = mm->operands[1];
    if (!p5->def || p5->def->code != QIR_OP_RESHAPE || !v5->def || v5->def->code != QIR_OP_RESHAPE || !one_use(p5) ||
        !one_use(v5))
      return NULL;
    qir_value *p = p5->def->operands[0], *v = v5->def->operands[0];
    const int64_t *pd = p5->type.dims, *vd = v5->type.dims;
    if (p->type.rank != 4 || v->type.rank != 4 || p5->type.rank != 5 || v5->type.rank != 5) return NULL;
    if (pd[0] != p->type.dims[0] || pd[1] * pd[2] != p->type.dims[1] || pd[3] != p->type.dims[2] || pd[4] != p->type.dims[3])
      return NULL;
    if (vd[0] != v->type.dims[0] || vd[1] != v->type.dims[1] || vd[2] != 1 || vd[3] != v->type.dims[2] ||
        vd[4] != v->type.dims[3] || vd[1] != pd[1])
      return NULL;
    ch->pv_mm = mm;
    ch->gqa_ops[ch->n_gqa_ops++] = op;
    ch->gqa_ops[ch->n_gqa_ops++] = p5->def;
    ch->gqa_ops[ch->n_gqa_ops++] = v5->def;
    ch->vx = v;
    ch->y = op->results[0];
    return p;
  }
  if (op->code != QIR_OP_MATMUL || op->operands[0]->type.rank != 4 || op->operands[1]->type.rank != 4) return NULL;
  ch->pv_mm = op;
  ch->vx = op->operands[1];
  ch->y = op->results[0];
  return op->operands[0];
}

/* The shapes the op needs: q [B,H,S,D], kᵀ [B,Hk,D,T], v [B,Hk,T,Dv], y
 * [B,H,S,Dv], the scores [B,H,S,T], Hk = H or 1 (or the grouped form's kv
 * heads), one float type throughout. */
static bool shapes_fit(const chain *ch, const qir_type *scores) {
  const qir_type *q = &ch->qx->type, *k = &ch->ktx->type, *v = &ch->vx->type, *y = &ch->y->type;
  qir_dtype dt = q->dtype;
  if (!qir_dtype_is_float(dt) || k->dtype != dt || v->dtype != dt || y->dtype != dt || scores->dtype != dt) return false;
  if (q->rank != 4 || k->rank != 4 || v->rank != 4 || y->rank != 4 || scores->rank != 4) return false;
  int64_t B = q->dims[0], H = q->dims[1], S = q->dims[2], D = q->dims[3], Hk = k->dims[1], T = k->dims[3], Dv = v->dims[3];
  if (Hk <= 0 || H % Hk || (!ch->n_gqa_ops && Hk != H && Hk != 1)) return false;
  if (k->dims[0] != B || k->dims[2] != D || v->dims[0] != B || v->dims[1] != Hk || v->dims[2] != T) return false;
  const int64_t want_s[4] = {B, H, S, T}, want_y[4] = {B, H, S, Dv};
  return is_perm(scores->dims, 4, want_s) && is_perm(y->dims, 4, want_y);
}

/* ---------------------------------------------------------------- masks */

/* Element (b,h,i,j) of a mask of rank r broadcast to [B,H,S,T]: its flat index. */
static int64_t mask_index(const qir_type *mt, const int64_t *at) {
  int64_t idx = 0;
  for (int a = 0, off = 4 - mt->rank; a < mt->rank; a++) idx = idx * mt->dims[a] + (mt->dims[a] == 1 ? 0 : at[a + off]);
  return idx;
}

/* Hidden-key pattern of a constant mask step: 1 hidden, 0 visible, per
 * element of the mask; false when some value is neither (a general bias). */
static bool mask_pattern(matcher *mt, const mask_step *ms, unsigned char *hidden) {
  qir_op *c = ms->mask->def;
  int64_t n = qir_type_numel(&ms->mask->type);
  for (int64_t e = 0; e < n; e++) {
    double x = qir_const_elem(mt->m, c, e, &mt->quiet);
    if (ms->kind == MASK_WHERE) {
      hidden[e] = (x != 0) == ms->hide_when_true;
    } else if (x == 0) {
      hidden[e] = 0;
    } else if (x <= MASKED_AT) {
      hidden[e] = 1;
    } else {
      return false;
    }
  }
  return true;
}

/* Whether a constant mask hides exactly {j > i + (T - S)} at every (b, h). */
static bool is_causal_mask(matcher *mt, const mask_step *ms, const int64_t *full) {
  if (!is_const(ms->mask)) return false;
  const qir_type *t = &ms->mask->type;
  int64_t n = qir_type_numel(t);
  unsigned char *hidden = malloc((size_t)(n ? n : 1));
  if (!hidden) return false;
  bool ok = mask_pattern(mt, ms, hidden);
  int64_t S = full[2], T = full[3];
  /* a broadcast axis repeats the same element: walking [S,T] (and B, H where
   * the mask has them) covers every case */
  int64_t nb = t->rank >= 4 ? t->dims[t->rank - 4] : 1, nh = t->rank >= 3 ? t->dims[t->rank - 3] : 1;
  for (int64_t b = 0; ok && b < nb; b++)
    for (int64_t h = 0; ok && h < nh; h++)
      for (int64_t i = 0; ok && i < S; i++)
        for (int64_t j = 0; ok && j < T; j++) {
          int64_t at[4] = {b, h, i, j};
          ok = hidden[mask_index(t, at)] == (j > i + (T - S));
        }
  free(hidden);
  return ok;
}

/* The bias operand one non-causal mask step contributes (inserted before `at`). */
static qir_value *mask_bias(matcher *mt, const mask_step *ms, qir_dtype dt, qir_op *at) {
  if (ms->kind == MASK_ADD) return ms->mask;
  const qir_type *ct = &ms->mask->type;
  qir_type bt = *ct;
  bt.dtype = dt;
  double hide = ms->neg, show = 0;
  if (is_const(ms->mask)) {
    int64_t n = qir_type_numel(ct);
    size_t esz = (size_t)qir_dtype_size(dt);
    char *buf = calloc((size_t)(n ? n : 1), esz);
    if (!buf) return NULL;
    for (int64_t e = 0; e < n; e++) {
      bool on = qir_const_elem(mt->m, ms->mask->def, e, &mt->quiet) != 0;
      qir_store_elem(dt, buf, e, on == ms->hide_when_true ? hide : show);
    }
    qir_op *k = qir_const_new_data(mt->m, bt, buf, (size_t)n * esz, at->loc);
    free(buf);
    qir_op_insert_before(at, k);
    return k->results[0];
  }
  qir_type scalar = qir_type_make(dt, 0, NULL);
  qir_op *h = qir_const_new_splat(mt->m, scalar, hide, at->loc), *s = qir_const_new_splat(mt->m, scalar, show, at->loc);
  qir_op_insert_before(at, h);
  qir_op_insert_before(at, s);
  qir_value *ops[3] = {ms->mask, ms->hide_when_true ? h->results[0] : s->results[0], ms->hide_when_true ? s->results[0] : h->results[0]};
  qir_op *w = qir_op_new(mt->m, QIR_OP_WHERE, 3, ops, 1, &bt, at->loc);
  qir_op_insert_before(at, w);
  return w->results[0];
}

/* ---------------------------------------------------------------- rewrite */

static qir_value *transposed(matcher *mt, qir_value *x, const int64_t *perm, qir_op *at) {
  if (is_identity(perm, x->type.rank)) return x;
  qir_type t = x->type;
  for (int i = 0; i < t.rank; i++) t.dims[i] = x->type.dims[perm[i]];
  qir_op *op = qir_op_new(mt->m, QIR_OP_TRANSPOSE, 1, &x, 1, &t, at->loc);
  qir_op_set_attr(mt->m, op, "perm", qir_attr_ints(mt->m, t.rank, perm), false);
  qir_op_insert_before(at, op);
  return op->results[0];
}

/* Drops a pure op left without uses, then its operands' definitions in turn
 * (the chain's transposes, scales and mask constants); never an input. */
static void drop_if_dead(qir_value *v) {
  qir_op *d = v ? v->def : NULL;
  if (!d || d->code == QIR_OP_INPUT || d->n_regions || !d->parent) return;
  const qir_opinfo *info = qir_opinfo_get(d->code);
  if (!info || !(info->flags & QIR_OPF_PURE)) return;
  for (int i = 0; i < d->n_results; i++)
    if (d->results[i]->uses) return;
  int n = d->n_operands;
  qir_value **ops = malloc(sizeof *ops * (size_t)(n ? n : 1));
  if (!ops) return;
  memcpy(ops, d->operands, sizeof *ops * (size_t)n);
  qir_op_unlink(d);
  for (int i = 0; i < n; i++) drop_if_dead(ops[i]);
  free(ops);
}

/* HF's repeat_kv (and ONNX Attention's expanded function): x = reshape(
 * expand(reshape(kv [B,Hk,T,D]) to [B,Hk,1,T,D]) to [B,Hk,G,T,D]) to
 * [B,Hk·G,T,D], query head h reading copy h of kv head h / G: the op reads
 * kv itself (its grouped heads), without the copies.  NULL if x is not that. */
static qir_value *repeated_kv(qir_value *x) {
  qir_op *r = x->def, *e = r && r->code == QIR_OP_RESHAPE ? r->operands[0]->def : NULL;
  qir_op *u = e && e->code == QIR_OP_EXPAND ? e->operands[0]->def : NULL;
  if (!u || u->code != QIR_OP_RESHAPE || x->type.rank != 4) return NULL;
  qir_value *kv = u->operands[0];
  const int64_t *xd = x->type.dims, *kd = kv->type.dims, *ud = u->results[0]->type.dims, *ed = e->results[0]->type.dims;
  if (kv->type.rank != 4 || u->results[0]->type.rank != 5 || e->results[0]->type.rank != 5) return NULL;
  for (int i = 0; i < 2; i++)
    if (ud[i] != kd[i] || ed[i] != kd[i]) return NULL;
  if (ud[2] != 1 || ud[3] != kd[2] || ud[4] != kd[3] || ed[3] != kd[2] || ed[4] != kd[3]) return NULL;
  if (xd[0] != kd[0] || xd[1] != kd[1] * ed[2] || xd[2] != kd[2] || xd[3] != kd[3]) return NULL;
  return kv;
}

static const int64_t TO_BSHD[4] = {0, 2, 1, 3}, KT_FROM_BSHD[4] = {0, 2, 3, 1}, SWAP_LAST[4] = {0, 1, 3, 2};

/* Replaces the matched chain by one attention op; returns it. */
static qir_op *rewrite(matcher *mt, chain *ch) {
  qir_op *at = ch->n_gqa_ops ? ch->y->def : ch->pv_mm;
  const qir_type *yt = &ch->y->type;
  qir_dtype dt = yt->dtype;
  int64_t full[4] = {yt->dims[0], yt->dims[1], yt->dims[2], ch->ktx->type.dims[3]};
  path pq, pk, pv;
  walk_path(mt, ch->qx, &pq);
  walk_path(mt, ch->ktx, &pk);
  walk_path(mt, ch->vx, &pv);
  bool bshd = !ch->n_gqa_ops && pq.src->type.rank == 4 && pk.src->type.rank == 4 && pv.src->type.rank == 4 &&
              is_perm(pq.perm, 4, TO_BSHD) && is_perm(pk.perm, 4, KT_FROM_BSHD) && is_perm(pv.perm, 4, TO_BSHD) &&
              pv.scale == 1;
  if (!bshd) pv.src = ch->vx, pv.scale = 1; /* v keeps what the chain reads */
  double scale = ch->scale * pq.scale * pk.scale;
  if (!isfinite(scale)) return NULL; /* (a division by zero): nothing changed yet */
  /* the causal mask and the bias */
  bool causal = false;
  qir_value *bias = NULL;
  for (int i = 0; i < ch->n_masks; i++) {
    const mask_step *ms = &ch->masks[i];
    if (!causal && is_causal_mask(mt, ms, full)) {
      causal = true;
      continue;
    }
    qir_value *b = mask_bias(mt, ms, dt, at);
    if (!b) return NULL;
    if (bias) {
      qir_type sum;
      if (!qir_broadcast_shape(&bias->type, &b->type, &sum)) return NULL;
      qir_value *ops[2] = {bias, b};
      qir_op *add = qir_op_new(mt->m, QIR_OP_ADD, 2, ops, 1, &sum, at->loc);
      qir_op_insert_before(at, add);
      b = add->results[0];
    }
    bias = b;
  }
  if (!bias) {
    qir_op *zero = qir_const_new_splat(mt->m, qir_type_make(dt, 0, NULL), 0, at->loc);
    qir_op_insert_before(at, zero);
    bias = zero->results[0];
  }
  qir_value *q, *k, *v;
  if (bshd) {
    q = pq.src, k = pk.src, v = pv.src;
  } else {
    int64_t kperm[QIR_MAX_RANK];
    for (int i = 0; i < 4; i++) kperm[i] = pk.perm[SWAP_LAST[i]];
    q = pq.scale == 1 ? ch->qx : transposed(mt, pq.src, pq.perm, at);
    k = transposed(mt, pk.src, kperm, at);
    v = pv.src;
    qir_value *k0 = repeated_kv(k), *v0 = repeated_kv(v);
    if (k0 && v0 && k0->type.dims[1] == v0->type.dims[1] && k0->type.dtype == k->type.dtype && v0->type.dtype == v->type.dtype) {
      if (k != pk.src) drop_if_dead(k); /* the transpose just made, read by nothing now */
      k = k0, v = v0;
      mt->st->kv_repeats++;
    }
  }
  qir_value *ops[4] = {q, k, v, bias};
  qir_type rt = *yt;
  if (bshd) rt.dims[1] = yt->dims[2], rt.dims[2] = yt->dims[1];
  qir_op *att = qir_op_new(mt->m, QIR_OP_ATTENTION, 4, ops, 1, &rt, ch->pv_mm->loc);
  qir_op_set_attr(mt->m, att, "scale", qir_attr_float(scale), false);
  if (ch->softcap > 0) qir_op_set_attr(mt->m, att, "softcap", qir_attr_float(ch->softcap), false);
  if (causal) qir_op_set_attr(mt->m, att, "causal", qir_attr_int(1), false);
  if (bshd) qir_op_set_attr(mt->m, att, "layout", qir_attr_word(mt->m, "bshd"), false);
  qir_op_insert_before(at, att);
  /* y, or its transpose back to [B,S,H,Dv] when that is y's only use */
  qir_value *result = att->results[0], *replaced = ch->y;
  if (bshd) {
    qir_op *user = one_use(ch->y) ? ch->y->uses->user : NULL;
    int64_t p[QIR_MAX_RANK];
    if (user && user->code == QIR_OP_TRANSPOSE && qir_op_attr_ints(user, "perm", p, QIR_MAX_RANK) == 4 && is_perm(p, 4, TO_BSHD)) {
      replaced = user->results[0];
    } else {
      result = transposed(mt, result, TO_BSHD, at);
    }
  }
  const char *name = replaced->name;
  qir_value_replace_uses(mt->m, replaced, result);
  /* the chain's ops, each left without uses once the ops after it are gone */
  qir_op *dead[MAX_WALK + MAX_MASKS + 24];
  int n_dead = 0;
  if (replaced != ch->y) dead[n_dead++] = replaced->def;
  for (int i = 0; i < ch->n_gqa_ops; i++) dead[n_dead++] = ch->gqa_ops[i];
  dead[n_dead++] = ch->pv_mm;
  if (ch->casts[0]) dead[n_dead++] = ch->casts[0];
  dead[n_dead++] = ch->softmax;
  if (ch->casts[1]) dead[n_dead++] = ch->casts[1];
  for (int i = 0; i < ch->n_masks; i++) dead[n_dead++] = ch->masks[i].op;
  for (int i = 0; i < 3 && ch->softcap > 0; i++) dead[n_dead++] = ch->cap_ops[i];
  for (int i = 0; i < ch->n_scale_ops; i++) dead[n_dead++] = ch->scale_ops[i];
  dead[n_dead++] = ch->qk_mm;
  for (bool progress = true; progress;) {
    progress = false;
    for (int i = 0; i < n_dead; i++)
      if (dead[i]->parent && !dead[i]->results[0]->uses) {
        qir_op_unlink(dead[i]);
        progress = true;
      }
  }
  qir_value *roots[3 + MAX_MASKS] = {ch->qx, ch->ktx, ch->vx};
  for (int i = 0; i < ch->n_masks; i++) roots[3 + i] = ch->masks[i].mask;
  for (int i = 0; i < 3 + ch->n_masks; i++) drop_if_dead(roots[i]);
  if (name && !result->name) result->name = name;
  mt->st->chains++;
  mt->st->causal += causal;
  mt->st->bshd += bshd;
  return att;
}

/* The chain ending at op, if it is one (nothing changed otherwise). */
static qir_op *try_match(matcher *mt, qir_op *op) {
  chain ch;
  memset(&ch, 0, sizeof ch);
  ch.scale = 1;
  qir_value *p = match_output(op, &ch);
  if (!p || !p->def || !one_use(p) || p->type.rank != 4) return NULL;
  qir_value *sm = p, *l;
  /* softmax in a wider type (HF's softmax(dtype=float32)): cast(softmax(cast(L))) */
  if (p->def->code == QIR_OP_CAST) {
    sm = p->def->operands[0];
    qir_value *wide = sm->def && sm->def->code == QIR_OP_SOFTMAX ? sm->def->operands[0] : NULL;
    if (!wide || !one_use(sm) || !wide->def || wide->def->code != QIR_OP_CAST || !one_use(wide) ||
        !qir_type_equal(&wide->def->operands[0]->type, &p->type) || !qir_dtype_is_float(sm->type.dtype))
      return NULL;
    ch.casts[0] = p->def, ch.casts[1] = wide->def;
    l = wide->def->operands[0];
  } else {
    l = p->def->code == QIR_OP_SOFTMAX ? p->def->operands[0] : NULL;
  }
  if (!l || sm->def->code != QIR_OP_SOFTMAX || qir_op_attr_int(sm->def, "axis", -1) != 3) return NULL;
  ch.softmax = sm->def;
  if (!match_logits(mt, l, &ch, 0)) return NULL;
  if (!one_use(ch.qk_mm->results[0]) && !ch.n_gqa_ops) return NULL;
  if (!shapes_fit(&ch, &p->type)) return NULL;
  return rewrite(mt, &ch);
}

static void match_region(matcher *mt, qir_region *r) {
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    if (op->code != QIR_OP_KERNEL) /* a kernel group's body is planned as it is */
      for (int i = 0; i < op->n_regions; i++) match_region(mt, op->regions[i]);
    qir_op *att = try_match(mt, op);
    if (att) next = att->next;
  }
}

bool qopt_match_attention(qopt_ctx *ctx, qir_module *m, const char *who) {
  if (qopt_option_bool(ctx, "keep-attention-chains")) return true;
  qopt_attention_stats st = {0, 0, 0, 0};
  matcher mt = {m, {0}, &st};
  qir_diag_init_quiet(&mt.quiet);
  match_region(&mt, m->body);
  if (st.chains && qopt_option_bool(ctx, "stats"))
    fprintf(stderr, "%s: attention chains recognised %d (causal masks %d, layout bshd %d, repeated kv heads read once %d)\n",
            who, st.chains, st.causal, st.bshd, st.kv_repeats);
  return true;
}
