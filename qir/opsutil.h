/* opsutil.h: helpers shared by the op table's rules (ops.c), the verifier
 * (verify.c) and the tensor-expression definitions (te.c), so that a shape rule
 * and its compute form read attributes the same way.  Internal to qir/. */
#ifndef QIR_OPSUTIL_H
#define QIR_OPSUTIL_H

#include "qir.h"

/* qir_infer_types for static types only (ops.c); qir_infer_types
 * (symshape.c) runs it at samples of the symbols an op's types use. */
bool qir_infer_types_static(qir_module *m, const qir_op *op, qir_type *out, qir_diag *d);
/* An extent equal to want[j] at each of n samples (row j of `at`, `stride`
 * symbol values apart), from the family symshape.c's header lists over the
 * candidates cand; NULL: none. */
/* Adds a symbolic extent e to the candidates cand (n of at most cap): once, not constants. */
void qir_dim_add_candidate(const qir_dim **cand, int *n, int cap, const qir_dim *e);
const qir_dim *qir_dim_fit(qir_module *m, const int64_t *at, int n, int stride, const int64_t *want,
                           const qir_dim *const *cand, int nc);

/* Windowed ops (conv, conv_transpose, max_pool, avg_pool): attributes with their
 * ONNX defaults filled in, one entry per spatial dimension. */
typedef struct {
  int n_spatial;
  int64_t kernel[QIR_MAX_RANK];
  int64_t strides[QIR_MAX_RANK];
  int64_t pads_begin[QIR_MAX_RANK], pads_end[QIR_MAX_RANK];
  int64_t dilations[QIR_MAX_RANK];
  int64_t output_padding[QIR_MAX_RANK];
  int64_t group;
  bool ceil_mode;
  bool count_include_pad;
} qir_window;

/* Reads the window attributes of a conv/pool op whose spatial rank is
 * n_spatial; kernel comes from `kernel_shape` or, when absent, from
 * kernel_from (the weight's spatial dims, NULL for pools).  Reports bad
 * attributes into d (may be NULL) and returns false. */
bool qir_window_read(const qir_op *op, int n_spatial, const int64_t *kernel_from, qir_window *w,
                     qir_diag *d);

/* Parsed einsum equation: per input term and the output, a list of labels;
 * label 0..51 are letters, QIR_EINSUM_ELLIPSIS marks where "..." stands. */
#define QIR_EINSUM_MAX_TERMS 8
#define QIR_EINSUM_ELLIPSIS 99
typedef struct {
  int n_inputs;
  int n_labels[QIR_EINSUM_MAX_TERMS + 1];        /* last entry: the output */
  int labels[QIR_EINSUM_MAX_TERMS + 1][QIR_MAX_RANK + 1];
  /* After binding to operand shapes: the extent of each letter, the dims of
   * the ellipsis (broadcast over inputs) and each input's ellipsis rank. */
  int64_t extent[52];
  bool used[52];
  int ell_rank;
  int64_t ell_dims[QIR_MAX_RANK];
  int in_ell_rank[QIR_EINSUM_MAX_TERMS];
} qir_einsum;

/* Parses `equation` (explicit "->" or implicit form) and binds it to the
 * operand shapes.  On error writes a message to err and returns false. */
bool qir_einsum_parse(const char *equation, int n_inputs, const qir_type *const *inputs,
                      qir_einsum *e, char *err, size_t errlen);

/* numpy broadcasting of a and b into out (dims only).  False if incompatible. */
bool qir_broadcast_shape(const qir_type *a, const qir_type *b, qir_type *out);

/* Number of recurrent gates per op: lstm 4, gru 3, rnn 1. */
int qir_rnn_gates(qir_opcode code);

/* A type's text form by value, so a diagnostic can format several inline:
 * tstr(a).s, tstr(b).s. */
typedef struct {
  char s[128];
} type_str;

static inline type_str tstr(const qir_type *t) {
  type_str r;
  qir_type_format(t, r.s, sizeof r.s);
  return r;
}

#endif /* QIR_OPSUTIL_H */
