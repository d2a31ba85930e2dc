/* symdim.c: dimension symbols and the extents written over them.
 *
 * A module declares each extent known only at run time once, with its range
 * (`dim batch = [1, 16]`); a type's axis then says how its extent follows
 * from the symbols (`f32[batch<=16,3,32,32]`, `f32[1,4,past+1<=65,32]`).
 * Expressions are interned per module, after simplification, so that passes
 * compare extents by pointer: `past+1` is one node however it was built.
 * The simplifications keep a constant on the right of + and *, fold constant
 * terms together ((x+1)+1 = x+2, x-1 is SUB(x, 1)) and nested divisions
 * ((x/2)/2 = x/4); none changes a value at any assignment of the symbols.
 */
#include <stdlib.h>
#include <string.h>

#include "qir.h"

int qir_dimsym_find(const qir_module *m, const char *name) {
  for (int i = 0; i < m->n_syms; i++)
    if (strcmp(m->syms[i].name, name) == 0) return i;
  return -1;
}

int qir_dimsym_add(qir_module *m, const char *name, int64_t lo, int64_t hi, int64_t step, qir_loc loc) {
  if (qir_dimsym_find(m, name) >= 0) return -1;
  if (m->n_syms == m->cap_syms) {
    int cap = m->cap_syms ? 2 * m->cap_syms : 4;
    qir_dimsym *grown = qir_alloc(m, sizeof *grown * (size_t)cap);
    if (m->n_syms) memcpy(grown, m->syms, sizeof *grown * (size_t)m->n_syms);
    m->syms = grown;
    m->cap_syms = cap;
  }
  m->syms[m->n_syms] = (qir_dimsym){qir_strdup(m, name), lo, hi, step > 0 ? step : 1, loc};
  return m->n_syms++;
}

/* --------------------------------------------------------------- interning */

static int64_t sat(__int128 v) {
  return v > INT64_MAX / 4 ? INT64_MAX / 4 : v < -(INT64_MAX / 4) ? -(INT64_MAX / 4) : (int64_t)v;
}

static int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static size_t key_hash(const qir_dim *k) {
  uint64_t h = (uint64_t)k->kind * 0x9e3779b97f4a7c15u;
  h = (h ^ (uint64_t)k->c) * 0x100000001b3u;
  h = (h ^ (uint64_t)(int64_t)k->sym) * 0x100000001b3u;
  h = (h ^ (uint64_t)(uintptr_t)k->a) * 0x100000001b3u;
  h = (h ^ (uint64_t)(uintptr_t)k->b) * 0x100000001b3u;
  return (size_t)(h ^ (h >> 29));
}

static bool same_key(const qir_dim *d, const qir_dim *k) {
  return d->kind == k->kind && d->c == k->c && d->sym == k->sym && d->a == k->a && d->b == k->b;
}

static void table_put(const qir_dim **table, size_t cap, const qir_dim *d) {
  size_t i = key_hash(d) & (cap - 1);
  while (table[i]) i = (i + 1) & (cap - 1);
  table[i] = d;
}

static const qir_dim *intern(qir_module *m, qir_dim key) {
  if (m->dim_cap) {
    for (size_t i = key_hash(&key) & (m->dim_cap - 1); m->dim_table[i]; i = (i + 1) & (m->dim_cap - 1))
      if (same_key(m->dim_table[i], &key)) return m->dim_table[i];
  }
  if (2 * (m->dim_count + 1) > m->dim_cap) { /* grow; the old table stays in the arena */
    size_t cap = m->dim_cap ? 2 * m->dim_cap : 64;
    const qir_dim **table = qir_alloc(m, sizeof *table * cap);
    for (size_t i = 0; i < m->dim_cap; i++)
      if (m->dim_table[i]) table_put(table, cap, m->dim_table[i]);
    m->dim_table = table;
    m->dim_cap = cap;
  }
  qir_dim *d = qir_alloc(m, sizeof *d);
  *d = key;
  table_put(m->dim_table, m->dim_cap, d);
  m->dim_count++;
  return d;
}

const qir_dim *qir_dim_const(qir_module *m, int64_t v) {
  return intern(m, (qir_dim){.kind = QIR_DIM_CONST, .c = v, .sym = -1, .lo = v, .hi = v});
}

const qir_dim *qir_dim_sym(qir_module *m, int sym) {
  const qir_dimsym *s = &m->syms[sym];
  return intern(m, (qir_dim){.kind = QIR_DIM_SYM, .sym = sym, .name = s->name, .lo = s->lo, .hi = s->hi});
}

static bool is_const(const qir_dim *d, int64_t *v) {
  if (d->kind != QIR_DIM_CONST) return false;
  if (v) *v = d->c;
  return true;
}

static void range_of(qir_dim *k) {
  const qir_dim *a = k->a, *b = k->b;
  switch (k->kind) {
  case QIR_DIM_ADD: k->lo = sat((__int128)a->lo + b->lo), k->hi = sat((__int128)a->hi + b->hi); break;
  case QIR_DIM_SUB: k->lo = sat((__int128)a->lo - b->hi), k->hi = sat((__int128)a->hi - b->lo); break;
  case QIR_DIM_MUL: {
    int64_t p[4] = {sat((__int128)a->lo * b->lo), sat((__int128)a->lo * b->hi), sat((__int128)a->hi * b->lo),
                    sat((__int128)a->hi * b->hi)};
    k->lo = k->hi = p[0];
    for (int i = 1; i < 4; i++) {
      if (p[i] < k->lo) k->lo = p[i];
      if (p[i] > k->hi) k->hi = p[i];
    }
    break;
  }
  case QIR_DIM_FLOORDIV: k->lo = floordiv(a->lo, b->c), k->hi = floordiv(a->hi, b->c); break;
  case QIR_DIM_MIN: k->lo = a->lo < b->lo ? a->lo : b->lo, k->hi = a->hi < b->hi ? a->hi : b->hi; break;
  case QIR_DIM_MAX: k->lo = a->lo > b->lo ? a->lo : b->lo, k->hi = a->hi > b->hi ? a->hi : b->hi; break;
  default: break;
  }
}

const qir_dim *qir_dim_binary(qir_module *m, qir_dim_kind kind, const qir_dim *a, const qir_dim *b) {
  int64_t x = 0, y = 0;
  bool ca = is_const(a, &x), cb = is_const(b, &y);
  switch (kind) {
  case QIR_DIM_ADD:
    if (ca && cb) return qir_dim_const(m, sat((__int128)x + y));
    if (ca) return qir_dim_binary(m, QIR_DIM_ADD, b, a);
    if (cb && y == 0) return a;
    if (cb && y < 0) return qir_dim_binary(m, QIR_DIM_SUB, a, qir_dim_const(m, -y));
    if (cb && (a->kind == QIR_DIM_ADD || a->kind == QIR_DIM_SUB) && is_const(a->b, &x))
      return qir_dim_binary(m, QIR_DIM_ADD, a->a, qir_dim_const(m, a->kind == QIR_DIM_ADD ? x + y : y - x));
    break;
  case QIR_DIM_SUB:
    if (ca && cb) return qir_dim_const(m, sat((__int128)x - y));
    if (a == b) return qir_dim_const(m, 0);
    if (cb && y == 0) return a;
    if (cb && y < 0) return qir_dim_binary(m, QIR_DIM_ADD, a, qir_dim_const(m, -y));
    if (cb && (a->kind == QIR_DIM_ADD || a->kind == QIR_DIM_SUB) && is_const(a->b, &x))
      return qir_dim_binary(m, QIR_DIM_ADD, a->a, qir_dim_const(m, a->kind == QIR_DIM_ADD ? x - y : -x - y));
    if (a->kind == QIR_DIM_ADD && a->b == b) return a->a; /* (x+y)-y */
    break;
  case QIR_DIM_MUL:
    if (ca && cb) return qir_dim_const(m, sat((__int128)x * y));
    if (ca) return qir_dim_binary(m, QIR_DIM_MUL, b, a);
    if (cb && y == 1) return a;
    if (cb && y == 0) return b;
    if (cb && a->kind == QIR_DIM_MUL && is_const(a->b, &x)) return qir_dim_binary(m, QIR_DIM_MUL, a->a, qir_dim_const(m, sat((__int128)x * y)));
    break;
  case QIR_DIM_FLOORDIV:
    if (!cb || y <= 0) return NULL; /* only by a positive constant */
    if (ca) return qir_dim_const(m, floordiv(x, y));
    if (y == 1) return a;
    if (a->kind == QIR_DIM_MUL && is_const(a->b, &x) && x % y == 0) return qir_dim_binary(m, QIR_DIM_MUL, a->a, qir_dim_const(m, x / y));
    if (a->kind == QIR_DIM_FLOORDIV) return qir_dim_binary(m, QIR_DIM_FLOORDIV, a->a, qir_dim_const(m, sat((__int128)a->b->c * y)));
    break;
  case QIR_DIM_MIN:
  case QIR_DIM_MAX:
    if (a == b) return a;
    if (a->hi <= b->lo) return kind == QIR_DIM_MIN ? a : b;
    if (b->hi <= a->lo) return kind == QIR_DIM_MIN ? b : a;
    break;
  default: return NULL;
  }
  qir_dim key = {.kind = kind, .sym = -1, .a = a, .b = b};
  range_of(&key);
  if (key.lo == key.hi) return qir_dim_const(m, key.lo);
  return intern(m, key);
}

int64_t qir_dim_eval(const qir_dim *d, const int64_t *values) {
  switch (d->kind) {
  case QIR_DIM_CONST: return d->c;
  case QIR_DIM_SYM: return values[d->sym];
  default: break;
  }
  int64_t a = qir_dim_eval(d->a, values), b = qir_dim_eval(d->b, values);
  switch (d->kind) {
  case QIR_DIM_ADD: return sat((__int128)a + b);
  case QIR_DIM_SUB: return sat((__int128)a - b);
  case QIR_DIM_MUL: return sat((__int128)a * b);
  case QIR_DIM_FLOORDIV: return floordiv(a, b);
  case QIR_DIM_MIN: return a < b ? a : b;
  case QIR_DIM_MAX: return a > b ? a : b;
  default: return 0;
  }
}

bool qir_dim_uses(const qir_dim *d, int sym) {
  if (d->kind == QIR_DIM_SYM) return d->sym == sym;
  return d->a && (qir_dim_uses(d->a, sym) || qir_dim_uses(d->b, sym));
}

const qir_dim *qir_dim_import(qir_module *to, const qir_dim *d, const qir_module *from) {
  switch (d->kind) {
  case QIR_DIM_CONST: return qir_dim_const(to, d->c);
  case QIR_DIM_SYM: {
    int k = qir_dimsym_find(to, from->syms[d->sym].name);
    return k < 0 ? NULL : qir_dim_sym(to, k);
  }
  default: {
    const qir_dim *a = qir_dim_import(to, d->a, from), *b = qir_dim_import(to, d->b, from);
    return a && b ? qir_dim_binary(to, d->kind, a, b) : NULL;
  }
  }
}

/* Replaces symbol k by the symbol map[k] (>= 0) throughout d. */
const qir_dim *qir_dim_rename(qir_module *m, const qir_dim *d, const int *map) {
  switch (d->kind) {
  case QIR_DIM_CONST: return d;
  case QIR_DIM_SYM: return map[d->sym] >= 0 ? qir_dim_sym(m, map[d->sym]) : d;
  default: return qir_dim_binary(m, d->kind, qir_dim_rename(m, d->a, map), qir_dim_rename(m, d->b, map));
  }
}

/* ------------------------------------------------------------------ versions */

bool qir_versions_region_syms(const qir_module *m, const qir_op *op, int r, int *outer_of, int64_t *fixed, char *why, size_t cap) {
  for (int k = 0; k < m->n_syms; k++) outer_of[k] = -1, fixed[k] = QIR_VERSION_FREE;
  const qir_region *reg = op->regions[r];
  if (reg->n_args != op->n_operands) {
    snprintf(why, cap, "region %d takes %d arguments for the %d operands", r, reg->n_args, op->n_operands);
    return false;
  }
  for (int i = 0; i < op->n_operands; i++) {
    const qir_type *a = &reg->args[i]->type, *o = &op->operands[i]->type;
    if (a->dtype != o->dtype || a->rank != o->rank) {
      snprintf(why, cap, "region %d's argument %d is not of the operand's element type and rank", r, i);
      return false;
    }
    for (int d = 0; d < a->rank; d++) {
      if (a->sym[d] == o->sym[d] && (a->sym[d] || a->dims[d] == o->dims[d])) continue;   /* the operand's own extent */
      const qir_dim *as = a->sym[d], *os = o->sym[d];
      if (!os || os->kind != QIR_DIM_SYM || (as && as->kind != QIR_DIM_SYM)) {
        snprintf(why, cap, "region %d's argument %d, axis %d: neither the operand's extent, nor a symbol or the least "
                 "value of the operand's symbol", r, i, d);
        return false;
      }
      const qir_dimsym *ws = &m->syms[os->sym];
      if (!as) {   /* a plan for the operand's symbol at its least value only */
        if (a->dims[d] != ws->lo || (fixed[os->sym] != QIR_VERSION_FREE && fixed[os->sym] != a->dims[d])) {
          snprintf(why, cap, "region %d's argument %d, axis %d: %lld is not the least value of '%s' (%lld)", r, i, d,
                   (long long)a->dims[d], ws->name, (long long)ws->lo);
          return false;
        }
        fixed[os->sym] = a->dims[d];
        continue;
      }
      if (outer_of[as->sym] >= 0 && outer_of[as->sym] != os->sym) {
        snprintf(why, cap, "region %d's symbol '%s' stands for both '%s' and '%s'", r, m->syms[as->sym].name,
                 m->syms[outer_of[as->sym]].name, ws->name);
        return false;
      }
      const qir_dimsym *rs = &m->syms[as->sym];
      if (rs->lo != ws->lo || rs->step != ws->step || rs->hi > ws->hi) {
        snprintf(why, cap, "region %d's symbol '%s' = [%lld, %lld] %% %lld is not '%s' = [%lld, %lld] %% %lld with a smaller bound", r,
                 rs->name, (long long)rs->lo, (long long)rs->hi, (long long)rs->step, ws->name, (long long)ws->lo,
                 (long long)ws->hi, (long long)ws->step);
        return false;
      }
      outer_of[as->sym] = os->sym;
    }
  }
  return true;
}

int qir_versions_pick(const qir_module *m, const qir_op *op, int64_t *values) {
  int *outer_of = malloc(sizeof *outer_of * (size_t)(m->n_syms + 1));
  int64_t *fixed = malloc(sizeof *fixed * (size_t)(m->n_syms + 1));
  if (!outer_of || !fixed) abort();
  char why[256];
  int picked = -1;
  for (int r = 0; r < op->n_regions && picked < 0; r++) {
    if (!qir_versions_region_syms(m, op, r, outer_of, fixed, why, sizeof why)) continue;
    bool fits = true;
    for (int k = 0; k < m->n_syms; k++) {
      if (outer_of[k] >= 0) fits &= values[outer_of[k]] <= m->syms[k].hi;   /* lo and step are the outer symbol's */
      if (fixed[k] != QIR_VERSION_FREE) fits &= values[k] == fixed[k];
    }
    if (!fits) continue;
    for (int k = 0; k < m->n_syms; k++)
      if (outer_of[k] >= 0) values[k] = values[outer_of[k]];
    picked = r;
  }
  free(outer_of);
  free(fixed);
  return picked;
}

static const qir_dim *rebuild(qir_module *m, const qir_dim *d) {
  switch (d->kind) {
  case QIR_DIM_CONST: return qir_dim_const(m, d->c);
  case QIR_DIM_SYM: /* a symbol bounded at its least value is that value */
    return m->syms[d->sym].hi == m->syms[d->sym].lo ? qir_dim_const(m, m->syms[d->sym].lo) : qir_dim_sym(m, d->sym);
  default: return qir_dim_binary(m, d->kind, rebuild(m, d->a), rebuild(m, d->b));
  }
}

static void restrict_type(qir_module *m, qir_type *t) {
  for (int i = 0; i < t->rank; i++)
    if (t->sym[i]) {
      const qir_dim *e = rebuild(m, t->sym[i]);
      t->dims[i] = e->hi;
      t->sym[i] = e->kind == QIR_DIM_CONST ? NULL : e;
    }
}

static bool restrict_op(qir_op *op, void *ctx) {
  qir_module *m = ctx;
  for (int i = 0; i < op->n_results; i++) restrict_type(m, &op->results[i]->type);
  for (int r = 0; r < op->n_regions; r++)
    for (int i = 0; i < op->regions[r]->n_args; i++) restrict_type(m, &op->regions[r]->args[i]->type);
  for (int a = 0; op->comp && a < op->comp->n_axes + op->comp->n_red; a++)
    if (op->comp->axis_dims[a]) {
      const qir_dim *e = rebuild(m, op->comp->axis_dims[a]);
      op->comp->axis_extents[a] = e->hi;
      op->comp->axis_dims[a] = e->kind == QIR_DIM_CONST ? NULL : e;
    }
  return true;
}

void qir_module_restrict(qir_module *m, const int64_t *hi, const char *suffix) {
  for (int k = 0; k < m->n_syms; k++) {
    qir_dimsym *s = &m->syms[k];
    if (hi[k] >= s->lo && hi[k] < s->hi) s->hi = s->lo + (hi[k] - s->lo) / s->step * s->step;
    if (suffix && *suffix) s->name = qir_sprintf(m, "%s%s", s->name, suffix);
  }
  /* every extent anew over the new ranges (the old nodes stay in the arena) */
  memset(m->dim_table, 0, sizeof *m->dim_table * m->dim_cap);
  m->dim_count = 0;
  qir_walk(m->body, restrict_op, m);
}

/* Moves op x (of another region) before `before`, its operands' uses kept. */
static void move_before(qir_module *m, qir_op *before, qir_op *x) {
  qir_value *saved[64], **ops = x->n_operands <= 64 ? saved : malloc(sizeof *ops * (size_t)x->n_operands);
  if (!ops) abort();
  memcpy(ops, x->operands, sizeof *ops * (size_t)x->n_operands);
  qir_op_unlink(x);
  qir_op_insert_before(before, x);
  for (int j = 0; j < x->n_operands; j++) {
    x->operands[j] = NULL;
    qir_op_set_operand(m, x, j, ops[j]);
  }
  if (ops != saved) free(ops);
}

/* Every versions op of r replaced by the region a run at `values` takes. */
static void resolve_versions(qir_module *m, qir_region *r, int64_t *values) {
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    for (int i = 0; op->code != QIR_OP_VERSIONS && i < op->n_regions; i++) resolve_versions(m, op->regions[i], values);
    if (op->code != QIR_OP_VERSIONS) continue;
    int k = qir_versions_pick(m, op, values);
    if (k < 0) k = op->n_regions - 1;
    qir_region *reg = op->regions[k];
    for (int i = 0; i < reg->n_args; i++) qir_value_replace_uses(m, reg->args[i], op->operands[i]);
    qir_op *y = reg->last;
    if (reg->first != y) next = reg->first;   /* what comes out is walked next: it may hold versions of its own */
    for (qir_op *x = reg->first, *xn; x && x != y; x = xn) {
      xn = x->next;
      move_before(m, op, x);
    }
    for (int i = 0; y && y->code == QIR_OP_YIELD && i < op->n_results && i < y->n_operands; i++)
      qir_value_replace_uses(m, op->results[i], y->operands[i]);
    qir_op_unlink(op);
  }
}

/* ------------------------------------------------------------------ text */

#define REST(w) (buf + ((size_t)(w) < n ? (size_t)(w) : n)), ((size_t)(w) < n ? n - (size_t)(w) : 0)

/* ctx 0: anything; 1: a product or an atom (a sum takes parentheses);
 * 2: an atom (the right operand of * and /). */
static int format_in(const qir_dim *d, char *buf, size_t n, int ctx) {
  int w = 0;
  switch (d->kind) {
  case QIR_DIM_CONST: return snprintf(buf, n, d->c < 0 ? "(%lld)" : "%lld", (long long)d->c);
  case QIR_DIM_SYM: return snprintf(buf, n, "%s", d->name);
  case QIR_DIM_MIN:
  case QIR_DIM_MAX:
    w += snprintf(REST(w), d->kind == QIR_DIM_MIN ? "min(" : "max(");
    w += format_in(d->a, REST(w), 0);
    w += snprintf(REST(w), ",");
    w += format_in(d->b, REST(w), 0);
    return w + snprintf(REST(w), ")");
  case QIR_DIM_ADD:
  case QIR_DIM_SUB: {
    bool paren = ctx >= 1;
    if (paren) w += snprintf(REST(w), "(");
    w += format_in(d->a, REST(w), 0);
    w += snprintf(REST(w), d->kind == QIR_DIM_ADD ? "+" : "-");
    w += format_in(d->b, REST(w), 1);
    if (paren) w += snprintf(REST(w), ")");
    return w;
  }
  case QIR_DIM_MUL:
  case QIR_DIM_FLOORDIV: {
    bool paren = ctx >= 2;
    if (paren) w += snprintf(REST(w), "(");
    w += format_in(d->a, REST(w), 1);
    w += snprintf(REST(w), d->kind == QIR_DIM_MUL ? "*" : "/");
    w += format_in(d->b, REST(w), 2);
    if (paren) w += snprintf(REST(w), ")");
    return w;
  }
  }
  return 0;
}
#undef REST

int qir_dim_format(const qir_dim *d, char *buf, size_t n) { return format_in(d, buf, n, 0); }

/* ------------------------------------------------------------------ types */

bool qir_type_is_symbolic(const qir_type *t) {
  for (int i = 0; i < t->rank; i++)
    if (t->sym[i]) return true;
  return false;
}

qir_type qir_type_at(const qir_type *t, const int64_t *values) {
  qir_type r = *t;
  for (int i = 0; i < t->rank; i++)
    if (t->sym[i]) {
      r.dims[i] = qir_dim_eval(t->sym[i], values);
      r.sym[i] = NULL;
    }
  return r;
}

const qir_dim *qir_type_dim(qir_module *m, const qir_type *t, int i) {
  return t->sym[i] ? t->sym[i] : qir_dim_const(m, t->dims[i]);
}

void qir_type_set_dim(qir_type *t, int i, const qir_dim *d) {
  t->dims[i] = d->hi;
  t->sym[i] = d->kind == QIR_DIM_CONST ? NULL : d;
}

/* ------------------------------------------------------ binding at run time */

bool qir_dims_bind(const qir_module *m, const qir_type *declared, const qir_type *actual, int64_t *values,
                   bool *bound, char *why, size_t cap) {
  if (declared->rank != actual->rank || declared->dtype != actual->dtype) {
    snprintf(why, cap, "its rank or element type differs");
    return false;
  }
  for (int pass = 0; pass < 2; pass++) /* symbols first, then the extents computed from them */
    for (int k = 0; k < declared->rank; k++) {
      const qir_dim *e = declared->sym[k];
      int64_t got = actual->dims[k];
      if (!e) {
        if (pass == 0 && got != declared->dims[k]) {
          snprintf(why, cap, "axis %d is %lld, not %lld", k, (long long)got, (long long)declared->dims[k]);
          return false;
        }
        continue;
      }
      if (pass == 0 && e->kind == QIR_DIM_SYM) {
        const qir_dimsym *s = &m->syms[e->sym];
        if (got < s->lo || got > s->hi) {
          snprintf(why, cap, "axis %d ('%s') is %lld, outside its range [%lld, %lld]", k, s->name, (long long)got,
                   (long long)s->lo, (long long)s->hi);
          return false;
        }
        if ((got - s->lo) % s->step) {
          snprintf(why, cap, "axis %d ('%s') is %lld, not %lld plus a multiple of %lld", k, s->name, (long long)got,
                   (long long)s->lo, (long long)s->step);
          return false;
        }
        if (bound[e->sym] && values[e->sym] != got) {
          snprintf(why, cap, "axis %d ('%s') is %lld, but another input set %s = %lld", k, s->name, (long long)got,
                   s->name, (long long)values[e->sym]);
          return false;
        }
        values[e->sym] = got, bound[e->sym] = true;
      } else if (pass == 1 && e->kind != QIR_DIM_SYM) {
        for (int s = 0; s < m->n_syms; s++)
          if (qir_dim_uses(e, s) && !bound[s]) {
            snprintf(why, cap, "axis %d is an extent of '%s', which no input axis gives by itself", k, m->syms[s].name);
            return false;
          }
        int64_t want = qir_dim_eval(e, values);
        if (got != want) {
          char buf[256];
          qir_dim_format(e, buf, sizeof buf);
          snprintf(why, cap, "axis %d is %lld, but %s = %lld", k, (long long)got, buf, (long long)want);
          return false;
        }
      }
    }
  return true;
}

static qir_value *op_value(const qir_op *op, int i) {
  return i < op->n_operands ? op->operands[i] : op->results[i - op->n_operands];
}

void qir_op_types_at(const qir_op *op, const int64_t *values, qir_type *saved, int64_t *saved_ext) {
  for (int i = 0; i < op->n_operands + op->n_results; i++) saved[i] = op_value(op, i)->type;
  for (int i = 0; i < op->n_operands + op->n_results; i++) op_value(op, i)->type = qir_type_at(&saved[i], values);
  for (int a = 0; op->comp && a < op->comp->n_axes + op->comp->n_red; a++) {
    saved_ext[a] = op->comp->axis_extents[a];
    if (op->comp->axis_dims[a]) op->comp->axis_extents[a] = qir_dim_eval(op->comp->axis_dims[a], values);
  }
}

void qir_op_types_restore(const qir_op *op, const qir_type *saved, const int64_t *saved_ext) {
  for (int a = 0; op->comp && a < op->comp->n_axes + op->comp->n_red; a++) op->comp->axis_extents[a] = saved_ext[a];
  for (int i = op->n_operands + op->n_results - 1; i >= 0; i--) op_value(op, i)->type = saved[i];
}

static void specialize_type(qir_type *t, const int64_t *values) { *t = qir_type_at(t, values); }

static bool specialize_op(qir_op *op, void *ctx) {
  const int64_t *values = ctx;
  for (int i = 0; i < op->n_results; i++) specialize_type(&op->results[i]->type, values);
  for (int r = 0; r < op->n_regions; r++)
    for (int i = 0; i < op->regions[r]->n_args; i++) specialize_type(&op->regions[r]->args[i]->type, values);
  if (op->comp)
    for (int a = 0; a < op->comp->n_axes + op->comp->n_red; a++)
      if (op->comp->axis_dims[a]) {
        op->comp->axis_extents[a] = qir_dim_eval(op->comp->axis_dims[a], values);
        op->comp->axis_dims[a] = NULL;
      }
  return true;
}

void qir_module_specialize(qir_module *m, const int64_t *values) {
  int64_t *all = malloc(sizeof *all * (size_t)(m->n_syms + 1));
  if (!all) abort();
  memcpy(all, values, sizeof *all * (size_t)m->n_syms);
  resolve_versions(m, m->body, all);   /* a run of one size takes one version */
  qir_walk(m->body, specialize_op, all);
  free(all);
  m->n_syms = 0;
}
