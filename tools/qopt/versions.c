/* versions.c: qopt -size-versions.  A module with dimension symbols is
 * planned for their bounds; at the small end of a wide range its kernels run
 * bound-sized tiles and its rprograms the bound's schedule.  This plans the
 * module again, through the same passes, for smaller ranges (`ladder`), and
 * keeps a plan where the model says a run at that range's bound, or midway
 * into it, is at least VERSION_GAIN faster than with the plan that would
 * serve it otherwise.  The plans kept become one `versions` op (ops.def),
 * the smallest range first, the bound's plan last; a run takes the first
 * whose range holds its extents (TensorRT's optimization profiles, chosen
 * here by the model).
 *
 * Each plan is a whole module, built from the input text as -stats' static
 * builds are, its symbols renamed NAME_vI and bounded anew
 * (qir_module_restrict), each in a child process (plan_texts: the plans
 * share nothing but the input text, and qir has no global state).  The
 * modules are joined as text: each is printed with its values renamed
 * vI.NAME, and its top-level ops (the printer's chunks) placed in region I;
 * the inputs, and constants equal to the bound plan's, stay outside, shared. */
#include "qopt.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A plan for a smaller range must be at least this much faster at its bound. */
#define VERSION_GAIN 1.1
#define MAX_VERSIONS 24
#define MAX_STEPS 12            /* the ladder's squares */
#define MAX_CANDS 28            /* with -size-versions-strips' strips */

typedef struct {
  qir_module *m;
  char *text;                   /* printed, values renamed */
  size_t len;
} version;

/* One top-level op's lines in printed text. */
typedef struct {
  const char *at;
  size_t len;
} chunk;

/* The printed module's top-level ops, in order: a chunk starts at a line of
 * exactly two spaces' indent that is no region's end (a header line: weights,
 * dim, is skipped). */
static int chunks_of(const char *text, size_t len, chunk **out) {
  int n = 0, cap = 64;
  chunk *c = malloc(sizeof *c * (size_t)cap);
  if (!c) abort();
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *next = nl ? nl + 1 : end;
    bool starts = next - p > 3 && p[0] == ' ' && p[1] == ' ' && p[2] != ' ' && p[2] != '}' && strncmp(p + 2, "dim ", 4) &&
                  strncmp(p + 2, "weights ", 8);
    if (starts) {
      if (n == cap) {
        cap *= 2;
        c = realloc(c, sizeof *c * (size_t)cap);
        if (!c) abort();
      }
      c[n++] = (chunk){p, 0};
    }
    if (n && p[0] == ' ') c[n - 1].len = (size_t)(next - c[n - 1].at);
    p = next;
  }
  *out = c;
  return n;
}

/* Writes a chunk with `more` spaces of indent added to each line. */
static void put_chunk(FILE *o, const chunk *c, int more) {
  const char *p = c->at, *end = c->at + c->len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *next = nl ? nl + 1 : end;
    fprintf(o, "%*s%.*s", more, "", (int)(next - p), p);
    p = next;
  }
}

static void put_type(FILE *o, const qir_type *t) {
  char buf[1024];
  qir_type_format(t, buf, sizeof buf);
  fputs(buf, o);
}

static bool same_const(const qir_op *a, const qir_op *b) {
  if (!qir_type_equal(&a->results[0]->type, &b->results[0]->type) || !a->cst || !b->cst) return false;
  const qir_const *x = a->cst, *y = b->cst;
  if (x->offset >= 0 || y->offset >= 0) return x->offset == y->offset && !x->spill && !y->spill;
  return x->splat == y->splat && x->nbytes == y->nbytes && (!x->nbytes || !memcmp(x->data, y->data, x->nbytes));
}

static void rename_value(qir_module *m, qir_value *v, int tag) {
  v->name = v->name ? qir_sprintf(m, "v%d.%s", tag, v->name) : qir_sprintf(m, "v%d.%d", tag, v->id);
}

/* Every value an op defines, its regions' included. */
static void rename_op(qir_module *m, qir_op *op, int tag) {
  for (int i = 0; i < op->n_results; i++) rename_value(m, op->results[i], tag);
  for (int r = 0; r < op->n_regions; r++) {
    for (int i = 0; i < op->regions[r]->n_args; i++) rename_value(m, op->regions[r]->args[i], tag);
    for (qir_op *x = op->regions[r]->first; x; x = x->next) rename_op(m, x, tag);
  }
}

/* The constant of `bound` (the bound plan) that op, a constant of another
 * plan, equals: it is read from outside instead.  NULL: none. */
static const qir_op *shared_const(const qir_module *bound, const qir_op *op) {
  for (const qir_op *s = bound->body->first; s; s = s->next)
    if (s->code == QIR_OP_CONST && s->results[0]->name && op->results[0]->name &&
        !strcmp(s->results[0]->name, op->results[0]->name) && same_const(s, op))
      return s;
  return NULL;
}

/* Renames the values of plan `tag` (module m) for the join: every value
 * but the constants read from outside becomes vTAG.NAME.  Those are the
 * bound plan's (bound NULL: m is it) and another plan's equal to one of
 * the bound plan's. */
static void rename_version(qir_module *m, int tag, const qir_module *bound) {
  for (qir_op *op = m->body->first; op; op = op->next)
    if (op->code != QIR_OP_CONST || (bound && !shared_const(bound, op))) rename_op(m, op, tag);
}

/* A smaller plan's symbol that the join declares: one bounded at its least
 * value became that constant (qir_module_restrict) and is not. */
static bool declared(const qir_dimsym *s) { return s->hi > s->lo; }

static void widen_region(qir_region *r, const version *vs, int n, int slot);

/* An rprogram's #unpacked_upto lists a value per symbol of its module; in
 * the joined one, per symbol of every plan (the bound plan's first, then
 * each smaller plan's): the others at their bounds, where they never stop it. */
static void widen_unpacked(qir_op *op, const version *vs, int n, int slot) {
  const qir_attr *u = qir_op_attr(op, "unpacked_upto");
  qir_module *m = vs[slot].m;
  if (u && u->val.kind == QIR_ATTR_LIST && u->val.n == m->n_syms) {
    int total = m->n_syms * (n + 1), at = 0;
    int64_t *vals = qir_alloc(m, sizeof *vals * (size_t)total);
    for (int j = 0; j <= n; j++) {   /* the joined module's order: the bound plan (vs[n]) first */
      int w = j == 0 ? n : j - 1;
      for (int k = 0; k < m->n_syms; k++)
        if (w == n || declared(&vs[w].m->syms[k])) vals[at++] = w == slot ? u->val.items[k].i : vs[w].m->syms[k].hi;
    }
    qir_op_set_attr(m, op, "unpacked_upto", qir_attr_ints(m, at, vals), false);
  }
  for (int i = 0; i < op->n_regions; i++) widen_region(op->regions[i], vs, n, slot);
}

static void widen_region(qir_region *r, const version *vs, int n, int slot) {
  for (qir_op *op = r->first; op; op = op->next) widen_unpacked(op, vs, n, slot);
}

/* Names of the constants of r a pass made (-autocast's: qir_const.spill). */
static void spilled_names(qir_region *r, const char ***names, int *n, int *cap) {
  for (qir_op *op = r->first; op; op = op->next) {
    if (op->code == QIR_OP_CONST && op->cst && op->cst->spill && op->results[0]->name) {
      if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *names = realloc(*names, sizeof **names * (size_t)*cap);
        if (!*names) abort();
      }
      (*names)[(*n)++] = op->results[0]->name;
    }
    for (int i = 0; i < op->n_regions; i++) spilled_names(op->regions[i], names, n, cap);
  }
}

/* The joined module's constants that a plan's pass made go to the sidecar
 * qopt writes, as they would have (printed, they came back inline). */
static void respill(qir_region *r, const char *const *names, int n) {
  for (qir_op *op = r->first; op; op = op->next) {
    for (int i = 0; op->code == QIR_OP_CONST && op->cst && op->results[0]->name && i < n; i++)
      if (!strcmp(names[i], op->results[0]->name)) op->cst->spill = true;
    for (int i = 0; i < op->n_regions; i++) respill(op->regions[i], names, n);
  }
}

static bool outside(const qir_value *v) { return v->def && (v->def->code == QIR_OP_INPUT || v->def->code == QIR_OP_CONST); }

/* The joined module's text (see the file's comment): `outer`, the bound
 * plan printed before renaming, gives the header, the inputs, constants
 * and outputs; vs[0 .. n-1] (smallest first) and then bound, renamed, give
 * the regions.  in_names, out_names: the inputs' names, and the names of
 * the values the outputs read (the versions op's results). */
static bool join(FILE *o, const version *vs, int n, qir_module *bound, const char *outer, size_t outer_len,
                 const char *const *in_names, const char *const *out_names) {
  chunk *oc = NULL;
  int n_oc = chunks_of(outer, outer_len, &oc), at = 0, n_in = 0, n_out = 0;
  bool ok = n_oc > 0;
  fprintf(o, "%.*s", (int)(ok ? oc[0].at - outer : 0), outer);   /* module, weights, dims */
  for (int i = 0; i < n; i++)
    for (int k = 0; k < vs[i].m->n_syms; k++) {
      const qir_dimsym *s = &vs[i].m->syms[k];
      if (declared(s))
        fprintf(o, s->step > 1 ? "  dim %s = [%lld, %lld] %% %lld\n" : "  dim %s = [%lld, %lld]\n", s->name, (long long)s->lo,
              (long long)s->hi, (long long)s->step);
    }
  for (qir_op *op = bound->body->first; ok && op; op = op->next, at++) {
    ok = at < n_oc;
    if (ok && (op->code == QIR_OP_INPUT || op->code == QIR_OP_CONST)) put_chunk(o, &oc[at], 0);
    n_in += op->code == QIR_OP_INPUT;
    n_out += op->code == QIR_OP_OUTPUT;
  }
  fputs("  ", o);
  for (int i = 0; i < n_out; i++) fprintf(o, "%s%%%s", i ? ", " : "", out_names[i]);
  fputs(" = versions", o);
  for (int i = 0; i < n_in; i++) fprintf(o, "%s%%%s", i ? ", " : " ", in_names[i]);
  fputs(" :", o);
  int y = 0;
  for (qir_op *op = bound->body->first; op; op = op->next)
    if (op->code == QIR_OP_OUTPUT) {
      fputs(y++ ? ", " : " ", o);
      put_type(o, &op->operands[0]->type);
    }
  for (int v = 0; ok && v <= n; v++) {
    qir_module *m = v < n ? vs[v].m : bound;
    chunk *c = NULL;
    int n_c = chunks_of(vs[v].text, vs[v].len, &c), a = 0;
    fputs(v ? " else (" : " (", o);
    for (qir_op *op = m->body->first; op; op = op->next)
      if (op->code == QIR_OP_INPUT) {
        fprintf(o, "%s%%%s: ", a++ ? ", " : "", op->results[0]->name);
        put_type(o, &op->results[0]->type);
      }
    fputs(") {\n", o);
    at = 0;
    for (qir_op *op = m->body->first; ok && op; op = op->next, at++) {
      ok = at < n_c;
      bool read_outside = op->code == QIR_OP_CONST && (v == n || shared_const(bound, op));
      if (ok && op->code != QIR_OP_INPUT && op->code != QIR_OP_OUTPUT && !read_outside) put_chunk(o, &c[at], 2);
    }
    fputs("    yield", o);
    y = 0;
    for (qir_op *op = m->body->first; op; op = op->next)
      if (op->code == QIR_OP_OUTPUT) fprintf(o, "%s%%%s", y++ ? ", " : " ", op->operands[0]->name);
    fputs("\n  }", o);
    free(c);
  }
  fputc('\n', o);
  /* the outputs, each reading its result: its chunk with the operand's name replaced */
  at = 0;
  y = 0;
  for (qir_op *op = bound->body->first; ok && op; op = op->next, at++) {
    if (op->code != QIR_OP_OUTPUT) continue;
    const chunk *c = &oc[at];
    const char *sp = memchr(c->at, '%', c->len), *e = sp ? sp + 1 : NULL;
    ok = sp != NULL;
    while (ok && e < c->at + c->len && (isalnum((unsigned char)*e) || *e == '_' || *e == '.' || *e == '$')) e++;
    if (ok) fprintf(o, "%.*s%%%s%.*s", (int)(sp - c->at), c->at, out_names[y++], (int)(c->at + c->len - e), e);
  }
  fputs("}\n", o);
  free(oc);
  return ok;
}

/* The ranges a smaller plan may serve: every symbol up to its least value
 * times 1, F, F^2, .. (F: -size-versions-factor; on its step), short of the
 * bound (a symbol at its bound stays there while the others go on). */
static int ladder(qopt_ctx *ctx, const qir_module *m, int64_t (*at)[QOPT_MAX_SYMS]) {
  uint64_t all = m->n_syms >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << m->n_syms) - 1;
  return qopt_size_steps_by(m, all, qopt_option_float(ctx, "size-versions-factor"), MAX_STEPS, at);
}

/* m printed, then a comment naming the constants a pass made (the printer
 * writes them inline: plan_of marks them again). */
static char *printed_with_spills(qir_module *m, size_t *len) {
  char *out = NULL;
  FILE *o = open_memstream(&out, len);
  if (!o) return NULL;
  qir_print(o, m);
  const char **names = NULL;
  int n = 0, n_cap = 0;
  spilled_names(m->body, &names, &n, &n_cap);
  fputs("// spilled:", o);
  for (int i = 0; i < n; i++) fprintf(o, " %s", names[i]);
  fputc('\n', o);
  free(names);
  if (fclose(o)) {
    free(out);
    return NULL;
  }
  return out;
}

/* Plan `s`: the input bounded at cap (its symbols renamed NAME_vS), through
 * the pipeline, printed_with_spills.  NULL: the plan failed. */
static char *plan_text(qopt_ctx *ctx, const char *text, size_t len, const char *base_dir, const int64_t *cap, int s,
                       qopt_pipeline_fn run, void *arg, size_t *out_len) {
  qir_diag quiet;
  qir_diag_init_quiet(&quiet);
  qir_diag *saved = ctx->diag;
  ctx->diag = &quiet;
  qir_module *m = qir_parse(text, len, "<size version>", base_dir, &quiet);
  bool ok = m && quiet.n_errors == 0;
  if (ok) {
    qir_module_restrict(m, cap, qir_sprintf(m, "_v%d", s));
    ok = qir_verify(m, &quiet) == 0 && run(ctx, m, arg) && quiet.n_errors == 0 && qir_verify(m, &quiet) == 0;
  }
  ctx->diag = saved;
  char *out = ok ? printed_with_spills(m, out_len) : NULL;
  qir_module_free(m);
  return out;
}

/* A module from printed_with_spills' text: its names are as printed (the
 * printer makes them unique, so renamed copies print alike), its pass-made
 * constants marked again. */
static qir_module *plan_of(const char *text, size_t len, const char *base_dir, qir_diag *d) {
  qir_module *m = qir_parse(text, len, "<size version>", base_dir, d);
  const char *tail = m ? strstr(text, "\n// spilled:") : NULL;
  if (!tail) return m;
  const char **names = NULL;
  int n = 0;
  char *list = strdup(tail + 13);
  for (char *save = NULL, *w = list ? strtok_r(list, " \n", &save) : NULL; w; w = strtok_r(NULL, " \n", &save)) {
    names = realloc(names, sizeof *names * (size_t)(n + 1));
    if (!names) abort();
    names[n++] = w;
  }
  respill(m->body, names, n);
  free(names);
  free(list);
  return m;
}

/* Every plan's text, built in child processes at once (each plan is the
 * pipeline on its own module; nothing is shared but the input text), or
 * here one after another where fork fails. */
static void plan_texts(qopt_ctx *ctx, const char *text, size_t len, const char *base_dir, int64_t (*steps)[QOPT_MAX_SYMS], int n,
                       qopt_pipeline_fn run, void *arg, char **texts, size_t *lens) {
  pid_t pid[MAX_CANDS];
  int fd[MAX_CANDS];
  fflush(NULL);   /* a child's exit must not write the parent's buffers again */
  for (int s = 0; s < n; s++) {
    int p[2];
    texts[s] = NULL, lens[s] = 0, pid[s] = -1, fd[s] = -1;
    bool piped = pipe(p) == 0;
    if (piped && (pid[s] = fork()) == 0) {
      close(p[0]);
      size_t l = 0;
      char *t = plan_text(ctx, text, len, base_dir, steps[s], s, run, arg, &l);
      bool ok = t != NULL;
      for (size_t at = 0; ok && at < l;) {
        ssize_t w = write(p[1], t + at, l - at);
        ok = w > 0;
        at += ok ? (size_t)w : 0;
      }
      _exit(ok ? 0 : 1);
    }
    if (pid[s] > 0) {
      close(p[1]);
      fd[s] = p[0];
    } else {
      if (piped) close(p[0]), close(p[1]);   /* no child (the pipe or the fork failed): build it here */
      texts[s] = plan_text(ctx, text, len, base_dir, steps[s], s, run, arg, &lens[s]);
    }
  }
  for (int s = 0; s < n; s++) {
    if (pid[s] <= 0) continue;
    char *buf = NULL;
    size_t blen = 0;
    FILE *o = open_memstream(&buf, &blen);
    char chunk_buf[65536];
    ssize_t r;
    while (o && (r = read(fd[s], chunk_buf, sizeof chunk_buf)) > 0) fwrite(chunk_buf, 1, (size_t)r, o);
    close(fd[s]);
    if (o) fclose(o);
    int status = 0;
    bool ok = waitpid(pid[s], &status, 0) == pid[s] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok && buf && blen) texts[s] = buf, lens[s] = blen;
    else free(buf);
  }
}

/* -size-versions-strips: for each symbol, each square of the ladder at most
 * half its bound there, the same range with every other symbol at its
 * bound (a wide image's rows, a tall one's columns); from[], strip[] say
 * which. */
static int add_strips(const qir_module *m, int64_t (*steps)[QOPT_MAX_SYMS], int n, int *from, int *strip) {
  int total = n;
  for (int k = 0; k < m->n_syms; k++) {
    if (!declared(&m->syms[k])) continue;
    for (int s = 0; s < n && total < MAX_CANDS; s++) {
      if (steps[s][k] * 2 > m->syms[k].hi) continue;
      bool narrower = false;   /* some other symbol below its bound: else the square itself */
      for (int j = 0; j < m->n_syms; j++) {
        steps[total][j] = j == k ? steps[s][k] : m->syms[j].hi;
        narrower |= j != k && steps[s][j] < m->syms[j].hi;
      }
      if (!narrower) continue;
      from[total] = s, strip[total] = k;
      total++;
    }
  }
  return total;
}

/* The points a range holds: the product of its symbols' bounds. */
static double range_volume(const qir_module *m, const int64_t *at) {
  double v = 1;
  for (int k = 0; k < m->n_syms; k++) v *= (double)(at[k] > 0 ? at[k] : 1);
  return v;
}

/* The plan that serves a run at `at` among those kept (ranges steps[kept[i]],
 * largest first): the smallest that holds it, else the bound's. */
static qir_module *covering(qir_module *built, qir_module *const *cand, int64_t (*steps)[QOPT_MAX_SYMS], const int *kept, int n_kept,
                            const int64_t *at) {
  for (int i = n_kept - 1; i >= 0; i--) {
    bool holds = true;
    for (int k = 0; k < built->n_syms && holds; k++) holds = at[k] <= steps[kept[i]][k];
    if (holds) return cand[kept[i]];
  }
  return built;
}

qir_module *qopt_size_versions(qopt_ctx *ctx, qir_module *built, const char *text, size_t len, const char *base_dir,
                               qopt_pipeline_fn run, void *arg) {
  if (!built->n_syms || built->n_syms > QOPT_MAX_SYMS) return built;
  for (qir_op *op = built->body->first; op; op = op->next)
    if (op->code == QIR_OP_VERSIONS) return built;   /* versioned already */
  int64_t steps[MAX_CANDS][QOPT_MAX_SYMS], mid[MAX_CANDS][QOPT_MAX_SYMS];
  int from[MAX_CANDS], strip[MAX_CANDS];   /* a strip: the square it narrows one symbol of, that symbol; else -1 */
  int n = ladder(ctx, built, steps);
  for (int s = 0; s < n; s++) from[s] = s, strip[s] = -1;
  if (qopt_option_bool(ctx, "size-versions-strips")) n = add_strips(built, steps, n, from, strip);
  qir_module *cand[MAX_CANDS] = {NULL};
  char *texts[MAX_CANDS];
  size_t lens[MAX_CANDS];
  plan_texts(ctx, text, len, base_dir, steps, n, run, arg, texts, lens);
  double own_us[MAX_CANDS], own_mid[MAX_CANDS];
  for (int s = 0; s < n; s++) {
    qir_diag quiet;
    qir_diag_init_quiet(&quiet);
    cand[s] = texts[s] ? plan_of(texts[s], lens[s], base_dir, &quiet) : NULL;
    free(texts[s]);
    /* its range's bound, and midway into its range from the next smaller square's (a
     * strip: along its narrow symbol, the others at their bounds) */
    for (int k = 0; k < built->n_syms; k++) {
      const qir_dimsym *y = &built->syms[k];
      int64_t below = from[s] ? steps[from[s] - 1][k] : y->lo, v = below + (steps[s][k] - below) / 2;
      mid[s][k] = strip[s] >= 0 && k != strip[s] ? y->hi : y->lo + (v - y->lo) / y->step * y->step;
    }
    own_us[s] = cand[s] ? qopt_modelled_us(ctx, cand[s], steps[s]) : -1;
    own_mid[s] = cand[s] ? qopt_modelled_us(ctx, cand[s], mid[s]) : -1;
  }
  /* from the largest range down: a plan stays where it beats the one that
   * would serve its runs otherwise (the smallest kept range that holds them,
   * the bound's last), at its bound or midway into its range */
  int order[MAX_CANDS], kept[MAX_CANDS], n_kept = 0;
  double cover_us[MAX_CANDS];
  for (int s = 0; s < n; s++) order[s] = s;
  for (int i = 1; i < n; i++)   /* largest volume first (squares are nested: the ladder's order reversed) */
    for (int j = i; j > 0 && range_volume(built, steps[order[j]]) > range_volume(built, steps[order[j - 1]]); j--) {
      int x = order[j];
      order[j] = order[j - 1], order[j - 1] = x;
    }
  for (int i = 0; i < n; i++) {
    int s = order[i];
    if (!cand[s] || n_kept == MAX_VERSIONS) continue;
    qir_module *cover = covering(built, cand, steps, kept, n_kept, steps[s]), *cover_mid = covering(built, cand, steps, kept, n_kept, mid[s]);
    double c = qopt_modelled_us(ctx, cover, steps[s]), cm = qopt_modelled_us(ctx, cover_mid, mid[s]);
    if ((own_us[s] > 0 && own_us[s] * VERSION_GAIN < c) || (own_mid[s] > 0 && own_mid[s] * VERSION_GAIN < cm))
      cover_us[n_kept] = c, kept[n_kept++] = s;
  }
  qir_module *out = built;
  if (!n_kept && qopt_option_bool(ctx, "stats"))
    fprintf(stderr, "size-versions: no plan for a smaller range kept (%d tried, none %.0f%% faster where it would run)\n", n,
            (VERSION_GAIN - 1) * 100);
  if (n_kept) {
    /* smallest first; each (and the bound plan, last) with names as printed */
    version vs[MAX_CANDS + 1];
    bool ok = true;
    qir_diag *d = ctx->diag;
    for (int i = 0; i <= n_kept && ok; i++) {
      vs[i] = (version){0};
      if (i < n_kept) {
        vs[i].m = cand[kept[n_kept - 1 - i]];
        cand[kept[n_kept - 1 - i]] = NULL;
      } else {
        size_t blen = 0;
        char *btext = printed_with_spills(built, &blen);
        vs[i].m = btext ? plan_of(btext, blen, base_dir, d) : NULL;
        free(btext);
      }
      ok = vs[i].m != NULL;
    }
    size_t outer_len = 0, jlen = 0;
    char *outer = ok ? qir_print_to_string(vs[n_kept].m, &outer_len) : NULL, *joined = NULL;
    const char **in_names = NULL, **out_names = NULL;
    if (outer) {
      qir_module *b = vs[n_kept].m;
      int n_in = 0, n_out = 0;
      for (qir_op *op = b->body->first; op; op = op->next) n_in += op->code == QIR_OP_INPUT, n_out += op->code == QIR_OP_OUTPUT;
      in_names = qir_alloc(b, sizeof *in_names * (size_t)(n_in + 1));
      out_names = qir_alloc(b, sizeof *out_names * (size_t)(n_out + 1));
      n_in = n_out = 0;
      for (qir_op *op = b->body->first; op; op = op->next) {
        if (op->code == QIR_OP_INPUT) in_names[n_in++] = op->results[0]->name;
        if (op->code != QIR_OP_OUTPUT) continue;
        const qir_value *y = op->operands[0];   /* read from outside, or output twice: a name of its own */
        bool again = false;
        for (int j = 0; j < n_out; j++) again |= !strcmp(out_names[j], y->name);
        out_names[n_out] = outside(y) || again ? qir_sprintf(b, "%s.out%d", y->name, n_out) : y->name;
        n_out++;
      }
      for (int i = 0; i <= n_kept; i++) widen_region(vs[i].m->body, vs, n_kept, i);
      for (int i = 0; i <= n_kept; i++) {
        rename_version(vs[i].m, i, i < n_kept ? b : NULL);
        vs[i].text = qir_print_to_string(vs[i].m, &vs[i].len);
        ok &= vs[i].text != NULL;
      }
      FILE *o = ok ? open_memstream(&joined, &jlen) : NULL;
      if (o) {
        ok = join(o, vs, n_kept, b, outer, outer_len, in_names, out_names);
        ok &= fclose(o) == 0;
      }
    }
    qir_module *m = ok && joined ? qir_parse(joined, jlen, "<size versions>", base_dir, d) : NULL;
    const char **spilled = NULL;
    int n_spilled = 0, cap_spilled = 0;
    for (int i = 0; m && i <= n_kept; i++) spilled_names(vs[i].m->body, &spilled, &n_spilled, &cap_spilled);
    if (m) respill(m->body, spilled, n_spilled);
    free(spilled);
    if (m && qir_verify(m, d)) {
      qir_module_free(m);
      m = NULL;
    }
    if (!m) qir_error(d, (qir_loc){0}, "-size-versions: the joined module is not valid (a qopt bug)");
    if (m && qopt_option_bool(ctx, "stats")) {
      fprintf(stderr, "size-versions: %d plans for smaller ranges kept:", n_kept);
      for (int i = n_kept - 1; i >= 0; i--) {
        fprintf(stderr, " up to [");
        for (int k = 0; k < built->n_syms; k++) fprintf(stderr, "%s%lld", k ? ", " : "", (long long)steps[kept[i]][k]);
        fprintf(stderr, "] %.1f us (the next plan there %.1f us)%s", own_us[kept[i]], cover_us[i], i ? ";" : "\n");
      }
    }
    for (int i = 0; i <= n_kept; i++) {
      free(vs[i].text);
      qir_module_free(vs[i].m);
    }
    free(outer);
    free(joined);
    qir_module_free(built);
    out = m;
  }
  for (int s = 0; s < n; s++) qir_module_free(cand[s]);
  return out;
}
