/* graph.c: `qviz -graph`, the dataflow graph.
 *
 * Ops are boxes labelled with op name, result types and a summary of their
 * #tile; edges carry the tensor's type.  Constants are not drawn: each user
 * lists its constant operands, which keeps a 700-node ONNX model readable.
 * Nesting becomes clusters: loop/if regions (one sub-cluster per region),
 * kernel groups (`kernel @name` ops).  An edge whose producer inside a
 * group says #fuse=reg|smem is drawn thick red (registers) or dashed blue
 * (shared memory); plain edges are global memory.
 */
#include "qviz.h"
#include "target.h"

#include <string.h>

typedef enum { FUSE_GLOBAL, FUSE_REG, FUSE_SMEM } fuse_level;

typedef struct {
  FILE *out;
  qir_module *m;
  qviz_map op_ids;      /* op -> node number */
  int next_cluster;
  int n_drawn, n_folded, n_fused;
  qviz_buf label;
} graph_ctx;

static bool number_op(qir_op *op, void *vctx) {
  graph_ctx *g = vctx;
  map_put(&g->op_ids, op, (int)g->op_ids.n);
  return true;
}

static bool is_const(const qir_value *v) { return v->def && v->def->code == QIR_OP_CONST; }

/* Node name of the value's producer: the op's box, or a region argument. */
static void fprint_value_node(graph_ctx *g, const qir_value *v) {
  if (v->def) fprintf(g->out, "o%d", map_get(&g->op_ids, v->def));
  else fprintf(g->out, "a%d", v->id);
}

static void put_value_name(qviz_buf *b, const qir_value *v) {
  if (v->name) {
    buf_puts(b, "%");
    buf_put_clipped(b, v->name, 32);
  } else {
    buf_printf(b, "%%%d", v->id);
  }
}

/* "const f32[64,3,3,3]" or, for one inline element, "= 0.5". */
static void put_const_summary(graph_ctx *g, qviz_buf *b, const qir_value *v) {
  qir_op *c = v->def;
  put_value_name(b, v);
  if (c->cst && c->cst->offset < 0 && qir_type_numel(&v->type) == 1 &&
      (c->cst->splat || (c->cst->data && c->cst->nbytes >= (size_t)qir_dtype_size(v->type.dtype)))) {
    buf_printf(b, " = %g", qir_const_elem(g->m, c, 0, NULL));
    return;
  }
  buf_puts(b, " const ");
  fmt_type(b, &v->type);
  if (c->cst && c->cst->splat && c->cst->data) buf_printf(b, " = %g", qir_const_elem(g->m, c, 0, NULL));
}

static fuse_level fuse_word(const qir_attr_val *v) {
  if (!v || (v->kind != QIR_ATTR_WORD && v->kind != QIR_ATTR_STRING) || !v->s) return FUSE_GLOBAL;
  if (!strcmp(v->s, "reg") || !strcmp(v->s, "register") || !strcmp(v->s, "registers")) return FUSE_REG;
  if (!strcmp(v->s, "smem") || !strcmp(v->s, "shared")) return FUSE_SMEM;
  return FUSE_GLOBAL;
}

/* The level at which `op` reads operand `index`: the producer's #fuse when
 * both are in the same kernel group, else global memory. */
static fuse_level fuse_of(const qir_op *op, int index) {
  const qir_value *v = op->operands[index];
  const qir_op *def = v ? v->def : NULL;
  if (!def || def->parent != op->parent || !op->parent->parent_op || op->parent->parent_op->code != QIR_OP_KERNEL)
    return FUSE_GLOBAL;
  qir_attr *a = qir_op_attr(def, "fuse");
  return a ? fuse_word(&a->val) : FUSE_GLOBAL;
}

static const char *node_fill(const qir_op *op) {
  if (op_is_compute(op)) return "#fcd9b0";
  const qir_opinfo *info = qir_opinfo_get(op->code);
  if (info && (info->flags & QIR_OPF_ELEMENTWISE)) return "#eeeeee";
  return "#dcefd9";   /* data movement and the rest */
}

/* Builds an op's box label into g->label. */
static void build_op_label(graph_ctx *g, const qir_op *op) {
  qviz_buf *b = &g->label;
  buf_clear(b);
  if (op->n_results == 1) {
    put_value_name(b, op->results[0]);
    buf_puts(b, " = ");
  }
  buf_puts(b, op_name(op));
  if (op->code == QIR_OP_COMPUTE && op->comp && op->comp->reduce != QIR_REDUCE_NONE)
    buf_printf(b, " (%s)", qir_reduce_name(op->comp->reduce));
  for (int i = 0; i < op->n_results; i++) {
    buf_puts(b, "\n");
    if (op->n_results > 1) {
      put_value_name(b, op->results[i]);
      buf_puts(b, ": ");
    }
    fmt_type(b, &op->results[i]->type);
  }
  const char *name = qir_op_attr_str(op, "name", NULL);
  if (name) {
    buf_puts(b, "\n\"");
    buf_put_clipped(b, name, 40);
    buf_puts(b, "\"");
  }
  for (int i = 0; i < op->n_operands; i++) {
    if (!is_const(op->operands[i])) continue;
    buf_puts(b, "\n");
    put_const_summary(g, b, op->operands[i]);
    g->n_folded++;
  }
  qviz_tile t = tile_of(op);
  if (t.present) {
    buf_puts(b, "\n");
    fmt_tile_summary(b, &t);
  }
}

static void emit_op(graph_ctx *g, qir_op *op, int depth);

static void indent(graph_ctx *g, int depth) {
  for (int i = 0; i < depth; i++) fputs("  ", g->out);
}

/* Ops of one region; a kernel group is an op with a region (a cluster). */
static void emit_region(graph_ctx *g, qir_region *r, int depth) {
  for (qir_op *op = r->first; op; op = op->next) emit_op(g, op, depth);
}

static void emit_region_args(graph_ctx *g, qir_region *r, int depth) {
  for (int i = 0; i < r->n_args; i++) {
    qir_value *v = r->args[i];
    buf_clear(&g->label);
    put_value_name(&g->label, v);
    buf_puts(&g->label, "\n");
    fmt_type(&g->label, &v->type);
    indent(g, depth);
    fprintf(g->out, "a%d [label=", v->id);
    dot_quoted(g->out, g->label.s);
    fputs(", shape=ellipse, style=\"dashed\", fontsize=9];\n", g->out);
  }
}

/* An op with regions: a cluster holding a header box (the op itself, where
 * its operands arrive and its results leave) and one sub-cluster per region. */
static void emit_region_op(graph_ctx *g, qir_op *op, int depth) {
  int id = map_get(&g->op_ids, op);
  int c = g->next_cluster++;
  bool is_kernel = op_is_named(op, "kernel");
  /* a device-resident loop/if (#device level grid or block) is drawn filled */
  qir_device_plan dev;
  if (!qir_device_plan_get(op, &dev, NULL)) dev.level = QIR_LEVEL_HOST;
  buf_clear(&g->label);
  if (is_kernel) {
    buf_puts(&g->label, "kernel @");
    buf_put_clipped(&g->label, kernel_op_name(op), 40);
    qviz_tile t = tile_of(op);
    if (t.present) {
      buf_puts(&g->label, "\n");
      fmt_tile_summary(&g->label, &t);
    }
  } else {
    buf_puts(&g->label, op_name(op));
    if (dev.level == QIR_LEVEL_GRID)
      buf_printf(&g->label, " on the device: one persistent kernel, %lld blocks x %lld threads, %lld stages (grid barriers)",
                 (long long)dev.grid, (long long)dev.threads, (long long)dev.stages);
    else if (dev.level == QIR_LEVEL_BLOCK)
      buf_printf(&g->label, " on the device: one block of %lld threads, %lld stages (block barriers)",
                 (long long)dev.threads, (long long)dev.stages);
    else if (dev.present)
      buf_puts(&g->label, " on the host");
  }
  indent(g, depth);
  fprintf(g->out, "subgraph cluster_%d {\n", c);
  indent(g, depth + 1);
  fputs("label=", g->out);
  dot_quoted(g->out, g->label.s);
  if (is_kernel)
    fprintf(g->out, "; style=\"filled,rounded\"; fillcolor=\"%s\"; color=\"#7f6000\";\n", palette_color(c));
  else if (dev.level != QIR_LEVEL_HOST)
    fprintf(g->out, "; style=\"filled,rounded,bold\"; fillcolor=\"%s\"; color=\"#1f6f3f\";\n",
            dev.level == QIR_LEVEL_GRID ? "#e2f5e7" : "#f1f9e0");
  else
    fputs("; style=\"rounded,dashed\"; color=\"#4a4a8a\";\n", g->out);
  build_op_label(g, op);
  indent(g, depth + 1);
  fprintf(g->out, "o%d [label=", id);
  dot_quoted(g->out, g->label.s);
  fputs(", shape=box3d, style=filled, fillcolor=\"#d9d9f3\"];\n", g->out);
  g->n_drawn++;
  static const char *if_names[] = {"then", "else"};
  for (int i = 0; i < op->n_regions; i++) {
    qir_region *r = op->regions[i];
    bool sub = op->n_regions > 1;
    if (sub) {
      indent(g, depth + 1);
      fprintf(g->out, "subgraph cluster_%d {\n", g->next_cluster++);
      indent(g, depth + 2);
      fputs("label=", g->out);
      if (op->code == QIR_OP_IF && i < 2) dot_quoted(g->out, if_names[i]);
      else fprintf(g->out, "\"region %d\"", i);
      fputs("; style=dotted;\n", g->out);
    }
    emit_region_args(g, r, depth + 1 + sub);
    emit_region(g, r, depth + 1 + sub);
    if (sub) {
      indent(g, depth + 1);
      fputs("}\n", g->out);
    }
  }
  indent(g, depth);
  fputs("}\n", g->out);
}

static void emit_op(graph_ctx *g, qir_op *op, int depth) {
  if (op->code == QIR_OP_CONST) return;
  if (op->n_regions > 0) {
    emit_region_op(g, op, depth);
    return;
  }
  build_op_label(g, op);
  indent(g, depth);
  fprintf(g->out, "o%d [label=", map_get(&g->op_ids, op));
  dot_quoted(g->out, g->label.s);
  if (op->code == QIR_OP_INPUT || op->code == QIR_OP_OUTPUT)
    fputs(", shape=ellipse, style=filled, fillcolor=\"#cfe2f3\"];\n", g->out);
  else if (op->code == QIR_OP_YIELD)
    fputs(", shape=invhouse, style=filled, fillcolor=\"#ffffff\"];\n", g->out);
  else
    fprintf(g->out, ", fillcolor=\"%s\"];\n", node_fill(op));
  g->n_drawn++;
}

/* Every edge at the top level: an edge statement inside a cluster would pull
 * its nodes into that cluster. */
static bool emit_edges_of(qir_op *op, void *vctx) {
  graph_ctx *g = vctx;
  if (op->code == QIR_OP_CONST) return true;
  int id = map_get(&g->op_ids, op);
  for (int i = 0; i < op->n_operands; i++) {
    qir_value *v = op->operands[i];
    if (is_const(v)) continue;
    buf_clear(&g->label);
    if (v->def && v->def->n_results > 1) buf_printf(&g->label, "#%d ", v->result_index);
    fmt_type(&g->label, &v->type);
    fputs("  ", g->out);
    fprint_value_node(g, v);
    fprintf(g->out, " -> o%d [label=", id);
    dot_quoted(g->out, g->label.s);
    switch (fuse_of(op, i)) {
    case FUSE_REG:
      fputs(", color=\"#c0392b\", fontcolor=\"#c0392b\", penwidth=2.5", g->out);
      g->n_fused++;
      break;
    case FUSE_SMEM:
      fputs(", color=\"#2471a3\", fontcolor=\"#2471a3\", penwidth=2, style=dashed", g->out);
      g->n_fused++;
      break;
    case FUSE_GLOBAL: break;
    }
    fputs("];\n", g->out);
  }
  /* Region plumbing: the header feeds the region arguments, yields go back. */
  for (int r = 0; r < op->n_regions; r++) {
    qir_region *reg = op->regions[r];
    for (int a = 0; a < reg->n_args; a++)
      fprintf(g->out, "  o%d -> a%d [style=dotted, arrowhead=none];\n", id, reg->args[a]->id);
    if (reg->last && reg->last->code == QIR_OP_YIELD)
      fprintf(g->out, "  o%d -> o%d [style=dashed, color=\"#4a4a8a\", constraint=false];\n",
              map_get(&g->op_ids, reg->last), id);
  }
  return true;
}

int qviz_graph(FILE *out, qir_module *m, qir_diag *d) {
  (void)d;
  graph_ctx g = {.out = out, .m = m};
  qir_walk(m->body, number_op, &g);
  fputs("digraph ", out);
  dot_quoted(out, m->name ? m->name : "module");
  fputs(" {\n"
        "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, nodesep=0.25, ranksep=0.35];\n"
        "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, "
        "margin=\"0.08,0.03\"];\n"
        "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\", arrowsize=0.6];\n",
        out);
  emit_region(&g, m->body, 1);
  qir_walk(m->body, emit_edges_of, &g);
  buf_clear(&g.label);
  buf_puts(&g.label, "@");
  buf_put_clipped(&g.label, m->name ? m->name : "module", 60);
  buf_printf(&g.label, ": %d ops, %d constant operands folded into their users", g.n_drawn,
             g.n_folded);
  if (g.n_fused)
    buf_puts(&g.label, "\nedges: red = fused in registers, blue dashed = shared memory, grey = global memory");
  fputs("  label=", out);
  dot_quoted(out, g.label.s);
  fputs(";\n  labelloc=t;\n}\n", out);
  buf_free(&g.label);
  map_free(&g.op_ids);
  return 0;
}
