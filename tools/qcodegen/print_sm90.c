/* print_sm90.c: the Hopper statements of lower_wgmma.c printed.  CUDA gets
 * inline PTX (sm_90a): mbarrier.init / arrive / arrive.expect_tx /
 * try_wait.parity, cp.async.bulk.tensor from a __grid_constant__ tensor map,
 * fence.proxy.async, and wgmma.mma_async m64nNk16 with shared-memory
 * descriptors (or A in four registers: the RS form), fence, commit_group
 * and wait_group.  C gets calls of the
 * emulation in runtime/ (mbarrier.h, tma.h, wgmma.h), which decodes the
 * descriptors and swizzles by the PTX ISA's rules, so a wrong descriptor, a
 * wrong swizzle or a missing wait gives wrong numbers in C too. */
#include <inttypes.h>

#include "kast.h"

static const char runtime_mbarrier[] =
#include "runtime/mbarrier.inc"
    ;
static const char runtime_tma[] =
#include "runtime/tma.inc"
    ;
static const char runtime_wgmma[] =
#include "runtime/wgmma.inc"
    ;

void kprint_sm90_runtime(FILE *o) {
  fputs("\n/* ---- sm_90 instructions, emulated (qcodegen/runtime) */\n", o);
  fputs(runtime_mbarrier, o);
  fputs(runtime_tma, o);
  fputs(runtime_wgmma, o);
}

static void indent_to(FILE *o, int n) { fprintf(o, "%*s", 2 * n, ""); }

static int swizzle_mode(int bytes) { return bytes == 128 ? 1 : bytes == 64 ? 2 : bytes == 32 ? 3 : 0; }

/* The emulated shared address of mem[index] (C: its offset in the block's carved buffer). */
static void print_c_addr(FILE *o, const kvar *mem, const kexpr *index, const kkernel *k, const kprint_style *st) {
  fprintf(o, "(unsigned)(%" PRId64 "L + (long)(", kvar_dynamic_offset(k, mem));
  kprint_expr(o, index, k, st);
  fprintf(o, ") * %d)", (int)(kvar_bytes(mem) / (mem->size ? mem->size : 1)));
}

static void print_gpu_addr(FILE *o, const char *name, const kvar *mem, const kexpr *index, const kkernel *k, const kprint_style *st) {
  fprintf(o, "const unsigned %s = (unsigned)__cvta_generic_to_shared(&%s[", name, mem->name);
  kprint_expr(o, index, k, st);
  fputs("]);", o);
}

static void print_tma_gpu(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st) {
  const ktmap *m = &k->tmaps[s->step];
  fputs("{ ", o);
  print_gpu_addr(o, "q_d", s->var, s->index, k, st);
  fputc(' ', o);
  print_gpu_addr(o, "q_m", s->mem, s->ia, k, st);
  fprintf(o, " asm volatile(\"cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes [%%0], [%%1, {", m->rank);
  for (int d = 0; d < m->rank; d++) fprintf(o, "%s%%%d", d ? ", " : "", 3 + d);
  fprintf(o, "}], [%%2];\" :: \"r\"(q_d), \"l\"((uint64_t)&q_tm%d), \"r\"(q_m)", (int)s->step);
  for (int d = 0; d < m->rank; d++) {
    fputs(", \"r\"((int)(", o);
    kprint_expr(o, s->coord[d], k, st);
    fputs("))", o);
  }
  fputs(" : \"memory\"); }\n", o);
}

static void print_tma_c(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st) {
  const ktmap *m = &k->tmaps[s->step];
  if (st->chk) {   /* the checker: the box's cells belong to the barrier's current phase */
    int64_t elems = 1;
    for (int d = 0; d < m->rank; d++) elems *= (m->box[d] + (m->estride[d] > 0 ? m->estride[d] : 1) - 1) / (m->estride[d] > 0 ? m->estride[d] : 1);
    fputs("q_tma_check(&q_b, &q_mbs, (int)(", o);
    kprint_expr(o, s->ia, k, st);
    fprintf(o, "), q_sh_%s, %" PRId64 "L, (long)(", s->var->name, s->var->size);
    kprint_expr(o, s->index, k, st);
    fprintf(o, "), %" PRId64 "L, tid, %d); ", elems, cg_check_shared_site(st->chk, k, s->var->name, "tensor copy into shared `%s`", s->var->name));
  }
  fputs("q_tma_load(&q_mbs, (int)(", o);
  kprint_expr(o, s->ia, k, st);
  fprintf(o, "), &%s[", s->var->name);
  kprint_expr(o, s->index, k, st);
  fputs("], ", o);
  print_c_addr(o, s->var, s->index, k, st);
  fprintf(o, ", %s, &q_tm%d, (const long[]){", k->params[m->param].name, (int)s->step);
  for (int d = 0; d < m->rank; d++) {
    fputs(d ? ", (long)(" : "(long)(", o);
    kprint_expr(o, s->coord[d], k, st);
    fputs(")", o);
  }
  fputs("});\n", o);
}

/* The 64-bit descriptor of an operand tile starting at mem[index]. */
static void print_desc(FILE *o, const kwgmma_desc *d, const kvar *mem, const kexpr *index, const kkernel *k, const kprint_style *st) {
  fputs("q_wgmma_desc(", o);
  if (st->c_threads) print_c_addr(o, mem, index, k, st);
  else {
    fprintf(o, "(unsigned)__cvta_generic_to_shared(&%s[", mem->name);
    kprint_expr(o, index, k, st);
    fputs("])", o);
  }
  fprintf(o, ", %" PRId64 "u, %" PRId64 "u, %du)", d->lbo, d->sbo, swizzle_mode(d->swizzle));
}

static void print_wgmma_gpu(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st) {
  const kwgmma *w = s->wg;
  int regs = w->n / 2, a0 = regs, b_at = w->a_regs ? regs + 4 : regs + 1;
  const char *t = w->dtype == QIR_BF16 ? "bf16" : "f16";
  fputs("{ ", o);
  if (!w->a_regs) {
    fputs("const uint64_t q_da = ", o);
    print_desc(o, &w->a, s->mem, s->ia, k, st);
    fputs(", ", o);
  } else {
    fputs("const uint64_t ", o);
  }
  fputs("q_db = ", o);
  print_desc(o, &w->b, s->fb, s->ib, k, st);
  fprintf(o, "; asm volatile(\"{\\n.reg .pred q_p;\\nsetp.ne.b32 q_p, %%%d, 0;\\nwgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", b_at + 1, w->n, t, t);
  for (int i = 0; i < regs; i++) fprintf(o, "%s%%%d", i ? ", " : "", i);
  if (w->a_regs)   /* the RS form: no transpose of A (it is K-major in the fragment) */
    fprintf(o, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, q_p, 1, 1, %d;\\n}\\n\" : ", a0, a0 + 1, a0 + 2, a0 + 3, b_at, w->b.mn_major);
  else
    fprintf(o, "}, %%%d, %%%d, q_p, 1, 1, %d, %d;\\n}\\n\" : ", a0, b_at, w->a.mn_major, w->b.mn_major);
  for (int i = 0; i < regs; i++) {
    fprintf(o, "%s\"+f\"(%s[", i ? ", " : "", s->var->name);
    kprint_expr(o, s->index, k, st);
    fprintf(o, " + %d])", i);
  }
  fputs(" : ", o);
  if (w->a_regs)
    for (int r = 0; r < 4; r++) {
      fprintf(o, "\"r\"(%s[", s->mem->name);
      kprint_expr(o, s->ia, k, st);
      fprintf(o, " + %d]), ", r);
    }
  else
    fputs("\"l\"(q_da), ", o);
  fputs("\"l\"(q_db), \"r\"(1) : \"memory\"); }\n", o);
}

void kprint_sm90_stmt(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int ind) {
  bool c = st->c_threads;
  indent_to(o, ind);
  if (ks_is_wgmma(s)) {   /* GPU: the warpgroups that run it (C: kprint_sm90_collective_c) */
    /* the warpgroup index through a shuffle: ptxas then knows it is warp-uniform
     * (else it serialises the wgmma of a branch it takes as divergent: C7518) */
    bool all = s->wg->wg_first == 0 && s->wg->wg_count * 128 == k->threads;   /* every warpgroup: no branch (ptxas would
                                                                                * not see a wait inside one retire the group) */
    if (!s->wg->in_role && !all)
      fprintf(o, "if ((unsigned)(__shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0) - %d) < %du) ", s->wg->wg_first, s->wg->wg_count);
    switch (s->kind) {
    case KS_WGMMA: print_wgmma_gpu(o, s, k, st); return;
    case KS_WGMMA_FENCE:
      /* registers it names (accumulators, an A fragment) written just before: no write may move below
       * the fence into the wgmma's stage (else ptxas serialises the wgmma: C7514) */
      for (int r = 0; r < 2; r++) {
        const kvar *v = r ? s->mem : s->var;
        if (!v) continue;
        fprintf(o, "{\n");
        indent_to(o, ind + 1);
        fprintf(o, "for (int q_i = 0; q_i < %" PRId64 "; q_i++) asm volatile(\"\" : \"+%s\"(%s[q_i]) :: \"memory\");\n", v->size,
                v->type == KT_F32 ? "f" : "r", v->name);
        indent_to(o, ind);
        fputs("} ", o);
      }
      fputs("asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n", o);
      return;
    case KS_WGMMA_COMMIT: fputs("asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");\n", o); return;
    default:
      fprintf(o, "asm volatile(\"wgmma.wait_group.sync.aligned %d;\" ::: \"memory\");\n", (int)s->step);
      if (s->var) {   /* the accumulators are read next: no read may move above the wait (CUTLASS's operand fence) */
        indent_to(o, ind);
        fputs("#pragma unroll\n", o);
        indent_to(o, ind);
        fprintf(o, "for (int q_i = 0; q_i < %" PRId64 "; q_i++) asm volatile(\"\" : \"+f\"(%s[q_i]) :: \"memory\");\n", s->var->size,
                s->var->name);
      }
      return;
    }
  }
  switch (s->kind) {
  case KS_MBAR_INIT: case KS_MBAR_ARRIVE: case KS_MBAR_WAIT:
    if (c) {
      fprintf(o, "q_mbar_%s(&q_mbs, (int)(", s->kind == KS_MBAR_INIT ? "init" : s->kind == KS_MBAR_ARRIVE ? "arrive" : "wait");
      kprint_expr(o, s->index, k, st);
      if (s->kind == KS_MBAR_WAIT) {
        fputs("), (int)(", o);
        kprint_expr(o, s->value, k, st);
        fputs("), tid);\n", o);
      } else {
        fprintf(o, "), %" PRId64 ");\n", s->step);
      }
      return;
    }
    fputs("{ ", o);
    print_gpu_addr(o, "q_m", s->var, s->index, k, st);
    if (s->kind == KS_MBAR_INIT)
      fprintf(o, " asm volatile(\"mbarrier.init.shared::cta.b64 [%%0], %%1;\" :: \"r\"(q_m), \"r\"(%d) : \"memory\"); }\n", (int)s->step);
    else if (s->kind == KS_MBAR_ARRIVE && s->step)
      fprintf(o, " asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%%0], %%1;\" :: \"r\"(q_m), \"r\"(%d) : \"memory\"); }\n",
              (int)s->step);
    else if (s->kind == KS_MBAR_ARRIVE)
      fputs(" asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(q_m) : \"memory\"); }\n", o);
    else {
      fputs(" const unsigned q_par = (unsigned)(", o);
      kprint_expr(o, s->value, k, st);
      fputs("); asm volatile(\"{\\n.reg .pred q_p;\\nQ_WAIT:\\nmbarrier.try_wait.parity.shared::cta.b64 q_p, [%0], %1;\\n@!q_p bra Q_WAIT;\\n}\\n\" :: \"r\"(q_m), \"r\"(q_par) : \"memory\"); }\n", o);
    }
    return;
  case KS_MBAR_FENCE_INIT:
    fputs(c ? "/* fence.mbarrier_init */\n" : "asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n", o);
    return;
  case KS_FENCE_PROXY_ASYNC:
    if (c && st->chk) {   /* the checker: this thread's ordinary stores are visible to the async proxy */
      fputs("/* fence.proxy.async.shared::cta */", o);
      for (int i = 0; i < k->n_vars; i++)
        if (k->vars[i]->space == KV_SHARED) fprintf(o, " q_proxy_fence(q_sh_%s, %" PRId64 "L, tid);", k->vars[i]->name, k->vars[i]->size);
      fputc('\n', o);
      return;
    }
    fputs(c ? "/* fence.proxy.async.shared::cta */\n" : "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n", o);
    return;
  case KS_SETMAXNREG:
    if (c) fprintf(o, "/* setmaxnreg.%s %d */\n", s->value ? "inc" : "dec", (int)s->step);
    else fprintf(o, "asm volatile(\"setmaxnreg.%s.sync.aligned.u32 %d;\" ::: \"memory\");\n", s->value ? "inc" : "dec", (int)s->step);
    return;
  case KS_TMA_LOAD:
    if (c) print_tma_c(o, s, k, st);
    else print_tma_gpu(o, s, k, st);
    return;
  default:
    return;
  }
}

/* C: a warpgroup collective, once per warpgroup it names; the operands' tile
 * offsets are evaluated as the warpgroup's first thread. */
void kprint_sm90_collective_c(FILE *o, const kstmt *s, const kkernel *k, const kprint_style *st, int ind) {
  const kwgmma *w = s->wg;
  indent_to(o, ind);
  fprintf(o, "for (int q_g = %d; q_g < %d; q_g++) {\n", w->wg_first, w->wg_first + w->wg_count);
  indent_to(o, ind + 1);
  switch (s->kind) {
  case KS_WGMMA:
    fputs("const int tid = q_g * 128; (void)tid;\n", o);
    kprint_lets(o, k, s, st, ind + 1);
    indent_to(o, ind + 1);
    fprintf(o, "q_wgmma_op q_op = {.acc = &%s[", s->var->name);
    kprint_expr(o, s->index, k, st);
    fprintf(o, "][q_g * 128], .stride = %d, .n = %d, .bf16 = %d, ", k->threads, w->n, w->dtype == QIR_BF16);
    if (w->a_regs) {   /* A: the warpgroup's registers, read when the wgmma runs */
      fprintf(o, ".ra = &%s[", s->mem->name);
      kprint_expr(o, s->ia, k, st);
      fputs("][q_g * 128], ", o);
    } else {
      fprintf(o, ".a = %s, .a_base = %" PRId64 "u, .a_elems = %" PRId64 ", .da = ", s->mem->name, kvar_dynamic_offset(k, s->mem),
              s->mem->size);
      print_desc(o, &w->a, s->mem, s->ia, k, st);
      fprintf(o, ", .ta = %d, ", w->a.mn_major);
    }
    fprintf(o, ".b = %s, .b_base = %" PRId64 "u, .b_elems = %" PRId64 ", .db = ", s->fb->name, kvar_dynamic_offset(k, s->fb), s->fb->size);
    print_desc(o, &w->b, s->fb, s->ib, k, st);
    fprintf(o, ", .tb = %d};\n", w->b.mn_major);
    if (st->chk) {   /* the checker: the cells it reads, until the wait that retires it */
      indent_to(o, ind + 1);
      const char *mbs = k->n_mbars ? "&q_mbs" : "NULL";
      if (w->a_regs) fprintf(o, "q_wgmma_check(&q_b, %s, &q_op, q_g, NULL, q_sh_%s, 0, %d);\n", mbs, s->fb->name,
                             cg_check_shared_site(st->chk, k, s->fb->name, "wgmma reading B from shared `%s`", s->fb->name));
      else
        fprintf(o, "q_wgmma_check(&q_b, %s, &q_op, q_g, q_sh_%s, q_sh_%s, %d, %d);\n", mbs, s->mem->name, s->fb->name,
                cg_check_shared_site(st->chk, k, s->mem->name, "wgmma reading A from shared `%s`", s->mem->name),
                cg_check_shared_site(st->chk, k, s->fb->name, "wgmma reading B from shared `%s`", s->fb->name));
    }
    indent_to(o, ind + 1);
    fputs("q_wgmma_issue(&q_wgs, q_g, q_op);\n", o);
    break;
  case KS_WGMMA_FENCE: fputs("(void)q_g;   /* wgmma.fence */\n", o); break;
  case KS_WGMMA_COMMIT: fputs("q_wgmma_commit(&q_wgs, q_g);\n", o); break;
  default:
    if (st->chk) fprintf(o, "q_wgmma_check_wait(&q_b, %s, &q_wgs, q_g, %d);\n", k->n_mbars ? "&q_mbs" : "NULL", (int)s->step);
    if (st->chk) indent_to(o, ind + 1);
    fprintf(o, "q_wgmma_wait(&q_wgs, q_g, %d);\n", (int)s->step);
    break;
  }
  indent_to(o, ind);
  fputs("}\n", o);
}

static const char *tmap_dtype(qir_dtype dt) {
  switch (dt) {
  case QIR_BF16: return "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16";
  case QIR_F32: return "CU_TENSOR_MAP_DATA_TYPE_FLOAT32";
  default: return "CU_TENSOR_MAP_DATA_TYPE_FLOAT16";
  }
}

void kprint_sm90_tmap_params(FILE *o, const kkernel *k) {
  for (int i = 0; i < k->n_tmaps; i++) fprintf(o, ", const __grid_constant__ CUtensorMap q_tm%d", i);
}

/* Before a launch: each tensor map, encoded again only when its tensor moved
 * (the memory plan keeps it in place, so once per program). */
void kprint_sm90_tmap_encode(FILE *o, const kkernel *k, const char *const *argv, const char *indent) {
  for (int i = 0; i < k->n_tmaps; i++) {
    const ktmap *m = &k->tmaps[i];
    fprintf(o, "%sstatic CUtensorMap q_tm%d;\n%sstatic const void *q_tm%d_at = NULL;\n", indent, i, indent, i);
    fprintf(o, "%sif (q_tm%d_at != (const void *)(%s)) {\n", indent, i, argv[m->param]);
    fprintf(o, "%s  const cuuint64_t q_dims[] = {", indent);
    for (int d = 0; d < m->rank; d++) fprintf(o, "%s%" PRId64 "u", d ? ", " : "", m->dims[d]);
    fprintf(o, "}, q_strides[] = {");
    for (int d = 1; d < m->rank; d++) fprintf(o, "%s%" PRId64 "u", d > 1 ? ", " : "", m->strides[d]);
    if (m->rank == 1) fputs("0", o);
    fprintf(o, "};\n%s  const cuuint32_t q_box[] = {", indent);
    for (int d = 0; d < m->rank; d++) fprintf(o, "%s%" PRId64 "u", d ? ", " : "", m->box[d]);
    fprintf(o, "}, q_estrides[] = {");
    for (int d = 0; d < m->rank; d++) fprintf(o, "%s%" PRId64 "u", d ? ", " : "", m->estride[d] > 0 ? m->estride[d] : 1);
    fprintf(o, "};\n%s  if (q_tmap_encode(&q_tm%d, %s, %d, (void *)(%s), q_dims, q_strides, q_box, q_estrides, %s)) return 1;\n", indent, i,
            tmap_dtype(k->params[m->param].dtype), m->rank, argv[m->param],
            m->swizzle == 128 ? "CU_TENSOR_MAP_SWIZZLE_128B" : m->swizzle == 64 ? "CU_TENSOR_MAP_SWIZZLE_64B"
            : m->swizzle == 32 ? "CU_TENSOR_MAP_SWIZZLE_32B" : "CU_TENSOR_MAP_SWIZZLE_NONE");
    fprintf(o, "%s  q_tm%d_at = (const void *)(%s);\n%s}\n", indent, i, argv[m->param], indent);
  }
}
