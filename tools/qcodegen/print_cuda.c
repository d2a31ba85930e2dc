/* print_cuda.c: the CUDA printer (and the GPU kernel text HIP shares: HIP's
 * printer, print_hip.c, differs in runtime calls and wavefront width). */
#include <inttypes.h>

#include "kast.h"

#define CUDA_STATIC_SMEM (48 * 1024)

static void prelude(FILE *o) {
  fputs("#include <cuda_runtime.h>\n#include <cooperative_groups.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <mma.h>\n#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
        "#include <string.h>\n#include <time.h>\n\n"
        "#define QDEV __device__ __forceinline__\n"
        "#define QAPI extern \"C\"\n",
        o);
  kprint_helpers(o);
  fputs("\n/* runtime: every call's status is checked */\n"
        "#define QCHECK(call) do { cudaError_t q_rc_ = (call); if (q_rc_ != cudaSuccess) { fprintf(stderr, \"%s:%d: %s: %s\\n\", __FILE__, __LINE__, #call, cudaGetErrorString(q_rc_)); return 1; } } while (0)\n"
        "#define QCHECK_LAUNCH() QCHECK(cudaGetLastError())\n"
        "/* a cooperative launch the device cannot hold at once sets `fallback` (the caller runs the\n"
        " * kernels one by one); any other failure fails the run */\n"
        "#define QCOOP(call, too_large, fallback) do { cudaError_t q_rc_ = (call); if (q_rc_ == (too_large)) { (void)cudaGetLastError(); (fallback) = 1; } else if (q_rc_ != cudaSuccess) { fprintf(stderr, \"%s:%d: %s: %s\\n\", __FILE__, __LINE__, #call, cudaGetErrorString(q_rc_)); return 1; } } while (0)\n"
        "#define q_alloc(p, n) cudaMalloc((p), (n) ? (n) : 1)\n"
        "#define q_free(p) (void)cudaFree(p)\n"
        "#define q_h2d(d, s, n) cudaMemcpy((d), (s), (n), cudaMemcpyHostToDevice)\n"
        "#define q_d2h(d, s, n) cudaMemcpy((d), (s), (n), cudaMemcpyDeviceToHost)\n"
        "#define q_h2d_2d(d, dp, s, sp, w, h) cudaMemcpy2D((d), (dp), (s), (sp), (w), (h), cudaMemcpyHostToDevice)\n"
        "#define q_d2h_2d(d, dp, s, sp, w, h) cudaMemcpy2D((d), (dp), (s), (sp), (w), (h), cudaMemcpyDeviceToHost)\n"
        "#define q_d2d(d, s, n) cudaMemcpy((d), (s), (n), cudaMemcpyDeviceToDevice)\n"
        "#define q_d2d_2d(d, dp, s, sp, w, h) cudaMemcpy2D((d), (dp), (s), (sp), (w), (h), cudaMemcpyDeviceToDevice)\n"
        "#define q_d2d_async(d, s, n) cudaMemcpyAsync((d), (s), (n), cudaMemcpyDeviceToDevice, q_stream)\n"
        "typedef cudaStream_t q_stream_t;\n"
        "/* every launch and asynchronous copy goes to q_stream: this default one in qir_init and\n"
        " * qir_run, the caller's in qir_run_stream (its parameter) */\n"
        "static const q_stream_t q_stream = 0;\n"
        "#define q_sync() cudaDeviceSynchronize()\n",
        o);
  /* TMA tensor maps (sm_90 kernels): cuTensorMapEncodeTiled from the driver, found at run time (no -lcuda) */
  fputs("\n#include <cuda.h>\n#include <cudaTypedefs.h>\n"
        "__attribute__((unused)) static int q_tmap_encode(CUtensorMap *m, CUtensorMapDataType dt, int rank, void *base, const cuuint64_t *dims,\n"
        "                         const cuuint64_t *strides, const cuuint32_t *box, const cuuint32_t *estrides,\n"
        "                         CUtensorMapSwizzle swizzle) {\n"
        "  static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;\n"
        "  if (!encode) {\n"
        "    void *fn = NULL;\n"
        "    cudaDriverEntryPointQueryResult found;\n"
        "#if CUDART_VERSION >= 12050   /* the versioned lookup; the plain one is deprecated in CUDA 13 */\n"
        "    cudaError_t looked = cudaGetDriverEntryPointByVersion(\"cuTensorMapEncodeTiled\", &fn, 12000, cudaEnableDefault, &found);\n"
        "#else\n"
        "    cudaError_t looked = cudaGetDriverEntryPoint(\"cuTensorMapEncodeTiled\", &fn, cudaEnableDefault, &found);\n"
        "#endif\n"
        "    if (looked != cudaSuccess ||\n"
        "        found != cudaDriverEntryPointSuccess || !fn) {\n"
        "      fprintf(stderr, \"qir: the driver has no cuTensorMapEncodeTiled (a Hopper kernel needs it)\\n\");\n"
        "      return 1;\n"
        "    }\n"
        "    encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;\n"
        "  }\n"
        "  CUresult rc = encode(m, dt, (cuuint32_t)rank, base, dims, strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,\n"
        "                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);\n"
        "  if (rc != CUDA_SUCCESS) {\n"
        "    fprintf(stderr, \"qir: cuTensorMapEncodeTiled failed (%d): a tensor not 16-byte aligned?\\n\", (int)rc);\n"
        "    return 1;\n"
        "  }\n"
        "  return 0;\n"
        "}\n"
        "/* a wgmma shared-memory matrix descriptor (PTX ISA): address, LBO, SBO >> 4; swizzle mode in bits 62-63 */\n"
        "QDEV uint64_t q_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo, unsigned mode) {\n"
        "  return (uint64_t)((addr & 0x3ffffu) >> 4) | (uint64_t)((lbo & 0x3ffffu) >> 4) << 16 | (uint64_t)((sbo & 0x3ffffu) >> 4) << 32 |\n"
        "         (uint64_t)mode << 62;\n"
        "}\n",
        o);
}

void kprint_gpu_kernel(FILE *o, const kkernel *k, bool hip) {
  kprint_style st = {.c_threads = false, .hip = hip};
  /* a persistent kernel: its vEUs must stay co-resident; a pipelined contraction: 1 */
  if (k->min_blocks > 0 && !hip)
    fprintf(o, "\n/* %s */\n__global__ void __launch_bounds__(%d, %d) %s(", k->summary, k->threads, k->min_blocks, k->name);
  else
    fprintf(o, "\n/* %s */\n__global__ void __launch_bounds__(%d) %s(", k->summary, k->threads, k->name);
  /* const __restrict__ lets the compiler read through the non-coherent
   * read-only path (ld.global.nc): only for tensors no one writes during the
   * launch under any name.  A device loop writes and later reads the same
   * tensors, maybe under two names, and a parameter whose bytes overlap
   * another's (aliased: arena memory an rprogram's later member reuses) is
   * one object under two names: plain pointers, not const (nvcc may read a
   * const one through the read-only path). */
  for (int i = 0; i < k->n_params; i++)
    fprintf(o, "%s%s%s *%s%s", i ? ", " : "", k->params[i].written || k->coherent || k->params[i].aliased ? "" : "const ",
            kdtype_c(k->params[i].dtype),
            k->coherent || k->params[i].aliased ? "" : "__restrict__ ", k->params[i].name);
  if (!hip) kprint_sm90_tmap_params(o, k);
  fputs(") {\n", o);
  /* Hopper's own instructions assemble for sm_90a only: elsewhere the kernel traps */
  if (k->sm90a) fputs("#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)\n", o);
  /* over 48 KiB (CUDA's static limit), shared tiles live in one dynamic buffer */
  int64_t dyn = hip && !k->carved_smem ? 0 : kkernel_dynamic_smem(k, CUDA_STATIC_SMEM);
  if (dyn && k->sm90a)   /* 128B-swizzled tiles: the pattern wgmma and the copies share needs 1024-byte atoms
                           * (a name of its own: one translation unit's extern arrays agree on alignment) */
    fputs("  extern __shared__ __align__(1024) unsigned char q_smem_1024[];\n"
          "  unsigned char *const q_smem = q_smem_1024;\n"
          "  if ((unsigned)__cvta_generic_to_shared(q_smem) & 1023u) __trap();\n", o);
  else if (dyn) fputs("  extern __shared__ __align__(128) unsigned char q_smem[];\n", o);
  for (int i = 0; i < k->n_vars; i++) {
    const kvar *v = k->vars[i];
    if (dyn && v->space == KV_SHARED)
      fprintf(o, "  %s *const %s = (%s *)(q_smem + %" PRId64 ");\n", kvar_elem_c(v), v->name, kvar_elem_c(v),
              kvar_dynamic_offset(k, v));
    else kprint_var_decl(o, v, k, &st, 1);
  }
  if (k->bid_remap) {   /* the run's tiles only: this block's number in the bound's grid */
    fputs("  const int q_vb = (int)(", o);
    kprint_expr(o, k->bid_remap, k, &st);
    fputs(");\n", o);
    st.bid_remap = true;
  }
  const char *sync = k->rp_sync ? k->params[k->n_params - 1].name : NULL;
  if (sync)   /* this launch's generation: launches finished before it, plus one */
    fprintf(o, "  const unsigned long long q_gen = (unsigned long long)%s[%d] + 1ULL;\n", sync, RP_SYNC_DONE_LAUNCHES);
  const kstmt *body = k->gpu_body ? k->gpu_body : k->body;
  kprint_lets(o, k, body, &st, 1);
  kprint_stmt(o, body, k, &st, 1);
  if (k->sm90a) fputs("#else\n  __trap();\n#endif\n", o);
  if (sync)   /* the last block to finish counts the launch (every block has read q_gen by then) */
    fprintf(o, "  __syncthreads();\n"
               "  if (threadIdx.x == 0) {\n"
               "    __threadfence();\n"
               "    if (atomicAdd((unsigned long long *)&%s[%d], 1ULL) == q_gen * %" PRId64 "ULL - 1ULL) atomicExch((unsigned long long *)&%s[%d], q_gen);\n"
               "  }\n",
            sync, RP_SYNC_DONE_BLOCKS, k->grid, sync, RP_SYNC_DONE_LAUNCHES);
  fputs("}\n", o);
}

/* Opens a block declaring a cooperative launch's argument array q_args (the
 * runtime takes pointers to each argument). */
void kprint_coop_args(FILE *o, const kkernel *k, const char *const *argv, const char *indent) {
  fprintf(o, "%s{\n", indent);
  for (int i = 0; i < k->n_params; i++)
    fprintf(o, "%s  %s *q_a%d = (%s *)%s;\n", indent, kdtype_c(k->params[i].dtype), i, kdtype_c(k->params[i].dtype), argv[i]);
  fprintf(o, "%s  void *q_args[] = {", indent);
  for (int i = 0; i < k->n_params; i++) fprintf(o, "%s&q_a%d", i ? ", " : "", i);
  fprintf(o, "};\n");
}

static void kernel(FILE *o, const kkernel *k) { kprint_gpu_kernel(o, k, false); }

/* A cooperative launch.  With k->coop_fallback, a device that cannot hold
 * the grid at once (other work resident, MPS, a smaller device) sets that
 * flag instead of failing: the host then runs the fallback. */
void kprint_coop_launch(FILE *o, const kkernel *k, const char *const *argv, const char *indent, const char *api, const char *too_large,
                        int64_t dyn) {
  kprint_coop_args(o, k, argv, indent);
  if (!k->coop_fallback) {
    fprintf(o, "%s  QCHECK(%s((const void *)%s, dim3(%" PRId64 "), dim3(%d), q_args, %" PRId64 ", q_stream));\n%s}\n", indent, api,
            k->name, k->grid, k->threads, dyn, indent);
    return;
  }
  fprintf(o, "%s  QCOOP(%s((const void *)%s, dim3(%" PRId64 "), dim3(%d), q_args, %" PRId64 ", q_stream), %s, %s);\n%s}\n", indent, api,
          k->name, k->grid, k->threads, dyn, too_large, k->coop_fallback, indent);
}

static void launch(FILE *o, const kkernel *k, const char *const *argv, const char *indent) {
  int64_t dyn = kkernel_dynamic_smem(k, CUDA_STATIC_SMEM);
  if (dyn)
    fprintf(o, "%sQCHECK(cudaFuncSetAttribute(%s, cudaFuncAttributeMaxDynamicSharedMemorySize, %" PRId64 "));\n", indent,
            k->name, dyn);
  if (k->cooperative) {   /* grid barriers or waits on other blocks: every block resident (qir_init checked) */
    kprint_coop_launch(o, k, argv, indent, "cudaLaunchCooperativeKernel", "cudaErrorCooperativeLaunchTooLarge", dyn);
    return;
  }
  if (k->n_tmaps) {   /* the tensor maps, encoded before the first launch */
    fprintf(o, "%s{\n", indent);
    kprint_sm90_tmap_encode(o, k, argv, indent);
  }
  if (k->grid_text) fprintf(o, "%s%s<<<(unsigned)%s, %d, %" PRId64 ", q_stream>>>(", indent, k->name, k->grid_text, k->threads, dyn);
  else fprintf(o, "%s%s<<<%" PRId64 ", %d, %" PRId64 ", q_stream>>>(", indent, k->name, k->grid, k->threads, dyn);
  for (int i = 0; i < k->n_params; i++) fprintf(o, "%s%s", i ? ", " : "", argv[i]);
  for (int i = 0; i < k->n_tmaps; i++) fprintf(o, ", q_tm%d", i);
  fprintf(o, ");\n%sQCHECK_LAUNCH();\n", indent);
  if (k->n_tmaps) fprintf(o, "%s}\n", indent);
}

/* An rprogram's persistent kernel waits on other blocks: run it only when
 * all its blocks fit on the device at once (else the host launches its
 * kernels one by one). */
static void coresident(FILE *o, const kkernel *k, const char *flag, const char *indent) {
  int64_t dyn = kkernel_dynamic_smem(k, CUDA_STATIC_SMEM);
  fprintf(o, "%s{\n%s  int q_dev = 0, q_sms = 0, q_per = 0;\n%s  %s = 0;\n", indent, indent, indent, flag);
  fprintf(o, "%s  if (cudaGetDevice(&q_dev) == cudaSuccess &&\n", indent);
  if (k->cooperative)
    fprintf(o, "%s      cudaDeviceGetAttribute(&q_per, cudaDevAttrCooperativeLaunch, q_dev) == cudaSuccess && q_per &&\n", indent);
  fprintf(o, "%s      cudaDeviceGetAttribute(&q_sms, cudaDevAttrMultiProcessorCount, q_dev) == cudaSuccess &&\n", indent);
  if (dyn)
    fprintf(o, "%s      cudaFuncSetAttribute(%s, cudaFuncAttributeMaxDynamicSharedMemorySize, %" PRId64 ") == cudaSuccess &&\n", indent,
            k->name, dyn);
  fprintf(o, "%s      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&q_per, %s, %d, %" PRId64 ") == cudaSuccess)\n", indent, k->name,
          k->threads, dyn);
  fprintf(o, "%s    %s = (long)q_per * q_sms >= %" PRId64 "L;\n", indent, flag, k->grid);
  fprintf(o, "%s  (void)cudaGetLastError();\n%s}\n", indent, indent);
}

const cg_printer cg_printer_cuda = {CG_CUDA, prelude, kernel, launch, coresident};
