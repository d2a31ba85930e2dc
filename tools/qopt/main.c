/* qopt: reads a .qir module, runs the passes named on the command line in that
 * order, writes the result.  The input is verified after parsing and the
 * output before printing; -verify-each also verifies after every pass.
 *
 *   qopt [options] [-PASS...] [FILE|-] [-o OUT]
 */
#include "qopt.h"
#include "target.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef bool (*pass_fn)(qopt_ctx *ctx, qir_module *m);

typedef struct {
  const char *flag;
  pass_fn fn;
  const char *help;
} pass_info;

static const pass_info passes[] = {
#define QIR_PASS(flag, fn, help) {flag, fn, help},
#include "passes.def"
#undef QIR_PASS
};
enum { N_PASSES = sizeof passes / sizeof *passes };

static const qopt_option_info options[] = {
#define QIR_PASS(flag, fn, help)
#define QIR_PASS_OPTION(name, kind, dflt, help) {name, QOPT_##kind, dflt, help},
#include "passes.def"
#undef QIR_PASS
    {NULL, QOPT_FLAG, NULL, NULL} /* keeps the array non-empty */
};
enum { N_OPTIONS = sizeof options / sizeof *options - 1 };

/* ---------------------------------------------------------------- options */

static int option_index(const qopt_ctx *ctx, const char *name, size_t len) {
  for (int i = 0; i < ctx->n_options; i++)
    if (strlen(ctx->options[i].name) == len && memcmp(ctx->options[i].name, name, len) == 0) return i;
  return -1;
}

const char *qopt_option_str(const qopt_ctx *ctx, const char *name) {
  int i = option_index(ctx, name, strlen(name));
  if (i < 0) return "";
  return ctx->values[i] ? ctx->values[i] : ctx->options[i].dflt ? ctx->options[i].dflt : "";
}

bool qopt_option_given(const qopt_ctx *ctx, const char *name) {
  int i = option_index(ctx, name, strlen(name));
  return i >= 0 && ctx->values[i] != NULL;
}

int64_t qopt_option_int(const qopt_ctx *ctx, const char *name) { return strtoll(qopt_option_str(ctx, name), NULL, 0); }
double qopt_option_float(const qopt_ctx *ctx, const char *name) { return strtod(qopt_option_str(ctx, name), NULL); }

bool qopt_option_bool(const qopt_ctx *ctx, const char *name) {
  const char *v = qopt_option_str(ctx, name);
  return !(strcmp(v, "") == 0 || strcmp(v, "0") == 0 || strcmp(v, "false") == 0);
}

static bool option_value_ok(qopt_option_kind kind, const char *v) {
  char *end;
  errno = 0;
  switch (kind) {
  case QOPT_INT: strtoll(v, &end, 0); return *v && !*end && !errno;
  case QOPT_FLOAT: strtod(v, &end); return *v && !*end && !errno;
  case QOPT_FLAG: return !strcmp(v, "0") || !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "false");
  default: return true;
  }
}

static const char *kind_name(qopt_option_kind k) {
  switch (k) {
  case QOPT_INT: return "N";
  case QOPT_FLOAT: return "X";
  case QOPT_FLAG: return "";
  default: return "NAME";
  }
}

/* ---------------------------------------------------------------- help */

static void usage(FILE *out) {
  fprintf(out,
          "usage: qopt [options] [-PASS ...] [FILE|-] [-o OUT]\n"
          "Reads a .qir module (stdin when FILE is absent or '-'), runs the passes in\n"
          "command-line order and prints the result.  The input is verified after\n"
          "parsing and the result before printing; any error exits with status 1.\n\n"
          "options:\n"
          "  -o FILE          write the result to FILE (default: stdout)\n"
          "  -verify-each     run the verifier after every pass\n"
          "  -print-passes    list the passes and exit\n"
          "  -print-target    print the device model -target / -target-file give, as a target\n"
          "                   file (`key = value` lines, the start of one's own), and exit\n"
          "  --help, -h       show this help\n"
          "  --version        show the version\n");
  for (int i = 0; i < N_OPTIONS; i++) {
    char lhs[64];
    snprintf(lhs, sizeof lhs, "-%s%s%s", options[i].name, options[i].kind == QOPT_FLAG ? "" : "=",
             kind_name(options[i].kind));
    if (options[i].dflt)
      fprintf(out, "  %-16s %s (default %s)\n", lhs, options[i].help, options[i].dflt);
    else   /* no registry default: the help says where the value comes from */
      fprintf(out, "  %-16s %s\n", lhs, options[i].help);
  }
  fprintf(out, "\npasses:\n");
  for (int i = 0; i < N_PASSES; i++) fprintf(out, "  -%-15s %s\n", passes[i].flag, passes[i].help);
}

static void print_passes(void) {
  for (int i = 0; i < N_PASSES; i++) printf("-%s\t%s\n", passes[i].flag, passes[i].help);
}

/* ---------------------------------------------------------------- input */

/* Whole file (or stdin for "-") into a malloc'd, NUL-terminated buffer. */
static char *read_all(const char *path, size_t *len) {
  FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
    }
    size_t k = fread(buf + n, 1, cap - n - 1, f);
    n += k;
    if (k == 0) break;
  }
  bool err = ferror(f);
  if (f != stdin) fclose(f);
  if (!buf || err) {
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return NULL;
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, path, n);
  d[n] = 0;
  return d;
}

const qir_target *qopt_target(qopt_ctx *ctx, qir_target *from_file) {
  const char *file = qopt_option_str(ctx, "target-file");
  if (file && *file) return qir_target_parse_file(file, from_file, ctx->diag) ? from_file : NULL;
  const qir_target *t = qir_target_get(qopt_option_str(ctx, "target"));
  if (!t) qir_error(ctx->diag, (qir_loc){0}, "unknown target '%s' (qopt -help lists them)", qopt_option_str(ctx, "target"));
  return t;
}

/* Where qopt writes the weights a pass made (-autocast's converted ones):
 * -weights-out, else OUT.qw beside -o OUT.qir, else the input sidecar's name
 * with ".opt" before ".qw" (or MODULE.opt.qw) in the working directory.
 * malloc'd. */
static char *new_sidecar_path(qopt_ctx *ctx, const qir_module *m, const char *output) {
  const char *given = qopt_option_str(ctx, "weights-out");
  char *p;
  if (*given) return strdup(given);
  if (output) {
    size_t n = strlen(output);
    if (!(p = malloc(n + 4))) return NULL;
    strcpy(p, output);
    if (n > 4 && !strcmp(p + n - 4, ".qir")) p[n - 4] = 0;
    return strcat(p, ".qw");
  }
  const char *from = m->weights_path ? strrchr(m->weights_path, '/') : NULL;
  from = from ? from + 1 : m->weights_path ? m->weights_path : m->name ? m->name : "module";
  size_t n = strlen(from);
  if (!(p = malloc(n + 8))) return NULL;
  strcpy(p, from);
  if (n > 3 && !strcmp(p + n - 3, ".qw")) p[n - 3] = 0;
  return strcat(p, ".opt.qw");
}

/* Writes the new sidecar and points the module at it: by its file name when
 * it lies beside the output, else by the path as given (relative to the
 * working directory, which qir_module_rebase_weights then fixes up). */
static bool write_new_sidecar(qopt_ctx *ctx, qir_module *m, const char *output) {
  char *path = new_sidecar_path(ctx, m, output);
  if (!path) return false;
  char *out_dir = output ? dir_of(output) : NULL, *w_dir = dir_of(path);
  bool beside = out_dir && w_dir ? !strcmp(out_dir, w_dir) : !out_dir && !w_dir;
  const char *slash = strrchr(path, '/');
  int64_t written = 0;
  bool ok = qir_module_write_weights(m, path, beside && slash ? slash + 1 : path, -1, &written, ctx->diag);
  if (ok) m->base_dir = beside && out_dir ? qir_strdup(m, out_dir) : NULL;
  if (ok && qopt_option_bool(ctx, "stats"))
    fprintf(stderr, "qopt: wrote %lld bytes of weights to %s\n", (long long)written, path);
  free(out_dir);
  free(w_dir);
  free(path);
  return ok;
}

/* -print-target: the model the passes would use, in the target-file format
 * (qir/target.h), so that a calibrated file can start from it. */
static bool print_target_model(qopt_ctx *ctx) {
  qir_diag diag;
  qir_diag_init(&diag, stderr, "qopt", NULL, 0);
  ctx->diag = &diag;
  qir_target from_file;
  const qir_target *t = qopt_target(ctx, &from_file);
  if (!t) return false;
  qir_target_print(stdout, t);
  return fflush(stdout) == 0;
}

/* -stats-at=NAME=V,NAME=V/...: sizes of the symbols (those not named at
 * their bounds) into at[n..], at most max; false after an error into d. */
static bool stats_at_sizes(const char *spec, const qir_module *m, int64_t (*at)[64], int *n, int max, qir_diag *d) {
  const char *p = spec;
  while (*p && *n < max) {
    int64_t *v = at[*n];
    for (int k = 0; k < m->n_syms && k < 64; k++) v[k] = m->syms[k].hi;
    while (*p && *p != '/') {
      const char *eq = strchr(p, '='), *end = p + strcspn(p, ",/");
      if (!eq || eq > end) {
        qir_error(d, (qir_loc){0}, "-stats-at: expected NAME=VALUE at '%.*s'", (int)(end - p), p);
        return false;
      }
      char name[256];
      snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
      int k = qir_dimsym_find(m, name);
      char *stop;
      long long x = strtoll(eq + 1, &stop, 10);
      const qir_dimsym *s = k >= 0 ? &m->syms[k] : NULL;
      if (!s) {
        qir_error(d, (qir_loc){0}, "-stats-at: the module has no dimension '%.*s'", (int)(eq - p), p);
        return false;
      }
      if (stop != end || x < s->lo || x > s->hi || (x - s->lo) % s->step) {
        qir_error(d, (qir_loc){0}, "-stats-at: %s = '%.*s' is not a value of [%lld, %lld] %% %lld", s->name, (int)(end - eq - 1), eq + 1,
                  (long long)s->lo, (long long)s->hi, (long long)s->step);
        return false;
      }
      if (k < 64) v[k] = x;
      p = *end == ',' ? end + 1 : end;
    }
    (*n)++;
    if (*p == '/') p++;
  }
  return true;
}

/* -stats on a module with dimension symbols: its modelled time at a few
 * sizes (every symbol at its least value, midway, at its bound, then those
 * -stats-at names), for this build (planned at the bound; a kernel of its
 * own over symbolic rows runs the run's blocks; with -size-versions, the
 * plan the run takes) and for a static build of that size (the input
 * specialized to it, through the same passes).  false: -stats-at is wrong. */
static bool size_report(qopt_ctx *ctx, const char *text, size_t len, const char *base_dir, const int *pipeline,
                        int n_pipeline, qir_module *built) {
  qir_diag quiet0;
  qir_diag_init_quiet(&quiet0);
  qir_module *m0 = qir_parse(text, len, "<static build>", base_dir, &quiet0);
  if (!m0) return true;
  int64_t at[3 + 16][64] = {{0}};
  int n_at = 0;
  for (; n_at < 3; n_at++)
    for (int k = 0; k < m0->n_syms && k < 64; k++) {
      const qir_dimsym *s = &m0->syms[k];
      at[n_at][k] = n_at == 0 ? s->lo : n_at == 2 ? s->hi : s->lo + (s->hi - s->lo) / 2 / s->step * s->step;
    }
  bool ok_at = stats_at_sizes(qopt_option_str(ctx, "stats-at"), m0, at, &n_at, 3 + 16, ctx->diag);
  qir_module_free(m0);
  if (!ok_at) return false;
  int o = option_index(ctx, "stats", 5);
  const char *saved_stats = o >= 0 ? ctx->values[o] : NULL;
  if (o >= 0) ctx->values[o] = NULL; /* the static builds' passes report nothing */
  qir_diag *saved_diag = ctx->diag;
  for (int a = 0; a < n_at; a++) {
    qir_diag quiet;
    qir_diag_init_quiet(&quiet);
    ctx->diag = &quiet;
    qir_module *m = qir_parse(text, len, "<static build>", base_dir, &quiet);
    if (!m) break;
    int64_t values[64] = {0};
    char sizes[512] = "";
    size_t w = 0;
    for (int k = 0; k < m->n_syms && k < 64; k++) {
      values[k] = at[a][k];
      w += (size_t)snprintf(sizes + (w < sizeof sizes ? w : sizeof sizes), w < sizeof sizes ? sizeof sizes - w : 0, "%s%s=%lld",
                            k ? ", " : "", m->syms[k].name, (long long)values[k]);
    }
    qir_module_specialize(m, values);
    bool ok = qir_verify(m, &quiet) == 0;
    for (int k = 0; k < n_pipeline && ok; k++) {
      ctx->pass = passes[pipeline[k]].flag;
      ok = passes[pipeline[k]].fn(ctx, m) && quiet.n_errors == 0;
    }
    double static_us = ok ? qopt_modelled_us(ctx, m, NULL) : -1, built_us = qopt_modelled_us(ctx, built, values);
    if (static_us > 0)
      fprintf(stderr, "sizes: %s: this build %.1f us, a static build %.1f us (%.2fx)\n", sizes, built_us, static_us,
              built_us / static_us);
    else
      fprintf(stderr, "sizes: %s: this build %.1f us; a static build of this size failed\n", sizes, built_us);
    qir_module_free(m);
  }
  ctx->diag = saved_diag;
  if (o >= 0) ctx->values[o] = saved_stats;
  return true;
}

/* -size-versions' builds: the pipeline again on another module, its passes
 * reporting nothing. */
typedef struct {
  const int *pipeline;
  int n;
} pipeline_run;

static bool run_quietly(qopt_ctx *ctx, qir_module *m, void *arg) {
  const pipeline_run *pr = arg;
  static const char *const loud[] = {"stats", "rammer-stats", "welder-stats", "grinder-report"};
  const char *saved[4];
  for (int i = 0; i < 4; i++) {
    int o = option_index(ctx, loud[i], strlen(loud[i]));
    saved[i] = o >= 0 ? ctx->values[o] : NULL;
    if (o >= 0) ctx->values[o] = NULL;
  }
  bool ok = true;
  for (int k = 0; k < pr->n && ok; k++) {
    ctx->pass = passes[pr->pipeline[k]].flag;
    int before = ctx->diag->n_errors;
    ok = passes[pr->pipeline[k]].fn(ctx, m) && ctx->diag->n_errors == before;
  }
  for (int i = 0; i < 4; i++) {
    int o = option_index(ctx, loud[i], strlen(loud[i]));
    if (o >= 0) ctx->values[o] = saved[i];
  }
  return ok;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  const char *input = NULL, *output = NULL;
  bool verify_each = false, print_target = false;
  int *pipeline = calloc((size_t)argc + 1, sizeof *pipeline), n_pipeline = 0;
  const char *values[N_OPTIONS + 1] = {NULL};
  qopt_ctx ctx = {NULL, NULL, N_OPTIONS, options, values};
  int status = 1;
  if (!pipeline) return 1;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "-help")) {
      usage(stdout);
      free(pipeline);
      return 0;
    }
    if (!strcmp(a, "--version") || !strcmp(a, "-version")) {
      printf("qopt (qir) %s\n", QIR_VERSION);
      free(pipeline);
      return 0;
    }
    if (!strcmp(a, "-print-passes") || !strcmp(a, "--print-passes")) {
      print_passes();
      free(pipeline);
      return 0;
    }
    if (!strcmp(a, "-print-target") || !strcmp(a, "--print-target")) {
      print_target = true;
      continue;
    }
    if (!strcmp(a, "-o")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "qopt: error: -o needs a file name\n");
        goto done;
      }
      output = argv[++i];
      continue;
    }
    if (!strcmp(a, "-verify-each") || !strcmp(a, "--verify-each")) {
      verify_each = true;
      continue;
    }
    if (a[0] == '-' && a[1]) {
      const char *name = a + 1 + (a[1] == '-'); /* -x and --x alike */
      const char *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      int p = -1;
      for (int k = 0; k < N_PASSES; k++)
        if (strlen(passes[k].flag) == len && !memcmp(passes[k].flag, name, len)) p = k;
      int o = option_index(&ctx, name, len);
      /* -PASS runs a pass; -PASS=VALUE also sets the option of the same name
       * (-autocast=bf16) */
      if (p >= 0 && (!eq || o >= 0)) pipeline[n_pipeline++] = p;
      if (p >= 0 && !eq) continue;
      if (o < 0) {
        fprintf(stderr, "qopt: error: unknown option or pass '%s' (see qopt --help)\n", a);
        goto done;
      }
      const char *v = eq ? eq + 1 : NULL;
      if (!v && options[o].kind == QOPT_FLAG) v = "1";
      if (!v) {
        if (i + 1 >= argc) {
          fprintf(stderr, "qopt: error: option '-%s' needs a value\n", options[o].name);
          goto done;
        }
        v = argv[++i];
      }
      if (!option_value_ok(options[o].kind, v)) {
        fprintf(stderr, "qopt: error: bad value '%s' for option '-%s' (expects %s)\n", v, options[o].name,
                options[o].kind == QOPT_INT ? "an integer" : options[o].kind == QOPT_FLOAT ? "a number" : "0 or 1");
        goto done;
      }
      if (values[o] && strcmp(values[o], v) != 0) {
        fprintf(stderr, "qopt: error: conflicting values for '-%s': '%s' and '%s'\n", options[o].name, values[o], v);
        goto done;
      }
      values[o] = v;
      continue;
    }
    if (input) {
      fprintf(stderr, "qopt: error: more than one input file ('%s' and '%s')\n", input, a);
      goto done;
    }
    input = a;
  }
  if (print_target) {
    status = print_target_model(&ctx) ? 0 : 1;
    goto done;
  }
  if (!input) input = "-";

  size_t len = 0;
  char *text = read_all(input, &len);
  if (!text) {
    fprintf(stderr, "qopt: error: cannot read '%s': %s\n", input, strerror(errno ? errno : EIO));
    goto done;
  }
  const char *file = strcmp(input, "-") ? input : "<stdin>";
  char *base_dir = strcmp(input, "-") ? dir_of(input) : NULL;
  qir_diag diag;
  qir_diag_init(&diag, stderr, file, text, len);
  ctx.diag = &diag;
  qir_module *m = qir_parse(text, len, file, base_dir, &diag);
  if (m && diag.n_errors == 0 && qir_verify(m, &diag) == 0) {
    bool ok = true;
    for (int k = 0; k < n_pipeline && ok; k++) {
      const pass_info *p = &passes[pipeline[k]];
      ctx.pass = p->flag;
      int before = diag.n_errors;
      ok = p->fn(&ctx, m) && diag.n_errors == before;
      if (!ok) fprintf(stderr, "qopt: error: pass '-%s' failed\n", p->flag);
      else if (verify_each && qir_verify(m, &diag)) {
        fprintf(stderr, "qopt: error: the module is invalid after pass '-%s'\n", p->flag);
        ok = false;
      }
    }
    if (ok && !verify_each && n_pipeline && qir_verify(m, &diag)) {
      fprintf(stderr, "qopt: error: the module is invalid after the passes\n");
      ok = false;
    }
    if (ok && m->n_syms && qopt_option_bool(&ctx, "size-versions")) {
      pipeline_run pr = {pipeline, n_pipeline};
      m = qopt_size_versions(&ctx, m, text, len, base_dir, run_quietly, &pr);
      ok = m != NULL;
    }
    if (ok && m->n_syms && qopt_option_bool(&ctx, "stats")) ok = size_report(&ctx, text, len, base_dir, pipeline, n_pipeline, m);
    /* an output that is no regular file (-o /dev/null, a pipe) gets no
     * sidecar beside it: the weights stay in the text */
    struct stat st;
    bool special = output && stat(output, &st) == 0 && !S_ISREG(st.st_mode);
    if (ok && !special && qir_module_has_spilled_consts(m)) ok = write_new_sidecar(&ctx, m, output);
    if (ok) {
      char *out_dir = output ? dir_of(output) : NULL;
      qir_module_rebase_weights(m, out_dir);
      free(out_dir);
      FILE *out = output ? fopen(output, "w") : stdout;
      if (!out) {
        fprintf(stderr, "qopt: error: cannot write '%s': %s\n", output, strerror(errno));
      } else {
        qir_print(out, m);
        bool werr = ferror(out) != 0;
        if (out != stdout) werr = fclose(out) != 0 || werr;
        else werr = fflush(out) != 0 || werr;
        if (werr) fprintf(stderr, "qopt: error: write error on '%s'\n", output ? output : "<stdout>");
        else status = 0;
      }
    }
  }
  qir_module_free(m);
  free(base_dir);
  free(text);
done:
  free(pipeline);
  return status;
}
