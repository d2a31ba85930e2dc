/* print_hip.c: the HIP printer.  Kernels are lowered for 64-lane wavefronts
 * (cg_ctx.warp = 64), warp reductions use __shfl_xor with width 64, and the
 * runtime is hip*. */
#include <inttypes.h>

#include "kast.h"

static void prelude(FILE *o) {
  fputs("#include <hip/hip_runtime.h>\n#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
        "#include <string.h>\n#include <time.h>\n\n"
        "#define QDEV __device__ __forceinline__\n"
        "#define QAPI extern \"C\"\n",
        o);
  kprint_helpers(o);
  fputs("\n/* runtime: every call's status is checked */\n"
        "#define QCHECK(call) do { hipError_t q_rc_ = (call); if (q_rc_ != hipSuccess) { fprintf(stderr, \"%s:%d: %s: %s\\n\", __FILE__, __LINE__, #call, hipGetErrorString(q_rc_)); return 1; } } while (0)\n"
        "#define QCHECK_LAUNCH() QCHECK(hipGetLastError())\n"
        "#define q_alloc(p, n) hipMalloc((p), (n) ? (n) : 1)\n"
        "#define q_free(p) (void)hipFree(p)\n"
        "#define q_h2d(d, s, n) hipMemcpy((d), (s), (n), hipMemcpyHostToDevice)\n"
        "#define q_d2h(d, s, n) hipMemcpy((d), (s), (n), hipMemcpyDeviceToHost)\n"
        "#define q_d2d(d, s, n) hipMemcpy((d), (s), (n), hipMemcpyDeviceToDevice)\n"
        "#define q_d2d_async(d, s, n) hipMemcpyAsync((d), (s), (n), hipMemcpyDeviceToDevice, 0)\n"
        "#define q_sync() hipDeviceSynchronize()\n",
        o);
}

static void kernel(FILE *o, const kkernel *k) { kprint_gpu_kernel(o, k, true); }

static void launch(FILE *o, const kkernel *k, const char *const *argv, const char *indent) {
  fprintf(o, "%shipLaunchKernelGGL(%s, dim3(%" PRId64 "), dim3(%d), 0, 0", indent, k->name, k->grid, k->threads);
  for (int i = 0; i < k->n_params; i++) fprintf(o, ", %s", argv[i]);
  fprintf(o, ");\n%sQCHECK_LAUNCH();\n", indent);
}

const cg_printer cg_printer_hip = {CG_HIP, prelude, kernel, launch};
