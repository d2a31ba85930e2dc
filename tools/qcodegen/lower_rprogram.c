/* lower_rprogram.c: an rprogram op (qir/rprogram.h) as a persistent kernel.
 *
 * The block id is the vEU.  For each wave, in order, every run entry
 * {kernel, veus [v0, v1], tasks [t0, t1)} becomes a block-uniform loop
 *
 *   for (task = bid in [v0, v1] ? t0 + bid - v0 : t1; task < t1; task += v1 - v0 + 1)
 *     <the kernel's body with its block id replaced by task>; barrier; [flag]
 *
 * Each packed kernel was lowered on its own first (one kernel of the plan's
 * grid); its body is copied with its tensor parameters renumbered into the
 * union of all of them, its shared tiles carved from one dynamic buffer at
 * their own offsets (tasks of different kernels never run at once on a vEU,
 * so the buffer is as large as the largest kernel's tiles), and, where it has
 * fewer threads than the persistent block, every statement except the
 * block-level collectives guarded by tid < its threads.  A wave with a
 * barrier starts with a grid barrier; a wave with waits, with a wait on the
 * flags of the named tasks, which their vEUs set after running them.
 *
 * The sync tensor (u64): [0] how many launches have finished, [1] the blocks
 * that finished (V per launch), [2 + i] the counter of barrier i (V arrivals
 * per launch), then one flag per task of every kernel: nothing is reset
 * between launches.  A launch's generation q_gen is [0] + 1, read by every
 * thread at its start; a flag holds the generation of the launch that set it,
 * a barrier waits for q_gen * V arrivals, and the last block to finish stores
 * q_gen into [0].  The device keeps the count, not the host: a failed launch
 * changes nothing, no copy precedes a launch, and a captured CUDA graph
 * replays correctly (a generation passed as an argument would be frozen
 * into the graph).  A view of a tensor (reshape, identity) is the same
 * memory: members' parameters are merged by storage, so one buffer is one
 * parameter, writable if any task writes it.
 *
 * C runs one kernel per wave: the waves are phases (launch boundaries), the
 * waits check that their flags were set, and the checker (-check) sees the
 * tasks of a wave as blocks of one launch.
 */
#include <stdlib.h>
#include <string.h>

#include "kast.h"
#include "rprogram.h"

typedef struct {
  kbuilder *b;
  const int *pmap;              /* member param -> merged param */
  kexpr *task;                  /* replaces the member's block id */
} rebase;

static kexpr *re_e(const rebase *r, const kexpr *e) {
  if (!e) return NULL;
  if (e->kind == KE_BID) return r->task;
  kexpr *c = qir_alloc(r->b->m, sizeof *c);
  *c = *e;
  if (e->kind == KE_LOAD || e->kind == KE_ALIGNED16) c->param = r->pmap[e->param];
  c->a = re_e(r, e->a);
  c->b = re_e(r, e->b);
  c->c = re_e(r, e->c);
  return c;
}

static kstmt *re_s(const rebase *r, const kstmt *s) {
  if (!s) return NULL;
  kstmt *c = qir_alloc(r->b->m, sizeof *c);
  *c = *s;
  c->init = re_e(r, s->init);
  c->lo = re_e(r, s->lo);
  c->hi = re_e(r, s->hi);
  c->cond = re_e(r, s->cond);
  c->index = re_e(r, s->index);
  c->value = re_e(r, s->value);
  c->ia = re_e(r, s->ia);
  c->ib = re_e(r, s->ib);
  if (s->kind == KS_STORE || s->kind == KS_VSTORE || s->kind == KS_VCOPY16 || s->kind == KS_CP_ASYNC) c->param = r->pmap[s->param];
  c->body = re_s(r, s->body);
  c->els = re_s(r, s->els);
  if (s->n_items) {
    c->items = qir_alloc(r->b->m, sizeof *c->items * (size_t)s->n_items);
    for (int i = 0; i < s->n_items; i++) c->items[i] = re_s(r, s->items[i]);
    c->cap_items = s->n_items;
  }
  return c;
}

static bool ke_loads(const kexpr *e) {
  return e && (e->kind == KE_LOAD || ke_loads(e->a) || ke_loads(e->b) || ke_loads(e->c));
}

static bool has_kind(const kstmt *s, bool (*pred)(const kstmt *)) {
  if (!s) return false;
  if (pred(s)) return true;
  for (int i = 0; i < s->n_items; i++)
    if (has_kind(s->items[i], pred)) return true;
  return has_kind(s->body, pred) || has_kind(s->els, pred);
}

static bool is_warp_reduce(const kstmt *s) { return s->kind == KS_WARP_REDUCE; }

/* Whether every warp collective of seq (matrix-unit statements) stands at
 * block level: in seq, or in a uniform loop with barriers guard() walks into;
 * guard() can then give them to the member's own warps. */
static bool collectives_at_block_level(const kstmt *seq) {
  for (int i = 0; i < seq->n_items; i++) {
    const kstmt *c = seq->items[i];
    if (ks_is_mma(c) || c->kind == KS_BARRIER || c->kind == KS_WARP_REDUCE || c->kind == KS_COMMENT) continue;
    if (c->kind == KS_SEQ) {
      if (!collectives_at_block_level(c)) return false;
    } else if (c->kind == KS_FOR && c->uniform && ks_has_sync(c->body)) {
      if (c->body->kind == KS_SEQ ? !collectives_at_block_level(c->body) : !ks_is_mma(c->body) && has_kind(c->body, ks_is_mma))
        return false;
    } else if (has_kind(c, ks_is_mma)) {
      return false;
    }
  }
  return true;
}

/* Statements of a body with `t` of the block's threads (whole warps where it
 * uses the matrix units): idle threads reach every barrier (top level or in
 * uniform loops) and do nothing else; a warp collective runs in the first
 * t / warp warps only. */
static kstmt *guard(kbuilder *b, const kstmt *seq, int t, int warp) {
  kstmt *out = ks_seq(b);
  kexpr *active = ke_lt(b, ke_tid(b), ke_int(b, t));
  for (int i = 0; i < seq->n_items; i++) {
    kstmt *c = seq->items[i];
    if (c->kind == KS_BARRIER || c->kind == KS_WARP_REDUCE || c->kind == KS_COMMENT) {
      ks_add(b, out, c);
    } else if (ks_is_mma(c)) {
      kstmt *d = qir_alloc(b->m, sizeof *d);
      *d = *c;
      d->active_warps = t / warp;
      ks_add(b, out, d);
    } else if (c->kind == KS_SEQ) {
      ks_add_flat(b, out, guard(b, c, t, warp));
    } else if (c->kind == KS_FOR && c->uniform && ks_has_sync(c->body)) {
      kstmt *l = qir_alloc(b->m, sizeof *l), *inner = c->body;
      *l = *c;
      if (inner->kind != KS_SEQ) {   /* a lone statement: guard it as a sequence of one */
        inner = ks_seq(b);
        ks_add(b, inner, c->body);
      }
      l->body = guard(b, inner, t, warp);
      ks_add(b, out, l);
    } else if (c->kind == KS_DECL) {
      /* the declaration stays visible to what follows; a load in its
       * initialiser runs only in active threads */
      if (c->init && ke_loads(c->init) && !c->var->size) {
        kstmt *d = qir_alloc(b->m, sizeof *d);
        *d = *c;
        d->init = ke_select(b, active, c->init, ke_cast(b, ke_int(b, 0), c->var->type), c->var->type);
        ks_add(b, out, d);
      } else {
        ks_add(b, out, c);
      }
    } else {
      ks_add(b, out, ks_if(b, active, c, NULL));
    }
  }
  return out;
}

/* The statements that run tasks [t0, t1) of kernel mk on blocks [v0, v1] of a
 * persistent kernel of `threads` threads (mk's tensor parameters renumbered by
 * pmap, its block id replaced by the task):
 *
 *   for (task = bid in [v0, v1] ? t0 + bid - v0 : t1; task < t1; task += v1 - v0 + 1)
 *     <mk's body>; [barrier]
 *
 * a block-uniform loop.  mk's per-thread lets go into `lets` when given (C:
 * declared per phase), else at each task's start.  `barrier`: one after each
 * task (the next task reuses the shared tiles).  what: the comment that opens
 * the task (NULL: mk's summary).  *task: the task variable. */
kstmt *lower_run_tasks(kbuilder *b, const kkernel *mk, const int *pmap, int64_t v0, int64_t v1, int64_t t0, int64_t t1, int threads,
                       kstmt *lets, bool barrier, const char *what, kvar **task) {
  kvar *t = kvar_new(b, NULL, "q_task", KT_I32, 0, KV_BLOCK);
  rebase r = {.b = b, .pmap = pmap, .task = ke_var(b, t)};
  kexpr *bid = ke_bid(b);
  kexpr *mine = ke_and(b, ke_lt(b, ke_int(b, v0 - 1), bid), ke_lt(b, bid, ke_int(b, v1 + 1)));
  kexpr *lo = ke_select(b, mine, ke_add(b, ke_int(b, t0), ke_sub(b, bid, ke_int(b, v0))), ke_int(b, t1), KT_I32);
  kstmt *body = ks_seq(b);
  ks_add(b, body, ks_comment(b, what ? what : mk->summary ? mk->summary : mk->name));
  for (int j = 0; j < mk->lets->n_items; j++) {
    kstmt *let = re_s(&r, mk->lets->items[j]);
    ks_add(b, lets ? lets : body, let);
  }
  kstmt *tb = re_s(&r, mk->body);
  if (mk->threads < threads) tb = guard(b, tb, mk->threads, mk->warp);
  ks_add_flat(b, body, tb);
  if (barrier) ks_add(b, body, ks_barrier(b));
  kstmt *loop = ks_for(b, t, lo, ke_int(b, t1), v1 - v0 + 1, body);
  loop->uniform = true;
  if (task) *task = t;
  return loop;
}

/* Why mk cannot run with `threads` threads per block of `warp` lanes inside a
 * persistent kernel, or NULL. */
const char *lower_run_unfit(qir_module *m, const kkernel *mk, int threads, int warp) {
  if (mk->warp != warp) return "a kernel assumes another warp width";
  /* its tensor maps are parameters of its own launch, its roles fixed warpgroups */
  if (mk->sm90a || mk->gpu_body) return qir_sprintf(m, "%s is a Hopper kernel (TMA tensor maps, warpgroup roles): it runs on its own", mk->name);
  if (mk->threads == threads) return NULL;
  if (has_kind(mk->body, ks_is_mma) && (mk->threads % warp || !collectives_at_block_level(mk->body)))
    return qir_sprintf(m, "%s uses the matrix units with %d of the block's %d threads", mk->name, mk->threads, threads);
  if (mk->threads % warp && has_kind(mk->body, is_warp_reduce))
    return qir_sprintf(m, "%s reduces across a partial warp with %d of the block's %d threads", mk->name, mk->threads, threads);
  return NULL;
}

int64_t lower_rprogram_sync_size(const qir_rprogram *p) {
  int64_t n = RP_SYNC_BARRIER0 + p->n_waves;
  for (int i = 0; i < p->n_kernels; i++) n += p->kernels[i].tasks;
  return n;
}

static kstmt *ks_sync(kbuilder *b, kstmt_kind kind, int param) {
  kstmt *s = ks_seq(b);
  s->kind = kind;
  s->param = param;
  return s;
}

/* C check: the blocks (wave * vEUs + vEU) that ran the tasks a wait of wave w names. */
static const char *waited_blocks(qir_module *m, const qir_rprogram *p, int w, const qir_rp_wait *x) {
  int64_t n = (int64_t)w * p->veus;
  unsigned char *hit = calloc((size_t)(n ? n : 1), 1);
  if (!hit) return "";
  for (int v = 0; v < w; v++)
    for (int i = 0; i < p->waves[v].n_runs; i++) {
      const qir_rp_run *r = &p->waves[v].runs[i];
      if (r->kernel != x->kernel) continue;
      int64_t nv = r->veu_hi - r->veu_lo + 1;
      int64_t lo = r->task_lo > x->task_lo ? r->task_lo : x->task_lo, hi = r->task_hi < x->task_hi ? r->task_hi : x->task_hi;
      for (int64_t t = lo; t < hi; t++) hit[(int64_t)v * p->veus + r->veu_lo + (t - r->task_lo) % nv] = 1;
    }
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) {
    free(hit);
    return "";
  }
  int count = 0;
  for (int64_t i = 0; i < n; i++)
    if (hit[i]) fprintf(f, "%s%lld", count++ ? ", " : "", (long long)i);
  fclose(f);
  const char *out = qir_strdup(m, text ? text : "");
  free(text);
  free(hit);
  return out;
}

/* The tensor parameters of the kernels `use` marks, each buffer once (two
 * values with one storage, a tensor and its view, are one parameter where
 * their element types agree), then the sync tensor; pmaps[i][j]: where kernel
 * i's parameter j went.  written: some task of the program writes it (all
 * kernels count, also for a C wave's kernel: on a GPU the waves are one
 * launch, and the checker reads the GPU's view from nc). */
static int merge_params(qir_module *m, const qir_rprogram *p, kkernel *const *members, const bool *use, qir_value *sync,
                        const cg_storage *storage, int **pmaps, qir_value ***args_out, bool **written_out) {
  int n_params = 0, cap = 64;
  for (int i = 0; i < p->n_kernels; i++) cap += use[i] ? members[i]->n_params : 0;
  qir_value **args = qir_alloc(m, sizeof *args * (size_t)cap);
  bool *written = qir_alloc(m, sizeof *written * (size_t)cap);
  for (int i = 0; i < p->n_kernels; i++) {
    const kkernel *k = members[i];
    if (!use[i]) continue;
    pmaps[i] = qir_alloc(m, sizeof(int) * (size_t)(k->n_params + 1));
    for (int j = 0; j < k->n_params; j++) {
      qir_value *root = storage->root(storage->ctx, k->args[j]);
      int at = -1;
      for (int q = 0; q < n_params && at < 0; q++)
        if (storage->root(storage->ctx, args[q]) == root && args[q]->type.dtype == k->args[j]->type.dtype &&
            qir_type_numel(&args[q]->type) == qir_type_numel(&k->args[j]->type))
          at = q;
      if (at < 0) at = n_params, args[n_params++] = k->args[j];
      pmaps[i][j] = at;
    }
  }
  /* written by any kernel of the program, in any wave */
  for (int i = 0; i < p->n_kernels; i++)
    for (int j = 0; j < members[i]->n_params; j++) {
      if (!members[i]->params[j].written) continue;
      qir_value *root = storage->root(storage->ctx, members[i]->args[j]);
      for (int q = 0; q < n_params; q++)
        if (storage->root(storage->ctx, args[q]) == root) written[q] = true;
    }
  written[n_params] = true;
  args[n_params++] = sync;
  *args_out = args;
  *written_out = written;
  return n_params;
}

int lower_rprogram(cg_ctx *cg, const qir_rprogram *p, kkernel *const *members, qir_value *sync, const cg_storage *storage,
                   kkernel **out, const char **why) {
  kbuilder *b = &cg->kb;
  qir_module *m = cg->m;
  int threads = 0;
  for (int i = 0; i < p->n_kernels; i++)
    if (members[i]->threads > threads) threads = members[i]->threads;
  for (int i = 0; i < p->n_kernels; i++) {
    const char *unfit = lower_run_unfit(m, members[i], threads, cg->warp);
    if (unfit) {
      *why = qir_sprintf(m, "kernel %d: %s", i, unfit);
      return 0;
    }
  }
  /* C declares a kernel's lets once per phase: one run of it per wave */
  for (int w = 0; cg->backend == CG_C && w < p->n_waves; w++)
    for (int i = 0; i < p->waves[w].n_runs; i++)
      for (int j = 0; j < i; j++)
        if (p->waves[w].runs[j].kernel == p->waves[w].runs[i].kernel) {
          *why = qir_sprintf(m, "kernel %d has two runs in wave %d", p->waves[w].runs[i].kernel, w);
          return 0;
        }
  /* which kernels' tasks someone waits for, and each kernel's first flag */
  bool *signalled = qir_alloc(m, sizeof *signalled * (size_t)(p->n_kernels + 1));
  int64_t *flag0 = qir_alloc(m, sizeof *flag0 * (size_t)(p->n_kernels + 1));
  int64_t at = RP_SYNC_BARRIER0 + p->n_waves;
  for (int i = 0; i < p->n_kernels; i++) flag0[i] = at, at += p->kernels[i].tasks;
  for (int w = 0; w < p->n_waves; w++)
    for (int i = 0; i < p->waves[w].n_waits; i++) signalled[p->waves[w].waits[i].kernel] = true;

  bool per_wave = cg->backend == CG_C;
  int n_out = per_wave ? p->n_waves : 1;
  int id = cg->n_kernels;
  for (int o = 0; o < n_out; o++) {
    const char *name = per_wave ? qir_sprintf(m, "rprogram%d_wave%d", id, o) : qir_sprintf(m, "rprogram%d", id);
    /* C: a wave's kernel takes only the tensors of the kernels it runs */
    bool *use = qir_alloc(m, sizeof *use * (size_t)(p->n_kernels + 1));
    for (int i = 0; i < p->n_kernels; i++) use[i] = !per_wave;
    for (int e = 0; per_wave && e < p->waves[o].n_runs; e++) use[p->waves[o].runs[e].kernel] = true;
    int **pmaps = qir_alloc(m, sizeof *pmaps * (size_t)(p->n_kernels + 1));
    qir_value **args;
    bool *written;
    int n_params = merge_params(m, p, members, use, sync, storage, pmaps, &args, &written);
    int sync_param = n_params - 1;
    kkernel *k = kkernel_new(b, name, n_params);
    k->summary = qir_sprintf(m, "rprogram: %d kernels, %d waves on %lld vEUs%s", p->n_kernels, p->n_waves, (long long)p->veus,
                             per_wave ? qir_sprintf(m, " (wave %d)", o) : "");
    for (int j = 0; j < n_params; j++) {
      qir_value *v = args[j];
      k->args[j] = v;
      /* C: a wave's kernel writes what its own tasks write; the program's
       * writes decide whether the GPU may read it through the read-only path */
      bool wave_writes = false;
      for (int i = 0; per_wave && i < p->n_kernels; i++)
        for (int q = 0; use[i] && q < members[i]->n_params; q++) wave_writes |= pmaps[i][q] == j && members[i]->params[q].written;
      k->params[j] = (kparam){.name = qir_sprintf(m, "p%d", j), .dtype = v->type.dtype, .numel = qir_type_numel(&v->type),
                              .written = per_wave ? wave_writes || j == n_params - 1 : written[j], .nc = !written[j]};
    }
    k->rp_sync = true;
    k->cooperative = !per_wave;   /* its blocks wait for each other: all resident, or no launch */
    k->grid = p->veus;
    k->threads = threads;
    k->warp = cg->warp;
    k->carved_smem = true;
    /* registers for the resident blocks per unit the program was packed for */
    const qir_target *tg = qir_target_get(p->target);
    if (tg && tg->compute_units > 0) k->min_blocks = (int)((p->veus + tg->compute_units - 1) / tg->compute_units);
    /* the members' variables (C: those of the wave's kernels), shared ones at
     * their own offsets in one buffer */
    for (int i = 0; i < p->n_kernels; i++) {
      const kkernel *mk = members[i];
      if (!use[i]) continue;
      for (int v = 0; v < mk->n_vars; v++) {
        kvar *x = mk->vars[v];
        if (x->space == KV_SHARED) x->carve = 1 + kvar_dynamic_offset(mk, x);
        kvar **vars = qir_alloc(m, sizeof *vars * (size_t)(k->n_vars + 1));
        if (k->n_vars) memcpy(vars, k->vars, sizeof *vars * (size_t)k->n_vars);
        vars[k->n_vars++] = x;
        k->vars = vars;
        if (x->space == KV_SHARED && kvar_bytes(x) + x->carve - 1 > k->smem_bytes) k->smem_bytes = kvar_bytes(x) + x->carve - 1;
      }
    }
    for (int w = per_wave ? o : 0; w < (per_wave ? o + 1 : p->n_waves); w++) {
      const qir_rp_wave *wave = &p->waves[w];
      if (w > 0 && wave->barrier && !per_wave) {
        kstmt *s = ks_sync(b, KS_GRID_SYNC, sync_param);
        s->index = ke_long(b, RP_SYNC_BARRIER0 + w);
        s->step = p->veus;
        ks_add(b, k->body, s);
      }
      for (int i = 0; i < wave->n_waits; i++) {
        const qir_rp_wait *x = &wave->waits[i];
        kstmt *s = ks_sync(b, KS_FLAG_WAIT, sync_param);
        s->lo = ke_long(b, flag0[x->kernel] + x->task_lo);
        s->hi = ke_long(b, flag0[x->kernel] + x->task_hi);
        if (per_wave) {
          s->text = waited_blocks(m, p, w, x);
          s->step = id;
        }
        ks_add(b, k->body, s);
      }
      for (int i = 0; i < wave->n_runs; i++) {
        const qir_rp_run *run = &wave->runs[i];
        if (run->task_hi == run->task_lo) continue;
        const kkernel *mk = members[run->kernel];
        kvar *t = NULL;
        kstmt *flag = NULL;
        if (signalled[run->kernel]) {
          flag = ks_sync(b, KS_FLAG_SET, sync_param);
          flag->index = ke_long(b, flag0[run->kernel]);   /* + the task, below */
        }
        kstmt *loop = lower_run_tasks(b, mk, pmaps[run->kernel], run->veu_lo, run->veu_hi, run->task_lo, run->task_hi, threads,
                                      per_wave ? k->lets : NULL, per_wave || !signalled[run->kernel],
                                      qir_sprintf(m, "kernel %d: %s", run->kernel, mk->summary ? mk->summary : mk->name), &t);
        if (flag) {
          flag->index = ke_add(b, flag->index, ke_cast(b, ke_var(b, t), KT_I64));
          ks_add(b, loop->body, flag);
        }
        ks_add(b, k->body, loop);
      }
    }
    if (per_wave) {   /* the checker: a wave without a barrier is not a new grid epoch */
      k->chk_group = true;
      k->chk_kernel = id;
      k->chk_block0 = (long)o * (long)p->veus;
      k->unordered_launch = o > 0 && !p->waves[o].barrier;
    }
    k->id = cg->n_kernels;
    k->loc = p->op->loc;
    k->op_text = "rprogram";
    if (cg->n_kernels == cg->cap_kernels) {
      int c2 = cg->cap_kernels ? cg->cap_kernels * 2 : 16;
      kkernel **ks = qir_alloc(m, sizeof *ks * (size_t)c2);
      if (cg->n_kernels) memcpy(ks, cg->kernels, sizeof *ks * (size_t)cg->n_kernels);
      cg->kernels = ks;
      cg->cap_kernels = c2;
    }
    cg->kernels[cg->n_kernels++] = k;
    out[o] = k;
  }
  return n_out;
}
