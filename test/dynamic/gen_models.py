#!/usr/bin/python3
"""Small ONNX models whose inputs have symbolic (dim_param) dimensions, for the
dimension-range tests of issue 29.

    /usr/bin/python3 test/dynamic/gen_models.py [--out DIR]

writes DIR/cnn_batch.onnx, DIR/decode_step.onnx, DIR/seg_hw.onnx (default: this
script's folder).  Opset 17, weights as initializers, drawn from fixed numpy
RandomState seeds, so a rerun writes the same models.  No Shape, Size,
ConstantOfShape or Range: every reshape target is a constant shape tensor.

- cnn_batch: x [batch, 3, 16, 16] -> Conv 8 3x3 pad 1, Relu, MaxPool 2x2/2,
  Conv 16 3x3 stride 2 pad 1, Relu, GlobalAveragePool, Flatten, Gemm 16->10
  (transB) -> y [batch, 10], and p = Softmax(y, axis 1) [batch, 10].
- decode_step: one attention step (4 heads of 8, d_model 32) over a KV cache:
  x [1, 1, 32], past_key / past_value [1, 4, past, 8] -> y [1, 1, 32] (Wo
  projection plus the residual x), present_key / present_value [1, 4, past+1, 8]
  (Concat of past and the new k / v on axis 2).
- seg_hw: img [1, 3, height, width] (both even) -> Conv 8 3x3/2 pad 1, Relu,
  Conv 8 3x3 pad 1, Relu, Resize nearest x2 (asymmetric, floor), Add a 1x1 Conv
  of img, Conv 1 1x1, Sigmoid -> prob [1, 1, height, width].

Not stored (a test writes it into its own folder with --only cnn3; 370 KB of
weights): cnn3: x [batch, 3, 32, 32] -> Conv 32 3x3 pad 1, Relu, Conv 64 3x3/2
pad 1, Relu, Conv 128 3x3/2 pad 1, Relu -> y [batch, 128, 8, 8].
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
HERE = os.path.dirname(os.path.abspath(__file__))


def normal(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def finish(name, nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="qir test/dynamic/gen_models.py")
    model.ir_version = 8  # opset 17's IR version; keeps older runtimes happy
    onnx.checker.check_model(model, full_check=True)
    return model


def cnn_batch():
    rng = np.random.RandomState(2901)
    w = {
        "conv1_w": normal(rng, (8, 3, 3, 3), 0.3), "conv1_b": normal(rng, (8,), 0.1),
        "conv2_w": normal(rng, (16, 8, 3, 3), 0.2), "conv2_b": normal(rng, (16,), 0.1),
        "fc_w": normal(rng, (10, 16), 0.4), "fc_b": normal(rng, (10,), 0.1),
    }
    n = [
        helper.make_node("Conv", ["x", "conv1_w", "conv1_b"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["m1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["m1", "conv2_w", "conv2_b"], ["c2"], kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
        helper.make_node("Softmax", ["y"], ["p"], axis=1),
    ]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10]),
            helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", 10])]
    return finish("cnn_batch", n, ins, outs, w)


DEC_D, DEC_HEADS, DEC_HEAD_DIM = 32, 4, 8


def decode_step():
    rng = np.random.RandomState(2902)
    w = {k: normal(rng, (DEC_D, DEC_D), 0.3) for k in ("wq", "wk", "wv", "wo")}
    w["heads_shape"] = np.array([1, 1, DEC_HEADS, DEC_HEAD_DIM], dtype=np.int64)
    w["model_shape"] = np.array([1, 1, DEC_D], dtype=np.int64)
    w["scale"] = np.array(1.0 / np.sqrt(DEC_HEAD_DIM), dtype=np.float32)
    n = []
    for p in ("q", "k", "v"):
        n += [helper.make_node("MatMul", ["x", "w" + p], [p + "_proj"]),
              helper.make_node("Reshape", [p + "_proj", "heads_shape"], [p + "_heads"]),
              helper.make_node("Transpose", [p + "_heads"], [p], perm=[0, 2, 1, 3])]
    n += [
        helper.make_node("Concat", ["past_key", "k"], ["present_key"], axis=2),
        helper.make_node("Concat", ["past_value", "v"], ["present_value"], axis=2),
        helper.make_node("Transpose", ["present_key"], ["key_t"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "key_t"], ["scores_raw"]),
        helper.make_node("Mul", ["scores_raw", "scale"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "present_value"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "model_shape"], ["ctx_flat"]),
        helper.make_node("MatMul", ["ctx_flat", "wo"], ["out_proj"]),
        helper.make_node("Add", ["out_proj", "x"], ["y"]),
    ]
    kv = [1, DEC_HEADS, "past", DEC_HEAD_DIM]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, DEC_D]),
           helper.make_tensor_value_info("past_key", TensorProto.FLOAT, kv),
           helper.make_tensor_value_info("past_value", TensorProto.FLOAT, kv)]
    kv1 = [1, DEC_HEADS, "past_plus_1", DEC_HEAD_DIM]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, DEC_D]),
            helper.make_tensor_value_info("present_key", TensorProto.FLOAT, kv1),
            helper.make_tensor_value_info("present_value", TensorProto.FLOAT, kv1)]
    return finish("decode_step", n, ins, outs, w)


def seg_hw():
    rng = np.random.RandomState(2903)
    w = {
        "down_w": normal(rng, (8, 3, 3, 3), 0.3), "down_b": normal(rng, (8,), 0.1),
        "mid_w": normal(rng, (8, 8, 3, 3), 0.2), "mid_b": normal(rng, (8,), 0.1),
        "skip_w": normal(rng, (8, 3, 1, 1), 0.4), "skip_b": normal(rng, (8,), 0.1),
        "head_w": normal(rng, (1, 8, 1, 1), 1.0), "head_b": normal(rng, (1,), 0.1),
        "up_scales": np.array([1, 1, 2, 2], dtype=np.float32),
    }
    n = [
        helper.make_node("Conv", ["img", "down_w", "down_b"], ["d"], kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["d"], ["d_r"]),
        helper.make_node("Conv", ["d_r", "mid_w", "mid_b"], ["m"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["m"], ["m_r"]),
        helper.make_node("Resize", ["m_r", "", "up_scales"], ["up"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Conv", ["img", "skip_w", "skip_b"], ["skip"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["up", "skip"], ["fused"]),
        helper.make_node("Conv", ["fused", "head_w", "head_b"], ["logit"], kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["logit"], ["prob"]),
    ]
    ins = [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, "height", "width"])]
    outs = [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 1, "height", "width"])]
    return finish("seg_hw", n, ins, outs, w)


def cnn3():
    rng = np.random.RandomState(2903)
    w = {
        "w1": normal(rng, (32, 3, 3, 3), 0.3), "b1": normal(rng, (32,), 0.1),
        "w2": normal(rng, (64, 32, 3, 3), 0.1), "b2": normal(rng, (64,), 0.1),
        "w3": normal(rng, (128, 64, 3, 3), 0.06), "b3": normal(rng, (128,), 0.1),
    }
    n = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c3"], ["y"]),
    ]
    return finish("cnn3", n, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 32, 32])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 128, 8, 8])], w)


MODELS = {"cnn_batch": cnn_batch, "decode_step": decode_step, "seg_hw": seg_hw}
NOT_STORED = {"cnn3": cnn3}
FORBIDDEN = {"Shape", "Size", "ConstantOfShape", "Range"}


def write_all(out, only=None):
    os.makedirs(out, exist_ok=True)
    paths = {}
    chosen = {only: {**MODELS, **NOT_STORED}[only]} if only else MODELS
    for name, build in chosen.items():
        model = build()
        bad = FORBIDDEN & {nd.op_type for nd in model.graph.node}
        assert not bad, "%s uses %s" % (name, bad)
        paths[name] = os.path.join(out, name + ".onnx")
        onnx.save(model, paths[name])
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--only", choices=sorted({**MODELS, **NOT_STORED}), help="write this model only")
    a = ap.parse_args()
    for name, path in write_all(a.out, a.only).items():
        print("%s %d bytes" % (path, os.path.getsize(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
