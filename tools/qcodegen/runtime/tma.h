/* cp.async.bulk.tensor (sm_90, the tensor memory accelerator), emulated for
 * the C back end (qcodegen runtime; the completion is mbarrier.h's).
 *
 * A tensor map (q_tmap: cuTensorMapEncodeTiled's fields) sees a tensor as
 * up to five dimensions, innermost first, with byte strides.  A copy moves
 * the box at coordinates c[] into shared memory: box elements are laid out
 * innermost first, row after row (a row: box[0] elements), and elements
 * outside the tensor read as zero.  With a swizzle of S bytes (128, 64, 32)
 * each row must be S bytes, and the 16-byte chunk at shared address a lands
 * at a ^ (((a >> 7) & (S / 16 - 1)) << 4): the pattern depends on the
 * address, so a destination must start at a multiple of S * 8 (1024 for
 * 128B) for the pattern wgmma's descriptors assume. */
typedef struct {
  int rank;
  long dims[5];
  long strides[5];              /* bytes; strides[0] is the element size */
  long box[5];                  /* elements traversed along each dimension */
  long estride[5];              /* traversal stride: every estride-th of them is copied ([0]: 1) */
  int swizzle;                  /* bytes, 0: none */
} q_tmap;

static inline unsigned q_swizzle_addr(unsigned a, int swizzle) {
  switch (swizzle) {
  case 128: return a ^ (((a >> 7) & 7u) << 4);
  case 64: return a ^ (((a >> 7) & 3u) << 4);
  case 32: return a ^ (((a >> 7) & 1u) << 4);
  default: return a;
  }
}

/* dst: shared memory at emulated shared address dst_addr. */
static inline void q_tma_load(q_mbar_block *s, int bar, void *dst, unsigned dst_addr, const void *gbase, const q_tmap *m, const long *c) {
  long es = m->strides[0], n = es, copied[5];
  for (int d = 0; d < m->rank; d++) {   /* ceil(box / estride) elements along each dimension */
    long st = d > 0 && m->estride[d] > 0 ? m->estride[d] : 1;
    copied[d] = (m->box[d] + st - 1) / st;
    n *= copied[d];
  }
  if (dst_addr % 128) q_mbar_fail(bar, "cp.async.bulk.tensor: shared destination not 128-byte aligned");
  /* the device faults (an illegal instruction) where the box starts off a 16-byte boundary of
   * the contiguous dimension, outside the tensor too */
  if ((c[0] * es) % 16) q_mbar_fail(bar, "cp.async.bulk.tensor: the box's start along the contiguous dimension is not 16-byte aligned");
  if (m->swizzle && (copied[0] * es != m->swizzle || dst_addr % (unsigned)(m->swizzle * 8)))
    q_mbar_fail(bar, "cp.async.bulk.tensor: a swizzled box's rows must be the swizzle's width, at a multiple of 8 rows");
  unsigned char *bytes = (unsigned char *)calloc((size_t)n, 1);
  if (!bytes) { fputs("qir: out of memory (tensor copies)\n", stderr); exit(2); }
  long x[5] = {0, 0, 0, 0, 0};
  for (long e = 0; e < n / es; e++) {
    long rest = e, off = 0;
    int inside = 1;
    for (int d = 0; d < m->rank; d++) {
      x[d] = rest % copied[d];
      rest /= copied[d];
      long g = c[d] + x[d] * (d > 0 && m->estride[d] > 0 ? m->estride[d] : 1);
      if (g < 0 || g >= m->dims[d]) inside = 0;
      off += g * m->strides[d];
    }
    unsigned a = q_swizzle_addr(dst_addr + (unsigned)(e * es), m->swizzle);
    if (inside) memcpy(bytes + (a - dst_addr), (const unsigned char *)gbase + off, (size_t)es);
  }
  q_mbar_copy_issue(s, bar, dst, bytes, n);
}
