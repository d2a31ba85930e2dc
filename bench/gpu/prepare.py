#!/usr/bin/env python3
"""bench/gpu/prepare.py DIR: everything the one device call of issue 23 needs,
built on this machine (no GPU): bench/gpu/run.sh --prepare DIR runs it.

DIR/
  bin/           the static tools (onnx2qir, qopt, qcodegen, qrun), stripped
  prog/NAME.P    one CUDA program per model and pipeline P (asis: a hand-planned .qir
                 of QIR_PROGRAMS, Hopper's kernels; roller: -canonicalize
                 -roller; full: ... -welder -rammer -grinder), `qcodegen -cuda -main`,
                 nvcc -O3 for sm_90a (Hopper's wgmma kernels), CUDA runtime linked statically
  prog/NAME.P.qw its weights sidecar, where the program has one (deduplicated:
                 two pipelines whose sidecars are equal share one file)
  data/NAME/     inputs (.pb) and expected outputs (.pb, from onnxruntime: the
                 shared test sets, or the oracle run here on the generated models)
  programs.json  per program: binary, its kind of kernels (rprogram, device loop,
                 Welder groups), input and output bindings, tolerances
  ops/           the Roller top-10 operators (bench/gpu/ops/prepare_ops.py)
  gen/           what the whole-model step needs (bench.py and its helpers)
  run-device.sh  the one device call (bench/gpu/device.py does the work)

Programs whose weights would not fit the carry limit (the BERT-base and ViT-B
layers: 28 MiB of random weights each) travel without them: their sidecar is
made again on the device from the same seeded generator, by the carried
tools, and the device checks that it made the same .cu (its sha256) before
it trusts the binary compiled here.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "bench"))
import onnx_inputs  # noqa: E402  (standard library only; its model_io is conformance.py's)

PIPELINES = {
    "roller": ["-canonicalize", "-roller"],
    "welder": ["-canonicalize", "-roller", "-welder"],
    "rammer": ["-canonicalize", "-roller", "-rammer"],
    "full": ["-canonicalize", "-roller", "-welder", "-rammer", "-grinder"],
    # mixed precision: f16 or bf16 operands on the matrix units, f32 accumulation (issue 26)
    "f16": ["-canonicalize", "-autocast=f16", "-roller", "-welder", "-rammer", "-grinder"],
    "bf16": ["-canonicalize", "-autocast=bf16", "-roller", "-welder", "-rammer", "-grinder"],
    # one program of plans for smaller ranges too (issue 29's -size-versions): symbolic programs only
    "versions": ["-canonicalize", "-roller", "-welder", "-rammer", "-grinder", "-size-versions"],
}
# The models each reduced-precision pipeline builds, checked by relative L2 error against
# the f32 reference.  light/ ResNet-50's random weights carry its activations past f16's
# range (65504: NaN in C as on the device, first call of 2026-11-27), so it runs in bf16.
PRECISION_MODELS = {"f16": ["bert_base", "vit_base", "ch_PP-OCRv4_det_infer"], "bf16": ["light_resnet50"],
                    # where the whole pipeline lost to -roller on the device (DenseNet-121 2.6x, SqueezeNet
                    # 1.7x, 2026-11-27/28): -welder and -rammer apart say which pass loses
                    "welder": ["light_densenet121", "light_squeezenet", "light_inception_v2"],
                    "rammer": ["light_densenet121", "light_squeezenet", "light_inception_v2"]}
PRECISION_REL_L2 = {"f16": 2e-2, "bf16": 5e-2}
# One program for every size in a range (issue 29): (program, model, onnx2qir flags,
# data sets it runs, each checked against ONNX Runtime).  test/dynamic's models with
# their refs, and PP-OCRv4 det over 32..640 x 32..640 on its own test image.
DYNAMIC = [
    ("dyn_cnn_batch", "test/dynamic/cnn_batch.onnx", ["--dim", "batch=1..16"],
     ["cnn_batch_b1", "cnn_batch_b3", "cnn_batch_b16"]),
    ("dyn_decode_step", "test/dynamic/decode_step.onnx", ["--dim", "past=1..64"],
     ["decode_step_p1", "decode_step_p5", "decode_step_p64"]),
    ("dyn_seg_hw", "test/dynamic/seg_hw.onnx", ["--dim", "height=32..640%2", "--dim", "width=32..640%2"],
     ["seg_hw_h32w32", "seg_hw_h64w96", "seg_hw_h96w64"]),
]
DYNAMIC_DET = ("dyn_ppocr_det", "ch_PP-OCRv4_det_infer", ["--shape", "x=1,3,32..640%32,32..640%32"])
# Hand-planned modules built as they are (no qopt): Hopper's wgmma kernels of issue 28, checked
# on the device against qrun's numbers (their expected outputs) before anything measures them.
QIR_PROGRAMS = [("wgmma", "test/lit/qcodegen/wgmma.qir"), ("wgmma_loads", "test/lit/qcodegen/wgmma-loads.qir")]
LIGHT = ["light_resnet50", "light_squeezenet", "light_inception_v2", "light_densenet121", "light_shufflenet"]
SYS_PY = "/usr/bin/python3"   # Debian's, with numpy and onnx (the transformer and LSTM generators)
NVCC_FLAGS = ["-O3", "-gencode", "arch=compute_90a,code=sm_90a", "-cudart", "static", "-Xcompiler", "-s"]
CACHE = os.path.join(TOP, "build", "gpu-prepare-cache", hashlib.sha256(" ".join(NVCC_FLAGS).encode()).hexdigest()[:8])
T0 = time.time()
EXE_LOCKS = {}   # binary path -> lock (setdefault is atomic under the GIL)


def log(msg):
    print("[%5.0fs] %s" % (time.time() - T0, msg), flush=True)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def cu_sha256(cu, work):
    """The .cu's hash with its folder's name taken out (paths to the sidecar and
    the module appear in messages; the device makes the file in another folder)."""
    with open(cu) as f:
        return hashlib.sha256(f.read().replace(work, "@WORK@").encode()).hexdigest()


def node_oracle(model, ds):
    """Expected outputs by onnxruntime-node (shared/onnx-tests/oracle), written as output_N.pb in ds."""
    env = dict(os.environ, NODE_PATH=os.path.join(TOP, "bench", "cpu", "node_modules"))
    run(["node", os.path.join(ONNX_TESTS, "oracle", "gen_ref.js"), model, ds], env=env)


def model_dir(work, name, model, data):
    """work/name/ with model.onnx a copy of `model` and test_data_set_0 of the files in `data`."""
    d = os.path.join(work, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    shutil.copy(model, os.path.join(d, "model.onnx"))
    for f in os.listdir(data):
        shutil.copy(os.path.join(data, f), os.path.join(d, "test_data_set_0", f))
    return d


def sources(work, want=None):
    """(name, model.onnx, data set folder, extra) for every program (those named in want, when
    given); generated models go under work, made only when wanted."""
    wanted = lambda name: not want or name in want
    out = []
    mroot = os.path.join(ONNX_TESTS, "models")
    for name in sorted(os.listdir(mroot)) if os.path.isdir(mroot) else []:
        d = os.path.join(mroot, name)
        if os.path.isfile(os.path.join(d, "model.onnx")):
            out.append((name, d, {"atol": 1e-4, "rtol": 1e-3}))
    for name in LIGHT:
        d = os.path.join(ONNX_TESTS, "light", name)
        if os.path.isfile(os.path.join(d, "model.onnx")):
            out.append((name, d, {"atol": 1e-4, "rtol": 1e-3}))
    # Transformer layers at full size (test/transformers/gen_transformers.py, seeded).
    oracle = shutil.which("node") and os.path.isdir(os.path.join(TOP, "bench", "cpu", "node_modules", "onnxruntime-node"))
    for kind in ("bert", "vit"):
        if not wanted(kind + "_base"):
            continue
        if not oracle:
            log("SKIPPED %s_base: no onnxruntime-node for its expected outputs (node, npm install in bench/cpu)" % kind)
            continue
        d = os.path.join(work, kind + "_base")
        run([SYS_PY, os.path.join(TOP, "test", "transformers", "gen_transformers.py"),
             "--kind", kind, "--size", "base", "--out", d])
        node_oracle(os.path.join(d, "model.onnx"), os.path.join(d, "test_data_set_0"))
        out.append((kind + "_base", d, {"atol": 1e-3, "rtol": 1e-3,
                                         "regen": ["gen_transformers", kind, "base"]}))
    # Grinder's device loops: an LSTM of 100 steps and a greedy decoder.
    if wanted("lstm100"):
        d = os.path.join(work, "lstm100")
        run([SYS_PY, os.path.join(TOP, "examples", "make_lstm100.py"), d])
        for f in os.listdir(os.path.join(TOP, "examples", "lstm100_data")):
            shutil.copy(os.path.join(TOP, "examples", "lstm100_data", f), os.path.join(d, "test_data_set_0", f))
        out.append(("lstm100", d, {"atol": 1e-4, "rtol": 1e-3}))
    d = model_dir(work, "greedy_decoder", os.path.join(TOP, "examples", "greedy_decoder.onnx"),
                  os.path.join(TOP, "examples", "greedy_decoder_data"))
    out.append(("greedy_decoder", d, {"atol": 1e-4, "rtol": 1e-3}))
    # Symbolic programs: one binary (extra["prog"]) per program and pipeline, one entry per size.
    for prog, model, flags, sets in DYNAMIC:
        for ref in sets:
            name = "%s@%s" % (prog, ref.rsplit("_", 1)[1])
            if not wanted(name) and not wanted(prog):
                continue
            d = model_dir(work, name, os.path.join(TOP, model), os.path.join(TOP, "test", "dynamic", "refs", ref))
            out.append((name, d, {"atol": 1e-4, "rtol": 1e-3, "flags": flags, "prog": prog}))
    # the same models built static at one size each (their shapes from the data set), the
    # baseline issue 29 measures a symbolic program against
    for prog, model, flags, sets in DYNAMIC:
        ref = sets[1]
        name = "static_%s@%s" % (prog[4:], ref.rsplit("_", 1)[1])
        if not wanted(name):
            continue
        d = model_dir(work, name, os.path.join(TOP, model), os.path.join(TOP, "test", "dynamic", "refs", ref))
        out.append((name, d, {"atol": 1e-4, "rtol": 1e-3}))
    prog, model, flags = DYNAMIC_DET
    if wanted(prog) and os.path.isdir(os.path.join(mroot, model)):
        out.append((prog + "@test", os.path.join(mroot, model), {"atol": 1e-4, "rtol": 1e-3, "flags": flags, "prog": prog}))
    return out


def kinds_of(qir_text):
    k = []
    if "rprogram" in qir_text:
        k.append("rprogram")
    if "#device{" in qir_text:
        k.append("device-loop")
    if "= kernel" in qir_text or "#group" in qir_text or "welder" in qir_text:
        k.append("welder")
    return k


def build_program(name, mdir, extra, pipe, args):
    """onnx2qir | qopt | qcodegen -cuda -main | nvcc: one program; returns its programs.json entry."""
    work = os.path.join(args.work, name, pipe)
    os.makedirs(work, exist_ok=True)
    flags = extra.get("flags") or onnx_inputs.onnx2qir_flags(mdir)
    base = os.path.join(work, "m.qir")
    run([os.path.join(BIN, "onnx2qir"), *flags, os.path.join(mdir, "model.onnx"), "-o", base])
    opt = os.path.join(work, "o.qir")
    run([os.path.join(BIN, "qopt"), *PIPELINES[pipe], "-target=h100", base, "-o", opt])
    cu = os.path.join(work, "m.cu")
    run([os.path.join(BIN, "qcodegen"), "-cuda", "-main", opt, "-o", cu])
    # the sizes of one symbolic program share its binary; nvcc is the long pole, so a binary
    # built before from the same .cu is reused
    exe = os.path.join(args.dir, "prog", "%s.%s" % (extra.get("prog", name), pipe))
    key, secs = nvcc_cached(cu, work, exe)
    qir = open(opt).read()
    entry = {"name": name, "pipeline": pipe, "exe": os.path.relpath(exe, args.dir),
             "kinds": kinds_of(qir), "cu_sha256": key, "nvcc_s": secs,
             "atol": extra["atol"], "rtol": extra["rtol"], "passes": PIPELINES[pipe]}
    if pipe in PRECISION_REL_L2:
        entry["rel_l2"] = PRECISION_REL_L2[pipe]
    # the sidecar the optimised module reads: o.qw where a pass wrote new weights
    # (-autocast's converted ones, Welder's merged siblings), else onnx2qir's m.qw
    qw = [w for w in ("o.qw", "m.qw") if os.path.exists(os.path.join(work, w))]
    entry["weights"] = None
    if qw:
        src = os.path.join(work, qw[0])
        if "regen" in extra:   # made again on the device: see the module's comment
            entry["regen"] = extra["regen"] + [pipe]
            entry["weights"] = "regen"
        else:
            h = sha256(src)[:16]
            dst = os.path.join(args.dir, "prog", "w-%s.qw" % h)
            if not os.path.exists(dst):
                shutil.copy(src, dst)
            entry["weights"] = os.path.relpath(dst, args.dir)
    # Inputs and expected outputs: the data set's .pb files, named as the program names them.
    ddir = os.path.join(args.dir, "data", name)
    os.makedirs(ddir, exist_ok=True)
    ins = []
    for iname, path, dims, dtype, bound in onnx_inputs.model_inputs(mdir):
        if bound:
            continue
        dst = os.path.join(ddir, os.path.basename(path))
        shutil.copy(path, dst)
        ins.append([iname, os.path.relpath(dst, args.dir)])
    outs = []
    onames = onnx_inputs.model_io(os.path.join(mdir, "model.onnx"))[1]
    ds = os.path.join(mdir, "test_data_set_0")
    for k, oname in enumerate(onames):
        src = os.path.join(ds, "output_%d.pb" % k)
        if os.path.exists(src):
            dst = os.path.join(ddir, "output_%d.pb" % k)
            shutil.copy(src, dst)
            outs.append([oname, os.path.relpath(dst, args.dir)])
    entry["inputs"], entry["outputs"] = ins, outs
    return entry


def nvcc_cached(cu, work, exe):
    """nvcc -o exe cu, or a binary built before from the same .cu; returns (sha256, seconds)."""
    t = time.time()
    key = cu_sha256(cu, work)
    cached = os.path.join(CACHE, key[:32])
    with EXE_LOCKS.setdefault(exe, threading.Lock()):   # one symbolic program's sizes build it once
        if os.path.exists(cached):
            shutil.copy(cached, exe)
        else:
            run([NVCC, *NVCC_FLAGS, "-o", exe, cu])
            os.makedirs(CACHE, exist_ok=True)
            shutil.copy(exe, cached + ".tmp")
            os.replace(cached + ".tmp", cached)
    return key, round(time.time() - t, 1)


def build_qir_program(name, path, args):
    """qcodegen -cuda -main on a .qir module with its own plans, inputs from qrun's generator and
    the expected outputs qrun computes (.pb); its programs.json entry (pipeline "asis")."""
    work = os.path.join(args.work, name, "asis")
    os.makedirs(work, exist_ok=True)
    qir = os.path.join(TOP, path)
    cu = os.path.join(work, "m.cu")
    run([os.path.join(BIN, "qcodegen"), "-cuda", "-main", qir, "-o", cu])
    exe = os.path.join(args.dir, "prog", name + ".asis")
    key, secs = nvcc_cached(cu, work, exe)
    ddir = os.path.join(args.dir, "data", name)
    os.makedirs(ddir, exist_ok=True)
    run([os.path.join(BIN, "qrun"), qir, "--save-inputs", ddir, "--inputs-only"])
    ins = [[f[:-4], os.path.relpath(os.path.join(ddir, f), args.dir)] for f in sorted(os.listdir(ddir)) if f.endswith(".npy")]
    text = open(qir).read()
    onames = re.findall(r'^\s*output %\w+ \{name = "(\w+)"\}', text, re.M)
    outs = [[n, os.path.relpath(os.path.join(ddir, "output_%d.pb" % k), args.dir)] for k, n in enumerate(onames)]
    cmd = [os.path.join(BIN, "qrun"), qir]
    for n, f in ins:
        cmd += ["--in", "%s=%s" % (n, os.path.join(args.dir, f))]
    for n, f in outs:
        cmd += ["--out", "%s=%s" % (n, os.path.join(args.dir, f))]
    run(cmd)
    return {"name": name, "pipeline": "asis", "exe": os.path.relpath(exe, args.dir), "kinds": ["hopper"],
            "cu_sha256": key, "nvcc_s": secs, "atol": 2e-2, "rtol": 2e-2, "passes": [], "weights": None,
            "inputs": ins, "outputs": outs}


def main():
    global BIN, NVCC, ONNX_TESTS
    ap = argparse.ArgumentParser(prog="prepare.py")
    ap.add_argument("dir")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="comma list of program names (default: all)")
    ap.add_argument("--no-ops", action="store_true", help="skip the Roller top-10 operators")
    ap.add_argument("--pipelines", default="roller,full,f16,bf16,versions,welder,rammer", help="comma list of %s (default %%(default)s; f16, bf16, welder and rammer build PRECISION_MODELS' only, versions the symbolic programs only)" % ",".join(PIPELINES))
    ap.add_argument("--ops-target-file", action="append", default=[], metavar="NAME=FILE",
                    help="also time the operators' top-10 under this device model (DIR/ops-NAME)")
    ap.add_argument("--ops-args", default="", help="prepare_ops.py's options for DIR/ops (e.g. '--set hopper --target h200')")
    ap.add_argument("--diag", default="", metavar="OPS",
                    help="also build bench/gpu/diag's programs from DIR/OPS (an operator set made with --set hopper) into DIR/diag")
    ap.add_argument("--config", default="", help="JSON merged into DIR/config.json: device.py's caps "
                    "(caps), racecheck targets (race), memcheck (bool), models step (models, models_args)")
    args = ap.parse_args()
    BIN = os.environ.get("QIR_BIN", os.path.join(TOP, "build", "static", "bin"))
    NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    ONNX_TESTS = os.environ.get("ONNX_TESTS", os.path.join(TOP, "..", "shared", "onnx-tests"))
    args.dir = os.path.abspath(args.dir)
    args.work = os.path.join(args.dir, ".work")
    for sub in ("bin", "prog", "data", "gen"):
        os.makedirs(os.path.join(args.dir, sub), exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    for t in ("onnx2qir", "qopt", "qcodegen", "qrun"):
        shutil.copy(os.path.join(BIN, t), os.path.join(args.dir, "bin", t))
        subprocess.run(["strip", os.path.join(args.dir, "bin", t)])
    log("tools from %s" % BIN)
    keep = set(args.only.split(",")) if args.only else None
    srcs = [s for s in sources(args.work, keep) if not keep or s[0] in keep or s[2].get("prog") in keep]
    jobs = [(s, p) for s in srcs for p in args.pipelines.split(",") if s[0] in PRECISION_MODELS.get(p, [s[0]])
            and (p != "versions" or s[0].startswith("dyn_"))]
    progs, failed = [], []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        fut = {ex.submit(build_program, s[0], s[1], s[2], p, args): (s[0], p) for s, p in jobs}
        for name, path in QIR_PROGRAMS:
            if not keep or name in keep:
                fut[ex.submit(build_qir_program, name, path, args)] = (name, "asis")
        for f in concurrent.futures.as_completed(fut):
            name, p = fut[f]
            try:
                e = f.result()
                progs.append(e)
                log("built %s.%s (nvcc %.0fs, kinds %s)" % (name, p, e["nvcc_s"], ",".join(e["kinds"]) or "-"))
            except Exception as err:  # a program that does not build is a finding, recorded
                failed.append({"name": name, "pipeline": p, "error": str(err)[-1500:]})
                log("FAILED %s.%s: %s" % (name, p, str(err).splitlines()[0]))
    progs.sort(key=lambda e: (e["name"], e["pipeline"]))
    # What the device needs to make the big sidecars again.
    gen = ["test/transformers/gen_transformers.py", "scripts/conformance.py", "bench/onnx_inputs.py",
           "bench/gpu/bench.py", "bench/gpu/ops/torch_ops.py", "bench/gpu/ops/report_ops.py",
           "bench/gpu/ops/run_ops.sh"]
    for f in gen:
        if os.path.exists(os.path.join(TOP, f)):
            shutil.copy(os.path.join(TOP, f), os.path.join(args.dir, "gen", os.path.basename(f)))
    with open(os.path.join(args.dir, "programs.json"), "w") as f:
        json.dump({"programs": progs, "build_failures": failed,
                   "commit": subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"],
                                            capture_output=True, text=True).stdout.strip()}, f, indent=1)
    if not args.no_ops:
        ops = os.path.join(TOP, "bench", "gpu", "ops", "prepare_ops.py")
        if os.path.exists(ops):
            log("operators: %s" % ops)
            r = subprocess.run([sys.executable, ops, os.path.join(args.dir, "ops"), *args.ops_args.split()],
                               env=dict(os.environ, QIR_BIN=BIN))
            if r.returncode:
                failed.append({"name": "ops", "pipeline": "-", "error": "prepare_ops.py exit %d" % r.returncode})
        for spec in args.ops_target_file:
            name, _, tfile = spec.partition("=")
            r = subprocess.run([sys.executable, ops, os.path.join(args.dir, "ops-" + name), "--target-file", tfile],
                               env=dict(os.environ, QIR_BIN=BIN))
            if r.returncode:
                failed.append({"name": "ops-" + name, "pipeline": "-", "error": "prepare_ops.py exit %d" % r.returncode})
    if args.diag:
        r = subprocess.run(["sh", os.path.join(TOP, "bench", "gpu", "diag", "prepare.sh"), os.path.join(args.dir, args.diag),
                            os.path.join(args.dir, "diag")], env=dict(os.environ, QIR_BIN=BIN, NVCC=NVCC))
        if r.returncode:
            failed.append({"name": "diag", "pipeline": "-", "error": "diag/prepare.sh exit %d" % r.returncode})
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        f.write(args.config or "{}")
    shutil.rmtree(args.work, ignore_errors=True)
    # One compressed payload (machine code and weights shrink to about a quarter);
    # device.py and run-device.sh stay outside it, to unpack it.
    parts = [p for p in sorted(os.listdir(args.dir)) if p in ("bin", "prog", "data", "gen", "diag", "programs.json", "config.json")
             or p.startswith("ops")]
    with tarfile.open(os.path.join(args.dir, "payload.tar.xz"), "w:xz", preset=6) as tf:   # Python's lzma: no xz tool needed
        for part in parts:
            tf.add(os.path.join(args.dir, part), arcname=part)
    for p in parts:
        q = os.path.join(args.dir, p)
        shutil.rmtree(q) if os.path.isdir(q) else os.remove(q)
    shutil.copy(os.path.join(TOP, "bench", "gpu", "device.py"), os.path.join(args.dir, "device.py"))
    with open(os.path.join(args.dir, "run-device.sh"), "w") as f:
        f.write("#!/bin/sh\n# The one device call of issue 23: sh DIR/run-device.sh OUT [--dry-run]\n"
                "# (PYTHON: an interpreter with numpy and onnx; on the device, python3 has them and torch)\n"
                "d=$(cd \"$(dirname \"$0\")\" && pwd)\n"
                "PATH=$PATH:/usr/local/cuda/bin; export PATH\n"
                "exec \"${PYTHON:-python3}\" -u \"$d/device.py\" \"$d\" \"$@\"\n")
    os.chmod(os.path.join(args.dir, "run-device.sh"), 0o755)
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(args.dir) for f in fs)
    log("%d programs built, %d failed; %s is %.1f MiB" % (len(progs), len(failed), args.dir, size / 2**20))
    return 1 if size > 60 * 2**20 else 0


if __name__ == "__main__":
    sys.exit(main())
