#!/usr/bin/env python3
"""ONNX conformance: import every test model with onnx2qir and run it with qrun
against each test_data_set's expected outputs.

    scripts/conformance.py [-j N] [--bin DIR] [--tests DIR] [--filter SUBSTR]
                           [--folder node|node-all|light|models]... [-v] [--keep DIR]

Folders under $ONNX_TESTS (default ../shared/onnx-tests next to the repo):
node/ (the quick set), node-all/ (all 1765 node tests of ONNX v1.22.0, a
superset of node/), light/ and models/; without --folder the runner takes
node light models, or the space-separated list in $QIR_CONFORMANCE.
node/, node-all/ and light/ compare with |got-want| <= 1e-7 + 1e-3*|want| (integers and
booleans exactly), models/ with atol 1e-4, rtol 1e-3.  input_K.pb feeds the
K-th graph input that is not an initializer, output_K.pb is the K-th graph
output.  Every input gets --shape from its test data.  When onnx2qir says a
shape depends on a graph input's value it names `--bind NAME=FILE.pb`; the
runner then binds that input to its test data and imports again.

test/known-failures.txt lists tests expected to fail (`test_name  reason`).
Unlisted failures fail the run (exit 1); listed tests that pass are reported
as "unexpectedly passing".  Standard library only (no onnx package).
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- protobuf wire format

def _varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _fields(b):
    """Yields (field number, wire type, value) of one message."""
    i, n = 0, len(b)
    while i < n:
        key, i = _varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = _varint(b, i)
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        elif w == 2:
            ln, i = _varint(b, i)
            v, i = b[i:i + ln], i + ln
        else:
            raise ValueError("unsupported wire type %d" % w)
        yield f, w, v


def _name_of(msg, field):
    for f, w, v in _fields(msg):
        if f == field and w == 2:
            return v.decode("utf-8", "replace")
    return ""


def model_io(path):
    """(graph input names that are not initializers, graph output names)."""
    with open(path, "rb") as fh:
        b = fh.read()
    graph = b""
    for f, w, v in _fields(b):
        if f == 7 and w == 2:
            graph = v
    inits, inputs, outputs = set(), [], []
    for f, w, v in _fields(graph):
        if f == 5 and w == 2:
            inits.add(_name_of(v, 8))
        elif f == 11 and w == 2:
            inputs.append(_name_of(v, 1))
        elif f == 12 and w == 2:
            outputs.append(_name_of(v, 1))
    return [n for n in inputs if n not in inits], outputs


def model_ops(path):
    """Operator types of the top-level graph's nodes, in order, deduplicated."""
    with open(path, "rb") as fh:
        b = fh.read()
    ops = []
    for f, w, v in _fields(b):
        if f == 7 and w == 2:
            for gf, gw, gv in _fields(v):
                if gf == 1 and gw == 2:
                    t = _name_of(gv, 4)
                    if t not in ops:
                        ops.append(t)
    return ops


def tensor_header(b):
    """(name, dims, data_type, raw_data or None) of a TensorProto message;
    ValueError or IndexError when it is malformed."""
    name, dims, dtype, raw = "", [], 0, None
    for f, w, v in _fields(b):
        if f == 1 and w == 0:
            dims.append(v)
        elif f == 1 and w == 2:           # packed dims
            i = 0
            while i < len(v):
                d, i = _varint(v, i)
                dims.append(d)
        elif f == 2 and w == 0:
            dtype = v
        elif f == 8 and w == 2:
            name = bytes(v).decode("utf-8", "replace")
        elif f == 9 and w == 2:
            raw = v
    return name, dims, dtype, raw


def tensor_dims(path):
    """Dims of a TensorProto file, or None if it is not a plain tensor."""
    with open(path, "rb") as fh:
        b = fh.read()
    try:
        return tensor_header(b)[1]
    except (ValueError, IndexError):
        return None


# ---------------------------------------------------------------- running one test

def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return 124, "timed out after %ds" % timeout
    except OSError as e:
        return 127, str(e)


def data_sets(test_dir):
    """Names of the test_data_set_N folders of a test, in order."""
    return sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))


def read_data_set(ds_dir, inputs, outputs, workdir, tag):
    """The files of one test_data_set: (feeds, shapes, expected).  feeds maps
    a graph input name to its tensor file, shapes maps it to its dims (None if
    unknown), expected lists (graph output name, reference file)."""
    in_files = sorted((f for f in os.listdir(ds_dir) if re.match(r"input_\d+\.pb$", f)),
                      key=lambda f: int(f[6:-3]))
    out_files = sorted((f for f in os.listdir(ds_dir) if re.match(r"output_\d+\.pb$", f)),
                       key=lambda f: int(f[7:-3]))
    feeds, shapes = {}, {}
    for k, f in enumerate(in_files):
        if k < len(inputs):
            path = os.path.join(ds_dir, f)
            shapes[inputs[k]] = tensor_dims(path)
            feeds[inputs[k]] = path
    expected = [(outputs[k], os.path.join(ds_dir, f)) for k, f in enumerate(out_files) if k < len(outputs)]
    return feeds, shapes, expected


def import_model(onnx2qir, model, feeds, shapes, qir, timeout):
    """Runs onnx2qir on model, writing qir, with --shape for every input; when
    onnx2qir asks for `--bind NAME=FILE.pb` it binds that input to its feed and
    tries again.  Returns (rc, message, names of the bound inputs); bound inputs
    are constants of the module, so qrun must not be given them."""
    binds = []
    msg = ""
    rc = 1
    for _attempt in range(10):
        cmd = [onnx2qir, "-o", qir]
        for name, path in feeds.items():
            if name in binds:
                cmd += ["--bind", "%s=%s" % (name, path)]
                continue
            dims = shapes[name]
            if dims is not None:
                cmd += ["--shape", "%s=%s" % (name, ",".join(str(d) for d in dims))]
        cmd.append(model)
        rc, msg = run(cmd, timeout)
        if rc == 0:
            break
        wanted = [n for n in re.findall(r"--bind (\S+)=FILE\.pb", msg) if n in feeds and n not in binds]
        if not wanted:
            break
        binds += wanted
    return rc, msg, binds


def run_test(test_dir, folder, args, workdir):
    """Returns (ok, message)."""
    model = os.path.join(test_dir, "model.onnx")
    try:
        inputs, outputs = model_io(model)
    except (OSError, ValueError, IndexError) as e:
        return False, "cannot read model: %s" % e
    sets = data_sets(test_dir)
    if not sets:
        return False, "no test_data_set"
    atol, rtol = ("1e-4", "1e-3") if folder == "models" else ("1e-7", "1e-3")
    onnx2qir = os.path.join(args.bin, "onnx2qir")
    qrun = os.path.join(args.bin, "qrun")
    for ds in sets:
        ds_dir = os.path.join(test_dir, ds)
        feeds, shapes, expected = read_data_set(ds_dir, inputs, outputs, workdir, ds)
        qir = os.path.join(workdir, "%s.qir" % ds)
        rc, msg, binds = import_model(onnx2qir, model, feeds, shapes, qir, args.timeout)
        if rc != 0:
            return False, "%s: onnx2qir: %s" % (ds, msg.strip().splitlines()[0] if msg.strip() else "rc=%d" % rc)
        cmd = [qrun, "--atol", atol, "--rtol", rtol]
        for name, path in feeds.items():
            if name not in binds:
                cmd += ["--in", "%s=%s" % (name, path)]
        for name, path in expected:
            cmd += ["--expect", "%s=%s" % (name, path)]
        cmd.append(qir)
        rc, msg = run(cmd, args.timeout)
        if rc != 0:
            lines = [l for l in msg.strip().splitlines() if l.strip()]
            detail = "; ".join(lines[-3:]) if lines else "rc=%d" % rc
            return False, "%s: qrun: %s" % (ds, detail)
    return True, ""


# ---------------------------------------------------------------- driver

def load_known(path):
    known = {}
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                parts = line.split(None, 1)
                known[parts[0]] = parts[1] if len(parts) > 1 else ""
    return known


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-j", type=int, default=2, help="parallel jobs (default 2)")
    ap.add_argument("--bin", default=os.environ.get("QIR_BIN", os.path.join(REPO, "build", "bin")))
    ap.add_argument("--tests", default=os.environ.get("ONNX_TESTS", os.path.join(REPO, "..", "shared", "onnx-tests")))
    ap.add_argument("--folder", action="append", choices=["node", "node-all", "light", "models"])
    ap.add_argument("--filter", default="", help="only tests whose name contains this")
    ap.add_argument("--known", default=os.path.join(REPO, "test", "known-failures.txt"))
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--keep", help="keep the imported .qir files under this directory")
    ap.add_argument("--by-op", action="store_true",
                    help="after the run, count failing tests (listed or not) by the operators of their model")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every result")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)

    if not os.path.isdir(args.tests):
        print("SKIPPED: ONNX tests not found at %s (set ONNX_TESTS)" % args.tests)
        print("0 passed, 0 failed, 1 skipped")
        return 0
    for tool in ("onnx2qir", "qrun"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            print("conformance: error: %s not found in %s (build first, or set QIR_BIN)" % (tool, args.bin))
            return 1
    known = load_known(args.known)
    folders = args.folder or os.environ.get("QIR_CONFORMANCE", "node light models").split()
    tmp_root = args.keep or tempfile.mkdtemp(prefix="qir-conformance-")
    jobs = []
    for folder in folders:
        base = os.path.join(args.tests, folder)
        if not os.path.isdir(base):
            print("SKIPPED: %s/ not found" % folder)
            continue
        for name in sorted(os.listdir(base)):
            d = os.path.join(base, name)
            if os.path.isfile(os.path.join(d, "model.onnx")) and args.filter in name:
                jobs.append((folder, name, d))

    # the slow whole networks first, so two workers finish together
    jobs.sort(key=lambda j: {"light": 0, "models": 1}.get(j[0], 2))

    def work(job):
        folder, name, d = job
        wd = os.path.join(tmp_root, folder, name)
        os.makedirs(wd, exist_ok=True)
        ok, msg = run_test(d, folder, args, wd)
        return folder, name, ok, msg

    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
        for folder, name, ok, msg in ex.map(work, jobs):
            results.setdefault(folder, []).append((name, ok, msg))
    if not args.keep:
        shutil.rmtree(tmp_root, ignore_errors=True)

    total = {"passed": 0, "failed": 0, "skipped": 0}
    bad = False
    for folder in folders:
        if folder not in results:
            continue
        c = {"passed": 0, "failed": 0, "skipped": 0}
        for name, ok, msg in results[folder]:
            if ok:
                c["passed"] += 1
                if name in known:
                    print("UNEXPECTEDLY PASSING: %s/%s (listed: %s)" % (folder, name, known[name]))
                elif args.verbose:
                    print("PASS: %s/%s" % (folder, name))
            elif name in known:
                c["skipped"] += 1
                if args.verbose:
                    print("XFAIL: %s/%s (%s): %s" % (folder, name, known[name], msg))
            else:
                c["failed"] += 1
                bad = True
                print("FAIL: %s/%s: %s" % (folder, name, msg))
        print("%s: %d passed, %d failed, %d skipped" % (folder, c["passed"], c["failed"], c["skipped"]))
        for k in total:
            total[k] += c[k]
    if args.by_op:
        by_op = {}
        for folder in folders:
            for name, ok, msg in results.get(folder, []):
                if ok:
                    continue
                try:
                    ops = model_ops(os.path.join(args.tests, folder, name, "model.onnx"))
                except (OSError, ValueError, IndexError):
                    ops = ["?"]
                key = "+".join(ops) if len(ops) <= 3 else "+".join(ops[:3]) + "+..."
                by_op.setdefault(key, []).append(name)
        print("failing tests by operator (%d):" % sum(len(v) for v in by_op.values()))
        for key, names in sorted(by_op.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print("  %4d  %s" % (len(names), key))
    # the last line in the form scripts/check.sh tallies
    print("%d passed, %d failed, %d skipped" % (total["passed"], total["failed"], total["skipped"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
