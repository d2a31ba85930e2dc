/* wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16} (sm_90a), emulated
 * for the C back end (qcodegen runtime): D (64 x N, f32, in the registers of
 * the warpgroup's 128 threads) += A (64 x 16) x B (16 x N), both from shared
 * memory through matrix descriptors.
 *
 * Descriptor (PTX ISA, "matrix descriptor"): bits 0-13 start address >> 4,
 * 16-29 leading dimension byte offset (LBO) >> 4, 32-45 stride dimension
 * byte offset (SBO) >> 4, 62-63 swizzle (1: 128B, 2: 64B, 3: 32B, 0: none).
 * Canonical layouts (16-bit elements, T = 8 elements = 16 bytes; a row is
 * the swizzle's width W bytes):
 *   K-major, swizzled:  (mn, k) at start + (mn / 8) SBO + (mn % 8) W + (k / 8) 16 + (k % 8) 2
 *   K-major, none:      start + (mn / 8) SBO + (mn % 8) 16 + (k / 8) LBO + (k % 8) 2
 *   MN-major, swizzled: start + (mn / (W/2)) LBO + (mn % (W/2)) 2 + (k / 8) SBO + (k % 8) W
 *   MN-major, none:     start + (mn / 8) SBO + (mn % 8) 2 + (k / 8) LBO + (k % 8) 16
 * then the swizzle of the address (tma.h's q_swizzle_addr).  MN-major is
 * imm-trans 1 (A stored M-contiguous, B stored N-contiguous).
 * Accumulators: thread t of the warpgroup (warp w = t / 32, g = (t % 32) / 4,
 * q = t % 4) holds in register i the element row 16 w + g + 8 ((i / 2) % 2),
 * column 8 (i / 4) + 2 q + i % 2.
 * A from registers (the RS form: wgmma ... d, {a0, a1, a2, a3}, b-desc): warp w
 * of the warpgroup holds rows 16 w .. 16 w + 15 as mma.m16n8k16's A fragment,
 * thread (g, q) register r two 16-bit values (low half first) of row
 * 16 w + g + 8 (r % 2), columns 2 q + 8 (r / 2) and the next; like shared
 * operands they are read when the wgmma runs, so a register overwritten
 * before the wait that retires it gives wrong numbers, as it may on the GPU.
 * Asynchrony: an issued wgmma joins the warpgroup's open group; commit_group
 * closes it; wait_group N returns once at most N committed groups are in
 * flight.  Here a wgmma runs at the wait that retires its group, reading
 * shared memory and the accumulators then, so a stage overwritten before the
 * wait, or an accumulator read before it, gives wrong numbers as it may on
 * the GPU.  16-bit products are exact in f32; the sum runs along k in order. */
typedef struct {
  float *acc;
  long stride;                  /* registers are [slot][thread] arrays: register i of thread t is acc[i * stride + t] */
  int n, bf16;
  const uint16_t *a, *b;        /* the shared arrays the descriptors point into (a: NULL with ra) */
  const uint32_t *ra;           /* A from registers: register r of thread t is ra[r * stride + t] */
  unsigned a_base, b_base;      /* their emulated shared addresses */
  long a_elems, b_elems;
  uint64_t da, db;
  int ta, tb;
  long group;
  void *chk_a, *chk_b;          /* -check: the operands' shadow cells (q_wgmma_check) */
  int chk_site;
} q_wgmma_op;

typedef struct {
  q_wgmma_op *ops;
  int n, cap;
  long committed;
} q_wgmma_queue;

typedef struct {
  q_wgmma_queue *q;
  int n;
} q_wgmma_block;

static inline uint64_t q_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo, unsigned mode) {
  return (uint64_t)((addr & 0x3ffffu) >> 4) | (uint64_t)((lbo & 0x3ffffu) >> 4) << 16 | (uint64_t)((sbo & 0x3ffffu) >> 4) << 32 |
         (uint64_t)mode << 62;
}

static inline void q_wgmma_block_init(q_wgmma_block *s, int warpgroups) {
  s->n = warpgroups;
  s->q = (q_wgmma_queue *)calloc((size_t)warpgroups, sizeof *s->q);
  if (!s->q) { fputs("qir: out of memory (wgmma queues)\n", stderr); exit(2); }
}

static inline void q_wgmma_block_free(q_wgmma_block *s) {
  for (int i = 0; i < s->n; i++) free(s->q[i].ops);
  free(s->q);
}

static void q_wgmma_fail(const char *what) {
  fprintf(stderr, "qir: wgmma: %s\n", what);
  exit(3);
}

/* The shared address of element (mn, k) of an operand through its descriptor
 * (the layouts above, then the swizzle). */
static inline unsigned q_wgmma_addr(uint64_t d, int mn_major, int mn, int k) {
  unsigned start = (unsigned)(d & 0x3fffu) << 4, lbo = (unsigned)((d >> 16) & 0x3fffu) << 4, sbo = (unsigned)((d >> 32) & 0x3fffu) << 4;
  int mode = (int)(d >> 62), w = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
  unsigned a;
  if (!mn_major) a = w ? start + (unsigned)(mn / 8) * sbo + (unsigned)(mn % 8 * w) + (unsigned)(k / 8 * 16 + k % 8 * 2)
                       : start + (unsigned)(mn / 8) * sbo + (unsigned)(mn % 8 * 16) + (unsigned)(k / 8) * lbo + (unsigned)(k % 8 * 2);
  else a = w ? start + (unsigned)(mn / (w / 2)) * lbo + (unsigned)(mn % (w / 2) * 2) + (unsigned)(k / 8) * sbo + (unsigned)(k % 8 * w)
             : start + (unsigned)(mn / 8) * sbo + (unsigned)(mn % 8 * 2) + (unsigned)(k / 8) * lbo + (unsigned)(k % 8 * 16);
  return q_swizzle_addr(a, w);
}

/* The element (mn, k) of an operand through its descriptor. */
static inline float q_wgmma_elem(const uint16_t *mem, unsigned base, long elems, uint64_t d, int mn_major, int mn, int k, int bf16) {
  unsigned a = q_wgmma_addr(d, mn_major, mn, k);
  if (a < base || (a - base) % 2 || (long)((a - base) / 2) >= elems) q_wgmma_fail("a descriptor addresses memory outside its tile");
  uint16_t h = mem[(a - base) / 2];
  return bf16 ? q_bf2f(h) : q_h2f(h);
}

static inline void q_wgmma_run(const q_wgmma_op *o) {
  float *A = (float *)malloc(sizeof(float) * 64 * 16), *B = (float *)malloc(sizeof(float) * 16 * (size_t)o->n);
  if (!A || !B) { fputs("qir: out of memory (wgmma)\n", stderr); exit(2); }
  if (o->ra)
    for (int t = 0; t < 128; t++)
      for (int r = 0; r < 4; r++) {
        uint32_t v = o->ra[r * o->stride + t];
        int m = 16 * (t / 32) + (t % 32) / 4 + 8 * (r % 2), k = 2 * (t % 4) + 8 * (r / 2);
        uint16_t lo = (uint16_t)(v & 0xffffu), hi = (uint16_t)(v >> 16);
        A[m * 16 + k] = o->bf16 ? q_bf2f(lo) : q_h2f(lo);
        A[m * 16 + k + 1] = o->bf16 ? q_bf2f(hi) : q_h2f(hi);
      }
  else
    for (int m = 0; m < 64; m++)
      for (int k = 0; k < 16; k++) A[m * 16 + k] = q_wgmma_elem(o->a, o->a_base, o->a_elems, o->da, o->ta, m, k, o->bf16);
  for (int k = 0; k < 16; k++)
    for (int n = 0; n < o->n; n++) B[k * o->n + n] = q_wgmma_elem(o->b, o->b_base, o->b_elems, o->db, o->tb, n, k, o->bf16);
  for (int t = 0; t < 128; t++) {
    int w = t / 32, g = (t % 32) / 4, q = t % 4;
    for (int i = 0; i < o->n / 2; i++) {
      int m = 16 * w + g + 8 * ((i / 2) % 2), n = 8 * (i / 4) + 2 * q + i % 2;
      float s = o->acc[i * o->stride + t];
      for (int k = 0; k < 16; k++) s += A[m * 16 + k] * B[k * o->n + n];
      o->acc[i * o->stride + t] = s;
    }
  }
  free(A);
  free(B);
}

static inline void q_wgmma_issue(q_wgmma_block *s, int wg, q_wgmma_op op) {
  if (wg < 0 || wg >= s->n) q_wgmma_fail("warpgroup out of range");
  q_wgmma_queue *q = &s->q[wg];
  if (q->n == q->cap) {
    int cap = q->cap ? 2 * q->cap : 16;
    q_wgmma_op *ops = (q_wgmma_op *)realloc(q->ops, sizeof *ops * (size_t)cap);
    if (!ops) { fputs("qir: out of memory (wgmma queues)\n", stderr); exit(2); }
    q->ops = ops;
    q->cap = cap;
  }
  op.group = q->committed;
  q->ops[q->n++] = op;
}

static inline void q_wgmma_commit(q_wgmma_block *s, int wg) { s->q[wg].committed++; }

/* Runs, in issue order, every wgmma of a group older than the newest `pending` committed ones. */
static inline void q_wgmma_wait(q_wgmma_block *s, int wg, int pending) {
  q_wgmma_queue *q = &s->q[wg];
  int keep = 0;
  for (int i = 0; i < q->n; i++) {
    if (q->ops[i].group < q->committed - pending) q_wgmma_run(&q->ops[i]);
    else q->ops[keep++] = q->ops[i];
  }
  q->n = keep;
}
