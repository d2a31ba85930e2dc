#!/usr/bin/env python3
"""bench/gpu/bench.py: qir on a GPU against PyTorch, in one run (see run.sh).

Builds the models in PyTorch with random weights (seeded), exports each to
ONNX, compiles it with our pipeline (onnx2qir | qopt | qcodegen -cuda, then
nvcc into a shared library) in worker processes while the main process times
PyTorch, checks every output of ours against PyTorch eager, then times ours
against eager and torch.compile (default and CUDA-graph mode), and single
operators (BERT matmuls in f32 and two in f16, which run on the tensor
cores on both sides, ResNet-50 convolutions) against torch.matmul and
F.conv2d.  TF32 is off on both sides.  Times are CUDA-event times of one
forward pass, after warm-up, median of many runs, inputs rotating over three
sets.  Peak device memory: PyTorch's allocator peak for eager, the device
memory our model holds (cudaMemGetInfo before/after) for ours.

The whole run keeps to a time budget (--budget, seconds): what no longer fits
is reported as skipped, never silently dropped.  Results: OUT/results.json,
OUT/table.md; the log is what run.sh tees into OUT/log.txt.

--cpu-dry-run (for a machine without a GPU): builds, exports and compiles
everything (nvcc included when present) and times nothing, to check the
script itself.
"""
import argparse
import ctypes
import inspect
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, wait

try:
    import torch
    import torch.nn as nn
except ImportError:
    sys.exit("bench.py: needs PyTorch (python3 -c 'import torch' fails)")

T0 = time.time()
SEED = 1234
N_INPUT_SETS = 3           # inputs rotate over this many sets
TOL = 2e-3                 # max |ours - torch| / max |torch| to pass


def log(msg):
    print("[%6.1fs] %s" % (time.time() - T0, msg), flush=True)


# ---------------------------------------------------------------- what we run

# name -> (kind, batch, description).  kind picks the builder below.
MODELS = [
    ("bert_b1", "bert", 1, "BERT-base encoder, seq 128"),
    ("resnet50_b1", "resnet50", 1, "ResNet-50"),
    ("mobilenetv2_b1", "mobilenetv2", 1, "MobileNetV2"),
    ("vit_b16_b1", "vit", 1, "ViT-B/16"),
    ("lstm_b1", "lstm", 1, "LSTM, 100 steps, hidden 256"),
    ("seq2seq_b1", "seq2seq", 1, "Seq2Seq GRU decoder loop, 16 steps, hidden 256"),
    ("bert_b64", "bert", 64, "BERT-base encoder, seq 128"),
    ("resnet50_b64", "resnet50", 64, "ResNet-50"),
    ("mobilenetv2_b64", "mobilenetv2", 64, "MobileNetV2"),
    ("vit_b16_b64", "vit", 64, "ViT-B/16"),
]

# Relative build cost (export + nvcc), to start the longest first.
BUILD_COST = {"bert": 10, "vit": 9, "resnet50": 8, "mobilenetv2": 6, "seq2seq": 2, "lstm": 2}

# Single operators: name -> (kind, params)
OPS = [
    ("bert_qkv_b1", "matmul", (128, 768, 768)),
    ("bert_ffn1_b1", "matmul", (128, 768, 3072)),
    ("bert_ffn2_b1", "matmul", (128, 3072, 768)),
    ("bert_qkv_b64", "matmul", (8192, 768, 768)),
    ("bert_ffn1_b64", "matmul", (8192, 768, 3072)),
    ("bert_ffn2_b64", "matmul", (8192, 3072, 768)),
    # f16 in and out (tensor cores: our wmma kernels, cuBLAS through torch)
    ("bert_qkv_b1_f16", "matmul_f16", (128, 768, 768)),
    ("bert_ffn1_b64_f16", "matmul_f16", (8192, 768, 3072)),
    # (batch, cin, cout, kernel, stride, hw)
    ("r50_conv1_b1", "conv", (1, 3, 64, 7, 2, 224)),
    ("r50_l1_3x3_b1", "conv", (1, 64, 64, 3, 1, 56)),
    ("r50_l1_1x1_b1", "conv", (1, 64, 256, 1, 1, 56)),
    ("r50_l2_3x3_b1", "conv", (1, 128, 128, 3, 1, 28)),
    ("r50_l3_3x3_b1", "conv", (1, 256, 256, 3, 1, 14)),
    ("r50_l4_3x3_b1", "conv", (1, 512, 512, 3, 1, 7)),
    ("r50_l1_3x3_b64", "conv", (64, 64, 64, 3, 1, 56)),
    ("r50_l3_3x3_b64", "conv", (64, 256, 256, 3, 1, 14)),
]


def spec(name):
    for n, kind, batch, desc in MODELS:
        if n == name:
            return {"name": n, "kind": kind, "batch": batch, "desc": desc, "op": False}
    for n, kind, params in OPS:
        if n == name:
            return {"name": n, "kind": kind, "params": params, "op": True,
                    "desc": describe_op(kind, params)}
    raise KeyError(name)


def describe_op(kind, p):
    if kind in ("matmul", "matmul_f16"):
        return "matmul%s [%d,%d]x[%d,%d]" % (" f16" if kind == "matmul_f16" else "", p[0], p[1], p[1], p[2])
    b, cin, cout, k, s, hw = p
    return "conv %dx%d/%d %d->%d @%dx%d, batch %d" % (k, k, s, cin, cout, hw, hw, b)


# ---------------------------------------------------------------- builders

class Encoder(nn.Module):
    """BERT-base encoder (transformers, random weights); last hidden state."""

    def __init__(self):
        super().__init__()
        from transformers import BertConfig, BertModel
        try:
            cfg = BertConfig(attn_implementation="eager")
        except TypeError:
            cfg = BertConfig()
        try:
            cfg._attn_implementation = "eager"   # plain matmul/softmax attention, as ONNX gets it
        except AttributeError:
            pass
        self.vocab = cfg.vocab_size
        self.bert = BertModel(cfg, add_pooling_layer=False)

    def forward(self, input_ids):
        return self.bert(input_ids=input_ids).last_hidden_state


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(256, 256)

    def forward(self, x):
        y, _ = self.lstm(x)
        return y


class Seq2SeqDecoder(nn.Module):
    """Greedy decoder loop: embedding -> GRU cell -> projection -> argmax, the
    token fed back.  Scripted for export so the loop stays an ONNX Loop.  The
    GRU cell is written out (ONNX has no GRU-cell op) and the logits of every
    step are accumulated into a fixed-shape tensor, so every shape is static."""

    def __init__(self, vocab: int = 1000, hidden: int = 256, steps: int = 16):
        super().__init__()
        self.steps = steps
        self.hidden = hidden
        self.emb = nn.Embedding(vocab, hidden)
        self.ih = nn.Linear(hidden, 3 * hidden)
        self.hh = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, vocab)
        self.register_buffer("step_ids", torch.arange(steps).view(steps, 1, 1).float())
        self.register_buffer("zeros", torch.zeros(steps, 1, vocab))

    def forward(self, h, tok):
        acc = self.zeros
        # The trip count from a buffer's shape: a constant one gets unrolled.
        for i in range(self.zeros.size(0)):
            gi = self.ih(self.emb(tok))
            gh = self.hh(h)
            i_r, i_z, i_n = torch.chunk(gi, 3, dim=1)
            h_r, h_z, h_n = torch.chunk(gh, 3, dim=1)
            r = torch.sigmoid(i_r + h_r)
            z = torch.sigmoid(i_z + h_z)
            n = torch.tanh(i_n + r * h_n)
            h = (1.0 - z) * n + z * h
            logits = self.out(h)
            tok = torch.argmax(logits, dim=1)
            acc = acc + (self.step_ids == float(i)).float() * logits.unsqueeze(0)
        return acc


class MatMul(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(k, n) / k ** 0.5)

    def forward(self, x):
        return torch.matmul(x, self.w)


class Conv(nn.Module):
    def __init__(self, cin, cout, ks, stride):
        super().__init__()
        self.stride, self.pad = stride, ks // 2
        self.w = nn.Parameter(torch.randn(cout, cin, ks, ks) / (cin * ks * ks) ** 0.5)

    def forward(self, x):
        return torch.nn.functional.conv2d(x, self.w, stride=self.stride, padding=self.pad)


def build(sp):
    """(module, input_names, output_names, make_inputs(gen, device) -> tuple);
    the weights depend only on SEED, so every process builds the same model."""
    torch.manual_seed(SEED)
    kind = sp["kind"]
    b = sp.get("batch", 1)
    if kind == "bert":
        m = Encoder()
        return m, ["input_ids"], ["hidden"], lambda g, dev: (
            torch.randint(0, m.vocab, (b, 128), generator=g).to(dev),)
    if kind in ("resnet50", "mobilenetv2", "vit"):
        import torchvision
        ctor = {"resnet50": torchvision.models.resnet50, "mobilenetv2": torchvision.models.mobilenet_v2,
                "vit": torchvision.models.vit_b_16}[kind]
        return ctor(), ["image"], ["logits"], lambda g, dev: (torch.randn(b, 3, 224, 224, generator=g).to(dev),)
    if kind == "lstm":
        return Lstm(), ["x"], ["y"], lambda g, dev: (torch.randn(100, 1, 256, generator=g).to(dev),)
    if kind == "seq2seq":
        return Seq2SeqDecoder(), ["h0", "tok0"], ["logits"], lambda g, dev: (
            torch.randn(1, 256, generator=g).to(dev), torch.randint(0, 1000, (1,), generator=g).to(dev))
    if kind == "matmul":
        mm, k, n = sp["params"]
        return MatMul(k, n), ["x"], ["y"], lambda g, dev: (torch.randn(mm, k, generator=g).to(dev),)
    if kind == "matmul_f16":
        mm, k, n = sp["params"]
        return MatMul(k, n).half(), ["x"], ["y"], lambda g, dev: (torch.randn(mm, k, generator=g).half().to(dev),)
    if kind == "conv":
        bb, cin, cout, ks, st, hw = sp["params"]
        return Conv(cin, cout, ks, st), ["x"], ["y"], lambda g, dev: (
            torch.randn(bb, cin, hw, hw, generator=g).to(dev),)
    raise ValueError(kind)


def export_onnx(module, inputs, path, in_names, out_names, script=False):
    kw = dict(opset_version=17, input_names=in_names, output_names=out_names, do_constant_folding=True)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False   # the TorchScript exporter: keeps Loop, static shapes
    target = torch.jit.script(module) if script else module
    # nn.MultiheadAttention's inference fast path (eval + no grad) is one fused
    # op ONNX cannot express: keep autograd on and the fast path off.
    mha = getattr(getattr(torch.backends, "mha", None), "set_fastpath_enabled", None)
    if mha:
        mha(False)
    with torch.enable_grad():
        torch.onnx.export(target, tuple(inputs), path, **kw)


# ---------------------------------------------------------------- our pipeline

def run_tool(cmd, cwd, what, timeout=300):
    t0 = time.time()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    dt = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError("%s failed (%s): %s" % (what, " ".join(cmd), (p.stderr or p.stdout).strip()[-2000:]))
    return dt


def available_passes(qopt, wanted):
    try:
        out = subprocess.run([qopt, "-print-passes"], capture_output=True, text=True).stdout
    except OSError:
        return []
    listed = {l.split()[0].lstrip("-") for l in out.splitlines() if l.startswith("-")}
    return [p for p in wanted if p in listed]


def gencode(arch):
    """nvcc's target: Hopper (sm_90) builds for sm_90a, where qcodegen's wgmma kernels assemble."""
    a = arch + "a" if arch == "sm_90" else arch
    return "-gencode=arch=compute_%s,code=%s" % (a[3:], a)


def prepare(name, work_dir, bindir, passes, arch, threads):
    """Worker process: build + export (on the CPU: the GPU stays free) + our
    pipeline + nvcc.  Returns a dict; errors are reported, not raised."""
    torch.set_num_threads(threads)
    res = {"name": name, "times": {}}
    sp = spec(name)
    wd = os.path.join(work_dir, name)
    os.makedirs(wd, exist_ok=True)
    try:
        t0 = time.time()
        module, in_names, out_names, make_inputs = build(sp)
        module.eval()
        g = torch.Generator().manual_seed(SEED)
        inputs = make_inputs(g, "cpu")
        onnx_path = os.path.join(wd, "model.onnx")
        export_onnx(module, inputs, onnx_path, in_names, out_names, script=sp["kind"] == "seq2seq")
        res["times"]["export_s"] = time.time() - t0
        del module
        t = {}
        t["onnx2qir"] = run_tool([os.path.join(bindir, "onnx2qir"), "model.onnx", "-o", "m.qir"], wd, "onnx2qir")
        cmd = [os.path.join(bindir, "qopt")] + ["-" + p for p in passes] + ["m.qir", "-o", "m.opt.qir"]
        t["qopt"] = run_tool(cmd, wd, "qopt")
        t["qcodegen"] = run_tool([os.path.join(bindir, "qcodegen"), "-cuda", "m.opt.qir", "-o", "m.cu"], wd,
                                 "qcodegen -cuda")
        res["times"].update({k + "_s": v for k, v in t.items()})
        # the sidecar the optimised module reads: qopt's new one where a pass wrote weights
        # (Welder's merged siblings), else onnx2qir's
        weights = [f for f in ("m.opt.qw", "m.qw") if os.path.exists(os.path.join(wd, f))]
        res["weights"] = os.path.join(wd, weights[0]) if weights else None
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        if os.path.exists(nvcc):
            res["times"]["nvcc_s"] = run_tool(
                [nvcc, "-O3", "-std=c++17", gencode(arch), "-Xcompiler", "-fPIC", "-shared",
                 "-o", "libm.so", "m.cu"], wd, "nvcc", timeout=600)
            res["lib"] = os.path.join(wd, "libm.so")
        else:
            res["error"] = "nvcc not found"
    except Exception as e:   # reported per model; the run goes on
        res["error"] = str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__
        res["trace"] = traceback.format_exc()
    return res


def start_builds(names, work_dir, bindir, passes, arch, jobs):
    """Export + our pipeline + nvcc for every name, in spawned worker processes
    (a CUDA context cannot survive fork), longest first."""
    import multiprocessing as mp
    jobs = max(1, jobs)
    threads = max(1, (os.cpu_count() or 2) // jobs)
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"))
    # Longest builds first (nvcc on a large generated file is the long pole).
    order = sorted(names, key=lambda n: -BUILD_COST.get(spec(n)["kind"], 0))
    futures = {pool.submit(prepare, n, work_dir, bindir, passes, arch, threads): n for n in order}
    log("preparing %d models/ops in %d worker processes" % (len(names), jobs))
    return pool, futures


def finish_builds(pool, futures, timeout):
    """{name: prepare()'s dict} for the builds done within timeout; the rest are cancelled."""
    done, not_done = wait(futures, timeout=timeout)
    for fut in not_done:
        fut.cancel()
    pool.shutdown(wait=False, cancel_futures=True)
    return {futures[fut]: build_result(fut) for fut in done}


def build_result(fut):
    """prepare()'s dict of a finished build, or the worker's death as its error."""
    try:
        return fut.result()
    except Exception as e:
        return {"error": "worker died: %s" % e}


def build_only(args, bindir, work_dir, deadline):
    """--build-only: the builds alone, for sm_90 (the device's arch, not asked of CUDA,
    so that this process never touches the GPU).  WORK/prepared.json is rewritten as
    each build ends, so that a caller that stops this early keeps the finished ones."""
    from concurrent.futures import as_completed, TimeoutError as FutTimeout
    names = [n for n in filter(None, args.only.split(","))] or [n for n, *_ in MODELS]
    passes = available_passes(os.path.join(bindir, "qopt"), args.passes.split(","))
    pool, futures = start_builds(names, work_dir, bindir, passes, "sm_90", args.jobs)
    built, path = {}, os.path.join(work_dir, "prepared.json")
    try:
        for fut in as_completed(futures, timeout=max(0.0, deadline - time.time())):
            n = futures[fut]
            built[n] = build_result(fut)
            log("%-16s %s" % (n, built[n].get("error") or "built: " + ", ".join(
                "%s %.1f" % kv for kv in built[n].get("times", {}).items())))
            if built[n].get("trace"):   # the tool's own message (nvcc's error lines), whole
                log(built[n]["trace"][-4000:])
            with open(path + ".tmp", "w") as f:
                json.dump(built, f, indent=1)
            os.replace(path + ".tmp", path)
    except FutTimeout:
        log("build budget spent: %s not built" % ", ".join(sorted(set(names) - set(built))))
    pool.shutdown(wait=False, cancel_futures=True)
    return 0


def load_prepared(work_dir, names):
    path = os.path.join(work_dir, "prepared.json")
    built = json.load(open(path)) if os.path.exists(path) else {}
    return {n: p for n, p in built.items() if n in names}


class OurModel:
    """ctypes face of the generated host API (see qcodegen's header comment):
       int qir_init(qir_model **, const char *weights); int qir_run(qir_model *,
       const void *const *in, void *const *out); void qir_free(qir_model *).
       qir_run takes host pointers; qir_run_device (when the generated file
       has it) takes device pointers and does no copies: that is what we time."""

    def __init__(self, lib_path, weights):
        self.lib = ctypes.CDLL(lib_path)
        self.model = ctypes.c_void_p()
        self.lib.qir_init.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        self.lib.qir_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        self.device_api = hasattr(self.lib, "qir_run_device")
        if self.device_api:
            self.lib.qir_run_device.argtypes = self.lib.qir_run.argtypes
        rc = self.lib.qir_init(ctypes.byref(self.model), weights.encode() if weights else None)
        if rc != 0:
            raise RuntimeError("qir_init failed (%d)" % rc)

    @staticmethod
    def _ptrs(tensors):
        arr = (ctypes.c_void_p * len(tensors))()
        for i, t in enumerate(tensors):
            arr[i] = t.data_ptr()
        return arr

    def run(self, inputs, outputs, device=True):
        """inputs/outputs: contiguous torch tensors, on the device when the
        device API is used, else on the host (pinned)."""
        fn = self.lib.qir_run_device if device and self.device_api else self.lib.qir_run
        rc = fn(self.model, self._ptrs(inputs), self._ptrs(outputs))
        if rc != 0:
            raise RuntimeError("qir_run failed (%d)" % rc)

    def free(self):
        if self.model:
            self.lib.qir_free(self.model)
            self.model = ctypes.c_void_p()


# ---------------------------------------------------------------- timing

def cuda_time(fn, n_sets, warmup, max_iters, max_s):
    """Median ms of fn(i) (i rotating over n_sets input sets) by CUDA events."""
    for i in range(warmup):
        fn(i % n_sets)
    torch.cuda.synchronize()
    times = []
    t_end = time.time() + max_s
    for i in range(max_iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(i % n_sets)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
        if len(times) >= 10 and time.time() > t_end:
            break
    return statistics.median(times), len(times)


def rel_err(got, ref):
    got, ref = got.float().cpu(), ref.float().cpu()
    if got.shape != ref.shape:
        return float("inf"), "shape %s != %s" % (tuple(got.shape), tuple(ref.shape))
    scale = ref.abs().max().item() or 1.0
    e = (got - ref).abs().max().item() / scale
    return e, None


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bin", required=True, help="directory with onnx2qir, qopt, qcodegen")
    ap.add_argument("--work", default="", help="where models and generated code go (default: a temporary "
                    "folder, removed at the end; OUT only gets the log and tables)")
    ap.add_argument("--budget", type=float, default=540, help="seconds for the whole run (default 540)")
    ap.add_argument("--passes", default="canonicalize,roller,welder,rammer,grinder",
                    help="qopt passes to run when qopt has them (comma list)")
    ap.add_argument("--only", default="", help="comma list of model/op names (default: all)")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 2), help="worker processes for export+nvcc")
    ap.add_argument("--cpu-dry-run", action="store_true", help="no GPU: build, export, compile; time nothing")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--build-only", action="store_true",
                    help="only export and compile (into --work, for sm_90; no GPU use), then write "
                    "WORK/prepared.json and stop: started first, alongside other GPU work")
    ap.add_argument("--prebuilt", action="store_true",
                    help="take the builds from --work's prepared.json (a --build-only run) instead of building")
    args = ap.parse_args()
    if (args.build_only or args.prebuilt) and not args.work:
        ap.error("--build-only and --prebuilt need --work")
    deadline = T0 + args.budget
    left = lambda: deadline - time.time()
    os.makedirs(args.out, exist_ok=True)
    bindir = os.path.abspath(args.bin)
    import tempfile
    work_dir = args.work or tempfile.mkdtemp(prefix="qir-gpu-bench.")
    os.makedirs(work_dir, exist_ok=True)

    dry = args.cpu_dry_run
    if args.build_only:
        return build_only(args, bindir, work_dir, deadline)
    if not dry and not torch.cuda.is_available():
        log("ERROR: no CUDA device visible to PyTorch (use --cpu-dry-run to check the script without one)")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True       # cuDNN's best algorithm: the fair baseline
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cpu" if dry else "cuda")
    if dry:
        arch, gpu = "sm_90", "none (cpu dry run)"
    else:
        cc = torch.cuda.get_device_capability()
        arch, gpu = "sm_%d%d" % cc, torch.cuda.get_device_name()
    env = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "gpu": gpu, "arch": arch, "torch": torch.__version__,
           "cuda": getattr(torch.version, "cuda", None), "python": platform.python_version(),
           "host": platform.node(), "commit": os.environ.get("QIR_COMMIT", "unknown"),
           "command": " ".join(sys.argv)}
    try:
        env["nvcc"] = subprocess.run([shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc", "--version"],
                                     capture_output=True, text=True).stdout.strip().splitlines()[-1]
    except OSError:
        env["nvcc"] = None
    log("environment: " + json.dumps(env))
    passes = available_passes(os.path.join(bindir, "qopt"), args.passes.split(","))
    log("qopt passes: " + (" ".join("-" + p for p in passes) or "(none)"))

    only = set(filter(None, args.only.split(",")))
    names = [n for n, *_ in MODELS] + [n for n, *_ in OPS]
    if only:
        unknown = only - set(names)
        if unknown:
            log("ERROR: unknown names: " + ", ".join(sorted(unknown)))
            return 2
        names = [n for n in names if n in only]

    results = {n: dict(spec(n)) for n in names}
    for n in names:
        results[n].pop("params", None)
    try:
        # 1. workers: export + our pipeline + nvcc, for everything, in parallel
        # (spawned: a CUDA context cannot survive fork).  Nothing is timed while
        # they run, so their CPU load cannot distort a measurement.
        if args.prebuilt:
            pool, futures = None, {}
            log("builds from %s" % os.path.join(work_dir, "prepared.json"))
        else:
            pool, futures = start_builds(names, work_dir, bindir, passes, arch, args.jobs)

        # 2. meanwhile: every PyTorch model on the device, its reference output and
        # eager peak memory (one run each; no timing yet).
        live = {}
        for n in names:
            r = results[n]
            try:
                module, _, _, make_inputs = build(spec(n))
                module.eval().to(dev)
                g = torch.Generator().manual_seed(SEED)
                sets = [make_inputs(g, dev) for _ in range(N_INPUT_SETS)]
                with torch.no_grad():
                    if not dry:
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                    ref = module(*sets[0])
                    if not dry:
                        torch.cuda.synchronize()
                        r["eager_peak_mb"] = torch.cuda.max_memory_allocated() / 2 ** 20
                live[n] = {"module": module, "sets": sets, "ref": [ref] if torch.is_tensor(ref) else list(ref)}
            except Exception as e:
                r["eager_note"] = "error: %s" % (str(e).strip().splitlines() or [type(e).__name__])[-1][:200]
                log("%-16s PyTorch model FAILED: %s" % (n, traceback.format_exc()))
        log("PyTorch references ready for %d of %d" % (len(live), len(names)))

        # Wait for the workers, keeping time for the measurements.
        if args.prebuilt:
            built = load_prepared(work_dir, names)
        else:
            built = finish_builds(pool, futures, max(0.0, left() - (60 if dry else 200)))
        prepared = {}
        for n in names:
            prep = built.get(n)
            r = results[n]
            if prep is None:
                r["ours_note"] = "skipped: build did not finish within the time budget"
                continue
            r["compile_times"] = prep.get("times", {})
            if prep.get("error"):
                r["ours_note"] = prep["error"]
                log("%-16s ours FAILED to build: %s" % (n, prep["error"]))
                if prep.get("trace"):
                    log(prep["trace"])
            else:
                prepared[n] = prep
                log("%-16s built: %s" % (n, ", ".join("%s %.1f" % kv for kv in r["compile_times"].items())))
        if dry:
            for n in prepared:
                results[n]["ours_note"] = "built (dry run)"

        # 3. timing, one model at a time: eager, then ours (checked first).
        for n in names if not dry else []:
            r = results[n]
            if n not in live:
                continue
            if left() < 30:
                r["eager_note"] = "skipped: time budget"
                continue
            L = live[n]
            module, sets = L["module"], L["sets"]
            with torch.no_grad():
                r["eager_ms"], r["eager_iters"] = cuda_time(lambda i: module(*sets[i]), N_INPUT_SETS, 5, 200, 1.5)
            log("%-16s eager %.3f ms" % (n, r["eager_ms"]))
            if n not in prepared:
                continue
            ours = None
            try:
                outs_dev = [torch.empty_like(t) for t in L["ref"]]
                torch.cuda.synchronize()
                free0 = torch.cuda.mem_get_info()[0]
                ours = OurModel(prepared[n]["lib"], prepared[n].get("weights"))
                if ours.device_api:
                    ins = [[t.contiguous() for t in s] for s in sets]
                    outs = outs_dev
                else:
                    ins = [[t.contiguous().cpu().pin_memory() for t in s] for s in sets]
                    outs = [t.cpu().pin_memory() for t in outs_dev]
                run = lambda i: ours.run(ins[i], outs, device=ours.device_api)
                run(0)
                torch.cuda.synchronize()
                r["ours_mem_mb"] = (free0 - torch.cuda.mem_get_info()[0]) / 2 ** 20
                errs = []
                for got, ref in zip(outs, L["ref"]):
                    e, why = rel_err(got, ref)
                    errs.append(e)
                    if why:
                        r["ours_note"] = why
                r["max_rel_err"] = max(errs)
                r["check"] = "ok" if r["max_rel_err"] <= TOL else "MISMATCH"
                r["ours_ms"], r["ours_iters"] = cuda_time(run, N_INPUT_SETS, 5, 200, 1.5)
                r["ours_timing"] = "device pointers" if ours.device_api else "host pointers (incl. H2D/D2H copies)"
                log("%-16s ours %.3f ms, check %s (max rel err %.2e)" % (n, r["ours_ms"], r["check"], r["max_rel_err"]))
            except Exception as e:
                r["ours_note"] = "error: %s" % (str(e).strip().splitlines() or [type(e).__name__])[-1][:200]
                log("%-16s ours FAILED: %s" % (n, traceback.format_exc()))
            finally:
                if ours:
                    ours.free()

        # 4. torch.compile, default and CUDA graphs, models only, while time is left
        # (batch 1 first: that is where launch overhead and CUDA graphs matter).
        if not dry and not args.no_compile:
            for n in names:
                r = results[n]
                if n not in live or r.get("op"):
                    continue
                L = live[n]
                for mode, key in ((None, "compile_ms"), ("reduce-overhead", "cudagraph_ms")):
                    if left() < 45:
                        r[key + "_note"] = "skipped: time budget"
                        continue
                    try:
                        torch._dynamo.reset()
                        t0 = time.time()
                        cm = torch.compile(L["module"], mode=mode)
                        mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)

                        def step(i, cm=cm, mode=mode):
                            if mode == "reduce-overhead" and mark:
                                mark()
                            return cm(*L["sets"][i])
                        with torch.no_grad():
                            step(0)
                            torch.cuda.synchronize()
                            r[key.replace("_ms", "_compile_s")] = time.time() - t0
                            r[key], _ = cuda_time(step, N_INPUT_SETS, 5, 200, 1.5)
                        log("%-16s torch.compile(%s) %.3f ms (compiled in %.0f s)" % (
                            n, mode or "default", r[key], r[key.replace("_ms", "_compile_s")]))
                    except Exception as e:
                        r[key + "_note"] = "error: %s" % (str(e).strip().splitlines() or [type(e).__name__])[-1][:200]
                        log("%-16s torch.compile(%s) FAILED: %s" % (n, mode or "default", traceback.format_exc()))
    except KeyboardInterrupt:
        log("interrupted (time limit): printing what was measured")

    # 5. the table, last.
    table = render_table(env, results, names)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"env": env, "results": results}, f, indent=1, default=str)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    print()
    print(table, flush=True)
    if not args.work:
        shutil.rmtree(work_dir, ignore_errors=True)
    bad = [n for n in names if results[n].get("check") == "MISMATCH"]
    return 1 if bad else 0


def fmt(v, f="%.3f"):
    return "-" if v is None else f % v


def render_table(env, results, names):
    lines = ["qir GPU benchmark, %s, %s (%s), torch %s, CUDA %s, commit %s" % (
        env["date"], env["gpu"], env["arch"], env["torch"], env["cuda"], env["commit"]),
        "command: %s" % env["command"], "",
        "| model | batch | check (max rel err) | ours ms | eager ms | compile ms | compile+cudagraphs ms "
        "| eager/ours | best torch/ours | ours MiB | eager MiB |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in names:
        r = results[n]
        if r.get("op"):
            continue
        ours = r.get("ours_ms")
        torch_best = min([v for v in (r.get("eager_ms"), r.get("compile_ms"), r.get("cudagraph_ms")) if v] or [None]) \
            if any(r.get(k) for k in ("eager_ms", "compile_ms", "cudagraph_ms")) else None
        check = "%s (%.1e)" % (r["check"], r["max_rel_err"]) if "check" in r else (r.get("ours_note") or "-")
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["kind"], r["batch"], check, fmt(ours), fmt(r.get("eager_ms")), fmt(r.get("compile_ms")),
            fmt(r.get("cudagraph_ms")),
            fmt(r["eager_ms"] / ours, "%.2fx") if ours and r.get("eager_ms") else "-",
            fmt(torch_best / ours, "%.2fx") if ours and torch_best else "-",
            fmt(r.get("ours_mem_mb"), "%.0f"), fmt(r.get("eager_peak_mb"), "%.0f")))
    ops = [n for n in names if results[n].get("op")]
    if ops:
        lines += ["", "| operator | check (max rel err) | ours us | torch us | torch/ours |", "|---|---|---:|---:|---:|"]
        for n in ops:
            r = results[n]
            ours, ref = r.get("ours_ms"), r.get("eager_ms")
            check = "%s (%.1e)" % (r["check"], r["max_rel_err"]) if "check" in r else (r.get("ours_note") or "-")
            lines.append("| %s | %s | %s | %s | %s |" % (
                r["desc"], check, fmt(ours * 1e3 if ours else None, "%.1f"), fmt(ref * 1e3 if ref else None, "%.1f"),
                fmt(ref / ours, "%.2fx") if ours and ref else "-"))
    notes = sorted({results[n].get("ours_timing") for n in names if results[n].get("ours_timing")})
    lines += ["", "Times: CUDA events around one forward pass, median after 5 warm-up runs, inputs rotating over "
              "%d sets; TF32 off on both sides; cudnn.benchmark on. Ours timed with %s." % (
                  N_INPUT_SETS, " / ".join(notes) or "-"),
              "Memory: eager = PyTorch allocator peak (weights, inputs, activations); ours = device memory our "
              "model holds after qir_init and one run (cudaMemGetInfo delta).",
              "check: max |ours - eager| / max |eager| <= %g." % TOL]
    skipped = ["%s: %s" % (n, v) for n in names for k, v in results[n].items() if k.endswith("_note")
               and isinstance(v, str) and v.startswith("skipped")]
    if skipped:
        lines += ["Skipped: " + "; ".join(skipped)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    os._exit(rc)   # do not wait for build workers the time limit cut short
