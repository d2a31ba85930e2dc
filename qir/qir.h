/* qir.h: the IR library every qir tool links.
 *
 * A module is one region (the top-level graph) of ops in SSA form.  Every op has
 * operands (values), results (values), attributes, and zero or more regions (loop
 * has one, if has two).  Values know their uses.  All memory of a module comes
 * from the module's arena and is released by qir_module_free: passes may unlink
 * ops freely without freeing them.
 *
 * Modules of this library (one header section each, functions prefixed):
 *   qir_type_*   element types and static shapes
 *   qir_attr_*   generic attributes (schedule keys need no grammar change)
 *   qir_expr_*   tensor expressions of the `compute` general form
 *   qir_*        module, region, op, value, use lists
 *   qir_diag_*   located diagnostics (no exit(): tools decide)
 *   qir_parse_*, qir_print_*, qir_verify  text form and checks
 *   qir_opinfo_* the op table (qir/ops.def)
 * No global mutable state: everything hangs off a qir_module or a qir_diag.
 */
#ifndef QIR_H
#define QIR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define QIR_VERSION "0.1.0"

/* ---------------------------------------------------------------- types */

#define QIR_DTYPES(X)                                                          \
  X(F64, "f64", 8) X(F32, "f32", 4) X(F16, "f16", 2) X(BF16, "bf16", 2)        \
  X(I64, "i64", 8) X(I32, "i32", 4) X(I16, "i16", 2) X(I8, "i8", 1)            \
  X(U64, "u64", 8) X(U32, "u32", 4) X(U16, "u16", 2) X(U8, "u8", 1)            \
  X(BOOL, "bool", 1)                                                           \
  X(F8E4M3FN, "f8e4m3fn", 1) X(F8E4M3FNUZ, "f8e4m3fnuz", 1)                    \
  X(F8E5M2, "f8e5m2", 1) X(F8E5M2FNUZ, "f8e5m2fnuz", 1) X(F8E8M0, "f8e8m0", 1) \
  X(F4E2M1, "f4e2m1", 1) X(I4, "i4", 1) X(U4, "u4", 1) X(I2, "i2", 1)          \
  X(U2, "u2", 1)

typedef enum {
#define X(id, name, size) QIR_##id,
  QIR_DTYPES(X)
#undef X
  QIR_DTYPE_COUNT
} qir_dtype;

#define QIR_MAX_RANK 8

/* The most elements a #tile plan may span: each entry of its block, thread
 * and rstep, and a block tile times a reduction step (block x rstep), which
 * is what a block stages and counts with 32-bit integers.  The verifier
 * holds every #tile to it. */
#define QIR_TILE_MAX (1 << 24)
/* #tile stages: shared-memory tiles in flight in a pipelined main loop */
#define QIR_MAX_STAGES 4

/* A dimension's extent as an expression over the module's dimension symbols
 * (`dim batch = [1, 16]`): `batch`, `past+1`, `(h+1)/2`.  Nodes are interned
 * in their module (qir_dim_* below), so two extents are equal iff their
 * pointers are.  lo..hi: the values it takes over the symbols' ranges. */
typedef enum {
  QIR_DIM_CONST, QIR_DIM_SYM, QIR_DIM_ADD, QIR_DIM_SUB, QIR_DIM_MUL,
  QIR_DIM_FLOORDIV,             /* by a positive constant */
  QIR_DIM_MIN, QIR_DIM_MAX,
} qir_dim_kind;

typedef struct qir_dim qir_dim;
struct qir_dim {
  qir_dim_kind kind;
  int64_t c;                    /* CONST */
  int sym;                      /* SYM: index into the module's symbols */
  const char *name;             /* SYM: the symbol's name */
  const qir_dim *a, *b;         /* operands of the binary kinds */
  int64_t lo, hi;
};

typedef struct {
  qir_dtype dtype;
  int rank;                     /* 0 = scalar */
  int64_t dims[QIR_MAX_RANK];
  /* dims[0] is an upper bound, written `<=N`: the extent is known only at run
   * time (the scan outputs of a loop that may exit early).  Memory is planned
   * for the bound; only `output` may take such a value (the verifier says so). */
  bool bounded;
  /* A symbolic extent per axis (NULL: static), written `batch<=16`: the
   * extent is sym[i] at run time and dims[i] is its bound (sym[i]->hi).
   * Every pass that reads only dims[] sees the bound: memory is planned
   * for it and plans are made for it. */
  const qir_dim *sym[QIR_MAX_RANK];
} qir_type;

const char *qir_dtype_name(qir_dtype t);
/* Bytes per element in memory.  The narrow types (f8*, f4e2m1, i4, u4, i2, u2)
 * take one byte each in memory and in .qw/.npy files: the element's bit
 * pattern (f8/f4 codes; i4/i2 sign-extended, u4/u2 zero-extended), so that
 * every data-movement op and every thread writes whole bytes.  Only ONNX
 * TensorProto data pack them (two 4-bit or four 2-bit elements per byte, the
 * first in the low bits): see qir_dtype_bits. */
int qir_dtype_size(qir_dtype t);
int qir_dtype_bits(qir_dtype t);                 /* bits per element when packed (ONNX) */
bool qir_dtype_is_narrow(qir_dtype t);           /* f8*, f4e2m1, i4, u4, i2, u2 */
bool qir_dtype_from_name(const char *s, size_t len, qir_dtype *out);
bool qir_dtype_is_float(qir_dtype t);
bool qir_dtype_is_signed_int(qir_dtype t);
bool qir_dtype_is_unsigned_int(qir_dtype t);
qir_type qir_type_make(qir_dtype dt, int rank, const int64_t *dims);
int64_t qir_type_numel(const qir_type *t);       /* product of dims; 1 for scalars */
bool qir_type_equal(const qir_type *a, const qir_type *b);       /* the bound mark included */
/* Writes e.g. "f32[1,3,224,224]", "i64[]", "f32[<=24,4]" or
 * "f32[batch<=16,3]"; returns chars that would be written. */
int qir_type_format(const qir_type *t, char *buf, size_t n);
/* Whether some axis has a symbolic extent. */
bool qir_type_is_symbolic(const qir_type *t);
/* The type at one assignment of the symbols (values[k] for symbol k): every
 * symbolic extent evaluated, no symbols left. */
qir_type qir_type_at(const qir_type *t, const int64_t *values);
/* Writes a dimension expression ("past+1", "(h+1)/2"); returns chars that would be written. */
int qir_dim_format(const qir_dim *d, char *buf, size_t n);
int64_t qir_dim_eval(const qir_dim *d, const int64_t *values);

/* Element conversions used by every tool that touches raw data (little-endian). */
double qir_load_elem(qir_dtype t, const void *base, int64_t index);
void qir_store_elem(qir_dtype t, void *base, int64_t index, double v);
float qir_f16_to_f32(uint16_t h);
uint16_t qir_f32_to_f16(float f);                /* round to nearest even */
float qir_bf16_to_f32(uint16_t h);
uint16_t qir_f32_to_bf16(float f);               /* round to nearest even */
/* The narrow types' byte <-> value.  Floats round to nearest even; `saturate`
 * (ONNX Cast's attribute) sends out-of-range values and infinities to the
 * largest finite value, otherwise to infinity (f8e5m2) or NaN.  f4e2m1 always
 * saturates.  A cast to an f8 type (op or compute) saturates unless the op says
 * saturate = 0; a plain store (qir_store_elem: an arithmetic result) does not,
 * as f16 overflows to inf.  f8e8m0 (a power of two) rounds up (ONNX's default round_mode).
 * Integers i4/u4/i2/u2 wrap (keep the low bits, as ONNX's Cast does). */
double qir_narrow_to_double(qir_dtype t, uint8_t code);
uint8_t qir_narrow_from_double(qir_dtype t, double v, bool saturate);

/* ------------------------------------------------------------ locations */

typedef struct {
  const char *file;             /* interned in the module or the diag sink */
  int line, col;                /* 1-based; 0 = unknown */
} qir_loc;

/* ----------------------------------------------------------- attributes */

typedef enum {
  QIR_ATTR_INT,                 /* 42 */
  QIR_ATTR_FLOAT,               /* 1.5, -inf, nan */
  QIR_ATTR_STRING,              /* "text" */
  QIR_ATTR_WORD,                /* bare identifier: nearest, f32, true */
  QIR_ATTR_LIST,                /* [v, v, ...] (elements may differ in kind) */
  QIR_ATTR_DICT,                /* {k = v, ...} */
} qir_attr_kind;

typedef struct qir_attr_val qir_attr_val;
typedef struct qir_attr qir_attr;

struct qir_attr_val {
  qir_attr_kind kind;
  int64_t i;
  double f;
  const char *s;                /* STRING, WORD */
  int n;                        /* LIST: items; DICT: entries */
  qir_attr_val *items;          /* LIST */
  qir_attr *entries;            /* DICT */
};

/* An attribute of an op.  `sched` marks schedule annotations written by passes
 * (printed as `#key{...}` or `#key=value` after the plain `{...}` dict). */
struct qir_attr {
  const char *key;
  qir_attr_val val;
  bool sched;
  qir_loc loc;
};

/* ------------------------------------------------------------ expressions
 * The body of `compute [i:8, j:256] reduce [k:784] sum(%x[i,k] * %w[k,j])`.
 * Loop variables are numbered: output axes 0..n_axes-1, then reduction axes
 * n_axes..n_axes+n_red-1.  Accesses name a compute operand by index. */

typedef enum {
  QIR_EX_INT,                   /* integer literal (i64) */
  QIR_EX_FLOAT,                 /* float literal */
  QIR_EX_VAR,                   /* loop variable, .var */
  QIR_EX_ACCESS,                /* %t[e0, e1, ...]: .operand, args = indices */
  QIR_EX_UNARY,                 /* .fn applied to args[0] */
  QIR_EX_BINARY,                /* args[0] .fn args[1] */
  QIR_EX_SELECT,                /* select(c, a, b): only the taken side is evaluated */
  QIR_EX_CAST,                  /* cast<dtype>(args[0]) */
} qir_expr_kind;

#define QIR_EXPR_FNS(X)                                                        \
  /* binary infix */                                                          \
  X(ADD, "+") X(SUB, "-") X(MUL, "*") X(DIV, "/") X(MOD, "%")                  \
  X(LT, "<") X(LE, "<=") X(GT, ">") X(GE, ">=") X(EQ, "==") X(NE, "!=")        \
  X(AND, "&&") X(OR, "||")                                                     \
  /* binary calls */                                                          \
  X(MAX, "max") X(MIN, "min") X(POW, "pow") X(FLOORDIV, "floordiv")            \
  X(FMOD, "fmod")                                                             \
  /* bitwise, on integers (shr: logical, on the 64-bit pattern) */          \
  X(BITAND, "bitand") X(BITOR, "bitor") X(BITXOR, "bitxor") X(SHL, "shl")     \
  X(SHR, "shr")                                                               \
  /* atan2 must stay the last binary function (qir_expr_fn_is_binary) */     \
  X(ATAN2, "atan2")                                                           \
  /* unary prefix / calls */                                                  \
  X(NEG, "neg") X(NOT, "not") X(EXP, "exp") X(LOG, "log") X(SQRT, "sqrt")      \
  X(RSQRT, "rsqrt") X(TANH, "tanh") X(SIGMOID, "sigmoid") X(ERF, "erf")        \
  X(ABS, "abs") X(FLOOR, "floor") X(CEIL, "ceil") X(ROUND, "round")            \
  X(SIN, "sin") X(COS, "cos") X(RECIP, "recip") X(SIGN, "sign")                \
  X(ISNAN, "isnan") X(ISINF, "isinf")                                         \
  X(ASIN, "asin") X(ACOS, "acos") X(ATAN, "atan") X(SINH, "sinh")              \
  X(COSH, "cosh") X(ASINH, "asinh") X(ACOSH, "acosh") X(ATANH, "atanh")

typedef enum {
#define X(id, spelling) QIR_FN_##id,
  QIR_EXPR_FNS(X)
#undef X
  QIR_FN_COUNT
} qir_expr_fn;

const char *qir_expr_fn_spelling(qir_expr_fn fn);
bool qir_expr_fn_is_binary(qir_expr_fn fn);

typedef struct qir_expr qir_expr;
struct qir_expr {
  qir_expr_kind kind;
  qir_expr_fn fn;               /* UNARY, BINARY */
  int64_t ival;                 /* INT */
  double fval;                  /* FLOAT */
  int var;                      /* VAR */
  int operand;                  /* ACCESS: index into the compute op's operands */
  qir_dtype cast_to;            /* CAST */
  int n_args;
  qir_expr **args;
  qir_loc loc;
};

typedef enum {
  QIR_REDUCE_NONE, QIR_REDUCE_SUM, QIR_REDUCE_MAX, QIR_REDUCE_MIN, QIR_REDUCE_PROD,
} qir_reduce_kind;

const char *qir_reduce_name(qir_reduce_kind k);   /* "sum", ...; NULL for NONE */

typedef struct {
  int n_axes;                   /* == rank of the result */
  const char **axis_names;      /* n_axes + n_red names */
  int64_t *axis_extents;        /* n_axes + n_red extents (the bound of a symbolic one) */
  const qir_dim **axis_dims;    /* n_axes + n_red: the symbolic extent, or NULL (static) */
  int n_red;
  qir_reduce_kind reduce;       /* NONE iff n_red == 0 */
  qir_expr *body;
} qir_compute;

/* ------------------------------------------------------- the op table */

typedef enum {
#define QIR_OP(id, name, min_operands, max_operands, n_results, n_regions, flags)   \
  QIR_OP_##id,
#include "ops.def"
#undef QIR_OP
  QIR_OP_COUNT
} qir_opcode;

/* flags of an op kind (ops.def column 7) */
enum {
  QIR_OPF_PURE = 1 << 0,          /* no side effect: DCE may remove it if unused */
  QIR_OPF_TERMINATOR = 1 << 1,    /* must be last in its region (yield) */
  QIR_OPF_ELEMENTWISE = 1 << 2,   /* numpy-broadcasting elementwise */
  QIR_OPF_VARIADIC_RESULTS = 1 << 3, /* n_results column is a minimum */
};

/* ------------------------------------------------------ the graph */

typedef struct qir_module qir_module;
typedef struct {
  const char *name;
  int64_t lo, hi;
  int64_t step;                 /* values are lo, lo+step, ..., hi (`% step`; 1: every one) */
  qir_loc loc;
} qir_dimsym;
typedef struct qir_region qir_region;
typedef struct qir_op qir_op;
typedef struct qir_value qir_value;
typedef struct qir_use qir_use;

struct qir_use {
  qir_op *user;
  int operand_index;
  qir_use *next;
};

struct qir_value {
  int id;                       /* unique within the module */
  const char *name;             /* SSA name without '%'; printer may rename */
  qir_type type;
  qir_op *def;                  /* defining op, or NULL for region arguments */
  int result_index;             /* index in def->results */
  qir_region *arg_of;           /* region whose argument this is, or NULL */
  int arg_index;
  qir_use *uses;
};

/* A constant's payload.  Exactly one of: sidecar offset (offset >= 0, bytes
 * loaded lazily by qir_const_data), inline data, or a splat of one element. */
typedef struct {
  int64_t offset;               /* >= 0: byte offset in the module's weights file */
  bool splat;                   /* data holds one element, repeated */
  void *data;                   /* raw little-endian elements, or NULL until loaded */
  size_t nbytes;                /* size of data */
  bool spill;                   /* made by a pass from a sidecar constant (-autocast's converted
                                 * weights): belongs in the sidecar the tool writes next */
} qir_const;

struct qir_op {
  qir_opcode code;
  int n_operands;
  qir_value **operands;
  int n_results;
  qir_value **results;
  int n_attrs;
  qir_attr *attrs;
  int n_regions;
  qir_region **regions;
  qir_region *parent;
  qir_op *prev, *next;
  qir_loc loc;
  qir_const *cst;               /* QIR_OP_CONST only */
  qir_compute *comp;            /* QIR_OP_COMPUTE only */
  const char *sym;              /* QIR_OP_KERNEL only: its name, without '@' */
};

/* A region is one block: arguments, then a list of ops ending, for nested
 * regions, in a `yield`.  The module body ends with `output` ops instead. */
struct qir_region {
  int n_args;
  qir_value **args;
  qir_op *first, *last;
  qir_op *parent_op;            /* NULL for the module body */
};

struct qir_module {
  const char *name;             /* without '@' */
  qir_loc loc;                  /* where `module` was written (parsed modules) */
  const char *weights_path;     /* as written in `weights "..."`, or NULL */
  const char *base_dir;         /* directory weights_path is relative to */
  qir_region *body;
  int next_value_id;
  struct qir_arena *arena;
  /* dimension symbols (`dim NAME = [MIN, MAX]`), in declaration order */
  int n_syms, cap_syms;
  qir_dimsym *syms;
  const qir_dim **dim_table;    /* interned dimension expressions (open addressing) */
  size_t dim_cap, dim_count;
};

/* ------------------------------------------------ dimension symbols
 * A symbol is one extent known only at run time, within [lo, hi] (both
 * inclusive).  Expressions over them are built only through these functions,
 * which fold constants and simplify so that equal extents share a node. */
int qir_dimsym_add(qir_module *m, const char *name, int64_t lo, int64_t hi, int64_t step, qir_loc loc); /* -1: taken */
int qir_dimsym_find(const qir_module *m, const char *name);                                /* -1: none */
const qir_dim *qir_dim_const(qir_module *m, int64_t v);
const qir_dim *qir_dim_sym(qir_module *m, int sym);
const qir_dim *qir_dim_binary(qir_module *m, qir_dim_kind kind, const qir_dim *a, const qir_dim *b);
/* The same expression in module `to` (symbols matched by name; NULL: one is missing). */
const qir_dim *qir_dim_import(qir_module *to, const qir_dim *d, const qir_module *from);
/* Extent of axis i of t as an expression (a constant for a static axis). */
const qir_dim *qir_type_dim(qir_module *m, const qir_type *t, int i);
/* Sets axis i of t to extent d (static if d is constant). */
void qir_type_set_dim(qir_type *t, int i, const qir_dim *d);
/* Lowers each symbol's bound to hi[k] (where smaller; kept on its step),
 * appends suffix (if any) to its name, and rewrites every extent and bound
 * of m over the new ranges (a symbol bounded at its least value is that
 * constant there): m then serves runs up to hi only. */
void qir_module_restrict(qir_module *m, const int64_t *hi, const char *suffix);
/* d with symbol k replaced by symbol map[k] wherever map[k] >= 0. */
const qir_dim *qir_dim_rename(qir_module *m, const qir_dim *d, const int *map);
/* `versions` op (ops.def): outer_of[k] (one per symbol of m) = the operand's
 * symbol that region r's symbol k stands for, else -1; fixed[k] = the value
 * an operand's symbol k must have for r (a static argument axis: its least
 * value), else QIR_VERSION_FREE.  false, with a sentence in why: r's
 * arguments do not fit the rule. */
#define QIR_VERSION_FREE INT64_MIN
bool qir_versions_region_syms(const qir_module *m, const qir_op *op, int r, int *outer_of, int64_t *fixed, char *why, size_t cap);
/* The region a run at values (one per symbol of m) takes, its symbols' values
 * set to the operands' there; -1: none (a malformed op). */
int qir_versions_pick(const qir_module *m, const qir_op *op, int64_t *values);
/* Whether symbol k occurs in d. */
bool qir_dim_uses(const qir_dim *d, int sym);
/* Binds the symbols an input's declared type names from the tensor type it
 * is given (values[k], bound[k] for symbol k; call for every input, then
 * once more per input so extents computed from symbols other inputs give are
 * checked).  False with a sentence in why: an extent outside its symbol's
 * range, two inputs disagreeing, a static axis of another size. */
bool qir_dims_bind(const qir_module *m, const qir_type *declared, const qir_type *actual, int64_t *values,
                   bool *bound, char *why, size_t cap);
/* Sets op's operand and result types, and a compute's symbolic axis extents,
 * to their values at one assignment of the symbols (values[k] for symbol k),
 * so that a static rule or definition reads the op at that size; saved has
 * room for n_operands + n_results types, saved_ext for a compute's axes.
 * qir_op_types_restore puts them back. */
void qir_op_types_at(const qir_op *op, const int64_t *values, qir_type *saved, int64_t *saved_ext);
void qir_op_types_restore(const qir_op *op, const qir_type *saved, const int64_t *saved_ext);
/* Rewrites every type and compute axis of m at one assignment of the
 * symbols, which then go: the module is static (qrun runs it so).  A
 * `versions` op gives way to the region a run at those values takes. */
void qir_module_specialize(qir_module *m, const int64_t *values);

/* ------------------------------------------------------ construction */

qir_module *qir_module_new(const char *name);
void qir_module_free(qir_module *m);
void *qir_alloc(qir_module *m, size_t n);        /* zeroed, module lifetime */
const char *qir_strdup(qir_module *m, const char *s);
const char *qir_strndup(qir_module *m, const char *s, size_t n);
const char *qir_sprintf(qir_module *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Before writing a module into directory out_dir (NULL = the working
 * directory): if its relative weights path would resolve elsewhere from there,
 * rewrite it as an absolute path, so `qopt a/m.qir -o b/m.qir` and pipes run
 * from other directories still find the sidecar. */
void qir_module_rebase_weights(qir_module *m, const char *out_dir);

qir_region *qir_region_new(qir_module *m, qir_op *parent_op);
qir_value *qir_region_add_arg(qir_module *m, qir_region *r, qir_type t, const char *name);

/* Creates an unlinked op with n_results results of the given types (names may be
 * NULL: the printer numbers them).  Regions are created empty. */
qir_op *qir_op_new(qir_module *m, qir_opcode code, int n_operands, qir_value *const *operands,
                   int n_results, const qir_type *result_types, qir_loc loc);
/* A new op like single-result op `op` (code, compute form, constant,
 * attributes, result type and name) over `operands`, in no region: how a pass
 * moves an op into a kernel group's body.  Regions are not copied. */
qir_op *qir_op_copy_single(qir_module *m, const qir_op *op, qir_value *const *operands);
void qir_op_append(qir_region *r, qir_op *op);   /* at the end of r */
void qir_op_insert_before(qir_op *before, qir_op *op);
void qir_op_unlink(qir_op *op);                  /* also drops its operand uses */
void qir_op_set_operand(qir_module *m, qir_op *op, int i, qir_value *v); /* keeps use lists right */
void qir_op_add_operand(qir_module *m, qir_op *op, qir_value *v);
/* Redirects every use of `from` to `to`. */
void qir_value_replace_uses(qir_module *m, qir_value *from, qir_value *to);
int qir_value_use_count(const qir_value *v);
/* Whether v is a constant whose every element is zero (a splat or dense data loaded). */
bool qir_value_is_zero_const(const qir_value *v);
qir_value *qir_value_new(qir_module *m, qir_type t, const char *name);

/* Attributes.  Setting an existing key replaces its value. */
qir_attr *qir_op_attr(const qir_op *op, const char *key);     /* NULL if absent */
void qir_op_set_attr(qir_module *m, qir_op *op, const char *key, qir_attr_val v, bool sched);
bool qir_op_remove_attr(qir_op *op, const char *key);
qir_attr_val qir_attr_int(int64_t i);
qir_attr_val qir_attr_float(double f);
qir_attr_val qir_attr_string(qir_module *m, const char *s);
qir_attr_val qir_attr_word(qir_module *m, const char *s);
qir_attr_val qir_attr_ints(qir_module *m, int n, const int64_t *v);
qir_attr_val qir_attr_floats(qir_module *m, int n, const double *v);
qir_attr_val qir_attr_list(qir_module *m, int n, const qir_attr_val *items);
qir_attr_val qir_attr_dict(qir_module *m, int n, const qir_attr *entries);
const qir_attr_val *qir_attr_dict_get(const qir_attr_val *dict, const char *key);
/* Typed getters with defaults; a list getter returns the count (or -1 if absent /
 * not a list of numbers) and copies up to `cap` elements. */
int64_t qir_op_attr_int(const qir_op *op, const char *key, int64_t dflt);
double qir_op_attr_float(const qir_op *op, const char *key, double dflt);
const char *qir_op_attr_str(const qir_op *op, const char *key, const char *dflt); /* STRING or WORD */
int qir_op_attr_ints(const qir_op *op, const char *key, int64_t *out, int cap);
int qir_op_attr_floats(const qir_op *op, const char *key, double *out, int cap);
/* For an `input` whose extents onnx2qir chose (attributes dim_params and
 * dim_source): one sentence saying which axes were chosen, how, and the flag
 * that changes them, e.g. "axis 0 ('batch') was set to 1 by default at import;
 * onnx2qir --dim batch=SIZE changes it".  Returns the length written (0: the
 * model fixed every extent, or there is no record). */
int qir_input_dims_note(const qir_op *input, char *buf, size_t cap);

/* Constants. */
qir_op *qir_const_new_data(qir_module *m, qir_type t, const void *data, size_t nbytes, qir_loc loc);
qir_op *qir_const_new_splat(qir_module *m, qir_type t, double value, qir_loc loc);
qir_op *qir_const_new_offset(qir_module *m, qir_type t, int64_t offset, qir_loc loc);
/* Raw bytes of a constant (numel * dtype size; a splat is expanded), reading the
 * weights file on first use.  NULL with a diagnostic if the file is missing or
 * short. */
struct qir_diag;
const void *qir_const_data(qir_module *m, qir_op *cst, struct qir_diag *d);
/* Element i of a constant as a double (works for splats without expanding). */
double qir_const_elem(qir_module *m, qir_op *cst, int64_t i, struct qir_diag *d);

/* Writes a new weights sidecar at `path` holding every constant that lives in
 * one (offset >= 0, read from the current sidecar first), every constant a
 * pass marked `spill`, and, when inline_max >= 0, every non-splat constant of
 * more than inline_max elements; each at a 64-byte aligned offset.  Those
 * constants then refer to the new file, which the module names as `ref`
 * (relative to base_dir, as weights_path always is).  Writes no file and
 * changes nothing when no constant qualifies (*written = 0).  Returns false
 * after reporting into d (a constant that cannot be read, a write error). */
bool qir_module_write_weights(qir_module *m, const char *path, const char *ref, int64_t inline_max, int64_t *written,
                              struct qir_diag *d);
/* Whether the module holds a constant marked `spill` (it needs a new sidecar). */
bool qir_module_has_spilled_consts(qir_module *m);

/* Expressions (allocated in the module). */
qir_expr *qir_expr_int(qir_module *m, int64_t v);
qir_expr *qir_expr_float(qir_module *m, double v);
qir_expr *qir_expr_var(qir_module *m, int var);
qir_expr *qir_expr_access(qir_module *m, int operand, int n_idx, qir_expr *const *idx);
qir_expr *qir_expr_unary(qir_module *m, qir_expr_fn fn, qir_expr *a);
qir_expr *qir_expr_binary(qir_module *m, qir_expr_fn fn, qir_expr *a, qir_expr *b);
qir_expr *qir_expr_select(qir_module *m, qir_expr *c, qir_expr *a, qir_expr *b);
qir_expr *qir_expr_cast(qir_module *m, qir_dtype to, qir_expr *a);
/* Structural equality: same tree, same literals (a NaN literal equals a NaN literal). */
bool qir_expr_equal(const qir_expr *a, const qir_expr *b);
qir_compute *qir_compute_new(qir_module *m, int n_axes, int n_red);

/* Walks every op in r and nested regions, pre-order.  Stop by returning false. */
typedef bool (*qir_op_visitor)(qir_op *op, void *ctx);
bool qir_walk(qir_region *r, qir_op_visitor fn, void *ctx);

/* ------------------------------------------------------- diagnostics */

typedef enum { QIR_SEV_ERROR, QIR_SEV_WARNING, QIR_SEV_NOTE } qir_severity;

/* A sink for located messages.  Tools own one; the library never exits. */
typedef struct qir_diag {
  FILE *out;                    /* where messages are printed (stderr) */
  const char *source;           /* text of the file being read, for caret lines */
  size_t source_len;
  const char *file;             /* default file name for messages */
  int n_errors, n_warnings;
  int max_errors;               /* stop reporting after this many (0 = 20) */
  bool quiet;                   /* count messages, print none (a pass asking "would this work?") */
} qir_diag;

void qir_diag_init(qir_diag *d, FILE *out, const char *file, const char *source, size_t len);
/* A sink that counts messages and prints none. */
void qir_diag_init_quiet(qir_diag *d);
/* Prints "FILE:LINE:COL: error: MSG", then the source line and a caret. */
void qir_diag_report(qir_diag *d, qir_severity sev, qir_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void qir_diag_vreport(qir_diag *d, qir_severity sev, qir_loc loc, const char *fmt, va_list ap);
#define qir_error(d, loc, ...) qir_diag_report((d), QIR_SEV_ERROR, (loc), __VA_ARGS__)

/* ------------------------------------------------ text in and out */

/* Parses a whole module.  `file` names it in messages ("<stdin>" for stdin);
 * base_dir is where a relative weights path is resolved (NULL = cwd).  Returns
 * NULL after reporting errors into d. */
qir_module *qir_parse(const char *text, size_t len, const char *file, const char *base_dir,
                      qir_diag *d);
/* Reads a file ("-" = stdin) and parses it; reports I/O errors. */
qir_module *qir_parse_file(const char *path, qir_diag *d);
/* Canonical text: print(parse(print(m))) == print(m). */
void qir_print(FILE *out, qir_module *m);
char *qir_print_to_string(qir_module *m, size_t *len); /* malloc'd */

/* Checks types, shapes (via the op table), SSA dominance, region yields and
 * attribute validity.  Returns the number of errors reported. */
int qir_verify(qir_module *m, qir_diag *d);

/* ------------------------------------------------------- op table */

typedef struct {
  const char *name;             /* spelling in the text form */
  int min_operands, max_operands;  /* max -1 = variadic */
  int n_results;
  int n_regions;
  unsigned flags;
} qir_opinfo;

const qir_opinfo *qir_opinfo_get(qir_opcode code);
bool qir_opcode_from_name(const char *s, size_t len, qir_opcode *out);

/* Computes the result types of `op` from its operand types and attributes (the
 * op's shape/type rule).  Returns false after reporting into d if the operands
 * or attributes are invalid.  For ops whose results cannot be derived (e.g.
 * reshape: the shape is the result type), checks consistency of the types
 * already set instead.  out has room for op->n_results types. */
bool qir_infer_types(qir_module *m, const qir_op *op, qir_type *out, qir_diag *d);

/* An attention op's layout attribute: false for "bhsd" (the default; q
 * [B,H,S,D]), true for "bshd" (q [B,S,H,D], as k, v and the result).  The
 * verifier rejects other words; they read as bhsd here. */
bool qir_attention_bshd(const qir_op *op);

/* Builds the tensor-expression definition of a named op as a new `compute` op
 * computing the same results (not inserted).  NULL if the op has no single
 * compute form (control flow, multi-result ops, data-dependent ops). */
qir_op *qir_op_to_compute(qir_module *m, const qir_op *op, qir_diag *d);
/* Like qir_op_to_compute, but also for ops whose definition is a short chain of
 * computes (softmax: max, sum of exp, divide; layer_norm, instance_norm,
 * lp_normalization, lrn, reduce_l2, argmax/argmin).  Writes up to cap new
 * unlinked compute ops to out, in order: each may read the results of earlier
 * ones, the last computes op's result 0.  Returns how many (0: no form). */
int qir_op_expand_computes(qir_module *m, const qir_op *op, qir_op **out, int cap, qir_diag *d);
/* For every op, multi-result ones included (split, max_pool with indices,
 * layer_norm with mean/inv_std_dev): the chain as above, and results[i] (room
 * for op->n_results) set to the value that computes op result i. */
/* Whether op computes each index along its symbolic axes from the same
 * indices of its operands alone (qir/symte.c), so that its kernels planned at
 * the bound serve every size; true for an op without symbolic extents.
 * *why: how it does not ("reduces over a symbolic axis", ...). */
bool qir_op_row_wise(qir_module *m, const qir_op *op, const char **why);
/* The same for an op whose types name dimension symbols, at the run's
 * extents (qir/symte.c): each extent and literal that follows the symbols
 * is read from `dims` (an i64 tensor, element k the value of symbol k), which
 * every compute takes as its last operand, and the terms past the run's
 * extents are masked.  cap >= 16.  0 with *why set: no such form. */
int qir_op_expand_symbolic(qir_module *m, const qir_op *op, qir_value *dims, qir_op **out, int cap, qir_value **results,
                           const char **why);
/* Whether compute c has the axes (and extents) of op's own tensor-expression
 * form, so that op's plan (#tile, its grid) is c's. */
bool qir_compute_has_axes_of(qir_module *m, const qir_op *op, const qir_compute *c);
/* Whether op runs at the run's extents as one compute with its own axes
 * (qir_op_expand_symbolic; qir/symte.c): it then takes op's plan and tasks,
 * and may join a kernel group (a convolution, pool or resize over a
 * symbolic height). */
bool qir_op_expands_to_one(qir_module *m, const qir_op *op);
int qir_op_expand_results(qir_module *m, const qir_op *op, qir_op **out, int cap, qir_value **results,
                          qir_diag *d);

/* e == c0 + sum coef[v] * var_v over n_vars variables (at most 32; coef
 * receives n_vars entries)?  False: e is not affine in them. */
bool qir_expr_affine(const qir_expr *e, int n_vars, int64_t *coef, int64_t *c0);
/* The range of index expression `index` of a read in form c while c's output
 * axis v ranges over [src_oc[v] + src_co[v] . B, + src_ext[v]) for the block
 * start B of each output axis, and its reduction axes over their extent:
 * [*o0 + co . B, + *ext).  False: the index is not affine (or c has too many
 * variables). */
bool qir_read_range(const qir_compute *c, const qir_expr *index, const int64_t *src_oc, const int64_t *src_ext,
                    const int64_t (*src_co)[QIR_MAX_RANK], int64_t *o0, int64_t *co, int64_t *ext);

/* Tile propagation through kernel group k (docs/qir.md): from the block tile
 * `block` of the group's result (its rank), the tile each inner op's result
 * needs, through the access maps of the inner ops' tensor-expression forms
 * (qir/tiles.c).  For the i-th op of the region (the yield excluded), have[i]
 * says whether a tile follows and tiles[i] holds it.  Returns the number of
 * ops, or -1 (not a group whose result is computed inside, or more than cap). */
int qir_group_tiles(qir_module *m, const qir_op *k, const int64_t *block, int cap, int64_t (*tiles)[QIR_MAX_RANK],
                    bool *have);

/* The same boxes, not clipped to the tensors: the extents a staged composer
 * allocates in shared memory for one block (halo past the edges included). */
int qir_group_boxes(qir_module *m, const qir_op *k, const int64_t *block, int cap, int64_t (*boxes)[QIR_MAX_RANK],
                    bool *have);
/* The schedule qcodegen gives a reduction of a staged group (qcodegen's
 * lower_stages) over a box of its output, ext[d] points per output axis, with
 * `threads` threads per block: each thread accumulates a register tile of
 * thread[d] points per axis (`regs` in all; the box rounded up to `tile`,
 * threads_used threads), the reduction stepped by rstep, each step's reused
 * operands (reads of operands below n_global that walk the reduction and
 * that QIR_SCHED_MIN_REUSE points of the tile or more read) loaded cooperatively into
 * shared memory within `budget` bytes (elem_bytes each; when even steps of
 * a few points do not fit, none is staged and the reduction is one step).
 * loads: operand reads per thread and reduction point (those that walk the
 * reduction), after reuse across its register tile; staged_elems: elements one block stages over the whole reduction.
 * The same function gives -welder's model of that code.  False: no tile
 * (no reduction, or the box needs more than 64 accumulators per thread). */
#define QIR_SCHED_VARS 16
#define QIR_SCHED_MIN_REUSE 4   /* points of the tile reading each element of a staged operand, at least */
typedef struct {
  int64_t thread[QIR_MAX_RANK], tile[QIR_MAX_RANK];
  int64_t rstep[QIR_SCHED_VARS];
  int64_t regs, threads_used, loads, steps, rtot;
  bool stage;                   /* operands staged (else read in place: their footprints do not fit) */
  double staged_elems;
  int64_t smem;                 /* bytes of shared memory one step's staged operands take (qcodegen allocates them) */
} qir_stage_sched;
bool qir_stage_schedule(const qir_compute *c, const int64_t *ext, int threads, int n_global, int elem_bytes,
                        int64_t budget, qir_stage_sched *s);
/* The same, operand o (< n_global) already in shared memory where in_smem[o]
 * (NULL: none): a staged value read by a later segment, never staged again. */
bool qir_stage_schedule_of(const qir_compute *c, const int64_t *ext, int threads, int n_global, const bool *in_smem,
                           int elem_bytes, int64_t budget, qir_stage_sched *s);
/* The reduction steps a tiled loop (qcodegen's lower_tile_block) unrolls for a
 * register tile of `points` values: the innermost ones of rstep[0..n_red-1]
 * while points x their steps stays within 128 (more would spill).  Sets
 * unroll[a] where given; returns the unrolled body's products, points x the
 * unrolled steps. */
int64_t qir_unrolled_steps(int64_t points, const int64_t *rstep, int n_red, bool *unroll);
/* Threads per block of a staged group whose largest box (its output block
 * included) has `points` points: up to 256, whole warps. */
int qir_stage_threads(int64_t points);
/* Shared memory of a staged group's block, at most: its staged tiles and the
 * staged operands of its reductions' schedules. */
#define QIR_STAGE_SMEM_LIMIT (48 * 1024)
/* The bytes each of a staged group's n_red reductions may stage per step
 * (qir_stage_schedule's budget) when its staged tiles take tile_bytes. */
int64_t qir_stage_budget(int64_t tile_bytes, int n_red);

/* Kernel group k's block tile (#tile{block}, each extent clipped to its
 * result's): false when it has none (or a malformed one). */
bool qir_group_block(const qir_op *k, int64_t *blk);

/* After kernel group k's #tile changed (-rammer trading its plan for an
 * alternative): every inner derived tile (#tile{block = [...]} alone) set to
 * what propagation from the new tile gives.  Returns how many it wrote. */
int qir_group_rederive_tiles(qir_module *m, qir_op *k);

/* A compute that is a contraction: sum over its reduction axes of
 * [cast](a * b), both factors tensor reads (under casts), possibly as
 * select(mask, a * b, 0) (a convolution's padding), possibly plus
 * select(r0 == 0 && r1 == 0 .., bias, 0) over every reduction variable
 * (Gemm's C, a convolution's bias: added once).  Sets *a, *b (the reads),
 * *mask and *bias (NULL if none).  What the matrix units run: -roller plans
 * them and qcodegen lowers them from this one reading. */
typedef struct {
  const qir_expr *a, *b;        /* the two tensor reads */
  const qir_expr *mask;         /* condition under which the product counts, or NULL */
  const qir_expr *bias;         /* term added once, or NULL */
} qir_contraction;
bool qir_compute_contraction(const qir_compute *c, qir_contraction *out);

/* An operand of a contraction as the tensor memory accelerator sees it
 * (qir/tma.c): at most five dimensions, innermost first, each walked by at most
 * one compute variable (the box extends along it) with coefficient 1, or up to 8
 * past dimension 0 (a strided window: the map's traversal stride), shifted
 * by `stepped` variables (any coefficient: those a main loop walks one at a
 * time, a convolution's window) and by a constant; dimension 0 contiguous and
 * walked by `inner_var` (-1: by any variable), its offset and shifts whole
 * 16-byte units (a copy that starts off a 16-byte boundary of the contiguous
 * dimension faults on the device), every other stride a multiple of 16 bytes
 * (cuTensorMapEncodeTiled's rules).  Dimensions of extent 1 (a
 * 1x1 convolution's window) are left out.  An index that can leave its
 * dimension must be guarded by `mask`, whose every conjunct must be exactly
 * such a bound (idx >= 0, idx < extent): the copy's zero fill outside the
 * tensor is then the mask (a padded window read in place).  Hopper's wgmma
 * plans (qopt -roller) and their lowering (qcodegen) both ask this one
 * question. */
#define QIR_TMA_MAX_RANK 5
#define QIR_TMA_MAX_SHIFTS 4
typedef struct {
  int rank;
  int var[QIR_TMA_MAX_RANK];        /* compute variable walking the dimension, or -1 */
  int64_t estride[QIR_TMA_MAX_RANK];/* its coefficient: the map's element (traversal) stride */
  int64_t cst[QIR_TMA_MAX_RANK];    /* added to the coordinate */
  int n_shifts[QIR_TMA_MAX_RANK];   /* stepped variables added to it, times their coefficients */
  int shift_var[QIR_TMA_MAX_RANK][QIR_TMA_MAX_SHIFTS];
  int64_t shift_coef[QIR_TMA_MAX_RANK][QIR_TMA_MAX_SHIFTS];
  int64_t dims[QIR_TMA_MAX_RANK];
  int64_t strides[QIR_TMA_MAX_RANK];/* bytes; [0] is the element size */
} qir_tma_view;
/* False with the reason in *why when the read `access` of a tensor of type t
 * (under `mask`, or NULL) cannot be copied by TMA as described. */
bool qir_tma_view_of(const qir_compute *c, const qir_expr *access, const qir_type *t, const qir_expr *mask, uint64_t stepped,
                     int inner_var, qir_tma_view *v, const char **why);
/* A sum whose body is `rest + select(r0 == 0 && .., bias, 0)` over every
 * reduction variable (either order, no cast around the sum): returns bias and
 * sets *rest; NULL otherwise.  The bias counts once, so a kernel can start
 * from it instead of testing the condition at every reduction step. */
const qir_expr *qir_compute_bias_term(const qir_compute *c, const qir_expr **rest);

/* ------------------------------------------------------- evaluation
 * qir/eval.c: the reference semantics of every op on host buffers, in double
 * precision, control flow included.  qrun is its command-line face; the importer
 * and -canonicalize fold constants with it. */

typedef struct {
  qir_type type;
  void *data;                   /* malloc'd, numel * dtype size bytes, little-endian */
} qir_tensor;

void qir_tensor_free(qir_tensor *t);
/* Evaluates one op that has no regions, given its operand tensors; fills
 * results[0..op->n_results-1] with newly allocated tensors of the op's result
 * types.  False with a located diagnostic if the op cannot be evaluated. */
bool qir_eval_op(qir_module *m, const qir_op *op, const qir_tensor *operands, qir_tensor *results,
                 qir_diag *d);
/* Runs the module body: inputs in `input` op order, outputs in `output` op order. */
bool qir_eval_module(qir_module *m, const qir_tensor *inputs, int n_inputs, qir_tensor *outputs,
                     int n_outputs, qir_diag *d);

#endif /* QIR_H */
