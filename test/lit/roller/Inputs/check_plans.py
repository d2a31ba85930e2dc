#!/usr/bin/env python3
"""Checks every #tile plan in a .qir stream against the device's limits.

Reads qopt output on stdin.  The limits are written down here again from the
vendors' documentation (CUDA C++ Programming Guide, compute-capability table;
ROCm HIP hardware documentation), independently of qir/target.c, so a planner
that ignored a limit is caught.  Also checks the plan's own arithmetic: grid =
ceil(extent / block), threads = prod(ceil(block / thread)) (x warp with mma, x
rsplit lanes for split reductions),
vector width dividing the thread tile, mma alignment.  The warp rule: threads
are a whole number of warps, unless the plan is tiny (grid 1, fewer threads
than a warp).  Block tiles stay within their extent: never past the extent
rounded up to the thread tile, and the padding of the last block at most
MAX_WASTE of the extent (or no more than the thread tile's own), except a
block of whole warps along an axis where no size within those limits would
give whole warps in as few lanes (the warp rule needs the padding).
Prints `checked N plans` and exits 1 listing every violation.
"""
import math
import re
import sys

# target: (warp, max threads per block, max shared memory per block, max registers per thread)
LIMITS = {
    "h100": (32, 1024, 227 * 1024, 255),
    "h200": (32, 1024, 227 * 1024, 255),
    "a100": (32, 1024, 163 * 1024, 255),
    "v100": (32, 1024, 96 * 1024, 255),
    "rtx4090": (32, 1024, 99 * 1024, 255),
    "mi250": (64, 1024, 64 * 1024, 512),
    "mi300x": (64, 1024, 64 * 1024, 512),
    "cpu": (8, 1024, 512 * 1024, 64),
}

# targets with mma.sync.m16n8k16 (PTX ISA: sm_80 and up)
PIPELINED = {"h100", "h200", "a100", "rtx4090"}

# targets with wgmma.mma_async m64nNk16 (PTX ISA: sm_90a), N a multiple of 8 up to 256
WGMMA = {"h100", "h200"}

MAX_WASTE = 0.15  # padding of an axis relative to its extent (tools/qopt/roller.c)


def waste(extent, size):
    return (math.ceil(extent / size) * size - extent) / extent


def fits(extent, block, thread):
    """A block size within the extent rounded up to the thread tile, padding under the limit."""
    return (block <= math.ceil(extent / thread) * thread
            and waste(extent, block) <= max(MAX_WASTE, waste(extent, thread)) + 1e-9)


ENTRY = re.compile(r'(\w+) = (\[[^\]]*\]|"[^"]*"|[-+\w.]+)')


def parse_dict(text):
    out = {}
    for key, val in ENTRY.findall(text):
        if val.startswith("["):
            inner = val[1:-1].strip()
            out[key] = [int(x) for x in inner.split(",")] if inner else []
        elif val.startswith('"'):
            out[key] = val[1:-1]
        else:
            out[key] = float(val) if any(c in val for c in ".e") else int(val)
    return out


def main():
    errors, n = [], 0
    for lineno, line in enumerate(sys.stdin, 1):
        m = re.search(r"#tile\{([^}]*)\}", line)
        if not m:
            continue
        n += 1
        p = parse_dict(m.group(1))
        where = f"line {lineno}"
        rt = re.search(r":\s*\w+\[([0-9,]*)\]\s*$", line.rstrip())
        dims = [int(x) for x in rt.group(1).split(",")] if rt and rt.group(1) else []

        def bad(msg):
            errors.append(f"{where}: {msg}: {m.group(0)}")

        for key in ("block", "thread", "rstep", "grid", "threads", "smem_pad", "vec", "smem",
                    "regs", "est_us", "target"):
            if key not in p:
                bad(f"missing key {key}")
        if any(k not in p for k in ("block", "thread", "grid", "threads", "target")):
            continue
        if p["target"] not in LIMITS:
            bad("unknown target")
            continue
        warp, max_threads, max_smem, max_regs = LIMITS[p["target"]]
        block, thread, grid = p["block"], p["thread"], p["grid"]
        if not (len(block) == len(thread) == len(grid) == len(dims)):
            bad(f"rank mismatch with result dims {dims}")
            continue
        mma = p.get("mma")
        # a wgmma band (mma_axes [M, N, K, M2]): block[M] all of M, block[M2] rows of M2,
        # their block[M] x block[M2] rows in consumer warpgroups of thread[M] (64 or 128) rows
        band = p.get("mma_axes", []) if mma and len(mma) == 3 and mma[0] == 64 and len(p.get("mma_axes", [])) == 4 else None
        owners = math.prod(math.ceil(b / t) for i, (b, t) in enumerate(zip(block, thread))
                           if t >= 1 and not (band and i in (band[0], band[3])))
        if band:
            owners *= math.ceil(block[band[0]] * block[band[3]] / thread[band[0]])
        rsplit = p.get("rsplit", 1)
        for i, (b, t, g, e) in enumerate(zip(block, thread, grid, dims)):
            if band and i in (band[0], band[3]):
                if g != math.ceil(e / b):
                    bad(f"axis {i}: grid {g} != ceil({e}/{b})")
                if i == band[0] and b != e:
                    bad(f"band: block[M] {b} is not all of M ({e})")
                if i == band[3] and (thread[i] != 1 or b > e):
                    bad(f"band: thread[M2] must be 1 and block[M2] within M2 ({e})")
                continue
            if t < 1 or b < t or b % t:
                bad(f"axis {i}: block {b} is not a multiple of thread {t}")
            if g != math.ceil(e / b):
                bad(f"axis {i}: grid {g} != ceil({e}/{b})")
            if t >= 1 and not fits(e, b, t):
                # padding past the limits only for whole warps that no size within them
                # gives in as few lanes (blocks x threads rounded up to warps)
                rest = p["threads"] // math.ceil(b / t)
                others = math.prod(gg for j, gg in enumerate(grid) if j != i)
                lanes = math.prod(grid) * math.ceil(p["threads"] / warp) * warp
                within = [k * t for k in range(1, math.ceil(e / t) + 1)
                          if (k * rest) % warp == 0 and k * rest <= max_threads and fits(e, k * t, t)
                          and others * math.ceil(e / (k * t)) * k * rest <= lanes]
                if p["threads"] % warp or mma or within:
                    bad(f"axis {i}: block {b} oversized for extent {e} (thread {t})"
                        + (f"; {within[0]} would give whole warps" if within else ""))
        if rsplit != 1 and (rsplit % warp or rsplit & (rsplit - 1) or any(t != 1 for t in thread) or mma
                            or not p.get("rstep")):
            bad(f"rsplit {rsplit}: needs whole warps of lanes ({warp}), a power of two, thread tile 1, "
                "a reduction, no mma")
        wgmma = bool(mma) and len(mma) == 3 and mma[0] == 64
        # wgmma: a consumer warpgroup (128 threads) per warp tile, and one producer warpgroup
        threads = (owners + 1) * 128 if wgmma else owners * (warp if mma else 1) * rsplit
        if p["threads"] != threads:
            bad(f"threads {p['threads']} != {threads}")
        if p["threads"] > max_threads:
            bad(f"threads {p['threads']} > {max_threads}")
        if block and p["threads"] % warp and not (math.prod(grid) == 1 and p["threads"] < warp):
            bad(f"threads {p['threads']} not a multiple of the warp {warp}, and the plan is not "
                f"one block of fewer threads than a warp (grid {grid})")
        if p.get("smem", 0) > max_smem:
            bad(f"smem {p['smem']} > {max_smem}")
        if p.get("regs", 0) > max_regs:
            bad(f"regs {p['regs']} > {max_regs}")
        if block and not mma and thread[-1] % p.get("vec", 1):
            bad("vec does not divide the innermost thread tile")
        if any(r < 1 for r in p.get("rstep", [])):
            bad("rstep < 1")
        if mma:
            ax = p.get("mma_axes", [])
            if band:
                pass   # checked with the wgmma rules below
            elif len(mma) != 3 or len(ax) != 3:
                bad("mma needs [m, n, k] and mma_axes")
            elif (block[ax[0]] % mma[0] or block[ax[1]] % mma[1] or thread[ax[0]] % mma[0]
                  or thread[ax[1]] % mma[1] or p["rstep"][ax[2]] % mma[2]):
                bad("tile not aligned to the mma shape")
        # the pipelined tensor-core loop (mma.sync.m16n8k16, sm_80 and up): 2 to 4
        # cp.async stages of swizzled (unpadded) A and B tiles; warp tiles of
        # whole 16x16 pieces; wmma / MFMA ([16, 16, 16]) has no stages
        stages = p.get("stages")
        if mma == [16, 8, 16] and p["target"] not in PIPELINED:
            bad("mma [16, 8, 16] on a target without mma.sync.m16n8k16")
        if wgmma:
            ax = p.get("mma_axes", [])
            if p["target"] not in WGMMA:
                bad("mma [64, N, 16] on a target without wgmma")
            elif len(ax) in (3, 4):
                bm, bn, wm, rk = block[ax[0]], block[ax[1]], thread[ax[0]], p["rstep"][ax[2]]
                if band:   # the band's rows, rounded up to whole warpgroups' tiles, the last one in use
                    rows = block[ax[0]] * block[ax[3]]
                    bm = math.ceil(rows / wm) * wm
                    if rows <= bm - wm or block[ax[3]] < 2:
                        bad("band: two or more rows of M2, every consumer warpgroup's tile in use")
                # A's bm x 64 and B's 64 x bn per stage, 16-bit, plus an 8-byte mbarrier pair per stage
                if stages is None or not 2 <= stages <= 4:
                    bad("wgmma plans have 2 to 4 stages")
                elif p.get("smem") != stages * (bm + bn) * 64 * 2 + 16 * stages:
                    bad(f"smem {p.get('smem')} != stages x (block M + block N) x 64 x 2 + 16 x stages")
                if mma[1] != bn or thread[ax[1]] != bn or bn % 8 or bn > 256:
                    bad("wgmma: N = block N = thread N, a multiple of 8 up to 256")
                if wm not in (64, 128) or bm // wm not in (1, 2) or wm // 64 * bn > 256:
                    bad("wgmma: one or two consumer warpgroups of 64 or 128 rows, at most 128 accumulators each")
                if rk != 64 and (rk > 64 or rk % 16):
                    bad("wgmma: rstep 64 (or a shorter K's, in whole k16 slices)")
        elif (mma == [16, 8, 16]) != (stages is not None):
            bad("stages go with mma [16, 8, 16], and only with it")
        if stages is not None and mma == [16, 8, 16] and len(p.get("mma_axes", [])) == 3:
            ax = p["mma_axes"]
            bm, bn, rk = block[ax[0]], block[ax[1]], p["rstep"][ax[2]]
            if not 2 <= stages <= 4:
                bad(f"stages {stages} not in 2..4")
            if p.get("smem_pad", 0) != 0:
                bad("pipelined tiles are swizzled: smem_pad must be 0")
            if p.get("smem") != stages * (bm * rk + rk * bn) * 2:
                bad(f"smem {p.get('smem')} != stages x (block M x rstep K + rstep K x block N) x 2")
            if thread[ax[0]] % 16 or thread[ax[1]] % 16 or rk % 16:
                bad("warp tile along M and N and rstep along K must be multiples of 16")
        if not p.get("est_us", 0) > 0:
            bad("est_us must be positive")
    for e in errors:
        print(e)
    print(f"checked {n} plans, {len(errors)} violations")
    return 1 if errors or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
