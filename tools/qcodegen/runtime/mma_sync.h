/* mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, emulated
 * for one warp of the C back end (qcodegen runtime): D = A x B + C with A
 * 16x16, B 16x8, C and D 16x8 f32.  The fragments are the PTX ISA's, for lane
 * l with g = l / 4 and t = l % 4 (two 16-bit values per register, the lower
 * column or row first):
 *   A: a0 = A[g][2t, 2t+1]  a1 = A[g+8][2t, 2t+1]  a2 = A[g][2t+8, 2t+9]  a3 = A[g+8][2t+8, 2t+9]
 *   B: b0 = B[2t, 2t+1][g]  b1 = B[2t+8, 2t+9][g]
 *   C, D: c0, c1 = C[g][2t, 2t+1]  c2, c3 = C[g+8][2t, 2t+1]
 * Registers are [slot][lane] arrays: register j of lane l is x[j * stride + l].
 * 16-bit products are exact in f32; the sum runs along k in order. */
static inline float q_mma_half(uint32_t reg, int hi, int bf16) {
  uint16_t h = (uint16_t)(hi ? reg >> 16 : reg & 0xffffu);
  return bf16 ? q_bf2f(h) : q_h2f(h);
}

/* D = A x B + C for both shapes: A 16xK and B Kx8 (row-major), the sum along
 * k in order, in f32; D back to the lanes' registers (c0..c3 as above). */
static inline void q_mma_finish(float *d, long stride, float C[16][8], const float *A, const float *B, int K) {
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++) {
      float s = C[i][j];
      for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * 8 + j];
      C[i][j] = s;
    }
  for (int l = 0; l < 32; l++) {
    int g = l / 4, t = l % 4;
    for (int e = 0; e < 2; e++) {
      d[e * stride + l] = C[g][2 * t + e];
      d[(2 + e) * stride + l] = C[g + 8][2 * t + e];
    }
  }
}

static inline void q_mma16816(float *d, const uint32_t *a, const uint32_t *b, long stride, int bf16) {
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; l++) {
    int g = l / 4, t = l % 4;
    for (int e = 0; e < 2; e++) {
      A[g][2 * t + e] = q_mma_half(a[0 * stride + l], e, bf16);
      A[g + 8][2 * t + e] = q_mma_half(a[1 * stride + l], e, bf16);
      A[g][2 * t + 8 + e] = q_mma_half(a[2 * stride + l], e, bf16);
      A[g + 8][2 * t + 8 + e] = q_mma_half(a[3 * stride + l], e, bf16);
      B[2 * t + e][g] = q_mma_half(b[0 * stride + l], e, bf16);
      B[2 * t + 8 + e][g] = q_mma_half(b[1 * stride + l], e, bf16);
      C[g][2 * t + e] = d[e * stride + l];
      C[g + 8][2 * t + e] = d[(2 + e) * stride + l];
    }
  }
  q_mma_finish(d, stride, C, &A[0][0], &B[0][0], 16);
}

/* mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, emulated likewise: A
 * 16x8, B 8x8, C and D 16x8 f32, one TF32 value (f32 bits, the low 13 zero:
 * q_tf32) per register, for lane l with g = l / 4 and t = l % 4:
 *   A: a0 = A[g][t]  a1 = A[g+8][t]  a2 = A[g][t+4]  a3 = A[g+8][t+4]
 *   B: b0 = B[t][g]  b1 = B[t+4][g]
 *   C, D: as m16n8k16's.
 * TF32 products are exact in f32 (11-bit significands); the sum runs along
 * k in order, in f32. */
static inline float q_tf32_value(uint32_t reg) {
  uint32_t x = reg & 0xffffe000u;   /* the unit reads the TF32 bits only */
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline void q_mma1688_tf32(float *d, const uint32_t *a, const uint32_t *b, long stride) {
  float A[16][8], B[8][8], C[16][8];
  for (int l = 0; l < 32; l++) {
    int g = l / 4, t = l % 4;
    A[g][t] = q_tf32_value(a[0 * stride + l]);
    A[g + 8][t] = q_tf32_value(a[1 * stride + l]);
    A[g][t + 4] = q_tf32_value(a[2 * stride + l]);
    A[g + 8][t + 4] = q_tf32_value(a[3 * stride + l]);
    B[t][g] = q_tf32_value(b[0 * stride + l]);
    B[t + 4][g] = q_tf32_value(b[1 * stride + l]);
    for (int e = 0; e < 2; e++) {
      C[g][2 * t + e] = d[e * stride + l];
      C[g + 8][2 * t + e] = d[(2 + e) * stride + l];
    }
  }
  q_mma_finish(d, stride, C, &A[0][0], &B[0][0], 8);
}
