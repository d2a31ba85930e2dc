"""A small NCHW convolution chain for the relayout test: conv 3x3 -> relu ->
(conv 3x3 + conv 1x1, both reading the relu) -> add.  Seeded weights."""
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

rng = np.random.default_rng(7)
N, C, H, W, K = 4, 64, 28, 28, 128
def w(name, shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(np.float32), name)
inits = [w("w1", (C, C, 3, 3)), w("b1", (C,)), w("w2", (K, C, 3, 3)), w("w3", (K, C, 1, 1))]
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"]),
    helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
    helper.make_node("Conv", ["r1", "w3"], ["c3"]),
    helper.make_node("Add", ["c2", "c3"], ["y"]),
]
g = helper.make_graph(nodes, "conv_nhwc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, H, W])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, K, H, W])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.save(m, sys.argv[1])
