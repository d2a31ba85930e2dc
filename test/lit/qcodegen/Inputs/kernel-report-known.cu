#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>

// Inline PTX with known counts: 2 cp.async of 16 bytes, wait_group 2,
// ldmatrix .x4 and .x2.trans, 2 mma.sync.m16n8k16, a float4 load and store.
__global__ void __launch_bounds__(128) mma_pipe(float *out, const float4 *in, const half *g) {
  __shared__ __align__(16) half tile[2 * 64 * 8];
  uint32_t s = (uint32_t)__cvta_generic_to_shared(tile + threadIdx.x * 8);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(g + threadIdx.x * 8));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s + 1024), "l"(g + 1024 + threadIdx.x * 8));
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 2;\n" ::);
  asm volatile("cp.async.wait_all;\n" ::);
  __syncthreads();
  uint32_t a[4], b[2];
  float c[4] = {0, 0, 0, 0};
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(s));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1]) : "r"(s + 1024));
  for (int i = 0; i < 2; i++)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  float4 v = in[threadIdx.x];
  v.x += c[0] + c[1] + c[2] + c[3];
  reinterpret_cast<float4 *>(out)[threadIdx.x] = v;
}

namespace ops {
// One wmma 16x16x16 product, launched with dynamic shared memory below.
__global__ void __launch_bounds__(32) wmma_tile(float *out, const half *a, const half *b) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(out, fc, 16, wmma::mem_row_major);
}
}

// Scalar loads only; 256 independent accumulators under -maxrregcount spill.
extern "C" __global__ void scalar_sum(float *out, const float *in, int n) {
  float acc[64];
#pragma unroll
  for (int j = 0; j < 64; j++) acc[j] = in[j * n + threadIdx.x];
  for (int i = 1; i < n; i++) {
#pragma unroll
    for (int j = 0; j < 64; j++) acc[j] = acc[j] * in[i + j] + acc[(j + 1) % 64];
  }
#pragma unroll
  for (int j = 0; j < 64; j++) out[j * n + threadIdx.x] = acc[j];
}

void launch(float *out, const float4 *in, const half *g) {
  mma_pipe<<<1, 128>>>(out, in, g);
  ops::wmma_tile<<<1, 32, 4096>>>(out, g, g);
  scalar_sum<<<1, 32>>>(out, (const float *)in, 4);
}
