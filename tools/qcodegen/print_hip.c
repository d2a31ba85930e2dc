/* print_hip.c: the HIP printer.  Kernels are lowered for 64-lane wavefronts
 * (cg_ctx.warp = 64), warp reductions use __shfl_xor with width 64, and the
 * runtime is hip*. */
#include <inttypes.h>

#include "kast.h"

static void prelude(FILE *o) {
  fputs("#include <hip/hip_runtime.h>\n#include <hip/hip_cooperative_groups.h>\n#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
        "#include <string.h>\n#include <time.h>\n\n"
        "#define QDEV __device__ __forceinline__\n"
        "#define QAPI extern \"C\"\n",
        o);
  kprint_helpers(o);
  fputs("\n/* runtime: every call's status is checked */\n"
        "#define QCHECK(call) do { hipError_t q_rc_ = (call); if (q_rc_ != hipSuccess) { fprintf(stderr, \"%s:%d: %s: %s\\n\", __FILE__, __LINE__, #call, hipGetErrorString(q_rc_)); return 1; } } while (0)\n"
        "#define QCHECK_LAUNCH() QCHECK(hipGetLastError())\n"
        "#define QCOOP(call, too_large, fallback) do { hipError_t q_rc_ = (call); if (q_rc_ == (too_large)) { (void)hipGetLastError(); (fallback) = 1; } else if (q_rc_ != hipSuccess) { fprintf(stderr, \"%s:%d: %s: %s\\n\", __FILE__, __LINE__, #call, hipGetErrorString(q_rc_)); return 1; } } while (0)\n"
        "#define q_alloc(p, n) hipMalloc((p), (n) ? (n) : 1)\n"
        "#define q_free(p) (void)hipFree(p)\n"
        "#define q_h2d(d, s, n) hipMemcpy((d), (s), (n), hipMemcpyHostToDevice)\n"
        "#define q_d2h(d, s, n) hipMemcpy((d), (s), (n), hipMemcpyDeviceToHost)\n"
        "#define q_h2d_2d(d, dp, s, sp, w, h) hipMemcpy2D((d), (dp), (s), (sp), (w), (h), hipMemcpyHostToDevice)\n"
        "#define q_d2h_2d(d, dp, s, sp, w, h) hipMemcpy2D((d), (dp), (s), (sp), (w), (h), hipMemcpyDeviceToHost)\n"
        "#define q_d2d(d, s, n) hipMemcpy((d), (s), (n), hipMemcpyDeviceToDevice)\n"
        "#define q_d2d_2d(d, dp, s, sp, w, h) hipMemcpy2D((d), (dp), (s), (sp), (w), (h), hipMemcpyDeviceToDevice)\n"
        "#define q_d2d_async(d, s, n) hipMemcpyAsync((d), (s), (n), hipMemcpyDeviceToDevice, q_stream)\n"
        "typedef hipStream_t q_stream_t;\n"
        "/* every launch and asynchronous copy goes to q_stream: this default one in qir_init and\n"
        " * qir_run, the caller's in qir_run_stream (its parameter) */\n"
        "static const q_stream_t q_stream = 0;\n"
        "#define q_sync() hipDeviceSynchronize()\n"
        "\n/* matrix units: v_mfma_f32_16x16x16 (gfx90a, gfx942) on a 64-lane wavefront.  Operand\n"
        " * layout: A[i][k] in lane i + 16 * (k / 4), item k % 4; B[k][j] in lane j + 16 * (k / 4),\n"
        " * item k % 4; accumulator D[i][j] in lane j + 16 * (i / 4), item i % 4. */\n"
        "typedef short q_s4 __attribute__((ext_vector_type(4)));\n"
        "typedef _Float16 q_h4 __attribute__((ext_vector_type(4)));\n"
        "typedef float q_f4 __attribute__((ext_vector_type(4)));\n"
        "QDEV q_f4 q_mfma_zero(void) { q_f4 z = {0.0f, 0.0f, 0.0f, 0.0f}; return z; }\n"
        "/* element (r, c) of a 16-bit tile stored row- or column-major */\n"
        "QDEV short q_mfma_at(const uint16_t *p, int ld, int col_major, int r, int c) {\n"
        "  return (short)(col_major ? p[c * ld + r] : p[r * ld + c]);\n"
        "}\n"
        "QDEV void q_mfma_load_a(q_s4 &f, const uint16_t *p, int ld, int col_major) {\n"
        "  int l = (int)threadIdx.x % 64;\n"
        "  for (int t = 0; t < 4; t++) f[t] = q_mfma_at(p, ld, col_major, l % 16, l / 16 * 4 + t);\n"
        "}\n"
        "QDEV void q_mfma_load_b(q_s4 &f, const uint16_t *p, int ld, int col_major) {\n"
        "  int l = (int)threadIdx.x % 64;\n"
        "  for (int t = 0; t < 4; t++) f[t] = q_mfma_at(p, ld, col_major, l / 16 * 4 + t, l % 16);\n"
        "}\n"
        "QDEV q_f4 q_mfma_f16(q_s4 a, q_s4 b, q_f4 c) {\n"
        "  return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(q_h4, a), __builtin_bit_cast(q_h4, b), c, 0, 0, 0);\n"
        "}\n"
        "QDEV q_f4 q_mfma_bf16(q_s4 a, q_s4 b, q_f4 c) { return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0); }\n"
        "QDEV void q_mfma_store(float *p, q_f4 d, int ld) {\n"
        "  int l = (int)threadIdx.x % 64;\n"
        "  for (int t = 0; t < 4; t++) p[(l / 16 * 4 + t) * ld + l % 16] = d[t];\n"
        "}\n",
        o);
}

static void kernel(FILE *o, const kkernel *k) { kprint_gpu_kernel(o, k, true); }

static void launch(FILE *o, const kkernel *k, const char *const *argv, const char *indent) {
  int64_t dyn = k->carved_smem ? kkernel_dynamic_smem(k, 0) : 0;   /* an rprogram carves its tiles from dynamic LDS */
  if (k->cooperative) {   /* grid barriers or waits on other blocks: every block resident (qir_init checked) */
    kprint_coop_launch(o, k, argv, indent, "hipLaunchCooperativeKernel", "hipErrorCooperativeLaunchTooLarge", dyn);
    return;
  }
  if (k->grid_text)
    fprintf(o, "%shipLaunchKernelGGL(%s, dim3((unsigned)%s), dim3(%d), %" PRId64 ", q_stream", indent, k->name, k->grid_text, k->threads, dyn);
  else
    fprintf(o, "%shipLaunchKernelGGL(%s, dim3(%" PRId64 "), dim3(%d), %" PRId64 ", q_stream", indent, k->name, k->grid, k->threads, dyn);
  for (int i = 0; i < k->n_params; i++) fprintf(o, ", %s", argv[i]);
  fprintf(o, ");\n%sQCHECK_LAUNCH();\n", indent);
}
/* As CUDA's: the persistent kernel only where all its blocks are resident. */
static void coresident(FILE *o, const kkernel *k, const char *flag, const char *indent) {
  int64_t dyn = kkernel_dynamic_smem(k, 0);
  fprintf(o, "%s{\n%s  int q_dev = 0, q_cus = 0, q_per = 0;\n%s  %s = 0;\n", indent, indent, indent, flag);
  fprintf(o, "%s  if (hipGetDevice(&q_dev) == hipSuccess &&\n", indent);
  if (k->cooperative)
    fprintf(o, "%s      hipDeviceGetAttribute(&q_per, hipDeviceAttributeCooperativeLaunch, q_dev) == hipSuccess && q_per &&\n", indent);
  fprintf(o, "%s      hipDeviceGetAttribute(&q_cus, hipDeviceAttributeMultiprocessorCount, q_dev) == hipSuccess &&\n", indent);
  fprintf(o, "%s      hipOccupancyMaxActiveBlocksPerMultiprocessor(&q_per, %s, %d, %" PRId64 ") == hipSuccess)\n", indent, k->name,
          k->threads, dyn);
  fprintf(o, "%s    %s = (long)q_per * q_cus >= %" PRId64 "L;\n", indent, flag, k->grid);
  fprintf(o, "%s  (void)hipGetLastError();\n%s}\n", indent, indent);
}

const cg_printer cg_printer_hip = {CG_HIP, prelude, kernel, launch, coresident};
