/* veu.c: `qviz -veu`, the rProgram that `qopt -rammer` packs.
 *
 * Draws a grid: one column per wave, one row per run of vEUs (persistent
 * blocks) that do the same thing in every wave; a cell names the kernel and
 * the rTask range the vEUs run there.  The rProgram is read from a schedule
 * attribute (or from an `rprogram` op's attributes once ops.def has one):
 *
 *   #rprogram{veus = 132, waves = [
 *       {barrier = 1, tasks = [{kernel = "k0", veus = [0, 63], tasks = [0, 64]},
 *                              {kernel = "k1", veu = 64, tasks = [0, 1]}]},
 *       [{kernel = "k2", veus = [0, 131], tasks = [0, 264]}]]}
 *
 * A wave is a dict {tasks = [...], barrier = 0|1} or directly the list of its
 * entries.  An entry names its kernel (`kernel` or `op`), the vEUs it occupies
 * (`veu = I` or `veus = [first, last]`, inclusive) and its rTasks
 * (`tasks = [begin, end)` or `task = I`), spread evenly over those vEUs.
 */
#include "qviz.h"

#include <stdlib.h>
#include <string.h>

#define MAX_VEUS 1000000

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
} veu_wave;

typedef struct {
  const qir_op *op;             /* where the rProgram was written, for messages */
  const qir_attr_val *veus, *waves;
} rprogram_ref;

static bool find_rprogram(qir_op *op, void *vctx) {
  rprogram_ref *ref = vctx;
  qir_attr *a = qir_op_attr(op, "rprogram");
  if (a && a->val.kind == QIR_ATTR_DICT) {
    ref->op = op;
    ref->veus = qir_attr_dict_get(&a->val, "veus");
    ref->waves = qir_attr_dict_get(&a->val, "waves");
    return false;
  }
  if (op_is_named(op, "rprogram")) {
    ref->op = op;
    qir_attr *v = qir_op_attr(op, "veus"), *w = qir_op_attr(op, "waves");
    ref->veus = v ? &v->val : NULL;
    ref->waves = w ? &w->val : NULL;
    return false;
  }
  return true;
}

static bool get_int(const qir_attr_val *v, int64_t *out) {
  if (!v || v->kind != QIR_ATTR_INT) return false;
  *out = v->i;
  return true;
}

/* `key = I` or `keys = [first, last]` */
static bool get_range(const qir_attr_val *entry, const char *one, const char *range, int64_t *lo, int64_t *hi) {
  const qir_attr_val *v = qir_attr_dict_get(entry, one);
  if (v) {
    if (!get_int(v, lo)) return false;
    *hi = *lo;
    return true;
  }
  v = qir_attr_dict_get(entry, range);
  if (!v || v->kind != QIR_ATTR_LIST || v->n != 2) return false;
  return get_int(&v->items[0], lo) && get_int(&v->items[1], hi);
}

static const char *entry_kernel(const qir_attr_val *entry) {
  const qir_attr_val *k = qir_attr_dict_get(entry, "kernel");
  if (!k) k = qir_attr_dict_get(entry, "op");
  if (!k || (k->kind != QIR_ATTR_STRING && k->kind != QIR_ATTR_WORD)) return NULL;
  return k->s;
}

static int kernel_color(const char **names, int *n_names, const char *k) {
  for (int i = 0; i < *n_names; i++)
    if (strcmp(names[i], k) == 0) return i;
  names[*n_names] = k;
  return (*n_names)++;
}

/* Reads the rProgram; false after a located error. */
static bool read_waves(const rprogram_ref *ref, qir_diag *d, veu_wave **out_waves, int *out_n,
                       int64_t *out_veus) {
  qir_loc loc = ref->op->loc;
  if (!ref->waves || ref->waves->kind != QIR_ATTR_LIST) {
    qir_error(d, loc, "rprogram: `waves` must be a list of waves");
    return false;
  }
  int n = ref->waves->n;
  veu_wave *waves = calloc((size_t)(n ? n : 1), sizeof *waves);
  int total_entries = 0;
  for (int w = 0; w < n; w++) {
    const qir_attr_val *wv = &ref->waves->items[w];
    total_entries += wv->kind == QIR_ATTR_LIST ? wv->n : 0;
    const qir_attr_val *t = qir_attr_dict_get(wv, "tasks");
    total_entries += t && t->kind == QIR_ATTR_LIST ? t->n : 0;
  }
  const char **names = calloc((size_t)(total_entries ? total_entries : 1), sizeof *names);
  int n_names = 0;
  int64_t max_veu = -1;
  bool ok = true;
  for (int w = 0; w < n && ok; w++) {
    const qir_attr_val *wv = &ref->waves->items[w];
    const qir_attr_val *list = wv;
    waves[w].barrier = true;
    if (wv->kind == QIR_ATTR_DICT) {
      list = qir_attr_dict_get(wv, "tasks");
      int64_t b;
      if (get_int(qir_attr_dict_get(wv, "barrier"), &b)) waves[w].barrier = b != 0;
    }
    if (!list || list->kind != QIR_ATTR_LIST) {
      qir_error(d, loc, "rprogram: wave %d must be a list of entries or {tasks = [...]}", w);
      ok = false;
      break;
    }
    waves[w].entries = calloc((size_t)(list->n ? list->n : 1), sizeof *waves[w].entries);
    for (int i = 0; i < list->n; i++) {
      const qir_attr_val *e = &list->items[i];
      veu_entry *ve = &waves[w].entries[waves[w].n];
      const char *k = e->kind == QIR_ATTR_DICT ? entry_kernel(e) : NULL;
      if (!k) {
        qir_error(d, loc, "rprogram: wave %d entry %d needs kernel = \"name\"", w, i);
        ok = false;
        break;
      }
      if (!get_range(e, "veu", "veus", &ve->veu_lo, &ve->veu_hi) || ve->veu_lo < 0 ||
          ve->veu_hi < ve->veu_lo || ve->veu_hi >= MAX_VEUS) {
        qir_error(d, loc, "rprogram: wave %d entry %d: veu = I or veus = [first, last] with 0 <= first <= last", w, i);
        ok = false;
        break;
      }
      int64_t t_lo = 0, t_hi = 0;
      const qir_attr_val *task = qir_attr_dict_get(e, "task");
      if (task) {
        if (!get_int(task, &t_lo)) ok = false;
        t_hi = t_lo + 1;
      } else {
        const qir_attr_val *tv = qir_attr_dict_get(e, "tasks");
        ok = tv && tv->kind == QIR_ATTR_LIST && tv->n == 2 && get_int(&tv->items[0], &t_lo) &&
             get_int(&tv->items[1], &t_hi);
      }
      if (!ok || t_lo < 0 || t_hi < t_lo) {
        qir_error(d, loc, "rprogram: wave %d entry %d: task = I or tasks = [begin, end] with 0 <= begin <= end", w, i);
        ok = false;
        break;
      }
      ve->kernel = k;
      ve->task_lo = t_lo;
      ve->task_hi = t_hi;
      ve->color = kernel_color(names, &n_names, k);
      if (ve->veu_hi > max_veu) max_veu = ve->veu_hi;
      waves[w].n++;
    }
  }
  int64_t veus = max_veu + 1;
  if (ok && ref->veus) {
    if (!get_int(ref->veus, &veus) || veus <= 0 || veus > MAX_VEUS) {
      qir_error(d, loc, "rprogram: `veus` must be a positive integer");
      ok = false;
    } else if (max_veu >= veus) {
      qir_error(d, loc, "rprogram: an entry uses vEU %lld but the program has %lld vEUs", (long long)max_veu,
                (long long)veus);
      ok = false;
    }
  }
  free(names);
  if (ok && veus <= 0) {
    qir_error(d, loc, "rprogram: no vEUs (give `veus` or some entries)");
    ok = false;
  }
  if (!ok) {
    for (int w = 0; w < n; w++) free(waves[w].entries);
    free(waves);
    return false;
  }
  *out_waves = waves;
  *out_n = n;
  *out_veus = veus;
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
    if (n_tasks % n_veus == 0) {   /* an even spread: show just this run's share */
      int64_t per = n_tasks / n_veus;
      t_lo = e->task_lo + (lo - e->veu_lo) * per;
      t_hi = e->task_lo + (hi - e->veu_lo) * per;
    }
    if (shown++) buf_puts(b, "\n");
    buf_put_clipped(b, e->kernel, 24);
    if (t_hi - t_lo == 1) buf_printf(b, " #%lld", (long long)t_lo);
    else buf_printf(b, " #%lld-%lld", (long long)t_lo, (long long)(t_hi - 1));
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
  rprogram_ref ref = {0};
  qir_walk(m->body, find_rprogram, &ref);
  if (!ref.op) {
    qir_error(d, (qir_loc){0}, "module @%s has no rprogram: -veu draws the rProgram that `qopt -rammer` writes; "
              "run it first", m->name ? m->name : "?");
    return 1;
  }
  veu_wave *waves;
  int n_waves;
  int64_t veus;
  if (!read_waves(&ref, d, &waves, &n_waves, &veus)) return 1;

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
  for (int w = 0; w < n_waves; w++)
    fprintf(out, "<TD><B>wave %d</B>%s</TD>", w, w > 0 && waves[w].barrier ? "<BR/>after barrier" : "");
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
