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
 * on (imp->taint), and probe imports with other extents tell which of those
 * make the node fail (blame). */
#include "onnx2qir.h"

#include <ctype.h>
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

/* "8", "1..16" or "32..640%32", as the options write them */
static void extent_text(int64_t lo, int64_t hi, int64_t step, char *buf, size_t cap) {
  if (lo == hi) snprintf(buf, cap, "%lld", (long long)hi);
  else if (step > 1) snprintf(buf, cap, "%lld..%lld%%%lld", (long long)lo, (long long)hi, (long long)step);
  else snprintf(buf, cap, "%lld..%lld", (long long)lo, (long long)hi);
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
        char a[80], b[80];
        extent_text(so->lo[k], so->dims[k], so->step[k], a, sizeof a);
        extent_text(nd->lo, nd->value, nd->step, b, sizeof b);
        imp_error(imp, "--shape %s sets dimension '%s' to %s, but %s sets it to %s", name, p, a, nd->from, b);
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
  if (k >= 0 && (imp->m->syms[k].lo != lo || imp->m->syms[k].hi != hi || imp->m->syms[k].step != step)) {
    /* two spellings met: keep them apart */
    char tmp[220];
    for (int n = 2; k >= 0 && n < 1000; n++) {
      snprintf(tmp, sizeof tmp, "%.150s_%d", name, n);
      k = qir_dimsym_find(imp->m, tmp);
      if (k >= 0 && imp->m->syms[k].lo == lo && imp->m->syms[k].hi == hi && imp->m->syms[k].step == step) break;
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
      if (fixed && (d->dim_value != so->dims[k] || so->lo[k] != so->dims[k])) {
        char e[80];
        extent_text(so->lo[k], so->dims[k], so->step[k], e, sizeof e);
        imp_error(imp, "--shape %s: dimension %d is %lld in the model, not %s", name, k, (long long)d->dim_value, e);
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

/* Extents a probe gives the defaulted dimensions it enlarges together: the
 * first large enough for common windows and pads, the second for long ones (a
 * 512-sample frame, a 1024-wide kernel); both multiples of the usual strides. */
static const int64_t large_extents[] = {256, 4096};
#define N_LARGE ((int)(sizeof large_extents / sizeof *large_extents))
/* A dimension enlarged alone also tries the sizes the error names (the 512 of
 * a window, the 7 a contraction wants, the 4 a reshape wants): at most this many. */
#define MSG_EXTENTS 4
/* Probe imports one run may spend on notes; past it, notes name every
 * defaulted dimension the node depends on. */
#define PROBE_BUDGET 64

typedef enum { PROBE_UNREACHED, PROBE_PASSES, PROBE_FAILS } probe_outcome;

/* Imports the model again with extents[i] for defaulted dimension i and
 * reports what node nd does.  UNREACHED: something before it failed, so the
 * probe cannot tell.  On FAILS, msg gets the node's first error. */
static probe_outcome probe_node(importer *imp, const Onnx__NodeProto *nd, const int64_t *extents, char *msg,
                                size_t cap) {
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
  p.probe = extents;
  p.n_probe = imp->n_syms;
  p.probe_node = nd;
  p.m = qir_module_new("probe");
  p.used_names = strmap_new();
  p.unsupported = strmap_new();
  p.taint = strmap_new();
  imp->probes_run++;
  import_model(&p, imp->model);
  probe_outcome r = !p.probe_reached ? PROBE_UNREACHED : p.probe_failed ? PROBE_FAILS : PROBE_PASSES;
  snprintf(msg, cap, "%s", p.probe_message);
  qir_module_free(p.m);
  strmap_free(p.used_names);
  strmap_free(p.unsupported);
  strmap_free(p.taint);
  dims_free(&p);
  free(p.named);
  return r;
}

/* The sizes an error names that could be extents (2 .. 2^20), at most cap of
 * them: standalone numbers, not the 32 of "f32" or the 0 of "conv0". */
static int message_extents(const char *msg, int64_t *out, int cap) {
  int n = 0;
  for (const char *q = msg; *q && n < cap; q++) {
    if (!isdigit((unsigned char)*q) || (q > msg && (isalnum((unsigned char)q[-1]) || q[-1] == '_'))) continue;
    int64_t v = 0;
    const char *d = q;
    while (isdigit((unsigned char)*d) && v <= (int64_t)1 << 20) v = v * 10 + (*d++ - '0');
    bool standalone = !isalpha((unsigned char)*d) && *d != '_';
    while (isdigit((unsigned char)*d)) d++;
    q = d - 1;
    bool seen = false;
    for (int i = 0; i < n; i++) seen |= out[i] == v;
    if (standalone && v >= 2 && v <= (int64_t)1 << 20 && !seen) out[n++] = v;
  }
  return n;
}

/* Of the defaulted dimensions in `mask` (the node's inputs depend on them),
 * those that make the node fail, as a mask; 0 when none can be singled out.
 * msg0 is the node's error with every dimension at 1.
 *  1. A dimension that alone, set to a size the error names or a large one,
 *     makes the node import is to blame; when there are some, they are the
 *     answer (a batch a window does not read stays out).
 *  2. Otherwise, when enlarging all of them together makes it import, those
 *     that must be enlarged (it fails with that one back at 1) are to blame
 *     (a window over height and width needs both).
 *  3. Otherwise, the dimensions whose change alone changes the error: the
 *     failure depends on them. */
static uintptr_t blame(importer *imp, uintptr_t mask, const char *msg0) {
  int k = 0;
  for (int i = 0; i < imp->n_syms; i++)
    if (mask & sym_bit(i)) k++;
  int64_t tries[MSG_EXTENTS + N_LARGE];
  int n_tries = message_extents(msg0, tries, MSG_EXTENTS);
  for (int e = 0; e < N_LARGE; e++) {
    bool seen = false;
    for (int i = 0; i < n_tries; i++) seen |= tries[i] == large_extents[e];
    if (!seen) tries[n_tries++] = large_extents[e];
  }
  /* worst case: each dimension alone at every size, all of them together at
   * every large size, then each one back at 1 */
  if (k < 2 || imp->probes_run + k * n_tries + N_LARGE + k > PROBE_BUDGET) return 0;
  int64_t *extents = malloc(((size_t)imp->n_syms + 1) * sizeof *extents);
  if (!extents) abort();
  const Onnx__NodeProto *nd = imp->node;
  char msg[sizeof imp->probe_message];
  uintptr_t passing = 0, changing = 0, unknown = 0, blamed = 0;
  for (int i = 0; i < imp->n_syms; i++) {
    if (!(mask & sym_bit(i))) continue;
    bool passes = false, changes = false, reached = false;
    for (int e = 0; e < n_tries && !passes; e++) {
      for (int j = 0; j < imp->n_syms; j++) extents[j] = j == i ? tries[e] : 1;
      probe_outcome r = probe_node(imp, nd, extents, msg, sizeof msg);
      reached |= r != PROBE_UNREACHED;
      passes |= r == PROBE_PASSES;
      changes |= r == PROBE_FAILS && strcmp(msg, msg0) != 0;
    }
    if (passes) passing |= sym_bit(i);
    if (changes) changing |= sym_bit(i);
    if (!reached) unknown |= sym_bit(i);
  }
  if (passing) {
    blamed = passing;
    goto done;
  }
  for (int e = 0; e < N_LARGE; e++) {
    for (int j = 0; j < imp->n_syms; j++) extents[j] = mask & sym_bit(j) ? large_extents[e] : 1;
    if (probe_node(imp, nd, extents, msg, sizeof msg) != PROBE_PASSES) continue;
    for (int i = 0; i < imp->n_syms; i++) {
      if (!(mask & sym_bit(i))) continue;
      extents[i] = 1;
      if (probe_node(imp, nd, extents, msg, sizeof msg) != PROBE_PASSES) blamed |= sym_bit(i);
      extents[i] = large_extents[e];
    }
    goto done;
  }
  /* a dimension no probe could try may matter too */
  if (changing) blamed = changing | unknown;
done:
  free(extents);
  return blamed;
}

void dims_note(importer *imp, uintptr_t mask, const char *msg) {
  /* Of the defaulted dimensions the node depends on, name those that make it
   * fail (probe imports with other extents tell, see blame); when none can be
   * singled out, all of them.  A node that reports several errors is probed once. */
  uintptr_t blamed = 0;
  if (imp->noted_node == imp->node && imp->noted_mask == mask) {
    blamed = imp->noted_blamed;
  } else if (imp->model && !imp->probe && imp->node) {
    blamed = blame(imp, mask, msg);
    imp->noted_node = imp->node;
    imp->noted_mask = mask;
    imp->noted_blamed = blamed;
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
