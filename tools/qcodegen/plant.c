/* plant.c: `qcodegen -plant=KIND:N`, bugs planted on purpose into the kernels
 * after lowering, so that the checker (check.c) can be shown to catch each
 * kind of hazard it claims to, and a GPU sanitizer can be compared with it.
 * N counts from 0 in the order the kernels are generated (kernel ids k0, k1,
 * ...), and within a kernel in statement order. */
#include <stdlib.h>
#include <string.h>

#include "kast.h"

typedef enum {
  PLANT_DROP_BARRIER,          /* the Nth __syncthreads disappears */
  PLANT_DIVERGE_BARRIER,       /* the Nth __syncthreads runs only in the first half of the block */
  PLANT_DIVERGE_LOOP,          /* the Nth loop with barriers runs once more in thread 0 */
  PLANT_SHRINK_SMEM,           /* the Nth shared array is half as long as the tile staged in it */
  PLANT_SHIFT_SMEM,            /* writes of the Nth shared array go one element further */
  PLANT_COLLIDE_SMEM,          /* writes of the Nth shared array: elements 2i and 2i+1 both to 2i */
  PLANT_SHIFT_STORE,           /* kernel N stores one element further */
  PLANT_COLLIDE_STORE,         /* kernel N stores elements 2i and 2i+1 both to 2i */
  PLANT_DROP_LANE,             /* kernel N's blocks lose their last thread */
  PLANT_UNORDER_LAUNCH,        /* kernel N is not ordered after the kernels before it (a skipped producer wait) */
  PLANT_DROP_WAIT,             /* the Nth wait of an rprogram on its producers' task flags disappears */
  PLANT_LATE_WAIT,             /* the Nth wait waits for the program's last tasks instead (never done before it) */
  PLANT_DROP_GRID_BARRIER,     /* the Nth grid barrier of a device loop disappears (C: the phase after it is
                                * not ordered after the one before) */
  PLANT_NC_WRITTEN,            /* rprogram N's waves read every tensor they do not write themselves through
                                * const __restrict__ (the old by-value merge of its parameters) */
  PLANT_DROP_STORE,            /* kernel N stores nothing: its consumers read memory nobody wrote */
  PLANT_WAIT_SHORT,            /* the Nth cp.async pipeline's main-loop wait_group leaves one group more in flight */
  PLANT_WAIT_NOBARRIER,        /* the Nth cp.async pipeline's barrier after its main-loop wait disappears */
  PLANT_STAGE_OVERWRITE,       /* the Nth cp.async pipeline issues the next step's copies above that barrier:
                                * a slot is refilled while warps still read it */
  PLANT_WAIT_NONE,             /* the Nth cp.async pipeline never waits: its wait_groups disappear */
  /* Hopper kernels (lower_wgmma.c), N counting them; C's body only (the GPU's roles keep theirs) */
  PLANT_TMA_NOWAIT,            /* the consumers read each stage without waiting for its mbarrier */
  PLANT_WGMMA_EARLY_RELEASE,   /* the consumers release a stage right after its wgmma are issued, before
                                * the wait_group that retires them: the producer refills it meanwhile */
  PLANT_WGMMA_SWIZZLE,         /* B's descriptor says a 64-byte swizzle where the copies wrote 128 */
  PLANT_PROXY_NOFENCE,         /* the producer threads that copy an operand by loads skip fence.proxy.async */
  PLANT_TMA_MISALIGN,          /* every tensor copy starts one element further along the contiguous dimension
                                * (off its 16-byte boundary: the device faults) */
  PLANT_WGMMA_LATE_WAIT,       /* the main loop's last wait_group 0 moves to the end of the step: registers an
                                * in-flight wgmma reads (a register A operand, its accumulators) are
                                * rewritten before it retires */
  PLANT_COUNT
} plant_kind;

static const char *const plant_names[PLANT_COUNT] = {
    "drop-barrier", "diverge-barrier", "diverge-loop", "shrink-smem", "shift-smem",
    "collide-smem", "shift-store", "collide-store", "drop-lane", "unorder-launch", "drop-wait",
    "late-wait", "drop-grid-barrier", "nc-written", "drop-store", "wait-short", "wait-nobarrier",
    "stage-overwrite", "wait-none", "tma-nowait", "wgmma-early-release", "wgmma-swizzle",
    "proxy-nofence", "tma-misalign", "wgmma-late-wait",
};

typedef struct {
  cg_ctx *cg;
  plant_kind kind;
  long target, seen;            /* the Nth thing; how many seen so far */
  kkernel *k;
  bool done;
} planter;

/* i - i % 2, so that two neighbouring elements land on one */
static kexpr *collide(kbuilder *b, kexpr *i) { return ke_sub(b, i, ke_mod(b, i, ke_int(b, 2))); }

static void walk(planter *p, kstmt *s) {
  if (!s || p->done) return;
  kbuilder *b = &p->cg->kb;
  switch (s->kind) {
  case KS_SEQ:
    for (int i = 0; i < s->n_items && !p->done; i++) {
      kstmt *c = s->items[i];
      if (c->kind == KS_FLAG_WAIT && (p->kind == PLANT_DROP_WAIT || p->kind == PLANT_LATE_WAIT) && p->seen++ == p->target) {
        if (p->kind == PLANT_DROP_WAIT) {
          s->items[i] = ks_comment(b, "planted bug: wait dropped");
        } else {              /* the last flag: the program's last task, run after every wait */
          int64_t flags = p->k->params[c->param].numel;
          c->lo = ke_long(b, flags - 1);
          c->hi = ke_long(b, flags);
        }
        p->done = true;
        return;
      }
      if (c->kind == KS_GRID_BARRIER && p->kind == PLANT_DROP_GRID_BARRIER && p->seen++ == p->target) {
        s->items[i] = ks_comment(b, "planted bug: grid barrier dropped");
        p->done = true;
        return;
      }
      if (c->kind == KS_BARRIER && !c->warp_only &&
          (p->kind == PLANT_DROP_BARRIER || p->kind == PLANT_DIVERGE_BARRIER) && p->seen++ == p->target) {
        if (p->kind == PLANT_DROP_BARRIER) s->items[i] = ks_comment(b, "planted bug: barrier dropped");
        else s->items[i] = ks_if(b, ke_lt(b, ke_tid(b), ke_int(b, p->k->threads / 2)), c, NULL);
        p->done = true;
        return;
      }
      walk(p, c);
    }
    return;
  case KS_FOR:
    if (p->kind == PLANT_DIVERGE_LOOP && s->uniform && ks_has_sync(s->body) && p->seen++ == p->target) {
      s->hi = ke_add(b, s->hi, ke_select(b, ke_lt(b, ke_tid(b), ke_int(b, 1)), ke_int(b, s->step), ke_int(b, 0), KT_I32));
      p->done = true;
      return;
    }
    walk(p, s->body);
    return;
  case KS_IF:
    walk(p, s->body);
    walk(p, s->els);
    return;
  default: return;
  }
}

/* Drops every global store (a comment in its place). */
static void drop_stores(planter *p, kstmt *s) {
  if (!s) return;
  for (int i = 0; i < s->n_items; i++) {
    if (s->items[i]->kind == KS_STORE) s->items[i] = ks_comment(&p->cg->kb, "planted bug: store dropped");
    else drop_stores(p, s->items[i]);
  }
  if (s->body && s->body->kind == KS_STORE) s->body = ks_comment(&p->cg->kb, "planted bug: store dropped");
  if (s->els && s->els->kind == KS_STORE) s->els = ks_comment(&p->cg->kb, "planted bug: store dropped");
  drop_stores(p, s->body);
  drop_stores(p, s->els);
}

/* Rewrites every write of shared `v` (or every global store when v is NULL). */
static void rewrite_writes(planter *p, kstmt *s, const kvar *v) {
  if (!s) return;
  kbuilder *b = &p->cg->kb;
  bool shift = p->kind == PLANT_SHIFT_SMEM || p->kind == PLANT_SHIFT_STORE;
  if ((v && s->kind == KS_ASSIGN && s->var == v && s->index) || (!v && s->kind == KS_STORE))
    s->index = shift ? ke_add(b, s->index, ke_int(b, 1)) : collide(b, s->index);
  if (v && s->kind == KS_CP_ASYNC && s->var == v) {   /* by whole 16-byte chunks: 2c and 2c+1 both to 2c */
    int chunk = v->raw ? 8 : 4;
    s->index = shift ? ke_add(b, s->index, ke_int(b, chunk)) : ke_sub(b, s->index, ke_mod(b, s->index, ke_int(b, 2 * chunk)));
  }
  for (int i = 0; i < s->n_items; i++) rewrite_writes(p, s->items[i], v);
  rewrite_writes(p, s->body, v);
  rewrite_writes(p, s->els, v);
}

/* The main loop of a cp.async pipeline (lower_mma_pipe.c): the sequence of a
 * uniform loop whose body waits for a group and then meets at a barrier; *at is
 * the wait's position. */
static kstmt *pipe_loop_body(kstmt *s, int *at) {
  if (!s) return NULL;
  if (s->kind == KS_FOR && s->uniform && s->body && s->body->kind == KS_SEQ)
    for (int i = 0; i + 1 < s->body->n_items; i++)
      if (s->body->items[i]->kind == KS_CP_WAIT && s->body->items[i + 1]->kind == KS_BARRIER) {
        *at = i;
        return s->body;
      }
  for (int i = 0; i < s->n_items; i++) {
    kstmt *r = pipe_loop_body(s->items[i], at);
    if (r) return r;
  }
  kstmt *r = pipe_loop_body(s->body, at);
  return r ? r : pipe_loop_body(s->els, at);
}

/* Drops every cp.async wait_group. */
static void drop_cp_waits(planter *p, kstmt *s) {
  if (!s) return;
  for (int i = 0; i < s->n_items; i++) {
    if (s->items[i]->kind == KS_CP_WAIT) s->items[i] = ks_comment(&p->cg->kb, "planted bug: cp.async wait dropped");
    else drop_cp_waits(p, s->items[i]);
  }
  drop_cp_waits(p, s->body);
  drop_cp_waits(p, s->els);
}

/* The pipeline plants on the loop body `seq` whose wait is items[at]. */
static bool plant_pipe(planter *p, kstmt *seq, int at) {
  kbuilder *b = &p->cg->kb;
  kstmt **it = seq->items;
  switch (p->kind) {
  case PLANT_WAIT_SHORT:
    it[at]->step++;
    return true;
  case PLANT_WAIT_NOBARRIER:
    it[at + 1] = ks_comment(b, "planted bug: barrier after the cp.async wait dropped");
    return true;
  case PLANT_STAGE_OVERWRITE:   /* wait; barrier; if (next < steps) issue  ->  wait; issue; barrier */
    if (at + 2 >= seq->n_items || !ks_contains(it[at + 2], KS_CP_ASYNC)) return false;
    {
      kstmt *barrier = it[at + 1];
      it[at + 1] = it[at + 2];
      it[at + 2] = barrier;
    }
    return true;
  case PLANT_WAIT_NONE:
    drop_cp_waits(p, p->k->body);
    return true;
  default: return false;
  }
}

/* The main loop of a Hopper kernel's C body: the loop of steps, whose body
 * commits a wgmma group (persistent blocks: inside the loop of tiles). */
static kstmt *wgmma_loop(kstmt *s) {
  if (!s) return NULL;
  if (s->kind == KS_FOR && s->body && s->body->kind == KS_SEQ)
    for (int i = 0; i < s->body->n_items; i++)
      if (s->body->items[i]->kind == KS_WGMMA_COMMIT) return s;
  if (s->kind == KS_FOR) return wgmma_loop(s->body);
  for (int i = 0; i < s->n_items; i++) {
    kstmt *r = wgmma_loop(s->items[i]);
    if (r) return r;
  }
  return NULL;
}

/* Replaces every statement of `kind` under s by a comment; how many. */
static int drop_kind(kbuilder *b, kstmt *s, kstmt_kind kind, const char *why) {
  if (!s) return 0;
  int n = 0;
  for (int i = 0; i < s->n_items; i++) {
    if (s->items[i]->kind == kind) {
      s->items[i] = ks_comment(b, why);
      n++;
    } else {
      n += drop_kind(b, s->items[i], kind, why);
    }
  }
  return n + drop_kind(b, s->body, kind, why) + drop_kind(b, s->els, kind, why);
}

/* Moves every tensor copy under s one element along its contiguous dimension; how many. */
static int shift_tma_copies(kbuilder *b, kstmt *s) {
  if (!s) return 0;
  int n = 0;
  if (s->kind == KS_TMA_LOAD) {
    s->coord[0] = ke_add(b, s->coord[0], ke_int(b, 1));
    n++;
  }
  for (int i = 0; i < s->n_items; i++) n += shift_tma_copies(b, s->items[i]);
  return n + shift_tma_copies(b, s->body) + shift_tma_copies(b, s->els);
}

static bool plant_hopper(planter *p) {
  kbuilder *b = &p->cg->kb;
  kkernel *k = p->k;
  kstmt *loop = wgmma_loop(k->body);
  if (!loop) return false;
  switch (p->kind) {
  case PLANT_TMA_NOWAIT:   /* the consumers' waits on the full barriers: `if (consumer) wait` items of the loop */
    for (int i = 0; i < loop->body->n_items; i++) {
      kstmt *it = loop->body->items[i];
      if (it->kind == KS_IF && it->body && it->body->kind == KS_MBAR_WAIT)
        loop->body->items[i] = ks_comment(b, "planted bug: the consumers' mbarrier wait dropped");
    }
    return true;
  case PLANT_WGMMA_EARLY_RELEASE:
    if (!k->wg_release_step || !k->wg_release_started || !k->wg_step) return false;
    *k->wg_release_step = *k->wg_step;                 /* release step t's stage, not t-1's */
    *k->wg_release_started = *ke_int(b, 1);
    return true;
  case PLANT_WGMMA_SWIZZLE:
    for (int i = 0; i < loop->body->n_items; i++) {
      kstmt *it = loop->body->items[i];
      kstmt *one = it->kind == KS_FOR && it->body && it->body->n_items ? it->body->items[0] : NULL;
      if (one && one->kind == KS_WGMMA) {
        ((kwgmma *)one->wg)->b.swizzle = 64;
        return true;
      }
    }
    return false;
  case PLANT_PROXY_NOFENCE:
    return drop_kind(b, k->body, KS_FENCE_PROXY_ASYNC, "planted bug: fence.proxy.async dropped") > 0;
  case PLANT_TMA_MISALIGN:
    return shift_tma_copies(b, k->body) > 0;
  case PLANT_WGMMA_LATE_WAIT: {
    kstmt *it = loop->body;
    for (int i = it->n_items - 1; i >= 0; i--) {
      kstmt *w = it->items[i];
      if (w->kind != KS_WGMMA_WAIT || w->step != 0) continue;
      if (i == it->n_items - 1) return false;
      memmove(&it->items[i], &it->items[i + 1], sizeof *it->items * (size_t)(it->n_items - 1 - i));
      it->items[it->n_items - 1] = w;
      return true;
    }
    return false;
  }
  default: return false;
  }
}

bool cg_plant(cg_ctx *cg, const char *spec) {
  const char *colon = strchr(spec, ':');
  size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
  int kind = -1;
  for (int i = 0; i < PLANT_COUNT; i++)
    if (strlen(plant_names[i]) == len && !strncmp(spec, plant_names[i], len)) kind = i;
  char *end = NULL;
  long n = colon ? strtol(colon + 1, &end, 10) : 0;
  if (kind < 0 || (colon && (end == colon + 1 || *end || n < 0))) {
    fprintf(cg->d->out, "qcodegen: unknown bug to plant '%s' (KIND:N, KIND one of", spec);
    for (int i = 0; i < PLANT_COUNT; i++) fprintf(cg->d->out, " %s", plant_names[i]);
    fputs(")\n", cg->d->out);
    cg->d->n_errors++;
    return false;
  }
  planter p = {.cg = cg, .kind = (plant_kind)kind, .target = n};
  switch (p.kind) {
  case PLANT_DROP_BARRIER: case PLANT_DIVERGE_BARRIER: case PLANT_DIVERGE_LOOP: case PLANT_DROP_WAIT: case PLANT_LATE_WAIT:
    for (int i = 0; i < cg->n_kernels && !p.done; i++) {
      p.k = cg->kernels[i];
      walk(&p, p.k->body);
    }
    break;
  case PLANT_SHRINK_SMEM: case PLANT_SHIFT_SMEM: case PLANT_COLLIDE_SMEM:
    for (int i = 0; i < cg->n_kernels && !p.done; i++)
      for (int j = 0; j < cg->kernels[i]->n_vars && !p.done; j++) {
        kvar *v = cg->kernels[i]->vars[j];
        if (v->space != KV_SHARED || p.seen++ != p.target) continue;
        p.k = cg->kernels[i];
        if (p.kind == PLANT_SHRINK_SMEM) {
          v->size = (v->size + 1) / 2;
        } else {
          rewrite_writes(&p, cg->kernels[i]->body, v);
        }
        p.done = true;
      }
    break;
  case PLANT_SHIFT_STORE: case PLANT_COLLIDE_STORE: case PLANT_DROP_LANE: case PLANT_UNORDER_LAUNCH: case PLANT_DROP_STORE:
    if (n < cg->n_kernels) {
      kkernel *k = p.k = cg->kernels[n];
      if (p.kind == PLANT_DROP_LANE) k->threads = k->threads > 1 ? k->threads - 1 : 1;
      else if (p.kind == PLANT_UNORDER_LAUNCH) k->unordered_launch = true;
      else if (p.kind == PLANT_DROP_STORE) {
        drop_stores(&p, k->body);
        kkernel_prune(k);
      }
      else rewrite_writes(&p, k->body, NULL);
      p.done = true;
    }
    break;
  case PLANT_DROP_GRID_BARRIER:
    for (int i = 0; i < cg->n_kernels && !p.done; i++) {
      p.k = cg->kernels[i];
      if (p.k->grid_phase) {   /* C: the barrier is the launch boundary before this phase */
        if (p.seen++ == p.target) {
          p.k->unordered_launch = true;
          p.done = true;
        }
      } else {
        walk(&p, p.k->body);
      }
    }
    break;
  case PLANT_WAIT_SHORT: case PLANT_WAIT_NOBARRIER: case PLANT_STAGE_OVERWRITE: case PLANT_WAIT_NONE:
    for (int i = 0; i < cg->n_kernels && !p.done; i++) {
      int at = 0;
      kstmt *seq = pipe_loop_body(cg->kernels[i]->body, &at);
      if (!seq || p.seen++ != p.target) continue;
      p.k = cg->kernels[i];
      p.done = plant_pipe(&p, seq, at);
      break;
    }
    break;
  case PLANT_TMA_NOWAIT: case PLANT_WGMMA_EARLY_RELEASE: case PLANT_WGMMA_SWIZZLE: case PLANT_PROXY_NOFENCE: case PLANT_TMA_MISALIGN:
  case PLANT_WGMMA_LATE_WAIT:
    for (int i = 0; i < cg->n_kernels && !p.done; i++) {
      if (!cg->kernels[i]->sm90a || p.seen++ != p.target) continue;
      p.k = cg->kernels[i];
      p.done = plant_hopper(&p);
      break;
    }
    break;
  case PLANT_NC_WRITTEN: {   /* C: the program's waves are kernels of one group (chk_kernel), wave 0 first */
    int group = -1;
    for (int i = 0; i < cg->n_kernels; i++) {
      kkernel *k = cg->kernels[i];
      if (!k->chk_group || !k->op_text || strcmp(k->op_text, "rprogram")) continue;
      if (k->chk_kernel != group) {   /* the first wave of the next program */
        group = k->chk_kernel;
        if (p.seen++ == p.target) p.k = k;
      }
      if (!p.k || k->chk_kernel != p.k->chk_kernel) continue;
      for (int j = 0; j < k->n_params; j++) k->params[j].nc = !k->params[j].written;
      p.done = true;
    }
    break;
  }
  case PLANT_COUNT: break;
  }
  if (p.done && p.k)
    fprintf(cg->d->out, "qcodegen: planted %s in kernel %s (%s)\n", spec, p.k->name, p.k->op_text ? p.k->op_text : "?");
  if (!p.done) {
    fprintf(cg->d->out, "qcodegen: cannot plant '%s': the module has no such %s\n", spec,
            p.kind <= PLANT_DIVERGE_LOOP ? "barrier or barrier loop" : p.kind <= PLANT_COLLIDE_SMEM ? "shared array"
            : p.kind == PLANT_DROP_GRID_BARRIER ? "grid barrier of a device loop"
            : p.kind == PLANT_NC_WRITTEN ? "rprogram run as waves"
            : p.kind == PLANT_DROP_STORE ? "kernel"
            : p.kind >= PLANT_TMA_NOWAIT ? "Hopper kernel (a #tile mma = [64, N, 16] plan)"
            : p.kind >= PLANT_WAIT_SHORT ? "cp.async pipeline (the main loop of a #tile mma = [16, 8, 16] or TF32 [16, 8, 8] kernel)"
            : p.kind >= PLANT_DROP_WAIT ? "wait of an rprogram" : "kernel");
    cg->d->n_errors++;
    return false;
  }
  return true;
}
