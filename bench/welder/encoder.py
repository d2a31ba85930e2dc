#!/usr/bin/env python3
"""Writes a transformer encoder layer as a .qir module (standard library only).

    bench/welder/encoder.py [--seq S] [--hidden H] [--heads N] [--ffn F] [--name NAME]

The layer as exporters write BERT-base (defaults: sequence 128, hidden 768, 12
heads, FFN 3072): Q, K, V projections with bias, heads split by reshape and
transpose, QK^T scaled by 1/sqrt(d) plus an additive mask, softmax, @V, heads
merged, output projection with bias, residual add and layer norm, then
matmul + bias + GELU, matmul + bias, residual add and layer norm.  Weights are
graph inputs, so qrun generates them (test material for the fusion pass and
the C back end; there is no ONNX export here: the onnx package is not
installed on the build machine)."""
import argparse

ap = argparse.ArgumentParser()
ap.add_argument("--seq", type=int, default=128)
ap.add_argument("--hidden", type=int, default=768)
ap.add_argument("--heads", type=int, default=12)
ap.add_argument("--ffn", type=int, default=3072)
ap.add_argument("--name", default="encoder")
a = ap.parse_args()
S, H, N, F = a.seq, a.hidden, a.heads, a.ffn
D = H // N
assert D * N == H


def t(*dims):
    return "f32[%s]" % ",".join(str(d) for d in dims)


out = ["module @%s {" % a.name]
ins = [("x", t(1, S, H)), ("mask", t(1, 1, 1, S))]
for w in ("q", "k", "v", "o"):
    ins += [("w" + w, t(H, H)), ("b" + w, t(H))]
ins += [("g1", t(H)), ("e1", t(H)), ("w1", t(H, F)), ("b1", t(F)), ("w2", t(F, H)), ("b2", t(H)),
        ("g2", t(H)), ("e2", t(H))]
for n, ty in ins:
    out.append('  %%%s = input {name = "%s"} : %s' % (n, n, ty))
out.append("  %%scale = const dense<%r> : f32[]" % (1.0 / D ** 0.5))
perm = {"q": [0, 2, 1, 3], "k": [0, 2, 3, 1], "v": [0, 2, 1, 3]}
for w in ("q", "k", "v"):
    out.append("  %%%sm = matmul %%x, %%w%s : %s" % (w, w, t(1, S, H)))
    out.append("  %%%sb = add %%%sm, %%b%s : %s" % (w, w, w, t(1, S, H)))
    out.append("  %%%sr = reshape %%%sb : %s" % (w, w, t(1, S, N, D)))
    p = perm[w]
    shape = [[1, S, N, D][i] for i in p]
    out.append("  %%%sh = transpose %%%sr {perm = [%s]} : %s" % (w, w, ", ".join(map(str, p)), t(*shape)))
out.append("  %%s = matmul %%qh, %%kh : %s" % t(1, N, S, S))
out.append("  %%ss = mul %%s, %%scale : %s" % t(1, N, S, S))
out.append("  %%sm = add %%ss, %%mask : %s" % t(1, N, S, S))
out.append("  %%p = softmax %%sm {axis = 3} : %s" % t(1, N, S, S))
out.append("  %%c = matmul %%p, %%vh : %s" % t(1, N, S, D))
out.append("  %%ct = transpose %%c {perm = [0, 2, 1, 3]} : %s" % t(1, S, N, D))
out.append("  %%cr = reshape %%ct : %s" % t(1, S, H))
out.append("  %%om = matmul %%cr, %%wo : %s" % t(1, S, H))
out.append("  %%ob = add %%om, %%bo : %s" % t(1, S, H))
out.append("  %%r1 = add %%ob, %%x : %s" % t(1, S, H))
out.append("  %%l1 = layer_norm %%r1, %%g1, %%e1 {axis = 2} : %s" % t(1, S, H))
out.append("  %%f1 = matmul %%l1, %%w1 : %s" % t(1, S, F))
out.append("  %%f1b = add %%f1, %%b1 : %s" % t(1, S, F))
out.append("  %%f1g = gelu %%f1b : %s" % t(1, S, F))
out.append("  %%f2 = matmul %%f1g, %%w2 : %s" % t(1, S, H))
out.append("  %%f2b = add %%f2, %%b2 : %s" % t(1, S, H))
out.append("  %%r2 = add %%f2b, %%l1 : %s" % t(1, S, H))
out.append("  %%y = layer_norm %%r2, %%g2, %%e2 {axis = 2} : %s" % t(1, S, H))
out.append('  output %y {name = "y"}')
out.append("}")
print("\n".join(out))
