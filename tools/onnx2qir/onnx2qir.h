/* onnx2qir.h: the ONNX importer's internal interface.
 *
 * import.c   model and graph walking, scopes, constants, folding, errors
 * convert.c  one converter per ONNX operator (the table at its end)
 * control.c  If, Loop, Scan
 * rnn.c      LSTM, GRU, RNN as loop regions of primitive ops
 * composite.c operators built from primitive ops (losses, RMSNorm, Q/DQ, ...)
 * signal.c   DFT, STFT and the window functions
 * datadep.c  operators with data-dependent shapes, computed when their inputs are constants
 * dims.c     graph input types: --shape, --dim, symbolic dimensions defaulted
 *            to 1 (warnings, and notes on errors that depend on them)
 * main.c     command line, weights sidecar, printing
 */
#ifndef ONNX2QIR_H
#define ONNX2QIR_H

#include "onnx.pb-c.h"
#include "qir.h"

/* A value no converter could produce (its node failed): users are skipped
 * quietly so one run lists every unsupported operator without cascades. */
#define POISON ((qir_value *)1)

/* Largest tensor the importer will fold or materialise (elements). */
#define FOLD_LIMIT ((int64_t)1 << 20)
/* Largest dense constant folding may make out of splat operands. */
#define SPLAT_DENSE_LIMIT 4096
/* Largest element count any tensor type may have: rejects absurd shapes before
 * anything is allocated. */
#define MAX_NUMEL ((int64_t)1 << 40)

typedef struct strmap strmap;
strmap *strmap_new(void);
void strmap_free(strmap *s);
void *strmap_get(const strmap *s, const char *key);
void strmap_put(strmap *s, const char *key, void *val); /* key copied */

typedef struct scope scope;
struct scope {
  strmap *vals;                 /* ONNX name -> qir_value* (or POISON) */
  scope *parent;                /* enclosing graph's scope (subgraphs) */
};

typedef struct {
  const char *name;
  int rank;
  int64_t dims[QIR_MAX_RANK];   /* the extent, or the bound of a range */
  int64_t lo[QIR_MAX_RANK];     /* a range's least value (== dims[k] when fixed) */
  int64_t step[QIR_MAX_RANK];   /* a range's step (MIN..MAX%STEP; 1 by default) */
} shape_opt;

typedef struct {
  const char *name;
  const char *path;
} bind_opt;

/* A named dimension's value: from --dim NAME=N (source "dim") or learnt from a
 * --shape of an input that names the dimension (source "shape"). */
typedef struct {
  const char *name;
  int64_t value;                /* the extent, or the bound of a range (--dim NAME=MIN..MAX) */
  int64_t lo;                   /* a range's least value (== value when fixed) */
  int64_t step;                 /* a range's step: MIN..MAX%STEP takes MIN + multiples of STEP */
  const char *source;
  const char *from;             /* the option, for messages: "--dim N=8", "--shape x" */
  bool used;                    /* some graph input has a dimension of this name */
} named_dim;

/* A symbolic dimension of the graph inputs that nothing set, so onnx2qir chose
 * 1: one per dim_param name, one per unnamed axis. */
#define SYM_USES 8
typedef struct {
  const char *name;             /* dim_param; NULL for an unnamed axis */
  int n_uses;                   /* (input, axis) pairs it sets; the first SYM_USES kept */
  struct {
    const char *input;
    int axis;
    int rank;
    int64_t dims[QIR_MAX_RANK]; /* the input's shape, for a --shape hint */
  } uses[SYM_USES];
} sym_dim;

/* How each axis of a graph input got its extent, recorded on the input op
 * (attributes dim_params and dim_source, see docs/qir.md). */
typedef struct {
  const char *param[QIR_MAX_RANK];  /* the model's dim_param, "" when none */
  const char *source[QIR_MAX_RANK]; /* "model", "shape", "dim" or "default" */
  bool symbolic;                    /* some axis is not fixed by the model */
  uintptr_t taint;                  /* bits of imp->syms this input's shape uses */
} input_dims;

typedef struct importer importer;
struct importer {
  qir_module *m;
  const char *model_path;       /* for messages */
  int64_t opset;                /* ai.onnx opset of the model */
  int64_t ir_version;
  int n_errors;
  int n_printed;                /* errors shown (repeats of an unsupported op are not) */
  qir_region *region;           /* where new ops go */
  scope *sc;                    /* innermost scope */
  strmap *used_names;           /* SSA names taken in the module */
  const char *base;             /* name stem for helper values of the node */
  const Onnx__NodeProto *node;  /* node being converted, for messages */
  strmap *unsupported;          /* op types already reported */
  int n_shapes;
  shape_opt *shapes;
  int n_binds;
  bind_opt *binds;
  int n_named;                  /* --dim options first, then names learnt from --shape */
  named_dim *named;
  bool strict_shapes;           /* --strict-shapes: a symbolic dimension is an error */
  int n_syms, cap_syms;
  sym_dim *syms;                /* defaulted dimensions, in order of appearance */
  strmap *taint;                /* ONNX value name -> bits of syms its shape depends on */
  uintptr_t node_taint;         /* the same for the inputs of the node being converted */
  int n_dim_opts;               /* how many of named[] are --dim options */
  const Onnx__ModelProto *model;
  /* A probe import (dims.c) asks whether a node still fails with other
   * extents for the defaulted dimensions: it prints nothing. */
  const int64_t *probe;         /* extent of each syms[i] instead of 1 */
  int n_probe;
  const Onnx__NodeProto *probe_node;
  bool probe_reached, probe_failed;
  char probe_message[512];      /* probe_node's first error, without the node prefix */
  /* the last node dims_note probed, so that its further errors reuse the answer */
  const Onnx__NodeProto *noted_node;
  uintptr_t noted_mask, noted_blamed;
  int probes_run;               /* bounded: each is a whole import */
  int quiet;                    /* > 0: count errors without printing (trial imports) */
  char quiet_first[512];        /* the first error seen while quiet */
  int64_t unrolled;             /* loop iterations unrolled so far (bounded) */
};

/* Per-node view handed to converters. */
typedef struct {
  importer *imp;
  const Onnx__NodeProto *node;
  int n_in;
  qir_value **in;               /* NULL where the input is absent ("") */
  int n_out;                    /* outputs the node names */
  qir_value **out;              /* converters fill out[0..n_out-1] (NULL = unused) */
  int64_t opset;
} node_ctx;

/* ---- import.c */
bool import_model(importer *imp, const Onnx__ModelProto *model);
/* One-line error "MODEL: node 'N' (Op, opset K): MSG" (node part when converting). */
void imp_error(importer *imp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Imports the nodes of a (sub)graph into imp->region with a new scope whose
 * parent is the current one; the graph's own inputs must already be put into
 * `sc`.  Fills outs[] with the graph outputs. */
bool import_graph_body(importer *imp, const Onnx__GraphProto *g, scope *sc, qir_value **outs);
/* A fresh region owned by no op yet (branches are imported before their op
 * exists; the caller then hands the region to the op). */
qir_region *region_detached(importer *imp);
void region_adopt(qir_op *op, int index, qir_region *r);
scope *scope_new(scope *parent);
void scope_free(scope *s);
qir_value *scope_lookup(const scope *s, const char *name);

bool onnx_dtype_to_qir(int32_t onnx_type, qir_dtype *out);
const char *onnx_dtype_name(int32_t onnx_type);
/* Graph-input element types qir lacks that widen exactly (float8 -> f32, int4 -> i8, ...). */
/* The ONNX type name (FLOAT8E4M3FN, INT4, ...) v was widened from when it is
 * such a graph input, else NULL: converters whose result type would follow
 * v's refuse it rather than compute in the wide type. */
/* TensorProto -> const op (not linked); NULL after an error (names `what`). */
qir_op *tensor_to_const(importer *imp, const Onnx__TensorProto *t, const char *what);
/* Checks a shape: rank, non-negative dims, element count bounded. */
bool check_dims(importer *imp, size_t n, const int64_t *dims, const char *what);

/* ---- dims.c */
/* Before the inputs are typed: the names --shape fixes, --dim names no input has. */
bool dims_prepare(importer *imp, const Onnx__GraphProto *g);
/* Type of a graph input from its ValueInfoProto, --shape, --dim and the
 * default of 1; info says how each axis got its extent. */
bool value_info_type(importer *imp, const Onnx__ValueInfoProto *vi, qir_type *out, input_dims *info);
/* One warning per defaulted dimension, naming the inputs and the flag. */
void dims_warn(importer *imp);
/* Notes after an error (msg, without the node prefix) whose node depends on
 * defaulted dimensions (mask): the ones that make it fail. */
void dims_note(importer *imp, uintptr_t mask, const char *msg);
void dims_free(importer *imp);

/* Building ops.  begin, set attributes, end: end infers the result types (or
 * checks the given ones), folds the op into a constant when every operand is
 * one, else appends it to imp->region.  The results land in outs (may be NULL
 * for single-result ops: use the return value).  NULL after an error. */
qir_op *op_begin(importer *imp, qir_opcode code, int n_in, qir_value *const *in);
qir_op *op_begin_n(importer *imp, qir_opcode code, int n_in, qir_value *const *in, int n_res);
qir_op *op_begin_typed(importer *imp, qir_opcode code, int n_in, qir_value *const *in, int n_res,
                       const qir_type *types);
qir_value *op_end(importer *imp, qir_op *op, qir_value **outs);
void set_i(importer *imp, qir_op *op, const char *key, int64_t v);
void set_f(importer *imp, qir_op *op, const char *key, double v);
void set_w(importer *imp, qir_op *op, const char *key, const char *word);
void set_s(importer *imp, qir_op *op, const char *key, const char *str);
void set_ints(importer *imp, qir_op *op, const char *key, int n, const int64_t *v);
void set_floats(importer *imp, qir_op *op, const char *key, int n, const double *v);
/* Shorthands: one result, no attributes. */
qir_value *emit1(importer *imp, qir_opcode code, qir_value *a);
qir_value *emit2(importer *imp, qir_opcode code, qir_value *a, qir_value *b);
qir_value *emit3(importer *imp, qir_opcode code, qir_value *a, qir_value *b, qir_value *c);
qir_value *emit_reshape(importer *imp, qir_value *x, int rank, const int64_t *dims);
/* A reshape to t, whose extents may be symbolic. */
qir_value *emit_reshape_type(importer *imp, qir_value *x, const qir_type *t);
qir_value *emit_cast(importer *imp, qir_value *x, qir_dtype to);
qir_value *emit_transpose(importer *imp, qir_value *x, int n, const int64_t *perm);
/* v reshaped with a new axis of extent 1 at `axis` (NULL stays NULL). */
qir_value *emit_insert_unit_axis(importer *imp, qir_value *v, int axis);
/* x with its first axis (of extent n) in reverse order: a gather. */
qir_value *emit_reverse_axis0(importer *imp, qir_value *x, int64_t n);
/* Constants, appended to imp->region. */
qir_value *const_scalar(importer *imp, qir_dtype dt, double v);
qir_value *const_splat(importer *imp, qir_type t, double v);
qir_value *const_data(importer *imp, qir_type t, const void *data);
qir_value *const_i64s(importer *imp, int n, const int64_t *v); /* i64[n] */
qir_value *add_const_op(importer *imp, qir_op *cst);
/* The const op defining v, or NULL. */
qir_op *const_def(qir_value *v);
/* Reads a constant integer (or float) tensor; false (and an error naming the
 * input and the graph inputs it depends on) when v is not a constant. */
/* Converter helpers every node file shares (convert.c): report and return
 * false; check that inputs 0..n-1 are present; store output k. */
bool node_fail(node_ctx *nc, const char *msg);
bool node_need_inputs(node_ctx *nc, int n);
bool node_set_out(node_ctx *nc, int k, qir_value *v);
bool need_const_ints(node_ctx *nc, int input, int64_t *out, int cap, int *n);
bool need_const_floats(node_ctx *nc, int input, double *out, int cap, int *n);
/* The constant at `input` (any size), or NULL after the same error. */
qir_value *need_const_input(node_ctx *nc, int input);
double const_elem(importer *imp, qir_value *v, int64_t i);
int64_t const_int(importer *imp, qir_value *v, int64_t i); /* exact for i64 */
/* Names the value (sanitised, unique in the module). */
void name_value(importer *imp, qir_value *v, const char *onnx_name);

/* Attribute access on the current node. */
const Onnx__AttributeProto *attr_find(const node_ctx *nc, const char *name);
int64_t attr_int(const node_ctx *nc, const char *name, int64_t dflt);
double attr_float(const node_ctx *nc, const char *name, double dflt);
const char *attr_str(const node_ctx *nc, const char *name, const char *dflt);
int attr_ints(const node_ctx *nc, const char *name, int64_t *out, int cap); /* -1 if absent */
int attr_floats(const node_ctx *nc, const char *name, double *out, int cap);
int attr_strings(const node_ctx *nc, const char *name, const char **out, int cap);

int64_t norm_axis(int64_t axis, int rank);   /* negative -> non-negative; -1 if invalid */
int dtype_rank_ok(node_ctx *nc, qir_value *v, int min_rank, int max_rank);

/* ---- convert.c */
typedef bool (*convert_fn)(node_ctx *nc);
/* One row of a converter table: the op type, its converter, and the
 * attributes it understands ("a,b,c"; NULL = any). */
typedef struct {
  const char *op_type;
  convert_fn fn;
  const char *attrs;
} converter_entry;
/* Looks op_type up in table[0..n): every converter table's lookup. */
bool converter_lookup(const converter_entry *table, size_t n, const char *op_type, convert_fn *fn, const char **attrs);
/* The converter of an op type, and the attributes it understands. */
bool find_converter(const char *op_type, convert_fn *fn, const char **attrs);

/* ---- composite.c: operators built from primitive qir ops */
bool find_composite(const char *op_type, convert_fn *fn, const char **attrs);
/* operators of other domains (ai.onnx.ml, ai.onnx.preview.training) built here */
bool find_domain_op(const char *domain, const char *op_type, convert_fn *fn, const char **attrs);
/* ---- datadep.c: NonZero, Compress, Unique, NonMaxSuppression (constant inputs) */
bool find_datadep_op(const char *op_type, convert_fn *fn, const char **attrs);
/* ---- signal.c: DFT, STFT, window functions */
bool find_signal_op(const char *op_type, convert_fn *fn, const char **attrs);

/* ---- control.c */
bool convert_if(node_ctx *nc);
bool convert_loop(node_ctx *nc);
bool convert_scan(node_ctx *nc);

/* ---- rnn.c */
bool convert_rnn(node_ctx *nc); /* LSTM, GRU, RNN */

#endif
