#!/usr/bin/env python3
"""Compile-time benchmark: how long each stage of the pipeline takes.

For every model in $ONNX_TESTS/light and $ONNX_TESTS/models, times
  onnx2qir MODEL -o m.qir
  qopt -PASS  (each pass on its own, fed the previous pass's output)
  qcodegen -cuda, qcodegen -c
as the median of --runs runs of the whole process (what a user of the pipe
waits for: start-up, parse, pass, print), and prints a table per model and
per operator (stage time divided by the number of ops the importer wrote).
Python standard library only.  Ends with "N passed, N failed, N skipped".
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from onnx_inputs import bench_models, onnx2qir_flags  # noqa: E402  (bench/onnx_inputs.py)

# Passes in pipeline order; those qopt does not list (-print-passes) are left out.
PIPELINE = ["canonicalize", "roller", "welder", "rammer", "grinder"]
SMOKE_MODEL = "light/light_squeezenet"


def available_passes(qopt):
    try:
        text = subprocess.run([qopt, "-print-passes"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return []
    listed = {line.split()[0].lstrip("-") for line in text.splitlines() if line.startswith("-")}
    return [p for p in PIPELINE if p in listed]


def count_ops(qir_path):
    """Ops the importer wrote, constants, inputs and outputs aside."""
    n = 0
    pat = re.compile(r"^\s*(?:%[\w.$]+(?:\s*,\s*%[\w.$]+)*\s*=\s*)?([a-z_]+)\b")
    with open(qir_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = pat.match(line)
            if m and m.group(1) not in ("const", "input", "output", "yield", "module", "weights"):
                n += 1
    return n


def timed(cmd, cwd, runs, timeout):
    """Median wall time (s) of `runs` runs; (None, message) when it fails."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "timed out after %ds" % timeout
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            err = p.stderr.decode("utf-8", "replace").strip().splitlines()
            return None, (err[0] if err else "exit status %d" % p.returncode)
        times.append(dt)
    return statistics.median(times), None


def fmt_ms(t):
    return "-" if t is None else "%.1f" % (t * 1e3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="one small model, one run (make check)")
    ap.add_argument("--runs", type=int, default=5, help="runs per stage; the median is reported (default 5)")
    ap.add_argument("--bin", default=os.environ.get("QIR_BIN", ""), help="tool directory (default $QIR_BIN or build/bin)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds before one stage run counts as failed")
    ap.add_argument("--keep", metavar="DIR", help="keep the intermediate files in DIR")
    args = ap.parse_args()

    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    bindir = os.path.abspath(args.bin or os.path.join(top, "build", "bin"))
    onnx_tests = os.environ.get("ONNX_TESTS") or os.path.join(top, "..", "shared", "onnx-tests")
    runs = 1 if args.smoke else max(1, args.runs)
    tool = {t: os.path.join(bindir, t) for t in ("onnx2qir", "qopt", "qcodegen")}

    if not os.path.isdir(onnx_tests):
        print("SKIPPED: no ONNX test data at ONNX_TESTS=%s" % onnx_tests)
        print("0 passed, 0 failed, 1 skipped")
        return 0
    missing = [t for t, p in tool.items() if not os.access(p, os.X_OK)]
    if missing:
        print("FAIL: missing tools in %s: %s (build first: make)" % (bindir, " ".join(missing)))
        print("0 passed, 1 failed, 0 skipped")
        return 1
    models = bench_models(onnx_tests, SMOKE_MODEL if args.smoke else None)
    if not models:
        print("SKIPPED: no models under %s" % onnx_tests)
        print("0 passed, 0 failed, 1 skipped")
        return 0

    passes = available_passes(tool["qopt"])
    stages = ["onnx2qir"] + ["-" + p for p in passes] + ["cg -cuda", "cg -c"]
    work = args.keep or tempfile.mkdtemp(prefix="qir-bench-compile.")
    os.makedirs(work, exist_ok=True)
    print("compile-time benchmark: %d model(s), median of %d run(s), tools %s" % (len(models), runs, bindir))
    print("stages: onnx2qir, %s, qcodegen -cuda, qcodegen -c" % (", ".join("qopt -" + p for p in passes) or "(no qopt passes)"))
    print()

    rows, n_pass, n_fail = [], 0, 0
    for d in models:
        name = os.path.basename(d.rstrip("/"))
        mdir = os.path.join(work, name)
        os.makedirs(mdir, exist_ok=True)
        model = os.path.abspath(os.path.join(d, "model.onnx"))
        row = {"model": name, "ops": None, "t": {}, "error": None}
        t, err = timed([tool["onnx2qir"]] + onnx2qir_flags(d) + [model, "-o", "m.qir"], mdir, runs, args.timeout)
        row["t"]["onnx2qir"] = t
        cur = "m.qir"
        if err:
            row["error"] = "onnx2qir: " + err
        else:
            row["ops"] = count_ops(os.path.join(mdir, cur))
            for i, p in enumerate(passes):
                nxt = "m.%d.%s.qir" % (i, p)
                t, err = timed([tool["qopt"], "-" + p, cur, "-o", nxt], mdir, runs, args.timeout)
                row["t"]["-" + p] = t
                if err:
                    row["error"] = "qopt -%s: %s" % (p, err)
                    break
                cur = nxt
        if not row["error"]:
            for stage, flag, out in (("cg -cuda", "-cuda", "m.cu"), ("cg -c", "-c", "m.c")):
                t, err = timed([tool["qcodegen"], flag, cur, "-o", out], mdir, runs, args.timeout)
                row["t"][stage] = t
                if err:
                    row["error"] = "qcodegen %s: %s" % (flag, err)
                    break
        if row["error"]:
            n_fail += 1
            print("FAIL: %s: %s" % (name, row["error"]))
        else:
            n_pass += 1
            print("PASS: %s" % name)
        rows.append(row)

    # The table: per model, every stage in ms; then the whole pipeline per op.
    print()
    head = ["model", "ops"] + stages + ["total ms", "us/op"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
    for r in rows:
        total = sum(v for v in r["t"].values() if v is not None) if not r["error"] else None
        per_op = total / r["ops"] * 1e6 if total is not None and r["ops"] else None
        cells = [r["model"], str(r["ops"]) if r["ops"] is not None else "-"]
        cells += [fmt_ms(r["t"].get(s)) for s in stages]
        cells += [fmt_ms(total), "-" if per_op is None else "%.0f" % per_op]
        if r["error"]:
            cells[-2] = "FAIL"
        print("| " + " | ".join(cells) + " |")
    print()
    print("times are wall-clock ms per stage process (median of %d); us/op = whole pipeline / ops imported" % runs)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed, 0 skipped" % (n_pass, n_fail))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
