/* kast.c: kernel AST construction and the text every printer shares
 * (expressions, plain statements, scalar device helpers). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kast.h"

/* ------------------------------------------------------------ types */

const char *ktype_c(ktype t) {
  static const char *const names[] = {"int", "int32_t", "uint32_t", "int64_t", "uint64_t", "float", "double"};
  return names[t];
}

const char *ktype_suffix(ktype t) {
  static const char *const names[] = {"b", "i", "u", "l", "ul", "f", "d"};
  return names[t];
}

bool ktype_is_float(ktype t) { return t == KT_F32 || t == KT_F64; }

ktype ktype_of_dtype(qir_dtype dt) {
  switch (dt) {
  case QIR_F64: return KT_F64;
  case QIR_F32: case QIR_F16: case QIR_BF16: return KT_F32;
  case QIR_I64: return KT_I64;
  case QIR_U64: return KT_U64;
  case QIR_I32: case QIR_I16: case QIR_I8: case QIR_I4: case QIR_I2: return KT_I32;
  case QIR_U32: case QIR_U16: case QIR_U8: case QIR_U4: case QIR_U2: return KT_U32;
  default: return qir_dtype_is_float(dt) ? KT_F32 : KT_BOOL; /* the narrow floats compute in f32 */
  }
}

const char *kdtype_c(qir_dtype dt) {
  switch (dt) {
  case QIR_F64: return "double";
  case QIR_F32: return "float";
  case QIR_F16: case QIR_BF16: case QIR_U16: return "uint16_t";
  case QIR_I64: return "int64_t";
  case QIR_U64: return "uint64_t";
  case QIR_I32: return "int32_t";
  case QIR_U32: return "uint32_t";
  case QIR_I16: return "int16_t";
  case QIR_I8: case QIR_I4: case QIR_I2: return "int8_t"; /* i4/i2 sign-extended, one per byte (qir.h) */
  default: return "uint8_t";
  }
}

/* ------------------------------------------------------------ construction */

kvar *kvar_new(kbuilder *b, kkernel *k, const char *stem, ktype t, int64_t size, kvar_space sp) {
  kvar *v = qir_alloc(b->m, sizeof *v);
  v->name = qir_sprintf(b->m, "%s%d", stem, b->counter++);
  v->type = t;
  v->size = size;
  v->space = sp;
  if (k && (sp == KV_THREAD || sp == KV_SHARED || sp == KV_FRAG)) {
    kvar **vars = qir_alloc(b->m, sizeof *vars * (size_t)(k->n_vars + 1));
    if (k->n_vars) memcpy(vars, k->vars, sizeof *vars * (size_t)k->n_vars);
    vars[k->n_vars++] = v;
    k->vars = vars;
    if (sp == KV_SHARED) k->smem_bytes += kvar_bytes(v);
  }
  return v;
}

int64_t kvar_bytes(const kvar *v) {
  if (v->space != KV_SHARED) return 0;
  int64_t elem = v->raw ? 2 : v->type == KT_F64 || v->type == KT_I64 || v->type == KT_U64 ? 8 : 4;
  return v->size * elem;
}

const char *kvar_elem_c(const kvar *v) { return v->raw ? "uint16_t" : ktype_c(v->type); }

kvar *kvar_new_raw_shared(kbuilder *b, kkernel *k, const char *stem, qir_dtype dt, int64_t size) {
  kvar *v = kvar_new(b, k, stem, KT_U32, size, KV_SHARED);
  k->smem_bytes -= kvar_bytes(v);     /* counted as 32-bit words; it holds 16-bit values */
  v->raw = dt;
  k->smem_bytes += kvar_bytes(v);
  return v;
}

kvar *kvar_new_frag(kbuilder *b, kkernel *k, const char *stem, kfrag_role role, qir_dtype dt, bool col_major, int64_t count) {
  kvar *v = kvar_new(b, k, stem, KT_F32, count, KV_FRAG);
  v->frag = role;
  v->frag_dtype = dt;
  v->col_major = col_major;
  return v;
}

/* Shared variables in one dynamic buffer, each at a 128-byte boundary. */
int64_t kkernel_dynamic_smem(const kkernel *k, int64_t static_limit) {
  if (k->carved_smem) {
    int64_t end = 0;
    for (int i = 0; i < k->n_vars; i++)
      if (k->vars[i]->space == KV_SHARED && k->vars[i]->carve) {
        int64_t e = k->vars[i]->carve - 1 + (kvar_bytes(k->vars[i]) + 127) / 128 * 128;
        if (e > end) end = e;
      }
    return end;
  }
  if (k->smem_bytes <= static_limit) return 0;
  int64_t total = 0;
  for (int i = 0; i < k->n_vars; i++)
    if (k->vars[i]->space == KV_SHARED) total += (kvar_bytes(k->vars[i]) + 127) / 128 * 128;
  return total;
}

int64_t kvar_dynamic_offset(const kkernel *k, const kvar *v) {
  if (v->carve) return v->carve - 1;
  int64_t off = 0;
  for (int i = 0; i < k->n_vars && k->vars[i] != v; i++)
    if (k->vars[i]->space == KV_SHARED) off += (kvar_bytes(k->vars[i]) + 127) / 128 * 128;
  return off;
}

static kexpr *ke_new(kbuilder *b, kexpr_kind kind, ktype t) {
  kexpr *e = qir_alloc(b->m, sizeof *e);
  e->kind = kind;
  e->type = t;
  return e;
}

kexpr *ke_int(kbuilder *b, int64_t v) {
  kexpr *e = ke_new(b, KE_INT, v >= INT32_MIN && v <= INT32_MAX ? KT_I32 : KT_I64);
  e->ival = v;
  return e;
}

kexpr *ke_long(kbuilder *b, int64_t v) {
  kexpr *e = ke_new(b, KE_INT, KT_I64);
  e->ival = v;
  return e;
}

kexpr *ke_float(kbuilder *b, double v, ktype t) {
  kexpr *e = ke_new(b, KE_FLOAT, t);
  e->fval = v;
  return e;
}

kexpr *ke_var(kbuilder *b, kvar *v) {
  kexpr *e = ke_new(b, KE_VAR, v->type);
  e->var = v;
  return e;
}

kexpr *ke_elem(kbuilder *b, kvar *v, kexpr *index) {
  kexpr *e = ke_new(b, KE_ELEM, v->type);
  e->var = v;
  e->a = index;
  return e;
}

kexpr *ke_load(kbuilder *b, kkernel *k, int param, kexpr *index) {
  kexpr *e = ke_new(b, KE_LOAD, ktype_of_dtype(k->params[param].dtype));
  e->param = param;
  e->a = index;
  return e;
}

kexpr *ke_load_raw(kbuilder *b, int param, kexpr *index) {
  kexpr *e = ke_new(b, KE_LOAD, KT_U32);
  e->param = param;
  e->a = index;
  e->raw = true;
  return e;
}

kexpr *ke_warp(kbuilder *b) { return ke_new(b, KE_WARP, KT_I32); }

kexpr *ke_aligned16(kbuilder *b, int param) {
  kexpr *e = ke_new(b, KE_ALIGNED16, KT_BOOL);
  e->param = param;
  return e;
}

kexpr *ke_tf32(kbuilder *b, kexpr *f32) {
  kexpr *e = ke_new(b, KE_TF32, KT_U32);
  e->a = f32;
  return e;
}

kexpr *ke_pack16(kbuilder *b, kexpr *lo, kexpr *hi, qir_dtype dt) {
  kexpr *e = ke_new(b, KE_PACK16, KT_U32);
  e->a = lo;
  e->b = hi;
  e->dtype = dt;
  return e;
}

kexpr *ke_tid(kbuilder *b) { return ke_new(b, KE_TID, KT_I32); }
/* A 64-bit kernel's block index is a cast of the 32-bit one, not a 64-bit
 * KE_BID: an rprogram puts its task counter where KE_BID was (lower_run_tasks),
 * and the cast keeps the arithmetic over it 64-bit. */
kexpr *ke_bid(kbuilder *b) {
  kexpr *e = ke_new(b, KE_BID, KT_I32);
  return b->index_type == KT_I64 ? ke_cast(b, e, KT_I64) : e;
}

kexpr *ke_un(kbuilder *b, qir_expr_fn fn, kexpr *a, ktype t) {
  kexpr *e = ke_new(b, KE_UNARY, t);
  e->fn = fn;
  e->a = a;
  return e;
}

kexpr *ke_bin(kbuilder *b, qir_expr_fn fn, kexpr *a, kexpr *c, ktype t) {
  kexpr *e = ke_new(b, KE_BINARY, t);
  e->fn = fn;
  e->a = a;
  e->b = c;
  return e;
}

kexpr *ke_select(kbuilder *b, kexpr *cond, kexpr *a, kexpr *c, ktype t) {
  kexpr *e = ke_new(b, KE_SELECT, t);
  e->a = cond;
  e->b = a;
  e->c = c;
  return e;
}

static qir_dtype dtype_of_ktype(ktype t) {
  static const qir_dtype map[] = {QIR_BOOL, QIR_I32, QIR_U32, QIR_I64, QIR_U64, QIR_F32, QIR_F64};
  return map[t];
}

kexpr *ke_cast(kbuilder *b, kexpr *a, ktype t) {
  if (a->type == t) return a;
  if (a->kind == KE_INT && (t == KT_I32 || t == KT_I64)) return t == KT_I64 ? ke_long(b, a->ival) : ke_int(b, a->ival);
  if ((a->kind == KE_INT || a->kind == KE_FLOAT) && ktype_is_float(t))
    return ke_float(b, a->kind == KE_INT ? (double)a->ival : a->fval, t);
  kexpr *e = ke_new(b, KE_CAST, t);
  e->dtype = dtype_of_ktype(t);
  e->a = a;
  return e;
}

kexpr *ke_cast_dtype(kbuilder *b, kexpr *a, qir_dtype dt) {
  ktype t = ktype_of_dtype(dt);
  if (dt == dtype_of_ktype(t)) return ke_cast(b, a, t);
  kexpr *e = ke_new(b, KE_CAST, t);
  e->dtype = dt;
  e->a = a;
  return e;
}

bool ke_is_int(const kexpr *e, int64_t v) { return e && e->kind == KE_INT && e->ival == v; }

static ktype index_type(const kexpr *a, const kexpr *c) {
  return a->type == KT_I64 || c->type == KT_I64 ? KT_I64 : KT_I32;
}

kexpr *ke_add(kbuilder *b, kexpr *a, kexpr *c) {
  if (ke_is_int(a, 0)) return c;
  if (ke_is_int(c, 0)) return a;
  if (a->kind == KE_INT && c->kind == KE_INT) return ke_int(b, a->ival + c->ival);
  return ke_bin(b, QIR_FN_ADD, a, c, index_type(a, c));
}

kexpr *ke_sub(kbuilder *b, kexpr *a, kexpr *c) {
  if (ke_is_int(c, 0)) return a;
  if (a->kind == KE_INT && c->kind == KE_INT) return ke_int(b, a->ival - c->ival);
  return ke_bin(b, QIR_FN_SUB, a, c, index_type(a, c));
}

kexpr *ke_mul(kbuilder *b, kexpr *a, kexpr *c) {
  if (ke_is_int(a, 0) || ke_is_int(c, 0)) return ke_int(b, 0);
  if (ke_is_int(a, 1)) return c;
  if (ke_is_int(c, 1)) return a;
  if (a->kind == KE_INT && c->kind == KE_INT) return ke_int(b, a->ival * c->ival);
  return ke_bin(b, QIR_FN_MUL, a, c, index_type(a, c));
}

kexpr *ke_div(kbuilder *b, kexpr *a, kexpr *c) {
  if (ke_is_int(c, 1)) return a;
  if (ke_is_int(a, 0)) return a;
  return ke_bin(b, QIR_FN_DIV, a, c, index_type(a, c));
}

kexpr *ke_mod(kbuilder *b, kexpr *a, kexpr *c) {
  if (ke_is_int(c, 1)) return ke_int(b, 0);
  if (ke_is_int(a, 0)) return a;
  return ke_bin(b, QIR_FN_MOD, a, c, index_type(a, c));
}

kexpr *ke_min(kbuilder *b, kexpr *a, kexpr *c) { return ke_bin(b, QIR_FN_MIN, a, c, index_type(a, c)); }
kexpr *ke_max(kbuilder *b, kexpr *a, kexpr *c) { return ke_bin(b, QIR_FN_MAX, a, c, index_type(a, c)); }
kexpr *ke_pick(kbuilder *b, kexpr *cond, kexpr *a, kexpr *c) { return ke_select(b, cond, a, c, index_type(a, c)); }

kexpr *ke_lt(kbuilder *b, kexpr *a, kexpr *c) { return ke_bin(b, QIR_FN_LT, a, c, KT_BOOL); }

kexpr *ke_and(kbuilder *b, kexpr *a, kexpr *c) {
  if (!a) return c;
  if (!c) return a;
  return ke_bin(b, QIR_FN_AND, a, c, KT_BOOL);
}

static kstmt *ks_new(kbuilder *b, kstmt_kind kind) {
  kstmt *s = qir_alloc(b->m, sizeof *s);
  s->kind = kind;
  return s;
}

kstmt *ks_seq(kbuilder *b) { return ks_new(b, KS_SEQ); }

void ks_add(kbuilder *b, kstmt *seq, kstmt *s) {
  if (!s) return;
  if (seq->n_items == seq->cap_items) {
    int cap = seq->cap_items ? seq->cap_items * 2 : 8;
    kstmt **items = qir_alloc(b->m, sizeof *items * (size_t)cap);
    if (seq->n_items) memcpy(items, seq->items, sizeof *items * (size_t)seq->n_items);
    seq->items = items;
    seq->cap_items = cap;
  }
  seq->items[seq->n_items++] = s;
}

void ks_add_flat(kbuilder *b, kstmt *seq, kstmt *s) {
  if (s->kind != KS_SEQ) {
    ks_add(b, seq, s);
    return;
  }
  for (int i = 0; i < s->n_items; i++) ks_add_flat(b, seq, s->items[i]);
}

kstmt *ks_for(kbuilder *b, kvar *v, kexpr *lo, kexpr *hi, int64_t step, kstmt *body) {
  kstmt *s = ks_new(b, KS_FOR);
  s->var = v;
  s->lo = lo;
  s->hi = hi;
  s->step = step;
  s->body = body;
  return s;
}

kstmt *ks_if(kbuilder *b, kexpr *cond, kstmt *then, kstmt *els) {
  if (!cond) return then;
  kstmt *s = ks_new(b, KS_IF);
  s->cond = cond;
  s->body = then;
  s->els = els;
  return s;
}

kstmt *ks_decl(kbuilder *b, kvar *v, kexpr *init) {
  kstmt *s = ks_new(b, KS_DECL);
  s->var = v;
  s->init = init;
  return s;
}

kstmt *ks_assign(kbuilder *b, kvar *v, kexpr *index, kexpr *value) {
  kstmt *s = ks_new(b, KS_ASSIGN);
  s->var = v;
  s->index = index;
  s->value = value;
  return s;
}

kstmt *ks_store(kbuilder *b, int param, kexpr *index, kexpr *value) {
  kstmt *s = ks_new(b, KS_STORE);
  s->param = param;
  s->index = index;
  s->value = value;
  return s;
}

kstmt *ks_barrier(kbuilder *b) { return ks_new(b, KS_BARRIER); }

kstmt *ks_warp_reduce(kbuilder *b, kvar *v, qir_expr_fn fn, int width) {
  kstmt *s = ks_new(b, KS_WARP_REDUCE);
  s->step = width;
  s->var = v;
  s->red_fn = fn;
  return s;
}

kstmt *ks_comment(kbuilder *b, const char *text) {
  kstmt *s = ks_new(b, KS_COMMENT);
  s->text = text;
  return s;
}

kstmt *ks_warp_barrier(kbuilder *b) {
  kstmt *s = ks_new(b, KS_BARRIER);
  s->warp_only = true;
  return s;
}

kstmt *ks_mma_fill(kbuilder *b, kvar *acc, kexpr *index) {
  kstmt *s = ks_new(b, KS_MMA_FILL);
  s->var = acc;
  s->index = index;
  return s;
}

/* A fragment moved between registers and a shared tile (load or store). */
static kstmt *ks_mma_move(kbuilder *b, kstmt_kind kind, kvar *frag, kexpr *index, kvar *mem, kexpr *offset, int64_t ld) {
  kstmt *s = ks_new(b, kind);
  s->var = frag;
  s->index = index;
  s->mem = mem;
  s->lo = offset;
  s->step = ld;
  return s;
}

kstmt *ks_mma_load(kbuilder *b, kvar *frag, kexpr *index, kvar *mem, kexpr *offset, int64_t ld) {
  return ks_mma_move(b, KS_MMA_LOAD, frag, index, mem, offset, ld);
}

kstmt *ks_mma_sync(kbuilder *b, kvar *acc, kexpr *index, kvar *fa, kexpr *ia, kvar *fb, kexpr *ib) {
  kstmt *s = ks_new(b, KS_MMA_SYNC);
  s->var = acc;
  s->index = index;
  s->fa = fa;
  s->ia = ia;
  s->fb = fb;
  s->ib = ib;
  return s;
}

kstmt *ks_mma_store(kbuilder *b, kvar *mem, kexpr *offset, int64_t ld, kvar *acc, kexpr *index) {
  return ks_mma_move(b, KS_MMA_STORE, acc, index, mem, offset, ld);
}

kstmt *ks_vcopy16(kbuilder *b, kvar *mem, kexpr *index, int param, kexpr *src, kexpr *cond) {
  kstmt *s = ks_new(b, KS_VCOPY16);
  s->var = mem;
  s->index = index;
  s->param = param;
  s->lo = src;
  s->cond = cond;
  return s;
}

kstmt *ks_ldmatrix(kbuilder *b, kvar *regs, kexpr *index, int count, bool trans, kvar *mem, kexpr *lane_offset) {
  kstmt *s = ks_new(b, KS_LDMATRIX);
  s->var = regs;
  s->index = index;
  s->step = count;
  s->trans = trans;
  s->mem = mem;
  s->lo = lane_offset;
  return s;
}

kstmt *ks_mma16816(kbuilder *b, kvar *acc, kexpr *index, kvar *fa, kexpr *ia, kvar *fb, kexpr *ib, qir_dtype dt) {
  kstmt *s = ks_mma_sync(b, acc, index, fa, ia, fb, ib);
  s->kind = KS_MMA16816;
  s->dtype = dt;
  return s;
}

kstmt *ks_cp_async(kbuilder *b, kvar *mem, kexpr *index, int param, kexpr *src, kexpr *cond) {
  return ks_cp_async_n(b, mem, index, param, src, cond, 16);
}

kstmt *ks_cp_async_n(kbuilder *b, kvar *mem, kexpr *index, int param, kexpr *src, kexpr *cond, int bytes) {
  kstmt *s = ks_vcopy16(b, mem, index, param, src, cond);
  s->kind = KS_CP_ASYNC;
  s->step = bytes;
  return s;
}

kstmt *ks_cp_commit(kbuilder *b) { return ks_new(b, KS_CP_COMMIT); }

kstmt *ks_cp_wait(kbuilder *b, int pending) {
  kstmt *s = ks_new(b, KS_CP_WAIT);
  s->step = pending;
  return s;
}

kstmt *ks_vstore(kbuilder *b, int param, kexpr *index, kvar *values, int count) {
  kstmt *s = ks_new(b, KS_VSTORE);
  s->param = param;
  s->index = index;
  s->var = values;
  s->step = count;
  return s;
}

bool ks_is_mma(const kstmt *s) { return s->kind >= KS_MMA_FILL && s->kind <= KS_MMA16816; }

kstmt *ks_mbar(kbuilder *b, kstmt_kind kind, kvar *bars, kexpr *index, int64_t step, kexpr *parity) {
  kstmt *s = ks_new(b, kind);
  s->var = bars;
  s->index = index;
  s->step = step;
  s->value = parity;
  return s;
}

kstmt *ks_tma_load(kbuilder *b, int tmap, kvar *dst, kexpr *index, kvar *bars, kexpr *bar, kexpr *const *coord, int rank) {
  kstmt *s = ks_new(b, KS_TMA_LOAD);
  s->step = tmap;
  s->var = dst;
  s->index = index;
  s->mem = bars;
  s->ia = bar;
  for (int i = 0; i < rank; i++) s->coord[i] = coord[i];
  return s;
}

kstmt *ks_wgmma(kbuilder *b, kstmt_kind kind, const kwgmma *wg, kvar *acc, kexpr *index, kvar *sa, kexpr *ia, kvar *sb, kexpr *ib,
                int64_t step) {
  kstmt *s = ks_new(b, kind);
  s->wg = wg;
  s->var = acc;
  s->index = index;
  s->mem = sa;
  s->ia = ia;
  s->fb = sb;
  s->ib = ib;
  s->step = step;
  return s;
}

bool ks_is_wgmma(const kstmt *s) { return s->kind >= KS_WGMMA && s->kind <= KS_WGMMA_WAIT; }

bool ks_contains(const kstmt *s, kstmt_kind kind) {
  if (!s) return false;
  if (s->kind == kind) return true;
  for (int i = 0; i < s->n_items; i++)
    if (ks_contains(s->items[i], kind)) return true;
  return ks_contains(s->body, kind) || ks_contains(s->els, kind);
}

bool ks_has_sync(const kstmt *s) {
  if (!s) return false;
  if (ks_is_mma(s) || ks_is_wgmma(s)) return true;
  switch (s->kind) {
  case KS_BARRIER: case KS_WARP_REDUCE: case KS_GRID_SYNC: case KS_FLAG_WAIT: case KS_GRID_BARRIER: return true;
  case KS_SEQ:
    for (int i = 0; i < s->n_items; i++)
      if (ks_has_sync(s->items[i])) return true;
    return false;
  case KS_FOR: return ks_has_sync(s->body);
  case KS_IF: return ks_has_sync(s->body) || ks_has_sync(s->els);
  default: return false;
  }
}

bool ke_uses_var(const kexpr *e, const kvar *v) {
  if (!e) return false;
  if ((e->kind == KE_VAR || e->kind == KE_ELEM) && e->var == v) return true;
  return ke_uses_var(e->a, v) || ke_uses_var(e->b, v) || ke_uses_var(e->c, v);
}

static bool ke_uses_param(const kexpr *e, int p) {
  if (!e) return false;
  if ((e->kind == KE_LOAD || e->kind == KE_ALIGNED16) && e->param == p) return true;
  return ke_uses_param(e->a, p) || ke_uses_param(e->b, p) || ke_uses_param(e->c, p);
}

/* Whether a statement under s (other than its declaration) writes scalar v. */
static bool ks_writes_var(const kstmt *s, const kvar *v) {
  if (!s) return false;
  if (s->kind != KS_DECL && s->var == v) return true;
  for (int i = 0; i < s->n_items; i++)
    if (ks_writes_var(s->items[i], v)) return true;
  return ks_writes_var(s->body, v) || ks_writes_var(s->els, v);
}

bool ks_uses_param(const kstmt *s, int p) {
  if (!s) return false;
  if ((s->kind == KS_STORE || s->kind == KS_VSTORE || s->kind == KS_VCOPY16 || s->kind == KS_CP_ASYNC || s->kind == KS_GRID_SYNC || s->kind == KS_FLAG_WAIT ||
       s->kind == KS_FLAG_SET) && s->param == p)
    return true;
  if (ke_uses_param(s->init, p) || ke_uses_param(s->lo, p) || ke_uses_param(s->hi, p) || ke_uses_param(s->cond, p) ||
      ke_uses_param(s->index, p) || ke_uses_param(s->value, p))
    return true;
  for (int i = 0; i < s->n_items; i++)
    if (ks_uses_param(s->items[i], p)) return true;
  return ks_uses_param(s->body, p) || ks_uses_param(s->els, p);
}

bool ks_uses_var(const kstmt *s, const kvar *v) {
  if (!s) return false;
  if (s->var == v && s->kind != KS_DECL) return true;
  if (s->mem == v || s->fa == v || s->fb == v || ke_uses_var(s->ia, v) || ke_uses_var(s->ib, v)) return true;
  if (ke_uses_var(s->init, v) || ke_uses_var(s->lo, v) || ke_uses_var(s->hi, v) || ke_uses_var(s->cond, v) ||
      ke_uses_var(s->index, v) || ke_uses_var(s->value, v))
    return true;
  for (int i = 0; i < KTMAP_MAX_RANK; i++)
    if (ke_uses_var(s->coord[i], v)) return true;
  for (int i = 0; i < s->n_items; i++)
    if (ks_uses_var(s->items[i], v)) return true;
  return ks_uses_var(s->body, v) || ks_uses_var(s->els, v);
}

/* Drops declarations of local scalars nothing reads, until none is left:
 * generated index variables the body does not need (nvcc warns on them). */
static bool prune(kstmt *s) {
  if (!s) return false;
  bool changed = false;
  if (s->kind == KS_SEQ) {
    for (int i = 0; i < s->n_items; i++) {
      kstmt *c = s->items[i];
      if (c->kind == KS_DECL && !c->var->size) {
        bool used = false;
        for (int j = i + 1; j < s->n_items && !used; j++) used = ks_uses_var(s->items[j], c->var);
        if (!used) {
          memmove(&s->items[i], &s->items[i + 1], sizeof *s->items * (size_t)(s->n_items - i - 1));
          s->n_items--;
          i--;
          changed = true;
          continue;
        }
      }
      changed |= prune(c);
    }
  }
  changed |= prune(s->body);
  changed |= prune(s->els);
  return changed;
}

/* Every variable the statements declare or assign: -1, then 1 where assigned
 * (the printer's `const` for an index let, without a walk of the body per let). */
static void mark_assigned(kstmt *s, bool assigned_pass) {
  if (!s) return;
  if (s->var) {
    if (!assigned_pass && s->var->assigned == 0) s->var->assigned = -1;
    if (assigned_pass && s->kind != KS_DECL) s->var->assigned = 1;
  }
  for (int i = 0; i < s->n_items; i++) mark_assigned(s->items[i], assigned_pass);
  mark_assigned(s->body, assigned_pass);
  mark_assigned(s->els, assigned_pass);
}

void kkernel_prune(kkernel *k) {
  while (prune(k->body)) {
  }
  while (k->gpu_body && prune(k->gpu_body)) {
  }
  for (int pass = 0; pass < 2; pass++) {
    mark_assigned(k->lets, pass);
    mark_assigned(k->body, pass);
    mark_assigned(k->gpu_body, pass);
  }
}

kkernel *kkernel_new(kbuilder *b, const char *name, int n_params) {
  kkernel *k = qir_alloc(b->m, sizeof *k);
  k->name = name;
  k->n_params = n_params;
  k->params = qir_alloc(b->m, sizeof *k->params * (size_t)(n_params ? n_params : 1));
  k->args = qir_alloc(b->m, sizeof *k->args * (size_t)(n_params ? n_params : 1));
  k->lets = ks_seq(b);
  k->body = ks_seq(b);
  k->grid = 1;
  k->threads = 1;
  k->warp = 32;
  k->index_type = b->index_type = KT_I32;
  return k;
}

void kkernel_choose_index(kbuilder *b, kkernel *k, int64_t span) {
  bool wide = span >= KINDEX64_NUMEL;
  for (int i = 0; i < k->n_params; i++) wide |= k->params[i].numel >= KINDEX64_NUMEL;
  k->index_type = b->index_type = wide ? KT_I64 : KT_I32;
}

/* ------------------------------------------------------------ index overflow
 *
 * Bounds of |value| over a launch, by interval-free magnitude arithmetic:
 * constants, tid < threads, bid < grid, a variable by its declarations, loop
 * bounds (plus one step: the counter's last value) and assignments.  Loaded
 * values count as 0: an index read from a tensor is data (a gather), bounded
 * by the dimension it indexes, which the kernel's element counts already
 * decide.  A variable whose bound depends on itself (an accumulator) is
 * unbounded; only index positions are checked, where none such appears. */

typedef struct {
  const kkernel *k;
  const kvar **vars;            /* every scalar variable the kernel assigns */
  double *bound;                /* its bound; < 0: not computed yet; NAN: in progress */
  int n, cap;
} ibounds;

static int ib_slot(ibounds *ib, const kvar *v) {
  for (int i = 0; i < ib->n; i++)
    if (ib->vars[i] == v) return i;
  return -1;
}

static double ib_expr(ibounds *ib, const kexpr *e);

/* The bound of v: the largest of every value given to it. */
static void ib_defs(ibounds *ib, const kstmt *s, const kvar *v, double *acc) {
  if (!s || isinf(*acc)) return;
  if (s->var == v && !v->size) {
    double x = 0;
    if (s->kind == KS_DECL && s->init) x = ib_expr(ib, s->init);
    else if (s->kind == KS_ASSIGN && !s->index) x = ib_expr(ib, s->value);
    else if (s->kind == KS_FOR) {
      double lo = ib_expr(ib, s->lo), hi = ib_expr(ib, s->hi) + (double)(s->step < 0 ? -s->step : s->step);
      x = lo > hi ? lo : hi;
    }
    if (x > *acc || isnan(x)) *acc = x;
  }
  for (int i = 0; i < s->n_items; i++) ib_defs(ib, s->items[i], v, acc);
  ib_defs(ib, s->body, v, acc);
  ib_defs(ib, s->els, v, acc);
}

static double ib_var(ibounds *ib, const kvar *v) {
  if (v->space == KV_SHARED || v->space == KV_FRAG || v->size) return 0;   /* tile contents: data */
  int i = ib_slot(ib, v);
  if (i < 0) {
    if (ib->n == ib->cap) {
      int cap = ib->cap ? ib->cap * 2 : 32;
      const kvar **vars = realloc(ib->vars, sizeof *vars * (size_t)cap);
      double *bound = vars ? realloc(ib->bound, sizeof *bound * (size_t)cap) : NULL;
      if (vars) ib->vars = vars;
      if (!bound) return INFINITY;
      ib->bound = bound;
      ib->cap = cap;
    }
    i = ib->n++;
    ib->vars[i] = v;
    ib->bound[i] = -1;
  }
  if (isnan(ib->bound[i])) return INFINITY;   /* defined through itself */
  if (ib->bound[i] >= 0) return ib->bound[i];
  ib->bound[i] = NAN;
  double acc = 0;
  ib_defs(ib, ib->k->lets, v, &acc);
  ib_defs(ib, ib->k->body, v, &acc);
  ib->bound[ib_slot(ib, v)] = isnan(acc) ? INFINITY : acc;
  return ib->bound[ib_slot(ib, v)];
}

static double ib_expr(ibounds *ib, const kexpr *e) {
  if (!e) return 0;
  switch (e->kind) {
  case KE_INT: return fabs((double)e->ival);
  case KE_FLOAT: case KE_LOAD: case KE_ALIGNED16: case KE_ELEM: case KE_TF32: case KE_PACK16: return 0;
  case KE_TID: return ib->k->threads;
  case KE_BID: return (double)ib->k->grid;
  case KE_WARP: return ib->k->threads / (ib->k->warp > 0 ? ib->k->warp : 1);
  case KE_VAR: return ib_var(ib, e->var);
  case KE_CAST: return ktype_is_float(e->a->type) ? 0 : ib_expr(ib, e->a);
  case KE_SELECT: {
    double a = ib_expr(ib, e->b), c = ib_expr(ib, e->c);
    return a > c ? a : c;
  }
  case KE_UNARY: return e->fn == QIR_FN_NEG || e->fn == QIR_FN_ABS ? ib_expr(ib, e->a) : 0;
  case KE_BINARY: {
    if (ktype_is_float(e->type) || e->type == KT_BOOL) return 0;
    double a = ib_expr(ib, e->a), c = ib_expr(ib, e->b);
    switch (e->fn) {
    case QIR_FN_ADD: case QIR_FN_SUB: return a + c;
    case QIR_FN_MUL: return a * c;
    case QIR_FN_DIV: return e->b->kind == KE_INT && e->b->ival ? a / fabs((double)e->b->ival) : a;
    case QIR_FN_MOD: return a < c ? a : c;
    case QIR_FN_MIN: case QIR_FN_MAX: return a > c ? a : c;
    case QIR_FN_BITXOR: case QIR_FN_BITOR: return a + c;   /* of non-negative operands */
    default: return 0;
    }
  }
  }
  return 0;
}

/* The first 32-bit integer node of index expression e whose bound leaves int32. */
static const kexpr *ib_find(ibounds *ib, const kexpr *e, double *bound) {
  if (!e || e->kind == KE_LOAD || e->kind == KE_ELEM) return NULL;   /* their own indices are checked where they are */
  if (e->type == KT_BOOL || ktype_is_float(e->type)) return NULL;
  const kexpr *r;
  if ((r = ib_find(ib, e->a, bound)) || (r = ib_find(ib, e->b, bound)) || (r = ib_find(ib, e->c, bound))) return r;
  if (e->type != KT_I32) return NULL;
  double x = ib_expr(ib, e);
  if (x <= (double)INT32_MAX) return NULL;
  *bound = x;
  return e;
}

static const kexpr *ib_expr_loads(ibounds *ib, const kexpr *e, double *bound) {
  if (!e) return NULL;
  if (e->kind == KE_LOAD) {
    const kexpr *r = ib_find(ib, e->a, bound);
    if (r) return r;
  }
  const kexpr *r;
  if ((r = ib_expr_loads(ib, e->a, bound)) || (r = ib_expr_loads(ib, e->b, bound))) return r;
  return ib_expr_loads(ib, e->c, bound);
}

/* Global-memory indices of s and everything under it. */
static const kexpr *ib_stmt(ibounds *ib, const kstmt *s, double *bound) {
  if (!s) return NULL;
  const kexpr *r = NULL;
  if (((s->kind == KS_STORE || s->kind == KS_VSTORE) && (r = ib_find(ib, s->index, bound))) || ((s->kind == KS_VCOPY16 || s->kind == KS_CP_ASYNC) && (r = ib_find(ib, s->lo, bound))))
    return r;
  const kexpr *const es[] = {s->init, s->lo, s->hi, s->cond, s->index, s->value, s->ia, s->ib};
  for (size_t i = 0; i < sizeof es / sizeof *es; i++)
    if ((r = ib_expr_loads(ib, es[i], bound))) return r;
  for (int i = 0; i < s->n_items; i++)
    if ((r = ib_stmt(ib, s->items[i], bound))) return r;
  if ((r = ib_stmt(ib, s->body, bound))) return r;
  return ib_stmt(ib, s->els, bound);
}

const kexpr *kkernel_index_overflow(const kkernel *k, double *bound) {
  ibounds ib = {.k = k};
  const kexpr *r = ib_stmt(&ib, k->lets, bound);
  if (!r) r = ib_stmt(&ib, k->body, bound);
  free(ib.vars);
  free(ib.bound);
  return r;
}

/* ------------------------------------------------------------ text */

static void print_float(FILE *o, double v, ktype t) {
  if (isnan(v)) { fputs(t == KT_F32 ? "((float)NAN)" : "((double)NAN)", o); return; }
  if (isinf(v)) { fprintf(o, "%s((%s)INFINITY)", v < 0 ? "-" : "", t == KT_F32 ? "float" : "double"); return; }
  char buf[64];
  snprintf(buf, sizeof buf, t == KT_F32 ? "%.9g" : "%.17g", v);
  if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
  if (v < 0) fputc('(', o);
  fputs(buf, o);
  if (t == KT_F32) fputc('f', o);
  if (v < 0) fputc(')', o);
}

/* An element reference.  Checked C: shared elements go through the shadow
 * cells (q_sr/q_sw), register arrays through a bounds test (q_ix). */
static void print_var_ref_rw(FILE *o, const kvar *v, const kexpr *index, const kkernel *k,
                             const kprint_style *st, bool write) {
  fputs(v->name, o);
  if (index && st->chk && v->space == KV_SHARED) {
    int site = cg_check_site(st->chk, k, "%s shared `%s`", write ? "write of" : "read of", v->name);
    fprintf(o, "[%s(&q_b, q_sh_%s, %" PRId64 "L, (long)(", write ? "q_sw" : "q_sr", v->name, v->size);
    kprint_expr(o, index, k, st);
    fprintf(o, "), tid, %d)]", site);
  } else if (index && st->chk) {
    int site = cg_check_site(st->chk, k, "register array `%s`", v->name);
    fputs("[q_ix(&q_b, (long)(", o);
    kprint_expr(o, index, k, st);
    fprintf(o, "), %" PRId64 "L, tid, %d)]", v->size, site);
  } else if (index) {
    fputc('[', o);
    kprint_expr(o, index, k, st);
    fputc(']', o);
  }
  /* C: the thread index is the last (contiguous) one, so a loop over the
   * threads innermost reads consecutive elements and vectorises. */
  if (st->c_threads && v->space == KV_THREAD) fputs("[tid]", o);
}

static void print_var_ref(FILE *o, const kvar *v, const kexpr *index, const kkernel *k, const kprint_style *st) {
  print_var_ref_rw(o, v, index, k, st, false);
}

/* A global tensor's element index, checked: q_gr/q_gw test the extent and the
 * order of the blocks that touch it. */
static void print_global_index(FILE *o, int param, const kexpr *index, const kkernel *k, const kprint_style *st, bool write) {
  if (!st->chk) {
    kprint_expr(o, index, k, st);
    return;
  }
  const kparam *p = &k->params[param];
  const qir_value *v = k->args[param];
  int site = cg_check_site(st->chk, k, "%s `%s`%s%s%s", write ? "write of" : "read of", p->name, v && v->name ? " (%" : "",
                           v && v->name ? v->name : "", v && v->name ? ")" : "");
  fprintf(o, "%s(&q_b, &q_g_%s, %" PRId64 "L, (long)(", write ? "q_gw" : "q_gr", p->name, p->numel);
  kprint_expr(o, index, k, st);
  fprintf(o, "), tid, %d)", site);
}

static const char *infix(qir_expr_fn fn) {
  switch (fn) {
  case QIR_FN_ADD: return "+";
  case QIR_FN_SUB: return "-";
  case QIR_FN_MUL: return "*";
  case QIR_FN_DIV: return "/";
  case QIR_FN_LT: return "<";
  case QIR_FN_LE: return "<=";
  case QIR_FN_GT: return ">";
  case QIR_FN_GE: return ">=";
  case QIR_FN_EQ: return "==";
  case QIR_FN_NE: return "!=";
  case QIR_FN_AND: return "&&";
  case QIR_FN_OR: return "||";
  case QIR_FN_BITAND: return "&";
  case QIR_FN_BITOR: return "|";
  case QIR_FN_BITXOR: return "^";
  case QIR_FN_SHL: return "<<";
  case QIR_FN_SHR: return ">>";
  default: return NULL;
  }
}

/* The load helper of a narrow float type (kprint_helpers defines them). */
static const char *narrow_load_fn(qir_dtype dt) {
  switch (dt) {
  case QIR_F8E4M3FN: return "q_ld_f8e4m3fn(";
  case QIR_F8E4M3FNUZ: return "q_ld_f8e4m3fnuz(";
  case QIR_F8E5M2: return "q_ld_f8e5m2(";
  case QIR_F8E5M2FNUZ: return "q_ld_f8e5m2fnuz(";
  case QIR_F8E8M0: return "q_ld_f8e8m0(";
  default: return "q_ld_f4e2m1(";
  }
}

/* Conversion of a float expression to an integer or bool type: saturating,
 * NaN gives 0 (as qir_store_elem). */
static void print_cast(FILE *o, const kexpr *e, const kkernel *k, const kprint_style *st) {
  ktype from = e->a->type, to = e->type;
  if (e->dtype == QIR_F16 || e->dtype == QIR_BF16) {   /* round to the narrow float */
    fputs(e->dtype == QIR_F16 ? "q_h2f(q_f2h((float)(" : "q_bf2f(q_f2bf((float)(", o);
    kprint_expr(o, e->a, k, st);
    fputs(")))", o);
    return;
  }
  if (qir_dtype_is_narrow(e->dtype) && qir_dtype_is_float(e->dtype)) { /* round (saturating) to the f8/f4 value */
    fprintf(o, "q_ld_%s(q_st_%s(1, (float)(", qir_dtype_name(e->dtype), qir_dtype_name(e->dtype));
    kprint_expr(o, e->a, k, st);
    fputs(")))", o);
    return;
  }
  if (qir_dtype_is_narrow(e->dtype)) { /* i4/u4/i2/u2: keep the low bits of the (truncated) value, as qrun */
    fprintf(o, "q_wrap_%c(%d, ", qir_dtype_is_signed_int(e->dtype) ? 's' : 'u', qir_dtype_bits(e->dtype));
    if (ktype_is_float(from)) fputs("(int32_t)q_f2l((double)(", o);
    else fputs("(int32_t)((", o);
    kprint_expr(o, e->a, k, st);
    fputs(")))", o);
    return;
  }
  if (e->dtype == QIR_I8 || e->dtype == QIR_I16 || e->dtype == QIR_U8 || e->dtype == QIR_U16) {
    static const char *const sfx[] = {[QIR_I8] = "i8", [QIR_I16] = "i16", [QIR_U8] = "u8", [QIR_U16] = "u16"};
    if (ktype_is_float(from)) fprintf(o, "q_f2%s((double)(", sfx[e->dtype]);
    else fprintf(o, "((%s)(%s)(", ktype_c(to), kdtype_c(e->dtype));
    kprint_expr(o, e->a, k, st);
    fputs("))", o);
    return;
  }
  if (to == KT_BOOL) {
    fputs("(", o);
    kprint_expr(o, e->a, k, st);
    fputs(" != 0)", o);
    return;
  }
  if (ktype_is_float(from) && !ktype_is_float(to)) {
    fprintf(o, "q_f2%s((double)(", ktype_suffix(to));
    kprint_expr(o, e->a, k, st);
    fputs("))", o);
    return;
  }
  fprintf(o, "((%s)(", ktype_c(to));
  kprint_expr(o, e->a, k, st);
  fputs("))", o);
}

void kprint_expr(FILE *o, const kexpr *e, const kkernel *k, const kprint_style *st) {
  switch (e->kind) {
  case KE_INT:
    if (e->ival == INT64_MIN) fputs("(-9223372036854775807LL - 1)", o); /* no C literal for INT64_MIN */
    else if (e->type == KT_I64) fprintf(o, e->ival < 0 ? "(%" PRId64 "LL)" : "%" PRId64 "LL", e->ival);
    else fprintf(o, e->ival < 0 ? "(%" PRId64 ")" : "%" PRId64, e->ival);
    return;
  case KE_FLOAT: print_float(o, e->fval, e->type); return;
  case KE_VAR: print_var_ref(o, e->var, NULL, k, st); return;
  case KE_ELEM: print_var_ref(o, e->var, e->a, k, st); return;
  case KE_TID: fputs(st->c_threads ? "tid" : "(int)threadIdx.x", o); return;
  case KE_BID: fputs(st->bid_remap ? "q_vb" : st->c_threads ? "bid" : "(int)blockIdx.x", o); return;
  case KE_ALIGNED16:
    fprintf(o, "((((uintptr_t)%s) & 15u) == 0)", k->params[e->param].name);
    return;
  case KE_WARP:
    if (st->c_threads) fputs("q_w", o);
    else fprintf(o, "((int)threadIdx.x / %d)", k->warp);
    return;
  case KE_LOAD: {
    qir_dtype dt = e->raw ? QIR_U16 : k->params[e->param].dtype;
    const char *pre = dt == QIR_F16 ? "q_h2f(" : dt == QIR_BF16 ? "q_bf2f(" : dt == QIR_BOOL ? "(int)(" : "";
    if (qir_dtype_is_narrow(dt) && qir_dtype_is_float(dt)) pre = narrow_load_fn(dt);
    fprintf(o, "%s%s[", pre, k->params[e->param].name);
    print_global_index(o, e->param, e->a, k, st, false);
    fprintf(o, "]%s", pre[0] ? ")" : "");
    return;
  }
  case KE_UNARY:
    if (e->fn == QIR_FN_NEG) { fputs("(-", o); kprint_expr(o, e->a, k, st); fputs(")", o); return; }
    if (e->fn == QIR_FN_NOT) { fputs("(!", o); kprint_expr(o, e->a, k, st); fputs(")", o); return; }
    /* predicates take the operand's type, everything else the result's */
    fprintf(o, "q_%s_%s(", qir_expr_fn_spelling(e->fn),
            ktype_suffix(e->fn == QIR_FN_ISNAN || e->fn == QIR_FN_ISINF ? e->a->type : e->type));
    kprint_expr(o, e->a, k, st);
    fputs(")", o);
    return;
  case KE_BINARY: {
    if (st->c_tid_split && (e->fn == QIR_FN_MOD || e->fn == QIR_FN_DIV) && e->a->kind == KE_TID &&
        e->b->kind == KE_INT && e->b->ival == st->c_tid_split) {
      fputs(e->fn == QIR_FN_MOD ? "tx" : "ty", o);
      return;
    }
    const char *op = infix(e->fn);
    bool float_div = e->fn == QIR_FN_DIV && ktype_is_float(e->type);
    if (op && (e->fn != QIR_FN_DIV || float_div || !ktype_is_float(e->type))) {
      fputc('(', o);
      kprint_expr(o, e->a, k, st);
      fprintf(o, " %s ", op);
      kprint_expr(o, e->b, k, st);
      fputc(')', o);
      return;
    }
    if (e->fn == QIR_FN_MOD && !ktype_is_float(e->type)) {
      fputc('(', o);
      kprint_expr(o, e->a, k, st);
      fputs(" % ", o);
      kprint_expr(o, e->b, k, st);
      fputc(')', o);
      return;
    }
    const char *name = e->fn == QIR_FN_MOD ? "fmod" : qir_expr_fn_spelling(e->fn);
    fprintf(o, "q_%s_%s(", name, ktype_suffix(e->type));
    kprint_expr(o, e->a, k, st);
    fputs(", ", o);
    kprint_expr(o, e->b, k, st);
    fputs(")", o);
    return;
  }
  case KE_SELECT:
    fputc('(', o);
    kprint_expr(o, e->a, k, st);
    fputs(" ? ", o);
    kprint_expr(o, e->b, k, st);
    fputs(" : ", o);
    kprint_expr(o, e->c, k, st);
    fputc(')', o);
    return;
  case KE_CAST: print_cast(o, e, k, st); return;
  case KE_TF32:
    fputs("q_tf32(", o);
    kprint_expr(o, e->a, k, st);
    fputs(")", o);
    return;
  case KE_PACK16:
    fputs(e->dtype == QIR_BF16 ? "q_pack_bf2(" : "q_pack_h2(", o);
    kprint_expr(o, e->a, k, st);
    fputs(", ", o);
    kprint_expr(o, e->b, k, st);
    fputs(")", o);
    return;
  }
}

static void indent_to(FILE *o, int n) { fprintf(o, "%*s", 2 * n, ""); }

static const char *frag_role_cuda(kfrag_role r) {
  return r == KF_A ? "matrix_a" : r == KF_B ? "matrix_b" : "accumulator";
}

/* C: every array a kernel keeps on the stack is declared 64-byte aligned.  GCC
 * (seen with 12.2 at -O3 -march=native -fopenmp, AVX-512) may raise such an
 * array's alignment itself to vectorize a loop over it, then lay out the
 * frame of the OpenMP-outlined kernel without realigning the stack, so an
 * aligned vector store faults; an alignment in the declaration always has
 * the prologue realign (and gives the vectorizer aligned accesses). */
const char *kprint_stack_align(const kprint_style *st) { return st->c_threads ? "_Alignas(64) " : ""; }

void kprint_var_decl(FILE *o, const kvar *v, const kkernel *k, const kprint_style *st, int indent) {
  indent_to(o, indent);
  if (v->space == KV_FRAG) {
    if (st->c_threads)            /* C: each warp's fragments as 16x16 floats */
      fprintf(o, "%sfloat %s[%d][%" PRId64 "][%d];\n", kprint_stack_align(st), v->name, k->threads / k->warp, v->size, Q_MMA * Q_MMA);
    else if (st->hip)             /* MFMA: 4 values per lane of a 64-lane wavefront */
      fprintf(o, "%s %s[%" PRId64 "];\n", v->frag == KF_ACC ? "q_f4" : "q_s4", v->name, v->size);
    else if (v->frag == KF_ACC)
      fprintf(o, "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, %d, %d, %d, float> %s[%" PRId64 "];\n", Q_MMA, Q_MMA,
              Q_MMA, v->name, v->size);
    else
      fprintf(o, "nvcuda::wmma::fragment<nvcuda::wmma::%s, %d, %d, %d, %s, nvcuda::wmma::%s> %s[%" PRId64 "];\n",
              frag_role_cuda(v->frag), Q_MMA, Q_MMA, Q_MMA, v->frag_dtype == QIR_BF16 ? "__nv_bfloat16" : "__half",
              v->col_major ? "col_major" : "row_major", v->name, v->size);
    return;
  }
  /* Every shared array is 32-byte aligned: wmma::load_matrix_sync and
   * store_matrix_sync need 256-bit aligned pointers (the f16 operand tiles,
   * and the f32 epilogue tile an mma kernel stores its accumulators to), and
   * no declaration may rely on where the compiler happens to place it. */
  if (v->space == KV_SHARED && !st->c_threads) fputs(v->size ? "__shared__ __align__(32) " : "__shared__ ", o);
  if (v->size || (st->c_threads && v->space == KV_THREAD)) fputs(kprint_stack_align(st), o);
  fprintf(o, "%s %s", kvar_elem_c(v), v->name);
  if (v->size) fprintf(o, "[%" PRId64 "]", v->size);
  if (st->c_threads && v->space == KV_THREAD) fprintf(o, "[%d]", k->threads);
  fputs(";\n", o);
}

/* A fragment element reference: C keeps one set of fragments per warp. */
static void print_frag(FILE *o, const kvar *v, const kexpr *index, const kkernel *k, const kprint_style *st) {
  fprintf(o, "%s%s[", v->name, st->c_threads ? "[q_w]" : "");
  kprint_expr(o, index, k, st);
  fputc(']', o);
}

void kprint_mma_stmt(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st) {
  const char *ns = "nvcuda::wmma::";
  bool c = st->c_threads, hip = st->hip;
  switch (s->kind) {
  case KS_MMA_FILL:
    fputs(c ? "memset(" : hip ? "" : "nvcuda::wmma::fill_fragment(", o);
    print_frag(o, s->var, s->index, k, st);
    fputs(c ? ", 0, sizeof(float) * 256);\n" : hip ? " = q_mfma_zero();\n" : ", 0.0f);\n", o);
    return;
  case KS_MMA_LOAD: {
    bool bf = s->var->frag_dtype == QIR_BF16;
    if (c) fputs("q_mma_load(", o);
    else if (hip) fprintf(o, "q_mfma_load_%s(", s->var->frag == KF_A ? "a" : "b");
    else fprintf(o, "%sload_matrix_sync(", ns);
    print_frag(o, s->var, s->index, k, st);
    fprintf(o, ", %s&%s[", c || hip ? "" : bf ? "(const __nv_bfloat16 *)" : "(const __half *)", s->mem->name);
    kprint_expr(o, s->lo, k, st);
    fprintf(o, "], %" PRId64, s->step);
    if (c) fprintf(o, ", %d, %d);\n", s->var->col_major, bf);
    else if (hip) fprintf(o, ", %d);\n", s->var->col_major);
    else fputs(");\n", o);
    return;
  }
  case KS_MMA_SYNC:
    if (hip) {
      print_frag(o, s->var, s->index, k, st);
      fprintf(o, " = q_mfma_%s(", s->fa->frag_dtype == QIR_BF16 ? "bf16" : "f16");
    } else {
      fputs(c ? "q_mma_sync(" : "nvcuda::wmma::mma_sync(", o);
      print_frag(o, s->var, s->index, k, st);
      fputs(", ", o);
    }
    print_frag(o, s->fa, s->ia, k, st);
    fputs(", ", o);
    print_frag(o, s->fb, s->ib, k, st);
    fputs(", ", o);
    print_frag(o, s->var, s->index, k, st);
    fputs(");\n", o);
    return;
  case KS_MMA_STORE:
    fprintf(o, "%s(&%s[", c ? "q_mma_store" : hip ? "q_mfma_store" : "nvcuda::wmma::store_matrix_sync", s->mem->name);
    kprint_expr(o, s->lo, k, st);
    fputs("], ", o);
    print_frag(o, s->var, s->index, k, st);
    fprintf(o, ", %" PRId64 "%s);\n", s->step, c || hip ? "" : ", nvcuda::wmma::mem_row_major");
    return;
  default: return;
  }
}

static void print_store(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st) {
  const kparam *p = &k->params[s->param];
  fprintf(o, "%s[", p->name);
  print_global_index(o, s->param, s->index, k, st, true);
  fputs("] = ", o);
  switch (p->dtype) {
  case QIR_F16: fputs("q_f2h(", o); break;
  case QIR_BF16: fputs("q_f2bf(", o); break;
  case QIR_BOOL: fputs("(uint8_t)(0 != ", o); break;
  default:
    if (qir_dtype_is_narrow(p->dtype) && qir_dtype_is_float(p->dtype)) fprintf(o, "q_st_%s(0, ", qir_dtype_name(p->dtype)); /* as qir_store_elem */
    else if (qir_dtype_is_narrow(p->dtype))
      fprintf(o, "(%s)q_wrap_%c(%d, ", kdtype_c(p->dtype), qir_dtype_is_signed_int(p->dtype) ? 's' : 'u', qir_dtype_bits(p->dtype));
    else fprintf(o, "(%s)(", kdtype_c(p->dtype));
    break;
  }
  kprint_expr(o, s->value, k, st);
  fputs(");\n", o);
}

/* rProgram synchronisation.  On a GPU: thread 0 of the block spins on
 * volatile loads of global flags or counters; __threadfence before a release
 * (flag store, counter arrival) and after an acquire orders the tasks' global
 * writes; __syncthreads hands the result to the block.  In C every wave is its
 * own launch, so a wait only checks that the flags were set. */
static void kprint_rprogram_sync(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int ind) {
  const char *P = k->params[s->param].name;
  indent_to(o, ind);
  if (st->c_threads) {
    switch (s->kind) {
    case KS_FLAG_SET:
      fprintf(o, "if (tid == 0) %s[", P);
      kprint_expr(o, s->index, k, st);
      fputs("] = q_gen;\n", o);
      return;
    case KS_FLAG_WAIT:
      fprintf(o, "if (tid == 0) for (long q_f = ");
      kprint_expr(o, s->lo, k, st);
      fputs("; q_f < ", o);
      kprint_expr(o, s->hi, k, st);
      if (st->chk)   /* the checker: a wait on a task that has not run is a deadlock on a GPU */
        fprintf(o, "; q_f++) if (%s[q_f] != q_gen) { q_hz_add(&q_b, Q_HZ_DEADLOCK, %d, -1, q_f, 0, 0, 0); break; }\n", P,
                cg_check_site(st->chk, k, "the wait on the task flags of an earlier wave"));
      else
        fprintf(o, "; q_f++) if (%s[q_f] != q_gen) { fprintf(stderr, \"rprogram: wait for an unfinished task (flag %%ld)\\n\", q_f); abort(); }\n", P);
      if (st->chk && s->text && *s->text) {   /* the checker: the waited tasks' blocks are ordered from here on */
        indent_to(o, ind);
        fprintf(o, "if (tid == 0) { static const long q_wb[] = {%s}; for (size_t q_i = 0; q_i < sizeof q_wb / sizeof q_wb[0]; q_i++) q_order(%d, q_wb[q_i]); }\n",
                s->text, (int)s->step);
      }
      return;
    default:
      fputs("/* grid barrier: the waves are separate launches here */\n", o);
      return;
    }
  }
  switch (s->kind) {
  case KS_FLAG_SET:
    fputs("__syncthreads();\n", o);
    indent_to(o, ind);
    fprintf(o, "if (threadIdx.x == 0) { __threadfence(); atomicExch((unsigned long long *)&%s[", P);
    kprint_expr(o, s->index, k, st);
    fputs("], q_gen); }\n", o);
    return;
  case KS_FLAG_WAIT:
    /* the block's threads share the flags: one thread reading hundreds of
     * flags one after another paid an L2 round trip each (on an H100 it
     * made a packed SqueezeNet 11x slower than its separate launches) */
    fputs("for (long q_f = ", o);
    kprint_expr(o, s->lo, k, st);
    fputs(" + (long)threadIdx.x; q_f < ", o);
    kprint_expr(o, s->hi, k, st);
    fprintf(o, "; q_f += (long)blockDim.x) while (((volatile unsigned long long *)%s)[q_f] < q_gen) { }\n", P);
    indent_to(o, ind);
    fputs("__threadfence();\n", o);
    indent_to(o, ind);
    fputs("__syncthreads();\n", o);
    return;
  default:
    fputs("__syncthreads();\n", o);
    indent_to(o, ind);
    fprintf(o, "if (threadIdx.x == 0) { __threadfence(); atomicAdd((unsigned long long *)&%s[", P);
    kprint_expr(o, s->index, k, st);
    fprintf(o, "], 1ULL); while (((volatile unsigned long long *)%s)[", P);
    kprint_expr(o, s->index, k, st);
    fprintf(o, "] < q_gen * %" PRId64 "ULL) { } __threadfence(); }\n", s->step);
    indent_to(o, ind);
    fputs("__syncthreads();\n", o);
    return;
  }
}

void kprint_stmt(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int ind) {
  if (s->active_warps && ks_is_mma(s) && !st->c_threads) {   /* the member's warps only: a warp-uniform branch */
    kstmt all = *s;
    all.active_warps = 0;
    indent_to(o, ind);
    fprintf(o, "if ((int)threadIdx.x / %d < %d) {\n", k->warp, s->active_warps);
    kprint_stmt(o, &all, k, st, ind + 1);
    indent_to(o, ind);
    fputs("}\n", o);
    return;
  }
  if (st->chk && (s->kind == KS_BARRIER || s->kind == KS_WARP_REDUCE || ks_is_mma(s))) {
    /* collectives belong at block level (print_c.c); reached here, from
     * per-thread code, only the threads that get here would run them */
    const char *what = s->kind == KS_BARRIER ? (s->warp_only ? "__syncwarp" : "__syncthreads")
                       : s->kind == KS_WARP_REDUCE ? "a warp shuffle" : "a matrix-unit statement";
    indent_to(o, ind);
    fprintf(o, "q_reach(&q_b, %d);\n", cg_check_site(st->chk, k, "%s", what));
    return;
  }
  switch (s->kind) {
  case KS_SEQ:
    for (int i = 0; i < s->n_items; i++) kprint_stmt(o, s->items[i], k, st, ind);
    return;
  case KS_FOR: {
    bool gpu = !st->c_threads;
    if (s->unroll && gpu) { indent_to(o, ind); fputs("#pragma unroll\n", o); }
    indent_to(o, ind);
    fprintf(o, "for (%s %s = ", ktype_c(s->var->type), s->var->name);
    kprint_expr(o, s->lo, k, st);
    fprintf(o, "; %s < ", s->var->name);
    kprint_expr(o, s->hi, k, st);
    if (s->step == 1) fprintf(o, "; %s++) {\n", s->var->name);
    else fprintf(o, "; %s += %" PRId64 ") {\n", s->var->name, s->step);
    kprint_stmt(o, s->body, k, st, ind + 1);
    indent_to(o, ind);
    fputs("}\n", o);
    return;
  }
  case KS_IF:
    indent_to(o, ind);
    /* a role branch: lane 0's condition, so that ptxas sees it warp-uniform
     * (else it serialises the wgmma inside: C7518 / C7520) */
    fputs(s->wg && !st->c_threads ? "if (__shfl_sync(0xffffffffu, (int)(" : "if (", o);
    kprint_expr(o, s->cond, k, st);
    fputs(s->wg && !st->c_threads ? "), 0)) {\n" : ") {\n", o);
    kprint_stmt(o, s->body, k, st, ind + 1);
    indent_to(o, ind);
    if (s->els) {
      fputs("} else {\n", o);
      kprint_stmt(o, s->els, k, st, ind + 1);
      indent_to(o, ind);
    }
    fputs("}\n", o);
    return;
  case KS_DECL:
    indent_to(o, ind);
    if (s->var->size) {
      fprintf(o, "%s%s %s[%" PRId64 "];\n", kprint_stack_align(st), ktype_c(s->var->type), s->var->name, s->var->size);
      return;
    }
    /* an i32 let (an index) is const; an i32 accumulator (an integer
     * reduction) is assigned later */
    bool assigned = s->var->assigned ? s->var->assigned > 0 : ks_writes_var(k->body, s->var);
    fprintf(o, "%s%s %s", s->init && s->var->type == KT_I32 && !assigned ? "const " : "",
            ktype_c(s->var->type), s->var->name);
    if (s->init) {
      fputs(" = ", o);
      kprint_expr(o, s->init, k, st);
    }
    fputs(";\n", o);
    return;
  case KS_ASSIGN:
    indent_to(o, ind);
    print_var_ref_rw(o, s->var, s->index, k, st, true);
    fputs(" = ", o);
    kprint_expr(o, s->value, k, st);
    fputs(";\n", o);
    return;
  case KS_STORE:
    indent_to(o, ind);
    print_store(o, s, k, st);
    return;
  case KS_GRID_SYNC: case KS_FLAG_WAIT: case KS_FLAG_SET:
    kprint_rprogram_sync(o, s, k, st, ind);
    return;
  case KS_BARRIER:
    indent_to(o, ind);
    /* a wavefront's lanes run in lock step, but LDS traffic needs the full barrier's waits */
    fputs(s->warp_only && !st->hip ? "__syncwarp();\n" : "__syncthreads();\n", o);
    return;
  case KS_MMA_FILL: case KS_MMA_LOAD: case KS_MMA_SYNC: case KS_MMA_STORE:
    indent_to(o, ind);
    kprint_mma_stmt(o, s, k, st);
    return;
  case KS_LDMATRIX: case KS_MMA16816: case KS_CP_ASYNC: case KS_CP_COMMIT: case KS_CP_WAIT: case KS_VSTORE:
    kprint_sm80_stmt(o, s, k, st, ind);
    return;
  case KS_MBAR_INIT: case KS_MBAR_FENCE_INIT: case KS_MBAR_ARRIVE: case KS_MBAR_WAIT: case KS_TMA_LOAD: case KS_FENCE_PROXY_ASYNC:
  case KS_WGMMA: case KS_WGMMA_FENCE: case KS_WGMMA_COMMIT: case KS_WGMMA_WAIT: case KS_SETMAXNREG:
    kprint_sm90_stmt(o, s, k, st, ind);
    return;
  case KS_VCOPY16:
    indent_to(o, ind);
    if (st->chk) {         /* element by element, each checked */
      int n = s->var->raw ? 8 : 4;
      int wsite = cg_check_site(st->chk, k, "write of shared `%s` (16-byte copy)", s->var->name);
      int rsite = cg_check_site(st->chk, k, "read of `%s` (16-byte copy)", k->params[s->param].name);
      fprintf(o, "for (int q_e = 0; q_e < %d; q_e++) %s[q_sw(&q_b, q_sh_%s, %" PRId64 "L, (long)(", n, s->var->name, s->var->name, s->var->size);
      kprint_expr(o, s->index, k, st);
      fprintf(o, ") + q_e, tid, %d)] = ", wsite);
      if (s->cond) {
        fputs("(", o);
        kprint_expr(o, s->cond, k, st);
        fputs(") ? ", o);
      }
      fprintf(o, "%s[q_gr(&q_b, &q_g_%s, %" PRId64 "L, (long)(", k->params[s->param].name, k->params[s->param].name, k->params[s->param].numel);
      kprint_expr(o, s->lo, k, st);
      fprintf(o, ") + q_e, tid, %d)]%s;\n", rsite, s->cond ? " : 0" : "");
      return;
    }
    if (st->c_threads) {
      fputs("if (", o);
      if (s->cond) kprint_expr(o, s->cond, k, st);
      else fputs("1", o);
      fprintf(o, ") memcpy(&%s[", s->var->name);
      kprint_expr(o, s->index, k, st);
      fprintf(o, "], &%s[", k->params[s->param].name);
      kprint_expr(o, s->lo, k, st);
      fprintf(o, "], 16); else memset(&%s[", s->var->name);
      kprint_expr(o, s->index, k, st);
      fputs("], 0, 16);\n", o);
      return;
    }
    fprintf(o, "*(uint4 *)&%s[", s->var->name);
    kprint_expr(o, s->index, k, st);
    fputs("] = ", o);
    if (s->cond) {
      kprint_expr(o, s->cond, k, st);
      fputs(" ? ", o);
    }
    fprintf(o, "*(const uint4 *)&%s[", k->params[s->param].name);
    kprint_expr(o, s->lo, k, st);
    fputs("]", o);
    if (s->cond) fputs(" : make_uint4(0u, 0u, 0u, 0u)", o);
    fputs(";\n", o);
    return;
  case KS_WARP_REDUCE: {
    /* butterfly: every lane ends with the reduction of the warp/wavefront */
    const char *v = s->var->name;
    const char *fn = qir_expr_fn_spelling(s->red_fn);
    indent_to(o, ind);
    fprintf(o, "for (int q_off = %d; q_off > 0; q_off >>= 1) {\n", (s->step ? (int)s->step : k->warp) / 2);
    indent_to(o, ind + 1);
    if (st->hip) fprintf(o, "%s other = __shfl_xor(%s, q_off, %d);\n", ktype_c(s->var->type), v, k->warp);
    else fprintf(o, "%s other = __shfl_xor_sync(0xffffffffu, %s, q_off);\n", ktype_c(s->var->type), v);
    indent_to(o, ind + 1);
    if (s->red_fn == QIR_FN_ADD) fprintf(o, "%s = %s + other;\n", v, v);
    else if (s->red_fn == QIR_FN_MUL) fprintf(o, "%s = %s * other;\n", v, v);
    else fprintf(o, "%s = q_%s_%s(%s, other);\n", v, fn, ktype_suffix(s->var->type), v);
    indent_to(o, ind);
    fputs("}\n", o);
    return;
  }
  case KS_COMMENT:
    indent_to(o, ind);
    fprintf(o, "/* %s */\n", s->text);
    return;
  case KS_GRID_BARRIER:   /* GPU only: C runs a device loop's phases as launches */
    indent_to(o, ind);
    fputs("cooperative_groups::this_grid().sync();\n", o);
    return;
  case KS_BREAK:
    indent_to(o, ind);
    fputs("break;\n", o);
    return;
  }
}

/* Per-thread lets: print those the statement (or another printed let) uses. */
void kprint_lets(FILE *o, const kkernel *k, const kstmt *uses, const kprint_style *st, int indent) {
  int n = k->lets->n_items;
  bool need[256] = {0};
  if (n > 256) n = 256;
  for (int i = n - 1; i >= 0; i--) {
    const kstmt *let = k->lets->items[i];
    need[i] = ks_uses_var(uses, let->var);
    for (int j = i + 1; j < n && !need[i]; j++)
      if (need[j] && ke_uses_var(k->lets->items[j]->init, let->var)) need[i] = true;
  }
  for (int i = 0; i < n; i++)
    if (need[i]) kprint_stmt(o, k->lets->items[i], k, st, indent);
}

/* Scalar helpers every backend's kernels call.  QDEV is the backend's device
 * function qualifier.  f16/bf16 conversions are bit-exact round to nearest even;
 * on devices the f16 ones are the hardware's (cvt on NVIDIA; clang's _Float16, that
 * is v_cvt, on AMD: one instruction, where the integer version took about twenty
 * and a branch per value), equal but for a NaN's payload bits. */
void kprint_helpers(FILE *o) {
  fputs(
      "QDEV float q_h2f(uint16_t h) {\n"
      "#if defined(__CUDA_ARCH__)\n"
      "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n"
      "#elif defined(__HIP_DEVICE_COMPILE__)\n"
      "  _Float16 x; memcpy(&x, &h, 2); return (float)x;\n"
      "#else\n"
      "  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;\n"
      "  if (e == 0) {\n"
      "    if (m == 0) x = s;\n"
      "    else { e = 113; while (!(m & 0x400u)) { m <<= 1; e--; } x = s | (e << 23) | ((m & 0x3ffu) << 13); }\n"
      "  } else if (e == 31) x = s | 0x7f800000u | (m << 13);\n"
      "  else x = s | ((e + 112) << 23) | (m << 13);\n"
      "  float f; memcpy(&f, &x, 4); return f;\n"
      "#endif\n"
      "}\n"
      "QDEV uint16_t q_f2h(float f) {\n"
      "#if defined(__CUDA_ARCH__)\n"
      "  uint16_t h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n"
      "#elif defined(__HIP_DEVICE_COMPILE__)\n"
      "  _Float16 x = (_Float16)f; uint16_t h; memcpy(&h, &x, 2); return h;\n"
      "#else\n"
      "  uint32_t x; memcpy(&x, &f, 4);\n"
      "  uint32_t s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;\n"
      "  if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u);\n"
      "  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u);\n"
      "  if (a < 0x38800000u) {\n"
      "    if (a < 0x33000000u) return (uint16_t)s;\n"
      "    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, sh = 126 - e;\n"
      "    uint32_t r = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);\n"
      "    if (rem > half || (rem == half && (r & 1))) r++;\n"
      "    return (uint16_t)(s | r);\n"
      "  }\n"
      "  uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;\n"
      "  return (uint16_t)(s | (r >> 13));\n"
      "#endif\n"
      "}\n"
      "/* cvt.rna.tf32.f32: f32 rounded to TF32 (10 mantissa bits, to nearest, ties away from zero), the\n"
      " * low 13 bits zero; what mma.sync .tf32 multiplies.  Infinities stay; NaN stays NaN (quiet). */\n"
      "QDEV uint32_t q_tf32(float f) {\n"
      "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
      "  uint32_t r; asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(f)); return r;\n"
      "#else\n"
      "  uint32_t x; memcpy(&x, &f, 4);\n"
      "  if ((x & 0x7f800000u) == 0x7f800000u) return (x & 0x7fffffu) ? (x | 0x400000u) & 0xffffe000u : x;\n"
      "  return (x + 0x1000u) & 0xffffe000u;\n"
      "#endif\n"
      "}\n"
      "QDEV float q_bf2f(uint16_t h) { uint32_t x = (uint32_t)h << 16; float f; memcpy(&f, &x, 4); return f; }\n"
      "QDEV uint16_t q_f2bf(float f) {\n"
      "  uint32_t x; memcpy(&x, &f, 4);\n"
      "  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);\n"
      "  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n"
      "}\n"
      "/* Two f32 values as a 16-bit register pair, lo in the low half (cvt.rn.f16x2.f32 takes the high one first). */\n"
      "QDEV uint32_t q_pack_h2(float lo, float hi) {\n"
      "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
      "  uint32_t r; asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r;\n"
      "#else\n"
      "  return (uint32_t)q_f2h(lo) | (uint32_t)q_f2h(hi) << 16;\n"
      "#endif\n"
      "}\n"
      "QDEV uint32_t q_pack_bf2(float lo, float hi) {\n"
      "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
      "  uint32_t r; asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r;\n"
      "#else\n"
      "  return (uint32_t)q_f2bf(lo) | (uint32_t)q_f2bf(hi) << 16;\n"
      "#endif\n"
      "}\n"
      "/* The narrow types (one per byte, qir.h), computed in f32 as qrun does.  Float codes: width, mantissa\n"
      " * bits, bias, kind (0: e4m3fn, NaN S.1111.111; 1: fnuz, NaN 0x80 and no -0; 2: e5m2, IEEE-like;\n"
      " * 3: f4e2m1, no NaN or infinity: always saturates, NaN gives -0), largest finite value.  Stores round\n"
      " * to nearest even; `sat` sends overflow to the largest finite value, else to inf (e5m2) or NaN. */\n"
      "QDEV float q_n2f(uint32_t c, int width, int man, int bias, int kind) {\n"
      "  uint32_t sb = 1u << (width - 1), eb = (uint32_t)(width - 1 - man);\n"
      "  c &= (1u << width) - 1;\n"
      "  uint32_t e = (c >> man) & ((1u << eb) - 1), m = c & ((1u << man) - 1);\n"
      "  if (kind == 1 && c == sb) return NAN;\n"
      "  if (kind == 0 && (c & 0x7fu) == 0x7fu) return (c & sb) ? -NAN : NAN;\n"
      "  if (kind == 2 && e == (1u << eb) - 1) return m ? ((c & sb) ? -NAN : NAN) : (c & sb) ? -INFINITY : INFINITY;\n"
      "  float mag = e == 0 ? ldexpf((float)m, 1 - bias - man) : ldexpf((float)(m | (1u << man)), (int)e - bias - man);\n"
      "  return (c & sb) ? -mag : mag;\n"
      "}\n"
      "QDEV uint8_t q_f2n(float v, int width, int man, int bias, int kind, float maxv, int sat) {\n"
      "  uint32_t sign = signbit(v) ? 1u << (width - 1) : 0u;\n"
      "  if (v != v) return (uint8_t)(kind == 3 ? 0x8u : kind == 1 ? 0x80u : kind == 2 ? (sign | 0x7eu) : (sign | 0x7fu));\n"
      "  float a = fabsf(v), r = a;\n"
      "  int e;\n"
      "  if (a <= 3.40282347e38f) {\n"
      "    frexpf(a, &e);\n"
      "    int q = (e - 1 < 1 - bias ? 1 - bias : e - 1) - man;\n"
      "    r = ldexpf(rintf(ldexpf(a, -q)), q);\n"
      "  }\n"
      "  if (r > maxv) {\n"
      "    if (!sat && kind != 3) return (uint8_t)(kind == 2 ? (sign | 0x7cu) : kind == 1 ? 0x80u : (sign | 0x7fu));\n"
      "    r = maxv;\n"
      "  }\n"
      "  uint32_t bits = 0;\n"
      "  if (r != 0) {\n"
      "    frexpf(r, &e);\n"
      "    int be = e - 1 + bias;\n"
      "    bits = be <= 0 ? (uint32_t)ldexpf(r, bias - 1 + man) : (uint32_t)be << man | ((uint32_t)ldexpf(r, man - (e - 1)) & ((1u << man) - 1));\n"
      "  }\n"
      "  if (bits == 0 && kind == 1) return 0;\n"
      "  return (uint8_t)(sign | bits);\n"
      "}\n"
      "QDEV float q_ld_f8e8m0(uint32_t c) { return c == 0xffu ? NAN : ldexpf(1.0f, (int)c - 127); }\n"
      "QDEV uint8_t q_st_f8e8m0(int sat, float v) { /* the smallest power of two >= |v| */\n"
      "  if (v != v) return 0xff;\n"
      "  float a = fabsf(v);\n"
      "  if (a > 3.40282347e38f) return sat ? 0xfe : 0xff;\n"
      "  if (a < 5.87747175e-39f) return 0;\n"
      "  int e;\n"
      "  float m = frexpf(a, &e);\n"
      "  int be = (m == 0.5f ? e - 1 : e) + 127;\n"
      "  return be > 254 ? (sat ? 0xfe : 0xff) : (uint8_t)be;\n"
      "}\n"
      "#define q_ld_f8e4m3fn(c) q_n2f((c), 8, 3, 7, 0)\n"
      "#define q_st_f8e4m3fn(s, v) q_f2n((v), 8, 3, 7, 0, 448.0f, (s))\n"
      "#define q_ld_f8e4m3fnuz(c) q_n2f((c), 8, 3, 8, 1)\n"
      "#define q_st_f8e4m3fnuz(s, v) q_f2n((v), 8, 3, 8, 1, 240.0f, (s))\n"
      "#define q_ld_f8e5m2(c) q_n2f((c), 8, 2, 15, 2)\n"
      "#define q_st_f8e5m2(s, v) q_f2n((v), 8, 2, 15, 2, 57344.0f, (s))\n"
      "#define q_ld_f8e5m2fnuz(c) q_n2f((c), 8, 2, 16, 1)\n"
      "#define q_st_f8e5m2fnuz(s, v) q_f2n((v), 8, 2, 16, 1, 57344.0f, (s))\n"
      "#define q_ld_f4e2m1(c) q_n2f((c), 4, 1, 1, 3)\n"
      "#define q_st_f4e2m1(s, v) q_f2n((v), 4, 1, 1, 3, 6.0f, (s))\n"
      "/* i4/u4/i2/u2: the low `bits` bits, sign-extended for the signed ones */\n"
      "QDEV int32_t q_wrap_s(int bits, int32_t x) { return (int32_t)((uint32_t)x << (32 - bits)) >> (32 - bits); }\n"
      "QDEV uint32_t q_wrap_u(int bits, uint32_t x) { return x & ((1u << bits) - 1); }\n"
      "/* float -> integer: saturating, NaN -> 0 */\n"
      "#define Q_F2INT(S, T, LO, HI) QDEV T q_f2##S(double v) { return v != v ? (T)0 : v <= (double)(LO) ? (T)(LO) : v >= (double)(HI) ? (T)(HI) : (T)v; }\n"
      "Q_F2INT(i, int32_t, INT32_MIN, INT32_MAX)\n"
      "Q_F2INT(u, uint32_t, 0, UINT32_MAX)\n"
      "Q_F2INT(l, int64_t, INT64_MIN, INT64_MAX)\n"
      "Q_F2INT(ul, uint64_t, 0, UINT64_MAX)\n"
      "Q_F2INT(i8, int32_t, INT8_MIN, INT8_MAX)\n"
      "Q_F2INT(i16, int32_t, INT16_MIN, INT16_MAX)\n"
      "Q_F2INT(u8, uint32_t, 0, UINT8_MAX)\n"
      "Q_F2INT(u16, uint32_t, 0, UINT16_MAX)\n"
      "#define Q_FLOAT_FNS(S, T, F) \\\n"
      "  QDEV T q_exp_##S(T x) { return exp##F(x); } \\\n"
      "  QDEV T q_log_##S(T x) { return log##F(x); } \\\n"
      "  QDEV T q_sqrt_##S(T x) { return sqrt##F(x); } \\\n"
      "  QDEV T q_rsqrt_##S(T x) { return (T)1 / sqrt##F(x); } \\\n"
      "  QDEV T q_tanh_##S(T x) { return tanh##F(x); } \\\n"
      "  QDEV T q_sigmoid_##S(T x) { return (T)1 / ((T)1 + exp##F(-x)); } \\\n"
      "  QDEV T q_erf_##S(T x) { return erf##F(x); } \\\n"
      "  QDEV T q_abs_##S(T x) { return fabs##F(x); } \\\n"
      "  QDEV T q_floor_##S(T x) { return floor##F(x); } \\\n"
      "  QDEV T q_ceil_##S(T x) { return ceil##F(x); } \\\n"
      "  QDEV T q_round_##S(T x) { return rint##F(x); } \\\n"
      "  QDEV T q_sin_##S(T x) { return sin##F(x); } \\\n"
      "  QDEV T q_cos_##S(T x) { return cos##F(x); } \\\n"
      "  QDEV T q_asin_##S(T x) { return asin##F(x); } \\\n"
      "  QDEV T q_acos_##S(T x) { return acos##F(x); } \\\n"
      "  QDEV T q_atan_##S(T x) { return atan##F(x); } \\\n"
      "  QDEV T q_sinh_##S(T x) { return sinh##F(x); } \\\n"
      "  QDEV T q_cosh_##S(T x) { return cosh##F(x); } \\\n"
      "  QDEV T q_asinh_##S(T x) { return asinh##F(x); } \\\n"
      "  QDEV T q_acosh_##S(T x) { return acosh##F(x); } \\\n"
      "  QDEV T q_atanh_##S(T x) { return atanh##F(x); } \\\n"
      "  QDEV T q_recip_##S(T x) { return (T)1 / x; } \\\n"
      "  QDEV T q_sign_##S(T x) { return x > 0 ? (T)1 : x < 0 ? (T)-1 : x; } \\\n"
      "  QDEV int q_isnan_##S(T x) { return x != x; } \\\n"
      "  QDEV int q_isinf_##S(T x) { return x == (T)INFINITY || x == -(T)INFINITY; } \\\n"
      "  QDEV T q_max_##S(T a, T b) { return (a != a || a > b) ? a : b; } \\\n"
      "  QDEV T q_min_##S(T a, T b) { return (a != a || a < b) ? a : b; } \\\n"
      "  QDEV T q_pow_##S(T a, T b) { return pow##F(a, b); } \\\n"
      "  QDEV T q_floordiv_##S(T a, T b) { return floor##F(a / b); } \\\n"
      "  QDEV T q_fmod_##S(T a, T b) { return fmod##F(a, b); } \\\n"
      "  QDEV T q_atan2_##S(T a, T b) { return atan2##F(a, b); }\n"
      "Q_FLOAT_FNS(f, float, f)\n"
      "Q_FLOAT_FNS(d, double, )\n"
      "#define Q_INT_FNS(S, T) \\\n"
      "  QDEV T q_abs_##S(T x) { return x < 0 ? (T)0 - x : x; } \\\n"
      "  QDEV T q_sign_##S(T x) { return (T)((x > 0) - (x < 0)); } \\\n"
      "  QDEV T q_max_##S(T a, T b) { return a > b ? a : b; } \\\n"
      "  QDEV T q_min_##S(T a, T b) { return a < b ? a : b; } \\\n"
      "  QDEV T q_recip_##S(T x) { return (T)1 / x; } \\\n"
      "  QDEV int q_isnan_##S(T x) { (void)x; return 0; } \\\n"
      "  QDEV int q_isinf_##S(T x) { (void)x; return 0; } \\\n"
      "  QDEV T q_floordiv_##S(T a, T b) { T q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; } \\\n"
      "  QDEV T q_fmod_##S(T a, T b) { return a % b; } \\\n"
      "  QDEV T q_pow_##S(T a, T b) { T r = 1; if (b < 0) return (T)(a == 1 ? 1 : 0); \\\n"
      "    while (b > 0) { if (b & 1) r *= a; a *= a; b >>= 1; } return r; }\n"
      "#define Q_UINT_FNS(S, T) \\\n"
      "  QDEV T q_abs_##S(T x) { return x; } \\\n"
      "  QDEV T q_sign_##S(T x) { return (T)(x > 0); } \\\n"
      "  QDEV T q_max_##S(T a, T b) { return a > b ? a : b; } \\\n"
      "  QDEV T q_min_##S(T a, T b) { return a < b ? a : b; } \\\n"
      "  QDEV T q_recip_##S(T x) { return (T)1 / x; } \\\n"
      "  QDEV int q_isnan_##S(T x) { (void)x; return 0; } \\\n"
      "  QDEV int q_isinf_##S(T x) { (void)x; return 0; } \\\n"
      "  QDEV T q_floordiv_##S(T a, T b) { return a / b; } \\\n"
      "  QDEV T q_fmod_##S(T a, T b) { return a % b; } \\\n"
      "  QDEV T q_pow_##S(T a, T b) { T r = 1; while (b > 0) { if (b & 1) r *= a; a *= a; b >>= 1; } return r; }\n"
      "Q_INT_FNS(b, int)\n"
      "Q_INT_FNS(i, int32_t)\n"
      "Q_UINT_FNS(u, uint32_t)\n"
      "Q_INT_FNS(l, int64_t)\n"
      "Q_UINT_FNS(ul, uint64_t)\n",
      o);
}
