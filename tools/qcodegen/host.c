/* host.c: the host side of a generated file.  Decides what each op becomes
 * (a kernel, an alias, a constant, host control flow), plans device memory by
 * value lifetimes, and prints the API (qir_init, qir_run, qir_free), weight
 * loading, the launch sequence, and with -main a command-line program. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "kast.h"
#include "symbolic.h"
#include "target.h"
#include "rprogram.h"

#define ALIGN 256

typedef struct {
  int64_t bytes, offset;
  int start, end;
} buffer;

typedef enum { VS_NONE, VS_ARENA, VS_CONST, VS_ALIAS } vstore_kind;

typedef struct {
  vstore_kind kind;
  int buf;                      /* VS_ARENA */
  int64_t offset;               /* VS_CONST: offset in the constant buffer */
  qir_value *alias;             /* VS_ALIAS: same bytes as this value */
} vstore;

typedef struct {
  qir_op *op;
  int start, end;               /* positions; end > start only for ops with regions */
  int n_kernels;
  kkernel **kernels;            /* launched in order */
  int *tmp;                     /* loop: a buffer per carried value */
  qir_op *packed_by;            /* a kernel of this rprogram: launched where the rprogram stands */
  qir_op *absorbed_by;          /* a kernel next to this device-resident loop/if: one of its phases */
  qir_value *partial;           /* a split flash-attention plan: its partial results (lower_attention.c) */
  int n_bands;                  /* #tile_bands: a kernel each, for runs of at most band_points[i]
                                 * points (the product of the result's symbolic extents) */
  kkernel **band_k;
  int64_t *band_points;
} opinfo;

typedef struct {
  qir_module *m;
  qir_diag *d;
  const cg_options *opt;
  const cg_printer *pr;
  cg_ctx cg;
  int n_ops, cap_ops;
  opinfo *ops;
  int hash_cap;
  int *hash;                    /* op pointer -> index in ops */
  vstore *vals;                 /* by value id */
  int n_bufs, cap_bufs;
  buffer *bufs;
  int64_t arena_bytes, const_bytes, tensor_bytes;
  int n_inputs, n_outputs;
  qir_op **inputs, **outputs;
  int counter;
  bool failed;
  const char **dev_ptr;         /* qir_run_device: value id -> caller's device pointer, or NULL */
  bool stream_mode;             /* emitting qir_run_stream: nothing may block or read back */
  const char *not_stream;       /* why this model's run cannot be stream-ordered, or NULL */
  int n_rp;                     /* rprogram ops, in the order of rp_ops */
  qir_op **rp_ops;
  qir_value **rp_sync;          /* each one's sync tensor (launch count, barrier counters, flags) */
  int *rp_n;                    /* its persistent kernels (0: its kernels launch one by one) */
  kkernel ***rp_kernels;
  int n_dl;                     /* device-level loops/ifs (outermost ones): their programs */
  cg_dloop **dl;
  bool *dl_done;                /* realised (else the host drives it) */
} host;

/* ---------------------------------------------------------------- op table */

static size_t ptr_hash(const void *p) { return ((uintptr_t)p >> 4) * 2654435761u; }

static void op_register(host *h, qir_op *op, int index) {
  size_t i = ptr_hash(op) & (size_t)(h->hash_cap - 1);
  while (h->hash[i] >= 0) i = (i + 1) & (size_t)(h->hash_cap - 1);
  h->hash[i] = index;
}

static opinfo *op_info(host *h, const qir_op *op) {
  size_t i = ptr_hash(op) & (size_t)(h->hash_cap - 1);
  while (h->hash[i] >= 0) {
    if (h->ops[h->hash[i]].op == op) return &h->ops[h->hash[i]];
    i = (i + 1) & (size_t)(h->hash_cap - 1);
  }
  return NULL;
}

static int count_ops(qir_region *r) {
  int n = 0;
  for (qir_op *op = r->first; op; op = op->next) {
    n++;
    for (int i = 0; i < op->n_regions; i++) n += count_ops(op->regions[i]);
  }
  return n;
}

static void number_ops(host *h, qir_region *r, int *pos) {
  for (qir_op *op = r->first; op; op = op->next) {
    int idx = h->n_ops++;
    h->ops[idx] = (opinfo){.op = op, .start = (*pos)++};
    op_register(h, op, idx);
    qir_attention_shape as;
    int64_t splits = qir_attention_flash_splits(op);
    if (splits > 1 && qir_attention_shape_of(op, &as)) {   /* numbered before the values' storage is sized */
      int64_t dims[4] = {splits, as.B * as.Hkv, as.G * as.S, as.DV + 2};
      h->ops[idx].partial = qir_value_new(h->m, qir_type_make(QIR_F32, 4, dims), qir_sprintf(h->m, "attention%d_partial", idx));
    }
    for (int i = 0; i < op->n_regions; i++) number_ops(h, op->regions[i], pos);
    h->ops[idx].end = op->n_regions ? (*pos)++ : h->ops[idx].start;
  }
}

static int new_buffer(host *h, int64_t bytes) {
  if (h->n_bufs == h->cap_bufs) {
    h->cap_bufs = h->cap_bufs ? h->cap_bufs * 2 : 64;
    buffer *nb = qir_alloc(h->m, sizeof *nb * (size_t)h->cap_bufs);
    if (h->n_bufs) memcpy(nb, h->bufs, sizeof *nb * (size_t)h->n_bufs);
    h->bufs = nb;
  }
  h->bufs[h->n_bufs] = (buffer){.bytes = bytes > 0 ? bytes : 1, .start = -1, .end = -1};
  return h->n_bufs++;
}

static int64_t value_bytes(const qir_value *v) { return qir_type_numel(&v->type) * qir_dtype_size(v->type.dtype); }

static qir_value *root(host *h, qir_value *v) {
  while (h->vals[v->id].kind == VS_ALIAS) v = h->vals[v->id].alias;
  return v;
}

static qir_value *storage_root(void *ctx, qir_value *v) { return root((host *)ctx, v); }

static void add_kernel(host *h, opinfo *oi, kkernel *k) {
  kkernel **ks = qir_alloc(h->m, sizeof *ks * (size_t)(oi->n_kernels + 1));
  if (oi->n_kernels) memcpy(ks, oi->kernels, sizeof *ks * (size_t)oi->n_kernels);
  ks[oi->n_kernels++] = k;
  oi->kernels = ks;
}

/* ---------------------------------------------------------------- deciding */

/* split: one copy kernel per result, x[.., i + offset, ..]. */
static bool plan_split(host *h, opinfo *oi) {
  qir_op *op = oi->op;
  qir_value *x = op->operands[0];
  int axis = (int)qir_op_attr_int(op, "axis", 0);
  if (axis < 0) axis += x->type.rank;
  int64_t offset = 0;
  for (int r = 0; r < op->n_results; r++) {
    qir_value *out = op->results[r];
    int rank = out->type.rank;
    qir_compute *c = qir_compute_new(h->m, rank, 0);
    qir_expr *idx[QIR_MAX_RANK];
    for (int d = 0; d < rank; d++) {
      c->axis_names[d] = qir_sprintf(h->m, "i%d", d);
      c->axis_extents[d] = out->type.dims[d];
      idx[d] = qir_expr_var(h->m, d);
      if (d == axis && offset) idx[d] = qir_expr_binary(h->m, QIR_FN_ADD, idx[d], qir_expr_int(h->m, offset));
    }
    c->body = qir_expr_access(h->m, 0, rank, idx);
    kkernel *k = cg_lower_compute(&h->cg, op, c, 1, &op->operands[0], out, qir_sprintf(h->m, "split result %d", r));
    if (!k) return false;
    add_kernel(h, oi, k);
    if (axis < rank) offset += out->type.dims[axis];
  }
  return true;
}

static kkernel *fill_kernel(host *h, qir_value *v, qir_expr *val, const char *what);
static qir_expr *scalar_expr(host *h, qir_dtype dt, double x);

static const char *op_name(const qir_op *op) { return qir_opinfo_get(op->code)->name; }

/* The kernels of an op's #tile_bands (planned by -roller for smaller runs):
 * each lowered with its band's plan in place of the op's; a band that does
 * not lower is dropped (the op's own kernel serves). */
static void plan_bands(host *h, opinfo *oi) {
  qir_op *op = oi->op;
  const qir_attr *bands = qir_op_attr(op, "tile_bands"), *tile = qir_op_attr(op, "tile");
  if (!bands || !tile || bands->val.kind != QIR_ATTR_LIST || !bands->val.n) return;
  qir_attr_val own = tile->val, list = bands->val;
  oi->band_k = qir_alloc(h->m, sizeof *oi->band_k * (size_t)list.n);
  oi->band_points = qir_alloc(h->m, sizeof *oi->band_points * (size_t)list.n);
  for (int i = 0; i < list.n; i++) {
    const qir_attr_val *points = qir_attr_dict_get(&list.items[i], "points"), *plan = qir_attr_dict_get(&list.items[i], "tile");
    if (!points || points->kind != QIR_ATTR_INT || !plan || plan->kind != QIR_ATTR_DICT) continue;
    qir_op_set_attr(h->m, op, "tile", *plan, true);
    qir_diag quiet;
    qir_diag_init_quiet(&quiet);
    cg_ctx cg = h->cg;
    cg.d = &quiet;
    kkernel *k = cg_lower_compute(&cg, op, op->comp, op->n_operands, op->operands, op->results[0], "compute");
    cg.d = h->cg.d;
    h->cg = cg;
    if (k) {
      k->summary = qir_sprintf(h->m, "%s (for runs of at most %lld points)", k->summary, (long long)points->i);
      oi->band_k[oi->n_bands] = k, oi->band_points[oi->n_bands++] = points->i;
    }
  }
  qir_op_set_attr(h->m, op, "tile", own, true);
}

/* Is op packed by an rprogram with #unpacked_upto? */
static bool packer_unpacks(const qir_op *op) {
  for (const qir_use *u = op->results[0]->uses; u; u = u->next)
    if (u->user->code == QIR_OP_RPROGRAM && qir_op_attr(u->user, "unpacked_upto")) return true;
  return false;
}

static bool plan_op(host *h, opinfo *oi) {
  qir_op *op = oi->op;
  switch (op->code) {
  case QIR_OP_INPUT: case QIR_OP_OUTPUT: case QIR_OP_CONST: case QIR_OP_YIELD: case QIR_OP_IF: case QIR_OP_RPROGRAM: return true;
  case QIR_OP_VERSIONS:
    /* an argument laid out as its operand is (the last plan's) is the operand's
     * bytes; a smaller plan's, of other bounds, a buffer the run is copied to */
    for (int r = 0; r < op->n_regions; r++)
      for (int i = 0; i < op->regions[r]->n_args && i < op->n_operands; i++)
        if (qir_type_equal(&op->regions[r]->args[i]->type, &op->operands[i]->type))
          h->vals[op->regions[r]->args[i]->id] = (vstore){.kind = VS_ALIAS, .alias = op->operands[i]};
    return true;
  case QIR_OP_LOOP: {
    int n_carried = op->n_operands - 2;
    oi->tmp = qir_alloc(h->m, sizeof(int) * (size_t)(n_carried > 0 ? n_carried : 1));
    for (int i = 0; i < n_carried; i++) oi->tmp[i] = new_buffer(h, value_bytes(op->operands[2 + i]));
    return true;
  }
  case QIR_OP_BITCAST: /* a view: the same bytes, typed anew at each use */
    h->vals[op->results[0]->id] = (vstore){.kind = VS_ALIAS, .alias = op->operands[0]};
    return true;
  case QIR_OP_RESHAPE: case QIR_OP_IDENTITY:
    if (op->n_results == 1 && op->results[0]->type.dtype == op->operands[0]->type.dtype &&
        qir_type_numel(&op->results[0]->type) == qir_type_numel(&op->operands[0]->type)) {
      h->vals[op->results[0]->id] = (vstore){.kind = VS_ALIAS, .alias = op->operands[0]};
      return true;
    }
    break;
  case QIR_OP_COMPUTE: {
    kkernel *k = cg_lower_compute(&h->cg, op, op->comp, op->n_operands, op->operands, op->results[0],
                                  qir_op_attr_str(op, "named", "compute"));
    if (!k) return false;
    add_kernel(h, oi, k);
    /* a task runs its #tile plan; a member of a program that small runs unpack runs its bands there */
    if (qir_type_is_symbolic(&op->results[0]->type) && (!qir_rprogram_packs(op) || packer_unpacks(op))) plan_bands(h, oi);
    return true;
  }
  case QIR_OP_SPLIT: return plan_split(h, oi);
  case QIR_OP_SLICE:
    if (qir_attention_folds_slice(op)) return true;   /* the attention reads its operand in place */
    break;
  case QIR_OP_CONCAT:
    if (qir_attention_folds_concat(op)) return true;  /* the attention writes it as it loads the cache */
    break;
  case QIR_OP_ATTENTION:
    if (qir_attention_flash_planned(op)) {
      kkernel *k = cg_lower_attention(&h->cg, op, oi->partial);
      if (!k) return false;
      add_kernel(h, oi, k);
      if (oi->partial) {
        k = cg_lower_attention_combine(&h->cg, op, oi->partial);
        if (!k) return false;
        add_kernel(h, oi, k);
      }
      return true;
    }
    break;
  default: break;
  }
  bool empty = true;
  for (int i = 0; i < op->n_results; i++) empty &= qir_type_numel(&op->results[i]->type) == 0;
  if (empty) return true;   /* nothing to compute */
  if (op->n_results == 1 && op->n_operands >= 1 && qir_type_numel(&op->operands[0]->type) == 0) {
    /* a reduction of an empty tensor is its identity element */
    double v;
    bool fl = qir_dtype_is_float(op->results[0]->type.dtype);
    switch (op->code) {
    case QIR_OP_REDUCE_SUM: case QIR_OP_REDUCE_L2: v = 0; break;
    case QIR_OP_REDUCE_PROD: v = 1; break;
    case QIR_OP_REDUCE_MAX: v = fl ? -INFINITY : qir_dtype_is_unsigned_int(op->results[0]->type.dtype) ? 0 : -2147483648.0; break;
    case QIR_OP_REDUCE_MIN: v = fl ? INFINITY : 2147483647.0; break;
    default: v = NAN; break;
    }
    if (!isnan(v)) {
      kkernel *k = fill_kernel(h, op->results[0], scalar_expr(h, op->results[0]->type.dtype, v), "reduction of an empty tensor");
      if (!k) return false;
      add_kernel(h, oi, k);
      return true;
    }
  }
  qir_error(h->d, op->loc, "qcodegen: '%s' has no compute form (qir_op_expand_computes) and no dedicated kernel",
            op_name(op));
  return false;
}

/* A copy of `op` with only its first result (not inserted): te.c expands
 * single-result forms only.  Its operand uses are dropped again by the caller. */
static qir_op *first_result_clone(qir_module *m, qir_op *op) {
  qir_op *c = qir_op_new(m, op->code, op->n_operands, op->operands, 1, &op->results[0]->type, op->loc);
  c->n_attrs = op->n_attrs;
  c->attrs = op->attrs;
  return c;
}

/* An elementwise compute over `like`'s shape from `body` (variables = axes). */
static qir_op *elementwise(qir_module *m, const qir_type *like, int n_operands, qir_value *const *operands, qir_expr *body,
                           qir_loc loc) {
  qir_compute *c = qir_compute_new(m, like->rank, 0);
  for (int d = 0; d < like->rank; d++) {
    c->axis_names[d] = qir_sprintf(m, "i%d", d);
    c->axis_extents[d] = like->dims[d];
  }
  c->body = body;
  qir_op *op = qir_op_new(m, QIR_OP_COMPUTE, n_operands, operands, 1, like, loc);
  op->comp = c;
  return op;
}

static qir_expr *access_all(qir_module *m, int operand, int rank) {
  qir_expr *idx[QIR_MAX_RANK];
  for (int d = 0; d < rank; d++) idx[d] = qir_expr_var(m, d);
  return qir_expr_access(m, operand, rank, idx);
}

/* layer_norm with its mean and inv_std_dev results: te.c's chain computes the
 * mean and the variance as its first two stages (keepdims shapes, as ONNX's
 * extra results); inv_std_dev = rsqrt(var + epsilon). */
static int expand_layer_norm3(qir_module *m, qir_op *op, qir_op **out, int cap, qir_diag *d) {
  qir_op *clone = first_result_clone(m, op);
  int n = qir_op_expand_computes(m, clone, out, cap - 2, d);
  qir_op_unlink(clone);
  if (n != 3) return 0;
  qir_value *mean = out[0]->results[0], *var = out[1]->results[0];
  const qir_type *tm = &op->results[1]->type, *ti = &op->results[2]->type;
  if (mean->type.rank != tm->rank || memcmp(mean->type.dims, tm->dims, sizeof(int64_t) * (size_t)tm->rank) ||
      var->type.rank != ti->rank || memcmp(var->type.dims, ti->dims, sizeof(int64_t) * (size_t)ti->rank))
    return 0;
  double eps = qir_op_attr_float(op, "epsilon", 1e-5);
  out[3] = elementwise(m, tm, 1, &mean, qir_expr_cast(m, tm->dtype, access_all(m, 0, tm->rank)), op->loc);
  qir_expr *inv = qir_expr_unary(m, QIR_FN_RSQRT, qir_expr_binary(m, QIR_FN_ADD, access_all(m, 0, ti->rank), qir_expr_float(m, eps)));
  out[4] = elementwise(m, ti, 1, &var, qir_expr_cast(m, ti->dtype, inv), op->loc);
  return 5;
}

/* max_pool with indices: the max (te.c's compute of the one-result form), then
 * the smallest flat index of x (storage_order 0: row-major, 1: column-major
 * within each image) where the window's tap equals it. */
static int expand_max_pool2(qir_module *m, qir_op *op, qir_op **out, qir_diag *d) {
  qir_op *clone = first_result_clone(m, op);
  qir_op *c1 = qir_op_to_compute(m, clone, d);
  qir_op_unlink(clone);
  if (!c1 || !c1->comp) return 0;
  const qir_compute *pc = c1->comp;
  const qir_expr *body = pc->body, *guard = NULL, *tap = body;
  if (body->kind == QIR_EX_SELECT) guard = body->args[0], tap = body->args[1];
  const qir_type *x = &op->operands[0]->type, *ti = &op->results[1]->type;
  if (tap->kind != QIR_EX_ACCESS || tap->n_args != x->rank || pc->n_axes != ti->rank) return 0;
  bool col = qir_op_attr_int(op, "storage_order", 0) != 0;
  qir_expr *flat = qir_expr_int(m, 0);
  int64_t stride = 1;
  int order[QIR_MAX_RANK];
  for (int j = 0; j < x->rank; j++) order[j] = x->rank - 1 - j;
  if (col && x->rank >= 4) { order[0] = x->rank - 2; order[1] = x->rank - 1; }   /* h fastest, then w */
  for (int k = 0; k < x->rank; k++) {
    int j = order[k];
    flat = qir_expr_binary(m, QIR_FN_ADD, flat, qir_expr_binary(m, QIR_FN_MUL, tap->args[j], qir_expr_int(m, stride)));
    stride *= x->dims[j];
  }
  qir_value *operands[2] = {op->operands[0], c1->results[0]};
  qir_expr *hit = qir_expr_binary(m, QIR_FN_EQ, (qir_expr *)tap, access_all(m, 1, ti->rank));
  if (guard) hit = qir_expr_binary(m, QIR_FN_AND, (qir_expr *)guard, hit);
  qir_compute *c = qir_compute_new(m, pc->n_axes, pc->n_red);
  for (int v = 0; v < pc->n_axes + pc->n_red; v++) {
    c->axis_names[v] = pc->axis_names[v];
    c->axis_extents[v] = pc->axis_extents[v];
  }
  c->reduce = QIR_REDUCE_MIN;
  c->body = qir_expr_select(m, hit, flat, qir_expr_int(m, INT64_MAX));
  qir_op *c2 = qir_op_new(m, QIR_OP_COMPUTE, 2, operands, 1, ti, op->loc);
  c2->comp = c;
  out[0] = c1;
  out[1] = c2;
  return 2;
}

/* Replaces every named op that has a compute form by its compute op(s), before
 * anything is planned: a #tile plan on a named op moves to its (single) compute. */
static bool expand_named_ops(qir_module *m, qir_region *r, qir_diag *d) {
  bool ok = true;
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    for (int i = 0; i < op->n_regions; i++) ok &= expand_named_ops(m, op->regions[i], d);
    switch (op->code) {
    case QIR_OP_INPUT: case QIR_OP_OUTPUT: case QIR_OP_CONST: case QIR_OP_COMPUTE: case QIR_OP_YIELD:
    case QIR_OP_LOOP: case QIR_OP_IF: case QIR_OP_SPLIT: case QIR_OP_KERNEL: case QIR_OP_RPROGRAM: case QIR_OP_BITCAST: continue;
    case QIR_OP_ATTENTION:
      if (qir_attention_flash_planned(op)) continue;   /* one kernel of its own (lower_attention.c) */
      break;
    case QIR_OP_SLICE:
      if (qir_attention_folds_slice(op)) continue;     /* that kernel reads it in place */
      break;
    case QIR_OP_CONCAT:
      if (qir_attention_folds_concat(op)) continue;    /* that kernel writes it */
      break;
    case QIR_OP_RESHAPE: case QIR_OP_IDENTITY:
      /* a view, except inside a kernel group, whose reads it remaps */
      if (op->results[0]->type.dtype == op->operands[0]->type.dtype && !(r->parent_op && r->parent_op->code == QIR_OP_KERNEL))
        continue;
      break;
    default: break;
    }
    qir_op *chain[64];
    qir_value *results[3] = {NULL, NULL, NULL};
    int errors = d->n_errors, n = 0;
    if (op->n_results == 1) {
      n = qir_op_expand_computes(m, op, chain, 64, d);
      if (n > 0) results[0] = chain[n - 1]->results[0];
    } else if (op->code == QIR_OP_LAYER_NORM && op->n_results == 3) {
      n = expand_layer_norm3(m, op, chain, 64, d);
      if (n > 0) results[0] = chain[2]->results[0], results[1] = chain[3]->results[0], results[2] = chain[4]->results[0];
    } else if (op->code == QIR_OP_MAX_POOL && op->n_results == 2) {
      n = expand_max_pool2(m, op, chain, d);
      if (n > 0) results[0] = chain[0]->results[0], results[1] = chain[1]->results[0];
    } else if (op->code == QIR_OP_TOP_K) {
      n = qir_op_expand_results(m, op, chain, 64, results, d);
    }
    if (d->n_errors > errors) ok = false;
    if (n <= 0) continue;
    for (int i = 0; i < n; i++) {
      qir_op_insert_before(op, chain[i]);
      /* its kernels say what they compute: "transpose: tiled: ..." */
      qir_op_set_attr(m, chain[i], "named", qir_attr_string(m, qir_opinfo_get(op->code)->name), false);
    }
    const qir_attr *tile = qir_op_attr(op, "tile"), *bands = qir_op_attr(op, "tile_bands");
    if (tile && n == 1) qir_op_set_attr(m, chain[0], "tile", tile->val, true);
    if (tile && bands && n == 1) qir_op_set_attr(m, chain[0], "tile_bands", bands->val, true);
    /* the level of a group member's result edge stays on what computes the result */
    const qir_attr *fuse = qir_op_attr(op, "fuse");
    if (fuse && op->n_results == 1) qir_op_set_attr(m, chain[n - 1], "fuse", fuse->val, true);
    for (int i = 0; i < op->n_results && i < 3; i++) qir_value_replace_uses(m, op->results[i], results[i]);
    qir_op_unlink(op);
  }
  return ok;
}

/* ---------------------------------------------------------------- lifetimes */

static int def_start(host *h, qir_value *v) {
  if (v->def) return op_info(h, v->def)->start;
  return op_info(h, v->arg_of->parent_op)->start;
}

/* Position of a use, seen from the region where v is defined: a use inside a
 * nested region keeps v alive until the enclosing op ends. */
static int use_end(host *h, qir_value *v, qir_op *user) {
  qir_region *home = v->def ? v->def->parent : v->arg_of;
  qir_op *u = user;
  bool climbed = false;
  while (u->parent && u->parent != home && u->parent->parent_op) {
    u = u->parent->parent_op;
    climbed = true;
  }
  opinfo *oi = op_info(h, u);
  if (oi->packed_by) oi = op_info(h, oi->packed_by);
  return climbed ? oi->end : oi->start;
}

static void extend(host *h, qir_value *v, int start, int end) {
  qir_value *r = root(h, v);
  vstore *s = &h->vals[r->id];
  if (s->kind != VS_ARENA) return;
  buffer *b = &h->bufs[s->buf];
  if (b->start < 0 || start < b->start) b->start = start;
  if (end > b->end) b->end = end;
}

static void value_lifetime(host *h, qir_value *v) {
  int start = def_start(h, v), end = start;
  for (qir_use *u = v->uses; u; u = u->next) {
    int e = use_end(h, v, u->user);
    if (e > end) end = e;
  }
  if (!v->def) end = op_info(h, v->arg_of->parent_op)->end;   /* region arguments persist across iterations */
  extend(h, v, start, end);
}

static void assign_values(host *h, qir_region *r) {
  for (int i = 0; i < r->n_args; i++) {
    qir_value *a = r->args[i];
    if (h->vals[a->id].kind == VS_NONE) h->vals[a->id] = (vstore){.kind = VS_ARENA, .buf = new_buffer(h, value_bytes(a))};
  }
  for (qir_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_results; i++) {
      qir_value *v = op->results[i];
      if (h->vals[v->id].kind != VS_NONE) continue;   /* alias decided by plan_op */
      if (op->code == QIR_OP_CONST) {
        h->const_bytes = (h->const_bytes + ALIGN - 1) / ALIGN * ALIGN;
        h->vals[v->id] = (vstore){.kind = VS_CONST, .offset = h->const_bytes};
        h->const_bytes += value_bytes(v);
      } else {
        h->vals[v->id] = (vstore){.kind = VS_ARENA, .buf = new_buffer(h, value_bytes(v))};
      }
    }
    for (int i = 0; i < op->n_regions; i++) assign_values(h, op->regions[i]);
  }
}

static void lifetimes(host *h, qir_region *r) {
  for (int i = 0; i < r->n_args; i++) value_lifetime(h, r->args[i]);
  for (qir_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_results; i++) value_lifetime(h, op->results[i]);
    if (op->code == QIR_OP_LOOP) {
      opinfo *oi = op_info(h, op);
      for (int i = 0; i < op->n_operands - 2; i++) {
        h->bufs[oi->tmp[i]].start = oi->start;
        h->bufs[oi->tmp[i]].end = oi->end;
      }
      /* results are written at the end but must not share bytes with the body */
      for (int i = 0; i < op->n_results; i++) extend(h, op->results[i], oi->start, oi->end);
    }
    if (op->code == QIR_OP_IF || op->code == QIR_OP_VERSIONS)
      for (int i = 0; i < op->n_results; i++) extend(h, op->results[i], op_info(h, op)->start, op_info(h, op)->end);
    /* a flash attention reads the sources of the slices it folds: they live until it ran */
    for (int i = 0; op->code == QIR_OP_ATTENTION && i < 3; i++) {
      qir_attention_view view;
      qir_attention_cache cache;
      int at = op_info(h, op)->start;
      if (qir_attention_operand_view(op, i, &view)) extend(h, view.src, at, at);
      if (qir_attention_operand_cache(op, i, &cache)) {   /* and the caches' past and new */
        extend(h, cache.past, at, at);
        extend(h, cache.now, at, at);
      }
    }
    for (int i = 0; i < op->n_regions; i++) lifetimes(h, op->regions[i]);
  }
}

static int by_start(const void *a, const void *b) {
  const buffer *x = *(buffer *const *)a, *y = *(buffer *const *)b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->bytes > y->bytes ? -1 : x->bytes < y->bytes;
}

static int by_offset(const void *a, const void *b) {
  const buffer *x = *(buffer *const *)a, *y = *(buffer *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* First fit by start position: a buffer takes the lowest gap among the buffers
 * still alive. */
static void allocate(host *h) {
  buffer **order = calloc((size_t)h->n_bufs + 1, sizeof *order);
  buffer **live = calloc((size_t)h->n_bufs + 1, sizeof *live);
  int n = 0, n_live = 0;
  for (int i = 0; i < h->n_bufs; i++)
    if (h->bufs[i].start >= 0) order[n++] = &h->bufs[i];
  qsort(order, (size_t)n, sizeof *order, by_start);
  for (int i = 0; i < n; i++) {
    buffer *b = order[i];
    int k = 0;
    for (int j = 0; j < n_live; j++)
      if (live[j]->end >= b->start) live[k++] = live[j];
    n_live = k;
    qsort(live, (size_t)n_live, sizeof *live, by_offset);
    int64_t size = (b->bytes + ALIGN - 1) / ALIGN * ALIGN, at = 0;
    for (int j = 0; j < n_live; j++) {
      if (live[j]->offset - at >= size) break;
      int64_t e = live[j]->offset + (live[j]->bytes + ALIGN - 1) / ALIGN * ALIGN;
      if (e > at) at = e;
    }
    b->offset = at;
    live[n_live++] = b;
    if (at + size > h->arena_bytes) h->arena_bytes = at + size;
    h->tensor_bytes += size;
  }
  free(order);
  free(live);
}

/* ---------------------------------------------------------------- aliasing */

/* Where a kernel parameter's bytes are, once memory is planned: space 1 the
 * arena, 2 the constants, 0 nowhere known (a caller's pointer). */
typedef struct {
  int space;
  int64_t lo, hi;
} byte_range;

static byte_range param_bytes(host *h, const kkernel *k, int i) {
  qir_value *r = root(h, k->args[i]);
  const vstore *s = &h->vals[r->id];
  int64_t n = k->params[i].numel * qir_dtype_size(k->params[i].dtype);
  if (s->kind == VS_ARENA) return (byte_range){1, h->bufs[s->buf].offset, h->bufs[s->buf].offset + n};
  if (s->kind == VS_CONST) return (byte_range){2, s->offset, s->offset + n};
  return (byte_range){0, 0, 0};
}

static bool overlap(byte_range a, byte_range b) { return a.space && a.space == b.space && a.lo < b.hi && b.lo < a.hi; }

static void phases_coherent(dl_node *n) {
  if (!n) return;
  if (n->kind == DN_PHASE && n->k)
    for (int i = 0; i < n->k->n_params; i++) n->k->params[i].nc = false;
  for (int i = 0; i < n->n_items; i++) phases_coherent(n->items[i]);
  phases_coherent(n->body);
  phases_coherent(n->els);
}

/* After memory is planned: a parameter whose bytes overlap another's of the
 * same launch where one of the two is written (a view passed beside its
 * tensor, arena memory reused within one rprogram) is `aliased`: no restrict
 * on it.  nc, the GPU's read-only path, only for bytes nothing writes during
 * the launch: the C kernels of one rprogram's waves are one launch on a GPU,
 * and a device loop's phases too (its GPU kernel is coherent). */
static void mark_aliases(host *h) {
  cg_ctx *cg = &h->cg;
  for (int x = 0; x < cg->n_kernels; x++) {
    kkernel *k = cg->kernels[x];
    for (int i = 0; i < k->n_params; i++) {
      byte_range a = param_bytes(h, k, i);
      for (int j = 0; j < k->n_params && !k->params[i].aliased; j++)   /* two readers of one tensor may both be restrict */
        if (j != i && (k->params[i].written || k->params[j].written) && overlap(a, param_bytes(h, k, j))) k->params[i].aliased = true;
      bool preset = k->rp_sync ? k->params[i].nc : true;   /* an rprogram's: written by no task of the program */
      k->params[i].nc = preset && !k->params[i].written && !k->coherent && !k->params[i].aliased;
    }
  }
  /* the waves of one rprogram (C): what any wave writes is written in the launch */
  for (int x = 0; x < cg->n_kernels; x++) {
    kkernel *k = cg->kernels[x];
    if (!k->rp_sync || !k->chk_group) continue;
    for (int y = 0; y < cg->n_kernels; y++) {
      kkernel *w = cg->kernels[y];
      if (!w->rp_sync || !w->chk_group || w->chk_kernel != k->chk_kernel) continue;
      for (int i = 0; i < k->n_params; i++)
        for (int j = 0; j < w->n_params && k->params[i].nc; j++)
          if (w->params[j].written && overlap(param_bytes(h, k, i), param_bytes(h, w, j))) k->params[i].nc = false;
    }
  }
  for (int i = 0; i < h->n_dl; i++)
    if (h->dl_done[i]) phases_coherent(h->dl[i]->root);
}

/* ---------------------------------------------------------------- printing */

static const char *ptr(host *h, qir_value *v, bool mutable_) {
  qir_value *r = root(h, v);
  vstore *s = &h->vals[r->id];
  const char *t = kdtype_c(v->type.dtype);
  if (h->dev_ptr && h->dev_ptr[r->id]) return qir_sprintf(h->m, "((%s%s *)%s)", mutable_ ? "" : "const ", t, h->dev_ptr[r->id]);
  if (s->kind == VS_CONST) return qir_sprintf(h->m, "((%s%s *)(m->cbuf + %" PRId64 "))", mutable_ ? "" : "const ", t, s->offset);
  if (s->kind == VS_ARENA)
    return qir_sprintf(h->m, "((%s%s *)(m->arena + %" PRId64 "))", mutable_ ? "" : "const ", t, h->bufs[s->buf].offset);
  return "NULL";
}

static const char *buf_ptr(host *h, int buf) { return qir_sprintf(h->m, "(m->arena + %" PRId64 ")", h->bufs[buf].offset); }

static void ind(FILE *o, int n) { fprintf(o, "%*s", 2 * n, ""); }

/* A kernel with bid_remap: the run's tiles, as C over m->dim (the product over
 * its tile axes of ceil(run extent / tile) where the axis is symbolic, else the
 * bound's count; the same counts the kernel's remap reads from q_dims). */
static const char *run_tiles_c(host *h, const kkernel *k) {
  const qir_type *t = &k->args[0]->type;
  const char *text = qir_sprintf(h->m, "INT64_C(1)");
  for (int i = 0; i < k->tile_axes; i++) {
    int d = k->tile_axis[i];
    if (d < t->rank && t->sym[d] && t->sym[d]->kind != QIR_DIM_CONST && k->tile_nb[i] > 1) {
      char e[1024];
      cg_dim_c(t->sym[d], "m->dim", e, sizeof e);
      text = qir_sprintf(h->m, "%s * ((%s + %" PRId64 ") / %" PRId64 ")", text, e, k->tile_block[i] - 1, k->tile_block[i]);
    } else {
      text = qir_sprintf(h->m, "%s * %" PRId64, text, k->tile_nb[i]);
    }
  }
  return text;
}

static void launch(host *h, FILE *o, kkernel *k, int level) {
  if (k->grid == 0) return;
  const char **argv = qir_alloc(h->m, sizeof *argv * (size_t)k->n_params);
  for (int i = 0; i < k->n_params; i++) argv[i] = ptr(h, k->args[i], k->params[i].written || k->coherent || k->params[i].aliased);
  char pad[64];
  snprintf(pad, sizeof pad, "%*s", 2 * level, "");
  /* the run's blocks (not in qir_run_stream, which a symbolic module refuses) */
  if (k->bid_remap && !k->chk) {
    k->grid_text = h->stream_mode || h->dev_ptr ? qir_sprintf(h->m, "%" PRId64, k->grid) : run_tiles_c(h, k);
  } else if (k->rows && !k->chk) {
    char e[1024];
    cg_dim_c(k->rows, "m->dim", e, sizeof e);
    k->grid_text = h->stream_mode || h->dev_ptr ? qir_sprintf(h->m, "%" PRId64, k->grid)
                                                  : qir_sprintf(h->m, "q_blocks(%s, %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ")", e,
                                                                k->rows_num, k->rows_den, k->rows_mul, k->grid);
  }
  h->pr->launch(o, k, argv, pad);
  k->grid_text = NULL;
}

static void emit_region(host *h, FILE *o, qir_region *r, int level);

/* An op's kernels; with #tile_bands, the kernel planned for the run's size,
 * picked by its points. */
static void launch_op(host *h, FILE *o, opinfo *oi, int level) {
  if (oi->n_bands && oi->n_kernels == 1 && !h->dev_ptr && !h->stream_mode) {
    char e[2048] = "";
    const qir_type *rt = &oi->op->results[0]->type;
    for (int d = 0; d < rt->rank; d++)
      if (rt->sym[d]) {
        char x[1024];
        cg_dim_c(rt->sym[d], "m->dim", x, sizeof x);
        size_t at = strlen(e);
        snprintf(e + at, sizeof e - at, "%s%s", at ? " * " : "", x);
      }
    for (int b = 0; b < oi->n_bands; b++) {
      ind(o, level);
      fprintf(o, "%sif (%s <= %lld) {\n", b ? "} else " : "", e, (long long)oi->band_points[b]);
      launch(h, o, oi->band_k[b], level + 1);
    }
    ind(o, level);
    fputs("} else {\n", o);
    launch(h, o, oi->kernels[0], level + 1);
    ind(o, level);
    fputs("}\n", o);
    return;
  }
  for (int k = 0; k < oi->n_kernels; k++) launch(h, o, oi->kernels[k], level);
}

static void copy(FILE *o, const char *dst, const char *src, int64_t bytes, int level) {
  if (!bytes) return;
  ind(o, level);
  fprintf(o, "QCHECK(q_d2d(%s, %s, %" PRId64 "));\n", dst, src, bytes);
}

/* The device program of op (a realised outermost device-level loop/if), or NULL. */
static cg_dloop *dloop_of(host *h, const qir_op *op) {
  for (int i = 0; i < h->n_dl; i++)
    if (h->dl[i]->op == op) return h->dl_done[i] ? h->dl[i] : NULL;
  return NULL;
}

/* Where a #device plan of level grid or block runs host-driven (a GPU
 * whose blocks are not co-resident, or a plan qcodegen cannot realise),
 * the generated code says so: the values are the same. */
static void device_plan_note(host *h, FILE *o, const qir_op *op, int level) {
  qir_device_plan p;
  if (!qir_device_plan_get(op, &p, NULL) || p.level == QIR_LEVEL_HOST) return;
  const char *why = "its blocks are not co-resident on this device";
  for (int i = 0; i < h->n_dl; i++)
    if (h->dl[i]->op == op && !h->dl_done[i]) why = h->dl[i]->why ? h->dl[i]->why : "not realised";
  ind(o, level);
  fprintf(o, "/* #device level %s (%lld x %lld threads, %lld stages) planned; run host-driven: %s */\n", qir_level_name(p.level),
          (long long)p.grid, (long long)p.threads, (long long)p.stages, why);
}

/* "file:line:col" of an op, for run-time messages (no quotes or backslashes). */
static const char *loc_text(host *h, const qir_op *op) {
  const char *f = op->loc.file ? op->loc.file : h->m->name ? h->m->name : "module";
  char *s = (char *)qir_sprintf(h->m, "%s:%d:%d", f, op->loc.line, op->loc.col);
  for (char *p = s; *p; p++)
    if (*p == '"' || *p == '\\' || *p == '%' || (unsigned char)*p < ' ') *p = '_';
  return s;
}

/* After loop `id` ran it<id> iterations: a scan output of static extent must
 * have got every row (else the run fails, as in qrun); a bounded one (`<=N`)
 * reports its rows through qir_output_rows for every output that takes it. */
static void emit_scan_rows(host *h, FILE *o, qir_op *op, int id, int level) {
  int n_carried = op->n_operands - 2;
  for (int j = n_carried; j < op->n_results; j++) {
    qir_value *res = op->results[j];
    int64_t extent = res->type.rank ? res->type.dims[0] : 1;
    if (!res->type.bounded) {
      ind(o, level);
      fprintf(o, "if (it%d != %" PRId64 ") { fprintf(stderr, \"qir_run: %s: 'loop' ran %%lld iterations but scan output %d "
                 "has static extent %" PRId64 "\\n\", (long long)it%d); return 1; }\n",
              id, extent, loc_text(h, op), j - n_carried, extent, id);
      continue;
    }
    for (int i = 0; i < h->n_outputs; i++)
      if (h->outputs[i]->operands[0] == res) {
        ind(o, level);
        fprintf(o, "m->out_rows[%d] = it%d;\n", i, id);
      }
  }
}

/* In qir_run_stream: a construct that must read device memory back (or
 * block) makes the whole run not stream-ordered. */
static void needs_host(host *h, const qir_op *op, const char *what) {
  if (h->stream_mode && !h->not_stream) h->not_stream = qir_sprintf(h->m, "%s at %s %s", op_name(op), loc_text(h, op), what);
}

static void emit_loop(host *h, FILE *o, qir_op *op, int level) {
  needs_host(h, op, "runs host-driven: it reads its trip count and condition back");
  opinfo *oi = op_info(h, op);
  qir_region *body = op->regions[0];
  int id = h->counter++, n_carried = op->n_operands - 2;
  qir_op *yield = body->last;
  ind(o, level);
  fprintf(o, "{ /* loop: trip count and condition read back, body launched per iteration */\n");
  device_plan_note(h, o, op, level + 1);
  ind(o, level + 1);
  fprintf(o, "int64_t trip%d; uint8_t cond%d;\n", id, id);
  ind(o, level + 1);
  fprintf(o, "QCHECK(q_d2h(&trip%d, %s, 8));\n", id, ptr(h, op->operands[0], false));
  ind(o, level + 1);
  fprintf(o, "QCHECK(q_d2h(&cond%d, %s, 1));\n", id, ptr(h, op->operands[1], false));
  for (int i = 0; i < n_carried; i++)
    copy(o, ptr(h, body->args[2 + i], true), ptr(h, op->operands[2 + i], false), value_bytes(op->operands[2 + i]), level + 1);
  ind(o, level + 1);
  fprintf(o, "int64_t it%d = 0;\n", id);
  ind(o, level + 1);
  fprintf(o, "for (; it%d < trip%d && cond%d; it%d++) {\n", id, id, id, id);
  if (body->n_args > 0 && body->args[0]->uses) {
    ind(o, level + 2);
    fprintf(o, "QCHECK(q_h2d(%s, &it%d, 8));\n", ptr(h, body->args[0], true), id);
  }
  if (body->n_args > 1 && body->args[1]->uses) {
    ind(o, level + 2);
    fprintf(o, "QCHECK(q_h2d(%s, &cond%d, 1));\n", ptr(h, body->args[1], true), id);
  }
  emit_region(h, o, body, level + 2);
  if (yield && yield->code == QIR_OP_YIELD) {
    ind(o, level + 2);
    fprintf(o, "QCHECK(q_d2h(&cond%d, %s, 1));\n", id, ptr(h, yield->operands[0], false));
    /* scan outputs first: they may read a carried value before its update */
    for (int j = n_carried; j < op->n_results && 1 + j < yield->n_operands; j++) {
      qir_value *res = op->results[j], *y = yield->operands[1 + j];
      int64_t extent = res->type.rank ? res->type.dims[0] : 1;
      /* more rows than the memory holds: an error, as in qrun (never a silent drop) */
      ind(o, level + 2);
      fprintf(o, "if (it%d >= %" PRId64 ") { fprintf(stderr, \"qir_run: %s: 'loop' runs more than %" PRId64
                 " iterations, the %s extent of scan output %d\\n\"); return 1; }\n",
              id, extent, loc_text(h, op), extent, res->type.bounded ? "bounded" : "static", j - n_carried);
      ind(o, level + 2);
      fprintf(o, "QCHECK(q_d2d((unsigned char *)%s + it%d * %" PRId64 ", %s, %" PRId64 "));\n", ptr(h, res, true), id,
              value_bytes(y), ptr(h, y, false), value_bytes(y));
    }
    /* carried values through temporaries: a yield may swap two arguments */
    for (int i = 0; i < n_carried && 1 + i < yield->n_operands; i++)
      copy(o, buf_ptr(h, oi->tmp[i]), ptr(h, yield->operands[1 + i], false), value_bytes(yield->operands[1 + i]), level + 2);
    for (int i = 0; i < n_carried; i++)
      copy(o, ptr(h, body->args[2 + i], true), buf_ptr(h, oi->tmp[i]), value_bytes(body->args[2 + i]), level + 2);
  }
  ind(o, level + 1);
  fputs("}\n", o);
  emit_scan_rows(h, o, op, id, level + 1);
  for (int i = 0; i < n_carried && i < op->n_results; i++)
    copy(o, ptr(h, op->results[i], true), ptr(h, body->args[2 + i], false), value_bytes(op->results[i]), level + 1);
  ind(o, level);
  fputs("}\n", o);
}

static void emit_if(host *h, FILE *o, qir_op *op, int level) {
  needs_host(h, op, "runs host-driven: it reads its condition back");
  int id = h->counter++;
  ind(o, level);
  fprintf(o, "{ /* if: condition read back */\n");
  device_plan_note(h, o, op, level + 1);
  ind(o, level + 1);
  fprintf(o, "uint8_t cond%d;\n", id);
  ind(o, level + 1);
  fprintf(o, "QCHECK(q_d2h(&cond%d, %s, 1));\n", id, ptr(h, op->operands[0], false));
  for (int br = 0; br < 2; br++) {
    ind(o, level + 1);
    fputs(br ? "} else {\n" : "if (cond", o);
    if (!br) fprintf(o, "%d) {\n", id);
    qir_region *r = op->regions[br];
    emit_region(h, o, r, level + 2);
    qir_op *y = r->last;
    if (y && y->code == QIR_OP_YIELD)
      for (int i = 0; i < op->n_results && i < y->n_operands; i++)
        copy(o, ptr(h, op->results[i], true), ptr(h, y->operands[i], false), value_bytes(op->results[i]), level + 2);
  }
  ind(o, level + 1);
  fputs("}\n", o);
  ind(o, level);
  fputs("}\n", o);
}

/* A copy of v's run from src to dst (same bounds: the buffer; else the run's
 * elements, q_relayout). */
static void copy_run(host *h, FILE *o, qir_value *dst, qir_value *src, int level) {
  bool same = dst->type.rank == src->type.rank;
  for (int a = 0; same && a < dst->type.rank; a++) same = dst->type.dims[a] == src->type.dims[a];
  if (same) copy(o, ptr(h, dst, true), ptr(h, src, false), value_bytes(dst), level);
  else cg_symbolic_relayout(o, &dst->type, ptr(h, dst, true), &src->type, ptr(h, src, false), level);
}

/* versions: the first plan whose symbols' ranges hold the run's extents
 * (each plan's symbols were bound with those they stand for, q_bind_dims). */
static void emit_versions(host *h, FILE *o, qir_op *op, int level) {
  int *outer_of = qir_alloc(h->m, sizeof *outer_of * (size_t)(h->m->n_syms + 1));
  int64_t *fixed = qir_alloc(h->m, sizeof *fixed * (size_t)(h->m->n_syms + 1));
  ind(o, level);
  fprintf(o, "{ /* versions: %d plans, the first whose ranges hold this run */\n", op->n_regions);
  for (int r = 0; r < op->n_regions; r++) {
    qir_region *reg = op->regions[r];
    char why[256], cond[2048] = "";
    if (!qir_versions_region_syms(h->m, op, r, outer_of, fixed, why, sizeof why)) continue;   /* the verifier said so */
    size_t at = 0;
    for (int k = 0; k < h->m->n_syms; k++) {
      if (outer_of[k] >= 0 && at < sizeof cond)
        at += (size_t)snprintf(cond + at, sizeof cond - at, "%sm->dim[%d] <= %lld", at ? " && " : "", outer_of[k], (long long)h->m->syms[k].hi);
      if (fixed[k] != QIR_VERSION_FREE && at < sizeof cond)
        at += (size_t)snprintf(cond + at, sizeof cond - at, "%sm->dim[%d] == %lld", at ? " && " : "", k, (long long)fixed[k]);
    }
    ind(o, level + 1);
    if (r + 1 < op->n_regions || r == 0) fprintf(o, "%sif (%s) {   /* plan %d */\n", r ? "} else " : "", *cond ? cond : "1", r);
    else fprintf(o, "} else {   /* plan %d: every run */\n", r);
    for (int i = 0; i < reg->n_args && i < op->n_operands; i++)
      if (h->vals[reg->args[i]->id].kind != VS_ALIAS && reg->args[i]->uses) copy_run(h, o, reg->args[i], op->operands[i], level + 2);
    emit_region(h, o, reg, level + 2);
    qir_op *y = reg->last;
    for (int i = 0; y && y->code == QIR_OP_YIELD && i < op->n_results && i < y->n_operands; i++)
      copy_run(h, o, op->results[i], y->operands[i], level + 2);
  }
  ind(o, level + 1);
  fputs("}\n", o);
  ind(o, level);
  fputs("}\n", o);
}

/* C: a device program's phases, loops and ifs decided from ctl as every
 * block decides them after a barrier. */
static void emit_dnode(host *h, FILE *o, const cg_dloop *dl, const dl_node *n, int level) {
  switch (n->kind) {
  case DN_SEQ:
    for (int i = 0; i < n->n_items; i++) emit_dnode(h, o, dl, n->items[i], level);
    return;
  case DN_PHASE: launch(h, o, n->k, level); return;
  case DN_LOOP:
    ind(o, level);
    fprintf(o, "for (;;) {\n");
    ind(o, level + 1);
    fprintf(o, "QCHECK(q_d2h(q_ctl%d, %s, %" PRId64 "));   /* as every block reads it: no round trip on a GPU */\n", dl->id,
            ptr(h, dl->ctl, false), dl->ctl_size * 8);
    ind(o, level + 1);
    fprintf(o, "if (!(q_ctl%d[%" PRId64 "] < q_ctl%d[%" PRId64 "] && q_ctl%d[%" PRId64 "] && !q_ctl%d[0])) break;\n", dl->id, n->slot, dl->id,
            n->slot + 1, dl->id, n->slot + 2, dl->id);
    emit_dnode(h, o, dl, n->body, level + 1);
    ind(o, level);
    fputs("}\n", o);
    return;
  case DN_IF: {
    ind(o, level);
    fputs("{\n", o);
    ind(o, level + 1);
    fprintf(o, "uint8_t q_c;\n");
    ind(o, level + 1);
    fprintf(o, "QCHECK(q_d2h(&q_c, %s, 1));   /* as every block reads it: no round trip on a GPU */\n", ptr(h, n->cond, false));
    ind(o, level + 1);
    fputs("if (q_c) {\n", o);
    emit_dnode(h, o, dl, n->body, level + 2);
    ind(o, level + 1);
    fputs("} else {\n", o);
    emit_dnode(h, o, dl, n->els, level + 2);
    ind(o, level + 1);
    fputs("}\n", o);
    ind(o, level);
    fputs("}\n", o);
    return;
  }
  }
}

static void emit_loop(host *h, FILE *o, qir_op *op, int level);
static void emit_if(host *h, FILE *o, qir_op *op, int level);

/* A device-resident loop/if: CUDA/HIP launch its persistent kernel where
 * qir_init found its blocks co-resident (else the host drives it as
 * without a plan); C runs its phases.  ctl comes back to the host only for
 * the rows of bounded scan outputs and the errors the program can raise. */
static void emit_dloop(host *h, FILE *o, cg_dloop *dl, int level) {
  qir_op *op = dl->op;
  int d = 0;
  while (h->dl[d] != dl) d++;
  bool gpu = h->cg.backend != CG_C;
  bool rows = false;
  if (op->code == QIR_OP_LOOP)
    for (int j = op->n_operands - 2; j < op->n_results; j++) rows |= op->results[j]->type.bounded;
  if (dl->n_errors || rows) needs_host(h, op, "reads its error code or row count back after its device program");
  /* GPU: the host-driven form runs where qir_init found the blocks not
   * co-resident, or where the cooperative launch finds the device full */
  const char *fallback = gpu ? qir_sprintf(h->m, "q_dl_fallback%d", dl->id) : NULL;
  ind(o, level);
  fputs("{\n", o);
  if (gpu) {
    level++;
    ind(o, level);
    fprintf(o, "int %s = !m->dl_ok[%d];\n", fallback, d);
    ind(o, level);
    fprintf(o, "if (!%s) {\n", fallback);
    if (dl->kernel->cooperative) dl->kernel->coop_fallback = fallback;
  }
  ind(o, level + 1);
  fprintf(o, "/* %s: device-resident (#device level %s, %lld x %d threads): %s */\n", op->code == QIR_OP_LOOP ? "loop" : "if",
          dl->block_level ? "block" : "grid", (long long)dl->grid, dl->threads,
          gpu ? (dl->block_level ? "one block runs it, __syncthreads between phases" : "one cooperative launch, grid barriers between phases")
              : "its phases, each a launch of its blocks (a grid barrier between two)");
  ind(o, level + 1);
  fprintf(o, "int64_t q_ctl%d[%" PRId64 "];\n", dl->id, dl->ctl_size);
  if (gpu) launch(h, o, dl->kernel, level + 1);
  else emit_dnode(h, o, dl, dl->root, level + 1);
  if (dl->n_errors || rows) {
    if (gpu) {
      ind(o, level + 1);
      fprintf(o, "if (!%s) {\n", fallback);
      level++;
    }
    ind(o, level + 1);
    fprintf(o, "QCHECK(q_d2h(q_ctl%d, %s, %" PRId64 "));\n", dl->id, ptr(h, dl->ctl, false), dl->ctl_size * 8);
    for (int e = 0; e < dl->n_errors; e++) {
      ind(o, level + 1);
      if (strstr(dl->errors[e], "%lld"))
        fprintf(o, "if (q_ctl%d[0] == %d) { fprintf(stderr, \"%s\", (long long)q_ctl%d[1]); return 1; }\n", dl->id, e + 1, dl->errors[e],
                dl->id);
      else
        fprintf(o, "if (q_ctl%d[0] == %d) { fputs(\"%s\", stderr); return 1; }\n", dl->id, e + 1, dl->errors[e]);
    }
    if (rows) {
      int id = h->counter++;
      ind(o, level + 1);
      fprintf(o, "int64_t it%d = q_ctl%d[2];\n", id, dl->id);
      int n_carried = op->n_operands - 2;
      for (int j = n_carried; j < op->n_results; j++)
        for (int i = 0; i < h->n_outputs && op->results[j]->type.bounded; i++)
          if (h->outputs[i]->operands[0] == op->results[j]) {
            ind(o, level + 1);
            fprintf(o, "m->out_rows[%d] = it%d;\n", i, id);
          }
    }
    if (gpu) {
      level--;
      ind(o, level + 1);
      fputs("}\n", o);
    }
  } else {
    ind(o, level + 1);
    fprintf(o, "(void)q_ctl%d;\n", dl->id);
  }
  ind(o, level);
  fputs("}\n", o);
  if (!gpu) return;
  ind(o, level);
  fprintf(o, "if (%s) {\n", fallback);
  if (h->stream_mode) {   /* the host-driven form reads back: not in a stream-ordered run */
    ind(o, level + 1);
    fprintf(o, "fputs(\"qir_run_stream: %s %s cannot run device-resident on this device now (its blocks are not co-resident), "
               "and its host-driven form is not stream-ordered\\n\", stderr);\n",
            op_name(op), loc_text(h, op));
    ind(o, level + 1);
    fputs("return 1;\n", o);
  } else {
    for (int i = 0; i < dl->n_pre; i++) {
      opinfo *oi = op_info(h, dl->pre[i]);
      for (int k = 0; k < oi->n_kernels; k++) launch(h, o, oi->kernels[k], level + 1);
    }
    if (op->code == QIR_OP_LOOP) emit_loop(h, o, op, level + 1);
    else emit_if(h, o, op, level + 1);
    for (int i = 0; i < dl->n_post; i++) {
      opinfo *oi = op_info(h, dl->post[i]);
      for (int k = 0; k < oi->n_kernels; k++) launch(h, o, oi->kernels[k], level + 1);
    }
  }
  ind(o, level);
  fputs("}\n", o);
  level--;
  ind(o, level);
  fputs("}\n", o);
}

/* An rprogram: one persistent kernel, launched cooperatively (its blocks
 * wait for each other, so all must be resident at once); where qir_init
 * found they do not fit, or the launch finds the device cannot hold them now
 * (other work resident, MPS), its kernels launch separately, in the order of
 * their first tasks in the waves (the verifier proved every consumer's tasks
 * ordered after all of its producers', so that order respects every
 * dependence).  C runs the waves always, one kernel each, and counts the
 * launch after the last (the GPU kernel's last block does that). */
/* The kernels of rprogram op (read into p) launched one by one, in wave order. */
static void launch_members(host *h, FILE *o, qir_op *op, const qir_rprogram *p, int level) {
  bool *done = qir_alloc(h->m, sizeof *done * (size_t)(p->n_kernels + 1));
  memset(done, 0, sizeof *done * (size_t)(p->n_kernels + 1));
  for (int w = 0; w < p->n_waves; w++)
    for (int i = 0; i < p->waves[w].n_runs; i++) {
      int k = p->waves[w].runs[i].kernel;
      if (done[k] || p->waves[w].runs[i].task_hi == p->waves[w].runs[i].task_lo) continue;
      done[k] = true;
      launch_op(h, o, op_info(h, op->operands[k]->def), level);
    }
}

static void emit_packed(host *h, FILE *o, qir_op *op, const qir_rprogram *prog, int level);

/* An rprogram; where -rammer wrote #unpacked_upto, a run that small launches
 * its members one by one instead (on their plans for smaller runs). */
static void emit_rprogram(host *h, FILE *o, qir_op *op, int level) {
  qir_rprogram p;
  if (!qir_rprogram_read(h->m, op, &p, h->d)) {
    h->failed = true;
    return;
  }
  const qir_attr *upto = qir_op_attr(op, "unpacked_upto");
  if (!upto || h->dev_ptr || h->stream_mode) {
    emit_packed(h, o, op, &p, level);
    return;
  }
  ind(o, level);
  fputs("if (", o);
  for (int k = 0; k < upto->val.n; k++) fprintf(o, "%sm->dim[%d] <= %lld", k ? " && " : "", k, (long long)upto->val.items[k].i);
  fprintf(o, ") {   /* #unpacked_upto: the %d kernels' own launches */\n", p.n_kernels);
  launch_members(h, o, op, &p, level + 1);
  ind(o, level);
  fputs("} else {\n", o);
  emit_packed(h, o, op, &p, level + 1);
  ind(o, level);
  fputs("}\n", o);
}

static void emit_packed(host *h, FILE *o, qir_op *op, const qir_rprogram *prog, int level) {
  qir_rprogram p = *prog;
  int r = 0;
  while (r < h->n_rp && h->rp_ops[r] != op) r++;
  bool packed = r < h->n_rp && h->rp_n[r];
  if (packed && h->cg.backend == CG_C) {
    ind(o, level);
    fprintf(o, "/* rprogram: %d kernels, %d waves on %lld vEUs, one kernel per wave */\n", p.n_kernels, p.n_waves, (long long)p.veus);
    for (int k = 0; k < h->rp_n[r]; k++) launch(h, o, h->rp_kernels[r][k], level);
    ind(o, level);
    fprintf(o, "%s[%d]++;   /* launches finished */\n", ptr(h, h->rp_sync[r], true), RP_SYNC_DONE_LAUNCHES);
    return;
  }
  if (packed) {
    const char *fallback = qir_sprintf(h->m, "q_rp_fallback%d", h->counter++);
    ind(o, level);
    fprintf(o, "{ /* rprogram: %d kernels, %d waves on %lld vEUs, one cooperative launch */\n", p.n_kernels, p.n_waves, (long long)p.veus);
    ind(o, level + 1);
    fprintf(o, "int %s = !m->rp_ok[%d];\n", fallback, r);
    ind(o, level + 1);
    fprintf(o, "if (!%s) {\n", fallback);
    for (int k = 0; k < h->rp_n[r]; k++) {
      h->rp_kernels[r][k]->coop_fallback = fallback;
      launch(h, o, h->rp_kernels[r][k], level + 2);
    }
    ind(o, level + 1);
    fputs("}\n", o);
    ind(o, level + 1);
    fprintf(o, "if (%s) {\n", fallback);
    level += 2;
  }
  ind(o, level);
  fprintf(o, "/* rprogram: %d kernels, %d waves on %lld vEUs; launched separately in wave order */\n", p.n_kernels, p.n_waves,
          (long long)p.veus);
  launch_members(h, o, op, &p, level);
  if (packed) {
    ind(o, level - 1);
    fputs("}\n", o);
    ind(o, level - 2);
    fputs("}\n", o);
  }
}

/* A packed Welder group's plan: composing a group into one compute (a row
 * group) may leave the compute without the group's #tile, which the
 * rprogram reads its tasks and resources from. */
typedef struct {
  qir_op *rp;
  int operand;
  qir_attr_val tile;
} packed_group;

typedef struct {
  qir_module *m;
  int n, cap;
  packed_group *at;
} packed_groups;

static bool note_packed_group(qir_op *op, void *vctx) {
  packed_groups *g = vctx;
  if (op->code != QIR_OP_RPROGRAM) return true;
  for (int i = 0; i < op->n_operands; i++) {
    const qir_op *k = op->operands[i] ? op->operands[i]->def : NULL;
    const qir_attr *tile = k && k->code == QIR_OP_KERNEL ? qir_op_attr(k, "tile") : NULL;
    if (!tile) continue;
    if (g->n == g->cap) {
      g->cap = g->cap ? 2 * g->cap : 16;
      packed_group *at = qir_alloc(g->m, sizeof *at * (size_t)g->cap);
      if (g->n) memcpy(at, g->at, sizeof *at * (size_t)g->n);
      g->at = at;
    }
    g->at[g->n++] = (packed_group){.rp = op, .operand = i, .tile = tile->val};
  }
  return true;
}

/* The rprogram's check, its first message kept for a warning (NULL: it holds). */
static const char *rprogram_broken(host *h, qir_op *op) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return "out of memory";
  qir_diag scratch;
  qir_diag_init(&scratch, f, h->d->file, NULL, 0);
  qir_rprogram p;
  bool ok = qir_rprogram_read(h->m, op, &p, &scratch) && !qir_rprogram_check(h->m, &p, &scratch);
  fclose(f);
  const char *why = NULL;
  if (!ok) {
    char *nl = text ? strchr(text, '\n') : NULL;
    if (nl) *nl = 0;
    const char *e = text ? strstr(text, "error: ") : NULL;
    why = qir_strdup(h->m, e ? e + 7 : text ? text : "it does not check");
  }
  free(text);
  return why;
}

/* After cg_compose_groups: a packed group that did not compose into one
 * kernel (it runs as its ops) leaves its rprogram naming something else;
 * such an rprogram is dropped with a warning and its kernels launch one by
 * one where they stand (program order, which the rprogram only reorders). */
static void unpack_broken_rprograms(host *h, const packed_groups *g, qir_region *r) {
  for (int i = 0; i < g->n; i++) {
    const packed_group *x = &g->at[i];
    if (!x->rp->parent || x->operand >= x->rp->n_operands) continue;
    qir_op *def = x->rp->operands[x->operand] ? x->rp->operands[x->operand]->def : NULL;
    if (def && def->code == QIR_OP_COMPUTE && cg_group_of(&h->cg, def) && !qir_op_attr(def, "tile"))
      qir_op_set_attr(h->m, def, "tile", x->tile, true);
  }
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    for (int i = 0; i < op->n_regions; i++) unpack_broken_rprograms(h, g, op->regions[i]);
    if (op->code != QIR_OP_RPROGRAM) continue;
    const char *why = rprogram_broken(h, op);
    if (!why) continue;
    qir_diag_report(h->d, QIR_SEV_WARNING, op->loc, "qcodegen: this rprogram runs as separate launches: once its kernel groups are composed, %s", why);
    qir_op_unlink(op);
  }
}

/* After expand_named_ops: every rprogram still names kernels with plans
 * (a named op that became several computes no longer does), and each
 * packed kernel is one launch of its plan's grid; else the rprogram is
 * dropped with a warning and its kernels launch one by one where they stand. */
static bool bind_rprograms(host *h, qir_region *r) {
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    for (int i = 0; i < op->n_regions; i++)
      if (!bind_rprograms(h, op->regions[i])) return false;
    if (op->code != QIR_OP_RPROGRAM) continue;
    qir_rprogram p;
    if (!qir_rprogram_read(h->m, op, &p, h->d) || qir_rprogram_check(h->m, &p, h->d)) {
      qir_error(h->d, op->loc, "qcodegen: this rprogram no longer holds once named ops are expanded into computes");
      return false;
    }
    kkernel **members = qir_alloc(h->m, sizeof *members * (size_t)(p.n_kernels + 1));
    const char *mismatch = NULL;
    for (int k = 0; k < p.n_kernels && !mismatch; k++) {
      opinfo *ki = op_info(h, op->operands[k]->def);
      if (ki->n_kernels != 1 || ki->kernels[0]->grid != p.kernels[k].tasks)
        mismatch = qir_sprintf(h->m, "kernel %d becomes %d kernel(s) of %lld blocks, but the program runs %lld tasks of it", k,
                               ki->n_kernels, ki->n_kernels ? (long long)ki->kernels[0]->grid : 0LL, (long long)p.kernels[k].tasks);
      else members[k] = ki->kernels[0];
      /* a composed group (staged, rows) runs with its composer's threads and
       * shared memory: the plan the program was packed for must hold them */
      const cg_group *cgg = mismatch ? NULL : cg_group_of(&h->cg, op->operands[k]->def);
      const qir_attr *plan = qir_op_attr(op->operands[k]->def, "tile");
      bool says_smem = plan && plan->val.kind == QIR_ATTR_DICT && qir_attr_dict_get(&plan->val, "smem");
      /* a row group's plan is a warp of its target per row: the back end's warp may be wider */
      int64_t rows_per_block = cgg && cgg->rows ? members[k]->threads / h->cg.warp : 0;
      bool one_warp = rows_per_block > 0 && (p.kernels[k].threads == rows_per_block * 32 || p.kernels[k].threads == rows_per_block * 64);
      const qir_attr_val *composer = plan && plan->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&plan->val, "composer") : NULL;
      const char *want = composer && (composer->kind == QIR_ATTR_WORD || composer->kind == QIR_ATTR_STRING) ? composer->s : NULL;
      if (!mismatch && want && !(cgg && ((!strcmp(want, "staged") && cgg->stages) || (!strcmp(want, "rows") && cgg->rows))))
        mismatch = qir_sprintf(h->m, "kernel %d's plan is for the %s composer, but it composes otherwise", k, want);
      else if (cgg && (cgg->stages || cgg->rows) &&
          ((members[k]->threads != p.kernels[k].threads && !one_warp) || (says_smem && members[k]->smem_bytes > p.kernels[k].smem)))
        mismatch = qir_sprintf(h->m, "kernel %d composes to %d threads and %lld bytes of shared memory per block, but its plan says %lld and %lld",
                               k, members[k]->threads, (long long)members[k]->smem_bytes, (long long)p.kernels[k].threads,
                               (long long)p.kernels[k].smem);
    }
    if (mismatch) {
      qir_diag_report(h->d, QIR_SEV_WARNING, op->loc, "qcodegen: this rprogram runs as separate launches: %s", mismatch);
      qir_op_unlink(op);
      continue;
    }
    for (int k = 0; k < p.n_kernels; k++) op_info(h, op->operands[k]->def)->packed_by = op;
    int r = 0;
    while (r < h->n_rp && h->rp_ops[r] != op) r++;
    if (r == h->n_rp) continue;
    const char *why = NULL;
    h->rp_kernels[r] = qir_alloc(h->m, sizeof(kkernel *) * (size_t)(p.n_waves + 1));
    cg_storage storage = {.root = storage_root, .ctx = h};
    h->rp_n[r] = lower_rprogram(&h->cg, &p, members, h->rp_sync[r], &storage, h->rp_kernels[r], &why);
    if (h->rp_n[r] && h->cg.backend == CG_C && !qir_op_attr(op, "unpacked_upto"))   /* else small runs launch them */
      for (int k = 0; k < p.n_kernels; k++) members[k]->unprinted = true;
    if (!h->rp_n[r] && why)
      qir_diag_report(h->d, QIR_SEV_WARNING, op->loc, "qcodegen: this rprogram runs as separate launches: %s", why);
  }
  return true;
}

/* Before values are numbered for storage: one sync tensor per rprogram. */
static bool collect_rprogram(qir_op *op, void *vctx) {
  host *h = vctx;
  if (op->code != QIR_OP_RPROGRAM) return true;
  qir_rprogram p;
  if (!qir_rprogram_read(h->m, op, &p, h->d) || qir_rprogram_check(h->m, &p, h->d)) return true;   /* reported again by bind_rprograms */
  int64_t n = lower_rprogram_sync_size(&p);
  h->rp_ops[h->n_rp] = op;
  h->rp_sync[h->n_rp] = qir_value_new(h->m, qir_type_make(QIR_U64, 1, &n), qir_sprintf(h->m, "rprogram%d_sync", h->n_rp));
  h->n_rp++;
  return true;
}

/* The outermost device-level loops/ifs of r (a host-driven op's body counts). */
static void prepare_dloops(host *h, qir_region *r) {
  for (qir_op *op = r->first; op; op = op->next) {
    if (op->code != QIR_OP_LOOP && op->code != QIR_OP_IF) continue;
    cg_dloop *dl = cg_dloop_prepare(&h->cg, op, h->n_dl);
    if (dl) {
      cg_dloop **all = qir_alloc(h->m, sizeof *all * (size_t)(h->n_dl + 1));
      if (h->n_dl) memcpy(all, h->dl, sizeof *all * (size_t)h->n_dl);
      all[h->n_dl++] = dl;
      h->dl = all;
      continue;
    }
    for (int i = 0; i < op->n_regions; i++) prepare_dloops(h, op->regions[i]);
  }
}

/* Can op's kernels be phases of a device program of `threads` threads? */
static bool absorbable(host *h, qir_op *op, int threads) {
  if (op->n_regions || op->code == QIR_OP_INPUT || op->code == QIR_OP_OUTPUT || op->code == QIR_OP_RPROGRAM) return false;
  opinfo *oi = op_info(h, op);
  if (!oi || oi->packed_by || oi->absorbed_by) return false;
  for (int k = 0; k < oi->n_kernels; k++)
    if (oi->kernels[k]->threads > threads || lower_run_unfit(h->m, oi->kernels[k], threads, h->cg.warp)) return false;
  return true;
}

/* The kernel ops right before and after a device-resident op (skipping ops
 * without kernels) become its first and last phases. */
static void absorb_neighbours(host *h, cg_dloop *dl) {
  int cap = 0;
  for (qir_op *o = dl->op->parent->first; o; o = o->next) cap++;
  const qir_op **pre = qir_alloc(h->m, sizeof *pre * (size_t)(cap + 1)), **post = qir_alloc(h->m, sizeof *post * (size_t)(cap + 1));
  int n_pre = 0, n_post = 0;
  qir_op *first = dl->op;
  for (qir_op *o = dl->op->prev; o && absorbable(h, o, dl->threads); o = o->prev) first = o;
  for (qir_op *o = first; o != dl->op; o = o->next)
    if (op_info(h, o)->n_kernels) {
      op_info(h, o)->absorbed_by = dl->op;
      pre[n_pre++] = o;
    }
  for (qir_op *o = dl->op->next; o && absorbable(h, o, dl->threads); o = o->next)
    if (op_info(h, o)->n_kernels) {
      op_info(h, o)->absorbed_by = dl->op;
      post[n_post++] = o;
    }
  dl->pre = pre;
  dl->n_pre = n_pre;
  dl->post = post;
  dl->n_post = n_post;
}

/* The memory a phase's kernel touches: per tensor parameter, the bytes of its
 * storage (arena or constants) and whether it writes them. */
typedef struct {
  int space;                    /* 1 arena, 2 constants */
  int64_t lo, hi;
  bool written;
} mem_use;

static int phase_memory(host *h, const kkernel *k, mem_use *out) {
  int n = 0;
  for (int i = 0; i < k->n_params; i++) {
    qir_value *r = root(h, k->args[i]);
    vstore *s = &h->vals[r->id];
    if (s->kind == VS_ARENA) out[n++] = (mem_use){1, h->bufs[s->buf].offset, h->bufs[s->buf].offset + value_bytes(r), k->params[i].written};
    else if (s->kind == VS_CONST) out[n++] = (mem_use){2, s->offset, s->offset + value_bytes(r), k->params[i].written};
  }
  return n;
}

/* Phases in a row inside one sequence of a device program: the later one
 * needs no barrier when it touches nothing the phases since the last barrier
 * write and writes nothing they read. */
static void plan_barriers(host *h, dl_node *n) {
  if (!n) return;
  if (n->kind == DN_SEQ) {
    int cap = 16, n_since = 0;
    mem_use *since = calloc((size_t)cap, sizeof *since);
    for (int i = 0; i < n->n_items && since; i++) {
      dl_node *it = n->items[i];
      if (it->kind != DN_PHASE) {
        n_since = 0;
        plan_barriers(h, it);
        continue;
      }
      mem_use *mine = calloc((size_t)it->k->n_params + 1, sizeof *mine);
      if (!mine) break;
      int n_mine = phase_memory(h, it->k, mine);
      bool clash = i == 0 || n->items[i - 1]->kind != DN_PHASE;
      for (int a = 0; a < n_mine && !clash; a++)
        for (int c = 0; c < n_since && !clash; c++)
          clash = mine[a].space == since[c].space && mine[a].lo < since[c].hi && since[c].lo < mine[a].hi &&
                  (mine[a].written || since[c].written);
      it->no_barrier = !clash;
      if (clash) n_since = 0;
      if (n_since + n_mine > cap) {
        cap = 2 * (n_since + n_mine);
        mem_use *grown = realloc(since, sizeof *since * (size_t)cap);
        if (!grown) {
          free(mine);
          it->no_barrier = false;
          break;
        }
        since = grown;
      }
      memcpy(since + n_since, mine, sizeof *mine * (size_t)n_mine);
      n_since += n_mine;
      free(mine);
    }
    free(since);
    return;
  }
  plan_barriers(h, n->body);
  plan_barriers(h, n->els);
}

static kkernel **kernels_of(void *ctx, const qir_op *op, int *n) {
  opinfo *oi = op_info(ctx, op);
  *n = oi ? oi->n_kernels : 0;
  return oi ? oi->kernels : NULL;
}

static bool count_rprograms(qir_op *op, void *vctx) {
  *(int *)vctx += op->code == QIR_OP_RPROGRAM;
  return true;
}

/* An input of the caller's (not cg_symbolic_lower's q_dims, which qir_run fills). */
static bool is_api_input(const qir_op *op) { return op->code == QIR_OP_INPUT && !qir_op_attr(op, "q_run_dims"); }

static void emit_region(host *h, FILE *o, qir_region *r, int level) {
  for (qir_op *op = r->first; op; op = op->next) {
    opinfo *oi = op_info(h, op);
    switch (op->code) {
    case QIR_OP_INPUT: {
      if (!is_api_input(op)) { /* the run's symbol values */
        ind(o, level);
        fprintf(o, "QCHECK(q_h2d(%s, m->dim, sizeof m->dim));\n", ptr(h, op->results[0], true));
        break;
      }
      int i = 0;
      while (h->inputs[i] != op) i++;
      if (h->dev_ptr) break; /* qir_run_device: the kernels read the caller's buffer */
      if (qir_type_is_symbolic(&op->results[0]->type)) {
        cg_symbolic_copy(o, &op->results[0]->type, ptr(h, op->results[0], true), i, true, level);
        break;
      }
      ind(o, level);
      fprintf(o, "QCHECK(q_h2d(%s, inputs[%d], %" PRId64 "));\n", ptr(h, op->results[0], true), i, value_bytes(op->results[0]));
      break;
    }
    case QIR_OP_OUTPUT: {
      int i = 0;
      while (h->outputs[i] != op) i++;
      if (h->dev_ptr) {
        /* qir_run_device: written in place unless this output shares its bytes
         * with an input, a constant or an earlier output */
        const char *dst = qir_sprintf(h->m, "outputs[%d]", i), *at = h->dev_ptr[root(h, op->operands[0])->id];
        if ((at && !strcmp(at, dst)) || !value_bytes(op->operands[0])) break;
        ind(o, level);
        fprintf(o, "QCHECK(q_d2d_async(outputs[%d], %s, %" PRId64 "));\n", i, ptr(h, op->operands[0], false),
                value_bytes(op->operands[0]));
        break;
      }
      if (qir_type_is_symbolic(&op->operands[0]->type)) {
        cg_symbolic_copy(o, &op->operands[0]->type, ptr(h, op->operands[0], false), i, false, level);
        break;
      }
      ind(o, level);
      fprintf(o, "QCHECK(q_d2h(outputs[%d], %s, %" PRId64 "));\n", i, ptr(h, op->operands[0], false), value_bytes(op->operands[0]));
      break;
    }
    case QIR_OP_LOOP: case QIR_OP_IF: {
      cg_dloop *dl = dloop_of(h, op);
      if (dl) emit_dloop(h, o, dl, level);
      else if (op->code == QIR_OP_LOOP) emit_loop(h, o, op, level);
      else emit_if(h, o, op, level);
      break;
    }
    case QIR_OP_RPROGRAM: emit_rprogram(h, o, op, level); break;
    case QIR_OP_VERSIONS: emit_versions(h, o, op, level); break;
    default:
      if (oi->packed_by) break;   /* launched by its rprogram */
      if (oi->absorbed_by) break;   /* a phase of a device-resident loop/if */
      launch_op(h, o, oi, level);
      break;
    }
  }
}

static void emit_bytes(FILE *o, const char *name, const unsigned char *p, size_t n) {
  fprintf(o, "static const unsigned char %s[%zu] = {", name, n ? n : 1);
  for (size_t i = 0; i < n; i++) fprintf(o, "%s%u,", i % 24 ? "" : "\n  ", p[i]);
  if (!n) fputs("0", o);
  fputs("\n};\n", o);
}

static const char *value_name(const qir_value *v, const qir_op *io_op) {
  const char *n = io_op ? qir_op_attr_str(io_op, "name", NULL) : NULL;
  return n ? n : v->name ? v->name : "?";
}

static void emit_cstring(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(o, "\\%c", *s);
    else if ((unsigned char)*s < 32 || (unsigned char)*s > 126) fprintf(o, "\\%03o", (unsigned char)*s);
    else fputc(*s, o);
  }
  fputc('"', o);
}

/* One q_tensor_info per input or output: name, dtype, shape, and for inputs
 * whose extents the importer chose, the note that says how to change them. */
static void emit_io_table(FILE *o, const char *what, qir_op **ops, int n, bool is_input) {
  fprintf(o, "static const q_tensor_info q_%s[%d] = {\n", what, n ? n : 1);
  for (int i = 0; i < n; i++) {
    qir_value *v = is_input ? ops[i]->results[0] : ops[i]->operands[0];
    fputs("  {", o);
    emit_cstring(o, value_name(v, ops[i]));
    fprintf(o, ", %d, %d, {", (int)v->type.dtype, v->type.rank);
    for (int d = 0; d < v->type.rank; d++) fprintf(o, "%s%" PRId64, d ? ", " : "", v->type.dims[d]);
    if (!v->type.rank) fputs("0", o);
    fputs("}, ", o);
    char note[1024] = "";
    if (is_input) qir_input_dims_note(ops[i], note, sizeof note);
    emit_cstring(o, note);
    fputs("},\n", o);
  }
  if (!n) fputs("  {\"\", 0, 0, {0}, \"\"},\n", o);
  fputs("};\n", o);
}

extern const char cg_check_text[];

extern const char cg_main_text[];

/* numpy's descr of each dtype (bf16 has none: its bits as u2) */
static const char *npy_descr(qir_dtype t) {
  switch (t) {
  case QIR_F64: return "<f8";
  case QIR_F32: return "<f4";
  case QIR_F16: return "<f2";
  case QIR_I64: return "<i8";
  case QIR_I32: return "<i4";
  case QIR_I16: return "<i2";
  case QIR_I8: return "|i1";
  case QIR_U64: return "<u8";
  case QIR_U32: return "<u4";
  case QIR_BF16: return "<V2";   /* as qir/tensorio.c: the bfloat16 bits */
  case QIR_U16: return "<u2";
  case QIR_U8: return "|u1";
  case QIR_BOOL: return "|b1";
  default: return qir_dtype_name(t); /* narrow: the record descr [('NAME', '|u1')] (qir/tensorio.h) */
  }
}

/* ONNX TensorProto.DataType of each dtype */
static int onnx_code(qir_dtype t) {
  switch (t) {
  case QIR_F64: return 11;
  case QIR_F32: return 1;
  case QIR_F16: return 10;
  case QIR_BF16: return 16;
  case QIR_I64: return 7;
  case QIR_I32: return 6;
  case QIR_I16: return 5;
  case QIR_I8: return 3;
  case QIR_U64: return 13;
  case QIR_U32: return 12;
  case QIR_U16: return 4;
  case QIR_U8: return 2;
  case QIR_F8E4M3FN: return 17;
  case QIR_F8E4M3FNUZ: return 18;
  case QIR_F8E5M2: return 19;
  case QIR_F8E5M2FNUZ: return 20;
  case QIR_U4: return 21;
  case QIR_I4: return 22;
  case QIR_F4E2M1: return 23;
  case QIR_F8E8M0: return 24;
  case QIR_U2: return 25;
  case QIR_I2: return 26;
  default: return 9;
  }
}

static void collect_io(host *h) {
  for (qir_op *op = h->m->body->first; op; op = op->next) {
    if (is_api_input(op)) h->n_inputs++;
    if (op->code == QIR_OP_OUTPUT) h->n_outputs++;
  }
  h->inputs = qir_alloc(h->m, sizeof *h->inputs * (size_t)(h->n_inputs + 1));
  h->outputs = qir_alloc(h->m, sizeof *h->outputs * (size_t)(h->n_outputs + 1));
  int a = 0, b = 0;
  for (qir_op *op = h->m->body->first; op; op = op->next) {
    if (is_api_input(op)) h->inputs[a++] = op;
    if (op->code == QIR_OP_OUTPUT) h->outputs[b++] = op;
  }
}

static bool plan_all(host *h, qir_region *r) {
  for (qir_op *op = r->first; op; op = op->next) {
    if (!plan_op(h, op_info(h, op))) h->failed = true;
    for (int i = 0; i < op->n_regions; i++) plan_all(h, op->regions[i]);
  }
  return !h->failed;
}

/* A kernel writing one value everywhere: splat constants (run by qir_init),
 * reductions of empty tensors. */
static kkernel *fill_kernel(host *h, qir_value *v, qir_expr *val, const char *what) {
  qir_compute *c = qir_compute_new(h->m, v->type.rank, 0);
  for (int d = 0; d < v->type.rank; d++) {
    c->axis_names[d] = qir_sprintf(h->m, "i%d", d);
    c->axis_extents[d] = v->type.dims[d];
  }
  c->body = qir_expr_cast(h->m, v->type.dtype, val);
  return cg_lower_compute(&h->cg, NULL, c, 0, NULL, v, what);
}

static qir_expr *scalar_expr(host *h, qir_dtype dt, double x) {
  return qir_dtype_is_float(dt) ? qir_expr_float(h->m, x) : qir_expr_int(h->m, (int64_t)x);
}

static kkernel *splat_kernel(host *h, qir_op *op) {
  qir_value *v = op->results[0];
  qir_dtype dt = v->type.dtype;
  qir_expr *val = scalar_expr(h, dt, qir_load_elem(dt, op->cst->data, 0));
  if (dt == QIR_I64 || dt == QIR_U64) { /* exact beyond 2^53 */
    int64_t i;
    memcpy(&i, op->cst->data, 8);
    val = qir_expr_int(h->m, i);
  }
  return fill_kernel(h, v, val, "splat constant");
}

typedef struct {
  qir_op **ops;
  int n, cap;
} op_list;

static bool collect_consts(qir_op *op, void *ctx) {
  op_list *l = ctx;
  if (op->code == QIR_OP_CONST && l->n < l->cap) l->ops[l->n++] = op;
  return true;
}

int cg_generate(qir_module *m, qir_diag *d, cg_backend be, const cg_options *opt, FILE *o) {
  host h = {.m = m, .d = d, .opt = opt};
  qir_value *run_dims;
  if (!cg_symbolic_lower(m, d, &run_dims)) return 1;
  if (!expand_named_ops(m, m->body, d)) return 1;
  int n_rp = 0;
  qir_walk(m->body, count_rprograms, &n_rp);
  h.rp_ops = qir_alloc(m, sizeof *h.rp_ops * (size_t)(n_rp + 1));
  h.rp_sync = qir_alloc(m, sizeof *h.rp_sync * (size_t)(n_rp + 1));
  h.rp_n = qir_alloc(m, sizeof *h.rp_n * (size_t)(n_rp + 1));
  h.rp_kernels = qir_alloc(m, sizeof *h.rp_kernels * (size_t)(n_rp + 1));
  h.pr = be == CG_C ? &cg_printer_c : be == CG_CUDA ? &cg_printer_cuda : &cg_printer_hip;
  h.cg = (cg_ctx){.m = m, .d = d, .backend = be, .warp = be == CG_HIP || opt->wavefront64 ? 64 : 32, .kb = {.m = m}, .run_dims = run_dims};
  packed_groups groups = {.m = m};
  qir_walk(m->body, note_packed_group, &groups);
  if (!cg_compose_groups(&h.cg, m->body)) return 1;
  unpack_broken_rprograms(&h, &groups, m->body);
  qir_walk(m->body, collect_rprogram, &h);
  prepare_dloops(&h, m->body);
  int n = count_ops(m->body);
  h.ops = qir_alloc(m, sizeof *h.ops * (size_t)(n + 1));
  h.hash_cap = 16;
  while (h.hash_cap < 2 * n) h.hash_cap *= 2;
  h.hash = qir_alloc(m, sizeof *h.hash * (size_t)h.hash_cap);
  for (int i = 0; i < h.hash_cap; i++) h.hash[i] = -1;
  int pos = 0;
  number_ops(&h, m->body, &pos);
  h.vals = qir_alloc(m, sizeof *h.vals * (size_t)(m->next_value_id + 1));
  collect_io(&h);
  if (!plan_all(&h, m->body)) return 1;
  if (!bind_rprograms(&h, m->body)) return 1;
  h.dl_done = qir_alloc(m, sizeof *h.dl_done * (size_t)(h.n_dl + 1));
  for (int i = 0; i < h.n_dl; i++) {
    absorb_neighbours(&h, h.dl[i]);
    h.dl_done[i] = cg_dloop_build(&h.cg, h.dl[i], kernels_of, &h);
    if (!h.dl_done[i]) {   /* the host launches them where they stand */
      for (int k = 0; k < h.dl[i]->n_pre; k++) op_info(&h, h.dl[i]->pre[k])->absorbed_by = NULL;
      for (int k = 0; k < h.dl[i]->n_post; k++) op_info(&h, h.dl[i]->post[k])->absorbed_by = NULL;
    }
    if (h.dl_done[i] && be == CG_C) {   /* C: the rprograms inside run as its phases, never as waves */
      for (int r = 0; r < h.n_rp; r++)
        for (const qir_op *up = h.rp_ops[r]; up; up = up->parent ? up->parent->parent_op : NULL)
          if (up == h.dl[i]->op)
            for (int k = 0; k < h.rp_n[r]; k++) h.rp_kernels[r][k]->unprinted = true;
    }
    if (!h.dl_done[i])
      qir_diag_report(d, QIR_SEV_WARNING, h.dl[i]->op->loc, "qcodegen: this %s runs host-driven despite its #device plan: %s",
                      h.dl[i]->op->code == QIR_OP_LOOP ? "loop" : "if", h.dl[i]->why ? h.dl[i]->why : "not realised");
  }
  assign_values(&h, m->body);
  for (int i = 0; i < h.n_dl; i++) {   /* ctl lives with the constants; temporaries in the loops' buffers */
    cg_dloop *dl = h.dl[i];
    h.const_bytes = (h.const_bytes + ALIGN - 1) / ALIGN * ALIGN;
    h.vals[dl->ctl->id] = (vstore){.kind = VS_CONST, .offset = h.const_bytes};
    h.const_bytes += value_bytes(dl->ctl);
    for (int l = 0; l < dl->n_loops; l++) {
      opinfo *oi = op_info(&h, dl->loops[l]);
      for (int c = 0; c < dl->loops[l]->n_operands - 2; c++) h.vals[dl->tmp[l][c]->id] = (vstore){.kind = VS_ARENA, .buf = oi->tmp[c]};
    }
  }
  for (int r = 0; r < h.n_rp; r++) {   /* sync tensors live with the constants, zeroed by qir_init */
    h.const_bytes = (h.const_bytes + ALIGN - 1) / ALIGN * ALIGN;
    h.vals[h.rp_sync[r]->id] = (vstore){.kind = VS_CONST, .offset = h.const_bytes};
    h.const_bytes += value_bytes(h.rp_sync[r]);
  }
  for (int i = 0; i < h.n_ops; i++) {   /* split attentions' partial results: written whole before they are read */
    qir_value *p = h.ops[i].partial;
    if (!p) continue;
    h.const_bytes = (h.const_bytes + ALIGN - 1) / ALIGN * ALIGN;
    h.vals[p->id] = (vstore){.kind = VS_CONST, .offset = h.const_bytes};
    h.const_bytes += value_bytes(p);
  }
  lifetimes(&h, m->body);
  /* kernels read the run's symbol values to skip blocks past its extents,
   * though no op of the module names them: they live through the run */
  if (run_dims) extend(&h, run_dims, 0, h.n_ops + 1);
  allocate(&h);
  for (int i = 0; i < h.n_dl; i++)
    if (h.dl_done[i]) {
      plan_barriers(&h, h.dl[i]->root);
      cg_dloop_finish(&h.cg, h.dl[i]);
    }
  mark_aliases(&h);

  op_list consts = {.cap = n + 1};
  consts.ops = qir_alloc(m, sizeof *consts.ops * (size_t)consts.cap);
  qir_walk(m->body, collect_consts, &consts);
  kkernel **fills = qir_alloc(m, sizeof *fills * (size_t)(consts.n + 1));
  int64_t sidecar_max = 0, sidecar_count = 0;
  for (int i = 0; i < consts.n; i++) {
    qir_op *c = consts.ops[i];
    if (c->cst->splat) {
      if (!(fills[i] = splat_kernel(&h, c))) return 1;
    } else if (c->cst->offset >= 0 && !c->cst->data) {
      sidecar_count++;
      if (value_bytes(c->results[0]) > sidecar_max) sidecar_max = value_bytes(c->results[0]);
      if (opt->embed_weights && !qir_const_data(m, c, d)) return 1;
    }
  }

  if (opt->plant && !cg_plant(&h.cg, opt->plant)) return 1;

  /* ---- header comment: the API */
  fprintf(o, "/* Generated by qcodegen %s (%s backend) from module @%s.\n", QIR_VERSION,
          be == CG_C ? "C" : be == CG_CUDA ? "CUDA" : "HIP", m->name ? m->name : "");
  fputs(" *\n"
        " * API (every function returns 0 on success, nonzero after printing the failing call):\n"
        " *   int qir_init(qir_model **model, const char *weights_path);\n"
        " *       allocates device memory, loads the weights (weights_path NULL: the path the\n"
        " *       module names, or none when the weights are embedded), fills constants.\n"
        " *       After a failure, call qir_free on what it stored in *model.\n"
        " *   int qir_run(qir_model *model, const void *const *inputs, void *const *outputs);\n"
        " *       inputs and outputs are host pointers to dense little-endian tensors, in\n"
        " *       the order listed below; returns when the outputs are written.\n",
        o);
  if (be != CG_C)
    fprintf(o, " *   int qir_run_stream(qir_model *model, const void *const *inputs, void *const *outputs,\n"
               " *                      %sStream_t stream);\n"
               " *       stream-ordered: inputs and outputs are device pointers; every launch and\n"
               " *       copy is queued on `stream`, nothing blocks, nothing is read back, so the\n"
               " *       call can be captured into a graph (%sStreamBeginCapture) and replayed.\n"
               " *       Inputs are read in place and must stay unchanged until the work is done;\n"
               " *       one model runs on one stream at a time (its memory is the model's).\n"
               " *       A model with host-driven control flow (a loop/if that reads its trip\n"
               " *       count or condition back) is not stream-ordered: this returns 1 and says why.\n"
               " *   int qir_run_device(qir_model *model, const void *const *inputs, void *const *outputs);\n"
               " *       qir_run_stream on the default stream where the model is stream-ordered,\n"
               " *       else the same run with host-driven control flow reading back (no\n"
               " *       synchronisation: synchronise before reading the outputs).\n",
            be == CG_CUDA ? "cuda" : "hip", be == CG_CUDA ? "cuda" : "hip");
  fputs(" *   int qir_set_input_shape(qir_model *model, int index, int rank, const int64_t *dims);\n"
        " *       gives input `index` its shape for the next qir_run (0, or a message and 1\n"
        " *       when the model does not take that shape); a model with dimension\n"
        " *       symbols needs it for every input that has symbolic extents.\n"
        " *   int qir_output_shape(const qir_model *model, int i, int64_t *dims);\n"
        " *       output i's shape in the last qir_run into dims; returns its rank.\n", o);
  fputs(" *   int64_t qir_output_rows(const qir_model *model, int i);\n"
        " *       the extent of axis 0 of output i after the last qir_run (1 for a scalar):\n"
        " *       its static extent, or for a bounded output (`<=N`: the scan output of a\n"
        " *       loop that may exit early) the rows the loop produced; the rows beyond\n"
        " *       are unspecified.\n",
        o);
  fputs(" *   int qir_check_input(int index, const char *dtype, int rank, const int64_t *dims);\n"
        " *       0 when input `index` (from 0) has this element type (\"f32\", \"i64\", ...) and\n"
        " *       shape; otherwise prints which input it is and what the model expects\n"
        " *       (qir_run itself cannot check: it gets bare pointers).\n"
        " *   void qir_free(qir_model *model);\n *\n", o);
  for (int i = 0; i < h.n_inputs; i++) {
    char tb[128];
    qir_type_format(&h.inputs[i]->results[0]->type, tb, sizeof tb);
    fprintf(o, " * input %d: %s %s\n", i, value_name(h.inputs[i]->results[0], h.inputs[i]), tb);
  }
  for (int i = 0; i < h.n_outputs; i++) {
    char tb[128];
    qir_type_format(&h.outputs[i]->operands[0]->type, tb, sizeof tb);
    fprintf(o, " * output %d: %s %s\n", i, value_name(h.outputs[i]->operands[0], h.outputs[i]), tb);
  }
  fprintf(o, " *\n * Memory plan: peak %" PRId64 " bytes of device memory for tensors (%" PRId64
             " bytes if none were reused), %" PRId64 " bytes of constants.\n",
          h.arena_bytes, h.tensor_bytes, h.const_bytes);
  /* Hopper's own kernels (wgmma, setmaxnreg) assemble for sm_90a only */
  int sm90a = 0;
  for (int i = 0; i < h.cg.n_kernels; i++) sm90a += h.cg.kernels[i]->sm90a;
  if (sm90a && be == CG_CUDA)
    fprintf(o, " *\n * %d kernel%s run%s on Hopper's wgmma and tensor memory accelerator: build with\n"
               " *   nvcc -gencode=arch=compute_90a,code=sm_90a (H100, H200).  Built for another\n"
               " * architecture too (a fat binary), they trap there.\n */\n"
               "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && !defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
               "#error \"this program's Hopper kernels need nvcc -gencode=arch=compute_90a,code=sm_90a\"\n"
               "#endif\n",
            sm90a, sm90a > 1 ? "s" : "", sm90a > 1 ? "" : "s");
  else fputs(" */\n", o);
  cg_check *chk = NULL;
  if (opt->check) {
    chk = cg_check_new(m, d->file);
    for (int i = 0; i < h.cg.n_kernels; i++) h.cg.kernels[i]->chk = chk;
  }
  if (chk) fputs("#define QIR_CHECK 1\n", o);   /* the prelude's copies tell the checker what they write */
  h.pr->prelude(o);
  if (m->n_syms) cg_symbolic_floordiv(o);
  if (chk) cg_check_prelude(o);
  for (int i = 0; i < h.cg.n_kernels; i++)
    if (!h.cg.kernels[i]->unprinted) h.pr->kernel(o, h.cg.kernels[i]);
  if (chk) cg_check_trailer(o, chk);
  cg_symbolic_prelude(o, m, h.inputs, h.n_inputs);

  /* ---- constants */
  fputs("\n/* ---- model */\ntypedef struct qir_model {\n  unsigned char *arena, *cbuf;\n", o);
  fprintf(o, "  int64_t out_rows[%d];   /* rows each output holds (bounded loop scan outputs) */\n", h.n_outputs ? h.n_outputs : 1);
  cg_symbolic_model_fields(o, m, h.n_inputs);
  if (h.n_rp) fprintf(o, "  int rp_ok[%d];   /* each rprogram: its blocks fit on the device at once */\n", h.n_rp);
  if (h.n_dl && be != CG_C) fprintf(o, "  int dl_ok[%d];   /* each device-resident loop/if: its blocks fit on the device at once */\n", h.n_dl);
  fputs("} qir_model;\n", o);
  for (int i = 0; i < consts.n; i++) {
    qir_op *c = consts.ops[i];
    bool embed = !c->cst->splat && (c->cst->offset < 0 || opt->embed_weights);
    if (embed) {
      const void *p = qir_const_data(m, c, d);
      if (!p) return 1;
      emit_bytes(o, qir_sprintf(m, "q_const%d", i), p, (size_t)value_bytes(c->results[0]));
    }
  }
  fputs("\nQAPI void qir_free(qir_model *m) {\n  if (!m) return;\n  if (m->arena) q_free(m->arena);\n"
        "  if (m->cbuf) q_free(m->cbuf);\n",
        o);
  fputs("  free(m);\n", o);
  if (chk) fputs("  q_arena_watch(NULL, 0);\n", o);
  fputs("}\n\n", o);
  fprintf(o, "QAPI int64_t qir_output_rows(const qir_model *m, int i) {\n"
             "  return m && i >= 0 && i < %d ? m->out_rows[i] : -1;\n}\n\n",
          h.n_outputs);
  fputs("QAPI int qir_init(qir_model **model, const char *weights_path) {\n", o);
  fputs("  qir_model *m = (qir_model *)calloc(1, sizeof *m);\n  *model = m;\n  if (!m) return 1;\n", o);
  for (int i = 0; i < h.n_outputs; i++) {
    const qir_type *t = &h.outputs[i]->operands[0]->type;
    fprintf(o, "  m->out_rows[%d] = %" PRId64 ";\n", i, t->rank ? (t->bounded ? 0 : t->dims[0]) : 1);
  }
  fprintf(o, "  QCHECK(q_alloc((void **)&m->arena, %" PRId64 "));\n", h.arena_bytes);
  if (chk) fprintf(o, "  q_arena_watch(m->arena, %" PRId64 ");   /* poisoned, as cudaMalloc does not zero */\n", h.arena_bytes);
  fprintf(o, "  QCHECK(q_alloc((void **)&m->cbuf, %" PRId64 "));\n", h.const_bytes);
  if (sidecar_count && !opt->embed_weights) {
    fputs("  {\n", o);
    fputs("    const char *path = weights_path ? weights_path : ", o);
    const char *wp = m->weights_path ? m->weights_path : "";
    if (wp[0] && wp[0] != '/' && m->base_dir && m->base_dir[0] && strcmp(m->base_dir, "."))
      wp = qir_sprintf(m, "%s/%s", m->base_dir, wp);
    emit_cstring(o, wp);
    fputs(";\n    FILE *f = fopen(path, \"rb\");\n"
          "    if (!f) { fprintf(stderr, \"qir_init: cannot open weights file '%s'\\n\", path); return 1; }\n",
          o);
    fprintf(o, "    unsigned char *tmp = (unsigned char *)malloc(%" PRId64 ");\n", sidecar_max);
    fputs("    if (!tmp) { fclose(f); return 1; }\n", o);
    fputs("    static const struct { long off; long dst; long n; } chunks[] = {\n", o);
    for (int i = 0; i < consts.n; i++) {
      qir_op *c = consts.ops[i];
      if (c->cst->splat || c->cst->offset < 0 || c->cst->data) continue;
      fprintf(o, "      {%" PRId64 "L, %" PRId64 "L, %" PRId64 "L},\n", c->cst->offset, h.vals[c->results[0]->id].offset,
              value_bytes(c->results[0]));
    }
    fputs("    };\n"
          "    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {\n"
          "      if (fseek(f, chunks[i].off, SEEK_SET) || fread(tmp, 1, (size_t)chunks[i].n, f) != (size_t)chunks[i].n) {\n"
          "        fprintf(stderr, \"qir_init: weights file '%s' is short (%ld bytes at offset %ld)\\n\", path, chunks[i].n, chunks[i].off);\n"
          "        free(tmp); fclose(f); return 1;\n"
          "      }\n"
          "      int rc = q_h2d(m->cbuf + chunks[i].dst, tmp, (size_t)chunks[i].n) != 0;\n"
          "      if (rc) { fprintf(stderr, \"qir_init: copying weights failed\\n\"); free(tmp); fclose(f); return 1; }\n"
          "    }\n"
          "    free(tmp);\n    fclose(f);\n  }\n",
          o);
  } else {
    fputs("  (void)weights_path;\n", o);
  }
  for (int i = 0; i < consts.n; i++) {
    qir_op *c = consts.ops[i];
    if (c->cst->splat) {
      launch(&h, o, fills[i], 1);
    } else if (c->cst->offset < 0 || opt->embed_weights) {
      fprintf(o, "  QCHECK(q_h2d(m->cbuf + %" PRId64 ", q_const%d, %" PRId64 "));\n", h.vals[c->results[0]->id].offset, i,
              value_bytes(c->results[0]));
    }
  }
  if (chk) fputs("  if (q_check_report()) return 1;   /* hazards: reported on stderr */\n", o);
  for (int r = 0; r < h.n_rp; r++) {
    int64_t n = qir_type_numel(&h.rp_sync[r]->type);
    fprintf(o, "  {\n    static const uint64_t q_zero[%" PRId64 "] = {0};\n    QCHECK(q_h2d(%s, q_zero, %" PRId64 "));\n  }\n", n,
            ptr(&h, h.rp_sync[r], true), n * 8);
    if (h.rp_n[r]) h.pr->coresident(o, h.rp_kernels[r][0], qir_sprintf(m, "m->rp_ok[%d]", r), "  ");
  }
  for (int i = 0; i < h.n_dl && be != CG_C; i++) {
    if (!h.dl_done[i]) fprintf(o, "  m->dl_ok[%d] = 0;   /* %s */\n", i, h.dl[i]->why ? h.dl[i]->why : "not realised");
    else if (h.dl[i]->block_level) fprintf(o, "  m->dl_ok[%d] = 1;   /* one block */\n", i);
    else h.pr->coresident(o, h.dl[i]->kernel, qir_sprintf(m, "m->dl_ok[%d]", i), "  ");
  }
  fputs("  QCHECK(q_sync());\n  return 0;\n}\n\n", o);

  fputs("QAPI int qir_run(qir_model *m, const void *const *inputs, void *const *outputs) {\n", o);
  fputs("  (void)inputs; (void)outputs;\n", o);
  if (m->n_syms) fputs("  if (q_bind_dims(m)) return 1;\n", o);
  if (m->n_syms && chk) fputs("  q_chk_dims = m->dim;   /* what the checker takes for each tensor's run */\n", o);
  emit_region(&h, o, m->body, 1);
  if (chk) fputs("  if (q_check_report()) return 1;\n", o);
  fputs("  QCHECK(q_sync());\n  return 0;\n}\n", o);

  if (be != CG_C) {
    /* Inputs are read where the caller keeps them; an output computed into the
     * arena is computed into the caller's buffer instead. */
    h.dev_ptr = qir_alloc(m, sizeof *h.dev_ptr * (size_t)(m->next_value_id + 1));
    memset(h.dev_ptr, 0, sizeof *h.dev_ptr * (size_t)(m->next_value_id + 1));
    for (int i = 0; i < h.n_inputs; i++)
      h.dev_ptr[root(&h, h.inputs[i]->results[0])->id] = qir_sprintf(m, "inputs[%d]", i);
    for (int i = 0; i < h.n_outputs; i++) {
      qir_value *r = root(&h, h.outputs[i]->operands[0]);
      if (h.vals[r->id].kind == VS_ARENA && !h.dev_ptr[r->id]) h.dev_ptr[r->id] = qir_sprintf(m, "outputs[%d]", i);
    }
    /* qir_run_stream: the device run with every launch and copy on the
     * caller's stream, emitted aside first: a construct that reads back
     * makes it a stub that says which and fails */
    char *text = NULL;
    size_t len = 0;
    FILE *so = open_memstream(&text, &len);
    if (!so) {
      qir_error(d, m->loc, "qcodegen: out of memory");
      return 1;
    }
    h.stream_mode = true;
    emit_region(&h, so, m->body, 1);
    h.stream_mode = false;
    fclose(so);
    fprintf(o, "\nQAPI int qir_run_stream(qir_model *m, const void *const *inputs, void *const *outputs, q_stream_t q_stream) {\n");
    fputs("  (void)inputs; (void)outputs; (void)q_stream;\n", o);
    if (m->n_syms && !h.not_stream) h.not_stream = "a program for every size copies its inputs and outputs from and to the host";
    if (h.not_stream) {
      fputs("  (void)m;\n  fputs(\"qir_run_stream: not stream-ordered: ", o);
      for (const char *c = h.not_stream; *c; c++) fputc(*c == '"' || *c == '\\' ? '_' : *c, o);
      fputs(m->n_syms ? " (use qir_run)\\n\", stderr);\n  return 1;\n}\n" : " (use qir_run_device)\\n\", stderr);\n  return 1;\n}\n", o);
    } else {
      fputs(text ? text : "", o);
      fputs("  QCHECK_LAUNCH();\n  return 0;\n}\n", o);
    }
    free(text);
    fputs("\nQAPI int qir_run_device(qir_model *m, const void *const *inputs, void *const *outputs) {\n", o);
    if (!h.not_stream) {
      fputs("  return qir_run_stream(m, inputs, outputs, 0);\n}\n", o);
    } else if (m->n_syms) {
      fputs("  (void)m; (void)inputs; (void)outputs;\n"
            "  fputs(\"qir_run_device: a program for every size takes its inputs through qir_run\\n\", stderr);\n"
            "  return 1;\n}\n", o);
    } else {
      fputs("  (void)inputs; (void)outputs;\n", o);
      emit_region(&h, o, m->body, 1);
      fputs("  QCHECK_LAUNCH();\n  return 0;\n}\n", o);
    }
    h.dev_ptr = NULL;
  }

  /* ---- input checks: the API's qir_check_input, which the program uses too */
  fputs("\n/* ---- input checks */\n", o);
  fputs("typedef struct { const char *name; int dtype; int rank; int64_t dims[8]; const char *note; } q_tensor_info;\n", o);
  fprintf(o, "#define Q_N_INPUTS %d\n", h.n_inputs);
  fputs("static const char *const q_tname[] = {", o);
  for (int t = 0; t < QIR_DTYPE_COUNT; t++) fprintf(o, "%s\"%s\"", t ? ", " : "", qir_dtype_name((qir_dtype)t));
  fputs("};\n", o);
  emit_io_table(o, "inputs", h.inputs, h.n_inputs, true);
  fputs(cg_check_text, o);
  cg_symbolic_api(o, m, h.inputs, h.n_inputs, h.outputs, h.n_outputs);

  if (opt->main_program) {
    fputs("\n/* ---- program: ./m --in NAME=x.npy ... --out NAME=y.npy [--bench N] */\n", o);
    fprintf(o, "#define Q_N_OUTPUTS %d\n", h.n_outputs);
    fputs("static const int q_dsize[] = {", o);
    for (int t = 0; t < QIR_DTYPE_COUNT; t++) fprintf(o, "%s%d", t ? ", " : "", qir_dtype_size((qir_dtype)t));
    fputs("};\nstatic const char *const q_descr[] = {", o);
    for (int t = 0; t < QIR_DTYPE_COUNT; t++) fprintf(o, "%s\"%s\"", t ? ", " : "", npy_descr((qir_dtype)t));
    fputs("};\nstatic const int q_onnx[] = {", o);
    for (int t = 0; t < QIR_DTYPE_COUNT; t++) fprintf(o, "%s%d", t ? ", " : "", onnx_code((qir_dtype)t));
    fputs("};\n/* bits per element in ONNX's packed raw_data (4 and 2 for i4/u4/f4e2m1, i2/u2); -1 for i4/i2 says sign-extend */\n"
          "static const int q_pbits[] = {", o);
    for (int t = 0; t < QIR_DTYPE_COUNT; t++) {
      qir_dtype d = (qir_dtype)t;
      int bits = qir_dtype_bits(d);
      fprintf(o, "%s%d", t ? ", " : "", bits < 8 && qir_dtype_is_signed_int(d) ? -bits : bits);
    }
    fputs("};\n", o);
    emit_io_table(o, "outputs", h.outputs, h.n_outputs, false);
    fputs(cg_main_text, o);
  }
  return 0;
}
