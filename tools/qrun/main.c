/* qrun: the reference interpreter.  Runs a .qir module on the CPU with
 * qir_eval_module (qir/eval.c) and prints, writes or checks its outputs.
 *
 *   qrun [options] M.qir [INPUT_FILE...]
 *
 * Inputs come from positional files (in `input` order), from --in NAME=FILE,
 * or, when not given, from a seeded deterministic generator.  NAME is the
 * model's own name (the `name` attribute of `input` / `output`) or the SSA
 * name without '%'. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "qir.h"
#include "tensorio.h"

static void usage(FILE *f) {
  fputs("usage: qrun [options] M.qir [INPUT_FILE...]\n"
        "Runs a qir module with the reference interpreter.\n"
        "  INPUT_FILE...        .npy or .pb tensors for the inputs, in `input` order\n"
        "  --in NAME=FILE       bind one input by name (the `name` attribute or SSA name)\n"
        "  --out NAME=FILE      write an output (.npy or .pb by extension)\n"
        "  --out FILE           write the next output (in `output` order)\n"
        "  --expect NAME=FILE   compare an output with a reference tensor\n"
        "  --expect FILE        compare the next output (in `output` order)\n"
        "  --atol A             absolute tolerance (default 1e-7)\n"
        "  --rtol R             relative tolerance (default 1e-3); |got-want| <= A + R*|want|\n"
        "                       integers and bools compare exactly; NaN matches NaN\n"
        "  --seed S             seed for generated inputs (default 0): floats uniform in\n"
        "                       [-1,1], integers in [0,8), bools 0/1\n"
        "  --save-inputs DIR    write every input used to DIR/<name>.npy\n"
        "  --inputs-only        with --save-inputs: write them and stop (no run)\n"
        "  --print-limit N      values printed per output (default 16; 0 = all)\n"
        "  --print-stats        time spent, on stderr\n"
        "  --no-verify          skip the verifier before running\n"
        "Without --out or --expect every output is printed as NAME: TYPE = [values].\n"
        "Exit status 1 on any error or mismatch.\n",
        f);
}

typedef struct {
  qir_op *op;
  const char *attr_name;        /* `name` attribute, or NULL */
  const char *ssa_name;         /* SSA name of the value, or NULL */
} port;

static const char *port_name(const port *p) { return p->attr_name ? p->attr_name : p->ssa_name ? p->ssa_name : "?"; }

/* Index of the port called name[0..len), by `name` attribute first, then SSA name. */
static int find_port_n(const port *ports, int n, const char *name, size_t len) {
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++) {
      const char *p = pass ? ports[i].ssa_name : ports[i].attr_name;
      if (p && strlen(p) == len && memcmp(p, name, len) == 0) return i;
    }
  return -1;
}

/* splitmix64: a small deterministic generator with its state in the caller. */
static uint64_t next_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Whether a tensor of type t fits in this machine's memory (asking malloc for
 * more aborts an ASan build and gets a release build OOM-killed). */
static bool fits_in_memory(const qir_type *t) {
  int64_t n = qir_type_numel(t);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (n < 0) return false;
  double bytes = (double)n * qir_dtype_size(t->dtype);
  return pages <= 0 || page <= 0 || bytes <= (double)pages * (double)page;
}

static bool random_tensor(const qir_type *t, uint64_t seed, int index, qir_tensor *out) {
  int64_t n = qir_type_numel(t);
  size_t bytes = (size_t)n * (size_t)qir_dtype_size(t->dtype);
  out->type = *t;
  out->data = malloc(bytes ? bytes : 1);
  if (!out->data) return false;
  uint64_t s = seed * 0x100000001b3ull + (uint64_t)index * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next_rand(&s);
    double v;
    if (qir_dtype_is_float(t->dtype)) v = (double)(r >> 11) / 9007199254740992.0 * 2 - 1;
    else if (t->dtype == QIR_BOOL) v = (double)(r & 1);
    else v = (double)(r % 8);
    qir_store_elem(t->dtype, out->data, i, v);
  }
  return true;
}

static void print_value(FILE *f, qir_dtype dt, const void *data, int64_t i) {
  if (dt == QIR_BOOL) {
    fputs(((const unsigned char *)data)[i] ? "true" : "false", f);
  } else if (dt == QIR_I64) {
    int64_t v;
    memcpy(&v, (const char *)data + i * 8, 8);
    fprintf(f, "%lld", (long long)v);
  } else if (dt == QIR_U64) {
    uint64_t v;
    memcpy(&v, (const char *)data + i * 8, 8);
    fprintf(f, "%llu", (unsigned long long)v);
  } else if (!qir_dtype_is_float(dt)) {
    fprintf(f, "%.0f", qir_load_elem(dt, data, i));
  } else {
    int prec = dt == QIR_F64 ? 17 : dt == QIR_F32 ? 9 : 5;
    double v = qir_load_elem(dt, data, i);
    if (isnan(v)) fputs("nan", f);
    else if (isinf(v)) fputs(v < 0 ? "-inf" : "inf", f);
    else fprintf(f, "%.*g", prec, v);
  }
}

static void print_tensor(FILE *f, const char *name, const qir_tensor *t, int64_t limit) {
  char ty[160];
  qir_type_format(&t->type, ty, sizeof ty);
  fprintf(f, "%s: %s = [", name, ty);
  int64_t n = qir_type_numel(&t->type);
  int64_t shown = limit > 0 && limit < n ? limit : n;
  for (int64_t i = 0; i < shown; i++) {
    if (i) fputs(", ", f);
    print_value(f, t->type.dtype, t->data, i);
  }
  if (shown < n) fprintf(f, ", ... (%lld more)", (long long)(n - shown));
  fputs("]\n", f);
}

/* Exact 64-bit read of an integer element (load_elem goes through double). */
static bool int_elem(qir_dtype dt, const void *data, int64_t i, int64_t *v) {
  const char *p = (const char *)data + i * qir_dtype_size(dt);
  if (dt == QIR_I64 || dt == QIR_U64) {
    memcpy(v, p, 8);
    return true;
  }
  if (qir_dtype_is_float(dt)) return false;
  *v = (int64_t)qir_load_elem(dt, data, i);
  return true;
}

static void format_index(char *buf, size_t n, const qir_type *t, int64_t flat) {
  int64_t idx[QIR_MAX_RANK];
  for (int a = t->rank - 1; a >= 0; a--) {
    idx[a] = t->dims[a] ? flat % t->dims[a] : 0;
    flat = t->dims[a] ? flat / t->dims[a] : 0;
  }
  size_t w = (size_t)snprintf(buf, n, "[");
  for (int a = 0; a < t->rank && w < n; a++) w += (size_t)snprintf(buf + w, n - w, a ? ",%lld" : "%lld", (long long)idx[a]);
  if (w < n) snprintf(buf + w, n - w, "]");
}

/* Prints NAME: max_abs_err=... max_rel_err=... OK|MISMATCH; true if OK. */
static bool compare(const char *name, const qir_tensor *got, const qir_tensor *want, double atol, double rtol) {
  char a[160], b[160];
  if (!qir_type_equal(&got->type, &want->type)) {
    qir_type_format(&got->type, a, sizeof a);
    qir_type_format(&want->type, b, sizeof b);
    printf("%s: type %s but expected %s MISMATCH\n", name, a, b);
    return false;
  }
  qir_dtype dt = got->type.dtype;
  bool exact = !qir_dtype_is_float(dt);
  int64_t n = qir_type_numel(&got->type), bad = 0, first = -1;
  double max_abs = 0, max_rel = 0;
  for (int64_t i = 0; i < n; i++) {
    bool ok;
    double diff;
    if (exact) {
      int64_t g = 0, w = 0;
      int_elem(dt, got->data, i, &g);
      int_elem(dt, want->data, i, &w);
      ok = g == w;
      diff = ok ? 0 : fabs((double)g - (double)w);
      if (!ok && diff == 0) diff = 1; /* differ beyond double's precision */
      double aw = fabs((double)w);
      if (!ok && aw > 0 && diff / aw > max_rel) max_rel = diff / aw;
    } else {
      double g = qir_load_elem(dt, got->data, i), w = qir_load_elem(dt, want->data, i);
      if (isnan(g) || isnan(w)) {
        ok = isnan(g) && isnan(w);
        diff = ok ? 0 : INFINITY;
      } else if (isinf(g) || isinf(w)) {
        ok = g == w;
        diff = ok ? 0 : INFINITY;
      } else {
        diff = fabs(g - w);
        ok = diff <= atol + rtol * fabs(w);
        if (w != 0 && diff / fabs(w) > max_rel) max_rel = diff / fabs(w);
      }
    }
    if (diff > max_abs) max_abs = diff;
    if (!ok) {
      if (first < 0) first = i;
      bad++;
    }
  }
  printf("%s: max_abs_err=%.3g max_rel_err=%.3g %s\n", name, max_abs, max_rel, bad ? "MISMATCH" : "OK");
  if (bad) {
    format_index(a, sizeof a, &got->type, first);
    printf("  %lld of %lld elements differ; first at %s: got ", (long long)bad, (long long)n, a);
    print_value(stdout, dt, got->data, first);
    printf(" expected ");
    print_value(stdout, dt, want->data, first);
    printf("\n");
  }
  return bad == 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Splits NAME=FILE when NAME names a port: returns the port and sets *file;
 * -1 when the text has no '=' or names no port (*named says which). */
static int parse_binding(const char *arg, const port *ports, int n, const char **file, bool *named) {
  const char *eq = strchr(arg, '=');
  *file = arg;
  *named = eq != NULL;
  if (!eq) return -1;
  int idx = find_port_n(ports, n, arg, (size_t)(eq - arg));
  if (idx >= 0) *file = eq + 1;
  return idx;
}

static bool parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  return s[0] && !*end && errno == 0;
}

int main(int argc, char **argv) {
  const char **raw_in = calloc((size_t)argc, sizeof *raw_in), **raw_out = calloc((size_t)argc, sizeof *raw_out),
             **raw_exp = calloc((size_t)argc, sizeof *raw_exp), **positional = calloc((size_t)argc, sizeof *positional);
  int n_raw_in = 0, n_raw_out = 0, n_raw_exp = 0, n_pos = 0;
  double atol = 1e-7, rtol = 1e-3;
  uint64_t seed = 0;
  int64_t limit = 16;
  bool stats = false, verify = true, inputs_only = false;
  const char *save_dir = NULL;
  /* Everything below is released at `done`, whatever path leads there. */
  qir_module *m = NULL;
  port *ins = NULL, *outs = NULL;
  qir_tensor *in_t = NULL, *out_t = NULL;
  const char **out_file = NULL, **exp_file = NULL, **in_file = NULL;
  int n_in = 0, n_out = 0, status = 1;
  if (!raw_in || !raw_out || !raw_exp || !positional) goto done;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes = true;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); status = 0; goto done; }
    else if (!strcmp(a, "--version")) { printf("qrun %s\n", QIR_VERSION); status = 0; goto done; }
    else if (!strcmp(a, "--print-stats")) { stats = true; takes = false; }
    else if (!strcmp(a, "--no-verify")) { verify = false; takes = false; }
    else if (!strcmp(a, "--inputs-only")) { inputs_only = true; takes = false; }
    else if (!strcmp(a, "--in") || !strcmp(a, "--out") || !strcmp(a, "--expect") || !strcmp(a, "--atol") ||
             !strcmp(a, "--rtol") || !strcmp(a, "--seed") || !strcmp(a, "--print-limit") || !strcmp(a, "--save-inputs")) {
      if (!val) { fprintf(stderr, "qrun: error: %s needs a value\n", a); goto done; }
      if (!strcmp(a, "--in")) raw_in[n_raw_in++] = val;
      else if (!strcmp(a, "--out")) raw_out[n_raw_out++] = val;
      else if (!strcmp(a, "--expect")) raw_exp[n_raw_exp++] = val;
      else if (!strcmp(a, "--save-inputs")) save_dir = val;
      else {
        double v;
        if (!parse_double(val, &v) || v < 0) { fprintf(stderr, "qrun: error: bad value '%s' for %s\n", val, a); goto done; }
        if (!strcmp(a, "--atol")) atol = v;
        else if (!strcmp(a, "--rtol")) rtol = v;
        else if (!strcmp(a, "--seed")) seed = (uint64_t)v;
        else limit = (int64_t)v;
      }
      i++;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "qrun: error: unknown option '%s' (see qrun --help)\n", a);
      goto done;
    } else {
      positional[n_pos++] = a;
      takes = false;
    }
    (void)takes;
  }
  if (n_pos == 0) {
    usage(stderr);
    goto done;
  }
  double t0 = now_s();
  qir_diag d;
  qir_diag_init(&d, stderr, positional[0], NULL, 0);
  m = qir_parse_file(positional[0], &d);
  if (!m) goto done;
  if (verify && qir_verify(m, &d) > 0) goto done;
  double t_parse = now_s();

  /* ports */
  for (qir_op *op = m->body->first; op; op = op->next) {
    if (op->code == QIR_OP_INPUT) n_in++;
    if (op->code == QIR_OP_OUTPUT) n_out++;
  }
  ins = calloc((size_t)n_in + 1, sizeof *ins), outs = calloc((size_t)n_out + 1, sizeof *outs);
  in_t = calloc((size_t)n_in + 1, sizeof *in_t), out_t = calloc((size_t)n_out + 1, sizeof *out_t);
  out_file = calloc((size_t)n_out + 1, sizeof *out_file), exp_file = calloc((size_t)n_out + 1, sizeof *exp_file);
  if (!ins || !outs || !in_t || !out_t || !out_file || !exp_file) goto done;
  {
    int i = 0, o = 0;
    for (qir_op *op = m->body->first; op; op = op->next) {
      if (op->code == QIR_OP_INPUT) {
        ins[i].op = op;
        ins[i].attr_name = qir_op_attr_str(op, "name", NULL);
        ins[i++].ssa_name = op->results[0]->name;
      }
      if (op->code == QIR_OP_OUTPUT) {
        outs[o].op = op;
        outs[o].attr_name = qir_op_attr_str(op, "name", NULL);
        outs[o++].ssa_name = op->n_operands ? op->operands[0]->name : NULL;
      }
    }
  }
  /* inputs: positional files first, then --in by name, then generated */
  if (n_pos - 1 > n_in) {
    fprintf(stderr, "qrun: error: %d input files given but the module has %d inputs\n", n_pos - 1, n_in);
    goto done;
  }
  in_file = calloc((size_t)n_in + 1, sizeof *in_file);
  if (!in_file) goto done;
  for (int k = 1; k < n_pos; k++) in_file[k - 1] = positional[k];
  for (int k = 0; k < n_raw_in; k++) {
    bool named;
    const char *file;
    int idx = parse_binding(raw_in[k], ins, n_in, &file, &named);
    if (idx < 0) {
      const char *eq = strchr(raw_in[k], '=');
      fprintf(stderr, "qrun: error: --in %s: no input named '%.*s'", raw_in[k], (int)(eq ? eq - raw_in[k] : (long)strlen(raw_in[k])), raw_in[k]);
      for (int i = 0; i < n_in; i++) fprintf(stderr, "%s%s", i ? ", " : " (inputs: ", port_name(&ins[i]));
      fprintf(stderr, "%s\n", n_in ? ")" : "");
      goto done;
    }
    in_file[idx] = file;
  }
  if (m->n_syms) {
    /* symbolic extents: the input files give the symbols' values (the
     * others take their bounds), then the module runs at those sizes */
    int64_t *values = calloc((size_t)m->n_syms, sizeof *values);
    bool *bound = calloc((size_t)m->n_syms, sizeof *bound);
    bool ok = values && bound;
    for (int pass = 0; ok && pass < 2; pass++)
      for (int i = 0; ok && i < n_in; i++) {
        if (!in_file[i]) continue;
        if (pass == 0 && !qir_tensor_read(in_file[i], &in_t[i], NULL, &d)) ok = false;
        char why[512];
        if (ok && !qir_dims_bind(m, &ins[i].op->results[0]->type, &in_t[i].type, values, bound, why, sizeof why)) {
          char a[512], b[512];
          qir_type_format(&in_t[i].type, a, sizeof a);
          qir_type_format(&ins[i].op->results[0]->type, b, sizeof b);
          fprintf(stderr, "%s: error: tensor is %s but input '%s' is %s: %s\n", in_file[i], a, port_name(&ins[i]), b, why);
          ok = false;
        }
      }
    for (int k = 0; ok && k < m->n_syms; k++)
      if (!bound[k]) values[k] = m->syms[k].hi;
    if (ok) qir_module_specialize(m, values);
    free(values);
    free(bound);
    if (!ok) goto done;
  }
  for (int i = 0; i < n_in; i++) {
    const qir_type *want = &ins[i].op->results[0]->type;
    if (in_file[i]) {
      if (!in_t[i].data && !qir_tensor_read(in_file[i], &in_t[i], NULL, &d)) goto done;
      if (!qir_type_equal(&in_t[i].type, want)) {
        char a[160], b[160];
        qir_type_format(&in_t[i].type, a, sizeof a);
        qir_type_format(want, b, sizeof b);
        fprintf(stderr, "%s: error: tensor is %s but input '%s' is %s\n", in_file[i], a, port_name(&ins[i]), b);
        char note[1024];
        if (qir_input_dims_note(ins[i].op, note, sizeof note))
          fprintf(stderr, "%s: note: %s\n", positional[0], note);
        goto done;
      }
    } else if (!fits_in_memory(want) || !random_tensor(want, seed, i, &in_t[i])) {
      char tb[160];
      qir_type_format(want, tb, sizeof tb);
      qir_error(&d, ins[i].op->loc, "input '%s' is %s: too large to generate in memory", port_name(&ins[i]), tb);
      goto done;
    }
    if (save_dir) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s.npy", save_dir, port_name(&ins[i]));
      for (char *p = path + strlen(save_dir) + 1; *p; p++)
        if (*p == '/') *p = '_';
      if (!qir_tensor_write(path, &in_t[i], port_name(&ins[i]), &d)) goto done;
    }
  }
  if (inputs_only) { /* the inputs a test hands a compiled program: no interpretation */
    status = save_dir ? 0 : 1;
    if (!save_dir) fprintf(stderr, "qrun: error: --inputs-only needs --save-inputs DIR\n");
    goto done;
  }
  /* outputs to write and to check */
  for (int pass = 0; pass < 2; pass++) {
    const char **raw = pass ? raw_exp : raw_out, **dst = pass ? exp_file : out_file;
    int n_raw = pass ? n_raw_exp : n_raw_out, next = 0;
    /* named bindings first, so positional ones fill the outputs left over */
    for (int k = 0; k < n_raw; k++) {
      bool named;
      const char *file;
      int idx = parse_binding(raw[k], outs, n_out, &file, &named);
      if (idx >= 0) dst[idx] = file;
    }
    for (int k = 0; k < n_raw; k++) {
      bool named;
      const char *file;
      if (parse_binding(raw[k], outs, n_out, &file, &named) >= 0) continue;
      while (next < n_out && dst[next]) next++;
      if (next >= n_out) {
        fprintf(stderr, "qrun: error: %s %s: no output left to bind (the module has %d", pass ? "--expect" : "--out", raw[k], n_out);
        for (int i = 0; i < n_out; i++) fprintf(stderr, "%s%s", i ? ", " : ": ", port_name(&outs[i]));
        fprintf(stderr, ")\n");
        goto done;
      }
      dst[next++] = file;
    }
  }
  status = 0;
  double t_in = now_s();
  if (!qir_eval_module(m, in_t, n_in, out_t, n_out, &d)) {
    status = 1;
    goto done;
  }
  double t_eval = now_s();
  bool any_io = n_raw_out || n_raw_exp;
  for (int o = 0; o < n_out; o++) {
    const char *name = port_name(&outs[o]);
    if (out_file[o] && !qir_tensor_write(out_file[o], &out_t[o], name, &d)) status = 1;
    if (exp_file[o]) {
      qir_tensor want;
      if (!qir_tensor_read(exp_file[o], &want, NULL, &d)) status = 1;
      else {
        if (!compare(name, &out_t[o], &want, atol, rtol)) status = 1;
        qir_tensor_free(&want);
      }
    }
    if (!any_io) print_tensor(stdout, name, &out_t[o], limit);
  }
  if (stats)
    fprintf(stderr, "qrun: parse+verify %.3f s, inputs %.3f s, eval %.3f s\n", t_parse - t0, t_in - t_parse, t_eval - t_in);
done:
  for (int i = 0; in_t && i < n_in; i++) qir_tensor_free(&in_t[i]);
  for (int o = 0; out_t && o < n_out; o++) qir_tensor_free(&out_t[o]);
  free(in_t); free(out_t); free(ins); free(outs); free(in_file); free(out_file); free(exp_file);
  free(raw_in); free(raw_out); free(raw_exp); free(positional);
  qir_module_free(m);
  return status;
}
