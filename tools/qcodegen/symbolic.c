/* symbolic.c: programs for modules with symbolic extents (`dim batch = [1, 16]`).
 *
 * A program serves every size in its symbols' ranges.  Tensors are laid out
 * at their bound: an input of the run's size is copied into the first rows
 * of its bound-sized buffer (the rest zero) and an output's first rows are
 * copied out, so every address a kernel computes is static.
 *
 * An op that is *row-wise* along its symbolic axes (qir_op_row_wise: each
 * index along them computed from the same indices of its operands alone, as
 * a batch axis is through convolutions, matmuls, norms and softmax over the
 * other axes) runs its kernels as planned, at the bound: rows past the run's
 * extent never reach the rows anything reads.  Where such a kernel's blocks
 * walk its output's axis 0 slowest, the host launches the run's blocks only
 * (kkernel.rows).
 *
 * Any other op in the module body (a reduction over a symbolic axis, a
 * window sliding along it, a concat along it) becomes its computes at the
 * run's extents (qir_op_expand_symbolic, qir/symte.c), which read the
 * symbols' values from a tensor qir_run fills (q_dims) and mask what lies
 * past them.  Where that is one compute over the op's own axes it keeps the
 * op's plans, and may stand in a kernel group (expand_group: q_dims becomes
 * an operand of the group) or be an rprogram's member; any other form there
 * is refused, at the op (-welder and -rammer make neither).  Every tiled
 * kernel skips the blocks past the run's extents (skip_blocks_past_run,
 * lower.c).
 */
#include <stdlib.h>
#include <string.h>

#include "kast.h"
#include "rprogram.h"
#include "symbolic.h"

#define MAX_CHAIN 16

typedef struct {
  qir_module *m;
  qir_diag *d;                  /* where errors go (a quiet sink while trying) */
  qir_value *dims;              /* the run's symbol values (cg_symbolic_lower) */
} checker;

static bool reads_dims(const checker *k, const qir_op *op) {
  for (int i = 0; i < op->n_operands; i++)
    if (k->dims && op->operands[i] == k->dims) return true;
  return false;
}

static bool check_op(qir_op *op, void *vk) {
  checker *k = vk;
  switch (op->code) {
  case QIR_OP_INPUT: case QIR_OP_OUTPUT: case QIR_OP_CONST: case QIR_OP_YIELD: case QIR_OP_RPROGRAM:
  case QIR_OP_KERNEL: /* its inner ops are checked; its results' types say their rows */
    return true;
  default: break;
  }
  if (reads_dims(k, op)) return true; /* written for the run's extents */
  const char *why = NULL;
  if (qir_op_row_wise(k->m, op, &why)) return true;
  qir_error(k->d, op->loc,
            "'%s' %s: its kernels at the bound would not serve every size, and qcodegen writes kernels for the run's "
            "extents inside a kernel group only for ops that run as one compute over their own axes, and none inside "
            "loops and ifs (issue 29); qopt -welder fuses no other, or fix the size with onnx2qir --dim NAME=N",
            qir_opinfo_get(op->code)->name, why);
  return false;
}

/* Replaces op (in the module body, or in a kernel group: in_group) by its
 * computes at the run's extents. */
static bool expand_op(checker *k, qir_op *op, bool in_group) {
  qir_op *chain[MAX_CHAIN];
  qir_value *results[QIR_MAX_RANK + 8] = {0};
  const char *why = NULL;
  int n = op->n_results <= QIR_MAX_RANK + 8 ? qir_op_expand_symbolic(k->m, op, k->dims, chain, MAX_CHAIN, results, &why) : 0;
  if (n <= 0) {
    qir_error(k->d, op->loc, "'%s' with symbolic extents cannot run at the run's extents: %s (issue 29); qrun runs the module, "
              "or fix the size with onnx2qir --dim NAME=N",
              qir_opinfo_get(op->code)->name, why ? why : "no tensor-expression form");
    return false;
  }
  /* one compute over the op's own axes: Roller's plans for the op are its */
  const qir_attr *tile = qir_op_attr(op, "tile"), *bands = qir_op_attr(op, "tile_bands");
  bool one = n == 1 && chain[0]->comp && qir_compute_has_axes_of(k->m, op, chain[0]->comp);
  if (!one && (in_group || qir_rprogram_packs(op))) {   /* a group's member, or its tasks are an rprogram's */
    for (int c = 0; c < n; c++) qir_op_unlink(chain[c]);
    if (in_group) return check_op(op, k);   /* says why */
    qir_error(k->d, op->loc, "'%s' packed by an rprogram runs at the run's extents as %d compute%s, not one over its own axes: "
              "its tasks would not be the plan's (issue 29); qopt -rammer packs only ops that run as one",
              qir_opinfo_get(op->code)->name, n, n == 1 ? "" : "s");
    return false;
  }
  for (int c = 0; c < n; c++) qir_op_insert_before(op, chain[c]);
  if (one && tile) {
    qir_op_set_attr(k->m, chain[0], "tile", tile->val, true);
    if (bands) qir_op_set_attr(k->m, chain[0], "tile_bands", bands->val, true);
  }
  /* a group member's result edge keeps its level (-welder's #fuse) */
  const qir_attr *fuse = qir_op_attr(op, "fuse");
  if (fuse) qir_op_set_attr(k->m, chain[n - 1], "fuse", fuse->val, true);
  for (int i = 0; i < op->n_results; i++) {
    if (results[i]->name == NULL) results[i]->name = op->results[i]->name;
    qir_value_replace_uses(k->m, op->results[i], results[i]);
  }
  qir_op_unlink(op);
  return true;
}

/* A kernel group's members that are not row-wise: each becomes its compute
 * at the run's extents in its place, which must be one compute over its own
 * axes (what -welder fuses: qir_op_expands_to_one), taking the symbols'
 * values through a new operand of the group.  A group that then does not
 * compose runs as separate kernels, with a warning (cg_compose_groups). */
static bool expand_group(checker *k, qir_op *group) {
  qir_region *r = group->regions[0];
  qir_value *arg = NULL;
  for (qir_op *op = r->first, *next; op; op = next) {
    next = op->next;
    qir_diag quiet;
    qir_diag_init_quiet(&quiet);
    checker probe = *k;
    probe.d = &quiet;
    if (check_op(op, &probe)) continue;
    if (!arg) {
      qir_op_add_operand(k->m, group, k->dims);
      arg = qir_region_add_arg(k->m, r, k->dims->type, "q_dims");
    }
    checker inner = *k;
    inner.dims = arg;
    if (!expand_op(&inner, op, true)) return false;
  }
  return true;
}

/* The run's symbol values: written by qir_run before anything runs. */
static qir_value *run_dims_input(qir_module *m) {
  int64_t ns = m->n_syms;
  qir_type t = qir_type_make(QIR_I64, 1, &ns);
  qir_op *in = qir_op_new(m, QIR_OP_INPUT, 0, NULL, 1, &t, m->loc);
  qir_op_set_attr(m, in, "name", qir_attr_string(m, "q_dims"), false);
  qir_op_set_attr(m, in, "q_run_dims", qir_attr_int(1), false);
  in->results[0]->name = "q_dims";
  if (m->body->first) qir_op_insert_before(m->body->first, in);
  else qir_op_append(m->body, in);
  return in->results[0];
}

/* The ops of region r (the body, or a version's region) as cg_symbolic_lower says. */
static bool lower_region(checker *k, qir_diag *d, qir_region *r) {
  bool ok = true;
  for (qir_op *op = r->first, *next; op && ok; op = next) {
    next = op->next;
    if (op->code == QIR_OP_VERSIONS) {   /* each plan's region as a body of its own */
      for (int i = 0; i < op->n_regions && ok; i++) ok = lower_region(k, d, op->regions[i]);
      continue;
    }
    qir_diag quiet;
    qir_diag_init_quiet(&quiet);
    k->d = &quiet;
    if (check_op(op, k)) { /* row-wise: its kernels at the bound serve */
      k->d = d;
      if (op->code == QIR_OP_KERNEL) ok = expand_group(k, op);
      else if (op->n_regions) ok = qir_walk(op->regions[0], check_op, k) && (op->n_regions < 2 || qir_walk(op->regions[1], check_op, k));
      continue;
    }
    k->d = d;
    if (op->code == QIR_OP_KERNEL || op->code == QIR_OP_RPROGRAM || op->n_regions) {
      ok = check_op(op, k); /* says why */
      break;
    }
    ok = expand_op(k, op, false);
  }
  return ok;
}

bool cg_symbolic_lower(qir_module *m, qir_diag *d, qir_value **run_dims) {
  *run_dims = NULL;
  if (!m->n_syms) return true;
  checker k = {m, d, run_dims_input(m)};
  *run_dims = k.dims;
  return lower_region(&k, d, m->body);
}

int cg_dim_c(const qir_dim *e, const char *syms, char *buf, size_t n) {
  switch (e->kind) {
  case QIR_DIM_CONST: return snprintf(buf, n, "INT64_C(%lld)", (long long)e->c);
  case QIR_DIM_SYM: return snprintf(buf, n, "%s[%d]", syms, e->sym);
  default: break;
  }
  char a[512], b[512];
  cg_dim_c(e->a, syms, a, sizeof a);
  cg_dim_c(e->b, syms, b, sizeof b);
  switch (e->kind) {
  case QIR_DIM_ADD: return snprintf(buf, n, "(%s + %s)", a, b);
  case QIR_DIM_SUB: return snprintf(buf, n, "(%s - %s)", a, b);
  case QIR_DIM_MUL: return snprintf(buf, n, "(%s * %s)", a, b);
  case QIR_DIM_FLOORDIV: return snprintf(buf, n, "q_floordiv(%s, %s)", a, b);
  case QIR_DIM_MIN: return snprintf(buf, n, "(%s < %s ? %s : %s)", a, b, a, b);
  case QIR_DIM_MAX: return snprintf(buf, n, "(%s > %s ? %s : %s)", a, b, a, b);
  default: return 0;
  }
}

/* ------------------------------------------------------------ host code */

static const char floordiv_text[] =
    "static inline int64_t q_floordiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }\n";


static const char pad_copy_text[] =
    "/* Copies the run's elements between a compact host tensor (extents ext) and\n"
    " * its device buffer laid out at the bound (extents bound); into_bound 1 copies in.\n"
    " * The innermost axes the run fills whole travel with the next axis out as one\n"
    " * piece, a row of a 2D copy over the axis outside that; the axes further out are\n"
    " * a loop.  Elements past the run are neither written nor read: the kernels never\n"
    " * let them reach the run's outputs.  Returns 1 on a failed copy. */\n"
    "static int q_pad_copy(unsigned char *dev, unsigned char *host, size_t esize, int rank, const int64_t *bound,\n"
    "                      const int64_t *ext, int into_bound) {\n"
    "  int j = rank - 1;\n"
    "  size_t inner = esize;\n"
    "  while (j >= 0 && ext[j] == bound[j]) inner *= (size_t)bound[j--];\n"
    "  if (j < 0 && into_bound) return q_h2d(dev, host, inner) != 0;\n"
    "  if (j < 0) return q_d2h(host, dev, inner) != 0;\n"
    "  size_t width = (size_t)ext[j] * inner, pitch = (size_t)bound[j] * inner, rows = j > 0 ? (size_t)ext[j - 1] : 1;\n"
    "  int64_t outer = 1;\n"
    "  for (int d = 0; d + 1 < j; d++) outer *= ext[d];\n"
    "  for (int64_t o = 0; o < outer; o++) {\n"
    "    int64_t rem = o;\n"
    "    size_t off = 0, stride = j > 0 ? (size_t)bound[j - 1] * pitch : 0;\n"
    "    for (int d = j - 2; d >= 0; d--) {\n"
    "      off += (size_t)(rem % ext[d]) * stride;\n"
    "      rem /= ext[d];\n"
    "      stride *= (size_t)bound[d];\n"
    "    }\n"
    "    unsigned char *h = host + (size_t)o * rows * width;\n"
    "    if (into_bound) {\n"
    "      if (q_h2d_2d(dev + off, pitch, h, width, width, rows) != 0) return 1;\n"
    "    } else if (q_d2h_2d(h, width, dev + off, pitch, width, rows) != 0) {\n"
    "      return 1;\n"
    "    }\n"
    "  }\n"
    "  return 0;\n"
    "}\n";

static const char relayout_text[] =
    "/* Copies the run's elements (extents ext) between two device buffers laid\n"
    " * out at different bounds (a `versions` plan's arguments and results):\n"
    " * rows of a 2D copy over the innermost axis the run does not fill in both,\n"
    " * the axes further out a loop.  Returns 1 on a failed copy. */\n"
    "static int q_relayout(unsigned char *dst, const int64_t *dbnd, const unsigned char *src, const int64_t *sbnd, size_t esize,\n"
    "                      int rank, const int64_t *ext) {\n"
    "  int j = rank - 1;\n"
    "  size_t inner = esize;\n"
    "  while (j >= 0 && ext[j] == dbnd[j] && ext[j] == sbnd[j]) inner *= (size_t)ext[j--];\n"
    "  if (j < 0) return q_d2d(dst, src, inner) != 0;\n"
    "  size_t width = (size_t)ext[j] * inner, dp = (size_t)dbnd[j] * inner, sp = (size_t)sbnd[j] * inner;\n"
    "  size_t rows = j > 0 ? (size_t)ext[j - 1] : 1;\n"
    "  int64_t outer = 1;\n"
    "  for (int d = 0; d + 1 < j; d++) outer *= ext[d];\n"
    "  for (int64_t o = 0; o < outer; o++) {\n"
    "    int64_t rem = o;\n"
    "    size_t doff = 0, soff = 0, ds = j > 0 ? (size_t)dbnd[j - 1] * dp : 0, ss = j > 0 ? (size_t)sbnd[j - 1] * sp : 0;\n"
    "    for (int d = j - 2; d >= 0; d--) {\n"
    "      doff += (size_t)(rem % ext[d]) * ds;\n"
    "      soff += (size_t)(rem % ext[d]) * ss;\n"
    "      rem /= ext[d];\n"
    "      ds *= (size_t)dbnd[d];\n"
    "      ss *= (size_t)sbnd[d];\n"
    "    }\n"
    "    if (q_d2d_2d(dst + doff, dp, src + soff, sp, width, rows) != 0) return 1;\n"
    "  }\n"
    "  return 0;\n"
    "}\n";

static bool has_versions(qir_region *r) {
  for (qir_op *op = r->first; op; op = op->next) {
    if (op->code == QIR_OP_VERSIONS) return true;
    for (int i = 0; i < op->n_regions; i++)
      if (has_versions(op->regions[i])) return true;
  }
  return false;
}

/* Each symbol of a `versions` plan: the operand's symbol it stands for (its
 * value in every run), else -1. */
static void version_aliases(const qir_module *m, qir_region *r, int *alias) {
  int *outer_of = malloc(sizeof *outer_of * (size_t)(m->n_syms + 1));
  int64_t *fixed = malloc(sizeof *fixed * (size_t)(m->n_syms + 1));
  char why[256];
  if (!outer_of || !fixed) abort();
  for (qir_op *op = r->first; op; op = op->next) {
    for (int i = 0; op->code == QIR_OP_VERSIONS && i < op->n_regions; i++)
      if (qir_versions_region_syms(m, op, i, outer_of, fixed, why, sizeof why))
        for (int k = 0; k < m->n_syms; k++)
          if (outer_of[k] >= 0) alias[k] = outer_of[k];
    for (int i = 0; i < op->n_regions; i++) version_aliases(m, op->regions[i], alias);
  }
  free(outer_of);
  free(fixed);
}

static void emit_ext(FILE *o, const qir_type *t, const char *name);

/* The end of a copy's block (`{ ... if (copy(...)) {` written): a failed
 * copy of `what` fails the run. */
static void copy_failed(FILE *o, const char *what, int level) {
  for (int i = 0; i <= level + 1; i++) fputs("  ", o);
  fprintf(o, "fputs(\"qir_run: copying %s failed\\n\", stderr);\n", what);
  for (int i = 0; i <= level + 1; i++) fputs("  ", o);
  fputs("return 1;\n", o);
  for (int i = 0; i <= level; i++) fputs("  ", o);
  fputs("}\n", o);
  for (int i = 0; i < level; i++) fputs("  ", o);
  fputs("}\n", o);
}

void cg_symbolic_relayout(FILE *o, const qir_type *dst_t, const char *dst, const qir_type *src_t, const char *src, int level) {
  for (int i = 0; i < level; i++) fputs("  ", o);
  fputs("{\n", o);
  for (int i = 0; i <= level; i++) fputs("  ", o);
  emit_ext(o, src_t, "q_ext");
  for (int w = 0; w < 2; w++) {
    const qir_type *t = w ? src_t : dst_t;
    fprintf(o, " static const int64_t %s[%d] = {", w ? "q_sbnd" : "q_dbnd", t->rank ? t->rank : 1);
    for (int a = 0; a < t->rank; a++) fprintf(o, "%s%lld", a ? ", " : "", (long long)t->dims[a]);
    if (!t->rank) fputs("1", o);
    fputs("};", o);
  }
  fputc('\n', o);
  for (int i = 0; i <= level; i++) fputs("  ", o);
  fprintf(o, "if (q_relayout((unsigned char *)%s, q_dbnd, (const unsigned char *)%s, q_sbnd, %d, %d, q_ext)) {\n", dst, src,
          qir_dtype_size(src_t->dtype), src_t->rank);
  copy_failed(o, "a versions plan's argument or result", level);
}

void cg_symbolic_prelude(FILE *o, qir_module *m, qir_op *const *inputs, int n_in) {
  if (!m->n_syms) return;
  fprintf(o, "\n/* ---- symbolic extents: every size in these ranges runs (kernels at the bound) */\n#define Q_SYMBOLIC 1\n#define Q_N_SYMS %d\n",
          m->n_syms);
  fputs("static const struct { const char *name; int64_t lo, hi, step; } q_syms[Q_N_SYMS] = {\n", o);
  for (int k = 0; k < m->n_syms; k++)
    fprintf(o, "  {\"%s\", %lld, %lld, %lld},\n", m->syms[k].name, (long long)m->syms[k].lo, (long long)m->syms[k].hi,
            (long long)m->syms[k].step);
  fputs("};\n/* per input axis: the symbol it gives (>= 0), -2 an extent computed from symbols, -1 static */\n", o);
  fprintf(o, "static const signed char q_insym[%d][8] = {\n", n_in ? n_in : 1);
  for (int i = 0; i < n_in; i++) {
    const qir_type *t = &inputs[i]->results[0]->type;
    fputs("  {", o);
    for (int a = 0; a < 8; a++)
      fprintf(o, "%s%d", a ? ", " : "", a >= t->rank || !t->sym[a] ? -1 : t->sym[a]->kind == QIR_DIM_SYM ? t->sym[a]->sym : -2);
    fputs("},\n", o);
  }
  if (!n_in) fputs("  {-1, -1, -1, -1, -1, -1, -1, -1},\n", o);
  fputs("};\n", o);
  fprintf(o, "static const char *const q_intype[%d] = {", n_in ? n_in : 1);
  for (int i = 0; i < n_in; i++) {
    char tb[1024];
    qir_type_format(&inputs[i]->results[0]->type, tb, sizeof tb);
    fprintf(o, "%s\"%s\"", i ? ", " : "", tb);
  }
  fputs(n_in ? "};\n" : "\"\"};\n", o);
  fputs(pad_copy_text, o);
  if (has_versions(m->body)) fputs(relayout_text, o);
  fputs("/* the blocks a kernel needs for `rows` rows of its output (its blocks walk them slowest) */\n"
        "static inline int64_t q_blocks(int64_t rows, int64_t num, int64_t den, int64_t mul, int64_t grid) {\n"
        "  int64_t b = (rows * num + den - 1) / den * mul;\n  return b < 1 ? 1 : b > grid ? grid : b;\n}\n", o);
  fputs("struct qir_model;\nstatic int q_bind_dims(struct qir_model *m);\n", o);
}

/* The host's extents, a band's points and the checker's runs divide with it
 * (q_bind_dims names it, for compilers that warn of an unused one). */
void cg_symbolic_floordiv(FILE *o) { fputs(floordiv_text, o); }

void cg_symbolic_model_fields(FILE *o, qir_module *m, int n_in) {
  if (!m->n_syms) return;
  fprintf(o, "  int64_t dim[%d];   /* the symbols' values for this run */\n", m->n_syms);
  fprintf(o, "  int64_t in_dims[%d][8];   /* each input's shape (qir_set_input_shape) */\n  int in_set[%d];\n", n_in ? n_in : 1,
          n_in ? n_in : 1);
}

static void emit_ext(FILE *o, const qir_type *t, const char *name) {
  fprintf(o, "int64_t %s[%d] = {", name, t->rank ? t->rank : 1);
  for (int a = 0; a < t->rank; a++) {
    char buf[1024];
    if (t->sym[a]) cg_dim_c(t->sym[a], "m->dim", buf, sizeof buf);
    else snprintf(buf, sizeof buf, "%lld", (long long)t->dims[a]);
    fprintf(o, "%s%s", a ? ", " : "", buf);
  }
  if (!t->rank) fputs("1", o);
  fputs("};", o);
}

void cg_symbolic_copy(FILE *o, const qir_type *t, const char *dev, int io_index, bool input, int level) {
  for (int i = 0; i < level; i++) fputs("  ", o);
  fputs("{\n", o);
  for (int i = 0; i <= level; i++) fputs("  ", o);
  emit_ext(o, t, "q_ext");
  fprintf(o, " static const int64_t q_bnd[%d] = {", t->rank ? t->rank : 1);
  for (int a = 0; a < t->rank; a++) fprintf(o, "%s%lld", a ? ", " : "", (long long)t->dims[a]);
  if (!t->rank) fputs("1", o);
  fputs("};\n", o);
  for (int i = 0; i <= level; i++) fputs("  ", o);
  fprintf(o, "if (q_pad_copy((unsigned char *)%s, (unsigned char *)%s[%d], %d, %d, q_bnd, q_ext, %d)) {\n", dev,
          input ? "inputs" : "outputs", io_index, qir_dtype_size(t->dtype), t->rank, input);
  char what[64];
  snprintf(what, sizeof what, "%s %d", input ? "input" : "output", io_index);
  copy_failed(o, what, level);
}

void cg_symbolic_api(FILE *o, qir_module *m, qir_op *const *inputs, int n_in, qir_op *const *outputs, int n_out) {
  if (!m->n_syms) {
    fputs("\nQAPI int qir_set_input_shape(qir_model *m, int index, int rank, const int64_t *dims) {\n"
          "  (void)m;\n  return q_check_input(\"qir_set_input_shape\", index, index >= 0 && index < Q_N_INPUTS ? q_tname[q_inputs[index].dtype] : \"?\", rank, dims);\n}\n",
          o);
  } else {
    fputs("\nQAPI int qir_set_input_shape(qir_model *m, int index, int rank, const int64_t *dims) {\n"
          "  if (q_check_input(\"qir_set_input_shape\", index, index >= 0 && index < Q_N_INPUTS ? q_tname[q_inputs[index].dtype] : \"?\", rank, dims)) return 1;\n"
          "  for (int d = 0; d < rank; d++) m->in_dims[index][d] = dims[d];\n"
          "  m->in_set[index] = 1;\n  return 0;\n}\n\n",
          o);
    fputs("/* the symbols from the inputs' shapes; every extent computed from them checked */\n"
          "static int q_bind_dims(struct qir_model *m) {\n  int set[Q_N_SYMS] = {0}, who[Q_N_SYMS] = {0};\n"
          "  (void)q_blocks;   /* used where a kernel's rows are symbolic */\n"
          "  (void)q_floordiv;   /* used where an extent divides */\n"
          "  for (int i = 0; i < Q_N_INPUTS; i++)\n"
          "    for (int d = 0; d < q_inputs[i].rank; d++) {\n"
          "      int k = q_insym[i][d];\n"
          "      if (k == -1) continue;\n"
          "      if (!m->in_set[i]) {\n"
          "        fprintf(stderr, \"qir_run: input '%s' has symbolic extents: give its shape with qir_set_input_shape first\\n\", q_inputs[i].name);\n"
          "        return 1;\n      }\n"
          "      if (k < 0) continue;\n"
          "      if (set[k] && m->dim[k] != m->in_dims[i][d]) {\n"
          "        fprintf(stderr, \"qir_run: input '%s' axis %d sets dimension '%s' to %lld, but input '%s' set it to %lld\\n\",\n"
          "                q_inputs[i].name, d, q_syms[k].name, (long long)m->in_dims[i][d], q_inputs[who[k]].name, (long long)m->dim[k]);\n"
          "        return 1;\n      }\n"
          "      m->dim[k] = m->in_dims[i][d], set[k] = 1, who[k] = i;\n    }\n",
          o);
    /* a versions plan's symbols take the values of those they stand for */
    int *alias = malloc(sizeof *alias * (size_t)(m->n_syms + 1));
    if (!alias) abort();
    for (int k = 0; k < m->n_syms; k++) alias[k] = -1;
    version_aliases(m, m->body, alias);
    for (int k = 0; k < m->n_syms; k++)
      if (alias[k] >= 0) fprintf(o, "  m->dim[%d] = m->dim[%d], set[%d] = set[%d];   /* %s is %s */\n", k, alias[k], k, alias[k], m->syms[k].name, m->syms[alias[k]].name);
    free(alias);
    fputs("  for (int k = 0; k < Q_N_SYMS; k++)\n"
          "    if (!set[k]) {\n"
          "      fprintf(stderr, \"qir_run: no input axis gives dimension '%s' by itself\\n\", q_syms[k].name);\n"
          "      return 1;\n    }\n",
          o);
    for (int i = 0; i < n_in; i++) {
      const qir_type *t = &inputs[i]->results[0]->type;
      for (int a = 0; a < t->rank; a++) {
        if (!t->sym[a] || t->sym[a]->kind == QIR_DIM_SYM) continue;
        char e[1024], txt[512];
        cg_dim_c(t->sym[a], "m->dim", e, sizeof e);
        qir_dim_format(t->sym[a], txt, sizeof txt);
        fprintf(o,
                "  if (m->in_dims[%d][%d] != %s) {\n"
                "    fprintf(stderr, \"qir_run: input '%%s' axis %d is %%lld, but %s is %%lld\\n\", q_inputs[%d].name, (long long)m->in_dims[%d][%d], (long long)%s);\n"
                "    return 1;\n  }\n",
                i, a, e, a, txt, i, i, a, e);
      }
    }
    for (int i = 0; i < n_out; i++) {
      const qir_type *t = &outputs[i]->operands[0]->type;
      if (t->rank && t->sym[0]) {
        char e[1024];
        cg_dim_c(t->sym[0], "m->dim", e, sizeof e);
        fprintf(o, "  m->out_rows[%d] = %s;\n", i, e);
      }
    }
    fputs("  return 0;\n}\n", o);
  }
  /* qir_output_shape */
  fputs("\nQAPI int qir_output_shape(const qir_model *m, int i, int64_t *dims) {\n  switch (i) {\n", o);
  for (int i = 0; i < n_out; i++) {
    const qir_type *t = &outputs[i]->operands[0]->type;
    fprintf(o, "  case %d:", i);
    for (int a = 0; a < t->rank; a++) {
      char e[1024];
      if (t->sym[a]) cg_dim_c(t->sym[a], "m->dim", e, sizeof e);
      else if (a == 0 && t->bounded) snprintf(e, sizeof e, "m->out_rows[%d]", i);
      else snprintf(e, sizeof e, "%lld", (long long)t->dims[a]);
      fprintf(o, " dims[%d] = %s;", a, e);
    }
    fprintf(o, " return %d;\n", t->rank);
  }
  fputs("  default: (void)m; (void)dims; return -1;\n  }\n}\n", o);
}
