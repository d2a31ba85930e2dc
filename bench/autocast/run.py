#!/usr/bin/env python3
"""bench/autocast/run.py: the goal table of issue 26 (mixed precision).

    python3 bench/autocast/run.py [--quick] [--filter NAME] [--modes f16,bf16,tf32]
                                  [--model DIR]... [--out FILE] [--keep DIR] [-j N]

For every model of $ONNX_TESTS/models and $ONNX_TESTS/light (--quick: the
three real models, light_squeezenet and light_resnet50; --model DIR: only the
ONNX test folders named, e.g. a node test) and every mode:

  f32   qopt -canonicalize -roller -welder                      (the baseline)
  f16   qopt -canonicalize -autocast=f16 -roller -welder
  bf16  qopt -canonicalize -autocast=bf16 -roller -welder
  tf32  qopt -canonicalize -matmul-precision=high -roller -welder
  f16cal  f16 with -autocast-calibrate=the data set's own inputs (not by
        default: ops whose values exceed -autocast-range there stay f32)
  bf16ew  bf16 with -autocast-elementwise=f32 (not by default; make check's
        bf16 suite: elementwise ops and batch_norm stay f32)

the module goes onnx2qir -> qopt (above, `-o MODE.qir`, which writes the
mode's weights sidecar MODE.qw when the pass converts weights) -> qcodegen -c
-main -> cc -O2 -fopenmp -> run (OMP_NUM_THREADS=2) on every test_data_set,
and the harness reports per model and mode:

- rel L2: ||got - want|| / ||want|| of each output against the reference .pb
  (the f32 ONNX reference), the largest over outputs and data sets;
- top-1 kept: for classifiers (an output of shape [1,N] or [N] with N >= 10,
  every light/ network, and the 2-class text-direction classifier), whether
  the program's top class is a top class of the reference (light/ references
  are uniform, every class tied: marked "tied");
- weights: the bytes of the sidecar the optimised module names (`weights
  "..."`), and its size over the f32 module's (goal <= 55% with f16);
- convert-only kernels after -welder (convert_only_kernels below; goal <= 2);
- contractions on matrix units: conv, matmul, gemm, ... whose #tile plan has
  an `mma` shape, over all contractions (the issue: all of them after
  -autocast);
- modelled time (no device involved): the sum of the `est_us` of the planned
  top-level kernels and ops of the optimised module (modelled_us below), and
  the f32 time over the mode's (goal >= 2x with f16 on ResNet-50 and PP-OCR
  det); welder's own total (-stats: the same estimates plus one launch per
  kernel and the DRAM time of unplanned ops) is printed next to it.

The f32 baseline is only optimised (its time, sidecar and kernels), not run,
unless `f32` is among --modes.  A mode whose qopt flag does not exist yet
gives the row "n/a (qopt has no -autocast)"; any failing step gives its
first message in the row.  Progress goes to stderr, the markdown table last
to stdout (and to --out FILE).  Standard library only; the protobuf and
test-data reading is scripts/conformance.py's and the tensor files' are
scripts/tensor_files.py's (both imported, as backend-check.sh does).
"""
import argparse
import concurrent.futures
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import conformance as conf  # noqa: E402  model_io, read_data_set, import_model
from tensor_files import read_npy, read_pb  # noqa: E402  the tensor readers backend-check.sh uses

PASSES = {
    "f32": ["-canonicalize", "-roller", "-welder"],
    "f16": ["-canonicalize", "-autocast=f16", "-roller", "-welder"],
    "bf16": ["-canonicalize", "-autocast=bf16", "-roller", "-welder"],
    "tf32": ["-canonicalize", "-matmul-precision=high", "-roller", "-welder"],
    # f16 with the range calibration (-autocast-calibrate=INPUTS is added
    # after -autocast=f16: the data set's own input files, in input order)
    "f16cal": ["-canonicalize", "-autocast=f16", "-roller", "-welder"],
    # bf16 rounded once per layer: elementwise ops and batch_norm in f32 (make check's bf16 suite)
    "bf16ew": ["-canonicalize", "-autocast=bf16", "-autocast-elementwise=f32", "-roller", "-welder"],
}
# The flag each mode needs from qopt, as its --help names it.
FLAG = {"f16": "-autocast", "bf16": "-autocast", "tf32": "-matmul-precision", "f16cal": "-autocast-calibrate",
        "bf16ew": "-autocast-elementwise"}
ERROR_GOAL = {"f16": 1e-2, "bf16": 5e-2, "tf32": 2e-3, "f32": 1e-3, "f16cal": 1e-2, "bf16ew": 5e-2}
WEIGHTS_GOAL = 0.55          # f16 sidecar over the f32 one
CONVERT_ONLY_GOAL = 2        # kernels that only convert types, per model
TIME_GOAL = 2.0              # f32 modelled time over f16's ...
TIME_GOAL_MODELS = ("light_resnet50", "ch_PP-OCRv4_det_infer")  # ... on these (conv-bound) models
QUICK = ("light_squeezenet", "light_resnet50")  # with the real models
EXTRA_CLASSIFIERS = ("ch_ppocr_mobile_v2.0_cls_infer",)  # 2 classes: below the N >= 10 rule
VIEW_OPS = ("reshape", "identity", "bitcast")  # ops that move no element
CONTRACTIONS = ("conv", "conv_transpose", "matmul", "gemm", "einsum", "attention")


def run(cmd, timeout, cwd=None, env=None):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, cwd=cwd, env=env)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %ds" % timeout
    except OSError as e:
        return 127, "", str(e)


def first_line(text, default=""):
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return lines[0] if lines else default


# ---------------------------------------------------------------- tensors

def rel_l2(got, want):
    """||got - want|| / ||want|| (the absolute norm when want is all zeros);
    inf when the element counts differ, nan when got holds a NaN."""
    if len(got) != len(want):
        return float("inf")
    num = den = 0.0
    for g, w in zip(got, want):
        d = g - w
        num += d * d
        den += w * w
    if math.isnan(num):
        return float("nan")
    return math.sqrt(num) / math.sqrt(den) if den > 0 else math.sqrt(num)


def worse(a, b):
    """The larger of two errors, None meaning none yet and NaN the worst."""
    if a is None or math.isnan(b):
        return b
    return a if math.isnan(a) or a >= b else b


def top1_kept(got, want):
    """(kept, tied): whether got's top class is one of want's top classes,
    and whether want has more than one top class."""
    if not got or len(got) != len(want) or any(math.isnan(g) for g in got):
        return False, False
    best = max(want)
    top = [i for i, w in enumerate(want) if w == best]
    g = max(range(len(got)), key=lambda i: got[i])
    return g in top, len(top) > 1


def is_classifier_output(folder, name, dims):
    if folder == "light" or name in EXTRA_CLASSIFIERS:
        return True
    return (len(dims) == 1 and dims[0] >= 10) or (len(dims) == 2 and dims[0] == 1 and dims[1] >= 10)


# ---------------------------------------------------------------- reading an optimised module

OP_LINE = re.compile(r"^\s*(?:(%.*?) = )?([a-z_][a-z0-9_]*)\b")


def module_ops(text):
    """The ops of a .qir module as a tree: [(op name, header line, [regions'
    ops])].  Reads the printer's layout: one op per line, an op with regions
    ends its line with `{`, `} else {` starts its next region, `}` ends it."""
    root = []
    stack = [root]
    owners = []
    for line in text.split("\n"):
        s = line.strip()
        if not s or s.startswith("//"):
            continue
        if s.startswith("}"):
            if s.endswith("{") and owners:      # } else {: the same op's next region
                continue
            if len(stack) > 1:
                stack.pop()
                owners.pop()
            continue
        m = OP_LINE.match(line)
        if not m:
            continue
        node = (m.group(2), line, [])
        stack[-1].append(node)
        if s.endswith("{") and m.group(2) != "module":
            stack.append(node[2])
            owners.append(node)
        elif s.endswith("{"):                   # the module itself: its body is the root
            stack.append(root)
            owners.append(node)
    return root


def planned(line):
    """The #tile plan's est_us of an op line, or None."""
    m = re.search(r"#tile\{[^}]*?\best_us = ([0-9.eE+-]+)", line)
    return float(m.group(1)) if m else None


def _outside_kernels(ops):
    """Every op not inside a kernel's body (loop and if bodies included, once)."""
    for name, line, body in ops:
        yield name, line, body
        if name != "kernel":
            yield from _outside_kernels(body)


def convert_only_kernels(text):
    """Kernels that only convert types, in an optimised module: a `kernel` op
    whose body holds only `cast` ops (at least one) plus views (reshape,
    identity, bitcast) and its yield, or a `cast` op carrying a #tile plan
    that is not inside a kernel (it runs as a kernel of its own).  Loop and if
    bodies count once.  The issue's goal: at most 2 per model after -welder."""
    n = 0
    for name, line, body in _outside_kernels(module_ops(text)):
        if name == "kernel":
            inner = [b[0] for b in body if b[0] != "yield"]
            if "cast" in inner and all(op == "cast" or op in VIEW_OPS for op in inner):
                n += 1
        elif name == "cast" and "#tile{" in line:
            n += 1
    return n


# ops qcodegen runs as views of their operand's bytes, no kernel (as -welder's
# totals count them): their plans' est_us is never spent
VIEWS = ("reshape", "identity", "bitcast")


def modelled_us(text):
    """Modelled time of an optimised module: the sum of the est_us of its
    planned top-level work, each kernel's `#est_us` and each planned op's
    (not in a kernel, not a view) `#tile{est_us}`; a loop or if body counts once, an op
    without a plan counts 0 (docs/perf.md's rammer and welder tables count
    the same way, without launches).  Returns (us, planned items)."""
    total, items = 0.0, 0
    for name, line, _body in _outside_kernels(module_ops(text)):
        if name == "kernel":
            head = line.split(" : ", 1)[0]
            m = re.search(r"#est_us=([0-9.eE+-]+)", head) or re.search(r"#tile\{[^}]*?\best_us = ([0-9.eE+-]+)", line)
            if m:
                total += float(m.group(1))
                items += 1
        elif name not in VIEWS:
            us = planned(line)
            if us is not None:
                total += us
                items += 1
    return total, items


def _all_ops(ops):
    for name, line, body in ops:
        yield name, line
        yield from _all_ops(body)


def matrix_unit_contractions(text):
    """(contractions planned on the matrix units, contractions): the conv,
    conv_transpose, matmul, gemm, einsum and attention ops anywhere in the
    module, and those whose #tile plan has an `mma` shape."""
    n = on_mma = 0
    for name, line in _all_ops(module_ops(text)):
        if name in CONTRACTIONS:
            n += 1
            if re.search(r"#tile\{[^}]*\bmma = \[", line):
                on_mma += 1
    return on_mma, n


def welder_total_us(stats):
    """-welder's modelled time after the pass (its -stats line: kernels'
    estimates plus one launch each), summed over the module's lines."""
    vals = [float(x) for x in re.findall(r"^welder:.*modelled time [0-9.]+ -> ([0-9.]+) us", stats, re.M)]
    return sum(vals) if vals else None


def precision_report(stats):
    """The lines of a qopt -stats output other than -roller's and -welder's
    (the -autocast precision report, whatever its format)."""
    return [l for l in stats.splitlines() if l.strip() and not re.match(r"(roller|welder)\b", l)]


def weights_file(qir_path, text):
    """The sidecar an optimised module names (`weights "..."`), resolved as
    the generated program does from the module's folder; None when it names
    none."""
    m = re.search(r'^\s*weights "([^"]*)"', text, re.M)
    if not m:
        return None
    p = m.group(1)
    return p if os.path.isabs(p) else os.path.join(os.path.dirname(os.path.abspath(qir_path)), p)


# ---------------------------------------------------------------- one model

class Ctx:
    def __init__(self, args):
        self.bin = os.path.abspath(args.bin)
        self.cc = os.environ.get("CC", "cc")
        self.timeout = args.timeout
        self.threads = str(args.threads)
        rc, out, err = run([os.path.join(self.bin, "qopt"), "--help"], 30)
        self.help = out + err


def mode_passes(mode, calibration):
    passes = list(PASSES[mode])
    if mode == "f16cal":
        passes.insert(passes.index("-autocast=f16") + 1, "-autocast-calibrate=" + ",".join(calibration))
    return passes


def optimise(ctx, wd, imp, mode, calibration=()):
    """qopt MODE's passes over imp -> wd/MODE.qir; returns (qir or None, why, stats).
    calibration: the input files f16cal calibrates on."""
    out = os.path.join(wd, mode + ".qir")
    flag = FLAG.get(mode)
    if flag and flag + "=" not in ctx.help and flag + " " not in ctx.help:
        return None, "n/a (qopt has no %s)" % flag, ""
    rc, so, se = run([os.path.join(ctx.bin, "qopt")] + mode_passes(mode, calibration) + ["-stats", imp, "-o", out],
                     ctx.timeout, cwd=wd)
    with open(os.path.join(wd, mode + ".stats"), "w") as f:
        f.write(se)
    if rc != 0:
        msg = first_line(se, "rc=%d" % rc)
        if "unknown option" in msg and flag:
            return None, "n/a (qopt has no %s)" % flag, se
        return None, "qopt failed: " + msg, se
    return out, "", se


def build_and_run(ctx, wd, mode, qir, feeds, binds, expected, tag):
    """qcodegen -c -main, cc, run; returns ([(output name, got path, want path)], why)."""
    src, exe = os.path.join(wd, "%s.%s.c" % (mode, tag)), os.path.join(wd, "%s.%s" % (mode, tag))
    rc, so, se = run([os.path.join(ctx.bin, "qcodegen"), "-c", "-main", qir, "-o", src], ctx.timeout, cwd=wd)
    if rc != 0:
        return None, "qcodegen failed: " + first_line(se, "rc=%d" % rc)
    rc, so, se = run([ctx.cc, "-O2", "-fopenmp", "-o", exe, src, "-lm"], 3 * ctx.timeout, cwd=wd)
    if rc != 0:
        return None, "cc failed: " + first_line(se, "rc=%d" % rc)
    cmd = [exe]
    for name, path in feeds.items():
        if name not in binds:
            cmd += ["--in", "%s=%s" % (name, path)]
    with open(qir) as f:
        w = weights_file(qir, f.read())
    if w:
        cmd += ["--weights", w]
    got = []
    for k, (name, want) in enumerate(expected):
        g = os.path.join(wd, "%s.%s.out%d.npy" % (mode, tag, k))
        cmd += ["--out", "%s=%s" % (name, g)]
        got.append((name, g, want))
    env = dict(os.environ, OMP_NUM_THREADS=ctx.threads)
    rc, so, se = run(cmd, 3 * ctx.timeout, cwd=wd, env=env)
    if rc != 0:
        return None, "run failed: " + first_line(se or so, "rc=%d" % rc)
    return got, ""


def static_metrics(qir, stats):
    with open(qir) as f:
        text = f.read()
    w = weights_file(qir, text)
    us, items = modelled_us(text)
    mma, contractions = matrix_unit_contractions(text)
    return {
        "mma": mma,
        "contractions": contractions,
        "weights": os.path.getsize(w) if w and os.path.exists(w) else None,
        "convert_only": convert_only_kernels(text),
        "modelled_us": us,
        "planned": items,
        "welder_us": welder_total_us(stats),
        "report": precision_report(stats),
    }


def eval_model(ctx, job):
    """All modes of one model: {mode: row dict}."""
    folder, name, test_dir, wd, modes = job
    os.makedirs(wd, exist_ok=True)
    model = os.path.join(test_dir, "model.onnx")
    rows = {m: {"model": name, "folder": folder, "mode": m} for m in ["f32"] + [m for m in modes if m != "f32"]}
    t0 = time.time()
    try:
        inputs, outputs = conf.model_io(model)
    except Exception as e:  # noqa: BLE001  an unreadable model is one row's failure
        for r in rows.values():
            r["why"] = "cannot read model: %s" % e
        return rows
    for k, ds in enumerate(conf.data_sets(test_dir)):
        dsd = os.path.join(wd, ds)
        os.makedirs(dsd, exist_ok=True)
        feeds, shapes, expected = conf.read_data_set(os.path.join(test_dir, ds), inputs, outputs, dsd, ds)
        imp = os.path.join(dsd, "imp.qir")
        rc, msg, binds = conf.import_model(os.path.join(ctx.bin, "onnx2qir"), model, feeds, shapes, imp, ctx.timeout)
        if rc != 0:
            for r in rows.values():
                r.setdefault("why", "onnx2qir failed: " + first_line(msg, "rc=%d" % rc))
            break
        for mode, r in rows.items():
            if r.get("why"):
                continue
            qir, why, stats = optimise(ctx, dsd, imp, mode, [p for n, p in feeds.items() if n not in binds])
            if not qir:
                r["why"] = why
                continue
            if k == 0:  # the model's static numbers: its first data set's module
                r.update(static_metrics(qir, stats))
            if mode not in modes:
                continue
            got, why = build_and_run(ctx, dsd, mode, qir, feeds, binds, expected, ds)
            if got is None:
                r["why"] = why
                continue
            for oname, gpath, wpath in got:
                try:
                    wdims, want, _ = read_pb(wpath)
                    _gdims, g, _ = read_npy(gpath)
                except (OSError, ValueError) as e:
                    r["why"] = "cannot compare %s: %s" % (oname, e)
                    break
                err = rel_l2(g, want)
                r["rel_l2"] = worse(r.get("rel_l2"), err)
                if is_classifier_output(folder, name, wdims):
                    kept, tied = top1_kept(g, want)
                    r["top1"] = r.get("top1", True) and kept
                    r["top1_tied"] = r.get("top1_tied", False) or tied
        sys.stderr.write("  %s %s done (%.0f s)\n" % (name, ds, time.time() - t0))
    return rows


# ---------------------------------------------------------------- the table

def fmt_err(x):
    if x is None:
        return "-"
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf"
    return "%.2e" % x


def fmt_bytes(n):
    if n is None:
        return "none"
    if n >= 1 << 20:
        return "%.2f MB" % (n / 1e6)
    if n >= 1 << 10:
        return "%.1f kB" % (n / 1e3)
    return "%d B" % n


def goals_missed(r, base):
    """The goals a measured row misses (empty: all met), and whether any applies."""
    mode, missed = r["mode"], []
    if "rel_l2" in r:
        e = r["rel_l2"]
        if not (e <= ERROR_GOAL[mode]):
            missed.append("error")
    if r.get("top1") is False:
        missed.append("top-1")
    if mode in ("f16", "f16cal") and base.get("weights") and r.get("weights") is not None:
        if r["weights"] > WEIGHTS_GOAL * base["weights"]:
            missed.append("weights")
    if r.get("convert_only") is not None and r["convert_only"] > CONVERT_ONLY_GOAL:
        missed.append("convert-only kernels")
    if mode in ("f16", "f16cal") and r["model"] in TIME_GOAL_MODELS and r.get("modelled_us") and base.get("modelled_us"):
        if base["modelled_us"] / r["modelled_us"] < TIME_GOAL:
            missed.append("time")
    return missed


def table(results, modes):
    head = ("| model | mode | rel L2 (max) | error goal | top-1 kept | weights sidecar | vs f32 | "
            "convert-only kernels | contractions on matrix units | modelled us | modelled speed-up vs f32 | welder modelled us (with launches) | goals |")
    lines = [head, "|" + "---|" * 13]
    for rows in results:
        base = rows["f32"]
        for mode in (["f32"] if "f32" in modes else []) + [m for m in modes if m != "f32"]:
            r = rows[mode]
            name = r["model"]
            if r.get("why") and "modelled_us" not in r:
                lines.append("| %s | %s | %s |" % (name, mode, r["why"]) + "  |" * 10)
                continue
            err = fmt_err(r.get("rel_l2")) if "rel_l2" in r else (r.get("why") or "not run")
            goal = "<= %g" % ERROR_GOAL[mode]
            if "rel_l2" in r:
                goal += " yes" if r["rel_l2"] <= ERROR_GOAL[mode] else " **no**"
            top1 = "n.a." if "top1" not in r else ("yes" if r["top1"] else "**no**") + (" (tied)" if r.get("top1_tied") else "")
            ratio = "n.a."
            if r.get("weights") is not None and base.get("weights"):
                ratio = "%.1f%%" % (100.0 * r["weights"] / base["weights"])
            speed = "n.a."
            if r.get("modelled_us") and base.get("modelled_us"):
                speed = "%.2fx" % (base["modelled_us"] / r["modelled_us"])
            wus = "%.1f" % r["welder_us"] if r.get("welder_us") is not None else "-"
            missed = goals_missed(r, base)
            verdict = "met" if not missed else "**missed: %s**" % ", ".join(missed)
            if r.get("why"):
                verdict = "**%s**" % r["why"]
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %d | %d/%d | %.1f (modelled) | %s (modelled) | %s (modelled) | %s |" % (
                name, mode, err, goal, top1, fmt_bytes(r.get("weights")), ratio, r["convert_only"], r["mma"], r["contractions"],
                r["modelled_us"], speed, wus, verdict))
    return "\n".join(lines)


def reports(results, modes, tests=None):
    """Markdown: each model's precision report (qopt -stats) per low-type
    mode; a bf16 report that only repeats f16's decisions is left out."""
    out = []
    for rows in results:
        shown = {}
        for mode in modes:
            lines = rows.get(mode, {}).get("report")
            if not lines or mode == "f32":
                continue
            # where qopt wrote the sidecar: the file name only (no temporary folder)
            lines = [re.sub(r"(wrote \d+ bytes of weights to )\S*/", r"\1", l) for l in lines]
            if tests:
                lines = [l.replace(os.path.abspath(tests) + "/", "$ONNX_TESTS/") for l in lines]
            def norm(ls):
                return [re.sub(r"\s+", " ", re.sub(r"\bbf16\b", "f16", l)) for l in ls]
            if mode == "bf16" and "f16" in shown and norm(lines) == norm(shown["f16"]):
                out.append("%s, bf16: the same decisions as f16.\n" % rows[mode]["model"])
                continue
            shown[mode] = lines
            out.append("%s, %s (`qopt %s -stats`):\n\n```\n%s\n```\n" % (
                rows[mode]["model"], mode, " ".join(mode_passes(mode, ["INPUTS"])), "\n".join(lines[:40])))
    return "\n".join(out)


def models(args, tests):
    if args.model:
        return [("extra", os.path.basename(os.path.normpath(d)), os.path.abspath(d)) for d in args.model]
    out = []
    for folder in ("models", "light"):
        base = os.path.join(tests, folder)
        for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            d = os.path.join(base, name)
            if not os.path.isfile(os.path.join(d, "model.onnx")) or args.filter not in name:
                continue
            if args.quick and folder == "light" and name not in QUICK:
                continue
            out.append((folder, name, d))
    return out


def main():
    ap = argparse.ArgumentParser(prog="bench/autocast/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="only models/ plus light_squeezenet and light_resnet50")
    ap.add_argument("--filter", default="", help="only models whose folder name contains this")
    ap.add_argument("--modes", default="f16,bf16,tf32", help="modes to run (%s); f32 is always optimised" % ", ".join(PASSES))
    ap.add_argument("--model", action="append", default=[], help="an ONNX test folder to run instead of $ONNX_TESTS's")
    ap.add_argument("--out", help="also write the markdown table to this file")
    ap.add_argument("--keep", help="keep the generated files under this folder")
    ap.add_argument("-j", type=int, default=1, help="models at a time (default 1)")
    ap.add_argument("--threads", type=int, default=2, help="OpenMP threads of each program (default 2)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per tool run (cc and the program get 3x)")
    ap.add_argument("--count", metavar="FILE.qir", help="only print the convert-only kernels and modelled time of an optimised module")
    ap.add_argument("--bin", default=os.environ.get("QIR_BIN", os.path.join(TOP, "build", "bin")))
    ap.add_argument("--tests", default=os.environ.get("ONNX_TESTS", os.path.join(TOP, "..", "shared", "onnx-tests")))
    args = ap.parse_args()
    if args.count:
        with open(args.count) as f:
            text = f.read()
        us, items = modelled_us(text)
        mma, contractions = matrix_unit_contractions(text)
        print("convert-only kernels %d; modelled %.3f us over %d planned kernels and ops; contractions on matrix units %d/%d"
              % (convert_only_kernels(text), us, items, mma, contractions))
        return 0
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in PASSES]
    if bad:
        ap.error("unknown mode %s (%s)" % (", ".join(bad), ", ".join(PASSES)))
    for tool in ("onnx2qir", "qopt", "qcodegen"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            sys.exit("run.py: %s not found in %s (build first, or set QIR_BIN)" % (tool, args.bin))
    ctx = Ctx(args)
    tmp = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="qir-autocast-")
    jobs = [(f, n, d, os.path.join(tmp, f, n), modes) for f, n, d in models(args, args.tests)]
    if not jobs:
        sys.exit("run.py: no model matches (ONNX_TESTS=%s, --filter %r)" % (args.tests, args.filter))
    t0 = time.time()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
            results = list(ex.map(lambda j: eval_model(ctx, j), jobs))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    md = table(results, modes)
    details = reports(results, modes, args.tests)
    if details:
        print("## Precision reports\n\n" + details)
    note = ("Times are modelled (Roller/Welder's h100 model, no device): the sum of the est_us of the planned "
            "top-level kernels and ops, and -welder's total with one launch per kernel. rel L2 is the C back end "
            "(cc -O2 -fopenmp) against the f32 ONNX reference, max over outputs and data sets. Harness wall time %.0f s."
            % (time.time() - t0))
    print(md)
    print()
    print(note)
    if args.out:
        with open(args.out, "w") as f:
            f.write(md + "\n\n" + note + "\n")
            if details:
                f.write("\n## Precision reports\n\n" + details)
    failed = any(r.get("why", "").startswith(("qopt failed", "qcodegen failed", "cc failed", "run failed", "onnx2qir failed"))
                 for rows in results for r in rows.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
