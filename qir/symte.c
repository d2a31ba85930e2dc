/* symte.c: the tensor-expression definition of an op at the run's extents.
 *
 * te.c writes an op's computes for static extents: extents appear as loop
 * extents and as literals (a concat's offset, a window's bounds, a mean's
 * count).  For an op whose types name dimension symbols, the computes are
 * written at several assignments of the symbols, which must agree in
 * structure; each literal and extent that varies is matched, as in
 * symshape.c, to an expression over the operands' extents, and the computes
 * at the bound get, in its place, that expression read from `dims`, an i64
 * tensor of the symbols' values at run time (element k: symbol k).  Every
 * term of a varying extent is masked: a reduction's term past the run's
 * extent is the reduction's identity, and an output past it is the identity
 * too (zero without a reduction), so that nothing reads past the run's
 * extents, and what lies past them is defined.
 *
 * Eight samples per symbol (its bound, values near both ends, interior
 * ones), the others rotated so no two symbols move together.  They avoid
 * extent 1 where they can: te.c writes some forms differently there (a
 * broadcast), which the general form computes as well.
 */
#include "opsutil.h"

#include <math.h>
#include <string.h>

#define N_SAMPLES 8
#define MAX_CHAIN 16
#define MAX_CAND 32

typedef struct {
  qir_module *m;
  int ns;
  int64_t at[N_SAMPLES][64];
  int n;
} sample_set;

static int64_t on_step(const qir_dimsym *s, int64_t v) {
  v = v < s->lo ? s->lo : v > s->hi ? s->hi : v;
  return s->lo + (v - s->lo) / s->step * s->step;
}

static void make_samples(qir_module *m, const bool *used, sample_set *S) {
  S->m = m, S->ns = m->n_syms, S->n = N_SAMPLES;
  for (int k = 0; k < m->n_syms; k++) {
    const qir_dimsym *s = &m->syms[k];
    int64_t span = s->hi - s->lo, lo2 = s->lo < 2 ? 2 : s->lo;
    int64_t v[N_SAMPLES] = {s->hi,       s->hi - s->step,           s->lo + span / 2, lo2 + (s->hi - lo2) / 3,
                            s->hi - 2 * s->step, lo2, lo2 + s->step, s->lo + span / 5};
    for (int j = 0; j < N_SAMPLES; j++)
      S->at[j][k] = used[k] ? on_step(s, j == 0 ? s->hi : v[(j + k) % (N_SAMPLES - 1) + 1]) : s->hi;
  }
}

/* op's computes with its types at sample j (restored after). */
static int expand_at(qir_module *m, const qir_op *op, const int64_t *at, qir_op **chain, qir_value **results) {
  int n = op->n_operands + op->n_results, n_ax = op->comp ? op->comp->n_axes + op->comp->n_red : 0;
  qir_type saved[n ? n : 1];
  int64_t saved_ext[n_ax ? n_ax : 1];
  qir_op_types_at(op, at, saved, saved_ext);
  qir_diag quiet;
  qir_diag_init_quiet(&quiet);
  int c = qir_op_expand_results(m, op, chain, MAX_CHAIN, results, &quiet);
  qir_op_types_restore(op, saved, saved_ext);
  return c;
}

/* An extent expression equal to want[] at every sample (symshape.c's family). */
static const qir_dim *fit(const sample_set *S, const int64_t *want, const qir_dim *const *cand, int nc) {
  return qir_dim_fit(S->m, &S->at[0][0], S->n, 64, want, cand, nc);
}

typedef struct {
  const sample_set *S;
  const qir_dim *cand[MAX_CAND];
  int nc;
  int dims_operand;             /* the access index of `dims` in the compute being built */
  const char *why;              /* set: no symbolic form, and why */
} builder;

/* `dims`-reading expression of extent e */
static qir_expr *dim_expr(builder *b, const qir_dim *e) {
  qir_module *m = b->S->m;
  switch (e->kind) {
  case QIR_DIM_CONST: return qir_expr_int(m, e->c);
  case QIR_DIM_SYM: {
    qir_expr *k = qir_expr_int(m, e->sym);
    return qir_expr_access(m, b->dims_operand, 1, &k);
  }
  default: break;
  }
  qir_expr *x = dim_expr(b, e->a), *y = dim_expr(b, e->b);
  switch (e->kind) {
  case QIR_DIM_ADD: return qir_expr_binary(m, QIR_FN_ADD, x, y);
  case QIR_DIM_SUB: return qir_expr_binary(m, QIR_FN_SUB, x, y);
  case QIR_DIM_MUL: return qir_expr_binary(m, QIR_FN_MUL, x, y);
  case QIR_DIM_FLOORDIV: return qir_expr_binary(m, QIR_FN_FLOORDIV, x, y);
  case QIR_DIM_MIN: return qir_expr_binary(m, QIR_FN_MIN, x, y);
  case QIR_DIM_MAX: return qir_expr_binary(m, QIR_FN_MAX, x, y);
  default: return x;
  }
}

/* A float literal that varies: x/y, y/x, x*y or 1/(x*y) for extents x and
 * y (y may be 1) among the candidates (a mean's count, a resize's scale). */
static qir_expr *fit_float(builder *b, const double *want) {
  qir_module *m = b->S->m;
  const sample_set *S = b->S;
  for (int i = 0; i < b->nc; i++)
    for (int j = -1; j < b->nc; j++)
      for (int form = 0; form < 4; form++) {
        if (j < 0 && form >= 2) continue; /* x*1 and 1/x are forms 0 and 1 */
        bool ok = true;
        for (int s = 0; s < S->n && ok; s++) {
          double x = (double)qir_dim_eval(b->cand[i], S->at[s]), y = j < 0 ? 1.0 : (double)qir_dim_eval(b->cand[j], S->at[s]);
          double v = form == 0 ? x / y : form == 1 ? y / x : form == 2 ? x * y : 1.0 / (x * y);
          ok = fabs(v - want[s]) <= 1e-12 * fabs(want[s]) + 1e-300;
        }
        if (!ok) continue;
        qir_expr *x = qir_expr_cast(m, QIR_F64, dim_expr(b, b->cand[i]));
        qir_expr *y = j < 0 ? qir_expr_float(m, 1.0) : qir_expr_cast(m, QIR_F64, dim_expr(b, b->cand[j]));
        switch (form) {
        case 0: return j < 0 ? x : qir_expr_binary(m, QIR_FN_DIV, x, y);
        case 1: return qir_expr_binary(m, QIR_FN_DIV, y, x);
        case 2: return qir_expr_binary(m, QIR_FN_MUL, x, y);
        default: return qir_expr_binary(m, QIR_FN_DIV, qir_expr_float(m, 1.0), qir_expr_binary(m, QIR_FN_MUL, x, y));
        }
      }
  return NULL;
}

/* The body at the bound (sample 0) with every literal that varies over the
 * samples replaced; bodies[j] is the same tree at sample j. */
static qir_expr *merge(builder *b, const qir_expr *const *bodies) {
  qir_module *m = b->S->m;
  const qir_expr *e0 = bodies[0];
  for (int j = 1; j < b->S->n; j++) {
    const qir_expr *e = bodies[j];
    if (e->kind != e0->kind || e->n_args != e0->n_args || e->fn != e0->fn || e->var != e0->var ||
        e->operand != e0->operand || e->cast_to != e0->cast_to) {
      b->why = "its definition changes form with the extents";
      return NULL;
    }
  }
  if (e0->kind == QIR_EX_INT) {
    int64_t want[N_SAMPLES] = {0};
    bool varies = false;
    for (int j = 0; j < b->S->n; j++) varies |= (want[j] = bodies[j]->ival) != want[0];
    if (!varies) return qir_expr_int(m, want[0]);
    const qir_dim *e = fit(b->S, want, b->cand, b->nc);
    if (!e) {
      b->why = "a number in its definition follows the extents in a way qir cannot write";
      return NULL;
    }
    return dim_expr(b, e);
  }
  if (e0->kind == QIR_EX_FLOAT) {
    double want[N_SAMPLES] = {0};
    bool varies = false;
    for (int j = 0; j < b->S->n; j++) varies |= (want[j] = bodies[j]->fval) != want[0] && !(want[j] != want[j] && want[0] != want[0]);
    if (!varies) return qir_expr_float(m, want[0]);
    qir_expr *f = fit_float(b, want);
    if (!f) b->why = "a number in its definition follows the extents in a way qir cannot write";
    return f;
  }
  qir_expr *r = qir_alloc(m, sizeof *r);
  *r = *e0;
  if (e0->n_args) r->args = qir_alloc(m, sizeof *r->args * (size_t)e0->n_args);
  for (int a = 0; a < e0->n_args; a++) {
    const qir_expr *sub[N_SAMPLES];
    for (int j = 0; j < b->S->n; j++) sub[j] = bodies[j]->args[a];
    if (!(r->args[a] = merge(b, sub))) return NULL;
  }
  return r;
}

static qir_expr *identity(qir_module *m, qir_reduce_kind k, qir_dtype t) {
  bool fl = qir_dtype_is_float(t);
  switch (k) {
  case QIR_REDUCE_PROD: return fl ? qir_expr_float(m, 1.0) : qir_expr_int(m, 1);
  case QIR_REDUCE_MAX: return fl ? qir_expr_float(m, -INFINITY) : qir_expr_int(m, qir_dtype_is_unsigned_int(t) ? 0 : INT64_MIN);
  case QIR_REDUCE_MIN: return fl ? qir_expr_float(m, INFINITY) : qir_expr_int(m, qir_dtype_is_unsigned_int(t) ? -1 : INT64_MAX);
  default: return fl ? qir_expr_float(m, 0.0) : qir_expr_int(m, 0);
  }
}

/* Whether operand x of compute c at one sample is operand x0 at the bound:
 * the same value, or the result of the same earlier compute of the chain. */
static bool same_operand(qir_op *const *chain0, qir_op *const *chain, int c, const qir_value *x, const qir_value *x0) {
  if (x == x0) return true;
  for (int p = 0; p < c; p++)
    if (x == chain[p]->results[0] && x0 == chain0[p]->results[0]) return true;
  return false;
}

int qir_op_expand_symbolic(qir_module *m, const qir_op *op, qir_value *dims, qir_op **out, int cap, qir_value **results,
                           const char **why) {
  *why = NULL;
  bool used[64] = {false};
  if (m->n_syms > 64 || cap < MAX_CHAIN) {
    *why = "too many dimension symbols";
    return 0;
  }
  for (int i = 0; i < op->n_operands + op->n_results; i++) {
    const qir_value *v = i < op->n_operands ? op->operands[i] : op->results[i - op->n_operands];
    for (int a = 0; a < v->type.rank; a++)
      for (int k = 0; v->type.sym[a] && k < m->n_syms; k++) used[k] |= qir_dim_uses(v->type.sym[a], k);
  }
  sample_set S;
  make_samples(m, used, &S);
  qir_op *chains[N_SAMPLES][MAX_CHAIN];
  qir_value *res[N_SAMPLES][QIR_MAX_RANK + 8];
  int n = 0;
  if (op->n_results > QIR_MAX_RANK + 8) {
    *why = "it has too many results";
    return 0;
  }
  for (int j = 0; j < S.n; j++) {
    memset(res[j], 0, sizeof res[j]);
    int c = expand_at(m, op, S.at[j], chains[j], res[j]);
    if (j == 0) n = c;
    if (c <= 0 || c != n) {
      *why = c <= 0 ? "it has no tensor-expression form" : "its definition changes form with the extents";
      for (int jj = 0; jj <= j; jj++)
        for (int i = 0; i < (jj == j ? (c > 0 ? c : 0) : n); i++) qir_op_unlink(chains[jj][i]);
      return 0;
    }
  }
  builder b = {.S = &S};
  for (int i = 0; i < op->n_operands + op->n_results; i++) {
    const qir_value *v = i < op->n_operands ? op->operands[i] : op->results[i - op->n_operands];
    for (int a = 0; a < v->type.rank; a++) qir_dim_add_candidate(b.cand, &b.nc, MAX_CAND, v->type.sym[a]);
  }
  for (int k = 0; k < m->n_syms; k++)
    if (used[k]) qir_dim_add_candidate(b.cand, &b.nc, MAX_CAND, qir_dim_sym(m, k));
  int built = 0;
  for (int c = 0; c < n && !b.why; c++) {
    qir_op *base = chains[0][c];
    const qir_compute *bc = base->comp;
    /* operands: the op's own, or earlier computes of the chain (by position) */
    qir_value *ops[base->n_operands + 1];
    for (int i = 0; i < base->n_operands; i++) {
      ops[i] = base->operands[i];
      for (int p = 0; p < c; p++)
        if (base->operands[i] == chains[0][p]->results[0]) ops[i] = out[p]->results[0];
      for (int j = 1; j < S.n && !b.why; j++) {
        bool same = chains[j][c]->n_operands == base->n_operands &&
                    same_operand(chains[0], chains[j], c, chains[j][c]->operands[i], base->operands[i]);
        if (!same || chains[j][c]->comp->n_axes != bc->n_axes || chains[j][c]->comp->n_red != bc->n_red ||
            chains[j][c]->comp->reduce != bc->reduce)
          b.why = "its definition changes form with the extents";
      }
    }
    if (b.why) break;
    ops[base->n_operands] = dims;
    b.dims_operand = base->n_operands;
    const qir_expr *bodies[N_SAMPLES];
    for (int j = 0; j < S.n; j++) bodies[j] = chains[j][c]->comp->body;
    qir_expr *body = merge(&b, bodies);
    if (!body) break;
    /* extents: those that vary are masked */
    qir_compute *nc = qir_compute_new(m, bc->n_axes, bc->n_red);
    qir_expr *omask = NULL, *rmask = NULL;
    for (int a = 0; a < bc->n_axes + bc->n_red && !b.why; a++) {
      int64_t want[N_SAMPLES];
      bool varies = false;
      for (int j = 0; j < S.n; j++) varies |= (want[j] = chains[j][c]->comp->axis_extents[a]) != want[0];
      nc->axis_names[a] = bc->axis_names[a];
      nc->axis_extents[a] = bc->axis_extents[a];
      if (!varies) continue;
      const qir_dim *e = fit(&S, want, b.cand, b.nc);
      if (!e || e->hi != bc->axis_extents[a]) {
        b.why = "an extent of its definition follows the extents in a way qir cannot write";
        break;
      }
      nc->axis_dims[a] = e;
      qir_expr *lt = qir_expr_binary(m, QIR_FN_LT, qir_expr_var(m, a), dim_expr(&b, e));
      qir_expr **mask = a < bc->n_axes ? &omask : &rmask;
      *mask = *mask ? qir_expr_binary(m, QIR_FN_AND, *mask, lt) : lt;
    }
    if (b.why) break;
    qir_expr *all = omask && rmask ? qir_expr_binary(m, QIR_FN_AND, omask, rmask) : omask ? omask : rmask;
    nc->reduce = bc->reduce;
    nc->body = all ? qir_expr_select(m, all, body, identity(m, bc->reduce, base->results[0]->type.dtype)) : body;
    /* a result of the op keeps its symbolic type; the chain's others are at the bound */
    qir_type t = base->results[0]->type;
    for (int r = 0; r < op->n_results; r++)
      if (res[0][r] == base->results[0]) t = op->results[r]->type;
    qir_op *k = qir_op_new(m, QIR_OP_COMPUTE, base->n_operands + 1, ops, 1, &t, op->loc);
    k->comp = nc;
    out[built++] = k;
  }
  for (int j = 0; j < S.n; j++)
    for (int i = 0; i < n; i++) qir_op_unlink(chains[j][i]);
  if (b.why) {
    for (int i = 0; i < built; i++) qir_op_unlink(out[i]);
    *why = b.why;
    return 0;
  }
  for (int r = 0; r < op->n_results; r++) {
    results[r] = NULL;
    for (int p = 0; p < n; p++)
      if (res[0][r] == chains[0][p]->results[0]) results[r] = out[p]->results[0];
    if (!results[r]) { /* a result that is an operand as it is */
      for (int i = 0; i < built; i++) qir_op_unlink(out[i]);
      *why = "a result of its definition is not computed";
      return 0;
    }
  }
  return built;
}

/* ------------------------------------------------------------- row-wise ops
 * An op is row-wise along its symbolic axes when it computes each row of
 * them (each index along such an axis) from the same rows of its operands
 * alone: then kernels planned at the bound, over tensors laid out at their
 * bound, give every size its exact rows.  Read from the op's definition:
 * an access to a symbolic axis of an operand (or of an earlier compute of
 * the chain that carries one) must be a bare output variable of the same
 * extent, which may appear nowhere else in the body; a reshape must keep
 * each symbolic axis first in its group of merged or split axes. */

#define ROW_VALUES 64

typedef struct {
  const qir_value *v[ROW_VALUES];
  unsigned rows[ROW_VALUES];
  int n;
} row_set;

static unsigned rows_of(const row_set *rs, const qir_value *v) {
  for (int i = 0; i < rs->n; i++)
    if (rs->v[i] == v) return rs->rows[i];
  unsigned r = 0;
  for (int a = 0; a < v->type.rank; a++)
    if (v->type.sym[a]) r |= 1u << a;
  return r;
}

typedef struct {
  const row_set *rs;
  const qir_op *c;
  uint64_t row_vars, other_vars;
  const char *why;
} body_walk;

static void walk_body(body_walk *w, const qir_expr *e) {
  if (!e || w->why) return;
  if (e->kind == QIR_EX_VAR) {
    if (e->var < 64) w->other_vars |= (uint64_t)1 << e->var;
    return;
  }
  if (e->kind == QIR_EX_ACCESS) {
    const qir_value *x = w->c->operands[e->operand];
    unsigned rows = rows_of(w->rs, x);
    for (int a = 0; a < e->n_args; a++) {
      const qir_expr *ix = e->args[a];
      if (a < x->type.rank && (rows & (1u << a))) {
        const qir_compute *cc = w->c->comp;
        if (ix->kind != QIR_EX_VAR) w->why = "reads a symbolic axis at computed positions (a window, a slice or a gather along it)";
        else if (ix->var >= cc->n_axes) w->why = "reduces over a symbolic axis";
        else if (cc->axis_extents[ix->var] != x->type.dims[a])
          w->why = "makes a symbolic axis of another extent (a concat, a slice or a pad along it)";
        if (w->why) return;
        if (ix->var < 64) w->row_vars |= (uint64_t)1 << ix->var;
        continue;
      }
      walk_body(w, ix);
    }
    return;
  }
  for (int i = 0; i < e->n_args; i++) walk_body(w, e->args[i]);
}

static bool view_row_wise(const qir_op *op, const char **why) {
  const qir_type *x = &op->operands[0]->type, *t = &op->results[0]->type;
  int i = 0, j = 0;
  while (i < x->rank && j < t->rank) {
    if (!x->sym[i] && x->dims[i] == 1) { i++; continue; }
    if (!t->sym[j] && t->dims[j] == 1) { j++; continue; }
    int i0 = i;
    __int128 px = x->dims[i++], pt = t->dims[j++];
    while (px != pt) {
      if (px < pt && i < x->rank) px *= x->dims[i++];
      else if (pt < px && j < t->rank) pt *= t->dims[j++];
      else break;
    }
    for (int a = i0 + 1; a < i; a++)
      if (x->sym[a]) {
        *why = "merges a symbolic axis into an outer one (its rows would move in a bound-sized layout)";
        return false;
      }
  }
  return true;
}

bool qir_op_row_wise(qir_module *m, const qir_op *op, const char **why) {
  *why = NULL;
  bool symbolic = false;
  for (int i = 0; i < op->n_operands + op->n_results && !symbolic; i++) {
    const qir_value *v = i < op->n_operands ? op->operands[i] : op->results[i - op->n_operands];
    symbolic = v && qir_type_is_symbolic(&v->type);
  }
  if (!symbolic) return true;
  if (op->code == QIR_OP_KERNEL || op->code == QIR_OP_RPROGRAM || op->code == QIR_OP_VERSIONS || op->code == QIR_OP_INPUT ||
      op->code == QIR_OP_OUTPUT || op->code == QIR_OP_YIELD)
    return true;
  if (op->n_regions) {
    *why = "is control flow over symbolic extents";
    return false;
  }
  if ((op->code == QIR_OP_RESHAPE || op->code == QIR_OP_IDENTITY) && op->n_operands == 1 && op->n_results == 1)
    return view_row_wise(op, why);
  qir_op *chain[MAX_CHAIN];
  qir_value *results[QIR_MAX_RANK + 8] = {0};
  qir_diag quiet;
  qir_diag_init_quiet(&quiet);
  bool own = op->code == QIR_OP_COMPUTE && op->comp; /* its definition is its own body */
  int n = own ? 1 : op->n_results <= QIR_MAX_RANK + 8 ? qir_op_expand_results(m, op, chain, MAX_CHAIN, results, &quiet) : 0;
  if (own) chain[0] = (qir_op *)op;
  if (n <= 0) {
    *why = "has no tensor-expression form to read its rows from";
    return false;
  }
  row_set rs = {.n = 0};
  bool ok = true;
  for (int c = 0; c < n && ok; c++) {
    body_walk w = {.rs = &rs, .c = chain[c]};
    walk_body(&w, chain[c]->comp->body);
    if (!w.why && (w.row_vars & w.other_vars)) w.why = "computes with the position along a symbolic axis (a concat, a pad or a mask)";
    if (w.why) {
      *why = w.why;
      ok = false;
    } else if (rs.n < ROW_VALUES) {
      rs.v[rs.n] = chain[c]->results[0];
      rs.rows[rs.n++] = (unsigned)w.row_vars;
    }
  }
  for (int c = 0; c < n && !own; c++) qir_op_unlink(chain[c]); /* only read: drop its uses */
  return ok;
}

/* ---------------------------------------------------- one compute in place */

bool qir_compute_has_axes_of(qir_module *m, const qir_op *op, const qir_compute *c) {
  qir_diag quiet;
  qir_diag_init_quiet(&quiet);
  qir_op *te = qir_op_to_compute(m, op, &quiet);
  const qir_compute *own = te ? te->comp : NULL;
  bool same = own && c && own->n_axes == c->n_axes && own->n_red == c->n_red;
  for (int a = 0; same && a < own->n_axes + own->n_red; a++) same = own->axis_extents[a] == c->axis_extents[a];
  if (te && te != op) qir_op_unlink(te);   /* only read: it leaves no uses behind */
  return same;
}

bool qir_op_expands_to_one(qir_module *m, const qir_op *op) {
  if (op->n_results != 1 || !m->n_syms) return false;
  int64_t ns = m->n_syms;
  qir_type t = qir_type_make(QIR_I64, 1, &ns);
  qir_op *dims = qir_op_new(m, QIR_OP_INPUT, 0, NULL, 1, &t, op->loc);   /* never inserted */
  qir_op *chain[MAX_CHAIN];
  qir_value *results[QIR_MAX_RANK + 8];
  const char *why;
  int n = qir_op_expand_symbolic(m, op, dims->results[0], chain, MAX_CHAIN, results, &why);
  bool one = n == 1 && chain[0]->comp && qir_compute_has_axes_of(m, op, chain[0]->comp);
  for (int c = 0; c < n; c++) qir_op_unlink(chain[c]);
  return one;
}
