#!/usr/bin/env python3
"""Roller's register estimates against ptxas's (no GPU needed).

  scripts/regs-vs-ptxas.py PLANNED.qir [...]   [--arch sm_90] [-v]

Each module (planned by `qopt ... -roller`) is generated with `qcodegen -cuda`
and compiled with `nvcc -cubin -Xptxas -v`; each tiled kernel is matched to
its op's #tile (in order, by the block and thread tiles its summary comment
names) and its plan's `regs` set against the registers ptxas used.  Prints,
per kind (SIMT plans with a reduction staged through shared memory, other
SIMT plans, matrix-unit plans), how many kernels there are, the median of
ptxas / estimate, and how many are within 0.8-1.25x; -v lists every kernel.
Environment: QIR_BIN (default build/bin), NVCC (as kernel-report.py finds it).
"""
import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("kernel_report", os.path.join(TOP, "scripts", "kernel-report.py"))
kr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kr)


def plans(qir_text):
    """(block, thread, regs, kind) of each op's #tile, in order (flash plans left out)."""
    out = []
    for m in re.finditer(r"#tile\{([^{}]*)\}", qir_text):
        d = m.group(1)
        blk, thr = (re.search(r"\b%s = \[([^\]]*)\]" % k, d) for k in ("block", "thread"))
        rg = re.search(r"\bregs = (\d+)", d)
        if "flash" in d or not (blk and thr and rg):
            continue
        out.append((blk.group(1).replace(" ", ""), thr.group(1).replace(" ", ""), int(rg.group(1)),
                    "mma" if "mma" in d else "simt"))
    return out


def kernels(cu_text):
    """(kernel, block, thread, staged, has reduction) of each tiled kernel, in source order."""
    out = []
    for m in re.finditer(r"/\* ([^\n]*)\*/\n__global__ void (?:__launch_bounds__\([^)]*\) )?(k\d+)\(", cu_text):
        c = m.group(1)
        t = re.search(r"block \[([^\]]*)\] thread \[([^\]]*)\] rstep \[([^\]]*)\].*?staged (\d+)", c)
        w = re.search(r"block \[([^\]]*)\] warp tile \[([^\]]*)\]", c)  # the mma kernels
        if t:
            out.append((m.group(2), t.group(1), t.group(2), int(t.group(4)), bool(t.group(3))))
        elif w:
            out.append((m.group(2), w.group(1), w.group(2), 0, True))
    return out


def study(qir_path, nvcc, arch, qir_bin):
    with open(qir_path) as f:
        planned = plans(f.read())
    with tempfile.TemporaryDirectory(prefix="regs-vs-ptxas.") as tmp:
        cu = os.path.join(tmp, "m.cu")
        subprocess.run([os.path.join(qir_bin, "qcodegen"), "-cuda", qir_path, "-o", cu], check=True)
        with open(cu) as f:
            src = f.read()
        _, report = kr.compile_cu(nvcc, cu, arch, ())
    used = {kr.demangle(name): r["regs"] for name, r in kr.ptxas_resources(report).items()}
    rows, i = [], 0
    for k, blk, thr, staged, red in kernels(src):
        while i < len(planned) and planned[i][:2] != (blk, thr):
            i += 1
        if i == len(planned):
            break
        est, kind = planned[i][2], planned[i][3]
        if used.get(k):
            kind = kind if kind == "mma" else "simt staged reduction" if staged and red else "simt other"
            rows.append((os.path.basename(qir_path), k, kind, est, used[k]))
        i += 1
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("modules", nargs="+")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    qir_bin = os.environ.get("QIR_BIN", os.path.join(TOP, "build", "bin"))
    try:
        nvcc = kr.find_nvcc()
    except kr.NvccMissing as e:
        print("SKIPPED: %s" % e)
        return 0
    rows = []
    for m in args.modules:
        rows += study(m, nvcc, args.arch, qir_bin)
    if args.v:
        for r in rows:
            print("%-28s %-6s %-22s estimate %4d  ptxas %4d" % r)
    for kind in sorted({r[2] for r in rows}):
        q = [r[4] / r[3] for r in rows if r[2] == kind]
        within = sum(1 for x in q if 0.8 <= x <= 1.25)
        print("%-22s %5d kernels  median ptxas/estimate %.2f  within 0.8-1.25x: %d" % (kind, len(q), statistics.median(q), within))
    return 0


if __name__ == "__main__":
    sys.exit(main())
