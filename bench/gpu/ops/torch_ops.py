#!/usr/bin/env python3
"""PyTorch (cuBLAS/cuDNN) times for the operators of prepare_ops.py, on the device.

    torch_ops.py OUTDIR/manifest.json RESULTS_TORCH.json [--dump DIR] [--ops a,b]

Shapes and the operator kinds come from the manifest's "inputs" and "torch" entries.
f32 runs with TF32 off (cuBLAS and cuDNN), f16 (bf16) in f16 (bf16) (f32 accumulation: reduced-precision
reductions off); cudnn.benchmark on; CUDA events
around each run, each run on one of 3 rotating input sets, median after a warm-up.
With --dump DIR (the folder plan_timer --dump wrote: input set 0 and plan 0's output per
op), each op is also computed in float64 from our exact inputs and plan 0's output is
compared with it (relative L2 error and max error over max|ref|): an oracle independent
of qir's code.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

TORCH_DTYPE = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
NP_DTYPE = {"f32": np.float32, "f16": np.float16}


def read_f64(path, dtype):
    """A dump of plan_timer's as float64 (numpy has no bfloat16: its bits are a float32's top half)."""
    if dtype == "bf16":
        bits = np.fromfile(path, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    return np.fromfile(path, dtype=NP_DTYPE[dtype]).astype(np.float64)
SPIN_CYCLES = 10_000_000  # about 5 ms at the H100's 1.98 GHz


def op_fn(desc):
    kind = desc["kind"]
    if kind == "matmul":
        return lambda x, w: torch.matmul(x, w)
    if kind == "conv2d":
        return lambda x, w: F.conv2d(x, w, stride=desc["stride"], padding=desc["pad"],
                                     groups=desc["groups"])
    if kind == "sum":
        return lambda x: torch.sum(x, dim=desc["dim"])
    if kind == "softmax":
        return lambda x: torch.softmax(x, dim=desc["dim"])
    if kind == "mean":
        return lambda x: torch.mean(x, dim=desc["dim"], keepdim=True)
    if kind == "layer_norm":
        return lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b, eps=desc["eps"])
    if kind == "mul_add_gelu":
        return lambda x, w, b: F.gelu(x * w + b)
    if kind == "mul_add_relu":
        return lambda x, w, b: torch.relu(x * w + b)
    if kind == "sdpa":   # PyTorch's fused attention (flash backend in f16), grouped kv heads expanded by it
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=desc["causal"], scale=desc["scale"],
                                                              enable_gqa=q.shape[1] != k.shape[1])
    raise ValueError("unknown torch kind %r" % kind)


def time_op(fn, sets, budget_s=0.3):
    for i in range(10):
        fn(*sets[i % 3])
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn(*sets[0])
    e.record()
    e.synchronize()
    one_ms = max(s.elapsed_time(e), 1e-3)
    reps = max(20, min(500, int(budget_s * 1e3 / one_ms)))
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
           for _ in range(reps)]
    # In chunks of 50 runs behind a ~5 ms spin (as plan_timer does), so that the events
    # time the GPU's work rather than the host's launch gaps.
    for r, (a, b) in enumerate(evs):
        if r % 50 == 0 and hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(SPIN_CYCLES)
        a.record()
        fn(*sets[(r + 1) % 3])
        b.record()
        if r % 50 == 49:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) * 1e3 for a, b in evs)
    n = len(ts)
    med = ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2])
    return med, ts[0], reps


def oracle(op, fn, dump):
    d = os.path.join(dump, op["name"])
    ins = []
    for i, t in enumerate(op["inputs"]):
        a = read_f64(os.path.join(d, "in%d.bin" % i), t["dtype"])
        ins.append(torch.from_numpy(a.reshape(t["dims"])).cuda())
    ref = fn(*ins).double().cpu().numpy().ravel()
    t = op["outputs"][0]
    ours = read_f64(os.path.join(d, "out0.bin"), t["dtype"])
    if ours.size != ref.size:
        return {"error": "size %d, expected %d" % (ours.size, ref.size), "ok": False}
    rel_l2 = float(np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), 1e-300))
    max_rel = float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-300))
    tol = {"f16": 1e-2, "bf16": 2e-2}.get(t["dtype"], 1e-4)
    return {"rel_l2": rel_l2, "max_rel": max_rel, "tol_rel_l2": tol,
            "ok": bool(np.isfinite(rel_l2) and rel_l2 <= tol)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("results")
    ap.add_argument("--dump", default="")
    ap.add_argument("--ops", default="")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    # f16 matmuls accumulate in f32 throughout, as ours do.
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    with open(args.manifest) as f:
        man = json.load(f)
    want = set(args.ops.split(",")) if args.ops else None
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "tf32": False, "ops": []}
    t0 = time.time()
    for op in man["ops"]:
        if want and op["name"] not in want:
            continue
        row = {"op": op["name"], "dtype": op["dtype"]}
        sets = None
        try:
            fn = op_fn(op["torch"])
            g = torch.Generator(device="cuda")
            g.manual_seed(23)
            sets = []
            for s in range(3):
                sets.append([torch.rand(t["dims"], device="cuda", generator=g,
                                        dtype=torch.float32).mul_(2).sub_(1).to(TORCH_DTYPE[t["dtype"]])
                             for t in op["inputs"]])
            with torch.no_grad():
                med, mn, reps = time_op(fn, sets)
                row.update(median_us=med, min_us=mn, reps=reps)
        except Exception as e:  # record and go on with the next op
            row["error"] = "%s: %s" % (type(e).__name__, e)
        if args.dump and os.path.exists(os.path.join(args.dump, op["name"], "out0.bin")):
            try:
                with torch.no_grad():
                    row["oracle"] = oracle(op, op_fn(op["torch"]), args.dump)
            except Exception as e:
                row["oracle"] = {"error": "%s: %s" % (type(e).__name__, e), "ok": False}
        out["ops"].append(row)
        orc = row.get("oracle")
        print("%-22s torch %s us%s%s" % (
            op["name"], "%.2f" % row["median_us"] if "median_us" in row else "-",
            ("  oracle rel_l2 %.2e %s" % (orc["rel_l2"], "ok" if orc["ok"] else "FAIL")
             if "rel_l2" in orc else "  oracle ERROR " + orc.get("error", "")) if orc else "",
            "  ERROR " + row["error"] if "error" in row else ""), flush=True)
        del sets
        torch.cuda.empty_cache()
        out["seconds"] = time.time() - t0
        with open(args.results, "w") as f:  # after every op: a crash keeps what ran
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
