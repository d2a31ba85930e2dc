#!/usr/bin/python3
"""A small GPT-style decoder as ONNX, written the way exporters write it, for the
KV-cache tests (test/lit/transformers/gpt-kv-cache.test) and examples/generate.sh.

    gen_gpt.py --out DIR
        writes DIR/prefill.onnx and DIR/decode.onnx, both from the same weights
    gen_gpt.py --compare GOT.npy WANT.pb [GOT.npy WANT.pb ...] [--atol A] [--rtol R]
        each program output against ONNX Runtime's: |got - want| <= A + R * |want|
        everywhere (default 1e-4 + 1e-3), else exit status 1

The model: vocabulary 96, d_model 64, 4 heads of 16, 2 layers, pre-LayerNorm,
learned position embeddings (Gather), tanh-GELU MLP of width 256, a final
LayerNorm and the LM head tied to the token embedding (MatMul by its Transpose).
Attention as exporters write it: one QKV projection Split in three, per-head
Reshape/Transpose, MatMul(Q, Transpose(K)), Div by sqrt(16), Softmax, MatMul by
V, Transpose/Reshape back.

- prefill.onnx: input_ids int64 [1, seq] -> logits f32 [1, seq, 96] and
  present_key_L / present_value_L f32 [1, 4, seq, 16] (L = 0, 1).  The
  positions are Range(0, seq) over Shape(input_ids); the causal mask is
  Less(Range as a column, Range as a row) -> Where(future, dtype min, scores).
- decode.onnx: input_ids int64 [1, 1], past_key_L / past_value_L f32
  [1, 4, past, 16] -> logits [1, 1, 96] and present_* [1, 4, past + 1, 16]
  (Concat of past and new on axis 2).  The position is the past length, read
  with Shape(past_key_0); one query sees every key, so there is no mask.

Weights come from numpy's RandomState (its stream is fixed across numpy
versions) with a fixed seed, so the models made at test time are the ones the
stored references (test/gpt/refs, made by test/gpt/make_refs.py) came from.
Needs the onnx and numpy modules (Debian's python3-onnx, python3-numpy);
downloads nothing.
"""
import argparse
import os
import sys

import numpy as np

VOCAB, D_MODEL, HEADS, LAYERS, MAX_POS = 96, 64, 4, 2, 64
HEAD_DIM = D_MODEL // HEADS
FFN = 4 * D_MODEL
SEED = 27


def weights():
    """Every parameter, drawn in a fixed order from one fixed seed."""
    rng = np.random.RandomState(SEED)

    def normal(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"wte": normal((VOCAB, D_MODEL), 0.7), "wpe": normal((MAX_POS, D_MODEL), 1.5)}
    for l in range(LAYERS):
        p = "h%d_" % l
        w[p + "ln1_g"] = (1 + normal((D_MODEL,), 0.1)).astype(np.float32)
        w[p + "ln1_b"] = normal((D_MODEL,), 0.1)
        w[p + "qkv_w"] = normal((D_MODEL, 3 * D_MODEL), 0.25)
        w[p + "qkv_b"] = normal((3 * D_MODEL,), 0.1)
        w[p + "proj_w"] = normal((D_MODEL, D_MODEL), 0.3)
        w[p + "proj_b"] = normal((D_MODEL,), 0.05)
        w[p + "ln2_g"] = (1 + normal((D_MODEL,), 0.1)).astype(np.float32)
        w[p + "ln2_b"] = normal((D_MODEL,), 0.1)
        w[p + "fc_w"] = normal((D_MODEL, FFN), 0.15)
        w[p + "fc_b"] = normal((FFN,), 0.05)
        w[p + "fc2_w"] = normal((FFN, D_MODEL), 0.15)
        w[p + "fc2_b"] = normal((D_MODEL,), 0.05)
    w["lnf_g"] = (1 + normal((D_MODEL,), 0.1)).astype(np.float32)
    w["lnf_b"] = normal((D_MODEL,), 0.1)
    return w


def build(kind):
    """kind 'prefill' or 'decode': the ONNX model, from weights()."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    params = weights()
    inits, nodes = [], []
    for name, arr in params.items():
        inits.append(numpy_helper.from_array(arr, name))
    counter = [0]

    def const(arr, hint="c"):
        counter[0] += 1
        name = "%s_%d" % (hint, counter[0])
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, n_out=1, **attrs):
        counter[0] += 1
        outs = ["%s_%d" % (op.lower(), counter[0])] if n_out == 1 else \
            ["%s_%d_%d" % (op.lower(), counter[0], i) for i in range(n_out)]
        nodes.append(helper.make_node(op, ins, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def i64(*v):
        return const(np.array(v, dtype=np.int64), "i64")

    def layer_norm(x, tag):
        return node("LayerNormalization", [x, tag + "_g", tag + "_b"], axis=-1, epsilon=1e-5)

    def linear(x, tag):
        return node("Add", [node("MatMul", [x, tag + "_w"]), tag + "_b"])

    def gelu_tanh(x):
        # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), as torch exports it
        cube = node("Pow", [x, const(np.float32(3.0), "three")])
        inner = node("Add", [x, node("Mul", [cube, const(np.float32(0.044715), "k")])])
        t = node("Tanh", [node("Mul", [inner, const(np.float32(np.sqrt(2.0 / np.pi)), "sqrt_2_pi")])])
        return node("Mul", [node("Mul", [x, const(np.float32(0.5), "half")]),
                            node("Add", [t, const(np.float32(1.0), "one")])])

    def split_heads(t):
        # [1, S, 64] -> [1, S, 4, 16] -> [1, 4, S, 16]
        r = node("Reshape", [t, i64(1, -1, HEADS, HEAD_DIM)])
        return node("Transpose", [r], perm=[0, 2, 1, 3])

    ids = "input_ids"
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             [1, "seq" if kind == "prefill" else 1, VOCAB])]
    inputs = [helper.make_tensor_value_info(ids, TensorProto.INT64, [1, "seq" if kind == "prefill" else 1])]
    if kind == "prefill":
        seq_len = node("Gather", [node("Shape", [ids]), i64(1)], axis=0)          # scalar S
        positions = node("Range", [const(np.int64(0), "zero"), seq_len, const(np.int64(1), "step")])
        position_ids = node("Unsqueeze", [positions, i64(0)])                    # [1, S]
        # the causal mask: key j is in query i's future when i < j
        rows = node("Unsqueeze", [positions, i64(1)])                            # [S, 1]
        cols = node("Unsqueeze", [positions, i64(0)])                            # [1, S]
        future = node("Less", [rows, cols])                                      # [S, S]
        mask_min = const(np.float32(np.finfo(np.float32).min), "mask_min")
    else:
        for l in range(LAYERS):
            for kv in ("key", "value"):
                inputs.append(helper.make_tensor_value_info("past_%s_%d" % (kv, l), TensorProto.FLOAT,
                                                            [1, HEADS, "past", HEAD_DIM]))
        past_len = node("Gather", [node("Shape", ["past_key_0"]), i64(2)], axis=0)  # scalar P
        positions = node("Range", [past_len, node("Add", [past_len, const(np.int64(1), "one_i")]),
                                   const(np.int64(1), "step")])
        position_ids = node("Unsqueeze", [positions, i64(0)])                    # [1, 1]
    for l in range(LAYERS):
        for kv in ("key", "value"):
            outputs.append(helper.make_tensor_value_info(
                "present_%s_%d" % (kv, l), TensorProto.FLOAT,
                [1, HEADS, "seq" if kind == "prefill" else "past_plus_1", HEAD_DIM]))

    h = node("Add", [node("Gather", ["wte", ids], axis=0), node("Gather", ["wpe", position_ids], axis=0)])
    for l in range(LAYERS):
        p = "h%d_" % l
        x = layer_norm(h, p + "ln1")
        q, k, v = node("Split", [linear(x, p + "qkv"), i64(D_MODEL, D_MODEL, D_MODEL)], n_out=3, axis=2)
        q, k, v = split_heads(q), split_heads(k), split_heads(v)
        if kind == "decode":
            k = node("Concat", ["past_key_%d" % l, k], axis=2)
            v = node("Concat", ["past_value_%d" % l, v], axis=2)
        nodes.append(helper.make_node("Identity", [k], ["present_key_%d" % l]))
        nodes.append(helper.make_node("Identity", [v], ["present_value_%d" % l]))
        scores = node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = node("Div", [scores, const(np.float32(np.sqrt(HEAD_DIM)), "sqrt_dh")])
        if kind == "prefill":
            scores = node("Where", [future, mask_min, scores])
        probs = node("Softmax", [scores], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3]),
                               i64(1, -1, D_MODEL)])
        h = node("Add", [h, linear(ctx, p + "proj")])
        m = linear(gelu_tanh(linear(layer_norm(h, p + "ln2"), p + "fc")), p + "fc2")
        h = node("Add", [h, m])
    h = layer_norm(h, "lnf")
    nodes.append(helper.make_node("MatMul", [h, node("Transpose", ["wte"], perm=[1, 0])], ["logits"]))
    graph = helper.make_graph(nodes, "gpt_" + kind, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="qir-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main_write(out):
    os.makedirs(out, exist_ok=True)
    for kind in ("prefill", "decode"):
        with open(os.path.join(out, kind + ".onnx"), "wb") as f:
            f.write(build(kind).SerializeToString())


def compare(got_path, want_path, atol, rtol):
    """A generated program's .npy against ONNX Runtime's .pb: |got - want| <= atol + rtol * |want|."""
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(want_path, "rb") as f:
        t.ParseFromString(f.read())
    want, got = numpy_helper.to_array(t), np.load(got_path)
    name = t.name or os.path.basename(want_path)
    if got.shape != want.shape or got.dtype != want.dtype:
        print("%s: %s %s, want %s %s: FAIL" % (name, got.dtype, got.shape, want.dtype, want.shape))
        return 1
    err = np.abs(got.astype(np.float64) - want)
    bad = int(np.sum(~(err <= atol + rtol * np.abs(want))))
    print("%s: max_abs_err=%.3g, %d of %d beyond %g + %g*|want|: %s" %
          (name, err.max(), bad, err.size, atol, rtol, "OK" if bad == 0 else "FAIL"))
    return 0 if bad == 0 else 1


def main():
    ap = argparse.ArgumentParser(description="gen_gpt.py --out DIR | --compare GOT.npy WANT.pb ...")
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs="+", metavar="GOT.npy WANT.pb",
                    help="pairs of a program's output and ONNX Runtime's; exit status 1 if any differs")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    a = ap.parse_args()
    if a.compare:
        if len(a.compare) % 2:
            ap.error("--compare takes pairs GOT.npy WANT.pb")
        pairs = zip(a.compare[0::2], a.compare[1::2])
        return max(compare(g, w, a.atol, a.rtol) for g, w in pairs)
    if not a.out:
        ap.error("--out or --compare is required")
    main_write(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
