/* dims.c: the types of graph inputs.  qir is a static-shape compiler, so each
 * symbolic ONNX dimension gets one extent at import, in this order:
 *   --shape INPUT=D0,D1,...  the whole shape of one input;
 *   --dim NAME=N             every dimension whose dim_param is NAME (a name a
 *                            --shape fixed counts as given for the other inputs);
 *   otherwise 1, with one warning per dimension naming the inputs it sets and
 *   the flag that changes it (--strict-shapes makes it an error instead).
 * When a node later fails and its inputs' shapes depend on a defaulted
 * dimension, a note after the error names that dimension and how to set it:
 * import.c tracks, per ONNX value, which defaulted dimensions its shape depends
 * on (imp->taint). */
#include "onnx2qir.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* One diagnostic line; names come from the untrusted model, so no control bytes. */
static void say(importer *imp, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(importer *imp, const char *kind, const char *fmt, ...) {
  char line[2048];
  int w = snprintf(line, sizeof line, "%s: %s: ", imp->model_path, kind);
  va_list ap;
  va_start(ap, fmt);
  if (w >= 0 && (size_t)w < sizeof line) vsnprintf(line + w, sizeof line - (size_t)w, fmt, ap);
  va_end(ap);
  for (char *q = line; *q; q++)
    if ((unsigned char)*q < 32 || *q == 127) *q = '?';
  fprintf(stderr, "%s\n", line);
}

static const char *dim_param(const Onnx__TensorShapeProto__Dimension *d) {
  return d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param && d->dim_param[0]
             ? d->dim_param : NULL;
}

static const Onnx__TensorShapeProto *input_shape(const Onnx__ValueInfoProto *vi) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return NULL;
  return tp->tensor_type->shape;
}

static named_dim *find_named(importer *imp, const char *name) {
  for (int i = 0; i < imp->n_named; i++)
    if (strcmp(imp->named[i].name, name) == 0) return &imp->named[i];
  return NULL;
}

static const shape_opt *find_shape_opt(const importer *imp, const char *input) {
  for (int i = 0; i < imp->n_shapes; i++)
    if (strcmp(imp->shapes[i].name, input) == 0) return &imp->shapes[i];
  return NULL;
}

/* Whether a graph input before (input j, axis k) has a dimension named p. */
static bool named_before(const Onnx__GraphProto *g, size_t j, size_t k, const char *p) {
  for (size_t jj = 0; jj <= j; jj++) {
    const Onnx__TensorShapeProto *sh = input_shape(g->input[jj]);
    for (size_t kk = 0; sh && kk < sh->n_dim && (jj < j || kk < k); kk++)
      if (dim_param(sh->dim[kk]) && strcmp(dim_param(sh->dim[kk]), p) == 0) return true;
  }
  return false;
}

bool dims_prepare(importer *imp, const Onnx__GraphProto *g) {
  bool ok = true;
  size_t axes = 0;
  for (size_t i = 0; i < g->n_input; i++)
    if (input_shape(g->input[i])) axes += input_shape(g->input[i])->n_dim;
  imp->named = realloc(imp->named, ((size_t)imp->n_named + axes + 1) * sizeof *imp->named);
  if (!imp->named) abort();
  /* names in --shape: an input that names its dimensions tells the others */
  for (size_t i = 0; i < g->n_input; i++) {
    const char *name = g->input[i]->name ? g->input[i]->name : "";
    const Onnx__TensorShapeProto *sh = input_shape(g->input[i]);
    const shape_opt *so = find_shape_opt(imp, name);
    if (!sh) continue;
    for (size_t k = 0; k < sh->n_dim; k++) {
      const char *p = dim_param(sh->dim[k]);
      if (!p) continue;
      named_dim *nd = find_named(imp, p);
      if (nd) nd->used = true;
      if (!so || so->rank != (int)sh->n_dim) continue; /* a wrong rank is reported with the input */
      if (nd && (nd->value != so->dims[k] || nd->lo != so->lo[k] || nd->step != so->step[k])) {
        imp_error(imp, "--shape %s sets dimension '%s' to %lld..%lld, but %s sets it to %lld..%lld", name, p,
                  (long long)so->lo[k], (long long)so->dims[k], nd->from, (long long)nd->lo, (long long)nd->value);
        ok = false;
      } else if (!nd) {
        named_dim *n = &imp->named[imp->n_named++];
        char *from = malloc(strlen(name) + 16);
        if (!from) abort();
        sprintf(from, "--shape %s", name);
        *n = (named_dim){.name = p, .value = so->dims[k], .lo = so->lo[k], .step = so->step[k], .source = "shape",
                         .from = from, .used = true};
      }
    }
  }
  for (int i = 0; i < imp->n_shapes; i++) {
    bool found = false;
    for (size_t j = 0; j < g->n_input && !found; j++)
      found = g->input[j]->name && strcmp(g->input[j]->name, imp->shapes[i].name) == 0;
    if (!found) {
      char names[512] = "";
      size_t w = 0;
      for (size_t j = 0; j < g->n_input && w < 400; j++)
        w += (size_t)snprintf(names + w, sizeof names - w, "%s'%.100s'", w ? ", " : "",
                              g->input[j]->name ? g->input[j]->name : "");
      imp_error(imp, "--shape %s: the graph has no input of that name (%s%s)", imp->shapes[i].name,
                w ? "its inputs are " : "it has no inputs", names);
      ok = false;
    }
  }
  for (int i = 0; i < imp->n_named; i++)
    if (!imp->named[i].used) {
      char names[512] = "";
      size_t w = 0;
      for (size_t j = 0; j < g->n_input && w < 400; j++) {
        const Onnx__TensorShapeProto *sh = input_shape(g->input[j]);
        for (size_t k = 0; sh && k < sh->n_dim && w < 400; k++) {
          const char *p = dim_param(sh->dim[k]);
          if (p && !named_before(g, j, k, p))
            w += (size_t)snprintf(names + w, sizeof names - w, "%s'%.100s'", w ? ", " : "", p);
        }
      }
      imp_error(imp, "%s: no graph input has a dimension named '%s' (%s%s)", imp->named[i].from, imp->named[i].name,
                w ? "the named ones are " : "the inputs name no dimensions", names);
      ok = false;
    }
  return ok;
}

static uintptr_t sym_bit(int i) {
  /* past the mask's width, the last bit stands for all the rest */
  int bits = (int)(8 * sizeof(uintptr_t));
  return (uintptr_t)1 << (i < bits ? i : bits - 1);
}

/* The index in imp->syms the defaulted dimension `name` has (NULL: a new
 * unnamed one, or a name not seen yet: syms' next index). */
static int sym_index(const importer *imp, const char *name) {
  int i = 0;
  if (name)
    while (i < imp->n_syms && !(imp->syms[i].name && strcmp(imp->syms[i].name, name) == 0)) i++;
  else
    i = imp->n_syms;
  return i;
}

/* The defaulted dimension that sets axis `axis` of `input`. */
static int sym_index_of_use(const importer *imp, const char *input, int axis) {
  for (int i = 0; i < imp->n_syms; i++)
    for (int u = 0; u < imp->syms[i].n_uses && u < SYM_USES; u++)
      if (imp->syms[i].uses[u].input == input && imp->syms[i].uses[u].axis == axis) return i;
  return 0;
}

/* The defaulted dimension `name` (NULL: a new unnamed one) gains a use;
 * returns its bit in a taint mask. */
static uintptr_t sym_use(importer *imp, const char *name, const char *input, int axis) {
  int i = sym_index(imp, name);
  if (i == imp->n_syms) {
    if (imp->n_syms == imp->cap_syms) {
      imp->cap_syms = imp->cap_syms ? 2 * imp->cap_syms : 8;
      imp->syms = realloc(imp->syms, (size_t)imp->cap_syms * sizeof *imp->syms);
      if (!imp->syms) abort();
    }
    imp->syms[imp->n_syms++] = (sym_dim){.name = name};
  }
  sym_dim *s = &imp->syms[i];
  if (s->n_uses < SYM_USES) {
    s->uses[s->n_uses].input = input;
    s->uses[s->n_uses].axis = axis;
  }
  s->n_uses++;
  return sym_bit(i);
}

/* The module's dimension symbol for a range (--dim NAME=MIN..MAX, or a --shape
 * entry MIN..MAX): named after the ONNX dim_param, or INPUT_dK for an unnamed
 * axis, spelt as a qir identifier. */
static const qir_dim *range_symbol(importer *imp, const char *param, const char *input, int axis, int64_t lo,
                                   int64_t hi, int64_t step) {
  char name[200];
  if (param && param[0]) snprintf(name, sizeof name, "%.120s", param);
  else snprintf(name, sizeof name, "%.120s_d%d", input, axis);
  for (char *q = name; *q; q++)
    if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_')) *q = '_';
  static const char *const words[] = {"dim", "module", "weights", "const", "compute", "reduce", "dense", "else", "inf", "nan"};
  bool clash = name[0] >= '0' && name[0] <= '9';
  for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) clash |= strcmp(name, words[w]) == 0;
  if (clash) {
    char tmp[200];
    snprintf(tmp, sizeof tmp, "d_%.150s", name);
    memcpy(name, tmp, sizeof name);
  }
  int k = qir_dimsym_find(imp->m, name);
  if (k >= 0 && (imp->m->syms[k].lo != lo || imp->m->syms[k].hi != hi)) { /* two spellings met: keep them apart */
    char tmp[220];
    for (int n = 2; k >= 0 && n < 1000; n++) {
      snprintf(tmp, sizeof tmp, "%.150s_%d", name, n);
      k = qir_dimsym_find(imp->m, tmp);
      if (k >= 0 && imp->m->syms[k].lo == lo && imp->m->syms[k].hi == hi) break;
    }
    if (k < 0) k = qir_dimsym_add(imp->m, tmp, lo, hi, step, (qir_loc){0});
  } else if (k < 0)
    k = qir_dimsym_add(imp->m, name, lo, hi, step, (qir_loc){0});
  return qir_dim_sym(imp->m, k);
}

bool value_info_type(importer *imp, const Onnx__ValueInfoProto *vi, qir_type *out, input_dims *info) {
  const char *name = vi->name ? vi->name : "";
  const Onnx__TypeProto *tp = vi->type;
  memset(info, 0, sizeof *info);
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
    const char *kind = !tp ? "no type" :
                       tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ? "a sequence type" :
                       tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? "an optional type" :
                       tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE ? "a map type" : "a non-tensor type";
    imp_error(imp, "graph input '%s' has %s: only tensors are supported", name, kind);
    return false;
  }
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  qir_dtype dt;
  if (!tt->has_elem_type || !onnx_dtype_to_qir(tt->elem_type, &dt)) {
    imp_error(imp, "graph input '%s' has unsupported element type %s", name,
              onnx_dtype_name(tt->has_elem_type ? tt->elem_type : 0));
    return false;
  }
  const Onnx__TensorShapeProto *sh = tt->shape;
  const shape_opt *so = find_shape_opt(imp, name);
  if (so) {
    if (sh && (int)sh->n_dim != so->rank) {
      imp_error(imp, "--shape %s has %d dimensions but the input has %zu", name, so->rank, sh->n_dim);
      return false;
    }
    for (int k = 0; k < so->rank; k++) {
      const Onnx__TensorShapeProto__Dimension *d = sh ? sh->dim[k] : NULL;
      bool fixed = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      if (fixed && d->dim_value != so->dims[k]) {
        imp_error(imp, "--shape %s: dimension %d is %lld in the model, not %lld", name, k, (long long)d->dim_value,
                  (long long)so->dims[k]);
        return false;
      }
      info->param[k] = d && dim_param(d) ? dim_param(d) : "";
      info->source[k] = fixed ? "model" : "shape";
      if (!fixed) info->symbolic = true;
    }
    *out = qir_type_make(dt, so->rank, so->dims);
    for (int k = 0; k < so->rank; k++)
      if (so->lo[k] != so->dims[k])
        qir_type_set_dim(out, k, range_symbol(imp, info->param[k], name, k, so->lo[k], so->dims[k], so->step[k]));
    return check_dims(imp, (size_t)out->rank, out->dims, "--shape");
  }
  if (!sh) {
    imp_error(imp, "graph input '%s' has no shape: give one with --shape %s=D0,D1,...", name, name);
    return false;
  }
  if (sh->n_dim > QIR_MAX_RANK) {
    imp_error(imp, "graph input '%s' has rank %zu (at most %d supported)", name, sh->n_dim, QIR_MAX_RANK);
    return false;
  }
  int rank = (int)sh->n_dim;
  int64_t dims[QIR_MAX_RANK];
  const named_dim *ranged[QIR_MAX_RANK] = {NULL};
  bool defaulted[QIR_MAX_RANK] = {false};
  for (int k = 0; k < rank; k++) {
    const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
    const char *p = dim_param(d);
    info->param[k] = p ? p : "";
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      dims[k] = d->dim_value;
      info->source[k] = "model";
      continue;
    }
    info->symbolic = true;
    const named_dim *nd = p ? find_named(imp, p) : NULL;
    if (nd) {
      dims[k] = nd->value;
      info->source[k] = nd->source;
      if (nd->lo != nd->value) ranged[k] = nd;
    } else if (imp->strict_shapes) {
      if (p)
        imp_error(imp, "graph input '%s' has symbolic dimension %d ('%s'): fix it with --shape %s=D0,D1,... or --dim %s=SIZE",
                  name, k, p, name, p);
      else
        imp_error(imp, "graph input '%s' has symbolic dimension %d ('?'): fix it with --shape %s=D0,D1,...", name, k,
                  name);
      return false;
    } else {
      /* a probe import tries other extents */
      int i = sym_index(imp, p);
      dims[k] = imp->probe && i < imp->n_probe ? imp->probe[i] : 1;
      info->source[k] = "default";
      info->taint |= sym_use(imp, p, name, k);
      defaulted[k] = true;
    }
  }
  /* the whole shape, for the --shape hint of an unnamed dimension */
  for (int k = 0; k < rank; k++)
    if (defaulted[k]) {
      sym_dim *s = &imp->syms[sym_index_of_use(imp, name, k)];
      for (int u = 0; u < s->n_uses && u < SYM_USES; u++)
        if (s->uses[u].input == name && s->uses[u].axis == k) {
          s->uses[u].rank = rank;
          memcpy(s->uses[u].dims, dims, (size_t)rank * sizeof *dims);
        }
    }
  char what[300];
  snprintf(what, sizeof what, "graph input '%.200s'", name);
  if (!check_dims(imp, (size_t)rank, dims, what)) return false;
  *out = qir_type_make(dt, rank, dims);
  for (int k = 0; k < rank; k++)
    if (ranged[k])
      qir_type_set_dim(out, k, range_symbol(imp, ranged[k]->name, name, k, ranged[k]->lo, ranged[k]->value, ranged[k]->step));
  return true;
}

/* "input 'x' (axis 0)", "inputs 'x' (axis 0) and 'y' (axis 1)", ... */
static void format_uses(const sym_dim *s, char *buf, size_t cap) {
  size_t w = (size_t)snprintf(buf, cap, "%s", s->n_uses > 1 ? "inputs " : "input ");
  int shown = s->n_uses < SYM_USES ? s->n_uses : SYM_USES;
  for (int i = 0; i < shown && w < cap; i++)
    w += (size_t)snprintf(buf + w, cap - w, "%s'%.100s' (axis %d)", i == 0 ? "" : i + 1 == s->n_uses ? " and " : ", ",
                          s->uses[i].input, s->uses[i].axis);
  if (s->n_uses > shown && w < cap) snprintf(buf + w, cap - w, " and %d more", s->n_uses - shown);
}

/* The flag that sets s: "--dim NAME=N", or for an unnamed axis "--shape x=1,N". */
static void format_flag(const sym_dim *s, char *buf, size_t cap) {
  if (s->name) {
    snprintf(buf, cap, "--dim %.200s=SIZE", s->name);
    return;
  }
  size_t w = (size_t)snprintf(buf, cap, "--shape %.200s=", s->uses[0].input);
  for (int k = 0; k < s->uses[0].rank && w < cap; k++) {
    if (k == s->uses[0].axis) w += (size_t)snprintf(buf + w, cap - w, "%sSIZE", k ? "," : "");
    else w += (size_t)snprintf(buf + w, cap - w, "%s%lld", k ? "," : "", (long long)s->uses[0].dims[k]);
  }
}

static void format_dim(const sym_dim *s, char *buf, size_t cap) {
  char uses[700];
  format_uses(s, uses, sizeof uses);
  if (s->name) snprintf(buf, cap, "symbolic dimension '%.200s' of %s", s->name, uses);
  else snprintf(buf, cap, "unnamed symbolic dimension of %s", uses);
}

void dims_warn(importer *imp) {
  if (imp->probe) return;
  for (int i = 0; i < imp->n_syms; i++) {
    char dim[1000], flag[600];
    format_dim(&imp->syms[i], dim, sizeof dim);
    format_flag(&imp->syms[i], flag, sizeof flag);
    say(imp, "warning", "%s set to 1; set it with %s (--strict-shapes makes this an error)", dim, flag);
  }
}

/* Extent a probe gives the defaulted dimensions it does not test: large enough
 * for common windows and pads, a multiple of the usual strides. */
#define PROBE_EXTENT 256
/* Probe imports one run may spend on notes; past it, notes name every
 * defaulted dimension the node depends on. */
#define PROBE_BUDGET 64

/* Does node nd still fail when defaulted dimension `keep` stays 1 and every
 * other defaulted dimension is PROBE_EXTENT?  -1: the probe never reached the
 * node (something else failed first), so it cannot tell. */
static int still_fails(importer *imp, const Onnx__NodeProto *nd, int keep) {
  int64_t *probe = malloc(((size_t)imp->n_syms + 1) * sizeof *probe);
  if (!probe) abort();
  for (int i = 0; i < imp->n_syms; i++) probe[i] = i == keep ? 1 : PROBE_EXTENT;
  importer p;
  memset(&p, 0, sizeof p);
  p.model_path = imp->model_path;
  p.n_shapes = imp->n_shapes;
  p.shapes = imp->shapes;
  p.n_binds = imp->n_binds;
  p.binds = imp->binds;
  p.strict_shapes = imp->strict_shapes;
  p.n_named = p.n_dim_opts = imp->n_dim_opts;
  p.named = malloc(((size_t)imp->n_dim_opts + 1) * sizeof *p.named);
  if (!p.named) abort();
  memcpy(p.named, imp->named, (size_t)imp->n_dim_opts * sizeof *p.named);
  p.probe = probe;
  p.n_probe = imp->n_syms;
  p.probe_node = nd;
  p.m = qir_module_new("probe");
  p.used_names = strmap_new();
  p.unsupported = strmap_new();
  p.taint = strmap_new();
  import_model(&p, imp->model);
  int r = !p.probe_reached ? -1 : p.probe_failed ? 1 : 0;
  qir_module_free(p.m);
  strmap_free(p.used_names);
  strmap_free(p.unsupported);
  strmap_free(p.taint);
  dims_free(&p);
  free(p.named);
  free(probe);
  return r;
}

void dims_note(importer *imp, uintptr_t mask) {
  /* Of the defaulted dimensions the node depends on, name those that make it
   * fail: a dimension is cleared when the node imports with it at 1 and the
   * others large.  When no probe can tell, all of them are named. */
  uintptr_t blamed = 0;
  int candidates = 0;
  for (int i = 0; i < imp->n_syms; i++)
    if (mask & sym_bit(i)) candidates++;
  if (imp->model && !imp->probe && imp->node && imp->probes_run + candidates <= PROBE_BUDGET)
    for (int i = 0; i < imp->n_syms; i++)
      if (mask & sym_bit(i)) {
        imp->probes_run++;
        if (still_fails(imp, imp->node, i) != 0) blamed |= sym_bit(i);
      }
  if (!blamed) blamed = mask;
  for (int i = 0; i < imp->n_syms; i++) {
    if (!(blamed & sym_bit(i))) continue;
    char dim[1000], flag[600];
    format_dim(&imp->syms[i], dim, sizeof dim);
    format_flag(&imp->syms[i], flag, sizeof flag);
    say(imp, "note", "this depends on the %s, which defaulted to 1; set it with %s", dim, flag);
  }
}

void dims_free(importer *imp) {
  for (int i = 0; i < imp->n_named; i++)
    if (strcmp(imp->named[i].source, "shape") == 0) free((void *)imp->named[i].from);
  free(imp->syms);
  imp->syms = NULL;
  imp->n_syms = imp->cap_syms = 0;
}
