/* roller_flash.c: -roller's plan for an `attention` op, one fused kernel in the
 * manner of FlashAttention-2 (qcodegen's lower_attention.c realises it).
 *
 * A block owns `bq` query rows of one kv head (the head's G query heads'
 * positions packed as rows: GQA/MQA read each key/value tile once per
 * group) and walks the keys `bkv` at a time: both contractions on the
 * matrix units (mma.sync m16n8k16, a warp per 16 rows), the softmax online
 * (a running max and sum per row in registers), key/value tiles in a ring of
 * `stages` shared slots filled by cp.async.  Scores never reach memory; with
 * a causal mask the tiles past a block's diagonal are not visited at all.
 *
 * On Hopper targets (wgmma) both contractions may run on wgmma instead:
 * flash_mma = [64, bkv, 16], a warpgroup per 64 rows (bq 64 or 128), Q and
 * K from shared memory (K and V tiles by tensor copies), P from the
 * registers the softmax packs, V read MN-major; offered where both head sizes are multiples of 64 up to the
 * target's largest N, and rated at FLASH_WGMMA_EFF of the wgmma peak where
 * mma.sync plans get FLASH_MMA_EFF of mma.sync's share of it.
 *
 * The plan: #tile{flash = [bq, bkv], flash_mma = [16, 8, 16] or [64, bkv, 16], stages, splits (flash-decoding:
 * the keys split over that many blocks per row tile, a second kernel combining
 * their partial results; absent: 1), threads,
 * grid = [blocks], smem, regs, skipped_tiles (key tiles the causal mask
 * skips, over all blocks), est_us, bound, target}.  Offered for f16/bf16 on
 * CUDA targets with mma.sync (sm_80 and up) where both head sizes are
 * multiples of 16 up to 256; any other attention keeps its compute chain.
 *
 * The model, per plan (bq = 16 x warps in 16..128, bkv in 32..128): the
 * matrix units at FLASH_MMA_EFF of peak over the tiles visited; the softmax's
 * exponentials on the special-function units (16 per SM per cycle) and about
 * FLASH_ALU_OPS f32 operations per score; ldmatrix reads and cp.async writes
 * of shared memory; each key/value tile through L2 once per block; q, k, v,
 * y (and a bias) once through DRAM; a device less than full (few blocks)
 * scales the compute terms; a block's own walk (its tiles one after the
 * other, a barrier each) bounds the time from below. */
#include "roller.h"
#include "attention.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define FLASH_MMA_EFF 0.6       /* mma.sync attention kernels reach about this of peak (FlashAttention-2 on A100) */
#define FLASH_WGMMA_EFF 0.45    /* wgmma, one product at a time (FlashAttention-3 overlaps them: 0.6-0.75) */
#define FLASH_WGMMA_OVERLAP_EFF 0.5  /* P V in flight during the next softmax (qir_attention_wgmma_overlaps): assumed
                                      * from FlashAttention-3's ablation (+10-15%), not measured here */
#define FLASH_ALU_OPS 8.0       /* f32 operations per score: scale, mask, max, subtract, sum, correction, pack */
#define FLASH_SFU_PER_CYCLE 16.0  /* ex2 per SM per cycle (sm_80, sm_90) */
#define FLASH_ADDR_REGS 48      /* row state (max, sum), addresses, loop counters */
#define FLASH_MAX_SPLITS 64     /* flash-decoding: blocks sharing one row tile's keys */
#define FLASH_MAX_PLANS 256     /* (rows, keys, stages, splits) evaluated per op */
#define FLASH_SIMT_THREADS 128  /* SIMT kernel: 8 groups of 16 lanes, each group some rows */
#define FLASH_SIMT_EFF 0.5      /* of the f32 FMA peak: operands from shared memory each step */

typedef struct {
  bool mma;                     /* both contractions on the matrix units; else the SIMT kernel */
  bool wg;                      /* on wgmma (Hopper), a warpgroup per 64 rows; else mma.sync, a warp per 16 */
  int64_t bq, bkv, warps, stages, splits;
  int64_t smem, regs, blocks, steps, skipped, max_steps;
  double est_us;
  const char *bound;
} flash_plan;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t rows_of(const qir_attention_shape *s) { return s->G * s->S; }

/* Key tiles visited, over all blocks and by the busiest block (a split
 * visits its share: per_split tiles of the row tile's, at most). */
static void walk(const qir_attention_shape *s, flash_plan *f) {
  int64_t nqt = cdiv(rows_of(s), f->bq), most = 0;
  int64_t all = cdiv(s->T, f->bkv), per_split = cdiv(all, f->splits);
  int64_t per_head = qir_attention_tiles_visited(s, f->bq, f->bkv, &most);
  f->blocks = s->B * s->Hkv * nqt * f->splits;
  f->steps = per_head * s->B * s->Hkv;
  f->skipped = s->B * s->Hkv * nqt * all - f->steps;
  f->max_steps = most < per_split ? most : per_split;
}

static bool flash_eval(const qir_attention_shape *s, const qir_target *t, flash_plan *f) {
  int64_t D = s->D, DV = s->DV, threads = f->mma ? 32 * f->warps : FLASH_SIMT_THREADS;
  int64_t tr = f->bq / (FLASH_SIMT_THREADS / 16), tc = f->bkv / 16, to = cdiv(DV, 16);   /* SIMT: a lane's rows, keys, columns */
  if (f->mma) {
    f->smem = (f->bq * D + f->stages * f->bkv * (D + DV)) * 2;
    /* per lane: scores bkv/8 x 4, output DV/8 x 4, q fragments D/16 x 4 (not with wgmma: Q stays in
     * shared memory), P fragments bkv/16 x 4 */
    f->regs = f->bkv / 2 + DV / 2 + (f->wg ? 0 : D / 4) + f->bkv / 4 + FLASH_ADDR_REGS;
    if (f->wg) {   /* lower_attention.c's tiles: each on a 1024-byte boundary; then a stage's mbarriers and Q's */
      int64_t q = (f->bq * D * 2 + 1023) / 1024 * 1024, kk = (f->stages * f->bkv * D * 2 + 1023) / 1024 * 1024;
      f->smem = q + kk + f->stages * f->bkv * DV * 2 + 16 + 8 * (f->stages + 1);
    }
  } else {
    int64_t ldq = (D + 3) / 4 * 4 + 4, ldv = (DV + 3) / 4 * 4 + 4;   /* lower_attention.c's padded f32 rows */
    f->smem = (f->bq * ldq + f->stages * f->bkv * (ldq + ldv) + f->bq * (f->bkv + 4)) * 4;
    f->regs = tr * tc + tr * to + 5 * tr + tc + to + FLASH_ADDR_REGS;
  }
  if (f->smem > t->smem_per_block || f->regs > t->max_regs_per_thread || threads > t->max_threads_per_block) return false;
  walk(s, f);
  int64_t per_unit = t->max_blocks_per_unit;
  if (t->smem_per_unit / f->smem < per_unit) per_unit = t->smem_per_unit / f->smem;
  if (t->max_threads_per_unit / threads < per_unit) per_unit = t->max_threads_per_unit / threads;
  int64_t regs_block = (f->regs + 7) / 8 * 8 * threads;
  if (t->regs_per_unit / regs_block < per_unit) per_unit = t->regs_per_unit / regs_block;
  if (per_unit < 1) return false;
  double cu = t->compute_units, clock = t->clock_ghz * 1e3;   /* cycles per us */
  double scores = (double)f->steps * (double)(f->bq * f->bkv);
  double flops = scores * 2.0 * (double)(D + DV);
  double vec = qir_target_peak(t, QIR_F32, false);
  double share = t->wgmma_n_max > 0 && t->mma_sync_share > 0 ? t->mma_sync_share : 1;   /* the peak is wgmma's */
  double peak = !f->mma ? vec * FLASH_SIMT_EFF
                : f->wg ? qir_target_peak(t, s->dtype, true) *
                              (qir_attention_wgmma_overlaps(f->bkv, DV) ? FLASH_WGMMA_OVERLAP_EFF : FLASH_WGMMA_EFF)
                        : qir_target_peak(t, s->dtype, true) * share * FLASH_MMA_EFF;
  double t_mma = flops / (peak * 1e3);
  int bytes = qir_dtype_size(s->dtype);
  double t_soft = scores / (cu * FLASH_SFU_PER_CYCLE * clock) + scores * FLASH_ALU_OPS / (vec * 1e3);
  double kv_bytes = (double)f->steps * (double)(f->bkv * (D + DV) * bytes);
  /* shared reads: mma: each warp's ldmatrix of K and V; wgmma: each warpgroup's K, V and Q; SIMT: each lane's operands per step (Q and K
   * rows, P rows and V columns), f32 */
  double smem_reads = f->wg ? (kv_bytes + (double)f->steps * (double)(f->bq * D * bytes)) * (double)(f->bq / 64)
                     : f->mma ? kv_bytes * (double)f->warps
                             : (double)f->steps * (double)threads * (double)(D * (tr + tc) + f->bkv * (tr + to)) * 4;
  double t_smem = (smem_reads + kv_bytes + (double)f->blocks * (double)(f->bq * D * bytes)) / (t->smem_gbs * 1e3);
  double t_l2 = (kv_bytes + (double)f->blocks * (double)(f->bq * (D + DV) * bytes)) / (t->l2_gbs * 1e3);
  double io = (double)(s->B * s->Hq * s->S * (D + DV) + s->B * s->Hkv * s->T * (D + DV)) * bytes;
  double t_dram = io / (t->dram_gbs * 1e3);
  /* fewer blocks than units: the idle units' share of the compute is lost,
   * and of the bandwidth too (a unit's loads in flight bound what it pulls) */
  double fill = (double)f->blocks / cu;
  double under = fill < 1 ? 1 / fill : 1;
  double compute = (t_mma > t_soft ? t_mma + 0.25 * t_soft : t_soft + 0.25 * t_mma) * under;
  t_l2 *= under;
  t_dram *= under;
  /* the busiest block alone on its unit: its steps back to back, a barrier and a load latency each
   * (stages - 1 of which the ring hides) */
  double step_alone = (double)(f->bq * f->bkv) * 2.0 * (double)(D + DV) / (peak / cu * 1e3) +
                      (double)(f->bq * f->bkv) * FLASH_ALU_OPS / (vec / cu * 1e3) +
                      (t->barrier_cycles + t->load_latency_cycles / (double)(f->stages > 1 ? f->stages - 1 : 1) / 4) / clock;
  double crit = (double)f->max_steps * step_alone;
  if (f->splits > 1) {   /* the partial results out and back in, and the combining kernel */
    double part = (double)(f->splits * s->B * s->Hkv * rows_of(s) * (DV + 2)) * 4;
    t_dram += 2 * part / (t->dram_gbs * 1e3);
    crit += t->launch_us;
  }
  struct { double us; const char *what; } terms[] = {
      {compute, t_mma < t_soft ? "softmax (exp, f32 ALU)" : f->mma ? "tensor cores" : "f32 ALU"}, {t_smem, "shared memory"},
      {t_l2, "L2 bandwidth"}, {t_dram, "DRAM bandwidth"}, {crit, "one block's walk (latency)"}};
  f->est_us = 0;
  for (size_t i = 0; i < sizeof terms / sizeof *terms; i++)
    if (terms[i].us > f->est_us) f->est_us = terms[i].us, f->bound = terms[i].what;
  return true;
}

static double round_sig(double x) {
  if (x <= 0) return 0;
  double p = pow(10, 3 - ceil(log10(x)));
  return round(x * p) / p;
}

static qir_attr_val plan_dict(qir_module *m, const qir_target *t, const flash_plan *p) {
  int64_t flash[2] = {p->bq, p->bkv}, shape[3] = {16, 8, 16};
  if (p->wg) shape[0] = 64, shape[1] = p->bkv;
  qir_attr e[13];
  int n = 0;
  e[n++] = (qir_attr){.key = "flash", .val = qir_attr_ints(m, 2, flash)};
  if (p->mma) e[n++] = (qir_attr){.key = "flash_mma", .val = qir_attr_ints(m, 3, shape)};
  e[n++] = (qir_attr){.key = "stages", .val = qir_attr_int(p->stages)};
  if (p->splits > 1) e[n++] = (qir_attr){.key = "splits", .val = qir_attr_int(p->splits)};
  e[n++] = (qir_attr){.key = "threads", .val = qir_attr_int(p->mma ? 32 * p->warps : FLASH_SIMT_THREADS)};
  e[n++] = (qir_attr){.key = "grid", .val = qir_attr_ints(m, 1, &p->blocks)};
  e[n++] = (qir_attr){.key = "smem", .val = qir_attr_int(p->smem)};
  e[n++] = (qir_attr){.key = "regs", .val = qir_attr_int(p->regs)};
  e[n++] = (qir_attr){.key = "skipped_tiles", .val = qir_attr_int(p->skipped)};
  e[n++] = (qir_attr){.key = "est_us", .val = qir_attr_float(round_sig(p->est_us))};
  e[n++] = (qir_attr){.key = "bound", .val = qir_attr_string(m, p->bound)};
  e[n++] = (qir_attr){.key = "target", .val = qir_attr_string(m, t->name)};
  return qir_attr_dict(m, n, e);
}

/* Rank order: faster first; ties (within 1%): fewer splits, then fewer shared bytes. */
static bool better(const flash_plan *a, const flash_plan *b) {
  if (a->est_us < b->est_us * 0.99) return true;
  if (a->est_us > b->est_us * 1.01) return false;
  return a->splits < b->splits || (a->splits == b->splits && a->smem < b->smem);
}

bool roller_plan_attention(qir_module *m, qir_op *op, const qir_target *t, int topk, roller_stats *st) {
  qir_attention_shape s;
  if (!qir_attention_shape_of(op, &s)) return false;
  bool sync_target = t->mma_m == 16 && t->mma_n == 8 && t->mma_k == 16 && !strcmp(t->backend, "cuda");
  if (op->operands[1]->type.dtype != s.dtype || op->operands[2]->type.dtype != s.dtype || op->results[0]->type.dtype != s.dtype ||
      !qir_dtype_is_float(s.dtype) || s.dtype == QIR_F64 || qir_dtype_size(s.dtype) < 2 || s.B * s.Hq * s.S == 0 || s.T == 0 ||
      !t->smem_banks)
    return false;
  bool mma = sync_target && (s.dtype == QIR_F16 || s.dtype == QIR_BF16) && qir_target_peak(t, s.dtype, true) > 0 && s.D % 16 == 0 &&
             s.DV % 16 == 0 && s.D <= 256 && s.DV <= 256;
  bool wg = mma && t->wgmma_n_max > 0 && s.D % 64 == 0 && s.DV % 64 == 0 && s.DV <= t->wgmma_n_max;
  flash_plan all_plans[FLASH_MAX_PLANS];
  int n_plans = 0;
  int64_t rows = s.G * s.S;
  for (int64_t warps = 1; warps <= 8; warps *= 2) {
    /* mma: a warp per 16 rows; SIMT: 8 groups of 16 lanes, 2 .. 8 rows each */
    int64_t bq = mma ? 16 * warps : FLASH_SIMT_THREADS / 16 * 2 * warps;
    if (warps > 1 && bq / 2 >= rows) break;   /* no more rows to give the extra warps */
    for (int64_t bkv = 32; bkv <= 128; bkv *= 2)
      for (int64_t stages = 2; stages <= 3; stages++)
        /* the keys split only where a kv head's rows are one tile (a decode step, flash-decoding):
         * a prefill fills the device with row tiles, one kernel */
        for (int64_t splits = 1; splits <= FLASH_MAX_SPLITS && splits <= cdiv(s.T, bkv) && (splits == 1 || rows <= bq);
             splits *= 2) {
          int64_t all = cdiv(s.T, bkv);
          if (cdiv(all, cdiv(all, splits)) != splits) continue;   /* a split with no tiles of its own */
          flash_plan f = {.mma = mma, .bq = bq, .bkv = bkv, .warps = warps, .stages = stages, .splits = splits};
          if (!mma && (warps > 4 || bkv > 64)) continue;   /* SIMT: at most 8 rows and 4 keys a lane */
          if (n_plans < FLASH_MAX_PLANS && flash_eval(&s, t, &f)) all_plans[n_plans++] = f;
        }
  }
  /* wgmma: a warpgroup per 64 rows, keys per step up to the largest N */
  for (int64_t bq = 64; wg && bq <= 128 && (bq == 64 || bq / 2 < rows); bq *= 2)
    for (int64_t bkv = 64; bkv <= 128 && bkv <= t->wgmma_n_max; bkv *= 2)
      for (int64_t stages = 2; stages <= 3; stages++)
        for (int64_t splits = 1; splits <= FLASH_MAX_SPLITS && splits <= cdiv(s.T, bkv) && (splits == 1 || rows <= bq); splits *= 2) {
          int64_t all = cdiv(s.T, bkv);
          if (cdiv(all, cdiv(all, splits)) != splits) continue;
          flash_plan f = {.mma = true, .wg = true, .bq = bq, .bkv = bkv, .warps = bq / 16, .stages = stages, .splits = splits};
          if (n_plans < FLASH_MAX_PLANS && flash_eval(&s, t, &f)) all_plans[n_plans++] = f;
        }
  if (!n_plans) return false;
  for (int i = 1; i < n_plans; i++)   /* insertion sort: a few dozen plans */
    for (int j = i; j > 0 && better(&all_plans[j], &all_plans[j - 1]); j--) {
      flash_plan x = all_plans[j];
      all_plans[j] = all_plans[j - 1];
      all_plans[j - 1] = x;
    }
  qir_op_set_attr(m, op, "tile", plan_dict(m, t, &all_plans[0]), true);
  qir_op_remove_attr(op, "tile_alternatives");
  /* -roller-topk: the next plans, split or not as the best is (-rammer may swap one in;
   * a split plan's two kernels are never packed) */
  qir_attr_val alt[FLASH_MAX_PLANS];
  int n_alt = 0;
  for (int i = 1; i < n_plans && n_alt < topk - 1; i++)
    if ((all_plans[i].splits > 1) == (all_plans[0].splits > 1)) alt[n_alt++] = plan_dict(m, t, &all_plans[i]);
  if (n_alt) qir_op_set_attr(m, op, "tile_alternatives", qir_attr_list(m, n_alt, alt), true);
  if (st) st->planned++;
  return true;
}

/* A plan's flash_mma is wgmma's [64, bkv, 16]. */
static bool flash_wgmma(const qir_attr_val *plan) {
  const qir_attr_val *shape = qir_attr_dict_get(plan, "flash_mma");
  return shape && shape->kind == QIR_ATTR_LIST && shape->n == 3 && shape->items[0].kind == QIR_ATTR_INT && shape->items[0].i == 64;
}

void roller_flash_report(FILE *out, const qir_op *op) {
  qir_attention_shape s;
  if (!qir_attention_shape_of(op, &s)) return;
  const char *name = op->results[0]->name ? op->results[0]->name : "?";
  if (!qir_attention_flash_planned(op)) {
    fprintf(out, "attention %%%s: no flash plan (-roller offers one for f16/bf16 on mma.sync targets, for other floats on "
                 "SIMT): its compute chain, a kernel per stage\n", name);
    return;
  }
  const qir_attr_val *d = &qir_op_attr(op, "tile")->val, *fl = qir_attr_dict_get(d, "flash");
  const qir_attr_val *skip = qir_attr_dict_get(d, "skipped_tiles"), *est = qir_attr_dict_get(d, "est_us");
  const qir_attr_val *stages = qir_attr_dict_get(d, "stages");
  int64_t splits = qir_attention_flash_splits(op);
  fprintf(out, "attention %%%s: one flash kernel%s, %lld query rows x %lld keys per step on %s, %lld stages",
          name, splits > 1 ? " and a combining one" : "", (long long)fl->items[0].i, (long long)fl->items[1].i,
          flash_wgmma(d) ? "wgmma" : qir_attr_dict_get(d, "flash_mma") ? "mma.sync" : "the SIMT cores", stages ? (long long)stages->i : 0LL);
  if (s.G > 1) fprintf(out, ", %lld query heads per kv head", (long long)s.G);
  if (s.causal && skip) fprintf(out, ", causal: %lld key tiles skipped", (long long)skip->i);
  if (splits > 1) fprintf(out, ", keys split %lld ways", (long long)splits);
  if (est && est->kind == QIR_ATTR_FLOAT) fprintf(out, ", modelled %.3g us", est->f);
  fputc('\n', out);
}
