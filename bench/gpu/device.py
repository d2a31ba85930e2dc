#!/usr/bin/env python3
"""bench/gpu/device.py DIR OUT [--dry-run]: the one device call of issue 23
(DIR/run-device.sh runs it; bench/gpu/prepare.py made DIR on a machine with no
GPU).  Steps, each with its own cap, all inside TOTAL_S:

  0. unpack DIR/payload.tar.xz; make the transformer layers' sidecars again
     and check that the carried tools produce the .cu the binaries were built
     from (sha256);
  1. outputs: every program once on its test set (the generated main poisons
     device outputs with 0xff, checks every CUDA call), each output compared
     with onnxruntime's; then --bench (median of 20 runs) one at a time;
  2. compute-sanitizer memcheck on every program; racecheck and synccheck on
     the persistent (rprogram), device-loop and Welder-fused ones;
  3. Roller's top-10 plans per operator (ops/plan_timer) and the same
     operators through PyTorch (cuBLAS/cuDNN, TF32 off; f16 too); then
     per-kernel times (ncu) of a few programs (config "profile");
     then, where prepare.py --diag made DIR/diag, bench/gpu/diag/run.sh (ncu on
     issue 28's QKV GEMM, variants of it and convolution plans);
  4. whole models against PyTorch eager and torch.compile (gen/bench.py), as
     time allows.

OUT gets summary.md, log.txt and results.tar.gz (those two, results.json,
sanitizers.txt, the operator and model results): a device call brings back
at most 8 files.  The summary table is printed last.  --dry-run does
everything but touch a GPU (no program, sanitizer or timing runs): it checks
the payload, the regenerated sidecars, every file a step needs, and prints
the commands.  --total S: the whole call in S seconds instead of TOTAL_S
(a second call of a session, say, that must leave device time for another);
--cap STEP=S: that step's cap (as config.json's caps); --no-models: leave step 4 out.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor

T0 = time.time()
TOTAL_S = 415          # the whole call (the cap is 7 minutes)
CAPS = {"outputs": 85, "sanitizers": 85, "ops": 100, "profile": 25, "diag": 90, "models": 150}
PROFILE = ["bert_base.full"]   # per-kernel times (ncu), where the passes differ most
# Each step starts with min(its cap, what is left less what the later steps are
# promised): the whole-model step (as time allows, says the issue) gets the rest.
LOG = []
RACE_TARGETS = ("lstm100", "greedy_decoder", "ch_ppocr_mobile_v2.0_cls_infer", "light_shufflenet",
                "dyn_cnn_batch@b3", "dyn_seg_hw@h64w96",
                # size versions (issue 29): a smaller plan's run, its copies between bounds
                "dyn_cnn_batch@b3.versions", "dyn_seg_hw@h64w96.versions")


def log(msg):
    line = "[%5.1fs] %s" % (time.time() - T0, msg)
    print(line, flush=True)
    LOG.append(line)


def left():
    return TOTAL_S - (time.time() - T0)


def run(cmd, timeout, cwd=None, env=None):
    """(rc, seconds, output tail); rc 124 on timeout, 127 when it cannot start."""
    t = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=max(1, timeout), cwd=cwd, env=env)
        return r.returncode, time.time() - t, (r.stdout + r.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        return 124, time.time() - t, "TIMEOUT after %ds\n%s" % (timeout, out[-2000:])
    except OSError as e:
        return 127, time.time() - t, str(e)


def guarded(fn, fallback, *a):
    """fn(*a), or fallback with the traceback logged: one broken step must not end the call."""
    try:
        return fn(*a)
    except Exception:
        import traceback
        log("ERROR in %s: %s" % (fn.__name__, traceback.format_exc()[-1500:]))
        return fallback


def as_f64(a):
    """An array as float64; bfloat16 as the generated programs write it (.npy descr '<V2': the
    bits; numpy has no such type) or as onnx reads it (ml_dtypes' bfloat16, or its bits)."""
    import numpy as np
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64)


def compare(got_npy, want_pb, atol, rtol, rel_l2=None):
    """(ok, message): every element within atol + rtol*|want| (or, with rel_l2, |got - want| / |want|
    over the whole tensor within rel_l2: reduced precision); NaN, a poisoned (unwritten) element or
    a shape fails."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    got = np.load(got_npy)
    t = onnx.TensorProto()
    with open(want_pb, "rb") as f:
        t.ParseFromString(f.read())
    want = numpy_helper.to_array(t)
    if got.shape != want.shape:
        return False, "shape %s, want %s" % (got.shape, want.shape)
    g, w = as_f64(got), as_f64(want)
    if got.dtype.kind == "f" or got.dtype.kind == "V":
        bad_nan = int(np.isnan(g).sum() - np.isnan(w).sum())
        if bad_nan > 0:
            return False, "%d NaN (unwritten or invalid) elements" % bad_nan
    err = np.abs(g - w)
    msg = "max_abs_err=%.3g max|want|=%.3g" % (float(err.max()) if err.size else 0.0,
                                              float(np.abs(w).max()) if w.size else 0.0)
    if rel_l2 is not None:
        rel = float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))
        return bool(np.isfinite(g).all()) and rel <= rel_l2, msg + " rel_l2=%.3g" % rel
    return bool(np.all(err <= atol + rtol * np.abs(w))), msg


def kernel_times(csv_path):
    """[(kernel, total us, launches)] from ncu's --csv log, slowest first."""
    import csv
    tot = {}
    with open(csv_path) as f:
        rows = [l for l in f if l.startswith('"')]   # ncu's own lines (==PROF==) are not CSV
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        v *= {"ns": 1e-3, "nsecond": 1e-3, "ms": 1e3, "msecond": 1e3}.get(r.get("Metric Unit", "us"), 1.0)
        name = r["Kernel Name"].split("(")[0]
        t, n = tot.get(name, (0.0, 0))
        tot[name] = (t + v, n + 1)
    return sorted(((k, t, n) for k, (t, n) in tot.items()), key=lambda x: -x[1])


def regen(d, p, exe_dir):
    """Make a transformer layer's sidecar again on this machine; True when the .cu matches."""
    _, kind, size, pipe = p["regen"]
    work = os.path.join(exe_dir, ".regen-%s-%s" % (kind, pipe))
    os.makedirs(work, exist_ok=True)
    rc, _, out = run([sys.executable, os.path.join(d, "gen", "gen_transformers.py"), "--kind", kind,
                      "--size", size, "--out", os.path.join(work, "model")], 120)
    if rc:
        return None, "generator: " + out
    flags = []
    sys.path.insert(0, os.path.join(d, "gen"))
    import onnx_inputs
    flags = onnx_inputs.onnx2qir_flags(os.path.join(work, "model"))
    b = os.path.join(d, "bin")
    steps = [[os.path.join(b, "onnx2qir"), *flags, os.path.join(work, "model", "model.onnx"), "-o", os.path.join(work, "m.qir")],
             [os.path.join(b, "qopt"), *p["passes"], "-target=h100", os.path.join(work, "m.qir"), "-o", os.path.join(work, "o.qir")],
             [os.path.join(b, "qcodegen"), "-cuda", "-main", os.path.join(work, "o.qir"), "-o", os.path.join(work, "m.cu")]]
    for s in steps:
        rc, _, out = run(s, 120)
        if rc:
            return None, "%s: %s" % (os.path.basename(s[0]), out)
    with open(os.path.join(work, "m.cu")) as f:
        got = hashlib.sha256(f.read().replace(work, "@WORK@").encode()).hexdigest()
    if got != p["cu_sha256"]:
        return None, "the .cu made here differs from the one compiled (sha %s, want %s)" % (got[:12], p["cu_sha256"][:12])
    qw = os.path.join(work, "o.qw")   # a pass's new weights (prepare.py's choice), else onnx2qir's
    return (qw if os.path.exists(qw) else os.path.join(work, "m.qw")), "sidecar made again, .cu identical"


def main():
    d = os.path.abspath(sys.argv[1])
    final = os.path.abspath(sys.argv[2])
    global TOTAL_S
    opts = sys.argv[3:]
    dry = "--dry-run" in opts
    if "--total" in opts:
        TOTAL_S = float(opts[opts.index("--total") + 1])
    # Every file goes to a staging folder, packed into one archive at the end:
    # a device call brings back at most 8 files.
    out = os.path.join(d, ".results")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    os.makedirs(final, exist_ok=True)
    results = {"dry_run": dry, "steps": {}}
    payload = os.path.join(d, "payload.tar.xz")
    if os.path.exists(payload) and not os.path.exists(os.path.join(d, "programs.json")):
        with tarfile.open(payload) as tf:
            tf.extractall(d)
        log("unpacked payload")
    meta = json.load(open(os.path.join(d, "programs.json")))
    progs = meta["programs"]
    results["commit"] = meta.get("commit")
    results["build_failures"] = meta.get("build_failures", [])
    rc, _, smi = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"], 20)
    results["device"] = smi.strip() if rc == 0 else "none (%s)" % smi.strip()[:200]
    rc, _, nv = run(["nvcc", "--version"], 20)
    results["nvcc"] = nv.strip().splitlines()[-1] if rc == 0 and nv.strip() else "none"
    log("device: %s; commit %s; %d programs" % (results["device"], results["commit"], len(progs)))
    # DIR/config.json (prepare.py --config): this call's caps, racecheck targets, memcheck, models step
    cfg = {}
    if os.path.exists(os.path.join(d, "config.json")):
        cfg = json.load(open(os.path.join(d, "config.json")))
    CAPS.update(cfg.get("caps", {}))
    for i, o in enumerate(opts[:-1]):
        if o == "--cap":
            step, _, secs = opts[i + 1].partition("=")
            CAPS[step] = float(secs)
    race_targets = cfg.get("race", RACE_TARGETS)
    results["config"] = cfg

    # The whole models (step 4) are exported and compiled on the CPUs from the start, while
    # the GPU steps run: built when step 4 begins, not inside its budget.
    models = "" if "--no-models" in opts else cfg.get("models", "bert_b1,resnet50_b1")
    bdir, bwork = os.path.join(d, ".bench"), os.path.join(d, ".bench-work")
    builder = None
    if not dry and models:
        os.makedirs(bwork, exist_ok=True)
        blog = open(os.path.join(out, "models_build.log"), "w")
        try:
            builder = subprocess.Popen(
                ["nice", "-n", "10", sys.executable, "-u", os.path.join(d, "gen", "bench.py"), "--out", bdir,
                 "--bin", os.path.join(d, "bin"), "--work", bwork, "--only", models, "--build-only",
                 "--jobs", "2", "--budget", str(TOTAL_S - 100), *cfg.get("models_args", [])],
                stdout=blog, stderr=subprocess.STDOUT)
            log("whole models: building %s in the background" % models)
        except OSError as e:
            log("whole models: the background build did not start: %s" % e)

    # 0. sidecars made again (in parallel with nothing else: they take seconds)
    def weights_of(p):
        if p["weights"] == "regen":
            return p.get("weights_path")
        return os.path.join(d, p["weights"]) if p["weights"] else None
    with ThreadPoolExecutor(4) as ex:
        todo = [p for p in progs if p["weights"] == "regen"]
        for p, (path, msg) in zip(todo, ex.map(lambda p: guarded(regen, (None, "error"), d, p, os.path.join(d, "prog")), todo)):
            p["weights_path"] = path
            log("regen %s.%s: %s" % (p["name"], p["pipeline"], msg.strip()[:300]))
    for p in progs:
        p["ready"] = os.access(os.path.join(d, p["exe"]), os.X_OK) and (not p["weights"] or bool(weights_of(p)))
        for _, f in p["inputs"] + p["outputs"]:
            if not os.path.exists(os.path.join(d, f)):
                p["ready"] = False
                log("missing %s" % f)

    def argv(p):
        a = [os.path.join(d, p["exe"])]
        for n, f in p["inputs"]:
            a += ["--in", "%s=%s" % (n, os.path.join(d, f))]
        w = weights_of(p)
        if w:
            a += ["--weights", w]
        return a

    # 1. outputs right
    step_end = time.time() + min(CAPS["outputs"], left() - 280)
    odir = os.path.join(d, ".out")
    os.makedirs(odir, exist_ok=True)

    def check_one(p):
        key = "%s.%s" % (p["name"], p["pipeline"])
        if not p["ready"]:
            return key, {"status": "not ready (missing binary, weights or data)"}
        a = argv(p)
        files = []
        for k, (n, f) in enumerate(p["outputs"]):
            g = os.path.join(odir, "%s.%d.npy" % (key, k))
            files.append((g, os.path.join(d, f)))
            a += ["--out", "%s=%s" % (n, g)]
        if dry:
            # Here the program must get as far as its first CUDA call (inputs read and
            # checked), and the comparison must pass an expected output against itself.
            rc, _, txt = run(a, 20)
            reached = "CUDA" in txt or "cuda" in txt
            import numpy as np
            import onnx
            from onnx import numpy_helper
            selfcheck = []
            for g, w in files:
                t = onnx.TensorProto()
                with open(w, "rb") as f:
                    t.ParseFromString(f.read())
                np.save(g, numpy_helper.to_array(t))
                selfcheck.append(compare(g, w, p["atol"], p["rtol"], p.get("rel_l2"))[0])
            st = "dry" if reached and all(selfcheck) else "DRY-FAIL"
            return key, {"status": st, "detail": txt.strip().splitlines()[-1][:200] if txt.strip() else "", "cmd": " ".join(a)}
        rc, secs, txt = run(a, min(60, max(5, step_end - time.time())))
        r = {"rc": rc, "secs": round(secs, 2)}
        if rc:
            r["status"], r["error"] = "FAIL (exit %d)" % rc, txt[-1200:]
            return key, r
        msgs, ok = [], True
        for g, w in files:
            try:
                good, m = compare(g, w, p["atol"], p["rtol"], p.get("rel_l2"))
            except Exception as e:  # an unreadable output is a failure, with its reason
                good, m = False, "compare: %s" % e
            ok &= good
            msgs.append(m)
        r["status"] = "ok" if ok else "MISMATCH"
        r["detail"] = "; ".join(msgs)
        return key, r

    out1 = {}
    with ThreadPoolExecutor(4) as ex:
        for key, r in ex.map(lambda p: guarded(check_one, ("%s.%s" % (p["name"], p["pipeline"]), {"status": "ERROR (driver)"}), p), progs):
            out1[key] = r
            log("outputs %-40s %s %s" % (key, r["status"], r.get("detail", r.get("error", ""))[:300]))
    # Timing, one program at a time (nothing else on the GPU).
    for p in progs:
        key = "%s.%s" % (p["name"], p["pipeline"])
        if out1[key]["status"] != "ok" or time.time() > step_end:
            continue
        rc, secs, txt = run(argv(p) + ["--bench", "20"], min(20, max(3, step_end - time.time())))
        out1[key]["bench"] = txt.strip().splitlines()[-1][:200] if rc == 0 and txt.strip() else "exit %d" % rc
    results["steps"]["outputs"] = out1

    # 2. sanitizers
    step_end = time.time() + min(CAPS["sanitizers"], left() - 190)
    san_log = []

    def sanitize(job):
        p, tool = job
        key = "%s.%s" % (p["name"], p["pipeline"])
        a = ["compute-sanitizer", "--tool", tool, "--error-exitcode", "99"]
        if tool == "memcheck":
            a += ["--leak-check", "no"]
        a += argv(p)
        if dry:
            return key, tool, {"status": "dry", "cmd": " ".join(a)}
        if time.time() > step_end - 3:
            return key, tool, {"status": "skipped (step's time cap)"}
        rc, secs, txt = run(a, min(75 if tool == "memcheck" else cfg.get("race_timeout", 60), max(3, step_end - time.time())))
        st = "clean" if rc == 0 else ("TIMEOUT" if rc == 124 else "ERRORS (exit %d)" % rc)
        san_log.append("==== %s %s: %s (%.1fs)\n%s\n" % (tool, key, st, secs, txt[-2500:]))
        return key, tool, {"status": st, "secs": round(secs, 1)}

    jobs = [(p, "memcheck") for p in progs if cfg.get("memcheck", True) and
            out1["%s.%s" % (p["name"], p["pipeline"])]["status"] in ("ok", "dry", "MISMATCH")]
    # racecheck and synccheck: Grinder's device loops, a Rammer rprogram, a Welder-fused CNN
    # (a race target names a model, for its whole pipeline, or one program as NAME.PIPELINE),
    # and the hand-planned Hopper kernels (mbarriers, tensor copies, wgmma: small programs).
    for p in progs:
        if p["ready"] and ((p["pipeline"] == "full" and p["name"] in race_targets)
                           or "%s.%s" % (p["name"], p["pipeline"]) in race_targets or "hopper" in p.get("kinds", [])):
            jobs += [(p, "racecheck"), (p, "synccheck")]
    # The slow ones first, so that the cap cuts the cheap ones.
    jobs.sort(key=lambda j: j[1] == "memcheck")
    out2 = {}
    with ThreadPoolExecutor(4) as ex:
        for key, tool, r in ex.map(lambda j: guarded(sanitize, ("%s.%s" % (j[0]["name"], j[0]["pipeline"]), j[1], {"status": "ERROR (driver)"}), j), jobs):
            out2.setdefault(key, {})[tool] = r
            log("%-9s %-40s %s" % (tool, key, r["status"]))
    results["steps"]["sanitizers"] = out2
    with open(os.path.join(out, "sanitizers.txt"), "w") as f:
        f.write("".join(san_log) if san_log else "(no sanitizer ran)\n")

    # 3. Roller's top-10 per operator, and PyTorch's time for each (bench/gpu/ops/run_ops.sh),
    # for every set of operators prepared (ops: h100's model; ops-NAME: another target file)
    sets = sorted(x for x in os.listdir(d) if x.startswith("ops") and os.path.exists(os.path.join(d, x, "manifest.json")))
    first = cfg.get("ops_first", [])   # the sets this call is for, before the others
    sets = [x for x in first if x in sets] + [x for x in sets if x not in first]
    torch_timed = set()
    r3 = {}
    if not sets:
        r3["status"] = "no ops/manifest.json"
    for i, name in enumerate(sets):
        ops = os.path.join(d, name)
        cap = max(10, min(CAPS["ops"], left() - 90) / (len(sets) - i))
        if dry:
            a = [os.path.join(ops, "plan_timer"), os.path.join(ops, "manifest.json"), os.path.join(out, name + "_dry.json"), "--dry-run"]
            env = dict(os.environ, LD_LIBRARY_PATH="/usr/local/cuda/lib64")
            rc, secs, txt = run(a, 60, cwd=ops, env=env)
            r3[name] = {"status": "dry" if rc == 0 else "DRY-FAIL (exit %d)" % rc, "tail": txt[-800:]}
            log("%s: plan_timer --dry-run: exit %d\n%s" % (name, rc, txt[-400:]))
            continue
        # PyTorch's times do not depend on our model: once per operator
        names = {o["name"] for o in json.load(open(os.path.join(ops, "manifest.json")))["ops"]}
        torch_share = 0.35 if names - torch_timed else 0.0
        torch_timed |= names
        env = dict(os.environ, TIMER_TIMEOUT=str(int(cap * 0.6)), PLAN_DEADLINE=str(int(cap * 0.45)),
                   TORCH_TIMEOUT=str(max(1, int(cap * torch_share))))
        rc, secs, txt = run(["sh", os.path.join(d, "gen", "run_ops.sh"), ops, os.path.join(out, name)], cap + 10, env=env)
        r3[name] = {"rc": rc, "secs": round(secs, 1)}
        rep = os.path.join(out, name, "ops_report.md")
        r3[name]["report"] = open(rep).read() if os.path.exists(rep) else txt[-3000:]
        log("%s: run_ops.sh exit %d in %.0fs" % (name, rc, secs))
    results["steps"]["ops"] = r3

    # 3b. per-kernel times of a few programs (Nsight Compute's gpu__time_duration per launch):
    # which kernels a pass made slower, where the whole-program times alone cannot say
    r3b = {}
    step_end = time.time() + min(CAPS["profile"], left() - 75)
    for key in cfg.get("profile", PROFILE):
        p = next((q for q in progs if "%s.%s" % (q["name"], q["pipeline"]) == key and q["ready"]), None)
        if p is None:
            r3b[key] = {"status": "no such program"}
            continue
        csv_path = os.path.join(out, "profile_%s.csv" % key)
        a = ["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", "--log-file", csv_path] + argv(p)
        if dry:
            r3b[key] = {"status": "dry", "cmd": " ".join(a)}
            continue
        if time.time() > step_end - 5:
            r3b[key] = {"status": "skipped (step's time cap)"}
            continue
        rc, secs, txt = run(a, max(5, step_end - time.time()))
        r3b[key] = {"rc": rc, "secs": round(secs, 1), "kernels": guarded(kernel_times, [], csv_path)[:12]}
        log("profile %s: exit %d in %.0fs; slowest: %s" % (key, rc, secs, "; ".join(
            "%s %.1f us x%d" % (k, us, n) for k, us, n in r3b[key]["kernels"][:4])))
    results["steps"]["profile"] = r3b

    # 3c. where issue 28's GEMM and convolutions lose (bench/gpu/diag, prepare.py --diag):
    # ncu on the QKV GEMM and its variants, convolution plans and PyTorch's kernels
    r3c = {}
    diag = os.path.join(d, "diag", "run.sh")
    if not os.path.exists(diag):
        r3c["status"] = "not prepared"
    elif dry:
        r3c["status"], r3c["cmd"] = "dry", "sh " + diag
    else:
        cap = max(10, min(CAPS["diag"], left() - 60))
        rc, secs, txt = run(["sh", diag], cap, env=dict(os.environ, OUT=out))
        r3c.update({"rc": rc, "secs": round(secs, 1), "tail": txt[-3000:]})
        log("diag: exit %d in %.0fs" % (rc, secs))
    results["steps"]["diag"] = r3c

    # 4. whole models against PyTorch (built in the background since the start)
    r4 = {}
    if builder is not None:
        try:
            builder.wait(timeout=max(1, left() - 110))
        except subprocess.TimeoutExpired:
            builder.terminate()
            log("whole models: build stopped at %.0f s; the finished ones are timed" % (time.time() - T0))
        r4["build_rc"] = builder.poll()
    budget = min(CAPS["models"], left() - 15)
    if not models:
        r4["status"] = "skipped (config: no models)"
    elif budget < 60:
        r4["status"] = "skipped: %.0f s left" % left()
    else:
        a = [sys.executable, "-u", os.path.join(d, "gen", "bench.py"), "--out", bdir, "--bin", os.path.join(d, "bin"),
             "--only", models, "--budget", str(int(budget - 10)), "--work", bwork, "--prebuilt",
             *cfg.get("models_args", [])]
        if dry:
            r4["status"], r4["cmd"] = "dry", " ".join(a)
        else:
            rc, secs, txt = run(a, budget)
            r4.update({"rc": rc, "secs": round(secs, 1), "tail": txt[-2500:]})
            for f in ("results.json", "table.md"):
                if os.path.exists(os.path.join(bdir, f)):
                    shutil.copy(os.path.join(bdir, f), os.path.join(out, "models_" + f))
            log("bench.py: exit %d in %.0fs" % (rc, secs))
    results["steps"]["models"] = r4

    # summary
    res1 = list(out1.values())
    n_ok = sum(r["status"] == "ok" for r in res1)
    lines = ["# qir on %s (commit %s, %s)" % (results["device"], results["commit"], time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
             "", "| program | outputs | bench | memcheck | racecheck | synccheck |", "|---|---|---|---|---|---|"]
    for key in sorted(out1):
        r, s = out1[key], out2.get(key, {})
        lines.append("| %s | %s | %s | %s | %s | %s |" % (key, r["status"], r.get("bench", "-"), s.get("memcheck", {}).get("status", "-"),
                                                        s.get("racecheck", {}).get("status", "-"), s.get("synccheck", {}).get("status", "-")))
    lines += ["", "outputs right: %d of %d programs (build failures: %d)" % (n_ok, len(res1), len(results["build_failures"]))]
    for name in sorted(r3):
        if isinstance(r3[name], dict) and r3[name].get("report"):
            lines += ["", "## %s" % name, r3[name]["report"]]
    for key, r in sorted(r3b.items()):
        if r.get("kernels"):
            lines += ["", "profile %s (ncu, per kernel: total us over its launches):" % key]
            lines += ["  %-40s %9.1f us  x%d" % (k, us, n) for k, us, n in r["kernels"][:6]]
    if r3c.get("tail"):
        lines += ["", "## diag (bench/gpu/diag)", r3c["tail"][-2500:]]
    if os.path.exists(os.path.join(out, "models_table.md")):
        lines += ["", open(os.path.join(out, "models_table.md")).read()]
    lines.append("device call: %.0f s" % (time.time() - T0))
    summary = "\n".join(lines)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(summary + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out, "log.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")
    with tarfile.open(os.path.join(final, "results.tar.gz"), "w:gz") as tf:
        tf.add(out, arcname="results")
    for f in ("summary.md", "log.txt"):
        shutil.copy(os.path.join(out, f), os.path.join(final, f))
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
