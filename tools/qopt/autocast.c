/* autocast.c: -autocast=f16|bf16, mixed precision as a pass whose decisions
 * are the IR's types.
 *
 * Ops are visited in order, nested regions included.  autocast.def decides,
 * per op kind, whether the op runs in the low type (LOW; DATA: its data
 * operand only), follows its operands there (FOLLOW, LONG) or stays in f32
 * (KEEP, and every op without a row).  An op that runs low gets low twins of
 * its f32 operands and low result types; an op that stays in f32 gets f32
 * twins of the operands this pass made low.  A twin is made once per value:
 *   - of a constant: a new constant, converted here (round to nearest even),
 *     so weights are converted at compile time; when the original lived in
 *     the weights sidecar the new one is marked for the sidecar qopt writes
 *     beside its output (qir_const.spill);
 *   - of a low value that is itself a twin of an f32 value: that f32 value
 *     (no round trip through 16 bits);
 *   - otherwise a `cast` right after the value's definition.
 * Values of other types (integers, a model already in f16) are never
 * touched, so an f16 model passes unchanged.  -welder folds the casts into
 * the kernels around them.
 *
 * Beyond the table, an op stays in f32 when
 *   - -autocast-keep names it (pinned);
 *   - -autocast-calibrate (f16 only) ran the model on the given inputs
 *     (autocast_range.c) and one of its f32 values went beyond
 *     -autocast-range there;
 *   - it is a convolution over a model input (conv_over_input), unless
 *     -autocast-input-convs;
 *   - it is elementwise or a batch_norm and -autocast-elementwise=f32.
 * Model inputs and outputs keep their types (casts at the boundary) unless
 * -autocast-io is given.
 *
 * -stats prints the precision report: ops per table row, casts inserted,
 * constants converted, weight bytes and the modelled time (each op planned
 * alone by Roller's model, before and after) on stderr. */
#include "autocast_range.h"
#include "qopt.h"
#include "roller.h"

#include <stdlib.h>
#include <string.h>

typedef enum { AC_LOW, AC_FOLLOW, AC_LONG, AC_DATA, AC_KEEP } ac_rule;

typedef struct {
  qir_opcode code;
  ac_rule rule;
  const char *why;
} ac_row;

static const ac_row ac_table[] = {
#define AUTOCAST(code, rule, why) {QIR_OP_##code, AC_##rule, why},
#include "autocast.def"
#undef AUTOCAST
};
enum { AC_ROWS = sizeof ac_table / sizeof *ac_table };
/* Pseudo-rows of the report, after the table's own. */
enum { AC_ROW_NONE = AC_ROWS, AC_ROW_PINNED, AC_ROW_RANGE, AC_ROW_SIGNAL, AC_ROW_ELEMENTWISE, AC_ROW_COUNT };

typedef struct {
  qopt_ctx *ctx;
  qir_module *m;
  qir_dtype low;
  bool io;
  int64_t long_limit;
  const char *keep;             /* -autocast-keep: comma-separated op spellings and %names */
  /* -autocast-calibrate: the largest |x| of each value (by id) on the
   * calibration inputs; values above range_limit stay in f32 */
  const double *magnitude;
  int n_magnitude;
  double range_limit;
  bool input_convs_low;         /* -autocast-input-convs: convs reading a model input run low too */
  bool elementwise_f32;         /* -autocast-elementwise=f32: elementwise ops and batch_norm stay in f32 */
  /* per value id: its twin in the other type, and whether this pass made it low */
  int cap;
  qir_value **twin;
  bool *made_low;
  /* the report */
  int low_ops[AC_ROW_COUNT], f32_ops[AC_ROW_COUNT];
  int f32_long[AC_ROW_COUNT];   /* of f32_ops: a LONG op kept for its length */
  int casts_to_low, casts_to_f32, consts_converted;
} autocast;

static const ac_row *row_of(qir_opcode code, int *index) {
  for (int i = 0; i < AC_ROWS; i++)
    if (ac_table[i].code == code) {
      *index = i;
      return &ac_table[i];
    }
  *index = AC_ROW_NONE;
  return NULL;
}

static bool grow(autocast *a) {
  int need = a->m->next_value_id + 1;
  if (need <= a->cap) return true;
  int cap = need * 2;
  qir_value **tw = realloc(a->twin, sizeof *tw * (size_t)cap);
  if (!tw) return false;
  a->twin = tw;
  bool *ml = realloc(a->made_low, sizeof *ml * (size_t)cap);
  if (!ml) return false;
  a->made_low = ml;
  memset(a->twin + a->cap, 0, sizeof *tw * (size_t)(cap - a->cap));
  memset(a->made_low + a->cap, 0, sizeof *ml * (size_t)(cap - a->cap));
  a->cap = cap;
  return true;
}

static bool is_low(const autocast *a, const qir_value *v) { return v->id < a->cap && a->made_low[v->id]; }

static void set_twins(autocast *a, qir_value *f32, qir_value *low) {
  grow(a);
  if (f32->id < a->cap) a->twin[f32->id] = low;
  if (low->id < a->cap) {
    a->twin[low->id] = f32;
    a->made_low[low->id] = true;
  }
}

/* Puts op where it dominates every use of v: right after v's definition, or
 * first in the region v is an argument of. */
static void insert_after_def(qir_value *v, qir_op *op) {
  if (v->def) qir_op_insert_before(v->def->next, op);
  else if (v->arg_of->first) qir_op_insert_before(v->arg_of->first, op);
  else qir_op_append(v->arg_of, op);
}

static qir_value *new_cast(autocast *a, qir_value *v, qir_dtype to, qir_loc loc) {
  qir_type t = v->type;
  t.dtype = to;
  qir_op *c = qir_op_new(a->m, QIR_OP_CAST, 1, &v, 1, &t, loc);
  insert_after_def(v, c);
  return c->results[0];
}

/* A constant's twin in the low type, converted now. */
static qir_value *convert_const(autocast *a, qir_op *cst) {
  qir_type t = cst->results[0]->type;
  t.dtype = a->low;
  qir_op *c;
  if (cst->cst->splat) {
    c = qir_const_new_splat(a->m, t, qir_const_elem(a->m, cst, 0, a->ctx->diag), cst->loc);
  } else {
    const void *src = qir_const_data(a->m, cst, a->ctx->diag);
    if (!src) return NULL;
    int64_t n = qir_type_numel(&t);
    void *dst = qir_alloc(a->m, (size_t)n * 2);
    for (int64_t i = 0; i < n; i++) qir_store_elem(a->low, dst, i, qir_load_elem(QIR_F32, src, i));
    c = qir_const_new_data(a->m, t, dst, (size_t)n * 2, cst->loc);
    c->cst->spill = cst->cst->offset >= 0;
  }
  if (cst->results[0]->name) c->results[0]->name = qir_sprintf(a->m, "%s_%s", cst->results[0]->name, qir_dtype_name(a->low));
  qir_op_insert_before(cst, c);
  a->consts_converted++;
  return c->results[0];
}

/* v (f32) in the low type. */
static qir_value *low_twin(autocast *a, qir_value *v, qir_loc loc) {
  if (!grow(a)) return NULL;
  if (a->twin[v->id]) return a->twin[v->id];
  qir_value *t;
  if (v->def && v->def->code == QIR_OP_CONST) t = convert_const(a, v->def);
  else {
    t = new_cast(a, v, a->low, loc);
    a->casts_to_low++;
  }
  if (t) set_twins(a, v, t);
  return t;
}

/* v (made low by this pass) back in f32. */
static qir_value *f32_twin(autocast *a, qir_value *v, qir_loc loc) {
  if (a->twin[v->id]) return a->twin[v->id];
  qir_value *t = new_cast(a, v, QIR_F32, loc);
  a->casts_to_f32++;
  grow(a);
  a->twin[v->id] = t;
  return t;
}

/* Elements a reduction (a LONG row) reduces into each result element. */
static int64_t reduced_length(const qir_op *op) {
  int64_t out = qir_type_numel(&op->results[0]->type);
  return out > 0 ? qir_type_numel(&op->operands[0]->type) / out : 1;
}

/* -autocast-keep names the op: by its spelling or by a result's %name. */
static bool pinned(const autocast *a, const qir_op *op) {
  for (const char *p = a->keep; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 1 && p[0] == '%') {
      for (int r = 0; r < op->n_results; r++)
        if (op->results[r]->name && strlen(op->results[r]->name) == len - 1 &&
            !memcmp(op->results[r]->name, p + 1, len - 1))
          return true;
    } else {
      const char *name = qir_opinfo_get(op->code)->name;
      if (strlen(name) == len && !memcmp(name, p, len)) return true;
    }
    p = end ? end + 1 : NULL;
  }
  return false;
}

/* A convolution over a model input, reached through data movement only
 * (the STFT of raw audio, the stem of an image network): it sums long
 * windows of unnormalised samples, where cancellation leaves small
 * components (a quiet frequency bin) that 16-bit operands would drown; it is
 * one layer, a small share of the work. */
static bool conv_over_input(const qir_op *op) {
  if (op->code != QIR_OP_CONV && op->code != QIR_OP_CONV_TRANSPOSE) return false;
  const qir_value *v = op->operands[0];
  for (int depth = 0; v && depth < 16; depth++) {
    if (!v->def) return false;
    switch (v->def->code) {
    case QIR_OP_INPUT: return true;
    case QIR_OP_RESHAPE: case QIR_OP_PAD: case QIR_OP_TRANSPOSE: case QIR_OP_SLICE: case QIR_OP_IDENTITY:
      v = v->def->operands[0];
      continue;
    default: return false;
    }
  }
  return false;
}

/* The calibration run saw one of op's f32 values beyond the limit. */
static bool out_of_range(const autocast *a, const qir_op *op) {
  if (!a->magnitude) return false;
  for (int i = 0; i < op->n_operands + op->n_results; i++) {
    const qir_value *v = i < op->n_operands ? op->operands[i] : op->results[i - op->n_operands];
    if (v->type.dtype == QIR_F32 && v->id < a->n_magnitude && a->magnitude[v->id] > a->range_limit) return true;
  }
  return false;
}

/* Gives every operand this pass made low back in f32. */
static bool operands_to_f32(autocast *a, qir_op *op) {
  for (int i = 0; i < op->n_operands; i++)
    if (is_low(a, op->operands[i])) {
      qir_value *t = f32_twin(a, op->operands[i], op->loc);
      if (!t) return false;
      qir_op_set_operand(a->m, op, i, t);
    }
  return true;
}

/* op in the low type: its f32 operands (the first n_low of them) become low
 * twins, the rest are given back in f32; its f32 results become low. */
static bool to_low(autocast *a, qir_op *op, int n_low) {
  for (int i = n_low; i < op->n_operands; i++)
    if (is_low(a, op->operands[i])) {
      qir_value *t = f32_twin(a, op->operands[i], op->loc);
      if (!t) return false;
      qir_op_set_operand(a->m, op, i, t);
    }
  for (int i = 0; i < n_low && i < op->n_operands; i++)
    if (op->operands[i]->type.dtype == QIR_F32) {
      qir_value *t = low_twin(a, op->operands[i], op->loc);
      if (!t) return false;
      qir_op_set_operand(a->m, op, i, t);
    }
  if (!grow(a)) return false;
  for (int r = 0; r < op->n_results; r++)
    if (op->results[r]->type.dtype == QIR_F32) {
      op->results[r]->type.dtype = a->low;
      a->made_low[op->results[r]->id] = true;
    }
  return true;
}

static bool has_low_operand(const autocast *a, const qir_op *op) {
  for (int i = 0; i < op->n_operands; i++)
    if (is_low(a, op->operands[i])) return true;
  return false;
}

static bool has_f32(const qir_op *op) {
  for (int i = 0; i < op->n_operands; i++)
    if (op->operands[i]->type.dtype == QIR_F32) return true;
  for (int r = 0; r < op->n_results; r++)
    if (op->results[r]->type.dtype == QIR_F32) return true;
  return false;
}

static bool cast_region(autocast *a, qir_region *r);

static bool cast_op(autocast *a, qir_op *op) {
  switch (op->code) {
  case QIR_OP_CONST: return true;        /* converted when an op wants it low */
  case QIR_OP_CAST: return true;         /* reads a low value as well as an f32 one */
  case QIR_OP_INPUT:
    if (a->io && op->results[0]->type.dtype == QIR_F32) {
      op->results[0]->type.dtype = a->low;
      if (!grow(a)) return false;
      a->made_low[op->results[0]->id] = true;
    }
    return true;
  case QIR_OP_OUTPUT:
    if (!a->io) return operands_to_f32(a, op);
    if (op->operands[0]->type.dtype == QIR_F32) {
      qir_value *t = low_twin(a, op->operands[0], op->loc);
      if (!t) return false;
      qir_op_set_operand(a->m, op, 0, t);
    }
    return true;
  default: break;
  }
  if (op->n_regions || op->code == QIR_OP_COMPUTE || op->code == QIR_OP_YIELD || op->code == QIR_OP_RPROGRAM) {
    /* control flow, kernels, tensor expressions: their types are their own */
    if (!operands_to_f32(a, op)) return false;
    for (int i = 0; i < op->n_regions; i++)
      if (!cast_region(a, op->regions[i])) return false;
    return true;
  }
  int row;
  const ac_row *rule = row_of(op->code, &row);
  if (pinned(a, op)) row = AC_ROW_PINNED, rule = NULL;
  else if (out_of_range(a, op)) row = AC_ROW_RANGE, rule = NULL;
  else if (!a->input_convs_low && conv_over_input(op)) row = AC_ROW_SIGNAL, rule = NULL;
  else if (a->elementwise_f32 && rule && rule->rule != AC_LOW && rule->rule != AC_KEEP &&
           ((qir_opinfo_get(op->code)->flags & QIR_OPF_ELEMENTWISE) || op->code == QIR_OP_BATCH_NORM))
    row = AC_ROW_ELEMENTWISE, rule = NULL;
  bool low = false, too_long = false;
  if (rule) {
    switch (rule->rule) {
    case AC_LOW: low = true; break;
    case AC_FOLLOW: low = has_low_operand(a, op); break;
    case AC_LONG:
      too_long = has_low_operand(a, op) && reduced_length(op) > a->long_limit;
      low = has_low_operand(a, op) && !too_long;
      break;
    case AC_DATA: low = true; break;
    case AC_KEEP: break;
    }
  }
  /* Only ops that touch f32 data count in the report. */
  if (has_f32(op) || has_low_operand(a, op)) {
    (low ? a->low_ops : a->f32_ops)[row]++;
    a->f32_long[row] += too_long;
  }
  if (!low) return operands_to_f32(a, op);
  return to_low(a, op, rule && rule->rule == AC_DATA ? 1 : op->n_operands);
}

static bool cast_region(autocast *a, qir_region *r) {
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    if (!cast_op(a, op)) return false;
  }
  return true;
}

/* The f32 constants this pass converted whose every use now reads the twin. */
static void drop_converted_consts(autocast *a) {
  for (int i = 0; i < a->cap; i++) {
    qir_value *v = a->twin[i];
    /* twin[low twin's id] is the f32 original */
    if (v && a->made_low[i] && v->def && v->def->code == QIR_OP_CONST && !v->uses && v->def->parent)
      qir_op_unlink(v->def);
  }
}

static bool has_plan(qir_op *op, void *ctx) {
  const qir_op **found = ctx;
  if (op->code == QIR_OP_KERNEL || op->code == QIR_OP_RPROGRAM || qir_op_attr(op, "tile")) {
    *found = op;
    return false;
  }
  return true;
}

/* ---------------------------------------------------------------- the report */

typedef struct {
  double est_us;
  int64_t weight_bytes;
  const qir_target *t;
  roller_options plan;
  qir_module *m;
} measure;

/* Each op planned alone by Roller's model; the plans are removed again. */
static bool measure_op(qir_op *op, void *ctx) {
  measure *s = ctx;
  if (op->code == QIR_OP_CONST) {
    const qir_type *t = &op->results[0]->type;
    if (!op->cst->splat) s->weight_bytes += qir_type_numel(t) * qir_dtype_size(t->dtype);
    return true;
  }
  if (op->code == QIR_OP_INPUT || op->code == QIR_OP_OUTPUT || op->n_regions || qir_op_attr(op, "tile")) return true;
  qir_diag quiet;
  qir_diag_init_quiet(&quiet);
  if (!roller_plan_op(s->m, op, s->t, &s->plan, NULL, &quiet)) return true;
  const qir_attr *tile = qir_op_attr(op, "tile");
  if (tile) {
    const qir_attr_val *e = qir_attr_dict_get(&tile->val, "est_us");
    if (e) s->est_us += e->kind == QIR_ATTR_INT ? (double)e->i : e->f;
  }
  qir_op_remove_attr(op, "tile");
  qir_op_remove_attr(op, "tile_alternatives");
  return true;
}

static bool measure_module(qopt_ctx *ctx, qir_module *m, measure *s) {
  qir_target buf;
  *s = (measure){.m = m};
  if (!(s->t = qopt_target(ctx, &buf)) || !roller_options_of(ctx, &s->plan)) return false;
  s->plan.topk = 1;
  s->plan.relayout = false;   /* measures the ops as they are */
  qir_walk(m->body, measure_op, s);
  s->t = NULL;                   /* buf ends here */
  return true;
}

static void report(const autocast *a, const measure *before, const measure *after, const char *target) {
  FILE *o = stderr;
  const char *lo = qir_dtype_name(a->low);
  int n_low = 0, n_f32 = 0;
  for (int i = 0; i < AC_ROW_COUNT; i++) n_low += a->low_ops[i], n_f32 += a->f32_ops[i];
  fprintf(o, "autocast: @%s to %s: %d ops in %s, %d kept in f32\n", a->m->name ? a->m->name : "module", lo, n_low, lo,
          n_f32);
  /* per row: ops in the low type, kept by the row, kept for their length */
  for (int i = 0; i < AC_ROW_COUNT; i++)
    for (int side = 0; side < 3; side++) {
      int n = side == 0 ? a->low_ops[i] : side == 1 ? a->f32_ops[i] - a->f32_long[i] : a->f32_long[i];
      if (!n) continue;
      const char *op = i < AC_ROWS ? qir_opinfo_get(ac_table[i].code)->name
                       : i == AC_ROW_PINNED ? "(pinned)"
                       : i == AC_ROW_RANGE ? "(range)"
                       : i == AC_ROW_SIGNAL ? "(input conv)"
                       : i == AC_ROW_ELEMENTWISE ? "(elementwise)"
                                            : "(no row)";
      const char *why = i < AC_ROWS ? ac_table[i].why
                        : i == AC_ROW_PINNED ? "named by -autocast-keep"
                        : i == AC_ROW_RANGE ? "a value beyond -autocast-range on the calibration inputs"
                        : i == AC_ROW_SIGNAL ? "a convolution over the model's raw input (-autocast-input-convs runs it low)"
                        : i == AC_ROW_ELEMENTWISE ? "-autocast-elementwise=f32: one rounding per layer"
                                             : "not in the table: kept in f32";
      const char *how = "";
      if (side == 1 && i < AC_ROWS && (ac_table[i].rule == AC_FOLLOW || ac_table[i].rule == AC_LONG))
        how = " [its operands are f32]";
      if (side == 2) how = " [reduces more than -autocast-long elements]";
      fprintf(o, "autocast:   %-4s %-18s %5d  %s%s\n", side ? "f32" : lo, op, n, why, how);
    }
  fprintf(o, "autocast: casts inserted %d (%d to %s, %d to f32); constants converted at compile time %d\n",
          a->casts_to_low + a->casts_to_f32, a->casts_to_low, lo, a->casts_to_f32, a->consts_converted);
  fprintf(o, "autocast: weight bytes %lld -> %lld (%.2f)\n", (long long)before->weight_bytes,
          (long long)after->weight_bytes, before->weight_bytes ? (double)after->weight_bytes / (double)before->weight_bytes : 1.0);
  fprintf(o, "autocast: modelled time (%s, each op alone, unfused) %.1f us -> %.1f us (speed-up %.2fx)\n", target,
          before->est_us, after->est_us, after->est_us > 0 ? before->est_us / after->est_us : 1.0);
}

/* ---------------------------------------------------------------- the pass */

bool qopt_autocast(qopt_ctx *ctx, qir_module *m) {
  const char *to = qopt_option_str(ctx, "autocast");
  qir_loc none = {0};
  autocast a = {.ctx = ctx, .m = m, .io = qopt_option_bool(ctx, "autocast-io"),
                .long_limit = qopt_option_int(ctx, "autocast-long"), .keep = qopt_option_str(ctx, "autocast-keep"),
                .input_convs_low = qopt_option_bool(ctx, "autocast-input-convs")};
  const char *ew = qopt_option_str(ctx, "autocast-elementwise");
  if (strcmp(ew, "low") && strcmp(ew, "f32")) {
    qir_error(ctx->diag, none, "-autocast-elementwise=%s: expected low or f32", ew);
    return false;
  }
  a.elementwise_f32 = !strcmp(ew, "f32");
  if (!strcmp(to, "f16")) a.low = QIR_F16;
  else if (!strcmp(to, "bf16")) a.low = QIR_BF16;
  else {
    qir_error(ctx->diag, none, "-autocast=%s is not offered: the low types are f16 and bf16", *to ? to : "(empty)");
    return false;
  }
  /* plans and kernel groups were made for the types they saw */
  const qir_op *planned = NULL;
  qir_walk(m->body, has_plan, &planned);
  if (planned) {
    qir_error(ctx->diag, planned->loc, "-autocast runs before -roller, -welder and -rammer: this %s has %s",
              qir_opinfo_get(planned->code)->name, planned->code == QIR_OP_KERNEL ? "a kernel group's types" : "a plan");
    return false;
  }
  if (a.long_limit < 1) {
    qir_error(ctx->diag, none, "-autocast-long must be at least 1");
    return false;
  }
  bool stats = qopt_option_bool(ctx, "stats");
  measure before = {0}, after = {0};
  if (stats && !measure_module(ctx, m, &before)) return false;
  /* f16's range ends at 65504; bf16 has f32's */
  const char *calibration = qopt_option_str(ctx, "autocast-calibrate");
  double *magnitude = NULL;
  int measured = 0;
  if (*calibration && a.low == QIR_F16) {
    a.n_magnitude = m->next_value_id;
    a.range_limit = qopt_option_float(ctx, "autocast-range");
    magnitude = calloc((size_t)a.n_magnitude + 1, sizeof *magnitude);
    if (!magnitude || !autocast_calibrate(m, calibration, magnitude, a.n_magnitude, &measured, ctx->diag)) {
      free(magnitude);
      return false;
    }
    a.magnitude = magnitude;
  }
  bool ok = grow(&a) && cast_region(&a, m->body);
  free(magnitude);
  if (ok) drop_converted_consts(&a);
  free(a.twin);
  free(a.made_low);
  if (!ok) {
    if (ctx->diag->n_errors == 0) qir_error(ctx->diag, none, "-autocast: out of memory");
    return false;
  }
  if (stats) {
    if (!measure_module(ctx, m, &after)) return false;
    if (*calibration && a.low == QIR_F16)
      fprintf(stderr, "autocast: calibration: %d ops ran on %s; %d kept in f32 for a value beyond %g\n", measured,
              calibration, a.f32_ops[AC_ROW_RANGE], a.range_limit);
    report(&a, &before, &after, qopt_option_str(ctx, "target"));
  }
  return true;
}
