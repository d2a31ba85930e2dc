/* ops.c: the shape/type rule of every op in ops.def.
 *
 * One function per kind of rule (unary, broadcasting, reduction, windowed, ...);
 * rule_for() picks it by op code.  A rule reads only the op's operands and
 * attributes, except for ops whose result shape the result type carries
 * (reshape, expand, tile, split, one_hot, range, input, const, if, cast's
 * dtype): those rules check consistency and return the types already set.  So
 * the importer may build an unlinked op with placeholder result types, ask for
 * its types and then set them. */
#include "opsutil.h"

#include <math.h>
#include <string.h>

typedef struct {
  qir_module *m;
  const qir_op *op;
  qir_type *out;
  qir_diag *d;
} rule_ctx;

typedef bool (*rule_fn)(rule_ctx *c);

__attribute__((format(printf, 2, 3))) static bool fail(rule_ctx *c, const char *fmt, ...) {
  if (!c->d) return false;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  qir_error(c->d, c->op->loc, "'%s': %s", qir_opinfo_get(c->op->code)->name, msg);
  return false;
}

static const qir_type *operand_type(rule_ctx *c, int i) { return &c->op->operands[i]->type; }

/* The type the result already has (for rules that carry it). */
static const qir_type *declared(rule_ctx *c, int i) { return &c->op->results[i]->type; }

/* ---------------------------------------------------------------- attributes */

/* An optional int attribute; false (reported) if present with another kind. */
static bool attr_int(rule_ctx *c, const char *key, int64_t dflt, int64_t *v) {
  qir_attr *a = qir_op_attr(c->op, key);
  *v = dflt;
  if (!a) return true;
  if (a->val.kind != QIR_ATTR_INT) return fail(c, "attribute '%s' must be an integer", key);
  *v = a->val.i;
  return true;
}

/* An optional list of ints; *n = -1 when absent.  Required lists report absence. */
static bool attr_ints(rule_ctx *c, const char *key, bool required, int64_t *v, int cap, int *n) {
  qir_attr *a = qir_op_attr(c->op, key);
  *n = -1;
  if (!a) return required ? fail(c, "missing attribute '%s'", key) : true;
  int k = qir_op_attr_ints(c->op, key, v, cap);
  if (k < 0) return fail(c, "attribute '%s' must be a list of integers", key);
  if (k > cap) return fail(c, "attribute '%s' has too many entries (%d)", key, k);
  *n = k;
  return true;
}

/* An axis attribute, already normalised to [0, limit). */
static bool attr_axis(rule_ctx *c, const char *key, int64_t dflt, int limit, int64_t *axis) {
  if (!attr_int(c, key, dflt, axis)) return false;
  if (*axis < 0 || *axis >= limit)
    return fail(c, "%s %lld out of range [0, %d)", key, (long long)*axis, limit);
  return true;
}

/* ---------------------------------------------------------------- shared helpers */

bool qir_broadcast_shape(const qir_type *a, const qir_type *b, qir_type *out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  qir_type t = *a;
  t.rank = r;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    t.dims[i] = da == 1 ? db : da;
  }
  *out = t;
  return true;
}

int qir_rnn_gates(qir_opcode code) { return code == QIR_OP_LSTM ? 4 : code == QIR_OP_GRU ? 3 : 1; }

static bool same_dtype(rule_ctx *c, int first, int last) {
  for (int i = first + 1; i <= last; i++)
    if (operand_type(c, i)->dtype != operand_type(c, first)->dtype)
      return fail(c, "operand #%d has type %s but operand #%d has %s", i, tstr(operand_type(c, i)).s,
                  first, tstr(operand_type(c, first)).s);
  return true;
}

static bool same_dims(const qir_type *a, const qir_type *b) {
  qir_type t = *a;
  t.dtype = b->dtype;
  return qir_type_equal(&t, b);
}

static bool is_scalar(const qir_type *t) { return qir_type_numel(t) == 1 && t->rank <= 1; }

/* Result with the shape of `shape` and element type dt. */
static qir_type with_dtype(const qir_type *shape, qir_dtype dt) {
  qir_type t = *shape;
  t.dtype = dt;
  return t;
}

/* Element-type classes the unary/binary rules require. */
typedef enum { DT_ANY, DT_NUMERIC, DT_FLOAT, DT_BOOL, DT_INT } dtype_class;

static bool dtype_in(qir_dtype t, dtype_class k) {
  switch (k) {
  case DT_NUMERIC: return t != QIR_BOOL;
  case DT_FLOAT: return qir_dtype_is_float(t);
  case DT_BOOL: return t == QIR_BOOL;
  case DT_INT: return qir_dtype_is_signed_int(t) || qir_dtype_is_unsigned_int(t);
  default: return true;
  }
}

static const char *dtype_class_name(dtype_class k) {
  switch (k) {
  case DT_NUMERIC: return "a numeric";
  case DT_FLOAT: return "a floating-point";
  case DT_BOOL: return "a bool";
  case DT_INT: return "an integer";
  default: return "any";
  }
}

static bool require_class(rule_ctx *c, int i, dtype_class k) {
  if (!dtype_in(operand_type(c, i)->dtype, k))
    return fail(c, "operand #%d must have %s element type, not %s", i, dtype_class_name(k),
                tstr(operand_type(c, i)).s);
  return true;
}

/* Operand classes of the elementwise ops. */
static dtype_class elementwise_class(qir_opcode code) {
  switch (code) {
  case QIR_OP_IDENTITY: case QIR_OP_CAST: case QIR_OP_EQUAL: case QIR_OP_WHERE:
    return DT_ANY;
  case QIR_OP_NEG: case QIR_OP_ABS: case QIR_OP_RELU: case QIR_OP_SIGN: case QIR_OP_CLIP:
  case QIR_OP_ADD: case QIR_OP_SUB: case QIR_OP_MUL: case QIR_OP_DIV: case QIR_OP_MOD:
  case QIR_OP_POW: case QIR_OP_MAX: case QIR_OP_MIN: case QIR_OP_SUM: case QIR_OP_MEAN:
  case QIR_OP_LESS: case QIR_OP_LESS_EQUAL: case QIR_OP_GREATER: case QIR_OP_GREATER_EQUAL:
  case QIR_OP_PRELU:
    return DT_NUMERIC;
  case QIR_OP_NOT: case QIR_OP_AND: case QIR_OP_OR: case QIR_OP_XOR:
    return DT_BOOL;
  case QIR_OP_BITWISE_AND: case QIR_OP_BITWISE_OR: case QIR_OP_BITWISE_XOR: case QIR_OP_BIT_SHIFT:
  case QIR_OP_BITWISE_NOT:
    return DT_INT;
  default:
    return DT_FLOAT;
  }
}

static bool returns_bool(qir_opcode code) {
  switch (code) {
  case QIR_OP_ISNAN: case QIR_OP_EQUAL: case QIR_OP_LESS: case QIR_OP_LESS_EQUAL:
  case QIR_OP_GREATER: case QIR_OP_GREATER_EQUAL: case QIR_OP_AND: case QIR_OP_OR: case QIR_OP_XOR:
    return true;
  default:
    return false;
  }
}

/* ---------------------------------------------------------------- rules */

/* input, const, if: the declared types are the types. */
static bool rule_declared(rule_ctx *c) {
  for (int i = 0; i < c->op->n_results; i++) c->out[i] = *declared(c, i);
  return true;
}

static bool rule_none(rule_ctx *c) {
  (void)c;
  return true;
}

static bool rule_compute(rule_ctx *c) {
  const qir_compute *k = c->op->comp;
  if (!k) return fail(c, "has no expression");
  const qir_type *t = declared(c, 0);
  if (t->rank != k->n_axes)
    return fail(c, "%d axes but the result %s has rank %d", k->n_axes, tstr(t).s, t->rank);
  for (int i = 0; i < k->n_axes; i++)
    if (k->axis_extents[i] != t->dims[i])
      return fail(c, "axis '%s' has extent %lld but result dim %d is %lld", k->axis_names[i],
                  (long long)k->axis_extents[i], i, (long long)t->dims[i]);
  c->out[0] = *t;
  return true;
}

/* Unary elementwise: same shape; dtype per op. */
static bool rule_unary(rule_ctx *c) {
  qir_opcode code = c->op->code;
  if (!require_class(c, 0, elementwise_class(code))) return false;
  const qir_type *x = operand_type(c, 0);
  c->out[0] = *x;
  if (returns_bool(code)) c->out[0].dtype = QIR_BOOL;
  if (code == QIR_OP_CAST) {
    /* `to` names the result dtype when present, else the declared type does. */
    const char *to = qir_op_attr_str(c->op, "to", NULL);
    qir_dtype dt = declared(c, 0)->dtype;
    if (to && !qir_dtype_from_name(to, strlen(to), &dt)) return fail(c, "unknown element type '%s' in 'to'", to);
    c->out[0].dtype = dt;
  }
  if (code == QIR_OP_CLIP) {
    for (int i = 1; i <= 2; i++)
      if (!is_scalar(operand_type(c, i)))
        return fail(c, "operand #%d must be a scalar, not %s", i, tstr(operand_type(c, i)).s);
    if (!same_dtype(c, 0, 2)) return false;
  }
  return true;
}

/* Broadcasting elementwise ops (binary, n-ary, where, prelu). */
static bool rule_broadcast(rule_ctx *c) {
  qir_opcode code = c->op->code;
  int n = c->op->n_operands;
  int first = code == QIR_OP_WHERE ? 1 : 0;
  if (code == QIR_OP_WHERE && operand_type(c, 0)->dtype != QIR_BOOL)
    return fail(c, "condition must be bool, not %s", tstr(operand_type(c, 0)).s);
  for (int i = first; i < n; i++)
    if (!require_class(c, i, elementwise_class(code))) return false;
  /* pow's exponent may have another numeric type */
  if (!same_dtype(c, first, code == QIR_OP_POW ? first : n - 1)) return false;
  qir_type shape = *operand_type(c, 0);
  for (int i = 1; i < n; i++)
    if (!qir_broadcast_shape(&shape, operand_type(c, i), &shape))
      return fail(c, "operand shapes %s and %s do not broadcast", tstr(&shape).s, tstr(operand_type(c, i)).s);
  if (code == QIR_OP_PRELU && !same_dims(&shape, operand_type(c, 0)))
    return fail(c, "slope %s does not broadcast to %s", tstr(operand_type(c, 1)).s, tstr(operand_type(c, 0)).s);
  c->out[0] = with_dtype(&shape, returns_bool(code) ? QIR_BOOL : operand_type(c, first)->dtype);
  return true;
}

/* reduce_*: axes (all when absent), keepdims. */
static bool rule_reduce(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int64_t axes[QIR_MAX_RANK], keepdims;
  int n;
  if (!attr_ints(c, "axes", false, axes, QIR_MAX_RANK, &n) || !attr_int(c, "keepdims", 1, &keepdims)) return false;
  if (!require_class(c, 0, DT_NUMERIC)) return false;
  bool reduced[QIR_MAX_RANK] = {false};
  if (n < 0)
    for (int i = 0; i < x->rank; i++) reduced[i] = true;
  for (int i = 0; i < n; i++) {
    if (axes[i] < 0 || axes[i] >= x->rank)
      return fail(c, "axis %lld out of range [0, %d)", (long long)axes[i], x->rank);
    if (reduced[axes[i]]) return fail(c, "axis %lld appears twice", (long long)axes[i]);
    reduced[axes[i]] = true;
  }
  qir_type t = *x;
  t.rank = 0;
  for (int i = 0; i < x->rank; i++) {
    if (!reduced[i]) t.dims[t.rank++] = x->dims[i];
    else if (keepdims) t.dims[t.rank++] = 1;
  }
  c->out[0] = t;
  return true;
}

static bool rule_argminmax(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int64_t axis, keepdims, last;
  if (x->rank == 0) return fail(c, "operand must have rank >= 1");
  if (!attr_axis(c, "axis", 0, x->rank, &axis) || !attr_int(c, "keepdims", 1, &keepdims) ||
      !attr_int(c, "select_last_index", 0, &last) || !require_class(c, 0, DT_NUMERIC))
    return false;
  qir_type t = with_dtype(x, QIR_I64);
  t.rank = 0;
  for (int i = 0; i < x->rank; i++) {
    if (i != axis) t.dims[t.rank++] = x->dims[i];
    else if (keepdims) t.dims[t.rank++] = 1;
  }
  c->out[0] = t;
  return true;
}

static bool rule_top_k(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int64_t axis, k, flag;
  if (x->rank == 0) return fail(c, "operand must have rank >= 1");
  if (!attr_axis(c, "axis", x->rank - 1, x->rank, &axis) || !attr_int(c, "k", -1, &k) ||
      !attr_int(c, "largest", 1, &flag) || !attr_int(c, "sorted", 1, &flag) || !require_class(c, 0, DT_NUMERIC))
    return false;
  if (k < 0 || k > x->dims[axis])
    return fail(c, "k = %lld must be in [0, %lld] (the extent of axis %lld)", (long long)k, (long long)x->dims[axis],
                (long long)axis);
  c->out[0] = *x;
  c->out[0].dims[axis] = k;
  c->out[1] = with_dtype(&c->out[0], QIR_I64);
  return true;
}

static bool rule_reshape(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0), *r = declared(c, 0);
  if (x->dtype != r->dtype) return fail(c, "result %s must keep the element type of %s", tstr(r).s, tstr(x).s);
  if (qir_type_numel(x) != qir_type_numel(r))
    return fail(c, "result %s has %lld elements but the operand %s has %lld", tstr(r).s,
                (long long)qir_type_numel(r), tstr(x).s, (long long)qir_type_numel(x));
  c->out[0] = *r;
  return true;
}

static bool rule_transpose(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int64_t perm[QIR_MAX_RANK];
  int n;
  if (!attr_ints(c, "perm", false, perm, QIR_MAX_RANK, &n)) return false;
  if (n < 0) {
    n = x->rank;
    for (int i = 0; i < n; i++) perm[i] = n - 1 - i;
  }
  if (n != x->rank) return fail(c, "perm has %d entries but the operand has rank %d", n, x->rank);
  bool seen[QIR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    if (perm[i] < 0 || perm[i] >= n || seen[perm[i]]) return fail(c, "perm is not a permutation of 0..%d", n - 1);
    seen[perm[i]] = true;
  }
  qir_type t = *x;
  for (int i = 0; i < n; i++) t.dims[i] = x->dims[perm[i]];
  c->out[0] = t;
  return true;
}

static bool rule_concat(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int64_t axis;
  if (x->rank == 0) return fail(c, "operands must have rank >= 1");
  if (!qir_op_attr(c->op, "axis")) return fail(c, "missing attribute 'axis'");
  if (!attr_axis(c, "axis", 0, x->rank, &axis) || !same_dtype(c, 0, c->op->n_operands - 1)) return false;
  qir_type t = *x;
  for (int i = 1; i < c->op->n_operands; i++) {
    const qir_type *y = operand_type(c, i);
    bool ok = y->rank == x->rank;
    for (int k = 0; ok && k < x->rank; k++) ok = k == axis || y->dims[k] == x->dims[k];
    if (!ok) return fail(c, "operand #%d %s does not match %s outside axis %lld", i, tstr(y).s, tstr(x).s, (long long)axis);
    t.dims[axis] += y->dims[axis];
  }
  c->out[0] = t;
  return true;
}

static bool rule_split(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int64_t axis;
  if (x->rank == 0) return fail(c, "operand must have rank >= 1");
  if (!attr_axis(c, "axis", 0, x->rank, &axis)) return false;
  int64_t total = 0;
  for (int i = 0; i < c->op->n_results; i++) {
    const qir_type *r = declared(c, i);
    bool ok = r->rank == x->rank && r->dtype == x->dtype;
    for (int k = 0; ok && k < x->rank; k++) ok = k == axis || r->dims[k] == x->dims[k];
    if (!ok) return fail(c, "result #%d %s does not match %s outside axis %lld", i, tstr(r).s, tstr(x).s, (long long)axis);
    total += r->dims[axis];
    c->out[i] = *r;
  }
  if (total != x->dims[axis])
    return fail(c, "result sizes along axis %lld sum to %lld, not %lld", (long long)axis, (long long)total,
                (long long)x->dims[axis]);
  return true;
}

static bool rule_slice(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int64_t starts[QIR_MAX_RANK], ends[QIR_MAX_RANK], steps[QIR_MAX_RANK];
  int ns, ne, nst;
  if (!attr_ints(c, "starts", true, starts, QIR_MAX_RANK, &ns) || !attr_ints(c, "ends", true, ends, QIR_MAX_RANK, &ne) ||
      !attr_ints(c, "steps", false, steps, QIR_MAX_RANK, &nst))
    return false;
  if (nst < 0) {
    nst = x->rank;
    for (int i = 0; i < nst; i++) steps[i] = 1;
  }
  if (ns != x->rank || ne != x->rank || nst != x->rank)
    return fail(c, "starts, ends and steps need one entry per dimension (%d)", x->rank);
  qir_type t = *x;
  for (int i = 0; i < x->rank; i++) {
    int64_t d = x->dims[i], s = starts[i], e = ends[i], st = steps[i];
    /* clamped ranges: step > 0: 0 <= start, end <= d; step < 0: -1 <= end, start <= d-1 */
    if (st == 0) return fail(c, "step of dimension %d is 0", i);
    bool ok = st > 0 ? (s >= 0 && s <= d && e >= 0 && e <= d) : (s >= 0 && s <= d - 1 && e >= -1 && e <= d - 1);
    if (!ok && !(st < 0 && d == 0))
      return fail(c, "start %lld / end %lld out of range for dimension %d of extent %lld", (long long)s,
                  (long long)e, i, (long long)d);
    /* s and e are within [-1, d] here; the step may be anything but 0 */
    int64_t span = st > 0 ? e - s : s - e;
    uint64_t ust = st > 0 ? (uint64_t)st : -(uint64_t)st;
    t.dims[i] = span > 0 ? (int64_t)(((uint64_t)span - 1) / ust + 1) : 0;
  }
  c->out[0] = t;
  return true;
}

static bool rule_pad(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int64_t pads[2 * QIR_MAX_RANK];
  int n;
  if (!attr_ints(c, "pads", true, pads, 2 * QIR_MAX_RANK, &n)) return false;
  if (n != 2 * x->rank) return fail(c, "pads needs %d entries, not %d", 2 * x->rank, n);
  const char *mode = qir_op_attr_str(c->op, "mode", "constant");
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "wrap"))
    return fail(c, "unknown mode '%s'", mode);
  if (!is_scalar(operand_type(c, 1))) return fail(c, "pad value must be a scalar, not %s", tstr(operand_type(c, 1)).s);
  if (!same_dtype(c, 0, 1)) return false;
  qir_type t = *x;
  for (int i = 0; i < x->rank; i++) {
    if (__builtin_add_overflow(x->dims[i], pads[i], &t.dims[i]) ||
        __builtin_add_overflow(t.dims[i], pads[i + x->rank], &t.dims[i]))
      return fail(c, "pads of dimension %d are out of range", i);
    if (t.dims[i] < 0) return fail(c, "pads make dimension %d negative", i);
    if (!strcmp(mode, "reflect") && (pads[i] >= x->dims[i] || pads[i + x->rank] >= x->dims[i]) &&
        (pads[i] > 0 || pads[i + x->rank] > 0))
      return fail(c, "reflect pads of dimension %d must be smaller than its extent %lld", i, (long long)x->dims[i]);
  }
  c->out[0] = t;
  return true;
}

static bool rule_expand(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0), *r = declared(c, 0);
  qir_type b;
  if (x->dtype != r->dtype || !qir_broadcast_shape(x, r, &b) || !same_dims(&b, r))
    return fail(c, "operand %s does not broadcast to the result %s", tstr(x).s, tstr(r).s);
  c->out[0] = *r;
  return true;
}

static bool rule_tile(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0), *r = declared(c, 0);
  bool ok = x->dtype == r->dtype && x->rank == r->rank;
  for (int i = 0; ok && i < x->rank; i++) ok = x->dims[i] ? r->dims[i] % x->dims[i] == 0 : r->dims[i] == 0;
  if (!ok) return fail(c, "result %s is not a whole tiling of %s", tstr(r).s, tstr(x).s);
  c->out[0] = *r;
  return true;
}

static bool rule_gather(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0), *idx = operand_type(c, 1);
  int64_t axis;
  if (x->rank == 0) return fail(c, "data must have rank >= 1");
  if (!attr_axis(c, "axis", 0, x->rank, &axis)) return false;
  if (idx->dtype != QIR_I64 && idx->dtype != QIR_I32) return fail(c, "indices must be i32 or i64, not %s", tstr(idx).s);
  qir_type t = *x;
  if (c->op->code == QIR_OP_GATHER_ELEMENTS) {
    if (idx->rank != x->rank) return fail(c, "indices %s must have the rank of data %s", tstr(idx).s, tstr(x).s);
    c->out[0] = with_dtype(idx, x->dtype);
    return true;
  }
  if (x->rank + idx->rank - 1 > QIR_MAX_RANK) return fail(c, "result rank exceeds %d", QIR_MAX_RANK);
  t.rank = 0;
  for (int i = 0; i < axis; i++) t.dims[t.rank++] = x->dims[i];
  for (int i = 0; i < idx->rank; i++) t.dims[t.rank++] = idx->dims[i];
  for (int i = (int)axis + 1; i < x->rank; i++) t.dims[t.rank++] = x->dims[i];
  c->out[0] = t;
  return true;
}

static bool rule_gather_nd(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0), *idx = operand_type(c, 1);
  int64_t b;
  if (!attr_int(c, "batch_dims", 0, &b)) return false;
  if (idx->dtype != QIR_I64 && idx->dtype != QIR_I32) return fail(c, "indices must be i32 or i64, not %s", tstr(idx).s);
  if (idx->rank < 1 || b < 0 || b >= idx->rank || b >= x->rank) return fail(c, "batch_dims %lld does not fit data %s and indices %s", (long long)b, tstr(x).s, tstr(idx).s);
  int64_t m = idx->dims[idx->rank - 1];
  if (m < 1 || b + m > x->rank) return fail(c, "indices' last dim %lld must be in [1, %lld]", (long long)m, (long long)(x->rank - b));
  for (int i = 0; i < b; i++)
    if (x->dims[i] != idx->dims[i]) return fail(c, "batch dim %d differs between data %s and indices %s", i, tstr(x).s, tstr(idx).s);
  qir_type t = *x;
  t.rank = 0;
  if (idx->rank - 1 + x->rank - b - m > QIR_MAX_RANK) return fail(c, "result rank exceeds %d", QIR_MAX_RANK);
  for (int i = 0; i < idx->rank - 1; i++) t.dims[t.rank++] = idx->dims[i];
  for (int64_t i = b + m; i < x->rank; i++) t.dims[t.rank++] = x->dims[i];
  c->out[0] = t;
  return true;
}

static bool rule_scatter(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0), *idx = operand_type(c, 1), *upd = operand_type(c, 2);
  const char *red = qir_op_attr_str(c->op, "reduction", "none");
  if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") && strcmp(red, "min"))
    return fail(c, "reduction must be none, add, mul, max or min, not '%s'", red);
  if (idx->dtype != QIR_I64 && idx->dtype != QIR_I32) return fail(c, "indices must be i32 or i64, not %s", tstr(idx).s);
  if (upd->dtype != x->dtype) return fail(c, "updates %s must have the element type of data %s", tstr(upd).s, tstr(x).s);
  if (x->rank == 0) return fail(c, "data must have rank >= 1");
  if (c->op->code == QIR_OP_SCATTER_ELEMENTS) {
    int64_t axis;
    if (!attr_axis(c, "axis", 0, x->rank, &axis)) return false;
    if (idx->rank != x->rank || !same_dims(idx, upd)) return fail(c, "indices %s and updates %s must have data's rank and one shape", tstr(idx).s, tstr(upd).s);
    for (int i = 0; i < x->rank; i++)
      if (i != axis && idx->dims[i] > x->dims[i]) return fail(c, "indices %s exceed data %s on axis %d", tstr(idx).s, tstr(x).s, i);
  } else {
    int64_t m = idx->rank ? idx->dims[idx->rank - 1] : 0;
    if (idx->rank < 1 || m < 1 || m > x->rank) return fail(c, "indices %s must be [.., m] with 1 <= m <= %d", tstr(idx).s, x->rank);
    qir_type want = *upd;
    want.rank = 0;
    for (int i = 0; i < idx->rank - 1; i++) want.dims[want.rank++] = idx->dims[i];
    for (int64_t i = m; i < x->rank; i++) want.dims[want.rank++] = x->dims[i];
    if (idx->rank - 1 + x->rank - m > QIR_MAX_RANK || !same_dims(&want, upd))
      return fail(c, "updates %s must be %s", tstr(upd).s, tstr(&want).s);
  }
  c->out[0] = *x;
  return true;
}

static bool rule_grid_sample(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0), *g = operand_type(c, 1);
  const char *mode = qir_op_attr_str(c->op, "mode", "linear"), *pad = qir_op_attr_str(c->op, "padding_mode", "zeros");
  if (strcmp(mode, "linear") && strcmp(mode, "nearest") && strcmp(mode, "cubic"))
    return fail(c, "mode must be linear, nearest or cubic, not '%s'", mode);
  if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
    return fail(c, "padding_mode must be zeros, border or reflection, not '%s'", pad);
  if (!require_class(c, 0, DT_FLOAT) || !require_class(c, 1, DT_FLOAT)) return false;
  int k = x->rank - 2;
  if (k < 1) return fail(c, "x must be [N, C, spatial...], not %s", tstr(x).s);
  if (g->rank < 2 || g->dims[0] != x->dims[0] || g->dims[g->rank - 1] != k)
    return fail(c, "grid %s must be [N, ..., %d] for x %s", tstr(g).s, k, tstr(x).s);
  if (g->rank > QIR_MAX_RANK) return fail(c, "result rank exceeds %d", QIR_MAX_RANK);
  qir_type t = *x;
  t.rank = g->rank;
  for (int i = 2; i < g->rank; i++) t.dims[i] = g->dims[i - 1];
  c->out[0] = t;
  return true;
}

static bool rule_resize(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  double scales[QIR_MAX_RANK];
  int n = qir_op_attr_floats(c->op, "scales", scales, QIR_MAX_RANK);
  if (n < 0) return fail(c, "missing attribute 'scales' (a list of numbers)");
  if (n != x->rank) return fail(c, "scales has %d entries but the operand has rank %d", n, x->rank);
  const char *mode = qir_op_attr_str(c->op, "mode", "nearest");
  if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
    return fail(c, "unknown mode '%s'", mode);
  qir_type t = *x;
  for (int i = 0; i < n; i++) {
    if (!(scales[i] > 0)) return fail(c, "scale %g of dimension %d must be positive", scales[i], i);
    /* floor(in*scale), forgiving the rounding of scales the importer derived from sizes */
    double v = (double)x->dims[i] * scales[i], r = round(v);
    t.dims[i] = (int64_t)(fabs(v - r) < 1e-6 * (r > 1 ? r : 1) ? r : floor(v));
    /* keep_aspect_ratio_policy rounds in*scale to the nearest: a declared
     * result may say so */
    const qir_type *d = declared(c, 0);
    if (d->rank == x->rank && d->dims[i] == (int64_t)floor(v + 0.5)) t.dims[i] = d->dims[i];
  }
  c->out[0] = t;
  return true;
}

static bool rule_depth_space(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int64_t b;
  if (x->rank != 4) return fail(c, "operand must be 4-D [N,C,H,W], not %s", tstr(x).s);
  if (!attr_int(c, "blocksize", 0, &b)) return false;
  if (b <= 0) return fail(c, "needs a positive 'blocksize'");
  if (b > (1 << 20)) return fail(c, "'blocksize' %lld is out of range", (long long)b);
  const char *mode = qir_op_attr_str(c->op, "mode", "DCR");
  if (strcmp(mode, "DCR") && strcmp(mode, "CRD")) return fail(c, "mode must be DCR or CRD, not '%s'", mode);
  qir_type t = *x;
  if (c->op->code == QIR_OP_DEPTH_TO_SPACE) {
    if (x->dims[1] % (b * b)) return fail(c, "channels %lld not divisible by blocksize^2", (long long)x->dims[1]);
    t.dims[1] /= b * b;
    if (__builtin_mul_overflow(t.dims[2], b, &t.dims[2]) || __builtin_mul_overflow(t.dims[3], b, &t.dims[3]))
      return fail(c, "blocksize %lld makes the spatial dims of %s too large", (long long)b, tstr(x).s);
  } else {
    if (x->dims[2] % b || x->dims[3] % b) return fail(c, "spatial dims of %s not divisible by blocksize", tstr(x).s);
    if (__builtin_mul_overflow(t.dims[1], b * b, &t.dims[1]))
      return fail(c, "blocksize %lld makes the channels of %s too many", (long long)b, tstr(x).s);
    t.dims[2] /= b, t.dims[3] /= b;
  }
  c->out[0] = t;
  return true;
}

/* Value of a scalar operand when a const defines it. */
static bool const_scalar(rule_ctx *c, int i, double *v) {
  qir_value *x = c->op->operands[i];
  if (!x->def || x->def->code != QIR_OP_CONST || !x->def->cst || !c->m) return false;
  if (!x->def->cst->splat && !x->def->cst->data) return false; /* no file reads here */
  *v = qir_const_elem(c->m, x->def, 0, NULL);
  return true;
}

static bool rule_range(rule_ctx *c) {
  const qir_type *r = declared(c, 0);
  for (int i = 0; i < 3; i++)
    if (!is_scalar(operand_type(c, i))) return fail(c, "operand #%d must be a scalar", i);
  if (!same_dtype(c, 0, 2) || !require_class(c, 0, DT_NUMERIC)) return false;
  if (r->rank != 1 || r->dtype != operand_type(c, 0)->dtype)
    return fail(c, "result must be 1-D %s, not %s", qir_dtype_name(operand_type(c, 0)->dtype), tstr(r).s);
  double start, limit, delta;
  if (const_scalar(c, 0, &start) && const_scalar(c, 1, &limit) && const_scalar(c, 2, &delta)) {
    if (delta == 0) return fail(c, "delta is 0");
    double n = ceil((limit - start) / delta);
    int64_t want = n > 0 ? (int64_t)n : 0;
    if (want != r->dims[0]) return fail(c, "has %lld elements, not %lld", (long long)want, (long long)r->dims[0]);
  }
  c->out[0] = *r;
  return true;
}

static bool rule_same_shape(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  qir_opcode code = c->op->code;
  int64_t axis;
  if (code == QIR_OP_TRILU && x->rank < 2) return fail(c, "operand must have rank >= 2");
  if ((code == QIR_OP_CUMSUM || code == QIR_OP_CUMPROD || code == QIR_OP_SOFTMAX || code == QIR_OP_LOG_SOFTMAX ||
       code == QIR_OP_LP_NORMALIZATION)) {
    if (x->rank == 0) return fail(c, "operand must have rank >= 1");
    /* cumsum's axis is required (verify.c); 0 as eval.c and te.c if absent */
    if (!attr_axis(c, "axis", code == QIR_OP_CUMSUM || code == QIR_OP_CUMPROD ? 0 : x->rank - 1, x->rank, &axis)) return false;
  }
  if (code == QIR_OP_SOFTMAX || code == QIR_OP_LOG_SOFTMAX || code == QIR_OP_LRN) {
    if (!require_class(c, 0, DT_FLOAT)) return false;
  }
  if (code == QIR_OP_LRN) {
    int64_t size;
    if (x->rank < 3) return fail(c, "operand must have rank >= 3 [N,C,...]");
    if (!attr_int(c, "size", 0, &size)) return false;
    if (size <= 0) return fail(c, "needs a positive 'size'");
  }
  if (code == QIR_OP_LP_NORMALIZATION) {
    int64_t p;
    if (!attr_int(c, "p", 2, &p)) return false;
    if (p != 1 && p != 2) return fail(c, "p must be 1 or 2");
  }
  c->out[0] = *x;
  return true;
}

static bool rule_one_hot(rule_ctx *c) {
  const qir_type *idx = operand_type(c, 0), *vals = operand_type(c, 1), *r = declared(c, 0);
  int64_t axis;
  if (!require_class(c, 0, DT_NUMERIC)) return false;
  if (vals->rank != 1 || vals->dims[0] != 2) return fail(c, "values must be 1-D with 2 elements, not %s", tstr(vals).s);
  if (idx->rank + 1 > QIR_MAX_RANK) return fail(c, "result rank exceeds %d", QIR_MAX_RANK);
  if (!attr_axis(c, "axis", idx->rank, idx->rank + 1, &axis)) return false;
  bool ok = r->rank == idx->rank + 1 && r->dtype == vals->dtype;
  for (int i = 0, k = 0; ok && i < r->rank; i++)
    if (i != axis) ok = r->dims[i] == idx->dims[k++];
  if (!ok) return fail(c, "result %s is not indices %s with a depth axis at %lld", tstr(r).s, tstr(idx).s, (long long)axis);
  c->out[0] = *r;
  return true;
}

static bool rule_matmul(rule_ctx *c) {
  const qir_type *a = operand_type(c, 0), *b = operand_type(c, 1);
  if (!same_dtype(c, 0, 1) || !require_class(c, 0, DT_NUMERIC)) return false;
  if (a->rank == 0 || b->rank == 0) return fail(c, "operands must have rank >= 1");
  /* 1-D operands: a [K] is [1,K], b [K] is [K,1]; the added dims are dropped */
  qir_type a2 = *a, b2 = *b;
  if (a->rank == 1) a2.rank = 2, a2.dims[0] = 1, a2.dims[1] = a->dims[0];
  if (b->rank == 1) b2.rank = 2, b2.dims[0] = b->dims[0], b2.dims[1] = 1;
  int64_t k1 = a2.dims[a2.rank - 1], k2 = b2.dims[b2.rank - 2];
  if (k1 != k2) return fail(c, "contraction dims differ: %s and %s", tstr(a).s, tstr(b).s);
  qir_type ba = a2, bb = b2, batch;
  ba.rank -= 2, bb.rank -= 2;
  if (!qir_broadcast_shape(&ba, &bb, &batch)) return fail(c, "batch dims of %s and %s do not broadcast", tstr(a).s, tstr(b).s);
  qir_type t = batch;
  if (t.rank + 2 > QIR_MAX_RANK) return fail(c, "result rank exceeds %d", QIR_MAX_RANK);
  if (a->rank > 1) t.dims[t.rank++] = a2.dims[a2.rank - 2];
  if (b->rank > 1) t.dims[t.rank++] = b2.dims[b2.rank - 1];
  t.dtype = a->dtype;
  c->out[0] = t;
  return true;
}

static bool rule_bitcast(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  const char *to = qir_op_attr_str(c->op, "to", NULL);
  qir_dtype dt;
  if (!to || !qir_dtype_from_name(to, strlen(to), &dt)) return fail(c, "attribute 'to' must name an element type");
  if (qir_dtype_size(dt) != qir_dtype_size(x->dtype) || qir_dtype_bits(dt) != qir_dtype_bits(x->dtype) || qir_dtype_bits(dt) < 8)
    return fail(c, "%s and %s differ in size (or are 4-/2-bit types)", qir_dtype_name(x->dtype), to);
  if (dt == QIR_BOOL && x->dtype != QIR_BOOL) return fail(c, "bitcast to bool from %s: bytes other than 0 and 1 are no bool", qir_dtype_name(x->dtype));
  c->out[0] = *x;
  c->out[0].dtype = dt;
  return true;
}

bool qir_attention_bshd(const qir_op *op) { return strcmp(qir_op_attr_str(op, "layout", "bhsd"), "bshd") == 0; }

/* q, k, v and the result are [B,H,S,D] (layout bhsd) or [B,S,H,D] (bshd); the
 * checks read them as bhsd, the result is written back in the layout. */
static qir_type attention_bhsd(const qir_type *t, bool bshd) {
  qir_type r = *t;
  if (bshd && t->rank == 4) r.dims[1] = t->dims[2], r.dims[2] = t->dims[1];
  return r;
}

static bool rule_attention(rule_ctx *c) {
  const char *layout = qir_op_attr_str(c->op, "layout", "bhsd");
  if (strcmp(layout, "bhsd") && strcmp(layout, "bshd")) return fail(c, "layout must be bhsd or bshd, not '%s'", layout);
  bool bshd = !strcmp(layout, "bshd");
  int64_t causal = qir_op_attr_int(c->op, "causal", 0);
  if (causal != 0 && causal != 1) return fail(c, "causal must be 0 or 1, not %lld", (long long)causal);
  const qir_type *b = operand_type(c, 3);
  qir_type qt = attention_bhsd(operand_type(c, 0), bshd), kt = attention_bhsd(operand_type(c, 1), bshd),
           vt = attention_bhsd(operand_type(c, 2), bshd);
  const qir_type *q = &qt, *k = &kt, *v = &vt;
  if (!require_class(c, 0, DT_FLOAT) || !same_dtype(c, 0, 1) || !same_dtype(c, 0, 2) || !same_dtype(c, 0, 3)) return false;
  if (q->rank != 4 || k->rank != 4 || v->rank != 4)
    return fail(c, "q, k and v must be 4-D [batch, %s], not %s, %s and %s", bshd ? "seq, heads, head_size" : "heads, seq, head_size",
                tstr(operand_type(c, 0)).s, tstr(operand_type(c, 1)).s, tstr(operand_type(c, 2)).s);
  if (k->dims[0] != q->dims[0] || v->dims[0] != q->dims[0]) return fail(c, "batch sizes differ: %s, %s and %s", tstr(operand_type(c, 0)).s, tstr(operand_type(c, 1)).s,
                tstr(operand_type(c, 2)).s);
  if (k->dims[3] != q->dims[3]) return fail(c, "q and k head sizes differ: %s and %s", tstr(operand_type(c, 0)).s, tstr(operand_type(c, 1)).s);
  if (v->dims[1] != k->dims[1] || v->dims[2] != k->dims[2])
    return fail(c, "k and v heads or lengths differ: %s and %s", tstr(operand_type(c, 1)).s, tstr(operand_type(c, 2)).s);
  if (k->dims[1] <= 0 || q->dims[1] % k->dims[1])
    return fail(c, "q heads (%lld) must be a multiple of kv heads (%lld)", (long long)q->dims[1], (long long)k->dims[1]);
  qir_type scores = *q;
  scores.dims[3] = k->dims[2];
  qir_type joint;
  bool fits = b->rank <= 4 && qir_broadcast_shape(&scores, b, &joint) && joint.rank == 4;
  for (int i = 0; fits && i < 4; i++) fits = joint.dims[i] == scores.dims[i];
  if (!fits)
    return fail(c, "bias %s does not broadcast to the scores [%lld,%lld,%lld,%lld]", tstr(b).s, (long long)q->dims[0],
                (long long)q->dims[1], (long long)q->dims[2], (long long)k->dims[2]);
  double scale = qir_op_attr_float(c->op, "scale", NAN), softcap = qir_op_attr_float(c->op, "softcap", 0);
  if (!isfinite(scale)) return fail(c, "attribute 'scale' must be a finite number");
  if (!(softcap >= 0)) return fail(c, "softcap must be >= 0 (0: none), not %g", softcap);
  qir_type t = *q;
  t.dims[3] = v->dims[3];
  c->out[0] = attention_bhsd(&t, bshd);
  return true;
}

static bool rule_gemm(rule_ctx *c) {
  const qir_type *a = operand_type(c, 0), *b = operand_type(c, 1), *cc = operand_type(c, 2);
  int64_t ta, tb;
  if (!attr_int(c, "transA", 0, &ta) || !attr_int(c, "transB", 0, &tb)) return false;
  if (a->rank != 2 || b->rank != 2) return fail(c, "A and B must be 2-D, not %s and %s", tstr(a).s, tstr(b).s);
  if (!same_dtype(c, 0, 2) || !require_class(c, 0, DT_NUMERIC)) return false;
  int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
  int64_t K2 = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
  if (K != K2) return fail(c, "contraction dims differ: %s and %s", tstr(a).s, tstr(b).s);
  int64_t mn[2] = {M, N};
  qir_type t = qir_type_make(a->dtype, 2, mn), bc;
  if (!qir_broadcast_shape(cc, &t, &bc) || !same_dims(&bc, &t))
    return fail(c, "C %s does not broadcast to %s", tstr(cc).s, tstr(&t).s);
  c->out[0] = t;
  return true;
}

static bool rule_einsum(rule_ctx *c) {
  const char *eq = qir_op_attr_str(c->op, "equation", NULL);
  if (!eq) return fail(c, "missing attribute 'equation'");
  if (!same_dtype(c, 0, c->op->n_operands - 1)) return false;
  const qir_type *in[QIR_EINSUM_MAX_TERMS];
  if (c->op->n_operands > QIR_EINSUM_MAX_TERMS) return fail(c, "at most %d operands", QIR_EINSUM_MAX_TERMS);
  for (int i = 0; i < c->op->n_operands; i++) in[i] = operand_type(c, i);
  qir_einsum e;
  char err[256];
  if (!qir_einsum_parse(eq, c->op->n_operands, in, &e, err, sizeof err)) return fail(c, "%s", err);
  qir_type t = *in[0];
  t.rank = 0;
  int o = e.n_inputs;
  for (int i = 0; i < e.n_labels[o]; i++) {
    int l = e.labels[o][i];
    if (l == QIR_EINSUM_ELLIPSIS)
      for (int k = 0; k < e.ell_rank; k++) t.dims[t.rank++] = e.ell_dims[k];
    else
      t.dims[t.rank++] = e.extent[l];
  }
  c->out[0] = t;
  return true;
}

/* ---- windowed ops */

static bool window_attrs(rule_ctx *c, const char *key, int n, int64_t *v, int64_t dflt) {
  int k;
  if (!attr_ints(c, key, false, v, 2 * QIR_MAX_RANK, &k)) return false;
  if (k < 0) {
    for (int i = 0; i < n; i++) v[i] = dflt;
    return true;
  }
  if (k != n) return fail(c, "'%s' needs %d entries, not %d", key, n, k);
  /* bounded so that the extent arithmetic below cannot overflow */
  for (int i = 0; i < n; i++)
    if (v[i] > INT32_MAX || v[i] < -INT32_MAX) return fail(c, "'%s' entry %lld is out of range", key, (long long)v[i]);
  return true;
}

bool qir_window_read(const qir_op *op, int n_spatial, const int64_t *kernel_from, qir_window *w, qir_diag *d) {
  rule_ctx ctx = {NULL, op, NULL, d}, *c = &ctx;
  memset(w, 0, sizeof *w);
  w->n_spatial = n_spatial;
  int64_t pads[2 * QIR_MAX_RANK], tmp[2 * QIR_MAX_RANK];
  bool is_pool = op->code == QIR_OP_MAX_POOL || op->code == QIR_OP_AVG_POOL;
  int nk;
  if (!attr_ints(c, "kernel_shape", is_pool, tmp, 2 * QIR_MAX_RANK, &nk)) return false;
  if (nk >= 0 && nk != n_spatial) return fail(c, "'kernel_shape' needs %d entries, not %d", n_spatial, nk);
  for (int i = 0; i < n_spatial; i++) {
    w->kernel[i] = nk >= 0 ? tmp[i] : kernel_from[i];
    if (kernel_from && nk >= 0 && tmp[i] != kernel_from[i])
      return fail(c, "kernel_shape disagrees with the weight's spatial dims");
    if (w->kernel[i] <= 0) return fail(c, "kernel extents must be positive");
    if (w->kernel[i] > INT32_MAX) return fail(c, "kernel extent %lld is out of range", (long long)w->kernel[i]);
  }
  if (!window_attrs(c, "strides", n_spatial, w->strides, 1) || !window_attrs(c, "dilations", n_spatial, w->dilations, 1) ||
      !window_attrs(c, "pads", 2 * n_spatial, pads, 0) ||
      !window_attrs(c, "output_padding", n_spatial, w->output_padding, 0))
    return false;
  for (int i = 0; i < n_spatial; i++) {
    w->pads_begin[i] = pads[i];
    w->pads_end[i] = pads[i + n_spatial];
    if (w->strides[i] <= 0 || w->dilations[i] <= 0) return fail(c, "strides and dilations must be positive");
    if (pads[i] < 0 || pads[i + n_spatial] < 0) return fail(c, "pads must be non-negative");
    if (w->output_padding[i] < 0) return fail(c, "output_padding must be non-negative");
  }
  int64_t v;
  if (!attr_int(c, "group", 1, &w->group) || !attr_int(c, "ceil_mode", 0, &v)) return false;
  w->ceil_mode = v != 0;
  if (!attr_int(c, "count_include_pad", 0, &v)) return false;
  w->count_include_pad = v != 0;
  if (w->group <= 0) return fail(c, "group must be positive");
  if (qir_op_attr(op, "auto_pad") && strcmp(qir_op_attr_str(op, "auto_pad", ""), "NOTSET"))
    return fail(c, "auto_pad must be resolved into pads");
  return true;
}

/* Output extent of a strided window along one dim (conv and pools). */
static bool window_extent(rule_ctx *c, const qir_window *w, int i, int64_t in, int64_t *out) {
  int64_t eff = w->dilations[i] * (w->kernel[i] - 1) + 1;
  int64_t span = in + w->pads_begin[i] + w->pads_end[i] - eff;
  if (span < 0) return fail(c, "window %lld is larger than padded input %lld in spatial dim %d", (long long)eff,
                            (long long)(in + w->pads_begin[i] + w->pads_end[i]), i);
  int64_t s = w->strides[i];
  int64_t o = (w->ceil_mode ? (span + s - 1) / s : span / s) + 1;
  /* ONNX: with ceil_mode, a last window starting in the end padding is dropped */
  if (w->ceil_mode && (o - 1) * s >= in + w->pads_begin[i]) o--;
  *out = o;
  return true;
}

static bool rule_conv(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0), *wt = operand_type(c, 1), *b = operand_type(c, 2);
  bool transpose = c->op->code == QIR_OP_CONV_TRANSPOSE;
  if (x->rank < 3) return fail(c, "input must be [N,C,spatial...], not %s", tstr(x).s);
  if (wt->rank != x->rank) return fail(c, "weight %s must have the rank of the input %s", tstr(wt).s, tstr(x).s);
  if (!same_dtype(c, 0, 2) || !require_class(c, 0, DT_NUMERIC)) return false;
  int ns = x->rank - 2;
  qir_window w;
  if (!qir_window_read(c->op, ns, wt->dims + 2, &w, c->d)) return false;
  int64_t C = x->dims[1], g = w.group, M;
  if (C % g) return fail(c, "input channels %lld not divisible by group %lld", (long long)C, (long long)g);
  if (!transpose) {
    M = wt->dims[0];
    if (wt->dims[1] * g != C)
      return fail(c, "weight %s expects %lld input channels, the input %s has %lld", tstr(wt).s,
                  (long long)(wt->dims[1] * g), tstr(x).s, (long long)C);
    if (M % g) return fail(c, "output channels %lld not divisible by group %lld", (long long)M, (long long)g);
  } else {
    M = wt->dims[1] * g;
    if (wt->dims[0] != C)
      return fail(c, "weight %s expects %lld input channels, the input %s has %lld", tstr(wt).s,
                  (long long)wt->dims[0], tstr(x).s, (long long)C);
  }
  if (b->rank != 1 || b->dims[0] != M) return fail(c, "bias must be [%lld], not %s", (long long)M, tstr(b).s);
  qir_type t = *x;
  t.dims[1] = M;
  for (int i = 0; i < ns; i++) {
    if (!transpose) {
      if (!window_extent(c, &w, i, x->dims[i + 2], &t.dims[i + 2])) return false;
    } else {
      t.dims[i + 2] = w.strides[i] * (x->dims[i + 2] - 1) + w.output_padding[i] +
                      (w.kernel[i] - 1) * w.dilations[i] + 1 - w.pads_begin[i] - w.pads_end[i];
      if (t.dims[i + 2] <= 0) return fail(c, "output spatial dim %d would be %lld", i, (long long)t.dims[i + 2]);
    }
  }
  c->out[0] = t;
  return true;
}

static bool rule_pool(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  if (x->rank < 3) return fail(c, "input must be [N,C,spatial...], not %s", tstr(x).s);
  if (!require_class(c, 0, DT_NUMERIC)) return false;
  qir_type t = *x;
  if (c->op->code == QIR_OP_GLOBAL_AVG_POOL || c->op->code == QIR_OP_GLOBAL_MAX_POOL) {
    for (int i = 2; i < x->rank; i++) t.dims[i] = 1;
    c->out[0] = t;
    return true;
  }
  qir_window w;
  if (!qir_window_read(c->op, x->rank - 2, NULL, &w, c->d)) return false;
  for (int i = 0; i < w.n_spatial; i++)
    if (!window_extent(c, &w, i, x->dims[i + 2], &t.dims[i + 2])) return false;
  c->out[0] = t;
  if (c->op->n_results > 1) c->out[1] = with_dtype(&t, QIR_I64); /* max_pool indices */
  return true;
}

/* ---- normalisations */

static bool require_shape(rule_ctx *c, int i, int rank, const int64_t *dims) {
  qir_type want = qir_type_make(operand_type(c, i)->dtype, rank, dims);
  if (!qir_type_equal(&want, operand_type(c, i)))
    return fail(c, "operand #%d must be %s, not %s", i, tstr(&want).s, tstr(operand_type(c, i)).s);
  return true;
}

static bool rule_norm(rule_ctx *c) {
  const qir_type *x = operand_type(c, 0);
  int n = c->op->n_operands;
  /* batch_norm's scale, bias (T1) and running statistics (T2) may have
   * another float type than its input (ONNX BatchNormalization-15): an f16
   * input normalised by f32 statistics (-autocast) */
  if (c->op->code == QIR_OP_BATCH_NORM) {
    for (int i = 0; i < n; i++)
      if (!require_class(c, i, DT_FLOAT)) return false;
    if (n >= 3 && !same_dtype(c, 1, 2)) return false;
    if (n >= 5 && !same_dtype(c, 3, 4)) return false;
  } else if (!require_class(c, 0, DT_FLOAT) || !same_dtype(c, 0, n - 1)) {
    return false;
  }
  c->out[0] = *x;
  if (c->op->code != QIR_OP_LAYER_NORM) {
    if (x->rank < 2) return fail(c, "input must be [N,C,...], not %s", tstr(x).s);
    for (int i = 1; i < n; i++)
      if (!require_shape(c, i, 1, &x->dims[1])) return false;
    return true;
  }
  int64_t axis, stash;
  if (x->rank == 0) return fail(c, "input must have rank >= 1");
  if (!attr_axis(c, "axis", x->rank - 1, x->rank, &axis) || !attr_int(c, "stash_type", 1, &stash)) return false;
  qir_type norm = *x;
  norm.rank = x->rank - (int)axis;
  memcpy(norm.dims, x->dims + axis, sizeof(int64_t) * (size_t)norm.rank);
  for (int i = 1; i < n; i++) {
    qir_type bc;
    if (!qir_broadcast_shape(operand_type(c, i), &norm, &bc) || !same_dims(&bc, &norm))
      return fail(c, "operand #%d %s does not broadcast to the normalised shape %s", i, tstr(operand_type(c, i)).s,
                  tstr(&norm).s);
  }
  if (c->op->n_results > 3) return fail(c, "has at most 3 results");
  qir_type stat = with_dtype(x, stash == 1 ? QIR_F32 : x->dtype);
  for (int i = (int)axis; i < x->rank; i++) stat.dims[i] = 1;
  for (int i = 1; i < c->op->n_results; i++) c->out[i] = stat;
  return true;
}

/* lstm / gru / rnn */
static bool rule_rnn(rule_ctx *c) {
  const qir_type *X = operand_type(c, 0), *W = operand_type(c, 1), *R = operand_type(c, 2);
  int64_t layout, hidden;
  if (!attr_int(c, "layout", 0, &layout) || !attr_int(c, "hidden_size", R->rank == 3 ? R->dims[2] : 0, &hidden))
    return false;
  const char *dir = qir_op_attr_str(c->op, "direction", "forward");
  int64_t D = !strcmp(dir, "bidirectional") ? 2 : 1;
  if (strcmp(dir, "forward") && strcmp(dir, "reverse") && D != 2) return fail(c, "unknown direction '%s'", dir);
  if (X->rank != 3) return fail(c, "X must be 3-D, not %s", tstr(X).s);
  if (!require_class(c, 0, DT_FLOAT)) return false;
  int64_t T = layout ? X->dims[1] : X->dims[0], B = layout ? X->dims[0] : X->dims[1], I = X->dims[2];
  if (hidden < 0 || hidden > (1 << 24)) return fail(c, "hidden_size %lld is out of range", (long long)hidden);
  int64_t G = qir_rnn_gates(c->op->code), H = hidden;
  int64_t w[3] = {D, G * H, I}, r[3] = {D, G * H, H}, bias[2] = {D, 2 * G * H}, seq[1] = {B};
  int64_t h0[3] = {D, B, H}, p[2] = {D, 3 * H};
  if (layout) h0[0] = B, h0[1] = D;
  if (!require_shape(c, 1, 3, w) || !require_shape(c, 2, 3, r) || !require_shape(c, 3, 2, bias) ||
      !require_shape(c, 4, 1, seq) || !require_shape(c, 5, 3, h0))
    return false;
  if (c->op->code == QIR_OP_LSTM && (!require_shape(c, 6, 3, h0) || !require_shape(c, 7, 2, p))) return false;
  if (W->dtype != X->dtype || R->dtype != X->dtype) return fail(c, "W and R must have the element type of X");
  if (!require_class(c, 4, DT_INT)) return false;
  int64_t y[4] = {T, D, B, H};
  if (layout) y[0] = B, y[1] = T, y[2] = D;
  c->out[0] = qir_type_make(X->dtype, 4, y);
  for (int i = 1; i < c->op->n_results; i++) c->out[i] = qir_type_make(X->dtype, 3, h0);
  return true;
}

/* ---- control flow */

static bool scalar_of(const qir_type *t, qir_dtype dt) { return t->dtype == dt && t->rank == 0; }

static bool rule_loop(rule_ctx *c) {
  const qir_op *op = c->op;
  int n_carried = op->n_operands - 2;
  if (!scalar_of(operand_type(c, 0), QIR_I64)) return fail(c, "trip count must be i64[], not %s", tstr(operand_type(c, 0)).s);
  if (!scalar_of(operand_type(c, 1), QIR_BOOL)) return fail(c, "condition must be bool[], not %s", tstr(operand_type(c, 1)).s);
  if (op->n_results < n_carried)
    return fail(c, "has %d results but carries %d values", op->n_results, n_carried);
  for (int i = 0; i < n_carried; i++) c->out[i] = *operand_type(c, i + 2);
  /* scan outputs: the yielded value stacked on a new axis of the trip count */
  const qir_op *y = op->n_regions ? op->regions[0]->last : NULL;
  int n_scan = op->n_results - n_carried;
  double trip;
  int64_t max_trip;
  bool trip_known = const_scalar(c, 0, &trip) && trip < 9.2e18;
  if (!attr_int(c, "max_trip", -1, &max_trip)) return false;
  for (int i = 0; i < n_scan; i++) {
    c->out[n_carried + i] = *declared(c, n_carried + i);
    if (!y || y->code != QIR_OP_YIELD || y->n_operands != 1 + n_carried + n_scan) continue;
    const qir_type *e = &y->operands[1 + n_carried + i]->type;
    if (e->rank + 1 > QIR_MAX_RANK) return fail(c, "scan output rank exceeds %d", QIR_MAX_RANK);
    qir_type t = *e;
    t.rank = e->rank + 1;
    t.dims[0] = trip_known ? (int64_t)trip : max_trip >= 0 ? max_trip : declared(c, n_carried + i)->dims[0];
    t.bounded = declared(c, n_carried + i)->bounded; /* a declaration: the loop may exit early */
    memcpy(t.dims + 1, e->dims, sizeof(int64_t) * (size_t)e->rank);
    c->out[n_carried + i] = t;
  }
  return true;
}

static bool rule_if(rule_ctx *c) {
  if (!scalar_of(operand_type(c, 0), QIR_BOOL) &&
      !(operand_type(c, 0)->dtype == QIR_BOOL && qir_type_numel(operand_type(c, 0)) == 1))
    return fail(c, "condition must be a bool scalar, not %s", tstr(operand_type(c, 0)).s);
  return rule_declared(c);
}

/* ---------------------------------------------------------------- the table */

static rule_fn rule_for(qir_opcode code) {
  switch (code) {
  case QIR_OP_INPUT: case QIR_OP_CONST: return rule_declared;
  case QIR_OP_OUTPUT: case QIR_OP_YIELD: case QIR_OP_RPROGRAM: return rule_none;
  case QIR_OP_COMPUTE: return rule_compute;
  case QIR_OP_LOOP: return rule_loop;
  case QIR_OP_IF: return rule_if;
  case QIR_OP_KERNEL: case QIR_OP_VERSIONS: return rule_declared;   /* the verifier checks them against the yields */
  case QIR_OP_IDENTITY: case QIR_OP_NEG: case QIR_OP_ABS: case QIR_OP_EXP: case QIR_OP_LOG:
  case QIR_OP_SQRT: case QIR_OP_RECIPROCAL: case QIR_OP_SIGMOID: case QIR_OP_TANH: case QIR_OP_RELU:
  case QIR_OP_ERF: case QIR_OP_CEIL: case QIR_OP_FLOOR: case QIR_OP_ROUND: case QIR_OP_SIN:
  case QIR_OP_COS: case QIR_OP_SIGN: case QIR_OP_NOT: case QIR_OP_ISNAN: case QIR_OP_CAST:
  case QIR_OP_ASIN: case QIR_OP_ACOS: case QIR_OP_ATAN: case QIR_OP_SINH: case QIR_OP_COSH: case QIR_OP_ASINH: case QIR_OP_ACOSH: case QIR_OP_ATANH:
  case QIR_OP_LEAKY_RELU: case QIR_OP_ELU: case QIR_OP_SELU: case QIR_OP_HARD_SIGMOID:
  case QIR_OP_HARD_SWISH: case QIR_OP_SOFTPLUS: case QIR_OP_GELU: case QIR_OP_CLIP: case QIR_OP_BITWISE_NOT:
    return rule_unary;
  case QIR_OP_ADD: case QIR_OP_SUB: case QIR_OP_MUL: case QIR_OP_DIV: case QIR_OP_MOD:
  case QIR_OP_POW: case QIR_OP_MAX: case QIR_OP_MIN: case QIR_OP_SUM: case QIR_OP_MEAN:
  case QIR_OP_EQUAL: case QIR_OP_LESS: case QIR_OP_LESS_EQUAL: case QIR_OP_GREATER:
  case QIR_OP_GREATER_EQUAL: case QIR_OP_AND: case QIR_OP_OR: case QIR_OP_XOR: case QIR_OP_WHERE:
  case QIR_OP_PRELU: case QIR_OP_BITWISE_AND: case QIR_OP_BITWISE_OR: case QIR_OP_BITWISE_XOR:
  case QIR_OP_BIT_SHIFT:
    return rule_broadcast;
  case QIR_OP_REDUCE_SUM: case QIR_OP_REDUCE_MEAN: case QIR_OP_REDUCE_MAX: case QIR_OP_REDUCE_MIN:
  case QIR_OP_REDUCE_PROD: case QIR_OP_REDUCE_L2:
    return rule_reduce;
  case QIR_OP_ARGMAX: case QIR_OP_ARGMIN: return rule_argminmax;
  case QIR_OP_TOP_K: return rule_top_k;
  case QIR_OP_RESHAPE: return rule_reshape;
  case QIR_OP_TRANSPOSE: return rule_transpose;
  case QIR_OP_CONCAT: return rule_concat;
  case QIR_OP_SPLIT: return rule_split;
  case QIR_OP_SLICE: return rule_slice;
  case QIR_OP_PAD: return rule_pad;
  case QIR_OP_EXPAND: return rule_expand;
  case QIR_OP_TILE: return rule_tile;
  case QIR_OP_GATHER: case QIR_OP_GATHER_ELEMENTS: return rule_gather;
  case QIR_OP_GATHER_ND: return rule_gather_nd;
  case QIR_OP_SCATTER_ELEMENTS: case QIR_OP_SCATTER_ND: return rule_scatter;
  case QIR_OP_RESIZE: return rule_resize;
  case QIR_OP_GRID_SAMPLE: return rule_grid_sample;
  case QIR_OP_DEPTH_TO_SPACE: case QIR_OP_SPACE_TO_DEPTH: return rule_depth_space;
  case QIR_OP_RANGE: return rule_range;
  case QIR_OP_TRILU: case QIR_OP_CUMSUM: case QIR_OP_CUMPROD: case QIR_OP_LP_NORMALIZATION: case QIR_OP_LRN:
  case QIR_OP_SOFTMAX: case QIR_OP_LOG_SOFTMAX:
    return rule_same_shape;
  case QIR_OP_ONE_HOT: return rule_one_hot;
  case QIR_OP_MATMUL: return rule_matmul;
  case QIR_OP_ATTENTION: return rule_attention;
  case QIR_OP_BITCAST: return rule_bitcast;
  case QIR_OP_GEMM: return rule_gemm;
  case QIR_OP_EINSUM: return rule_einsum;
  case QIR_OP_CONV: case QIR_OP_CONV_TRANSPOSE: return rule_conv;
  case QIR_OP_MAX_POOL: case QIR_OP_AVG_POOL: case QIR_OP_GLOBAL_AVG_POOL: case QIR_OP_GLOBAL_MAX_POOL:
    return rule_pool;
  case QIR_OP_BATCH_NORM: case QIR_OP_INSTANCE_NORM: case QIR_OP_LAYER_NORM: return rule_norm;
  case QIR_OP_LSTM: case QIR_OP_GRU: case QIR_OP_RNN: return rule_rnn;
  case QIR_OP_COUNT: break;
  }
  return NULL;
}

/* Upper bound on results of ops whose n_results column is a minimum. */
static int max_results(qir_opcode code, const qir_opinfo *info) {
  switch (code) {
  case QIR_OP_MAX_POOL: return 2;
  case QIR_OP_LAYER_NORM: return 3;
  default: return (info->flags & QIR_OPF_VARIADIC_RESULTS) ? 1 << 20 : info->n_results;
  }
}

bool qir_infer_types_static(qir_module *m, const qir_op *op, qir_type *out, qir_diag *d) {
  rule_ctx ctx = {m, op, out, d}, *c = &ctx;
  const qir_opinfo *info = qir_opinfo_get(op->code);
  if (!info) return fail(c, "unknown op code %d", (int)op->code);
  if (op->n_operands < info->min_operands || (info->max_operands >= 0 && op->n_operands > info->max_operands)) {
    if (info->min_operands == info->max_operands)
      return fail(c, "expects %d operand%s, got %d", info->min_operands, info->min_operands == 1 ? "" : "s", op->n_operands);
    if (info->max_operands < 0) return fail(c, "expects at least %d operands, got %d", info->min_operands, op->n_operands);
    return fail(c, "expects %d to %d operands, got %d", info->min_operands, info->max_operands, op->n_operands);
  }
  for (int i = 0; i < op->n_operands; i++)
    if (!op->operands[i]) return fail(c, "operand #%d is missing", i);
  int lo = info->n_results, hi = max_results(op->code, info);
  if (op->n_results < lo || op->n_results > hi) {
    if (lo == hi) return fail(c, "has %d result%s, expected %d", op->n_results, op->n_results == 1 ? "" : "s", lo);
    return fail(c, "has %d results, expected %d to %d", op->n_results, lo, hi > 64 ? 64 : hi);
  }
  for (int i = 0; i < op->n_results; i++) out[i] = op->results[i]->type;
  return rule_for(op->code)(c);
}

/* ---------------------------------------------------------------- einsum */

static int einsum_label(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
  return -1;
}

/* One term ("ij", "...ij", "b...") into labels; returns the end of the term. */
static const char *einsum_term(const char *p, int *labels, int *n, char *err, size_t errlen) {
  *n = 0;
  bool ell = false;
  for (;; p++) {
    if (*p == ' ') continue;
    if (*p == '.') {
      if (p[1] != '.' || p[2] != '.' || ell) {
        snprintf(err, errlen, "bad ellipsis in equation");
        return NULL;
      }
      ell = true;
      p += 2;
      if (*n > QIR_MAX_RANK) goto too_long;
      labels[(*n)++] = QIR_EINSUM_ELLIPSIS;
      continue;
    }
    int l = einsum_label(*p);
    if (l < 0) return p;
    if (*n > QIR_MAX_RANK) goto too_long;
    labels[(*n)++] = l;
  }
too_long:
  snprintf(err, errlen, "equation term has too many labels");
  return NULL;
}

bool qir_einsum_parse(const char *eq, int n_inputs, const qir_type *const *inputs, qir_einsum *e, char *err,
                      size_t errlen) {
  memset(e, 0, sizeof *e);
  const char *p = eq;
  int t = 0;
  for (;;) {
    if (t >= QIR_EINSUM_MAX_TERMS) {
      snprintf(err, errlen, "too many terms in equation");
      return false;
    }
    p = einsum_term(p, e->labels[t], &e->n_labels[t], err, errlen);
    if (!p) return false;
    t++;
    while (*p == ' ') p++;
    if (*p == ',') {
      p++;
      continue;
    }
    break;
  }
  e->n_inputs = t;
  if (t != n_inputs) {
    snprintf(err, errlen, "equation has %d input terms but the op has %d operands", t, n_inputs);
    return false;
  }
  bool explicit_out = false;
  if (p[0] == '-' && p[1] == '>') {
    explicit_out = true;
    p = einsum_term(p + 2, e->labels[t], &e->n_labels[t], err, errlen);
    if (!p) return false;
    while (*p == ' ') p++;
  }
  if (*p) {
    snprintf(err, errlen, "unexpected '%c' in equation", *p);
    return false;
  }
  /* bind labels to dims; ellipsis dims broadcast across inputs */
  int count[52] = {0};
  bool any_ell = false;
  qir_type ell = {.rank = 0};
  for (int i = 0; i < t; i++) {
    const qir_type *x = inputs[i];
    int named = e->n_labels[i], has_ell = 0;
    for (int k = 0; k < e->n_labels[i]; k++)
      if (e->labels[i][k] == QIR_EINSUM_ELLIPSIS) has_ell = 1;
    named -= has_ell;
    if (has_ell ? x->rank < named : x->rank != named) {
      snprintf(err, errlen, "term %d has %d labels but operand #%d has rank %d", i, named, i, x->rank);
      return false;
    }
    int er = x->rank - named, dim = 0;
    e->in_ell_rank[i] = has_ell ? er : 0;
    for (int k = 0; k < e->n_labels[i]; k++) {
      int l = e->labels[i][k];
      if (l == QIR_EINSUM_ELLIPSIS) {
        qir_type part = {.rank = er};
        memcpy(part.dims, x->dims + dim, sizeof(int64_t) * (size_t)er);
        if (!qir_broadcast_shape(&ell, &part, &ell)) {
          snprintf(err, errlen, "ellipsis dims of operand #%d do not broadcast", i);
          return false;
        }
        any_ell = true;
        dim += er;
        continue;
      }
      int64_t ext = x->dims[dim++];
      if (e->used[l] && e->extent[l] != ext) {
        snprintf(err, errlen, "label '%c' has extents %lld and %lld", l < 26 ? 'a' + l : 'A' + l - 26,
                 (long long)e->extent[l], (long long)ext);
        return false;
      }
      e->used[l] = true;
      e->extent[l] = ext;
      count[l]++;
    }
  }
  e->ell_rank = ell.rank;
  memcpy(e->ell_dims, ell.dims, sizeof ell.dims);
  int o = t;
  if (!explicit_out) { /* implicit: ellipsis, then labels seen once, alphabetically */
    int n = 0;
    if (any_ell) e->labels[o][n++] = QIR_EINSUM_ELLIPSIS;
    for (int l = 0; l < 52; l++)
      if (count[l] == 1) {
        if (n > QIR_MAX_RANK) {
          snprintf(err, errlen, "einsum result rank too large");
          return false;
        }
        e->labels[o][n++] = l;
      }
    e->n_labels[o] = n;
  }
  int rank = 0;
  bool seen[52] = {false};
  for (int k = 0; k < e->n_labels[o]; k++) {
    int l = e->labels[o][k];
    if (l == QIR_EINSUM_ELLIPSIS) {
      rank += ell.rank;
      continue;
    }
    if (!e->used[l] || seen[l]) {
      snprintf(err, errlen, "output label '%c' %s", l < 26 ? 'a' + l : 'A' + l - 26,
               seen[l] ? "appears twice" : "is not in any input");
      return false;
    }
    seen[l] = true;
    rank++;
  }
  if (rank > QIR_MAX_RANK) {
    snprintf(err, errlen, "einsum result rank too large");
    return false;
  }
  return true;
}
