/* printer_api.c: builds modules through the API the way passes do (no names,
 * repeated names, names with odd characters, folded-looking expressions,
 * splats made by qir_const_new_splat, odd attribute keys) and prints them
 * twice through the parser: the printed text must parse and be a fixed point. */
#include "qir.h"

#include <stdlib.h>
#include <string.h>

static int roundtrip(qir_module *m) {
  size_t n1, n2;
  char *t1 = qir_print_to_string(m, &n1);
  fputs(t1, stdout);
  qir_diag d;
  qir_diag_init(&d, stderr, "<printed>", t1, n1);
  qir_module *m2 = qir_parse(t1, n1, "<printed>", NULL, &d);
  if (!m2) return 1;
  char *t2 = qir_print_to_string(m2, &n2);
  int bad = n1 != n2 || memcmp(t1, t2, n1) != 0;
  if (bad) fprintf(stderr, "not a fixed point:\n%s", t2);
  free(t1);
  free(t2);
  qir_module_free(m2);
  return bad;
}

int main(void) {
  qir_module *m = qir_module_new("api-built module");
  qir_loc nl = {0};
  int64_t dims[] = {2};
  qir_type t = qir_type_make(QIR_F32, 1, dims);

  /* %0 is taken by a named value further down: the unnamed ones skip it. */
  qir_op *in = qir_op_new(m, QIR_OP_INPUT, 0, NULL, 1, &t, nl);
  qir_op_append(m->body, in);
  qir_op *r1 = qir_op_new(m, QIR_OP_RELU, 1, &in->results[0], 1, &t, nl);
  r1->results[0]->name = "x";
  qir_op_append(m->body, r1);
  qir_op *r2 = qir_op_new(m, QIR_OP_NEG, 1, &r1->results[0], 1, &t, nl);
  r2->results[0]->name = "x"; /* a repeated name */
  qir_op_append(m->body, r2);
  qir_op *r3 = qir_op_new(m, QIR_OP_ABS, 1, &r2->results[0], 1, &t, nl);
  r3->results[0]->name = "0";
  qir_op_append(m->body, r3);
  qir_op *r4 = qir_op_new(m, QIR_OP_EXP, 1, &r3->results[0], 1, &t, nl);
  r4->results[0]->name = "bad name/with:chars";
  qir_op_append(m->body, r4);
  qir_op *r5 = qir_op_new(m, QIR_OP_LOG, 1, &r4->results[0], 1, &t, nl);
  r5->results[0]->name = "x.1"; /* collides with the made-up name of the second %x */
  qir_op_append(m->body, r5);

  qir_op *sp = qir_const_new_splat(m, t, 0.1, nl);
  qir_op_append(m->body, sp);
  float twice[2] = {3.0f, 3.0f};
  qir_op *same = qir_const_new_data(m, t, twice, sizeof twice, nl);
  qir_op_append(m->body, same);

  /* (-(x) * -(-(5))) - -(2.5) and a cast, built without folding; and a
   * minus applied to INT64_MIN, which has no literal form. */
  qir_op *c = qir_op_new(m, QIR_OP_COMPUTE, 1, &r5->results[0], 1, &t, nl);
  c->comp = qir_compute_new(m, 1, 0);
  c->comp->axis_names[0] = "i";
  c->comp->axis_extents[0] = 2;
  qir_expr *idx = qir_expr_var(m, 0);
  qir_expr *acc = qir_expr_access(m, 0, 1, &idx);
  qir_expr *five = qir_expr_unary(m, QIR_FN_NEG, qir_expr_unary(m, QIR_FN_NEG, qir_expr_int(m, 5)));
  qir_expr *prod = qir_expr_binary(m, QIR_FN_MUL, qir_expr_unary(m, QIR_FN_NEG, acc), qir_expr_cast(m, QIR_F32, five));
  qir_expr *min = qir_expr_unary(m, QIR_FN_NEG, qir_expr_int(m, INT64_MIN));
  qir_expr *body = qir_expr_binary(m, QIR_FN_SUB, prod, qir_expr_unary(m, QIR_FN_NEG, qir_expr_float(m, 2.5)));
  c->comp->body = qir_expr_binary(m, QIR_FN_ADD, body, qir_expr_cast(m, QIR_F32, min));
  qir_op_append(m->body, c);

  /* Attributes set in any order, with keys and words that are no identifiers. */
  qir_op_set_attr(m, c, "zeta", qir_attr_word(m, "not a word"), false);
  qir_op_set_attr(m, c, "alpha", qir_attr_float(2.0), false);
  qir_op_set_attr(m, c, "odd key", qir_attr_int(1), false);
  qir_op_set_attr(m, c, "tile", qir_attr_dict(m, 0, NULL), true);
  qir_op_set_attr(m, c, "fuse", qir_attr_word(m, "reg"), true);
  qir_op_set_attr(m, c, "name", qir_attr_string(m, "tab\there \x01 \xff end"), false);

  qir_op *out = qir_op_new(m, QIR_OP_OUTPUT, 1, &c->results[0], 0, NULL, nl);
  qir_op_append(m->body, out);
  int rc = roundtrip(m);
  qir_module_free(m);
  return rc;
}
