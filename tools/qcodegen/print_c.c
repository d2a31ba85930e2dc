/* print_c.c: the C printer.  Blocks become an OpenMP parallel loop; the
 * threads of a block become inner loops, one per phase (the code between two
 * barriers), so the C program runs exactly the GPU plan: same tiles, same
 * shared-memory staging, same reduction order within a warp.  Per-thread state
 * that survives a barrier is an array indexed by the thread.  Builds with
 * `cc -O2 -fopenmp`, and serially without -fopenmp. */
#include <inttypes.h>

#include "kast.h"

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
        "static inline int q_h2d(void *d, const void *s, size_t n) { if (n) memcpy(d, s, n); return 0; }\n"
        "static inline int q_d2h(void *d, const void *s, size_t n) { if (n) memcpy(d, s, n); return 0; }\n"
        "static inline int q_d2d(void *d, const void *s, size_t n) { if (n && d != s) memmove(d, s, n); return 0; }\n"
        "static inline int q_sync(void) { return 0; }\n",
        o);
}

static void print_params(FILE *o, const kkernel *k) {
  for (int i = 0; i < k->n_params; i++)
    fprintf(o, "%s%s%s *restrict %s", i ? ", " : "", k->params[i].written ? "" : "const ",
            kdtype_c(k->params[i].dtype), k->params[i].name);
}

static void indent_to(FILE *o, int n) { fprintf(o, "%*s", 2 * n, ""); }

static void flush_phase(FILE *o, const kkernel *k, kstmt *phase, const kprint_style *st, int ind) {
  if (!phase->n_items) return;
  indent_to(o, ind);
  fprintf(o, "for (int tid = 0; tid < %d; tid++) {\n", k->threads);
  kprint_lets(o, k, phase, st, ind + 1);
  kprint_stmt(o, phase, k, st, ind + 1);
  indent_to(o, ind);
  fputs("}\n", o);
  phase->n_items = 0;
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
      continue;
    }
    if (c->kind == KS_WARP_REDUCE) {
      flush_phase(o, k, &phase, st, ind);
      const char *v = c->var->name;
      const char *t = ktype_c(c->var->type);
      indent_to(o, ind);
      fprintf(o, "for (int w = 0; w < %d; w += %d) { /* warp reduction: lanes combined as on the GPU */\n", k->threads, k->warp);
      indent_to(o, ind + 1);
      fprintf(o, "%s lane[%d];\n", t, k->warp);
      indent_to(o, ind + 1);
      fprintf(o, "for (int l = 0; l < %d; l++) lane[l] = %s[w + l];\n", k->warp, v);
      indent_to(o, ind + 1);
      fprintf(o, "for (int off = %d; off > 0; off >>= 1) {\n", k->warp / 2);
      indent_to(o, ind + 2);
      fprintf(o, "%s next[%d];\n", t, k->warp);
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
      fprintf(o, "for (int l = 0; l < %d; l++) %s[w + l] = lane[l];\n", k->warp, v);
      indent_to(o, ind);
      fputs("}\n", o);
      continue;
    }
    if (c->kind == KS_FOR && c->uniform && ks_has_sync(c->body)) {
      flush_phase(o, k, &phase, st, ind);
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

static void kernel(FILE *o, const kkernel *k) {
  kprint_style st = {.c_threads = true};
  fprintf(o, "\n/* %s */\nstatic void %s(", k->summary, k->name);
  print_params(o, k);
  fputs(") {\n", o);
  for (int i = 0; i < k->n_params; i++)   /* operands the expression never reads */
    if (!ks_uses_param(k->body, i) && !ks_uses_param(k->lets, i)) fprintf(o, "  (void)%s;\n", k->params[i].name);
  fprintf(o, "#ifdef _OPENMP\n  #pragma omp parallel for schedule(static)\n#endif\n  for (int bid = 0; bid < %" PRId64 "; bid++) {\n", k->grid);
  for (int i = 0; i < k->n_vars; i++) kprint_var_decl(o, k->vars[i], &st, k->threads, 2);
  print_block_level(o, k, k->body, &st, 2);
  fputs("  }\n}\n", o);
}

static void launch(FILE *o, const kkernel *k, const char *const *argv, const char *indent) {
  fprintf(o, "%s%s(", indent, k->name);
  for (int i = 0; i < k->n_params; i++) fprintf(o, "%s%s", i ? ", " : "", argv[i]);
  fputs(");\n", o);
}

const cg_printer cg_printer_c = {CG_C, prelude, kernel, launch};
