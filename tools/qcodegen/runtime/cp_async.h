/* cp.async, emulated for one block of the C back end (qcodegen runtime).
 *
 * cp.async.cg.shared.global [dst], [src], 16, src_size copies 16 bytes (.ca: 4, 8 or 16)
 * (zeros where src_size is 0) asynchronously: the copy belongs to the
 * thread's open group, cp.async.commit_group closes that group, and
 * cp.async.wait_group N returns once at most N of the thread's committed
 * groups are still in flight.  Here a copy waits in its thread's queue until
 * a wait retires its group, and only then writes shared memory, so a read
 * before the wait sees the old bytes, as it may on the GPU.  The source is
 * read at issue (nothing writes a tensor a launch stages from).  The checker
 * (-check) follows the same groups with shadow cells instead of bytes
 * (q_cpc_*, check.c's runtime text), reading `committed` from here. */
typedef struct {
  void *dst;
  int size;                     /* 4, 8 or 16 bytes */
  unsigned char bytes[16];
  long group;                   /* the thread's commit count when it was issued */
} q_cpa_copy;

typedef struct {
  q_cpa_copy *copies;
  long n, cap;
  long committed;               /* groups closed so far */
} q_cpa_thread;

typedef struct {
  q_cpa_thread *t;
  int threads;
} q_cpa_block;

static inline void q_cpa_init(q_cpa_block *s, int threads) {
  s->threads = threads;
  s->t = (q_cpa_thread *)calloc((size_t)threads, sizeof *s->t);
  if (!s->t) { fputs("qir: out of memory (cp.async queues)\n", stderr); exit(2); }
}

/* A block ends with its copies landed (the kernel waited for them). */
static inline void q_cpa_free(q_cpa_block *s) {
  for (int i = 0; i < s->threads; i++) free(s->t[i].copies);
  free(s->t);
}

static inline void q_cp_async_n(q_cpa_block *s, int tid, int size, void *dst, const void *src) {
  q_cpa_thread *t = &s->t[tid];
  if (t->n == t->cap) {
    long cap = t->cap ? 2 * t->cap : 16;
    q_cpa_copy *c = (q_cpa_copy *)realloc(t->copies, sizeof *c * (size_t)cap);
    if (!c) { fputs("qir: out of memory (cp.async queues)\n", stderr); exit(2); }
    t->copies = c;
    t->cap = cap;
  }
  q_cpa_copy *c = &t->copies[t->n++];
  c->dst = dst;
  c->size = size;
  c->group = t->committed;
  if (src) memcpy(c->bytes, src, (size_t)size);
  else memset(c->bytes, 0, (size_t)size);
}

static inline void q_cp_async(q_cpa_block *s, int tid, void *dst, const void *src) { q_cp_async_n(s, tid, 16, dst, src); }

static inline void q_cp_commit(q_cpa_block *s, int tid) { s->t[tid].committed++; }

/* Lands, in issue order, every copy of a group older than the newest `pending` committed ones. */
static inline void q_cp_wait(q_cpa_block *s, int tid, int pending) {
  q_cpa_thread *t = &s->t[tid];
  long keep = 0;
  for (long i = 0; i < t->n; i++) {
    q_cpa_copy *c = &t->copies[i];
    if (c->group < t->committed - pending) memcpy(c->dst, c->bytes, (size_t)c->size);
    else t->copies[keep++] = *c;
  }
  t->n = keep;
}
