/* audit-defects.cu: one instance of each defect scripts/audit-cuda.py finds
 * (audit-cuda.test checks each located finding).  Not meant to compile. */
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <stdint.h>
#include <stdio.h>

#define QCHECK(call) do { cudaError_t q_rc_ = (call); if (q_rc_ != cudaSuccess) { fprintf(stderr, "%s\n", #call); return 1; } } while (0)
#define QCHECK_LAUNCH() QCHECK(cudaGetLastError())
#define q_alloc(p, n) cudaMalloc((p), (n) ? (n) : 1)
#define q_h2d(d, s, n) cudaMemcpy((d), (s), (n), cudaMemcpyHostToDevice)

__global__ void __launch_bounds__(128) k_scale(float *__restrict__ out, const float *__restrict__ in0) {
  const int32_t i = ((int)blockIdx.x * 128) + (int)threadIdx.x;
  out[i] = in0[i] * 2.0f;
}

__global__ void __launch_bounds__(64) k_pair(float *__restrict__ out0, float *__restrict__ out1) {
  out0[threadIdx.x] = 1.0f;
  out1[threadIdx.x] = 2.0f;
}

__global__ void __launch_bounds__(64) k_big(float *__restrict__ out) {
  extern __shared__ __align__(128) unsigned char q_smem[];
  float *const s0 = (float *)(q_smem + 0);
  s0[threadIdx.x] = 0.0f;
  __syncthreads();
  out[threadIdx.x] = s0[63 - threadIdx.x];
}

/* a barrier under a branch on a value derived from threadIdx */
__global__ void __launch_bounds__(64) k_diverge(float *__restrict__ out) {
  __shared__ float s1[64];
  const int32_t v3 = ((int)threadIdx.x % 8);
  s1[threadIdx.x] = 1.0f;
  if ((v3 < 4)) {
    __syncthreads();
  }
  out[threadIdx.x] = s1[threadIdx.x ^ 1];
}

/* a persistent program: blocks wait on each other's flags */
__global__ void __launch_bounds__(32, 1) rprogram0(float *__restrict__ p0, uint64_t *__restrict__ p1) {
  p0[blockIdx.x * 32 + threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) { __threadfence(); atomicExch((unsigned long long *)&p1[1 + blockIdx.x], (unsigned long long)p1[0]); }
  if (threadIdx.x == 0) { for (long q_f = 1; q_f < 3; q_f++) while (((volatile unsigned long long *)p1)[q_f] < (unsigned long long)p1[0]) { } __threadfence(); }
  __syncthreads();
}

/* a device loop: grid barriers between phases */
__global__ void __launch_bounds__(32, 1) dloop0(float *p0) {
  p0[blockIdx.x * 32 + threadIdx.x] = 0.0f;
  cooperative_groups::this_grid().sync();
  p0[blockIdx.x * 32 + threadIdx.x] += 1.0f;
}

typedef struct qir_model { unsigned char *arena; } qir_model;

extern "C" int qir_run(qir_model *m, const void *const *inputs) {
  QCHECK(q_alloc((void **)&m->arena, 4096));
  q_h2d(((float *)(m->arena + 0)), inputs[0], 512);
  k_scale<<<1, 128>>>(((float *)(m->arena + 512)), ((const float *)(m->arena + 0)));
  k_scale<<<1, 64>>>(((float *)(m->arena + 1024)), ((const float *)(m->arena + 512)));
  QCHECK_LAUNCH();
  k_scale<<<1, 128>>>(((float *)(m->arena + 1024)), ((const float *)(m->arena + 1024)));
  QCHECK_LAUNCH();
  k_pair<<<1, 64>>>(((float *)(m->arena + 2048)), ((float *)(m->arena + 2048)));
  QCHECK_LAUNCH();
  QCHECK(cudaFuncSetAttribute(k_big, cudaFuncAttributeMaxDynamicSharedMemorySize, 51200));
  k_big<<<1, 64, 65536>>>(((float *)(m->arena + 3072)));
  QCHECK_LAUNCH();
  k_diverge<<<1, 64>>>(((float *)(m->arena + 3072)));
  QCHECK_LAUNCH();
  rprogram0<<<2, 32>>>(((float *)(m->arena + 0)), ((uint64_t *)(m->arena + 3840)));
  QCHECK_LAUNCH();
  {
    float *q_a0 = (float *)((float *)(m->arena + 0));
    void *q_args[] = {&q_a0};
    QCHECK(cudaLaunchCooperativeKernel((const void *)dloop0, dim3(2), dim3(32), q_args, 0, 0));
  }
  return 0;
}

/* a stream-ordered run that is not: a launch on the default stream, a blocking copy */
extern "C" int qir_run_stream(qir_model *m, const void *const *inputs, cudaStream_t q_stream) {
  k_scale<<<1, 128, 0, 0>>>(((float *)(m->arena + 512)), ((const float *)inputs[0]));
  QCHECK_LAUNCH();
  QCHECK(q_h2d(((float *)(m->arena + 0)), inputs[0], 512));
  (void)q_stream;
  return 0;
}
