#!/usr/bin/env python3
"""bench/gpu/fit_roller.py OPS_DIR RESULTS.json [--base h100] [--out FILE]

Fits Roller's device model to plans measured on a GPU (issue 23, step 3):
OPS_DIR is what bench/gpu/ops/prepare_ops.py made (OPS_DIR/NAME/op.roller.qir:
the operator with its top-10 plans), RESULTS.json what plan_timer measured on
the device.  Each candidate model is a target file (`base = h100` plus the
fitted keys); `qopt -roller -roller-estimate -target-file` re-rates the same
measured plans under it.  The fit minimises, per operator, the spread of
log((est_us + overhead) / measured) about its mean (what ranks the plans),
plus a tenth of that mean squared (the absolute level), by coordinate search
over multiplicative factors on each key (bandwidths, peak rates, latencies),
then the overhead (what one launch adds to a kernel's event time).

Prints, before and after: the Spearman rank correlation between est_us and the
measured time per operator (median over operators) and pooled over every
plan, and on how many operators the model's first plan is within 10% of the
best measured one.  --out writes the fitted target file.  Standard library
only; QIR_BIN (default build/bin) finds qopt.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "bench", "gpu", "ops"))
from report_ops import spearman  # noqa: E402  (the operator report's rank correlation)
KEYS = ["dram_gbs", "l2_gbs", "smem_gbs", "peak_f32", "peak_f16", "peak_mma_f16", "load_latency_cycles",
        "barrier_cycles"]
FACTORS = [0.25, 0.5, 0.7, 0.85, 1.2, 1.4, 2.0, 4.0]
ABS_WEIGHT = 0.1   # the absolute level counts a tenth: the ranking within an operator comes first


def estimates(qopt, module, target_file):
    """est_us of the op's #tile and each #tile_alternatives entry, in order."""
    r = subprocess.run([qopt, "-roller", "-roller-estimate", "-target-file", target_file, module],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr)
    for line in r.stdout.splitlines():
        if "#tile{" in line:
            return [float(x) for x in re.findall(r"est_us = ([0-9.eE+-]+)", line[line.index("#tile{"):])]
    return []


class Model:
    def __init__(self, qopt, base, base_vals):
        self.qopt, self.base, self.base_vals = qopt, base, base_vals
        self.dir = tempfile.mkdtemp(prefix="fit-roller.")

    def target(self, factors):
        path = os.path.join(self.dir, "t%d.target" % abs(hash(tuple(sorted(factors.items())))))
        with open(path, "w") as f:
            f.write("base = %s\n" % self.base)
            for k, v in factors.items():
                if v != 1.0:
                    f.write("%s = %.6g\n" % (k, self.base_vals[k] * v))
        return path


def evaluate(model, ops, factors, overhead):
    """(loss, per-op rho list, pooled rho, top-1-within-10% count, per-op est lists)."""
    tf = model.target(factors)
    loss, rhos, pooled_e, pooled_m, within, ests = 0.0, [], [], [], 0, {}
    for name, (module, measured) in ops.items():
        est = estimates(model.qopt, module, tf)
        pairs = [(est[k] + overhead, m) for k, m in measured.items() if k < len(est) and est[k] > 0]
        ests[name] = est
        if not pairs:
            continue
        # within one operator only the ratios between its plans matter to the
        # choice: the loss is the spread of log(est / measured) about its mean
        d = [math.log(e) - math.log(m) for e, m in pairs]
        mean = statistics.fmean(d)
        loss += sum((x - mean) ** 2 for x in d) + ABS_WEIGHT * mean * mean
        rhos.append(spearman([e for e, _ in pairs], [m for _, m in pairs]))
        pooled_e += [e for e, _ in pairs]
        pooled_m += [m for _, m in pairs]
        pick = min((k for k in measured if k < len(est)), key=lambda k: est[k])
        within += measured[pick] <= 1.1 * min(measured.values())
    rhos = [r for r in rhos if math.isfinite(r)]
    return loss, rhos, spearman(pooled_e, pooled_m), within, ests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ops_dir")
    ap.add_argument("results")
    ap.add_argument("--base", default="h100")
    ap.add_argument("--out", default="")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keys", default=",".join(KEYS), help="the target keys the fit may move (default: %(default)s)")
    ap.add_argument("--max-factor", type=float, default=0,
                    help="keep every key within this factor of the base's (e.g. 2: from half to twice); "
                         "0: unbounded (a fit of 2026-11-27 moved peak_mma_f16 to 0.06x, and the plans it "
                         "ranked first ran worse on the device)")
    args = ap.parse_args()
    qopt = os.path.join(os.environ.get("QIR_BIN", os.path.join(TOP, "build", "bin")), "qopt")
    res = json.load(open(args.results))
    ops = {}
    for row in res["ops"]:
        r = row.get("result", {})
        if r.get("check") not in ("ok", "reference") or r.get("median_us") is None:
            continue
        module = os.path.join(args.ops_dir, row["op"], "op.roller.qir")
        if os.path.exists(module):
            ops.setdefault(row["op"], (module, {}))[1][row["plan"]] = float(r["median_us"])
    if not ops:
        sys.exit("fit_roller.py: no measured plans with a module under %s" % args.ops_dir)
    # The base target's values, read back from qopt's printed target.
    dump = subprocess.run([qopt, "-print-target", "-target", args.base], capture_output=True, text=True)
    base_vals = {}
    for line in dump.stdout.splitlines():
        k, _, v = line.partition(" = ")
        if k in KEYS:
            base_vals[k] = float(v)
    keys = [k for k in args.keys.split(",") if k]
    unknown = [k for k in keys if k not in KEYS]
    if unknown:
        sys.exit("fit_roller.py: cannot fit %s (known: %s)" % (", ".join(unknown), ", ".join(KEYS)))
    missing = [k for k in keys if k not in base_vals]
    if missing:
        sys.exit("fit_roller.py: qopt -print-target gave no %s" % ", ".join(missing))
    model = Model(qopt, args.base, base_vals)
    factors = {k: 1.0 for k in keys}
    overhead = 0.0
    before = evaluate(model, ops, factors, 0.0)
    best = before[0]
    for _ in range(args.rounds):
        improved = False
        for k in keys:
            for f in FACTORS:
                trial = dict(factors, **{k: factors[k] * f})
                if args.max_factor and not 1 / args.max_factor <= trial[k] <= args.max_factor:
                    continue
                loss = evaluate(model, ops, trial, overhead)[0]
                if loss < best - 1e-9:
                    best, factors, improved = loss, trial, True
        for o in [0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0]:
            loss = evaluate(model, ops, factors, o)[0]
            if loss < best - 1e-9:
                best, overhead, improved = loss, o, True
        if not improved:
            break
    after = evaluate(model, ops, factors, overhead)
    n = len(ops)
    print("operators measured: %d, plans: %d" % (n, sum(len(m) for _, m in ops.values())))
    print("| model | loss | median per-op rho | pooled rho | top-1 within 10% of best |")
    print("|---|---|---|---|---|")
    for label, (loss, rhos, pooled, within, _) in (("before (%s)" % args.base, before), ("after fit", after)):
        print("| %s | %.2f | %.2f | %.2f | %d of %d |" % (label, loss, statistics.median(rhos) if rhos else float("nan"),
                                                        pooled, within, n))
    print("fitted: overhead %.1f us; %s" % (overhead, ", ".join("%s x%.3g = %.6g" % (k, f, base_vals[k] * f)
                                                               for k, f in factors.items() if f != 1.0) or "no key moved"))
    if args.out:
        with open(args.out, "w") as f:
            f.write("# Roller's %s model fitted to plans measured on the device (bench/gpu/fit_roller.py)\n" % args.base)
            f.write("base = %s\n" % args.base)
            for k, fac in factors.items():
                if fac != 1.0:
                    f.write("%s = %.6g\n" % (k, base_vals[k] * fac))
            f.write("launch_us = %.3g\n" % max(overhead, 0.1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
