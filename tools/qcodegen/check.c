/* check.c: `qcodegen -c -check`, the race, bounds and barrier checker.
 *
 * The C back end already runs a kernel's plan phase by phase; in check mode
 * every access the kernel makes goes through a shadow-memory test as well
 * (compute-sanitizer's racecheck, memcheck, initcheck and synccheck, without
 * a GPU):
 *   - shared memory: a shadow cell per element remembers its last writer and
 *     its readers (thread, or the warp for matrix-unit statements) and the
 *     barrier interval of each access, so two accesses of one element by
 *     different threads with no barrier between them are a race (read after
 *     write, write after read, write after write); a `__syncwarp` orders the
 *     lanes of one warp only; a read of an element nobody in the block wrote
 *     is an initcheck error; an index outside the array is out of bounds;
 *   - global tensors: every index is checked against the tensor's extent, and
 *     a shadow cell per element of every tensor a kernel writes remembers the
 *     (kernel, block, thread) that wrote it and in which grid epoch (a launch
 *     the order guarantees; an rprogram wave reached through waits shares its
 *     predecessor's epoch, ordered only after the waited tasks), so a read or write of
 *     an element that another block writes without a launch boundary between
 *     them is reported with both tasks;
 *   - the same cells keep the GPU launch of each write (the C launches of an
 *     rprogram's waves or a device loop's phases are one): a read through a
 *     parameter a GPU reads as const __restrict__ (kparam.nc, ld.global.nc) of
 *     an element written earlier in that launch is reported;
 *   - the arena: poisoned at qir_init, with a map of the bytes each run wrote
 *     (copies in, kernel stores, device-to-device copies); a kernel read of an
 *     arena element nobody wrote is an uninitialised global read;
 *   - cp.async (sm_80 pipelines): a copy's shared cells are pending, owned by
 *     the issuing thread and its commit group, from issue until the
 *     cp.async.wait_group that retires the group; only then are they written
 *     (by that thread, at the wait), so the readers need a barrier after it.
 *     A read of a pending cell, a read after the wait with no barrier, a copy
 *     into a cell another thread read in the same barrier interval (a stage
 *     refilled while being read), a second write onto a pending cell and a
 *     copy still pending when the block ends are each their own hazard.  The
 *     tracking (q_cpc_*) mirrors the emulation's queues (runtime/cp_async.h)
 *     and reads its commit counts, so both agree on which group is which;
 *   - barriers: a barrier, warp shuffle or matrix-unit statement reached from
 *     per-thread control flow (some threads, or all but not at block level),
 *     a barrier loop whose bounds differ between threads, and shuffles that
 *     name lanes the block does not have.
 * Each hazard is reported once per (kind, access, other access), located at
 * the .qir line of the op the kernel came from, capped; qir_run returns 1.
 *
 * The instrumentation is printed by kast.c (expressions and statements, when
 * kprint_style.chk is set) and print_c.c (block level); this file holds the
 * site table (which access of which kernel a report is about) and the runtime
 * text the checked program carries. */
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "kast.h"

struct cg_check {
  qir_module *m;
  const char *file;             /* the .qir file name for locations */
  int n_sites, cap_sites;
  const kkernel **site_kernel;
  const char **site_text;
  const char **site_mem;        /* the shared array the access is of, or NULL */
};

cg_check *cg_check_new(qir_module *m, const char *file) {
  cg_check *c = qir_alloc(m, sizeof *c);
  c->m = m;
  c->file = file ? file : "<stdin>";
  return c;
}

static int new_site(cg_check *c, const kkernel *k, const char *mem, const char *fmt, va_list ap) {
  char buf[256];
  vsnprintf(buf, sizeof buf, fmt, ap);
  /* one site per (kernel, access text): an access printed twice (a main loop
   * and its remainder) is reported once */
  for (int i = c->n_sites - 1; i >= 0 && c->site_kernel[i] == k; i--)
    if (!strcmp(c->site_text[i], buf)) return i;
  if (c->n_sites == c->cap_sites) {
    int cap = c->cap_sites ? 2 * c->cap_sites : 64;
    const kkernel **ks = qir_alloc(c->m, sizeof *ks * (size_t)cap);
    const char **ts = qir_alloc(c->m, sizeof *ts * (size_t)cap);
    const char **ms = qir_alloc(c->m, sizeof *ms * (size_t)cap);
    if (c->n_sites) {
      memcpy(ks, c->site_kernel, sizeof *ks * (size_t)c->n_sites);
      memcpy(ts, c->site_text, sizeof *ts * (size_t)c->n_sites);
      memcpy(ms, c->site_mem, sizeof *ms * (size_t)c->n_sites);
    }
    c->site_kernel = ks;
    c->site_text = ts;
    c->site_mem = ms;
    c->cap_sites = cap;
  }
  c->site_kernel[c->n_sites] = k;
  c->site_text[c->n_sites] = qir_strdup(c->m, buf);
  c->site_mem[c->n_sites] = mem ? qir_strdup(c->m, mem) : NULL;
  return c->n_sites++;
}

int cg_check_site(cg_check *c, const kkernel *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int site = new_site(c, k, NULL, fmt, ap);
  va_end(ap);
  return site;
}

int cg_check_shared_site(cg_check *c, const kkernel *k, const char *mem, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int site = new_site(c, k, mem, fmt, ap);
  va_end(ap);
  return site;
}

/* The runtime: shadow memory, hazard records.  Printed once, after the
 * backend's prelude, in check mode only.  The program is serial (no OpenMP):
 * the shadow state is the program's own. */
static const char runtime_text[] =
    "/* ---- race, bounds and barrier checker (qcodegen -check) */\n"
    "enum { Q_HZ_RAW, Q_HZ_WAR, Q_HZ_WAW, Q_HZ_OOB_SHARED, Q_HZ_OOB_GLOBAL, Q_HZ_OOB_REG, Q_HZ_UNINIT,\n"
    "       Q_HZ_DIVERGENT, Q_HZ_DIVERGENT_LOOP, Q_HZ_ABSENT_LANE, Q_HZ_G_RAW, Q_HZ_G_WAR, Q_HZ_G_WAW, Q_HZ_DEADLOCK,\n"
    "       Q_HZ_UNWRITTEN, Q_HZ_NC_WRITTEN, Q_HZ_UNINIT_GLOBAL,\n"
    "       Q_HZ_CPA_PENDING, Q_HZ_CPA_RAW, Q_HZ_CPA_WAR, Q_HZ_CPA_WAW, Q_HZ_CPA_UNWAITED,\n"
    "       Q_HZ_TMA_EARLY, Q_HZ_WGMMA_WAR, Q_HZ_PROXY };\n"
    "/* A block being checked.  bep counts its block barriers, sep every barrier\n"
    " * (block or warp).  Actors: thread t is t; warp w as a whole (matrix-unit\n"
    " * statements) is threads + w.  A task is (kernel, block): an rprogram's\n"
    " * wave reports its vEUs' blocks as the tasks they run. */\n"
    "typedef struct { int kernel; long block; int threads, warp; uint32_t bep, sep; int reach_site[8]; long reach_n[8]; int n_reach; } q_blk;\n"
    "/* one distinct hazard: kind, the access, the other access (-1 none); a..e its numbers */\n"
    "typedef struct { int kind, site, other; long a, b, c, d, e; int threads; long count; int printed; } q_hz;\n"
    "#define Q_HZ_CAP 32\n"
    "static q_hz q_hz_list[Q_HZ_CAP];\n"
    "static int q_hz_n;\n"
    "static long q_hz_more;                  /* distinct hazards past the cap */\n"
    "static int q_hz_last = -1;              /* the record hit last: repeats are the common case */\n"
    "static inline void q_hz_add(const q_blk *blk, int kind, int site, int other, long a, long b, long c, long e) {\n"
    "  if (q_hz_last >= 0 && q_hz_list[q_hz_last].kind == kind && q_hz_list[q_hz_last].site == site && q_hz_list[q_hz_last].other == other) {\n"
    "    q_hz_list[q_hz_last].count++;\n"
    "    return;\n"
    "  }\n"
    "  for (int i = 0; i < q_hz_n; i++)\n"
    "    if (q_hz_list[i].kind == kind && q_hz_list[i].site == site && q_hz_list[i].other == other) {\n"
    "      q_hz_list[i].count++;\n"
    "      q_hz_last = i;\n"
    "      return;\n"
    "    }\n"
    "  if (q_hz_n == Q_HZ_CAP) { q_hz_more++; return; }\n"
    "  q_hz_list[q_hz_n] = (q_hz){kind, site, other, a, b, c, blk->block, e, blk->threads, 1, 0};\n"
    "  q_hz_last = q_hz_n++;\n"
    "}\n"
    "static inline int q_warp_of(const q_blk *b, int actor) { return actor < b->threads ? actor / b->warp : actor - b->threads; }\n"
    "static inline int q_ordered(const q_blk *b, int actor, uint32_t bep, uint32_t sep, int cur) {\n"
    "  return actor == cur || bep != b->bep || (sep != b->sep && q_warp_of(b, actor) == q_warp_of(b, cur));\n"
    "}\n"
    "static inline void q_barrier(q_blk *b, int warp_only) { if (!warp_only) b->bep++; b->sep++; }\n"
    "\n"
    "/* shared memory: w_actor -1 = not written in this block; r_actor -1 = no reader,\n"
    " * -2 = several (r_warp: their common warp, or -1); p_n cp.async copies in flight\n"
    " * into the cell, the newest issued by p_actor at p_site; w_async: the last write\n"
    " * was a cp.async, landed at the wait that retired it */\n"
    "typedef struct { int32_t w_actor, r_actor, r_warp, w_site, r_site; uint32_t w_bep, w_sep, r_bep, r_sep; int32_t p_actor, p_site; int16_t p_n, w_async;\n"
    "  /* Hopper: t_bar the mbarrier a tensor copy into the cell completes on (-1 none), in its phase\n"
    "   * t_phase, issued at t_site; a_n wgmma in flight reading it (the last issued at a_site by\n"
    "   * warpgroup a_wg); g_writer 1 + the thread whose ordinary store no fence.proxy.async followed yet */\n"
    "  int32_t t_bar, t_site, a_n, a_site, a_wg, g_writer, g_site; long t_phase; } q_scell;\n"
    "static inline void q_shadow_reset(q_scell *s, long n) {\n"
    "  for (long i = 0; i < n; i++) s[i] = (q_scell){.w_actor = -1, .r_actor = -1, .r_warp = -1, .w_site = -1, .r_site = -1, .p_actor = -1, .p_site = -1,\n"
    "                                             .t_bar = -1, .t_site = -1, .a_site = -1, .a_wg = -1, .g_site = -1};\n"
    "}\n"
    "static inline int q_readers_ordered(const q_blk *b, const q_scell *c, int cur) {\n"
    "  if (c->r_actor == -1) return 1;\n"
    "  if (c->r_actor >= 0) return q_ordered(b, c->r_actor, c->r_bep, c->r_sep, cur);\n"
    "  return c->r_bep != b->bep || (c->r_sep != b->sep && c->r_warp >= 0 && c->r_warp == q_warp_of(b, cur));\n"
    "}\n"
    "static inline long q_sr(q_blk *b, q_scell *sh, long n, long i, int actor, int site) {\n"
    "  if (i < 0 || i >= n) { q_hz_add(b, Q_HZ_OOB_SHARED, site, -1, i, n, actor, 0); return 0; }\n"
    "  q_scell *c = &sh[i];\n"
    "  if (c->p_n) q_hz_add(b, Q_HZ_CPA_PENDING, site, c->p_site, i, c->p_actor, actor, 0);\n"
    "  else if (c->w_actor == -1) q_hz_add(b, Q_HZ_UNINIT, site, -1, i, n, actor, 0);\n"
    "  else if (!q_ordered(b, c->w_actor, c->w_bep, c->w_sep, actor))\n"
    "    q_hz_add(b, c->w_async ? Q_HZ_CPA_RAW : Q_HZ_RAW, site, c->w_site, i, c->w_actor, actor, 0);\n"
    "  if (c->r_actor == -1 || c->r_bep != b->bep) { c->r_actor = actor; c->r_warp = q_warp_of(b, actor); }\n"
    "  else if (c->r_actor != actor) { c->r_actor = -2; if (c->r_warp != q_warp_of(b, actor)) c->r_warp = -1; }\n"
    "  c->r_bep = b->bep; c->r_sep = b->sep; c->r_site = site;\n"
    "  return i;\n"
    "}\n"
    "static inline long q_sw(q_blk *b, q_scell *sh, long n, long i, int actor, int site) {\n"
    "  if (i < 0 || i >= n) { q_hz_add(b, Q_HZ_OOB_SHARED, site, -2, i, n, actor, 0); return 0; }\n"
    "  q_scell *c = &sh[i];\n"
    "  if (c->p_n) q_hz_add(b, Q_HZ_CPA_WAW, site, c->p_site, i, c->p_actor, actor, 0);\n"
    "  else if (c->w_actor != -1 && !q_ordered(b, c->w_actor, c->w_bep, c->w_sep, actor)) q_hz_add(b, Q_HZ_WAW, site, c->w_site, i, c->w_actor, actor, 0);\n"
    "  if (!q_readers_ordered(b, c, actor)) q_hz_add(b, Q_HZ_WAR, site, c->r_site, i, c->r_actor, actor, 0);\n"
    "  if (c->a_n) q_hz_add(b, Q_HZ_WGMMA_WAR, site, c->a_site, i, c->a_wg, actor, 0);\n"
    "  c->w_actor = actor; c->w_bep = b->bep; c->w_sep = b->sep; c->w_site = site; c->w_async = 0;\n"
    "  c->t_bar = -1;\n"
    "  if (actor < b->threads) { c->g_writer = actor + 1; c->g_site = site; }\n"
    "  return i;\n"
    "}\n"
    "/* cp.async: each thread's copies in flight, as the checker sees them (the numbers are\n"
    " * runtime/cp_async.h's q_cpa_block; its commit counts number the groups here too).  A\n"
    " * copy's cells are pending from issue to the wait that retires its group, and only\n"
    " * then written, by the issuing thread at the wait. */\n"
    "typedef struct { q_scell *cells; long first; int n, site; long group; } q_cpc_copy;\n"
    "typedef struct { q_cpc_copy *copies; long n, cap; } q_cpc_thread;\n"
    "typedef struct { q_cpc_thread *t; int threads; } q_cpc_block;\n"
    "static inline void q_cpc_init(q_cpc_block *s, int threads) {\n"
    "  s->threads = threads;\n"
    "  s->t = (q_cpc_thread *)calloc((size_t)threads, sizeof *s->t);\n"
    "  if (!s->t) { fputs(\"qir check: out of memory\\n\", stderr); exit(2); }\n"
    "}\n"
    "/* issue: the 16 bytes at elements i .. i+width-1 of shared `sh`; returns where the\n"
    " * emulation may copy them (0 when out of bounds, so that the run can go on) */\n"
    "static inline long q_cpc_issue(q_blk *b, q_cpc_block *s, const q_cpa_block *a, q_scell *sh, long n, long i, int width, int tid, int site) {\n"
    "  long lo = i, hi = i + width;\n"
    "  if (lo < 0 || hi > n) { q_hz_add(b, Q_HZ_OOB_SHARED, site, -2, lo < 0 || lo >= n ? lo : n, n, tid, 0); lo = lo < 0 ? 0 : lo; hi = hi > n ? n : hi; }\n"
    "  for (long j = lo; j < hi; j++) {\n"
    "    q_scell *c = &sh[j];\n"
    "    if (c->p_n) q_hz_add(b, Q_HZ_CPA_WAW, site, c->p_site, j, c->p_actor, tid, 0);\n"
    "    else if (c->w_actor != -1 && !q_ordered(b, c->w_actor, c->w_bep, c->w_sep, tid)) q_hz_add(b, Q_HZ_WAW, site, c->w_site, j, c->w_actor, tid, 0);\n"
    "    if (!q_readers_ordered(b, c, tid)) q_hz_add(b, Q_HZ_CPA_WAR, site, c->r_site, j, c->r_actor, tid, 0);\n"
    "    c->p_n++; c->p_actor = tid; c->p_site = site;\n"
    "  }\n"
    "  if (hi <= lo) return 0;\n"
    "  q_cpc_thread *t = &s->t[tid];\n"
    "  if (t->n == t->cap) {\n"
    "    long cap = t->cap ? 2 * t->cap : 16;\n"
    "    q_cpc_copy *p = (q_cpc_copy *)realloc(t->copies, sizeof *p * (size_t)cap);\n"
    "    if (!p) { fputs(\"qir check: out of memory\\n\", stderr); exit(2); }\n"
    "    t->copies = p; t->cap = cap;\n"
    "  }\n"
    "  t->copies[t->n++] = (q_cpc_copy){sh + lo, lo, (int)(hi - lo), site, a->t[tid].committed};\n"
    "  return lo == i && hi == i + width ? i : 0;\n"
    "}\n"
    "/* the wait: the copies of groups older than the newest `pending` land, written by tid now */\n"
    "static inline void q_cpc_wait(q_blk *b, q_cpc_block *s, const q_cpa_block *a, int tid, int pending) {\n"
    "  q_cpc_thread *t = &s->t[tid];\n"
    "  long keep = 0, retire = a->t[tid].committed - pending;\n"
    "  for (long k = 0; k < t->n; k++) {\n"
    "    q_cpc_copy *p = &t->copies[k];\n"
    "    if (p->group >= retire) { t->copies[keep++] = *p; continue; }\n"
    "    for (int e = 0; e < p->n; e++) {\n"
    "      q_scell *c = &p->cells[e];\n"
    "      if (--c->p_n == 0) { c->p_actor = -1; c->p_site = -1; }\n"
    "      c->w_actor = tid; c->w_bep = b->bep; c->w_sep = b->sep; c->w_site = p->site; c->w_async = 1;\n"
    "      c->g_writer = tid + 1; c->g_site = p->site;   /* cp.async writes through the generic proxy */\n"
    "    }\n"
    "  }\n"
    "  t->n = keep;\n"
    "}\n"
    "/* the block's end: a copy still in flight was never waited for */\n"
    "static inline void q_cpc_end(q_blk *b, q_cpc_block *s) {\n"
    "  for (int tid = 0; tid < s->threads; tid++) {\n"
    "    q_cpc_thread *t = &s->t[tid];\n"
    "    for (long k = 0; k < t->n; k++) q_hz_add(b, Q_HZ_CPA_UNWAITED, t->copies[k].site, -1, t->copies[k].first, t->copies[k].group, tid, 0);\n"
    "    free(t->copies);\n"
    "  }\n"
    "  free(s->t);\n"
    "}\n"
    "/* Hopper (lower_wgmma.c): tensor copies and wgmma as the async proxy's accesses.  A copy's\n"
    " * cells belong to its mbarrier phase; a wgmma may read them only once its warpgroup waited for\n"
    " * that phase (q_mbar's seen), and no copy or store may write a cell a wgmma still reads (until\n"
    " * the wait_group that retires it); a cell an ordinary store wrote needs fence.proxy.async by\n"
    " * that thread before the async proxy reads it. */\n"
    "static inline void q_tma_check(q_blk *b, const q_mbar_block *mb, int bar, q_scell *sh, long n, long first, long count, int tid, int site) {\n"
    "  if (first < 0 || first + count > n) { q_hz_add(b, Q_HZ_OOB_SHARED, site, -2, first, n, tid, 0); return; }\n"
    "  long phase = bar >= 0 && bar < mb->n ? mb->b[bar].phase : 0;\n"
    "  for (long j = first; j < first + count; j++) {\n"
    "    q_scell *c = &sh[j];\n"
    "    if (c->a_n) q_hz_add(b, Q_HZ_WGMMA_WAR, site, c->a_site, j, c->a_wg, tid, 0);\n"
    "    c->t_bar = bar; c->t_phase = phase; c->t_site = site; c->g_writer = 0;\n"
    "    c->w_actor = tid; c->w_bep = b->bep; c->w_sep = b->sep; c->w_site = site; c->w_async = 1;\n"
    "  }\n"
    "}\n"
    "/* the shared cells operand (mn, k) of a wgmma reads through descriptor d: mark (delta 1) or release (-1) */\n"
    "static inline void q_wgmma_cells(q_blk *b, const q_mbar_block *mb, q_scell *sh, unsigned base, long n, uint64_t d, int mn_major, int rows,\n"
    "                                 int delta, int wg, int site) {\n"
    "  for (int mn = 0; mn < rows; mn++)\n"
    "    for (int k = 0; k < 16; k++) {\n"
    "      unsigned a = q_wgmma_addr(d, mn_major, mn, k);   /* as the emulation reads them (runtime/wgmma.h) */\n"
    "      long i = (long)(a - base) / 2;\n"
    "      if (a < base || i >= n) { q_hz_add(b, Q_HZ_OOB_SHARED, site, -1, i, n, b->threads + wg, 0); return; }\n"
    "      q_scell *c = &sh[i];\n"
    "      if (delta < 0) { if (c->a_n > 0) c->a_n--; continue; }\n"
    "      if (mb && c->t_bar >= 0 && c->t_bar < mb->n && mb->b[c->t_bar].seen[wg * 128] <= c->t_phase)\n"
    "        q_hz_add(b, Q_HZ_TMA_EARLY, site, c->t_site, i, c->t_bar, wg, c->t_phase);\n"
    "      else if (c->t_bar < 0 && c->w_actor == -1) q_hz_add(b, Q_HZ_UNINIT, site, -1, i, n, b->threads + wg, 0);\n"
    "      if (c->g_writer) q_hz_add(b, Q_HZ_PROXY, site, c->g_site, i, c->g_writer - 1, wg, 0);\n"
    "      c->a_n++; c->a_site = site; c->a_wg = wg;\n"
    "    }\n"
    "}\n"
    "static inline void q_wgmma_check(q_blk *b, const q_mbar_block *mb, q_wgmma_op *op, int wg, q_scell *sa, q_scell *sb, int site_a, int site_b) {\n"
    "  op->chk_a = sa; op->chk_b = sb; op->chk_site = sa ? site_a : site_b;\n"
    "  if (sa) q_wgmma_cells(b, mb, sa, op->a_base, op->a_elems, op->da, op->ta, 64, 1, wg, site_a);\n"
    "  q_wgmma_cells(b, mb, sb, op->b_base, op->b_elems, op->db, op->tb, op->n, 1, wg, site_b);\n"
    "}\n"
    "/* wgmma.wait_group: the cells of the groups it retires are free again */\n"
    "static inline void q_wgmma_check_wait(q_blk *b, const q_mbar_block *mb, const q_wgmma_block *s, int wg, int pending) {\n"
    "  const q_wgmma_queue *q = &s->q[wg];\n"
    "  for (int i = 0; i < q->n; i++) {\n"
    "    const q_wgmma_op *op = &q->ops[i];\n"
    "    if (op->group >= q->committed - pending || !op->chk_b) continue;\n"
    "    if (op->chk_a) q_wgmma_cells(b, mb, (q_scell *)op->chk_a, op->a_base, op->a_elems, op->da, op->ta, 64, -1, wg, op->chk_site);\n"
    "    q_wgmma_cells(b, mb, (q_scell *)op->chk_b, op->b_base, op->b_elems, op->db, op->tb, op->n, -1, wg, op->chk_site);\n"
    "  }\n"
    "}\n"
    "/* fence.proxy.async by tid: its ordinary stores are visible to the async proxy */\n"
    "static inline void q_proxy_fence(q_scell *sh, long n, int tid) {\n"
    "  for (long i = 0; i < n; i++)\n"
    "    if (sh[i].g_writer == tid + 1) sh[i].g_writer = 0;\n"
    "}\n"
    "/* a warp's 16x16 tile at off + r * ld + c (either layout touches the same elements) */\n"
    "static inline void q_mma_tile(q_blk *b, q_scell *sh, long n, long off, long ld, int write, int warp, int site) {\n"
    "  for (long r = 0; r < 16; r++)\n"
    "    for (long c = 0; c < 16; c++) {\n"
    "      long i = off + r * ld + c;\n"
    "      if (i < 0 || i >= n) { q_hz_add(b, Q_HZ_OOB_SHARED, site, write ? -2 : -1, i, n, b->threads + warp, 0); return; }\n"
    "      if (write) q_sw(b, sh, n, i, b->threads + warp, site); else q_sr(b, sh, n, i, b->threads + warp, site);\n"
    "    }\n"
    "}\n"
    "/* ldmatrix: row[l] starts the 8 elements lane l gives for matrix l / 8 (a warp's read) */\n"
    "static inline void q_ldmatrix_check(q_blk *b, q_scell *sh, long n, const long *row, int count, int warp, int site) {\n"
    "  for (int l = 0; l < 8 * count; l++)\n"
    "    for (long e = 0; e < 8; e++) q_sr(b, sh, n, row[l] + e, b->threads + warp, site);\n"
    "}\n"
    "/* register arrays: bounds only */\n"
    "static inline long q_ix(q_blk *b, long i, long n, int tid, int site) {\n"
    "  if (i < 0 || i >= n) { q_hz_add(b, Q_HZ_OOB_REG, site, -1, i, n, tid, 0); return 0; }\n"
    "  return i;\n"
    "}\n"
    "\n"
    "/* barriers reached from per-thread code during one phase: always a hazard */\n"
    "static inline void q_reach(q_blk *b, int site) {\n"
    "  for (int i = 0; i < b->n_reach; i++) if (b->reach_site[i] == site) { b->reach_n[i]++; return; }\n"
    "  if (b->n_reach < 8) { b->reach_site[b->n_reach] = site; b->reach_n[b->n_reach++] = 1; }\n"
    "}\n"
    "static inline void q_phase_end(q_blk *b) {\n"
    "  for (int i = 0; i < b->n_reach; i++) q_hz_add(b, Q_HZ_DIVERGENT, b->reach_site[i], -1, b->reach_n[i], b->threads, 0, 0);\n"
    "  b->n_reach = 0;\n"
    "}\n"
    "/* a barrier loop's bounds, thread by thread: thread 0's are the block's */\n"
    "static inline void q_loop_bounds(q_blk *b, int tid, long lo, long hi, long *lo0, long *hi0, int site) {\n"
    "  if (tid == 0) { *lo0 = lo; *hi0 = hi; }\n"
    "  else if (lo != *lo0 || hi != *hi0) q_hz_add(b, Q_HZ_DIVERGENT_LOOP, site, -1, lo, hi, tid, (*lo0 & 0xffffffffL) | (*hi0 << 32));\n"
    "}\n"
    "static inline void q_shuffle(q_blk *b, int width, int site) {\n"
    "  if (b->threads % b->warp) q_hz_add(b, Q_HZ_ABSENT_LANE, site, -1, b->threads, b->warp, width, 0);\n"
    "}\n"
    "\n"
    "/* global memory: a region per tensor some kernel writes, found by its address */\n"
    "typedef struct { uint32_t w_gep, r_gep, w_bep, w_launch; int32_t w_kernel, w_block, w_tid, w_site, r_kernel, r_block, r_site; } q_gcell;\n"
    "typedef struct q_region { const void *base; long n; size_t esize; q_gcell *cells; struct q_region *next; } q_region;\n"
    "static q_region *q_regions;\n"
    "static uint32_t q_gep = 1;             /* grid epoch: a new one at every launch the order guarantees */\n"
    "/* GPU launch: the C launches of one group (an rprogram's waves, a device loop's phases) are one\n"
    " * launch on a GPU; its first kernel (entry), another kernel, or a copy in between starts the next */\n"
    "static uint32_t q_glaunch = 1;\n"
    "static int q_glaunch_group = -1;\n"
    "static inline void q_launch(int ordered, int group, int entry) {\n"
    "  if (ordered) q_gep++;\n"
    "  if (entry || group < 0 || group != q_glaunch_group) q_glaunch++;\n"
    "  q_glaunch_group = group;\n"
    "}\n"
    "/* The arena (device memory for tensors): cudaMalloc does not zero it, so in a checked\n"
    " * program it starts poisoned (0xff bytes: NaN, -1), and a byte map says which bytes\n"
    " * a launch or a copy wrote in this run.  Constants and weights live elsewhere. */\n"
    "static unsigned char *q_arena, *q_arena_written;\n"
    "static size_t q_arena_n;\n"
    "static void q_arena_watch(void *arena, size_t n) {\n"
    "  free(q_arena_written);\n"
    "  q_arena = (unsigned char *)arena; q_arena_n = arena ? n : 0;\n"
    "  q_arena_written = (unsigned char *)calloc(q_arena_n ? q_arena_n : 1, 1);\n"
    "  if (!q_arena_written) { fputs(\"qir check: out of memory\\n\", stderr); exit(2); }\n"
    "  if (q_arena_n) memset(q_arena, 0xff, q_arena_n);\n"
    "}\n"
    "/* after a run: nothing counts as written for the next one, and the memory is poisoned again */\n"
    "static inline void q_arena_forget(void) {\n"
    "  if (q_arena_n) { memset(q_arena_written, 0, q_arena_n); memset(q_arena, 0xff, q_arena_n); }\n"
    "}\n"
    "/* the written-bytes map of [p, p + n) when it lies in the arena, else NULL */\n"
    "static inline unsigned char *q_arena_map(const void *p, size_t n) {\n"
    "  const unsigned char *c = (const unsigned char *)p;\n"
    "  if (!q_arena_n || c < q_arena || c + n > q_arena + q_arena_n) return NULL;\n"
    "  return q_arena_written + (c - q_arena);\n"
    "}\n"
    "/* a copy to device memory (the prelude's q_h2d, q_d2d; s NULL: from the host) is a stream\n"
    " * operation of its own: it ends the GPU launch, and its bytes are as written as its source's */\n"
    "static void q_copied(void *d, const void *s, size_t n) {\n"
    "  q_glaunch_group = -1;\n"
    "  unsigned char *dm = q_arena_map(d, n), *sm = s ? q_arena_map(s, n) : NULL;\n"
    "  if (!dm || !n) return;\n"
    "  if (sm) memmove(dm, sm, n); else memset(dm, 1, n);\n"
    "}\n"
    "static inline int q_bytes_written(const unsigned char *m, size_t n) {\n"
    "  for (size_t k = 0; k < n; k++) if (!m[k]) return 0;\n"
    "  return 1;\n"
    "}\n"
    "/* an rprogram's wait within a grid epoch: the blocks (a vEU in a wave) that ran the\n"
    " * waited tasks are ordered before everything after it, until the epoch ends */\n"
    "static unsigned char *q_ord;\n"
    "static long q_ord_n;\n"
    "static int q_ord_kernel = -1;\n"
    "static uint32_t q_ord_gep;\n"
    "static inline void q_order(int kernel, long block) {\n"
    "  if (q_ord_gep != q_gep || q_ord_kernel != kernel) { if (q_ord) memset(q_ord, 0, (size_t)q_ord_n); q_ord_gep = q_gep; q_ord_kernel = kernel; }\n"
    "  if (block >= q_ord_n) {\n"
    "    long n = 2 * block + 64;\n"
    "    unsigned char *o = (unsigned char *)realloc(q_ord, (size_t)n);\n"
    "    if (!o) { fputs(\"qir check: out of memory\\n\", stderr); exit(2); }\n"
    "    memset(o + q_ord_n, 0, (size_t)(n - q_ord_n)); q_ord = o; q_ord_n = n;\n"
    "  }\n"
    "  q_ord[block] = 1;\n"
    "}\n"
    "static inline int q_waited(int kernel, long block) {\n"
    "  return q_ord_gep == q_gep && q_ord_kernel == kernel && block >= 0 && block < q_ord_n && q_ord[block];\n"
    "}\n"
    "static q_region *q_region_of(const void *base, long n, size_t esize, int written) {\n"
    "  q_region *r = q_regions;\n"
    "  while (r && r->base != base) r = r->next;\n"
    "  if (!written) return r && r->esize == esize ? r : NULL;\n"
    "  if (!r) {\n"
    "    r = (q_region *)calloc(1, sizeof *r);\n"
    "    if (!r) { fputs(\"qir check: out of memory\\n\", stderr); exit(2); }\n"
    "    r->base = base; r->next = q_regions; q_regions = r;\n"
    "  }\n"
    "  if (r->n < n || r->esize != esize) {   /* memory reused for another tensor: its cells are from older epochs */\n"
    "    free(r->cells);\n"
    "    r->cells = (q_gcell *)calloc((size_t)(n ? n : 1), sizeof *r->cells);\n"
    "    if (!r->cells) { fputs(\"qir check: out of memory\\n\", stderr); exit(2); }\n"
    "    r->n = n; r->esize = esize;\n"
    "  }\n"
    "  return r;\n"
    "}\n"
    "static inline void q_regions_free(void) {\n"
    "  while (q_regions) { q_region *r = q_regions; q_regions = r->next; free(r->cells); free(r); }\n"
    "}\n"
    "/* an access of element i after its last writer: another task in this epoch (not waited for),\n"
    " * or another thread of this block in this barrier interval, is a race */\n"
    "static inline void q_after_writer(q_blk *b, const q_gcell *c, long i, int tid, int site, int cross, int local) {\n"
    "  if (c->w_gep != q_gep) return;\n"
    "  if (c->w_kernel != b->kernel || c->w_block != b->block) {\n"
    "    if (!q_waited(c->w_kernel, c->w_block)) q_hz_add(b, cross, site, c->w_site, i, c->w_kernel, c->w_block, 0);\n"
    "  } else if (c->w_tid != tid && c->w_bep == b->bep) {\n"
    "    q_hz_add(b, local, site, c->w_site, i, c->w_tid, tid, 1);\n"
    "  }\n"
    "}\n"
    "/* a kernel's tensor parameter: its region (NULL: no kernel writes it), its arena bytes' map\n"
    " * (NULL: not in the arena), its element size, and whether a GPU reads it through\n"
    " * const __restrict__ (nc).  fresh: the kernel writes a new value there, whatever was before. */\n"
    "typedef struct { q_region *r; unsigned char *m; size_t es; int nc; int rank; long bound[8], run[8]; } q_gp;\n"
    "static inline q_gp q_gparam(const void *p, long n, size_t es, int written, int nc, int fresh) {\n"
    "  q_gp g = {q_region_of(p, n, es, written), q_arena_map(p, (size_t)n * es), es, nc, 0, {0}, {0}};\n"
    "  if (fresh && g.m) memset(g.m, 0, (size_t)n * es);\n"
    "  return g;\n"
    "}\n"
    "/* a tensor with symbolic extents (laid out at its bound): the run's extents.  Its elements past\n"
    " * them hold nothing a run reads (their blocks may skip them), so reading one unwritten is no\n"
    " * error and a kernel need not write them; what reads them must not reach the run's outputs, so\n"
    " * a kernel that writes the tensor anew (fresh) finds them poisoned (0xff: NaN, -1) */\n"
    "static const int64_t *q_chk_dims;   /* the run's symbol values (modules with dimension symbols) */\n"
    "static inline int q_past_run(const q_gp *g, long i) {\n"
    "  for (int d = g->rank - 1; d >= 0; d--) {\n"
    "    if (i % g->bound[d] >= g->run[d]) return 1;\n"
    "    i /= g->bound[d];\n"
    "  }\n"
    "  return 0;\n"
    "}\n"
    "static inline void q_gp_run(q_gp *g, void *p, long n, int fresh, int rank, const long *bound, const long *run) {\n"
    "  g->rank = rank;\n"
    "  for (int d = 0; d < rank && d < 8; d++) g->bound[d] = bound[d], g->run[d] = run[d];\n"
    "  for (long i = 0; fresh && i < n; i++)\n"
    "    if (q_past_run(g, i)) memset((unsigned char *)p + (size_t)i * g->es, 0xff, g->es);\n"
    "}\n"
    "static inline long q_gr(q_blk *b, const q_gp *g, long n, long i, int tid, int site) {\n"
    "  if (i < 0 || i >= n) { q_hz_add(b, Q_HZ_OOB_GLOBAL, site, -1, i, n, tid, 0); return 0; }\n"
    "  if (g->m && !q_bytes_written(g->m + (size_t)i * g->es, g->es) && !q_past_run(g, i))\n"
    "    q_hz_add(b, Q_HZ_UNINIT_GLOBAL, site, -1, i, n, tid, 0);\n"
    "  q_region *r = g->r;\n"
    "  if (!r || i >= r->n) return i;\n"
    "  q_gcell *c = &r->cells[i];\n"
    "  if (g->nc && c->w_launch == q_glaunch) q_hz_add(b, Q_HZ_NC_WRITTEN, site, c->w_site, i, c->w_kernel, c->w_block, 0);\n"
    "  q_after_writer(b, c, i, tid, site, Q_HZ_G_RAW, Q_HZ_RAW);\n"
    "  if (c->r_gep != q_gep) { c->r_gep = q_gep; c->r_kernel = b->kernel; c->r_block = (int32_t)b->block; c->r_site = site; }\n"
    "  else if (c->r_kernel != b->kernel || c->r_block != b->block) c->r_block = -2;\n"
    "  return i;\n"
    "}\n"
    "/* after a launch: every element of a tensor the kernel writes was written by it (a plan whose\n"
    " * tiles miss part of the output leaves stale memory there) */\n"
    "static inline void q_coverage(int kernel, const q_gp *g, long n, int site) {\n"
    "  const q_region *r = g->r;\n"
    "  if (!r) return;\n"
    "  long missing = 0, first = -1;\n"
    "  for (long i = 0; i < n && i < r->n; i++)\n"
    "    if (r->cells[i].w_gep != q_gep && !q_past_run(g, i)) { if (first < 0) first = i; missing++; }\n"
    "  if (missing) {\n"
    "    q_blk b = {.kernel = kernel, .block = -1};\n"
    "    q_hz_add(&b, Q_HZ_UNWRITTEN, site, -1, missing, n, first, 0);\n"
    "  }\n"
    "}\n"
    "static inline long q_gw(q_blk *b, const q_gp *g, long n, long i, int tid, int site) {\n"
    "  if (i < 0 || i >= n) { q_hz_add(b, Q_HZ_OOB_GLOBAL, site, -2, i, n, tid, 0); return 0; }\n"
    "  if (g->m) memset(g->m + (size_t)i * g->es, 1, g->es);\n"
    "  q_gcell *c = &g->r->cells[i];\n"
    "  q_after_writer(b, c, i, tid, site, Q_HZ_G_WAW, Q_HZ_WAW);\n"
    "  if (c->r_gep == q_gep && (c->r_block == -2 || c->r_kernel != b->kernel || c->r_block != b->block) &&\n"
    "      !q_waited(c->r_kernel, c->r_block))\n"
    "    q_hz_add(b, Q_HZ_G_WAR, site, c->r_site, i, c->r_kernel, c->r_block, 0);\n"
    "  c->w_gep = q_gep; c->w_launch = q_glaunch; c->w_bep = b->bep; c->w_kernel = b->kernel; c->w_block = (int32_t)b->block; c->w_tid = tid; c->w_site = site;\n"
    "  return i;\n"
    "}\n"
    "\n";

void cg_check_prelude(FILE *o) { fputs(runtime_text, o); }

static void emit_string(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(o, "\\%c", *s);
    else if ((unsigned char)*s < 32) fprintf(o, "\\%03o", (unsigned char)*s);
    else fputc(*s, o);
  }
  fputc('"', o);
}

/* The site table and the report: after every kernel, so that every site is known. */
void cg_check_trailer(FILE *o, const cg_check *c) {
  fputs("\n/* ---- checker sites: the kernel, its op's .qir location, the access */\n"
        "typedef struct { const char *kernel, *op, *summary; int line, col; const char *what, *mem; } q_site;\n"
        "static const q_site q_sites[] = {\n",
        o);
  for (int i = 0; i < c->n_sites; i++) {
    const kkernel *k = c->site_kernel[i];
    fputs("  {", o);
    emit_string(o, k->name);
    fputs(", ", o);
    emit_string(o, k->op_text ? k->op_text : "?");
    fputs(", ", o);
    emit_string(o, k->summary ? k->summary : "");
    fprintf(o, ", %d, %d, ", k->loc.line, k->loc.col);
    emit_string(o, c->site_text[i]);
    fputs(", ", o);
    emit_string(o, c->site_mem[i] ? c->site_mem[i] : "?");
    fputs("},\n", o);
  }
  if (!c->n_sites) fputs("  {\"\", \"\", \"\", 0, 0, \"\", \"\"},\n", o);
  fputs("};\nstatic const char q_check_file[] = ", o);
  emit_string(o, c->file);
  fputs(";\n", o);
  fputs(
      "static inline const char *q_actor(const q_hz *h, long actor, char *buf, size_t n) {\n"
      "  if (actor == -2) snprintf(buf, n, \"several threads\");\n"
      "  else if (actor >= h->threads) snprintf(buf, n, \"warp %ld (matrix-unit statement)\", actor - h->threads);\n"
      "  else snprintf(buf, n, \"thread %ld\", actor);\n"
      "  return buf;\n"
      "}\n"
      "static inline const char *q_block(long block, char *buf, size_t n) {\n"
      "  if (block == -2) snprintf(buf, n, \"several blocks\");\n"
      "  else snprintf(buf, n, \"block %ld\", block);\n"
      "  return buf;\n"
      "}\n"
      "/* Prints the hazards not yet reported, one located line each; returns how many there are in all. */\n"
      "static int q_check_report(void) {\n"
      "  (void)q_chk_dims;\n"
      "  static const char *const race[] = {\"read-after-write\", \"write-after-read\", \"write-after-write\"};\n"
      "  for (int i = 0; i < q_hz_n; i++) {\n"
      "    q_hz *h = &q_hz_list[i];\n"
      "    if (h->printed) continue;\n"
      "    h->printed = 1;\n"
      "    const q_site *s = &q_sites[h->site], *t = h->other >= 0 ? &q_sites[h->other] : NULL;\n"
      "    char a[64], b[64];\n"
      "    fprintf(stderr, \"%s:%d:%d: error: \", q_check_file, s->line, s->col);\n"
      "    switch (h->kind) {\n"
      "    case Q_HZ_RAW: case Q_HZ_WAR: case Q_HZ_WAW:\n"
      "      fprintf(stderr, \"%s race (%s) on element %ld: %s %s it (%s), %s %s it (%s), no barrier between (block %ld)\",\n"
      "              h->e ? \"global-memory\" : \"shared-memory\", race[h->kind], h->a, q_actor(h, h->c, a, sizeof a),\n"
      "              h->kind == Q_HZ_RAW ? \"reads\" : \"writes\", s->what, q_actor(h, h->b, b, sizeof b),\n"
      "              h->kind == Q_HZ_WAR ? \"read\" : \"wrote\", t ? t->what : \"?\", h->d);\n"
      "      break;\n"
      "    case Q_HZ_OOB_SHARED: case Q_HZ_OOB_GLOBAL: case Q_HZ_OOB_REG:\n"
      "      fprintf(stderr, \"out-of-bounds %s: %s, index %ld, extent %ld (%s, block %ld)\",\n"
      "              h->other == -2 ? \"write\" : \"access\", s->what, h->a, h->b, q_actor(h, h->c, a, sizeof a), h->d);\n"
      "      break;\n"
      "    case Q_HZ_UNINIT:\n"
      "      fprintf(stderr, \"uninitialised read: %s, element %ld of %ld never written in this block (%s, block %ld)\",\n"
      "              s->what, h->a, h->b, q_actor(h, h->c, a, sizeof a), h->d);\n"
      "      break;\n"
      "    case Q_HZ_DIVERGENT:\n"
      "      fprintf(stderr, \"divergent barrier: %s reached inside per-thread control flow, by %ld thread%s of %ld (block %ld)\",\n"
      "              s->what, h->a, h->a == 1 ? \"\" : \"s\", h->b, h->d);\n"
      "      break;\n"
      "    case Q_HZ_DIVERGENT_LOOP:\n"
      "      fprintf(stderr, \"divergent barrier: %s: thread %ld runs it over [%ld, %ld), thread 0 over [%ld, %ld) (block %ld)\",\n"
      "              s->what, h->c, h->a, h->b, h->e & 0xffffffffL, h->e >> 32, h->d);\n"
      "      break;\n"
      "    case Q_HZ_ABSENT_LANE:\n"
      "      fprintf(stderr, \"%s names absent lanes: the block has %ld threads, not whole warps of %ld (block %ld)\",\n"
      "              s->what, h->a, h->b, h->d);\n"
      "      break;\n"
      "    case Q_HZ_G_RAW: case Q_HZ_G_WAR: case Q_HZ_G_WAW:\n"
      "      fprintf(stderr, \"unordered %s of global element %ld across tasks: %s block %ld %s it (%s), %s %s %s it (%s), and no launch boundary, barrier or wait orders them\",\n"
      "              h->kind == Q_HZ_G_RAW ? \"read\" : \"write\", h->a, s->kernel, h->d,\n"
      "              h->kind == Q_HZ_G_RAW ? \"reads\" : \"writes\", s->what, t ? t->kernel : \"?\",\n"
      "              q_block(h->c, b, sizeof b), h->kind == Q_HZ_G_WAR ? \"reads\" : \"writes\", t ? t->what : \"?\");\n"
      "      break;\n"
      "    case Q_HZ_UNWRITTEN:\n"
      "      fprintf(stderr, \"unwritten output: the kernel leaves %ld of the %ld elements of %s unwritten (the first at index %ld)\",\n"
      "              h->a, h->b, s->what, h->c);\n"
      "      break;\n"
      "    case Q_HZ_NC_WRITTEN:\n"
      "      fprintf(stderr, \"read through a read-only (const __restrict__) parameter of memory written earlier in this launch: \"\n"
      "              \"block %ld reads element %ld (%s), which %s %s wrote (%s) in the same GPU launch; the non-coherent path (ld.global.nc) may return stale data\",\n"
      "              h->d, h->a, s->what, t ? t->kernel : \"?\", q_block(h->c, b, sizeof b), t ? t->what : \"?\");\n"
      "      break;\n"
      "    case Q_HZ_UNINIT_GLOBAL:\n"
      "      fprintf(stderr, \"uninitialised global read: %s, element %ld of %ld, which no launch or copy of this run wrote (%s, block %ld)\",\n"
      "              s->what, h->a, h->b, q_actor(h, h->c, a, sizeof a), h->d);\n"
      "      break;\n"
      "    case Q_HZ_CPA_PENDING:\n"
      "      fprintf(stderr, \"read of shared `%s` before its cp.async landed (no cp.async.wait_group retired it): element %ld, %s reads it (%s), thread %ld issued the copy (block %ld)\",\n"
      "              t ? t->mem : \"?\", h->a, q_actor(h, h->c, a, sizeof a), s->what, h->b, h->d);\n"
      "      break;\n"
      "    case Q_HZ_CPA_RAW:\n"
      "      fprintf(stderr, \"shared-memory race (read-after-write) on element %ld of `%s`: %s reads it (%s), written by thread %ld's cp.async, which landed at its cp.async.wait_group with no barrier between the wait and the read (block %ld)\",\n"
      "              h->a, t ? t->mem : \"?\", q_actor(h, h->c, a, sizeof a), s->what, h->b, h->d);\n"
      "      break;\n"
      "    case Q_HZ_CPA_WAR:\n"
      "      fprintf(stderr, \"stage overwritten while still being read (write-after-read): thread %ld's cp.async into shared `%s` refills element %ld, which %s read (%s) in the same barrier interval (block %ld)\",\n"
      "              h->c, s->mem, h->a, q_actor(h, h->b, a, sizeof a), t ? t->what : \"?\", h->d);\n"
      "      break;\n"
      "    case Q_HZ_CPA_WAW:\n"
      "      fprintf(stderr, \"write-after-write onto a copy in flight: %s writes element %ld of shared `%s` (%s) while thread %ld's cp.async into it has not landed (block %ld)\",\n"
      "              q_actor(h, h->c, a, sizeof a), h->a, t ? t->mem : \"?\", s->what, h->b, h->d);\n"
      "      break;\n"
      "    case Q_HZ_CPA_UNWAITED:\n"
      "      fprintf(stderr, \"cp.async never waited for: thread %ld's copy into shared `%s` at element %ld, of its commit group %ld, was still in flight when block %ld ended (no cp.async.wait_group retired it)\",\n"
      "              h->c, s->mem, h->a, h->b, h->d);\n"
      "      break;\n"
      "    case Q_HZ_TMA_EARLY:\n"
      "      fprintf(stderr, \"read of a stage before its mbarrier phase completed: %s reads element %ld of shared `%s`, which a tensor copy (%s) writes on completing phase %ld of mbarrier %ld, and warpgroup %ld has not waited for that phase (block %ld)\",\n"
      "              s->what, h->a, s->mem, t ? t->what : \"?\", h->e, h->b, h->c, h->d);\n"
      "      break;\n"
      "    case Q_HZ_WGMMA_WAR:\n"
      "      fprintf(stderr, \"stage overwritten while a wgmma still reads it: %s writes element %ld of shared `%s`, which warpgroup %ld's wgmma (%s) reads until a wgmma.wait_group retires it (block %ld)\",\n"
      "              s->what, h->a, s->mem, h->b, t ? t->what : \"?\", h->d);\n"
      "      break;\n"
      "    case Q_HZ_PROXY:\n"
      "      fprintf(stderr, \"ordinary shared store read by the async proxy without fence.proxy.async: %s reads element %ld of shared `%s`, which thread %ld wrote (%s) and did not fence (block %ld)\",\n"
      "              s->what, h->a, s->mem, h->b, t ? t->what : \"?\", h->d);\n"
      "      break;\n"
      "    case Q_HZ_DEADLOCK:\n"
      "      fprintf(stderr, \"deadlock: %s waits for task %ld, which has not run: no earlier task runs it (block %ld of the waiting kernel)\",\n"
      "              s->what, h->a, h->d);\n"
      "      break;\n"
      "    }\n"
      "    fprintf(stderr, \" in kernel %s (%s; %s)\", s->kernel, s->op, s->summary);\n"
      "    if (h->count > 1) fprintf(stderr, \" [%ld times]\", h->count);\n"
      "    fputc('\\n', stderr);\n"
      "  }\n"
      "  if (q_hz_more) { fprintf(stderr, \"%s: error: %ld more distinct hazards not shown\\n\", q_check_file, q_hz_more); q_hz_more = 0; }\n"
      "  q_regions_free();\n"
      "  q_arena_forget();\n"
      "  free(q_ord); q_ord = NULL; q_ord_n = 0;\n"
      "  return q_hz_n;\n"
      "}\n",
      o);
}
