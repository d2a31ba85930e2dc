/* print_sm80.c: the statements of the sm_80 main loop (lower_mma_pipe.c)
 * printed.  CUDA gets inline PTX: cp.async.cg with a zero-fill source size,
 * commit_group / wait_group, ldmatrix and mma.sync.m16n8k16 (m16n8k8 .tf32
 * for f32 operands, whose fragments KE_TF32 rounds: cvt.rna.tf32.f32); and the
 * epilogue's 16-byte stores (uint4 / float4).  C gets calls of
 * the emulation in runtime/ (cp_async.h, ldmatrix.h, mma_sync.h: one file
 * per instruction family, in every C program's prelude), which reproduce the
 * PTX ISA's lane layouts and the copies' completion rules, so a wrong lane
 * index or a missing wait gives wrong numbers in C too. */
#include <inttypes.h>

#include "kast.h"

static const char runtime_cp_async[] =
#include "runtime/cp_async.inc"
    ;
static const char runtime_ldmatrix[] =
#include "runtime/ldmatrix.inc"
    ;
static const char runtime_mma_sync[] =
#include "runtime/mma_sync.inc"
    ;

void kprint_sm80_runtime(FILE *o) {
  fputs("\n/* ---- sm_80 instructions, emulated (qcodegen/runtime) */\n", o);
  fputs(runtime_cp_async, o);
  fputs(runtime_ldmatrix, o);
  fputs(runtime_mma_sync, o);
}

static void indent_to(FILE *o, int n) { fprintf(o, "%*s", 2 * n, ""); }

/* var[index + j]: one register of a fragment (GPU: a local array the unrolled loops index with constants) */
static void print_reg(FILE *o, const kvar *v, const kexpr *index, int j, const kkernel *k, const kprint_style *st) {
  fprintf(o, "%s[", v->name);
  kprint_expr(o, index, k, st);
  fprintf(o, " + %d]", j);
}

/* The shared address of element `index` of `mem`, for PTX's shared state space. */
static void print_shared_address(FILE *o, const kvar *mem, const kexpr *index, const kkernel *k, const kprint_style *st) {
  fprintf(o, "const unsigned q_s = (unsigned)__cvta_generic_to_shared(&%s[", mem->name);
  kprint_expr(o, index, k, st);
  fputs("]);", o);
}

static void print_cp_async_gpu(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st) {
  const char *P = k->params[s->param].name;
  fputs("{ ", o);
  print_shared_address(o, s->var, s->index, k, st);
  /* out of range: source size 0 fills zeros and reads nothing (the tensor's start stands in);
   * .cg (L2 only) exists for 16 bytes, smaller copies go through L1 (.ca) */
  int bytes = (int)s->step;
  fprintf(o, " asm volatile(\"cp.async.%s.shared.global [%%0], [%%1], %d, %%2;\\n\" :: \"r\"(q_s), \"l\"(", bytes == 16 ? "cg" : "ca", bytes);
  if (s->cond) {
    fputs("(", o);
    kprint_expr(o, s->cond, k, st);
    fprintf(o, ") ? (const void *)&%s[", P);
    kprint_expr(o, s->lo, k, st);
    fprintf(o, "] : (const void *)%s), \"r\"((", P);
    kprint_expr(o, s->cond, k, st);
    fprintf(o, ") ? %d : 0) : \"memory\"); }\n", bytes);
  } else {
    fprintf(o, "(const void *)&%s[", P);
    kprint_expr(o, s->lo, k, st);
    fprintf(o, "]), \"r\"(%d) : \"memory\"); }\n", bytes);
  }
}

/* C.  Checked: the source is read at issue, each element checked; the
 * destination cells are pending in the checker's queue (q_cpc_issue) until the
 * wait that retires the group writes them.  An index out of bounds copies to
 * element 0 instead, so that the run can go on. */
static void print_cp_async_c(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int ind) {
  const char *P = k->params[s->param].name;
  int bytes = (int)s->step, elems = bytes / (s->var->raw ? 2 : 4);   /* raw 16-bit tiles, else 4-byte cells */
  if (st->chk) {
    int rsite = cg_check_site(st->chk, k, "read of `%s` (cp.async)", P);
    if (s->cond) {
      fputs("if (", o);
      kprint_expr(o, s->cond, k, st);
      fputs(") ", o);
    }
    fprintf(o, "for (int q_e = 0; q_e < %d; q_e++) (void)q_gr(&q_b, &q_g_%s, %" PRId64 "L, (long)(", elems, P, k->params[s->param].numel);
    kprint_expr(o, s->lo, k, st);
    fprintf(o, ") + q_e, tid, %d);\n", rsite);
    indent_to(o, ind);
  }
  fprintf(o, "q_cp_async_n(&q_cpa, tid, %d, &%s[", bytes, s->var->name);
  if (st->chk) {
    int wsite = cg_check_shared_site(st->chk, k, s->var->name, "cp.async into shared `%s`", s->var->name);
    fprintf(o, "q_cpc_issue(&q_b, &q_cpc, &q_cpa, q_sh_%s, %" PRId64 "L, (long)(", s->var->name, s->var->size);
    kprint_expr(o, s->index, k, st);
    fprintf(o, "), %d, tid, %d)", elems, wsite);
  } else {
    kprint_expr(o, s->index, k, st);
  }
  fputs("], ", o);
  if (s->cond) {
    fputs("(", o);
    kprint_expr(o, s->cond, k, st);
    fputs(") ? ", o);
  }
  fprintf(o, "(const void *)&%s[", P);
  kprint_expr(o, s->lo, k, st);
  fprintf(o, "]%s);\n", s->cond ? " : NULL" : "");
}

static void print_ldmatrix_gpu(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st) {
  fputs("{ ", o);
  print_shared_address(o, s->mem, s->lo, k, st);
  fprintf(o, " asm volatile(\"ldmatrix.sync.aligned.m8n8.x%d%s.shared.b16 {", (int)s->step, s->trans ? ".trans" : "");
  for (int j = 0; j < s->step; j++) fprintf(o, "%s%%%d", j ? ", " : "", j);
  fprintf(o, "}, [%%%d];\\n\" : ", (int)s->step);
  for (int j = 0; j < s->step; j++) {
    fputs(j ? ", \"=r\"(" : "\"=r\"(", o);
    print_reg(o, s->var, s->index, j, k, st);
    fputs(")", o);
  }
  fputs(" : \"r\"(q_s) : \"memory\"); }\n", o);
}

/* mma.sync m16n8k16 f16/bf16, or m16n8k8 .tf32 (dtype QIR_F32): the same registers (A 4, B 2, C/D 4). */
static void print_mma16816_gpu(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st) {
  const char *t = s->dtype == QIR_F32 ? "tf32" : s->dtype == QIR_BF16 ? "bf16" : "f16";
  fprintf(o, "asm(\"mma.sync.aligned.m16n8k%d.row.col.f32.%s.%s.f32 {%%0, %%1, %%2, %%3}, {%%4, %%5, %%6, %%7}, {%%8, %%9}, "
             "{%%0, %%1, %%2, %%3};\\n\" : ", s->dtype == QIR_F32 ? 8 : 16, t, t);
  for (int j = 0; j < 4; j++) {
    fputs(j ? ", \"+f\"(" : "\"+f\"(", o);
    print_reg(o, s->var, s->index, j, k, st);
    fputs(")", o);
  }
  fputs(" : ", o);
  for (int j = 0; j < 6; j++) {
    fputs(j ? ", \"r\"(" : "\"r\"(", o);
    print_reg(o, j < 4 ? s->fa : s->fb, j < 4 ? s->ia : s->ib, j < 4 ? j : j - 4, k, st);
    fputs(")", o);
  }
  fputs(");\n", o);
}

/* 16 bytes of a tensor from a local array: one vector store on a GPU. */
static void print_vstore(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int ind) {
  const kparam *p = &k->params[s->param];
  const char *v = s->var->name, *cvt = p->dtype == QIR_F16 ? "q_f2h" : p->dtype == QIR_BF16 ? "q_f2bf" : "";
  if (st->c_threads) {
    int site = st->chk ? cg_check_site(st->chk, k, "write of `%s` (16-byte store)", p->name) : -1;
    fprintf(o, "for (int q_e = 0; q_e < %d; q_e++) %s[", (int)s->step, p->name);
    if (st->chk) fprintf(o, "q_gw(&q_b, &q_g_%s, %" PRId64 "L, (long)(", p->name, p->numel);
    else fputs("(", o);
    kprint_expr(o, s->index, k, st);
    if (st->chk) fprintf(o, ") + q_e, tid, %d)", site);
    else fputs(") + q_e", o);
    fprintf(o, "] = %s(%s[q_e]);\n", cvt, v);
    return;
  }
  if (p->dtype == QIR_F32) {
    fprintf(o, "*(float4 *)&%s[", p->name);
    kprint_expr(o, s->index, k, st);
    fprintf(o, "] = make_float4(%s[0], %s[1], %s[2], %s[3]);\n", v, v, v, v);
    return;
  }
  fputs("{\n", o);
  fprintf(o, "%*suint4 q_v;\n", 2 * ind + 2, "");
  const char *lane[4] = {"x", "y", "z", "w"};
  for (int i = 0; i < 4; i++)
    fprintf(o, "%*sq_v.%s = (uint32_t)%s(%s[%d]) | (uint32_t)%s(%s[%d]) << 16;\n", 2 * ind + 2, "", lane[i], cvt, v, 2 * i, cvt, v, 2 * i + 1);
  fprintf(o, "%*s*(uint4 *)&%s[", 2 * ind + 2, "", p->name);
  kprint_expr(o, s->index, k, st);
  fprintf(o, "] = q_v;\n%*s}\n", 2 * ind, "");
}

void kprint_sm80_stmt(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int ind) {
  bool c = st->c_threads;
  indent_to(o, ind);
  switch (s->kind) {
  case KS_CP_ASYNC:
    if (c) print_cp_async_c(o, s, k, st, ind);
    else print_cp_async_gpu(o, s, k, st);
    return;
  case KS_CP_COMMIT:
    fputs(c ? "q_cp_commit(&q_cpa, tid);\n" : "asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");\n", o);
    return;
  case KS_CP_WAIT:
    if (c && st->chk) {     /* the checker lands its view of the group first (both use q_cpa's commit count) */
      fprintf(o, "q_cpc_wait(&q_b, &q_cpc, &q_cpa, tid, %d);\n", (int)s->step);
      indent_to(o, ind);
    }
    if (c) fprintf(o, "q_cp_wait(&q_cpa, tid, %d);\n", (int)s->step);
    else fprintf(o, "asm volatile(\"cp.async.wait_group %d;\\n\" ::: \"memory\");\n", (int)s->step);
    return;
  case KS_VSTORE:
    print_vstore(o, s, k, st, ind);
    return;
  case KS_LDMATRIX:
    print_ldmatrix_gpu(o, s, k, st);
    return;
  case KS_MMA16816:
    print_mma16816_gpu(o, s, k, st);
    return;
  default:
    return;
  }
}

/* C: a warp-collective statement, once per warp of the block.  ldmatrix first
 * evaluates every lane's row address as that lane (its own tid). */
void kprint_sm80_collective_c(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int ind) {
  int W = k->warp, T = k->threads;
  indent_to(o, ind);
  fprintf(o, "for (int q_w = 0; q_w < %d; q_w++) {\n", s->active_warps ? s->active_warps : T / W);
  if (s->kind == KS_LDMATRIX) {
    indent_to(o, ind + 1);
    fprintf(o, "long q_row[%d];\n", W);
    indent_to(o, ind + 1);
    fprintf(o, "for (int q_l = 0; q_l < %d; q_l++) {\n", W);
    indent_to(o, ind + 2);
    fprintf(o, "const int tid = q_w * %d + q_l;\n", W);
    kprint_lets(o, k, s, st, ind + 2);
    indent_to(o, ind + 2);
    fputs("q_row[q_l] = (long)(", o);
    kprint_expr(o, s->lo, k, st);
    fputs(");\n", o);
    indent_to(o, ind + 1);
    fputs("}\n", o);
    if (st->chk) {
      indent_to(o, ind + 1);
      fprintf(o, "q_ldmatrix_check(&q_b, q_sh_%s, %" PRId64 "L, q_row, %d, q_w, %d);\n", s->mem->name, s->mem->size, (int)s->step,
              cg_check_site(st->chk, k, "ldmatrix from shared `%s`", s->mem->name));
    }
    indent_to(o, ind + 1);
    fprintf(o, "q_ldmatrix(&%s[", s->var->name);
    kprint_expr(o, s->index, k, st);
    fprintf(o, "][q_w * %d], %d, %d, %d, %s, q_row);\n", W, T, (int)s->step, s->trans, s->mem->name);
  } else {
    indent_to(o, ind + 1);
    fprintf(o, "%s(&%s[", s->dtype == QIR_F32 ? "q_mma1688_tf32" : "q_mma16816", s->var->name);
    kprint_expr(o, s->index, k, st);
    fprintf(o, "][q_w * %d], &%s[", W, s->fa->name);
    kprint_expr(o, s->ia, k, st);
    fprintf(o, "][q_w * %d], &%s[", W, s->fb->name);
    kprint_expr(o, s->ib, k, st);
    if (s->dtype == QIR_F32) fprintf(o, "][q_w * %d], %d);\n", W, T);
    else fprintf(o, "][q_w * %d], %d, %d);\n", W, T, s->dtype == QIR_BF16);
  }
  indent_to(o, ind);
  fputs("}\n", o);
}
