/* qir.y: the .qir grammar (docs/qir.md is the reference).
 *
 * A pure bison parser with locations.  Actions stay thin: they call the qp_*
 * helpers of qir/parse.c, which build the module, resolve names and report
 * located errors.  The first error stops the parse (YYABORT): one clear
 * message beats a cascade. */

%define api.pure full
%define api.prefix {qir_yy}
%locations
%define parse.error custom
%param {yyscan_t scanner}
%parse-param {qp_ctx *ctx}
/* One known conflict, resolved by shifting: after an op name, a value name is
 * an operand, never the result of the next op (an op with neither operands nor
 * a type list, i.e. `yield`, ends its region). */
%expect 1

%code requires {
#include "qir.h"

#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif

/* Bound on nesting of brackets, regions and expressions: deeper input is
 * rejected with an error instead of exhausting the stack. */
#define QP_MAX_DEPTH 256

typedef struct qp_ctx qp_ctx;

/* A growable array in the module arena (the arena frees everything at once). */
typedef struct {
  void *data;
  int n;                        /* items */
  size_t used, cap;             /* bytes */
} qp_vec;

typedef struct {
  int64_t v;
  qir_loc loc;
  bool bound;                   /* written `<=v` */
  const qir_dim *sym;           /* a symbolic extent (v: its bound as written, or -1) */
} qp_dim;

typedef struct {
  const char *name;
  qir_loc loc;
} qp_name;

/* A number as written: magnitude and sign kept apart so that every int64 and
 * uint64 value is exact. */
typedef struct {
  uint64_t mag;
  double f;
  bool neg, is_float, is_bool;
  qir_loc loc;
} qp_num;

/* An expression under construction: `depth` bounds recursion, `big` marks the
 * literal 9223372036854775808, legal only under unary minus. */
typedef struct {
  qir_expr *e;
  int depth;
  bool big;
} qp_ex;
}

%code provides {
int qir_yylex(QIR_YYSTYPE *lval, QIR_YYLTYPE *lloc, yyscan_t scanner);

qir_loc qp_loc(qp_ctx *c, const QIR_YYLTYPE *l);
void qp_error(qp_ctx *c, qir_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void qp_syntax_error(qp_ctx *c, qir_loc loc, const char *unexpected, const char **expected, int n_expected);
void qp_vec_push(qp_ctx *c, qp_vec *v, const void *item, size_t size);

bool qp_module_name(qp_ctx *c, const char *name, qir_loc loc);
bool qp_weights(qp_ctx *c, const char *path, qir_loc loc);
bool qp_offset(qp_ctx *c, const char *digits, qir_loc loc, int64_t *out);
bool qp_signed(qp_ctx *c, uint64_t mag, bool neg, qir_loc loc, int64_t *out);
bool qp_type(qp_ctx *c, const char *dtype, qir_loc dloc, qp_vec *dims, qir_type *out);

qir_value *qp_use(qp_ctx *c, const char *name, qir_loc loc);
bool qp_region_begin(qp_ctx *c);
bool qp_region_arg(qp_ctx *c, const char *name, qir_loc loc, const qir_type *t);
qir_region *qp_region_end(qp_ctx *c);
bool qp_regions_allowed(qp_ctx *c, const char *op_name, qir_loc loc);

bool qp_attr_add(qp_ctx *c, qp_vec *v, const char *key, qir_loc loc, qir_attr_val val, bool sched);
qir_attr_val qp_attr_dict(qp_ctx *c, qp_vec *entries);
qir_attr_val qp_attr_list(qp_ctx *c, qp_vec *items);
bool qp_attr_number(qp_ctx *c, const qp_num *n, qir_attr_val *out);

qir_module *qp_module(qp_ctx *c);
qir_op *qp_op_generic(qp_ctx *c, const char *name, qir_loc loc, qp_vec *operands, qp_vec *attrs,
                      qp_vec *types, qp_vec *regions);
qir_op *qp_op_symbol(qp_ctx *c, const char *name, qir_loc loc, const char *sym, qir_loc sym_loc, qp_vec *operands,
                     qp_vec *attrs, qp_vec *types, qp_vec *regions);
qir_op *qp_op_const(qp_ctx *c, qir_loc loc, int64_t offset, qp_vec *dense, bool splat, qp_vec *attrs,
                    qp_vec *types);
void qp_compute_begin(qp_ctx *c);
bool qp_compute_axis(qp_ctx *c, const char *name, qir_loc loc, const qp_dim *extent);
bool qp_dimsym(qp_ctx *c, const char *name, qir_loc loc, int64_t lo, int64_t hi, int64_t step, qir_loc rloc);
const qir_dim *qp_dim_int(qp_ctx *c, uint64_t v, qir_loc loc);
const qir_dim *qp_dim_name(qp_ctx *c, const char *name, qir_loc loc);
const qir_dim *qp_dim_call(qp_ctx *c, const char *fn, qir_loc loc, const qir_dim *a, const qir_dim *b);
const qir_dim *qp_dim_div(qp_ctx *c, const qir_dim *a, const qir_dim *b, qir_loc loc);
bool qp_dim_of(qp_ctx *c, const qir_dim *e, qir_loc loc, int64_t bound, qp_dim *out);
void qp_compute_reduce_axes(qp_ctx *c);
bool qp_compute_reduce_kind(qp_ctx *c, const char *name, qir_loc loc);
qir_op *qp_op_compute(qp_ctx *c, qir_loc loc, qp_ex body, qp_vec *attrs, qp_vec *types);
bool qp_op_finish(qp_ctx *c, qp_vec *names, qir_op *op);

bool qp_ex_int(qp_ctx *c, uint64_t mag, qir_loc loc, qp_ex *out);
bool qp_ex_float(qp_ctx *c, double f, qir_loc loc, qp_ex *out);
bool qp_ex_var(qp_ctx *c, const char *name, qir_loc loc, qp_ex *out);
bool qp_ex_access(qp_ctx *c, const char *name, qir_loc loc, qp_vec *idx, qp_ex *out);
bool qp_ex_call(qp_ctx *c, const char *name, qir_loc loc, qp_vec *args, qp_ex *out);
bool qp_ex_unary(qp_ctx *c, qir_expr_fn fn, qir_loc loc, qp_ex a, qp_ex *out);
bool qp_ex_binary(qp_ctx *c, qir_expr_fn fn, qir_loc loc, qp_ex a, qp_ex b, qp_ex *out);
bool qp_ex_check(qp_ctx *c, qp_ex a);
}

%union {
  uint64_t u;
  double f;
  const char *s;
  int64_t i;
  qp_vec *vec;
  qir_type type;
  qir_attr_val attr;
  qp_num num;
  qp_ex ex;
  qir_op *op;
  qir_region *region;
  const qir_dim *dim;
  qp_dim dimv;
}

%token MODULE "'module'" WEIGHTS "'weights'" CONST "'const'" COMPUTE "'compute'"
%token REDUCE "'reduce'" DENSE "'dense'" ELSE "'else'" DIM "'dim'"
%token <s> IDENT "identifier" VALUE "value name" SYMBOL "symbol" OFFSET "weights offset"
%token <s> SCHED "schedule key" STRING "string"
%token <u> INT "integer"
%token <f> FLOAT "float"
%token LE "'<='" GE "'>='" EQ "'=='" NE "'!='" ANDAND "'&&'" OROR "'||'"

%left OROR
%left ANDAND
%left EQ NE
%left '<' LE '>' GE
%left '+' '-'
%left '*' '/' '%'
%precedence UNARY

%type <vec> names operands operands_opt types typelist dims dims_opt
%type <vec> attr_entries attr_entries_opt attrdict attrs_tail scheds attr_items attr_items_opt
%type <vec> regions regions_opt dense_items dense_items_opt exprs exprs_opt
%type <type> type
%type <i> sint
%type <s> word key modname
%type <attr> attrval
%type <num> number dnum
%type <op> opcore
%type <region> region
%type <dim> dexpr
%type <dimv> dim
%type <ex> expr primary

%code {
#include <string.h>

#define LOC(l) qp_loc(ctx, &(l))
#define CTXM qp_module(ctx)
#define NEWVEC() ((qp_vec *)qir_alloc(CTXM, sizeof(qp_vec)))

static void qir_yyerror(QIR_YYLTYPE *loc, yyscan_t scanner, qp_ctx *ctx, const char *msg);
}

%%

module
  : MODULE modname '{' { if (!qp_module_name(ctx, $2, LOC(@1)) || !qp_region_begin(ctx)) YYABORT; }
    weights_opt dimdecls ops '}'
  ;

/* `dim NAME = [MIN, MAX]`: an extent known at run time, both ends inclusive;
 * `% STEP` after it: only MIN plus multiples of STEP */
dimdecls
  : %empty
  | dimdecls DIM IDENT '=' '[' sint ',' sint ']'
      { if (!qp_dimsym(ctx, $3, LOC(@3), $6, $8, 1, LOC(@6))) YYABORT; }
  | dimdecls DIM IDENT '=' '[' sint ',' sint ']' '%' sint
      { if (!qp_dimsym(ctx, $3, LOC(@3), $6, $8, $11, LOC(@11))) YYABORT; }
  ;

modname
  : SYMBOL
  | OFFSET
  ;

weights_opt
  : %empty
  | WEIGHTS STRING { if (!qp_weights(ctx, $2, LOC(@2))) YYABORT; }
  ;

ops
  : %empty
  | ops op
  ;

op
  : names '=' opcore { if (!qp_op_finish(ctx, $1, $3)) YYABORT; }
  | opcore           { if (!qp_op_finish(ctx, NULL, $1)) YYABORT; }
  ;

names
  : VALUE           { $$ = NEWVEC(); qp_name n = {$1, LOC(@1)}; qp_vec_push(ctx, $$, &n, sizeof n); }
  | names ',' VALUE { $$ = $1; qp_name n = {$3, LOC(@3)}; qp_vec_push(ctx, $$, &n, sizeof n); }
  ;

opcore
  : IDENT operands_opt attrs_tail
      { if (!($$ = qp_op_generic(ctx, $1, LOC(@1), $2, $3, NULL, NULL))) YYABORT; }
  | IDENT operands_opt attrs_tail ':' typelist
      { /* A region after an op that takes none is most likely an attribute
         * dict written after the types: say so before parsing it as ops. */
        if ((yychar == '{' || yychar == '(') && !qp_regions_allowed(ctx, $1, qp_loc(ctx, &yylloc))) YYABORT; }
    regions_opt
      { if (!($$ = qp_op_generic(ctx, $1, LOC(@1), $2, $3, $5, $7))) YYABORT; }
  | IDENT SYMBOL operands_opt attrs_tail ':' typelist
      { if ((yychar == '{' || yychar == '(') && !qp_regions_allowed(ctx, $1, qp_loc(ctx, &yylloc))) YYABORT; }
    regions_opt
      { if (!($$ = qp_op_symbol(ctx, $1, LOC(@1), $2, LOC(@2), $3, $4, $6, $8))) YYABORT; }
  | CONST OFFSET attrs_tail ':' typelist
      { int64_t off; if (!qp_offset(ctx, $2, LOC(@2), &off)) YYABORT;
        if (!($$ = qp_op_const(ctx, LOC(@1), off, NULL, false, $3, $5))) YYABORT; }
  | CONST DENSE '<' dnum '>' attrs_tail ':' typelist
      { qp_vec *v = NEWVEC(); qp_vec_push(ctx, v, &$4, sizeof $4);
        if (!($$ = qp_op_const(ctx, LOC(@1), -1, v, true, $6, $8))) YYABORT; }
  | CONST DENSE '<' '[' dense_items_opt ']' '>' attrs_tail ':' typelist
      { if (!($$ = qp_op_const(ctx, LOC(@1), -1, $5, false, $8, $10))) YYABORT; }
  | COMPUTE { qp_compute_begin(ctx); } axes reduce_opt '(' expr ')' attrs_tail ':' typelist
      { if (!qp_ex_check(ctx, $6) || !($$ = qp_op_compute(ctx, LOC(@1), $6, $8, $10))) YYABORT; }
  ;

operands_opt
  : %empty   { $$ = NULL; }
  | operands
  ;

operands
  : VALUE              { $$ = NEWVEC(); qir_value *v = qp_use(ctx, $1, LOC(@1)); if (!v) YYABORT;
                         qp_vec_push(ctx, $$, &v, sizeof v); }
  | operands ',' VALUE { $$ = $1; qir_value *v = qp_use(ctx, $3, LOC(@3)); if (!v) YYABORT;
                         qp_vec_push(ctx, $$, &v, sizeof v); }
  ;

typelist
  : types
  | '(' ')'  { $$ = NEWVEC(); }
  ;

types
  : type            { $$ = NEWVEC(); qp_vec_push(ctx, $$, &$1, sizeof $1); }
  | types ',' type  { $$ = $1; qp_vec_push(ctx, $$, &$3, sizeof $3); }
  ;

type
  : IDENT '[' dims_opt ']' { if (!qp_type(ctx, $1, LOC(@1), $3, &$$)) YYABORT; }
  ;

dims_opt
  : %empty { $$ = NULL; }
  | dims
  ;

dims
  : dim          { $$ = NEWVEC(); qp_vec_push(ctx, $$, &$1, sizeof $1); }
  | dims ',' dim { $$ = $1; qp_vec_push(ctx, $$, &$3, sizeof $3); }
  ;

/* An extent: a number, `<=N` (a loop's scan output), or an expression over
 * the dimension symbols with its bound (`past+1<=65`; the bound may be left out). */
dim
  : dexpr         { if (!qp_dim_of(ctx, $1, LOC(@1), -1, &$$)) YYABORT; }
  | dexpr LE sint { if (!qp_dim_of(ctx, $1, LOC(@1), $3, &$$)) YYABORT; }
  | LE sint       { $$ = (qp_dim){$2, LOC(@1), true, NULL}; }
  ;

dexpr
  : INT            { if (!($$ = qp_dim_int(ctx, $1, LOC(@1)))) YYABORT; }
  | '-' INT        { if (!($$ = qp_dim_int(ctx, $2, LOC(@1)))) YYABORT;
                     $$ = qir_dim_binary(CTXM, QIR_DIM_SUB, qir_dim_const(CTXM, 0), $$); }
  | IDENT          { if (!($$ = qp_dim_name(ctx, $1, LOC(@1)))) YYABORT; }
  | IDENT '(' dexpr ',' dexpr ')'
                   { if (!($$ = qp_dim_call(ctx, $1, LOC(@1), $3, $5))) YYABORT; }
  | '(' dexpr ')'  { $$ = $2; }
  | dexpr '+' dexpr { $$ = qir_dim_binary(CTXM, QIR_DIM_ADD, $1, $3); }
  | dexpr '-' dexpr { $$ = qir_dim_binary(CTXM, QIR_DIM_SUB, $1, $3); }
  | dexpr '*' dexpr { $$ = qir_dim_binary(CTXM, QIR_DIM_MUL, $1, $3); }
  | dexpr '/' dexpr { if (!($$ = qp_dim_div(ctx, $1, $3, LOC(@3)))) YYABORT; }
  ;

sint
  : INT     { if (!qp_signed(ctx, $1, false, LOC(@1), &$$)) YYABORT; }
  | '-' INT { if (!qp_signed(ctx, $2, true, LOC(@1), &$$)) YYABORT; }
  ;

/* ---- attributes */

attrs_tail
  : scheds
  | attrdict scheds
      { $$ = $1; for (int i = 0; $2 && i < $2->n; i++) {
          qir_attr *a = &((qir_attr *)$2->data)[i];
          if (!qp_attr_add(ctx, $$, a->key, a->loc, a->val, true)) YYABORT; } }
  ;

scheds
  : %empty { $$ = NEWVEC(); }
  | scheds SCHED attrdict     { $$ = $1; if (!qp_attr_add(ctx, $$, $2, LOC(@2), qp_attr_dict(ctx, $3), true)) YYABORT; }
  | scheds SCHED '=' attrval  { $$ = $1; if (!qp_attr_add(ctx, $$, $2, LOC(@2), $4, true)) YYABORT; }
  ;

attrdict
  : '{' attr_entries_opt '}' { $$ = $2; }
  ;

attr_entries_opt
  : %empty { $$ = NEWVEC(); }
  | attr_entries
  ;

attr_entries
  : key '=' attrval
      { $$ = NEWVEC(); if (!qp_attr_add(ctx, $$, $1, LOC(@1), $3, false)) YYABORT; }
  | attr_entries ',' key '=' attrval
      { $$ = $1; if (!qp_attr_add(ctx, $$, $3, LOC(@3), $5, false)) YYABORT; }
  ;

key
  : word
  | STRING
  ;

word
  : IDENT
  | MODULE   { $$ = "module"; }
  | WEIGHTS  { $$ = "weights"; }
  | CONST    { $$ = "const"; }
  | COMPUTE  { $$ = "compute"; }
  | REDUCE   { $$ = "reduce"; }
  | DIM      { $$ = "dim"; }
  | DENSE    { $$ = "dense"; }
  | ELSE     { $$ = "else"; }
  ;

attrval
  : number    { if (!qp_attr_number(ctx, &$1, &$$)) YYABORT; }
  | STRING    { $$ = qir_attr_string(CTXM, $1); }
  | word      { $$ = qir_attr_word(CTXM, $1); }
  | '[' attr_items_opt ']' { $$ = qp_attr_list(ctx, $2); }
  | attrdict  { $$ = qp_attr_dict(ctx, $1); }
  ;

attr_items_opt
  : %empty { $$ = NEWVEC(); }
  | attr_items
  ;

attr_items
  : attrval                 { $$ = NEWVEC(); qp_vec_push(ctx, $$, &$1, sizeof $1); }
  | attr_items ',' attrval  { $$ = $1; qp_vec_push(ctx, $$, &$3, sizeof $3); }
  ;

number
  : INT       { $$ = (qp_num){.mag = $1, .loc = LOC(@1)}; }
  | '-' INT   { $$ = (qp_num){.mag = $2, .neg = true, .loc = LOC(@1)}; }
  | FLOAT     { $$ = (qp_num){.f = $1, .is_float = true, .loc = LOC(@1)}; }
  | '-' FLOAT { $$ = (qp_num){.f = -$2, .is_float = true, .neg = true, .loc = LOC(@1)}; }
  ;

/* ---- constants */

dnum
  : number
  | IDENT   { $$ = (qp_num){.loc = LOC(@1), .is_bool = true};
              if (strcmp($1, "true") == 0) $$.mag = 1;
              else if (strcmp($1, "false") != 0) {
                qp_error(ctx, LOC(@1), "expected a number, 'true' or 'false' in a dense constant, got '%s'", $1);
                YYABORT; } }
  ;

dense_items_opt
  : %empty { $$ = NEWVEC(); }
  | dense_items
  ;

dense_items
  : dnum                  { $$ = NEWVEC(); qp_vec_push(ctx, $$, &$1, sizeof $1); }
  | dense_items ',' dnum  { $$ = $1; qp_vec_push(ctx, $$, &$3, sizeof $3); }
  ;

/* ---- regions */

regions_opt
  : %empty { $$ = NULL; }
  | regions
  ;

regions
  : region               { $$ = NEWVEC(); qp_vec_push(ctx, $$, &$1, sizeof $1); }
  | regions ELSE region  { $$ = $1; qp_vec_push(ctx, $$, &$3, sizeof $3); }
  ;

region
  : region_begin region_args_opt '{' ops '}' { $$ = qp_region_end(ctx); }
  ;

region_begin
  : %empty { if (!qp_region_begin(ctx)) YYABORT; }
  ;

region_args_opt
  : %empty
  | '(' ')'
  | '(' region_args ')'
  ;

region_args
  : VALUE ':' type                  { if (!qp_region_arg(ctx, $1, LOC(@1), &$3)) YYABORT; }
  | region_args ',' VALUE ':' type  { if (!qp_region_arg(ctx, $3, LOC(@3), &$5)) YYABORT; }
  ;

/* ---- compute */

axes
  : '[' ']'
  | '[' axis_list ']'
  ;

axis_list
  : axis
  | axis_list ',' axis
  ;

axis
  : IDENT ':' dim { if (!qp_compute_axis(ctx, $1, LOC(@1), &$3)) YYABORT; }
  ;

reduce_opt
  : %empty
  | REDUCE { qp_compute_reduce_axes(ctx); } axes IDENT
      { if (!qp_compute_reduce_kind(ctx, $4, LOC(@4))) YYABORT; }
  ;

expr
  : primary
  | expr OROR expr   { if (!qp_ex_binary(ctx, QIR_FN_OR, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr ANDAND expr { if (!qp_ex_binary(ctx, QIR_FN_AND, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr EQ expr     { if (!qp_ex_binary(ctx, QIR_FN_EQ, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr NE expr     { if (!qp_ex_binary(ctx, QIR_FN_NE, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr '<' expr    { if (!qp_ex_binary(ctx, QIR_FN_LT, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr LE expr     { if (!qp_ex_binary(ctx, QIR_FN_LE, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr '>' expr    { if (!qp_ex_binary(ctx, QIR_FN_GT, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr GE expr     { if (!qp_ex_binary(ctx, QIR_FN_GE, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr '+' expr    { if (!qp_ex_binary(ctx, QIR_FN_ADD, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr '-' expr    { if (!qp_ex_binary(ctx, QIR_FN_SUB, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr '*' expr    { if (!qp_ex_binary(ctx, QIR_FN_MUL, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr '/' expr    { if (!qp_ex_binary(ctx, QIR_FN_DIV, LOC(@2), $1, $3, &$$)) YYABORT; }
  | expr '%' expr    { if (!qp_ex_binary(ctx, QIR_FN_MOD, LOC(@2), $1, $3, &$$)) YYABORT; }
  | '-' expr %prec UNARY { if (!qp_ex_unary(ctx, QIR_FN_NEG, LOC(@1), $2, &$$)) YYABORT; }
  | '!' expr %prec UNARY { if (!qp_ex_unary(ctx, QIR_FN_NOT, LOC(@1), $2, &$$)) YYABORT; }
  ;

primary
  : INT                   { if (!qp_ex_int(ctx, $1, LOC(@1), &$$)) YYABORT; }
  | FLOAT                 { if (!qp_ex_float(ctx, $1, LOC(@1), &$$)) YYABORT; }
  | IDENT                 { if (!qp_ex_var(ctx, $1, LOC(@1), &$$)) YYABORT; }
  | VALUE '[' exprs_opt ']' { if (!qp_ex_access(ctx, $1, LOC(@1), $3, &$$)) YYABORT; }
  | IDENT '(' exprs ')'   { if (!qp_ex_call(ctx, $1, LOC(@1), $3, &$$)) YYABORT; }
  | '(' expr ')'          { if (!qp_ex_check(ctx, $2)) YYABORT; $$ = $2; }
  ;

exprs_opt
  : %empty { $$ = NEWVEC(); }
  | exprs
  ;

exprs
  : expr            { if (!qp_ex_check(ctx, $1)) YYABORT; $$ = NEWVEC(); qp_vec_push(ctx, $$, &$1, sizeof $1); }
  | exprs ',' expr  { if (!qp_ex_check(ctx, $3)) YYABORT; $$ = $1; qp_vec_push(ctx, $$, &$3, sizeof $3); }
  ;

%%
static void qir_yyerror(QIR_YYLTYPE *loc, yyscan_t scanner, qp_ctx *ctx, const char *msg) {
  (void)scanner;
  /* bison's only own message is stack exhaustion. */
  qp_error(ctx, qp_loc(ctx, loc), "%s", strcmp(msg, "memory exhausted") == 0 ? "input nested too deeply" : msg);
}

static int yyreport_syntax_error(const yypcontext_t *yyctx, yyscan_t scanner, qp_ctx *ctx) {
  (void)scanner;
  enum { MAX_EXPECTED = 8 };
  yysymbol_kind_t expected[MAX_EXPECTED];
  /* Name the alternatives only when there are few: a long list helps nobody. */
  int n = yypcontext_expected_tokens(yyctx, NULL, 0);
  n = n > 0 && n <= MAX_EXPECTED ? yypcontext_expected_tokens(yyctx, expected, MAX_EXPECTED) : 0;
  const char *names[MAX_EXPECTED];
  for (int i = 0; i < n; i++) names[i] = yysymbol_name(expected[i]);
  yysymbol_kind_t tok = yypcontext_token(yyctx);
  qp_syntax_error(ctx, qp_loc(ctx, yypcontext_location(yyctx)),
                  tok == YYSYMBOL_YYEMPTY ? NULL : yysymbol_name(tok), names, n);
  return 0;
}
