/* symshape.c: the shape rules of ops.c over symbolic extents.
 *
 * An op whose types name dimension symbols (`f32[batch<=16,3]`) is checked
 * and typed by running its static rule at sample assignments of the symbols
 * it uses: every symbol at its bound, every one at its least value, and each
 * in turn at its least value, the values just above and below its ends and a
 * few between, the others at their bounds or their least values.  A rule that
 * fails at a sample fails the op, with the assignment named.  Each result
 * extent that varies must then match, at every sample, an expression over the
 * operands' extents from a fixed family:
 *   E, p*E+q, (E+q)/s (s <= 64), E1+E2+q, E1*E2, E1-E2+q
 * where E, E1, E2 are the operands' symbolic extents (or the symbols
 * themselves), p, q integers: what elementwise ops, contractions, reductions,
 * reshapes, concat, pad, slice, gather, convolutions, pooling and resizes
 * make of an extent.  A declared result extent that matches every sample is
 * kept as written.  An extent no member matches is an error at the op: the
 * op makes a size qir cannot write (issue 29: such ops refuse symbolic input).
 */
#include "opsutil.h"

#include <string.h>

#define MAX_SAMPLES 96
#define MAX_CANDIDATES 32

typedef struct {
  int n;
  int64_t *at;                  /* n x n_syms values */
} samples;

static bool op_uses_symbols(const qir_op *op, bool *used, int n_syms) {
  bool any = false;
  for (int i = 0; i < op->n_operands + op->n_results; i++) {
    const qir_value *v = i < op->n_operands ? op->operands[i] : op->results[i - op->n_operands];
    if (!v) continue;
    for (int k = 0; k < v->type.rank; k++)
      if (v->type.sym[k])
        for (int s = 0; s < n_syms; s++)
          if (qir_dim_uses(v->type.sym[k], s)) used[s] = any = true;
  }
  if (op->comp && op->comp->axis_dims)
    for (int a = 0; a < op->comp->n_axes + op->comp->n_red; a++)
      if (op->comp->axis_dims[a])
        for (int s = 0; s < n_syms; s++)
          if (qir_dim_uses(op->comp->axis_dims[a], s)) used[s] = any = true;
  return any;
}

static void push_sample(qir_module *m, samples *S, const int64_t *base, int sym, int64_t value) {
  if (S->n >= MAX_SAMPLES) return;
  int64_t *row = S->at + (size_t)S->n * (size_t)m->n_syms;
  memcpy(row, base, sizeof *row * (size_t)m->n_syms);
  if (sym >= 0) {
    const qir_dimsym *d = &m->syms[sym];
    value = value < d->lo ? d->lo : value > d->hi ? d->hi : value;
    row[sym] = d->lo + (value - d->lo) / d->step * d->step; /* a value the symbol takes */
  }
  S->n++;
}

static void make_samples(qir_module *m, const bool *used, samples *S) {
  int n = m->n_syms;
  int64_t hi[64], lo[64], mid[64];
  for (int s = 0; s < n && s < 64; s++) {
    hi[s] = m->syms[s].hi;
    lo[s] = used[s] ? m->syms[s].lo : m->syms[s].hi;
    mid[s] = used[s] ? m->syms[s].lo + (m->syms[s].hi - m->syms[s].lo) / 2 / m->syms[s].step * m->syms[s].step : m->syms[s].hi;
  }
  push_sample(m, S, hi, -1, 0);
  push_sample(m, S, lo, -1, 0);
  push_sample(m, S, mid, -1, 0);
  for (int s = 0; s < n; s++) {
    if (!used[s]) continue;
    int64_t a = m->syms[s].lo, b = m->syms[s].hi, span = b - a, st = m->syms[s].step;
    int64_t picks[] = {a, a + st, a + 2 * st, a + 3 * st, b - st, b - 2 * st, a + span / 3, a + 2 * span / 3, a + span / 2 + st, a + span / 5};
    for (size_t k = 0; k < sizeof picks / sizeof picks[0]; k++) {
      push_sample(m, S, hi, s, picks[k]);
      push_sample(m, S, lo, s, picks[k]);
    }
  }
}

/* The static rule at one sample: operand and declared result types (and a
 * compute's axes) are set to their values there for the call and restored. */
static bool infer_at(qir_module *m, const qir_op *op, const int64_t *at, qir_type *out, qir_diag *d) {
  int n = op->n_operands + op->n_results, n_ax = op->comp ? op->comp->n_axes + op->comp->n_red : 0;
  qir_type saved[n ? n : 1];
  int64_t saved_ext[n_ax ? n_ax : 1];
  qir_op_types_at(op, at, saved, saved_ext);
  bool ok = qir_infer_types_static(m, op, out, d);
  qir_op_types_restore(op, saved, saved_ext);
  return ok;
}

/* Whether e equals want[j] at every sample j (row j of at: stride values). */
static bool matches(const qir_dim *e, const int64_t *at, int n, int stride, const int64_t *want) {
  for (int j = 0; j < n; j++)
    if (qir_dim_eval(e, at + (size_t)j * (size_t)stride) != want[j]) return false;
  return true;
}

const qir_dim *qir_dim_fit(qir_module *m, const int64_t *at, int n, int stride, const int64_t *want,
                           const qir_dim *const *cand, int nc) {
  for (int i = 0; i < nc; i++)
    if (matches(cand[i], at, n, stride, want)) return cand[i];
  for (int i = 0; i < nc; i++) {
    const qir_dim *E = cand[i];
    int64_t e0 = qir_dim_eval(E, at);
    for (int j = 1; j < n; j++) { /* p*E+q from two samples where E differs */
      int64_t de = qir_dim_eval(E, at + (size_t)j * (size_t)stride) - e0, dv = want[j] - want[0];
      if (!de) continue;
      if (dv % de == 0) {
        const qir_dim *f = qir_dim_binary(m, QIR_DIM_ADD, qir_dim_binary(m, QIR_DIM_MUL, E, qir_dim_const(m, dv / de)),
                                          qir_dim_const(m, want[0] - dv / de * e0));
        if (matches(f, at, n, stride, want)) return f;
      }
      break;
    }
    for (int64_t div = 2; div <= 64; div++) /* (E+q)/div */
      for (int64_t q = div * want[0] - e0; q < div * want[0] - e0 + div; q++) {
        const qir_dim *f = qir_dim_binary(m, QIR_DIM_FLOORDIV, qir_dim_binary(m, QIR_DIM_ADD, E, qir_dim_const(m, q)),
                                          qir_dim_const(m, div));
        if (f && matches(f, at, n, stride, want)) return f;
      }
  }
  for (int i = 0; i < nc; i++)
    for (int j = 0; j < nc; j++) {
      if (i == j) continue;
      const qir_dim *forms[3] = {i < j ? qir_dim_binary(m, QIR_DIM_ADD, cand[i], cand[j]) : NULL,
                                 i < j ? qir_dim_binary(m, QIR_DIM_MUL, cand[i], cand[j]) : NULL,
                                 qir_dim_binary(m, QIR_DIM_SUB, cand[i], cand[j])};
      for (int k = 0; k < 3; k++) {
        if (!forms[k]) continue;
        const qir_dim *f = k == 1 ? forms[k]
                                  : qir_dim_binary(m, QIR_DIM_ADD, forms[k], qir_dim_const(m, want[0] - qir_dim_eval(forms[k], at)));
        if (matches(f, at, n, stride, want)) return f;
      }
    }
  return NULL;
}

void qir_dim_add_candidate(const qir_dim **cand, int *n, int cap, const qir_dim *e) {
  if (!e || e->kind == QIR_DIM_CONST) return;
  for (int i = 0; i < *n; i++)
    if (cand[i] == e) return;
  if (*n < cap) cand[(*n)++] = e;
}

static const char *assignment_text(qir_module *m, const bool *used, const int64_t *at) {
  const char *s = "";
  for (int k = 0; k < m->n_syms; k++)
    if (used[k]) s = qir_sprintf(m, "%s%s%s = %lld", s, *s ? ", " : "", m->syms[k].name, (long long)at[k]);
  return s;
}

bool qir_infer_types(qir_module *m, const qir_op *op, qir_type *out, qir_diag *d) {
  int ns = m->n_syms;
  bool used[64] = {false};
  if (ns == 0 || ns > 64 || !op_uses_symbols(op, used, ns)) return qir_infer_types_static(m, op, out, d);
  const char *name = qir_opinfo_get(op->code) ? qir_opinfo_get(op->code)->name : "?";
  if (op->code == QIR_OP_CONST) {
    if (d) qir_error(d, op->loc, "a constant cannot have symbolic extents");
    return false;
  }
  /* a kernel group, loop or if: its rule relates its types to its regions',
   * which name the same extents, so it compares them as they are */
  if (op->n_regions) return qir_infer_types_static(m, op, out, d);
  for (int i = 0; i < op->n_operands; i++)
    if (!op->operands[i]) return qir_infer_types_static(m, op, out, d);
  samples S = {0, qir_alloc(m, sizeof(int64_t) * (size_t)MAX_SAMPLES * (size_t)ns)};
  make_samples(m, used, &S);
  int nr = op->n_results;
  qir_type *at_results = qir_alloc(m, sizeof *at_results * (size_t)S.n * (size_t)(nr ? nr : 1));
  for (int s = 0; s < S.n; s++) {
    const int64_t *at = S.at + (size_t)s * (size_t)ns;
    qir_diag quiet;
    qir_diag_init_quiet(&quiet);
    if (!infer_at(m, op, at, at_results + (size_t)s * (size_t)nr, &quiet)) {
      if (d) {
        infer_at(m, op, at, at_results + (size_t)s * (size_t)nr, d); /* the rule's own message */
        qir_diag_report(d, QIR_SEV_NOTE, op->loc, "with %s", assignment_text(m, used, at));
      }
      return false;
    }
  }
  /* candidates: the operands' symbolic extents, the declared ones, the symbols */
  const qir_dim *cand[MAX_CANDIDATES];
  int n_cand = 0;
  for (int i = 0; i < op->n_operands; i++)
    for (int k = 0; k < op->operands[i]->type.rank; k++)
      qir_dim_add_candidate(cand, &n_cand, MAX_CANDIDATES, op->operands[i]->type.sym[k]);
  if (op->comp)
    for (int a = 0; a < op->comp->n_axes + op->comp->n_red; a++)
      qir_dim_add_candidate(cand, &n_cand, MAX_CANDIDATES, op->comp->axis_dims[a]);
  for (int k = 0; k < ns; k++)
    if (used[k]) qir_dim_add_candidate(cand, &n_cand, MAX_CANDIDATES, qir_dim_sym(m, k));
  int64_t *want = qir_alloc(m, sizeof *want * (size_t)S.n);
  for (int r = 0; r < nr; r++) {
    out[r] = at_results[r]; /* the sample with every symbol at its bound */
    for (int k = 0; k < out[r].rank; k++) {
      out[r].sym[k] = NULL;
      bool varies = false;
      for (int s = 0; s < S.n; s++) {
        const qir_type *t = &at_results[(size_t)s * (size_t)nr + (size_t)r];
        if (t->rank != out[r].rank || t->dtype != out[r].dtype) {
          if (d) qir_error(d, op->loc, "'%s': result #%d changes rank or type with %s", name, r, assignment_text(m, used, S.at + (size_t)s * (size_t)ns));
          return false;
        }
        want[s] = t->dims[k];
        varies |= want[s] != want[0];
      }
      if (!varies) continue;
      const qir_dim *decl = op->results[r]->type.rank == out[r].rank ? op->results[r]->type.sym[k] : NULL;
      const qir_dim *e = decl && matches(decl, S.at, S.n, ns, want) ? decl : qir_dim_fit(m, S.at, S.n, ns, want, cand, n_cand);
      if (!e) {
        if (d) {
          const char *vals = "";
          for (int s = 0; s < S.n && s < 4; s++)
            vals = qir_sprintf(m, "%s%s%lld with %s", vals, s ? "; " : "", (long long)want[s],
                               assignment_text(m, used, S.at + (size_t)s * (size_t)ns));
          qir_error(d, op->loc,
                    "'%s': the extent of result #%d axis %d follows the dimensions in a way qir cannot write (%s)", name,
                    r, k, vals);
        }
        return false;
      }
      qir_type_set_dim(&out[r], k, e);
    }
  }
  return true;
}
