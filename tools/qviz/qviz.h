/* qviz.h: shared pieces of qviz (.qir -> Graphviz DOT).
 *
 * qviz reads only the IR text: every decision it draws (tiles, kernel groups,
 * fused edges, rProgram) comes from the schedule attributes the passes wrote.
 * Three views, one file each: graph.c (-graph), tiles.c (-tiles), veu.c (-veu);
 * dot.c holds the text buffer, label escaping and attribute formatting.
 */
#ifndef QVIZ_H
#define QVIZ_H

#include "qir.h"

/* A growable string; every label is built in one and escaped when written. */
typedef struct {
  char *s;
  size_t len, cap;
} qviz_buf;

void buf_printf(qviz_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_puts(qviz_buf *b, const char *s);
void buf_clear(qviz_buf *b);
void buf_free(qviz_buf *b);

/* Writes s as a DOT double-quoted string (quotes included): escapes `"` and
 * `\`, turns newlines into `\n` (Graphviz's centred line break), drops control
 * characters and replaces bytes that are not UTF-8 with '?', so any ONNX name
 * renders without Graphviz warnings. */
void dot_quoted(FILE *out, const char *s);
/* Writes s escaped for an HTML-like label (`&`, `<`, `>`, `"`, `'`), same
 * UTF-8 clean-up; newlines become <BR/>. */
void dot_html(FILE *out, const char *s);
/* Appends s, or when longer than max bytes its start and end around "...". */
void buf_put_clipped(qviz_buf *b, const char *s, size_t max);

void fmt_type(qviz_buf *b, const qir_type *t);          /* f32[8,256] */
void fmt_attr_val(qviz_buf *b, const qir_attr_val *v);  /* compact, like the printer */
void fmt_dims(qviz_buf *b, const qir_attr_val *v);      /* [64,64] -> 64x64 */

/* The #tile{...} schema written by `qopt -roller`. */
typedef struct {
  bool present;
  const qir_attr_val *block, *thread, *rstep, *grid;   /* lists, or NULL */
  const qir_attr_val *mma, *mma_axes;                  /* matrix-unit shape and axes, or NULL */
  const qir_attr_val *flash, *flash_mma;               /* a flash-attention plan: [rows, keys per step];
                                                        * its mma.sync shape (NULL: SIMT) */
  int64_t stages, splits, skipped_tiles;               /* -1 when absent */
  int64_t threads, smem_pad, vec, smem, regs, rsplit;  /* -1 when absent */
  double est_us;                                       /* < 0 when absent */
  const char *target;
} qviz_tile;

qviz_tile tile_of(const qir_op *op);
/* One-line summary: "blk 64x64 thr 4x4 grid 16x4 12.3us" ("" when no tile), with
 * " mma" on the matrix units and " rsplit 32" for split reductions. */
void fmt_tile_summary(qviz_buf *b, const qviz_tile *t);

/* Op kinds that are looked up by name at run time, because ops.def may not
 * have them yet (kernel groups, rProgram). */
bool op_is_named(const qir_op *op, const char *name);
const char *op_name(const qir_op *op);
/* The kernel group an op is in (the name of the enclosing `kernel` op), or NULL. */
const char *kernel_group_of(const qir_op *op);
/* A kernel op's own name (kernel @name {...}), from its attributes. */
const char *kernel_op_name(const qir_op *op);

/* Op kinds that do the heavy work and get a tile table even without a plan. */
bool op_is_compute(const qir_op *op);

/* Colours for groups: a soft palette indexed cyclically. */
const char *palette_color(int i);

/* Pointer -> small integer map for node numbering. */
typedef struct {
  const void **keys;
  int *vals;
  size_t cap, n;
} qviz_map;
int map_get(const qviz_map *m, const void *key);  /* -1 when absent */
void map_put(qviz_map *m, const void *key, int val);
void map_free(qviz_map *m);

/* The views.  Each writes a whole DOT graph; returns 0, or 1 after reporting
 * an error into d. */
int qviz_graph(FILE *out, qir_module *m, qir_diag *d);
/* top > 0: tables only for the `top` ops with the largest estimates. */
int qviz_tiles(FILE *out, qir_module *m, qir_diag *d, int top);
int qviz_veu(FILE *out, qir_module *m, qir_diag *d);

#endif /* QVIZ_H */
