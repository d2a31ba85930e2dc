/* rprogram.c: reading and checking Rammer's rProgram (see rprogram.h). */
#include "rprogram.h"
#include "attention.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "target.h"

#define NEVER INT32_MAX

static qir_loc dict_loc(const qir_attr_val *d, qir_loc dflt) {
  if (d && d->kind == QIR_ATTR_DICT && d->n > 0 && d->entries[0].loc.line > 0) return d->entries[0].loc;
  return dflt;
}

static qir_loc key_loc(const qir_attr_val *d, const char *key, qir_loc dflt) {
  if (d && d->kind == QIR_ATTR_DICT)
    for (int i = 0; i < d->n; i++)
      if (d->entries[i].key && !strcmp(d->entries[i].key, key) && d->entries[i].loc.line > 0) return d->entries[i].loc;
  return dflt;
}

static bool get_int(const qir_attr_val *v, int64_t *out) {
  if (!v || v->kind != QIR_ATTR_INT) return false;
  *out = v->i;
  return true;
}

static bool get_pair(const qir_attr_val *v, int64_t *a, int64_t *b) {
  return v && v->kind == QIR_ATTR_LIST && v->n == 2 && get_int(&v->items[0], a) && get_int(&v->items[1], b);
}

static bool only_keys(const qir_attr_val *d, const char *const *keys, qir_loc loc, const char *what, qir_diag *diag) {
  for (int i = 0; i < d->n; i++) {
    bool known = false;
    for (const char *const *k = keys; *k; k++) known |= d->entries[i].key && !strcmp(d->entries[i].key, *k);
    if (!known) {
      qir_error(diag, d->entries[i].loc.line > 0 ? d->entries[i].loc : loc, "rprogram: unknown key '%s' in %s",
                d->entries[i].key ? d->entries[i].key : "", what);
      return false;
    }
  }
  return true;
}

/* `key = [lo, hi]` (or the one-element form `one = I`, read as [I, I + one_hi]) */
static bool read_range(const qir_attr_val *e, const char *range, const char *one, int64_t one_hi, int64_t *lo, int64_t *hi) {
  const qir_attr_val *v = qir_attr_dict_get(e, one);
  if (v) {
    /* a value so large that the range would overflow is no task (the reader's caller says which) */
    if (qir_attr_dict_get(e, range) || !get_int(v, lo) || *lo > INT64_MAX - one_hi) return false;
    *hi = *lo + one_hi;
    return true;
  }
  return get_pair(qir_attr_dict_get(e, range), lo, hi);
}

static bool read_kernel(const qir_attr_val *e, int n_kernels, int *out) {
  int64_t k;
  if (!get_int(qir_attr_dict_get(e, "kernel"), &k) || k < 0 || k >= n_kernels) return false;
  *out = (int)k;
  return true;
}

bool qir_op_is_view(const qir_op *op) {
  return ((op->code == QIR_OP_RESHAPE || op->code == QIR_OP_IDENTITY) && op->n_operands >= 1 && op->n_results == 1 &&
          op->results[0]->type.dtype == op->operands[0]->type.dtype &&
          qir_type_numel(&op->results[0]->type) == qir_type_numel(&op->operands[0]->type)) ||
         qir_attention_folds_slice(op);   /* read in place by a flash attention's loads */
}

bool qir_rprogram_kernel_of_plan(const qir_attr_val *tile, qir_rp_kernel *out) {
  if (!tile || tile->kind != QIR_ATTR_DICT) return false;
  const qir_attr_val *grid = qir_attr_dict_get(tile, "grid");
  if (!grid || grid->kind != QIR_ATTR_LIST) return false;
  int64_t tasks = 1;
  for (int i = 0; i < grid->n; i++) {
    if (grid->items[i].kind != QIR_ATTR_INT || grid->items[i].i < 0 || grid->items[i].i > (INT64_C(1) << 31)) return false;
    tasks *= grid->items[i].i;
    if (tasks > (INT64_C(1) << 31)) return false;
  }
  int64_t threads = 0, regs = 32, smem = 0;
  if (!get_int(qir_attr_dict_get(tile, "threads"), &threads) || threads <= 0) return false;
  get_int(qir_attr_dict_get(tile, "regs"), &regs);
  get_int(qir_attr_dict_get(tile, "smem"), &smem);
  *out = (qir_rp_kernel){.op = NULL, .tasks = tasks, .threads = threads, .regs = regs > 0 ? regs : 1, .smem = smem > 0 ? smem : 0};
  return true;
}

bool qir_rprogram_kernel_of(const qir_op *op, qir_rp_kernel *out) {
  const qir_attr *tile = op ? qir_op_attr(op, "tile") : NULL;
  /* a Welder `kernel` group is one kernel too: its tasks are its blocks */
  if (!tile || (op->n_regions && op->code != QIR_OP_KERNEL) || qir_op_is_view(op)) return false;
  if (!qir_rprogram_kernel_of_plan(&tile->val, out)) return false;
  out->op = op;
  return true;
}

static const char *vname(qir_module *m, const qir_op *op) {
  const qir_value *v = op->n_results ? op->results[0] : NULL;
  if (!v) return "?";
  return v->name ? qir_sprintf(m, "%%%s", v->name) : qir_sprintf(m, "%%<value %d>", v->id);
}

bool qir_rprogram_read(qir_module *m, const qir_op *op, qir_rprogram *p, qir_diag *d) {
  memset(p, 0, sizeof *p);
  p->op = op;
  qir_loc loc = op->loc;
  p->target = qir_op_attr_str(op, "target", QIR_TARGET_DEFAULT);
  const qir_attr *va = qir_op_attr(op, "veus"), *wa = qir_op_attr(op, "waves");
  if (!va || va->val.kind != QIR_ATTR_INT || va->val.i <= 0 || va->val.i > (INT64_C(1) << 24)) {
    qir_error(d, va && va->loc.line ? va->loc : loc, "rprogram: `veus` must be a positive integer (the vEU count)");
    return false;
  }
  p->veus = va->val.i;
  /* #unpacked_upto (modules with dimension symbols): a value in range per symbol */
  const qir_attr *ua = qir_op_attr(op, "unpacked_upto");
  bool upto_ok = !ua || (ua->val.kind == QIR_ATTR_LIST && ua->val.n == m->n_syms && m->n_syms > 0);
  for (int k = 0; upto_ok && ua && k < ua->val.n; k++)
    upto_ok = ua->val.items[k].kind == QIR_ATTR_INT && ua->val.items[k].i >= m->syms[k].lo && ua->val.items[k].i <= m->syms[k].hi;
  if (!upto_ok) {
    qir_error(d, ua->loc.line ? ua->loc : loc, "rprogram: `unpacked_upto` must list one value per dimension symbol of the module "
              "(%d), each in its symbol's range", m->n_syms);
    return false;
  }
  if (!wa || wa->val.kind != QIR_ATTR_LIST) {
    qir_error(d, wa && wa->loc.line ? wa->loc : loc, "rprogram: `waves` must be a list of waves {run = [...], barrier = 0|1, wait = [...]}");
    return false;
  }
  p->n_kernels = op->n_operands;
  p->kernels = qir_alloc(m, sizeof *p->kernels * (size_t)(op->n_operands + 1));
  for (int i = 0; i < op->n_operands; i++) p->kernels[i].op = op->operands[i] ? op->operands[i]->def : NULL;
  const qir_attr_val *wl = &wa->val;
  qir_loc wloc = wa->loc.line ? wa->loc : loc;
  p->n_waves = wl->n;
  p->waves = qir_alloc(m, sizeof *p->waves * (size_t)(wl->n + 1));
  static const char *const wave_keys[] = {"run", "barrier", "wait", NULL};
  static const char *const run_keys[] = {"kernel", "veus", "veu", "tasks", "task", NULL};
  static const char *const wait_keys[] = {"kernel", "tasks", "task", NULL};
  for (int w = 0; w < wl->n; w++) {
    const qir_attr_val *wv = &wl->items[w];
    qir_rp_wave *wave = &p->waves[w];
    wave->loc = dict_loc(wv, wloc);
    if (wv->kind != QIR_ATTR_DICT) {
      qir_error(d, wloc, "rprogram: wave %d must be a dict {run = [...], barrier = 0|1, wait = [...]}", w);
      return false;
    }
    if (!only_keys(wv, wave_keys, wave->loc, "a wave (run, barrier, wait)", d)) return false;
    const qir_attr_val *b = qir_attr_dict_get(wv, "barrier");
    int64_t bi = 0;
    if (b && (!get_int(b, &bi) || (bi != 0 && bi != 1))) {
      qir_error(d, key_loc(wv, "barrier", wave->loc), "rprogram: wave %d: `barrier` must be 0 or 1", w);
      return false;
    }
    wave->barrier = bi != 0;
    const qir_attr_val *runs = qir_attr_dict_get(wv, "run");
    if (!runs || runs->kind != QIR_ATTR_LIST) {
      qir_error(d, key_loc(wv, "run", wave->loc), "rprogram: wave %d needs `run = [{kernel = I, veus = [first, last], tasks = [begin, end]}, ...]`", w);
      return false;
    }
    wave->n_runs = runs->n;
    wave->runs = qir_alloc(m, sizeof *wave->runs * (size_t)(runs->n + 1));
    for (int i = 0; i < runs->n; i++) {
      const qir_attr_val *e = &runs->items[i];
      qir_rp_run *r = &wave->runs[i];
      r->loc = dict_loc(e, key_loc(wv, "run", wave->loc));
      if (e->kind != QIR_ATTR_DICT) {
        qir_error(d, r->loc, "rprogram: wave %d entry %d must be a dict {kernel, veus, tasks}", w, i);
        return false;
      }
      if (!only_keys(e, run_keys, r->loc, "a run entry (kernel, veus, tasks)", d)) return false;
      if (!read_kernel(e, p->n_kernels, &r->kernel)) {
        qir_error(d, key_loc(e, "kernel", r->loc), "rprogram: wave %d entry %d: `kernel` must be an operand index in [0, %d)", w, i,
                  p->n_kernels);
        return false;
      }
      if (!read_range(e, "veus", "veu", 0, &r->veu_lo, &r->veu_hi) || r->veu_lo < 0 || r->veu_hi < r->veu_lo) {
        qir_error(d, key_loc(e, "veus", key_loc(e, "veu", r->loc)),
                  "rprogram: wave %d entry %d: `veus = [first, last]` (inclusive, 0 <= first <= last) or `veu = I`", w, i);
        return false;
      }
      if (r->veu_hi >= p->veus) {
        qir_error(d, key_loc(e, "veus", key_loc(e, "veu", r->loc)), "rprogram: wave %d entry %d uses vEU %lld, but the program has %lld vEUs",
                  w, i, (long long)r->veu_hi, (long long)p->veus);
        return false;
      }
      if (!read_range(e, "tasks", "task", 1, &r->task_lo, &r->task_hi) || r->task_lo < 0 || r->task_hi < r->task_lo) {
        qir_error(d, key_loc(e, "tasks", key_loc(e, "task", r->loc)),
                  "rprogram: wave %d entry %d: `tasks = [begin, end]` (end exclusive, 0 <= begin <= end) or `task = I`", w, i);
        return false;
      }
    }
    const qir_attr_val *waits = qir_attr_dict_get(wv, "wait");
    if (waits && waits->kind != QIR_ATTR_LIST) {
      qir_error(d, key_loc(wv, "wait", wave->loc), "rprogram: wave %d: `wait` must be a list [{kernel = I, tasks = [begin, end]}, ...]", w);
      return false;
    }
    wave->n_waits = waits ? waits->n : 0;
    wave->waits = qir_alloc(m, sizeof *wave->waits * (size_t)(wave->n_waits + 1));
    for (int i = 0; i < wave->n_waits; i++) {
      const qir_attr_val *e = &waits->items[i];
      qir_rp_wait *x = &wave->waits[i];
      x->loc = dict_loc(e, key_loc(wv, "wait", wave->loc));
      if (e->kind != QIR_ATTR_DICT || !only_keys(e, wait_keys, x->loc, "a wait (kernel, tasks)", d)) {
        if (e->kind != QIR_ATTR_DICT) qir_error(d, x->loc, "rprogram: wave %d wait %d must be a dict {kernel, tasks}", w, i);
        return false;
      }
      if (!read_kernel(e, p->n_kernels, &x->kernel)) {
        qir_error(d, key_loc(e, "kernel", x->loc), "rprogram: wave %d wait %d: `kernel` must be an operand index in [0, %d)", w, i,
                  p->n_kernels);
        return false;
      }
      if (!read_range(e, "tasks", "task", 1, &x->task_lo, &x->task_hi) || x->task_lo < 0 || x->task_hi < x->task_lo) {
        qir_error(d, key_loc(e, "tasks", x->loc), "rprogram: wave %d wait %d: `tasks = [begin, end]` (end exclusive) or `task = I`", w, i);
        return false;
      }
    }
  }
  return true;
}

/* Registers are allocated per thread in units of REG_ALLOC_UNIT: ptxas gives
 * a warp registers in 256s (8 a thread), and a CDNA wave VGPRs in granules of
 * 8; so __launch_bounds__(224, 8) leaves 65536 / 1792 = 36, allocated 32. */
#define REG_ALLOC_UNIT 8

int64_t qir_rprogram_blocks_per_unit(const qir_target *t, int64_t threads, int64_t regs, int64_t smem) {
  if (threads <= 0 || threads > t->max_threads_per_block || regs > t->max_regs_per_thread || smem > t->smem_per_block) return 0;
  int64_t warp = t->warp_size > 0 ? t->warp_size : 1;
  int64_t th = (threads + warp - 1) / warp * warp;
  int64_t rg = (regs + REG_ALLOC_UNIT - 1) / REG_ALLOC_UNIT * REG_ALLOC_UNIT;
  int64_t n = t->max_blocks_per_unit;
  if (t->max_threads_per_unit / th < n) n = t->max_threads_per_unit / th;
  if (rg > 0 && t->regs_per_unit / (rg * th) < n) n = t->regs_per_unit / (rg * th);
  if (smem > 0 && t->smem_per_unit / smem < n) n = t->smem_per_unit / smem;
  return n;
}

/* A persistent kernel inlines every packed kernel's body in one function and
 * keeps its own task loop, vEU id, generation and flag addresses live across
 * them; roller's per-plan estimate is low even for one kernel.  So the
 * program needs more than its largest member's estimate.  ptxas -v on sm_90
 * (light AlexNet, DenseNet 121 through -rammer; estimate at the registers
 * __launch_bounds__ left): spills at 53 at 56 (48 bytes), 67 at 72, 48 at 64
 * (2.3 KB), 68 at 80, 32 at 32; none at 34 at 48, 22 at 48, 33 at 64, 40 at
 * 64, 34 at 78.  24 more clears most of them; some still spill a little
 * (53 at 80, 32 at 64 for 1024 threads: 44 bytes). */
#define PERSISTENT_EXTRA_REGS 24

int64_t qir_rprogram_regs(const qir_target *t, int64_t member_regs) {
  if (member_regs > t->max_regs_per_thread) return member_regs;   /* no block holds it (and no overflow) */
  int64_t need = member_regs + PERSISTENT_EXTRA_REGS;
  if (member_regs <= t->max_regs_per_thread && need > t->max_regs_per_thread) need = t->max_regs_per_thread;
  return need;
}

void qir_rprogram_block_needs(const qir_rprogram *p, int64_t *threads, int64_t *regs, int64_t *smem) {
  *threads = *regs = *smem = 0;
  for (int i = 0; i < p->n_kernels; i++) {
    const qir_rp_kernel *k = &p->kernels[i];
    if (k->threads > *threads) *threads = k->threads;
    if (k->regs > *regs) *regs = k->regs;
    if (k->smem > *smem) *smem = k->smem;
  }
}

/* The packed kernel whose result v is (through views), or -1. */
static int producer_of(const qir_rprogram *p, const qir_value *v) {
  while (v && v->def) {
    for (int i = 0; i < p->n_kernels; i++)
      if (p->kernels[i].op == v->def) return i;
    if (!qir_op_is_view(v->def)) return -1;
    v = v->def->operands[0];
  }
  return -1;
}

typedef struct {
  const qir_rprogram *p;
  const qir_op *bad;
  const qir_value *read;
} early_use;

static bool find_early_use(qir_op *op, void *vctx) {
  early_use *c = vctx;
  for (int i = 0; i < op->n_operands; i++)
    if (producer_of(c->p, op->operands[i]) >= 0) {
      c->bad = op;
      c->read = op->operands[i];
      return false;
    }
  return true;
}

int qir_rprogram_check(qir_module *m, const qir_rprogram *p, qir_diag *d) {
  int before = d->n_errors;
  const qir_op *op = p->op;
  /* the kernels */
  for (int i = 0; i < p->n_kernels; i++) {
    qir_rp_kernel *k = &p->kernels[i];
    const qir_op *kop = k->op;
    if (!kop || kop->parent != op->parent || !qir_rprogram_kernel_of(kop, k)) {
      qir_error(d, op->loc, "rprogram: operand %d is not a result of an op with a #tile plan (grid, threads) in the rprogram's region", i);
      continue;
    }
    for (int j = 0; j < i; j++)
      if (p->kernels[j].op == kop) qir_error(d, op->loc, "rprogram: operands %d and %d name the same kernel %s", j, i, vname(m, kop));
    for (int r = 0; r < kop->n_results; r++)
      for (qir_use *u = kop->results[r]->uses; u; u = u->next)
        if (u->user->code == QIR_OP_RPROGRAM && u->user != op)
          qir_error(d, op->loc, "rprogram: kernel %s is packed by another rprogram too (line %d)", vname(m, kop), u->user->loc.line);
  }
  if (d->n_errors > before) return d->n_errors - before;

  /* ops the launch point skips over must not read what the program computes */
  const qir_op *first = NULL;
  for (const qir_op *x = op->parent->first; x && x != op; x = x->next)
    for (int i = 0; i < p->n_kernels && !first; i++)
      if (p->kernels[i].op == x) first = x;
  for (const qir_op *x = first; x && x != op; x = x->next) {
    if (producer_of(p, x->n_results ? x->results[0] : NULL) >= 0) continue;   /* a kernel, or a view of one */
    early_use c = {.p = p};
    find_early_use((qir_op *)x, &c);
    for (int r = 0; r < x->n_regions && !c.bad; r++) qir_walk(x->regions[r], find_early_use, &c);
    if (c.bad) {
      const qir_opinfo *info = qir_opinfo_get(c.bad->code);
      qir_error(d, c.bad->loc, "'%s' reads %s%s, which the rprogram at line %d computes only later: move it after the rprogram or pack it",
                info ? info->name : "?", c.read->name ? "%" : "", c.read->name ? c.read->name : "a packed kernel's result",
                op->loc.line);
    }
  }

  /* every task once */
  int64_t total = 0;
  int64_t *base = qir_alloc(m, sizeof *base * (size_t)(p->n_kernels + 1));
  for (int i = 0; i < p->n_kernels; i++) base[i] = total, total += p->kernels[i].tasks;
  if (total > (INT64_C(1) << 26)) {   /* the checks keep a few words per task */
    qir_error(d, op->loc, "rprogram: its kernels have %lld tasks in all, more than the %lld an rprogram may pack", (long long)total,
              (long long)(INT64_C(1) << 26));
    return d->n_errors - before;
  }
  int *wave_of = malloc(sizeof *wave_of * (size_t)(total + 1));
  int *pos_of = malloc(sizeof *pos_of * (size_t)(total + 1));
  int64_t *veu_of = malloc(sizeof *veu_of * (size_t)(total + 1));
  int *done_at = malloc(sizeof *done_at * (size_t)(total + 1));
  int *next_barrier = malloc(sizeof *next_barrier * (size_t)(p->n_waves + 1));
  if (!wave_of || !pos_of || !veu_of || !done_at || !next_barrier) {
    qir_error(d, op->loc, "out of memory");
    goto out;
  }
  for (int64_t t = 0; t < total; t++) wave_of[t] = -1;
  for (int w = 0; w < p->n_waves; w++)
    for (int i = 0; i < p->waves[w].n_runs; i++) {
      const qir_rp_run *r = &p->waves[w].runs[i];
      const qir_rp_kernel *k = &p->kernels[r->kernel];
      if (r->task_hi > k->tasks) {
        qir_error(d, r->loc, "rprogram: wave %d entry %d runs tasks [%lld, %lld) of kernel %d (%s), which has %lld tasks", w, i,
                  (long long)r->task_lo, (long long)r->task_hi, r->kernel, vname(m, k->op), (long long)k->tasks);
        goto out;
      }
      int64_t n = r->veu_hi - r->veu_lo + 1;
      for (int64_t t = r->task_lo; t < r->task_hi; t++) {
        int64_t g = base[r->kernel] + t;
        if (wave_of[g] >= 0) {
          qir_error(d, r->loc, "rprogram: task %lld of kernel %d (%s) runs twice (waves %d and %d)", (long long)t, r->kernel,
                    vname(m, k->op), wave_of[g], w);
          goto out;
        }
        wave_of[g] = w;
        pos_of[g] = i;
        veu_of[g] = r->veu_lo + (t - r->task_lo) % n;
      }
    }
  for (int i = 0; i < p->n_kernels; i++)
    for (int64_t t = 0; t < p->kernels[i].tasks; t++)
      if (wave_of[base[i] + t] < 0) {
        qir_error(d, op->loc, "rprogram: task %lld of kernel %d (%s) never runs (each of its %lld tasks must run exactly once)",
                  (long long)t, i, vname(m, p->kernels[i].op), (long long)p->kernels[i].tasks);
        goto out;
      }

  /* when each task is complete for every vEU: the next barrier, or a wait on it */
  next_barrier[p->n_waves] = NEVER;
  for (int w = p->n_waves - 1; w >= 0; w--) next_barrier[w] = w + 1 < p->n_waves && p->waves[w + 1].barrier ? w + 1 : next_barrier[w + 1];
  for (int64_t t = 0; t < total; t++) done_at[t] = next_barrier[wave_of[t]];
  for (int w = 0; w < p->n_waves; w++)
    for (int i = 0; i < p->waves[w].n_waits; i++) {
      const qir_rp_wait *x = &p->waves[w].waits[i];
      const qir_rp_kernel *k = &p->kernels[x->kernel];
      if (x->task_hi > k->tasks) {
        qir_error(d, x->loc, "rprogram: wave %d waits for tasks [%lld, %lld) of kernel %d (%s), which has %lld tasks", w,
                  (long long)x->task_lo, (long long)x->task_hi, x->kernel, vname(m, k->op), (long long)k->tasks);
        goto out;
      }
      for (int64_t t = x->task_lo; t < x->task_hi; t++) {
        int64_t g = base[x->kernel] + t;
        if (wave_of[g] >= w) {
          qir_error(d, x->loc, "rprogram: wave %d waits for task %lld of kernel %d (%s), which runs in wave %d: a wait can only be met by tasks of earlier waves",
                    w, (long long)t, x->kernel, vname(m, k->op), wave_of[g]);
          goto out;
        }
        if (w < done_at[g]) done_at[g] = w;
      }
    }

  /* dependences: a consumer's every task after every task of what it reads */
  for (int w = 0; w < p->n_waves; w++)
    for (int i = 0; i < p->waves[w].n_runs; i++) {
      const qir_rp_run *r = &p->waves[w].runs[i];
      if (r->task_hi == r->task_lo) continue;
      const qir_op *cop = p->kernels[r->kernel].op;
      for (int a = 0; a < cop->n_operands; a++) {
        int pk = producer_of(p, cop->operands[a]);
        if (pk < 0) continue;
        for (int64_t t = 0; t < p->kernels[pk].tasks; t++) {
          int64_t g = base[pk] + t;
          if (done_at[g] <= w) continue;
          bool same_veu = r->veu_lo == r->veu_hi && veu_of[g] == r->veu_lo &&
                          (wave_of[g] < w || (wave_of[g] == w && pos_of[g] < i));
          if (same_veu) continue;
          qir_error(d, r->loc,
                    "rprogram: kernel %d (%s) in wave %d reads kernel %d (%s), but its task %lld (wave %d, vEU %lld) is not ordered before it: "
                    "add `barrier = 1` or a wait between them",
                    r->kernel, vname(m, cop), w, pk, vname(m, p->kernels[pk].op), (long long)t, wave_of[g], (long long)veu_of[g]);
          goto out;
        }
      }
    }

  /* co-residency: every vEU a resident block, or waits and barriers hang */
  {
    const qir_target *tg = qir_target_get(p->target);
    if (!tg) {
      const qir_attr *ta = qir_op_attr(op, "target");
      qir_error(d, ta && ta->loc.line ? ta->loc : op->loc, "rprogram: unknown target '%s'", p->target);
      goto out;
    }
    int64_t th, rg, sm;
    qir_rprogram_block_needs(p, &th, &rg, &sm);
    int64_t program_rg = qir_rprogram_regs(tg, rg);   /* as -rammer counts them: more than any one kernel */
    int64_t per_unit = qir_rprogram_blocks_per_unit(tg, th, program_rg, sm);
    int64_t cap = per_unit * tg->compute_units;
    if (p->veus > cap) {
      const qir_attr *va = qir_op_attr(op, "veus");
      qir_error(d, va && va->loc.line ? va->loc : op->loc,
                "rprogram: %lld vEUs, but %s keeps only %lld blocks of %lld threads, %lld registers (its kernels' %lld "
                "and the persistent kernel's own) and %lld bytes of shared memory co-resident (%d units x %lld)",
                (long long)p->veus, tg->name, (long long)cap, (long long)th, (long long)program_rg, (long long)rg, (long long)sm,
                tg->compute_units, (long long)per_unit);
    }
  }
out:
  free(wave_of);
  free(pos_of);
  free(veu_of);
  free(done_at);
  free(next_barrier);
  return d->n_errors - before;
}

bool qir_rprogram_unpacked_at(const qir_op *rp, const int64_t *at) {
  const qir_attr *ua = qir_op_attr(rp, "unpacked_upto");
  if (!ua || ua->val.kind != QIR_ATTR_LIST || !at) return false;
  for (int k = 0; k < ua->val.n; k++)
    if (ua->val.items[k].kind != QIR_ATTR_INT || at[k] > ua->val.items[k].i) return false;
  return true;
}

bool qir_rprogram_packs(const qir_op *op) {
  for (int i = 0; i < op->n_results; i++)
    for (const qir_use *u = op->results[i]->uses; u; u = u->next)
      if (u->user->code == QIR_OP_RPROGRAM) return true;
  return false;
}

/* ---------------------------------------------------------------- whole plans of Welder groups */


bool qir_row_blocking_of(int rank, const int64_t *dims, const bool *reduced, const int64_t *group_block,
                         int64_t staged_size, int64_t tail_size, int warp, qir_row_blocking *out) {
  memset(out, 0, sizeof *out);
  if (rank < 1 || rank > QIR_MAX_RANK || warp < 1) return false;
  /* in shared memory as qcodegen's kernels compute them: the narrow types in
   * 32 bits (ktype_of_dtype), the 64-bit ones in 64 */
  if (staged_size > 0) staged_size = staged_size > 4 ? 8 : 4;
  if (tail_size > 0) tail_size = tail_size > 4 ? 8 : 4;
  int64_t row_len = 1, per_block = 1;
  for (int d = 0; d < rank; d++) {
    if (reduced[d]) row_len *= dims[d];
    out->kept_block[d] = reduced[d] || !group_block || group_block[d] < 1 ? 1 : group_block[d];
    per_block *= out->kept_block[d];
  }
  out->staged = staged_size > 0 && row_len * staged_size <= QIR_ROW_SMEM_LIMIT;
  int64_t row_bytes = row_len * ((out->staged ? staged_size : 0) + tail_size);
  if (tail_size > 0 && row_bytes > QIR_ROW_SMEM_LIMIT) return false;
  while (per_block > 1 && (per_block * warp > 1024 || per_block * row_bytes > QIR_ROW_SMEM_LIMIT)) {
    int big = 0;
    for (int d = 1; d < rank; d++)
      if (out->kept_block[d] > out->kept_block[big]) big = d;
    out->kept_block[big] = (out->kept_block[big] + 1) / 2;
    per_block = 1;
    for (int d = 0; d < rank; d++) per_block *= out->kept_block[d];
  }
  out->blocks = 1;
  for (int d = 0; d < rank; d++) {
    out->grid[d] = reduced[d] ? 1 : (dims[d] + out->kept_block[d] - 1) / out->kept_block[d];
    out->blocks *= out->grid[d];
  }
  out->rows = per_block;
  out->threads = per_block * warp;
  out->smem = per_block * row_bytes;
  return true;
}

static bool row_root(const qir_op *op) {
  switch (op->code) {
  case QIR_OP_SOFTMAX: case QIR_OP_LOG_SOFTMAX: case QIR_OP_LAYER_NORM: case QIR_OP_INSTANCE_NORM: case QIR_OP_LP_NORMALIZATION:
    return op->n_results >= 1 && op->results[0]->type.rank > 0;
  default: return false;
  }
}

static bool fused_smem(const qir_op *op) {
  const qir_attr *f = qir_op_attr(op, "fuse");
  return f && (f->val.kind == QIR_ATTR_WORD || f->val.kind == QIR_ATTR_STRING) && !strcmp(f->val.s, "smem");
}

/* The axes of the rows a row op reduces (its expansion's first reduction:
 * extent 1 there, the result's extent > 1), as qcodegen's row composer
 * reads them.  The row's length, 0 when there is none. */
static int64_t row_axes(qir_module *m, const qir_op *root, bool *reduced) {
  qir_diag quiet;   /* what the expansions say is not for the user */
  qir_diag_init_quiet(&quiet);
  qir_op *chain[8];
  int n = qir_op_expand_computes(m, root, chain, 8, &quiet);
  const qir_type *t = &root->results[0]->type;
  for (int i = 0; i < n; i++) {
    const qir_compute *c = chain[i]->comp;
    if (!c || c->n_red == 0 || c->n_axes != t->rank) continue;
    int64_t row = 1;
    for (int d = 0; d < t->rank; d++) {
      reduced[d] = c->axis_extents[d] == 1 && t->dims[d] > 1;
      if (reduced[d]) row *= t->dims[d];
    }
    return row;
  }
  return 0;
}

/* Every read of operand o in e is at the form's own point [v0, v1, ..]. */
static bool reads_at_point(const qir_expr *e, int o, int rank) {
  if (!e) return true;
  if (e->kind == QIR_EX_ACCESS && e->operand == o) {
    if (e->n_args != rank) return false;
    for (int j = 0; j < rank; j++)
      if (e->args[j]->kind != QIR_EX_VAR || e->args[j]->var != j) return false;
  }
  for (int i = 0; i < e->n_args; i++)
    if (!reads_at_point(e->args[i], o, rank)) return false;
  return true;
}

#define MAX_GROUP_FORMS 256

/* Group k's computes in order (named ops expanded): forms[i] computes
 * vals[i]; marked[i]: its op is #fuse=smem.  -1 where some op has no form
 * that composes (then no composer is named here). */
typedef struct {
  qir_op *forms[MAX_GROUP_FORMS];
  const qir_value *vals[MAX_GROUP_FORMS];
  bool marked[MAX_GROUP_FORMS];
  int n, anchor;                /* anchor: the first reduction, -1 if none */
  bool second;                  /* a second reduction */
} group_forms;

static bool forms_of_group(qir_module *m, const qir_op *k, group_forms *g) {
  qir_diag quiet;   /* what the expansions say is not for the user */
  qir_diag_init_quiet(&quiet);
  g->n = 0;
  bool ok = true;
  for (const qir_op *in = k->regions[0]->first; in && ok; in = in->next) {
    if (in->code == QIR_OP_YIELD) continue;
    if (in->code == QIR_OP_COMPUTE) {
      if (g->n == MAX_GROUP_FORMS) ok = false;
      else g->marked[g->n] = fused_smem(in), g->vals[g->n] = in->results[0], g->forms[g->n++] = (qir_op *)in;
      continue;
    }
    qir_op *chain[8];
    int c = qir_op_expand_computes(m, in, chain, 8, &quiet);
    if (c < 1 || g->n + c > MAX_GROUP_FORMS || in->n_results != 1) {
      ok = c >= 0 && in->n_results == 1 && g->n + c <= MAX_GROUP_FORMS;   /* a form-less view composes (or fails) alike */
      continue;
    }
    for (int i = 0; i < c; i++, g->n++) {
      g->marked[g->n] = fused_smem(in);
      g->vals[g->n] = i == c - 1 ? in->results[0] : chain[i]->results[0];
      g->forms[g->n] = chain[i];
    }
  }
  g->anchor = -1;
  g->second = false;
  for (int i = 0; ok && i < g->n; i++)
    if (g->forms[i]->comp && g->forms[i]->comp->n_red > 0) {
      if (g->anchor >= 0) g->second = true;
      else g->anchor = i;
    }
  return ok;
}

/* A staged prologue: a value before the group's one reduction, marked smem,
 * that computes something (not only a view of its operand). */
static bool staged_prologue(const group_forms *g) {
  for (int i = 0; i < g->anchor; i++) {
    const qir_compute *c = g->forms[i]->comp;
    if (g->marked[i] && c && c->n_red == 0 && c->body && c->body->kind != QIR_EX_ACCESS) return true;
  }
  return false;
}

bool qir_group_stages_prologue(qir_module *m, const qir_op *k) {
  group_forms g;
  return forms_of_group(m, k, &g) && g.anchor >= 0 && !g.second && staged_prologue(&g);
}

/* Whether qcodegen's fused composer takes group k (its first try): at most
 * one reduction among the group's computes (named ops expanded), read, with
 * everything computed from it, only at the reader's own point, and of the
 * group's result type, and no staged prologue (qcodegen's staged composer
 * computes that once per block; the fused one would at every reduction
 * step).  Otherwise the group is a row or staged group. */
bool qir_group_composes_fused(qir_module *m, const qir_op *k) {
  group_forms g;
  if (!forms_of_group(m, k, &g)) return true;
  if (g.second) return false;
  int anchor = g.anchor, n = g.n;
  if (anchor < 0) return true;
  if (staged_prologue(&g)) return false;
  qir_op *const *forms = g.forms;
  const qir_value *const *vals = g.vals;
  if (!qir_type_equal(&vals[anchor]->type, &k->results[0]->type)) return false;
  /* the values computed from the anchor, each read only at its reader's point */
  bool from[MAX_GROUP_FORMS] = {false};
  from[anchor] = true;
  for (int i = anchor + 1; i < n; i++) {
    const qir_op *f = forms[i];
    if (!f->comp) continue;
    for (int o = 0; o < f->n_operands; o++)
      for (int a = anchor; a < i; a++)
        if (from[a] && f->operands[o] == vals[a]) {
          if (!reads_at_point(f->comp->body, o, f->comp->n_axes)) return false;
          from[i] = true;
        }
  }
  return true;
}

/* A staged group's registers: ptxas keeps each product of a step's unrolled
 * body (qir_unrolled_steps: the tiled loop qcodegen runs its reductions in)
 * live across the step loop.  On sm_90 the staged convolutions of light
 * DenseNet-121 took 32 + tile + about 1.4 per product (a 3x3 window over 8
 * points: 72 products, 142 registers), and at least STAGED_MIN_REGS where the
 * unrolled body is small (the staging loops' addresses: mostly 64 to 103 of
 * its 117 staged kernels through -welder). */
#define STAGED_MIN_REGS 80

/* The threads, shared memory and registers qcodegen's staged composer gives
 * group k (root its result's op) over block tile blk: see qir_group_whole_plan. */
static bool staged_plan(qir_module *m, const qir_op *k, const qir_op *root, const int64_t *blk, int64_t per_block,
                        const qir_target *t, int64_t *threads, int64_t *smem, int64_t *regs) {
  int n = 0;
  for (const qir_op *in = k->regions[0]->first; in; in = in->next) n++;
  int64_t (*tiles)[QIR_MAX_RANK] = calloc((size_t)n + 1, sizeof *tiles);
  bool *have = calloc((size_t)n + 1, sizeof *have);
  if (!tiles || !have) {
    free(tiles);
    free(have);
    return false;
  }
  int nt = qir_group_boxes(m, k, blk, n, tiles, have), i = 0;
  bool ok = nt > 0;
  int64_t most = per_block, tile_bytes = 0;
  for (const qir_op *in = k->regions[0]->first; ok && in && in->code != QIR_OP_YIELD; in = in->next, i++) {
    if (in == root || !fused_smem(in) || in->n_results != 1) continue;
    if (!have[i]) {
      ok = false;
      break;
    }
    int64_t elems = 1;
    for (int j = 0; j < in->results[0]->type.rank; j++) elems *= tiles[i][j];
    tile_bytes += elems * (qir_dtype_size(in->results[0]->type.dtype) > 4 ? 8 : 4);
    if (elems > most) most = elems;
  }
  *threads = qir_stage_threads(most);
  *smem = tile_bytes;
  *regs = 40;   /* a thread's point loop: indices, one accumulator, the epilogue */
  /* the reductions (a segment's anchor each), by the schedule over their boxes */
  qir_diag quiet;   /* what the expansions say is not for the user */
  qir_diag_init_quiet(&quiet);
  const qir_compute *forms[MAX_GROUP_FORMS];
  int64_t exts[MAX_GROUP_FORMS][QIR_MAX_RANK];
  bool *in_smem[MAX_GROUP_FORMS];
  int n_red = 0;
  i = 0;
  for (const qir_op *in = k->regions[0]->first; ok && in && in->code != QIR_OP_YIELD; in = in->next, i++) {
    if (in->n_results != 1 || !(in == root || have[i])) continue;
    qir_op *chain[8];
    int c = in->code == QIR_OP_COMPUTE ? 1 : qir_op_expand_computes(m, in, chain, 8, &quiet);
    if (in->code == QIR_OP_COMPUTE) chain[0] = (qir_op *)in;
    for (int j = c - 1; j >= 0 && n_red < MAX_GROUP_FORMS; j--) {
      const qir_op *f = chain[j];
      if (!f->comp || f->comp->n_red == 0 || f->comp->n_axes != in->results[0]->type.rank) continue;
      forms[n_red] = f->comp;
      const qir_type *vt = &in->results[0]->type;
      for (int d = 0; d < vt->rank; d++) {
        int64_t e = in == root ? blk[d] : tiles[i][d];
        exts[n_red][d] = e < vt->dims[d] ? e : vt->dims[d];
      }
      /* an operand computed into shared memory by an earlier segment is read there */
      in_smem[n_red] = calloc((size_t)f->n_operands + 1, sizeof(bool));
      for (int o = 0; in_smem[n_red] && o < f->n_operands; o++) {
        const qir_op *d = f->operands[o]->def;
        in_smem[n_red][o] = d && d->parent == k->regions[0] && fused_smem(d);
      }
      n_red++;
      break;                    /* a segment's one reduction */
    }
  }
  int64_t budget = qir_stage_budget(tile_bytes, n_red);
  /* on a target with cp.async each reduction's staged operands take two
   * slots (qcodegen's SIMT staging pipeline) where its share of the target's
   * shared memory beside the tiles holds them */
  bool async = !strcmp(t->backend, "cuda") && !strncmp(t->arch, "sm_", 3) && atoi(t->arch + 3) >= 80;
  int64_t share = n_red > 0 ? (t->smem_per_block - tile_bytes) / n_red : 0;
  for (int r = 0; r < n_red; r++) {
    qir_stage_sched sc;
    int bytes = 4;
    if (ok && qir_stage_schedule_of(forms[r], exts[r], (int)*threads, 1 << 20, in_smem[r], bytes, budget, &sc)) {
      if (sc.stage) *smem += async && 2 * sc.smem <= share ? 2 * sc.smem : sc.smem;
      int64_t need = 32 + sc.regs + qir_unrolled_steps(sc.regs, sc.rstep, forms[r]->n_red, NULL) * 14 / 10;
      if (need < STAGED_MIN_REGS) need = STAGED_MIN_REGS;
      if (need > *regs) *regs = need;
    }
    free(in_smem[r]);
  }
  free(tiles);
  free(have);
  return ok;
}

/* Whether group k's forms (named ops expanded) are what qcodegen's row
 * composer (compose_rows) takes without a row op: an elementwise result over
 * reductions of its shape's rank that all reduce the same axes (extent 1
 * where the result's is larger: *reduced) over the result's whole rows (each
 * reduction's kept extents the result's, its reduced ones the result's row:
 * a layer norm's 64-wide rows under a 192-wide matmul result are no rows of
 * that result, the staged composer takes such a group), besides at most one
 * reduction at the row's points (*point).  *staged_size: bytes of an element
 * of the value of the result's shape the first reduction reads (the row it
 * stages), 0 when none. */
static bool rows_of_forms(qir_module *m, const qir_op *k, bool *reduced, int64_t *staged_size, bool *point) {
  const qir_value *y = k->regions[0]->last && k->regions[0]->last->code == QIR_OP_YIELD ? k->regions[0]->last->operands[0] : NULL;
  if (!y) return false;
  const qir_type *E = &y->type;
  qir_diag quiet;   /* what the expansions say is not for the user */
  qir_diag_init_quiet(&quiet);
  bool ok = true, root_elementwise = false;
  int n_stages = 0, n_point = 0, n_red = 0;
  for (const qir_op *in = k->regions[0]->first; ok && in && in->code != QIR_OP_YIELD; in = in->next) {
    qir_op *chain[8];
    int c = in->code == QIR_OP_COMPUTE ? 1 : qir_op_expand_computes(m, in, chain, 8, &quiet);
    if (in->code == QIR_OP_COMPUTE) chain[0] = (qir_op *)in;
    if (c < 1) {
      ok = false;
      break;
    }
    for (int j = 0; j < c && ok; j++) {
      const qir_op *f = chain[j];
      const qir_compute *fc = f->comp;
      if (!fc) continue;
      bool last = j == c - 1 && in->results[0] == y;
      if (last) root_elementwise = fc->n_red == 0;
      if (fc->n_red == 0) continue;
      const qir_type *ft = &f->results[0]->type;
      if (ft->rank != E->rank || fc->n_axes != E->rank) {
        ok = false;
        break;
      }
      if (!memcmp(ft->dims, E->dims, sizeof(int64_t) * (size_t)E->rank) && !last) {
        n_point++;               /* one value per point of the row */
        continue;
      }
      int r = 0;
      for (int d = 0; d < E->rank; d++) {
        bool red = fc->axis_extents[d] == 1 && E->dims[d] > 1;
        if (n_stages == 0) reduced[d] = red;
        else if (reduced[d] != red) ok = false;
        /* a kept axis the result's extent, a reduced one walking its whole row */
        if (reduced[d] ? r >= fc->n_red || fc->axis_extents[E->rank + r] != E->dims[d] : fc->axis_extents[d] != E->dims[d])
          ok = false;
        r += red;
      }
      if (n_stages == 0) {
        n_red = r;
        /* the row it stages: the first value of the result's shape it reads */
        for (int o = 0; o < f->n_operands && !*staged_size; o++)
          if (qir_type_equal(&f->operands[o]->type, E)) *staged_size = qir_dtype_size(f->operands[o]->type.dtype);
      }
      ok &= r == n_red && r > 0 && fc->n_red == r;
      n_stages++;
    }
  }
  *point = n_point > 0;
  return ok && root_elementwise && n_stages > 0 && n_point <= 1;
}

static qir_attr plan_entry(const char *key, qir_attr_val v) { return (qir_attr){.key = key, .val = v}; }

bool qir_group_whole_plan(qir_module *m, const qir_op *k, const qir_target *t, double est_us, qir_attr_val *out) {
  if (!k || k->code != QIR_OP_KERNEL || k->n_results != 1 || k->n_regions != 1 || !t) return false;
  const qir_op *y = k->regions[0]->last;
  if (!y || y->code != QIR_OP_YIELD || y->n_operands != 1 || !y->operands[0]->def || y->operands[0]->def->parent != k->regions[0])
    return false;
  const qir_op *root = y->operands[0]->def;
  const qir_type *ot = &k->results[0]->type;
  int rank = ot->rank;
  if (rank < 1 || rank > QIR_MAX_RANK || qir_type_numel(ot) < 1) return false;
  int64_t blk[QIR_MAX_RANK], grid[QIR_MAX_RANK], threads, smem = 0, regs;
  /* a row group: its root a row op, or a contraction (attention's @V, the
   * tail) walking the rows of a row op of the group */
  const qir_op *row = row_root(root) ? root : NULL;
  for (int o = 0; !row && o < root->n_operands; o++) {
    const qir_op *d = root->operands[o]->def;
    if (d && d->parent == k->regions[0] && row_root(d) && d->results[0]->type.rank == rank) row = d;
  }
  /* or reductions over the same axes as plain ops (a softmax written out:
   * reduce_max, sub, exp, reduce_sum, div), which qcodegen's row composer
   * takes before its staged one */
  bool reduced[QIR_MAX_RANK] = {false}, rows = row != NULL, point = false;
  const int64_t *row_dims = ot->dims;
  int64_t staged_size = 0, tail_size = 0;
  if (row) {
    if (row_axes(m, row, reduced) < 1) return false;
    row_dims = row->results[0]->type.dims;
    staged_size = qir_dtype_size(row->n_operands ? row->operands[0]->type.dtype : row->results[0]->type.dtype);
    tail_size = row == root ? 0 : qir_dtype_size(row->results[0]->type.dtype);
  } else {
    rows = !qir_group_composes_fused(m, k) && rows_of_forms(m, k, reduced, &staged_size, &point);
  }
  /* qcodegen's lower_rows: a warp per row, the block's box of rows
   * (qir_row_blocking_of), the rows staged in shared memory */
  int64_t gb[QIR_MAX_RANK];
  bool have_gb = qir_group_block(k, gb);
  qir_row_blocking rb;
  if (rows) {
    int warp = t->warp_size > 0 ? t->warp_size : 32;
    if (!qir_row_blocking_of(rank, row_dims, reduced, have_gb ? gb : NULL, staged_size, tail_size, warp, &rb))
      return false;
    /* a point reduction runs while the row is staged: without a staged row
     * the row composer declines, and the staged one takes the group */
    rows = !point || rb.staged;
  }
  if (rows) {
    /* the block stays the group's (its inner tiles are derived from it; the
     * composer reads its box of rows from it as the rule above does) */
    for (int d = 0; d < rank; d++) {
      if (!have_gb) blk[d] = reduced[d] ? ot->dims[d] : rb.kept_block[d];
      else blk[d] = gb[d];
      grid[d] = rb.grid[d];
    }
    threads = rb.threads;
    smem = rb.smem;
    regs = 32;
  } else {
    /* a staged group (qcodegen's compose_stages, lower_stages): the group's
     * block tile over its result, each #fuse=smem value's box (halo
     * included) in shared memory, threads for the largest box
     * (qir_stage_threads), and each reduction's tiled schedule over its box
     * (qir_stage_schedule within qir_stage_budget) staging its reused
     * operands per step in shared memory too */
    bool staged = false;
    for (const qir_op *in = k->regions[0]->first; in; in = in->next) staged |= in != root && fused_smem(in);
    if (!staged || !qir_group_block(k, blk) || qir_group_composes_fused(m, k)) return false;
    int64_t per_block = 1;
    for (int d = 0; d < rank; d++) grid[d] = (ot->dims[d] + blk[d] - 1) / blk[d], per_block *= blk[d];
    if (!staged_plan(m, k, root, blk, per_block, t, &threads, &smem, &regs)) return false;
  }
  qir_attr e[8] = {plan_entry("block", qir_attr_ints(m, rank, blk)),
                   plan_entry("composer", qir_attr_word(m, rows ? "rows" : "staged")),
                   plan_entry("est_us", qir_attr_float(est_us > 0 ? est_us : 1.0)),
                   plan_entry("grid", qir_attr_ints(m, rank, grid)), plan_entry("regs", qir_attr_int(regs)),
                   plan_entry("smem", qir_attr_int(smem)), plan_entry("target", qir_attr_string(m, t->name)),
                   plan_entry("threads", qir_attr_int(threads))};
  *out = qir_attr_dict(m, 8, e);
  return true;
}
