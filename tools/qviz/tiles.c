/* tiles.c: `qviz -tiles`, the tile plan.
 *
 * One table per compute op (and per op or kernel with a #tile): the tile at
 * each memory level (block in shared memory, thread in registers, reduction
 * step), grid, threads per block, shared-memory padding, vector width,
 * resources, and the estimated time with its share of the model's total.  The
 * schema is what `qopt -roller` writes:
 *   #tile{block=[..], thread=[..], rstep=[..], grid=[..], threads=N, smem_pad=N,
 *         vec=N, smem=BYTES, regs=N, est_us=F, target="h100"}
 * A summary table on top gives the total and the most expensive ops.
 */
#include "qviz.h"

#include <stdlib.h>
#include <string.h>

#define TABLES_PER_ROW 4
#define TOP_N 5

typedef struct {
  qir_op *op;
  qviz_tile tile;
  bool counted;         /* part of the total (not inside a kernel that has its own estimate) */
} tile_entry;

typedef struct {
  tile_entry *items;
  int n, cap;
} tile_list;

static bool inside_estimated_region(const qir_op *op) {
  for (const qir_region *r = op->parent; r && r->parent_op; r = r->parent_op->parent)
    if (tile_of(r->parent_op).est_us >= 0) return true;
  return false;
}

static bool collect(qir_op *op, void *vctx) {
  tile_list *l = vctx;
  qviz_tile t = tile_of(op);
  if (!t.present && !op_is_compute(op)) return true;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    tile_entry *items = realloc(l->items, sizeof *items * (size_t)l->cap);
    if (!items) {
      fputs("qviz: error: out of memory\n", stderr);
      abort();
    }
    l->items = items;
  }
  l->items[l->n++] = (tile_entry){.op = op, .tile = t, .counted = !inside_estimated_region(op)};
  return true;
}

static void put_title(qviz_buf *b, const qir_op *op) {
  if (op_is_named(op, "kernel")) {
    buf_puts(b, "kernel @");
    buf_put_clipped(b, kernel_op_name(op), 40);
    return;
  }
  if (op->n_results >= 1) {
    const qir_value *v = op->results[0];
    if (v->name) {
      buf_puts(b, "%");
      buf_put_clipped(b, v->name, 32);
    } else {
      buf_printf(b, "%%%d", v->id);
    }
    buf_puts(b, " = ");
  }
  buf_puts(b, op_name(op));
}

/* White to orange by how big a share of the total an op takes (relative to
 * the largest share, so the hottest op is always the darkest). */
static void heat_color(char out[8], double rel) {
  if (rel < 0) rel = 0;
  if (rel > 1) rel = 1;
  int r = 255 - (int)(rel * (255 - 0xf4)), gr = 255 - (int)(rel * (255 - 0x8a)),
      bl = 255 - (int)(rel * (255 - 0x4a));
  snprintf(out, 8, "#%02x%02x%02x", r, gr, bl);
}

static void row(FILE *out, const char *key, const char *val) {
  fputs("<TR><TD ALIGN=\"LEFT\">", out);
  dot_html(out, key);
  fputs("</TD><TD ALIGN=\"LEFT\">", out);
  dot_html(out, val);
  fputs("</TD></TR>", out);
}

static void row_dims(FILE *out, qviz_buf *b, const char *key, const qir_attr_val *v) {
  buf_clear(b);
  fmt_dims(b, v);
  row(out, key, b->s);
}

static void row_int(FILE *out, qviz_buf *b, const char *key, int64_t v, const char *unit) {
  buf_clear(b);
  if (v < 0) buf_puts(b, "-");
  else buf_printf(b, "%lld%s", (long long)v, unit);
  row(out, key, b->s);
}

static void emit_table(FILE *out, int index, const tile_entry *e, double total, double max_us) {
  qviz_buf b = {0};
  const qir_op *op = e->op;
  const qviz_tile *t = &e->tile;
  fprintf(out, "  t%d [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"3\">", index);
  put_title(&b, op);
  fprintf(out, "<TR><TD COLSPAN=\"2\" BGCOLOR=\"%s\"><B>", t->present ? "#fcd9b0" : "#eeeeee");
  dot_html(out, b.s);
  fputs("</B></TD></TR>", out);
  buf_clear(&b);
  for (int i = 0; i < op->n_results; i++) {
    if (i) buf_puts(&b, ", ");
    fmt_type(&b, &op->results[i]->type);
  }
  const char *group = kernel_group_of(op);
  if (group) {
    buf_puts(&b, "\nkernel @");
    buf_put_clipped(&b, group, 32);
  }
  if (b.len) {
    fputs("<TR><TD COLSPAN=\"2\">", out);
    dot_html(out, b.s);
    fputs("</TD></TR>", out);
  }
  if (!t->present) {
    fputs("<TR><TD COLSPAN=\"2\"><I>no tile plan (qopt -roller writes one)</I></TD></TR>", out);
  } else {
    if (t->flash) {               /* one fused attention kernel: rows x keys per step, causal skip, key splits */
      buf_clear(&b);
      fmt_dims(&b, t->flash);
      bool wgmma = t->flash_mma && t->flash_mma->n == 3 && t->flash_mma->items[0].kind == QIR_ATTR_INT && t->flash_mma->items[0].i == 64;
      buf_printf(&b, " (query rows x keys per step)%s", wgmma ? ", wgmma" : t->flash_mma ? ", mma.sync" : ", SIMT");
      row(out, "flash attention", b.s);
      row_int(out, &b, "stages", t->stages, "");
      row_int(out, &b, "key splits", t->splits > 0 ? t->splits : 1, "");
      row_int(out, &b, "key tiles skipped", t->skipped_tiles, "");
    }
    row_dims(out, &b, "block (smem)", t->block);
    row_dims(out, &b, "thread (regs)", t->thread);
    row_dims(out, &b, "rstep", t->rstep);
    row_dims(out, &b, "grid", t->grid);
    row_int(out, &b, "threads/block", t->threads, "");
    row_int(out, &b, "smem pad", t->smem_pad, "");
    row_int(out, &b, "vector width", t->vec, "");
    row_int(out, &b, "smem/block", t->smem, " B");
    row_int(out, &b, "regs/thread", t->regs, "");
    if (t->mma) {                 /* matrix units: instruction shape, and M, N, K axes */
      buf_clear(&b);
      fmt_dims(&b, t->mma);
      const qir_attr_val *ax = t->mma_axes;
      if (ax && ax->kind == QIR_ATTR_LIST && ax->n == 3 && ax->items[0].kind == QIR_ATTR_INT &&
          ax->items[1].kind == QIR_ATTR_INT && ax->items[2].kind == QIR_ATTR_INT)
        buf_printf(&b, ": M = axis %lld, N = axis %lld, K = reduction %lld", (long long)ax->items[0].i,
                   (long long)ax->items[1].i, (long long)ax->items[2].i);
      row(out, "matrix units", b.s);
    }
    if (t->rsplit > 1) row_int(out, &b, "lanes/output", t->rsplit, "");
    buf_clear(&b);
    char color[8] = "#ffffff";
    if (t->est_us >= 0) {
      buf_printf(&b, "%.3g us", t->est_us);
      if (total > 0 && e->counted) buf_printf(&b, " (%.1f%%)", 100.0 * t->est_us / total);
      else if (!e->counted) buf_puts(&b, " (in kernel)");
      if (max_us > 0 && e->counted) heat_color(color, t->est_us / max_us);
    } else {
      buf_puts(&b, "-");
    }
    fputs("<TR><TD ALIGN=\"LEFT\">est. time</TD>", out);
    fprintf(out, "<TD ALIGN=\"LEFT\" BGCOLOR=\"%s\"><B>", color);
    dot_html(out, b.s);
    fputs("</B></TD></TR>", out);
    if (t->target) {
      buf_clear(&b);
      buf_put_clipped(&b, t->target, 24);
      row(out, "target", b.s);
    }
  }
  fputs("</TABLE>>];\n", out);
  buf_free(&b);
}

static int by_est_desc(const void *pa, const void *pb) {
  const tile_entry *a = *(const tile_entry *const *)pa, *b = *(const tile_entry *const *)pb;
  return (a->tile.est_us < b->tile.est_us) - (a->tile.est_us > b->tile.est_us);
}

static void emit_summary(FILE *out, qir_module *m, const tile_list *l, double total, int top) {
  qviz_buf b = {0};
  int planned = 0;
  const char *target = NULL;
  const tile_entry **ranked = calloc((size_t)(l->n ? l->n : 1), sizeof *ranked);
  int n_ranked = 0;
  for (int i = 0; i < l->n; i++) {
    if (!l->items[i].tile.present) continue;
    planned++;
    if (!target) target = l->items[i].tile.target;
    if (l->items[i].counted && l->items[i].tile.est_us >= 0) ranked[n_ranked++] = &l->items[i];
  }
  qsort(ranked, (size_t)n_ranked, sizeof *ranked, by_est_desc);
  fputs("  summary [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"3\">", out);
  buf_puts(&b, "tile plan of @");
  buf_put_clipped(&b, m->name ? m->name : "module", 60);
  fputs("<TR><TD COLSPAN=\"3\" BGCOLOR=\"#dbe4f5\"><B>", out);
  dot_html(out, b.s);
  fputs("</B></TD></TR>", out);
  buf_clear(&b);
  buf_printf(&b, "%d of %d ops have a tile plan", planned, l->n);
  if (top > 0 && top < l->n) buf_printf(&b, "; tables for the %d most expensive", top);
  if (target) {
    buf_puts(&b, "; target ");
    buf_put_clipped(&b, target, 24);
  }
  fputs("<TR><TD COLSPAN=\"3\">", out);
  dot_html(out, b.s);
  fputs("</TD></TR>", out);
  buf_clear(&b);
  if (n_ranked) buf_printf(&b, "estimated total %.4g us", total);
  else buf_puts(&b, planned ? "no time estimates (est_us)" : "no tile plans: run qopt -roller first");
  fputs("<TR><TD COLSPAN=\"3\"><B>", out);
  dot_html(out, b.s);
  fputs("</B></TD></TR>", out);
  for (int i = 0; i < n_ranked && i < TOP_N; i++) {
    buf_clear(&b);
    put_title(&b, ranked[i]->op);
    fputs("<TR><TD ALIGN=\"LEFT\">", out);
    dot_html(out, b.s);
    buf_clear(&b);
    buf_printf(&b, "%.3g us", ranked[i]->tile.est_us);
    fputs("</TD><TD ALIGN=\"RIGHT\">", out);
    dot_html(out, b.s);
    buf_clear(&b);
    buf_printf(&b, "%.1f%%", total > 0 ? 100.0 * ranked[i]->tile.est_us / total : 0.0);
    fputs("</TD><TD ALIGN=\"RIGHT\">", out);
    dot_html(out, b.s);
    fputs("</TD></TR>", out);
  }
  fputs("</TABLE>>];\n", out);
  free(ranked);
  buf_free(&b);
}

/* Keeps the `top` entries with the largest estimates, in program order. */
static void keep_top(tile_list *l, int top) {
  if (top <= 0 || top >= l->n) return;
  const tile_entry **ranked = malloc(sizeof *ranked * (size_t)l->n);
  for (int i = 0; i < l->n; i++) ranked[i] = &l->items[i];
  qsort(ranked, (size_t)l->n, sizeof *ranked, by_est_desc);
  double cut = ranked[top - 1]->tile.est_us;
  free(ranked);
  int above = 0, kept = 0;
  for (int i = 0; i < l->n; i++) above += l->items[i].tile.est_us > cut;
  int ties = top - above;   /* room for entries equal to the cut, earliest first */
  for (int i = 0; i < l->n; i++) {
    double e = l->items[i].tile.est_us;
    if (e < 0 || e < cut) continue;
    if (e == cut && ties-- <= 0) continue;
    l->items[kept++] = l->items[i];
  }
  l->n = kept;
}

int qviz_tiles(FILE *out, qir_module *m, qir_diag *d, int top) {
  (void)d;
  tile_list l = {0};
  qir_walk(m->body, collect, &l);
  tile_list shown = l;
  double total = 0, max_us = 0;
  for (int i = 0; i < l.n; i++) {
    const tile_entry *e = &l.items[i];
    if (!e->counted || e->tile.est_us < 0) continue;
    total += e->tile.est_us;
    if (e->tile.est_us > max_us) max_us = e->tile.est_us;
  }
  fputs("digraph ", out);
  dot_quoted(out, m->name ? m->name : "module");
  fputs(" {\n"
        "  graph [rankdir=TB, fontname=\"Helvetica\", nodesep=0.3, ranksep=0.3];\n"
        "  node [shape=plaintext, fontname=\"Helvetica\", fontsize=10];\n"
        "  edge [style=invis];\n",
        out);
  emit_summary(out, m, &l, total, top);
  if (top > 0) {
    shown.items = malloc(sizeof *shown.items * (size_t)(l.n ? l.n : 1));
    if (l.n) memcpy(shown.items, l.items, sizeof *shown.items * (size_t)l.n);
    keep_top(&shown, top);
  }
  for (int i = 0; i < shown.n; i++) emit_table(out, i, &shown.items[i], total, max_us);
  /* Rows of TABLES_PER_ROW in program order, the summary above them. */
  for (int start = 0; start < shown.n; start += TABLES_PER_ROW) {
    fputs("  { rank=same;", out);
    for (int i = start; i < shown.n && i < start + TABLES_PER_ROW; i++) fprintf(out, " t%d;", i);
    fputs(" }\n", out);
    if (start == 0) fputs("  summary -> t0;\n", out);
    else fprintf(out, "  t%d -> t%d;\n", start - TABLES_PER_ROW, start);
    for (int i = start + 1; i < shown.n && i < start + TABLES_PER_ROW; i++) fprintf(out, "  t%d -> t%d;\n", i - 1, i);
  }
  fputs("}\n", out);
  if (shown.items != l.items) free(shown.items);
  free(l.items);
  return 0;
}
