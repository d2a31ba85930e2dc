/* veu.c: `qviz -veu`, the rProgram that `qopt -rammer` packs.
 *
 * Draws a grid: one column per wave, one row per run of vEUs (persistent
 * blocks) that do the same thing in every wave; a cell names the kernel and
 * the rTasks the vEUs run there.  The rProgram is the `rprogram` op
 * (qir/rprogram.h), read and checked by the IR library:
 *
 *   rprogram %a, %b, %c {veus = 8, waves = [
 *       {run = [{kernel = 0, tasks = [0, 4], veus = [0, 3]}, {kernel = 1, tasks = [0, 2], veus = [4, 5]}]},
 *       {barrier = 1, run = [{kernel = 2, tasks = [0, 16], veus = [0, 7]}]}]}
 *
 * vEU v of an entry runs tasks t0 + (v - v0), then every n-th (n = its vEUs).
 * A column header says how the wave is ordered after the ones before it.
 */
#include "qviz.h"

#include <stdlib.h>
#include <string.h>

#include "rprogram.h"

typedef struct {
  const char *kernel;
  int64_t veu_lo, veu_hi;       /* inclusive */
  int64_t task_lo, task_hi;     /* [lo, hi) */
  int color;
} veu_entry;

typedef struct {
  veu_entry *entries;
  int n;
  bool barrier;
  int n_waits;
} veu_wave;

static bool find_rprogram(qir_op *op, void *vctx) {
  const qir_op **ref = vctx;
  if (op->code == QIR_OP_RPROGRAM) {
    *ref = op;
    return false;
  }
  return true;
}

/* Reads the rProgram; false after a located error. */
static bool read_waves(qir_module *m, const qir_op *op, qir_diag *d, veu_wave **out_waves, int *out_n, int64_t *out_veus) {
  qir_rprogram p;
  if (!qir_rprogram_read(m, op, &p, d)) return false;
  veu_wave *waves = calloc((size_t)(p.n_waves ? p.n_waves : 1), sizeof *waves);
  for (int w = 0; w < p.n_waves; w++) {
    const qir_rp_wave *pw = &p.waves[w];
    waves[w].barrier = pw->barrier;
    waves[w].n_waits = pw->n_waits;
    waves[w].n = pw->n_runs;
    waves[w].entries = calloc((size_t)(pw->n_runs ? pw->n_runs : 1), sizeof *waves[w].entries);
    for (int i = 0; i < pw->n_runs; i++) {
      const qir_rp_run *r = &pw->runs[i];
      const qir_value *v = op->operands[r->kernel];
      waves[w].entries[i] = (veu_entry){.kernel = v->name ? v->name : qir_sprintf(m, "kernel %d", r->kernel),
                                        .veu_lo = r->veu_lo, .veu_hi = r->veu_hi, .task_lo = r->task_lo,
                                        .task_hi = r->task_hi, .color = r->kernel};
    }
  }
  *out_waves = waves;
  *out_n = p.n_waves;
  *out_veus = p.veus;
  return true;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The cell of vEUs [lo, hi) in one wave: the entries covering that run. */
static void emit_cell(FILE *out, qviz_buf *b, const veu_wave *w, int64_t lo, int64_t hi) {
  int shown = 0, color = -1;
  buf_clear(b);
  for (int i = 0; i < w->n; i++) {
    const veu_entry *e = &w->entries[i];
    if (e->veu_hi < lo || e->veu_lo >= hi) continue;
    int64_t n_veus = e->veu_hi - e->veu_lo + 1, n_tasks = e->task_hi - e->task_lo;
    int64_t t_lo = e->task_lo, t_hi = e->task_hi;
    bool one_each = n_tasks <= n_veus;
    if (one_each) {   /* one task per vEU: this run's share */
      t_lo = e->task_lo + (lo - e->veu_lo);
      t_hi = e->task_lo + (hi - e->veu_lo);
      if (t_hi > e->task_hi) t_hi = e->task_hi;
      if (t_lo >= t_hi) continue;
    }
    if (shown++) buf_puts(b, "\n");
    buf_put_clipped(b, e->kernel, 24);
    if (t_hi - t_lo == 1) buf_printf(b, " #%lld", (long long)t_lo);
    else buf_printf(b, " #%lld-%lld", (long long)t_lo, (long long)(t_hi - 1));
    if (!one_each) buf_printf(b, " (%lld per vEU)", (long long)((n_tasks + n_veus - 1) / n_veus));
    if (color < 0) color = e->color;
  }
  if (!shown) {
    fputs("<TD BGCOLOR=\"#f4f4f4\"><FONT COLOR=\"#999999\">idle</FONT></TD>", out);
    return;
  }
  fprintf(out, "<TD BGCOLOR=\"%s\">", palette_color(color));
  dot_html(out, b->s);
  fputs("</TD>", out);
}

int qviz_veu(FILE *out, qir_module *m, qir_diag *d) {
  const qir_op *rp = NULL;
  qir_walk(m->body, find_rprogram, &rp);
  if (!rp) {
    qir_error(d, m->loc, "module @%s has no rprogram: -veu draws the rProgram that `qopt -rammer` writes; "
              "run it first", m->name ? m->name : "?");
    return 1;
  }
  veu_wave *waves;
  int n_waves;
  int64_t veus;
  if (!read_waves(m, rp, d, &waves, &n_waves, &veus)) return 1;

  /* Row boundaries: every place an entry starts or ends, so within a row each
   * wave's cell is the same for all its vEUs. */
  int n_cuts = 2;
  for (int w = 0; w < n_waves; w++) n_cuts += 2 * waves[w].n;
  int64_t *cuts = malloc(sizeof *cuts * (size_t)n_cuts);
  int k = 0;
  cuts[k++] = 0;
  cuts[k++] = veus;
  for (int w = 0; w < n_waves; w++)
    for (int i = 0; i < waves[w].n; i++) {
      cuts[k++] = waves[w].entries[i].veu_lo;
      cuts[k++] = waves[w].entries[i].veu_hi + 1;
    }
  qsort(cuts, (size_t)k, sizeof *cuts, cmp_i64);
  int n_unique = 0;
  for (int i = 0; i < k; i++)
    if (!n_unique || cuts[n_unique - 1] != cuts[i]) cuts[n_unique++] = cuts[i];

  qviz_buf b = {0};
  fputs("digraph ", out);
  dot_quoted(out, m->name ? m->name : "module");
  fputs(" {\n  graph [fontname=\"Helvetica\"];\n  node [shape=plaintext, fontname=\"Helvetica\", fontsize=10];\n", out);
  fputs("  rprogram [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"4\">", out);
  buf_puts(&b, "rProgram of @");
  buf_put_clipped(&b, m->name ? m->name : "module", 60);
  buf_printf(&b, ": %lld vEUs, %d waves", (long long)veus, n_waves);
  fprintf(out, "<TR><TD COLSPAN=\"%d\" BGCOLOR=\"#dbe4f5\"><B>", n_waves + 1);
  dot_html(out, b.s);
  fputs("</B></TD></TR><TR><TD><B>vEU</B></TD>", out);
  for (int w = 0; w < n_waves; w++) {
    fprintf(out, "<TD><B>wave %d</B>%s", w, waves[w].barrier ? "<BR/>after barrier" : "");
    if (waves[w].n_waits) fprintf(out, "<BR/>%d wait%s", waves[w].n_waits, waves[w].n_waits > 1 ? "s" : "");
    fputs("</TD>", out);
  }
  fputs("</TR>", out);
  for (int r = 0; r + 1 < n_unique; r++) {
    int64_t lo = cuts[r], hi = cuts[r + 1];
    if (lo >= veus) break;
    buf_clear(&b);
    if (hi - lo == 1) buf_printf(&b, "%lld", (long long)lo);
    else buf_printf(&b, "%lld-%lld", (long long)lo, (long long)(hi - 1));
    fputs("<TR><TD ALIGN=\"RIGHT\">", out);
    dot_html(out, b.s);
    fputs("</TD>", out);
    for (int w = 0; w < n_waves; w++) emit_cell(out, &b, &waves[w], lo, hi);
    fputs("</TR>", out);
  }
  fputs("</TABLE>>];\n}\n", out);
  buf_free(&b);
  free(cuts);
  for (int w = 0; w < n_waves; w++) free(waves[w].entries);
  free(waves);
  return 0;
}
