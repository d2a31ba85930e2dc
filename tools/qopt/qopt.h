/* qopt.h: what passes see of the qopt driver: the context (diagnostics and
 * options) and the pass functions of passes.def. */
#ifndef QOPT_H
#define QOPT_H

#include "qir.h"
#include "target.h"

typedef enum { QOPT_STRING, QOPT_INT, QOPT_FLOAT, QOPT_FLAG } qopt_option_kind;

typedef struct {
  const char *name;
  qopt_option_kind kind;
  const char *dflt;
  const char *help;
} qopt_option_info;

typedef struct qopt_ctx {
  qir_diag *diag;
  const char *pass;             /* flag of the running pass, for messages */
  int n_options;
  const qopt_option_info *options;
  const char **values;          /* per option: the value given, or NULL */
} qopt_ctx;

/* Option values: the command line's, else the registry default.  Asking for
 * a name passes.def does not declare is a programming error: it returns the
 * empty string / 0. */
const char *qopt_option_str(const qopt_ctx *ctx, const char *name);
int64_t qopt_option_int(const qopt_ctx *ctx, const char *name);
double qopt_option_float(const qopt_ctx *ctx, const char *name);
bool qopt_option_bool(const qopt_ctx *ctx, const char *name);
/* Whether the command line gave the option (options without a registry
 * default, such as -welder-launch-us, then fall back to the target's value). */
bool qopt_option_given(const qopt_ctx *ctx, const char *name);

/* The device model -target or -target-file names (from_file holds a parsed
 * file); NULL after an error into ctx->diag. */
const qir_target *qopt_target(qopt_ctx *ctx, qir_target *from_file);

/* attention_match.c: the attention chain exporters write (matmul, scale,
 * mask, softmax, matmul) becomes one `attention` op; -canonicalize runs it,
 * and -welder first.  With -stats, `WHO: attention chains recognised N
 * (causal masks C, layout bshd L, repeated kv heads read once R)` on stderr
 * when N > 0. */
typedef struct {
  int chains, causal, bshd, kv_repeats;
} qopt_attention_stats;
bool qopt_match_attention(qopt_ctx *ctx, qir_module *m, const char *who);
/* The module's modelled time on the target, as -welder -stats counts it:
 * each kernel's estimate (a group's est_us, else Roller's model of the op)
 * plus a launch each; at the symbols' values `at` (NULL: at the bound), a
 * kernel of its own whose result's axis 0 is symbolic costs its share of the
 * rows (qcodegen launches the run's blocks only).  -1: no target. */
/* A block on a compute unit shared by fewer co-resident blocks than its own
 * launch put there runs faster (the unit's throughput is shared by fewer),
 * but not without bound: latency keeps it to at most 1 / QOPT_OCC_FLOOR
 * times (-rammer's packed tasks, and a launch whose run has fewer blocks). */
#define QOPT_OCC_FLOOR 0.5
double qopt_modelled_us(qopt_ctx *ctx, qir_module *m, const int64_t *at);

/* versions.c: -size-versions.  `built` ran the pipeline (run(ctx, m, arg)
 * runs it on another module); text is the input it came from.  Returns
 * built, or a new module of one `versions` op holding plans for smaller
 * ranges too (built is then freed); NULL after an error. */
typedef bool (*qopt_pipeline_fn)(qopt_ctx *ctx, qir_module *m, void *arg);
qir_module *qopt_size_versions(qopt_ctx *ctx, qir_module *built, const char *text, size_t len, const char *base_dir,
                               qopt_pipeline_fn run, void *arg);
double qopt_rprogram_us_at(qopt_ctx *ctx, qir_module *m, const qir_op *rp, const int64_t *at);
/* The share of op's kernel time (its #tile) a run at the symbols' values
 * `at` takes: its blocks for the run's rows of a symbolic axis 0, counted in
 * waves of the blocks target keeps resident (1: no such axis or plan). */
double qopt_run_share(const qir_target *target, const qir_op *op, const int64_t *at);
/* op's blocks as tiles of its output (its #tile's block over every axis,
 * row-major), as qcodegen's kernels skip them: per axis d, nb[d] tiles and
 * live[d] of them starting within the run's extent at `at` (nb[d] along a
 * static axis).  Returns the rank; 0 where the plan has no such tiles. */
int qopt_run_tiles(const qir_op *op, const int64_t *at, int64_t *nb, int64_t *live);
/* The same where op has #tile_bands and the run picks one: that band's
 * estimate over the op's own; -1 where it picks none. */
double qopt_band_share(const qir_op *op, const int64_t *at);
/* The smaller sizes plans are made for (Roller's bands, Rammer's unpacked
 * runs): every symbol in `used` (a bit each) at its least value (at least
 * 1), then each step 4x the points (4x for one symbol, 2x each for two, ...),
 * short of the bound; the others at their bound.  At most max steps into at;
 * returns how many. */
#define QOPT_MAX_SYMS 64
int qopt_size_steps(const qir_module *m, uint64_t used, int max, int64_t (*at)[QOPT_MAX_SYMS]);
/* The same with each symbol of `used` `factor` (> 1) times larger a step:
 * kept on its step below for a whole factor, above for a fraction (a step
 * that repeats the last is left out). */
int qopt_size_steps_by(const qir_module *m, uint64_t used, double factor, int max, int64_t (*at)[QOPT_MAX_SYMS]);

#define QIR_PASS(flag, fn, help) bool fn(qopt_ctx *ctx, qir_module *m);
#include "passes.def"
#undef QIR_PASS

#endif /* QOPT_H */
