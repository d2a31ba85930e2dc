/* lower.c: one compute expression -> one kernel AST.
 *
 * Output axes map to blocks, threads and a register tile per thread; reduction
 * axes map to loops, stepped by `rstep` with the operand tiles of one step
 * staged in shared memory when they are reused across the block.  A #tile plan
 * (written by qopt -roller) is realised exactly; without one a default plan is
 * chosen:
 *   - no reduction: a flat kernel, consecutive threads on consecutive elements;
 *   - a reduction with operand reuse across output points (matmul, conv): a
 *     64x64 block tile, 4x4 register tiles, shared-memory staging;
 *   - a reduction without reuse (reduce_*, pooling): one warp per output point
 *     when the reduction is long (warp-shuffle reduction), else one thread.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "target.h"

/* Largest #tile block / thread / rstep / smem_pad / vec entry accepted. */
#define TILE_MAX QIR_TILE_MAX

/* ---------------------------------------------------------------- typing */

typedef struct {
  ktype t;
  bool weak;                    /* a literal: adopts the other operand's type */
} etype;

static int rank_of(ktype t) {
  static const int r[] = {[KT_BOOL] = 0, [KT_I32] = 1, [KT_U32] = 2, [KT_I64] = 3, [KT_U64] = 4, [KT_F32] = 5, [KT_F64] = 6};
  return r[t];
}

static etype unify(etype a, etype b) {
  if (a.weak && !b.weak) {
    if (ktype_is_float(a.t) && !ktype_is_float(b.t)) return (etype){KT_F32, false};
    return b;
  }
  if (b.weak && !a.weak) return unify(b, a);
  etype r = {rank_of(a.t) >= rank_of(b.t) ? a.t : b.t, a.weak && b.weak};
  if (r.t == KT_BOOL) r.t = KT_I32;
  return r;
}

static bool fn_is_compare(qir_expr_fn fn) { return fn >= QIR_FN_LT && fn <= QIR_FN_NE; }

static etype expr_type(lower_env *env, const qir_expr *e) {
  switch (e->kind) {
  case QIR_EX_INT: return (etype){KT_I64, true};
  case QIR_EX_FLOAT: return (etype){KT_F32, true};
  case QIR_EX_VAR: return (etype){env->b->index_type, false};
  case QIR_EX_ACCESS:
    if (env->group && e->operand == env->group->acc_operand) return (etype){ktype_of_dtype(env->group->acc_dtype), false};
    if (env->n_markers && e->operand >= env->marker_base && e->operand < env->marker_base + env->n_markers)
      return (etype){ktype_of_dtype(env->marker_dtypes[e->operand - env->marker_base]), false};
    return (etype){ktype_of_dtype(env->args[e->operand]->type.dtype), false};
  case QIR_EX_CAST: return (etype){ktype_of_dtype(e->cast_to), false};
  case QIR_EX_SELECT: return unify(expr_type(env, e->args[1]), expr_type(env, e->args[2]));
  case QIR_EX_UNARY: {
    etype a = expr_type(env, e->args[0]);
    switch (e->fn) {
    case QIR_FN_NOT: case QIR_FN_ISNAN: case QIR_FN_ISINF: return (etype){KT_BOOL, false};
    case QIR_FN_NEG: case QIR_FN_ABS: case QIR_FN_SIGN: case QIR_FN_FLOOR: case QIR_FN_CEIL:
    case QIR_FN_ROUND: case QIR_FN_RECIP:
      if (a.t == KT_BOOL) a.t = KT_I32;
      return a;
    default: return ktype_is_float(a.t) ? a : (etype){KT_F64, a.weak};
    }
  }
  case QIR_EX_BINARY: {
    if (fn_is_compare(e->fn) || e->fn == QIR_FN_AND || e->fn == QIR_FN_OR) return (etype){KT_BOOL, false};
    etype r = unify(expr_type(env, e->args[0]), expr_type(env, e->args[1]));
    if (e->fn == QIR_FN_ATAN2 && !ktype_is_float(r.t)) r.t = KT_F64;
    return r;
  }
  }
  return (etype){KT_F32, false};
}

/* ---------------------------------------------------------------- affine maps */

/* Every access of the body, pre-order. */
static void collect_accesses(const qir_expr *e, const qir_expr **out, int *n, int cap) {
  if (e->kind == QIR_EX_ACCESS && *n < cap) out[(*n)++] = e;
  for (int i = 0; i < e->n_args; i++) collect_accesses(e->args[i], out, n, cap);
}

/* Which compute variables an access's indices use (bit set). */
static uint32_t vars_used(const qir_expr *e) {
  uint32_t r = e->kind == QIR_EX_VAR ? 1u << e->var : 0;
  for (int i = 0; i < e->n_args; i++) r |= vars_used(e->args[i]);
  return r;
}

/* ---------------------------------------------------------------- expressions */

kexpr *tr_as(lower_env *env, const qir_expr *e, ktype t) { return ke_cast(env->b, tr(env, e), t); }

kexpr *strides_linear(lower_env *env, kexpr *const *idx, const int64_t *dims, int rank) {
  kbuilder *b = env->b;
  kexpr *lin = ke_int(b, 0);
  int64_t stride = 1;
  for (int j = rank - 1; j >= 0; j--) {
    lin = ke_add(b, ke_mul(b, idx[j], ke_int(b, stride)), lin);
    stride *= dims[j];
  }
  return lin;
}

static kexpr *tr_access(lower_env *env, const qir_expr *e) {
  kbuilder *b = env->b;
  if (env->group && e->operand == env->group->acc_operand) return env->acc_value;
  if (env->n_tiles && e->operand >= env->tile_base && e->operand < env->tile_base + env->n_tiles) {
    const stage_tile *st = &env->tiles[e->operand - env->tile_base];
    kexpr *off[QIR_MAX_RANK];
    for (int j = 0; j < st->rank; j++) off[j] = ke_sub(b, tr_as(env, e->args[j], b->index_type), st->origin[j]);
    return ke_elem(b, st->smem, strides_linear(env, off, st->ext, st->rank));
  }
  if (env->n_markers && e->operand >= env->marker_base && e->operand < env->marker_base + env->n_markers)
    return env->marker_values[e->operand - env->marker_base];
  for (int s = 0; s < env->n_staged; s++) {
    staged_access *sa = &env->staged[s];
    if (!qir_expr_equal(sa->access, e)) continue;
    /* the tile covers the whole block, so the unclamped indices stay inside it */
    kexpr *saved[MAX_AXES], *off[QIR_MAX_RANK];
    memcpy(saved, env->vars, sizeof saved);
    if (env->raw_vars) memcpy(env->vars, env->raw_vars, sizeof(kexpr *) * (size_t)env->comp->n_axes);
    for (int j = 0; j < sa->rank; j++) off[j] = ke_sub(b, tr_as(env, e->args[j], b->index_type), sa->origin[j]);
    memcpy(env->vars, saved, sizeof saved);
    kexpr *lin = ke_int(b, 0);
    for (int j = sa->rank - 1; j >= 0; j--) lin = ke_add(b, ke_mul(b, off[j], ke_int(b, sa->stride[j])), lin);
    return ke_elem(b, sa->smem, sa->slot ? ke_add(b, sa->slot, lin) : lin);
  }
  const qir_type *t = &env->args[e->operand]->type;
  kexpr *idx[QIR_MAX_RANK];
  for (int j = 0; j < e->n_args && j < QIR_MAX_RANK; j++) idx[j] = tr_as(env, e->args[j], b->index_type);
  return ke_load(b, env->k, 1 + e->operand, strides_linear(env, idx, t->dims, t->rank));
}

kexpr *tr(lower_env *env, const qir_expr *e) {
  kbuilder *b = env->b;
  switch (e->kind) {
  case QIR_EX_INT: return ke_long(b, e->ival);
  case QIR_EX_FLOAT: return ke_float(b, e->fval, KT_F32);
  case QIR_EX_VAR: return env->vars[e->var];
  case QIR_EX_ACCESS: return tr_access(env, e);
  case QIR_EX_CAST: return ke_cast_dtype(b, tr(env, e->args[0]), e->cast_to);
  case QIR_EX_SELECT: {
    ktype t = expr_type(env, e).t;
    return ke_select(b, tr_as(env, e->args[0], KT_BOOL), tr_as(env, e->args[1], t), tr_as(env, e->args[2], t), t);
  }
  case QIR_EX_UNARY: {
    etype a = expr_type(env, e->args[0]);
    ktype t = expr_type(env, e).t;
    if (a.weak && ktype_is_float(a.t)) a.t = t == KT_F64 ? KT_F64 : KT_F32;
    switch (e->fn) {
    case QIR_FN_NOT: return ke_un(b, e->fn, tr_as(env, e->args[0], KT_BOOL), KT_BOOL);
    case QIR_FN_ISNAN: case QIR_FN_ISINF: return ke_un(b, e->fn, tr(env, e->args[0]), KT_BOOL);
    case QIR_FN_FLOOR: case QIR_FN_CEIL: case QIR_FN_ROUND:
      if (!ktype_is_float(t)) return tr_as(env, e->args[0], t);
      return ke_un(b, e->fn, tr_as(env, e->args[0], t), t);
    default: return ke_un(b, e->fn, tr_as(env, e->args[0], t), t);
    }
  }
  case QIR_EX_BINARY: {
    if (e->fn == QIR_FN_AND || e->fn == QIR_FN_OR)
      return ke_bin(b, e->fn, tr_as(env, e->args[0], KT_BOOL), tr_as(env, e->args[1], KT_BOOL), KT_BOOL);
    etype u = unify(expr_type(env, e->args[0]), expr_type(env, e->args[1]));
    if (fn_is_compare(e->fn))
      return ke_bin(b, e->fn, tr_as(env, e->args[0], u.t), tr_as(env, e->args[1], u.t), KT_BOOL);
    ktype t = expr_type(env, e).t;
    return ke_bin(b, e->fn, tr_as(env, e->args[0], t), tr_as(env, e->args[1], t), t);
  }
  }
  return ke_int(b, 0);
}

/* ---------------------------------------------------------------- helpers */

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int64_t pow2_ceil(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

kvar *let(lower_env *env, const char *stem, kexpr *init) {
  kvar *v = kvar_new(env->b, env->k, stem, init->type, 0, KV_LOCAL);
  ks_add(env->b, env->k->lets, ks_decl(env->b, v, init));
  return v;
}

/* Decomposes `flat` (row-major over extents ext[0..n-1]) into coordinates. */
void decompose(lower_env *env, kexpr *flat, const int64_t *ext, int n, kexpr **out) {
  kbuilder *b = env->b;
  int64_t stride = 1;
  for (int d = n - 1; d >= 0; d--) {
    kexpr *q = ke_div(b, flat, ke_int(b, stride));
    out[d] = d == 0 ? q : ke_mod(b, q, ke_int(b, ext[d]));
    if (ext[d] == 1) out[d] = ke_int(b, 0);
    stride *= ext[d];
  }
}

static qir_expr_fn reduce_fn(qir_reduce_kind r) {
  switch (r) {
  case QIR_REDUCE_MAX: return QIR_FN_MAX;
  case QIR_REDUCE_MIN: return QIR_FN_MIN;
  case QIR_REDUCE_PROD: return QIR_FN_MUL;
  default: return QIR_FN_ADD;
  }
}

static kexpr *reduce_init(kbuilder *b, qir_reduce_kind r, ktype t) {
  bool fl = ktype_is_float(t);
  switch (r) {
  case QIR_REDUCE_PROD: return fl ? ke_float(b, 1, t) : ke_cast(b, ke_int(b, 1), t);
  case QIR_REDUCE_MAX:
    if (fl) return ke_float(b, -INFINITY, t);
    return ke_cast(b, ke_long(b, t == KT_I64 ? INT64_MIN : t == KT_I32 ? INT32_MIN : 0), t);
  case QIR_REDUCE_MIN:
    if (fl) return ke_float(b, INFINITY, t);
    if (t == KT_U64) return ke_cast(b, ke_long(b, -1), t);
    return ke_cast(b, ke_long(b, t == KT_I64 ? INT64_MAX : t == KT_I32 ? INT32_MAX : t == KT_U32 ? UINT32_MAX : 1), t);
  default: return fl ? ke_float(b, 0, t) : ke_cast(b, ke_int(b, 0), t);
  }
}

static kexpr *combine(kbuilder *b, qir_reduce_kind r, kexpr *acc, kexpr *v, ktype t) {
  return ke_bin(b, reduce_fn(r), acc, ke_cast(b, v, t), t);
}

qir_expr_fn reduce_fn_of(qir_reduce_kind r) { return reduce_fn(r); }
kexpr *reduce_identity(kbuilder *b, qir_reduce_kind r, ktype t) { return reduce_init(b, r, t); }
kexpr *reduce_combine(kbuilder *b, qir_reduce_kind r, kexpr *acc, kexpr *v, ktype t) { return combine(b, r, acc, v, t); }

kexpr *out_index(lower_env *env, kexpr *const *idx) {
  const qir_type *t = &env->k->args[0]->type;
  return strides_linear(env, idx, t->dims, t->rank);
}

kexpr *stored_value(lower_env *env, kexpr *const *idx, kexpr *v, ktype t) {
  if (!env->group || !env->group->epilogue) return v;
  const qir_compute *c = env->comp;
  kexpr *saved[MAX_AXES], **raw = env->raw_vars;
  memcpy(saved, env->vars, sizeof saved);
  int staged = env->n_staged;
  /* the epilogue reads its operands from global memory at the output point */
  env->n_staged = 0;
  env->raw_vars = NULL;
  for (int d = 0; d < c->n_axes; d++) env->vars[d] = idx[d];
  env->acc_value = ke_cast_dtype(env->b, v, env->group->acc_dtype);
  kexpr *r = tr_as(env, env->group->epilogue, t);
  env->acc_value = NULL;
  memcpy(env->vars, saved, sizeof saved);
  env->n_staged = staged;
  env->raw_vars = raw;
  return r;
}

/* Body value converted to the output's compute type. */
static kexpr *body_value(lower_env *env, ktype t) { return tr_as(env, env->body, t); }

/* acc += the bias, evaluated at the output point (every reduction variable 0);
 * NULL without a bias.  Once per output: lanes that split a reduction add it
 * on lane 0 only. */
static kstmt *add_bias(lower_env *env, kvar *acc, kexpr *slot, ktype t) {
  if (!env->bias) return NULL;
  const qir_compute *c = env->comp;
  kexpr *saved[MAX_AXES];
  memcpy(saved, env->vars, sizeof saved);
  for (int a = 0; a < c->n_red; a++) env->vars[c->n_axes + a] = ke_int(env->b, 0);
  kexpr *v = tr_as(env, env->bias, t);
  memcpy(env->vars, saved, sizeof saved);
  kexpr *cur = slot ? ke_elem(env->b, acc, slot) : ke_var(env->b, acc);
  return ks_assign(env->b, acc, slot, ke_bin(env->b, QIR_FN_ADD, cur, v, t));
}

/* Nested loops over the reduction axes; *inner receives the innermost body. */
static kstmt *reduce_loops(lower_env *env, kstmt **inner) {
  kbuilder *b = env->b;
  const qir_compute *c = env->comp;
  kstmt *outer = NULL, *cur = NULL;
  for (int a = 0; a < c->n_red; a++) {
    kvar *r = kvar_new(b, env->k, "r", b->index_type, 0, KV_LOCAL);
    env->vars[c->n_axes + a] = ke_var(b, r);
    kstmt *body = ks_seq(b);
    kstmt *l = ks_for(b, r, ke_int(b, 0), ke_int(b, c->axis_extents[c->n_axes + a]), 1, body);
    if (cur) ks_add(b, cur, l);
    else outer = l;
    cur = body;
  }
  *inner = cur;
  return outer;
}

void kkernel_rows(kkernel *k, int64_t num, int64_t den, int64_t mul) {
  const qir_type *t = k->n_params ? &k->args[0]->type : NULL;
  if (!t || !t->rank || !t->sym[0] || num <= 0 || den <= 0 || mul <= 0) return;
  k->rows = t->sym[0];
  k->rows_num = num, k->rows_den = den, k->rows_mul = mul;
}

void kkernel_tile_grid(kkernel *k, int n, const int *axis, const int64_t *nb, const int64_t *block) {
  if (n < 1 || n > (int)(sizeof k->tile_nb / sizeof k->tile_nb[0])) return;
  k->tile_axes = n;
  for (int i = 0; i < n; i++) {
    k->tile_axis[i] = axis ? axis[i] : i;
    k->tile_nb[i] = nb[i];
    k->tile_block[i] = block[i];
  }
}

/* A symbolic extent as index arithmetic over the run's symbol values (the
 * q_dims parameter): extents are positive, so a floor division is a division. */
static kexpr *run_extent(kbuilder *b, kkernel *k, int dims_param, const qir_dim *e) {
  switch (e->kind) {
  case QIR_DIM_CONST: return ke_int(b, e->c);
  case QIR_DIM_SYM: return ke_cast(b, ke_load(b, k, dims_param, ke_int(b, e->sym)), b->index_type);
  default: break;
  }
  kexpr *x = run_extent(b, k, dims_param, e->a), *y = run_extent(b, k, dims_param, e->b);
  switch (e->kind) {
  case QIR_DIM_ADD: return ke_add(b, x, y);
  case QIR_DIM_SUB: return ke_sub(b, x, y);
  case QIR_DIM_MUL: return ke_mul(b, x, y);
  case QIR_DIM_FLOORDIV: return ke_div(b, x, y);
  case QIR_DIM_MIN: return ke_min(b, x, y);
  default: return ke_max(b, x, y);
  }
}

/* Modules with dimension symbols: kernels are planned at the bound, and a
 * block whose tile starts past the run's extent along a symbolic axis would
 * only compute elements nothing reads.  Its body runs in a loop of one trip,
 * or none for such a block (block-uniform, so barriers inside stay legal),
 * reading the extents from q_dims, a new last parameter.  An rprogram copies
 * the body with its task for the block index: its tasks skip alike. */
static void skip_blocks_past_run(cg_ctx *cg, kkernel *k) {
  const qir_type *t = k->n_params ? &k->args[0]->type : NULL;
  if (!cg->run_dims || !t || !k->tile_axes) return;
  bool symbolic = false;
  for (int i = 0; i < k->tile_axes; i++) {
    int d = k->tile_axis[i];
    symbolic |= d < t->rank && t->sym[d] && t->sym[d]->kind != QIR_DIM_CONST;
  }
  if (!symbolic) return;
  kbuilder *b = &cg->kb;
  b->index_type = k->index_type;
  int p = k->n_params;   /* q_dims, a new last parameter (dropped again if nothing reads it) */
  kparam *params = qir_alloc(cg->m, sizeof *params * (size_t)(p + 1));
  qir_value **args = qir_alloc(cg->m, sizeof *args * (size_t)(p + 1));
  memcpy(params, k->params, sizeof *params * (size_t)p);
  memcpy(args, k->args, sizeof *args * (size_t)p);
  params[p] = (kparam){.name = "q_dims", .dtype = QIR_I64, .numel = cg->run_dims->type.dims[0]};
  args[p] = cg->run_dims;
  k->params = params, k->args = args, k->n_params = p + 1;
  kexpr *inside = NULL, *stride = ke_int(b, 1);
  /* bid_remap: the raw block index over the run's tiles (run_stride, column
   * counts run_nb) renumbered over the bound's (stride) */
  kexpr *raw = ke_bid(b), *run_stride = ke_int(b, 1), *remap = NULL;
  bool prefix = true;   /* only the slowest axis varies: the run's blocks are a prefix, numbered alike */
  for (int i = k->tile_axes - 1; i >= 0; i--) {
    int d = k->tile_axis[i];
    kexpr *run_nb = ke_int(b, k->tile_nb[i]);
    if (d < t->rank && t->sym[d] && t->sym[d]->kind != QIR_DIM_CONST && k->tile_nb[i] > 1) {
      kexpr *q = ke_div(b, ke_bid(b), stride);
      kexpr *tile = i == 0 ? q : ke_mod(b, q, ke_int(b, k->tile_nb[i]));
      kexpr *extent = run_extent(b, k, p, t->sym[d]);
      inside = ke_and(b, inside, ke_lt(b, ke_mul(b, tile, ke_int(b, k->tile_block[i])), extent));
      run_nb = ke_div(b, ke_add(b, extent, ke_int(b, k->tile_block[i] - 1)), ke_int(b, k->tile_block[i]));
      prefix &= i == 0;
    }
    kexpr *q = ke_div(b, raw, run_stride);
    kexpr *at = ke_mul(b, i == 0 ? q : ke_mod(b, q, run_nb), stride);
    remap = remap ? ke_add(b, remap, at) : at;
    run_stride = ke_mul(b, run_stride, run_nb);
    stride = ke_mul(b, stride, ke_int(b, k->tile_nb[i]));
  }
  if (!inside) {   /* every symbolic axis is one tile */
    k->n_params = p;
    return;
  }
  /* a raw index past the run's tiles (a launch of the bound's grid) maps past the bound's */
  inside = ke_and(b, inside, ke_lt(b, ke_bid(b), stride));
  k->bid_remap = ke_select(b, ke_lt(b, raw, run_stride), prefix ? raw : remap, stride, b->index_type);
  /* C's body, and the GPU's where it has one of its own (a Hopper kernel's roles) */
  for (kstmt **at = &k->body; at; at = at == &k->body && k->gpu_body ? &k->gpu_body : NULL) {
    kvar *once = kvar_new(b, k, "run", KT_I32, 0, KV_BLOCK);
    kstmt *body = *at;
    *at = ks_seq(b);
    ks_add(b, *at, ks_comment(b, "a block past the run's extents skips its tile"));
    kstmt *l = ks_for(b, once, ke_int(b, 0), ke_pick(b, inside, ke_int(b, 1), ke_int(b, 0)), 1, body);
    l->uniform = true;
    ks_add(b, *at, l);
  }
}

/* ---------------------------------------------------------------- flat kernel */

/* Threads over output elements; a serial reduction loop per element if any. */
static void lower_flat(lower_env *env, int threads, int per_thread) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *c = env->comp;
  int64_t numel = qir_type_numel(&k->args[0]->type);
  k->threads = threads;
  k->grid = ceil_div(numel, (int64_t)threads * per_thread);
  if (k->args[0]->type.rank && k->args[0]->type.dims[0] > 0)
    kkernel_rows(k, numel / k->args[0]->type.dims[0], (int64_t)threads * per_thread, 1);
  ktype t = ktype_of_dtype(k->args[0]->type.dtype);
  kstmt *body = ks_seq(b);
  kvar *v = NULL;
  kexpr *flat;
  if (per_thread > 1) {
    v = kvar_new(b, k, "v", KT_I32, 0, KV_LOCAL);
    flat = ke_add(b, ke_mul(b, ke_add(b, ke_mul(b, ke_bid(b), ke_int(b, per_thread)), ke_var(b, v)), ke_int(b, threads)), ke_tid(b));
  } else {
    flat = ke_add(b, ke_mul(b, ke_bid(b), ke_int(b, threads)), ke_tid(b));
  }
  kvar *o = kvar_new(b, k, "o", b->index_type, 0, KV_LOCAL);
  kstmt *outer = ks_seq(b);
  ks_add(b, outer, ks_decl(b, o, flat));
  kexpr *idx[MAX_AXES];
  decompose(env, ke_var(b, o), c->axis_extents, c->n_axes, idx);
  for (int d = 0; d < c->n_axes; d++) {
    if (idx[d]->kind == KE_INT) { env->vars[d] = idx[d]; continue; }
    kvar *iv = kvar_new(b, k, "i", b->index_type, 0, KV_LOCAL);
    ks_add(b, body, ks_decl(b, iv, idx[d]));
    env->vars[d] = ke_var(b, iv);
  }
  if (c->n_red == 0) {
    ks_add(b, body, ks_store(b, 0, ke_var(b, o), body_value(env, t)));
  } else {
    kvar *acc = kvar_new(b, k, "acc", t, 0, KV_LOCAL);
    ks_add(b, body, ks_decl(b, acc, reduce_init(b, c->reduce, t)));
    kstmt *bias = add_bias(env, acc, NULL, t);
    if (bias) ks_add(b, body, bias);
    kstmt *inner = NULL;
    kstmt *loops = reduce_loops(env, &inner);
    ks_add(b, inner, ks_assign(b, acc, NULL, combine(b, c->reduce, ke_var(b, acc), body_value(env, t), t)));
    ks_add(b, body, loops);
    ks_add(b, body, ks_store(b, 0, ke_var(b, o), stored_value(env, env->vars, ke_var(b, acc), t)));
  }
  ks_add(b, outer, numel % ((int64_t)threads * per_thread) ? ks_if(b, ke_lt(b, ke_var(b, o), ke_int(b, numel)), body, NULL) : body);
  kstmt *guarded = outer;
  if (v) {
    kstmt *loop = ks_for(b, v, ke_int(b, 0), ke_int(b, per_thread), 1, guarded);
    loop->unroll = true;
    ks_add(b, k->body, loop);
  } else {
    ks_add(b, k->body, guarded);
  }
  k->summary = qir_sprintf(b->m, "flat: %d threads x %d elements per thread", threads, per_thread);
}

/* A lane's share of its output's reduction: lane 0 starts from the bias (if
 * any), then lanes take the flattened reduction's points lane, lane + step,
 * ... into acc.  The output variables are already in env->vars. */
static kstmt *lane_reduction(lower_env *env, kvar *acc, kvar *lane, int step, ktype t) {
  kbuilder *b = env->b;
  const qir_compute *c = env->comp;
  int64_t rtot = 1;
  for (int a = 0; a < c->n_red; a++) rtot *= c->axis_extents[c->n_axes + a];
  kstmt *work = ks_seq(b), *rbody = ks_seq(b), *bias = add_bias(env, acc, NULL, t);
  if (bias) ks_add(b, work, ks_if(b, ke_bin(b, QIR_FN_EQ, ke_var(b, lane), ke_int(b, 0), KT_BOOL), bias, NULL));
  kvar *r = kvar_new(b, env->k, "r", b->index_type, 0, KV_LOCAL);
  kexpr *ridx[MAX_AXES];
  decompose(env, ke_var(b, r), c->axis_extents + c->n_axes, c->n_red, ridx);
  for (int a = 0; a < c->n_red; a++) {
    if (ridx[a]->kind == KE_INT) { env->vars[c->n_axes + a] = ridx[a]; continue; }
    kvar *rv = kvar_new(b, env->k, "k", b->index_type, 0, KV_LOCAL);
    ks_add(b, rbody, ks_decl(b, rv, ridx[a]));
    env->vars[c->n_axes + a] = ke_var(b, rv);
  }
  ks_add(b, rbody, ks_assign(b, acc, NULL, combine(b, c->reduce, ke_var(b, acc), body_value(env, t), t)));
  ks_add(b, work, ks_for(b, r, ke_var(b, lane), ke_int(b, rtot), step, rbody));
  return work;
}

/* ---------------------------------------------------------------- warp per output */

static void lower_warp_reduce(lower_env *env) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *c = env->comp;
  int W = env->cg->warp, threads = 256, per_block = threads / W;
  int64_t numel = qir_type_numel(&k->args[0]->type), rtot = 1;
  for (int a = 0; a < c->n_red; a++) rtot *= c->axis_extents[c->n_axes + a];
  k->threads = threads;
  k->grid = ceil_div(numel, per_block);
  if (k->args[0]->type.rank && k->args[0]->type.dims[0] > 0) kkernel_rows(k, numel / k->args[0]->type.dims[0], per_block, 1);
  ktype t = ktype_of_dtype(k->args[0]->type.dtype);
  kvar *lane = let(env, "lane", ke_mod(b, ke_tid(b), ke_int(b, W)));
  kvar *o = let(env, "o", ke_add(b, ke_mul(b, ke_bid(b), ke_int(b, per_block)), ke_div(b, ke_tid(b), ke_int(b, W))));
  kvar *acc = kvar_new(b, k, "acc", t, 0, KV_THREAD);
  kexpr *in_range = numel % per_block ? ke_lt(b, ke_var(b, o), ke_int(b, numel)) : NULL;

  kstmt *p1 = ks_seq(b);
  ks_add(b, p1, ks_assign(b, acc, NULL, reduce_init(b, c->reduce, t)));
  kstmt *work = ks_seq(b);
  kexpr *idx[MAX_AXES];
  decompose(env, ke_var(b, o), c->axis_extents, c->n_axes, idx);
  for (int d = 0; d < c->n_axes; d++) {
    if (idx[d]->kind == KE_INT) { env->vars[d] = idx[d]; continue; }
    kvar *iv = kvar_new(b, k, "i", b->index_type, 0, KV_LOCAL);
    ks_add(b, work, ks_decl(b, iv, idx[d]));
    env->vars[d] = ke_var(b, iv);
  }
  ks_add(b, work, lane_reduction(env, acc, lane, W, t));
  ks_add(b, p1, ks_if(b, in_range, work, NULL));
  ks_add(b, k->body, p1);
  ks_add(b, k->body, ks_warp_reduce(b, acc, reduce_fn(c->reduce), 0));
  kexpr *oc[MAX_AXES];
  decompose(env, ke_var(b, o), c->axis_extents, c->n_axes, oc);
  kstmt *st = ks_store(b, 0, ke_var(b, o), stored_value(env, oc, ke_var(b, acc), t));
  ks_add(b, k->body, ks_if(b, ke_and(b, ke_bin(b, QIR_FN_EQ, ke_var(b, lane), ke_int(b, 0), KT_BOOL), in_range), st, NULL));
  k->summary = qir_sprintf(b->m, "warp per output: %d threads, %d outputs per block, reduction of %" PRId64 " by %d lanes",
                           threads, per_block, rtot, W);
}

/* ---------------------------------------------------------------- split reduction */

/* An rsplit plan: `rsplit` lanes share each output point's reduction (lane l
 * takes the flattened reduction's points l, l + rsplit, ...), then combine by
 * shuffles within their aligned group (within each warp of it when the group
 * spans warps, whose results lane 0 of the group then combines from shared
 * memory); a block covers the plan's block tile of outputs, one group of
 * lanes per output. */
static void lower_rsplit(lower_env *env, const tile_plan *p) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *c = env->comp;
  int n = c->n_axes, L = (int)p->rsplit;
  const int64_t *E = c->axis_extents;
  int64_t nb[MAX_AXES], grid = 1, per_block = 1, rtot = 1;
  for (int d = 0; d < n; d++) {
    nb[d] = ceil_div(E[d], p->block[d]);
    grid *= nb[d];
    per_block *= p->block[d];
  }
  for (int a = 0; a < c->n_red; a++) rtot *= E[n + a];
  /* whole warps: shuffles name every lane of the warp, so a block of fewer
   * lanes gets idle ones (identity values, no store) */
  int W = env->cg->warp;
  k->grid = grid;
  if (n) kkernel_rows(k, 1, p->block[0], grid / nb[0]);
  kkernel_tile_grid(k, n, NULL, nb, p->block);
  k->threads = (int)ceil_div(per_block * L, W) * W;
  ktype t = ktype_of_dtype(k->args[0]->type.dtype);
  kvar *lane = let(env, "lane", ke_mod(b, ke_tid(b), ke_int(b, L)));
  kexpr *bc[MAX_AXES], *sc[MAX_AXES], *idx[MAX_AXES], *guard = NULL;
  if (k->threads != per_block * L) guard = ke_lt(b, ke_tid(b), ke_int(b, per_block * L));
  decompose(env, ke_bid(b), nb, n, bc);
  decompose(env, ke_div(b, ke_tid(b), ke_int(b, L)), p->block, n, sc);
  for (int d = 0; d < n; d++) {
    kexpr *i = ke_add(b, ke_mul(b, bc[d], ke_int(b, p->block[d])), sc[d]);
    idx[d] = i->kind == KE_INT ? i : ke_var(b, let(env, "o", i));
    if (E[d] % p->block[d]) guard = ke_and(b, guard, ke_lt(b, idx[d], ke_int(b, E[d])));
    env->vars[d] = idx[d];
  }
  kvar *acc = kvar_new(b, k, "acc", t, 0, KV_THREAD);
  ks_add(b, k->body, ks_assign(b, acc, NULL, reduce_init(b, c->reduce, t)));
  ks_add(b, k->body, ks_if(b, guard, lane_reduction(env, acc, lane, L, t), NULL));
  ks_add(b, k->body, ks_warp_reduce(b, acc, reduce_fn(c->reduce), L < W ? L : W));
  kexpr *total = ke_var(b, acc);
  kstmt *fin = ks_seq(b);
  if (L > W) {                          /* the group's warps, through shared memory */
    int64_t wpg = L / W;
    kvar *part = kvar_new(b, k, "part", t, k->threads / W, KV_SHARED);
    kexpr *first = ke_bin(b, QIR_FN_EQ, ke_mod(b, ke_tid(b), ke_int(b, W)), ke_int(b, 0), KT_BOOL);
    ks_add(b, k->body, ks_if(b, first, ks_assign(b, part, ke_div(b, ke_tid(b), ke_int(b, W)), ke_var(b, acc)), NULL));
    ks_add(b, k->body, ks_barrier(b));
    kvar *sum = kvar_new(b, k, "sum", t, 0, KV_LOCAL), *q = kvar_new(b, k, "q", KT_I32, 0, KV_LOCAL);
    kexpr *base = ke_mul(b, ke_div(b, ke_tid(b), ke_int(b, L)), ke_int(b, wpg));
    ks_add(b, fin, ks_decl(b, sum, ke_elem(b, part, base)));
    kstmt *more = ks_assign(b, sum, NULL, combine(b, c->reduce, ke_var(b, sum), ke_elem(b, part, ke_add(b, base, ke_var(b, q))), t));
    ks_add(b, fin, ks_for(b, q, ke_int(b, 1), ke_int(b, wpg), 1, more));
    total = ke_var(b, sum);
  }
  ks_add(b, fin, ks_store(b, 0, out_index(env, idx), stored_value(env, idx, total, t)));
  ks_add(b, k->body, ks_if(b, ke_and(b, ke_bin(b, QIR_FN_EQ, ke_var(b, lane), ke_int(b, 0), KT_BOOL), guard), fin, NULL));
  k->summary = qir_sprintf(b->m, "split reduction: %" PRId64 " outputs per block x %d lanes, grid %" PRId64
                           ", reduction of %" PRId64 " by %d lanes%s", per_block, L, grid, rtot, L,
                           k->threads != per_block * L ? " (block padded to whole warps)" : "");
}

/* ---------------------------------------------------------------- tiled kernel */

/* Chooses which accesses to stage and computes their footprints for one
 * reduction step.  lo[v]/size[v]: range of every compute variable over a block
 * and a step, as expressions (lo) and extents (size); vlo[v]/vhi[v]: the range
 * of each output variable over every block (an index that may leave its
 * dimension is tested).  Only the kernel's tensor parameters are staged (not
 * a staged group's tiles, already in shared memory). */
static void plan_staging(lower_env *env, const tile_plan *p, kexpr *const *lo, const int64_t *size, const double *vlo,
                         const double *vhi) {
  kbuilder *b = env->b;
  const qir_compute *c = env->comp;
  int nv = c->n_axes + c->n_red;
  const qir_expr *acc[64];
  int n_acc = 0;
  collect_accesses(c->body, acc, &n_acc, 64);
  int64_t budget = p->smem_budget > 0 ? p->smem_budget : SMEM_BUDGET;
  for (int i = 0; i < n_acc && env->n_staged < MAX_STAGED; i++) {
    const qir_expr *e = acc[i];
    bool dup = e->operand >= env->k->n_params - 1;
    for (int s = 0; s < env->n_staged; s++) dup |= qir_expr_equal(env->staged[s].access, e);
    if (dup) continue;
    uint32_t used = 0;
    for (int j = 0; j < e->n_args; j++) used |= vars_used(e->args[j]);
    bool has_red = false, ok = true;
    int64_t reuse = 1;          /* points of the block that read each element */
    for (int a = 0; a < c->n_red; a++) has_red |= (used >> (c->n_axes + a)) & 1;
    for (int d = 0; d < c->n_axes && reuse < TILE_MAX; d++)
      if (!((used >> d) & 1)) reuse *= p->block[d];
    if (!has_red || reuse < (p->min_reuse > 2 ? p->min_reuse : 2)) continue;
    staged_access sa = {.access = e, .rank = e->n_args};
    int64_t elems = 1;
    const qir_type *at = &env->args[e->operand]->type;
    for (int j = 0; j < e->n_args && ok; j++) {
      int64_t *coef = sa.coef[j], k0;
      if (!qir_expr_affine(e->args[j], nv, coef, &k0)) { ok = false; break; }
      sa.k0[j] = k0;
      /* the index's range over every block and step (tiles rounded up):
       * inside [0, dim) everywhere means no bounds test */
      double imin = (double)k0, imax = (double)k0;   /* double: no overflow on absurd coefficients */
      for (int v = 0; v < nv; v++) {
        double bot = v < c->n_axes ? vlo[v] : 0;
        double top = v < c->n_axes ? vhi[v]
                                   : (double)(ceil_div(c->axis_extents[v], p->rstep[v - c->n_axes]) * p->rstep[v - c->n_axes] - 1);
        imax += (double)coef[v] * (coef[v] > 0 ? top : bot);
        imin += (double)coef[v] * (coef[v] > 0 ? bot : top);
      }
      sa.guard[j] = imin < 0 || imax >= (double)at->dims[j];
      kexpr *origin = ke_int(b, k0);
      int64_t ext = 1;
      for (int v = 0; v < nv; v++) {
        if (!coef[v]) continue;
        /* lowest index: coef > 0 at the range's start, coef < 0 at its end */
        kexpr *at = coef[v] > 0 ? lo[v] : ke_add(b, lo[v], ke_int(b, size[v] - 1));
        origin = ke_add(b, origin, ke_mul(b, ke_int(b, coef[v]), at));
        ext += (coef[v] > 0 ? coef[v] : -coef[v]) * (size[v] - 1);
      }
      sa.origin[j] = origin;
      sa.ext[j] = ext;
      elems *= ext;
    }
    if (!ok) continue;
    int64_t padded = 1;
    for (int j = sa.rank - 1; j >= 0; j--) {
      sa.pdims[j] = sa.ext[j] + (j == sa.rank - 1 ? p->pad : 0);
      sa.stride[j] = padded;
      padded *= sa.pdims[j];
    }
    ktype t = ktype_of_dtype(env->args[e->operand]->type.dtype);
    int64_t bytes = padded * (t == KT_F64 || t == KT_I64 || t == KT_U64 ? 8 : 4);
    if (bytes > budget) continue;
    budget -= bytes;
    sa.slot_elems = padded;     /* the shared array: simt_pipe_layout */
    sa.run_dim = -1;
    env->staged[env->n_staged++] = sa;
  }
}

/* Cooperative load of one staged tile: element f of the footprint by thread f % threads
 * (groups of `vec` consecutive elements per thread). */
static kstmt *stage_load(lower_env *env, staged_access *sa, int64_t vec) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_type *t = &env->args[sa->access->operand]->type;
  int64_t elems = 1;
  for (int j = 0; j < sa->rank; j++) elems *= sa->ext[j];
  if (vec < 1 || (sa->rank && sa->ext[sa->rank - 1] % vec)) vec = 1;
  kvar *f = kvar_new(b, k, "f", KT_I32, 0, KV_LOCAL);
  kstmt *body = ks_seq(b);
  kvar *fv = f;
  kstmt *inner = body;
  kstmt *vloop = NULL;
  if (vec > 1) {
    kvar *u = kvar_new(b, k, "u", KT_I32, 0, KV_LOCAL);
    inner = ks_seq(b);
    fv = kvar_new(b, k, "fe", KT_I32, 0, KV_LOCAL);
    ks_add(b, inner, ks_decl(b, fv, ke_add(b, ke_var(b, f), ke_var(b, u))));
    vloop = ks_for(b, u, ke_int(b, 0), ke_int(b, vec), 1, inner);
    vloop->unroll = true;
  }
  kexpr *off[QIR_MAX_RANK], *g[QIR_MAX_RANK], *inb = NULL;
  decompose(env, ke_var(b, fv), sa->ext, sa->rank, off);
  for (int j = 0; j < sa->rank; j++) {
    kvar *gv = kvar_new(b, k, "g", b->index_type, 0, KV_LOCAL);
    ks_add(b, inner, ks_decl(b, gv, ke_add(b, sa->origin[j], off[j])));
    g[j] = ke_var(b, gv);
    if (sa->guard[j])
      inb = ke_and(b, inb, ke_and(b, ke_bin(b, QIR_FN_GE, g[j], ke_int(b, 0), KT_BOOL), ke_lt(b, g[j], ke_int(b, t->dims[j]))));
  }
  kexpr *val = ke_load(b, k, 1 + sa->access->operand, strides_linear(env, g, t->dims, t->rank));
  if (inb) val = ke_select(b, inb, val, ke_cast(b, ke_int(b, 0), val->type), val->type);
  ks_add(b, inner, ks_assign(b, sa->smem, strides_linear(env, off, sa->pdims, sa->rank), val));
  if (vloop) ks_add(b, body, vloop);
  return ks_for(b, f, ke_mul(b, ke_tid(b), ke_int(b, vec)), ke_int(b, elems), (int64_t)k->threads * vec, body);
}

/* The start of each reduction axis at flat step `step` (the last axis fastest). */
static void step_starts(kbuilder *b, const tile_plan *p, int m, const int64_t *count, int64_t steps, kexpr *step, kexpr **out) {
  int64_t div = 1;
  for (int a = m - 1; a >= 0; a--) {
    kexpr *i = ke_div(b, step, ke_int(b, div));
    if (div * count[a] < steps) i = ke_mod(b, i, ke_int(b, count[a]));
    out[a] = count[a] <= 1 ? ke_cast(b, ke_int(b, 0), b->index_type) : ke_mul(b, ke_cast(b, i, b->index_type), ke_int(b, p->rstep[a]));
    div *= count[a] > 0 ? count[a] : 1;
  }
}

/* One block's tile of a reduction (see lower.h): accumulators per register
 * slot, the reduction stepped with its reused operands staged cooperatively
 * (a barrier after each load and after each step's use), then tb->store per
 * slot that lies inside the tile's limits. */
int lower_tile_block(lower_env *env, const tile_block *tb, kstmt *seq) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *c = env->comp;
  const tile_plan *p = tb->p;
  int n = c->n_axes, m = c->n_red;
  const int64_t *R = c->axis_extents + n;
  int64_t thr[MAX_AXES] = {0}, regs = 1;
  for (int d = 0; d < n; d++) {
    thr[d] = p->block[d] / p->thread[d];
    regs *= p->thread[d];
  }
  ktype t = tb->t;
  env->n_staged = 0;
  env->raw_vars = NULL;
  kexpr *const *base = tb->base;
  /* register slots: nested unrolled loops over the thread tile */
  kvar *slot_var[MAX_AXES];
  for (int d = 0; d < n; d++) slot_var[d] = p->thread[d] > 1 ? kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL) : NULL;
  kexpr *slot_index = ke_int(b, 0);
  kexpr *guard = tb->active;
  kexpr *outidx[MAX_AXES], *clamped[MAX_AXES];
  for (int d = 0; d < n; d++) {
    kexpr *i = base[d];
    if (slot_var[d]) {
      i = ke_add(b, i, ke_mul(b, ke_var(b, slot_var[d]), ke_int(b, thr[d])));
      slot_index = ke_add(b, ke_mul(b, slot_index, ke_int(b, p->thread[d])), ke_var(b, slot_var[d]));
    }
    outidx[d] = i;
    if (tb->limit[d]) guard = ke_and(b, guard, ke_lt(b, i, tb->limit[d]));
    /* Out-of-range slots compute on a clamped index instead of a guard inside
     * the loop: safe reads, no branch per tap (a guard there makes ptxas
     * spill); their results are never stored. */
    kexpr *cl = i;
    if (tb->clamp_hi[d]) cl = ke_min(b, cl, tb->clamp_hi[d]);
    if (tb->clamp_lo[d]) cl = ke_max(b, cl, tb->clamp_lo[d]);
    clamped[d] = cl;
  }
  /* wraps `s` in the slot loops; fresh loop statements each time */
  #define SLOTS(stmt_expr, out)                                                            \
    do {                                                                                   \
      kstmt *s_ = (stmt_expr);                                                             \
      for (int d_ = n - 1; d_ >= 0; d_--) {                                                \
        if (!slot_var[d_]) continue;                                                       \
        kstmt *l_ = ks_for(b, slot_var[d_], ke_int(b, 0), ke_int(b, p->thread[d_]), 1, s_); \
        l_->unroll = true;                                                                 \
        s_ = l_;                                                                           \
      }                                                                                    \
      (out) = s_;                                                                          \
    } while (0)

  kvar *acc = kvar_new(b, k, "acc", t, regs, KV_THREAD);
  kstmt *s, *init = ks_seq(b), *bias;
  ks_add(b, init, ks_assign(b, acc, slot_index, reduce_init(b, c->reduce, t)));
  /* the bias starts the sum; out-of-range slots read it at a clamped index */
  for (int d = 0; d < n; d++) env->vars[d] = clamped[d];
  if ((bias = add_bias(env, acc, slot_index, t))) ks_add(b, init, bias);
  SLOTS(init, s);
  ks_add(b, seq, tb->active ? ks_if(b, tb->active, s, NULL) : s);

  /* uniform loops over reduction steps */
  kvar *ko[MAX_AXES];
  kstmt *cur = seq;
  kexpr *lo[MAX_AXES * 2];
  int64_t size[MAX_AXES * 2];
  for (int d = 0; d < n; d++) lo[d] = tb->lo[d], size[d] = p->block[d];
  for (int a = 0; a < m; a++) {
    ko[a] = kvar_new(b, k, "ko", b->index_type, 0, KV_BLOCK);
    lo[n + a] = ke_var(b, ko[a]);
    size[n + a] = p->rstep[a];
  }
  if (p->stage) plan_staging(env, p, lo, size, tb->vlo, tb->vhi);
  /* which variables start at 0 in every block and step (origins that are constant) */
  bool lo_zero[MAX_AXES * 2];
  int64_t count[MAX_AXES], steps = 1;
  for (int d = 0; d < n; d++) lo_zero[d] = ke_is_int(lo[d], 0);
  for (int a = 0; a < m; a++) {
    count[a] = ceil_div(R[a], p->rstep[a]);
    lo_zero[n + a] = count[a] <= 1;
    steps *= count[a] > 0 ? count[a] : 1;
  }
  int S = simt_pipe_layout(env, p, lo_zero);
  /* a pipelined kernel asks for one block per SM, as the sm_80 tensor-core
   * loop does: with the thread count alone ptxas picked its own register
   * budget for these kernels and spilled (PP-OCRv4 det's 1x1 convs: 56
   * registers); its shared memory, which Roller counts with both slots,
   * bounds the blocks per SM */
  if (S >= 2 && env->n_staged > 0) env->k->min_blocks = 1;
  kexpr *kox[MAX_AXES];         /* the computing step's start per reduction axis */
  if (S == 1) {
    for (int a = 0; a < m; a++) {
      kstmt *body = ks_seq(b);
      kstmt *l = ks_for(b, ko[a], ke_int(b, 0), ke_int(b, R[a]), p->rstep[a], body);
      l->uniform = true;
      ks_add(b, cur, l);
      cur = body;
      kox[a] = ke_var(b, ko[a]);
    }
    kstmt *loads = tb->work ? ks_seq(b) : cur;
    for (int s2 = 0; s2 < env->n_staged; s2++) ks_add(b, loads, stage_load(env, &env->staged[s2], p->vec));
    if (tb->work && env->n_staged) ks_add(b, cur, ks_if(b, tb->work, loads, NULL));
    if (env->n_staged) ks_add(b, cur, ks_barrier(b));
  } else {
    /* Pipelined (lower_simt_pipe.c): one flat loop over the steps, the last
     * reduction axis fastest.  The prologue issues steps 0 .. S-2; step t
     * waits for its own copies (wait_group S-2), meets the block at one
     * barrier (which also retires every thread's reads of the slot about to
     * be refilled), issues step t+S-1 into that slot, then computes. */
    kvar *tv = kvar_new(b, k, "t", KT_I32, 0, KV_BLOCK);
    kexpr *ilo[MAX_AXES * 2];
    for (int d = 0; d < n; d++) ilo[d] = lo[d];
    for (int s2 = 0; s2 < S - 1; s2++) {
      if (s2 < steps) {
        step_starts(b, p, m, count, steps, ke_int(b, s2), ilo + n);
        ks_add(b, cur, simt_issue_step(env, p, ilo, size, ke_int(b, s2), tb->work));
      }
      if (p->simt_async) ks_add(b, cur, ks_cp_commit(b));
    }
    kstmt *body = ks_seq(b);
    kstmt *l = ks_for(b, tv, ke_int(b, 0), ke_int(b, steps), 1, body);
    l->uniform = true;
    ks_add(b, cur, l);
    cur = body;
    if (p->simt_async) ks_add(b, cur, ks_cp_wait(b, S - 2));
    ks_add(b, cur, ks_barrier(b));
    kexpr *next = ke_add(b, ke_var(b, tv), ke_int(b, S - 1));
    step_starts(b, p, m, count, steps, next, ilo + n);
    ks_add(b, cur, ks_if(b, ke_lt(b, next, ke_int(b, steps)),
                         simt_issue_step(env, p, ilo, size, ke_mod(b, next, ke_int(b, S)), tb->work), NULL));
    if (p->simt_async) ks_add(b, cur, ks_cp_commit(b));
    step_starts(b, p, m, count, steps, ke_var(b, tv), kox);
    for (int a = 0; a < m; a++) lo[n + a] = kox[a];
    for (int s2 = 0; s2 < env->n_staged; s2++) {
      staged_access *sa = &env->staged[s2];
      for (int j = 0; j < sa->rank; j++) sa->origin[j] = staged_origin(env, sa, j, lo, size);
      sa->slot = ke_mul(b, ke_mod(b, ke_var(b, tv), ke_int(b, S)), ke_int(b, sa->slot_elems));
    }
  }
  /* unroll the innermost step loops while the unrolled body stays small
   * (register tile x taps <= 128): more would spill registers */
  bool unroll[MAX_AXES] = {0};
  qir_unrolled_steps(regs, p->rstep, m, unroll);
  env->raw_vars = outidx;
  for (int d = 0; d < n; d++) env->vars[d] = clamped[d];
  /* A partial last step (R % rstep) gets its own copy of the step loops with
   * shortened bounds, so the full steps keep constant trip counts: a runtime
   * bound there makes nvcc unroll with a remainder loop, and ptxas spill. */
  kexpr *full_step = NULL;
  for (int a = 0; a < m; a++)
    if (R[a] % p->rstep[a])
      full_step = ke_and(b, full_step, ke_bin(b, QIR_FN_LE, ke_add(b, kox[a], ke_int(b, p->rstep[a])),
                                              ke_int(b, R[a]), KT_BOOL));
  kstmt *nests[2] = {NULL, NULL};
  for (int partial = 0; partial < (full_step ? 2 : 1); partial++) {
    kstmt *icur = NULL;
    for (int a = 0; a < m; a++) {
      kvar *ki = kvar_new(b, k, "ki", KT_I32, 0, KV_LOCAL);
      env->vars[n + a] = ke_add(b, kox[a], ke_var(b, ki));
      kexpr *hi = ke_int(b, p->rstep[a]);
      if (partial && R[a] % p->rstep[a])
        hi = ke_min(b, hi, ke_sub(b, ke_int(b, R[a]), kox[a]));
      kstmt *body = ks_seq(b);
      kstmt *l = ks_for(b, ki, ke_int(b, 0), hi, 1, body);
      l->unroll = unroll[a] && hi->kind == KE_INT;
      if (S > 1 && a == m - 1 && !l->unroll && hi->kind == KE_INT && p->rstep[a] % 4 == 0) {
        /* the pipelined loop unrolls the innermost step by 4: a staged row
         * read along the reduction (16-byte aligned rows) becomes one
         * 128-bit shared load per 4 points */
        kvar *kr = kvar_new(b, k, "kr", KT_I32, 0, KV_LOCAL);
        env->vars[n + a] = ke_add(b, kox[a], ke_add(b, ke_var(b, ki), ke_var(b, kr)));
        kstmt *quad = ks_seq(b);
        kstmt *in = ks_for(b, kr, ke_int(b, 0), ke_int(b, 4), 1, body);
        in->unroll = true;
        ks_add(b, quad, in);
        l = ks_for(b, ki, ke_int(b, 0), hi, 4, quad);
      }
      if (icur) ks_add(b, icur, l);
      else nests[partial] = l;
      icur = body;
    }
    kstmt *upd;
    SLOTS(ks_assign(b, acc, slot_index, combine(b, c->reduce, ke_elem(b, acc, slot_index), body_value(env, t), t)), upd);
    ks_add(b, icur, upd);
  }
  kstmt *work = full_step ? ks_if(b, full_step, nests[0], nests[1]) : nests[0];
  kexpr *busy = ke_and(b, tb->active, tb->work);
  ks_add(b, cur, busy ? ks_if(b, busy, work, NULL) : work);
  if (S == 1 && env->n_staged) ks_add(b, cur, ks_barrier(b));
  if (S > 1) {
    /* only empty groups are left; the barrier retires the last step's reads
     * before anything after this tile reuses shared memory */
    if (p->simt_async) ks_add(b, seq, ks_cp_wait(b, 0));
    ks_add(b, seq, ks_barrier(b));
  }

  SLOTS(ks_if(b, guard, tb->store(env, tb, outidx, ke_elem(b, acc, slot_index)), NULL), s);
  ks_add(b, seq, s);
  #undef SLOTS
  int staged = env->n_staged;
  env->n_staged = 0;
  env->raw_vars = NULL;
  return staged;
}

static kstmt *store_output(lower_env *env, const tile_block *tb, kexpr *const *idx, kexpr *v) {
  return ks_store(env->b, 0, out_index(env, idx), stored_value(env, idx, v, tb->t));
}

static void lower_tiled(lower_env *env, const tile_plan *p) {
  kbuilder *b = env->b;
  kkernel *k = env->k;
  const qir_compute *c = env->comp;
  int n = c->n_axes, m = c->n_red;
  const int64_t *E = c->axis_extents;
  int64_t nb[MAX_AXES] = {0}, thr[MAX_AXES] = {0}, grid = 1, threads = 1, regs = 1;
  for (int d = 0; d < n; d++) {
    nb[d] = ceil_div(E[d], p->block[d]);
    thr[d] = p->block[d] / p->thread[d];
    grid *= nb[d];
    threads *= thr[d];
    regs *= p->thread[d];
  }
  k->grid = grid;
  if (n) kkernel_rows(k, 1, p->block[0], grid / nb[0]);
  kkernel_tile_grid(k, n, NULL, nb, p->block);
  k->threads = (int)threads;
  ktype t = ktype_of_dtype(k->args[0]->type.dtype);

  /* block and thread coordinates */
  tile_block tb = {.p = p, .t = t, .store = store_output};
  kexpr *bc[MAX_AXES];
  decompose(env, ke_bid(b), nb, n, bc);
  kexpr *tc[MAX_AXES];
  decompose(env, ke_tid(b), thr, n, tc);
  for (int d = 0; d < n; d++) {
    kexpr *start = ke_mul(b, bc[d], ke_int(b, p->block[d]));
    if (start->kind != KE_INT) start = ke_var(b, let(env, "b", start));
    tb.lo[d] = start;
    kexpr *bs = ke_add(b, start, tc[d]);   /* base index of register slot 0 */
    tb.base[d] = bs->kind == KE_INT ? bs : ke_var(b, let(env, "t", bs));
    if (E[d] % p->block[d]) tb.limit[d] = ke_int(b, E[d]), tb.clamp_hi[d] = ke_int(b, E[d] - 1);
    tb.vlo[d] = 0;
    tb.vhi[d] = (double)(nb[d] * p->block[d] - 1);
  }
  int n_staged = 0;
  if (m == 0) {
    /* the slots, a guarded store each */
    kvar *slot_var[MAX_AXES];
    kexpr *idx[MAX_AXES] = {0}, *guard = NULL;
    for (int d = 0; d < n; d++) {
      kexpr *i = tb.base[d];
      slot_var[d] = p->thread[d] > 1 ? kvar_new(b, k, "e", KT_I32, 0, KV_LOCAL) : NULL;
      if (slot_var[d]) i = ke_add(b, i, ke_mul(b, ke_var(b, slot_var[d]), ke_int(b, thr[d])));
      env->vars[d] = idx[d] = i;
      if (tb.limit[d]) guard = ke_and(b, guard, ke_lt(b, i, tb.limit[d]));
    }
    kstmt *s = ks_if(b, guard, ks_store(b, 0, out_index(env, idx), body_value(env, t)), NULL);
    for (int d = n - 1; d >= 0; d--) {
      if (!slot_var[d]) continue;
      s = ks_for(b, slot_var[d], ke_int(b, 0), ke_int(b, p->thread[d]), 1, s);
      s->unroll = true;
    }
    ks_add(b, k->body, s);
  } else {
    n_staged = lower_tile_block(env, &tb, k->body);
  }

  char buf[512];
  int len = snprintf(buf, sizeof buf, "tiled: block [");
  for (int d = 0; d < n; d++) len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%" PRId64, d ? "," : "", p->block[d]);
  len += snprintf(buf + len, sizeof buf - (size_t)len, "] thread [");
  for (int d = 0; d < n; d++) len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%" PRId64, d ? "," : "", p->thread[d]);
  len += snprintf(buf + len, sizeof buf - (size_t)len, "] rstep [");
  for (int a = 0; a < m; a++) len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%" PRId64, a ? "," : "", p->rstep[a]);
  snprintf(buf + len, sizeof buf - (size_t)len, "] grid %" PRId64 " threads %" PRId64 " regs/thread %" PRId64 " staged %d smem %" PRId64 "B",
           grid, threads, regs, n_staged, k->smem_bytes);
  k->summary = qir_strdup(b->m, buf);
}

/* ---------------------------------------------------------------- plans */


static bool read_list(lower_env *env, const qir_attr_val *dict, const char *key, int want, int64_t *out,
                      bool required) {
  const qir_attr_val *v = qir_attr_dict_get(dict, key);
  if (!v) {
    if (required) {
      qir_error(env->cg->d, env->loc, "#tile plan has no '%s'", key);
      return false;
    }
    for (int i = 0; i < want; i++) out[i] = 1;
    return true;
  }
  if (v->kind != QIR_ATTR_LIST || v->n != want) {
    qir_error(env->cg->d, env->loc, "#tile '%s' must be a list of %d integers", key, want);
    return false;
  }
  for (int i = 0; i < want; i++) {
    if (v->items[i].kind != QIR_ATTR_INT || v->items[i].i < 1) {
      qir_error(env->cg->d, env->loc, "#tile '%s' must hold positive integers", key);
      return false;
    }
    if (v->items[i].i > TILE_MAX) { /* keeps the tile arithmetic below from overflowing */
      qir_error(env->cg->d, env->loc, "#tile '%s' entry %" PRId64 " is out of range (at most %d)", key, v->items[i].i,
                TILE_MAX);
      return false;
    }
    out[i] = v->items[i].i;
  }
  return true;
}

/* `mma` and `mma_axes` of a plan: the matrix-unit shape and the M, N, K axes;
 * the warp tiles along M and N are whole fragments, every other axis is 1. */
static bool mma_from_attr(lower_env *env, const qir_attr_val *dict, tile_plan *p) {
  const qir_compute *c = env->comp;
  int n = c->n_axes, m = c->n_red;
  const qir_attr_val *shape = qir_attr_dict_get(dict, "mma"), *axes = qir_attr_dict_get(dict, "mma_axes");
  if (!shape && !axes) return true;
  int64_t sh[3], ax[3];
  if (!read_list(env, dict, "mma", 3, sh, true)) return false;
  /* mma_precision = "tf32": f32 operands rounded to TF32, mma.sync m16n8k8 */
  const qir_attr_val *prec = qir_attr_dict_get(dict, "mma_precision");
  bool tf32 = prec && prec->kind == QIR_ATTR_STRING && !strcmp(prec->s, "tf32");
  if (prec && !tf32) {
    qir_error(env->cg->d, env->loc, "#tile mma_precision must be \"tf32\"");
    return false;
  }
  bool sync = sh[0] == Q_MMA && sh[1] == Q_MMA / 2 && sh[2] == (tf32 ? Q_MMA / 2 : Q_MMA);
  /* Hopper's wgmma: m64nNk16, N a multiple of 8 up to 256 (lower_wgmma.c) */
  bool wgmma = !tf32 && sh[0] == 64 && sh[1] % 8 == 0 && sh[1] <= 256 && sh[2] == Q_MMA;
  if (!sync && !wgmma && (tf32 || sh[0] != Q_MMA || sh[1] != Q_MMA || sh[2] != Q_MMA)) {
    qir_error(env->cg->d, env->loc,
              tf32 ? "#tile mma = [%" PRId64 ", %" PRId64 ", %" PRId64 "]: with mma_precision = \"tf32\" qcodegen emits [16, 8, 8] (mma.sync .tf32) only"
                   : "#tile mma = [%" PRId64 ", %" PRId64 ", %" PRId64 "]: qcodegen emits [16, 16, 16] (wmma, MFMA), [16, 8, 16] (mma.sync) "
                     "and [64, N, 16] (wgmma, N a multiple of 8 up to 256) only",
              sh[0], sh[1], sh[2]);
    return false;
  }
  p->tf32 = tf32;
  p->wgmma = wgmma;
  if (wgmma) sync = true;   /* stages as the pipelined loop's */
  /* the pipelined loop stages its tiles; 16x16x16 fragments load once per step */
  const qir_attr_val *sv = qir_attr_dict_get(dict, "stages");
  int64_t lo_stages = sync ? 2 : 1, hi_stages = sync ? QIR_MAX_STAGES : 1;
  if (sv && (sv->kind != QIR_ATTR_INT || sv->i < lo_stages || sv->i > hi_stages)) {
    if (sync) qir_error(env->cg->d, env->loc, "#tile stages must be from 2 to %d", QIR_MAX_STAGES);
    else qir_error(env->cg->d, env->loc, "#tile stages needs mma = [16, 8, 16] (the cp.async pipeline)");
    return false;
  }
  p->mma_sync = sync && !wgmma;
  p->stages = sv ? (int)sv->i : (int)lo_stages;
  /* persistent = P (wgmma): P blocks, each computing every P-th output tile */
  const qir_attr_val *pv = qir_attr_dict_get(dict, "persistent");
  if (pv && (!wgmma || pv->kind != QIR_ATTR_INT || pv->i < 1)) {
    qir_error(env->cg->d, env->loc, "#tile persistent must be a positive block count, with mma = [64, N, 16] (wgmma)");
    return false;
  }
  p->persistent = pv ? pv->i : 0;
  /* [M, N, K], or with wgmma [M, N, K, M2]: M2 an outer axis of M, rows of a band */
  bool ok = axes && axes->kind == QIR_ATTR_LIST && (axes->n == 3 || (wgmma && axes->n == 4));
  int64_t m2 = -1;
  for (int i = 0; ok && i < axes->n; i++) {
    ok = axes->items[i].kind == QIR_ATTR_INT && axes->items[i].i >= 0 && axes->items[i].i < (i == 2 ? m : n);
    if (ok && i < 3) ax[i] = axes->items[i].i;
    if (ok && i == 3) m2 = axes->items[i].i;
  }
  if (!ok || ax[0] == ax[1] || m2 == ax[0] || m2 == ax[1]) {
    qir_error(env->cg->d, env->loc,
              "#tile mma_axes must be [M, N, K]: two distinct output axes and a reduction axis (wgmma: or [M, N, K, M2], "
              "M2 a third output axis)");
    return false;
  }
  p->mma = true;
  p->mma_m = (int)ax[0];
  p->mma_n = (int)ax[1];
  p->mma_k = (int)ax[2];
  p->mma_m2 = (int)m2;
  for (int d = 0; d < n; d++) {
    if (d == p->mma_m2) continue;   /* the band's rows: lower_wgmma checks them */
    bool frag = d == p->mma_m || d == p->mma_n;
    if (frag ? p->thread[d] % Q_MMA != 0 : p->block[d] != 1) {
      qir_error(env->cg->d, env->loc,
                frag ? "#tile mma: thread[%d] (the warp tile) must be a multiple of %d"
                     : "#tile mma: block[%d] must be 1 (only the M and N axes are tiled)",
                d, Q_MMA);
      return false;
    }
  }
  for (int a = 0; a < m; a++)
    if (a != p->mma_k && p->rstep[a] != 1) {
      qir_error(env->cg->d, env->loc, "#tile mma: rstep[%d] must be 1 (only the K axis is stepped)", a);
      return false;
    }
  return true;
}

/* `stages` of a SIMT plan (1 to QIR_MAX_STAGES; none: lower_tile_block
 * chooses) and what its target allows: a GPU target pipelines the staged
 * loads by default, cp.async where it has it (sm_80 and later; not on HIP). */
static bool simt_stages_from_attr(lower_env *env, const qir_attr_val *dict, tile_plan *p) {
  const qir_attr_val *sv = qir_attr_dict_get(dict, "stages");
  if (sv && (sv->kind != QIR_ATTR_INT || sv->i < 1 || sv->i > QIR_MAX_STAGES)) {
    qir_error(env->cg->d, env->loc, "#tile stages must be from 1 to %d (a SIMT plan)", QIR_MAX_STAGES);
    return false;
  }
  p->stages = sv ? (int)sv->i : 0;
  simt_target_of(env, dict, p);
  return true;
}

void simt_target_of(lower_env *env, const qir_attr_val *dict, tile_plan *p) {
  const qir_attr_val *tv = qir_attr_dict_get(dict, "target");
  const qir_target *tg = tv && tv->kind == QIR_ATTR_STRING ? qir_target_get(tv->s) : NULL;
  bool cuda = tg && !strcmp(tg->backend, "cuda"), hip = tg && !strcmp(tg->backend, "hip");
  int sm = cuda && !strncmp(tg->arch, "sm_", 3) ? atoi(tg->arch + 3) : 0;
  p->simt_pipe = cuda || hip;
  p->simt_async = sm >= 80 && env->cg->backend != CG_HIP;
  p->smem_cap = tg ? tg->smem_per_block : p->smem_budget;
  if (env->cg->backend == CG_HIP && p->smem_cap > HIP_LDS_LIMIT) p->smem_cap = HIP_LDS_LIMIT;
}

/* `rsplit`: lanes per output point's reduction, a power of two; one thread
 * per output (thread tile 1).  Up to a warp they combine by shuffles; more
 * lanes (whole warps) combine their warps' results through shared memory. */
static bool rsplit_from_attr(lower_env *env, const qir_attr_val *dict, tile_plan *p) {
  const qir_compute *c = env->comp;
  const qir_attr_val *v = qir_attr_dict_get(dict, "rsplit");
  p->rsplit = 1;
  if (!v) return true;
  if (v->kind != QIR_ATTR_INT || v->i < 1 || v->i > 1024 || (v->i & (v->i - 1))) {
    qir_error(env->cg->d, env->loc, "#tile rsplit must be a power of two from 1 to 1024");
    return false;
  }
  if (v->i > 1 && (c->n_red == 0 || p->mma)) {
    qir_error(env->cg->d, env->loc, "#tile rsplit needs a reduction (and no mma)");
    return false;
  }
  for (int d = 0; d < c->n_axes; d++)
    if (v->i > 1 && p->thread[d] != 1) {
      qir_error(env->cg->d, env->loc, "#tile rsplit: thread[%d] must be 1 (one output per group of lanes)", d);
      return false;
    }
  p->rsplit = v->i;
  return true;
}

static bool plan_from_attr(lower_env *env, const qir_attr *attr, tile_plan *p) {
  const qir_compute *c = env->comp;
  int n = c->n_axes, m = c->n_red;
  const qir_attr_val *dict = &attr->val;
  env->loc = attr->loc.line ? attr->loc : env->loc;
  if (dict->kind != QIR_ATTR_DICT) {
    qir_error(env->cg->d, env->loc, "#tile must be a dictionary");
    return false;
  }
  memset(p, 0, sizeof *p);
  p->mma_m2 = -1;
  if (!read_list(env, dict, "block", n, p->block, true) || !read_list(env, dict, "thread", n, p->thread, false) ||
      !read_list(env, dict, "rstep", m, p->rstep, m > 0 && false))
    return false;
  if (m && !qir_attr_dict_get(dict, "rstep"))
    for (int a = 0; a < m; a++) p->rstep[a] = c->axis_extents[n + a];
  int64_t tile_elems = 1; /* bounded so that staging sizes cannot overflow */
  for (int d = 0; d < n + m; d++) {
    tile_elems *= d < n ? p->block[d] : p->rstep[d - n] < TILE_MAX ? p->rstep[d - n] : TILE_MAX;
    if (tile_elems > TILE_MAX) {
      qir_error(env->cg->d, env->loc, "#tile block and rstep span more than %d elements", TILE_MAX);
      return false;
    }
  }
  if (!mma_from_attr(env, dict, p)) return false;
  if (!rsplit_from_attr(env, dict, p)) return false;
  int64_t threads = 1;
  bool band = p->wgmma && p->mma_m2 >= 0;   /* thread[M]: a warpgroup's rows of the band's block[M] x block[M2] */
  if (band) threads = (p->block[p->mma_m] * p->block[p->mma_m2] + p->thread[p->mma_m] - 1) / p->thread[p->mma_m];
  for (int d = 0; d < n; d++) {
    if (band && (d == p->mma_m || d == p->mma_m2)) continue;
    if (p->block[d] % p->thread[d]) {
      qir_error(env->cg->d, env->loc, "#tile thread[%d] = %" PRId64 " does not divide block[%d] = %" PRId64, d,
                p->thread[d], d, p->block[d]);
      return false;
    }
    threads *= p->block[d] / p->thread[d];
    if (threads > 1024) break; /* reported below; more factors could overflow */
  }
  for (int a = 0; a < m; a++)
    if (p->rstep[a] > c->axis_extents[n + a]) p->rstep[a] = c->axis_extents[n + a] ? c->axis_extents[n + a] : 1;
  if (p->mma) { /* whole instructions along K: the staged tail is zero */
    int64_t ik = p->tf32 ? Q_MMA / 2 : Q_MMA;
    p->rstep[p->mma_k] = (p->rstep[p->mma_k] + ik - 1) / ik * ik;
  }
  const qir_attr_val *v;
  /* mma plans count warps: the plan's target may have 32- or 64-lane warps */
  if ((v = qir_attr_dict_get(dict, "threads")) &&
      (v->kind != QIR_ATTR_INT || (p->wgmma ? v->i != (threads + 1) * 128   /* consumer warpgroups and a producer */
                                   : p->mma ? v->i != threads * 32 && v->i != threads * 64
                                   : v->i != threads * p->rsplit))) {
    qir_error(env->cg->d, env->loc, "#tile threads = %" PRId64 " but block/thread give %" PRId64 "%s", v->i, threads,
              p->mma ? " warps" : "");
    return false;
  }
  if (p->mma) threads *= env->cg->warp;
  if (p->rsplit > 1) threads *= p->rsplit;
  if (threads > 1024) {
    qir_error(env->cg->d, env->loc, "#tile needs %" PRId64 " threads per block (at most 1024)", threads);
    return false;
  }
  if ((v = qir_attr_dict_get(dict, "grid"))) {
    bool ok = v->kind == QIR_ATTR_LIST && v->n == n;
    for (int d = 0; ok && d < n; d++)
      ok = v->items[d].kind == QIR_ATTR_INT && v->items[d].i == ceil_div(c->axis_extents[d], p->block[d]);
    if (!ok) {
      qir_error(env->cg->d, env->loc, "#tile grid does not match ceil(extent / block) per axis");
      return false;
    }
  }
  p->pad = (v = qir_attr_dict_get(dict, "smem_pad")) && v->kind == QIR_ATTR_INT && v->i > 0 ? v->i : 0;
  p->vec = (v = qir_attr_dict_get(dict, "vec")) && v->kind == QIR_ATTR_INT && v->i > 0 ? v->i : 1;
  if (p->pad > TILE_MAX || p->vec > TILE_MAX) {
    qir_error(env->cg->d, env->loc, "#tile smem_pad / vec out of range (at most %d)", TILE_MAX);
    return false;
  }
  p->stage = m > 0 && qir_attr_dict_get(dict, "rstep") != NULL;
  /* stage what the plan budgeted (roller sized it for its target; CUDA goes
   * past 48 KiB through dynamic shared memory), within the LDS on AMD */
  p->smem_budget = SMEM_BUDGET;
  if ((v = qir_attr_dict_get(dict, "smem")) && v->kind == QIR_ATTR_INT && v->i > p->smem_budget)
    p->smem_budget = v->i < TILE_MAX ? v->i : TILE_MAX;
  if (env->cg->backend == CG_HIP && p->smem_budget > HIP_LDS_LIMIT) p->smem_budget = HIP_LDS_LIMIT;
  return p->mma || simt_stages_from_attr(env, dict, p);
}

/* Accesses that involve a reduction variable and depend on the innermost
 * non-trivial axis but not on axis d: reuse a block tile along d would give. */
static int reuse_score(const qir_compute *c, int d, int inner) {
  const qir_expr *acc[64];
  int n_acc = 0, score = 0;
  collect_accesses(c->body, acc, &n_acc, 64);
  for (int i = 0; i < n_acc; i++) {
    uint32_t used = 0;
    for (int j = 0; j < acc[i]->n_args; j++) used |= vars_used(acc[i]->args[j]);
    bool red = false;
    for (int a = 0; a < c->n_red; a++) red |= (used >> (c->n_axes + a)) & 1;
    if (!red || ((used >> d) & 1)) continue;
    if (inner < 0 || ((used >> inner) & 1)) score++;
  }
  return score;
}

/* A plan for a reduction with reuse and no #tile: power-of-two blocks along
 * the innermost axis and the one with the most reuse (threads = block / thread,
 * powers of two); when those leave the block short of a warp, outer axes join
 * it until it is a whole warp or covers the output (roller's warp rule:
 * docs/ops.md). */
static void default_tiled_plan(const qir_compute *c, int warp, tile_plan *p) {
  int n = c->n_axes, m = c->n_red;
  memset(p, 0, sizeof *p);
  for (int d = 0; d < n; d++) p->block[d] = p->thread[d] = 1;
  int inner = -1, second = -1;
  for (int d = n - 1; d >= 0 && inner < 0; d--)
    if (c->axis_extents[d] > 1) inner = d;
  int best = 0;
  for (int d = n - 1; d >= 0; d--) {
    if (d == inner || c->axis_extents[d] <= 1) continue;
    int s = reuse_score(c, d, inner);
    if (s > best) best = s, second = d;
  }
  if (inner >= 0 && second >= 0) {
    int axes[2] = {inner, second};
    for (int i = 0; i < 2; i++) {
      int d = axes[i];
      p->block[d] = pow2_ceil(c->axis_extents[d]) < 64 ? pow2_ceil(c->axis_extents[d]) : 64;
      p->thread[d] = p->block[d] >= 32 ? 4 : p->block[d] >= 8 ? 2 : 1;
    }
    int64_t t = (p->block[inner] / p->thread[inner]) * (p->block[second] / p->thread[second]);
    for (int d = n - 1; d >= 0 && t < warp; d--) {
      if (d == inner || d == second || c->axis_extents[d] <= 1) continue;
      int64_t want = warp / t, e = pow2_ceil(c->axis_extents[d]);
      p->block[d] = e < want ? e : want;
      t *= p->block[d];
    }
  } else if (inner >= 0) {
    p->block[inner] = pow2_ceil(c->axis_extents[inner]) < 256 ? pow2_ceil(c->axis_extents[inner]) : 256;
    int64_t t = p->block[inner];
    for (int d = inner - 1; d >= 0 && t < 64; d--) {
      int64_t want = 64 / t, e = pow2_ceil(c->axis_extents[d]);
      p->block[d] = e < want ? e : want;
      t *= p->block[d];
    }
  }
  /* reduction step: about 32 reduction points, innermost axes first */
  int64_t budget = 32;
  for (int a = m - 1; a >= 0; a--) {
    int64_t r = c->axis_extents[n + a];
    int64_t s = r < budget ? r : budget;
    p->rstep[a] = s > 0 ? s : 1;
    budget /= p->rstep[a];
    if (budget < 1) budget = 1;
  }
  p->pad = 0;
  p->vec = 1;
  p->stage = true;
}

/* ---------------------------------------------------------------- entry */

/* The body refers only to existing variables and operands, with their ranks
 * (the verifier checks this too; lowering must never index past them). */
static bool body_ok(cg_ctx *cg, const qir_compute *c, const qir_expr *e, int n_args, qir_value *const *args, qir_loc loc) {
  if (!e) {
    qir_error(cg->d, loc, "compute without a body");
    return false;
  }
  qir_loc at = e->loc.line ? e->loc : loc;
  if (e->kind == QIR_EX_VAR && (e->var < 0 || e->var >= c->n_axes + c->n_red)) {
    qir_error(cg->d, at, "compute uses loop variable %d of %d", e->var, c->n_axes + c->n_red);
    return false;
  }
  if (e->kind == QIR_EX_ACCESS) {
    if (e->operand < 0 || e->operand >= n_args) {
      qir_error(cg->d, at, "compute reads operand %d of %d", e->operand, n_args);
      return false;
    }
    if (e->n_args != args[e->operand]->type.rank) {
      qir_error(cg->d, at, "operand %d has rank %d but is indexed with %d subscripts", e->operand,
                args[e->operand]->type.rank, e->n_args);
      return false;
    }
  }
  int want = e->kind == QIR_EX_SELECT ? 3 : e->kind == QIR_EX_BINARY ? 2 : e->kind == QIR_EX_UNARY || e->kind == QIR_EX_CAST ? 1 : -1;
  if (want >= 0 && e->n_args != want) {
    qir_error(cg->d, at, "malformed compute expression");
    return false;
  }
  for (int i = 0; i < e->n_args; i++)
    if (!body_ok(cg, c, e->args[i], n_args, args, loc)) return false;
  return true;
}

kkernel *cg_finish_kernel(cg_ctx *cg, kkernel *k, const qir_value *out, const qir_op *plan_op, const char *what,
                          qir_loc loc) {
  kkernel_prune(k);
  double reach = 0;
  if (kkernel_index_overflow(k, &reach)) {
    /* a lowering typed some index arithmetic 32-bit that can pass 2^31: refuse rather than emit it */
    qir_error(cg->d, loc, "internal error: %s: 32-bit index arithmetic that can reach %.0f, past 2^31 - 1", what, reach);
    return NULL;
  }
  if (k->index_type == KT_I64) k->summary = qir_sprintf(cg->m, "%s, 64-bit indexes", k->summary ? k->summary : "");
  k->summary = qir_sprintf(cg->m, "%s: %s", what, k->summary ? k->summary : "");
  /* where the checker's reports point: the op in the module that computes `out` */
  const qir_op *src = out->def ? out->def : plan_op;
  k->id = cg->n_kernels;
  k->loc = src ? src->loc : (qir_loc){0};
  k->op_text = !src ? "?" : out->name ? qir_sprintf(cg->m, "%%%s = %s", out->name, qir_opinfo_get(src->code)->name)
                                       : qir_opinfo_get(src->code)->name;
  if (cg->n_kernels == cg->cap_kernels) {
    int cap = cg->cap_kernels ? cg->cap_kernels * 2 : 16;
    kkernel **ks = qir_alloc(cg->m, sizeof *ks * (size_t)cap);
    if (cg->n_kernels) memcpy(ks, cg->kernels, sizeof *ks * (size_t)cg->n_kernels);
    cg->kernels = ks;
    cg->cap_kernels = cap;
  }
  cg->kernels[cg->n_kernels++] = k;
  return k;
}

kkernel *cg_lower_compute(cg_ctx *cg, const qir_op *plan_op, const qir_compute *comp, int n_args,
                          qir_value *const *args, qir_value *out, const char *what) {
  kbuilder *b = &cg->kb;
  kkernel *k = kkernel_new(b, qir_sprintf(cg->m, "k%d", cg->n_kernels), 1 + n_args);
  k->warp = cg->warp;
  lower_env env = {.cg = cg, .b = b, .k = k, .comp = comp, .args = args, .loc = plan_op ? plan_op->loc : (qir_loc){0}};
  if (comp->n_axes + comp->n_red > MAX_AXES) {
    qir_error(cg->d, env.loc, "compute with %d axes: qcodegen supports at most %d", comp->n_axes + comp->n_red, MAX_AXES);
    return NULL;
  }
  const cg_group *grp = plan_op ? cg_group_of(cg, plan_op) : NULL;
  /* a row group's bodies read its reductions (checked when it was composed) */
  if (!(grp && (grp->rows || grp->stages)) && !body_ok(cg, comp, comp->body, n_args, args, env.loc)) return NULL;
  if ((comp->n_red > 0) != (comp->reduce != QIR_REDUCE_NONE)) {
    qir_error(cg->d, env.loc, "compute: reduction axes and reduction kind disagree");
    return NULL;
  }
  if (comp->n_axes != out->type.rank) {
    qir_error(cg->d, env.loc, "compute has %d output axes but its result has rank %d", comp->n_axes, out->type.rank);
    return NULL;
  }
  for (int v = 0; v < comp->n_axes + comp->n_red; v++) {
    if (comp->axis_extents[v] < 0 || (v < comp->n_axes && comp->axis_extents[v] != out->type.dims[v])) {
      qir_error(cg->d, env.loc, "compute axis %d has extent %" PRId64 " but the result's dimension is %" PRId64, v,
                comp->axis_extents[v], v < comp->n_axes ? out->type.dims[v] : 0);
      return NULL;
    }
  }
  k->params[0] = (kparam){.name = "out", .dtype = out->type.dtype, .numel = qir_type_numel(&out->type), .written = true};
  k->args[0] = out;
  for (int i = 0; i < n_args; i++) {
    k->params[1 + i] = (kparam){.name = qir_sprintf(cg->m, "in%d", i), .dtype = args[i]->type.dtype,
                                .numel = qir_type_numel(&args[i]->type)};
    k->args[1 + i] = args[i];
  }
  int64_t numel = qir_type_numel(&out->type), rtot = 1;
  for (int a = 0; a < comp->n_red; a++)
    rtot = rtot > INT64_MAX / 4 / (comp->axis_extents[comp->n_axes + a] + 1) ? INT64_MAX / 4 : rtot * comp->axis_extents[comp->n_axes + a];
  /* every lowering below types its index arithmetic from this choice */
  kkernel_choose_index(b, k, rtot);
  if (grp && grp->epilogue) env.group = grp;
  if (grp) what = qir_sprintf(cg->m, "kernel @%s", grp->name);
  env.body = comp->body;
  env.bias = qir_compute_bias_term(comp, &env.body);
  if (!env.bias) env.body = comp->body;
  const qir_attr *tile = plan_op ? qir_op_attr(plan_op, "tile") : NULL;
  tile_plan p;
  if (grp && grp->rows) {
    lower_rows(&env, grp->rows);
  } else if (grp && grp->stages) {
    lower_stages(&env, grp->stages);
  } else if (tile) {
    if (!plan_from_attr(&env, tile, &p)) return NULL;
    /* mma.sync exists on CUDA only: HIP (and C checking HIP's 64-lane plans)
     * runs an m16n8k16 plan's tiles with its 16x16x16 MFMA loop */
    if (p.tf32 && (cg->warp != 32 || cg->backend == CG_HIP)) {
      qir_error(cg->d, env.loc, "#tile mma_precision = \"tf32\" needs mma.sync (CUDA, or C with 32-lane warps): "
                                "qcodegen has no xf32 MFMA lowering");
      return NULL;
    }
    /* wgmma exists on CUDA only: HIP (and C checking HIP's 64-lane plans) runs
     * the plan's warpgroup tiles as warp tiles of its 16x16x16 MFMA loop */
    if (p.wgmma && (cg->warp != 32 || cg->backend == CG_HIP)) {
      if (p.mma_m2 >= 0) {   /* a band's rows as one warpgroup tile along M alone (padded), M2 a block coordinate */
        p.block[p.mma_m] = p.thread[p.mma_m];
        p.block[p.mma_m2] = 1;
        p.mma_m2 = -1;
      }
      p.wgmma = false;
    }
    if (p.wgmma) lower_wgmma(&env, &p);
    else if (p.mma && p.mma_sync && cg->warp == 32 && cg->backend != CG_HIP) lower_mma_pipe(&env, &p);
    else if (p.mma) lower_mma(&env, &p);
    else if (p.rsplit > 1) lower_rsplit(&env, &p);
    else lower_tiled(&env, &p);
  } else if (comp->n_red == 0) {
    int threads = numel >= 256 ? 256 : (int)((numel + 31) / 32 * 32);
    if (threads < 32) threads = 32;
    lower_flat(&env, threads, numel >= (1 << 16) ? 4 : 1);
  } else {
    bool reuse = false;
    for (int d = 0; d < comp->n_axes; d++) reuse |= comp->axis_extents[d] > 1 && reuse_score(comp, d, -1) > 0;
    if (reuse && rtot >= 16) {
      default_tiled_plan(comp, cg->warp, &p);
      lower_tiled(&env, &p);
    } else if (rtot >= 64) {
      lower_warp_reduce(&env);
    } else {
      int threads = numel >= 256 ? 256 : (int)((numel + 31) / 32 * 32);
      if (threads < 32) threads = 32;
      lower_flat(&env, threads, 1);
    }
  }
  if (env.failed) return NULL;
  skip_blocks_past_run(cg, k);
  b->index_type = KT_I32;
  return cg_finish_kernel(cg, k, out, plan_op, what, env.loc);
}
