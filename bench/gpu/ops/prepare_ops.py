#!/usr/bin/env python3
"""Prepare issue 23 step 3 ("Roller against the device") off the device.

    prepare_ops.py OUTDIR [-j N] [--ops a,b]

Writes about twenty single-operator modules drawn from BERT-base (seq 128),
ResNet-50 and MobileNetV2 shapes, runs `qopt -lower -canonicalize -roller
-roller-topk=10 -target=h100` on each, and makes one module per ranked plan:
plan 0 keeps `#tile`, plan k moves the k-th entry of `#tile_alternatives` into
`#tile` (an op of a multi-compute module with fewer alternatives keeps its
`#tile`), alternatives removed. Each plan becomes CUDA (`qcodegen -cuda`); all the
plans of one op are compiled into one shared library OUTDIR/<op>/op.so, plan k's API
renamed qir_p<k>_init, qir_p<k>_run_stream, ... (nvcc's time is mostly the CUDA
headers: once per op instead of once per plan). Where that fails, each plan is compiled
alone into op_plan<k>.so, so that the failing plans are the ones recorded as failed.
A plan that fails to generate or compile is recorded as failed in the manifest.

OUTDIR/manifest.json describes every op and plan (read by torch_ops.py and
report_ops.py); OUTDIR/manifest.txt is the same in lines for plan_timer.
OUTDIR/plan_timer is the device driver (plan_timer.cu), built here.
Environment: QIR_BIN (default build/bin), NVCC (default /usr/local/cuda/bin/nvcc).
Plain python3 (no numpy).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NVCC_FLAGS = ["-O3", "-shared", "-Xcompiler", "-fPIC",
              "-gencode", "arch=compute_90a,code=sm_90a", "-cudart", "shared"]
QOPT_PASSES = ["-lower", "-canonicalize", "-roller", "-roller-topk=10", "-target=h100"]


def tensor(dtype, dims):
    return {"dtype": dtype, "dims": list(dims)}


def ty(t):
    return "%s[%s]" % (t["dtype"], ",".join(str(d) for d in t["dims"]))


def nelem(t):
    n = 1
    for d in t["dims"]:
        n *= d
    return n


BYTES = {"f32": 4, "f16": 2, "bf16": 2}


def matmul_op(name, M, K, N, dtype):
    x, w, y = tensor(dtype, [M, K]), tensor(dtype, [K, N]), tensor(dtype, [M, N])
    if dtype == "f32":
        body = "sum(%x[i, r] * %w[r, j])"
    else:  # f16/bf16 operands, f32 accumulation, a result of their type (as bench/ops/ops-f16.qir)
        body = "sum(f32(%x[i, r]) * f32(%w[r, j]))"
    text = "  %%y = compute [i:%d, j:%d] reduce [r:%d] %s : %s\n" % (M, N, K, body, ty(y))
    return dict(name=name, dtype=dtype, inputs=[("x", x), ("w", w)], outputs=[("y", y)],
                body=text, flops=2 * M * N * K,
                torch={"kind": "matmul"})


def conv_op(name, dtype, N, C, H, W, M, k, stride, pad, groups=1):
    OH = (H + 2 * pad - k) // stride + 1
    OW = (W + 2 * pad - k) // stride + 1
    cg = C // groups
    x = tensor(dtype, [N, C, H, W])
    w = tensor(dtype, [M, cg, k, k])
    y = tensor(dtype, [N, M, OH, OW])
    hi = "h * %d + s - %d" % (stride, pad) if stride != 1 else "h + s - %d" % pad
    wi = "w * %d + t - %d" % (stride, pad) if stride != 1 else "w + t - %d" % pad
    hi = hi.replace(" - 0", "")
    wi = wi.replace(" - 0", "")
    if groups == 1:
        cidx = "c"
    else:  # output channel o reads input channels (o / (M/groups)) * cg + c
        cidx = "o / %d * %d + c" % (M // groups, cg) if cg > 1 or M != groups else "o"
    red = "c:%d, s:%d, t:%d" % (cg, k, k) if cg > 1 else "s:%d, t:%d" % (k, k)
    widx = "o, c, s, t" if cg > 1 else "o, 0, s, t"
    xr = "%%x[n, %s, %s, %s]" % (cidx, hi, wi)
    wr = "%%w[%s]" % widx
    prod = "%s * %s" % (xr, wr) if dtype == "f32" else "f32(%s) * f32(%s)" % (xr, wr)
    if pad:
        guard = "%s >= 0 && %s < %d && (%s >= 0 && %s < %d)" % (hi, hi, H, wi, wi, W)
        expr = "select(%s, %s, 0.0)" % (guard, prod)
    else:
        expr = prod
    text = "  %%y = compute [n:%d, o:%d, h:%d, w:%d] reduce [%s] sum(%s) : %s\n" % (
        N, M, OH, OW, red, expr, ty(y))
    return dict(name=name, dtype=dtype, inputs=[("x", x), ("w", w)], outputs=[("y", y)],
                body=text, flops=2 * N * M * OH * OW * cg * k * k,
                torch={"kind": "conv2d", "stride": stride, "pad": pad, "groups": groups})


def attention_op(name, dtype, B, H, HK, S, T, D, causal):
    """One `attention` op (H query heads on HK kv heads, S queries, T keys, head size D)
    against PyTorch's scaled_dot_product_attention."""
    q, k, y = tensor(dtype, [B, H, S, D]), tensor(dtype, [B, HK, T, D]), tensor(dtype, [B, H, S, D])
    scale = 1.0 / D ** 0.5
    visible = S * T - (S * (S - 1) // 2 if causal else 0)
    return dict(name=name, dtype=dtype, inputs=[("q", q), ("k", k), ("v", k)], outputs=[("y", y)],
                body="  %%z = const dense<0> : %s[]\n  %%y = attention %%q, %%k, %%v, %%z {%sscale = %r} : %s\n"
                     % (dtype, "causal = 1, " if causal else "", scale, ty(y)),
                flops=4 * B * H * D * visible, torch={"kind": "sdpa", "causal": causal, "scale": scale},
                lower=False)   # -lower would write it out as five computes: Roller's flash plans are the subject


def hopper_ops():
    """Issue 28's GPU goals: BERT-base's GEMMs at batch 64 (seq 128: M = 8192; QKV merged as
    Welder merges it) in f16 and bf16, ResNet-50's stride-1 3x3 convolutions at batch 32
    in f16, against cuBLAS/cuDNN, and two attentions against PyTorch's."""
    ops = []
    for dt in ("f16", "bf16"):
        for name, K, N in (("qkv", 768, 2304), ("proj", 768, 768), ("ffn1", 768, 3072), ("ffn2", 3072, 768)):
            ops.append(matmul_op("b64_%s_%s" % (name, dt), 8192, K, N, dt))
    for C, H in ((64, 56), (128, 28), (256, 14), (512, 7)):
        ops.append(conv_op("b32_conv3x3_%d_f16" % C, "f16", 32, C, H, H, C, 3, 1, 1))
    # attention's contractions on wgmma (P from registers): BERT-base's at batch 64 and a
    # long causal prefill with head size 128, against PyTorch's flash backend
    ops.append(attention_op("attn_b64_s128_f16", "f16", 64, 12, 12, 128, 128, 64, False))
    ops.append(attention_op("attn_causal_s4096_d128_bf16", "bf16", 2, 16, 16, 4096, 4096, 128, True))
    return ops


def ops_table(which="default"):
    if which == "hopper":
        ops = hopper_ops()
        for op in ops:
            op["min_bytes"] = sum(nelem(t) * BYTES[t["dtype"]] for _, t in op["inputs"] + op["outputs"])
        return ops
    ops = []
    for dt in ("f32", "f16"):
        ops.append(matmul_op("mm_qkv_%s" % dt, 128, 768, 768, dt))
        ops.append(matmul_op("mm_ffn1_%s" % dt, 128, 768, 3072, dt))
        ops.append(matmul_op("mm_ffn2_%s" % dt, 128, 3072, 768, dt))
        ops.append(matmul_op("mm_big_%s" % dt, 4096, 768, 3072, dt))
    # ResNet-50 (batch 1, NCHW) and MobileNetV2's depthwise 3x3.
    ops.append(conv_op("conv1x1_64to256_f32", "f32", 1, 64, 56, 56, 256, 1, 1, 0))
    ops.append(conv_op("conv3x3_64_f32", "f32", 1, 64, 56, 56, 64, 3, 1, 1))
    ops.append(conv_op("conv3x3s2_128_f32", "f32", 1, 128, 56, 56, 128, 3, 2, 1))
    ops.append(conv_op("conv7x7s2_stem_f32", "f32", 1, 3, 224, 224, 64, 7, 2, 3))
    ops.append(conv_op("dwconv3x3_144_f32", "f32", 1, 144, 56, 56, 144, 3, 1, 1, groups=144))
    ops.append(conv_op("conv3x3_64_b8_f16", "f16", 8, 64, 56, 56, 64, 3, 1, 1))
    # Reductions, softmax, layer norm, an elementwise chain (BERT-base shapes).
    x = tensor("f32", [128, 768])
    ops.append(dict(name="rowsum_f32", dtype="f32", inputs=[("x", x)],
                    outputs=[("y", tensor("f32", [128]))],
                    body="  %y = compute [i:128] reduce [r:768] sum(%x[i, r]) : f32[128]\n",
                    flops=128 * 768, torch={"kind": "sum", "dim": 1}))
    xb = tensor("f32", [16384, 1024])
    ops.append(dict(name="colsum_f32", dtype="f32", inputs=[("x", xb)],
                    outputs=[("y", tensor("f32", [1024]))],
                    body="  %y = compute [j:1024] reduce [r:16384] sum(%x[r, j]) : f32[1024]\n",
                    flops=16384 * 1024, torch={"kind": "sum", "dim": 0}))
    xs = tensor("f32", [12, 128, 128])
    ops.append(dict(name="softmax_f32", dtype="f32", inputs=[("x", xs)],
                    outputs=[("y", xs)],
                    body="  %y = softmax %x {axis = 2} : f32[12,128,128]\n",
                    flops=5 * nelem(xs), torch={"kind": "softmax", "dim": -1}))
    ops.append(dict(name="rowmean_f32", dtype="f32", inputs=[("x", x)],
                    outputs=[("y", tensor("f32", [128, 1]))],
                    body="  %y = reduce_mean %x {axes = [1], keepdims = 1} : f32[128,1]\n",
                    flops=128 * 768, torch={"kind": "mean", "dim": -1}))
    g, b = tensor("f32", [768]), tensor("f32", [768])
    ops.append(dict(name="layernorm_f32", dtype="f32", inputs=[("x", x), ("g", g), ("b", b)],
                    outputs=[("y", x)],
                    body="  %y = layer_norm %x, %g, %b {axis = 1, epsilon = 1e-05} : f32[128,768]\n",
                    flops=8 * nelem(x), torch={"kind": "layer_norm", "eps": 1e-5}))
    xe, we, be = tensor("f32", [128, 3072]), tensor("f32", [3072]), tensor("f32", [3072])
    t = "(%x[i, j] * %w[j] + %b[j])"
    ops.append(dict(name="ew_gelu_f32", dtype="f32", inputs=[("x", xe), ("w", we), ("b", be)],
                    outputs=[("y", xe)],
                    body="  %%y = compute [i:128, j:3072] (%s * 0.5 * (1.0 + erf(%s * 0.7071067811865476))) : f32[128,3072]\n" % (t, t),
                    flops=10 * nelem(xe), torch={"kind": "mul_add_gelu"}))
    ops.append(dict(name="ew_relu_f32", dtype="f32", inputs=[("x", xe), ("w", we), ("b", be)],
                    outputs=[("y", xe)],
                    body="  %%y = compute [i:128, j:3072] (max(%s, 0.0)) : f32[128,3072]\n" % t,
                    flops=3 * nelem(xe), torch={"kind": "mul_add_relu"}))
    # Attention (issue 27): causal prefill at S = 2048 and a decode step over a 4096-key
    # cache with 32 query heads on 8 kv heads, f16, against scaled_dot_product_attention.
    ops.append(attention_op("attn_causal_s2048_f16", "f16", 1, 16, 16, 2048, 2048, 64, True))
    ops.append(attention_op("attn_decode_t4096_f16", "f16", 1, 32, 8, 1, 4096, 128, False))
    for op in ops:
        op["min_bytes"] = sum(nelem(t) * BYTES[t["dtype"]] for _, t in op["inputs"] + op["outputs"])
    return ops


def module_text(op):
    lines = ["module @%s {\n" % op["name"]]
    for n, t in op["inputs"]:
        lines.append('  %%%s = input {name = "%s"} : %s\n' % (n, n, ty(t)))
    lines.append(op["body"])
    for n, _ in op["outputs"]:
        lines.append('  output %%%s {name = "%s"}\n' % (n, n))
    lines.append("}\n")
    return "".join(lines)


def balanced_end(s, i):
    """Index just past the bracket group that opens at s[i] ('{' or '[')."""
    depth = 0
    instr = False
    while i < len(s):
        c = s[i]
        if instr:
            if c == "\\":
                i += 1
            elif c == '"':
                instr = False
        elif c == '"':
            instr = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced brackets")


def split_top(s):
    """The top-level {...} groups of a '[{...}, {...}]' list."""
    out, i = [], 1
    while i < len(s):
        if s[i] == "{":
            j = balanced_end(s, i)
            out.append(s[i:j])
            i = j
        else:
            i += 1
    return out


def op_plans(line):
    """For a line carrying #tile: (prefix, [ranked plan dicts as text], suffix)."""
    m = line.find("#tile{")
    if m < 0:
        return None
    te = balanced_end(line, m + 5)
    tile = line[m + 5:te]
    rest = line[te:]
    alts = []
    am = rest.find("#tile_alternatives=[")
    if am >= 0:
        a0 = am + len("#tile_alternatives=")
        ae = balanced_end(rest, a0)
        alts = split_top(rest[a0:ae])
        rest = rest[:am].rstrip() + rest[ae:]
    return line[:m], [tile] + alts, rest


EST_RE = re.compile(r"est_us = ([0-9.eE+-]+)")
PERSISTENT_RE = re.compile(r"persistent = [0-9]+, ")


def plan_modules(text):
    """Per plan index k: (module text, [tile text per tiled op], est_us sum)."""
    lines = text.splitlines(True)
    parsed = [op_plans(l) for l in lines]
    nplans = max([len(p[1]) for p in parsed if p] or [0])
    out = []
    for k in range(nplans):
        body, tiles, est = [], [], 0.0
        for l, p in zip(lines, parsed):
            if not p:
                body.append(l)
                continue
            pre, plans, rest = p
            t = plans[k] if k < len(plans) else plans[0]
            tiles.append(t)
            m = EST_RE.search(t)
            est += float(m.group(1)) if m else float("nan")
            body.append(pre + "#tile" + t + rest)
        out.append(("".join(body), tiles, est))
    return out


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, **kw)


API = ("qir_init", "qir_run_stream", "qir_run_device", "qir_run", "qir_free",
       "qir_output_rows", "qir_check_input", "qir_output_shape", "qir_set_input_shape")
DEFINE_RE = re.compile(r"^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)


def symbol_prefix(k):
    """plan k's API in the op's merged library: qir_p<k>_init, qir_p<k>_run_stream, ..."""
    return "qir_p%d_" % k


def merged_source(cus):
    """One translation unit holding every plan: qcodegen's headers once, then each plan's
    code in its own namespace with its API renamed (qir_init -> qir_p<k>_init) and its
    macros undefined after it. nvcc then parses the CUDA headers once per op instead of
    once per plan (they are most of the compile time)."""
    head, parts = None, []
    for k, text in cus:
        lines = text.splitlines(True)
        # The leading block of #include lines goes to the top, the rest stays in the plan's namespace.
        i0 = next(i for i, l in enumerate(lines) if l.startswith("#include"))
        i1 = i0
        while i1 < len(lines) and lines[i1].startswith("#include"):
            i1 += 1
        inc = "".join(lines[i0:i1])
        if head is None:
            head = inc
        elif inc != head:  # a plan needing other headers: include them too, before all code
            head += "".join(l for l in inc.splitlines(True) if l not in head)
        # a later #include (the tensor-map headers of Hopper's kernels) goes to the top as well:
        # inside a plan's namespace its types would be that plan's, and the next plan's include
        # guard would leave them undefined there
        rest = lines[:i0] + lines[i1:]
        for l in rest:
            if l.startswith("#include") and l not in head:
                head += l
        body = "".join(l for l in rest if not l.startswith("#include"))
        for name in API:
            body = re.sub(r"\b%s\b" % name, symbol_prefix(k) + name[len("qir_"):], body)
        undef = "".join("#undef %s\n" % m for m in sorted(set(DEFINE_RE.findall(body))))
        parts.append("namespace qplan%d {\n%s\n}  // namespace qplan%d\n%s" % (k, body, k, undef))
    return head + "".join(parts)


def gen_plan(qbin, opdir, k, module):
    """qcodegen -cuda for one plan: (status, error text, .cu path)."""
    qir = os.path.join(opdir, "op_plan%d.qir" % k)
    cu = os.path.join(opdir, "op_plan%d.cu" % k)
    with open(qir, "w") as f:
        f.write(module)
    r = run([os.path.join(qbin, "qcodegen"), "-cuda", qir, "-o", cu])
    if r.returncode != 0:
        return "gen_failed", (r.stderr or r.stdout).strip()[-2000:], cu
    return "ok", "", cu


def nvcc_so(nvcc, cu, so):
    r = run([nvcc] + NVCC_FLAGS + [cu, "-o", so])
    if r.returncode != 0:
        return (r.stderr or r.stdout).strip()[-2000:] or "nvcc failed"
    return ""


def build_op(qbin, nvcc, entry, opdir, modules):
    """Generates every plan of one op and compiles them into OUTDIR/<op>/op.so; when that
    fails, each plan on its own (op_plan<k>.so) so that the failing plans are named."""
    gens = [gen_plan(qbin, opdir, k, m) for k, m in enumerate(modules)]
    good = [(k, cu) for k, (st, _, cu) in enumerate(gens) if st == "ok"]
    for k, (st, err, _) in enumerate(gens):
        if st != "ok":
            entry["plans"][k].update(status=st, error=err, so="")
    if not good:
        return
    merged = os.path.join(opdir, "op.cu")
    with open(merged, "w") as f:
        f.write(merged_source([(k, open(cu).read()) for k, cu in good]))
    err = nvcc_so(nvcc, merged, os.path.join(opdir, "op.so"))
    if not err:
        for k, cu in good:
            entry["plans"][k].update(status="ok", so="%s/op.so" % entry["name"],
                                     symbol_prefix=symbol_prefix(k))
            os.remove(cu)
        os.remove(merged)
        return
    entry["merged_error"] = err
    for k, cu in good:
        so = os.path.join(opdir, "op_plan%d.so" % k)
        # The plan alone, its API renamed as in the merged library.
        single = os.path.join(opdir, "op_plan%d.single.cu" % k)
        with open(single, "w") as f:
            f.write(merged_source([(k, open(cu).read())]))
        e = nvcc_so(nvcc, single, so)
        if e:
            entry["plans"][k].update(status="compile_failed", error=e, so="")
        else:
            entry["plans"][k].update(status="ok", so="%s/op_plan%d.so" % (entry["name"], k),
                                     symbol_prefix=symbol_prefix(k))
            os.remove(cu)
            os.remove(single)


def build_driver(nvcc, outdir):
    """Compiles plan_timer.cu into OUTDIR/plan_timer; returns the error text or ''."""
    r = run([nvcc, "-O2", "-std=c++17", "-cudart", "shared", "-gencode", "arch=compute_90a,code=sm_90a",
             "-Xlinker", "-rpath=/usr/local/cuda/lib64",
             os.path.join(HERE, "plan_timer.cu"), "-o", os.path.join(outdir, "plan_timer"), "-ldl"])
    if r.returncode != 0:
        print("plan_timer.cu failed to compile:\n" + r.stderr, file=sys.stderr)
        return r.stderr[-2000:] or "nvcc failed"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("outdir")
    ap.add_argument("-j", type=int, default=2, help="parallel nvcc jobs (default 2)")
    ap.add_argument("--ops", default="", help="only these ops (comma-separated)")
    ap.add_argument("--driver-only", action="store_true", help="only rebuild OUTDIR/plan_timer")
    ap.add_argument("--target-file", default="", help="plan with this device model (qopt -target-file) instead of h100's")
    ap.add_argument("--target", default="h100", help="plan for this built-in target (default h100)")
    ap.add_argument("--set", default="default", choices=("default", "hopper"),
                    help="the operators: default (issue 23's 23) or hopper (issue 28's batch-64 GEMMs, batch-32 3x3 convolutions)")
    ap.add_argument("--ab-persistent", action="store_true",
                    help="where plan 0 has persistent blocks, add it once more without them (the last plan)")
    args = ap.parse_args()
    t0 = time.time()
    qbin = os.environ.get("QIR_BIN", "build/bin")
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    outdir = args.outdir
    os.makedirs(outdir, exist_ok=True)
    if args.driver_only:
        return 1 if build_driver(nvcc, outdir) else 0
    ops = ops_table(args.set)
    if args.ops:
        want = set(args.ops.split(","))
        ops = [o for o in ops if o["name"] in want]
    jobs = []  # (manifest entry, op folder, plan modules)
    passes = [a if a != "-target=h100" else "-target=" + args.target for a in QOPT_PASSES]
    target = args.target
    if args.target_file:
        target = os.path.abspath(args.target_file)
        passes = [a if not a.startswith("-target=") else "-target-file=" + target for a in passes]
        shutil.copy(target, os.path.join(outdir, "model.target"))
    manifest = {"target": target, "qopt": " ".join(passes),
                "nvcc": " ".join([nvcc] + NVCC_FLAGS), "ops": []}
    for op in ops:
        opdir = os.path.join(outdir, op["name"])
        if os.path.isdir(opdir):
            shutil.rmtree(opdir)
        os.makedirs(opdir)
        src = os.path.join(opdir, "op.qir")
        with open(src, "w") as f:
            f.write(module_text(op))
        entry = {"name": op["name"], "dtype": op["dtype"],
                 "inputs": [dict(name=n, **t) for n, t in op["inputs"]],
                 "outputs": [dict(name=n, **t) for n, t in op["outputs"]],
                 "flops": op["flops"], "min_bytes": op["min_bytes"],
                 "torch": op["torch"], "plans": [], "error": ""}
        manifest["ops"].append(entry)
        op_passes = [a for a in passes if op.get("lower", True) or a != "-lower"]
        entry["qopt"] = " ".join(op_passes)
        r = run([os.path.join(qbin, "qopt")] + op_passes + [src])
        if r.returncode != 0:
            entry["error"] = "qopt failed: " + r.stderr.strip()[-2000:]
            print("%s: qopt failed:\n%s" % (op["name"], r.stderr), file=sys.stderr)
            continue
        with open(os.path.join(opdir, "op.roller.qir"), "w") as f:
            f.write(r.stdout)
        plans = plan_modules(r.stdout)
        if args.ab_persistent and plans and PERSISTENT_RE.search(plans[0][0]):
            # one more plan: the first without persistent blocks (a block a tile), for an A/B in one run
            plans.append((PERSISTENT_RE.sub("", plans[0][0]), [PERSISTENT_RE.sub("", t) for t in plans[0][1]], plans[0][2]))
        if not plans:
            entry["error"] = "no #tile after -roller"
            print("%s: no #tile after -roller" % op["name"], file=sys.stderr)
            continue
        for k, (mod, tiles, est) in enumerate(plans):
            entry["plans"].append({"index": k, "est_us": round(est, 4), "tile": tiles,
                                   "so": "", "symbol_prefix": "",
                                   "status": "pending", "error": ""})
        jobs.append((entry, opdir, [m for m, _, _ in plans]))
    # Big ops first, so that the two workers end together.
    jobs.sort(key=lambda j: -len(j[2][0]))
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as ex:
        futs = {ex.submit(build_op, qbin, nvcc, entry, opdir, mods): entry
                for entry, opdir, mods in jobs}
        for fut in concurrent.futures.as_completed(futs):
            entry = futs[fut]
            try:
                fut.result()
            except Exception as e:  # a tool that could not start
                for p in entry["plans"]:
                    if p["status"] == "pending":
                        p.update(status="gen_failed", error=repr(e))
            for p in entry["plans"]:
                if p["status"] != "ok":
                    print("%s plan %d: %s\n%s" % (entry["name"], p["index"], p["status"],
                                                  p["error"]), file=sys.stderr)
            print("built %s (%.0f s)" % (entry["name"], time.time() - t0), flush=True)
    err = build_driver(nvcc, outdir)
    if err:
        manifest["driver_error"] = err
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    # Lines for plan_timer: op NAME NIN NOUT NPLANS / in|out DTYPE RANK DIMS / plan K STATUS EST SO
    with open(os.path.join(outdir, "manifest.txt"), "w") as f:
        for e in manifest["ops"]:
            f.write("op %s %d %d %d\n" % (e["name"], len(e["inputs"]), len(e["outputs"]), len(e["plans"])))
            for kind in ("inputs", "outputs"):
                for t in e[kind]:
                    f.write("%s %s %d %s\n" % (kind[:-1], t["dtype"], len(t["dims"]),
                                               " ".join(str(d) for d in t["dims"])))
            for p in e["plans"]:
                f.write("plan %d %s %.4f %s %s\n" % (p["index"], p["status"], p["est_us"],
                                                   p["so"] or "-", p["symbol_prefix"] or "-"))
            f.write("end\n")
    nok = sum(1 for e in manifest["ops"] for p in e["plans"] if p["status"] == "ok")
    nall = sum(len(e["plans"]) for e in manifest["ops"])
    size = 0
    for root, _, files in os.walk(outdir):
        size += sum(os.path.getsize(os.path.join(root, n)) for n in files)
    print("%d ops, %d plans, %d ok, %d failed; OUTDIR %.1f MiB; %.0f s" % (
        len(manifest["ops"]), nall, nok, nall - nok, size / 2**20, time.time() - t0))
    for e in manifest["ops"]:
        bad = [p for p in e["plans"] if p["status"] != "ok"]
        print("  %-22s %2d plans%s%s" % (e["name"], len(e["plans"]),
                                         (", %d failed" % len(bad)) if bad else "",
                                         (" ERROR " + e["error"][:100]) if e["error"] else ""))
    return 0 if "driver_error" not in manifest else 1


if __name__ == "__main__":
    sys.exit(main())
