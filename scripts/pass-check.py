#!/usr/bin/env python3
"""Pass check: every qopt pass pipeline keeps the numbers of every ONNX test model.

    scripts/pass-check.py [--quick] [-j N] [--bin DIR] [--tests DIR]
                          [--folder light|models|node|lit]... [--filter SUBSTR]
                          [--pipeline "-pass -pass"]... [-v] [--keep DIR]

Each model under $ONNX_TESTS (default ../shared/onnx-tests next to the repo)
is imported the way scripts/conformance.py imports it (same code: its
read_data_set / import_model), then run with qrun on the inputs of
test_data_set_0; its outputs are the reference.  For every pipeline

    -canonicalize | -lower | -canonicalize -lower | -roller | -lower -roller
    | -welder | -canonicalize -roller -welder | -lower -roller -welder
    | -canonicalize -roller -rammer | -canonicalize -roller -welder -rammer -grinder

the optimised module must
  - come out of qopt (which verifies it after the passes),
  - read back: qopt re-parses and re-verifies it, and printing it again gives
    the same bytes (the printer's fixed point),
  - run under qrun on the same inputs to the reference outputs, within
    1e-7 + 1e-3*|want| (models/: 1e-4 + 1e-3*|want|; integers exactly).
The folder `lit` adds the hand-written modules of test/lit (all but errors/)
on random inputs (qrun --seed 3 for both runs: a pass must keep the module's
inputs and outputs, in order); it needs no ONNX data.
One check is one (model, pipeline); a model that does not import or whose
unoptimised module does not run is skipped (that is scripts/conformance.py's
business).  --quick (for `make check`, a few minutes) skips light/ models
whose tensors exceed --quick-mb MB in all (qrun of a lowered network is
slow: minutes for vgg19) and checks evenly spaced samples of --node-sample
node tests and --lit-sample lit modules.  Ends with
`N passed, N failed, N skipped`; exit 1 on any failure.  Standard library only.
"""
import argparse
import concurrent.futures
import filecmp
import os
import re
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance  # noqa: E402  (the importer driver shared with conformance.py)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINES = ["-canonicalize", "-lower", "-canonicalize -lower", "-roller", "-lower -roller",
             "-welder", "-canonicalize -roller -welder", "-lower -roller -welder",
             "-canonicalize -roller -rammer", "-canonicalize -roller -welder -rammer -grinder"]
FOLDERS = ["light", "models", "node", "lit"]

TYPE_RE = re.compile(r"\b(f64|f32|f16|bf16|i64|i32|i16|i8|u64|u32|u16|u8|bool)\[([0-9,]*)\]")
DTYPE_BYTES = {"f64": 8, "i64": 8, "u64": 8, "f32": 4, "i32": 4, "u32": 4,
               "f16": 2, "bf16": 2, "i16": 2, "u16": 2, "i8": 1, "u8": 1, "bool": 1}


def tensor_megabytes(qir_path):
    """Bytes of every tensor type written in a module (results, inputs,
    constants), in MB: a machine-independent measure of how long qrun takes."""
    total = 0
    with open(qir_path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            k = line.rfind(" : ")
            for dt, dims in TYPE_RE.findall(line[k:] if k >= 0 else ""):
                n = 1
                for d in dims.split(","):
                    if d:
                        n *= int(d)
                total += n * DTYPE_BYTES[dt]
    return total / 1e6


def first_error(msg):
    """The first `error:` line of a tool's output (else its first line)."""
    lines = [l.strip() for l in msg.strip().splitlines() if l.strip()]
    for l in lines:
        if "error:" in l:
            return l
    return lines[0] if lines else ""


def last_lines(msg, n=3):
    lines = [l.strip() for l in msg.strip().splitlines() if l.strip()]
    return "; ".join(lines[-n:]) if lines else ""


class Model:
    """One imported test model and its reference outputs."""

    def __init__(self, folder, name, test_dir):
        self.folder, self.name, self.test_dir = folder, name, test_dir
        self.workdir = None
        self.base = None          # the unoptimised .qir
        self.feeds = {}           # qrun --in NAME=FILE for the unbound inputs
        self.refs = []            # (output name, reference .npy)
        self.tol = ("1e-4", "1e-3") if folder == "models" else ("1e-7", "1e-3")
        self.skip = None          # why the model is not checked
        self.seed = None          # qrun --seed for inputs not fed from files


def prepare(model, args, tmp_root):
    """Imports the model and computes its reference outputs; sets model.skip
    when it cannot be checked."""
    wd = os.path.join(tmp_root, model.folder, model.name.replace("/", "_"))
    os.makedirs(wd, exist_ok=True)
    model.workdir = wd
    if model.folder == "lit":
        return prepare_lit(model, args)
    onnx = os.path.join(model.test_dir, "model.onnx")
    try:
        inputs, outputs = conformance.model_io(onnx)
    except (OSError, ValueError, IndexError) as e:
        model.skip = "cannot read model: %s" % e
        return model
    sets = conformance.data_sets(model.test_dir)
    if not sets:
        model.skip = "no test_data_set"
        return model
    ds_dir = os.path.join(model.test_dir, sets[0])
    feeds, shapes, _expected = conformance.read_data_set(ds_dir, inputs, outputs, wd, sets[0])
    model.base = os.path.join(wd, "base.qir")
    rc, msg, binds = conformance.import_model(os.path.join(args.bin, "onnx2qir"), onnx, feeds, shapes,
                                              model.base, args.timeout)
    if rc != 0:
        model.skip = "does not import: %s" % (first_error(msg) or "rc=%d" % rc)
        return model
    model.feeds = {n: p for n, p in feeds.items() if n not in binds}
    if args.quick and model.folder == "light":
        mb = tensor_megabytes(model.base)
        if mb > args.quick_mb:
            model.skip = "--quick: %.0f MB of tensors > %g MB" % (mb, args.quick_mb)
            return model
    model.refs = [(o, os.path.join(wd, "ref%d.npy" % k)) for k, o in enumerate(outputs)]
    cmd = [os.path.join(args.bin, "qrun")] + in_args(model)
    for o, path in model.refs:
        cmd += ["--out", bind(o, path)]
    cmd.append(model.base)
    rc, msg = conformance.run(cmd, args.timeout)
    if rc != 0:
        model.skip = "the unoptimised module does not run: %s" % first_error(msg)
    return model


def prepare_lit(model, args):
    """A hand-written module of test/lit, on random inputs (qrun --seed): the
    passes must keep the module's interface, so the same seed gives the
    optimised module the same inputs."""
    with open(model.test_dir, encoding="utf-8", errors="replace") as fh:
        if re.search(r"^\s*weights\s", fh.read(), re.M):
            model.skip = "has a weights file"
            return model
    model.base = os.path.join(model.workdir, "base.qir")
    rc, msg = conformance.run([os.path.join(args.bin, "qopt"), model.test_dir, "-o", model.base], args.timeout)
    if rc != 0:
        model.skip = "not a valid module"
        return model
    with open(model.base, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    n_out = len(re.findall(r"^  output ", text, re.M))
    # 16-bit floats anywhere: a pass that reorders or fuses their arithmetic (a matched
    # attention computes in f32 what the decomposed ops rounded to f16 step by step) moves
    # results by f16 roundings, as the lit tests of such passes allow (atol 2e-3)
    if re.search(r"\bb?f16\[", text):
        model.tol = ("2e-3", "1e-2")
    if n_out == 0:
        model.skip = "no outputs"
        return model
    model.seed = "3"
    model.refs = [(None, os.path.join(model.workdir, "ref%d.npy" % k)) for k in range(n_out)]
    cmd = [os.path.join(args.bin, "qrun"), "--seed", model.seed, model.base]
    for _, path in model.refs:
        cmd += ["--out", path]
    # some modules of the tool tests are big (roller plans for large matmuls)
    rc, msg = conformance.run(cmd, args.lit_timeout)
    if rc == 124:
        model.skip = "qrun takes over %d s" % args.lit_timeout
    elif rc != 0:
        model.skip = "the unoptimised module does not run: %s" % first_error(msg)
    return model


def bind(name, path):
    """qrun's NAME=FILE, or FILE alone for the next one in order."""
    return path if name is None else "%s=%s" % (name, path)


def in_args(model):
    a = ["--seed", model.seed] if model.seed else []
    for name, path in model.feeds.items():
        a += ["--in", "%s=%s" % (name, path)]
    return a


def check(model, pipeline, args):
    """Returns (ok, message) for one model through one pipeline."""
    qopt = os.path.join(args.bin, "qopt")
    tag = re.sub(r"[^a-z]+", "_", pipeline).strip("_")
    # next to base.qir, so a relative weights path still resolves
    opt = os.path.join(model.workdir, "opt_%s.qir" % tag)
    again = os.path.join(model.workdir, "opt_%s.again.qir" % tag)
    rc, msg = conformance.run([qopt] + pipeline.split() + [model.base, "-o", opt], args.timeout)
    if rc != 0:
        return False, "qopt %s: %s" % (pipeline, last_lines(msg))
    rc, msg = conformance.run([qopt, opt, "-o", again], args.timeout)
    if rc != 0:
        return False, "the optimised module does not read back: %s" % last_lines(msg)
    if not filecmp.cmp(opt, again, shallow=False):
        return False, "printing the optimised module again changes it (no printer fixed point): diff %s %s" % (
            opt, again)
    atol, rtol = model.tol
    cmd = [os.path.join(args.bin, "qrun"), "--atol", atol, "--rtol", rtol] + in_args(model)
    for o, path in model.refs:
        cmd += ["--expect", bind(o, path)]
    cmd.append(opt)
    rc, msg = conformance.run(cmd, args.timeout)
    if rc != 0:
        return False, "qrun: %s" % last_lines(msg)
    return True, ""


def collect(args):
    models = []
    for folder in args.folder:
        if folder == "lit":
            root = os.path.join(REPO, "test", "lit")
            names = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root)
                           for f in fs if f.endswith(".qir"))
            names = [n for n in names if args.filter in n and not n.startswith("errors" + os.sep)]
            if args.quick and len(names) > args.lit_sample > 0:
                step = len(names) / args.lit_sample
                names = [names[int(i * step)] for i in range(args.lit_sample)]
            models += [Model(folder, n, os.path.join(root, n)) for n in names]
            continue
        base = os.path.join(args.tests, folder)
        if not os.path.isdir(base):
            print("SKIPPED: %s/ not found" % folder)
            continue
        names = [n for n in sorted(os.listdir(base))
                 if os.path.isfile(os.path.join(base, n, "model.onnx")) and args.filter in n]
        if args.quick and folder == "node" and len(names) > args.node_sample > 0:
            step = len(names) / args.node_sample
            names = [names[int(i * step)] for i in range(args.node_sample)]
        models += [Model(folder, n, os.path.join(base, n)) for n in names]
    return models


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-j", type=int, default=2, help="parallel jobs (default 2)")
    ap.add_argument("--bin", default=os.environ.get("QIR_BIN", os.path.join(REPO, "build", "bin")))
    ap.add_argument("--tests", default=os.environ.get("ONNX_TESTS", os.path.join(REPO, "..", "shared", "onnx-tests")))
    ap.add_argument("--folder", action="append", choices=FOLDERS)
    ap.add_argument("--filter", default="", help="only tests whose name contains this")
    ap.add_argument("--pipeline", action="append", help="a qopt pipeline, e.g. \"-canonicalize -lower\" "
                    "(repeatable; default: %s)" % ", ".join(PIPELINES))
    ap.add_argument("--quick", action="store_true", help="the bounded run of `make check`")
    ap.add_argument("--quick-mb", type=float, default=40,
                    help="--quick: skip light/ models with more MB of tensors than this (default 40)")
    ap.add_argument("--node-sample", type=int, default=120,
                    help="--quick: node tests checked, evenly spaced (default 120)")
    ap.add_argument("--lit-sample", type=int, default=100,
                    help="--quick: test/lit modules checked, evenly spaced (default 100)")
    ap.add_argument("--lit-timeout", type=int, default=5,
                    help="lit modules whose unoptimised run takes longer are skipped (default 5 s)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per tool run (default 1800)")
    ap.add_argument("--keep", help="keep the work files (imported and optimised modules) under this directory")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every result")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    pipelines = args.pipeline or PIPELINES

    args.folder = args.folder or FOLDERS
    missing_tests = 0
    # only folders of the ONNX data need it: `--folder lit` alone runs without
    if not os.path.isdir(args.tests) and any(f != "lit" for f in args.folder):
        print("SKIPPED: ONNX tests not found at %s (set ONNX_TESTS)" % args.tests)
        args.folder = [f for f in args.folder if f == "lit"]
        missing_tests = 1
    for tool in ("onnx2qir", "qopt", "qrun"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            print("pass-check: error: %s not found in %s (build first, or set QIR_BIN)" % (tool, args.bin))
            return 1
    start = time.time()
    models = collect(args)
    # whole networks first, so the workers finish together
    models.sort(key=lambda m: FOLDERS.index(m.folder))
    tmp_root = args.keep or tempfile.mkdtemp(prefix="qir-pass-check-")

    results = []            # (model, pipeline, status, message)
    lock = threading.Lock()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
        pending = {ex.submit(prepare, m, args, tmp_root): None for m in models}
        while pending:
            done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for fut in done:
                pipeline = pending.pop(fut)
                if pipeline is None:
                    m = fut.result()
                    if m.skip:
                        with lock:
                            results += [(m, p, "skipped", m.skip) for p in pipelines]
                        continue
                    for p in pipelines:
                        f = ex.submit(check, m, p, args)
                        f.model = m
                        pending[f] = p
                else:
                    ok, msg = fut.result()
                    results.append((fut.model, pipeline, "passed" if ok else "failed", msg))
                    if not ok:  # at once: a full run takes long
                        print("FAIL: %s/%s [%s]: %s" % (fut.model.folder, fut.model.name, pipeline, msg), flush=True)
    if not args.keep:
        shutil.rmtree(tmp_root, ignore_errors=True)

    results.sort(key=lambda r: (FOLDERS.index(r[0].folder), r[0].name, pipelines.index(r[1])))
    total = {"passed": 0, "failed": 0, "skipped": missing_tests}
    table = {}
    for m, p, status, msg in results:
        total[status] += 1
        table.setdefault((m.folder, p), {"passed": 0, "failed": 0, "skipped": 0})[status] += 1
        if args.verbose and status != "failed":
            print("%s: %s/%s [%s]%s" % (status.upper(), m.folder, m.name, p, ": " + msg if msg else ""))
    skipped_models = {}
    for m, p, status, msg in results:
        if status == "skipped":
            skipped_models[(m.folder, m.name)] = msg
    width = max(len(p) for p in pipelines)
    for folder in FOLDERS:
        for p in pipelines:
            c = table.get((folder, p))
            if c:
                print("%-7s %-*s  %d passed, %d failed, %d skipped" % (folder, width, p, c["passed"], c["failed"],
                                                                    c["skipped"]))
    print("models not checked: %d (-v says why); time %.0f s" % (len(skipped_models), time.time() - start))
    print("%d passed, %d failed, %d skipped" % (total["passed"], total["failed"], total["skipped"]))
    return 1 if total["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
