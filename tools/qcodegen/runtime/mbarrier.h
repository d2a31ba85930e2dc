/* mbarrier (sm_90), emulated for one block of the C back end (qcodegen
 * runtime), with the bulk tensor copies (tma.h) that complete on it.
 *
 * An mbarrier counts a phase: it expects `count` arrivals and the bytes that
 * arrive.expect_tx announced; the phase completes once every arrival came and
 * every announced byte landed, and the next phase begins.
 * mbarrier.try_wait.parity P returns true once the phase of parity P has
 * completed, i.e. while the current phase's parity is not P.
 *
 * The C back end runs a block's threads one after another, so a copy cannot
 * land "meanwhile": copies wait in the phase's queue and land when the phase
 * is found complete (every arrival came), at the first wait or arrival after
 * that; only then do the bytes reach shared memory.  A read of a stage
 * before its wait therefore sees the old bytes, as it may on the GPU.  A wait
 * the order of the emulation cannot satisfy (arrivals missing) would hang or
 * race on the GPU: it is reported and the program exits (status 3).  So is
 * a phase whose landed bytes differ from the announced ones (the GPU hangs). */
typedef struct {
  unsigned char *dst;
  unsigned char *bytes;         /* read at issue (nothing writes a tensor a launch copies from) */
  long n;
} q_mbar_copy;

typedef struct {
  int count;                    /* arrivals per phase (0: not initialised) */
  int pending;                  /* arrivals the current phase still expects */
  long tx;                      /* bytes announced and not landed */
  long phase;                   /* phases completed */
  q_mbar_copy *copies;
  int n, cap;
  long *seen;                   /* per thread: the phases it saw complete by waiting (the checker's) */
} q_mbar;

typedef struct {
  q_mbar *b;
  int n, threads;
} q_mbar_block;

static void q_mbar_fail(int i, const char *what) {
  fprintf(stderr, "qir: mbarrier %d: %s\n", i, what);
  exit(3);
}

static inline void q_mbar_block_init(q_mbar_block *s, int n, int threads) {
  s->n = n;
  s->threads = threads;
  s->b = (q_mbar *)calloc((size_t)n, sizeof *s->b);
  if (!s->b) { fputs("qir: out of memory (mbarriers)\n", stderr); exit(2); }
  for (int i = 0; i < n; i++)
    if (!(s->b[i].seen = (long *)calloc((size_t)threads, sizeof(long)))) { fputs("qir: out of memory (mbarriers)\n", stderr); exit(2); }
}

static inline void q_mbar_block_free(q_mbar_block *s) {
  for (int i = 0; i < s->n; i++) {
    for (int c = 0; c < s->b[i].n; c++) free(s->b[i].copies[c].bytes);
    free(s->b[i].copies);
    free(s->b[i].seen);
  }
  free(s->b);
}

static inline q_mbar *q_mbar_at(q_mbar_block *s, int i) {
  if (i < 0 || i >= s->n) q_mbar_fail(i, "index out of range");
  q_mbar *b = &s->b[i];
  if (!b->count) q_mbar_fail(i, "used before mbarrier.init");
  return b;
}

static inline void q_mbar_init(q_mbar_block *s, int i, int count) {
  if (i < 0 || i >= s->n || count < 1) q_mbar_fail(i, "bad mbarrier.init");
  q_mbar *b = &s->b[i];
  b->count = b->pending = count;
  b->tx = 0;
  b->phase = 0;
}

/* The current phase, if every arrival came: its copies land; complete when
 * the announced bytes all landed.  True when a phase completed. */
static inline int q_mbar_settle(q_mbar *b, int i) {
  if (b->pending > 0) return 0;
  for (int c = 0; c < b->n; c++) {
    memcpy(b->copies[c].dst, b->copies[c].bytes, (size_t)b->copies[c].n);
    b->tx -= b->copies[c].n;
    free(b->copies[c].bytes);
  }
  b->n = 0;
  if (b->tx != 0) q_mbar_fail(i, "the bytes that landed differ from arrive.expect_tx's (the GPU would hang)");
  b->phase++;
  b->pending = b->count;
  return 1;
}

/* mbarrier.arrive (tx = 0) or mbarrier.arrive.expect_tx (tx bytes) */
static inline void q_mbar_arrive(q_mbar_block *s, int i, long tx) {
  q_mbar *b = q_mbar_at(s, i);
  if (b->pending == 0) q_mbar_settle(b, i);   /* the phase completed unobserved: this arrival is the next one's */
  b->tx += tx;
  b->pending--;
}

/* mbarrier.try_wait.parity in a loop, by thread tid. */
static inline void q_mbar_wait(q_mbar_block *s, int i, int parity, int tid) {
  q_mbar *b = q_mbar_at(s, i);
  if ((b->phase & 1) == parity && !q_mbar_settle(b, i))
    q_mbar_fail(i, "a wait for a phase whose arrivals never come (the GPU would hang or race)");
  if (tid >= 0 && tid < s->threads) b->seen[tid] = b->phase;
}

/* A copy of n bytes, already read from global memory, completing on barrier i. */
static inline void q_mbar_copy_issue(q_mbar_block *s, int i, void *dst, unsigned char *bytes, long n) {
  q_mbar *b = q_mbar_at(s, i);
  if (b->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 8;
    q_mbar_copy *c = (q_mbar_copy *)realloc(b->copies, sizeof *c * (size_t)cap);
    if (!c) { fputs("qir: out of memory (mbarrier copies)\n", stderr); exit(2); }
    b->copies = c;
    b->cap = cap;
  }
  b->copies[b->n++] = (q_mbar_copy){.dst = (unsigned char *)dst, .bytes = bytes, .n = n};
}
