/* welder_siblings.c: -welder's horizontal step, run before graph connecting
 * (welder.c, merge_siblings, decides which sets merge).
 *
 * Sibling contractions (matmuls reading the same value as their A operand:
 * the Q, K and V projections of an attention layer) whose B operands have
 * the same rank and shape except the output (last) axis, the same element
 * types, and the same result type except that axis, become one matmul over
 * the concatenation of their B operands (`concat ... {axis = rank-1}`); each
 * sibling's result becomes a `slice` of the merged result.  When every
 * sibling's only use is the same elementwise binary op with a vector over the
 * output axis (the bias add), those epilogues merge too, over a concat of the
 * vectors: the merged contraction keeps its epilogue in its group and the
 * slices sit after it, where their readers fold them into their own loads (a
 * slice is a data-movement op -welder inlines into any reader,
 * contractions' operand loads included).  A concat of constants (the weights
 * and biases of a layer, from the weights sidecar) is made here, once, as a
 * constant (fold_concat): qopt writes it to the new weights sidecar.  Merging the
 * epilogues rather than slicing before them keeps the bias in the merged
 * contraction's registers; a slice before each add would cut the add off
 * from its accumulator and cost a kernel per sibling.
 *
 * Sibling convs (same input, group 1, the same plain attributes: strides,
 * pads, dilations, kernel_shape; weights alike but for their output
 * channels; not the same weight operand, which would be one conv twice) merge
 * alike: weights and biases concatenated along axis 0, each result a slice
 * along axis 1 (channels).  A grouped conv is left alone: its output channel
 * reads only its group's input channels, which concatenated weights would
 * shift.  Their epilogues merge when every sibling's only reader is the same
 * unary elementwise op (ReLU) with the same attributes; others (batch norm,
 * adds) stay apart, each reading its slice.
 *
 * Each reader (user op) of a sibling's result gets a slice of its own, so a
 * result with several readers in different groups is still read in place.
 * A slice read by something that cannot fold it (an `output`, a `yield`, an
 * op without a compute form, a matrix-unit plan) is its own copy kernel.
 *
 * The step's own estimate (welder_siblings_merge with apply = false): the
 * merged contraction gets Roller's plan (roller_plan_op, with -roller's
 * options); merging pays when its modelled time, plus a copy kernel (launch
 * and round trip) per unfoldable slice, plus the concat of the B operands as
 * a kernel of its own when they are not constants and the merged plan uses
 * the matrix units (they stage plain tiles: -welder does not fold a concat
 * there), plus the round trip and
 * launch of each sibling's own elementwise epilogue (which the merge cuts off
 * from its accumulator), is below the siblings' modelled times plus the
 * launches saved.  welder.c then confirms by welding the module both ways.
 *
 * Not merged: different element types (a matmul's operands share one, so
 * only a mismatch of results could differ); B of rank < 2 (no output axis);
 * siblings whose B (or bias) is defined after a read of another sibling's
 * result: the merged op is placed after every B operand and before every read
 * of every result, which also rules out a B that depends on a sibling's result
 * (a cycle); siblings whose results meet in one elementwise op (graph
 * connecting already groups them there); a sibling whose plan is not the one
 * Roller constructs for it (written by hand).  Ops inside a `kernel` group
 * are left alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roller.h"
#include "welder_siblings.h"

#define MAX_SIBLINGS 16

typedef struct {
  qir_op *con;                  /* the contraction: a matmul or a conv */
  qir_op *epi;                  /* its merged epilogue op, or NULL */
  qir_value *bias;              /* a matmul epilogue's vector operand (NULL for a conv's unary epilogue) */
  qir_value *out;               /* what the slices replace: epi's result, else con's */
} sibling;

/* The op of region r that is or contains op, or NULL. */
static qir_op *ancestor_in(qir_region *r, qir_op *op) {
  while (op && op->parent != r) op = op->parent && op->parent->parent_op ? op->parent->parent_op : NULL;
  return op;
}

static int position(const qir_op *op) {
  int n = 0;
  for (const qir_op *p = op->prev; p; p = p->prev) n++;
  return n;
}

/* Where v is defined, as a position in r: -1 outside r (an argument, an outer value). */
static int def_position(qir_region *r, const qir_value *v) {
  if (!v->def || v->def->parent != r) return -1;
  return position(v->def);
}

/* The first position in r that reads v, or INT32_MAX when none does. */
static int first_use(qir_region *r, const qir_value *v) {
  int first = INT32_MAX;
  for (const qir_use *u = v->uses; u; u = u->next) {
    qir_op *a = ancestor_in(r, u->user);
    if (!a) return -1;          /* read from elsewhere: treat as before anything */
    int p = position(a);
    if (p < first) first = p;
  }
  return first;
}

static bool elementwise_binary(const qir_op *op) {
  switch (op->code) {
  case QIR_OP_ADD: case QIR_OP_SUB: case QIR_OP_MUL: case QIR_OP_DIV: return op->n_operands == 2 && op->n_results == 1;
  default: return false;
  }
}

/* The epilogue of s if it is a binary op with a vector over the output axis,
 * the sibling's only reader; sets s->epi and s->bias, and *k (s's operand index). */
static bool find_epilogue(sibling *s, int *k) {
  qir_value *v = s->con->results[0];
  if (!v->uses || v->uses->next) return false;
  qir_op *e = v->uses->user;
  if (!elementwise_binary(e) || e->parent != s->con->parent || e->operands[0] == e->operands[1]) return false;
  int idx = v->uses->operand_index;
  qir_value *b = e->operands[1 - idx];
  int64_t n = v->type.dims[v->type.rank - 1];
  if (b->type.rank != 1 || b->type.dims[0] != n || b->type.dtype != v->type.dtype ||
      !qir_type_equal(&e->results[0]->type, &v->type))
    return false;
  s->epi = e;
  s->bias = b;
  *k = idx;
  return true;
}

/* Whether matmul b can be merged with matmul a (same A already). */
static bool compatible(const qir_op *a, const qir_op *b) {
  const qir_type *ta = &a->operands[1]->type, *tb = &b->operands[1]->type;
  const qir_type *ra = &a->results[0]->type, *rb = &b->results[0]->type;
  if (ta->rank < 2 || ta->rank != tb->rank || ta->dtype != tb->dtype || ra->dtype != rb->dtype || ra->rank != rb->rank)
    return false;
  for (int d = 0; d + 1 < ta->rank; d++)
    if (ta->dims[d] != tb->dims[d]) return false;
  for (int d = 0; d + 1 < ra->rank; d++)
    if (ra->dims[d] != rb->dims[d]) return false;
  return ra->dims[ra->rank - 1] == ta->dims[ta->rank - 1] && rb->dims[rb->rank - 1] == tb->dims[tb->rank - 1];
}

static bool is_matmul(const qir_op *op) {
  return op->code == QIR_OP_MATMUL && op->n_operands == 2 && op->n_results == 1 && op->operands[0] != op->operands[1] &&
         qir_type_numel(&op->results[0]->type) > 0 && !qir_rprogram_packs(op);
}

/* Attribute values equal; floats only when exact (else ignored: plans'
 * estimates, rounded when printed). */
static bool same_val(const qir_attr_val *a, const qir_attr_val *b, bool exact) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
  case QIR_ATTR_INT: return a->i == b->i;
  case QIR_ATTR_FLOAT: return !exact || a->f == b->f;
  case QIR_ATTR_STRING: case QIR_ATTR_WORD: return !strcmp(a->s, b->s);
  case QIR_ATTR_LIST:
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
      if (!same_val(&a->items[i], &b->items[i], exact)) return false;
    return true;
  case QIR_ATTR_DICT:
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++) {
      const qir_attr_val *o = qir_attr_dict_get(b, a->entries[i].key);
      if (!o || !same_val(&a->entries[i].val, o, exact)) return false;
    }
    return true;
  default: return false;
  }
}

/* Plans equal but for their floats. */
static bool same_plan(const qir_attr_val *a, const qir_attr_val *b) { return same_val(a, b, false); }

/* Whether a and b have the same plain (not schedule) attributes: a conv's
 * strides, pads, dilations, kernel_shape, auto_pad; an epilogue's own. */
static bool same_attrs(const qir_op *a, const qir_op *b) {
  int na = 0, nb = 0;
  for (int i = 0; i < b->n_attrs; i++) nb += !b->attrs[i].sched;
  for (int i = 0; i < a->n_attrs; i++) {
    if (a->attrs[i].sched) continue;
    na++;
    const qir_attr *o = qir_op_attr(b, a->attrs[i].key);
    if (!o || o->sched || !same_val(&a->attrs[i].val, &o->val, true)) return false;
  }
  return na == nb;
}

static void copy_attrs(qir_module *m, qir_op *to, const qir_op *from) {
  for (int i = 0; i < from->n_attrs; i++)
    if (!from->attrs[i].sched) qir_op_set_attr(m, to, from->attrs[i].key, from->attrs[i].val, false);
}

/* A conv that can be a sibling: group 1 (a grouped conv's weights do not
 * concatenate into one conv's), its input read by nothing else of it. */
static bool is_conv(const qir_op *op) {
  if (op->code != QIR_OP_CONV || op->n_operands != 3 || op->n_results != 1 || op->operands[0] == op->operands[1] ||
      op->operands[0] == op->operands[2] || qir_type_numel(&op->results[0]->type) <= 0 || qir_rprogram_packs(op))
    return false;
  const qir_attr *g = qir_op_attr(op, "group");
  return !g || (g->val.kind == QIR_ATTR_INT && g->val.i == 1);
}

/* Whether conv b can be merged with conv a (same input already): weights
 * [O, C, k...] alike but for O, biases [O], results alike but for channels,
 * the same window attributes. */
static bool compatible_conv(const qir_op *a, const qir_op *b) {
  const qir_type *wa = &a->operands[1]->type, *wb = &b->operands[1]->type;
  const qir_type *ba = &a->operands[2]->type, *bb = &b->operands[2]->type;
  const qir_type *ra = &a->results[0]->type, *rb = &b->results[0]->type;
  if (wa->rank < 3 || wa->rank != wb->rank || wa->dtype != wb->dtype || ba->rank != 1 || bb->rank != 1 ||
      ba->dtype != bb->dtype || ra->dtype != rb->dtype || ra->rank != rb->rank || ra->rank < 3)
    return false;
  for (int d = 1; d < wa->rank; d++)
    if (wa->dims[d] != wb->dims[d]) return false;
  for (int d = 0; d < ra->rank; d++)
    if (d != 1 && ra->dims[d] != rb->dims[d]) return false;
  /* the same weights: the same conv twice, which a merge would compute twice */
  if (a != b && a->operands[1] == b->operands[1]) return false;
  return ra->dims[1] == wa->dims[0] && rb->dims[1] == wb->dims[0] && ba->dims[0] == wa->dims[0] &&
         bb->dims[0] == wb->dims[0] && same_attrs(a, b);
}

/* A conv's epilogue that merges: its only reader, unary and elementwise
 * (relu), of the conv's type; sets s->epi. */
static bool find_unary_epilogue(sibling *s) {
  qir_value *v = s->con->results[0];
  if (!v->uses || v->uses->next) return false;
  qir_op *e = v->uses->user;
  if (e->n_operands != 1 || e->n_results != 1 || e->n_regions || e->parent != s->con->parent ||
      !(qir_opinfo_get(e->code)->flags & QIR_OPF_ELEMENTWISE) || !qir_type_equal(&e->results[0]->type, &v->type))
    return false;
  s->epi = e;
  return true;
}

/* Whether op's plan is Roller's (or it has none): a plan written by hand,
 * which the merged op's would replace, keeps its op out of any merge. */
static bool roller_planned(const welder_siblings_ctx *w, const qir_op *op) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  if (!tile) return true;
  qir_op *copy = qir_op_copy_single(w->m, op, op->operands);
  qir_op_remove_attr(copy, "tile");
  qir_op_remove_attr(copy, "tile_alternatives");
  roller_plan_op(w->m, copy, w->t, &w->plan, NULL, NULL);
  const qir_attr *again = qir_op_attr(copy, "tile");
  bool same = again && same_plan(&tile->val, &again->val);
  qir_op_unlink(copy);
  return same;
}

/* Whether the values outs meet, through elementwise and movement ops only,
 * in one op: graph connecting can then put the siblings in that op's group
 * (one as its anchor, the others staged), horizontal fusion without a merge
 * and without the slices' staged boxes; the sibling step leaves them to it. */
#define MEET_DEPTH 6
#define MEET_OPS 64

static bool passes_through(const qir_op *op) {
  return op->n_results == 1 && op->n_regions == 0 &&
         ((qir_opinfo_get(op->code)->flags & QIR_OPF_ELEMENTWISE) || op->code == QIR_OP_TRANSPOSE ||
          op->code == QIR_OP_RESHAPE || op->code == QIR_OP_SLICE);
}

static int reach(const qir_value *v, int depth, const qir_op **seen, int n_seen) {
  for (const qir_use *u = v->uses; u && n_seen < MEET_OPS; u = u->next) {
    const qir_op *op = u->user;
    if (!passes_through(op)) continue;
    bool dup = false;
    for (int i = 0; i < n_seen && !dup; i++) dup = seen[i] == op;
    if (dup) continue;
    seen[n_seen++] = op;
    if (depth > 1) n_seen = reach(op->results[0], depth - 1, seen, n_seen);
  }
  return n_seen;
}

static bool results_meet(const sibling *s, int n) {
  const qir_op *common[MEET_OPS], *mine[MEET_OPS];
  int n_common = reach(s[0].out, MEET_DEPTH, common, 0);
  for (int i = 1; i < n && n_common; i++) {
    int n_mine = reach(s[i].out, MEET_DEPTH, mine, 0), k = 0;
    for (int a = 0; a < n_common; a++)
      for (int b = 0; b < n_mine; b++)
        if (common[a] == mine[b]) {
          common[k++] = common[a];
          break;
        }
    n_common = k;
  }
  return n_common > 0;
}

static bool has_mma(const qir_op *op) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  return tile && tile->val.kind == QIR_ATTR_DICT && qir_attr_dict_get(&tile->val, "mma");
}

/* Whether a reader of a slice folds it into its own loads in -welder. */
static bool folds_slice(const qir_op *user) {
  if (user->code == QIR_OP_OUTPUT || user->code == QIR_OP_YIELD || user->code == QIR_OP_KERNEL || user->n_regions ||
      user->n_results != 1 || has_mma(user))
    return false;
  return qir_opinfo_get(user->code)->flags & QIR_OPF_PURE;
}

/* Whether user, reading v, is elementwise at v's own points (what -welder
 * takes into v's contraction as its epilogue). */
static bool epilogue_of(const qir_op *user, const qir_value *v) {
  return user->n_results == 1 && (qir_opinfo_get(user->code)->flags & QIR_OPF_ELEMENTWISE) &&
         qir_type_equal(&user->results[0]->type, &v->type) && user->parent == v->def->parent;
}

/* The concatenation of constants (weights, biases), made here once: the
 * merged op reads it as each sibling read its own, and no kernel copies the
 * weights at every run (a matrix-unit plan stages plain tiles; a SIMT plan
 * would fold the concat into its operand loads, a branch per element).
 * NULL when a value is not a constant, its bytes cannot be read, or it
 * would be a large constant in the text (none of the parts is in a sidecar).
 * Without `bytes` (the step's estimate, which only plans around it) the
 * constant is a placeholder of the right type: nothing is copied. */
static qir_op *fold_concat(qir_module *m, qir_value **vals, int n, int axis, const qir_type *t, qir_loc loc,
                           bool bytes) {
  bool spill = false;
  for (int i = 0; i < n; i++) {
    if (!vals[i]->def || vals[i]->def->code != QIR_OP_CONST) return NULL;
    spill |= vals[i]->def->cst->offset >= 0 || vals[i]->def->cst->spill;
  }
  /* constants written in the text (splats, dense lists) stay as they are: a
   * folded one would be printed there in full */
  if (!spill && qir_type_numel(t) > 64) return NULL;
  if (!bytes) return qir_const_new_splat(m, *t, 0.0, loc);
  size_t es = (size_t)qir_dtype_size(t->dtype);
  int64_t outer = 1;
  for (int d = 0; d < axis; d++) outer *= t->dims[d];
  size_t total = (size_t)qir_type_numel(t) * es;
  char *data = qir_alloc(m, total), *dst = data;
  for (int i = 0; i < n; i++) {
    qir_op *c = vals[i]->def;
    if (!c->cst->splat && !qir_const_data(m, c, NULL)) return NULL;
  }
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n; i++) {
      const qir_const *c = vals[i]->def->cst;
      size_t chunk = (size_t)(qir_type_numel(&vals[i]->type) / outer) * es;
      if (c->splat)
        for (size_t b = 0; b < chunk; b += es) memcpy(dst + b, c->data, es);
      else
        memcpy(dst, (const char *)c->data + (size_t)o * chunk, chunk);
      dst += chunk;
    }
  qir_op *f = qir_const_new_data(m, *t, data, total, loc);
  f->cst->spill = spill;
  return f;
}

static qir_op *new_concat(qir_module *m, qir_value **vals, int n, int axis, const char *name, qir_loc loc,
                          bool bytes) {
  qir_type t = vals[0]->type;
  t.dims[axis] = 0;
  for (int i = 0; i < n; i++) t.dims[axis] += vals[i]->type.dims[axis];
  qir_op *c = fold_concat(m, vals, n, axis, &t, loc, bytes);
  if (!c) {
    c = qir_op_new(m, QIR_OP_CONCAT, n, vals, 1, &t, loc);
    qir_op_set_attr(m, c, "axis", qir_attr_int(axis), false);
  }
  c->results[0]->name = name;
  return c;
}

/* Drops the constants only the merged siblings read. */
static void drop_unread_consts(qir_value **vals, int n) {
  for (int i = 0; i < n; i++)
    if (vals[i] && vals[i]->def && vals[i]->def->code == QIR_OP_CONST && !vals[i]->uses && vals[i]->def->parent)
      qir_op_unlink(vals[i]->def);
}

/* Merges the n siblings s (A operand shared) if the model says so. */
static bool merge(const welder_siblings_ctx *w, qir_region *r, sibling *s, int n, bool with_epi, int epi_k, bool apply) {
  qir_module *m = w->m;
  qir_op *first = s[0].con;
  bool conv = first->code == QIR_OP_CONV;
  /* after every operand the merged ops read, before every read of a result */
  int last_def = def_position(r, first->operands[0]);
  for (int i = 0; i < n; i++) {
    for (int k = 1; k < s[i].con->n_operands; k++) {
      int p = def_position(r, s[i].con->operands[k]);
      if (p > last_def) last_def = p;
    }
    int p;
    if (with_epi && s[i].bias && (p = def_position(r, s[i].bias)) > last_def) last_def = p;
  }
  qir_op *at = r->first;
  for (int i = 0; i <= last_def && at; i++) at = at->next;
  if (!at) return false;
  int rank = first->operands[1]->type.rank, out_rank = first->results[0]->type.rank;
  /* a matmul's B concatenates along its last (output) axis, a conv's weights
   * along their first; the result's channels are axis 1 of a conv's */
  int b_axis = conv ? 0 : rank - 1, out_axis = conv ? 1 : out_rank - 1;
  qir_value *bs[MAX_SIBLINGS], *biases[MAX_SIBLINGS], *conv_biases[MAX_SIBLINGS];
  for (int i = 0; i < n; i++) {
    bs[i] = s[i].con->operands[1];
    biases[i] = s[i].bias;
    conv_biases[i] = conv ? s[i].con->operands[2] : NULL;
  }
  const char *base = first->results[0]->name ? first->results[0]->name : conv ? "conv" : "mm";
  qir_op *wcat = new_concat(m, bs, n, b_axis, qir_sprintf(m, "%s_siblings_b", base), first->loc, apply);
  qir_type mt = first->results[0]->type;
  mt.dims[out_axis] = wcat->results[0]->type.dims[b_axis];
  qir_op *ccat = NULL, *merged_con;
  if (conv) {
    ccat = new_concat(m, conv_biases, n, 0, qir_sprintf(m, "%s_siblings_bias", base), first->loc, apply);
    qir_value *cops[3] = {first->operands[0], wcat->results[0], ccat->results[0]};
    merged_con = qir_op_new(m, QIR_OP_CONV, 3, cops, 1, &mt, first->loc);
    copy_attrs(m, merged_con, first);
  } else {
    qir_value *mops[2] = {first->operands[0], wcat->results[0]};
    merged_con = qir_op_new(m, QIR_OP_MATMUL, 2, mops, 1, &mt, first->loc);
  }
  merged_con->results[0]->name = qir_sprintf(m, "%s_siblings", base);
  qir_op *bcat = NULL, *epi = NULL;
  if (with_epi && conv) {
    epi = qir_op_new(m, s[0].epi->code, 1, &merged_con->results[0], 1, &mt, s[0].epi->loc);
    copy_attrs(m, epi, s[0].epi);
    epi->results[0]->name = qir_sprintf(m, "%s_siblings_%s", base, qir_opinfo_get(epi->code)->name);
  } else if (with_epi) {
    bcat = new_concat(m, biases, n, 0, qir_sprintf(m, "%s_siblings_bias", base), s[0].epi->loc, apply);
    qir_value *eops[2];
    eops[epi_k] = merged_con->results[0];
    eops[1 - epi_k] = bcat->results[0];
    epi = qir_op_new(m, s[0].epi->code, 2, eops, 1, &mt, s[0].epi->loc);
    epi->results[0]->name = qir_sprintf(m, "%s_siblings_%s", base, qir_opinfo_get(epi->code)->name);
  }
  qir_op_insert_before(at, wcat);
  if (ccat) qir_op_insert_before(at, ccat);
  qir_op_insert_before(at, merged_con);
  if (bcat) qir_op_insert_before(at, bcat);
  if (epi) qir_op_insert_before(at, epi);
  const roller_options *ro = &w->plan;
  roller_plan_op(m, merged_con, w->t, ro, NULL, NULL);
  /* the model: the siblings apart against the merged contraction */
  double apart = 0, merged = welder_op_us(w->t, merged_con);
  for (int i = 0; i < n; i++) apart += welder_op_us(w->t, s[i].con);
  apart += (double)(n - 1) * w->launch_us;
  if (has_mma(merged_con) && wcat->code == QIR_OP_CONCAT)
    merged += welder_op_us(w->t, wcat) + w->launch_us;   /* the concat stays a kernel */
  for (int i = 0; i < n; i++) {
    double round_trip = 2.0 * (double)qir_type_numel(&s[i].out->type) * qir_dtype_size(s[i].out->type.dtype) /
                        (w->t->dram_gbs * 1e3);
    const qir_use *u = s[i].out->uses;
    if (u && !u->next && epilogue_of(u->user, s[i].out)) {
      /* apart, its one elementwise reader would be its epilogue in registers;
       * merged, that reader is a kernel of its own reading its slice */
      merged += w->launch_us + round_trip;
      continue;
    }
    for (; u; u = u->next)
      if (!folds_slice(u->user)) merged += w->launch_us + round_trip;
  }
  if (!(merged < apart) || !apply) {
    if (epi) qir_op_unlink(epi);
    if (bcat) qir_op_unlink(bcat);
    qir_op_unlink(merged_con);
    if (ccat) qir_op_unlink(ccat);
    qir_op_unlink(wcat);
    return merged < apart;
  }
  if (wcat->code == QIR_OP_CONCAT) roller_plan_op(m, wcat, w->t, ro, NULL, NULL);
  if (ccat && ccat->code == QIR_OP_CONCAT) roller_plan_op(m, ccat, w->t, ro, NULL, NULL);
  if (bcat && bcat->code == QIR_OP_CONCAT) roller_plan_op(m, bcat, w->t, ro, NULL, NULL);
  if (epi) roller_plan_op(m, epi, w->t, ro, NULL, NULL);
  qir_value *merged_out = with_epi ? epi->results[0] : merged_con->results[0];
  /* one slice per reader, right before it */
  int64_t offset = 0;
  for (int i = 0; i < n; i++) {
    qir_value *v = s[i].out;
    int64_t width = v->type.dims[out_axis];
    int64_t starts[QIR_MAX_RANK], ends[QIR_MAX_RANK];
    for (int d = 0; d < out_rank; d++) {
      starts[d] = 0;
      ends[d] = v->type.dims[d];
    }
    starts[out_axis] = offset;
    ends[out_axis] = offset + width;
    while (v->uses) {
      qir_op *user = v->uses->user;
      qir_op *sl = qir_op_new(m, QIR_OP_SLICE, 1, &merged_out, 1, &v->type, user->loc);
      qir_op_set_attr(m, sl, "starts", qir_attr_ints(m, out_rank, starts), false);
      qir_op_set_attr(m, sl, "ends", qir_attr_ints(m, out_rank, ends), false);
      sl->results[0]->name = v->name;
      qir_op *where = user;   /* the module body ends with its outputs */
      while (where->code == QIR_OP_OUTPUT && where->prev && where->prev->code == QIR_OP_OUTPUT) where = where->prev;
      qir_op_insert_before(where, sl);
      roller_plan_op(m, sl, w->t, ro, NULL, NULL);
      for (int k = 0; k < user->n_operands; k++)
        if (user->operands[k] == v) qir_op_set_operand(m, user, k, sl->results[0]);
    }
    offset += width;
  }
  for (int i = 0; i < n; i++) {
    if (s[i].epi) qir_op_unlink(s[i].epi);
    qir_op_unlink(s[i].con);
  }
  drop_unread_consts(bs, n);
  drop_unread_consts(biases, n);
  drop_unread_consts(conv_biases, n);
  return true;
}

bool welder_siblings_merge(const welder_siblings_ctx *w, qir_op *op, bool apply) {
  qir_region *r = op->parent;
  bool conv = is_conv(op);
  if (!r || !(conv || is_matmul(op))) return false;
  /* the candidates: later matmuls over the same A (convs over the same input), compatible with op */
  sibling cand[MAX_SIBLINGS];
  int n = 0;
  for (qir_op *q = op; q && n < MAX_SIBLINGS; q = q->next)
    if (conv ? is_conv(q) && q->operands[0] == op->operands[0] && compatible_conv(op, q)
             : is_matmul(q) && q->operands[0] == op->operands[0] && compatible(op, q))
      cand[n++] = (sibling){.con = q, .out = q->results[0]};
  if (n < 2) return false;
  /* (replanning each: only where there are siblings at all) */
  int kept = 0;
  for (int i = 0; i < n; i++)
    if (roller_planned(w, cand[i].con)) cand[kept++] = cand[i];
  n = kept;
  if (n < 2 || cand[0].con != op) return false;
  /* the epilogues merge only when every sibling has one of the same kind */
  bool with_epi = true;
  int epi_k = -1;
  for (int i = 0; conv && i < n && with_epi; i++)
    with_epi = find_unary_epilogue(&cand[i]) && cand[i].epi->code == cand[0].epi->code &&
               same_attrs(cand[i].epi, cand[0].epi);
  for (int i = 0; !conv && i < n && with_epi; i++) {
    int k = -1;
    with_epi = find_epilogue(&cand[i], &k) && (epi_k < 0 || k == epi_k) && cand[i].epi->code == cand[0].epi->code;
    epi_k = k;
  }
  /* each its own epilogue, whose vector is no sibling's result */
  for (int i = 0; !conv && i < n && with_epi; i++)
    for (int j = 0; j < n && with_epi; j++)
      with_epi = (i == j || cand[i].epi != cand[j].epi) && cand[i].bias != cand[j].con->results[0];
  for (int i = 0; i < n; i++) {
    if (!with_epi) cand[i].epi = NULL, cand[i].bias = NULL;
    cand[i].out = with_epi ? cand[i].epi->results[0] : cand[i].con->results[0];
  }
  /* greedily, in order: those the merged op can sit between (operands before, reads after) */
  sibling pick[MAX_SIBLINGS];
  int n_pick = 0, last_def = def_position(r, op->operands[0]), first_read = INT32_MAX;
  for (int i = 0; i < n; i++) {
    int d = def_position(r, cand[i].con->operands[1]);
    if (conv) {
      int b = def_position(r, cand[i].con->operands[2]);
      if (b > d) d = b;
    }
    if (with_epi && cand[i].bias) {
      int b = def_position(r, cand[i].bias);
      if (b > d) d = b;
    }
    int u = first_use(r, cand[i].out);
    int nd = d > last_def ? d : last_def, nu = u < first_read ? u : first_read;
    if (u < 0 || nd >= nu) continue;
    last_def = nd;
    first_read = nu;
    pick[n_pick++] = cand[i];
  }
  if (n_pick < 2 || pick[0].con != op || results_meet(pick, n_pick)) return false;
  return merge(w, r, pick, n_pick, with_epi, epi_k, apply);
}
