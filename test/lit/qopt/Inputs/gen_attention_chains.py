#!/usr/bin/python3
"""Attention as exporters write it, as small ONNX models for qopt's attention
recognition (tools/qopt/attention_match.c):

    gen_attention_chains.py KIND OUT.onnx [B H S D]

KIND:
  causal      f16, batch 2, 4 heads, S = 64, head dim 16: q, k, v [B,S,E]
              reshaped to heads and transposed (k by [0,2,3,1]), MatMul, Mul by
              1/sqrt(d), a causal mask from Range/Less/Where (Where(j > i, -inf,
              scores)), Softmax, MatMul, transpose back, reshape
  trilu       f32, as causal but the mask is additive as HF writes it:
              Where(Trilu(ones) == 0, finfo.min, 0) added to the scores, q and k
              already [B,H,S,D] inputs (k transposed by [0,1,3,2])
  band        f32, a constant banded mask (keys i-3 .. i): not causal, so it
              stays the bias
  padding     f32, an additive padding-mask input [B,1,1,T] (not constant)
  twice       f32, as band but the scores are an output too: not rewritten
  onnx-causal an ONNX Attention node (opset 23) with is_causal = 1, S = T
  issue       f16 as issue 27 writes causal self-attention: q, k, v [B,H,S,D]
              inputs, K transposed by [0,1,3,2], MatMul, Mul by 1/sqrt(d), the
              Range/Less/Where mask, Softmax, MatMul (B H S D: 2 8 128 64 unless given)
B, H, S and D (default 2 4 64 16) may follow the output file.
Fixed seeds; needs the onnx and numpy modules; downloads nothing.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

B, H, S, D = 2, 4, 64, 16
E = H * D


def build(kind):
    f16 = kind in ("causal", "issue")
    dt = TensorProto.FLOAT16 if f16 else TensorProto.FLOAT
    npdt = np.float16 if f16 else np.float32
    seq = S if kind in ("causal", "issue") else 16
    inits, nodes, outputs = [], [], []
    counter = [0]

    def const(arr):
        counter[0] += 1
        name = "c%d" % counter[0]
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, **attrs):
        counter[0] += 1
        out = "%s_%d" % (op.lower(), counter[0])
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    if kind == "onnx-causal":
        inputs = [helper.make_tensor_value_info(n, dt, [B, H, seq, D]) for n in "qkv"]
        nodes.append(helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1))
        graph = helper.make_graph(nodes, "onnx_causal", inputs, [helper.make_tensor_value_info("y", dt, [B, H, seq, D])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], producer_name="qir-tests")
        model.ir_version = 8
        return model

    heads = const(np.array([B, seq, H, D], dtype=np.int64))
    flat = const(np.array([B, seq, E], dtype=np.int64))
    if kind in ("causal",):
        inputs = [helper.make_tensor_value_info(n, dt, [B, seq, E]) for n in "qkv"]
        q = node("Transpose", [node("Reshape", ["q", heads])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", ["k", heads])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", ["v", heads])], perm=[0, 2, 1, 3])
    else:
        inputs = [helper.make_tensor_value_info(n, dt, [B, H, seq, D]) for n in "qkv"]
        q, v = "q", "v"
        k = node("Transpose", ["k"], perm=[0, 1, 3, 2])
    s = node("Mul", [node("MatMul", [q, k]), const(npdt(1 / np.sqrt(D)))])
    if kind in ("causal", "issue"):
        r = node("Range", [const(np.int64(0)), const(np.int64(seq)), const(np.int64(1))])
        i = node("Unsqueeze", [r, const(np.array([1], dtype=np.int64))])
        j = node("Unsqueeze", [r, const(np.array([0], dtype=np.int64))])
        s = node("Where", [node("Less", [i, j]), const(npdt(-np.inf)), s])
    elif kind == "trilu":
        tri = node("Trilu", [const(np.ones((seq, seq), dtype=np.float32))], upper=0)
        hide = node("Equal", [tri, const(np.float32(0))])
        s = node("Add", [s, node("Where", [hide, const(np.finfo(np.float32).min), const(np.float32(0))])])
    elif kind in ("band", "twice"):
        ii, jj = np.meshgrid(np.arange(seq), np.arange(seq), indexing="ij")
        keep = ((jj <= ii) & (jj >= ii - 3)).reshape(1, 1, seq, seq)
        s = node("Where", [const(keep), s, const(np.float32(-np.inf))])
        if kind == "twice":
            outputs.append(helper.make_tensor_value_info(s, dt, [B, H, seq, seq]))
    elif kind == "padding":
        inputs.append(helper.make_tensor_value_info("mask", dt, [B, 1, 1, seq]))
        s = node("Add", [s, "mask"])
    p = node("Softmax", [s], axis=-1)
    y = node("MatMul", [p, v])
    if kind == "causal":
        y = node("Reshape", [node("Transpose", [y], perm=[0, 2, 1, 3]), flat])
        shape = [B, seq, E]
    else:
        shape = [B, H, seq, D]
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    outputs.insert(0, helper.make_tensor_value_info("y", dt, shape))
    graph = helper.make_graph(nodes, kind, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="qir-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    if len(sys.argv) == 7:
        B, H, S, D = (int(x) for x in sys.argv[3:7])
    elif sys.argv[1] == "issue":
        B, H, S, D = 2, 8, 128, 64
    E = H * D
    onnx.save(build(sys.argv[1]), sys.argv[2])
