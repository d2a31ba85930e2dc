/* lower_device_loop.c: a loop/if with a #device plan of level grid or block
 * (qopt -grinder) as a program that runs on the device (kast.h, "device
 * loops").
 *
 * The program is a tree of phases, loops and ifs.  A phase is one kernel:
 * either a body op's kernel, lowered on its own with its plan, whose blocks
 * become tasks spread over the program's blocks (task = bid, bid + G, ...),
 * or a control kernel written here.  Every phase ends in a barrier: a grid
 * barrier (level grid) or __syncthreads (level block, one block).  A loop is
 *
 *   init:   ctl[it] = 0, ctl[trip] = trip, ctl[cond] = cond; body arguments =
 *           the iteration (0), the condition, the initial carried values
 *   while (ctl[it] < ctl[trip] && ctl[cond] && !ctl[0]):   (read by every block)
 *     the body's phases (nested loops and ifs in place)
 *     rows:  scan output j, row ctl[it] = its yield operand (past the bound:
 *            an error code in ctl[0]); carried values the yield takes from
 *            the body's arguments go to temporaries (a yield may swap two)
 *     next:  carried arguments = yield operands (or their temporaries);
 *            ctl[it] += 1, ctl[cond] = the yield's condition (false after an error)
 *   final:  results = carried arguments; a scan output of static extent that
 *           did not get all its rows is an error code
 *
 * and an if runs the branch its condition (read by every block) names, each
 * branch ending in a phase that copies its yield to the results.  ctl[0]
 * holds the first error (1 + index into cg_dloop.errors) and ctl[1] its
 * iteration; the host reads ctl back only when there is something to report
 * (rows of bounded scan outputs, errors).
 *
 * Two phases in a row need no barrier between them when the second touches
 * no memory the phases since the last barrier write and writes none they
 * read (host.c decides it from the memory plan: dl_node.no_barrier); loops
 * and ifs always have barriers around them.  (Shared tiles: a phase's task
 * loop ends every task in a block barrier where the kernel has any.)
 *
 * Kernels right before and after the op (host.c picks them: nothing between
 * them and the op but constants and aliases) run as its first and last
 * phases, so that the whole stretch is one launch.
 *
 * CUDA/HIP: the whole program is one kernel (the phases' tensors merged into
 * one parameter list, their shared tiles carved from one dynamic buffer, as
 * an rprogram's), launched cooperatively at level grid.  C: every phase is a
 * kernel of G blocks launched by the driver host.c prints, which decides
 * loops and ifs from ctl as each block would after the barrier; the checker
 * sees the phases as one task per block (grid barrier = launch boundary), so
 * a value one block writes in a phase and another reads in a later one is
 * ordered only by the barrier between them. */
#include <stdint.h>
#include <string.h>

#include "kast.h"
#include "target.h"

static bool is_control(const qir_op *op) { return op->code == QIR_OP_LOOP || op->code == QIR_OP_IF; }

static int count_loops(const qir_op *op) {
  int n = op->code == QIR_OP_LOOP;
  for (int r = 0; r < op->n_regions; r++)
    for (const qir_op *o = op->regions[r]->first; o; o = o->next)
      if (is_control(o)) n += count_loops(o);
  return n;
}

static void collect_loops(qir_module *m, cg_dloop *dl, const qir_op *op) {
  if (op->code == QIR_OP_LOOP) {
    int l = dl->n_loops++, n_carried = op->n_operands - 2;
    dl->loops[l] = op;
    dl->tmp[l] = qir_alloc(m, sizeof(qir_value *) * (size_t)(n_carried > 0 ? n_carried : 1));
    for (int i = 0; i < n_carried; i++)
      dl->tmp[l][i] = qir_value_new(m, op->operands[2 + i]->type, qir_sprintf(m, "dloop%d_tmp%d_%d", dl->id, l, i));
  }
  for (int r = 0; r < op->n_regions; r++)
    for (const qir_op *o = op->regions[r]->first; o; o = o->next)
      if (is_control(o)) collect_loops(m, dl, o);
}

cg_dloop *cg_dloop_prepare(cg_ctx *cg, qir_op *op, int id) {
  qir_device_plan p;
  if (!is_control(op) || !qir_device_plan_get(op, &p, NULL) || p.level == QIR_LEVEL_HOST) return NULL;
  qir_module *m = cg->m;
  cg_dloop *dl = qir_alloc(m, sizeof *dl);
  memset(dl, 0, sizeof *dl);
  dl->op = op;
  dl->id = id;
  dl->block_level = p.level == QIR_LEVEL_BLOCK;
  dl->grid = dl->block_level || p.grid < 1 ? 1 : p.grid;
  dl->threads = (int)(p.threads > 0 ? p.threads : cg->warp);
  int n = count_loops(op);
  dl->loops = qir_alloc(m, sizeof *dl->loops * (size_t)(n + 1));
  dl->tmp = qir_alloc(m, sizeof *dl->tmp * (size_t)(n + 1));
  collect_loops(m, dl, op);
  dl->ctl_size = 2 + 3 * (int64_t)dl->n_loops;
  dl->ctl = qir_value_new(m, qir_type_make(QIR_I64, 1, &dl->ctl_size), qir_sprintf(m, "dloop%d_ctl", id));
  return dl;
}

qir_value *cg_dloop_tmp(const cg_dloop *dl, const qir_op *loop, int i) {
  for (int l = 0; l < dl->n_loops; l++)
    if (dl->loops[l] == loop) return dl->tmp[l][i];
  return NULL;
}

/* ---------------------------------------------------------------- building */

typedef struct {
  cg_ctx *cg;
  kbuilder *b;
  cg_dloop *dl;
  kkernel **(*kernels_of)(void *ctx, const qir_op *op, int *n);
  void *ctx;
  int n_ctl;                    /* control kernels so far (names) */
  bool failed;
} builder;

static dl_node *node(builder *x, dl_node_kind kind) {
  dl_node *n = qir_alloc(x->b->m, sizeof *n);
  memset(n, 0, sizeof *n);
  n->kind = kind;
  return n;
}

static void add(builder *x, dl_node *seq, dl_node *n) {
  if (seq->n_items == seq->cap_items) {
    int cap = seq->cap_items ? 2 * seq->cap_items : 8;
    dl_node **items = qir_alloc(x->b->m, sizeof *items * (size_t)cap);
    if (seq->n_items) memcpy(items, seq->items, sizeof *items * (size_t)seq->n_items);
    seq->items = items;
    seq->cap_items = cap;
  }
  seq->items[seq->n_items++] = n;
}

static void phase(builder *x, dl_node *seq, kkernel *k) {
  dl_node *n = node(x, DN_PHASE);
  n->k = k;
  add(x, seq, n);
}

static void fail(builder *x, const char *why) {
  if (!x->failed) x->dl->why = why;
  x->failed = true;
}

/* A control kernel of the program's blocks; parameters added by param(). */
static kkernel *ctl_kernel(builder *x, const qir_op *op, const char *what) {
  kkernel *k = kkernel_new(x->b, qir_sprintf(x->b->m, "dloop%d_ctl%d", x->dl->id, x->n_ctl++), 1);
  k->n_params = 0;
  k->summary = what;
  k->grid = x->dl->grid;
  k->threads = x->dl->threads;
  k->warp = x->cg->warp;
  k->loc = op->loc;
  k->op_text = qir_sprintf(x->b->m, "%s (device-resident control)", op->code == QIR_OP_LOOP ? "loop" : "if");
  return k;
}

static int param(builder *x, kkernel *k, qir_value *v, bool written) {
  for (int i = 0; i < k->n_params; i++)
    if (k->args[i] == v) {
      k->params[i].written |= written;
      return i;
    }
  qir_module *m = x->b->m;
  kparam *ps = qir_alloc(m, sizeof *ps * (size_t)(k->n_params + 1));
  qir_value **as = qir_alloc(m, sizeof *as * (size_t)(k->n_params + 1));
  if (k->n_params) {
    memcpy(ps, k->params, sizeof *ps * (size_t)k->n_params);
    memcpy(as, k->args, sizeof *as * (size_t)k->n_params);
  }
  k->params = ps;
  k->args = as;
  int i = k->n_params++;
  k->args[i] = v;
  k->params[i] = (kparam){.name = qir_sprintf(x->b->m, "p%d", i), .dtype = v->type.dtype, .numel = qir_type_numel(&v->type),
                          .written = written};
  return i;
}

static kexpr *first_thread(kbuilder *b) {
  return ke_and(b, ke_lt(b, ke_bid(b), ke_int(b, 1)), ke_lt(b, ke_tid(b), ke_int(b, 1)));
}

static kexpr *ctl_at(builder *x, kkernel *k, int64_t slot) {
  return ke_load(x->b, k, param(x, k, x->dl->ctl, false), ke_long(x->b, slot));
}

static kstmt *ctl_set(builder *x, kkernel *k, int64_t slot, kexpr *v) {
  return ks_store(x->b, param(x, k, x->dl->ctl, true), ke_long(x->b, slot), v);
}

static kexpr *eq(kbuilder *b, kexpr *a, kexpr *c) { return ke_bin(b, QIR_FN_EQ, a, c, KT_BOOL); }
static kexpr *ne(kbuilder *b, kexpr *a, kexpr *c) { return ke_bin(b, QIR_FN_NE, a, c, KT_BOOL); }

/* dst[offset + e] = src[e] for e < n (0 when `when` is false), spread over
 * every thread of the program. */
static kstmt *copy(builder *x, kkernel *k, qir_value *dst, kexpr *offset, qir_value *src, kexpr *when) {
  kbuilder *b = x->b;
  int64_t n = qir_type_numel(&src->type);
  int d = param(x, k, dst, true), s = param(x, k, src, false);
  kvar *e = kvar_new(b, NULL, "q_e", KT_I64, 0, KV_LOCAL);
  kexpr *lo = ke_add(b, ke_mul(b, ke_cast(b, ke_bid(b), KT_I64), ke_long(b, x->dl->threads)), ke_cast(b, ke_tid(b), KT_I64));
  kexpr *hi = ke_long(b, n);
  if (when) hi = ke_select(b, when, hi, ke_long(b, 0), KT_I64);
  kexpr *at = offset ? ke_add(b, offset, ke_var(b, e)) : ke_var(b, e);
  return ks_for(b, e, lo, hi, x->dl->grid * x->dl->threads, ks_store(b, d, at, ke_load(b, k, s, ke_var(b, e))));
}

/* "file:line:col" of an op, for run-time messages (no quotes or backslashes). */
static const char *loc_text(qir_module *m, const qir_op *op) {
  const char *f = op->loc.file ? op->loc.file : m->name ? m->name : "module";
  char *s = (char *)qir_sprintf(m, "%s:%d:%d", f, op->loc.line, op->loc.col);
  for (char *p = s; *p; p++)
    if (*p == '"' || *p == '\\' || *p == '%' || (unsigned char)*p < ' ') *p = '_';
  return s;
}

static int64_t new_error(builder *x, const char *text) {
  cg_dloop *dl = x->dl;
  const char **e = qir_alloc(x->b->m, sizeof *e * (size_t)(dl->n_errors + 1));
  if (dl->n_errors) memcpy(e, dl->errors, sizeof *e * (size_t)dl->n_errors);
  e[dl->n_errors++] = text;
  dl->errors = e;
  return dl->n_errors;
}

/* ctl[0] = code, ctl[1] = it unless an earlier error is there (first thread only) */
static kstmt *raise(builder *x, kkernel *k, kexpr *when, int64_t code, kexpr *it) {
  kbuilder *b = x->b;
  kstmt *set = ks_seq(b);
  ks_add(b, set, ctl_set(x, k, 1, it));
  ks_add(b, set, ctl_set(x, k, 0, ke_long(b, code)));
  return ks_if(b, ke_and(b, ke_and(b, first_thread(b), when), eq(b, ctl_at(x, k, 0), ke_long(b, 0))), set, NULL);
}

static bool build_region(builder *x, const qir_region *r, dl_node *seq);

static bool is_arg_of(const qir_value *v, const qir_region *r) { return !v->def && v->arg_of == r; }

static bool build_loop(builder *x, const qir_op *op, dl_node *seq, bool zero_status) {
  kbuilder *b = x->b;
  qir_module *m = b->m;
  cg_dloop *dl = x->dl;
  int l = 0;
  while (l < dl->n_loops && dl->loops[l] != op) l++;
  if (l == dl->n_loops) {
    fail(x, "a loop the program was not prepared for");
    return false;
  }
  int64_t slot = 2 + 3 * (int64_t)l;
  const qir_region *body = op->regions[0];
  const qir_op *yield = body->last;
  int n_carried = op->n_operands - 2;
  if (!yield || yield->code != QIR_OP_YIELD || body->n_args < 2 + n_carried) {
    fail(x, "a loop body without its yield");
    return false;
  }
  const char *loc = loc_text(m, op);
  /* a constant trip count, a constant true condition the body passes on
   * unchanged: exactly `trip` iterations, known here */
  int64_t exact = -1;
  const qir_op *tdef = op->operands[0]->def, *cdef = op->operands[1]->def;
  if (tdef && tdef->code == QIR_OP_CONST && tdef->cst && (tdef->cst->splat || tdef->cst->data) && cdef && cdef->code == QIR_OP_CONST &&
      cdef->cst && (cdef->cst->splat || cdef->cst->data) && qir_const_elem(m, (qir_op *)cdef, 0, NULL) != 0 && yield->operands[0] == body->args[1]) {
    double t = qir_const_elem(m, (qir_op *)tdef, 0, NULL);
    if (t >= 0 && t < 9e15) exact = (int64_t)t;
  }

  /* init */
  kkernel *k = ctl_kernel(x, op, "loop: counter, trip count, condition and carried values on the device");
  kstmt *once = ks_seq(b);
  if (zero_status) {
    ks_add(b, once, ctl_set(x, k, 0, ke_long(b, 0)));
    ks_add(b, once, ctl_set(x, k, 1, ke_long(b, 0)));
  }
  kexpr *cond0 = ke_load(b, k, param(x, k, op->operands[1], false), ke_int(b, 0));
  ks_add(b, once, ctl_set(x, k, slot, ke_long(b, 0)));
  ks_add(b, once, ctl_set(x, k, slot + 1, ke_cast(b, ke_load(b, k, param(x, k, op->operands[0], false), ke_int(b, 0)), KT_I64)));
  ks_add(b, once, ctl_set(x, k, slot + 2, ke_cast(b, ne(b, cond0, ke_int(b, 0)), KT_I64)));
  if (body->args[0]->uses) ks_add(b, once, ks_store(b, param(x, k, body->args[0], true), ke_int(b, 0), ke_long(b, 0)));
  if (body->args[1]->uses) ks_add(b, once, ks_store(b, param(x, k, body->args[1], true), ke_int(b, 0), cond0));
  ks_add(b, k->body, ks_if(b, first_thread(b), once, NULL));
  for (int i = 0; i < n_carried; i++) ks_add(b, k->body, copy(x, k, body->args[2 + i], NULL, op->operands[2 + i], NULL));
  phase(x, seq, k);

  dl_node *loop = node(x, DN_LOOP);
  loop->op = op;
  loop->slot = slot;
  loop->body = node(x, DN_SEQ);
  add(x, seq, loop);
  if (!build_region(x, body, loop->body)) return false;

  /* rows of the scan outputs; carried values the yield takes from arguments, to temporaries */
  k = ctl_kernel(x, op, "loop: scan output rows, carried values to temporaries");
  kexpr *it = ctl_at(x, k, slot);
  int64_t min_extent = INT64_MAX;
  int min_j = 0;
  for (int j = n_carried; j < op->n_results && 1 + j < yield->n_operands; j++) {
    qir_value *res = op->results[j], *y = yield->operands[1 + j];
    int64_t extent = res->type.rank ? res->type.dims[0] : 1;
    if (extent < min_extent) min_extent = extent, min_j = j;
    ks_add(b, k->body, copy(x, k, res, ke_mul(b, it, ke_long(b, qir_type_numel(&y->type))), y, ke_lt(b, it, ke_long(b, extent))));
  }
  if (min_extent != INT64_MAX && !(exact >= 0 && exact <= min_extent)) {
    int64_t code = new_error(x, qir_sprintf(m, "qir_run: %s: 'loop' runs more than %lld iterations, the %s extent of scan output %d\\n", loc,
                                            (long long)min_extent, op->results[min_j]->type.bounded ? "bounded" : "static",
                                            min_j - n_carried));
    ks_add(b, k->body, raise(x, k, ke_lt(b, ke_long(b, min_extent - 1), it), code, it));
  }
  for (int i = 0; i < n_carried; i++) {
    qir_value *y = yield->operands[1 + i];
    if (is_arg_of(y, body) && y != body->args[2 + i])
      ks_add(b, k->body, copy(x, k, dl->tmp[l][i], NULL, y, NULL));
  }
  if (k->body->n_items) phase(x, loop->body, k);

  /* next iteration */
  k = ctl_kernel(x, op, "loop: next iteration (counter, condition, carried values)");
  once = ks_seq(b);
  kexpr *next = ke_add(b, ctl_at(x, k, slot), ke_long(b, 1));
  kexpr *go = ke_and(b, ne(b, ke_load(b, k, param(x, k, yield->operands[0], false), ke_int(b, 0)), ke_int(b, 0)),
                     eq(b, ctl_at(x, k, 0), ke_long(b, 0)));
  ks_add(b, once, ctl_set(x, k, slot + 2, ke_cast(b, go, KT_I64)));
  ks_add(b, once, ctl_set(x, k, slot, next));
  if (body->args[0]->uses) ks_add(b, once, ks_store(b, param(x, k, body->args[0], true), ke_int(b, 0), ctl_at(x, k, slot)));
  if (body->args[1]->uses)
    ks_add(b, once, ks_store(b, param(x, k, body->args[1], true), ke_int(b, 0), ne(b, ctl_at(x, k, slot + 2), ke_long(b, 0))));
  ks_add(b, k->body, ks_if(b, first_thread(b), once, NULL));
  for (int i = 0; i < n_carried; i++) {
    qir_value *y = yield->operands[1 + i];
    if (y == body->args[2 + i]) continue;
    ks_add(b, k->body, copy(x, k, body->args[2 + i], NULL, is_arg_of(y, body) ? dl->tmp[l][i] : y, NULL));
  }
  phase(x, loop->body, k);

  /* results; scan outputs of static extent that missed rows */
  k = ctl_kernel(x, op, "loop: results");
  for (int i = 0; i < n_carried && i < op->n_results; i++) ks_add(b, k->body, copy(x, k, op->results[i], NULL, body->args[2 + i], NULL));
  for (int j = n_carried; j < op->n_results; j++) {
    qir_value *res = op->results[j];
    int64_t extent = res->type.rank ? res->type.dims[0] : 1;
    if (res->type.bounded || exact == extent) continue;
    int64_t code = new_error(x, qir_sprintf(m, "qir_run: %s: 'loop' ran %%lld iterations but scan output %d has static extent %lld\\n", loc,
                                            j - n_carried, (long long)extent));
    kexpr *ran = ctl_at(x, k, slot);
    ks_add(b, k->body, raise(x, k, ne(b, ran, ke_long(b, extent)), code, ran));
  }
  if (k->body->n_items) phase(x, seq, k);
  return true;
}

static bool build_if(builder *x, const qir_op *op, dl_node *seq) {
  dl_node *n = node(x, DN_IF);
  n->op = op;
  n->cond = op->operands[0];
  for (int br = 0; br < 2 && br < op->n_regions; br++) {
    dl_node *side = node(x, DN_SEQ);
    if (br) n->els = side;
    else n->body = side;
    const qir_region *r = op->regions[br];
    if (!build_region(x, r, side)) return false;
    const qir_op *y = r->last;
    if (!y || y->code != QIR_OP_YIELD) continue;
    kkernel *k = ctl_kernel(x, op, br ? "if: else branch's results" : "if: then branch's results");
    for (int i = 0; i < op->n_results && i < y->n_operands; i++)
      if (y->operands[i] != op->results[i]) ks_add(x->b, k->body, copy(x, k, op->results[i], NULL, y->operands[i], NULL));
    if (k->body->n_items) phase(x, side, k);
  }
  add(x, seq, n);
  return true;
}

static bool build_region(builder *x, const qir_region *r, dl_node *seq) {
  for (const qir_op *op = r->first; op && !x->failed; op = op->next) {
    switch (op->code) {
    case QIR_OP_CONST: case QIR_OP_YIELD: continue;
    case QIR_OP_INPUT: case QIR_OP_OUTPUT: fail(x, "an input or output inside its body"); return false;
    /* an rprogram packs kernels that stand before it: inside a device program
     * they run as phases where they stand (each after its operands), a
     * barrier after each, instead of in the program's waves */
    case QIR_OP_RPROGRAM: continue;
    case QIR_OP_LOOP: case QIR_OP_IF: {
      qir_device_plan p;
      if (!qir_device_plan_get(op, &p, NULL) || p.level == QIR_LEVEL_HOST) {
        fail(x, "a host-level loop/if inside it");
        return false;
      }
      if (!(op->code == QIR_OP_LOOP ? build_loop(x, op, seq, false) : build_if(x, op, seq))) return false;
      continue;
    }
    default: break;
    }
    int n = 0;
    kkernel **ks = x->kernels_of(x->ctx, op, &n);
    for (int i = 0; i < n; i++) {
      if (ks[i]->grid == 0) continue;
      const char *why = lower_run_unfit(x->b->m, ks[i], x->dl->threads, x->cg->warp);
      if (!why && ks[i]->threads > x->dl->threads)
        why = qir_sprintf(x->b->m, "%s has %d threads per block, more than the plan's %d", ks[i]->name, ks[i]->threads, x->dl->threads);
      if (why) {
        fail(x, why);
        return false;
      }
      phase(x, seq, ks[i]);
    }
  }
  return !x->failed;
}

/* ---------------------------------------------------------------- realising */

static bool has_shared(const kkernel *k) {
  for (int i = 0; i < k->n_vars; i++)
    if (k->vars[i]->space == KV_SHARED) return true;
  return false;
}

static void add_var(qir_module *m, kkernel *k, kvar *v) {
  kvar **vars = qir_alloc(m, sizeof *vars * (size_t)(k->n_vars + 1));
  if (k->n_vars) memcpy(vars, k->vars, sizeof *vars * (size_t)k->n_vars);
  vars[k->n_vars++] = v;
  k->vars = vars;
}

static void register_kernel(cg_ctx *cg, kkernel *k) {
  if (cg->n_kernels == cg->cap_kernels) {
    int c2 = cg->cap_kernels ? cg->cap_kernels * 2 : 16;
    kkernel **ks = qir_alloc(cg->m, sizeof *ks * (size_t)c2);
    if (cg->n_kernels) memcpy(ks, cg->kernels, sizeof *ks * (size_t)cg->n_kernels);
    cg->kernels = ks;
    cg->cap_kernels = c2;
  }
  k->id = cg->n_kernels;
  cg->kernels[cg->n_kernels++] = k;
}

/* C: each phase becomes a kernel of the program's blocks running the tasks of its own. */
static void c_phases(builder *x, dl_node *n, int *chk_kernel, int *count) {
  if (!n) return;
  for (int i = 0; i < n->n_items; i++) c_phases(x, n->items[i], chk_kernel, count);
  c_phases(x, n->body, chk_kernel, count);
  c_phases(x, n->els, chk_kernel, count);
  if (n->kind != DN_PHASE) return;
  kbuilder *b = x->b;
  kkernel *mk = n->k, *k = kkernel_new(b, qir_sprintf(b->m, "dloop%d_phase%d", x->dl->id, (*count)++), mk->n_params);
  bool control = !strncmp(mk->name, "dloop", 5);
  int *pmap = qir_alloc(b->m, sizeof(int) * (size_t)(mk->n_params + 1));
  for (int i = 0; i < mk->n_params; i++) {
    pmap[i] = i;
    k->params[i] = mk->params[i];
    k->args[i] = mk->args[i];
  }
  k->summary = qir_sprintf(b->m, "device loop %d, phase %d: %s, %lld task%s on %lld block%s", x->dl->id, *count - 1,
                           mk->summary ? mk->summary : mk->name, (long long)mk->grid, mk->grid == 1 ? "" : "s", (long long)x->dl->grid,
                           x->dl->grid == 1 ? "" : "s");
  k->grid = x->dl->grid;
  k->threads = x->dl->threads;
  k->warp = x->cg->warp;
  for (int i = 0; i < mk->n_vars; i++) {
    add_var(b->m, k, mk->vars[i]);
    if (mk->vars[i]->space == KV_SHARED) k->smem_bytes += kvar_bytes(mk->vars[i]);
  }
  /* C prints a member's lets per phase: its task loop must be one at block
   * level (with a barrier), where the task is in scope */
  ks_add(b, k->body, lower_run_tasks(b, mk, pmap, 0, x->dl->grid - 1, 0, mk->grid, x->dl->threads, k->lets, true, NULL, NULL));
  k->loc = mk->loc;
  k->op_text = mk->op_text;
  k->grid_phase = *count > 1;   /* every phase but the first starts after a barrier */
  k->chk_group = true;
  k->chk_cover = !control;
  register_kernel(x->cg, k);
  if (*chk_kernel < 0) *chk_kernel = k->id;
  k->chk_kernel = *chk_kernel;
  k->chk_block0 = 0;
  mk->unprinted = true;
  n->k = k;
}

typedef struct {
  builder *x;
  kkernel *k;                   /* the persistent kernel */
  int n_members;
  kkernel **members;
  int **pmaps;
} gpu_merge;

static void gather(gpu_merge *g, dl_node *n) {
  if (!n) return;
  if (n->kind == DN_PHASE) {
    kkernel *mk = n->k;
    int *pmap = qir_alloc(g->x->b->m, sizeof(int) * (size_t)(mk->n_params + 1));
    for (int i = 0; i < mk->n_params; i++) pmap[i] = param(g->x, g->k, mk->args[i], mk->params[i].written);
    g->members[g->n_members] = mk;
    g->pmaps[g->n_members++] = pmap;
    for (int v = 0; v < mk->n_vars; v++) {
      kvar *x = mk->vars[v];
      if (x->space == KV_SHARED) x->carve = 1 + kvar_dynamic_offset(mk, x);
      add_var(g->x->b->m, g->k, x);
      if (x->space == KV_SHARED && kvar_bytes(x) + x->carve - 1 > g->k->smem_bytes) g->k->smem_bytes = kvar_bytes(x) + x->carve - 1;
    }
  }
  if (n->kind == DN_IF) param(g->x, g->k, n->cond, false);
  for (int i = 0; i < n->n_items; i++) gather(g, n->items[i]);
  gather(g, n->body);
  gather(g, n->els);
}

static int count_phases(const dl_node *n) {
  if (!n) return 0;
  int c = n->kind == DN_PHASE;
  for (int i = 0; i < n->n_items; i++) c += count_phases(n->items[i]);
  return c + count_phases(n->body) + count_phases(n->els);
}

static kstmt *barrier(builder *x) {
  if (x->dl->block_level) return ks_barrier(x->b);
  kstmt *s = ks_seq(x->b);
  s->kind = KS_GRID_BARRIER;
  return s;
}

static kstmt *gpu_body(gpu_merge *g, const dl_node *n) {
  builder *x = g->x;
  kbuilder *b = x->b;
  kkernel *k = g->k;
  kstmt *out = ks_seq(b);
  switch (n->kind) {
  case DN_SEQ:
    for (int i = 0; i < n->n_items; i++) {
      ks_add_flat(b, out, gpu_body(g, n->items[i]));
      /* a barrier after every phase but one the next phase need not wait for */
      if (n->items[i]->kind == DN_PHASE && !(i + 1 < n->n_items && n->items[i + 1]->kind == DN_PHASE && n->items[i + 1]->no_barrier))
        ks_add(b, out, barrier(x));
    }
    break;
  case DN_PHASE: {
    int m = 0;
    while (g->members[m] != n->k) m++;
    const kkernel *mk = n->k;
    ks_add(b, out, lower_run_tasks(b, mk, g->pmaps[m], 0, x->dl->grid - 1, 0, mk->grid, x->dl->threads, NULL, has_shared(mk), NULL, NULL));
    break;
  }
  case DN_LOOP: {
    kvar *it = kvar_new(b, NULL, "q_it", KT_I64, 0, KV_BLOCK);
    int c = param(x, k, x->dl->ctl, true);
    kexpr *go = ke_and(b, ne(b, ke_load(b, k, c, ke_long(b, n->slot + 2)), ke_long(b, 0)), eq(b, ke_load(b, k, c, ke_long(b, 0)), ke_long(b, 0)));
    kstmt *body = ks_seq(b);
    kstmt *stop = ks_seq(b);
    stop->kind = KS_BREAK;
    ks_add(b, body, ks_comment(b, "every block reads the counter, trip count and condition the last phase wrote"));
    ks_add(b, body, ks_if(b, go, ks_seq(b), stop));
    ks_add_flat(b, body, gpu_body(g, n->body));
    kstmt *loop = ks_for(b, it, ke_long(b, 0), ke_load(b, k, c, ke_long(b, n->slot + 1)), 1, body);
    loop->uniform = true;
    ks_add(b, out, loop);
    break;
  }
  case DN_IF: {
    int c = param(x, k, n->cond, false);
    ks_add(b, out, ks_comment(b, "every block reads the condition: both branches are compiled, the device chooses"));
    ks_add(b, out, ks_if(b, ne(b, ke_load(b, k, c, ke_int(b, 0)), ke_int(b, 0)), gpu_body(g, n->body), gpu_body(g, n->els)));
    break;
  }
  }
  return out;
}

bool cg_dloop_build(cg_ctx *cg, cg_dloop *dl, kkernel **(*kernels_of)(void *ctx, const qir_op *op, int *n), void *ctx) {
  builder x = {.cg = cg, .b = &cg->kb, .dl = dl, .kernels_of = kernels_of, .ctx = ctx};
  kbuilder *b = x.b;
  dl->root = node(&x, DN_SEQ);
  for (int i = 0; i < dl->n_pre; i++) {   /* kernels before it, in their order */
    int n = 0;
    kkernel **ks = kernels_of(ctx, dl->pre[i], &n);
    for (int j = 0; j < n; j++)
      if (ks[j]->grid) phase(&x, dl->root, ks[j]);
  }
  if (dl->op->code == QIR_OP_LOOP) {
    build_loop(&x, dl->op, dl->root, true);
  } else {
    kkernel *k = ctl_kernel(&x, dl->op, "device program: no error yet");
    kstmt *once = ks_seq(b);
    ks_add(b, once, ctl_set(&x, k, 0, ke_long(b, 0)));
    ks_add(b, once, ctl_set(&x, k, 1, ke_long(b, 0)));
    ks_add(b, k->body, ks_if(b, first_thread(b), once, NULL));
    phase(&x, dl->root, k);
    build_if(&x, dl->op, dl->root);
  }
  for (int i = 0; i < dl->n_post; i++) {   /* kernels after it */
    int n = 0;
    kkernel **ks = kernels_of(ctx, dl->post[i], &n);
    for (int j = 0; j < n; j++)
      if (ks[j]->grid) phase(&x, dl->root, ks[j]);
  }
  if (x.failed) return false;
  if (cg->backend == CG_C) {
    int chk_kernel = -1, count = 0;
    c_phases(&x, dl->root, &chk_kernel, &count);
  }
  return true;
}

/* C: a phase that needs no barrier before it is not a new grid epoch. */
static void c_barriers(dl_node *n) {
  if (!n) return;
  if (n->kind == DN_PHASE && n->no_barrier) {
    n->k->unordered_launch = true;
    n->k->grid_phase = false;
  }
  for (int i = 0; i < n->n_items; i++) c_barriers(n->items[i]);
  c_barriers(n->body);
  c_barriers(n->els);
}

void cg_dloop_finish(cg_ctx *cg, cg_dloop *dl) {
  if (cg->backend == CG_C) {
    c_barriers(dl->root);
    return;
  }
  builder x = {.cg = cg, .b = &cg->kb, .dl = dl};
  kbuilder *b = x.b;
  int n_phases = count_phases(dl->root);
  gpu_merge g = {.x = &x};
  g.members = qir_alloc(b->m, sizeof *g.members * (size_t)(n_phases + 1));
  g.pmaps = qir_alloc(b->m, sizeof *g.pmaps * (size_t)(n_phases + 1));
  kkernel *k = kkernel_new(b, qir_sprintf(b->m, "dloop%d", dl->id), 1);
  k->n_params = 0;
  g.k = k;
  param(&x, k, dl->ctl, true);
  gather(&g, dl->root);
  k->grid = dl->grid;
  k->threads = dl->threads;
  k->warp = cg->warp;
  k->carved_smem = true;
  k->coherent = true;
  k->cooperative = !dl->block_level;
  qir_device_plan p;
  if (!dl->block_level && qir_device_plan_get(dl->op, &p, NULL) && p.target && p.target->compute_units > 0)
    k->min_blocks = (int)((dl->grid + p.target->compute_units - 1) / p.target->compute_units);
  k->summary = qir_sprintf(b->m, "device-resident %s (#device level %s): %d phases on %lld block%s of %d threads, %s between them",
                           dl->op->code == QIR_OP_LOOP ? "loop" : "if", dl->block_level ? "block" : "grid", n_phases, (long long)dl->grid,
                           dl->grid == 1 ? "" : "s", dl->threads, dl->block_level ? "__syncthreads" : "grid barriers");
  k->loc = dl->op->loc;
  k->op_text = dl->op->code == QIR_OP_LOOP ? "loop" : "if";
  ks_add_flat(b, k->body, gpu_body(&g, dl->root));
  register_kernel(cg, k);
  dl->kernel = k;
}
