#!/usr/bin/env python3
"""Tables for issue 23 step 3 from plan_timer's and torch_ops.py's results (plain python3).

    report_ops.py RESULTS.json [RESULTS_TORCH.json] [--manifest OUTDIR/manifest.json]
                  [--csv plans.csv]

Prints a markdown table per operator (top-1 and best-of-top-10 times of the plans whose
output matched, which plan was best, Spearman's rho between est_us and the measured
median, PyTorch's time and ours over it), a summary, and writes one CSV row per plan
(op, plan, est_us, measured median and min, check, tile parameters) for the fit of
Roller's constants. The manifest (default: next to RESULTS' manifest path) gives the
dtype, flops and the tile text.
"""
import argparse
import csv
import json
import math
import os
import sys


def ranks(v):
    idx = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and v[idx[j + 1]] == v[idx[i]]:
            j += 1
        for k in range(i, j + 1):
            r[idx[k]] = 0.5 * (i + j)
        i = j + 1
    return r


def spearman(a, b):
    if len(a) < 3:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    sab = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    saa = sum((x - ma) ** 2 for x in ra)
    sbb = sum((y - mb) ** 2 for y in rb)
    return sab / math.sqrt(saa * sbb) if saa > 0 and sbb > 0 else float("nan")


def median(v):
    v = sorted(v)
    n = len(v)
    if not n:
        return float("nan")
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def fmt(x, f="%.2f"):
    return f % x if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("torch_results", nargs="?")
    ap.add_argument("--manifest", default="")
    ap.add_argument("--csv", default="")
    args = ap.parse_args()
    with open(args.results) as f:
        res = json.load(f)
    man_path = args.manifest or res.get("manifest", "")
    man = {}
    if man_path and os.path.exists(man_path):
        with open(man_path) as f:
            man = {o["name"]: o for o in json.load(f)["ops"]}
    torch_rows = {}
    tdev = ""
    if args.torch_results and os.path.exists(args.torch_results):
        with open(args.torch_results) as f:
            tr = json.load(f)
        tdev = "%s, torch %s, cuDNN %s" % (tr.get("device"), tr.get("torch"), tr.get("cudnn"))
        torch_rows = {r["op"]: r for r in tr["ops"]}
    ops = {}
    order = []
    for row in res["ops"]:
        if row["op"] not in ops:
            ops[row["op"]] = []
            order.append(row["op"])
        ops[row["op"]].append(row)

    print("Device: %s%s\n" % (res.get("device", "?"), ("; PyTorch: " + tdev) if tdev else ""))
    print("| op | dtype | plans ok/all | top-1 us | best-of-10 us | best/top-1 | best plan | rho(est, measured) | torch us | ours/torch | oracle rel L2 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    csv_rows = []
    within, counted, rhos, vs_torch, torch_errors = 0, 0, [], [], []
    for name in order:
        rows = sorted(ops[name], key=lambda r: r["plan"])
        mop = man.get(name, {})
        good = []
        for r in rows:
            rr = r["result"]
            ok = rr.get("check") in ("ok", "reference") and rr.get("median_us") is not None
            if ok:
                good.append(r)
            tile = ""
            if mop and r["plan"] < len(mop.get("plans", [])):
                tile = " ; ".join(mop["plans"][r["plan"]]["tile"])
            csv_rows.append([name, mop.get("dtype", ""), r["plan"], r["est_us"],
                             rr.get("median_us", ""), rr.get("min_us", ""),
                             rr.get("status", ""), rr.get("check", ""), rr.get("max_rel_err", ""),
                             mop.get("flops", ""), mop.get("min_bytes", ""), tile])
        top1 = next((r["result"]["median_us"] for r in good if r["plan"] == 0), float("nan"))
        best_r = min(good, key=lambda r: r["result"]["median_us"]) if good else None
        best = best_r["result"]["median_us"] if best_r else float("nan")
        rho = spearman([r["est_us"] for r in good], [r["result"]["median_us"] for r in good])
        if math.isfinite(top1) and math.isfinite(best):
            counted += 1
            within += top1 <= 1.1 * best
        if math.isfinite(rho):
            rhos.append(rho)
        t = torch_rows.get(name, {})
        tus = t.get("median_us", float("nan"))
        ratio = best / tus if math.isfinite(best) and math.isfinite(tus) and tus > 0 else float("nan")
        if math.isfinite(ratio):
            vs_torch.append(ratio)
        orc = t.get("oracle") or {}
        orc_s = ("%.1e%s" % (orc["rel_l2"], "" if orc.get("ok") else " FAIL")) if "rel_l2" in orc \
            else ("error" if orc else "-")
        if "error" in t:
            torch_errors.append("- %s: torch %s" % (name, t["error"]))
        if orc.get("error"):
            torch_errors.append("- %s: oracle %s" % (name, orc["error"]))
        print("| %s | %s | %d/%d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, mop.get("dtype", "?"), len(good), len(rows), fmt(top1), fmt(best),
            fmt(best / top1 if math.isfinite(top1) and top1 > 0 else float("nan"), "%.3f"),
            best_r["plan"] if best_r else "-", fmt(rho), fmt(tus), fmt(ratio), orc_s))
    print()
    print("Top-1 within 10%% of best-of-top-10: %d of %d ops (%.0f%%; goal 80%%)" % (
        within, counted, 100.0 * within / counted if counted else float("nan")))
    print("Median Spearman rho(est_us, measured): %s over %d ops (goal 0.8 after the fit)" % (
        fmt(median(rhos)), len(rhos)))
    if vs_torch:
        print("Median best-of-10 / PyTorch: %s over %d ops" % (fmt(median(vs_torch)), len(vs_torch)))
    bad = [(r["op"], r["plan"], r["result"].get("status"), r["result"].get("check", ""),
            r["result"].get("error", "")) for n in order for r in ops[n]
           if r["result"].get("check") not in ("ok", "reference")]
    if bad:
        print("\nPlans that failed or were wrong (%d):" % len(bad))
        for b in bad:
            print("- %s plan %d: %s %s %s" % b)
    if torch_errors:
        print("\nPyTorch side errors:")
        print("\n".join(torch_errors))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["op", "dtype", "plan", "est_us", "median_us", "min_us", "status", "check",
                        "max_rel_err", "flops", "min_bytes", "tile"])
            w.writerows(csv_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
