#!/usr/bin/env python3
"""CPU benchmark: qir's generated C program against ONNX Runtime.

For every model in $ONNX_TESTS/light and $ONNX_TESTS/models:
  onnx2qir model.onnx | qopt PASSES | qcodegen -c -main  ->  m.c
  cc -O3 -march=native -fopenmp m.c -o m -lm
then ort_bench.js (onnxruntime-node) runs both on test_data_set_0's inputs
with the same thread count, compares every output, and only then times them
in alternating rounds.  Prints a table of median times and ratios per model
and the geometric mean.  onnxruntime-node is installed on first use (npm,
with its CUDA download skipped).  Python standard library only.
Ends with "N passed, N failed, N skipped".
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from onnx_inputs import bench_models, model_inputs  # noqa: E402  (bench/onnx_inputs.py)
SMOKE_MODEL = "node/test_conv_with_strides_padding"   # tiny: make check runs it


def npm_install():
    """onnxruntime-node into bench/cpu/node_modules (postinstall CUDA download skipped)."""
    if os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")) and \
            os.path.isdir(os.path.join(HERE, "node_modules", "onnx-proto")):
        return None
    if not shutil.which("npm") or not shutil.which("node"):
        return "node/npm are not installed"
    env = dict(os.environ, ONNXRUNTIME_NODE_INSTALL="skip")
    p = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--onnxruntime-node-install=skip"],
                       cwd=HERE, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return "npm install failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    return None


def step(cmd, cwd, what, timeout=900):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        raise RuntimeError("%s: %s" % (what, msg[0] if msg else "exit status %d" % p.returncode))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="one small model, one short round (make check)")
    ap.add_argument("--bin", default=os.environ.get("QIR_BIN", ""), help="tool directory (default $QIR_BIN or build/bin)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for both (default: all cores)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (default 5)")
    ap.add_argument("--seconds", type=float, default=1.0, help="about how long one side of a round runs")
    ap.add_argument("--max-run", type=float, default=20,
                    help="a program slower than this (s) per run is timed by its one check run")
    ap.add_argument("--passes", default=os.environ.get("QOPT_PASSES", "-canonicalize"),
                    help="qopt flags before qcodegen (default -canonicalize; '' for none)")
    ap.add_argument("--also-passes", default="", metavar="PASSES",
                    help="a second qopt pipeline (e.g. '-canonicalize -roller -welder'): each model is built and "
                         "timed both ways in the same run, against the same ONNX Runtime")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--keep", metavar="DIR", help="keep the generated programs in DIR")
    args = ap.parse_args()

    top = os.path.dirname(os.path.dirname(HERE))
    bindir = os.path.abspath(args.bin or os.path.join(top, "build", "bin"))
    onnx_tests = os.environ.get("ONNX_TESTS") or os.path.join(top, "..", "shared", "onnx-tests")
    rounds, seconds = (1, 0.05) if args.smoke else (args.rounds, args.seconds)

    def skipped(why):
        print("SKIPPED: " + why)
        print("0 passed, 0 failed, 1 skipped")
        return 0

    if not os.path.isdir(onnx_tests):
        return skipped("no ONNX test data at ONNX_TESTS=%s" % onnx_tests)
    missing = [t for t in ("onnx2qir", "qopt", "qcodegen") if not os.access(os.path.join(bindir, t), os.X_OK)]
    if missing:
        print("FAIL: missing tools in %s: %s (build first: make)" % (bindir, " ".join(missing)))
        print("0 passed, 1 failed, 0 skipped")
        return 1
    why = npm_install()
    if why:
        return skipped("ONNX Runtime unavailable: " + why)
    todo = bench_models(onnx_tests, SMOKE_MODEL if args.smoke else None)
    if not todo:
        return skipped("no models under %s" % onnx_tests)

    work = args.keep or tempfile.mkdtemp(prefix="qir-bench-cpu.")
    os.makedirs(work, exist_ok=True)
    passes = args.passes.split()
    pipelines = [passes] + ([args.also_passes.split()] if args.also_passes else [])
    print("CPU benchmark: %d model(s), %d thread(s), %d round(s), qopt %s, %s -O3 -march=native -fopenmp" % (
        len(todo), args.threads, rounds, " | ".join(" ".join(p) or "(no passes)" for p in pipelines), args.cc))
    rows, n_pass, n_fail = [], 0, 0
    for d in todo:
        name = os.path.basename(d.rstrip("/"))
        wd = os.path.join(work, name)
        os.makedirs(wd, exist_ok=True)
        row = {"model": name}
        try:
            inputs = model_inputs(d)
            flags = []
            for iname, path, dims, _, bound in inputs:
                flags += ["--bind", "%s=%s" % (iname, path)] if bound else \
                    ["--shape", "%s=%s" % (iname, ",".join(map(str, dims)))]
            step([os.path.join(bindir, "onnx2qir")] + flags + [os.path.join(d, "model.onnx"), "-o", "m.qir"], wd,
                 "onnx2qir")
            for k, pl in enumerate(pipelines):
                tag = "" if k == 0 else str(k + 1)
                step([os.path.join(bindir, "qopt")] + pl + ["m.qir", "-o", "m%s.opt.qir" % tag], wd, "qopt")
                step([os.path.join(bindir, "qcodegen"), "-c", "-main", "m%s.opt.qir" % tag, "-o", "m%s.c" % tag], wd,
                     "qcodegen -c -main")
                step([args.cc, "-O3", "-march=native", "-fopenmp", "-o", "m" + tag, "m%s.c" % tag, "-lm"], wd, "cc")
                cmd = ["node", os.path.join(HERE, "ort_bench.js"), "--model", os.path.join(d, "model.onnx"),
                       "--prog", os.path.join(wd, "m" + tag), "--work", wd, "--threads", str(args.threads),
                       "--rounds", str(rounds), "--seconds", str(seconds), "--max-run", str(args.max_run)]
                for iname, path, _, _, bound in inputs:
                    cmd += ["--const" if bound else "--in", "%s=%s" % (iname, path)]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
                if not lines:
                    raise RuntimeError("ort_bench.js: " + ((p.stderr or p.stdout).strip().splitlines() or ["no output"])[-1])
                got = json.loads(lines[-1])
                if got["check"] != "ok":
                    raise RuntimeError("%s%s: %s" % (got["check"], " (second pipeline)" if k else "", got.get("detail")))
                if k == 0:
                    row.update(got)
                else:
                    row.update({"ours2_ms": got["ours_ms"], "ort2_ms": got["ort_ms"], "max_abs_err2": got["max_abs_err"],
                                "ours2_single_run": got.get("ours_single_run")})
            n_pass += 1
            print("PASS: %s: ours %.3f ms, ORT %.3f ms (max abs err %.2e)%s" % (
                name, row["ours_ms"], row["ort_ms"], row["max_abs_err"],
                ", second pipeline %.3f ms, ORT %.3f ms (max abs err %.2e)" % (
                    row["ours2_ms"], row["ort2_ms"], row["max_abs_err2"]) if "ours2_ms" in row else ""))
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            row["error"] = str(e)
            n_fail += 1
            print("FAIL: %s: %s" % (name, e))
        rows.append(row)

    print()
    if len(pipelines) > 1:
        return both_table(rows, pipelines, rounds, args, work, n_pass, n_fail)
    print("| model | check (max abs err) | ours ms | ONNX Runtime ms | ORT/ours |")
    print("|---|---|---:|---:|---:|")
    ratios = []
    for r in rows:
        if "error" in r:
            print("| %s | FAIL: %s | - | - | - |" % (r["model"], r["error"].replace("|", "/")[:80]))
            continue
        ratio = r["ort_ms"] / r["ours_ms"] if r["ours_ms"] > 0 else float("nan")
        ratios.append(ratio)
        print("| %s | ok (%.1e) | %s%.1f | %.2f | %.3fx |" % (r["model"], r["max_abs_err"],
                                                         "~" if r.get("ours_single_run") else "", r["ours_ms"],
                                                         r["ort_ms"], ratio))
    if ratios:
        gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print("| geometric mean (%d models) | | | | %.3fx |" % (len(ratios), gm))
    print()
    print("ORT/ours > 1: ours is faster.  Median of %d alternating rounds, each the median of N runs; %d threads "
          "both (ORT intra-op; OMP_NUM_THREADS).  ~: one run of the whole program (start-up and weights "
          "included), too slow to repeat (> %g s)." % (rounds, args.threads, args.max_run))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed, 0 skipped" % (n_pass, n_fail))
    return 1 if n_fail else 0


def both_table(rows, pipelines, rounds, args, work, n_pass, n_fail):
    """The table of a run with two pipelines: each timed against ONNX Runtime, and their ratio."""
    names = [" ".join(p) or "(no passes)" for p in pipelines]
    print("A: qopt %s; B: qopt %s" % (names[0], names[1]))
    print("| model | max abs err A / B | A ms | B ms | ONNX Runtime ms | ORT/A | ORT/B | A/B |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    ra, rb, rab = [], [], []
    for r in rows:
        if "error" in r:
            print("| %s | FAIL: %s | - | - | - | - | - | - |" % (r["model"], r["error"].replace("|", "/")[:80]))
            continue
        ort = (r["ort_ms"] + r["ort2_ms"]) / 2      # ORT timed in each pairing: their mean
        ra.append(ort / r["ours_ms"])
        rb.append(ort / r["ours2_ms"])
        rab.append(r["ours_ms"] / r["ours2_ms"])
        print("| %s | %.1e / %.1e | %s%.1f | %s%.1f | %.2f | %.3fx | %.3fx | %.3fx |" % (
            r["model"], r["max_abs_err"], r["max_abs_err2"], "~" if r.get("ours_single_run") else "", r["ours_ms"],
            "~" if r.get("ours2_single_run") else "", r["ours2_ms"], ort, ra[-1], rb[-1], rab[-1]))
    if ra:
        gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
        print("| geometric mean (%d models) | | | | | %.3fx | %.3fx | %.3fx |" % (len(ra), gm(ra), gm(rb), gm(rab)))
    print()
    print("ORT/x > 1: x is faster than ONNX Runtime; A/B > 1: B is faster than A.  ONNX Runtime is timed in each "
          "pairing (the mean of the two is shown).  Median of %d alternating rounds; %d threads both.  ~: one run of "
          "the whole program (start-up and weights included), too slow to repeat (> %g s)." % (
              rounds, args.threads, args.max_run))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed, 0 skipped" % (n_pass, n_fail))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
