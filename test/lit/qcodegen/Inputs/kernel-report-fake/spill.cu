/* A .cu shaped as qcodegen's (the output list of its header, the launches of
 * qir_run_stream) whose kernel spills under -maxrregcount=32, for
 * kernel-report-suite.test.
 * output 0: hot f32[64,32]
 */
__global__ void k0(float *out, const float *in, int n) {
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

int qir_run_stream(void *m, const void *const *inputs, void *const *outputs, cudaStream_t q_stream) {
  (void)m;
  k0<<<1, 32, 0, q_stream>>>(((float *)outputs[0]), ((const float *)inputs[0]), 32);
  return 0;
}
