/* ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16, emulated for one
 * warp of the C back end (qcodegen runtime).
 *
 * Lane l (l < 8 * count) gives the address of row l % 8 of matrix l / 8, as
 * an element offset row[l] into the shared tile `mem`.  Register j of lane l
 * then holds elements (l / 4, 2 * (l % 4)) and (l / 4, 2 * (l % 4) + 1) of
 * matrix j, the first in the low 16 bits; with .trans, of matrix j
 * transposed.  Registers are [slot][lane] arrays: register j of lane l is
 * reg[j * stride + l]. */
static inline void q_ldmatrix(uint32_t *reg, long stride, int count, int trans, const uint16_t *mem, const long *row) {
  for (int j = 0; j < count; j++)
    for (int l = 0; l < 32; l++) {
      int r = l / 4, c = 2 * (l % 4);
      uint16_t lo, hi;
      if (trans) {            /* element (r, c) of the transpose is element (c, r) */
        lo = mem[row[8 * j + c] + r];
        hi = mem[row[8 * j + c + 1] + r];
      } else {
        lo = mem[row[8 * j + r] + c];
        hi = mem[row[8 * j + r] + c + 1];
      }
      reg[j * stride + l] = (uint32_t)lo | (uint32_t)hi << 16;
    }
}
