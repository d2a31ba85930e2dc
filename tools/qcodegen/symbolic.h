/* symbolic.h: programs for modules with symbolic extents (symbolic.c). */
#ifndef QCODEGEN_SYMBOLIC_H
#define QCODEGEN_SYMBOLIC_H

#include "qir.h"

/* Rewrites each op of the module body, or of a kernel group, that is not
 * row-wise along a symbolic axis into its computes at the run's extents
 * (qir_op_expand_symbolic), reading the symbols' values from a new input
 * `q_dims` (attribute q_run_dims) that qir_run fills.  Reports an op it
 * cannot rewrite (in a group or an rprogram as anything but one compute over
 * its own axes, or without such a form), at the op.  *run_dims: that input
 * (NULL without symbols), which kernels also read to skip their blocks past
 * the run's extents (skip_blocks_past_run). */
bool cg_symbolic_lower(qir_module *m, qir_diag *d, qir_value **run_dims);
/* A symbolic extent as a C expression over the array `syms` of symbol
 * values (`q_floordiv` for its divisions); returns chars that would be written. */
int cg_dim_c(const qir_dim *e, const char *syms, char *buf, size_t n);

/* Host code (nothing for a module without symbols but qir_set_input_shape
 * and qir_output_shape, which every program has): the symbols' table, the
 * layout copy and a prototype of q_bind_dims, before the kernels ... */
void cg_symbolic_prelude(FILE *o, qir_module *m, qir_op *const *inputs, int n_in);
/* ... q_floordiv (before the kernels) ... */
void cg_symbolic_floordiv(FILE *o);
/* ... the model's fields for the run's sizes ... */
void cg_symbolic_model_fields(FILE *o, qir_module *m, int n_in);
/* ... an input's or output's copy of the run's elements between the caller's
 * compact tensor and its bound-sized buffer `dev` (q_pad_copy) ... */
void cg_symbolic_copy(FILE *o, const qir_type *t, const char *dev, int io_index, bool input, int level);
/* ... the copy of a value's run between device buffers of two bounds, a
 * `versions` plan's argument or result (q_relayout, emitted where the
 * module has versions) ... */
void cg_symbolic_relayout(FILE *o, const qir_type *dst_t, const char *dst, const qir_type *src_t, const char *src, int level);
/* ... and after q_check_input: qir_set_input_shape, q_bind_dims, qir_output_shape. */
void cg_symbolic_api(FILE *o, qir_module *m, qir_op *const *inputs, int n_in, qir_op *const *outputs, int n_out);

#endif
