/* onnx2qir: ONNX model -> qir text (+ weights sidecar).
 *
 *   onnx2qir [-o OUT.qir] [-w OUT.qw] [--shape NAME=D0,D1,...]... [--dim NAME=N|MIN..MAX]...
 *            [--strict-shapes] [--bind NAME=FILE.pb]... [--inline-weights] MODEL.onnx
 *
 * The IR goes to stdout unless -o is given.  Constants of more than 64
 * elements go to the weights sidecar (raw little-endian bytes at 64-byte
 * aligned offsets), named in the module by `weights "..."`: by default OUT.qw
 * next to OUT.qir, or <model>.qw in the working directory when writing to
 * stdout.  Symbolic input dimensions: see dims.c.  Splat constants stay splats.  Errors name the model, the node, its
 * op type and the opset, one line each, and exit 1.
 *
 * ONNX2QIR_TRACE=1 in the environment prints every node's result types (and
 * small constant values) on stderr: a debugging aid for shape problems. */
#include "onnx2qir.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INLINE_MAX_ELEMS 64

static void usage(FILE *f) {
  fputs("usage: onnx2qir [-o OUT.qir] [-w OUT.qw] [--shape NAME=D0,D1,...]... [--dim NAME=N|MIN..MAX]...\n"
        "                [--strict-shapes] [--bind NAME=FILE.pb]... [--inline-weights] MODEL.onnx\n"
        "  -o FILE            write the IR to FILE (default: stdout)\n"
        "  -w FILE            weights sidecar (default: OUT.qw, or <model>.qw in the cwd)\n"
        "  --shape NAME=DIMS  fix the shape of graph input NAME (comma-separated; empty = scalar;\n"
        "                     an entry MIN..MAX leaves that axis symbolic within the range)\n"
        "  --dim NAME=N       fix every symbolic dimension called NAME (e.g. --dim batch=8)\n"
        "  --dim NAME=MIN..MAX  keep it symbolic, any size in the range at run time (e.g. --dim batch=1..16;\n"
        "                     MIN..MAX%STEP: MIN plus multiples of STEP, e.g. --dim height=32..640%32)\n"
        "  --strict-shapes    a symbolic dimension nothing fixes is an error (default: 1, with a warning)\n"
        "  --bind NAME=FILE   make graph input NAME a constant read from a TensorProto file\n"
        "  --inline-weights   keep every constant in the IR text (no sidecar)\n",
        f);
}

/* "N", "MIN..MAX" or "MIN..MAX%STEP" at *p; advances *p past it. */
static bool parse_extent(const char **p, int64_t *lo, int64_t *hi, int64_t *step) {
  char *end;
  errno = 0;
  long long a = strtoll(*p, &end, 10), b = a, st = 1;
  if (end == *p || errno || a < 0 || a > MAX_NUMEL) return false;
  if (end[0] == '.' && end[1] == '.') {
    const char *q = end + 2;
    errno = 0;
    b = strtoll(q, &end, 10);
    if (end == q || errno || b < a || b > MAX_NUMEL) return false;
    if (*end == '%') {
      q = end + 1;
      st = strtoll(q, &end, 10);
      if (end == q || errno || st < 1 || (b - a) % st) return false;
    }
  }
  *lo = a, *hi = b, *step = st, *p = end;
  return true;
}

static bool parse_dim(const char *arg, named_dim *d) {
  const char *eq = strrchr(arg, '=');
  if (!eq || eq == arg || !eq[1]) return false;
  const char *p = eq + 1;
  int64_t lo, v;
  int64_t step;
  if (!parse_extent(&p, &lo, &v, &step) || *p) return false;
  d->lo = lo;
  d->step = step;
  d->name = strndup(arg, (size_t)(eq - arg));
  char *from = malloc(strlen(arg) + 8);
  if (!d->name || !from) abort();
  sprintf(from, "--dim %s", arg);
  d->from = from;
  d->value = v;
  d->source = "dim";
  d->used = false;
  return true;
}

static bool parse_shape(const char *arg, shape_opt *s) {
  const char *eq = strrchr(arg, '=');
  if (!eq || eq == arg) return false;
  s->name = strndup(arg, (size_t)(eq - arg));
  s->rank = 0;
  const char *p = eq + 1;
  while (*p) {
    if (s->rank >= QIR_MAX_RANK) return false;
    if (!parse_extent(&p, &s->lo[s->rank], &s->dims[s->rank], &s->step[s->rank])) return false;
    s->rank++;
    if (*p == ',') p++;
    else if (*p) return false;
  }
  return true;
}

static char *model_stem(const char *path) {
  char *copy = strdup(path);
  char *b = basename(copy);
  char *stem = strdup(b);
  free(copy);
  char *dot = strrchr(stem, '.');
  if (dot && dot != stem) *dot = 0;
  return stem;
}

int main(int argc, char **argv) {
  int status = 1;
  const char *out_path = NULL, *w_path = NULL, *model_path = NULL;
  bool inline_weights = false;
  importer imp;
  memset(&imp, 0, sizeof imp);
  imp.shapes = calloc((size_t)argc + 1, sizeof *imp.shapes);
  imp.binds = calloc((size_t)argc + 1, sizeof *imp.binds);
  imp.named = calloc((size_t)argc + 1, sizeof *imp.named);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((strcmp(a, "-o") == 0 || strcmp(a, "-w") == 0 || strcmp(a, "--shape") == 0 || strcmp(a, "--bind") == 0 ||
         strcmp(a, "--dim") == 0) &&
        i + 1 >= argc) {
      fprintf(stderr, "onnx2qir: error: %s needs an argument\n", a);
      goto free_args;
    }
    if (strcmp(a, "-o") == 0) out_path = argv[++i];
    else if (strcmp(a, "-w") == 0) w_path = argv[++i];
    else if (strcmp(a, "--inline-weights") == 0) inline_weights = true;
    else if (strcmp(a, "--shape") == 0 || strncmp(a, "--shape=", 8) == 0) {
      const char *v = a[7] == '=' ? a + 8 : argv[++i];
      if (!parse_shape(v, &imp.shapes[imp.n_shapes++])) {
        fprintf(stderr, "onnx2qir: error: bad --shape '%s' (want NAME=D0,D1,..., each D a size N or a range MIN..MAX)\n", v);
        goto free_args;
      }
    } else if (strcmp(a, "--dim") == 0 || strncmp(a, "--dim=", 6) == 0) {
      const char *v = a[5] == '=' ? a + 6 : argv[++i];
      named_dim d;
      if (!parse_dim(v, &d)) {
        fprintf(stderr, "onnx2qir: error: bad --dim '%s' (want NAME=N, NAME=MIN..MAX or NAME=MIN..MAX%%STEP)\n", v);
        goto free_args;
      }
      for (int k = 0; k < imp.n_named; k++)
        if (strcmp(imp.named[k].name, d.name) == 0) {
          fprintf(stderr, "onnx2qir: error: --dim %s is given twice\n", d.name);
          free((void *)d.name);
          free((void *)d.from);
          goto free_args;
        }
      imp.named[imp.n_named++] = d;
    } else if (strcmp(a, "--strict-shapes") == 0) {
      imp.strict_shapes = true;
    } else if (strcmp(a, "--bind") == 0 || strncmp(a, "--bind=", 7) == 0) {
      const char *v = a[6] == '=' ? a + 7 : argv[++i];
      const char *eq = strrchr(v, '=');
      if (!eq || eq == v || !eq[1]) {
        fprintf(stderr, "onnx2qir: error: bad --bind '%s' (want NAME=FILE.pb)\n", v);
        goto free_args;
      }
      imp.binds[imp.n_binds].name = strndup(v, (size_t)(eq - v));
      imp.binds[imp.n_binds++].path = eq + 1;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      status = 0;
      goto free_args;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "onnx2qir: error: unknown option '%s'\n", a);
      usage(stderr);
      goto free_args;
    } else if (model_path) {
      fprintf(stderr, "onnx2qir: error: more than one model given\n");
      goto free_args;
    } else {
      model_path = a;
    }
  }
  if (!model_path) {
    usage(stderr);
    goto free_args;
  }
  imp.model_path = model_path;
  imp.n_dim_opts = imp.n_named;

  /* read and decode */
  FILE *f = fopen(model_path, "rb");
  if (!f) {
    fprintf(stderr, "%s: error: cannot open: %s\n", model_path, strerror(errno));
    goto free_args;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > ((off_t)1 << 31)) {
    fprintf(stderr, "%s: error: not a regular file of at most 2 GiB\n", model_path);
    fclose(f);
    goto free_args;
  }
  size_t len = (size_t)st.st_size;
  uint8_t *buf = malloc(len + 1);
  if (!buf || fread(buf, 1, len, f) != len) {
    fprintf(stderr, "%s: error: cannot read: %s\n", model_path, strerror(errno));
    fclose(f);
    free(buf);
    goto free_args;
  }
  fclose(f);
  Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, len, buf);
  free(buf);
  if (!model) {
    fprintf(stderr, "%s: error: not a valid ONNX model (truncated or corrupt protobuf)\n", model_path);
    goto free_args;
  }

  char *stem = model_stem(model_path);
  imp.m = qir_module_new(stem);
  imp.used_names = strmap_new();
  imp.unsupported = strmap_new();
  imp.taint = strmap_new();
  bool ok = import_model(&imp, model);
  onnx__model_proto__free_unpacked(model, NULL);
  status = 0;
  if (!ok || imp.n_errors) {
    if (imp.n_printed > 1) fprintf(stderr, "%s: %d errors\n", model_path, imp.n_printed);
    status = 1;
    goto done;
  }

  /* The importer's output must pass the verifier; a failure is our bug, but
   * it is reported rather than printed as a broken module. */
  {
    qir_diag vd;
    qir_diag_init(&vd, stderr, model_path, NULL, 0);
    if (qir_verify(imp.m, &vd) > 0) {
      fprintf(stderr, "%s: error: the imported module does not verify (an importer bug)\n", model_path);
      status = 1;
      goto done;
    }
  }

  /* weights sidecar; an output that is no regular file (-o /dev/null, a pipe) gets none beside
   * it (as qopt): the weights stay in the text */
  struct stat out_st;
  if (!w_path && out_path && stat(out_path, &out_st) == 0 && !S_ISREG(out_st.st_mode)) inline_weights = true;
  {
    char *wp;
    if (w_path) wp = strdup(w_path);
    else if (out_path) {
      size_t n = strlen(out_path);
      wp = malloc(n + 4);
      strcpy(wp, out_path);
      if (n > 4 && strcmp(wp + n - 4, ".qir") == 0) wp[n - 4] = 0;
      strcat(wp, ".qw");
    } else {
      wp = malloc(strlen(stem) + 4);
      sprintf(wp, "%s.qw", stem);
    }
    /* the module names the sidecar relative to the .qir (or the cwd) */
    const char *ref = wp;
    char *wcopy = strdup(wp), *ocopy = out_path ? strdup(out_path) : NULL;
    char *absbuf = NULL;
    if (out_path) {
      if (strcmp(dirname(wcopy), dirname(ocopy)) == 0) {
        free(wcopy);
        wcopy = strdup(wp);
        ref = basename(wcopy);
      } else if (wp[0] != '/') {
        char cwd[4096];
        if (getcwd(cwd, sizeof cwd)) {
          absbuf = malloc(strlen(cwd) + strlen(wp) + 2);
          sprintf(absbuf, "%s/%s", cwd, wp);
          ref = absbuf;
        }
      }
    }
    qir_diag wd;
    qir_diag_init(&wd, stderr, model_path, NULL, 0);
    int64_t written = 0;
    bool ok = qir_module_write_weights(imp.m, wp, ref, inline_weights ? -1 : INLINE_MAX_ELEMS, &written, &wd);
    if (ok && written && out_path) {
      char *oc2 = strdup(out_path);
      imp.m->base_dir = qir_strdup(imp.m, dirname(oc2));
      free(oc2);
    }
    free(absbuf);
    free(wcopy);
    free(ocopy);
    free(wp);
    if (!ok) {
      status = 1;
      goto done;
    }
  }

  /* the IR */
  {
    FILE *out = stdout;
    if (out_path && !(out = fopen(out_path, "w"))) {
      fprintf(stderr, "%s: error: cannot write '%s': %s\n", model_path, out_path, strerror(errno));
      status = 1;
      goto done;
    }
    qir_print(out, imp.m);
    if (ferror(out) || (out != stdout && fclose(out) != 0) || (out == stdout && fflush(out) != 0)) {
      fprintf(stderr, "%s: error: writing the IR failed\n", model_path);
      status = 1;
    }
  }

done:
  free(stem);
  strmap_free(imp.used_names);
  strmap_free(imp.unsupported);
  strmap_free(imp.taint);
  qir_module_free(imp.m);
free_args: /* every path, after an import or before one started */
  dims_free(&imp);
  for (int i = 0; i < imp.n_named; i++)
    if (strcmp(imp.named[i].source, "dim") == 0) {
      free((void *)imp.named[i].name);
      free((void *)imp.named[i].from);
    }
  free(imp.named);
  for (int i = 0; i < imp.n_shapes; i++) free((void *)imp.shapes[i].name);
  for (int i = 0; i < imp.n_binds; i++) free((void *)imp.binds[i].name);
  free(imp.shapes);
  free(imp.binds);
  return status;
}
