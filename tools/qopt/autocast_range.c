/* autocast_range.c: -autocast-calibrate, the values too large for f16.
 *
 * The module runs once on the calibration inputs with the reference
 * semantics (qir_eval_op, op by op over the module body, in the types the
 * model declares: before -autocast changes any), and every value gets the
 * largest magnitude it took.  -autocast keeps in f32 each op that reads or
 * writes an f32 value larger than -autocast-range: in f16 it would overflow
 * to infinity (networks whose activations grow without normalisation).  An
 * op with regions (loop, if) ends the run: the values after it are not
 * measured, and nothing after it is kept for its range. */
#include "autocast_range.h"
#include "tensorio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double max_magnitude(const qir_tensor *t) {
  if (!qir_dtype_is_float(t->type.dtype)) return 0;
  double m = 0;
  int64_t n = qir_type_numel(&t->type);
  for (int64_t i = 0; i < n; i++) {
    double v = fabs(qir_load_elem(t->type.dtype, t->data, i));
    if (v > m || isnan(v)) m = isnan(v) ? INFINITY : v;
  }
  return m;
}

bool autocast_calibrate(qir_module *m, const char *files, double *magnitude, int n_values, int *measured_ops,
                        qir_diag *d) {
  qir_loc none = {0};
  int n_inputs = 0;
  for (qir_op *op = m->body->first; op; op = op->next) n_inputs += op->code == QIR_OP_INPUT;
  qir_tensor *vals = calloc((size_t)n_values, sizeof *vals);
  char *list = strdup(files);
  bool ok = vals && list;
  /* the inputs, in `input` order */
  char *save = NULL, *file = list ? strtok_r(list, ",", &save) : NULL;
  int given = 0;
  for (qir_op *op = m->body->first; op && ok; op = op->next) {
    if (op->code != QIR_OP_INPUT) continue;
    if (!file) {
      qir_error(d, op->loc, "-autocast-calibrate names %d file(s) but the module has %d inputs", given, n_inputs);
      ok = false;
      break;
    }
    qir_tensor t = {0};
    if (!qir_tensor_read(file, &t, NULL, d)) {
      ok = false;
      break;
    }
    if (!qir_type_equal(&t.type, &op->results[0]->type)) {
      char want[64], got[64];
      qir_type_format(&op->results[0]->type, want, sizeof want);
      qir_type_format(&t.type, got, sizeof got);
      qir_error(d, op->loc, "-autocast-calibrate: '%s' is %s, the input is %s", file, got, want);
      qir_tensor_free(&t);
      ok = false;
      break;
    }
    magnitude[op->results[0]->id] = max_magnitude(&t);
    vals[op->results[0]->id] = t;
    given++;
    file = strtok_r(NULL, ",", &save);
  }
  if (ok && file) {
    qir_error(d, none, "-autocast-calibrate names more files than the module's %d inputs", n_inputs);
    ok = false;
  }
  *measured_ops = 0;
  for (qir_op *op = m->body->first; op && ok; op = op->next) {
    if (op->code == QIR_OP_INPUT || op->code == QIR_OP_OUTPUT) continue;
    if (op->n_regions) break;
    qir_tensor operands[64], results[16];
    if (op->n_operands > 64 || op->n_results > 16) break;
    memset(operands, 0, sizeof operands);
    memset(results, 0, sizeof results);
    bool have = true;
    for (int i = 0; i < op->n_operands; i++) {
      operands[i] = vals[op->operands[i]->id];
      have &= operands[i].data != NULL;
    }
    if (!have) break;
    if (!qir_eval_op(m, op, operands, results, d)) {
      ok = false;
      break;
    }
    for (int r = 0; r < op->n_results; r++) {
      if (op->results[r]->id < n_values) {
        magnitude[op->results[r]->id] = max_magnitude(&results[r]);
        vals[op->results[r]->id] = results[r];
      } else {
        qir_tensor_free(&results[r]);
      }
    }
    ++*measured_ops;
  }
  if (vals)
    for (int i = 0; i < n_values; i++) qir_tensor_free(&vals[i]);
  free(vals);
  free(list);
  return ok;
}
