/* verify.c: the IR verifier.  Checks, for every op of a module:
 *   - operand/result counts and result types (the op table's shape rule, ops.c);
 *   - SSA dominance: an operand is defined earlier in the same region or in an
 *     enclosing one; region arguments are visible only inside their region;
 *   - region structure: yield only as the last op of nested regions, loop/if
 *     region arguments and yields, input/output only in the module body, the
 *     module body ending with its outputs;
 *   - attributes: the kinds and allowed values of the attributes ops.def names;
 *   - compute bodies and const payloads;
 *   - #device plans of loop/if (rules in device.c).
 * Every message carries the location of the op (or attribute / expression). */
#include "opsutil.h"
#include "target.h"
#include "rprogram.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  qir_module *m;
  qir_diag *d;
  int *scope;                   /* per value id: nesting depth + 1 where visible, 0 = not */
  int n_values;
} verifier;

static const char *op_name(const qir_op *op) {
  const qir_opinfo *info = qir_opinfo_get(op->code);
  return info ? info->name : "?";
}

/* "%name" or "%#id" for unnamed values (printing into a small rotating buffer
 * would be global state; the module arena holds the string instead). */
static const char *value_name(verifier *v, const qir_value *x) {
  return x->name ? qir_sprintf(v->m, "%%%s", x->name) : qir_sprintf(v->m, "%%<value %d>", x->id);
}

#define ERR(v, loc, ...) qir_error((v)->d, (loc), __VA_ARGS__)

static qir_loc attr_loc(const qir_op *op, const qir_attr *a) { return a->loc.line > 0 ? a->loc : op->loc; }

/* ---------------------------------------------------------------- attributes */

typedef enum {
  A_INT,        /* integer */
  A_FLAG,       /* 0 or 1 */
  A_FLOAT,      /* number */
  A_WORD,       /* word or string, one of `allowed` when given */
  A_STRING,     /* any word or string */
  A_INTS,       /* list of integers */
  A_FLOATS,     /* list of numbers */
  A_WORDS,      /* list of words or strings */
} attr_kind;

typedef struct {
  qir_opcode code;
  const char *key;
  attr_kind kind;
  bool required;
  const char *allowed;          /* "a|b|c" for A_WORD */
} attr_spec;

#define RNN_ATTRS(OP)                                                                       \
  {OP, "hidden_size", A_INT, false, NULL},                                                  \
  {OP, "direction", A_WORD, false, "forward|reverse|bidirectional"},                        \
  {OP, "layout", A_FLAG, false, NULL}, {OP, "activations", A_WORDS, false, NULL},           \
  {OP, "activation_alpha", A_FLOATS, false, NULL},                                          \
  {OP, "activation_beta", A_FLOATS, false, NULL}, {OP, "clip", A_FLOAT, false, NULL},       \
  {OP, "input_forget", A_FLAG, false, NULL}, {OP, "linear_before_reset", A_FLAG, false, NULL}
#define REDUCE_ATTRS(OP) {OP, "axes", A_INTS, false, NULL}, {OP, "keepdims", A_FLAG, false, NULL}
#define WINDOW_ATTRS(OP)                                                                    \
  {OP, "strides", A_INTS, false, NULL}, {OP, "pads", A_INTS, false, NULL},                  \
  {OP, "dilations", A_INTS, false, NULL}

/* The attributes ops.def documents.  Others are allowed (the importer may
 * keep ONNX attributes the IR does not use); schedule attributes belong to
 * the passes that write them. */
static const attr_spec attr_specs[] = {
  {QIR_OP_INPUT, "name", A_STRING, false, NULL},
  {QIR_OP_INPUT, "dim_params", A_WORDS, false, NULL},
  {QIR_OP_INPUT, "dim_source", A_WORDS, false, NULL},
  {QIR_OP_OUTPUT, "name", A_STRING, false, NULL},
  {QIR_OP_LOOP, "max_trip", A_INT, false, NULL},
  {QIR_OP_CAST, "to", A_STRING, false, NULL},
  {QIR_OP_CAST, "saturate", A_FLAG, false, NULL},
  {QIR_OP_BITCAST, "to", A_STRING, true, NULL},
  {QIR_OP_LEAKY_RELU, "alpha", A_FLOAT, false, NULL},
  {QIR_OP_ELU, "alpha", A_FLOAT, false, NULL},
  {QIR_OP_SELU, "alpha", A_FLOAT, false, NULL},
  {QIR_OP_SELU, "gamma", A_FLOAT, false, NULL},
  {QIR_OP_HARD_SIGMOID, "alpha", A_FLOAT, false, NULL},
  {QIR_OP_HARD_SIGMOID, "beta", A_FLOAT, false, NULL},
  {QIR_OP_GELU, "approximate", A_WORD, false, "none|tanh"},
  {QIR_OP_MOD, "fmod", A_FLAG, false, NULL},
  REDUCE_ATTRS(QIR_OP_REDUCE_SUM), REDUCE_ATTRS(QIR_OP_REDUCE_MEAN), REDUCE_ATTRS(QIR_OP_REDUCE_MAX),
  REDUCE_ATTRS(QIR_OP_REDUCE_MIN), REDUCE_ATTRS(QIR_OP_REDUCE_PROD), REDUCE_ATTRS(QIR_OP_REDUCE_L2),
  {QIR_OP_ARGMAX, "axis", A_INT, false, NULL}, {QIR_OP_ARGMAX, "keepdims", A_FLAG, false, NULL},
  {QIR_OP_ARGMAX, "select_last_index", A_FLAG, false, NULL},
  {QIR_OP_ARGMIN, "axis", A_INT, false, NULL}, {QIR_OP_ARGMIN, "keepdims", A_FLAG, false, NULL},
  {QIR_OP_ARGMIN, "select_last_index", A_FLAG, false, NULL},
  {QIR_OP_TRANSPOSE, "perm", A_INTS, false, NULL},
  {QIR_OP_CONCAT, "axis", A_INT, true, NULL},
  {QIR_OP_SPLIT, "axis", A_INT, false, NULL},
  {QIR_OP_SLICE, "starts", A_INTS, true, NULL}, {QIR_OP_SLICE, "ends", A_INTS, true, NULL},
  {QIR_OP_SLICE, "steps", A_INTS, false, NULL},
  {QIR_OP_PAD, "pads", A_INTS, true, NULL}, {QIR_OP_PAD, "mode", A_WORD, false, "constant|reflect|edge|wrap"},
  {QIR_OP_GATHER, "axis", A_INT, false, NULL}, {QIR_OP_GATHER_ELEMENTS, "axis", A_INT, false, NULL},
  {QIR_OP_GATHER_ND, "batch_dims", A_INT, false, NULL},
  {QIR_OP_SCATTER_ELEMENTS, "axis", A_INT, false, NULL},
  {QIR_OP_SCATTER_ELEMENTS, "reduction", A_WORD, false, "none|add|mul|max|min"},
  {QIR_OP_SCATTER_ND, "reduction", A_WORD, false, "none|add|mul|max|min"},
  {QIR_OP_RESIZE, "scales", A_FLOATS, true, NULL},
  {QIR_OP_RESIZE, "mode", A_WORD, false, "nearest|linear|cubic"},
  {QIR_OP_RESIZE, "coordinate_transformation_mode", A_WORD, false,
   "half_pixel|half_pixel_symmetric|pytorch_half_pixel|align_corners|asymmetric|tf_crop_and_resize"},
  {QIR_OP_RESIZE, "nearest_mode", A_WORD, false, "round_prefer_floor|round_prefer_ceil|floor|ceil"},
  {QIR_OP_RESIZE, "cubic_coeff_a", A_FLOAT, false, NULL},
  {QIR_OP_GRID_SAMPLE, "mode", A_WORD, false, "linear|nearest|cubic"},
  {QIR_OP_GRID_SAMPLE, "padding_mode", A_WORD, false, "zeros|border|reflection"},
  {QIR_OP_GRID_SAMPLE, "align_corners", A_FLAG, false, NULL},
  {QIR_OP_RESIZE, "exclude_outside", A_FLAG, false, NULL},
  {QIR_OP_RESIZE, "extrapolation_value", A_FLOAT, false, NULL},
  {QIR_OP_RESIZE, "roi", A_FLOATS, false, NULL},
  {QIR_OP_RESIZE, "antialias", A_FLAG, false, NULL},
  {QIR_OP_DEPTH_TO_SPACE, "blocksize", A_INT, true, NULL},
  {QIR_OP_DEPTH_TO_SPACE, "mode", A_WORD, false, "DCR|CRD"},
  {QIR_OP_SPACE_TO_DEPTH, "blocksize", A_INT, true, NULL},
  {QIR_OP_TRILU, "upper", A_FLAG, false, NULL}, {QIR_OP_TRILU, "k", A_INT, false, NULL},
  {QIR_OP_CUMSUM, "axis", A_INT, true, NULL}, {QIR_OP_CUMSUM, "exclusive", A_FLAG, false, NULL},
  {QIR_OP_CUMSUM, "reverse", A_FLAG, false, NULL},
  {QIR_OP_CUMPROD, "axis", A_INT, true, NULL}, {QIR_OP_CUMPROD, "exclusive", A_FLAG, false, NULL},
  {QIR_OP_CUMPROD, "reverse", A_FLAG, false, NULL},
  {QIR_OP_BIT_SHIFT, "direction", A_WORD, true, "left|right"},
  {QIR_OP_TOP_K, "axis", A_INT, true, NULL}, {QIR_OP_TOP_K, "k", A_INT, true, NULL},
  {QIR_OP_TOP_K, "largest", A_FLAG, false, NULL}, {QIR_OP_TOP_K, "sorted", A_FLAG, false, NULL},
  {QIR_OP_ONE_HOT, "axis", A_INT, false, NULL},
  {QIR_OP_GEMM, "alpha", A_FLOAT, false, NULL}, {QIR_OP_GEMM, "beta", A_FLOAT, false, NULL},
  {QIR_OP_GEMM, "transA", A_FLAG, false, NULL}, {QIR_OP_GEMM, "transB", A_FLAG, false, NULL},
  {QIR_OP_EINSUM, "equation", A_STRING, true, NULL},
  WINDOW_ATTRS(QIR_OP_CONV), {QIR_OP_CONV, "group", A_INT, false, NULL},
  {QIR_OP_CONV, "kernel_shape", A_INTS, false, NULL},
  WINDOW_ATTRS(QIR_OP_CONV_TRANSPOSE), {QIR_OP_CONV_TRANSPOSE, "group", A_INT, false, NULL},
  {QIR_OP_CONV_TRANSPOSE, "kernel_shape", A_INTS, false, NULL},
  {QIR_OP_CONV_TRANSPOSE, "output_padding", A_INTS, false, NULL},
  WINDOW_ATTRS(QIR_OP_MAX_POOL), {QIR_OP_MAX_POOL, "kernel_shape", A_INTS, true, NULL},
  {QIR_OP_MAX_POOL, "ceil_mode", A_FLAG, false, NULL}, {QIR_OP_MAX_POOL, "storage_order", A_FLAG, false, NULL},
  WINDOW_ATTRS(QIR_OP_AVG_POOL), {QIR_OP_AVG_POOL, "kernel_shape", A_INTS, true, NULL},
  {QIR_OP_AVG_POOL, "ceil_mode", A_FLAG, false, NULL}, {QIR_OP_AVG_POOL, "count_include_pad", A_FLAG, false, NULL},
  {QIR_OP_LP_NORMALIZATION, "axis", A_INT, false, NULL}, {QIR_OP_LP_NORMALIZATION, "p", A_INT, false, NULL},
  {QIR_OP_BATCH_NORM, "epsilon", A_FLOAT, false, NULL}, {QIR_OP_BATCH_NORM, "momentum", A_FLOAT, false, NULL},
  {QIR_OP_INSTANCE_NORM, "epsilon", A_FLOAT, false, NULL},
  {QIR_OP_LAYER_NORM, "axis", A_INT, false, NULL}, {QIR_OP_LAYER_NORM, "epsilon", A_FLOAT, false, NULL},
  {QIR_OP_LAYER_NORM, "stash_type", A_INT, false, NULL},
  {QIR_OP_LRN, "size", A_INT, true, NULL}, {QIR_OP_LRN, "alpha", A_FLOAT, false, NULL},
  {QIR_OP_LRN, "beta", A_FLOAT, false, NULL}, {QIR_OP_LRN, "bias", A_FLOAT, false, NULL},
  {QIR_OP_SOFTMAX, "axis", A_INT, false, NULL}, {QIR_OP_LOG_SOFTMAX, "axis", A_INT, false, NULL},
  {QIR_OP_ATTENTION, "scale", A_FLOAT, true, NULL}, {QIR_OP_ATTENTION, "softcap", A_FLOAT, false, NULL},
  {QIR_OP_ATTENTION, "causal", A_FLAG, false, NULL}, {QIR_OP_ATTENTION, "layout", A_WORD, false, "bhsd|bshd"},
  RNN_ATTRS(QIR_OP_LSTM), RNN_ATTRS(QIR_OP_GRU), RNN_ATTRS(QIR_OP_RNN),
};

static bool word_allowed(const char *allowed, const char *s) {
  size_t n = strlen(s);
  for (const char *p = allowed; p && *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && memcmp(p, s, n) == 0) return true;
    p = bar ? bar + 1 : NULL;
  }
  return false;
}

static bool is_text(const qir_attr_val *v) { return v->kind == QIR_ATTR_WORD || v->kind == QIR_ATTR_STRING; }
static bool is_number(const qir_attr_val *v) { return v->kind == QIR_ATTR_INT || v->kind == QIR_ATTR_FLOAT; }

static bool list_of(const qir_attr_val *v, bool (*pred)(const qir_attr_val *)) {
  if (v->kind != QIR_ATTR_LIST) return false;
  for (int i = 0; i < v->n; i++)
    if (!pred(&v->items[i])) return false;
  return true;
}

static bool is_int(const qir_attr_val *v) { return v->kind == QIR_ATTR_INT; }

static const char *kind_text(attr_kind k) {
  switch (k) {
  case A_INT: return "an integer";
  case A_FLAG: return "0 or 1";
  case A_FLOAT: return "a number";
  case A_WORD: case A_STRING: return "a word or string";
  case A_INTS: return "a list of integers";
  case A_FLOATS: return "a list of numbers";
  default: return "a list of words";
  }
}

static void check_attrs(verifier *v, const qir_op *op) {
  for (size_t i = 0; i < sizeof attr_specs / sizeof *attr_specs; i++) {
    const attr_spec *s = &attr_specs[i];
    if (s->code != op->code) continue;
    const qir_attr *a = qir_op_attr(op, s->key);
    if (!a) {
      if (s->required) ERR(v, op->loc, "'%s' needs attribute '%s' (%s)", op_name(op), s->key, kind_text(s->kind));
      continue;
    }
    const qir_attr_val *x = &a->val;
    bool ok;
    switch (s->kind) {
    case A_INT: ok = x->kind == QIR_ATTR_INT; break;
    case A_FLAG: ok = x->kind == QIR_ATTR_INT && (x->i == 0 || x->i == 1); break;
    case A_FLOAT: ok = is_number(x); break;
    case A_WORD: case A_STRING: ok = is_text(x); break;
    case A_INTS: ok = list_of(x, is_int); break;
    case A_FLOATS: ok = list_of(x, is_number); break;
    default: ok = list_of(x, is_text); break;
    }
    if (!ok) {
      ERR(v, attr_loc(op, a), "'%s' attribute '%s' must be %s", op_name(op), s->key, kind_text(s->kind));
      continue;
    }
    if (s->kind == A_WORD && s->allowed && !word_allowed(s->allowed, x->s))
      ERR(v, attr_loc(op, a), "'%s' attribute '%s' must be one of %s, not '%s'", op_name(op), s->key, s->allowed, x->s);
  }
}

/* An input's record of how the importer chose each extent: one entry per axis,
 * and each dim_source one of the words docs/qir.md lists. */
static void check_input_dims(verifier *v, const qir_op *op) {
  static const char *const keys[] = {"dim_params", "dim_source"};
  int rank = op->n_results == 1 ? op->results[0]->type.rank : -1;
  for (int i = 0; i < 2; i++) {
    const qir_attr *a = qir_op_attr(op, keys[i]);
    if (!a || a->val.kind != QIR_ATTR_LIST || rank < 0) continue;
    if (a->val.n != rank) {
      ERR(v, attr_loc(op, a), "'input' attribute '%s' has %d entries but the input has rank %d", keys[i], a->val.n, rank);
      continue;
    }
    if (i == 1)
      for (int k = 0; k < a->val.n; k++)
        if (is_text(&a->val.items[k]) && !word_allowed("model|shape|dim|default", a->val.items[k].s))
          ERR(v, attr_loc(op, a), "'input' attribute 'dim_source' entry %d must be one of model|shape|dim|default, not '%s'",
              k, a->val.items[k].s);
  }
}

/* ---------------------------------------------------------------- compute bodies */

static qir_loc expr_loc(const qir_op *op, const qir_expr *e) { return e->loc.line > 0 ? e->loc : op->loc; }

static void check_expr(verifier *v, const qir_op *op, const qir_expr *e) {
  const qir_compute *k = op->comp;
  int n_vars = k->n_axes + k->n_red;
  switch (e->kind) {
  case QIR_EX_VAR:
    if (e->var < 0 || e->var >= n_vars) ERR(v, expr_loc(op, e), "loop variable #%d does not exist", e->var);
    return;
  case QIR_EX_ACCESS:
    if (e->operand < 0 || e->operand >= op->n_operands) {
      ERR(v, expr_loc(op, e), "access to operand #%d but compute has %d operands", e->operand, op->n_operands);
      return;
    }
    if (op->operands[e->operand] && e->n_args != op->operands[e->operand]->type.rank)
      ERR(v, expr_loc(op, e), "access to %s has %d indices but its type %s has rank %d",
          value_name(v, op->operands[e->operand]), e->n_args, tstr(&op->operands[e->operand]->type).s,
          op->operands[e->operand]->type.rank);
    break;
  case QIR_EX_UNARY:
    if (e->fn >= QIR_FN_COUNT || qir_expr_fn_is_binary(e->fn) || e->n_args != 1)
      ERR(v, expr_loc(op, e), "'%s' is not a unary function", qir_expr_fn_spelling(e->fn));
    break;
  case QIR_EX_BINARY:
    if (e->fn >= QIR_FN_COUNT || !qir_expr_fn_is_binary(e->fn) || e->n_args != 2)
      ERR(v, expr_loc(op, e), "'%s' is not a binary function", qir_expr_fn_spelling(e->fn));
    break;
  case QIR_EX_SELECT:
    if (e->n_args != 3) ERR(v, expr_loc(op, e), "select takes 3 arguments");
    break;
  case QIR_EX_CAST:
    if (e->n_args != 1 || e->cast_to >= QIR_DTYPE_COUNT) ERR(v, expr_loc(op, e), "bad cast");
    break;
  default:
    return;
  }
  for (int i = 0; i < e->n_args; i++) {
    if (!e->args[i]) {
      ERR(v, expr_loc(op, e), "expression has a missing argument");
      continue;
    }
    check_expr(v, op, e->args[i]);
  }
}

static void check_compute(verifier *v, const qir_op *op) {
  const qir_compute *k = op->comp;
  if (!k) return; /* reported by the shape rule */
  int n = k->n_axes + k->n_red;
  for (int i = 0; i < n; i++) {
    if (k->axis_extents[i] <= 0)
      ERR(v, op->loc, "compute axis '%s' must have a positive extent, not %lld", k->axis_names[i] ? k->axis_names[i] : "?",
          (long long)k->axis_extents[i]);
    for (int j = 0; j < i; j++)
      if (k->axis_names[i] && k->axis_names[j] && strcmp(k->axis_names[i], k->axis_names[j]) == 0)
        ERR(v, op->loc, "compute axis name '%s' is used twice", k->axis_names[i]);
  }
  if ((k->n_red > 0) != (k->reduce != QIR_REDUCE_NONE))
    ERR(v, op->loc, k->n_red ? "compute has reduce axes but no reduction kind" : "compute has a reduction kind but no reduce axes");
  if (!k->body) ERR(v, op->loc, "compute has no body");
  else check_expr(v, op, k->body);
}

static void check_const(verifier *v, const qir_op *op) {
  const qir_const *c = op->cst;
  if (!c) {
    ERR(v, op->loc, "const has no payload");
    return;
  }
  if (op->n_results != 1) return;
  const qir_type *t = &op->results[0]->type;
  size_t es = (size_t)qir_dtype_size(t->dtype), want = (size_t)qir_type_numel(t) * es;
  if (c->offset >= 0) {
    if (c->data && c->nbytes != want)
      ERR(v, op->loc, "const %s needs %zu bytes, its payload has %zu", tstr(t).s, want, c->nbytes);
    if (!v->m->weights_path) ERR(v, op->loc, "const at offset %lld but the module names no weights file", (long long)c->offset);
    return;
  }
  if (c->splat) {
    if (c->nbytes != es || !c->data) ERR(v, op->loc, "splat const %s needs one %zu-byte element", tstr(t).s, es);
  } else if (c->nbytes != want || (want && !c->data)) {
    ERR(v, op->loc, "const %s needs %lld elements, the payload has %lld", tstr(t).s, (long long)qir_type_numel(t),
        (long long)(es ? c->nbytes / es : 0));
  }
}

/* ---------------------------------------------------------------- regions */

static void verify_region(verifier *v, qir_region *r, int depth);

static bool visible(verifier *v, const qir_value *x) { return x->id >= 0 && x->id < v->n_values && v->scope[x->id] > 0; }

static void define(verifier *v, qir_value *x, int depth, qir_loc loc) {
  if (x->id < 0 || x->id >= v->n_values) return;
  if (v->scope[x->id] > 0) ERR(v, loc, "value %s is defined twice", value_name(v, x));
  v->scope[x->id] = depth + 1;
}

static void undefine_region(verifier *v, qir_region *r) {
  for (int i = 0; i < r->n_args; i++)
    if (r->args[i]->id >= 0 && r->args[i]->id < v->n_values) v->scope[r->args[i]->id] = 0;
  for (qir_op *op = r->first; op; op = op->next)
    for (int i = 0; i < op->n_results; i++)
      if (op->results[i]->id >= 0 && op->results[i]->id < v->n_values) v->scope[op->results[i]->id] = 0;
}

/* The yield ending region r has the operand types `want` (n of them). */
static void check_yield_types(verifier *v, const qir_op *op, qir_region *r, const char *what, int n, const qir_type *const *want) {
  qir_op *y = r->last;
  if (!y || y->code != QIR_OP_YIELD) return; /* reported by verify_region */
  if (y->n_operands != n) {
    ERR(v, y->loc, "%s of '%s' yields %d values, expected %d", what, op_name(op), y->n_operands, n);
    return;
  }
  for (int i = 0; i < n; i++)
    if (y->operands[i] && !qir_type_equal(&y->operands[i]->type, want[i]))
      ERR(v, y->loc, "%s of '%s' yields %s as value #%d, expected %s", what, op_name(op), tstr(&y->operands[i]->type).s,
          i, tstr(want[i]).s);
}

static void check_loop(verifier *v, qir_op *op) {
  if (op->n_regions != 1 || op->n_operands < 2) return;
  qir_region *body = op->regions[0];
  int n_carried = op->n_operands - 2, n_scan = op->n_results - n_carried;
  if (n_scan < 0) return; /* reported by the shape rule */
  static const int64_t none[1] = {0};
  qir_type it = qir_type_make(QIR_I64, 0, none), cond = qir_type_make(QIR_BOOL, 0, none);
  if (body->n_args != n_carried + 2) {
    ERR(v, op->loc, "loop body needs %d arguments (iteration, condition, %d carried), has %d", n_carried + 2, n_carried,
        body->n_args);
  } else {
    if (!qir_type_equal(&body->args[0]->type, &it))
      ERR(v, op->loc, "loop body argument #0 (iteration) must be i64[], not %s", tstr(&body->args[0]->type).s);
    if (!qir_type_equal(&body->args[1]->type, &cond))
      ERR(v, op->loc, "loop body argument #1 (condition) must be bool[], not %s", tstr(&body->args[1]->type).s);
    for (int i = 0; i < n_carried; i++)
      if (op->operands[i + 2] && !qir_type_equal(&body->args[i + 2]->type, &op->operands[i + 2]->type))
        ERR(v, op->loc, "loop body argument #%d is %s but the carried operand is %s", i + 2,
            tstr(&body->args[i + 2]->type).s, tstr(&op->operands[i + 2]->type).s);
  }
  qir_op *y = body->last;
  if (!y || y->code != QIR_OP_YIELD) return;
  if (y->n_operands != 1 + n_carried + n_scan) {
    ERR(v, y->loc, "loop body yields %d values, expected %d (condition, %d carried, %d scan outputs)", y->n_operands,
        1 + n_carried + n_scan, n_carried, n_scan);
    return;
  }
  const qir_type **want = qir_alloc(v->m, sizeof *want * (size_t)(1 + n_carried + n_scan));
  want[0] = &cond;
  for (int i = 0; i < n_carried; i++) want[1 + i] = op->operands[i + 2] ? &op->operands[i + 2]->type : &cond;
  /* scan outputs: the result without its stacking axis */
  qir_type *scan = qir_alloc(v->m, sizeof *scan * (size_t)(n_scan ? n_scan : 1));
  for (int i = 0; i < n_scan; i++) {
    const qir_type *res = &op->results[n_carried + i]->type;
    scan[i] = *res;
    if (res->rank == 0) {
      ERR(v, op->loc, "loop scan output #%d must have rank >= 1, not %s", i, tstr(res).s);
      return;
    }
    scan[i].rank = res->rank - 1;
    scan[i].bounded = false;
    memmove(scan[i].dims, res->dims + 1, sizeof(int64_t) * (size_t)scan[i].rank);
    want[1 + n_carried + i] = &scan[i];
  }
  check_yield_types(v, op, body, "loop body", 1 + n_carried + n_scan, want);
}

static void check_if(verifier *v, qir_op *op) {
  if (op->n_regions != 2) return;
  const qir_type **want = qir_alloc(v->m, sizeof *want * (size_t)(op->n_results + 1));
  for (int i = 0; i < op->n_results; i++) want[i] = &op->results[i]->type;
  for (int k = 0; k < 2; k++) {
    const char *which = k ? "else region" : "then region";
    if (op->regions[k]->n_args) ERR(v, op->loc, "'if' %s takes no arguments", which);
    check_yield_types(v, op, op->regions[k], which, op->n_results, want);
  }
}

/* versions (ops.def): each region's arguments stand for the operands (the
 * last region's are theirs), and each yields the results in its symbols. */
static void check_versions(verifier *v, qir_op *op) {
  int *outer_of = qir_alloc(v->m, sizeof *outer_of * (size_t)(v->m->n_syms + 1));
  int64_t *fixed = qir_alloc(v->m, sizeof *fixed * (size_t)(v->m->n_syms + 1));
  for (int r = 0; r < op->n_regions; r++) {
    char why[512];
    const char *which = qir_sprintf(v->m, "region %d", r);
    if (!qir_versions_region_syms(v->m, op, r, outer_of, fixed, why, sizeof why)) {
      ERR(v, op->loc, "'versions': %s", why);
      continue;
    }
    bool own = false;
    for (int k = 0; k < v->m->n_syms; k++) own |= outer_of[k] >= 0 || fixed[k] != QIR_VERSION_FREE;
    if (own && r == op->n_regions - 1)
      ERR(v, op->loc, "'versions': the last region's arguments must have the operands' types (it takes every run)");
    qir_op *y = op->regions[r]->last;
    if (!y || y->code != QIR_OP_YIELD) continue;   /* reported by verify_region */
    if (y->n_operands != op->n_results) {
      ERR(v, y->loc, "%s of 'versions' yields %d values, expected %d", which, y->n_operands, op->n_results);
      continue;
    }
    for (int i = 0; i < op->n_results; i++) {
      const qir_type *a = y->operands[i] ? &y->operands[i]->type : NULL, *want = &op->results[i]->type;
      bool same = a && a->dtype == want->dtype && a->rank == want->rank && !a->bounded && !want->bounded;
      for (int d = 0; same && d < want->rank; d++) {
        if (!want->sym[d]) {
          same = !a->sym[d] && a->dims[d] == want->dims[d];
        } else if (a->sym[d]) {
          same = qir_dim_rename(v->m, a->sym[d], outer_of) == want->sym[d];
        } else {   /* static in a plan for fixed values: the result's extent there */
          for (int k = 0; same && k < v->m->n_syms; k++) same = fixed[k] != QIR_VERSION_FREE || !qir_dim_uses(want->sym[d], k);
          same = same && qir_dim_eval(want->sym[d], fixed) == a->dims[d];
        }
      }
      if (a && !same)
        ERR(v, y->loc, "%s of 'versions' yields %s as value #%d, which is not %s in the region's symbols", which, tstr(a).s, i,
            tstr(want).s);
    }
  }
}

/* #device plans (device.c), checked against the nearest enclosing loop/if's. */
static void check_device(verifier *v, qir_op *op, qir_region *r) {
  qir_device_plan outer = {.level = QIR_LEVEL_HOST};
  for (qir_op *p = r->parent_op; p; p = p->parent ? p->parent->parent_op : NULL)
    if (p->code == QIR_OP_LOOP || p->code == QIR_OP_IF) {
      if (!qir_device_plan_get(p, &outer, NULL)) outer.level = QIR_LEVEL_HOST; /* reported at p */
      break;
    }
  qir_device_plan_check(op, &outer, v->d);
}

/* #tile: a plan's thread and rstep entries, and its block tile times its
 * reduction step (block x rstep), span at most QIR_TILE_MAX elements: what a
 * block stages and counts in 32 bits.  A block alone may be longer (a row
 * group's warp walks a whole row).  The rest of a plan is qcodegen's to check
 * against the op; this much holds for any op, so no pass writes a plan past it. */
static void check_tile_span(verifier *v, const qir_op *op) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  if (!tile || tile->val.kind != QIR_ATTR_DICT) return;
  static const char *const keys[] = {"block", "thread", "rstep"};
  double span = 1;
  for (int k = 0; k < 3; k++) {
    const qir_attr_val *l = qir_attr_dict_get(&tile->val, keys[k]);
    if (!l || l->kind != QIR_ATTR_LIST) continue;
    for (int i = 0; i < l->n; i++) {
      const qir_attr_val *x = &l->items[i];
      if (x->kind != QIR_ATTR_INT || x->i < 1 || (k > 0 && x->i > QIR_TILE_MAX)) {
        ERR(v, attr_loc(op, tile), "'%s' #tile '%s' entry %s is out of range (an integer from 1%s)", op_name(op), keys[k],
            x->kind == QIR_ATTR_INT ? qir_sprintf(v->m, "%lld", (long long)x->i) : qir_sprintf(v->m, "#%d", i),
            k > 0 ? qir_sprintf(v->m, " to %d", QIR_TILE_MAX) : "");
        return;
      }
      if (k != 1) span *= (double)x->i;
    }
  }
  if (qir_attr_dict_get(&tile->val, "rstep") && span > QIR_TILE_MAX)
    ERR(v, attr_loc(op, tile), "'%s' #tile block x rstep spans %.0f elements, more than %d", op_name(op), span, QIR_TILE_MAX);
}

/* The matrix-unit and pipeline keys of one plan (a #tile or an entry of
 * #tile_alternatives): `mma` is an instruction shape qcodegen knows (16x16x16:
 * wmma / MFMA; 16x8x16: mma.sync in a cp.async pipeline; 16x8x8 with
 * mma_precision = "tf32": the same loop on f32 operands in TF32); `stages` is the
 * pipelined loop's (2 to 4 shared tiles in flight, swizzled rather
 * than padded: smem_pad 0) or a SIMT plan's staging (1 to 4), never the
 * one-stage 16x16x16 loop's. */
static void check_plan_mma(verifier *v, const qir_op *op, const qir_attr *at, const qir_attr_val *plan) {
  if (plan->kind != QIR_ATTR_DICT) return;
  const char *what = at->key;
  const qir_attr_val *mma = qir_attr_dict_get(plan, "mma"), *stages = qir_attr_dict_get(plan, "stages");
  const qir_attr_val *pad = qir_attr_dict_get(plan, "smem_pad");
  int64_t sh[3] = {0, 0, 0};
  bool shape_ok = mma && mma->kind == QIR_ATTR_LIST && mma->n == 3;
  for (int i = 0; shape_ok && i < 3; i++) {
    shape_ok = mma->items[i].kind == QIR_ATTR_INT;
    if (shape_ok) sh[i] = mma->items[i].i;
  }
  const qir_attr_val *prec = qir_attr_dict_get(plan, "mma_precision");
  bool tf32 = prec && prec->kind == QIR_ATTR_STRING && !strcmp(prec->s, "tf32");
  if (prec && (!tf32 || !mma)) {
    ERR(v, attr_loc(op, at), "'%s' #%s mma_precision must be \"tf32\", with mma = [16, 8, 8]", op_name(op), what);
    return;
  }
  /* [64, N, 16]: Hopper's wgmma (N a multiple of 8 up to 256), pipelined by TMA */
  bool wgmma = shape_ok && !tf32 && sh[0] == 64 && sh[1] >= 8 && sh[1] <= 256 && sh[1] % 8 == 0 && sh[2] == 16;
  bool pipelined = wgmma || (shape_ok && sh[0] == 16 && sh[1] == 8 && sh[2] == (tf32 ? 8 : 16));
  if (mma && !(shape_ok && (pipelined || (!tf32 && sh[0] == 16 && sh[1] == 16 && sh[2] == 16)))) {
    ERR(v, attr_loc(op, at),
        tf32 ? "'%s' #%s mma must be [16, 8, 8] with mma_precision = \"tf32\" (mma.sync m16n8k8 .tf32, pipelined)"
             : "'%s' #%s mma must be [16, 16, 16] (wmma, MFMA), [16, 8, 16] (mma.sync, pipelined) or [64, N, 16] (wgmma, N a "
               "multiple of 8 up to 256); [16, 8, 8] needs mma_precision = \"tf32\"",
        op_name(op), what);
    return;
  }
  const qir_attr_val *persistent = qir_attr_dict_get(plan, "persistent");
  if (persistent && (!wgmma || persistent->kind != QIR_ATTR_INT || persistent->i < 1))
    ERR(v, attr_loc(op, at), "'%s' #%s persistent must be a positive block count, with mma = [64, N, 16] (wgmma)", op_name(op),
        what);
  if (!stages) return;
  /* SIMT plans may stage one tile at a time; the tensor-core pipeline needs two */
  int lo = mma ? 2 : 1;
  if (stages->kind != QIR_ATTR_INT || stages->i < lo || stages->i > QIR_MAX_STAGES)
    ERR(v, attr_loc(op, at), "'%s' #%s stages = %s is out of range (%d to %d shared tiles in flight)", op_name(op), what,
        stages->kind == QIR_ATTR_INT ? qir_sprintf(v->m, "%lld", (long long)stages->i) : "a non-integer", lo, QIR_MAX_STAGES);
  else if (mma && !pipelined)
    ERR(v, attr_loc(op, at), "'%s' #%s stages needs mma = [16, 8, 16] (the pipelined tensor-core loop)", op_name(op),
        what);
  else if (mma && pad && (pad->kind != QIR_ATTR_INT || pad->i != 0))
    ERR(v, attr_loc(op, at), "'%s' #%s stages: the pipelined tiles are swizzled, smem_pad must be 0", op_name(op), what);
}

static void check_tile_mma(verifier *v, const qir_op *op) {
  const qir_attr *tile = qir_op_attr(op, "tile"), *alts = qir_op_attr(op, "tile_alternatives");
  if (tile) check_plan_mma(v, op, tile, &tile->val);
  if (alts && alts->val.kind == QIR_ATTR_LIST)
    for (int i = 0; i < alts->val.n; i++) check_plan_mma(v, op, alts, &alts->val.items[i]);
}

/* Shared memory one block may hold on the largest built-in target: a group
 * whose plan asks for more fits on none of them. */
static int64_t max_smem_per_block(void) {
  int64_t most = 0;
  for (int i = 0; i < qir_target_count(); i++)
    if (qir_target_at(i)->smem_per_block > most) most = qir_target_at(i)->smem_per_block;
  return most;
}

/* kernel @name: a Welder group.  Operands bind to the region arguments; the
 * region is isolated (so the group is convex: no path can leave it and come
 * back), holds only ops without regions, ends in a yield of the result types;
 * every inner producer states its level (#fuse=reg|smem), the yielded ones go
 * to global memory; the plan's footprint fits a target. */
static void check_kernel(verifier *v, qir_op *op) {
  if (!op->sym || !op->sym[0]) ERR(v, op->loc, "'kernel' without a name");
  if (op->n_regions != 1) return;
  qir_region *body = op->regions[0];
  if (body->n_args != op->n_operands) {
    ERR(v, op->loc, "'kernel' has %d operands but its region %d arguments", op->n_operands, body->n_args);
  } else {
    for (int i = 0; i < op->n_operands; i++)
      if (op->operands[i] && !qir_type_equal(&op->operands[i]->type, &body->args[i]->type))
        ERR(v, op->loc, "'kernel' region argument #%d is %s but operand #%d is %s", i, tstr(&body->args[i]->type).s, i,
            tstr(&op->operands[i]->type).s);
  }
  for (qir_op *in = body->first; in; in = in->next) {
    if (in->n_regions) ERR(v, in->loc, "'%s' inside a kernel group: groups hold ops without regions", op_name(in));
    for (int i = 0; i < in->n_operands; i++) {
      qir_value *x = in->operands[i];
      qir_region *home = !x ? NULL : x->def ? x->def->parent : x->arg_of;
      if (x && home != body)
        ERR(v, in->loc, "'%s' in kernel @%s uses %s from outside the group: pass it as an operand", op_name(in),
            op->sym ? op->sym : "?", value_name(v, x));
    }
    if (in->code == QIR_OP_YIELD) continue;
    bool inner_use = false, yielded = false;
    for (int k = 0; k < in->n_results; k++)
      for (qir_use *u = in->results[k]->uses; u; u = u->next) {
        if (u->user->code == QIR_OP_YIELD) yielded = true;
        else inner_use = true;
      }
    const qir_attr *fuse = qir_op_attr(in, "fuse");
    if (inner_use && !fuse)
      ERR(v, in->loc, "'%s' feeds other ops of kernel @%s but states no level: write #fuse=reg or #fuse=smem", op_name(in),
          op->sym ? op->sym : "?");
    if (!inner_use && yielded && fuse)
      ERR(v, attr_loc(in, fuse), "'%s' only leaves kernel @%s (through global memory): '#fuse' does not apply",
          op_name(in), op->sym ? op->sym : "?");
  }
  const qir_type **want = qir_alloc(v->m, sizeof *want * (size_t)(op->n_results + 1));
  for (int i = 0; i < op->n_results; i++) want[i] = &op->results[i]->type;
  check_yield_types(v, op, body, "region", op->n_results, want);
  const qir_attr *tile = qir_op_attr(op, "tile");
  const qir_attr_val *smem = tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, "smem") : NULL;
  if (smem && (smem->kind != QIR_ATTR_INT || smem->i < 0 || smem->i > max_smem_per_block()))
    ERR(v, attr_loc(op, tile), "kernel @%s: its tile needs %s bytes of shared memory, more than any target has (%lld)",
        op->sym ? op->sym : "?", smem->kind == QIR_ATTR_INT ? qir_sprintf(v->m, "%lld", (long long)smem->i) : "an invalid number of",
        (long long)max_smem_per_block());
}

/* #fuse=reg|smem: only on ops directly inside a kernel group. */
static void check_fuse(verifier *v, qir_op *op, qir_region *r) {
  const qir_attr *fuse = qir_op_attr(op, "fuse");
  if (!fuse) return;
  if (!r->parent_op || r->parent_op->code != QIR_OP_KERNEL)
    ERR(v, attr_loc(op, fuse), "'#fuse' on '%s' outside a kernel group", op_name(op));
  else if (fuse->val.kind != QIR_ATTR_WORD && fuse->val.kind != QIR_ATTR_STRING)
    ERR(v, attr_loc(op, fuse), "'#fuse' must be reg or smem");
  else if (strcmp(fuse->val.s, "reg") != 0 && strcmp(fuse->val.s, "smem") != 0)
    ERR(v, attr_loc(op, fuse), "'#fuse=%s': the level of an edge inside a group is reg or smem (global = not fused)",
        fuse->val.s);
}

static void verify_op(verifier *v, qir_op *op, qir_region *r, int depth) {
  const qir_opinfo *info = qir_opinfo_get(op->code);
  if (!info) {
    ERR(v, op->loc, "unknown op code %d", (int)op->code);
    return;
  }
  if (op->parent != r) ERR(v, op->loc, "'%s' is not linked into the region that holds it", op_name(op));
  /* dominance */
  for (int i = 0; i < op->n_operands; i++) {
    qir_value *x = op->operands[i];
    if (!x) {
      ERR(v, op->loc, "'%s' operand #%d is missing", op_name(op), i);
      continue;
    }
    if (!visible(v, x)) {
      if (x->arg_of)
        ERR(v, op->loc, "'%s' uses %s, an argument of a region that does not enclose it", op_name(op), value_name(v, x));
      else
        ERR(v, op->loc, "'%s' uses %s before its definition (or outside its region)", op_name(op), value_name(v, x));
    }
  }
  /* bounded extents: made only by a loop's scan outputs, taken only by `output`
   * (every other op needs the static extent its memory and kernels are planned for) */
  for (int i = 0; i < op->n_operands; i++) {
    qir_value *x = op->operands[i];
    if (x && x->type.bounded && op->code != QIR_OP_OUTPUT)
      ERR(v, op->loc,
          "'%s' needs a static extent but operand #%d %s is %s, whose rows are counted at run time (a loop that "
          "may exit early): only 'output' can take it",
          op_name(op), i, value_name(v, x), tstr(&x->type).s);
  }
  for (int i = 0; i < op->n_results; i++) {
    const qir_type *t = &op->results[i]->type;
    if (t->bounded && (op->code != QIR_OP_LOOP || i < op->n_operands - 2))
      ERR(v, op->loc, "'%s' result #%d is %s: only a loop's scan outputs may have a bounded extent", op_name(op), i,
          tstr(t).s);
  }
  /* placement */
  bool nested = r->parent_op != NULL;
  if ((op->code == QIR_OP_INPUT || op->code == QIR_OP_OUTPUT) && nested)
    ERR(v, op->loc, "'%s' may appear only in the module body", op_name(op));
  if (op->code == QIR_OP_YIELD && !nested) ERR(v, op->loc, "'yield' outside a loop, if or kernel region");
  else if (op->code == QIR_OP_YIELD && op->next) ERR(v, op->loc, "'yield' must be the last op of its region");
  if (info->n_regions < 0 ? op->n_regions < 1 : op->n_regions != info->n_regions)
    ERR(v, op->loc, "'%s' has %d regions, expected %s", op_name(op), op->n_regions,
        info->n_regions < 0 ? "one or more" : qir_sprintf(v->m, "%d", info->n_regions));
  /* attributes, payloads, types */
  int errors_before_attrs = v->d->n_errors;
  check_attrs(v, op);
  if (op->code == QIR_OP_INPUT) check_input_dims(v, op);
  bool attrs_ok = v->d->n_errors == errors_before_attrs; /* else the shape rule would repeat them */
  check_device(v, op, r);
  check_tile_span(v, op);
  check_tile_mma(v, op);
  if (op->code == QIR_OP_COMPUTE) check_compute(v, op);
  if (op->code == QIR_OP_CONST) check_const(v, op);
  if (op->code == QIR_OP_RPROGRAM) {
    qir_rprogram p;
    if (qir_rprogram_read(v->m, op, &p, v->d)) qir_rprogram_check(v->m, &p, v->d);
  }
  bool operands_ok = true;
  for (int i = 0; i < op->n_operands; i++) operands_ok = operands_ok && op->operands[i];
  /* regions before types: the loop's scan types come from its yield */
  for (int i = 0; i < op->n_regions; i++) verify_region(v, op->regions[i], depth + 1);
  if (op->code == QIR_OP_LOOP) check_loop(v, op);
  if (op->code == QIR_OP_IF) check_if(v, op);
  if (op->code == QIR_OP_VERSIONS) check_versions(v, op);
  if (op->code == QIR_OP_KERNEL) check_kernel(v, op);
  check_fuse(v, op, r);
  if (operands_ok && attrs_ok) {
    qir_type *out = qir_alloc(v->m, sizeof *out * (size_t)(op->n_results + 1));
    if (qir_infer_types(v->m, op, out, v->d))
      for (int i = 0; i < op->n_results; i++)
        if (!qir_type_equal(&out[i], &op->results[i]->type))
          ERR(v, op->loc, "'%s' result #%d is declared %s but the op computes %s", op_name(op), i,
              tstr(&op->results[i]->type).s, tstr(&out[i]).s);
  }
  for (int i = 0; i < op->n_results; i++) {
    qir_value *res = op->results[i];
    if (res->def != op || res->result_index != i) ERR(v, op->loc, "'%s' result #%d does not point back to its op", op_name(op), i);
    define(v, res, depth, op->loc);
  }
}

static void verify_region(verifier *v, qir_region *r, int depth) {
  for (int i = 0; i < r->n_args; i++) {
    qir_loc loc = r->parent_op ? r->parent_op->loc : (qir_loc){0};
    define(v, r->args[i], depth, loc);
  }
  bool seen_output = false;
  for (qir_op *op = r->first; op; op = op->next) {
    if (!r->parent_op) {
      if (op->code == QIR_OP_OUTPUT) seen_output = true;
      else if (seen_output) ERR(v, op->loc, "'%s' after the module's outputs: the body must end with its 'output' ops", op_name(op));
    }
    verify_op(v, op, r, depth);
  }
  if (r->parent_op && (!r->last || r->last->code != QIR_OP_YIELD))
    ERR(v, r->last ? r->last->loc : r->parent_op->loc, "region of '%s' must end with 'yield'", op_name(r->parent_op));
  if (depth > 0) undefine_region(v, r);
}

static const char *ints_str(qir_module *m, const int64_t *x, int n) {
  const char *s = "";
  for (int i = 0; i < n; i++) s = qir_sprintf(m, "%s%s%lld", s, i ? ", " : "", (long long)x[i]);
  return s;
}

/* The inner tiles of kernel group k are what propagation from the group's
 * tile gives (qir_group_tiles): a derived tile (#tile{block = [...]}) that
 * differs is an error at that tile; a whole plan on an inner op (the
 * anchor's, from -roller) is its own.  Run on a module that verified clean
 * otherwise. */
static void check_group_tiles(verifier *v, qir_op *k) {
  int64_t blk[QIR_MAX_RANK];
  if (!qir_group_block(k, blk)) return;
  int rank = k->results[0]->type.rank;
  int n = 0;
  for (qir_op *in = k->regions[0]->first; in; in = in->next) n++;
  int64_t (*tiles)[QIR_MAX_RANK] = calloc((size_t)n + 1, sizeof *tiles);
  bool *have = calloc((size_t)n + 1, sizeof *have);
  if (!tiles || !have) {
    free(tiles);
    free(have);
    qir_error(v->d, k->loc, "out of memory");
    return;
  }
  int nt = qir_group_tiles(v->m, k, blk, n, tiles, have), i = 0;
  for (qir_op *in = k->regions[0]->first; nt > 0 && in && in->code != QIR_OP_YIELD; in = in->next, i++) {
    const qir_attr *it = qir_op_attr(in, "tile");
    const qir_attr_val *ib = it && it->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&it->val, "block") : NULL;
    /* a whole plan (the anchor's, from -roller: grid, threads, ...) is its own; derived tiles are a block only */
    if (!have[i] || !ib || ib->kind != QIR_ATTR_LIST || it->val.n != 1 || in->n_results != 1) continue;
    const qir_type *t = &in->results[0]->type;
    bool same = ib->n == t->rank;
    int64_t stated[QIR_MAX_RANK] = {0};
    for (int j = 0; j < ib->n && j < QIR_MAX_RANK; j++) {
      stated[j] = ib->items[j].kind == QIR_ATTR_INT ? ib->items[j].i : -1;
      same &= stated[j] == tiles[i][j];
    }
    if (!same)
      ERR(v, attr_loc(in, it), "kernel @%s: the tile of '%s' is [%s] but propagation from the group's tile [%s] gives [%s]",
          k->sym ? k->sym : "?", op_name(in), ints_str(v->m, stated, ib->n < QIR_MAX_RANK ? ib->n : QIR_MAX_RANK),
          ints_str(v->m, blk, rank), ints_str(v->m, tiles[i], t->rank));
  }
  free(tiles);
  free(have);
}

static void check_tiles_region(verifier *v, qir_region *r) {
  for (qir_op *op = r->first; op; op = op->next) {
    if (op->code == QIR_OP_KERNEL) check_group_tiles(v, op);
    else
      for (int i = 0; i < op->n_regions; i++) check_tiles_region(v, op->regions[i]);
  }
}

int qir_verify(qir_module *m, qir_diag *d) {
  int before = d->n_errors;
  verifier v = {m, d, NULL, m->next_value_id};
  v.scope = calloc((size_t)(v.n_values ? v.n_values : 1), sizeof *v.scope);
  if (!v.scope) {
    qir_error(d, (qir_loc){0}, "out of memory");
    return 1;
  }
  if (m->body) verify_region(&v, m->body, 0);
  free(v.scope);
  /* tiles are derived through the ops' forms: only of a module that is sound otherwise */
  if (m->body && d->n_errors == before) check_tiles_region(&v, m->body);
  return d->n_errors - before;
}
