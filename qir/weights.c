/* weights.c: writing a module's weights sidecar (onnx2qir's first one, and
 * the one qopt writes when a pass made new weights, as -autocast does). */
#include "qir.h"

#include <errno.h>
#include <string.h>

#define WEIGHT_ALIGN 64

typedef struct {
  qir_module *m;
  int64_t inline_max;
  int n;                        /* constants that go to the file */
  qir_op **consts;              /* NULL while counting */
} spill_list;

static bool goes_to_sidecar(const spill_list *s, const qir_op *op) {
  if (op->code != QIR_OP_CONST || !op->cst || op->cst->splat) return false;
  if (op->cst->offset >= 0 || op->cst->spill) return true;
  return s->inline_max >= 0 && qir_type_numel(&op->results[0]->type) > s->inline_max;
}

static bool collect(qir_op *op, void *ctx) {
  spill_list *s = ctx;
  if (goes_to_sidecar(s, op)) {
    if (s->consts) s->consts[s->n] = op;
    s->n++;
  }
  return true;
}

static bool find_spill(qir_op *op, void *ctx) {
  bool *found = ctx;
  if (op->code == QIR_OP_CONST && op->cst && op->cst->spill) *found = true;
  return !*found;
}

bool qir_module_has_spilled_consts(qir_module *m) {
  bool found = false;
  qir_walk(m->body, find_spill, &found);
  return found;
}

bool qir_module_write_weights(qir_module *m, const char *path, const char *ref, int64_t inline_max, int64_t *written,
                              qir_diag *d) {
  qir_loc none = {0};
  spill_list s = {m, inline_max, 0, NULL};
  *written = 0;
  qir_walk(m->body, collect, &s);
  if (s.n == 0) return true;
  s.consts = qir_alloc(m, sizeof *s.consts * (size_t)s.n);
  s.n = 0;
  qir_walk(m->body, collect, &s);
  /* Every payload in memory before the first offset changes: they may come
   * from the file being replaced. */
  for (int i = 0; i < s.n; i++)
    if (!qir_const_data(m, s.consts[i], d)) return false;
  FILE *f = fopen(path, "wb");
  if (!f) {
    qir_error(d, none, "cannot write weights file '%s': %s", path, strerror(errno));
    return false;
  }
  static const char zeros[WEIGHT_ALIGN] = {0};
  int64_t size = 0;
  bool ok = true;
  for (int i = 0; i < s.n && ok; i++) {
    qir_const *c = s.consts[i]->cst;
    const qir_type *t = &s.consts[i]->results[0]->type;
    size_t nbytes = (size_t)qir_type_numel(t) * (size_t)qir_dtype_size(t->dtype);
    int64_t off = (size + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
    ok = fwrite(zeros, 1, (size_t)(off - size), f) == (size_t)(off - size) && fwrite(c->data, 1, nbytes, f) == nbytes;
    c->offset = off;
    size = off + (int64_t)nbytes;
  }
  ok = fclose(f) == 0 && ok;
  if (!ok) {
    qir_error(d, none, "writing weights file '%s' failed", path);
    return false;
  }
  for (int i = 0; i < s.n; i++) {
    qir_const *c = s.consts[i]->cst;
    c->data = NULL;
    c->nbytes = 0;
    c->spill = false;
  }
  m->weights_path = qir_strdup(m, ref);
  *written = size;
  return true;
}
