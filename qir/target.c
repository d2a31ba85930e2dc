/* target.c: the built-in device models and the `key = value` target file.
 *
 * Every figure names its source.  Abbreviations used below:
 *   [CCT]   CUDA C++ Programming Guide, table "Technical Specifications per
 *           Compute Capability" (threads, blocks, registers, shared memory).
 *   [H100W] NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), table
 *           "NVIDIA H100 SXM5 ... compared to A100": SMs, L2, peak rates.
 *   [H100D] NVIDIA H100 Tensor Core GPU datasheet: HBM3 bandwidth (SXM).
 *   [H200D] NVIDIA H200 Tensor Core GPU datasheet (HBM3e 4.8 TB/s; compute as H100 SXM).
 *   [A100W] NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): SMs,
 *           L2 size, L2 read bandwidth 5120 B/clk, peak rates; [A100D] A100
 *           80GB datasheet: 2039 GB/s.
 *   [V100W] NVIDIA Tesla V100 GPU Architecture whitepaper (2017): SMs, 6 MB
 *           L2, 900 GB/s HBM2, peak rates; L2 2048 B/clk per [A100W].
 *   [ADAW]  NVIDIA Ada GPU Architecture whitepaper v2.1, appendix table for
 *           GeForce RTX 4090 (dense rates; FP16 tensor with FP32 accumulate).
 *   [CDNA2] AMD CDNA 2 Architecture whitepaper and AMD Instinct MI250
 *           datasheet (208 CUs in 2 GCDs, 1.7 GHz, 3.2 TB/s, 8 MB L2 per GCD).
 *   [CDNA3] AMD CDNA 3 Architecture whitepaper and AMD Instinct MI300X
 *           datasheet (304 CUs, 2.1 GHz, 5.3 TB/s, 4 MB L2 per XCD x 8).
 *   [PTX]   PTX ISA, "Warp-level matrix multiply-accumulate instructions":
 *           mma.sync.m16n8k16 for .f16 / .bf16 with .f32 accumulators needs
 *           sm_80 or later (sm_70 has wmma m16n16k16 only).
 *   [HIPHW] ROCm HIP documentation, "Hardware implementation" (wavefront 64,
 *           1024 threads per block, 64 KiB LDS per CU, 512 VGPRs per lane incl.
 *           AccVGPRs on gfx90a/gfx942).
 * Derived figures say how they are derived: shared-memory bandwidth is
 * banks x bank width x units x clock (32 x 4 B per clock per SM / CU).
 * NVIDIA publishes no L2 bandwidth for H100 / RTX 4090; those rows are
 * microbenchmark-level estimates and say so.
 */
#include "target.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024LL
#define MIB (1024LL * 1024LL)

/* Shared-memory bandwidth in GB/s from banks x width per clock per unit. */
#define SMEM_GBS(units, ghz) ((units) * 32.0 * 4.0 * (ghz))

/* Host-side control-flow costs in microseconds: a kernel launch back to back
 * (launch_us: what -welder and -rammer charge per kernel, what -grinder weighs
 * against a persistent loop), a scalar device-to-host read with its sync, a
 * cooperative launch, one grid barrier at full co-residency (grid_barrier_us:
 * also -rammer's barrier between waves), one __syncthreads.  A target file may
 * set them (keys of the same names).
 * GPUs: ASSUMPTIONS, neither published nor measured (no GPU was available to
 * calibrate them; issue 15 measures them).  CUDA's launch 2.5 us and grid
 * barrier 1.0 us are the figures -welder and -rammer were tuned with, so
 * their decisions for the CUDA targets stay as they were.
 * C (the `cpu` target, qcodegen -c): MEASURED on the development host (2
 * cores, gcc -O3 -march=native -fopenmp, libgomp, OMP_NUM_THREADS=2 as
 * bench/cpu runs): a kernel is a function whose blocks are one
 * `#pragma omp parallel for schedule(static)` (threads are inner loops), so a
 * launch is a call plus the parallel region's fork and join: 1.26-1.30 us per
 * call of an empty 64-block kernel over 200000 calls (0.25 us with one
 * thread, 0.004 us without OpenMP).  -rammer's waves are separate launches in
 * C, so a grid barrier costs a launch; a block barrier is the end of a loop
 * over the block's threads, next to nothing.  Fork/join grows with the core
 * count: describe a bigger host with -target-file. */
#define CUDA_HOST_COSTS .launch_us = 2.5, .read_back_us = 8.0, .coop_launch_us = 6.0, .grid_barrier_us = 1.0, .block_barrier_us = 0.02, \
                        KERNEL_LATENCIES
#define HIP_HOST_COSTS .launch_us = 5.0, .read_back_us = 12.0, .coop_launch_us = 10.0, .grid_barrier_us = 2.5, .block_barrier_us = 0.05, \
                       KERNEL_LATENCIES
#define C_HOST_COSTS .launch_us = 1.3, .read_back_us = 0.0, .coop_launch_us = 1.3, .grid_barrier_us = 1.3, .block_barrier_us = 0.05, \
                     KERNEL_LATENCIES
/* Roller's latencies inside a kernel (cycles): ASSUMPTIONS, the same for every
 * target (a global load's few hundred cycles, a barrier's tens). */
#define KERNEL_LATENCIES .load_latency_cycles = QIR_LOAD_LATENCY_CYCLES, .barrier_cycles = QIR_BARRIER_CYCLES

/* Hopper: wgmma m64nNk16 up to N = 256 [PTX].  Measured on an H200 (2026-11-27,
 * docs/perf.md): mma.sync at half the tensor peak (our mma.sync plans of BERT-base's
 * GEMMs at batch 64 ran at 0.38-0.56 (f16) and 0.50-0.95 (bf16) of the speed of our wgmma
 * plans of the same tiles; 0.625 had been assumed from "perhaps 60-65%"); the producer
 * warpgroups' loads (a 16-bit load, a guard and a swizzled store per element,
 * instruction-bound) at 3 bytes a clock per SM (a batch-32 3x3 convolution's wgmma plan
 * moved 3.0 with four blocks resident; 64 had been assumed, which rated it 27 us: it ran
 * 500). */
#define HOPPER_WGMMA .wgmma_n_max = 256, .mma_sync_share = 0.5, .wgmma_load_bytes_per_clk = QIR_WGMMA_LOAD_BYTES_PER_CLK

static const qir_target builtin_targets[] = {
    {
        .name = "h100", .backend = "cuda", .arch = "sm_90",
        CUDA_HOST_COSTS,
        .compute_units = 132,                   /* [H100W] H100 SXM5: 132 SMs */
        .warp_size = 32,
        .max_threads_per_block = 1024,          /* [CCT] cc 9.0 */
        .max_threads_per_unit = 2048,           /* [CCT] */
        .max_blocks_per_unit = 32,              /* [CCT] */
        .regs_per_unit = 65536,                 /* [CCT] 64K 32-bit registers per SM */
        .max_regs_per_thread = 255,             /* [CCT] */
        .smem_per_block = 227 * KIB,            /* [CCT] cc 9.0: 227 KB per block (opt-in) */
        .smem_per_unit = 228 * KIB,             /* [CCT] 228 KB per SM */
        .l2_bytes = 50 * MIB,                   /* [H100W] 50 MB L2 */
        .clock_ghz = 1.98,                      /* [H100W] 66.9 TF FP32 / (132 SM x 128 FMA x 2) */
        .dram_gbs = 3350,                       /* [H100D] SXM HBM3 3.35 TB/s */
        .l2_gbs = 7000,                         /* estimate: not published; microbenchmarks ~5.5-7 TB/s */
        .smem_gbs = SMEM_GBS(132, 1.98),        /* derived: 32 banks x 4 B x 132 SM x 1.98 GHz */
        .peak_gflops = {
            [QIR_PEAK_VEC_F64] = 33500,         /* [H100W] */
            [QIR_PEAK_VEC_F32] = 66900,         /* [H100W] */
            [QIR_PEAK_VEC_F16] = 133800,        /* [H100W] FP16 non-tensor */
            [QIR_PEAK_VEC_I32] = 33500,         /* [H100W] INT32 = half the FP32 lanes */
            [QIR_PEAK_MMA_F16] = 989400,        /* [H100W] dense FP16 tensor, FP32 accumulate */
            [QIR_PEAK_MMA_BF16] = 989400,       /* [H100W] */
            [QIR_PEAK_MMA_TF32] = 494700,       /* [H100W] */
            [QIR_PEAK_MMA_I8] = 1978900,        /* [H100W] INT8 tensor TOPS */
        },
        .transaction_bytes = 32,                /* [CCT] global accesses are served in 32 B sectors */
        .cache_line_bytes = 128,
        .smem_banks = 32, .bank_bytes = 4,      /* [CCT] "Shared Memory" (cc 5.x and later) */
        .mma_m = 16, .mma_n = 8, .mma_k = 16,   /* [PTX] mma.sync.m16n8k16 f16/bf16 (sm_80 and up) */
        HOPPER_WGMMA,
    },
    {
        .name = "h200", .backend = "cuda", .arch = "sm_90",
        CUDA_HOST_COSTS,
        .compute_units = 132,                   /* [H200D] same GH100 SXM configuration as H100 */
        .warp_size = 32,
        .max_threads_per_block = 1024, .max_threads_per_unit = 2048, .max_blocks_per_unit = 32,
        .regs_per_unit = 65536, .max_regs_per_thread = 255,   /* [CCT] cc 9.0 */
        .smem_per_block = 227 * KIB, .smem_per_unit = 228 * KIB, /* [CCT] */
        .l2_bytes = 50 * MIB,                   /* [H100W] */
        .clock_ghz = 1.98,
        .dram_gbs = 4800,                       /* [H200D] HBM3e 4.8 TB/s */
        .l2_gbs = 7000,                         /* estimate, as h100 */
        .smem_gbs = SMEM_GBS(132, 1.98),
        .peak_gflops = {
            [QIR_PEAK_VEC_F64] = 34000,         /* [H200D] */
            [QIR_PEAK_VEC_F32] = 67000,         /* [H200D] */
            [QIR_PEAK_VEC_F16] = 133800,        /* [H100W] same SM */
            [QIR_PEAK_VEC_I32] = 33500,
            [QIR_PEAK_MMA_F16] = 989500,        /* [H200D] 1979 TF with sparsity / 2 */
            [QIR_PEAK_MMA_BF16] = 989500,       /* [H200D] */
            [QIR_PEAK_MMA_TF32] = 494500,       /* [H200D] 989 TF with sparsity / 2 */
            [QIR_PEAK_MMA_I8] = 1979000,        /* [H200D] 3958 TOPS with sparsity / 2 */
        },
        .transaction_bytes = 32, .cache_line_bytes = 128,
        .smem_banks = 32, .bank_bytes = 4,
        .mma_m = 16, .mma_n = 8, .mma_k = 16,   /* [PTX] mma.sync.m16n8k16 */
        HOPPER_WGMMA,
    },
    {
        .name = "a100", .backend = "cuda", .arch = "sm_80",
        CUDA_HOST_COSTS,
        .compute_units = 108,                   /* [A100W] */
        .warp_size = 32,
        .max_threads_per_block = 1024, .max_threads_per_unit = 2048, .max_blocks_per_unit = 32,
        .regs_per_unit = 65536, .max_regs_per_thread = 255,   /* [CCT] cc 8.0 */
        .smem_per_block = 163 * KIB,            /* [CCT] cc 8.0 */
        .smem_per_unit = 164 * KIB,             /* [CCT] */
        .l2_bytes = 40 * MIB,                   /* [A100W] */
        .clock_ghz = 1.41,                      /* [A100W] boost */
        .dram_gbs = 2039,                       /* [A100D] 80 GB SXM */
        .l2_gbs = 5120 * 1.41,                  /* [A100W] 5120 B/clk L2 read bandwidth */
        .smem_gbs = SMEM_GBS(108, 1.41),
        .peak_gflops = {
            [QIR_PEAK_VEC_F64] = 9700,          /* [A100W] */
            [QIR_PEAK_VEC_F32] = 19500,         /* [A100W] */
            [QIR_PEAK_VEC_F16] = 78000,         /* [A100W] FP16 non-tensor */
            [QIR_PEAK_VEC_I32] = 19500,         /* [A100W] */
            [QIR_PEAK_MMA_F16] = 312000,        /* [A100W] */
            [QIR_PEAK_MMA_BF16] = 312000,       /* [A100W] */
            [QIR_PEAK_MMA_TF32] = 156000,       /* [A100W] */
            [QIR_PEAK_MMA_I8] = 624000,         /* [A100W] */
        },
        .transaction_bytes = 32, .cache_line_bytes = 128,
        .smem_banks = 32, .bank_bytes = 4,
        .mma_m = 16, .mma_n = 8, .mma_k = 16,   /* [PTX] mma.sync.m16n8k16 */
    },
    {
        .name = "v100", .backend = "cuda", .arch = "sm_70",
        CUDA_HOST_COSTS,
        .compute_units = 80,                    /* [V100W] SXM2 */
        .warp_size = 32,
        .max_threads_per_block = 1024, .max_threads_per_unit = 2048, .max_blocks_per_unit = 32,
        .regs_per_unit = 65536, .max_regs_per_thread = 255,   /* [CCT] cc 7.0 */
        .smem_per_block = 96 * KIB,             /* [CCT] cc 7.0 (opt-in) */
        .smem_per_unit = 96 * KIB,              /* [CCT] */
        .l2_bytes = 6 * MIB,                    /* [V100W] */
        .clock_ghz = 1.53,                      /* [V100W] boost */
        .dram_gbs = 900,                        /* [V100W] */
        .l2_gbs = 2048 * 1.53,                  /* [A100W] V100 L2: 2048 B/clk */
        .smem_gbs = SMEM_GBS(80, 1.53),
        .peak_gflops = {
            [QIR_PEAK_VEC_F64] = 7800,          /* [V100W] */
            [QIR_PEAK_VEC_F32] = 15700,         /* [V100W] */
            [QIR_PEAK_VEC_F16] = 31400,         /* [V100W] */
            [QIR_PEAK_VEC_I32] = 15700,         /* [V100W] */
            [QIR_PEAK_MMA_F16] = 125000,        /* [V100W] */
        },
        .transaction_bytes = 32, .cache_line_bytes = 128,
        .smem_banks = 32, .bank_bytes = 4,
        .mma_m = 16, .mma_n = 16, .mma_k = 16,  /* [CCT] wmma, half only (no bf16 on cc 7.0) */
    },
    {
        .name = "rtx4090", .backend = "cuda", .arch = "sm_89",
        CUDA_HOST_COSTS,
        .compute_units = 128,                   /* [ADAW] */
        .warp_size = 32,
        .max_threads_per_block = 1024,
        .max_threads_per_unit = 1536,           /* [CCT] cc 8.9 */
        .max_blocks_per_unit = 24,              /* [CCT] cc 8.9 */
        .regs_per_unit = 65536, .max_regs_per_thread = 255,
        .smem_per_block = 99 * KIB,             /* [CCT] cc 8.9 */
        .smem_per_unit = 100 * KIB,             /* [CCT] */
        .l2_bytes = 72 * MIB,                   /* [ADAW] */
        .clock_ghz = 2.52,                      /* [ADAW] boost */
        .dram_gbs = 1008,                       /* [ADAW] GDDR6X */
        .l2_gbs = 5000,                         /* estimate: not published */
        .smem_gbs = SMEM_GBS(128, 2.52),
        .peak_gflops = {
            [QIR_PEAK_VEC_F64] = 1290,          /* [ADAW] 1/64 of FP32 */
            [QIR_PEAK_VEC_F32] = 82600,         /* [ADAW] */
            [QIR_PEAK_VEC_F16] = 82600,         /* [ADAW] FP16 non-tensor = FP32 rate */
            [QIR_PEAK_VEC_I32] = 41300,         /* [ADAW] half the FP32 lanes */
            [QIR_PEAK_MMA_F16] = 165200,        /* [ADAW] FP16 tensor, FP32 accumulate, dense */
            [QIR_PEAK_MMA_BF16] = 165200,       /* [ADAW] */
            [QIR_PEAK_MMA_TF32] = 82600,        /* [ADAW] */
            [QIR_PEAK_MMA_I8] = 660600,         /* [ADAW] */
        },
        .transaction_bytes = 32, .cache_line_bytes = 128,
        .smem_banks = 32, .bank_bytes = 4,
        .mma_m = 16, .mma_n = 8, .mma_k = 16,   /* [PTX] mma.sync.m16n8k16 */
    },
    {
        /* One MI250 GCD: each GCD is a separate HIP device, so a kernel sees
         * half the package (104 of 208 CUs, half the HBM bandwidth). */
        .name = "mi250", .backend = "hip", .arch = "gfx90a",
        HIP_HOST_COSTS,
        .compute_units = 104,                   /* [CDNA2] 208 CUs / 2 GCDs */
        .warp_size = 64,                        /* [HIPHW] wavefront 64 */
        .max_threads_per_block = 1024,          /* [HIPHW] */
        .max_threads_per_unit = 2048,           /* [CDNA2] 4 SIMDs x 8 waves x 64 */
        .max_blocks_per_unit = 32,              /* [HIPHW] bounded by 32 waves per CU */
        .regs_per_unit = 131072,                /* [HIPHW] 4 SIMDs x 512 VGPRs x 64 lanes */
        .max_regs_per_thread = 512,             /* [HIPHW] 256 VGPRs + 256 AccVGPRs */
        .smem_per_block = 64 * KIB,             /* [HIPHW] LDS per workgroup */
        .smem_per_unit = 64 * KIB,              /* [HIPHW] LDS per CU */
        .l2_bytes = 8 * MIB,                    /* [CDNA2] 8 MB per GCD */
        .clock_ghz = 1.7,                       /* [CDNA2] peak engine clock */
        .dram_gbs = 1600,                       /* [CDNA2] 3.2 TB/s / 2 GCDs */
        .l2_gbs = 2048 * 1.7,                   /* [CDNA2] 16 channels x 128 B/clk per GCD */
        .smem_gbs = SMEM_GBS(104, 1.7),         /* derived: 128 B/clk LDS per CU */
        .peak_gflops = {
            [QIR_PEAK_VEC_F64] = 22650,         /* [CDNA2] 45.3 TF / 2 */
            [QIR_PEAK_VEC_F32] = 22650,         /* [CDNA2] 45.3 TF / 2 (unpacked) */
            [QIR_PEAK_VEC_F16] = 45300,         /* [CDNA2] packed FP16 = 2x FP32 vector */
            [QIR_PEAK_VEC_I32] = 22650,
            [QIR_PEAK_MMA_F16] = 181050,        /* [CDNA2] 362.1 TF / 2 */
            [QIR_PEAK_MMA_BF16] = 181050,       /* [CDNA2] */
            [QIR_PEAK_MMA_I8] = 181050,         /* [CDNA2] 362.1 TOPS / 2 */
        },
        .transaction_bytes = 64,                /* [CDNA2] 64 B HBM request granularity */
        .cache_line_bytes = 128,                /* [CDNA2] 128 B L2 line */
        .smem_banks = 32, .bank_bytes = 4,      /* [HIPHW] LDS: 32 banks of 4 B */
        .mma_m = 16, .mma_n = 16, .mma_k = 16,  /* v_mfma_f32_16x16x16f16 / bf16_1k */
    },
    {
        .name = "mi300x", .backend = "hip", .arch = "gfx942",
        HIP_HOST_COSTS,
        .compute_units = 304,                   /* [CDNA3] */
        .warp_size = 64,
        .max_threads_per_block = 1024, .max_threads_per_unit = 2048, .max_blocks_per_unit = 32,
        .regs_per_unit = 131072, .max_regs_per_thread = 512,  /* [HIPHW] */
        .smem_per_block = 64 * KIB, .smem_per_unit = 64 * KIB, /* [HIPHW] */
        .l2_bytes = 32 * MIB,                   /* [CDNA3] 4 MB per XCD x 8 (256 MB Infinity Cache behind) */
        .clock_ghz = 2.1,                       /* [CDNA3] peak engine clock */
        .dram_gbs = 5300,                       /* [CDNA3] HBM3 5.3 TB/s */
        .l2_gbs = 8 * 2048 * 2.1,               /* [CDNA3] 2 KB/clk per XCD x 8 */
        .smem_gbs = SMEM_GBS(304, 2.1),
        .peak_gflops = {
            [QIR_PEAK_VEC_F64] = 81700,         /* [CDNA3] */
            [QIR_PEAK_VEC_F32] = 163400,        /* [CDNA3] FP32 vector (dual-issue) */
            [QIR_PEAK_VEC_F16] = 163400,        /* assumed = FP32 vector (not in the datasheet) */
            [QIR_PEAK_VEC_I32] = 81700,
            [QIR_PEAK_MMA_F16] = 1307400,       /* [CDNA3] dense */
            [QIR_PEAK_MMA_BF16] = 1307400,      /* [CDNA3] */
            [QIR_PEAK_MMA_TF32] = 653700,       /* [CDNA3] */
            [QIR_PEAK_MMA_I8] = 2614900,        /* [CDNA3] */
        },
        .transaction_bytes = 64, .cache_line_bytes = 128,
        .smem_banks = 32, .bank_bytes = 4,
        .mma_m = 16, .mma_n = 16, .mma_k = 16,  /* v_mfma_f32_16x16x16_f16 */
    },
    {
        /* The host as the C backend runs it: blocks are an OpenMP loop over
         * cores, threads are inner loops the compiler vectorises, "shared
         * memory" is the per-core L2.  A generic 16-core AVX2 desktop (Zen 3 /
         * Ice Lake class), not one SKU: describe a real host with -target-file. */
        .name = "cpu", .backend = "c", .arch = "host",
        C_HOST_COSTS,
        .compute_units = 16,
        .warp_size = 8,                         /* AVX2: 8 f32 lanes */
        .max_threads_per_block = 1024,
        .max_threads_per_unit = 1024,
        .max_blocks_per_unit = 1,               /* one OpenMP iteration per core at a time */
        .regs_per_unit = 1024 * 64,             /* spills are cheap on a CPU: a loose bound */
        .max_regs_per_thread = 64,
        .smem_per_block = 512 * KIB,            /* typical per-core L2 */
        .smem_per_unit = 512 * KIB,
        .l2_bytes = 32 * MIB,                   /* shared L3 */
        .clock_ghz = 3.5,
        .dram_gbs = 50,                         /* dual-channel DDR4-3200 */
        .l2_gbs = 16 * 32 * 3.5,                /* L3: 32 B/clk per core */
        .smem_gbs = 16 * 64 * 3.5,              /* L2: 64 B/clk per core */
        .peak_gflops = {
            [QIR_PEAK_VEC_F64] = 16 * 16 * 3.5, /* 2 FMA x 4 lanes x 2 flops x 16 cores */
            [QIR_PEAK_VEC_F32] = 16 * 32 * 3.5, /* 2 FMA x 8 lanes x 2 flops */
            [QIR_PEAK_VEC_F16] = 16 * 32 * 3.5, /* converted to f32 */
            [QIR_PEAK_VEC_I32] = 16 * 16 * 3.5,
        },
        .transaction_bytes = 64, .cache_line_bytes = 64,
        .smem_banks = 0, .bank_bytes = 4,
        .mma_m = 0, .mma_n = 0, .mma_k = 0,
    },
};

#define N_BUILTIN ((int)(sizeof builtin_targets / sizeof builtin_targets[0]))

int qir_target_count(void) { return N_BUILTIN; }

const qir_target *qir_target_at(int i) { return i >= 0 && i < N_BUILTIN ? &builtin_targets[i] : NULL; }

const qir_target *qir_target_get(const char *name) {
  for (int i = 0; name && i < N_BUILTIN; i++)
    if (strcmp(builtin_targets[i].name, name) == 0) return &builtin_targets[i];
  return NULL;
}

double qir_target_peak(const qir_target *t, qir_dtype dt, bool matrix) {
  if (matrix) {
    switch (dt) {
    case QIR_F16: return t->peak_gflops[QIR_PEAK_MMA_F16];
    case QIR_BF16: return t->peak_gflops[QIR_PEAK_MMA_BF16];
    case QIR_F32: return t->peak_gflops[QIR_PEAK_MMA_TF32];
    case QIR_I8: case QIR_U8: return t->peak_gflops[QIR_PEAK_MMA_I8];
    default: return 0;
    }
  }
  double r;
  switch (dt) {
  case QIR_F64: r = t->peak_gflops[QIR_PEAK_VEC_F64]; break;
  case QIR_F16: case QIR_BF16: r = t->peak_gflops[QIR_PEAK_VEC_F16]; break;
  case QIR_F32: r = t->peak_gflops[QIR_PEAK_VEC_F32]; break;
  default: r = t->peak_gflops[QIR_PEAK_VEC_I32]; break;
  }
  return r > 0 ? r : t->peak_gflops[QIR_PEAK_VEC_F32];
}

/* ------------------------------------------------------------ the file format
 * One table of keys drives parsing, printing and the "missing key" check. */

typedef enum { KEY_STR, KEY_INT, KEY_I64, KEY_DBL } key_kind;

typedef struct {
  const char *key;
  key_kind kind;
  size_t offset;
  size_t size;                  /* KEY_STR: capacity */
  bool optional;                /* may be absent without a base */
} key_desc;

#define K_STR(f) {#f, KEY_STR, offsetof(qir_target, f), sizeof(((qir_target *)0)->f), false}
#define K_INT(f, opt) {#f, KEY_INT, offsetof(qir_target, f), sizeof(int), opt}
#define K_I64(f) {#f, KEY_I64, offsetof(qir_target, f), sizeof(int64_t), false}
#define K_DBL(f) {#f, KEY_DBL, offsetof(qir_target, f), sizeof(double), false}
#define K_DBL_OPT(f) {#f, KEY_DBL, offsetof(qir_target, f), sizeof(double), true}

static const key_desc keys[] = {
    K_STR(name), K_STR(backend), K_STR(arch),
    K_INT(compute_units, false), K_INT(warp_size, false), K_INT(max_threads_per_block, false),
    K_INT(max_threads_per_unit, false), K_INT(max_blocks_per_unit, false),
    K_INT(regs_per_unit, false), K_INT(max_regs_per_thread, false),
    K_I64(smem_per_block), K_I64(smem_per_unit), K_I64(l2_bytes),
    K_DBL(clock_ghz), K_DBL(dram_gbs), K_DBL(l2_gbs), K_DBL(smem_gbs),
#define X(id, key) {key, KEY_DBL, offsetof(qir_target, peak_gflops) + QIR_PEAK_##id * sizeof(double), \
                    sizeof(double), true},
    QIR_PEAKS(X)
#undef X
    K_INT(transaction_bytes, false), K_INT(cache_line_bytes, false),
    K_INT(smem_banks, false), K_INT(bank_bytes, false),
    K_INT(mma_m, true), K_INT(mma_n, true), K_INT(mma_k, true),
    K_DBL_OPT(launch_us), K_DBL_OPT(read_back_us), K_DBL_OPT(coop_launch_us), K_DBL_OPT(grid_barrier_us),
    K_DBL_OPT(block_barrier_us), K_DBL_OPT(load_latency_cycles), K_DBL_OPT(barrier_cycles),
    K_INT(wgmma_n_max, true), K_DBL_OPT(mma_sync_share), K_DBL_OPT(wgmma_load_bytes_per_clk),
};

#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

void qir_target_print(FILE *out, const qir_target *t) {
  for (int i = 0; i < N_KEYS; i++) {
    const char *p = (const char *)t + keys[i].offset;
    fprintf(out, "%s = ", keys[i].key);
    switch (keys[i].kind) {
    case KEY_STR: fprintf(out, "%s\n", p); break;
    case KEY_INT: fprintf(out, "%d\n", *(const int *)p); break;
    case KEY_I64: fprintf(out, "%lld\n", (long long)*(const int64_t *)p); break;
    case KEY_DBL: fprintf(out, "%.17g\n", *(const double *)p); break;
    }
  }
}

typedef struct {
  const char *file;
  qir_diag *d;
  int line;
  const char *line_start;
} parse_ctx;

static qir_loc loc_at(const parse_ctx *c, const char *p) {
  return (qir_loc){c->file, c->line, (int)(p - c->line_start) + 1};
}

/* Parses a number with an optional binary size suffix; `*end` gets the first
 * unparsed byte.  Integers must be whole after scaling. */
static bool parse_number(const char *p, const char *lim, double *out, const char **end) {
  char buf[64];
  size_t n = (size_t)(lim - p);
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, p, n);
  buf[n] = 0;
  char *e;
  errno = 0;
  double v = strtod(buf, &e);
  if (e == buf || errno == ERANGE || !isfinite(v)) return false;
  while (*e == ' ' || *e == '\t') e++;
  if (strcmp(e, "KiB") == 0) v *= 1024.0, e += 3;
  else if (strcmp(e, "MiB") == 0) v *= 1024.0 * 1024.0, e += 3;
  else if (strcmp(e, "GiB") == 0) v *= 1024.0 * 1024.0 * 1024.0, e += 3;
  *out = v;
  *end = p + (e - buf);
  return *e == 0;
}

static bool set_value(parse_ctx *c, qir_target *t, const key_desc *k, const char *v, const char *vend) {
  char *field = (char *)t + k->offset;
  if (v == vend) {
    qir_error(c->d, loc_at(c, v), "missing value for '%s'", k->key);
    return false;
  }
  if (k->kind == KEY_STR) {
    size_t n = (size_t)(vend - v);
    if (n >= k->size) {
      qir_error(c->d, loc_at(c, v), "value of '%s' is longer than %zu characters", k->key, k->size - 1);
      return false;
    }
    for (const char *q = v; q < vend; q++)
      if (!isalnum((unsigned char)*q) && *q != '_' && *q != '-' && *q != '.') {
        qir_error(c->d, loc_at(c, q), "'%s' may only contain letters, digits, '_', '-' and '.'", k->key);
        return false;
      }
    memcpy(field, v, n);
    field[n] = 0;
    return true;
  }
  double x;
  const char *end;
  if (!parse_number(v, vend, &x, &end)) {
    qir_error(c->d, loc_at(c, v), "expected a number for '%s'", k->key);
    return false;
  }
  if (x < 0) {
    qir_error(c->d, loc_at(c, v), "'%s' must not be negative", k->key);
    return false;
  }
  if (k->kind == KEY_DBL) {
    *(double *)field = x;
    return true;
  }
  double limit = k->kind == KEY_INT ? 2147483647.0 : 9.2e18;
  if (x != floor(x) || x > limit) {
    qir_error(c->d, loc_at(c, v), "'%s' must be a whole number%s", k->key,
              x > limit ? " in range" : "");
    return false;
  }
  if (k->kind == KEY_INT) *(int *)field = (int)x;
  else *(int64_t *)field = (int64_t)x;
  return true;
}

/* Consistency rules a planner relies on (divisions, warp multiples). */
static bool check_target(parse_ctx *c, const qir_target *t) {
  qir_loc at = {c->file, 1, 1};
  const char *why = NULL;
  if (t->compute_units <= 0) why = "compute_units must be positive";
  else if (t->warp_size <= 0 || (t->warp_size & (t->warp_size - 1))) why = "warp_size must be a power of two";
  else if (t->max_threads_per_block < t->warp_size) why = "max_threads_per_block must be at least warp_size";
  else if (t->max_threads_per_unit < t->max_threads_per_block) why = "max_threads_per_unit must be at least max_threads_per_block";
  else if (t->max_blocks_per_unit <= 0) why = "max_blocks_per_unit must be positive";
  else if (t->regs_per_unit <= 0 || t->max_regs_per_thread <= 0) why = "register counts must be positive";
  else if (t->smem_per_block <= 0 || t->smem_per_unit < t->smem_per_block) why = "smem_per_block must be positive and at most smem_per_unit";
  else if (t->clock_ghz <= 0 || t->dram_gbs <= 0 || t->l2_gbs <= 0 || t->smem_gbs <= 0) why = "clock and bandwidths must be positive";
  else if (t->peak_gflops[QIR_PEAK_VEC_F32] <= 0) why = "peak_f32 must be positive";
  else if (t->transaction_bytes <= 0 || t->cache_line_bytes <= 0 || t->bank_bytes <= 0) why = "transaction_bytes, cache_line_bytes and bank_bytes must be positive";
  else if ((t->mma_m > 0) != (t->mma_n > 0) || (t->mma_m > 0) != (t->mma_k > 0)) why = "mma_m, mma_n, mma_k must be all zero or all positive";
  else if (t->wgmma_n_max && (t->wgmma_n_max % 8 || t->wgmma_n_max > 256 || strcmp(t->backend, "cuda") || t->mma_m != 16))
    why = "wgmma_n_max must be 0 or a multiple of 8 up to 256, on a cuda target with mma.sync (mma_m = 16)";
  else if (t->mma_sync_share < 0 || t->mma_sync_share > 1) why = "mma_sync_share must be from 0 to 1";
  else if (t->wgmma_load_bytes_per_clk < 0) why = "wgmma_load_bytes_per_clk must not be negative";
  else if (!t->name[0]) why = "missing key 'name'";
  else if (strcmp(t->backend, "cuda") && strcmp(t->backend, "hip") && strcmp(t->backend, "c")) why = "backend must be cuda, hip or c";
  if (!why) return true;
  qir_error(c->d, at, "invalid target: %s", why);
  return false;
}

bool qir_target_parse(const char *text, size_t len, const char *file, qir_target *out, qir_diag *d) {
  parse_ctx c = {file, d, 0, text};
  qir_target t;
  memset(&t, 0, sizeof t);
  t.load_latency_cycles = QIR_LOAD_LATENCY_CYCLES;
  t.barrier_cycles = QIR_BARRIER_CYCLES;
  bool have_base = false, ok = true;
  unsigned char seen[N_KEYS];
  memset(seen, 0, sizeof seen);
  const char *p = text, *end = text + len;
  while (p < end) {
    c.line++;
    c.line_start = p;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    const char *lim = p;
    while (lim < eol && *lim != '#') lim++;
    while (lim > p && isspace((unsigned char)lim[-1])) lim--;
    const char *k = p;
    while (k < lim && isspace((unsigned char)*k)) k++;
    if (k < lim) {
      const char *kend = k;
      while (kend < lim && (isalnum((unsigned char)*kend) || *kend == '_')) kend++;
      const char *eq = kend;
      while (eq < lim && isspace((unsigned char)*eq)) eq++;
      if (kend == k || eq >= lim || *eq != '=') {
        qir_error(d, loc_at(&c, kend == k ? k : eq), "%s", kend == k ? "expected a key" : "expected '=' after the key");
        ok = false;
      } else {
        const char *v = eq + 1;
        while (v < lim && isspace((unsigned char)*v)) v++;
        size_t klen = (size_t)(kend - k);
        if (klen == 4 && memcmp(k, "base", 4) == 0) {
          char nm[32];
          size_t n = (size_t)(lim - v);
          const qir_target *b = n < sizeof nm ? (memcpy(nm, v, n), nm[n] = 0, qir_target_get(nm)) : NULL;
          bool any_seen = false;
          for (int i = 0; i < N_KEYS; i++) any_seen |= seen[i];
          if (have_base || any_seen) {
            qir_error(d, loc_at(&c, k), "'base' must come first, once");
            ok = false;
          } else if (!b) {
            qir_error(d, loc_at(&c, v), "unknown base target '%.*s'", (int)n, v);
            ok = false;
          } else {
            t = *b;
            have_base = true;
          }
        } else {
          int i = 0;
          while (i < N_KEYS && !(strlen(keys[i].key) == klen && memcmp(keys[i].key, k, klen) == 0)) i++;
          if (i == N_KEYS) {
            qir_error(d, loc_at(&c, k), "unknown target key '%.*s'", (int)klen, k);
            ok = false;
          } else if (seen[i]) {
            qir_error(d, loc_at(&c, k), "duplicate key '%s'", keys[i].key);
            ok = false;
          } else {
            seen[i] = 1;
            ok &= set_value(&c, &t, &keys[i], v, lim);
          }
        }
      }
    }
    p = eol < end ? eol + 1 : end;
  }
  if (!ok) return false;
  if (!have_base)
    for (int i = 0; i < N_KEYS; i++)
      if (!seen[i] && !keys[i].optional) {
        qir_loc last = {file, c.line ? c.line : 1, 1};
        qir_error(d, last, "missing key '%s' (or start with 'base = NAME')", keys[i].key);
        ok = false;
      }
  if (!ok) return false;
  c.line = 1;
  if (!check_target(&c, &t)) return false;
  *out = t;
  return true;
}

bool qir_target_parse_file(const char *path, qir_target *out, qir_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    qir_loc none = {path, 0, 0};
    qir_error(d, none, "cannot open target file '%s': %s", path, strerror(errno));
    return false;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nb = cap < (1u << 20) ? realloc(buf, cap * 2) : NULL;
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) {
    qir_loc none = {path, 0, 0};
    qir_error(d, none, "target file '%s' is too large", path);
    return false;
  }
  /* Messages about this file get its own caret lines. */
  qir_diag local;
  qir_diag_init(&local, d->out, path, buf, n);
  bool ok = qir_target_parse(buf, n, path, out, &local);
  d->n_errors += local.n_errors;
  d->n_warnings += local.n_warnings;
  free(buf);
  return ok;
}
