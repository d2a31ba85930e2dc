/* print_c.c: the C printer.  Blocks become an OpenMP parallel loop; the
 * threads of a block become inner loops, one per phase (the code between two
 * barriers), so the C program runs exactly the GPU plan: same tiles, same
 * shared-memory staging, same reduction order within a warp.  Per-thread state
 * that survives a barrier is an array indexed by the thread.  Builds with
 * `cc -O2 -fopenmp`, and serially without -fopenmp. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kast.h"
#include "symbolic.h"

static void prelude(FILE *o) {
  fputs("#ifndef _POSIX_C_SOURCE\n#define _POSIX_C_SOURCE 200809L\n#endif\n#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
        "#include <time.h>\n\n"
        "#define QDEV static inline\n"
        "#define QAPI\n",
        o);
  kprint_helpers(o);
  fputs("\n/* runtime: device memory is host memory */\n"
        "#define QCHECK(call) do { int q_rc_ = (call); if (q_rc_) { fprintf(stderr, \"%s:%d: %s failed\\n\", __FILE__, __LINE__, #call); return 1; } } while (0)\n"
        "#define QCHECK_LAUNCH() do { } while (0)\n"
        "static inline int q_alloc(void **p, size_t n) { *p = calloc(1, n ? n : 1); return *p == NULL; }\n"
        "static inline void q_free(void *p) { free(p); }\n"
        "#ifdef QIR_CHECK   /* qcodegen -check: the checker (below) learns which device bytes a copy wrote */\n"
        "static void q_copied(void *d, const void *s, size_t n);\n"
        "#else\n"
        "#define q_copied(d, s, n) ((void)0)\n"
        "#endif\n"
        "static inline int q_h2d(void *d, const void *s, size_t n) { if (n) memcpy(d, s, n); q_copied(d, NULL, n); return 0; }\n"
        "static inline int q_d2h(void *d, const void *s, size_t n) { if (n) memcpy(d, s, n); return 0; }\n"
        "/* h rows of w bytes, dp and sp bytes apart (cudaMemcpy2D) */\n"
        "static inline int q_h2d_2d(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h) {\n"
        "  for (size_t r = 0; r < h; r++) q_h2d((unsigned char *)d + r * dp, (const unsigned char *)s + r * sp, w);\n  return 0;\n}\n"
        "static inline int q_d2h_2d(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h) {\n"
        "  for (size_t r = 0; r < h; r++) q_d2h((unsigned char *)d + r * dp, (const unsigned char *)s + r * sp, w);\n  return 0;\n}\n"
        "static inline int q_d2d(void *d, const void *s, size_t n) { if (n && d != s) memmove(d, s, n); q_copied(d, s, n); return 0; }\n"
        "static inline int q_d2d_2d(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h) {\n"
        "  for (size_t r = 0; r < h; r++) q_d2d((unsigned char *)d + r * dp, (const unsigned char *)s + r * sp, w);\n  return 0;\n}\n"
        "static inline int q_sync(void) { return 0; }\n"
        "\n/* matrix units, emulated: a warp's 16x16 fragment as floats, row-major\n"
        " * (A: [i][k], B: [k][j], accumulator: [i][j]); 16-bit operands are exact in float */\n"
        "static inline void q_mma_load(float *f, const uint16_t *p, int ld, int col_major, int bf16) {\n"
        "  for (int r = 0; r < 16; r++)\n"
        "    for (int c = 0; c < 16; c++) {\n"
        "      uint16_t h = col_major ? p[c * ld + r] : p[r * ld + c];\n"
        "      f[r * 16 + c] = bf16 ? q_bf2f(h) : q_h2f(h);\n"
        "    }\n"
        "}\n"
        "static inline void q_mma_sync(float *d, const float *a, const float *b, const float *c) {\n"
        "  for (int i = 0; i < 16; i++)\n"
        "    for (int j = 0; j < 16; j++) {\n"
        "      float s = c[i * 16 + j];\n"
        "      for (int k = 0; k < 16; k++) s += a[i * 16 + k] * b[k * 16 + j];\n"
        "      d[i * 16 + j] = s;\n"
        "    }\n"
        "}\n"
        "static inline void q_mma_store(float *p, const float *d, int ld) {\n"
        "  for (int r = 0; r < 16; r++) memcpy(p + r * ld, d + r * 16, sizeof(float) * 16);\n"
        "}\n",
        o);
  kprint_sm80_runtime(o);
  kprint_sm90_runtime(o);
}

static void print_params(FILE *o, const kkernel *k) {
  for (int i = 0; i < k->n_params; i++)
    fprintf(o, "%s%s%s *%s%s", i ? ", " : "", k->params[i].written ? "" : "const ", kdtype_c(k->params[i].dtype),
            k->params[i].aliased ? "" : "restrict ", k->params[i].name);
  if ((k->rows || k->bid_remap) && !k->chk) fputs(", int64_t q_grid", o);   /* the run's blocks */
}

static void indent_to(FILE *o, int n) { fprintf(o, "%*s", 2 * n, ""); }

/* Thread loop innermost.  A phase's loops and ifs whose bounds and conditions
 * are the same in every thread (block-uniform variables and the counters of
 * loops already hoisted) move outside the loop over the threads; the thread
 * loop wraps each maximal run of the remaining statements.  Each thread still
 * runs its own statements in the same order (threads of one phase never
 * communicate), so results and summation orders are unchanged; the innermost
 * loop walks consecutive threads, i.e. consecutive elements of the per-thread
 * arrays ([slot][tid]), which the C compiler vectorises. */
typedef struct {
  const kvar *hoisted[64];                  /* counters of the loops moved out, innermost last */
  int n_hoisted;
  const kstmt *run[256];                    /* statements waiting for a thread loop */
  int n_run;
  const kstmt **runs[64];                   /* dry run: every run, to check scopes */
  int run_len[64], n_runs;
  bool failed;                              /* dry run: cannot interchange this phase */
  bool moved;                               /* some loop or if moved out of the thread loop */
} interchange;

static bool uniform_expr(const interchange *x, const kexpr *e) {
  if (!e) return true;
  switch (e->kind) {
  case KE_INT: case KE_FLOAT: case KE_BID: return true;
  case KE_TID: case KE_WARP: case KE_LOAD: return false;  /* loads: a tensor this phase writes may feed them */
  case KE_VAR: case KE_ELEM: {
    bool ok = e->var->space == KV_BLOCK;
    for (int i = 0; i < x->n_hoisted && !ok; i++) ok = x->hoisted[i] == e->var;
    return ok && uniform_expr(x, e->a);
  }
  default: return uniform_expr(x, e->a) && uniform_expr(x, e->b) && uniform_expr(x, e->c);
  }
}

/* The divisor W of a let `tid % W` that splits the block's threads evenly, or 0. */
static int tid_split(const kkernel *k) {
  for (int i = 0; i < k->lets->n_items; i++) {
    const kexpr *e = k->lets->items[i]->init;
    /* look one level into a sum: lets are `tid % W` or `base + tid % W` */
    for (int depth = 0; e && depth < 2; depth++) {
      if (e->kind == KE_BINARY && e->fn == QIR_FN_MOD && e->a->kind == KE_TID && e->b->kind == KE_INT &&
          e->b->ival > 1 && e->b->ival < k->threads && k->threads % e->b->ival == 0)
        return (int)e->b->ival;
      e = e->kind == KE_BINARY && e->fn == QIR_FN_ADD ? e->b : NULL;
    }
  }
  return 0;
}

static void flush_run(FILE *o, const kkernel *k, interchange *x, const kprint_style *st, int ind) {
  if (!x->n_run) return;
  if (!o) {                                  /* dry run: remember the run */
    if (x->n_runs == 64) x->failed = true;
    else {
      const kstmt **copy = malloc(sizeof *copy * (size_t)x->n_run);
      if (!copy) x->failed = true;
      else {
        memcpy(copy, x->run, sizeof *copy * (size_t)x->n_run);
        x->runs[x->n_runs] = copy;
        x->run_len[x->n_runs++] = x->n_run;
      }
    }
    x->n_run = 0;
    return;
  }
  kstmt seq = {.kind = KS_SEQ, .items = (kstmt **)x->run, .n_items = x->n_run, .cap_items = x->n_run};
  int w = tid_split(k);
  if (w) {
    /* thread coordinates as loops: the compiler sees tx contiguous, ty uniform */
    kprint_style split = *st;
    split.c_tid_split = w;
    indent_to(o, ind);
    fprintf(o, "for (int ty = 0; ty < %d; ty++) {\n", k->threads / w);
    indent_to(o, ind + 1);
    fprintf(o, "for (int tx = 0; tx < %d; tx++) {\n", w);
    indent_to(o, ind + 2);
    fprintf(o, "const int tid = ty * %d + tx;\n", w);
    indent_to(o, ind + 2);
    fputs("(void)tid;\n", o);
    kprint_lets(o, k, &seq, &split, ind + 2);
    kprint_stmt(o, &seq, k, &split, ind + 2);
    indent_to(o, ind + 1);
    fputs("}\n", o);
    indent_to(o, ind);
    fputs("}\n", o);
    x->n_run = 0;
    return;
  }
  indent_to(o, ind);
  fprintf(o, "for (int tid = 0; tid < %d; tid++) {\n", k->threads);
  kprint_lets(o, k, &seq, st, ind + 1);
  kprint_stmt(o, &seq, k, st, ind + 1);
  indent_to(o, ind);
  fputs("}\n", o);
  x->n_run = 0;
}

static void interchange_stmt(FILE *o, const kkernel *k, interchange *x, const kstmt *s, const kprint_style *st, int ind) {
  if (x->failed) return;
  if (s->kind == KS_SEQ) {
    for (int i = 0; i < s->n_items; i++) interchange_stmt(o, k, x, s->items[i], st, ind);
    return;
  }
  if (s->kind == KS_FOR && x->n_hoisted < 64 && uniform_expr(x, s->lo) && uniform_expr(x, s->hi)) {
    flush_run(o, k, x, st, ind);
    if (o) {
      indent_to(o, ind);
      fprintf(o, "for (%s %s = ", ktype_c(s->var->type), s->var->name);
      kprint_expr(o, s->lo, k, st);
      fprintf(o, "; %s < ", s->var->name);
      kprint_expr(o, s->hi, k, st);
      fprintf(o, "; %s += %" PRId64 ") {\n", s->var->name, s->step);
    }
    x->hoisted[x->n_hoisted++] = s->var;
    x->moved = true;
    interchange_stmt(o, k, x, s->body, st, ind + 1);
    flush_run(o, k, x, st, ind + 1);
    x->n_hoisted--;
    if (o) {
      indent_to(o, ind);
      fputs("}\n", o);
    }
    return;
  }
  if (s->kind == KS_IF && uniform_expr(x, s->cond)) {
    flush_run(o, k, x, st, ind);
    x->moved = true;
    if (o) {
      indent_to(o, ind);
      fputs("if (", o);
      kprint_expr(o, s->cond, k, st);
      fputs(") {\n", o);
    }
    interchange_stmt(o, k, x, s->body, st, ind + 1);
    flush_run(o, k, x, st, ind + 1);
    if (s->els) {
      if (o) {
        indent_to(o, ind);
        fputs("} else {\n", o);
      }
      interchange_stmt(o, k, x, s->els, st, ind + 1);
      flush_run(o, k, x, st, ind + 1);
    }
    if (o) {
      indent_to(o, ind);
      fputs("}\n", o);
    }
    return;
  }
  if (x->n_run == 256) flush_run(o, k, x, st, ind);
  x->run[x->n_run++] = s;
}

/* A local declared in one thread loop must not be used in another. */
static bool decls_stay_in_run(const interchange *x, int r, const kstmt *s) {
  if (s->kind == KS_DECL) {
    for (int j = 0; j < x->n_runs; j++)
      for (int i = 0; j != r && i < x->run_len[j]; i++)
        if (ks_uses_var(x->runs[j][i], s->var)) return false;
    return true;
  }
  if (s->kind == KS_SEQ)
    for (int i = 0; i < s->n_items; i++)
      if (!decls_stay_in_run(x, r, s->items[i])) return false;
  if (s->body && !decls_stay_in_run(x, r, s->body)) return false;
  if (s->els && !decls_stay_in_run(x, r, s->els)) return false;
  return true;
}

/* Worth it and safe: some loop moves out, and no local crosses thread loops. */
static bool can_interchange(const kkernel *k, const kstmt *phase, const kprint_style *st) {
  /* Only register tiles pay for it: with one accumulator per thread the thread-outer
   * loop keeps it in a register, the thread-inner one round-trips it through memory
   * (measured: shufflenet 0.76x without this test). */
  bool tile = false;
  for (int i = 0; i < k->n_vars && !tile; i++) tile = k->vars[i]->space == KV_THREAD && k->vars[i]->size >= 4;
  if (!tile) return false;
  interchange *x = calloc(1, sizeof *x);
  if (!x) return false;
  interchange_stmt(NULL, k, x, phase, st, 0);
  flush_run(NULL, k, x, st, 0);
  bool ok = !x->failed && x->moved;
  for (int r = 0; r < x->n_runs && ok; r++)
    for (int i = 0; i < x->run_len[r] && ok; i++) ok = decls_stay_in_run(x, r, x->runs[r][i]);
  for (int r = 0; r < x->n_runs; r++) free(x->runs[r]);
  free(x);
  return ok;
}

static void flush_phase(FILE *o, const kkernel *k, kstmt *phase, const kprint_style *st, int ind) {
  if (!phase->n_items) return;
  if (!st->chk && can_interchange(k, phase, st)) {
    interchange *x = calloc(1, sizeof *x);
    if (x) {
      interchange_stmt(o, k, x, phase, st, ind);
      flush_run(o, k, x, st, ind);
      free(x);
      phase->n_items = 0;
      return;
    }
  }
  indent_to(o, ind);
  fprintf(o, "for (int tid = 0; tid < %d; tid++) {\n", k->threads);
  kprint_lets(o, k, phase, st, ind + 1);
  kprint_stmt(o, phase, k, st, ind + 1);
  indent_to(o, ind);
  fputs("}\n", o);
  if (st->chk && ks_has_sync(phase)) {   /* collectives the threads reached one by one */
    indent_to(o, ind);
    fputs("q_phase_end(&q_b);\n", o);
  }
  phase->n_items = 0;
}

/* Checked C: a uniform loop with barriers runs over thread 0's bounds, after
 * every thread's bounds were compared with them (a loop whose trip count
 * differs between threads reaches its barriers a different number of times). */
static void print_checked_loop_head(FILE *o, const kkernel *k, const kstmt *c, const kprint_style *st, int ind) {
  int site = cg_check_site(st->chk, k, "the barrier loop over `%s`", c->var->name);
  kstmt bounds = {.kind = KS_IF, .cond = c->lo, .init = c->hi};
  indent_to(o, ind);
  fprintf(o, "long q_lo_%s = 0, q_hi_%s = 0;\n", c->var->name, c->var->name);
  indent_to(o, ind);
  fprintf(o, "for (int tid = 0; tid < %d; tid++) {\n", k->threads);
  kprint_lets(o, k, &bounds, st, ind + 1);
  indent_to(o, ind + 1);
  fputs("q_loop_bounds(&q_b, tid, (long)(", o);
  kprint_expr(o, c->lo, k, st);
  fputs("), (long)(", o);
  kprint_expr(o, c->hi, k, st);
  fprintf(o, "), &q_lo_%s, &q_hi_%s, %d);\n", c->var->name, c->var->name, site);
  indent_to(o, ind);
  fputs("}\n", o);
  indent_to(o, ind);
  fprintf(o, "for (int %s = (int)q_lo_%s; %s < (int)q_hi_%s; %s += %" PRId64 ") {\n", c->var->name, c->var->name,
          c->var->name, c->var->name, c->var->name, c->step);
}

/* Block-level statements: phases separated by barriers, uniform loops around phases. */
static void print_block_level(FILE *o, const kkernel *k, const kstmt *s, const kprint_style *st, int ind) {
  kstmt phase = {.kind = KS_SEQ};
  kstmt *items[256];
  phase.items = items;
  phase.cap_items = 256;
  for (int i = 0; i < s->n_items; i++) {
    kstmt *c = s->items[i];
    if (c->kind == KS_BARRIER) {
      flush_phase(o, k, &phase, st, ind);
      if (st->chk) {
        indent_to(o, ind);
        fprintf(o, "q_barrier(&q_b, %d);\n", c->warp_only);
      }
      continue;
    }
    if (c->kind == KS_LDMATRIX || c->kind == KS_MMA16816) {
      flush_phase(o, k, &phase, st, ind);
      kprint_sm80_collective_c(o, c, k, st, ind);
      continue;
    }
    if (ks_is_wgmma(c)) {                    /* collective: once per warpgroup */
      flush_phase(o, k, &phase, st, ind);
      kprint_sm90_collective_c(o, c, k, st, ind);
      continue;
    }
    if (ks_is_mma(c)) {                      /* collective: once per warp */
      flush_phase(o, k, &phase, st, ind);
      indent_to(o, ind);
      fprintf(o, "for (int q_w = 0; q_w < %d; q_w++) ", c->active_warps ? c->active_warps : k->threads / k->warp);
      if (st->chk && (c->kind == KS_MMA_LOAD || c->kind == KS_MMA_STORE)) {
        bool w = c->kind == KS_MMA_STORE;
        int site = cg_check_site(st->chk, k, "matrix-unit %s shared `%s`", w ? "store to" : "load from", c->mem->name);
        fprintf(o, "{\n");
        indent_to(o, ind + 1);
        fprintf(o, "q_mma_tile(&q_b, q_sh_%s, %" PRId64 "L, (long)(", c->mem->name, c->mem->size);
        kprint_expr(o, c->lo, k, st);
        fprintf(o, "), %" PRId64 ", %d, q_w, %d);\n", c->step, w, site);
        indent_to(o, ind + 1);
        kprint_mma_stmt(o, c, k, st);
        indent_to(o, ind);
        fputs("}\n", o);
        continue;
      }
      kprint_mma_stmt(o, c, k, st);
      continue;
    }
    if (c->kind == KS_WARP_REDUCE) {
      flush_phase(o, k, &phase, st, ind);
      const char *v = c->var->name;
      const char *t = ktype_c(c->var->type);
      indent_to(o, ind);
      fprintf(o, "for (int w = 0; w < %d; w += %d) { /* warp reduction: lanes combined as on the GPU */\n", k->threads, k->warp);
      indent_to(o, ind + 1);
      fprintf(o, "%s%s lane[%d];\n", kprint_stack_align(st), t, k->warp);
      if (st->chk) {          /* a partial warp: absent lanes hold 0 here, garbage on a GPU */
        indent_to(o, ind + 1);
        fprintf(o, "q_shuffle(&q_b, %d, %d);\n", (int)c->step, cg_check_site(st->chk, k, "the warp shuffle reducing `%s`", v));
        indent_to(o, ind + 1);
        fprintf(o, "for (int l = 0; l < %d; l++) lane[l] = w + l < %d ? %s[w + l] : 0;\n", k->warp, k->threads, v);
      } else {
        indent_to(o, ind + 1);
        fprintf(o, "for (int l = 0; l < %d; l++) lane[l] = %s[w + l];\n", k->warp, v);
      }
      indent_to(o, ind + 1);
      fprintf(o, "for (int off = %d; off > 0; off >>= 1) {\n", (c->step ? (int)c->step : k->warp) / 2);
      indent_to(o, ind + 2);
      fprintf(o, "%s%s next[%d];\n", kprint_stack_align(st), t, k->warp);
      indent_to(o, ind + 2);
      if (c->red_fn == QIR_FN_ADD) fprintf(o, "for (int l = 0; l < %d; l++) next[l] = lane[l] + lane[l ^ off];\n", k->warp);
      else if (c->red_fn == QIR_FN_MUL) fprintf(o, "for (int l = 0; l < %d; l++) next[l] = lane[l] * lane[l ^ off];\n", k->warp);
      else fprintf(o, "for (int l = 0; l < %d; l++) next[l] = q_%s_%s(lane[l], lane[l ^ off]);\n", k->warp,
                   qir_expr_fn_spelling(c->red_fn), ktype_suffix(c->var->type));
      indent_to(o, ind + 2);
      fputs("memcpy(lane, next, sizeof lane);\n", o);
      indent_to(o, ind + 1);
      fputs("}\n", o);
      indent_to(o, ind + 1);
      if (st->chk) fprintf(o, "for (int l = 0; l < %d && w + l < %d; l++) %s[w + l] = lane[l];\n", k->warp, k->threads, v);
      else fprintf(o, "for (int l = 0; l < %d; l++) %s[w + l] = lane[l];\n", k->warp, v);
      indent_to(o, ind);
      fputs("}\n", o);
      continue;
    }
    if (c->kind == KS_FOR && c->uniform && ks_has_sync(c->body)) {
      flush_phase(o, k, &phase, st, ind);
      if (st->chk) {
        indent_to(o, ind);
        fputs("{\n", o);
        print_checked_loop_head(o, k, c, st, ind + 1);
        print_block_level(o, k, c->body, st, ind + 2);
        indent_to(o, ind + 1);
        fputs("}\n", o);
        indent_to(o, ind);
        fputs("}\n", o);
        continue;
      }
      indent_to(o, ind);
      fprintf(o, "for (int %s = ", c->var->name);
      kprint_expr(o, c->lo, k, st);
      fprintf(o, "; %s < ", c->var->name);
      kprint_expr(o, c->hi, k, st);
      fprintf(o, "; %s += %" PRId64 ") {\n", c->var->name, c->step);
      print_block_level(o, k, c->body, st, ind + 1);
      indent_to(o, ind);
      fputs("}\n", o);
      continue;
    }
    if (phase.n_items == phase.cap_items) flush_phase(o, k, &phase, st, ind);
    phase.items[phase.n_items++] = c;
  }
  flush_phase(o, k, &phase, st, ind);
}

/* Checked C: the shadow state of one launch (global regions, one shadow array
 * per shared variable, reset for every block).  A kernel that is its whole
 * launch writes fresh values: what its outputs' bytes held before (another
 * tensor's, in reused memory) no longer counts as written. */
static void print_check_setup(FILE *o, const kkernel *k) {
  for (int i = 0; i < k->n_params; i++) {
    const kparam *p = &k->params[i];
    fprintf(o, "  q_gp q_g_%s = q_gparam(%s, %" PRId64 "L, sizeof *%s, %d, %d, %d);\n  (void)q_g_%s;\n", p->name, p->name, p->numel,
            p->name, p->written, p->nc, p->written && !k->chk_group, p->name);
    const qir_type *t = k->args[i] ? &k->args[i]->type : NULL;
    bool symbolic = false;
    for (int d = 0; t && d < t->rank; d++) symbolic |= t->sym[d] != NULL;
    if (!symbolic || t->rank > 8 || qir_type_numel(t) != p->numel) continue;
    fprintf(o, "  q_gp_run(&q_g_%s, (void *)%s, %" PRId64 "L, %d, %d, (const long[]){", p->name, p->name, p->numel,
            p->written && !k->chk_group, t->rank);
    for (int d = 0; d < t->rank; d++) fprintf(o, "%s%" PRId64 "L", d ? ", " : "", t->dims[d]);
    fputs("}, (const long[]){", o);
    for (int d = 0; d < t->rank; d++) {
      char e[1024];
      if (t->sym[d]) cg_dim_c(t->sym[d], "q_chk_dims", e, sizeof e);
      else snprintf(e, sizeof e, "%" PRId64, t->dims[d]);
      fprintf(o, "%s(long)%s", d ? ", " : "", e);
    }
    fputs("});\n", o);
  }
  for (int i = 0; i < k->n_vars; i++)
    if (k->vars[i]->space == KV_SHARED)
      fprintf(o, "  q_scell *q_sh_%s = (q_scell *)malloc(sizeof(q_scell) * %" PRId64 ");\n"
                 "  if (!q_sh_%s) { fputs(\"qir check: out of memory\\n\", stderr); exit(2); }\n",
              k->vars[i]->name, k->vars[i]->size, k->vars[i]->name);
}

static void kernel(FILE *o, const kkernel *k) {
  kprint_style st = {.c_threads = true, .chk = k->chk};
  fprintf(o, "\n/* %s */\nstatic void %s(", k->summary, k->name);
  print_params(o, k);
  fputs(") {\n", o);
  for (int i = 0; i < k->n_params; i++)   /* operands the expression never reads */
    if (!ks_uses_param(k->body, i) && !ks_uses_param(k->lets, i)) fprintf(o, "  (void)%s;\n", k->params[i].name);
  if (k->rp_sync)   /* an rprogram's wave: the launch's generation (the host counts the launch after its last wave) */
    fprintf(o, "  const uint64_t q_gen = (uint64_t)%s[%d] + 1;\n  (void)q_gen;\n", k->params[k->n_params - 1].name, RP_SYNC_DONE_LAUNCHES);
  if (k->chk) {
    print_check_setup(o, k);
    fprintf(o, "  for (int bid = 0; bid < %" PRId64 "; bid++) {\n", k->grid);
    if (k->chk_group)   /* a wave of an rprogram: its blocks are the vEUs of that wave */
      fprintf(o, "    q_blk q_b = {.kernel = %d, .block = %ldL + bid, .threads = %d, .warp = %d};\n", k->chk_kernel, k->chk_block0, k->threads, k->warp);
    else
      fprintf(o, "    q_blk q_b = {.kernel = %d, .block = bid, .threads = %d, .warp = %d};\n", k->id, k->threads, k->warp);
    for (int i = 0; i < k->n_vars; i++)
      if (k->vars[i]->space == KV_SHARED) fprintf(o, "    q_shadow_reset(q_sh_%s, %" PRId64 "L);\n", k->vars[i]->name, k->vars[i]->size);
  } else {
    if (k->rows || k->bid_remap)
      fputs("#ifdef _OPENMP\n  #pragma omp parallel for schedule(static)\n#endif\n  for (int bid = 0; bid < (int)q_grid; bid++) {\n", o);
    else
      fprintf(o, "#ifdef _OPENMP\n  #pragma omp parallel for schedule(static)\n#endif\n  for (int bid = 0; bid < %" PRId64 "; bid++) {\n", k->grid);
  }
  for (int i = 0; i < k->n_vars; i++) kprint_var_decl(o, k->vars[i], k, &st, 2);
  if (k->bid_remap && !k->chk) {   /* the run's tiles only: this block's number in the bound's grid */
    fputs("    const int q_vb = (int)(", o);
    kprint_expr(o, k->bid_remap, k, &st);
    fputs(");\n", o);
    st.bid_remap = true;
  }
  /* each thread's queue of copies in flight */
  bool async = ks_contains(k->body, KS_CP_ASYNC) || ks_contains(k->body, KS_CP_COMMIT) || ks_contains(k->body, KS_CP_WAIT);
  if (async) fprintf(o, "    q_cpa_block q_cpa;\n    q_cpa_init(&q_cpa, %d);\n", k->threads);
  if (async && k->chk) fprintf(o, "    q_cpc_block q_cpc;\n    q_cpc_init(&q_cpc, %d);\n", k->threads);
  /* Hopper: the block's mbarriers (with the copies completing on them) and warpgroups' wgmma queues */
  if (k->n_mbars) fprintf(o, "    q_mbar_block q_mbs;\n    q_mbar_block_init(&q_mbs, %d, %d);\n", k->n_mbars, k->threads);
  for (int i = 0; k->n_mbars && i < k->n_vars; i++)   /* the GPU's mbarrier words: C keeps their state in q_mbs */
    if (k->vars[i]->space == KV_SHARED && k->vars[i]->type == KT_U64) fprintf(o, "    (void)%s;\n", k->vars[i]->name);
  bool wgmma = ks_contains(k->body, KS_WGMMA);
  if (wgmma) fprintf(o, "    q_wgmma_block q_wgs;\n    q_wgmma_block_init(&q_wgs, %d);\n", k->threads / 128);
  for (int i = 0; i < k->n_tmaps; i++) {
    const ktmap *m = &k->tmaps[i];
    fprintf(o, "    static const q_tmap q_tm%d = {.rank = %d, .dims = {", i, m->rank);
    for (int d = 0; d < m->rank; d++) fprintf(o, "%s%" PRId64 "L", d ? ", " : "", m->dims[d]);
    fputs("}, .strides = {", o);
    for (int d = 0; d < m->rank; d++) fprintf(o, "%s%" PRId64 "L", d ? ", " : "", m->strides[d]);
    fputs("}, .box = {", o);
    for (int d = 0; d < m->rank; d++) fprintf(o, "%s%" PRId64 "L", d ? ", " : "", m->box[d]);
    fputs("}, .estride = {", o);
    for (int d = 0; d < m->rank; d++) fprintf(o, "%s%" PRId64 "L", d ? ", " : "", m->estride[d] > 0 ? m->estride[d] : 1);
    fprintf(o, "}, .swizzle = %d};\n", m->swizzle);
  }
  print_block_level(o, k, k->body, &st, 2);
  if (wgmma) fputs("    q_wgmma_block_free(&q_wgs);\n", o);
  if (k->n_mbars) fputs("    q_mbar_block_free(&q_mbs);\n", o);
  if (async && k->chk) fputs("    q_cpc_end(&q_b, &q_cpc);\n", o);   /* copies never waited for */
  if (async) fputs("    q_cpa_free(&q_cpa);\n", o);
  fputs("  }\n", o);
  if (k->chk) {
    for (int i = 0; i < k->n_vars; i++)
      if (k->vars[i]->space == KV_SHARED) fprintf(o, "  free(q_sh_%s);\n", k->vars[i]->name);
    /* an rprogram's wave runs some tasks of its kernels: coverage is a whole launch's
     * (a device loop's phase runs all of one kernel's: chk_cover) */
    for (int i = 0; i < k->n_params && (!k->chk_group || k->chk_cover); i++)
      if (k->params[i].written)
        fprintf(o, "  q_coverage(%d, &q_g_%s, %" PRId64 "L, %d);\n", k->id, k->params[i].name, k->params[i].numel,
                cg_check_site(k->chk, k, "`%s`%s%s%s", k->params[i].name, k->args[i] && k->args[i]->name ? " (%" : "",
                              k->args[i] && k->args[i]->name ? k->args[i]->name : "", k->args[i] && k->args[i]->name ? ")" : ""));
  }
  fputs("}\n", o);
}

static void launch(FILE *o, const kkernel *k, const char *const *argv, const char *indent) {
  /* the checker: C launches of one group (an rprogram's waves, a device loop's phases) are one GPU launch */
  if (k->chk)
    fprintf(o, "%sq_launch(%d, %d, %d);\n", indent, !k->unordered_launch, k->chk_group ? k->chk_kernel : -1,
            k->chk_group && k->chk_kernel == k->id);
  fprintf(o, "%s%s(", indent, k->name);
  for (int i = 0; i < k->n_params; i++) fprintf(o, "%s%s", i ? ", " : "", argv[i]);
  if ((k->rows || k->bid_remap) && !k->chk) fprintf(o, ", %s", k->grid_text ? k->grid_text : "0");
  fputs(");\n", o);
}

/* C runs the waves as separate launches: nothing needs to be co-resident. */
static void coresident(FILE *o, const kkernel *k, const char *flag, const char *indent) {
  (void)k;
  fprintf(o, "%s%s = 1;\n", indent, flag);
}

const cg_printer cg_printer_c = {CG_C, prelude, kernel, launch, coresident};
