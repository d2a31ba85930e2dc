#!/usr/bin/env python3
"""Fuzzes -welder's sibling step (tools/qopt/welder_siblings.c).

    QIR_BIN=build/asan/bin python3 test/robustness/fuzz-siblings.py [--cases N] [--seed S]

Each case is a random module: an A operand (batched or not) read by 2 to 4
matmuls with random output widths (2-D or batched B operands), bias adds on
all or some of them, and random readers of each result: the module output
itself, an elementwise op, a transpose, or an attention-like product with
another sibling's result and a softmax.  Odd cases are convs instead: an
input read by 2 to 4 convs of one kernel shape and stride (now and then one
with another kernel shape, stride, or group 2), ReLU on most, each result
read by the output, a 3x3 conv, a max pool or a sigmoid; mostly the
branches alike in extent end in a concat, as in an Inception module.  The module goes through
`qopt -canonicalize -roller -welder` (which merges the siblings where its
model says so), then the C back end under the race, bounds and barrier
checker (`qcodegen -c -check`), and its outputs must equal qrun's on the
unmerged module (the oracle).  Ends with `N passed, N failed` and how many
cases merged; exit 1 on any failure."""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.abspath(os.environ.get("QIR_BIN", os.path.join(TOP, "build", "bin")))


def run(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=300)

def gen(rng):
    L = []; outs = []; ins = []
    batched = rng.random() < 0.3
    M = rng.choice([8, 16, 32]); K = rng.choice([16, 32, 64])
    pre = [3] if batched else [2]
    A = pre + [M, K]
    L.append(f'  %x = input {{name = "x"}} : f32[{",".join(map(str, A))}]'); ins.append("x")
    n = rng.randint(2, 4)
    Ns = [rng.choice([8, 16, 24, 32]) for _ in range(n)]
    bias = rng.random() < 0.6
    vals = []
    for i in range(n):
        wsh = (pre + [K, Ns[i]]) if batched else [K, Ns[i]]
        L.append(f'  %w{i} = input {{name = "w{i}"}} : f32[{",".join(map(str, wsh))}]'); ins.append(f"w{i}")
        if bias:
            L.append(f'  %b{i} = input {{name = "b{i}"}} : f32[{Ns[i]}]'); ins.append(f"b{i}")
    for i in range(n):
        sh = pre + [M, Ns[i]]
        t = f'f32[{",".join(map(str, sh))}]'
        L.append(f'  %m{i} = matmul %x, %w{i} : {t}')
        v = f'%m{i}'
        if bias and rng.random() < 0.9:
            L.append(f'  %a{i} = add %m{i}, %b{i} : {t}'); v = f'%a{i}'
        vals.append((v, sh))
    k = 0
    for i, (v, sh) in enumerate(vals):
        r = rng.random()
        t = f'f32[{",".join(map(str, sh))}]'
        if r < 0.25:
            outs.append(v)
        elif r < 0.45:
            L.append(f'  %r{k} = relu {v} : {t}'); outs.append(f'%r{k}')
        elif r < 0.65:
            tsh = sh[:-2] + [sh[-1], sh[-2]]
            L.append(f'  %r{k} = transpose {v} {{perm = [0, 2, 1]}} : f32[{",".join(map(str, tsh))}]'); outs.append(f'%r{k}')
        else:
            j = rng.randrange(len(vals)); v2, sh2 = vals[j]
            tsh = sh2[:-2] + [sh2[-1], sh2[-2]]
            L.append(f'  %t{k} = transpose {v2} {{perm = [0, 2, 1]}} : f32[{",".join(map(str, tsh))}]')
            ssh = sh[:-2] + [sh[-2], sh2[-2]]
            # v [.., M, N_i] x t [.., N_j, M] needs N_i == N_j
            if sh[-1] == sh2[-1]:
                L.append(f'  %s{k} = matmul {v}, %t{k} : f32[{",".join(map(str, ssh))}]')
                L.append(f'  %r{k} = softmax %s{k} {{axis = 2}} : f32[{",".join(map(str, ssh))}]')
                outs.append(f'%r{k}')
            else:
                outs.append(f'%t{k}')
        k += 1
    body = "module @fz {\n" + "\n".join(L) + "\n" + "\n".join(f'  output {o} {{name = "o{i}"}}' for i, o in enumerate(outs)) + "\n}\n"
    return body, ins, len(outs)


def gen_conv(rng):
    L = []; outs = []; ins = []
    C = rng.choice([16, 32, 64]); H = rng.choice([8, 14, 28])
    L.append(f'  %x = input {{name = "x"}} : f32[1,{C},{H},{H}]'); ins.append("x")
    n = rng.randint(2, 4)
    k, pad, stride = rng.choice([(1, 0, 1), (1, 0, 1), (3, 1, 1), (3, 1, 2)])
    vals = []
    for i in range(n):
        O = rng.choice([4, 8, 12, 16])
        ki, pi, si, g = k, pad, stride, 1
        r = rng.random()
        if r < 0.1:
            ki, pi = (3, 1) if k == 1 else (1, 0)      # another kernel shape
        elif r < 0.2:
            si = 2 if stride == 1 else 1               # another stride
        elif r < 0.3 and O % 2 == 0 and C % 2 == 0:
            g = 2                                      # grouped
        oh = (H + 2 * pi - ki) // si + 1
        L.append(f'  %w{i} = input {{name = "w{i}"}} : f32[{O},{C // g},{ki},{ki}]'); ins.append(f"w{i}")
        L.append(f'  %b{i} = input {{name = "b{i}"}} : f32[{O}]'); ins.append(f"b{i}")
        t = f'f32[1,{O},{oh},{oh}]'
        attrs = f'{{group = {g}, pads = [{pi}, {pi}, {pi}, {pi}], strides = [{si}, {si}]}}'
        L.append(f'  %c{i} = conv %x, %w{i}, %b{i} {attrs} : {t}')
        v = f'%c{i}'
        if rng.random() < 0.8:
            L.append(f'  %e{i} = relu %c{i} : {t}'); v = f'%e{i}'
        vals.append((v, O, oh))
    for i, (v, O, oh) in enumerate(vals):
        r = rng.random()
        if r < 0.3:
            outs.append((v, O, oh))
        elif r < 0.6:
            L.append(f'  %v{i} = input {{name = "v{i}"}} : f32[8,{O},3,3]'); ins.append(f"v{i}")
            L.append(f'  %z{i} = input {{name = "z{i}"}} : f32[8]'); ins.append(f"z{i}")
            L.append(f'  %d{i} = conv {v}, %v{i}, %z{i} {{pads = [1, 1, 1, 1]}} : f32[1,8,{oh},{oh}]')
            L.append(f'  %r{i} = relu %d{i} : f32[1,8,{oh},{oh}]'); outs.append((f'%r{i}', 8, oh))
        elif r < 0.8:
            ph = (oh - 1) // 2 + 1
            L.append(f'  %r{i} = max_pool {v} {{kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}} : f32[1,{O},{ph},{ph}]')
            outs.append((f'%r{i}', O, ph))
        else:
            L.append(f'  %r{i} = sigmoid {v} : f32[1,{O},{oh},{oh}]'); outs.append((f'%r{i}', O, oh))
    if rng.random() < 0.7:   # as an Inception module ends: a concat of the branches alike in extent
        joined = []
        for h in sorted(set(o[2] for o in outs)):
            same = [o for o in outs if o[2] == h]
            if len(same) > 1:
                L.append(f'  %j{h} = concat {", ".join(o[0] for o in same)} {{axis = 1}} : f32[1,{sum(o[1] for o in same)},{h},{h}]')
                joined.append((f'%j{h}', 0, h))
            else:
                joined += same
        outs = joined
    outs = [o[0] for o in outs]
    body = "module @fz {\n" + "\n".join(L) + "\n" + "\n".join(f'  output {o} {{name = "o{i}"}}' for i, o in enumerate(outs)) + "\n}\n"
    return body, ins, len(outs)


def check(c, d):
    rng = random.Random(c)
    body, ins, no = (gen_conv if c % 2 else gen)(rng)
    open(f"{d}/m.qir", "w").write(body)
    r = run(f"{BIN}/qopt -canonicalize -roller -welder {d}/m.qir -o {d}/w.qir")
    if r.returncode:
        return f"qopt: {r.stderr[:400]}", False
    merged = "_siblings" in open(f"{d}/w.qir").read()
    r = run(f"{BIN}/qcodegen -c -check -main {d}/w.qir -o {d}/w.c && cc -O0 -o {d}/w.exe {d}/w.c -lm")
    if r.returncode:
        return f"qcodegen/cc: {r.stderr[:400]}", merged
    r = run(f"rm -rf {d}/in && mkdir {d}/in && {BIN}/qrun {d}/m.qir --save-inputs {d}/in")
    if r.returncode:
        return f"qrun: {r.stderr[:400]}", merged
    ia = " ".join(f"--in {n}={d}/in/{n}.npy" for n in ins)
    oa = " ".join(f"--out o{i}={d}/o{i}.npy" for i in range(no))
    ea = " ".join(f"--expect o{i}={d}/o{i}.npy" for i in range(no))
    r = run(f"{d}/w.exe {ia} {oa}")
    if r.returncode or r.stderr.strip():
        return f"run: {r.stderr[:400]}", merged
    r = run(f"{BIN}/qrun {d}/m.qir {ia} --atol 1e-4 {ea}")
    if r.returncode:
        return f"numbers: {r.stdout[:400]}", merged
    return None, merged


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    passed = failed = merged = 0
    tmp = tempfile.mkdtemp(prefix="fuzz-siblings.")
    try:
        for c in range(a.seed, a.seed + a.cases):
            d = os.path.join(tmp, str(c))
            os.makedirs(d)
            why, m = check(c, d)
            merged += m
            if why:
                failed += 1
                print(f"FAIL: case {c}: {why}")
                print(open(f"{d}/m.qir").read())
            else:
                passed += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{merged} of {a.cases} cases merged siblings")
    print(f"{passed} passed, {failed} failed, 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
