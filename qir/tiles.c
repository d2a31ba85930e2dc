/* tiles.c: tile propagation through a kernel group (docs/qir.md, "Kernel groups").
 *
 * From the group's output tile (a block of its result) backwards through the
 * access maps of every inner op's tensor-expression form (a chain of forms
 * for softmax, norms, LRN): a reader whose output axes range over a box reads
 * each operand over a box, dimension by dimension c0 + sum coef * var with the
 * output variables over the reader's box and its reduction variables over
 * their extent (halos and strides included).  The boxes of all reads of a
 * value are joined (their union; where two move differently with the block,
 * the larger extent); an index that is not affine gives no tile.  The tile of
 * an inner op is its box's extents, clipped to its result's shape.  -welder
 * writes these tiles and the verifier checks that hand-written ones agree. */
#include <stdlib.h>
#include <string.h>

#include "qir.h"

#define MAX_VARS 32
#define MAX_FORMS 8

typedef struct {
  bool have, broken;
  int64_t oc[QIR_MAX_RANK], ext[QIR_MAX_RANK];
  int64_t co[QIR_MAX_RANK][QIR_MAX_RANK];   /* origin = oc + co . (block start of each output axis) */
} box;

bool qir_expr_affine(const qir_expr *e, int nv, int64_t *coef, int64_t *c0) {
  if (nv > MAX_VARS) return false;
  memset(coef, 0, sizeof *coef * (size_t)nv);
  *c0 = 0;
  switch (e->kind) {
  case QIR_EX_INT: *c0 = e->ival; return true;
  case QIR_EX_VAR:
    if (e->var < 0 || e->var >= nv) return false;
    coef[e->var] = 1;
    return true;
  case QIR_EX_UNARY:
    if (e->fn != QIR_FN_NEG || !qir_expr_affine(e->args[0], nv, coef, c0)) return false;
    for (int v = 0; v < nv; v++) coef[v] = -coef[v];
    *c0 = -*c0;
    return true;
  case QIR_EX_BINARY: {
    int64_t ca[MAX_VARS], cb[MAX_VARS], a0, b0;
    if (e->fn != QIR_FN_ADD && e->fn != QIR_FN_SUB && e->fn != QIR_FN_MUL) return false;
    if (!qir_expr_affine(e->args[0], nv, ca, &a0) || !qir_expr_affine(e->args[1], nv, cb, &b0)) return false;
    if (e->fn == QIR_FN_MUL) {
      bool a_const = true, b_const = true;
      for (int v = 0; v < nv; v++) a_const &= ca[v] == 0, b_const &= cb[v] == 0;
      if (!a_const && !b_const) return false;
      for (int v = 0; v < nv; v++) coef[v] = a_const ? a0 * cb[v] : b0 * ca[v];
      *c0 = a0 * b0;
      return true;
    }
    int64_t s = e->fn == QIR_FN_ADD ? 1 : -1;
    for (int v = 0; v < nv; v++) coef[v] = ca[v] + s * cb[v];
    *c0 = a0 + s * b0;
    return true;
  }
  default: return false;
  }
}

bool qir_read_range(const qir_compute *c, const qir_expr *index, const int64_t *src_oc, const int64_t *src_ext,
                    const int64_t (*src_co)[QIR_MAX_RANK], int64_t *o0, int64_t *co, int64_t *ext) {
  int nv = c->n_axes + c->n_red;
  int64_t coef[MAX_VARS];
  if (nv > MAX_VARS || c->n_axes > QIR_MAX_RANK || !qir_expr_affine(index, nv, coef, o0)) return false;
  memset(co, 0, sizeof *co * QIR_MAX_RANK);
  *ext = 1;
  for (int x = 0; x < nv; x++) {
    if (!coef[x]) continue;
    int64_t size = x < c->n_axes ? src_ext[x] : c->axis_extents[x];
    int64_t at0 = x < c->n_axes ? src_oc[x] : 0;
    if (size < 1) size = 1;
    if (coef[x] < 0) at0 += size - 1;   /* a descending read starts at the far end */
    *o0 += coef[x] * at0;
    if (x < c->n_axes)
      for (int d = 0; d < QIR_MAX_RANK; d++) co[d] += coef[x] * src_co[x][d];
    *ext += llabs(coef[x]) * (size - 1);
  }
  return true;
}

/* Joins into *dst the box of v that form c's reads cover while c's output
 * axes range over *src. */
static void join_reads(const qir_compute *c, qir_value *const *args, int n_args, const qir_expr *e, const qir_value *v,
                       const box *src, box *dst) {
  if (!e) return;
  if (e->kind == QIR_EX_ACCESS && e->operand >= 0 && e->operand < n_args && args[e->operand] == v) {
    int nv = c->n_axes + c->n_red;
    if (e->n_args != v->type.rank || nv > MAX_VARS || c->n_axes > QIR_MAX_RANK) {
      dst->broken = true;
      return;
    }
    for (int j = 0; j < e->n_args; j++) {
      int64_t o0, co[QIR_MAX_RANK], ext;
      if (!qir_read_range(c, e->args[j], src->oc, src->ext, src->co, &o0, co, &ext)) {
        dst->broken = true;
        return;
      }
      if (!dst->have) {
        dst->oc[j] = o0;
        memcpy(dst->co[j], co, sizeof co);
        dst->ext[j] = ext;
      } else if (memcmp(dst->co[j], co, sizeof co)) {
        if (ext > dst->ext[j]) dst->ext[j] = ext;
      } else {
        int64_t lo = o0 < dst->oc[j] ? o0 : dst->oc[j];
        int64_t hi = o0 + ext > dst->oc[j] + dst->ext[j] ? o0 + ext : dst->oc[j] + dst->ext[j];
        dst->oc[j] = lo;
        dst->ext[j] = hi - lo;
      }
    }
    dst->have = true;
  }
  for (int i = 0; i < e->n_args; i++) join_reads(c, args, n_args, e->args[i], v, src, dst);
}

static int group_tiles(qir_module *m, const qir_op *k, const int64_t *block, int cap, int64_t (*tiles)[QIR_MAX_RANK],
                       bool *have, bool clip) {
  if (k->n_regions != 1) return -1;
  const qir_region *body = k->regions[0];
  const qir_op *y = body->last;
  if (!y || y->code != QIR_OP_YIELD || y->n_operands != 1 || !y->operands[0]->def || y->operands[0]->def->parent != body)
    return -1;
  int n = 0;
  for (const qir_op *op = body->first; op && op != y; op = op->next) n++;
  if (n > cap) return -1;
  const qir_op **ops = calloc((size_t)n + 1, sizeof *ops);
  box *bx = calloc((size_t)n + 1, sizeof *bx);
  qir_op *(*forms)[MAX_FORMS] = calloc((size_t)n + 1, sizeof *forms);
  int *n_forms = calloc((size_t)n + 1, sizeof *n_forms);
  if (!ops || !bx || !forms || !n_forms) abort();
  FILE *quiet = fopen("/dev/null", "w");
  qir_diag qd;
  qir_diag_init(&qd, quiet ? quiet : stderr, NULL, NULL, 0);
  int i = 0, root = -1;
  for (const qir_op *op = body->first; op && op != y; op = op->next, i++) {
    ops[i] = op;
    have[i] = false;
    if (op == y->operands[0]->def) root = i;
    if (op->n_results != 1 || op->code == QIR_OP_KERNEL) continue;
    if (op->code == QIR_OP_COMPUTE) {
      if (op->comp && op->comp->body) forms[i][n_forms[i]++] = (qir_op *)op;
      continue;
    }
    int nf = qir_op_expand_computes(m, op, forms[i], MAX_FORMS, &qd);
    for (int f = 0; f < nf; f++) qir_op_unlink(forms[i][f]);
    bool ok = nf > 0;
    for (int f = 0; f < nf; f++) ok &= forms[i][f]->code == QIR_OP_COMPUTE && forms[i][f]->comp && forms[i][f]->comp->body;
    n_forms[i] = ok ? nf : 0;
  }
  if (quiet) fclose(quiet);
  const qir_type *rt = &ops[root]->results[0]->type;
  bx[root].have = true;
  for (int d = 0; d < rt->rank; d++) bx[root].ext[d] = block[d], bx[root].co[d][d] = 1;
  for (int a = root - 1; a >= 0; a--) {
    if (ops[a]->n_results != 1) continue;
    const qir_value *v = ops[a]->results[0];
    for (int c = a + 1; c <= root; c++) {
      if (!bx[c].have) continue;
      bool reads = false;
      for (int o = 0; o < ops[c]->n_operands; o++) reads |= ops[c]->operands[o] == v;
      if (!reads) continue;
      if (!n_forms[c]) {
        bx[a].broken = true;
        continue;
      }
      /* the boxes of a chain's own values, then its reads of v */
      box cb[MAX_FORMS];
      memset(cb, 0, sizeof cb);
      cb[n_forms[c] - 1] = bx[c];
      for (int f = n_forms[c] - 2; f >= 0; f--)
        for (int g = f + 1; g < n_forms[c]; g++)
          if (cb[g].have) {
            const qir_op *fg = forms[c][g];
            join_reads(fg->comp, fg->operands, fg->n_operands, fg->comp->body, forms[c][f]->results[0], &cb[g], &cb[f]);
          }
      for (int f = 0; f < n_forms[c]; f++)
        if (cb[f].have && !cb[f].broken) {
          const qir_op *ff = forms[c][f];
          join_reads(ff->comp, ff->operands, ff->n_operands, ff->comp->body, v, &cb[f], &bx[a]);
        }
    }
    if (bx[a].broken) bx[a].have = false;
  }
  for (i = 0; i < n; i++) {
    have[i] = bx[i].have && !bx[i].broken && ops[i]->n_results == 1;
    if (!have[i]) continue;
    const qir_type *t = &ops[i]->results[0]->type;
    for (int j = 0; j < t->rank; j++) {
      int64_t e = bx[i].ext[j];
      tiles[i][j] = e < 1 ? 1 : clip && e > t->dims[j] && t->dims[j] > 0 ? t->dims[j] : e;
    }
  }
  free(ops);
  free(bx);
  free(forms);
  free(n_forms);
  return n;
}

int qir_group_tiles(qir_module *m, const qir_op *k, const int64_t *block, int cap, int64_t (*tiles)[QIR_MAX_RANK],
                    bool *have) {
  return group_tiles(m, k, block, cap, tiles, have, true);
}

int qir_group_boxes(qir_module *m, const qir_op *k, const int64_t *block, int cap, int64_t (*boxes)[QIR_MAX_RANK],
                    bool *have) {
  return group_tiles(m, k, block, cap, boxes, have, false);
}

bool qir_group_block(const qir_op *k, int64_t *blk) {
  const qir_attr *tile = qir_op_attr(k, "tile");
  const qir_attr_val *gb = tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, "block") : NULL;
  if (!gb || gb->kind != QIR_ATTR_LIST || k->n_results != 1 || k->n_regions != 1 || gb->n != k->results[0]->type.rank)
    return false;
  for (int j = 0; j < gb->n; j++) {
    if (gb->items[j].kind != QIR_ATTR_INT || gb->items[j].i < 1) return false;
    int64_t dim = k->results[0]->type.dims[j];
    blk[j] = gb->items[j].i > dim && dim > 0 ? dim : gb->items[j].i;
  }
  return true;
}

int qir_group_rederive_tiles(qir_module *m, qir_op *k) {
  int64_t blk[QIR_MAX_RANK];
  if (!qir_group_block(k, blk)) return 0;
  int n = 0;
  for (qir_op *in = k->regions[0]->first; in; in = in->next) n++;
  int64_t (*tiles)[QIR_MAX_RANK] = calloc((size_t)n + 1, sizeof *tiles);
  bool *have = calloc((size_t)n + 1, sizeof *have);
  if (!tiles || !have) abort();
  int nt = qir_group_tiles(m, k, blk, n, tiles, have), i = 0, written = 0;
  for (qir_op *in = k->regions[0]->first; nt > 0 && in && in->code != QIR_OP_YIELD; in = in->next, i++) {
    const qir_attr *it = qir_op_attr(in, "tile");
    /* only derived tiles (a block alone); a whole plan is its op's own */
    if (!have[i] || !it || it->val.kind != QIR_ATTR_DICT || it->val.n != 1 || !qir_attr_dict_get(&it->val, "block") ||
        in->n_results != 1)
      continue;
    qir_attr e = {.key = "block", .val = qir_attr_ints(m, in->results[0]->type.rank, tiles[i])};
    qir_op_set_attr(m, in, "tile", qir_attr_dict(m, 1, &e), true);
    written++;
  }
  free(tiles);
  free(have);
  return written;
}

/* ---------------------------------------------------------------- staged reductions */

#define SCHED_MAX_ACCESSES 64
#define SCHED_REGS 16            /* register tile preferred at most (accumulators per thread) */
#define SCHED_REGS_MAX 64        /* taken only when fewer do not cover the box */
#define SCHED_MIN_STEP 8         /* reduction points per staged step, at least */

typedef struct {
  const qir_expr *e;
  uint32_t used;                /* output axes its indices use (bit d) */
  bool red;                     /* uses a reduction variable */
} sched_access;

static uint32_t sched_vars(const qir_expr *e) {
  uint32_t r = e->kind == QIR_EX_VAR && e->var >= 0 && e->var < MAX_VARS ? 1u << e->var : 0;
  for (int i = 0; i < e->n_args; i++) r |= sched_vars(e->args[i]);
  return r;
}

static void sched_collect(const qir_compute *c, const qir_expr *e, sched_access *acc, int *n) {
  if (!e) return;
  if (e->kind == QIR_EX_ACCESS && *n < SCHED_MAX_ACCESSES) {
    uint32_t u = 0;
    for (int j = 0; j < e->n_args; j++) u |= sched_vars(e->args[j]);
    acc[*n].e = e;
    acc[*n].used = u & ((1u << c->n_axes) - 1);
    acc[*n].red = (u >> c->n_axes) != 0;
    (*n)++;
  }
  for (int i = 0; i < e->n_args; i++) sched_collect(c, e->args[i], acc, n);
}

/* Elements of access e's footprint when variable v ranges over size[v]
 * points: -1 when an index is not affine. */
static int64_t sched_footprint(const qir_compute *c, const qir_expr *e, const int64_t *size) {
  int nv = c->n_axes + c->n_red;
  int64_t elems = 1;
  for (int j = 0; j < e->n_args; j++) {
    int64_t coef[MAX_VARS], k0, ext = 1;
    if (!qir_expr_affine(e->args[j], nv, coef, &k0)) return -1;
    for (int v = 0; v < nv; v++) ext += llabs(coef[v]) * (size[v] - 1);
    elems *= ext;
  }
  return elems;
}

/* The access is staged cooperatively (qcodegen's plan_staging): it walks the
 * reduction and QIR_SCHED_MIN_REUSE points of the tile or more read each of
 * its elements (fewer do not pay the copy and the barriers). */
static bool sched_reused(const qir_compute *c, const sched_access *a, const int64_t *tile) {
  if (!a->red) return false;
  int64_t reuse = 1;
  for (int d = 0; d < c->n_axes && reuse < QIR_SCHED_MIN_REUSE; d++)
    if (!((a->used >> d) & 1)) reuse *= tile[d];
  return reuse >= QIR_SCHED_MIN_REUSE;
}

/* Operand o is read from global memory (a staging candidate). */
static bool sched_global(int o, int n_global, const bool *in_smem) { return o >= 0 && o < n_global && !(in_smem && in_smem[o]); }

bool qir_stage_schedule(const qir_compute *c, const int64_t *ext, int threads, int n_global, int elem_bytes,
                        int64_t budget, qir_stage_sched *s) {
  return qir_stage_schedule_of(c, ext, threads, n_global, NULL, elem_bytes, budget, s);
}

int64_t qir_unrolled_steps(int64_t points, const int64_t *rstep, int n_red, bool *unroll) {
  int64_t budget = points > 0 ? 128 / points : 0, products = points;
  for (int a = n_red - 1; a >= 0 && rstep[a] <= budget; a--) {
    if (unroll) unroll[a] = true;
    products *= rstep[a];
    budget /= rstep[a];
  }
  return products;
}

bool qir_stage_schedule_of(const qir_compute *c, const int64_t *ext, int threads, int n_global, const bool *in_smem,
                           int elem_bytes, int64_t budget, qir_stage_sched *s) {
  memset(s, 0, sizeof *s);
  int n = c->n_axes, m = c->n_red;
  if (m < 1 || n < 1 || n > QIR_MAX_RANK || n + m > MAX_VARS || n + m > QIR_SCHED_VARS || threads < 1 || !c->body)
    return false;
  sched_access acc[SCHED_MAX_ACCESSES];
  int n_acc = 0;
  sched_collect(c, c->body, acc, &n_acc);
  /* the register tile: searched over (at most) the last four axes of more
   * than one point; cost = operand loads and accumulations of the block,
   * counting at least half the threads busy (fewer leaves lanes idle) */
  int axes[4], n_ax = 0;
  for (int d = n - 1; d >= 0 && n_ax < 4; d--)
    if (ext[d] > 1) axes[n_ax++] = d;
  static const int64_t sizes[] = {1, 2, 3, 4, 6, 8, 12, 16};   /* register tile per axis searched */
  int n_sizes = (int)(sizeof sizes / sizeof *sizes);
  for (int cap = SCHED_REGS; cap <= SCHED_REGS_MAX && !s->regs; cap *= 4) {
    int64_t t[QIR_MAX_RANK];
    int k[4] = {0, 0, 0, 0};
    int64_t best_cost = INT64_MAX;
    for (int d = 0; d < n; d++) t[d] = 1;
    for (;;) {
      int64_t used = 1, regs = 1, loads = 0;
      for (int d = 0; d < n; d++) used *= (ext[d] + t[d] - 1) / t[d], regs *= t[d];
      if (used <= threads && regs <= cap) {
        for (int i = 0; i < n_acc; i++) {
          if (!acc[i].red) continue;   /* read once per point (a bias): hoisted out of the reduction */
          int64_t l = 1;
          for (int d = 0; d < n; d++)
            if ((acc[i].used >> d) & 1) l *= t[d];
          loads += l;
        }
        int64_t busy = used > threads / 2 ? used : threads / 2;
        int64_t cost = busy * (regs + 2 * loads);
        if (cost < best_cost || (cost == best_cost && regs < s->regs)) {
          best_cost = cost;
          memcpy(s->thread, t, sizeof(int64_t) * (size_t)n);
          s->regs = regs;
          s->threads_used = used;
          s->loads = loads;
        }
      }
      int i = 0;
      while (i < n_ax && (++k[i] == n_sizes || sizes[k[i]] > ext[axes[i]])) k[i] = 0, t[axes[i++]] = 1;
      if (i == n_ax) break;
      t[axes[i]] = sizes[k[i]];
    }
  }
  if (!s->regs) return false;
  int64_t size[MAX_VARS];
  s->stage = true;
  for (int d = 0; d < n; d++) s->tile[d] = size[d] = (ext[d] + s->thread[d] - 1) / s->thread[d] * s->thread[d];
  /* the reduction step: whole, halved on the outermost stepped axis while
   * the staged operands of one step exceed the budget */
  for (int a = 0; a < m; a++) s->rstep[a] = c->axis_extents[n + a] > 0 ? c->axis_extents[n + a] : 1;
  bool distinct[SCHED_MAX_ACCESSES];
  for (int i = 0; i < n_acc; i++) {
    distinct[i] = true;
    for (int j = 0; j < i; j++) distinct[i] &= !qir_expr_equal(acc[j].e, acc[i].e);
  }
  for (;;) {
    for (int a = 0; a < m; a++) size[n + a] = s->rstep[a];
    int64_t bytes = 0;
    for (int i = 0; i < n_acc; i++) {
      if (!distinct[i] || !sched_global(acc[i].e->operand, n_global, in_smem) || !sched_reused(c, &acc[i], s->tile)) continue;
      int64_t f = sched_footprint(c, acc[i].e, size);
      if (f > 0) bytes += f * elem_bytes;
    }
    int64_t per_step = 1;
    for (int a = 0; a < m; a++) per_step *= s->rstep[a];
    int a = 0;
    while (a < m && s->rstep[a] == 1) a++;
    if (bytes <= budget) break;
    if (a == m || per_step < 2 * SCHED_MIN_STEP) {
      /* steps this short would be all barriers: the operands are read in place */
      s->stage = false;
      for (int b = 0; b < m; b++) s->rstep[b] = c->axis_extents[n + b] > 0 ? c->axis_extents[n + b] : 1;
      break;
    }
    s->rstep[a] = (s->rstep[a] + 1) / 2;
  }
  s->steps = 1;
  s->rtot = 1;
  for (int a = 0; a < m; a++) {
    int64_t r = c->axis_extents[n + a] > 0 ? c->axis_extents[n + a] : 1;
    s->steps *= (r + s->rstep[a] - 1) / s->rstep[a];
    s->rtot *= r;
  }
  /* what one block stages over the whole reduction (greedily, as qcodegen
   * takes the accesses in order while they fit) */
  int64_t left = s->stage ? budget : 0;
  for (int i = 0; i < n_acc; i++) {
    if (!distinct[i] || !sched_global(acc[i].e->operand, n_global, in_smem) || !sched_reused(c, &acc[i], s->tile)) continue;
    int64_t f = sched_footprint(c, acc[i].e, size);
    if (f <= 0 || f * elem_bytes > left) continue;
    left -= f * elem_bytes;
    s->smem += f * elem_bytes;
    s->staged_elems += (double)f * (double)s->steps;
  }
  return true;
}

int qir_stage_threads(int64_t points) { return points >= 256 ? 256 : (int)((points + 31) / 32 * 32); }

int64_t qir_stage_budget(int64_t tile_bytes, int n_red) { return n_red > 0 ? (QIR_STAGE_SMEM_LIMIT - tile_bytes) / n_red : 0; }
