#!/usr/bin/python3
"""Transformer layers as ONNX models, for tests: a BERT-base-sized encoder layer
(post-LN, additive attention mask, GELU as erf) and a ViT-B block (pre-LN, no mask).

    gen_transformers.py --kind bert|vit --size base|small [--seq N] --out DIR
        writes DIR/model.onnx, DIR/test_data_set_0/input_N.pb (ONNX Runtime's oracle
        reads them: node gen_ref.js DIR/model.onnx DIR/test_data_set_0) and the inputs
        as DIR/NAME.npy (the generated C program's --in files)
    gen_transformers.py --pb-to-npy OUT.pb OUT.npy
    gen_transformers.py --compare GOT.npy WANT.npy [--atol A] [--rtol R] [--rel-l2 E]
        |got - want| <= atol + rtol * |want| everywhere (with --rel-l2:
        ||got - want|| / ||want|| <= E), else exit status 1

Weights and inputs come from numpy's RandomState with a fixed seed (its stream
is fixed across numpy versions), so the references generated once match the
models generated at test time.  Needs the onnx and numpy modules (Debian's
python3-onnx, python3-numpy); downloads nothing.
"""
import argparse
import os
import sys

import numpy as np

SIZES = {
    # kind, size: tokens, hidden, heads, ffn
    ("bert", "base"): (128, 768, 12, 3072),
    ("bert", "small"): (16, 64, 4, 128),
    ("vit", "base"): (197, 768, 12, 3072),
    ("vit", "small"): (17, 64, 4, 128),
}


def build(kind, size, seq_len=None):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    seq, hid, heads, ffn = SIZES[(kind, size)]
    if seq_len:
        seq = seq_len
    dh = hid // heads
    rng = np.random.RandomState(12 if kind == "bert" else 16)
    inits, nodes = [], []

    def weight(name, shape, scale=0.02):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    counter = [0]

    def node(op, ins, **attrs):
        counter[0] += 1
        out = "%s_%d" % (op.lower(), counter[0])
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def linear(x, n_in, n_out, tag):
        return node("Add", [node("MatMul", [x, weight(tag + "_w", (n_in, n_out))]), weight(tag + "_b", (n_out,))])

    def layer_norm(x, tag):
        gamma = const(tag + "_g", (1 + rng.standard_normal(hid) * 0.1).astype(np.float32))
        beta = const(tag + "_beta", (rng.standard_normal(hid) * 0.1).astype(np.float32))
        return node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12 if kind == "bert" else 1e-6)

    def gelu(x):
        inner = node("Erf", [node("Div", [x, const("sqrt2_%d" % counter[0], np.float32(np.sqrt(2.0)))])])
        half = const("half_%d" % counter[0], np.float32(0.5))
        one = const("one_%d" % counter[0], np.float32(1.0))
        return node("Mul", [node("Mul", [x, half]), node("Add", [inner, one])])

    heads_shape = const("heads_shape", np.array([1, seq, heads, dh], dtype=np.int64))
    flat_shape = const("flat_shape", np.array([1, seq, hid], dtype=np.int64))

    def attention(x, mask):
        q = node("Transpose", [node("Reshape", [linear(x, hid, hid, "q"), heads_shape])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(x, hid, hid, "k"), heads_shape])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(x, hid, hid, "v"), heads_shape])], perm=[0, 2, 1, 3])
        s = node("Mul", [node("MatMul", [q, k]), const("scale", np.float32(1.0 / np.sqrt(dh)))])
        if mask:
            s = node("Add", [s, mask])
        p = node("Softmax", [s], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [p, v])], perm=[0, 2, 1, 3]), flat_shape])
        return linear(ctx, hid, hid, "o")

    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hid])]
    feeds = {"x": rng.standard_normal((1, seq, hid)).astype(np.float32)}
    if kind == "bert":
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, seq]))
        m = np.zeros((1, 1, 1, seq), dtype=np.float32)
        m[..., seq - seq // 4:] = -10000.0      # the last quarter is padding
        feeds["mask"] = m
        h1 = layer_norm(node("Add", [attention("x", "mask"), "x"]), "ln1")
        f = linear(gelu(linear(h1, hid, ffn, "f1")), ffn, hid, "f2")
        y = layer_norm(node("Add", [f, h1]), "ln2")
    else:
        h1 = node("Add", ["x", attention(layer_norm("x", "ln1"), None)])
        f = linear(gelu(linear(layer_norm(h1, "ln2"), hid, ffn, "f1")), ffn, hid, "f2")
        y = node("Add", [h1, f])
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    graph = helper.make_graph(nodes, "%s_%s" % (kind, size), inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hid])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="qir-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, feeds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["bert", "vit"])
    ap.add_argument("--size", choices=["base", "small"], default="small")
    ap.add_argument("--out")
    ap.add_argument("--seq", type=int, default=None, help="tokens (BERT) instead of the size's")
    ap.add_argument("--pb-to-npy", nargs=2)
    ap.add_argument("--compare", nargs=2)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--rel-l2", type=float, default=None,
                    help="with --compare: pass when ||got - want|| / ||want|| <= this instead")
    a = ap.parse_args()
    if a.pb_to_npy:
        import onnx
        from onnx import numpy_helper
        t = onnx.TensorProto()
        with open(a.pb_to_npy[0], "rb") as f:
            t.ParseFromString(f.read())
        np.save(a.pb_to_npy[1], numpy_helper.to_array(t))
        return 0
    if a.compare:
        got, want = np.load(a.compare[0]), np.load(a.compare[1])
        if got.shape != want.shape:
            print("shape %s, want %s: FAIL" % (got.shape, want.shape))
            return 1
        if a.rel_l2 is not None:
            want64 = want.astype(np.float64)
            rel = float(np.linalg.norm(got.astype(np.float64) - want64) / max(np.linalg.norm(want64), 1e-300))
            print("rel_l2=%.3g (at most %g): %s" % (rel, a.rel_l2, "OK" if rel <= a.rel_l2 else "FAIL"))
            return 0 if rel <= a.rel_l2 else 1
        err = np.abs(got.astype(np.float64) - want)
        bad = int(np.sum(err > a.atol + a.rtol * np.abs(want)))
        print("max_abs_err=%.3g, %d of %d beyond %g + %g*|want|: %s" % (err.max(), bad, err.size, a.atol, a.rtol,
                                                                       "OK" if bad == 0 else "FAIL"))
        return 0 if bad == 0 else 1
    if not a.kind or not a.out:
        ap.error("--kind and --out are required")
    from onnx import numpy_helper
    model, feeds = build(a.kind, a.size, a.seq)
    ds = os.path.join(a.out, "test_data_set_0")
    os.makedirs(ds, exist_ok=True)
    with open(os.path.join(a.out, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, (name, arr) in enumerate(feeds.items()):
        with open(os.path.join(ds, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(arr, name).SerializeToString())
        np.save(os.path.join(a.out, name + ".npy"), arr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
