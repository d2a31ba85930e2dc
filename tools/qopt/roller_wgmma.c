/* roller_wgmma.c: Roller's plans for Hopper's warpgroup MMA (targets with
 * wgmma_n_max: h100, h200), realised by qcodegen's lower_wgmma.c.
 *
 * The plan: #tile{block = [.., W C, .., N, ..], thread = [.., W, .., N, ..],
 * rstep = [64], mma = [64, N, 16], stages = S}: C consumer warpgroups of W
 * rows each (C = 1 or 2, W = 64 or 128: one or two m64 tiles, W N / 128
 * accumulators per thread, at most 128) and one producer warpgroup; K in
 * steps of 64 (one 128-byte swizzled row of 16-bit values), any other
 * reduction axis (a window) in steps of one; S stages of A's W C x 64 and B's
 * 64 x N tiles, copied by the tensor memory accelerator where a tensor map
 * can take the operand, else by the producer warpgroup's loads.
 *
 * The model, per SM, in clock cycles, for one step of one block:
 *   - tensor cores: 2 x W C x N x 64 flops at the target's matrix peak per SM;
 *   - shared memory: what the wgmma read (each m64 tile reads its A slice and
 *     all of B for each of the four k16 slices) at the SM's shared-memory
 *     bandwidth;
 *   - producer loads: the operands copied by loads, at the target's
 *     wgmma_load_bytes_per_clk per SM (3 on h100/h200, measured);
 *   - latency: a copy's load latency, hidden by S - 1 stages in flight and by
 *     the other resident blocks;
 * the largest term, times the steps and the blocks each SM runs, plus the
 * pipeline's fill and the epilogue's stores; against the DRAM and L2 time of
 * the traffic (every operand from DRAM once when a wave's footprint fits in
 * L2; a window's A taps once per K step), L2's time by whole waves past the
 * first.  Constants are the target's; the waves' L2 time comes from the H200
 * (bench/gpu, 2026-11-27). */
#include <math.h>
#include <string.h>

#include "roller.h"

#define WG_BK 64
#define WG_THREADS 128

/* Does the read e mention variable v (with a nonzero coefficient)? */
static bool moves_with(const qir_compute *c, const qir_expr *e, int v) {
  int nv = c->n_axes + c->n_red;
  for (int i = 0; i < e->n_args; i++) {
    int64_t coef[64], k0;
    if (nv > 64 || !qir_expr_affine(e->args[i], nv, coef, &k0)) return false;
    if (coef[v]) return true;
  }
  return false;
}

static bool mentions(const qir_expr *e, int v) {
  if (e->kind == QIR_EX_VAR) return e->var == v;
  for (int i = 0; i < e->n_args; i++)
    if (mentions(e->args[i], v)) return true;
  return false;
}

/* Whose padding mask it is, as qcodegen's mma_analyse decides: A's (0) unless
 * it mentions N, B's (1) unless it mentions M, both (2) when it mentions no
 * output axis (over reductions alone); -1 without one. */
static int mask_owner(const qir_compute *c, const qir_expr *mask, int vm, int vn) {
  if (!mask) return -1;
  bool output = false;
  for (int d = 0; d < c->n_axes && !output; d++) output = mentions(mask, d);
  return !output ? 2 : !mentions(mask, vn) ? 0 : !mentions(mask, vm) ? 1 : 2;
}

bool roller_wgmma_problem_of(const qir_op *op, const qir_target *t, int vm, int vn, int vk, roller_wgmma_problem *w) {
  const qir_compute *c = op->comp;
  qir_contraction ct;
  memset(w, 0, sizeof *w);
  if (t->wgmma_n_max <= 0 || !c || vk < c->n_axes || !qir_compute_contraction(c, &ct)) return false;
  const qir_expr *ab[2] = {ct.a, ct.b};
  qir_tma_view a_view = {0};
  const qir_expr *b_read = ct.b;
  w->red_steps = 1;
  for (int d = 0; op->n_results > 0 && d < op->results[0]->type.rank; d++) w->symbolic |= op->results[0]->type.sym[d] != NULL;
  uint64_t stepped = 0;
  for (int a = 0; a < c->n_red; a++)   /* every other reduction axis is a step of one */
    if (c->n_axes + a != vk) {
      w->red_steps *= c->axis_extents[c->n_axes + a];
      if (c->n_axes + a < 64) stepped |= (uint64_t)1 << (c->n_axes + a);
    }
  for (int s = 0; s < 2; s++) {
    const qir_type *ty = &op->operands[ab[s]->operand]->type;
    if (ty->dtype != QIR_F16 && ty->dtype != QIR_BF16) return false;
    bool has_m = moves_with(c, ab[s], vm), has_n = moves_with(c, ab[s], vn);
    int role = has_m && !has_n ? 0 : has_n && !has_m ? 1 : -1;
    if (role < 0 || !moves_with(c, ab[s], vk)) return false;
    int mn = role ? vn : vm;
    qir_tma_view v;
    const char *why;
    /* a tensor copy where the read allows one (see lower_wgmma.c), else the producer's loads */
    /* the padding mask, where it is this operand's (a copy's zero fill can be it) */
    int owner = mask_owner(c, ct.mask, vm, vn);
    bool tma = owner != 2 && qir_tma_view_of(c, ab[s], ty, owner == role ? ct.mask : NULL, stepped, -1, &v, &why) &&
               (v.var[0] == mn || v.var[0] == vk);
    if (role) {
      w->b_generic = !tma;
      w->b_mn_major = tma && v.var[0] == mn;
    } else {
      w->a_generic = !tma;
      w->a_mn_major = tma && v.var[0] == mn;
      a_view = v;
      w->a_mn_es = 1;
      for (int d = 0; tma && d < v.rank; d++)
        if (v.var[d] == vm) w->a_mn_es = v.estride[d];
    }
    if (role) b_read = ab[s];
  }
  /* a band: A K-major by a map walking M and another output axis that B does not move
   * with (an image's rows: M short enough that two or more rows fill an m64 tile) */
  w->m2 = -1;
  bool walks_m = false;
  for (int d = 0; d < a_view.rank; d++) walks_m |= a_view.var[d] == vm;
  for (int d = 0; walks_m && !w->a_generic && !w->a_mn_major && d < a_view.rank; d++) {
    int x = a_view.var[d];
    if (x >= 0 && x < c->n_axes && x != vm && x != vn && !moves_with(c, b_read, x) && c->axis_extents[vm] <= 128 &&
        c->axis_extents[vm] * w->a_mn_es <= 256 && c->axis_extents[x] > 1) {
      w->m2 = x;
      w->m2_ext = c->axis_extents[x];
      w->m2_es = a_view.estride[d];
    }
  }
  w->m = c->axis_extents[vm];
  w->n = c->axis_extents[vn];
  w->k = c->axis_extents[vk];
  w->batch = 1;
  for (int d = 0; d < c->n_axes; d++)
    if (d != vm && d != vn) w->batch *= c->axis_extents[d];
  qir_dtype dt = op->operands[ct.a->operand]->type.dtype;
  w->peak_gflops = qir_target_peak(t, dt, true);
  w->out_elem_bytes = qir_dtype_size(op->results[0]->type.dtype);
  double a_bytes = 2.0, b_bytes = 2.0;
  for (int d = 0; d < op->operands[ct.a->operand]->type.rank; d++) a_bytes *= (double)op->operands[ct.a->operand]->type.dims[d];
  for (int d = 0; d < op->operands[ct.b->operand]->type.rank; d++) b_bytes *= (double)op->operands[ct.b->operand]->type.dims[d];
  w->in_bytes = a_bytes + b_bytes;
  return w->peak_gflops > 0;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void roller_wgmma_eval(const qir_target *t, const roller_wgmma_problem *w, roller_wgmma_plan *pl) {
  double units = t->compute_units, clk = t->clock_ghz * 1e9;
  int64_t C = pl->bm / pl->wm, MW = pl->wm / 64, steps = cdiv(w->k, WG_BK) * w->red_steps;
  /* A's rows a block copies: bm, or a band's rows of M */
  int64_t a_rows = pl->rows2 ? w->m * pl->rows2 : pl->bm;
  pl->threads = WG_THREADS * (C + 1);
  pl->smem = (int64_t)pl->stages * (pl->bm + pl->bn) * WG_BK * 2 + 16 * pl->stages;
  pl->regs = MW * pl->bn / 2 + 40;   /* accumulators, descriptors, addresses (ptxas: 42 to 168 on the tests' plans) */
  pl->blocks = pl->rows2 ? cdiv(w->m2_ext, pl->rows2) * cdiv(w->n, pl->bn) * (w->batch / w->m2_ext)
                         : cdiv(w->m, pl->bm) * cdiv(w->n, pl->bn) * w->batch;
  /* two consumer warpgroups take 232 registers each by setmaxnreg (qcodegen), one keeps the 255 of a thread */
  pl->valid = pl->smem <= t->smem_per_block && pl->threads <= t->max_threads_per_block && pl->regs <= (C == 2 ? 232 : t->max_regs_per_thread) &&
              MW * pl->bn <= 256 && (!pl->rows2 || (w->m2 >= 0 && a_rows <= pl->bm && a_rows > pl->bm - pl->wm)) &&
              /* a strided window's box: at most 256 elements traversed a dimension */
              (w->a_generic || (pl->rows2 ? pl->rows2 * w->m2_es <= 256 : (w->a_mn_major ? 64 : pl->bm) * w->a_mn_es <= 256));
  if (!pl->valid) {
    pl->est_us = INFINITY;
    return;
  }
  int64_t bpu = t->max_threads_per_unit / pl->threads;
  if (t->smem_per_unit / pl->smem < bpu) bpu = t->smem_per_unit / pl->smem;
  if (t->regs_per_unit / (pl->regs * pl->threads) < bpu) bpu = t->regs_per_unit / (pl->regs * pl->threads);
  if (bpu < 1) bpu = 1;
  double per_unit = ceil((double)pl->blocks / units), conc = fmin(per_unit, (double)bpu);
  double tc_per_clk = w->peak_gflops * 1e9 / (units * clk), smem_per_clk = t->smem_gbs * 1e9 / (units * clk);
  double r_tc = 2.0 * (double)pl->bm * (double)pl->bn * WG_BK / tc_per_clk;
  double r_smem = (double)(C * MW) * 4 * (64.0 * 16 * 2 + 16.0 * (double)pl->bn * 2) / smem_per_clk;
  double period = t->load_latency_cycles / (double)(pl->stages - 1);
  /* operands by the producer warpgroups' loads, at the target's rate per SM (qir/target.c) */
  double generic = (w->a_generic ? (double)a_rows : 0) + (w->b_generic ? (double)pl->bn : 0);
  double load_rate = t->wgmma_load_bytes_per_clk > 0 ? t->wgmma_load_bytes_per_clk : QIR_WGMMA_LOAD_BYTES_PER_CLK;
  double r_loads = generic * WG_BK * 2 / load_rate;
  double step = fmax(fmax(fmax(r_tc, r_smem), r_loads), period / conc);
  /* the epilogue, rated as a store per accumulator pair (as before qcodegen staged it through
   * shared memory for 16-byte stores; not re-rated: unmeasured) */
  double epilogue = (double)pl->bm * (double)pl->bn / (WG_THREADS * (double)C) * 4;
  /* persistent blocks (one resident wave, each computing every P-th tile): the producer copies
   * a tile's first stages while the consumers finish the one before, so a block fills its
   * pipeline once instead of once a tile */
  int64_t resident = (int64_t)units * bpu;
  if (pl->persistent < 0) pl->persistent = pl->blocks > resident && !w->symbolic ? resident : 0;
  if (pl->persistent >= pl->blocks) pl->persistent = 0;
  double fills = pl->persistent ? 1 : ceil(per_unit / conc);
  double t_main = (per_unit * ((double)steps * step + epilogue) + fills * t->load_latency_cycles) / clk;
  double active = fmin((double)pl->blocks, units), mem_eff = fmin(2.0 * active / units, 1);
  double out_bytes = (double)w->m * (double)w->n * (double)w->batch * w->out_elem_bytes;
  /* a window's taps (the steps of the other reduction axes) read A's tile shifted by a tap:
   * the same sectors, served by L1 once per K step (as roller.c counts the mma.sync loop's) */
  double a_steps = w->a_generic && w->red_steps > 1 ? (double)steps / (double)w->red_steps : (double)steps;
  pl->global_bytes = (double)pl->blocks * (a_steps * (double)a_rows + (double)steps * (double)pl->bn) * WG_BK * 2 + out_bytes;
  /* a wave's blocks in raster order (N fastest): the A rows and B columns they share once */
  double wave = fmin(units * conc, (double)pl->blocks), nbn = (double)cdiv(w->n, pl->bn);
  double nbm = (double)(pl->rows2 ? cdiv(w->m2_ext, pl->rows2) : cdiv(w->m, pl->bm));
  double mats = ceil(wave / (nbm * nbn)), rows = fmin(ceil(wave / nbn), nbm), cols = fmin(wave, nbn);
  double wave_footprint = mats * (rows * (double)a_rows + cols * (double)pl->bn) * (double)w->k * (double)w->red_steps * 2;
  double dram = wave_footprint <= (double)t->l2_bytes ? fmin(pl->global_bytes, w->in_bytes + out_bytes) : pl->global_bytes;
  double t_dram = dram / (t->dram_gbs * 1e9 * mem_eff);
  double t_l2 = pl->global_bytes * roller_l2_wave_factor(t, (double)pl->blocks, (double)bpu) / (t->l2_gbs * 1e9 * mem_eff);
  const char *term = step == r_tc ? "tensor cores" : step == r_smem ? "shared memory" : step == r_loads ? "producer loads" : "latency";
  if (t_main < t_dram || t_main < t_l2) term = t_l2 >= t_dram ? "L2 bandwidth" : "DRAM bandwidth";
  bool tail = (per_unit - (double)pl->blocks / units) / per_unit >= 0.1;
  pl->bound = roller_bound_text(term, tail);
  pl->est_us = fmax(t_main, fmax(t_dram, t_l2)) * 1e6;
}

/* Every plan: block M 64 to 256 in one or two consumer warpgroups of 64 or
 * 128 rows (not past M rounded up to 64; with a band axis M2, also as many
 * whole rows of M2 as the tiles hold, two or more, the last warpgroup's tile
 * in use), N a multiple of 16 from 16 to the target's largest (64's multiples
 * when B is MN-major: one copy per 64-wide atom), not past N rounded up to 16
 * beyond the first that covers it, 2 to 4 stages (no more in flight than
 * steps). */
int roller_wgmma_plans(const qir_target *t, const roller_wgmma_problem *w, roller_wgmma_plan *out, int cap) {
  int n = 0;
  int64_t steps = cdiv(w->k, WG_BK) * w->red_steps;   /* a window's taps are steps too */
  for (int64_t tiles = 1; tiles <= 4; tiles++)   /* m64 tiles per block: one or two warpgroups of one or two */
  for (int64_t wm = 64; wm <= 128; wm += 64) {
    int64_t bm = 64 * tiles;
    if (tiles == 3 || bm % wm || bm / wm > 2) continue;
    bool plain = bm == 64 || bm <= cdiv(w->m, 64) * 64;
    int64_t r2 = w->m2 >= 0 ? bm / w->m : 0;
    if (w->m2 >= 0 && r2 > w->m2_ext) r2 = w->m2_ext;
    for (int band = 0; band < 2; band++) {
      if (band ? r2 < 2 : !plain) continue;
      for (int64_t bn = w->b_mn_major ? 64 : 16; bn <= t->wgmma_n_max; bn += w->b_mn_major ? 64 : 16) {
        if (bn - (w->b_mn_major ? 64 : 16) >= w->n) break;   /* the previous one already covered N */
        if (bn != 16 && bn != 32 && bn % 64) continue;       /* 16, 32, 64, 128, 192, 256 */
        for (int st = 2; st <= 4 && (st == 2 || st - 1 <= steps); st++) {
          roller_wgmma_plan pl = {.bm = bm, .wm = wm, .bn = bn, .stages = st, .rows2 = band ? r2 : 0, .persistent = -1};
          roller_wgmma_eval(t, w, &pl);
          if (pl.valid && n < cap) out[n++] = pl;
        }
      }
    }
  }
  return n;
}
