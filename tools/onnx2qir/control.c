/* control.c: If, Loop and Scan.
 *
 * If with a condition that is constant after folding is inlined (the taken
 * branch's nodes go straight into the current region); otherwise it becomes an
 * `if` op whose regions yield the branch outputs.  Loop becomes a `loop` op
 * (operands trip, cond, carried...; region args iter, cond, carried...; yield
 * cond, carried..., scan outputs...).  A Loop whose body needs the iteration
 * number as a constant (a Slice whose start is the counter, say) is unrolled
 * when its trip count is a small constant.  Scan becomes a loop whose body
 * gathers the i-th slice of each scan input. */
#include "onnx2qir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN(k) ((k) < nc->n_in ? nc->in[k] : NULL)
/* Iterations the importer unrolls in all, so nested loops cannot explode. */
#define MAX_UNROLLED 4096
#define IMP (nc->imp)

static const Onnx__GraphProto *graph_attr(node_ctx *nc, const char *name) {
  const Onnx__AttributeProto *a = attr_find(nc, name);
  if (!a || !a->g) {
    imp_error(nc->imp, "attribute '%s' (a graph) is missing", name);
    return NULL;
  }
  return a->g;
}

/* A one-element value as a scalar of its dtype. */
static qir_value *scalarize(importer *imp, qir_value *v) {
  if (!v || v->type.rank == 0 || qir_type_numel(&v->type) != 1) return v;
  return emit_reshape(imp, v, 0, NULL);
}

/* Makes v's type `want` (a reshape when only the shape's spelling differs, e.g.
 * [1] vs []).  NULL with an error when they cannot match. */
static qir_value *conform(importer *imp, qir_value *v, const qir_type *want, const char *what) {
  if (qir_type_equal(&v->type, want)) return v;
  if (v->type.dtype == want->dtype && qir_type_numel(&v->type) == qir_type_numel(want))
    return emit_reshape(imp, v, want->rank, want->dims);
  char a[128], b[128];
  qir_type_format(&v->type, a, sizeof a);
  qir_type_format(want, b, sizeof b);
  imp_error(imp, "%s has type %s but %s is required (shapes must be static)", what, a, b);
  return NULL;
}

static void yield_values(importer *imp, qir_region *r, int n, qir_value **vals) {
  qir_op *y = qir_op_new(imp->m, QIR_OP_YIELD, n, vals, 0, NULL, (qir_loc){0});
  qir_op_append(r, y);
}

/* ---------------------------------------------------------------- If */

static bool import_branch(node_ctx *nc, const Onnx__GraphProto *g, qir_region *r, qir_value **outs) {
  importer *imp = nc->imp;
  qir_region *saved = imp->region;
  imp->region = r;
  scope *sc = scope_new(imp->sc);
  bool ok = import_graph_body(imp, g, sc, outs);
  scope_free(sc);
  imp->region = saved;
  return ok;
}

bool convert_if(node_ctx *nc) {
  importer *imp = nc->imp;
  if (!IN(0)) return false;
  const Onnx__GraphProto *tg = graph_attr(nc, "then_branch"), *eg = graph_attr(nc, "else_branch");
  if (!tg || !eg) return false;
  int n = nc->n_out;
  if ((int)tg->n_output != n || (int)eg->n_output != n) {
    imp_error(imp, "branches have %zu and %zu outputs, the node %d", tg->n_output, eg->n_output, n);
    return false;
  }
  qir_value *cond = scalarize(imp, IN(0));
  if (!cond) return false;
  if (qir_type_numel(&cond->type) != 1) {
    imp_error(imp, "the condition must have one element");
    return false;
  }
  qir_value **outs = calloc((size_t)n + 1, sizeof *outs), **eouts = calloc((size_t)n + 1, sizeof *eouts);
  bool ok = false;
  if (const_def(cond)) {
    /* Known condition: inline the taken branch. */
    const Onnx__GraphProto *g = const_elem(imp, cond, 0) != 0 ? tg : eg;
    scope *sc = scope_new(imp->sc);
    ok = import_graph_body(imp, g, sc, outs);
    scope_free(sc);
    for (int i = 0; ok && i < n; i++) nc->out[i] = outs[i];
    free(outs);
    free(eouts);
    return ok;
  }
  /* Import both branches quietly first: a branch that cannot be imported for
   * these static shapes (silero's 8 kHz branch under a 16 kHz input length)
   * can never run correctly with them; it becomes a dead branch. */
  qir_region *rt = region_detached(imp), *re = region_detached(imp);
  int errs = imp->n_errors;
  imp->quiet++;
  imp->quiet_first[0] = 0;
  bool ok_t = import_branch(nc, tg, rt, outs);
  char first_t[512];
  snprintf(first_t, sizeof first_t, "%s", imp->quiet_first);
  imp->quiet_first[0] = 0;
  imp->n_errors = errs;
  bool ok_e = import_branch(nc, eg, re, eouts);
  char first_e[512];
  snprintf(first_e, sizeof first_e, "%s", imp->quiet_first);
  imp->quiet--;
  imp->n_errors = errs;
  if (!ok_t && !ok_e) {
    /* report for real */
    import_branch(nc, tg, region_detached(imp), outs);
    import_branch(nc, eg, region_detached(imp), eouts);
    free(outs);
    free(eouts);
    return false;
  }
  ok = true;
  const char *dead = NULL;
  if (!ok_t || !ok_e) {
    dead = ok_t ? "else" : "then";
    qir_value **live = ok_t ? outs : eouts, **dv = ok_t ? eouts : outs;
    qir_region *dr = region_detached(imp);
    if (ok_t) re = dr;
    else rt = dr;
    qir_region *saved = imp->region;
    imp->region = dr;
    for (int i = 0; i < n; i++) {
      if (!live[i] || live[i] == POISON) {
        ok = false;
        break;
      }
      double fill = qir_dtype_is_float(live[i]->type.dtype) ? NAN : 0;
      dv[i] = const_splat(imp, live[i]->type, fill);
    }
    imp->region = saved;
    if (!imp->probe)
      fprintf(stderr, "%s: warning: node '%s' (If, opset %lld): the %s branch cannot be imported for these input shapes "
            "(%s); it yields %s\n", imp->model_path, nc->node->name ? nc->node->name : "", (long long)imp->opset, dead,
            ok_t ? first_e : first_t, "NaN/zero placeholders and must not be taken");
  }
  if (ok) {
    qir_type *types = calloc((size_t)n + 1, sizeof *types);
    for (int i = 0; i < n && ok; i++) {
      types[i] = outs[i]->type;
      if (!qir_type_equal(&outs[i]->type, &eouts[i]->type)) {
        /* a [1] vs [] difference is harmless: follow the then branch */
        qir_region *saved = imp->region;
        imp->region = re;
        char what[64];
        snprintf(what, sizeof what, "else-branch output %d", i);
        eouts[i] = conform(imp, eouts[i], &types[i], what);
        imp->region = saved;
        if (!eouts[i]) ok = false;
      }
    }
    if (ok) {
      yield_values(imp, rt, n, outs);
      yield_values(imp, re, n, eouts);
      qir_op *op = op_begin_typed(imp, QIR_OP_IF, 1, &cond, n, types);
      if (dead) set_w(imp, op, "onnx_dead_branch", dead);
      region_adopt(op, 0, rt);
      region_adopt(op, 1, re);
      qir_value **res = calloc((size_t)n + 1, sizeof *res);
      if (op_end(imp, op, res) || n == 0) {
        for (int i = 0; i < n; i++) nc->out[i] = res[i];
      } else {
        ok = false;
      }
      free(res);
    }
    free(types);
  }
  free(outs);
  free(eouts);
  return ok;
}

/* ---------------------------------------------------------------- Loop */

/* Imports a Loop body into region r with args (iter, cond, carried...).
 * outs gets cond', carried'..., scans... (conformed to the carried types). */
static bool import_loop_body(node_ctx *nc, const Onnx__GraphProto *body, qir_region *r, int n_carried,
                             qir_value **carried_init, qir_value **outs) {
  importer *imp = nc->imp;
  qir_region *saved = imp->region;
  imp->region = r;
  scope *sc = scope_new(imp->sc);
  qir_value *args[2 + 64];
  args[0] = qir_region_add_arg(imp->m, r, qir_type_make(QIR_I64, 0, NULL), NULL);
  args[1] = qir_region_add_arg(imp->m, r, qir_type_make(QIR_BOOL, 0, NULL), NULL);
  for (int i = 0; i < n_carried; i++) args[2 + i] = qir_region_add_arg(imp->m, r, carried_init[i]->type, NULL);
  for (int i = 0; i < 2 + n_carried; i++) {
    const char *name = body->input[i]->name ? body->input[i]->name : "";
    name_value(imp, args[i], name);
    strmap_put(sc->vals, name, args[i]);
  }
  bool ok = import_graph_body(imp, body, sc, outs);
  if (ok) {
    outs[0] = conform(imp, scalarize(imp, outs[0]), &args[1]->type, "the loop body's condition output");
    if (!outs[0]) ok = false;
    for (int i = 0; ok && i < n_carried; i++) {
      char what[64];
      snprintf(what, sizeof what, "loop-carried value %d", i);
      outs[1 + i] = conform(imp, outs[1 + i], &carried_init[i]->type, what);
      if (!outs[1 + i]) ok = false;
    }
  }
  scope_free(sc);
  imp->region = saved;
  return ok;
}

/* Loop with a constant trip count, imported iteration by iteration. */
static bool unroll_loop(node_ctx *nc, const Onnx__GraphProto *body, int64_t trip, qir_value *cond,
                        int n_carried, qir_value **carried) {
  importer *imp = nc->imp;
  int n_out = (int)body->n_output, n_scan = n_out - 1 - n_carried;
  qir_value **cur = calloc((size_t)n_carried + 1, sizeof *cur);
  qir_value **outs = calloc((size_t)n_out + 1, sizeof *outs);
  qir_value ***scans = calloc((size_t)n_scan + 1, sizeof *scans);
  for (int s = 0; s < n_scan; s++) scans[s] = calloc((size_t)trip + 1, sizeof **scans);
  for (int i = 0; i < n_carried; i++) cur[i] = carried[i];
  bool ok = true;
  int64_t it = 0;
  for (; it < trip && ok; it++) {
    if (!const_def(cond)) {
      imp_error(imp, "the loop condition is computed at run time, so the loop cannot be unrolled");
      ok = false;
      break;
    }
    if (const_elem(imp, cond, 0) == 0) break;
    if (++imp->unrolled > MAX_UNROLLED) {
      imp_error(imp, "unrolling the loop needs more than %d iterations in all", MAX_UNROLLED);
      ok = false;
      break;
    }
    scope *sc = scope_new(imp->sc);
    int64_t itv = it;
    strmap_put(sc->vals, body->input[0]->name, const_data(imp, qir_type_make(QIR_I64, 0, NULL), &itv));
    strmap_put(sc->vals, body->input[1]->name, cond);
    for (int i = 0; i < n_carried; i++) strmap_put(sc->vals, body->input[2 + i]->name, cur[i]);
    ok = import_graph_body(imp, body, sc, outs);
    scope_free(sc);
    if (!ok) break;
    cond = scalarize(imp, outs[0]);
    for (int i = 0; i < n_carried; i++) cur[i] = outs[1 + i];
    for (int s = 0; s < n_scan; s++) scans[s][it] = outs[1 + n_carried + s];
  }
  int64_t done = it;
  for (int i = 0; ok && i < n_carried; i++) nc->out[i] = cur[i];
  for (int s = 0; ok && s < n_scan && 1 + n_carried + s <= n_out; s++) {
    if (done == 0) {
      imp_error(imp, "a loop that runs no iteration has empty scan outputs of unknown shape");
      ok = false;
      break;
    }
    qir_value **parts = calloc((size_t)done + 1, sizeof *parts);
    for (int64_t k = 0; k < done && ok; k++) {
      parts[k] = emit_insert_unit_axis(imp, scans[s][k], 0);
      if (!parts[k]) ok = false;
    }
    if (ok) {
      if (done == 1) {
        nc->out[n_carried + s] = parts[0];
      } else {
        qir_op *op = op_begin(imp, QIR_OP_CONCAT, (int)done, parts);
        set_i(imp, op, "axis", 0);
        nc->out[n_carried + s] = op_end(imp, op, NULL);
        if (!nc->out[n_carried + s]) ok = false;
      }
    }
    free(parts);
  }
  for (int s = 0; s < n_scan; s++) free(scans[s]);
  free(scans);
  free(cur);
  free(outs);
  return ok;
}

bool convert_loop(node_ctx *nc) {
  importer *imp = nc->imp;
  const Onnx__GraphProto *body = graph_attr(nc, "body");
  if (!body) return false;
  int n_carried = nc->n_in - 2;
  if (n_carried < 0) n_carried = 0;
  if (n_carried > 64) {
    imp_error(imp, "too many loop-carried values");
    return false;
  }
  if ((int)body->n_input != 2 + n_carried || (int)body->n_output < 1 + n_carried) {
    imp_error(imp, "the body has %zu inputs and %zu outputs for %d carried values", body->n_input, body->n_output,
              n_carried);
    return false;
  }
  int n_scan = (int)body->n_output - 1 - n_carried;
  if (nc->n_out > n_carried + n_scan) {
    imp_error(imp, "the node has more outputs than the body produces");
    return false;
  }
  qir_value **carried = nc->in + 2;
  for (int i = 0; i < n_carried; i++)
    if (!carried[i]) {
      imp_error(imp, "loop-carried input %d is missing", i);
      return false;
    }
  qir_value *trip = IN(0) ? scalarize(imp, IN(0)) : NULL;
  qir_value *cond = IN(1) ? scalarize(imp, IN(1)) : NULL;
  bool trip_const = trip && const_def(trip);
  int64_t trip_n = trip_const ? const_int(imp, trip, 0) : -1;
  if (trip_const && trip_n < 0) trip_n = 0;
  /* First try a loop region quietly; fall back to unrolling. */
  qir_region *r = region_detached(imp);
  qir_value **outs = calloc((size_t)body->n_output + 1, sizeof *outs);
  int errs = imp->n_errors;
  imp->quiet++;
  bool ok = import_loop_body(nc, body, r, n_carried, carried, outs);
  imp->quiet--;
  if (!ok) {
    imp->n_errors = errs;
    free(outs);
    bool cond_const = !cond || const_def(cond);
    if (trip_const && trip_n <= MAX_UNROLLED && cond_const) {
      qir_value *c = cond ? cond : const_scalar(imp, QIR_BOOL, 1);
      return unroll_loop(nc, body, trip_n, c, n_carried, carried);
    }
    if (trip && (!trip_const || !cond_const)) {
      /* The body needs constant iteration numbers: the loop can only be
       * unrolled, which needs a constant trip count and condition. */
      int64_t dummy;
      int n;
      imp_error(imp, "the loop body needs the iteration number as a constant, so the loop must be unrolled");
      if (!trip_const) need_const_ints(nc, 0, &dummy, 1, &n);
      if (!cond_const) need_const_ints(nc, 1, &dummy, 1, &n);
      return false;
    }
    /* report the body's errors for real */
    qir_region *r2 = region_detached(imp);
    outs = calloc((size_t)body->n_output + 1, sizeof *outs);
    import_loop_body(nc, body, r2, n_carried, carried, outs);
    free(outs);
    return false;
  }
  if (n_scan > 0 && !trip_const) {
    /* scan outputs need a static extent */
    int64_t dummy;
    int n;
    if (!IN(0)) imp_error(imp, "a loop with scan outputs needs a constant trip count");
    else need_const_ints(nc, 0, &dummy, 1, &n);
    free(outs);
    return false;
  }
  yield_values(imp, r, 1 + n_carried + n_scan, outs);
  int n_res = n_carried + n_scan;
  qir_type *types = calloc((size_t)n_res + 1, sizeof *types);
  for (int i = 0; i < n_carried; i++) types[i] = carried[i]->type;
  for (int s = 0; s < n_scan; s++) {
    qir_type t = outs[1 + n_carried + s]->type;
    if (t.rank + 1 > QIR_MAX_RANK) {
      imp_error(imp, "scan output rank too large");
      free(types);
      free(outs);
      return false;
    }
    types[n_carried + s].dtype = t.dtype;
    types[n_carried + s].rank = t.rank + 1;
    types[n_carried + s].dims[0] = trip_n;
    for (int j = 0; j < t.rank; j++) types[n_carried + s].dims[1 + j] = t.dims[j];
  }
  qir_value **ops_in = calloc((size_t)n_carried + 3, sizeof *ops_in);
  ops_in[0] = trip ? trip : const_scalar(imp, QIR_I64, 9223372036854775807.0);
  ops_in[1] = cond ? cond : const_scalar(imp, QIR_BOOL, 1);
  for (int i = 0; i < n_carried; i++) ops_in[2 + i] = carried[i];
  qir_op *op = op_begin_typed(imp, QIR_OP_LOOP, 2 + n_carried, ops_in, n_res, types);
  region_adopt(op, 0, r);
  qir_value **res = calloc((size_t)n_res + 1, sizeof *res);
  ok = op_end(imp, op, res) != NULL || n_res == 0;
  for (int i = 0; ok && i < nc->n_out; i++) nc->out[i] = res[i];
  free(res);
  free(ops_in);
  free(types);
  free(outs);
  return ok;
}

/* ---------------------------------------------------------------- Scan */

bool convert_scan(node_ctx *nc) {
  importer *imp = nc->imp;
  const Onnx__GraphProto *body = graph_attr(nc, "body");
  if (!body) return false;
  int64_t n_scan_in = attr_int(nc, "num_scan_inputs", -1);
  int first = 0;
  bool batched = nc->opset < 9;
  if (batched) {
    if (IN(0)) {
      imp_error(imp, "Scan-8 with sequence_lens is not supported");
      return false;
    }
    first = 1;
  }
  int n_in = nc->n_in - first;
  if (n_scan_in < 1 || n_scan_in > n_in) {
    imp_error(imp, "num_scan_inputs is missing or invalid");
    return false;
  }
  int n_state = n_in - (int)n_scan_in, n_sin = (int)n_scan_in;
  if (n_state > 64 || n_sin > 64) {
    imp_error(imp, "too many scan inputs or states");
    return false;
  }
  int n_sout = (int)body->n_output - n_state;
  if ((int)body->n_input != n_state + n_sin || n_sout < 0 || nc->n_out > n_state + n_sout) {
    imp_error(imp, "the body's inputs and outputs do not match the node");
    return false;
  }
  int64_t in_axes[64] = {0}, in_dirs[64] = {0}, out_axes[64] = {0}, out_dirs[64] = {0};
  if (batched) {
    attr_ints(nc, "directions", in_dirs, 64);
  } else {
    attr_ints(nc, "scan_input_axes", in_axes, 64);
    attr_ints(nc, "scan_input_directions", in_dirs, 64);
    attr_ints(nc, "scan_output_axes", out_axes, 64);
    attr_ints(nc, "scan_output_directions", out_dirs, 64);
  }
  qir_value *states[64], *sins[64];
  for (int i = 0; i < n_in; i++)
    if (!IN(first + i)) {
      imp_error(imp, "input %d is missing", first + i);
      return false;
    }
  for (int i = 0; i < n_state; i++) states[i] = IN(first + i);
  for (int i = 0; i < n_sin; i++) sins[i] = IN(first + n_state + i);
  if (batched) {
    /* Scan-8 has a leading batch axis everywhere; only batch 1 is supported:
     * drop it and scan axis 1 (now 0). */
    for (int i = 0; i < n_in; i++) {
      qir_value *v = IN(first + i);
      if (v->type.rank < 1 || v->type.dims[0] != 1) {
        imp_error(imp, "Scan-8 with a batch size other than 1 is not supported");
        return false;
      }
      qir_value *s = emit_reshape(imp, v, v->type.rank - 1, v->type.dims + 1);
      if (i < n_state) states[i] = s;
      else sins[i - n_state] = s;
    }
  }
  int64_t trip = -1;
  for (int j = 0; j < n_sin; j++) {
    int64_t a = norm_axis(in_axes[j], sins[j]->type.rank);
    if (a < 0) {
      imp_error(imp, "scan input axis out of range");
      return false;
    }
    in_axes[j] = a;
    int64_t len = sins[j]->type.dims[a];
    if (trip >= 0 && len != trip) {
      imp_error(imp, "scan inputs differ in length");
      return false;
    }
    trip = len;
  }
  qir_region *r = region_detached(imp);
  qir_region *saved = imp->region;
  imp->region = r;
  scope *sc = scope_new(imp->sc);
  qir_value *iter = qir_region_add_arg(imp->m, r, qir_type_make(QIR_I64, 0, NULL), NULL);
  qir_value *condv = qir_region_add_arg(imp->m, r, qir_type_make(QIR_BOOL, 0, NULL), NULL);
  name_value(imp, iter, "scan_iter");
  name_value(imp, condv, "scan_cond");
  for (int i = 0; i < n_state; i++) {
    qir_value *a = qir_region_add_arg(imp->m, r, states[i]->type, NULL);
    name_value(imp, a, body->input[i]->name);
    strmap_put(sc->vals, body->input[i]->name, a);
  }
  bool ok = true;
  for (int j = 0; j < n_sin && ok; j++) {
    qir_value *idx = iter;
    if (in_dirs[j]) idx = emit2(imp, QIR_OP_SUB, const_scalar(imp, QIR_I64, (double)(trip - 1)), iter);
    qir_value *in2[2] = {sins[j], idx};
    qir_op *g = op_begin(imp, QIR_OP_GATHER, 2, in2);
    set_i(imp, g, "axis", in_axes[j]);
    qir_value *sl = op_end(imp, g, NULL);
    if (!sl) ok = false;
    else strmap_put(sc->vals, body->input[n_state + j]->name, sl);
  }
  qir_value **outs = calloc((size_t)body->n_output + 2, sizeof *outs);
  if (ok) ok = import_graph_body(imp, body, sc, outs + 1);
  for (int i = 0; ok && i < n_state; i++) {
    outs[1 + i] = conform(imp, outs[1 + i], &states[i]->type, "scan state");
    if (!outs[1 + i]) ok = false;
  }
  scope_free(sc);
  imp->region = saved;
  if (!ok) {
    free(outs);
    return false;
  }
  outs[0] = condv;
  yield_values(imp, r, 1 + n_state + n_sout, outs);
  int n_res = n_state + n_sout;
  qir_type *types = calloc((size_t)n_res + 1, sizeof *types);
  for (int i = 0; i < n_state; i++) types[i] = states[i]->type;
  for (int s = 0; s < n_sout; s++) {
    qir_type t = outs[1 + n_state + s]->type;
    types[n_state + s] = t;
    types[n_state + s].rank = t.rank + 1;
    types[n_state + s].dims[0] = trip;
    for (int j = 0; j < t.rank; j++) types[n_state + s].dims[1 + j] = t.dims[j];
  }
  qir_value **ops_in = calloc((size_t)n_state + 3, sizeof *ops_in);
  int64_t tripv = trip;
  ops_in[0] = const_data(imp, qir_type_make(QIR_I64, 0, NULL), &tripv);
  ops_in[1] = const_scalar(imp, QIR_BOOL, 1);
  for (int i = 0; i < n_state; i++) ops_in[2 + i] = states[i];
  qir_op *op = op_begin_typed(imp, QIR_OP_LOOP, 2 + n_state, ops_in, n_res, types);
  set_s(imp, op, "onnx_op", "Scan");
  region_adopt(op, 0, r);
  qir_value **res = calloc((size_t)n_res + 1, sizeof *res);
  ok = op_end(imp, op, res) != NULL;
  for (int s = 0; ok && s < n_sout; s++) {
    qir_value *v = res[n_state + s];
    if (out_dirs[s]) v = emit_reverse_axis0(imp, v, trip);
    int rank = v ? v->type.rank : 0;
    int64_t ax = batched ? 0 : norm_axis(out_axes[s], rank);
    if (v && ax > 0) {
      int64_t perm[QIR_MAX_RANK];
      for (int i = 0, k = 1; i < rank; i++) perm[i] = i == ax ? 0 : k++;
      v = emit_transpose(imp, v, rank, perm);
    }
    res[n_state + s] = v;
    if (!v) ok = false;
  }
  if (ok && batched)
    for (int i = 0; i < n_res; i++) res[i] = emit_insert_unit_axis(imp, res[i], 0);
  for (int i = 0; ok && i < nc->n_out; i++) nc->out[i] = res[i];
  free(res);
  free(ops_in);
  free(types);
  free(outs);
  return ok;
}
