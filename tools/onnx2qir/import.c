/* import.c: ONNX model -> qir module: graph walking (with validation: unknown
 * names, cycles, duplicate producers), scopes, tensors and constants, the op
 * builder that infers types and folds constant subgraphs, and error reporting. */
#include "onnx2qir.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- strmap */

typedef struct {
  char *key;
  void *val;
} strmap_slot;

struct strmap {
  strmap_slot *slots;
  size_t cap, n;
};

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

strmap *strmap_new(void) {
  strmap *s = calloc(1, sizeof *s);
  if (!s) abort();
  s->cap = 64;
  s->slots = calloc(s->cap, sizeof *s->slots);
  if (!s->slots) abort();
  return s;
}

void strmap_free(strmap *s) {
  if (!s) return;
  for (size_t i = 0; i < s->cap; i++) free(s->slots[i].key);
  free(s->slots);
  free(s);
}

static strmap_slot *strmap_find(const strmap *s, const char *key) {
  size_t i = hash_str(key) & (s->cap - 1);
  while (s->slots[i].key && strcmp(s->slots[i].key, key) != 0) i = (i + 1) & (s->cap - 1);
  return &s->slots[i];
}

void *strmap_get(const strmap *s, const char *key) {
  strmap_slot *sl = strmap_find(s, key);
  return sl->key ? sl->val : NULL;
}

void strmap_put(strmap *s, const char *key, void *val) {
  if ((s->n + 1) * 2 > s->cap) {
    strmap_slot *old = s->slots;
    size_t oldcap = s->cap;
    s->cap *= 2;
    s->slots = calloc(s->cap, sizeof *s->slots);
    if (!s->slots) abort();
    for (size_t i = 0; i < oldcap; i++)
      if (old[i].key) *strmap_find(s, old[i].key) = old[i];
    free(old);
  }
  strmap_slot *sl = strmap_find(s, key);
  if (!sl->key) {
    sl->key = strdup(key);
    if (!sl->key) abort();
    s->n++;
  }
  sl->val = val;
}

/* ---------------------------------------------------------------- scopes */

scope *scope_new(scope *parent) {
  scope *s = calloc(1, sizeof *s);
  if (!s) abort();
  s->vals = strmap_new();
  s->parent = parent;
  return s;
}

void scope_free(scope *s) {
  if (!s) return;
  strmap_free(s->vals);
  free(s);
}

qir_value *scope_lookup(const scope *s, const char *name) {
  for (; s; s = s->parent) {
    qir_value *v = strmap_get(s->vals, name);
    if (v) return v;
  }
  return NULL;
}

/* ---------------------------------------------------------------- errors */

/* Messages are compared between imports (dims.c): one line, no control bytes. */
static void sanitize_line(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 32 || *s == 127) *s = '?';
}

void imp_error(importer *imp, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  imp->n_errors++;
  if (imp->node && imp->node == imp->probe_node && !imp->probe_failed) {
    imp->probe_failed = true;
    va_list copy;
    va_copy(copy, ap);
    vsnprintf(imp->probe_message, sizeof imp->probe_message, fmt, copy);
    va_end(copy);
    sanitize_line(imp->probe_message);
  }
  if (imp->quiet || imp->probe) {
    if (!imp->quiet_first[0]) {
      int w = 0;
      if (imp->node)
        w = snprintf(imp->quiet_first, sizeof imp->quiet_first, "node '%s' (%s): ",
                     imp->node->name && imp->node->name[0] ? imp->node->name : imp->node->n_output ? imp->node->output[0] : "",
                     imp->node->op_type && imp->node->op_type[0] ? imp->node->op_type : "no op_type");
      if (w >= 0 && (size_t)w < sizeof imp->quiet_first)
        vsnprintf(imp->quiet_first + w, sizeof imp->quiet_first - (size_t)w, fmt, ap);
    }
    va_end(ap);
    return;
  }
  imp->n_printed++;
  char line[2048];
  int w = 0;
  if (imp->node)
    w = snprintf(line, sizeof line, "%s: error: node '%s' (%s, opset %lld): ", imp->model_path,
                 imp->node->name && imp->node->name[0] ? imp->node->name
                 : imp->node->n_output ? imp->node->output[0] : "",
                 imp->node->op_type && imp->node->op_type[0] ? imp->node->op_type : "no op_type", (long long)imp->opset);
  else
    w = snprintf(line, sizeof line, "%s: error: ", imp->model_path);
  bool has_body = w >= 0 && (size_t)w < sizeof line;
  if (has_body) vsnprintf(line + w, sizeof line - (size_t)w, fmt, ap);
  va_end(ap);
  /* names and strings come from the untrusted model: one line, no control bytes */
  sanitize_line(line);
  fprintf(stderr, "%s\n", line);
  if (imp->node && imp->node_taint) {
    char msg[sizeof imp->probe_message];
    snprintf(msg, sizeof msg, "%s", has_body ? line + w : "");
    dims_note(imp, imp->node_taint, msg);
  }
}

/* Runs a library call with a diag that captures its messages, and turns the
 * first one into our one-line form. */
typedef struct {
  qir_diag d;
  char *buf;
  size_t len;
  FILE *f;
} capture;

static void capture_begin(capture *c) {
  c->buf = NULL;
  c->len = 0;
  c->f = open_memstream(&c->buf, &c->len);
  qir_diag_init(&c->d, c->f ? c->f : stderr, "onnx2qir", NULL, 0);
}

/* Returns the first line of what was reported (static storage of the caller's
 * lifetime is the capture itself), without the "FILE: error: " prefix. */
static const char *capture_end(capture *c) {
  if (c->f) fclose(c->f);
  c->f = NULL;
  if (!c->buf) return "";
  char *nl = strchr(c->buf, '\n');
  if (nl) *nl = 0;
  char *e = strstr(c->buf, "error: ");
  return e ? e + 7 : c->buf;
}

/* After capture_end: the symbols' values a shape rule failed at ("height =
 * 33, width = 640", from symshape.c's note), or NULL. */
static const char *capture_symbols(const capture *c, const char *first) {
  size_t at = (size_t)(first - c->buf) + strlen(first) + 1;
  if (!c->buf || at >= c->len) return NULL;
  const char *w = strstr(c->buf + at, "note: with ");
  if (!w) return NULL;
  return w + strlen("note: with ");
}

static void capture_free(capture *c) {
  if (c->f) fclose(c->f);
  free(c->buf);
  c->buf = NULL;
}

/* ---------------------------------------------------------------- dtypes */

bool onnx_dtype_to_qir(int32_t t, qir_dtype *out) {
  switch (t) {
  case 1: *out = QIR_F32; return true;
  case 2: *out = QIR_U8; return true;
  case 3: *out = QIR_I8; return true;
  case 4: *out = QIR_U16; return true;
  case 5: *out = QIR_I16; return true;
  case 6: *out = QIR_I32; return true;
  case 7: *out = QIR_I64; return true;
  case 9: *out = QIR_BOOL; return true;
  case 10: *out = QIR_F16; return true;
  case 11: *out = QIR_F64; return true;
  case 12: *out = QIR_U32; return true;
  case 13: *out = QIR_U64; return true;
  case 16: *out = QIR_BF16; return true;
  case 17: *out = QIR_F8E4M3FN; return true;
  case 18: *out = QIR_F8E4M3FNUZ; return true;
  case 19: *out = QIR_F8E5M2; return true;
  case 20: *out = QIR_F8E5M2FNUZ; return true;
  case 21: *out = QIR_U4; return true;
  case 22: *out = QIR_I4; return true;
  case 23: *out = QIR_F4E2M1; return true;
  case 24: *out = QIR_F8E8M0; return true;
  case 25: *out = QIR_U2; return true;
  case 26: *out = QIR_I2; return true;
  default: return false;
  }
}

const char *onnx_dtype_name(int32_t t) {
  static const char *const names[] = {
      "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING",
      "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4",
      "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
  if (t >= 0 && t < (int32_t)(sizeof names / sizeof *names)) return names[t];
  return "unknown";
}

/* ---------------------------------------------------------------- tensors */

bool check_dims(importer *imp, size_t n, const int64_t *dims, const char *what) {
  if (n > QIR_MAX_RANK) {
    imp_error(imp, "%s has rank %zu (at most %d supported)", what, n, QIR_MAX_RANK);
    return false;
  }
  int64_t numel = 1;
  for (size_t i = 0; i < n; i++) {
    if (dims[i] < 0 || dims[i] > MAX_NUMEL) {
      imp_error(imp, "%s has an invalid dimension %lld", what, (long long)dims[i]);
      return false;
    }
    if (dims[i] && numel > MAX_NUMEL / dims[i]) {
      imp_error(imp, "%s is absurdly large", what);
      return false;
    }
    numel *= dims[i];
  }
  return true;
}

/* A narrow-typed initializer: packed bytes in raw_data, or one packed byte per
 * int32_data entry; qir keeps one element per byte (qir.h). */
static qir_op *narrow_to_const(importer *imp, const Onnx__TensorProto *t, qir_type ty, const char *what) {
  int64_t numel = qir_type_numel(&ty);
  int bits = qir_dtype_bits(ty.dtype), per = 8 / bits;
  size_t packed = ((size_t)numel * (size_t)bits + 7) / 8, have = t->has_raw_data ? t->raw_data.len : t->n_int32_data;
  if (have != packed) {
    imp_error(imp, "%s: %s holds %zu bytes but %lld %s elements need %zu", what, t->has_raw_data ? "raw_data" : "int32_data",
              have, (long long)numel, qir_dtype_name(ty.dtype), packed);
    return NULL;
  }
  qir_op *op = qir_const_new_data(imp->m, ty, NULL, 0, (qir_loc){0});
  uint8_t *buf = qir_alloc(imp->m, numel ? (size_t)numel : 1);
  for (int64_t i = 0; i < numel; i++) {
    unsigned byte = t->has_raw_data ? t->raw_data.data[i / per] : (unsigned)t->int32_data[i / per] & 0xFF;
    uint8_t c = (uint8_t)((byte >> (bits * (int)(i % per))) & ((1u << bits) - 1));
    buf[i] = bits == 8 ? c : qir_narrow_from_double(ty.dtype, qir_narrow_to_double(ty.dtype, c), true);
  }
  op->cst->data = buf;
  op->cst->nbytes = (size_t)numel;
  return op;
}

qir_op *tensor_to_const(importer *imp, const Onnx__TensorProto *t, const char *what) {
  qir_dtype dt;
  if (!t->has_data_type || !onnx_dtype_to_qir(t->data_type, &dt)) {
    imp_error(imp, "%s has unsupported element type %s", what, onnx_dtype_name(t->has_data_type ? t->data_type : 0));
    return NULL;
  }
  if ((t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
      t->n_external_data) {
    const char *loc = "?";
    for (size_t i = 0; i < t->n_external_data; i++)
      if (t->external_data[i]->key && strcmp(t->external_data[i]->key, "location") == 0)
        loc = t->external_data[i]->value ? t->external_data[i]->value : "?";
    imp_error(imp, "%s keeps its data in external file '%s': external data is not supported", what, loc);
    return NULL;
  }
  if (t->segment) {
    imp_error(imp, "%s is a segmented tensor: not supported", what);
    return NULL;
  }
  if (!check_dims(imp, t->n_dims, t->dims, what)) return NULL;
  qir_type ty = qir_type_make(dt, (int)t->n_dims, t->dims);
  int64_t numel = qir_type_numel(&ty);
  size_t es = (size_t)qir_dtype_size(dt);
  size_t nbytes = (size_t)numel * es;
  if (qir_dtype_is_narrow(dt)) return narrow_to_const(imp, t, ty, what);
  size_t have;
  if (t->has_raw_data) have = t->raw_data.len / es;
  else {
    switch (dt) {
    case QIR_F32: have = t->n_float_data; break;
    case QIR_F64: have = t->n_double_data; break;
    case QIR_I64: have = t->n_int64_data; break;
    case QIR_U32: case QIR_U64: have = t->n_uint64_data; break;
    default: have = t->n_int32_data; break;
    }
  }
  if (t->has_raw_data ? t->raw_data.len != nbytes : have != (size_t)numel) {
    imp_error(imp, "%s: data holds %zu %s elements but dims say %lld", what,
              t->has_raw_data ? t->raw_data.len / es : have, qir_dtype_name(dt), (long long)numel);
    return NULL;
  }
  qir_op *op;
  if (t->has_raw_data) {
    op = qir_const_new_data(imp->m, ty, t->raw_data.data, nbytes, (qir_loc){0});
  } else {
    op = qir_const_new_data(imp->m, ty, NULL, 0, (qir_loc){0});
    void *buf = qir_alloc(imp->m, nbytes);
    for (int64_t i = 0; i < numel; i++) {
      switch (dt) {
      case QIR_F32: memcpy((char *)buf + i * 4, &t->float_data[i], 4); break;
      case QIR_F64: memcpy((char *)buf + i * 8, &t->double_data[i], 8); break;
      case QIR_I64: memcpy((char *)buf + i * 8, &t->int64_data[i], 8); break;
      case QIR_U64: memcpy((char *)buf + i * 8, &t->uint64_data[i], 8); break;
      case QIR_U32: { uint32_t v = (uint32_t)t->uint64_data[i]; memcpy((char *)buf + i * 4, &v, 4); break; }
      case QIR_F16: case QIR_BF16: case QIR_U16: case QIR_I16: {
        uint16_t v = (uint16_t)t->int32_data[i];
        memcpy((char *)buf + i * 2, &v, 2);
        break;
      }
      case QIR_I32: memcpy((char *)buf + i * 4, &t->int32_data[i], 4); break;
      case QIR_I8: case QIR_U8: ((uint8_t *)buf)[i] = (uint8_t)t->int32_data[i]; break;
      case QIR_BOOL: ((uint8_t *)buf)[i] = t->int32_data[i] != 0; break;
      default: break;
      }
    }
    op->cst->data = buf;
    op->cst->nbytes = nbytes;
  }
  return op;
}

/* ---------------------------------------------------------------- names */

void name_value(importer *imp, qir_value *v, const char *onnx_name) {
  if (!v || v == POISON || v->name) return;
  size_t n = strlen(onnx_name);
  char *s = malloc(n + 24);
  if (!s) abort();
  for (size_t i = 0; i < n; i++) {
    char c = onnx_name[i];
    s[i] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
            c == '$') ? c : '_';
  }
  if (n == 0) s[n++] = 'v';
  s[n] = 0;
  if (strmap_get(imp->used_names, s)) {
    for (int k = 1;; k++) {
      snprintf(s + n, 24, "_%d", k);
      if (!strmap_get(imp->used_names, s)) break;
    }
  }
  strmap_put(imp->used_names, s, (void *)1);
  v->name = qir_strdup(imp->m, s);
  free(s);
}

/* ---------------------------------------------------------------- op builder */

qir_op *op_begin_typed(importer *imp, qir_opcode code, int n_in, qir_value *const *in, int n_res,
                       const qir_type *types) {
  qir_op *op = qir_op_new(imp->m, code, n_in, in, n_res, types, (qir_loc){0});
  return op;
}

qir_op *op_begin_n(importer *imp, qir_opcode code, int n_in, qir_value *const *in, int n_res) {
  /* rank -1 marks "not yet inferred" */
  qir_type unknown[8];
  memset(unknown, 0, sizeof unknown);
  for (int i = 0; i < 8; i++) unknown[i].rank = -1;
  return op_begin_typed(imp, code, n_in, in, n_res > 8 ? 8 : n_res, unknown);
}

qir_op *op_begin(importer *imp, qir_opcode code, int n_in, qir_value *const *in) {
  return op_begin_n(imp, code, n_in, in, 1);
}

void set_i(importer *imp, qir_op *op, const char *key, int64_t v) { qir_op_set_attr(imp->m, op, key, qir_attr_int(v), false); }
void set_f(importer *imp, qir_op *op, const char *key, double v) { qir_op_set_attr(imp->m, op, key, qir_attr_float(v), false); }
void set_w(importer *imp, qir_op *op, const char *key, const char *w) { qir_op_set_attr(imp->m, op, key, qir_attr_word(imp->m, w), false); }
void set_s(importer *imp, qir_op *op, const char *key, const char *s) { qir_op_set_attr(imp->m, op, key, qir_attr_string(imp->m, s), false); }
void set_ints(importer *imp, qir_op *op, const char *key, int n, const int64_t *v) {
  qir_op_set_attr(imp->m, op, key, qir_attr_ints(imp->m, n, v), false);
}
void set_floats(importer *imp, qir_op *op, const char *key, int n, const double *v) {
  qir_op_set_attr(imp->m, op, key, qir_attr_floats(imp->m, n, v), false);
}

qir_op *const_def(qir_value *v) {
  if (!v || v == POISON || !v->def || v->def->code != QIR_OP_CONST) return NULL;
  return v->def;
}

qir_value *add_const_op(importer *imp, qir_op *cst) {
  qir_op_append(imp->region, cst);
  return cst->results[0];
}

/* Ops whose result is a splat when every operand is one. */
static bool splat_preserving(qir_opcode code) {
  const qir_opinfo *info = qir_opinfo_get(code);
  if (info->flags & QIR_OPF_ELEMENTWISE) return true;
  return code == QIR_OP_RESHAPE || code == QIR_OP_EXPAND || code == QIR_OP_TRANSPOSE || code == QIR_OP_TILE ||
         code == QIR_OP_SLICE || code == QIR_OP_CONCAT;
}

static void tensor_of_const(importer *imp, qir_op *c, qir_tensor *t, bool *owned) {
  t->type = c->results[0]->type;
  size_t es = (size_t)qir_dtype_size(t->type.dtype);
  int64_t n = qir_type_numel(&t->type);
  if (c->cst->splat) {
    t->data = malloc((size_t)(n ? n : 1) * es);
    if (!t->data) abort();
    for (int64_t i = 0; i < n; i++) memcpy((char *)t->data + i * (int64_t)es, c->cst->data, es);
    *owned = true;
  } else {
    t->data = (void *)qir_const_data(imp->m, c, NULL);
    *owned = false;
  }
}

/* Evaluates `op` (all operands constant) into a constant, or returns NULL when
 * it is too large or the evaluator cannot do it (the op then stays). */
static bool try_fold(importer *imp, qir_op *op, qir_value **outs) {
  if (op->n_operands == 0 || op->n_regions) return false;
  bool all_splat = true;
  for (int i = 0; i < op->n_operands; i++) {
    qir_op *c = const_def(op->operands[i]);
    if (!c) return false;
    if (!c->cst->splat) all_splat = false;
  }
  /* A splat in, a splat out: evaluate one element. */
  if (all_splat && op->n_results == 1 && splat_preserving(op->code)) {
    qir_type rt = op->results[0]->type;
    int n = op->n_operands;
    qir_value *sv[16];
    qir_tensor st[16];
    if (n > 16) return false;
    const qir_opinfo *info = qir_opinfo_get(op->code);
    if (!(info->flags & QIR_OPF_ELEMENTWISE)) {
      /* data movement of splats of one value: the same value */
      qir_op *c = const_def(op->operands[0]);
      bool same = true;
      for (int i = 1; i < n; i++) {
        qir_op *ci = const_def(op->operands[i]);
        if (qir_load_elem(ci->results[0]->type.dtype, ci->cst->data, 0) !=
            qir_load_elem(c->results[0]->type.dtype, c->cst->data, 0))
          same = false;
      }
      if (!same) goto dense;
      qir_op *ns = qir_const_new_splat(imp->m, rt, qir_load_elem(rt.dtype, c->cst->data, 0), (qir_loc){0});
      outs[0] = add_const_op(imp, ns);
      return true;
    }
    for (int i = 0; i < n; i++) {
      qir_op *c = const_def(op->operands[i]);
      qir_type t0 = qir_type_make(c->results[0]->type.dtype, 0, NULL);
      sv[i] = qir_value_new(imp->m, t0, NULL);
      st[i].type = t0;
      st[i].data = c->cst->data;
    }
    qir_type rt0 = qir_type_make(rt.dtype, 0, NULL);
    qir_op *tmp = qir_op_new(imp->m, op->code, n, sv, 1, &rt0, (qir_loc){0});
    tmp->attrs = op->attrs;
    tmp->n_attrs = op->n_attrs;
    qir_tensor res;
    capture cap;
    capture_begin(&cap);
    bool ok = qir_eval_op(imp->m, tmp, st, &res, &cap.d);
    capture_free(&cap);
    qir_op_unlink(tmp);
    if (!ok) return false;
    qir_op *ns = qir_const_new_splat(imp->m, rt, qir_load_elem(rt.dtype, res.data, 0), (qir_loc){0});
    qir_tensor_free(&res);
    outs[0] = add_const_op(imp, ns);
    return true;
  }
dense:
  /* A splat becomes dense data only when the result is small (shape
   * arithmetic); big splats (the light/ models' weights) stay splats. */
  for (int i = 0; i < op->n_operands; i++)
    if (const_def(op->operands[i])->cst->splat)
      for (int k = 0; k < op->n_results; k++)
        if (qir_type_numel(&op->results[k]->type) > SPLAT_DENSE_LIMIT) return false;
  for (int i = 0; i < op->n_operands; i++)
    if (qir_type_numel(&op->operands[i]->type) > FOLD_LIMIT) return false;
  for (int i = 0; i < op->n_results; i++)
    if (qir_type_numel(&op->results[i]->type) > FOLD_LIMIT) return false;
  int n = op->n_operands;
  qir_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
  bool *owned = calloc((size_t)n + 1, sizeof *owned);
  qir_tensor *res = calloc((size_t)op->n_results + 1, sizeof *res);
  if (!ts || !owned || !res) abort();
  for (int i = 0; i < n; i++) tensor_of_const(imp, const_def(op->operands[i]), &ts[i], &owned[i]);
  capture cap;
  capture_begin(&cap);
  bool ok = qir_eval_op(imp->m, op, ts, res, &cap.d);
  capture_free(&cap);
  for (int i = 0; i < n; i++)
    if (owned[i]) free(ts[i].data);
  if (ok)
    for (int i = 0; i < op->n_results; i++) {
      qir_type t = op->results[i]->type;
      size_t nb = (size_t)qir_type_numel(&t) * (size_t)qir_dtype_size(t.dtype);
      outs[i] = add_const_op(imp, qir_const_new_data(imp->m, t, res[i].data, nb, (qir_loc){0}));
      qir_tensor_free(&res[i]);
    }
  free(ts);
  free(owned);
  free(res);
  return ok;
}

qir_value *op_end(importer *imp, qir_op *op, qir_value **outs) {
  qir_value *one[1];
  if (!outs) {
    if (op->n_results > 1) return NULL;
    outs = one;
  }
  for (int i = 0; i < op->n_operands; i++)
    if (!op->operands[i] || op->operands[i] == POISON) {
      qir_op_unlink(op);
      return NULL;
    }
  qir_type *types = calloc((size_t)op->n_results + 1, sizeof *types);
  if (!types) abort();
  capture cap;
  capture_begin(&cap);
  bool ok = qir_infer_types(imp->m, op, types, &cap.d);
  const char *msg = capture_end(&cap);
  if (!ok) {
    const char *with = capture_symbols(&cap, msg);
    if (with) imp_error(imp, "%s: %s (with %.*s)", qir_opinfo_get(op->code)->name, msg, (int)strcspn(with, "\n"), with);
    else imp_error(imp, "%s: %s", qir_opinfo_get(op->code)->name, msg);
    capture_free(&cap);
    free(types);
    qir_op_unlink(op);
    return NULL;
  }
  capture_free(&cap);
  for (int i = 0; i < op->n_results; i++) {
    if (types[i].rank < 0) {
      imp_error(imp, "%s: no shape rule for this op (qir_infer_types)", qir_opinfo_get(op->code)->name);
      free(types);
      qir_op_unlink(op);
      return NULL;
    }
    /* a converter writes extents as numbers (the bounds): the rule's
     * symbolic extents stand for them where the bounds agree */
    if (op->results[i]->type.rank >= 0 && !qir_type_is_symbolic(&op->results[i]->type) &&
        qir_type_is_symbolic(&types[i])) {
      qir_type at_bound = types[i];
      memset(at_bound.sym, 0, sizeof at_bound.sym);
      if (qir_type_equal(&at_bound, &op->results[i]->type)) op->results[i]->type = types[i];
    }
    if (op->results[i]->type.rank >= 0 && !qir_type_equal(&op->results[i]->type, &types[i])) {
      char a[128], b[128];
      qir_type_format(&op->results[i]->type, a, sizeof a);
      qir_type_format(&types[i], b, sizeof b);
      imp_error(imp, "%s: inconsistent shapes: importer computed %s, shape rule says %s",
                qir_opinfo_get(op->code)->name, a, b);
      free(types);
      qir_op_unlink(op);
      return NULL;
    }
    if (!qir_type_equal(&op->results[i]->type, &types[i])) op->results[i]->type = types[i];
    if (qir_type_numel(&types[i]) > MAX_NUMEL) {
      imp_error(imp, "%s: result is absurdly large", qir_opinfo_get(op->code)->name);
      free(types);
      qir_op_unlink(op);
      return NULL;
    }
  }
  free(types);
  if (try_fold(imp, op, outs)) {
    qir_op_unlink(op);
    return outs[0];
  }
  qir_op_append(imp->region, op);
  for (int i = 0; i < op->n_results; i++) outs[i] = op->results[i];
  return op->n_results ? outs[0] : NULL;
}

qir_value *emit1(importer *imp, qir_opcode code, qir_value *a) {
  return op_end(imp, op_begin(imp, code, 1, &a), NULL);
}

qir_value *emit2(importer *imp, qir_opcode code, qir_value *a, qir_value *b) {
  qir_value *in[2] = {a, b};
  return op_end(imp, op_begin(imp, code, 2, in), NULL);
}

qir_value *emit3(importer *imp, qir_opcode code, qir_value *a, qir_value *b, qir_value *c) {
  qir_value *in[3] = {a, b, c};
  return op_end(imp, op_begin(imp, code, 3, in), NULL);
}

/* Carries x's symbolic extents onto t, a reshape of x that a converter wrote
 * in bound values, where the axes correspond: walking both shapes (static
 * unit axes skipped), each run of x axes whose bound product equals one t
 * axis's bound becomes that axis, as the product of their extents (a squeeze,
 * an unsqueeze, a flatten).  A run split over several t axes stays static:
 * the reshape's shape rule, run at samples of the symbols, then refuses it. */
static void lift_reshape(importer *imp, const qir_type *x, qir_type *t) {
  int i = 0, j = 0;
  while (i < x->rank && j < t->rank) {
    if (!x->sym[i] && x->dims[i] == 1) { i++; continue; }
    if (t->dims[j] == 1) { j++; continue; }
    int i0 = i, j0 = j;
    __int128 px = x->dims[i++], pt = t->dims[j++];
    while (px != pt && px && pt && i <= x->rank && j <= t->rank) {
      if (px < pt) {
        if (i == x->rank) break;
        px *= x->dims[i++];
      } else {
        if (j == t->rank) break;
        pt *= t->dims[j++];
      }
    }
    if (px != pt) return;
    bool symbolic = false;
    for (int k = i0; k < i; k++) symbolic |= x->sym[k] != NULL;
    if (!symbolic || j - j0 != 1) continue;
    const qir_dim *prod = qir_dim_const(imp->m, 1);
    for (int k = i0; k < i; k++) prod = qir_dim_binary(imp->m, QIR_DIM_MUL, prod, qir_type_dim(imp->m, x, k));
    if (prod->hi == t->dims[j0]) qir_type_set_dim(t, j0, prod);
  }
}

qir_value *emit_reshape_type(importer *imp, qir_value *x, const qir_type *t) {
  if (!x || x == POISON) return NULL;
  if (qir_type_equal(t, &x->type)) return x;
  return op_end(imp, op_begin_typed(imp, QIR_OP_RESHAPE, 1, &x, 1, t), NULL);
}

qir_value *emit_reshape(importer *imp, qir_value *x, int rank, const int64_t *dims) {
  if (!x || x == POISON) return NULL;
  qir_type t = qir_type_make(x->type.dtype, rank, dims);
  if (qir_type_is_symbolic(&x->type)) lift_reshape(imp, &x->type, &t);
  return emit_reshape_type(imp, x, &t);
}

qir_value *emit_cast(importer *imp, qir_value *x, qir_dtype to) {
  if (!x || x == POISON) return NULL;
  if (x->type.dtype == to) return x;
  qir_type t = x->type;
  t.dtype = to;
  qir_op *op = op_begin_typed(imp, QIR_OP_CAST, 1, &x, 1, &t);
  set_w(imp, op, "to", qir_dtype_name(to));
  return op_end(imp, op, NULL);
}

qir_value *emit_transpose(importer *imp, qir_value *x, int n, const int64_t *perm) {
  if (!x || x == POISON) return NULL;
  bool ident = true;
  for (int i = 0; i < n; i++)
    if (perm[i] != i) ident = false;
  if (ident) return x;
  qir_op *op = op_begin(imp, QIR_OP_TRANSPOSE, 1, &x);
  set_ints(imp, op, "perm", n, perm);
  return op_end(imp, op, NULL);
}

qir_value *emit_insert_unit_axis(importer *imp, qir_value *v, int axis) {
  if (!v) return NULL;
  int64_t d[QIR_MAX_RANK];
  for (int i = 0, k = 0; i <= v->type.rank; i++) d[i] = i == axis ? 1 : v->type.dims[k++];
  return emit_reshape(imp, v, v->type.rank + 1, d);
}

qir_value *emit_reverse_axis0(importer *imp, qir_value *x, int64_t n) {
  int64_t *idx = malloc(sizeof *idx * (size_t)(n + 1));
  for (int64_t k = 0; k < n; k++) idx[k] = n - 1 - k;
  qir_value *in[2] = {x, const_i64s(imp, (int)n, idx)};
  free(idx);
  qir_op *op = op_begin(imp, QIR_OP_GATHER, 2, in);
  set_i(imp, op, "axis", 0);
  return op_end(imp, op, NULL);
}

qir_value *const_splat(importer *imp, qir_type t, double v) {
  return add_const_op(imp, qir_const_new_splat(imp->m, t, v, (qir_loc){0}));
}

qir_value *const_scalar(importer *imp, qir_dtype dt, double v) {
  qir_type t = qir_type_make(dt, 0, NULL);
  char buf[8];
  qir_store_elem(dt, buf, 0, v);
  return add_const_op(imp, qir_const_new_data(imp->m, t, buf, (size_t)qir_dtype_size(dt), (qir_loc){0}));
}

qir_value *const_data(importer *imp, qir_type t, const void *data) {
  size_t nb = (size_t)qir_type_numel(&t) * (size_t)qir_dtype_size(t.dtype);
  return add_const_op(imp, qir_const_new_data(imp->m, t, data, nb, (qir_loc){0}));
}

qir_value *const_i64s(importer *imp, int n, const int64_t *v) {
  int64_t d = n;
  return const_data(imp, qir_type_make(QIR_I64, 1, &d), v);
}

double const_elem(importer *imp, qir_value *v, int64_t i) {
  qir_op *c = const_def(v);
  return c ? qir_const_elem(imp->m, c, i, NULL) : 0;
}

int64_t const_int(importer *imp, qir_value *v, int64_t i) {
  qir_op *c = const_def(v);
  if (!c) return 0;
  qir_dtype dt = v->type.dtype;
  const void *p = c->cst->splat ? c->cst->data : qir_const_data(imp->m, c, NULL);
  if (!p) return 0;
  int64_t k = c->cst->splat ? 0 : i;
  if (dt == QIR_I64 || dt == QIR_U64) {
    int64_t x;
    memcpy(&x, (const char *)p + k * 8, 8);
    return x;
  }
  double d = qir_load_elem(dt, p, k);
  if (d >= 9.2233720368547758e18) return INT64_MAX;
  if (d <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)d;
}

/* Graph inputs a value depends on (for the --bind hint). */
static void collect_inputs(qir_value *v, const char **names, int *n, int cap, qir_op **seen, int *n_seen,
                           bool *region_arg) {
  if (!v || v == POISON) return;
  if (!v->def) {
    *region_arg = true;
    return;
  }
  qir_op *op = v->def;
  for (int i = 0; i < *n_seen; i++)
    if (seen[i] == op) return;
  if (*n_seen < 256) seen[(*n_seen)++] = op;
  else return;
  if (op->code == QIR_OP_INPUT) {
    const char *nm = qir_op_attr_str(op, "name", v->name);
    for (int i = 0; i < *n; i++)
      if (strcmp(names[i], nm) == 0) return;
    if (*n < cap) names[(*n)++] = nm;
    return;
  }
  for (int i = 0; i < op->n_operands; i++) collect_inputs(op->operands[i], names, n, cap, seen, n_seen, region_arg);
}

static bool need_const(node_ctx *nc, int input) {
  qir_value *v = input < nc->n_in ? nc->in[input] : NULL;
  if (!v) return false;
  if (const_def(v)) return true;
  const char *names[8];
  int n = 0, n_seen = 0;
  qir_op **seen = malloc(256 * sizeof *seen);
  bool region_arg = false;
  collect_inputs(v, names, &n, 8, seen, &n_seen, &region_arg);
  free(seen);
  const char *iname = nc->node->input[input];
  if (n > 0) {
    char hint[512];
    int w = 0;
    for (int i = 0; i < n && w < 400; i++)
      w += snprintf(hint + w, sizeof hint - (size_t)w, "%s--bind %s=FILE.pb", i ? " " : "", names[i]);
    imp_error(nc->imp, "input %d ('%s') decides a shape and must be a constant, but it depends on graph input%s: %s",
              input, iname, n > 1 ? "s" : "", hint);
  } else {
    imp_error(nc->imp, "input %d ('%s') decides a shape and must be a constant, but it is computed at run time%s",
              input, iname, region_arg ? " (from a loop iteration or subgraph argument)" : "");
  }
  return false;
}

/* The constant at `input` when it has at most cap elements (count in *n);
 * NULL after reporting otherwise. */
static qir_value *need_const_at_most(node_ctx *nc, int input, int cap, int *n) {
  if (!need_const(nc, input)) return NULL;
  qir_value *v = nc->in[input];
  int64_t numel = qir_type_numel(&v->type);
  if (numel > cap) {
    imp_error(nc->imp, "input %d ('%s') has %lld elements (at most %d expected)", input, nc->node->input[input],
              (long long)numel, cap);
    return NULL;
  }
  *n = (int)numel;
  return v;
}

qir_value *need_const_input(node_ctx *nc, int input) { return need_const(nc, input) ? nc->in[input] : NULL; }

bool need_const_ints(node_ctx *nc, int input, int64_t *out, int cap, int *n) {
  qir_value *v = need_const_at_most(nc, input, cap, n);
  if (!v) return false;
  for (int i = 0; i < *n; i++) out[i] = const_int(nc->imp, v, i);
  return true;
}

bool need_const_floats(node_ctx *nc, int input, double *out, int cap, int *n) {
  qir_value *v = need_const_at_most(nc, input, cap, n);
  if (!v) return false;
  for (int i = 0; i < *n; i++) out[i] = const_elem(nc->imp, v, i);
  return true;
}

/* ---------------------------------------------------------------- attributes */

const Onnx__AttributeProto *attr_find(const node_ctx *nc, const char *name) {
  for (size_t i = 0; i < nc->node->n_attribute; i++)
    if (nc->node->attribute[i]->name && strcmp(nc->node->attribute[i]->name, name) == 0) return nc->node->attribute[i];
  return NULL;
}

int64_t attr_int(const node_ctx *nc, const char *name, int64_t dflt) {
  const Onnx__AttributeProto *a = attr_find(nc, name);
  if (!a) return dflt;
  if (a->has_i) return a->i;
  if (a->has_f) return (int64_t)a->f;
  return dflt;
}

double attr_float(const node_ctx *nc, const char *name, double dflt) {
  const Onnx__AttributeProto *a = attr_find(nc, name);
  if (!a) return dflt;
  if (a->has_f) return a->f;
  if (a->has_i) return (double)a->i;
  return dflt;
}

const char *attr_str(const node_ctx *nc, const char *name, const char *dflt) {
  const Onnx__AttributeProto *a = attr_find(nc, name);
  if (!a || !a->has_s) return dflt;
  return qir_strndup(nc->imp->m, (const char *)a->s.data, a->s.len);
}

int attr_ints(const node_ctx *nc, const char *name, int64_t *out, int cap) {
  const Onnx__AttributeProto *a = attr_find(nc, name);
  if (!a) return -1;
  int n = (int)a->n_ints;
  for (int i = 0; i < n && i < cap; i++) out[i] = a->ints[i];
  return n > cap ? cap : n;
}

int attr_floats(const node_ctx *nc, const char *name, double *out, int cap) {
  const Onnx__AttributeProto *a = attr_find(nc, name);
  if (!a) return -1;
  int n = (int)a->n_floats;
  for (int i = 0; i < n && i < cap; i++) out[i] = a->floats[i];
  return n > cap ? cap : n;
}

int attr_strings(const node_ctx *nc, const char *name, const char **out, int cap) {
  const Onnx__AttributeProto *a = attr_find(nc, name);
  if (!a) return -1;
  int n = (int)a->n_strings;
  for (int i = 0; i < n && i < cap; i++)
    out[i] = qir_strndup(nc->imp->m, (const char *)a->strings[i].data, a->strings[i].len);
  return n > cap ? cap : n;
}

int64_t norm_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return -1;
  return axis < 0 ? axis + rank : axis;
}

/* ---------------------------------------------------------------- graphs */

/* Every name the nodes of g (recursively) read: a node with subgraphs depends
 * on the outer values its subgraphs capture. */
static void subgraph_reads(const Onnx__GraphProto *g, strmap *out) {
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    for (size_t k = 0; k < n->n_input; k++)
      if (n->input[k][0]) strmap_put(out, n->input[k], (void *)1);
    for (size_t a = 0; a < n->n_attribute; a++) {
      if (n->attribute[a]->g) subgraph_reads(n->attribute[a]->g, out);
      for (size_t k = 0; k < n->attribute[a]->n_graphs; k++) subgraph_reads(n->attribute[a]->graphs[k], out);
    }
  }
}

/* Topological order of g's nodes (Kahn).  Reports unknown names and cycles. */
static bool order_nodes(importer *imp, const Onnx__GraphProto *g, scope *sc, size_t *order) {
  size_t n = g->n_node;
  strmap *producer = strmap_new();
  bool ok = true;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < g->node[i]->n_output; k++) {
      const char *o = g->node[i]->output[k];
      if (!o[0]) continue;
      if (strmap_get(producer, o)) {
        imp->node = g->node[i];
        imp_error(imp, "value '%s' is produced twice", o);
        imp->node = NULL;
        ok = false;
      }
      strmap_put(producer, o, (void *)(uintptr_t)(i + 1));
    }
  size_t *indeg = calloc(n + 1, sizeof *indeg);
  size_t **users = calloc(n + 1, sizeof *users);
  size_t *n_users = calloc(n + 1, sizeof *n_users), *cap_users = calloc(n + 1, sizeof *cap_users);
  if (!indeg || !users || !n_users || !cap_users) abort();
  for (size_t i = 0; i < n && ok; i++) {
    const Onnx__NodeProto *nd = g->node[i];
    strmap *reads = strmap_new();
    for (size_t k = 0; k < nd->n_input; k++)
      if (nd->input[k][0]) strmap_put(reads, nd->input[k], (void *)2);
    for (size_t a = 0; a < nd->n_attribute; a++) {
      if (nd->attribute[a]->g) subgraph_reads(nd->attribute[a]->g, reads);
      for (size_t k = 0; k < nd->attribute[a]->n_graphs; k++) subgraph_reads(nd->attribute[a]->graphs[k], reads);
    }
    for (size_t s = 0; s < reads->cap; s++) {
      const char *name = reads->slots[s].key;
      if (!name) continue;
      size_t p = (size_t)(uintptr_t)strmap_get(producer, name);
      if (p) {
        p--;
        if (n_users[p] == cap_users[p]) {
          cap_users[p] = cap_users[p] ? cap_users[p] * 2 : 4;
          users[p] = realloc(users[p], cap_users[p] * sizeof **users);
          if (!users[p]) abort();
        }
        users[p][n_users[p]++] = i;
        indeg[i]++;
      } else if (reads->slots[s].val == (void *)2 && !scope_lookup(sc, name)) {
        imp->node = nd;
        imp_error(imp, "reads value '%s', which nothing produces", name);
        imp->node = NULL;
        ok = false;
      }
    }
    strmap_free(reads);
  }
  size_t tail = 0;
  if (ok) {
    /* ready nodes in a min-heap of their index, so a graph that is already
     * sorted keeps its order */
    size_t *heap = malloc((n + 1) * sizeof *heap), hn = 0;
    if (!heap) abort();
#define HEAP_PUSH(x)                                                                                               \
  do {                                                                                                             \
    size_t k_ = hn++;                                                                                              \
    heap[k_] = (x);                                                                                                \
    while (k_ && heap[(k_ - 1) / 2] > heap[k_]) {                                                                  \
      size_t p_ = (k_ - 1) / 2, t_ = heap[p_];                                                                     \
      heap[p_] = heap[k_];                                                                                         \
      heap[k_] = t_;                                                                                               \
      k_ = p_;                                                                                                     \
    }                                                                                                              \
  } while (0)
    for (size_t i = 0; i < n; i++)
      if (!indeg[i]) HEAP_PUSH(i);
    while (hn) {
      size_t i = heap[0];
      heap[0] = heap[--hn];
      for (size_t k = 0;;) {
        size_t l = 2 * k + 1, r = l + 1, m = k;
        if (l < hn && heap[l] < heap[m]) m = l;
        if (r < hn && heap[r] < heap[m]) m = r;
        if (m == k) break;
        size_t t = heap[m];
        heap[m] = heap[k];
        heap[k] = t;
        k = m;
      }
      order[tail++] = i;
      for (size_t u = 0; u < n_users[i]; u++)
        if (--indeg[users[i][u]] == 0) HEAP_PUSH(users[i][u]);
    }
#undef HEAP_PUSH
    free(heap);
    if (tail != n) {
      for (size_t i = 0; i < n; i++)
        if (indeg[i]) {
          imp->node = g->node[i];
          imp_error(imp, "the graph has a cycle through this node");
          imp->node = NULL;
          break;
        }
      ok = false;
    }
  }
  for (size_t i = 0; i < n; i++) free(users[i]);
  free(users);
  free(n_users);
  free(cap_users);
  free(indeg);
  strmap_free(producer);
  return ok;
}

static bool attr_allowed(const char *list, const char *name) {
  if (!list) return true;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && memcmp(p, name, n) == 0) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

static bool name_results_visit(qir_op *op, void *ctx) {
  importer *imp = ctx;
  for (int i = 0; i < op->n_results; i++)
    if (!op->results[i]->name) name_value(imp, op->results[i], imp->base);
  for (int r = 0; r < op->n_regions; r++)
    for (int i = 0; i < op->regions[r]->n_args; i++)
      if (!op->regions[r]->args[i]->name) name_value(imp, op->regions[r]->args[i], imp->base);
  return true;
}

/* Every name the subgraphs of nd read (NULL when it has none). */
static strmap *node_subgraph_reads(const Onnx__NodeProto *nd) {
  strmap *reads = NULL;
  for (size_t a = 0; a < nd->n_attribute; a++) {
    if (!nd->attribute[a]->g && !nd->attribute[a]->n_graphs) continue;
    if (!reads) reads = strmap_new();
    if (nd->attribute[a]->g) subgraph_reads(nd->attribute[a]->g, reads);
    for (size_t k = 0; k < nd->attribute[a]->n_graphs; k++) subgraph_reads(nd->attribute[a]->graphs[k], reads);
  }
  return reads;
}

/* Whether a subgraph of nd reads an outer value whose node failed. */
static bool subgraphs_read_poison(const Onnx__NodeProto *nd, scope *sc) {
  strmap *reads = node_subgraph_reads(nd);
  if (!reads) return false;
  bool poison = false;
  for (size_t sl = 0; sl < reads->cap && !poison; sl++)
    if (reads->slots[sl].key && scope_lookup(sc, reads->slots[sl].key) == POISON) poison = true;
  strmap_free(reads);
  return poison;
}
/* Operators whose converters carry symbolic extents (--dim NAME=MIN..MAX)
 * through: those whose results follow from their operands' shapes alone.
 * Others, Shape and Slice among them, read extents as numbers and would bake
 * in the bound, so they refuse a symbolic input. */
static const char *const symbolic_ops[] = {
    "Abs", "Add", "And", "AveragePool", "BatchNormalization", "Cast", "CastLike", "Ceil", "Clip", "Concat", "Conv", "ConvTranspose",
    "Cos", "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Flatten", "Floor", "Gelu", "Gemm", "GlobalAveragePool",
    "GlobalMaxPool", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "InstanceNormalization",
    "IsInf", "IsNaN", "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max",
    "MaxPool", "Mean", "Min", "Mish", "Mul", "Neg", "Not", "Or", "PRelu", "Pow", "Reciprocal", "ReduceL2", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "Relu", "Reshape", "Resize", "Round", "Selu", "Sigmoid",
    "Sign", "Sin", "Softmax", "Softplus", "Softsign", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Transpose",
    "Unsqueeze", "Upsample", "Where", "Xor", "Expand",
    /* along a static axis only (acting_axes) */
    "Gather", "GatherElements", "Split",
};

/* The axes of input 0 that Gather, GatherElements, Split or Slice act along
 * (they read those extents as numbers); -1 for another op or an unreadable
 * Slice (its converter then reports).  Slice is not listed yet: the qir slice
 * op spells every axis's end as a number. */
static int acting_axes(const Onnx__NodeProto *nd, node_ctx *nc, int64_t *axes) {
  const char *t = nd->op_type ? nd->op_type : "";
  int r = nc->in[0] ? nc->in[0]->type.rank : 0;
  if (!strcmp(t, "Gather") || !strcmp(t, "GatherElements") || !strcmp(t, "Split")) {
    axes[0] = attr_int(nc, "axis", 0);
    return 1;
  }
  if (strcmp(t, "Slice")) return -1;
  int64_t starts[QIR_MAX_RANK];
  int n = -1, ns = -1;
  if (nc->opset < 10) {
    n = attr_ints(nc, "axes", axes, QIR_MAX_RANK);
    ns = attr_ints(nc, "starts", starts, QIR_MAX_RANK);
  } else {
    if (nc->n_in > 3 && nc->in[3] && !need_const_ints(nc, 3, axes, QIR_MAX_RANK, &n)) return -1;
    if (nc->n_in > 1 && nc->in[1] && !need_const_ints(nc, 1, starts, QIR_MAX_RANK, &ns)) return -1;
  }
  if (n < 0) {
    n = ns < 0 ? r : ns;
    for (int i = 0; i < n && i < QIR_MAX_RANK; i++) axes[i] = i;
  }
  return n;
}

static bool symbolic_inputs_ok(importer *imp, const Onnx__NodeProto *nd, const node_ctx *nc) {
  const char *op_type = nd->op_type ? nd->op_type : "";
  int sym_input = -1;
  for (int k = 0; k < nc->n_in && sym_input < 0; k++)
    if (nc->in[k] && nc->in[k] != POISON && qir_type_is_symbolic(&nc->in[k]->type)) sym_input = k;
  if (sym_input < 0) return true;
  const qir_type *t = &nc->in[sym_input]->type;
  char ts[512];
  qir_type_format(t, ts, sizeof ts);
  bool listed = false;
  for (size_t i = 0; i < sizeof symbolic_ops / sizeof symbolic_ops[0] && !listed; i++)
    listed = strcmp(symbolic_ops[i], op_type) == 0;
  if (!listed) {
    imp_error(imp, "input %d ('%s') has symbolic extents (%s), which %s does not support yet: fix them with --dim NAME=N",
              sym_input, nd->input[sym_input], ts, op_type);
    return false;
  }
  int64_t axes[QIR_MAX_RANK];
  int n_axes = nc->in[0] ? acting_axes(nd, (node_ctx *)nc, axes) : -1;
  for (int i = 0; i < n_axes; i++) {
    const qir_type *x = &nc->in[0]->type;
    int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
    if (a >= 0 && a < x->rank && x->sym[a]) {
      char xs[512];
      qir_type_format(x, xs, sizeof xs);
      imp_error(imp, "%s along axis %lld of input 0 ('%s', %s): a symbolic extent, which it does not support yet (only "
                "along static axes): fix it with --dim NAME=N", op_type, (long long)a, nd->input[0], xs);
      return false;
    }
  }
  /* SAME padding of a strided window depends on the input's extent */
  for (size_t a = 0; a < nd->n_attribute; a++) {
    const Onnx__AttributeProto *at = nd->attribute[a];
    if (!at->name || strcmp(at->name, "auto_pad") != 0 || !at->s.data) continue;
    bool same = at->s.len >= 4 && memcmp(at->s.data, "SAME", 4) == 0;
    bool strided = false;
    for (size_t b = 0; b < nd->n_attribute; b++)
      if (nd->attribute[b]->name && strcmp(nd->attribute[b]->name, "strides") == 0)
        for (size_t i = 0; i < nd->attribute[b]->n_ints; i++) strided |= nd->attribute[b]->ints[i] != 1;
    if (same && strided) {
      imp_error(imp, "input %d ('%s') has symbolic extents (%s): %s with auto_pad SAME and strides pads by the extent, "
                "which is not supported yet", sym_input, nd->input[sym_input], ts, op_type);
      return false;
    }
  }
  return true;
}


static void convert_node(importer *imp, const Onnx__NodeProto *nd, scope *sc) {
  imp->node = nd;
  const char *op_type = nd->op_type ? nd->op_type : "";
  node_ctx nc = {.imp = imp, .node = nd, .n_in = (int)nd->n_input, .n_out = (int)nd->n_output, .opset = imp->opset};
  nc.in = calloc(nd->n_input + 1, sizeof *nc.in);
  nc.out = calloc(nd->n_output + 1, sizeof *nc.out);
  if (!nc.in || !nc.out) abort();
  bool poisoned = false, ok = false;
  for (size_t k = 0; k < nd->n_input; k++) {
    if (!nd->input[k][0]) continue;
    nc.in[k] = scope_lookup(sc, nd->input[k]);
    if (!nc.in[k] || nc.in[k] == POISON) poisoned = true;
  }
  /* trailing absent inputs do not count */
  while (nc.n_in > 0 && !nc.in[nc.n_in - 1] && !nd->input[nc.n_in - 1][0]) nc.n_in--;
  convert_fn fn = NULL;
  const char *allowed = NULL;
  const char *domain = nd->domain ? nd->domain : "";
  /* a few operators of the ML and training domains are built from primitive ops */
  bool other_domain = domain[0] && strcmp(domain, "ai.onnx") != 0;
  if (other_domain && find_domain_op(domain, op_type, &fn, &allowed)) other_domain = false;
  else if (!other_domain && !find_converter(op_type, &fn, &allowed)) fn = NULL;
  if (other_domain || !fn) {
    char key[512];
    snprintf(key, sizeof key, "%s/%s", domain, op_type);
    if (!strmap_get(imp->unsupported, key)) {
      if (!imp->quiet) strmap_put(imp->unsupported, key, (void *)1);
      if (domain[0] && strcmp(domain, "ai.onnx") != 0)
        imp_error(imp, "unsupported operator %s (domain '%s')", op_type, domain);
      else if (!op_type[0])
        imp_error(imp, "the node has no op_type");
      else
        imp_error(imp, "unsupported operator %s", op_type);
    } else {
      imp->n_errors++;
    }
    goto done;
  }
  if (poisoned) goto done;
  for (int k = 0; k < nc.n_in; k++)
    if (nc.in[k] && nc.in[k]->type.bounded) {
      imp_error(imp,
                "input %d ('%s') is the scan output of a Loop that may stop early: its number of rows is known only "
                "at run time, and %s needs a static extent (only a graph output can take it)",
                k, nd->input[k], op_type);
      goto done;
    }
  if (!symbolic_inputs_ok(imp, nd, &nc)) goto done;
  for (size_t a = 0; a < nd->n_attribute; a++) {
    const char *an = nd->attribute[a]->name ? nd->attribute[a]->name : "";
    if (nd->attribute[a]->ref_attr_name && nd->attribute[a]->ref_attr_name[0]) {
      imp_error(imp, "attribute '%s' refers to a function attribute: not supported", an);
      goto done;
    }
    if (!attr_allowed(allowed, an)) {
      imp_error(imp, "unsupported attribute '%s'", an);
      goto done;
    }
  }
  {
    const char *stem = nd->n_output && nd->output[0][0] ? nd->output[0] : op_type;
    imp->base = stem;
    qir_op *before = imp->region->last;
    int errors_before = imp->n_errors;
    uintptr_t saved_taint = imp->node_taint;
    imp->node_taint = 0;
    for (size_t k = 0; k < nd->n_input; k++)
      if (nd->input[k][0]) imp->node_taint |= (uintptr_t)strmap_get(imp->taint, nd->input[k]);
    if (nd == imp->probe_node) imp->probe_reached = true;
    ok = fn(&nc);
    /* a node's outputs depend on what its inputs and its subgraphs read */
    uintptr_t taint = imp->node_taint;
    if (imp->n_syms) {
      strmap *reads = node_subgraph_reads(nd);
      for (size_t sl = 0; reads && sl < reads->cap; sl++)
        if (reads->slots[sl].key) taint |= (uintptr_t)strmap_get(imp->taint, reads->slots[sl].key);
      strmap_free(reads);
      for (size_t k = 0; k < nd->n_output; k++)
        if (nd->output[k][0] && taint) strmap_put(imp->taint, nd->output[k], (void *)taint);
    }
    imp->node_taint = saved_taint;
    /* a converter that fails must say why; this catches one that does not,
     * unless its subgraphs read a value that already failed (reported there) */
    if (!ok && imp->n_errors == errors_before) {
      if (subgraphs_read_poison(nd, sc)) imp->n_errors++;
      else imp_error(imp, "cannot convert this node (%d input(s) given: missing or invalid inputs or attributes)", nc.n_in);
    }
    if (ok) {
      for (int k = 0; k < nc.n_out; k++) {
        if (!nd->output[k][0]) continue;
        if (!nc.out[k]) {
          imp_error(imp, "output %d ('%s') is not supported", k, nd->output[k]);
          ok = false;
          break;
        }
        name_value(imp, nc.out[k], nd->output[k]);
        if (getenv("ONNX2QIR_TRACE") && !imp->probe) {
          char tb[160];
          qir_type_format(&nc.out[k]->type, tb, sizeof tb);
          fprintf(stderr, "trace: %s %s -> %%%s : %s", op_type, nd->output[k], nc.out[k]->name, tb);
          if (const_def(nc.out[k])) {
            fprintf(stderr, " const");
            for (int64_t e = 0; e < qir_type_numel(&nc.out[k]->type) && e < 8; e++)
              fprintf(stderr, " %g", const_elem(imp, nc.out[k], e));
          }
          fputc('\n', stderr);
        }
      }
      /* helper values get names derived from the node's first output */
      qir_op *first = before ? before->next : imp->region->first;
      char *stem2 = malloc(strlen(stem) + 3);
      if (!stem2) abort();
      sprintf(stem2, "%s$", stem);
      imp->base = stem2;
      for (qir_op *op = first; op; op = op->next) {
        name_results_visit(op, imp);
        for (int r = 0; r < op->n_regions; r++) qir_walk(op->regions[r], name_results_visit, imp);
      }
      imp->base = NULL;
      free(stem2);
    }
  }
done:
  for (size_t k = 0; k < nd->n_output; k++)
    if (nd->output[k][0]) strmap_put(sc->vals, nd->output[k], ok && nc.out[k] ? nc.out[k] : POISON);
  free(nc.in);
  free(nc.out);
  imp->node = NULL;
}

/* Initializers of a (sub)graph become constants in the current region. */
static bool add_initializers(importer *imp, const Onnx__GraphProto *g, scope *sc) {
  bool ok = true;
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *t = g->initializer[i];
    const char *name = t->name ? t->name : "";
    char what[300];
    snprintf(what, sizeof what, "initializer '%.200s'", name);
    qir_op *c = tensor_to_const(imp, t, what);
    if (!c) {
      strmap_put(sc->vals, name, POISON);
      ok = false;
      continue;
    }
    qir_value *v = add_const_op(imp, c);
    name_value(imp, v, name);
    strmap_put(sc->vals, name, v);
  }
  if (g->n_sparse_initializer) {
    imp_error(imp, "sparse initializers are not supported");
    ok = false;
  }
  return ok;
}

qir_region *region_detached(importer *imp) { return qir_region_new(imp->m, NULL); }

void region_adopt(qir_op *op, int index, qir_region *r) {
  op->regions[index] = r;
  r->parent_op = op;
}

bool import_graph_body(importer *imp, const Onnx__GraphProto *g, scope *sc, qir_value **outs) {
  const Onnx__NodeProto *saved_node = imp->node;
  scope *saved_sc = imp->sc;
  imp->sc = sc;
  imp->node = NULL;
  bool ok = add_initializers(imp, g, sc);
  size_t *order = calloc(g->n_node + 1, sizeof *order);
  if (!order) abort();
  int errors_before = imp->n_errors;
  if (order_nodes(imp, g, sc, order)) {
    for (size_t i = 0; i < g->n_node; i++) convert_node(imp, g->node[order[i]], sc);
  } else {
    free(order);
    imp->node = saved_node;
    imp->sc = saved_sc;
    return false;
  }
  free(order);
  if (imp->n_errors != errors_before) ok = false;
  for (size_t i = 0; i < g->n_output; i++) {
    const char *name = g->output[i]->name ? g->output[i]->name : "";
    qir_value *v = scope_lookup(sc, name);
    if (!v) {
      imp_error(imp, "graph output '%s' is not produced by any node", name);
      ok = false;
    } else if (v == POISON) {
      ok = false;
    } else if (saved_node && v->type.bounded) {
      /* a subgraph's output feeds its node (a yield), which needs a static extent */
      imp_error(imp, "subgraph output '%s' is the scan output of a Loop that may stop early: its number of rows is "
                "known only at run time, and only a graph output of the model can take it", name);
      ok = false;
    }
    outs[i] = v;
  }
  imp->node = saved_node;
  imp->sc = saved_sc;
  return ok;
}

/* Removes pure ops whose results are unused (constants of folded subgraphs). */
static bool dce_region(qir_region *r) {
  bool changed = false;
  for (qir_op *op = r->last, *prev; op; op = prev) {
    prev = op->prev;
    for (int i = 0; i < op->n_regions; i++) changed |= dce_region(op->regions[i]);
    if (!(qir_opinfo_get(op->code)->flags & QIR_OPF_PURE)) continue;
    bool used = false;
    for (int i = 0; i < op->n_results; i++)
      if (op->results[i]->uses) used = true;
    if (!used) {
      qir_op_unlink(op);
      changed = true;
    }
  }
  return changed;
}

static qir_op *read_bound_tensor(importer *imp, const char *name, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    imp_error(imp, "--bind %s: cannot open '%s'", name, path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (len < 0 || len > ((long)1 << 31)) {
    fclose(f);
    imp_error(imp, "--bind %s: '%s' is not a tensor file", name, path);
    return NULL;
  }
  uint8_t *buf = malloc((size_t)len + 1);
  if (!buf) abort();
  size_t got = fread(buf, 1, (size_t)len, f);
  fclose(f);
  Onnx__TensorProto *t = got == (size_t)len ? onnx__tensor_proto__unpack(NULL, (size_t)len, buf) : NULL;
  free(buf);
  if (!t) {
    imp_error(imp, "--bind %s: '%s' is not a valid TensorProto file", name, path);
    return NULL;
  }
  char what[300];
  snprintf(what, sizeof what, "--bind %.100s tensor '%.150s'", name, path);
  qir_op *c = tensor_to_const(imp, t, what);
  onnx__tensor_proto__free_unpacked(t, NULL);
  return c;
}

bool import_model(importer *imp, const Onnx__ModelProto *model) {
  imp->model = model;
  imp->ir_version = model->has_ir_version ? model->ir_version : 0;
  imp->opset = -1;
  for (size_t i = 0; i < model->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = model->opset_import[i];
    if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0) imp->opset = o->has_version ? o->version : 1;
  }
  if (imp->opset < 0) imp->opset = model->n_opset_import ? 1 : 22; /* IR 1-2 models name no opset */
  const Onnx__GraphProto *g = model->graph;
  if (!g) {
    imp_error(imp, "the model has no graph");
    return false;
  }
  if (g->name && g->name[0]) {
    char *mn = strdup(g->name);
    if (!mn) abort();
    for (char *p = mn; *p; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' ||
            *p == '$'))
        *p = '_';
    imp->m->name = qir_strdup(imp->m, mn);
    free(mn);
  }
  scope *sc = scope_new(NULL);
  imp->sc = sc;
  imp->region = imp->m->body;
  bool ok = true;
  strmap *inits = strmap_new();
  for (size_t i = 0; i < g->n_initializer; i++)
    if (g->initializer[i]->name) strmap_put(inits, g->initializer[i]->name, (void *)1);
  for (int b = 0; b < imp->n_binds; b++) {
    bool found = false;
    for (size_t i = 0; i < g->n_input; i++)
      if (g->input[i]->name && strcmp(g->input[i]->name, imp->binds[b].name) == 0) found = true;
    if (!found) {
      imp_error(imp, "--bind %s: the graph has no input of that name", imp->binds[b].name);
      ok = false;
    }
  }
  if (!dims_prepare(imp, g)) ok = false;
  for (size_t i = 0; i < g->n_input; i++) {
    const Onnx__ValueInfoProto *vi = g->input[i];
    const char *name = vi->name ? vi->name : "";
    if (strmap_get(inits, name)) continue; /* IR < 4: initializers listed as inputs */
    const char *bound = NULL;
    for (int b = 0; b < imp->n_binds; b++)
      if (strcmp(imp->binds[b].name, name) == 0) bound = imp->binds[b].path;
    if (strmap_get(sc->vals, name)) {
      imp_error(imp, "graph input '%s' is listed twice", name);
      ok = false;
      continue;
    }
    if (bound) {
      qir_op *c = read_bound_tensor(imp, name, bound);
      if (!c) {
        ok = false;
        strmap_put(sc->vals, name, POISON);
        continue;
      }
      qir_value *v = add_const_op(imp, c);
      name_value(imp, v, name);
      strmap_put(sc->vals, name, v);
      continue;
    }
    qir_type t;
    input_dims info;
    if (!value_info_type(imp, vi, &t, &info)) {
      ok = false;
      strmap_put(sc->vals, name, POISON);
      continue;
    }
    qir_op *in = qir_op_new(imp->m, QIR_OP_INPUT, 0, NULL, 1, &t, (qir_loc){0});
    qir_op_set_attr(imp->m, in, "name", qir_attr_string(imp->m, name), false);
    if (info.symbolic) { /* how each extent was chosen, for a reader of the module */
      qir_attr_val params[QIR_MAX_RANK], sources[QIR_MAX_RANK];
      for (int k = 0; k < t.rank; k++) {
        params[k] = qir_attr_string(imp->m, info.param[k]);
        sources[k] = qir_attr_word(imp->m, info.source[k]);
      }
      qir_op_set_attr(imp->m, in, "dim_params", qir_attr_list(imp->m, t.rank, params), false);
      qir_op_set_attr(imp->m, in, "dim_source", qir_attr_list(imp->m, t.rank, sources), false);
    }
    if (info.taint) strmap_put(imp->taint, name, (void *)info.taint);
    qir_op_append(imp->region, in);
    name_value(imp, in->results[0], name);
    strmap_put(sc->vals, name, in->results[0]);
  }
  strmap_free(inits);
  if (!imp->n_errors) dims_warn(imp);
  if (ok || imp->n_errors == 0) {
    qir_value **outs = calloc(g->n_output + 1, sizeof *outs);
    if (!outs) abort();
    if (!import_graph_body(imp, g, sc, outs)) ok = false;
    if (ok)
      for (size_t i = 0; i < g->n_output; i++) {
        qir_op *o = qir_op_new(imp->m, QIR_OP_OUTPUT, 1, &outs[i], 0, NULL, (qir_loc){0});
        qir_op_set_attr(imp->m, o, "name", qir_attr_string(imp->m, g->output[i]->name ? g->output[i]->name : ""), false);
        qir_op_append(imp->region, o);
      }
    free(outs);
  }
  scope_free(sc);
  imp->sc = NULL;
  if (imp->n_errors) ok = false;
  if (ok)
    while (dce_region(imp->m->body)) {
    }
  return ok;
}
