/* welder.c: the -welder pass, tile-graph fusion (Welder, OSDI'23), by model.
 *
 * Graph connecting.  Every region is scanned from its end: an op not yet in a
 * group becomes the root of a new group (its result goes to global memory),
 * and the group grows backwards along producer -> consumer edges while each
 * step lowers the modelled time.  A producer joins when all its uses are in
 * the group and
 *   - it has no reduction (elementwise, broadcast, movement) and the group
 *     reads each of its elements at most once (the footprint of its readers'
 *     access maps, summed over readers, is no larger than the tensor: no
 *     recomputation): it is inlined per thread, #fuse=reg; or
 *   - it is the group's one reduction (a contraction, a convolution, a pooling,
 *     a row reduction: the anchor), read only through identity access maps on
 *     the way to the root (so the group's output tile is the anchor's output
 *     tile, and the root's chain becomes the anchor's epilogue), with the
 *     root's element type: #fuse=reg, the accumulator handed over in registers.
 *   - it is a transpose, reshape, slice, or a concat of values no kernel of the
 *     region computes (weights; its form only reads its operands at other
 *     indices, a concat's choosing the operand by the index's range): folded into its readers' access maps at any reuse, a
 *     contraction's operand loads included, no work recomputed (not into
 *     matrix-unit plans, which stage plain tiles).  Its cost is then its
 *     operands' traffic in the group's bytes, as a kernel of its own would read
 *     them, without its result's write and read: a concat of weights costs no
 *     kernel and no round trip.
 * Each step removes a round trip of the producer's tensor through global
 * memory and adds no work, so the modelled time falls with each.  A hand-written
 * `kernel` group is honoured: it is neither regrouped nor absorbed.
 *
 * Sub-graph tiling.  The group's output tile is Roller's plan of the anchor
 * (or of the root when there is no anchor): `-roller` constructed it for the
 * same output and reduction axes.  Inner tiles are derived by propagating the
 * block tile backwards through the access maps of each consumer's tensor
 * expression: an affine index covers sum |coef| * (extent - 1) + 1 elements
 * (halos and strides included), a data-dependent one the whole dimension,
 * reduction axes their whole extent.  Each member gets #tile{block = [...]},
 * the anchor keeps its full plan; the group gets #tile (the plan), #est_us
 * and #global_bytes.
 *
 * Row ops (softmax, log_softmax, layer norm: reductions over the rows of their
 * result) root groups of their own, one kernel in qcodegen (a warp per row,
 * several rows a block); the elementwise producer of their input joins at the
 * shared-memory level (#fuse=smem: its row computed once into shared memory,
 * read by every stage), its own producers by the rules above, and a reduction
 * that row reads at its own points (QK^T before the softmax, a gemm's logits)
 * joins when the model rates it cheaper computed per point while the row is
 * staged than as its own kernel (row_work_us: serial per-lane loads, the units
 * the rows keep busy, L2 traffic of its other operands per block).  A
 * contraction over the rows of a row op's result (@V after the softmax) takes
 * the row op's group in, by the same model: each row's warp then computes the
 * contraction's row from the row's result in shared memory (try_row_tail).
 * A row group's tile is whole rows: its block covers the reduced axes (a
 * softmax needs every element of its row), with the rows per block the model
 * picks; its point reduction keeps no plan of its own.
 *
 * Shared-memory edges (see "shared-memory edges" below): a producer the group
 * reads across windows (a convolution before a pooling or LRN, a pooling
 * before a convolution, the branches of a concat) joins with its own segment
 * at #fuse=smem when the model rates the joint kernel faster, recomputed halo
 * work counted; the group's block tile is then constructed for the group.
 *
 * Before graph connecting, sibling contractions merge where the model says so
 * (welder_siblings.c, "the horizontal step" below).
 *
 * With -stats the pass prints operators, kernels, modelled global bytes and
 * modelled time (kernels' estimates plus one launch each: -welder-launch-us,
 * by default the target's launch_us) before and after, and its own time, on
 * stderr; where the module has casts (-autocast's), how many it folded into
 * kernel groups and how many run as kernels of their own.  With -welder-stats, a line per
 * producer -> consumer edge it considered (print_edges): the level it got and
 * what each level's try found (the node's notes: the reason a rule refused
 * it, or the modelled times joint and apart it compared), nothing else. */
#include "qopt.h"
#include "rprogram.h"
#include "welder_siblings.h"
#include "attention.h"
#include "target.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_MEMBERS 64

typedef struct {
  qir_op *op;
  const qir_compute *comp;      /* tensor-expression form, or NULL: not fusable */
  qir_value **args;             /* operands of the form (accesses index these) */
  bool row;                     /* softmax, norms: reductions over the rows of its result, one kernel
                                 * of its own in qcodegen (a row group) */
  bool solo;                    /* a multi-stage op that is one kernel as a group of its own */
  bool fusable;                 /* fusable_code */
  bool movement;                /* transpose, reshape, slice, concat: its form only reads its operands elsewhere */
  int group;                    /* -1: none yet */
  bool identity;                /* reaches its group's root through identity reads only */
  double bytes;                 /* modelled global traffic as its own kernel */
  double est_us;                /* modelled time as its own kernel */
  qir_op *chain[4];             /* a solo op's definition (LRN: reduction, then elementwise), unlinked */
  int n_chain;
  bool staged;                  /* its result is computed into shared memory for its group (#fuse=smem) */
  int seg;                      /* the node whose segment it belongs to (staged groups): its own group's
                                 * root or a staged node */
  /* -welder-stats: what the last try of each level found for the edge from
   * this node into the group being grown ("" = not tried) */
  char note_reg[400], note_smem[240], note_rows[200];
} node;

typedef struct {
  qir_module *m;
  const qir_target *t;
  qir_diag *d;
  FILE *quiet;                  /* what qir_op_to_compute says about ops without a form */
  int n_groups;
  double launch_us;             /* one kernel launch, in the modelled times */
  bool stats;                   /* -welder-stats: a line per edge considered on stderr */
  roller_options plan;          /* -roller's options, for the ops the sibling step creates */
  const int64_t *at;            /* qopt_modelled_us at these symbol values, or NULL: the bound */
  qopt_ctx *ctx;                /* (with at) the options rprograms are modelled with */
} welder;

typedef struct {
  int n_ops, n_kernels;
  double bytes, est_us;
} model_totals;

/* ---------------------------------------------------------------- model */

static int64_t value_bytes(const qir_value *v) { return qir_type_numel(&v->type) * qir_dtype_size(v->type.dtype); }

static double bytes_us(const welder *w, double bytes) { return bytes / (w->t->dram_gbs * 1e3); }

/* Each distinct operand read once, each result written once. */
static double op_bytes(const qir_op *op) {
  double b = 0;
  for (int i = 0; i < op->n_operands; i++) {
    bool seen = false;
    for (int j = 0; j < i; j++) seen |= op->operands[j] == op->operands[i];
    if (!seen) b += (double)value_bytes(op->operands[i]);
  }
  for (int i = 0; i < op->n_results; i++) b += (double)value_bytes(op->results[i]);
  return b;
}

/* Roller's estimate when the op has a plan, else its traffic at DRAM speed. */
static double op_est_us(const welder *w, const qir_op *op, double bytes) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  const qir_attr_val *e = tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, "est_us") : NULL;
  double mem = bytes_us(w, bytes);
  if (e && (e->kind == QIR_ATTR_FLOAT || e->kind == QIR_ATTR_INT)) {
    double v = e->kind == QIR_ATTR_FLOAT ? e->f : (double)e->i;
    return v > mem ? v : mem;
  }
  return mem;
}

double welder_op_us(const qir_target *t, const qir_op *op) {
  welder w = {.t = t, .launch_us = 0};
  return op_est_us(&w, op, op_bytes(op));
}

/* Ops that launch no kernel: structure, constants, views (a slice a flash
 * attention reads in place among them, and a KV cache's concat it writes). */
static bool launches(const qir_op *op) {
  switch (op->code) {
  case QIR_OP_INPUT: case QIR_OP_OUTPUT: case QIR_OP_CONST: case QIR_OP_YIELD:
  case QIR_OP_LOOP: case QIR_OP_IF: case QIR_OP_RESHAPE: case QIR_OP_IDENTITY:
    return false;
  default: return !qir_attention_folds_slice(op) && !qir_attention_folds_concat(op);
  }
}

static bool is_operator(const qir_op *op) {
  return op->code != QIR_OP_INPUT && op->code != QIR_OP_OUTPUT && op->code != QIR_OP_CONST && op->code != QIR_OP_YIELD;
}

/* Kernels qcodegen launches for an op outside a group: one per stage of its
 * definition (softmax: 3, layer norm: 3, LRN: 2), else one. */
static int op_kernels(const welder *w, qir_op *op) {
  if (op->code == QIR_OP_COMPUTE || op->n_results != 1) return 1;
  if (qir_attention_flash_planned(op)) return qir_attention_flash_splits(op) > 1 ? 2 : 1;   /* partial results, combine */
  qir_diag qd;
  qir_diag_init(&qd, w->quiet, NULL, NULL, 0);
  qir_op *chain[16];
  int n = qir_op_expand_computes(w->m, op, chain, 16, &qd);
  for (int i = 0; i < n; i++) qir_op_unlink(chain[i]);
  return n > 0 ? n : 1;
}

/* The share of an op's time a run at w->at takes (qopt_run_share: the blocks
 * that do work), or its band's plan's estimate; an rprogram's member counts
 * in its program (qopt_rprogram_us_at). */
static double run_share(const welder *w, const qir_op *op) {
  if (!w->at || qir_rprogram_packs(op)) return 1;
  double band = qopt_band_share(op, w->at);
  return band >= 0 ? band : qopt_run_share(w->t, op, w->at);
}


static void totals_region(const welder *w, qir_region *r, model_totals *s) {
  for (qir_op *op = r->first; op; op = op->next) {
    if (op->code == QIR_OP_KERNEL && qir_rprogram_packs(op)) {
      for (qir_op *in = op->regions[0]->first; in; in = in->next) s->n_ops += is_operator(in);
      continue;
    }
    if (op->code == QIR_OP_KERNEL) {
      s->n_kernels++;
      for (qir_op *in = op->regions[0]->first; in; in = in->next) s->n_ops += is_operator(in);
      double b = op_bytes(op);
      s->bytes += b;
      double est = qir_op_attr_float(op, "est_us", -1);
      s->est_us += (est >= 0 ? est : bytes_us(w, b)) * run_share(w, op);
      continue;
    }
    if (op->code == QIR_OP_VERSIONS) {   /* the region a run at w->at takes; the last at the bound */
      int64_t *at = NULL;
      int k = op->n_regions - 1;
      if (w->at) {
        at = malloc(sizeof *at * (size_t)(w->m->n_syms + 1));
        if (!at) abort();
        memcpy(at, w->at, sizeof *at * (size_t)w->m->n_syms);
        int picked = qir_versions_pick(w->m, op, at);
        if (picked >= 0) k = picked;
      }
      welder inner = *w;
      inner.at = at;
      totals_region(&inner, op->regions[k], s);
      free(at);
      continue;
    }
    if (op->code == QIR_OP_RPROGRAM) { /* one persistent kernel: its own estimate (its kernels count there) */
      s->n_kernels++;
      s->est_us += w->at ? qopt_rprogram_us_at(w->ctx, w->m, op, w->at) : qir_op_attr_float(op, "est_us", 0);
      continue;
    }
    s->n_ops += is_operator(op);
    for (int i = 0; i < op->n_regions; i++) totals_region(w, op->regions[i], s);
    if (!launches(op) || qir_rprogram_packs(op)) continue;
    s->n_kernels += op_kernels(w, op);
    double b = op_bytes(op);
    s->bytes += b;
    s->est_us += op_est_us(w, op, b) * run_share(w, op);
  }
}

/* -welder-stats: writes what a level found into a node's note (when asked);
 * false, so a refusal can return it. */
static bool note(const welder *w, char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool note(const welder *w, char *buf, size_t n, const char *fmt, ...) {
  if (!w->stats) return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, n, fmt, ap);
  va_end(ap);
  return false;
}
#define NOTE(w, p, level, ...) note((w), (p)->note_##level, sizeof (p)->note_##level, __VA_ARGS__)

/* ---------------------------------------------------------------- access maps */

static int64_t form_points(const qir_compute *c) {
  int64_t p = 1;
  for (int v = 0; v < c->n_axes + c->n_red; v++) p *= c->axis_extents[v] > 0 ? c->axis_extents[v] : 1;
  return p;
}

typedef struct {
  int count;                    /* access sites of the value */
  bool identity;                /* every site reads it at [i0, i1, ..] of the form's output axes */
  bool at_point;                /* some site reads it there */
  int n_other;                  /* distinct other index tuples */
  const qir_expr *other[8];
  int64_t foot[QIR_MAX_RANK];   /* footprint of a block tile (max over sites) */
} reads;

/* How form c (operands args) reads v, for a block tile `block` over c's
 * output axes (reduction axes: their whole extent); block NULL = no tile. */
static void collect_reads(const qir_compute *c, qir_value *const *args, const qir_expr *e, const qir_value *v,
                          const int64_t *block, reads *r) {
  if (!e) return;
  if (e->kind == QIR_EX_ACCESS && e->operand >= 0 && args[e->operand] == v) {
    r->count++;
    bool id = e->n_args == c->n_axes && v->type.rank == c->n_axes;
    for (int j = 0; id && j < e->n_args; j++)
      id = e->args[j]->kind == QIR_EX_VAR && e->args[j]->var == j && v->type.dims[j] == c->axis_extents[j];
    if (!id) {
      r->identity = false;
      bool seen = false;
      for (int k = 0; k < r->n_other && !seen; k++) seen = qir_expr_equal(r->other[k], e);
      if (!seen) {
        if (r->n_other < 8) r->other[r->n_other] = e;
        r->n_other++;
      }
    } else {
      r->at_point = true;
    }
    int nv = c->n_axes + c->n_red;
    for (int j = 0; block && j < e->n_args && j < QIR_MAX_RANK; j++) {
      int64_t coef[32], c0, span = v->type.dims[j];
      if (qir_expr_affine(e->args[j], nv, coef, &c0)) {
        span = 1;
        for (int x = 0; x < nv; x++) {
          int64_t ext = x < c->n_axes ? block[x] : c->axis_extents[x];
          span += llabs(coef[x]) * (ext > 0 ? ext - 1 : 0);
        }
        if (span > v->type.dims[j]) span = v->type.dims[j];
      }
      if (span > r->foot[j]) r->foot[j] = span;
    }
  }
  for (int i = 0; i < e->n_args; i++) collect_reads(c, args, e->args[i], v, block, r);
}

/* ---------------------------------------------------------------- grouping */

typedef struct {
  welder *w;
  node *nodes;
  int n_nodes;
  int *node_of;                 /* value id -> node index, -1 */
  int n_ids;                    /* ids node_of covers (groups add values later) */
  double *size;                 /* scratch for member_size, n_nodes entries */
  int point_group;              /* the row group that has its point reduction, or -1 */
} region_ctx;

static node *producer(region_ctx *rc, const qir_value *v) {
  if (!v->def || v->id < 0 || v->id >= rc->n_ids) return NULL;
  int i = rc->node_of[v->id];
  return i >= 0 ? &rc->nodes[i] : NULL;
}

static bool in_group(region_ctx *rc, const qir_op *op, int g) {
  for (int k = 0; k < op->n_results; k++) {
    node *n = producer(rc, op->results[k]);
    if (n && n->op == op) return n->group == g;
  }
  return false;
}

/* Nodes of the composed expression of member n (producers inlined where they
 * are read), memoised in size[] (0: not yet); the anchor counts once. */
static double expr_size(region_ctx *rc, const qir_expr *e, const node *n, int g, double *size);

static double member_size(region_ctx *rc, node *n, int g, double *size) {
  int i = (int)(n - rc->nodes);
  if (size[i] != 0) return size[i];
  if (n->comp) {
    size[i] = 1 + expr_size(rc, n->comp->body, n, g, size);
  } else {                      /* a row op: its stages read the operands */
    size[i] = 1;
    for (int k = 0; k < n->op->n_operands; k++) {
      node *p = producer(rc, n->op->operands[k]);
      if (p && p->group == g && p->comp && p->comp->n_red == 0) size[i] += member_size(rc, p, g, size);
    }
  }
  return size[i];
}

static double expr_size(region_ctx *rc, const qir_expr *e, const node *n, int g, double *size) {
  if (!e) return 0;
  double s = 1;
  if (e->kind == QIR_EX_ACCESS && e->operand >= 0) {
    node *p = producer(rc, n->args[e->operand]);
    if (p && p->group == g && p->comp && p->comp->n_red == 0) s += member_size(rc, p, g, size);
  }
  for (int i = 0; i < e->n_args; i++) s += expr_size(rc, e->args[i], n, g, size);
  return s;
}

/* Largest composed expression a group may have: inlining a value read at
 * several places copies it, and chains of such copies grow exponentially. */
#define MAX_COMPOSED_NODES 4096

/* Ops whose definition is a chain of reductions over the same axes of the
 * result and an elementwise last stage: qcodegen runs such a group one warp
 * per row, its input row staged in shared memory. */
static bool row_op(const qir_op *op) {
  switch (op->code) {
  case QIR_OP_SOFTMAX: case QIR_OP_LOG_SOFTMAX: case QIR_OP_LAYER_NORM: case QIR_OP_INSTANCE_NORM:
  case QIR_OP_LP_NORMALIZATION:
    return op->n_results == 1;
  default: return false;
  }
}

/* The staged row must fit the shared memory qcodegen gives it. */
#define ROW_SMEM_BYTES QIR_ROW_SMEM_LIMIT

/* The axes a row op reduces (its rows): false when its axis is out of range. */
static bool row_axes(const qir_op *op, bool *reduced) {
  const qir_type *t = &op->results[0]->type;
  int64_t axis = qir_op_attr_int(op, "axis", op->code == QIR_OP_INSTANCE_NORM ? 2 : -1);
  if (axis < 0) axis += t->rank;
  if (axis < 0 || axis >= t->rank) return false;
  bool to_end = op->code == QIR_OP_LAYER_NORM || op->code == QIR_OP_INSTANCE_NORM;
  for (int d = 0; d < t->rank; d++) reduced[d] = d >= axis && (to_end || d == axis);
  return true;
}

/* Bytes of one row of a row op's result (its reduced axes). */
static int64_t row_bytes(const qir_op *op) {
  const qir_type *t = &op->results[0]->type;
  bool reduced[QIR_MAX_RANK];
  if (t->rank > QIR_MAX_RANK || !row_axes(op, reduced)) return INT64_MAX;
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) n *= reduced[d] ? t->dims[d] : 1;
  return n * qir_dtype_size(t->dtype);
}

static int form_loads(const qir_expr *e);

#define MAX_VARS_MODEL QIR_MAX_RANK

static bool uses_var(const qir_expr *e, const bool *mask, int n_mask) {
  if (!e) return false;
  if (e->kind == QIR_EX_VAR && e->var >= 0 && e->var < n_mask && mask[e->var]) return true;
  for (int i = 0; i < e->n_args; i++)
    if (uses_var(e->args[i], mask, n_mask)) return true;
  return false;
}

/* Loads per step of form c's reduction when each lane computes `unroll`
 * points at once (qcodegen's row kernels: lane, lane + warp, ...): a load
 * whose index moves with the points (variables in `moving`) is made for each,
 * one that does not (the row's own operand) once for all of them. */
static double unrolled_loads(const qir_expr *e, const bool *moving, int n_vars, double unroll) {
  if (!e) return 0;
  double n = 0;
  if (e->kind == QIR_EX_ACCESS) {
    bool moves = false;
    for (int i = 0; i < e->n_args; i++) moves |= uses_var(e->args[i], moving, n_vars);
    n = moves ? 1 : 1 / unroll;
  }
  for (int i = 0; i < e->n_args; i++) n += unrolled_loads(e->args[i], moving, n_vars, unroll);
  return n;
}

/* The points of a row each lane computes at once (qcodegen: 4, 2 or 1, no
 * more than the row fills); *waste: the slots its lanes walk per point of the
 * row (past its end they compute its last point again). */
static double row_unroll(int64_t points, int warp, double *waste) {
  int64_t u = 4;
  while (u > 1 && warp * u > points) u /= 2;
  int64_t slots = u > 1 ? (points + warp * u - 1) / (warp * u) * warp * u : points;
  *waste = points > 0 ? (double)slots / (double)points : 1;
  return (double)u;
}

/* Bytes of the operands of member c (but `skip`) that one block reads when
 * c's output axes range over blk, times the blocks: its L2 traffic. */
static double blocks_l2(const node *c, const qir_value *skip, const int64_t *blk, double blocks) {
  double l2 = 0;
  for (int k = 0; k < c->op->n_operands; k++) {
    const qir_value *x = c->op->operands[k];
    bool seen = x == skip;
    for (int j = 0; j < k; j++) seen |= c->op->operands[j] == x;
    if (seen) continue;
    reads r = {.identity = true};
    collect_reads(c->comp, c->args, c->comp->body, x, blk, &r);
    double box = (double)qir_dtype_size(x->type.dtype);
    for (int j = 0; j < x->type.rank && j < QIR_MAX_RANK; j++) box *= (double)(r.foot[j] > 0 ? r.foot[j] : 1);
    if (r.count > 0) l2 += box * blocks;
  }
  return l2;
}

/* Modelled time of a row group's kernel, launch and its own global traffic
 * excluded (qcodegen's lower_rows: a warp per row, `per_block` rows of a
 * block; each lane walks its row): the row staged once, each stage of the row
 * op's definition walking it again, with a point reduction (QK^T, a gemm's
 * logits) each point's whole reduction run serially by one lane, and with a
 * tail (@V after the softmax) each point of the tail's row likewise, every
 * step loading its operands.  Those loads go at shared-memory / L1 bandwidth,
 * only on the units that have blocks and only as fast as their warps can
 * issue them (about four per unit keep its load pipes busy).  What the point
 * reduction and the tail read besides the row (K, V, a weight matrix) comes
 * from L2 once per block: the block's rows share it through the unit's cache. */
static double row_work_us(const welder *w, const qir_op *row, int n_chain, const node *point, const node *tail,
                          int64_t per_block) {
  const qir_type *t = &row->results[0]->type;
  int64_t numel = qir_type_numel(t), size = qir_dtype_size(t->dtype), rb = row_bytes(row);
  bool reduced[QIR_MAX_RANK];
  if (numel <= 0 || rb <= 0 || rb == INT64_MAX || w->t->smem_gbs <= 0 || t->rank > QIR_MAX_RANK || !row_axes(row, reduced))
    return 0;
  /* the block's box: whole rows, per_block of them on the innermost kept axis
   * (the last box of each line maybe partial: its idle warps count) */
  int64_t blk[QIR_MAX_RANK];
  int inner = -1;
  for (int d = 0; d < t->rank; d++) {
    blk[d] = reduced[d] ? t->dims[d] : 1;
    if (!reduced[d]) inner = d;
  }
  double rows = (double)numel / (double)(rb / size), cus = w->t->compute_units > 0 ? w->t->compute_units : 1;
  double blocks = rows;
  if (inner >= 0) {
    blk[inner] = per_block;
    blocks = rows / (double)t->dims[inner] * (double)((t->dims[inner] + per_block - 1) / per_block);
  }
  double units = blocks < cus ? blocks : cus, per_unit = blocks * (double)per_block / units;
  double busy = units / cus * (per_unit < 4 ? per_unit / 4 : 1) * rows / (blocks * (double)per_block);
  double loads = (double)numel * (double)(2 + n_chain);
  double l2 = 0;
  int warp = w->t->warp_size > 0 ? w->t->warp_size : 32;
  bool moving[MAX_VARS_MODEL] = {false};
  int64_t row_len = rb / size;
  if (point && point->comp && point->comp->n_axes == t->rank && t->rank <= MAX_VARS_MODEL) {
    for (int d = 0; d < t->rank; d++) moving[d] = reduced[d];
    double waste, u = row_unroll(row_len, warp, &waste);
    loads += (double)form_points(point->comp) * unrolled_loads(point->comp->body, moving, t->rank, u) * waste;
    l2 += blocks_l2(point, NULL, blk, blocks);
  }
  if (tail && tail->comp && tail->op->n_results == 1 && tail->op->results[0]->type.rank == t->rank) {
    const qir_type *tt = &tail->op->results[0]->type;
    int64_t own = 1;
    for (int d = 0; d < t->rank; d++) {
      moving[d] = reduced[d];
      own *= reduced[d] ? tt->dims[d] : 1;
    }
    double waste, u = row_unroll(own, warp, &waste);
    loads += (double)form_points(tail->comp) * unrolled_loads(tail->comp->body, moving, t->rank, u) * waste;
    int64_t tb[QIR_MAX_RANK];
    for (int d = 0; d < t->rank; d++) tb[d] = reduced[d] ? tt->dims[d] : blk[d];
    l2 += blocks_l2(tail, row->results[0], tb, blocks);
  }
  double us = loads * (double)size / (w->t->smem_gbs * 1e3 * busy);
  if (w->t->l2_gbs > 0) us += l2 / (w->t->l2_gbs * 1e3);
  return us;
}

/* The rows per block of a row group (a box along the innermost kept axis,
 * partial at its end; a warp each; their rows within the shared memory
 * qcodegen stages them in: the row, and with a tail the row's result too)
 * with the least modelled time, that time in *est. */
static int64_t row_block(const welder *w, const qir_op *row, int n_chain, const node *point, const node *tail,
                         double *est) {
  const qir_type *t = &row->results[0]->type;
  bool reduced[QIR_MAX_RANK];
  int64_t best = 1, rb = row_bytes(row) * (tail ? 2 : 1);
  *est = row_work_us(w, row, n_chain, point, tail, 1);
  if (t->rank > QIR_MAX_RANK || !row_axes(row, reduced)) return best;
  int inner = -1;
  for (int d = 0; d < t->rank; d++)
    if (!reduced[d]) inner = d;
  if (inner < 0) return best;
  for (int64_t r = 2; r <= 16 && r <= t->dims[inner] && r * rb <= ROW_SMEM_BYTES; r *= 2) {
    double e = row_work_us(w, row, n_chain, point, tail, r);
    if (e < *est * (1 - 1e-9)) *est = e, best = r;
  }
  return best;
}

/* Ops whose definition is a reduction and an elementwise stage reading it at
 * the output point (LRN): one kernel as a group of their own (anchor and
 * epilogue); their producers are read across a window, so none joins. */
static bool solo_op(const qir_op *op) { return op->code == QIR_OP_LRN && op->n_results == 1; }

static bool mma_plan(const qir_op *op) {
  const qir_attr *tile = qir_op_attr(op, "tile");
  return tile && tile->val.kind == QIR_ATTR_DICT && qir_attr_dict_get(&tile->val, "mma");
}

/* Whether reduction q could join row group g as its point reduction: by the
 * model, the row kernel computing q per point (its operands' traffic, not
 * q's result's) against q's own kernel, the row kernel without it and one
 * more launch.  A long projection per point (a 768-wide matmul before a layer
 * norm, a 4096-wide classifier before a softmax) loses: every row's warp runs
 * the whole reduction serially over the weights, where q's own tiled kernel
 * shares them across the device. */
static bool point_candidate(region_ctx *rc, node *q, int g, const node *root) {
  const welder *w = rc->w;
  if (!root->row) return NOTE(w, q, rows, "not tried: the group is no row group");
  if (rc->point_group == g) return NOTE(w, q, rows, "no: the row group has its point reduction");
  if (!q->comp || q->op->n_results != 1) return NOTE(w, q, rows, "no: no tensor-expression form");
  const qir_value *v = q->op->results[0];
  int64_t numel = qir_type_numel(&v->type);
  if (numel <= 0 || !qir_type_equal(&v->type, &root->op->results[0]->type))
    return NOTE(w, q, rows, "no: not of the row op's shape");
  if (row_bytes(root->op) > ROW_SMEM_BYTES)
    return NOTE(w, q, rows, "no: a row of %lld bytes over %d", (long long)row_bytes(root->op), ROW_SMEM_BYTES);
  double joint, alone;
  row_block(w, root->op, root->n_chain, q, NULL, &joint);
  row_block(w, root->op, root->n_chain, NULL, NULL, &alone);
  joint += bytes_us(w, q->bytes - (double)value_bytes(v));
  double apart = q->est_us + alone + bytes_us(w, (double)value_bytes(v)) + w->launch_us;
  NOTE(w, q, rows, "%s: per point fused %.3f us %s apart %.3f us (its kernel %.3f + the rows %.3f + its result's read %.3f + launch %.3f)",
       joint < apart ? "fused" : "no", joint, joint < apart ? "<" : ">=", apart, q->est_us, alone,
       bytes_us(w, (double)value_bytes(v)), w->launch_us);
  return joint < apart;
}

static const char *short_name(const qir_op *op) { return qir_opinfo_get(op->code)->name; }

/* How often the group's members evaluate the elements of view c (a reshape
 * or transpose in group g), counted as absorb counts reads: a view
 * recomputes nothing itself, so what reads it reads its operand as often,
 * through further views too.  -1: a reader the count does not cover. */
static double view_reads(region_ctx *rc, const node *c, int g, int depth) {
  const qir_value *x = c->op->results[0];
  double total = 0;
  bool at_point = false;
  for (qir_use *u = x->uses; u; u = u->next) {
    if (depth > 8 || u->user->n_results < 1 || !in_group(rc, u->user, g)) return -1;
    node *r = producer(rc, u->user->results[0]);
    if (r && r->row && u->operand_index == 0 && qir_type_equal(&x->type, &r->op->results[0]->type)) {
      total += (double)qir_type_numel(&x->type);    /* the row input: staged once */
      continue;
    }
    if (!r || !r->comp) return -1;
    if (r->movement) {
      double n = view_reads(rc, r, g, depth + 1);
      if (n < 0) return -1;
      total += n;
      continue;
    }
    reads rr = {.identity = true};
    collect_reads(r->comp, r->args, r->comp->body, x, NULL, &rr);
    if (rr.count == 0) return -1;
    if (r->comp->n_red > 0) {
      total += (double)(rr.n_other + (rr.at_point ? 1 : 0)) * (double)form_points(r->comp);
    } else {
      total += (double)rr.n_other * (double)form_points(r->comp);
      at_point |= rr.at_point;
    }
  }
  if (at_point) total += (double)qir_type_numel(&x->type);
  return total;
}

/* Tries to absorb the producer p into group g (root node root). */
static bool absorb(region_ctx *rc, node *p, int g, const node *root, bool *has_anchor) {
  const welder *w = rc->w;
  if (p->group >= 0) return false;
  if (!p->comp || p->op->n_results != 1) return NOTE(w, p, reg, "no: not one tensor-expression form");
  qir_value *v = p->op->results[0];
  if (!v->uses) return false;
  int64_t numel = qir_type_numel(&v->type);
  /* reads at the consumers' own output points (same shape) are one read of
   * each element, however many: the same registers; others count per site */
  double reads_total = 0;
  bool identity = true, at_point = false, all_at_point = true, row_input = false;
  for (qir_use *u = v->uses; u; u = u->next) {
    if (!in_group(rc, u->user, g)) return NOTE(w, p, reg, "no: also read outside the group");
    node *c = producer(rc, u->user->results[0]);
    if (c && c->row && u->operand_index == 0 && qir_type_equal(&v->type, &c->op->results[0]->type)) {
      /* the row input: computed once into shared memory, read there by every stage */
      reads_total += (double)numel;
      identity = false;
      row_input = true;
      continue;
    }
    if (!c || !c->comp) return NOTE(w, p, reg, "no: a reader has no tensor-expression form");
    if (p->movement && mma_plan(c->op)) return NOTE(w, p, reg, "no: a view read by a matrix-unit plan");
    if (c->movement) {
      /* read through a view: as often as the view's readers read it (a relu
       * before a channel shuffle before a 3x3 conv is evaluated at every tap) */
      double n = view_reads(rc, c, g, 0);
      if (n >= 0) {
        reads r = {.identity = true};
        collect_reads(c->comp, c->args, c->comp->body, v, NULL, &r);
        if (r.count == 0) return NOTE(w, p, reg, "no: read outside its reader's form");
        all_at_point &= r.identity && c->comp->n_red == 0;
        reads_total += n * (double)(r.n_other > 0 ? r.n_other : 1);
        identity &= r.identity && c->identity;
        continue;
      }
    }
    reads r = {.identity = true};
    collect_reads(c->comp, c->args, c->comp->body, v, NULL, &r);
    if (r.count == 0) return NOTE(w, p, reg, "no: read outside its reader's form");
    all_at_point &= r.identity && c->comp->n_red == 0;
    if (c->comp->n_red > 0) {
      /* inside a reduction every step would evaluate it again */
      reads_total += (double)(r.n_other + (r.at_point ? 1 : 0)) * (double)form_points(c->comp);
    } else {
      reads_total += (double)r.n_other * (double)form_points(c->comp);
      at_point |= r.at_point;
    }
    identity &= r.identity && c->identity;
  }
  if (at_point) reads_total += (double)numel;
  if (p->comp->n_red == 0) {
    /* a movement op only remaps indices: reading it anywhere recomputes nothing */
    if (!p->movement && reads_total > (double)numel * (1 + 1e-9))   /* would recompute */
      return NOTE(w, p, reg, "no: inlined it would be computed %.2fx (read across a window or at several points)",
                  reads_total / (double)numel);
    /* an epilogue (p reads a free reduction at its own point) stays with that
     * reduction rather than joining a group that reads p elsewhere (a
     * transpose); a type conversion (autocast's) is better read as it is
     * stored, in the narrower type, by whoever reads it */
    if (!identity && p->op->code != QIR_OP_CAST)
      for (int k = 0; k < p->op->n_operands; k++) {
        node *q = producer(rc, p->op->operands[k]);
        if (!q || q->group >= 0 || !q->comp || q->comp->n_red == 0) continue;
        reads r = {.identity = true};
        collect_reads(p->comp, p->args, p->comp->body, p->op->operands[k], NULL, &r);
        if (r.count > 0 && r.identity && !point_candidate(rc, q, g, root))
          return NOTE(w, p, reg, "no: the epilogue of its own reduction (%s), which the group does not take: %s",
                      short_name(q->op), q->note_rows);
      }
    p->identity = identity;
  } else if (root->row) {
    /* a short reduction the row input reads at its own points (QK^T before
     * the softmax): computed per point while the row is staged */
    if (!all_at_point) {
      NOTE(w, p, rows, "no: not read at the row's own points");
      return NOTE(w, p, reg, "no: a reduction a row group reads elsewhere than at its points");
    }
    if (!point_candidate(rc, p, g, root)) return NOTE(w, p, reg, "no: a reduction (see rows)");
    rc->point_group = g;
    p->identity = false;
  } else {
    if (*has_anchor) return NOTE(w, p, reg, "no: a second reduction (the group has its anchor)");
    if (!identity)
      return NOTE(w, p, reg, "no: a reduction read elsewhere than at the root's output point (a window, a halo, another index)");
    if (v->type.dtype != root->op->results[0]->type.dtype)
      return NOTE(w, p, reg, "no: a reduction of another element type than the root's");
    *has_anchor = true;
    p->identity = true;
  }
  p->group = g;
  double *size = rc->size;
  memset(size, 0, sizeof *size * (size_t)(rc->n_nodes + 1));
  double total = member_size(rc, (node *)root, g, size);
  if (total > MAX_COMPOSED_NODES) {
    p->group = -1;
    if (p->comp->n_red > 0) *has_anchor = false;
    return NOTE(w, p, reg, "no: the composed expression would have %.0f nodes, over %d", total, MAX_COMPOSED_NODES);
  }
  if (row_input) {
    /* the row input: the shared-memory level, reported with the row group's edges */
    p->note_reg[0] = 0;
    NOTE(w, p, rows, "fused: the row input, computed once into shared memory (saves its round trip %.3f us and a launch %.3f us)",
         bytes_us(w, 2.0 * (double)value_bytes(v)), w->launch_us);
  } else {
    NOTE(w, p, reg, "fused (saves its round trip %.3f us and a launch %.3f us)", bytes_us(w, 2.0 * (double)value_bytes(v)),
         w->launch_us);
  }
  return true;
}

static bool fusable_code(const welder *w, const qir_op *op);

/* ---------------------------------------------------------------- shared-memory edges */

/* Staged groups.  A producer whose readers in the group read it across a
 * window (a pooling or LRN after a convolution) cannot be inlined per thread
 * without recomputing it at every tap, nor be a second anchor of the group's
 * one accumulator.  It can join at the shared-memory level instead: its whole
 * segment (its own anchor and epilogue, grown by the rules above) computes the
 * box of its elements one block of the group needs, halo included, into shared
 * memory, and the group reads it there (#fuse=smem; qcodegen's staged groups).
 * The group's block tile is then constructed for the group: among tiles of its
 * output (each axis a power of two up to 32, or its whole extent where that is
 * none: plan_staged), the one whose staged boxes fit MAX_STAGE_SMEM and whose
 * work is least: each segment's reduction costs what qcodegen's schedule for
 * its box does (qir_stage_schedule: register tiles, operands staged per step;
 * staged_work_us), in every block whose box meets the value, at least the
 * reduction's own kernel's compute time times the share of its points the
 * boxes cover (recomputed halos).  A segment joins when the modelled time of
 * the joint kernel (that work, the group's global traffic, one launch) is
 * below the two kernels' apart. */
#define MAX_STAGED_VALUES 3
#define MAX_STAGE_SMEM (32 * 1024)      /* qcodegen allows 48 KiB; its boxes are exact unions, ours bounds */
#define MAX_BOX_BLOCKS 4096             /* blocks counted one by one for the recomputation */

typedef struct {
  bool have;
  int64_t oc[QIR_MAX_RANK], ext[QIR_MAX_RANK];
  int64_t co[QIR_MAX_RANK][QIR_MAX_RANK];   /* origin = oc + co . (block start of each output axis) */
} box;

/* Adds to *dst the box of v that the reads of form c cover while c's output
 * axes range over *src (reduction axes over their extent).  False: a read
 * that is not affine, or boxes that move differently with the block. */
static bool box_reads(const qir_compute *c, qir_value *const *args, const qir_expr *e, const qir_value *v, const box *src,
                      box *dst) {
  if (!e) return true;
  if (e->kind == QIR_EX_ACCESS && e->operand >= 0 && args[e->operand] == v) {
    int nv = c->n_axes + c->n_red;
    if (e->n_args != v->type.rank || nv > 32 || c->n_axes > QIR_MAX_RANK) return false;
    for (int j = 0; j < e->n_args; j++) {
      int64_t o0, co[QIR_MAX_RANK], ext;
      if (!qir_read_range(c, e->args[j], src->oc, src->ext, src->co, &o0, co, &ext)) return false;
      if (!dst->have || dst->ext[j] == 0) {
        dst->oc[j] = o0;
        memcpy(dst->co[j], co, sizeof co);
        dst->ext[j] = ext;
        continue;
      }
      if (memcmp(dst->co[j], co, sizeof co)) return false;
      int64_t lo = o0 < dst->oc[j] ? o0 : dst->oc[j];
      int64_t hi = o0 + ext > dst->oc[j] + dst->ext[j] ? o0 + ext : dst->oc[j] + dst->ext[j];
      dst->oc[j] = lo;
      dst->ext[j] = hi - lo;
    }
    dst->have = true;
  }
  for (int i = 0; i < e->n_args; i++)
    if (!box_reads(c, args, e->args[i], v, src, dst)) return false;
  return true;
}

/* The box of every member's result for the group's output block `block`
 * (members in program order, the root last).  False where one does not follow. */
static bool group_boxes(node **mem, int n_mem, const int64_t *block, box *bx) {
  memset(bx, 0, sizeof *bx * (size_t)n_mem);
  const qir_type *ot = &mem[n_mem - 1]->op->results[0]->type;
  box *r = &bx[n_mem - 1];
  r->have = true;
  for (int d = 0; d < ot->rank; d++) r->ext[d] = block[d], r->co[d][d] = 1;
  for (int i = n_mem - 2; i >= 0; i--) {
    qir_value *v = mem[i]->op->results[0];
    for (int c = i + 1; c < n_mem; c++) {
      node *rd = mem[c];
      if (!bx[c].have) continue;
      if (rd->comp) {
        if (!box_reads(rd->comp, rd->args, rd->comp->body, v, &bx[c], &bx[i])) return false;
      } else if (rd->n_chain) {
        box cb[4];
        memset(cb, 0, sizeof cb);
        cb[rd->n_chain - 1] = bx[c];
        for (int a = rd->n_chain - 2; a >= 0; a--)
          for (int b2 = a + 1; b2 < rd->n_chain; b2++)
            if (cb[b2].have && !box_reads(rd->chain[b2]->comp, rd->chain[b2]->operands, rd->chain[b2]->comp->body,
                                          rd->chain[a]->results[0], &cb[b2], &cb[a]))
              return false;
        for (int a = 0; a < rd->n_chain; a++)
          if (cb[a].have && !box_reads(rd->chain[a]->comp, rd->chain[a]->operands, rd->chain[a]->comp->body, v, &cb[a], &bx[i]))
            return false;
      } else {
        for (int k = 0; k < rd->op->n_operands; k++)
          if (rd->op->operands[k] == v) return false;
      }
    }
    if (!bx[i].have) return false;
  }
  return true;
}

/* The output axis each dimension of box b moves with (-1: none); false when
 * one moves with several. */
static bool box_axes(const box *b, const qir_type *vt, const qir_type *ot, int *axis_of) {
  bool separable = true;
  for (int j = 0; j < vt->rank; j++) {
    axis_of[j] = -1;
    for (int d = 0; d < ot->rank; d++)
      if (b->co[j][d]) {
        if (axis_of[j] >= 0) separable = false;
        axis_of[j] = d;
      }
  }
  return separable;
}

/* Elements of v's boxes over all blocks, clipped to the tensor. */
static double box_total(const box *b, const qir_type *vt, const qir_type *ot, const int64_t *block) {
  int64_t nb[QIR_MAX_RANK], grid = 1;
  for (int d = 0; d < ot->rank; d++) nb[d] = (ot->dims[d] + block[d] - 1) / block[d], grid *= nb[d];
  /* each dimension of the box moving with at most one output axis (the usual
   * case): the sum over blocks is a product over the output axes */
  int axis_of[QIR_MAX_RANK];
  bool separable = box_axes(b, vt, ot, axis_of);
  if (separable) {
    double total = 1;
    for (int j = 0; j < vt->rank; j++)
      if (axis_of[j] < 0) {
        int64_t lo = b->oc[j] < 0 ? 0 : b->oc[j], hi = b->oc[j] + b->ext[j] > vt->dims[j] ? vt->dims[j] : b->oc[j] + b->ext[j];
        total *= hi > lo ? (double)(hi - lo) : 0;
      }
    for (int d = 0; d < ot->rank; d++) {
      double sum = 0;
      for (int64_t k = 0; k < nb[d]; k++) {
        double e = 1;
        for (int j = 0; j < vt->rank; j++) {
          if (axis_of[j] != d) continue;
          int64_t lo = b->oc[j] + b->co[j][d] * k * block[d], hi = lo + b->ext[j];
          if (lo < 0) lo = 0;
          if (hi > vt->dims[j]) hi = vt->dims[j];
          e *= hi > lo ? (double)(hi - lo) : 0;
        }
        sum += e;
      }
      total *= sum;
    }
    return total;
  }
  if (grid > MAX_BOX_BLOCKS) {
    double e = (double)grid;
    for (int j = 0; j < vt->rank; j++) e *= (double)(b->ext[j] < vt->dims[j] ? b->ext[j] : vt->dims[j]);
    return e;
  }
  double total = 0;
  for (int64_t g = 0; g < grid; g++) {
    int64_t start[QIR_MAX_RANK], rest = g;
    for (int d = ot->rank - 1; d >= 0; d--) start[d] = (rest % nb[d]) * block[d], rest /= nb[d];
    double e = 1;
    for (int j = 0; j < vt->rank && e > 0; j++) {
      int64_t lo = b->oc[j];
      for (int d = 0; d < ot->rank; d++) lo += b->co[j][d] * start[d];
      int64_t hi = lo + b->ext[j];
      if (lo < 0) lo = 0;
      if (hi > vt->dims[j]) hi = vt->dims[j];
      e *= hi > lo ? (double)(hi - lo) : 0;
    }
    total += e;
  }
  return total;
}

/* Blocks whose box of v meets the tensor (qcodegen skips the others' work);
 * all of them past MAX_BOX_BLOCKS. */
static int64_t box_blocks(const box *b, const qir_type *vt, const qir_type *ot, const int64_t *block) {
  int64_t nb[QIR_MAX_RANK], grid = 1, hit = 0;
  for (int d = 0; d < ot->rank; d++) nb[d] = (ot->dims[d] + block[d] - 1) / block[d], grid *= nb[d];
  if (grid > MAX_BOX_BLOCKS) return grid;
  /* each dimension of the box moving with at most one output axis (the usual
   * case): a block meets the tensor when its index along every output axis
   * does, so the count is a product over the axes (what the walk below gives,
   * without visiting every block of every candidate tile) */
  int axis_of[QIR_MAX_RANK];
  bool separable = box_axes(b, vt, ot, axis_of);
  if (separable) {
    for (int j = 0; j < vt->rank; j++)
      if (axis_of[j] < 0 && !(b->oc[j] < vt->dims[j] && b->oc[j] + b->ext[j] > 0)) return 0;
    int64_t count = 1;
    for (int d = 0; d < ot->rank; d++) {
      int64_t along = 0;
      for (int64_t k = 0; k < nb[d]; k++) {
        bool meets = true;
        for (int j = 0; j < vt->rank && meets; j++) {
          if (axis_of[j] != d) continue;
          int64_t lo = b->oc[j] + b->co[j][d] * k * block[d];
          meets = lo < vt->dims[j] && lo + b->ext[j] > 0;
        }
        along += meets;
      }
      count *= along;
    }
    return count;
  }
  for (int64_t g = 0; g < grid; g++) {
    int64_t start[QIR_MAX_RANK], rest = g;
    for (int d = ot->rank - 1; d >= 0; d--) start[d] = (rest % nb[d]) * block[d], rest /= nb[d];
    bool meets = true;
    for (int j = 0; j < vt->rank && meets; j++) {
      int64_t lo = b->oc[j];
      for (int d = 0; d < ot->rank; d++) lo += b->co[j][d] * start[d];
      meets = lo < vt->dims[j] && lo + b->ext[j] > 0;
    }
    hit += meets;
  }
  return hit;
}

/* Modelled compute time of a member: its estimate less its traffic, at least
 * its points at the device's peak. */
static double work_us(const welder *w, const node *n) {
  double us = n->est_us - bytes_us(w, n->bytes), floor = 0;
  const qir_type *t = &n->op->results[0]->type;
  double peak = qir_target_peak(w->t, t->dtype, false);
  double points = n->comp ? (double)form_points(n->comp) : (double)qir_type_numel(t) * (1 + n->n_chain);
  if (peak > 0) floor = 2 * points / (peak * 1e3);
  return us > floor ? us : floor;
}

/* Loads per point of a form (its accesses; an index expression's own accesses too). */
static int form_loads(const qir_expr *e) {
  if (!e) return 0;
  int n = e->kind == QIR_EX_ACCESS;
  for (int i = 0; i < e->n_args; i++) n += form_loads(e->args[i]);
  return n;
}

/* Modelled compute time of an anchor inside a staged group when qcodegen has
 * no tiled schedule for its box: a serial loop over the reduction per point,
 * every step loading its operands from shared memory or L1, so at least those
 * loads at shared-memory bandwidth, however fast its own plan is. */
static double naive_staged_us(const welder *w, const node *n) {
  double us = work_us(w, n);
  if (!n->comp || n->comp->n_red == 0 || w->t->smem_gbs <= 0) return us;
  double loads = (double)form_points(n->comp) * form_loads(n->comp->body) *
                 (double)qir_dtype_size(n->op->results[0]->type.dtype);
  double naive = loads / (w->t->smem_gbs * 1e3);
  return naive > us ? naive : us;
}

/* The form of a member's reduction: its own, or a solo op's (LRN) first reducing step. */
static const qir_compute *reduction_form(const node *n, qir_value *const **args) {
  if (n->comp && n->comp->n_red > 0) {
    *args = n->args;
    return n->comp;
  }
  for (int i = 0; i < n->n_chain; i++)
    if (n->chain[i]->comp && n->chain[i]->comp->n_red > 0) {
      *args = n->chain[i]->operands;
      return n->chain[i]->comp;
    }
  return NULL;
}

/* Modelled time of anchor n of a staged group computing its value over a box
 * of ext points per axis in each of `blocks` blocks of `threads` threads
 * (those whose box meets the value: the others skip the work), by
 * the schedule qcodegen emits for it (qir_stage_schedule: register tiles, the
 * reused operands staged per reduction step within `budget` bytes): its
 * accumulations at the peak rate, its operand loads (after register reuse) at
 * shared-memory bandwidth plus the staging loads at L2 bandwidth, and two
 * barriers per step in each wave of blocks.  `share` is the fraction of the
 * value's points the boxes cover (recomputation included): the anchor's own
 * kernel's compute time scaled by it is a floor.  Without a schedule: the
 * naive per-point loop (naive_staged_us), scaled by share. */
static double staged_work_us(const welder *w, const node *n, const int64_t *ext, int64_t blocks, int threads, int64_t budget,
                             double share) {
  qir_value *const *args = NULL;
  const qir_compute *c = reduction_form(n, &args);
  const qir_target *t = w->t;
  qir_dtype dt = n->op->results[0]->type.dtype;
  int bytes = qir_dtype_size(dt) > 4 ? 8 : 4;
  double floor = work_us(w, n) * share;
  qir_stage_sched sc;
  /* qcodegen computes the box's part inside the value */
  int64_t len[QIR_MAX_RANK];
  const qir_type *vt = &n->op->results[0]->type;
  for (int d = 0; d < vt->rank && d < QIR_MAX_RANK; d++) len[d] = ext[d] < vt->dims[d] ? ext[d] : vt->dims[d];
  if (!c || c->n_axes != vt->rank || t->smem_gbs <= 0 || t->l2_gbs <= 0 ||
      !qir_stage_schedule(c, len, threads, c->n_axes + c->n_red + 64, bytes, budget, &sc)) {
    double naive = naive_staged_us(w, n) * share;
    return naive > floor ? naive : floor;
  }
  (void)args;
  double peak = qir_target_peak(t, dt, false);
  double pts = (double)blocks * (double)sc.threads_used * (double)sc.regs * (double)sc.rtot;
  double flops_us = peak > 0 ? 2 * pts / (peak * 1e3) : 0;
  double load_us = (double)blocks * (double)sc.threads_used * (double)sc.loads * (double)sc.rtot * bytes / (t->smem_gbs * 1e3);
  double stage_us = (double)blocks * sc.staged_elems * bytes / (t->l2_gbs * 1e3);
  int64_t resident = threads > 0 ? t->max_threads_per_unit / threads : 1;
  if (resident > t->max_blocks_per_unit) resident = t->max_blocks_per_unit;
  if (resident < 1) resident = 1;
  double waves = ceil((double)blocks / ((double)(t->compute_units > 0 ? t->compute_units : 1) * (double)resident));
  double us = (flops_us > load_us + stage_us ? flops_us : load_us + stage_us) + waves * 2.0 * (double)sc.steps * t->block_barrier_us;
  return us > floor ? us : floor;
}

/* Global traffic of a kernel made of the members: distinct outside operands, the result. */
static double members_bytes(region_ctx *rc, node **mem, int n_mem, int g) {
  double b = (double)value_bytes(mem[n_mem - 1]->op->results[0]);
  const qir_value *seen[256];
  int n_seen = 0;
  for (int i = 0; i < n_mem; i++)
    for (int k = 0; k < mem[i]->op->n_operands; k++) {
      const qir_value *x = mem[i]->op->operands[k];
      node *p = producer(rc, x);
      if (p && p->group == g) continue;
      bool dup = false;
      for (int j = 0; j < n_seen && !dup; j++) dup = seen[j] == x;
      if (dup) continue;
      if (n_seen < 256) seen[n_seen++] = x;
      b += (double)value_bytes(x);
    }
  return b;
}

/* The members of group g in program order (nodes up to index last). */
static int group_members(region_ctx *rc, int g, int last, node **mem) {
  int k = 0;
  for (int j = 0; j <= last && k < MAX_MEMBERS; j++)
    if (rc->nodes[j].group == g) mem[k++] = &rc->nodes[j];
  return k;
}

typedef struct {
  bool staged;                  /* some member is staged */
  int64_t block[QIR_MAX_RANK];  /* the group's constructed block tile */
  double est_us;                /* modelled time of its kernel, launch excluded */
} stage_plan;

/* What plan_staged found (-welder-stats): the tiles tried, those whose boxes
 * follow from the access maps, the least staged bytes among them; for the
 * best tile its staged bytes and the largest share of a staged value's points
 * its boxes cover over all blocks (1: no recomputation). */
typedef struct {
  int tiles, boxed;
  double least_smem, smem, share;
} stage_why;

/* The best block tile for members mem (group g): its modelled time in *est
 * (launch excluded).  False when no tile fits. */
static bool plan_staged(region_ctx *rc, node **mem, int n_mem, int g, int64_t *best, double *est, stage_why *why) {
  const welder *w = rc->w;
  const qir_type *ot = &mem[n_mem - 1]->op->results[0]->type;
  int n = ot->rank;
  if (n < 1 || n > QIR_MAX_RANK) return false;
  /* the segment (the member that roots it) of each anchor */
  int seg_of[MAX_MEMBERS], n_anchors = 0;
  for (int i = 0; i < n_mem; i++) {
    seg_of[i] = -1;
    if (!mem[i]->comp && !mem[i]->n_chain) continue;
    bool anchor = mem[i]->n_chain || mem[i]->comp->n_red > 0;
    if (!anchor) continue;
    for (int s = 0; s < n_mem; s++)
      if (mem[s] == &rc->nodes[mem[i]->seg]) seg_of[i] = s;
    n_anchors += seg_of[i] >= 0;
  }
  int64_t cand[QIR_MAX_RANK][8];
  int n_cand[QIR_MAX_RANK], idx[QIR_MAX_RANK] = {0}, whole[QIR_MAX_RANK];
  for (int d = 0; d < n; d++) {
    n_cand[d] = 0;
    for (int64_t b = 1; b <= 32 && b <= ot->dims[d]; b *= 2) cand[d][n_cand[d]++] = b;
    if (n_cand[d] == 0) cand[d][n_cand[d]++] = 1;
    /* and the whole extent where it is no power of two (a 6 x 6 plane): no
     * partial block along it, and no halo recomputed across its blocks */
    whole[d] = -1;
    if (ot->dims[d] > 1 && ot->dims[d] <= 64 && (ot->dims[d] & (ot->dims[d] - 1))) {
      whole[d] = n_cand[d];
      cand[d][n_cand[d]++] = ot->dims[d];
    }
  }
  int64_t numel = qir_type_numel(ot);
  double best_cost = INFINITY;
  int64_t best_pb = 0;
  box bx[MAX_MEMBERS];
  *why = (stage_why){.least_smem = INFINITY};
  /* the power-of-two tiles first; then those with a whole extent, taken only
   * where strictly faster (ties keep the first pass's choice) and with no
   * fewer blocks than the device has units or the first pass's choice has:
   * the staged work is charged at the whole device's rates, which a grid of
   * fewer blocks does not reach (a 1000-wide gemm in one block) */
  int64_t units = rc->w->t->compute_units > 0 ? rc->w->t->compute_units : 1, least_grid = units, best_grid = 0;
  for (int pass = 0; pass < 2; pass++, least_grid = best_grid > 0 && best_grid < units ? best_grid : units)
  for (bool more = true; more;) {
    int64_t blk[QIR_MAX_RANK], pb = 1, grid = 1;
    bool has_whole = false;
    for (int d = 0; d < n; d++)
      blk[d] = cand[d][idx[d]], pb *= blk[d], grid *= (ot->dims[d] + blk[d] - 1) / blk[d], has_whole |= idx[d] == whole[d];
    bool sized = pb <= 1024 && (pb >= 32 || pb == numel) && has_whole == (pass == 1) && (pass == 0 || grid >= least_grid);
    why->tiles += sized;
    if (sized && group_boxes(mem, n_mem, blk, bx)) {
      why->boxed++;
      double smem = 0, cost = 0, share[MAX_MEMBERS];
      int64_t most = pb, blocks = grid, busy[MAX_MEMBERS];
      for (int i = 0; i < n_mem; i++) {
        share[i] = 1;
        busy[i] = blocks;
        if (i == n_mem - 1) {
          for (int d = 0; d < n; d++) bx[i].ext[d] = blk[d];
          continue;
        }
        if (!mem[i]->staged) continue;
        const qir_type *vt = &mem[i]->op->results[0]->type;
        double e = 1;
        for (int j = 0; j < vt->rank; j++) e *= (double)bx[i].ext[j];
        /* a staged row op (softmax, norms) also stages its row input and its row
         * reductions (qcodegen stages every reduction that is no epilogue's anchor) */
        smem += e * (qir_dtype_size(vt->dtype) > 4 ? 8 : 4) * (mem[i]->row ? 2 : 1);
        if (mem[i]->row) {
          double rows = 1;
          int64_t axis = qir_op_attr_int(mem[i]->op, "axis", -1);
          if (axis < 0) axis += vt->rank;
          for (int j = 0; j < vt->rank && j < axis; j++) rows *= (double)bx[i].ext[j];
          smem += rows * 8 * mem[i]->n_chain;
        }
        double vn = (double)qir_type_numel(vt);
        share[i] = vn > 0 ? box_total(&bx[i], vt, ot, blk) / vn : 1;
        busy[i] = box_blocks(&bx[i], vt, ot, blk);
        if (e > most) most = (int64_t)e;
      }
      /* each anchor by the schedule qcodegen gives it over its segment's box */
      int threads = qir_stage_threads(most);
      int64_t budget = qir_stage_budget((int64_t)smem, n_anchors);
      for (int i = 0; i < n_mem; i++)
        if (seg_of[i] >= 0)
          cost += staged_work_us(w, mem[i], bx[seg_of[i]].ext, busy[seg_of[i]], threads, budget, share[seg_of[i]]);
      if (smem < why->least_smem) why->least_smem = smem;
      if (smem <= MAX_STAGE_SMEM &&
          (cost < best_cost * (1 - 1e-9) || (pass == 0 && cost <= best_cost * (1 + 1e-9) && pb > best_pb))) {
        best_cost = cost;
        best_pb = pb;
        best_grid = grid;
        memcpy(best, blk, sizeof blk);
        why->smem = smem;
        why->share = 1;
        for (int i = 0; i < n_mem; i++)
          if (mem[i]->staged && share[i] > why->share) why->share = share[i];
      }
    }
    int d = n - 1;
    while (d >= 0 && ++idx[d] == n_cand[d]) idx[d--] = 0;
    more = d >= 0;
  }
  if (best_pb == 0) return false;
  *est = best_cost + bytes_us(w, members_bytes(rc, mem, n_mem, g));
  return true;
}

/* Modelled time of group g's kernel as it is (launch excluded). */
static double group_est(region_ctx *rc, int g, int last, const stage_plan *sp) {
  if (sp->staged) return sp->est_us;
  node *mem[MAX_MEMBERS];
  int n_mem = group_members(rc, g, last, mem);
  double est = 0;
  for (int i = 0; i < n_mem; i++)
    if (mem[i]->n_chain || (mem[i]->comp && mem[i]->comp->n_red > 0) || (n_mem == 1 && !mem[i]->comp)) est += work_us(rc->w, mem[i]);
  return est + bytes_us(rc->w, members_bytes(rc, mem, n_mem, g));
}

/* Tries to stage producer p (and the segment it roots) into group g (root at
 * index last), then the producers of that segment in turn. */
static void try_stage(region_ctx *rc, int g, int last, node *p, int *next_group, stage_plan *sp, int *n_staged) {
  welder *w = rc->w;
  if (p->group >= 0) return;
  if (*n_staged >= MAX_STAGED_VALUES) {
    NOTE(w, p, smem, "not tried: the group stages %d values already", MAX_STAGED_VALUES);
    return;
  }
  if (p->movement || (!p->comp && !p->n_chain) || p->op->n_results != 1 || !p->fusable) {
    NOTE(w, p, smem, "not tried: %s", p->movement ? "a view" : "no tensor-expression form");
    return;
  }
  qir_value *v = p->op->results[0];
  if (!v->uses || qir_type_numel(&v->type) <= 0) return;
  for (qir_use *u = v->uses; u; u = u->next)
    if (!in_group(rc, u->user, g)) {
      NOTE(w, p, smem, "not tried: also read outside the group");
      return;
    }
  int pi = (int)(p - rc->nodes);
  /* the segment alone, grown by the register-level rules */
  int g2 = (*next_group)++;
  p->group = g2;
  p->identity = true;
  p->seg = pi;
  for (int k = 0; p->solo && w->stats && k < p->op->n_operands; k++) {
    node *q = producer(rc, p->op->operands[k]);
    if (q) NOTE(w, q, reg, "not tried: its reader is a multi-stage op read across a window (LRN), a segment of its own stages");
  }
  bool has_anchor = p->n_chain || p->comp->n_red > 0;
  for (bool grew = !p->solo; grew;) {
    grew = false;
    for (int j = pi - 1; j >= 0; j--) {
      node *q = &rc->nodes[j];
      if (q->group < 0 && absorb(rc, q, g2, p, &has_anchor)) {
        q->seg = pi;
        grew = true;
      }
    }
  }
  double est_group = group_est(rc, g, last, sp), est_seg = group_est(rc, g2, pi, &(stage_plan){0});
  double before = est_group + est_seg + 2 * w->launch_us;
  node *joined[MAX_MEMBERS];
  int n_joined = 0;
  for (int j = 0; j <= pi; j++)
    if (rc->nodes[j].group == g2) {
      rc->nodes[j].group = g;
      if (n_joined < MAX_MEMBERS) joined[n_joined++] = &rc->nodes[j];
    }
  p->staged = true;
  node *mem[MAX_MEMBERS];
  int n_mem = group_members(rc, g, last, mem);
  int64_t blk[QIR_MAX_RANK];
  double est = 0;
  /* no recomputation at all would not pay: no tile will */
  for (int i = 0; i < n_mem; i++)
    if (mem[i]->n_chain || (mem[i]->comp && mem[i]->comp->n_red > 0)) est += work_us(w, mem[i]);
  double least = est + bytes_us(w, members_bytes(rc, mem, n_mem, g)) + w->launch_us;
  stage_why why = {0};
  bool fits = least < before && n_mem < MAX_MEMBERS && plan_staged(rc, mem, n_mem, g, blk, &est, &why);
  if (w->stats) {
    /* apart: the group and the segment as two kernels (the value's round
     * trip is part of their traffic); fused: the joint kernel and a launch */
    char apart[160], blkt[64] = "";
    snprintf(apart, sizeof apart, "apart %.3f us (group %.3f + segment %.3f + 2 launches %.3f; round trip %.3f)", before,
             est_group, est_seg, 2 * w->launch_us, bytes_us(w, 2.0 * (double)value_bytes(v)));
    const qir_type *ot = &rc->nodes[last].op->results[0]->type;
    for (int d = 0, len = 0; fits && d < ot->rank && len < (int)sizeof blkt - 24; d++)
      len += snprintf(blkt + len, sizeof blkt - (size_t)len, "%s%lld", d ? "," : "", (long long)blk[d]);
    if (!(least < before))
      NOTE(w, p, smem, "no: joint at least %.3f us (no recomputation) >= %s", least, apart);
    else if (n_mem >= MAX_MEMBERS)
      NOTE(w, p, smem, "no: over %d members", MAX_MEMBERS);
    else if (!fits && why.boxed == 0)
      NOTE(w, p, smem, "no: no block tile's boxes follow from the access maps (%d tiles tried)", why.tiles);
    else if (!fits)
      NOTE(w, p, smem, "no: no block tile's staged boxes fit %d bytes (least %.0f of %d tiles)", MAX_STAGE_SMEM,
           why.least_smem, why.boxed);
    else
      NOTE(w, p, smem, "%s: joint %.3f us (with launch) %s %s; block [%s], staged %.0f bytes, computed %.2fx",
           est + w->launch_us < before ? "fused" : "no", est + w->launch_us, est + w->launch_us < before ? "<" : ">=", apart,
           blkt, why.smem, why.share);
  }
  if (!fits || est + w->launch_us >= before) {
    for (int j = 0; j < n_joined; j++) joined[j]->group = -1;
    p->staged = false;
    return;
  }
  sp->staged = true;
  memcpy(sp->block, blk, sizeof blk);
  sp->est_us = est;
  (*n_staged)++;
  /* the producers of the new segment, staged in turn */
  for (int i = 0; i < n_mem; i++) {
    if (mem[i]->seg != pi) continue;
    for (int k = 0; k < mem[i]->op->n_operands; k++) {
      node *q = producer(rc, mem[i]->op->operands[k]);
      if (q && q->group < 0) try_stage(rc, g, last, q, next_group, sp, n_staged);
    }
  }
}

/* The producers of group g's members, staged where it pays. */
static void stage_group(region_ctx *rc, int g, int last, int *next_group, stage_plan *sp) {
  node *root = &rc->nodes[last];
  if (root->row) return;        /* a row group reads its row input in shared memory already */
  int n_staged = 0;
  node *mem[MAX_MEMBERS];
  int n_mem = group_members(rc, g, last, mem);
  for (int i = 0; i < n_mem; i++) mem[i]->seg = last;
  for (int i = n_mem - 1; i >= 0; i--)
    for (int k = 0; k < mem[i]->op->n_operands; k++) {
      node *p = producer(rc, mem[i]->op->operands[k]);
      if (p && p->group < 0) try_stage(rc, g, last, p, next_group, sp, &n_staged);
    }
}

/* #tile_bands with every band's est_us times `scale`. */
static qir_attr_val scaled_bands(qir_module *m, const qir_attr_val *bands, double scale) {
  qir_attr_val out = *bands;
  if (bands->kind != QIR_ATTR_LIST) return out;
  out.items = qir_alloc(m, sizeof *out.items * (size_t)(bands->n ? bands->n : 1));
  for (int i = 0; i < bands->n; i++) {
    out.items[i] = bands->items[i];
    const qir_attr_val *tile = qir_attr_dict_get(&bands->items[i], "tile");
    if (!tile || tile->kind != QIR_ATTR_DICT) continue;
    qir_attr *te = qir_alloc(m, sizeof *te * (size_t)(tile->n ? tile->n : 1));
    memcpy(te, tile->entries, sizeof *te * (size_t)tile->n);
    for (int j = 0; j < tile->n; j++)
      if (!strcmp(te[j].key, "est_us") && (te[j].val.kind == QIR_ATTR_FLOAT || te[j].val.kind == QIR_ATTR_INT)) {
        double e = te[j].val.kind == QIR_ATTR_FLOAT ? te[j].val.f : (double)te[j].val.i;
        te[j].val = qir_attr_float(round(e * scale * 1000) / 1000);
      }
    qir_attr *be = qir_alloc(m, sizeof *be * (size_t)(bands->items[i].n ? bands->items[i].n : 1));
    memcpy(be, bands->items[i].entries, sizeof *be * (size_t)bands->items[i].n);
    for (int j = 0; j < bands->items[i].n; j++)
      if (!strcmp(be[j].key, "tile")) be[j].val = qir_attr_dict(m, tile->n, te);
    out.items[i] = qir_attr_dict(m, bands->items[i].n, be);
  }
  return out;
}

/* Builds the kernel op of group g (members in program order), replacing them. */
static void build_group(region_ctx *rc, node **mem, int n_mem, node *root, node *anchor, const stage_plan *sp,
                        const node *tail_row) {
  welder *w = rc->w;
  qir_module *m = w->m;
  /* the operands: values read by members and defined outside the group */
  int cap = 8;
  for (int i = 0; i < n_mem; i++) cap += mem[i]->op->n_operands;
  qir_value **ext = qir_alloc(m, sizeof *ext * (size_t)cap);
  int n_ext = 0;
  for (int i = 0; i < n_mem; i++)
    for (int k = 0; k < mem[i]->op->n_operands; k++) {
      qir_value *x = mem[i]->op->operands[k];
      node *p = producer(rc, x);
      if (p && p->group == root->group) continue;
      bool seen = false;
      for (int j = 0; j < n_ext; j++) seen |= ext[j] == x;
      if (!seen) ext[n_ext++] = x;
    }
  /* the name says what it fuses: g3_conv_batch_norm_relu */
  char name[96];
  int len = snprintf(name, sizeof name, "g%d", w->n_groups++);
  for (int i = 0; i < n_mem && len < (int)sizeof name - 24; i++)
    len += snprintf(name + len, sizeof name - (size_t)len, "_%s", short_name(mem[i]->op));
  qir_op *root_op = root->op;
  qir_op *k = qir_op_new(m, QIR_OP_KERNEL, n_ext, ext, 1, &root_op->results[0]->type, root_op->loc);
  k->sym = qir_strdup(m, name);
  qir_region *body = k->regions[0];
  qir_value **map = calloc((size_t)m->next_value_id + 1, sizeof *map);
  if (!map) abort();
  int n_values = m->next_value_id;
  for (int j = 0; j < n_ext; j++) map[ext[j]->id] = qir_region_add_arg(m, body, ext[j]->type, ext[j]->name);
  qir_op_insert_before(root_op, k);
  /* the block tile of each member, propagated from the group's output */
  int64_t blocks[MAX_MEMBERS][QIR_MAX_RANK];
  bool have_block[MAX_MEMBERS] = {false};
  const qir_attr *plan = qir_op_attr((anchor ? anchor : root)->op, "tile");
  const qir_attr_val *pb = plan && plan->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&plan->val, "block") : NULL;
  if (pb && pb->kind == QIR_ATTR_LIST && pb->n == root_op->results[0]->type.rank) {
    have_block[n_mem - 1] = true;
    for (int j = 0; j < pb->n; j++) {
      int64_t dim = root_op->results[0]->type.dims[j];
      int64_t b = pb->items[j].kind == QIR_ATTR_INT ? pb->items[j].i : dim;
      blocks[n_mem - 1][j] = b < 1 ? 1 : b > dim ? dim : b;
    }
  }
  if (sp->staged) {
    /* the tile constructed for the group; every member's derived from it */
    have_block[n_mem - 1] = true;
    memcpy(blocks[n_mem - 1], sp->block, sizeof sp->block);
    anchor = NULL;
    plan = NULL;
  }
  /* a row group's block is whole rows (one per warp in qcodegen): a softmax
   * or norm needs every element of its row, so its tile covers the row, and a
   * point reduction in it (QK^T, a gemm's logits) runs per point there, not by
   * its own plan */
  bool reduced[QIR_MAX_RANK];
  const qir_type *rt = &root_op->results[0]->type;
  const node *row = root->row ? root : tail_row;   /* the row op whose rows the block covers */
  bool row_tile = row && !sp->staged && rt->rank <= QIR_MAX_RANK && row->op->results[0]->type.rank == rt->rank &&
                  row_axes(row->op, reduced);
  double row_est = 0;
  if (row_tile) {
    /* with a tail (@V) the block covers its rows of the tail's result: the row's axes are its own */
    const node *point = NULL;
    for (int i = 0; i < n_mem; i++)
      if (mem[i] != root && mem[i]->comp && mem[i]->comp->n_red > 0) point = mem[i];
    int64_t per_block = row_block(w, row->op, row->n_chain, point, row == root ? NULL : root, &row_est);
    have_block[n_mem - 1] = true;
    for (int d = 0, inner = -1; d < rt->rank; d++) {
      blocks[n_mem - 1][d] = reduced[d] ? rt->dims[d] : 1;
      if (!reduced[d]) inner = d;
      if (d == rt->rank - 1 && inner >= 0) blocks[n_mem - 1][inner] = per_block;
    }
    anchor = NULL;
    plan = NULL;
  }
  qir_op *new_root = NULL;
  for (int i = 0; i < n_mem; i++) {
    qir_op *op = mem[i]->op;
    qir_value **opnds = qir_alloc(m, sizeof *opnds * (size_t)(op->n_operands + 1));
    for (int j = 0; j < op->n_operands; j++) opnds[j] = map[op->operands[j]->id];
    qir_op *c = qir_op_copy_single(m, op, opnds);
    if (mem[i] != root) {
      /* the row a row group reads is handed over in shared memory, and so is
       * the row's result a tail (@V) walks */
      bool smem = (row_tile && (op->results[0] == row->op->operands[0] || mem[i] == row)) || mem[i]->staged;
      qir_op_set_attr(m, c, "fuse", qir_attr_word(m, smem ? "smem" : "reg"), true);
    }
    if (mem[i] != anchor) qir_op_remove_attr(c, "tile");
    qir_op_remove_attr(c, "tile_alternatives");
    qir_op_append(body, c);
    if (op->results[0]->id < n_values) map[op->results[0]->id] = c->results[0];
    if (mem[i] == root) new_root = c;
  }
  qir_op_append(body, qir_op_new(m, QIR_OP_YIELD, 1, &new_root->results[0], 0, NULL, root_op->loc));
  free(map);
  /* each member's block tile, propagated from the group's (qir_group_tiles: the
   * rule the verifier checks); the anchor keeps its whole plan */
  if (have_block[n_mem - 1]) {
    int64_t tiles[MAX_MEMBERS][QIR_MAX_RANK];
    bool have[MAX_MEMBERS];
    int nt = qir_group_tiles(m, k, blocks[n_mem - 1], MAX_MEMBERS, tiles, have);
    int i = 0;
    for (qir_op *in = body->first; nt >= 0 && in && in->code != QIR_OP_YIELD; in = in->next, i++) {
      if (mem[i] == anchor || !have[i]) continue;
      qir_attr e = {.key = "block", .val = qir_attr_ints(m, in->results[0]->type.rank, tiles[i])};
      qir_op_set_attr(m, in, "tile", qir_attr_dict(m, 1, &e), true);
    }
  }
  /* the group's plan and model */
  if (plan) qir_op_set_attr(m, k, "tile", plan->val, true);
  /* and the plan's alternatives: -rammer may trade it for one with fewer blocks */
  const qir_attr *alts = qir_op_attr((anchor ? anchor : root)->op, "tile_alternatives");
  if (plan && alts) qir_op_set_attr(m, k, "tile_alternatives", alts->val, true);
  double bytes = op_bytes(k), est = 0;
  if (anchor) est = anchor->est_us - bytes_us(w, anchor->bytes);
  est += bytes_us(w, bytes);
  if (anchor && est < anchor->est_us * 0.5) est = anchor->est_us * 0.5;
  if (sp->staged) {
    qir_attr e = {.key = "block", .val = qir_attr_ints(m, root_op->results[0]->type.rank, sp->block)};
    qir_op_set_attr(m, k, "tile", qir_attr_dict(m, 1, &e), true);
    est = sp->est_us;
  }
  if (row_tile) {
    qir_attr e = {.key = "block", .val = qir_attr_ints(m, rt->rank, blocks[n_mem - 1])};
    qir_op_set_attr(m, k, "tile", qir_attr_dict(m, 1, &e), true);
    est = row_est + bytes_us(w, bytes);
  }
  qir_op_set_attr(m, k, "est_us", qir_attr_float(round(est * 1000) / 1000), true);
  /* a group on its anchor's plan runs on the anchor's plans for smaller runs
   * too (#tile_bands), each band's estimate scaled as the group's is */
  const qir_attr *bands = anchor && plan && !sp->staged && !row_tile ? qir_op_attr(anchor->op, "tile_bands") : NULL;
  if (bands && anchor->est_us > 0 && qir_type_equal(&anchor->op->results[0]->type, &root_op->results[0]->type))
    qir_op_set_attr(m, k, "tile_bands", scaled_bands(m, &bands->val, est / anchor->est_us), true);
  /* a staged group that qcodegen composes as a fused kernel after all (its
   * one reduction read only at its readers' points) runs on its anchor's
   * plan, as a fused group does */
  if (sp->staged && qir_group_composes_fused(m, k)) {
    int a = n_mem - 1;
    for (int i = 0; i < n_mem; i++)
      if (mem[i]->n_chain || (mem[i]->comp && mem[i]->comp->n_red > 0)) a = i;
    const qir_attr *ap = qir_op_attr(mem[a]->op, "tile");
    const qir_attr_val *ab = ap && ap->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&ap->val, "block") : NULL;
    if (ab && ab->kind == QIR_ATTR_LIST && ab->n == root_op->results[0]->type.rank && qir_attr_dict_get(&ap->val, "grid") &&
        qir_type_equal(&mem[a]->op->results[0]->type, &root_op->results[0]->type)) {
      qir_op_set_attr(m, k, "tile", ap->val, true);
      const qir_attr *aa = qir_op_attr(mem[a]->op, "tile_alternatives");
      if (aa) qir_op_set_attr(m, k, "tile_alternatives", aa->val, true);
      int i = 0;
      for (qir_op *in = body->first; in && in->code != QIR_OP_YIELD; in = in->next, i++)
        if (i == a) qir_op_set_attr(m, in, "tile", ap->val, true);
      qir_group_rederive_tiles(m, k);
    }
  }
  /* a staged or row group gets the whole plan qcodegen's composer runs it
   * with (grid, threads, shared memory): -rammer packs it like any kernel */
  const qir_attr *kt = qir_op_attr(k, "tile");
  qir_attr_val whole;
  if ((!kt || kt->val.kind != QIR_ATTR_DICT || !qir_attr_dict_get(&kt->val, "grid")) &&
      qir_group_whole_plan(m, k, w->t, round(est * 1000) / 1000, &whole))
    qir_op_set_attr(m, k, "tile", whole, true);
  qir_op_set_attr(m, k, "global_bytes", qir_attr_int((int64_t)bytes), true);
  k->results[0]->name = root_op->results[0]->name;
  qir_value_replace_uses(m, root_op->results[0], k->results[0]);
  for (int i = n_mem - 1; i >= 0; i--) qir_op_unlink(mem[i]->op);
}

/* Every read of v (a row op's result) in form c walks v's rows: its kept
 * axes at c's own point, its reduced axes by c's reduction variables in order
 * (P[b, h, i, j] in out[b, h, i, d] = sum_j P[b, h, i, j] * V[b, h, j, d]). */
static bool walks_rows(const qir_compute *c, qir_value *const *args, const qir_expr *e, const qir_value *v,
                       const bool *reduced, int *count) {
  if (!e) return true;
  if (e->kind == QIR_EX_ACCESS && e->operand >= 0 && args[e->operand] == v) {
    if (e->n_args != v->type.rank) return false;
    for (int d = 0, k = 0; d < e->n_args; d++) {
      int want = reduced[d] ? c->n_axes + k++ : d;
      if (e->args[d]->kind != QIR_EX_VAR || e->args[d]->var != want || c->axis_extents[want] != v->type.dims[d])
        return false;
    }
    (*count)++;
  }
  for (int i = 0; i < e->n_args; i++)
    if (!walks_rows(c, args, e->args[i], v, reduced, count)) return false;
  return true;
}

/* Tries to take into group g (root: a contraction, node index last) the row
 * op it reads over its rows, with the row op's own members (its row input at
 * the shared-memory level, a point reduction): qcodegen's row kernel with a
 * tail, each row's warp computing the root's row from the row's result staged
 * in shared memory.  Joins when the model rates that kernel (the point
 * reduction's, the rows' and the tail's loads, the L2 traffic of their other
 * operands per block) below the row group and the root apart (its own kernel,
 * the row's result through global memory, one launch).  Returns the row
 * node, or NULL with nothing changed. */
static const node *try_row_tail(region_ctx *rc, int g, int last) {
  const welder *w = rc->w;
  node *root = &rc->nodes[last];
  const qir_type *ot = &root->op->results[0]->type;
  for (int k = 0; k < root->op->n_operands; k++) {
    node *p = producer(rc, root->op->operands[k]);
    if (!p || !p->row || p->group >= 0 || !p->n_chain) continue;
    qir_value *v = p->op->results[0];
    bool only = v->uses != NULL, reduced[QIR_MAX_RANK];
    for (qir_use *u = v->uses; u; u = u->next) only &= u->user == root->op;
    if (!only || v->type.rank != ot->rank || ot->rank > QIR_MAX_RANK || !row_axes(p->op, reduced) ||
        row_bytes(p->op) > ROW_SMEM_BYTES / 2) {
      NOTE(w, p, rows, "not tried: %s", !only ? "also read elsewhere" : "its row over the staged limit or of another rank");
      continue;
    }
    int n_red = 0, count = 0;
    for (int d = 0; d < ot->rank; d++) n_red += reduced[d];
    if (root->comp->n_axes != ot->rank || root->comp->n_red != n_red ||
        !walks_rows(root->comp, root->args, root->comp->body, v, reduced, &count) || count == 0) {
      NOTE(w, p, rows, "not tried: its reader does not walk its rows");
      continue;
    }
    int pi = (int)(p - rc->nodes);
    bool *was = calloc((size_t)pi + 1, sizeof *was);
    if (!was) abort();
    for (int j = 0; j < pi; j++) was[j] = rc->nodes[j].group == g;
    int saved_point = rc->point_group;
    p->group = g;
    p->identity = false;
    bool has_anchor = true;
    for (bool grew = true; grew;) {
      grew = false;
      for (int j = pi - 1; j >= 0; j--)
        if (rc->nodes[j].group < 0 && absorb(rc, &rc->nodes[j], g, p, &has_anchor)) grew = true;
    }
    const node *point = NULL;
    for (int j = 0; j < pi; j++)
      if (rc->nodes[j].group == g && !was[j] && rc->nodes[j].comp && rc->nodes[j].comp->n_red > 0) point = &rc->nodes[j];
    double joint, alone, pb = (double)value_bytes(v);
    row_block(w, p->op, p->n_chain, point, root, &joint);
    row_block(w, p->op, p->n_chain, point, NULL, &alone);
    joint += bytes_us(w, root->bytes - pb);
    double apart = alone + bytes_us(w, pb) + root->est_us + w->launch_us;
    NOTE(w, p, rows, "%s: a row kernel with this tail %.3f us %s apart %.3f us (rows %.3f + round trip %.3f + tail %.3f + launch %.3f)",
         joint < apart ? "fused" : "no", joint, joint < apart ? "<" : ">=", apart, alone, bytes_us(w, pb), root->est_us,
         w->launch_us);
    if (joint < apart) {
      free(was);
      return p;
    }
    for (int j = 0; j < pi; j++)
      if (rc->nodes[j].group == g && !was[j]) rc->nodes[j].group = -1;
    p->group = -1;
    rc->point_group = saved_point;
    free(was);
  }
  return NULL;
}

static void weld_region(welder *w, qir_region *r);

static const char *value_name(const qir_value *v, char *buf, size_t n) {
  if (v->name) return v->name;
  snprintf(buf, n, "v%d", v->id);
  return buf;
}

/* -welder-stats: a line on stderr per edge into group g's members (nodes up
 * to last) from an op that computes (inputs and constants aside): the level
 * it got (global: not fused) and what each level tried found.  `kernel`: the
 * number of the group's kernel, -1 when the root stays a plain op. */
static void print_edges(region_ctx *rc, int g, int last, int kernel, const node *tail_row) {
  node *mem[MAX_MEMBERS];
  int n_mem = group_members(rc, g, last, mem);
  for (int i = 0; i < n_mem; i++) {
    node *c = mem[i];
    for (int k = 0; k < c->op->n_operands; k++) {
      qir_value *x = c->op->operands[k];
      bool dup = false;
      for (int j = 0; j < k; j++) dup |= c->op->operands[j] == x;
      node *p = producer(rc, x);
      if (dup || !p || p->op->code == QIR_OP_INPUT || p->op->code == QIR_OP_CONST) continue;
      const char *level = "global";
      if (p->group == g)
        level = p->staged || p == tail_row || (c->row && k == 0 && qir_type_equal(&x->type, &c->op->results[0]->type))
                    ? "smem"
                    : "reg";
      char in[24], out[24], grp[24] = "its own kernel";
      if (kernel >= 0) snprintf(grp, sizeof grp, "@g%d", kernel);
      fprintf(stderr, "welder-stats: %%%s (%s) -> %%%s (%s) in %s: %s", value_name(x, in, sizeof in), short_name(p->op),
              value_name(c->op->results[0], out, sizeof out), short_name(c->op), grp, level);
      if (p->note_reg[0]) fprintf(stderr, "; reg: %s", p->note_reg);
      if (p->note_rows[0]) fprintf(stderr, "; rows: %s", p->note_rows);
      if (p->note_smem[0]) fprintf(stderr, "; smem: %s", p->note_smem);
      fputc('\n', stderr);
    }
  }
}

static void weld_ops_in_regions(welder *w, qir_region *r) {
  for (qir_op *op = r->first; op; op = op->next)
    if (op->code != QIR_OP_KERNEL)
      for (int i = 0; i < op->n_regions; i++) weld_region(w, op->regions[i]);
}

/* A form that only moves elements: a read, or a select between reads (a
 * concat: which input by the index's range); its per-load cost is the index
 * arithmetic, not recomputation, so it may be read anywhere in a group. */
static bool moves_data(const qir_expr *e) {
  while (e->kind == QIR_EX_CAST) e = e->args[0];
  if (e->kind == QIR_EX_ACCESS) return true;
  return e->kind == QIR_EX_SELECT && e->n_args == 3 && moves_data(e->args[1]) && moves_data(e->args[2]);
}

/* Whether no operand of op is computed by a kernel of region r (weights,
 * inputs, constants, outer values): a concat of such values folds into its
 * readers' loads; a concat of computed branches (an inception block) joins
 * at the shared-memory level with its branches instead, by the model below. */
static bool joins_leaves(const qir_op *op, const qir_region *r) {
  for (int i = 0; i < op->n_operands; i++) {
    const qir_op *d = op->operands[i]->def;
    if (d && d->parent == r && launches(d)) return false;
  }
  return true;
}

static bool fusable_code(const welder *w, const qir_op *op) {
  /* a kernel an rprogram packs keeps its shape: its blocks are the program's tasks;
   * an op that is not row-wise along a symbolic axis (qir_op_row_wise) joins
   * only where qcodegen writes it for the run's extents as one compute over
   * its own axes (a convolution or resize over a symbolic height), else it
   * stays alone */
  const char *why;
  if (!launches(op) || op->code == QIR_OP_KERNEL || op->n_regions != 0 || op->n_results != 1 || qir_rprogram_packs(op)) return false;
  return qir_op_row_wise(w->m, op, &why) || qir_op_expands_to_one(w->m, op);
}

static void weld_region(welder *w, qir_region *r) {
  weld_ops_in_regions(w, r);
  int n = 0;
  for (qir_op *op = r->first; op; op = op->next) n++;
  region_ctx rc = {w, calloc((size_t)n + 1, sizeof(node)), 0, malloc(sizeof(int) * ((size_t)w->m->next_value_id + 1)),
                   w->m->next_value_id + 1, calloc((size_t)n + 1, sizeof(double)), -1};
  if (!rc.nodes || !rc.node_of || !rc.size) abort();
  for (int i = 0; i <= w->m->next_value_id; i++) rc.node_of[i] = -1;
  for (qir_op *op = r->first; op; op = op->next) {
    node *nd = &rc.nodes[rc.n_nodes];
    *nd = (node){.op = op, .group = -1};
    nd->fusable = fusable_code(w, op);
    nd->row = nd->fusable && row_op(op) && qir_type_numel(&op->results[0]->type) > 0 && op->results[0]->type.rank > 0;
    nd->solo = nd->fusable && solo_op(op) && qir_type_numel(&op->results[0]->type) > 0;
    bool view = op->code == QIR_OP_RESHAPE && op->n_results == 1 && op->n_operands == 1;
    if ((nd->fusable || view) && qir_type_numel(&op->results[0]->type) > 0) {
      qir_op *form = op;
      if (op->code != QIR_OP_COMPUTE) {
        qir_diag qd;
        qir_diag_init(&qd, w->quiet, NULL, NULL, 0);
        form = qir_op_to_compute(w->m, op, &qd);
        if (form) qir_op_unlink(form);
      }
      if (form && form->comp && form->comp->body && form->comp->n_axes + form->comp->n_red <= 16) {
        nd->comp = form->comp;
        nd->args = form->operands;
        const qir_expr *e = nd->comp->body;
        while (e->kind == QIR_EX_CAST) e = e->args[0];
        nd->movement = nd->comp->n_red == 0 && moves_data(e) &&
                       (op->code == QIR_OP_TRANSPOSE || op->code == QIR_OP_RESHAPE || op->code == QIR_OP_SLICE ||
                        (op->code == QIR_OP_CONCAT && joins_leaves(op, r)));
      }
    }
    if (nd->solo || nd->row) {
      /* its definition's forms, for the boxes of a staged group */
      qir_diag qd;
      qir_diag_init(&qd, w->quiet, NULL, NULL, 0);
      qir_op *chain[8];
      int nc = qir_op_expand_computes(w->m, op, chain, 8, &qd);
      bool ok = nc > 0 && nc <= 4;
      for (int k = 0; k < nc; k++) {
        qir_op_unlink(chain[k]);
        ok &= chain[k]->code == QIR_OP_COMPUTE && chain[k]->comp && chain[k]->comp->body &&
              chain[k]->comp->n_axes + chain[k]->comp->n_red <= 16;
      }
      if (ok) {
        memcpy(nd->chain, chain, sizeof *chain * (size_t)nc);
        nd->n_chain = nc;
      }
    }
    nd->bytes = op_bytes(op);
    nd->est_us = op_est_us(w, op, nd->bytes);
    for (int k = 0; k < op->n_results; k++)
      if (op->results[k]->id >= 0 && op->results[k]->id < rc.n_ids) rc.node_of[op->results[k]->id] = rc.n_nodes;
    rc.n_nodes++;
  }
  int next_group = 0;
  for (int i = rc.n_nodes - 1; i >= 0; i--) {
    node *root = &rc.nodes[i];
    if (root->group >= 0 || (!root->comp && !root->row && !root->solo)) continue;
    if (root->op->code == QIR_OP_RESHAPE) continue;   /* a view: no kernel of its own */
    int g = next_group++;
    root->group = g;
    root->identity = true;
    if (w->stats)
      for (int j = 0; j < i; j++) {
        node *p = &rc.nodes[j];
        p->note_reg[0] = p->note_smem[0] = p->note_rows[0] = 0;
        for (int k = 0; root->solo && k < root->op->n_operands; k++)
          if (root->op->operands[k] == p->op->results[0])
            NOTE(w, p, reg, "not tried: its reader is a multi-stage op read across a window (LRN), a kernel of its own stages");
      }
    bool has_anchor = root->row || root->solo || root->comp->n_red > 0;
    int n_mem = 1;
    for (bool grew = !root->solo; grew && n_mem < MAX_MEMBERS;) {
      grew = false;
      for (int j = i - 1; j >= 0 && n_mem < MAX_MEMBERS; j--) {
        node *p = &rc.nodes[j];
        if (p->group < 0 && absorb(&rc, p, g, root, &has_anchor)) {
          n_mem++;
          grew = true;
        }
      }
    }
    /* a contraction over the rows of a row op's result (@V after the softmax)
     * takes the row op's group in: one row kernel with a tail, by the model */
    const node *tail_row = NULL;
    if (!root->row && !root->solo && root->comp && root->comp->n_red > 0) tail_row = try_row_tail(&rc, g, i);
    stage_plan sp = {0};
    if (!tail_row) stage_group(&rc, g, i, &next_group, &sp);
    n_mem = group_members(&rc, g, i, (node *[MAX_MEMBERS]){0});
    bool built = n_mem >= 2 || root->row || root->solo;
    if (w->stats) print_edges(&rc, g, i, built ? w->n_groups : -1, tail_row);
    if (!built) continue;
    node *mem[MAX_MEMBERS], *anchor = NULL;
    int k = 0;
    for (int j = 0; j <= i; j++)
      if (rc.nodes[j].group == g) {
        mem[k++] = &rc.nodes[j];
        if (rc.nodes[j].comp && rc.nodes[j].comp->n_red > 0) anchor = &rc.nodes[j];
      }
    build_group(&rc, mem, k, root, anchor, &sp, tail_row);
  }
  free(rc.nodes);
  free(rc.node_of);
  free(rc.size);
}

/* ---------------------------------------------------------------- the horizontal step */

/* Sibling contractions (welder_siblings.c) are merged before graph
 * connecting, each set by the whole model: the step's own estimate first
 * (the merged contraction's plan against the siblings', the slices' copies),
 * then, where that rates the merge faster, graph connecting and sub-graph
 * tiling run on a copy of the module with the set merged and on one without:
 * the set merges when the welded module's modelled time (kernels' estimates
 * and launches) falls.  So a merge that would cost the siblings their own
 * fusions (an epilogue each, a staged consumer) is not made. */
static double welded_us(const welder *w, qir_module *c) {
  welder cw = *w;
  cw.m = c;
  cw.n_groups = 0;
  cw.stats = false;             /* a trial: its edges are not the module's */
  weld_region(&cw, c->body);
  model_totals t = {0};
  totals_region(&cw, c->body, &t);
  return t.est_us + cw.launch_us * t.n_kernels;
}

/* The constants whose payload is in memory and not a splat (a pass made
 * them: -autocast's converted weights), pre-order; NULL list: count only. */
typedef struct {
  qir_op **ops;
  int n;
} payloads;

static bool collect_payloads(qir_op *op, void *ctx) {
  payloads *p = ctx;
  if (op->code == QIR_OP_CONST && op->cst && !op->cst->splat && op->cst->offset < 0 &&
      qir_type_numel(&op->results[0]->type) > 64) {
    if (p->ops) p->ops[p->n] = op;
    p->n++;
  }
  return true;
}

static bool collect_consts(qir_op *op, void *ctx) {
  payloads *p = ctx;
  if (op->code == QIR_OP_CONST) {
    if (p->ops) p->ops[p->n] = op;
    p->n++;
  }
  return true;
}

/* A copy of the module through its text.  Payloads in memory would be
 * printed and parsed as decimals (megabytes of them per trial): they travel
 * as placeholder offsets instead, and the copy then shares the original's
 * bytes (read-only; the original outlives the copy). */
static qir_module *clone_module(const welder *w) {
  payloads big = {0};
  qir_walk(w->m->body, collect_payloads, &big);
  big.ops = calloc((size_t)big.n + 1, sizeof *big.ops);
  if (!big.ops) return NULL;
  big.n = 0;
  qir_walk(w->m->body, collect_payloads, &big);
  for (int i = 0; i < big.n; i++) big.ops[i]->cst->offset = i;
  size_t len = 0;
  char *text = qir_print_to_string(w->m, &len);
  for (int i = 0; i < big.n; i++) big.ops[i]->cst->offset = -1;
  qir_module *c = NULL;
  if (text) {
    qir_diag qd;
    qir_diag_init(&qd, w->quiet, NULL, NULL, 0);
    c = qir_parse(text, len, "<welder siblings>", w->m->base_dir, &qd);
    free(text);
  }
  if (c && big.n) {
    /* the same constants in the same order: pair them up */
    payloads mine = {0}, theirs = {0};
    qir_walk(w->m->body, collect_consts, &mine);
    qir_walk(c->body, collect_consts, &theirs);
    mine.ops = calloc((size_t)mine.n + 1, sizeof *mine.ops);
    theirs.ops = calloc((size_t)theirs.n + 1, sizeof *theirs.ops);
    bool paired = mine.ops && theirs.ops && mine.n == theirs.n;
    if (paired) {
      mine.n = theirs.n = 0;
      qir_walk(w->m->body, collect_consts, &mine);
      qir_walk(c->body, collect_consts, &theirs);
      for (int i = 0; i < mine.n; i++) {
        qir_const *from = mine.ops[i]->cst, *to = theirs.ops[i]->cst;
        if (from->offset >= 0 || from->splat || !from->data) continue;
        to->offset = -1;
        to->data = from->data;
        to->nbytes = from->nbytes;
      }
    }
    free(mine.ops);
    free(theirs.ops);
    if (!paired) {
      qir_module_free(c);
      c = NULL;
    }
  }
  free(big.ops);
  return c;
}

#define MAX_REGION_DEPTH 16

/* op's place: per level from the module body down, the op's index in its
 * region, then (below the top) which region of the op holding it. */
static int op_path(const qir_op *op, int *path) {
  int n = 0, rev[2 * MAX_REGION_DEPTH];
  for (const qir_op *o = op; o;) {
    if (n + 2 > 2 * MAX_REGION_DEPTH || !o->parent) return -1;
    int i = 0;
    for (const qir_op *p = o->prev; p; p = p->prev) i++;
    rev[n++] = i;
    const qir_op *holder = o->parent->parent_op;
    if (!holder) break;
    int k = 0;
    while (k < holder->n_regions && holder->regions[k] != o->parent) k++;
    rev[n++] = k;
    o = holder;
  }
  for (int i = 0; i < n; i++) path[i] = rev[n - 1 - i];
  return n;
}

static qir_op *op_at(qir_module *m, const int *path, int n) {
  qir_region *r = m->body;
  qir_op *op = NULL;
  for (int i = 0; i < n; i += 2) {
    op = r->first;
    for (int k = 0; op && k < path[i]; k++) op = op->next;
    if (!op) return NULL;
    if (i + 1 < n) {
      if (path[i + 1] >= op->n_regions) return NULL;
      r = op->regions[path[i + 1]];
    }
  }
  return op;
}

typedef struct {
  bool have_best;               /* best_us computed (only once a set passes the step's own estimate) */
  double best_us;               /* the welded module's modelled time with the merges so far */
  const qir_op *tried[64];      /* leaders the whole model turned down */
  int n_tried;
} sibling_trials;

static bool tried_before(sibling_trials *st, const qir_op *op) {
  for (int i = 0; i < st->n_tried; i++)
    if (st->tried[i] == op) return true;
  if (st->n_tried < (int)(sizeof st->tried / sizeof *st->tried)) st->tried[st->n_tried++] = op;
  return false;
}

static void merge_siblings_in(welder *w, qir_region *r, sibling_trials *st) {
  welder_siblings_ctx sc = {w->m, w->t, w->launch_us, w->plan};
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    if (op->code != QIR_OP_KERNEL)
      for (int i = 0; i < op->n_regions; i++) merge_siblings_in(w, op->regions[i], st);
    if ((op->code != QIR_OP_MATMUL && op->code != QIR_OP_CONV) || tried_before(st, op) || !welder_siblings_merge(&sc, op, false)) continue;
    if (!st->have_best) {
      qir_module *base = clone_module(w);
      if (!base) return;
      st->best_us = welded_us(w, base);
      st->have_best = true;
      qir_module_free(base);
    }
    int path[2 * MAX_REGION_DEPTH];
    int n = op_path(op, path);
    qir_module *c = n > 0 ? clone_module(w) : NULL;
    if (!c) continue;
    qir_op *cop = op_at(c, path, n);
    welder_siblings_ctx cc = {c, w->t, w->launch_us, w->plan};
    double us = cop && cop->code == op->code && welder_siblings_merge(&cc, cop, true) ? welded_us(w, c) : INFINITY;
    qir_module_free(c);
    if (us < st->best_us && welder_siblings_merge(&sc, op, true)) {
      st->best_us = us;
      next = r->first;          /* op and its siblings are gone: the region again (the merged op is new) */
    }
  }
}

static void merge_siblings(welder *w) {
  sibling_trials st = {0};
  merge_siblings_in(w, w->m->body, &st);
}

/* ---------------------------------------------------------------- the pass */

/* -stats: the type conversions (-autocast's casts) inside kernel groups and
 * those left to run as kernels of their own. */
typedef struct {
  int folded, alone;
} cast_counts;

static bool count_casts(qir_op *op, void *ctx) {
  cast_counts *c = ctx;
  if (op->code == QIR_OP_CAST) {
    if (op->parent && op->parent->parent_op && op->parent->parent_op->code == QIR_OP_KERNEL) c->folded++;
    else if (qir_op_attr(op, "tile")) c->alone++;
  }
  return true;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool report_attention(qir_op *op, void *out) {
  if (op->code == QIR_OP_ATTENTION) {
    fputs("welder: ", out);
    roller_flash_report(out, op);
  }
  return true;
}

/* An attention op without a plan (the recognition just made it, or -roller
 * did not run) gets its flash plan: one kernel, as the group it replaces was. */
typedef struct {
  qir_module *m;
  const qir_target *t;
} plan_ctx;

static bool plan_attention(qir_op *op, void *vctx) {
  plan_ctx *pc = vctx;
  if (op->code == QIR_OP_ATTENTION && !qir_op_attr(op, "tile")) roller_plan_attention(pc->m, op, pc->t, 1, NULL);
  return true;
}

double qopt_modelled_us(qopt_ctx *ctx, qir_module *m, const int64_t *at) {
  qir_target from_file;
  const qir_target *t = qopt_target(ctx, &from_file);
  if (!t) return -1;
  FILE *quiet = fopen("/dev/null", "w");
  double launch_us = qopt_option_given(ctx, "welder-launch-us") ? qopt_option_float(ctx, "welder-launch-us") : t->launch_us;
  welder w = {m, t, ctx->diag, quiet ? quiet : stderr, 0, launch_us, false, {0}, at, ctx};
  model_totals s = {0};
  totals_region(&w, m->body, &s);
  if (quiet) fclose(quiet);
  return s.est_us + w.launch_us * s.n_kernels;
}

bool qopt_welder(qopt_ctx *ctx, qir_module *m) {
  double t0 = now_ms();
  if (!qopt_match_attention(ctx, m, "welder")) return false;
  qir_target from_file;
  const qir_target *t = qopt_target(ctx, &from_file);
  if (!t) return false;
  plan_ctx pc = {m, t};
  qir_walk(m->body, plan_attention, &pc);
  FILE *quiet = fopen("/dev/null", "w");
  /* a launch costs what the target says unless the command line says otherwise */
  double launch_us = qopt_option_given(ctx, "welder-launch-us") ? qopt_option_float(ctx, "welder-launch-us") : t->launch_us;
  welder w = {m, t, ctx->diag, quiet ? quiet : stderr, 0, launch_us, qopt_option_bool(ctx, "welder-stats"), {0}, NULL, ctx};
  if (!roller_options_of(ctx, &w.plan)) {
    if (quiet) fclose(quiet);
    return false;
  }
  w.plan.relayout = false;   /* a group's plans are over the ops it has */
  if (!(w.launch_us >= 0)) {
    qir_error(ctx->diag, (qir_loc){0}, "-welder-launch-us must not be negative");
    if (quiet) fclose(quiet);
    return false;
  }
  /* group names continue after the ones already in the module */
  for (qir_op *op = m->body->first; op; op = op->next)
    if (op->code == QIR_OP_KERNEL) w.n_groups++;
  model_totals before = {0}, after = {0};
  totals_region(&w, m->body, &before);
  merge_siblings(&w);
  weld_region(&w, m->body);
  totals_region(&w, m->body, &after);
  before.est_us += w.launch_us * before.n_kernels;
  after.est_us += w.launch_us * after.n_kernels;
  if (quiet) fclose(quiet);
  if (qopt_option_bool(ctx, "stats")) {
    double pct_b = before.bytes > 0 ? 100.0 * (before.bytes - after.bytes) / before.bytes : 0;
    fprintf(stderr,
            "welder: @%s on %s: %d operators; kernels %d -> %d; modelled global bytes %.0f -> %.0f (-%.1f%%); "
            "modelled time %.1f -> %.1f us; pass %.1f ms\n",
            m->name ? m->name : "main", t->name, before.n_ops, before.n_kernels, after.n_kernels, before.bytes,
            after.bytes, pct_b, before.est_us, after.est_us, now_ms() - t0);
    cast_counts casts = {0, 0};
    qir_walk(m->body, count_casts, &casts);
    if (casts.folded + casts.alone)
      fprintf(stderr, "welder: casts folded into kernels %d, kernels of their own %d\n", casts.folded, casts.alone);
    qir_walk(m->body, report_attention, stderr);
  }
  return true;
}
