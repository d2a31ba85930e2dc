#!/bin/sh
# Back-end checks of qcodegen, ending in "N passed, N failed, N skipped".
#
#   scripts/backend-check.sh [-j N] [--filter SUBSTR] [--no-gpu] [--full] [-v]
#                            [--passes "..."] [--check [--ratio]] [--folders node,models,light]
#                            [--rel-l2 E]
#
# 1. C back end, numerically: every ONNX node test and real model under
#    $ONNX_TESTS that the reference interpreter passes (not listed in
#    test/known-failures.txt) goes onnx2qir -> qcodegen -c -main -> cc -fopenmp
#    (-O0 for node tests, -O1 for models, -O2 with --full) -> run on the test
#    data -> compare with the expected outputs (|got - want| <= atol +
#    rtol*|want|, integers exactly; node tests 1e-7 + 1e-3, models 1e-4 +
#    1e-3; with --rel-l2 E floats pass when ||got - want|| / ||want|| <= E,
#    for lower-precision builds such as -autocast=f16).  The comparison reads the .npy the program writes and the .pb
#    ONNX ships, with its own code.
#    With --check the programs are generated with `qcodegen -c -check` (the
#    race, bounds and barrier checker; serial, no OpenMP): any hazard fails the
#    test with the checker's first report.  --ratio also builds the plain
#    program and prints the checked run's time over the plain run's (both
#    single-threaded) for models and light/ networks.
#    With --passes, a kernel group qcodegen cannot compose as one kernel
#    (its warning "runs as separate kernels") fails the test, and so does an
#    rprogram qcodegen cannot run as one persistent kernel (its warning "runs
#    as separate launches": a packed kernel's plan disagrees with its code).
# 2. CUDA: qcodegen -cuda for every real model compiles with nvcc for sm_80
#    and sm_90a (one nvcc run, two -gencode targets) with no warnings, and
#    ptxas's resource report for the models' kernels shows no spills
#    (registers and shared memory per kernel go to build/check/ptxas.log).
#    A sample of node tests compiles too: by default a few, each for one of
#    the two architectures (what `make check` runs); --full: a larger sample,
#    each for both.
# 3. HIP: the node sample (and with --full the cls model) through hipcc
#    --offload-arch=gfx90a.
# A missing compiler or test folder prints SKIPPED and counts as skipped.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
: "${QIR_BIN:=$top/build/bin}"
: "${ONNX_TESTS:=$top/../shared/onnx-tests}"
export QIR_BIN ONNX_TESTS
exec python3 - "$top" "$@" <<'PYEOF'
import argparse, concurrent.futures, math, os, re, shutil, subprocess, sys, tempfile, time

top = sys.argv[1]
sys.path.insert(0, os.path.join(top, "scripts"))
import conformance as conf  # the importer's own test driver: model_io, tensor_dims

ap = argparse.ArgumentParser(prog="backend-check.sh")
ap.add_argument("-j", type=int, default=2)
ap.add_argument("--filter", default="")
ap.add_argument("--no-gpu", action="store_true", help="skip the nvcc/hipcc compile checks")
ap.add_argument("--full", action="store_true", help="cc -O2, and the larger GPU sample for both CUDA architectures")
ap.add_argument("--keep", help="keep generated files under this directory")
ap.add_argument("--passes", default="", help="qopt passes run between onnx2qir and qcodegen, e.g. '-canonicalize -roller'")
ap.add_argument("--check", action="store_true", help="run the C programs under qcodegen's race, bounds and barrier checker")
ap.add_argument("--ratio", action="store_true", help="with --check: time the checked against the plain program (models, light)")
ap.add_argument("--folders", default="node,models", help="which folders of $ONNX_TESTS: node, models, light")
ap.add_argument("--light", default="", help="comma-separated light/ networks to run (default: all of them)")
ap.add_argument("--rel-l2", type=float, default=None,
                help="compare float outputs by relative L2 error (||got - want|| / ||want|| <= this), "
                     "for lower-precision builds such as -autocast=f16")
ap.add_argument("-v", "--verbose", action="store_true")
args = ap.parse_args(sys.argv[2:])
BIN = os.path.abspath(os.environ["QIR_BIN"])
TESTS = os.environ["ONNX_TESTS"]
CC = os.environ.get("CC", "cc")
NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
HIPCC = os.environ.get("HIPCC", shutil.which("hipcc") or "/usr/bin/hipcc")
LOG = os.path.join(top, "build", "check")
os.makedirs(LOG, exist_ok=True)
counts = {"passed": 0, "failed": 0, "skipped": 0}
RATIOS = []  # (model, plain seconds, checked seconds) with --check --ratio

# Tests the C back end is known not to pass yet, with the reason.
KNOWN = {}
known_file = os.path.join(top, "test", "lit", "qcodegen", "backend-known-failures.txt")
if os.path.exists(known_file):
    for line in open(known_file):
        line = line.strip()
        if line and not line.startswith("#"):
            p = line.split(None, 1)
            KNOWN[p[0]] = p[1] if len(p) > 1 else ""


def run(cmd, timeout=300, cwd=None):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, cwd=cwd)
        return p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return 124, "timed out after %ds" % timeout
    except OSError as e:
        return 127, str(e)


# ---------------------------------------------------------------- tensors
from tensor_files import read_npy, read_pb  # noqa: E402  (.npy and .pb, this script's own decoding)


def compare(got_path, want_path, atol, rtol, rel_l2=None):
    gs, gv, gc = read_npy(got_path)
    ws, wv, wc = read_pb(want_path)
    n = 1
    for d in ws:
        n *= d
    if len(gv) != n:
        return "%d elements, expected %d" % (len(gv), n)
    exact = wc not in "efd"
    if rel_l2 is not None and not exact:
        # a lower-precision build (-autocast): ||got - want|| / ||want|| over the tensor
        diff = sum((float(g) - float(w)) ** 2 for g, w in zip(gv, wv))
        norm = sum(float(w) ** 2 for w in wv)
        rel = math.sqrt(diff / norm) if norm > 0 else math.sqrt(diff)
        return None if rel <= rel_l2 else "relative L2 error %.3g > %g" % (rel, rel_l2)
    worst = 0.0
    for i, (g, w) in enumerate(zip(gv, wv)):
        if exact:
            if int(g) != int(w):
                return "element %d: %s, expected %s" % (i, g, w)
            continue
        g, w = float(g), float(w)
        if math.isnan(w) and math.isnan(g):
            continue
        if math.isinf(w) and g == w:
            continue
        err = abs(g - w)
        if not err <= atol + rtol * abs(w):
            return "element %d: %r, expected %r (|err| %.3g)" % (i, g, w, err)
        worst = max(worst, err)
    return None


# ---------------------------------------------------------------- one test on the C back end
def import_model(test_dir, ds_dir, inputs, qir):
    """onnx2qir as the conformance runner calls it; returns (rc, msg, feeds, binds)."""
    in_files = sorted((f for f in os.listdir(ds_dir) if re.match(r"input_\d+\.pb$", f)), key=lambda f: int(f[6:-3]))
    feeds = {}
    for k, f in enumerate(in_files):
        if k < len(inputs):
            feeds[inputs[k]] = os.path.join(ds_dir, f)
    binds, msg, rc = [], "", 1
    for _ in range(10):
        cmd = [os.path.join(BIN, "onnx2qir"), "-o", qir]
        for name, path in feeds.items():
            if name in binds:
                cmd += ["--bind", "%s=%s" % (name, path)]
                continue
            dims = conf.tensor_dims(path)
            if dims is not None:
                cmd += ["--shape", "%s=%s" % (name, ",".join(str(d) for d in dims))]
        cmd.append(os.path.join(test_dir, "model.onnx"))
        rc, msg = run(cmd)
        if rc == 0:
            break
        wanted = [n for n in re.findall(r"--bind (\S+)=FILE\.pb", msg) if n in feeds and n not in binds]
        if not wanted:
            break
        binds += wanted
    return rc, msg, feeds, binds


def optimise(qir):
    """Runs --passes over an imported module in place; returns (rc, message)."""
    if not args.passes:
        return 0, ""
    rc, msg = run([os.path.join(BIN, "qopt")] + args.passes.split() + [qir, "-o", qir + ".opt"])
    if rc == 0:
        os.replace(qir + ".opt", qir)
    return rc, "qopt: " + "; ".join(msg.strip().splitlines()[:1])


def c_backend(job):
    folder, name, test_dir, wd = job
    try:
        inputs, outputs = conf.model_io(os.path.join(test_dir, "model.onnx"))
    except Exception as e:  # unreadable model: the importer's business
        return "skip", "cannot read model: %s" % e
    atol, rtol = (1e-4, 1e-3) if folder in ("models", "light") else (1e-7, 1e-3)
    sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    if not sets:
        return "skip", "no test data"
    for ds in sets:
        ds_dir = os.path.join(test_dir, ds)
        qir = os.path.join(wd, ds + ".qir")
        rc, msg, feeds, binds = import_model(test_dir, ds_dir, inputs, qir)
        if rc != 0:
            return "skip", "onnx2qir: " + (msg.strip().splitlines() or ["rc=%d" % rc])[0]
        rc, msg = optimise(qir)
        if rc != 0:
            return "fail", msg
        src, exe = os.path.join(wd, ds + ".c"), os.path.join(wd, ds)
        rc, msg = run([os.path.join(BIN, "qcodegen"), "-c", "-main"] + (["-check"] if args.check else []) + [qir, "-o", src])
        if rc != 0:
            return "fail", "qcodegen: " + "; ".join(msg.strip().splitlines()[:1])
        # every group the passes form is one kernel: qcodegen composes it
        # (a group it runs as its ops is a disagreement between the two), and
        # every rprogram is one persistent kernel (its packed plans hold)
        split = [l for l in msg.splitlines() if "runs as separate kernels" in l or "runs as separate launches" in l]
        if split:
            return "fail", "qcodegen: " + split[0]
        # Most of a node test's compile time is the -main runtime, not its
        # kernels: -O0 there; models run long enough to want -O1.
        opt = "-O2" if args.full else "-O1" if folder in ("models", "light") else "-O0"
        # the checker's shadow state is the program's own: serial
        rc, msg = run([CC, opt] + ([] if args.check else ["-fopenmp"]) + ["-o", exe, src, "-lm"])
        if rc != 0:
            return "fail", "cc: " + "; ".join(msg.strip().splitlines()[:3])
        plain = None
        if args.check and args.ratio and folder != "node" and ds == sets[0]:
            psrc = os.path.join(wd, ds + ".plain.c")
            plain = os.path.join(wd, ds + ".plain")
            rc, msg = run([os.path.join(BIN, "qcodegen"), "-c", "-main", qir, "-o", psrc])
            if rc == 0:
                rc, msg = run([CC, opt, "-o", plain, psrc, "-lm"])
            if rc != 0:
                return "fail", "plain program for the ratio: " + "; ".join(msg.strip().splitlines()[:2])
        out_files = sorted((f for f in os.listdir(ds_dir) if re.match(r"output_\d+\.pb$", f)), key=lambda f: int(f[7:-3]))
        cmd = [exe]
        for nm, path in feeds.items():
            if nm not in binds:
                cmd += ["--in", "%s=%s" % (nm, path)]
        got = []
        for k, f in enumerate(out_files):
            if k < len(outputs):
                g = os.path.join(wd, "%s.out%d.npy" % (ds, k))
                cmd += ["--out", "%s=%s" % (outputs[k], g)]
                got.append((g, os.path.join(ds_dir, f)))
        env = dict(os.environ, OMP_NUM_THREADS="1")

        def run_program(cmd):
            try:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600, env=env)
                return p.returncode, p.stdout.decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                return 124, "timed out"
        t0 = time.time()
        rc, msg = run_program(cmd)
        t_checked = time.time() - t0
        if plain and rc == 0:
            t0 = time.time()
            prc, pmsg = run_program([plain] + cmd[1:])
            if prc == 0:
                RATIOS.append((name, time.time() - t0, t_checked))
        if rc != 0 and args.check and "error:" in msg:
            hazards = [l for l in msg.splitlines() if "error:" in l]
            return "fail", "%s: checker: %d hazard(s): %s" % (ds, len(hazards), hazards[0])
        if rc != 0:
            return "fail", "%s: run: %s" % (ds, "; ".join(msg.strip().splitlines()[-2:]))
        for g, w in got:
            try:
                err = compare(g, w, atol, rtol, args.rel_l2)
            except Exception as e:
                err = "cannot compare: %s" % e
            if err:
                return "fail", "%s: %s: %s" % (ds, os.path.basename(w), err)
    return "pass", ""


def count(kind, label, msg=""):
    key = {"pass": "passed", "fail": "failed", "skip": "skipped"}[kind]
    counts[key] += 1
    if kind == "fail" or args.verbose:
        print("%s: %s%s" % (key.upper()[:-2] if kind != "skip" else "SKIPPED", label, (": " + msg) if msg else ""))


def c_suite(tmp):
    known_qrun = conf.load_known(os.path.join(top, "test", "known-failures.txt"))
    jobs = []
    for folder in [f for f in args.folders.split(",") if f]:
        base = os.path.join(TESTS, folder)
        if not os.path.isdir(base):
            print("SKIPPED: %s/ not found" % base)
            continue
        for name in sorted(os.listdir(base)):
            d = os.path.join(base, name)
            if not os.path.isfile(os.path.join(d, "model.onnx")) or args.filter not in name:
                continue
            if folder == "light" and args.light and name.replace("light_", "") not in args.light.split(","):
                counts["skipped"] += 1
                if args.verbose:
                    print("SKIPPED: c/light/%s (not in --light)" % name)
                continue
            if name in known_qrun:  # the reference interpreter does not pass it: out of scope here
                counts["skipped"] += 1
                continue
            wd = os.path.join(tmp, "c", folder, name)
            os.makedirs(wd, exist_ok=True)
            jobs.append((folder, name, d, wd))
    c = {"pass": 0, "fail": 0, "skip": 0, "xfail": 0}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
        for job, (kind, msg) in zip(jobs, ex.map(c_backend, jobs)):
            label = "c/%s/%s" % (job[0], job[1])
            if kind == "fail" and job[1] in KNOWN:
                c["xfail"] += 1
                counts["skipped"] += 1
                if args.verbose:
                    print("XFAIL: %s (%s): %s" % (label, KNOWN[job[1]], msg))
                continue
            if kind == "pass" and job[1] in KNOWN:
                print("UNEXPECTEDLY PASSING: %s (listed: %s)" % (label, KNOWN[job[1]]))
            c[kind] += 1
            count(kind, label, msg)
    print("C back end%s: %d passed, %d failed, %d skipped (import or qrun cannot run it), %d known failures" % (
        " under the checker" if args.check else "", c["pass"], c["fail"], c["skip"], c["xfail"]))
    if RATIOS:
        print("checker cost (single-threaded runs, %s):" % CC)
        for name, tp, tc in sorted(RATIOS):
            print("  %-34s plain %7.2f s  checked %7.2f s  ratio %5.1fx" % (name, tp, tc, tc / tp if tp > 0 else float("inf")))


# ---------------------------------------------------------------- GPU compilers
SAMPLE = ["test_add", "test_matmul_2d", "test_conv_with_strides_padding", "test_softmax_axis_1", "test_relu",
          "test_gemm_default_no_bias", "test_reduce_mean_default_axes_keepdims_example", "test_maxpool_2d_pads",
          "test_cast_FLOAT_to_FLOAT16", "test_gather_0", "test_transpose_default", "test_concat_3d_axis_0"]
# The default run's sample: one kernel shape each (tiled with staging, warp
# reduction, pooling, f16 conversion, gather), each for one CUDA architecture.
QUICK_SAMPLE = ["test_conv_with_strides_padding", "test_softmax_axis_1", "test_maxpool_2d_pads",
                "test_cast_FLOAT_to_FLOAT16", "test_gather_0", "test_reduce_mean_default_axes_keepdims_example"]
ARCHS = ("sm_80", "sm_90a")   # h100's plans: Hopper's wgmma kernels assemble for sm_90a only


def gpu_sources(tmp, be):
    """(label, source path) for the real models and the node sample, generated with -main."""
    out = []
    items = [("models", n) for n in sorted(os.listdir(os.path.join(TESTS, "models")))
             if os.path.isfile(os.path.join(TESTS, "models", n, "model.onnx"))] if os.path.isdir(os.path.join(TESTS, "models")) else []
    items += [("node", n) for n in (SAMPLE if args.full else QUICK_SAMPLE)
              if args.filter in n and os.path.isdir(os.path.join(TESTS, "node", n))]
    for folder, name in items:
        if args.filter not in name:
            continue
        test_dir = os.path.join(TESTS, folder, name)
        wd = os.path.join(tmp, be, folder, name)
        os.makedirs(wd, exist_ok=True)
        inputs, _ = conf.model_io(os.path.join(test_dir, "model.onnx"))
        qir = os.path.join(wd, "m.qir")
        rc, msg, _, _ = import_model(test_dir, os.path.join(test_dir, "test_data_set_0"), inputs, qir)
        if rc != 0:
            out.append((folder, name, None, "onnx2qir failed"))
            continue
        rc, msg = optimise(qir)
        if rc != 0:
            out.append((folder, name, None, msg))
            continue
        src = os.path.join(wd, "m.cu" if be == "cuda" else "m.hip.cpp")
        rc, msg = run([os.path.join(BIN, "qcodegen"), "-" + be, "-main", qir, "-o", src])
        out.append((folder, name, src if rc == 0 else None, "qcodegen: " + msg.strip().splitlines()[0] if rc else ""))
    return out


def nvcc_suite(tmp):
    if not os.access(NVCC, os.X_OK):
        print("SKIPPED: nvcc not found at %s" % NVCC)
        counts["skipped"] += 1
        return
    ptx_log = open(os.path.join(LOG, "ptxas.log"), "w")
    srcs = gpu_sources(tmp, "cuda")

    def build(item, index):
        folder, name, src, why = item
        if not src:
            return item, [("skip" if why.startswith("onnx2qir") else "fail", "all", why, "")]
        # Models (and --full) get both architectures from one nvcc run (one
        # front end, one host compile, ptxas per target); the default node
        # sample alternates between them.
        archs = ARCHS if folder == "models" or args.full else (ARCHS[index % len(ARCHS)],)
        cmd = [NVCC, "-O3", "-Xptxas", "-v", "-c", "-o", src + ".o", src]
        for arch in archs:
            cmd[1:1] = ["-gencode", "arch=compute_%s,code=%s" % (arch[3:], arch)]
        rc, msg = run(cmd, timeout=600)
        per_arch = {a: [] for a in archs}
        cur = None
        for l in msg.splitlines():
            m = re.search(r"for '(sm_\d+a?)'", l)
            if m:
                cur = m.group(1)
            if cur in per_arch:
                per_arch[cur].append(l)
        res = []
        for arch in archs:
            out = "\n".join(per_arch[arch])
            warn = [l for l in msg.splitlines() if "warning" in l.lower()]
            spills = [l for l in per_arch[arch] if re.search(r"[1-9]\d* bytes spill", l)]
            if rc != 0:
                res.append(("fail", arch, "nvcc failed: " + "; ".join(msg.strip().splitlines()[:3]), msg))
            elif warn:
                res.append(("fail", arch, "nvcc warnings: " + warn[0], out))
            elif not per_arch[arch] and "__global__" in open(src).read():
                res.append(("fail", arch, "no ptxas report for " + arch, msg))
            elif spills and folder == "models":
                res.append(("fail", arch, "ptxas spills: " + spills[0].strip(), out))
            else:
                res.append(("pass", arch, "", out))
        return item, res

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
        for (folder, name, src, _), res in ex.map(build, srcs, range(len(srcs))):
            for kind, arch, msg, out in res:
                count(kind, "nvcc/%s/%s/%s" % (arch, folder, name), msg)
                if folder == "models" and out:
                    ptx_log.write("== %s %s\n" % (name, arch))
                    kern = None
                    for l in out.splitlines():
                        m = re.search(r"Function properties for (\S+)", l)
                        if m:
                            kern = m.group(1)
                        m = re.search(r"Used (\d+) registers.*?(?:, (\d+) bytes smem)?$", l)
                        if m and kern:
                            ptx_log.write("%s registers=%s smem=%s\n" % (kern, m.group(1), m.group(2) or "0"))
                        if "spill" in l and kern:
                            ptx_log.write("%s %s\n" % (kern, l.strip()))
    ptx_log.close()


def hip_suite(tmp):
    rc, _ = run([HIPCC, "--version"])
    if rc != 0:
        print("SKIPPED: hipcc not usable (%s)" % HIPCC)
        counts["skipped"] += 1
        return
    srcs = [s for s in gpu_sources(tmp, "hip") if s[0] == "node" or (args.full and s[1] == "ch_ppocr_mobile_v2.0_cls_infer")]

    def build(item):
        folder, name, src, why = item
        if not src:
            return item, ("skip" if why.startswith("onnx2qir") else "fail", why)
        rc, msg = run([HIPCC, "--offload-arch=gfx90a", "-O2", "-c", "-o", src + ".o", src], timeout=600)
        warn = [l for l in msg.splitlines() if "warning:" in l]
        if rc != 0:
            return item, ("fail", "hipcc failed: " + "; ".join([l for l in msg.splitlines() if "error" in l][:2]))
        if warn:
            return item, ("fail", "hipcc warnings: " + warn[0])
        return item, ("pass", "")

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as ex:
        for (folder, name, _, _), (kind, msg) in ex.map(build, srcs):
            count(kind, "hipcc/gfx90a/%s/%s" % (folder, name), msg)


if not os.path.isdir(TESTS):
    print("SKIPPED: ONNX tests not found at %s (set ONNX_TESTS)" % TESTS)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(0)
for tool in ("onnx2qir", "qcodegen"):
    if not os.access(os.path.join(BIN, tool), os.X_OK):
        print("backend-check: %s not found in %s (build first, or set QIR_BIN)" % (tool, BIN))
        sys.exit(1)
tmp = args.keep or tempfile.mkdtemp(prefix="qir-backend-")
try:
    c_suite(tmp)
    if not args.no_gpu:
        nvcc_suite(tmp)
        hip_suite(tmp)
finally:
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
print("%d passed, %d failed, %d skipped" % (counts["passed"], counts["failed"], counts["skipped"]))
sys.exit(1 if counts["failed"] else 0)
PYEOF
