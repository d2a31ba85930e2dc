#!/usr/bin/python3
"""Writes mlp16.onnx for mma-onnx.test: an f16 two-layer perceptron (MatMul,
Add, Relu, Gemm with transB and a bias, Softmax), our own model.  The weight
matrices are graph inputs (qrun makes them), so the file stays small; the
biases are random initializers from a fixed seed.  Needs Debian's python3-onnx and python3-numpy; the
.onnx is checked in, so the tests never run this."""
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

rng = np.random.default_rng(3)
def w(name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float16), name)

inits = [w("b1", 512), w("b2", 384)]
nodes = [
    helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
    helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
    helper.make_node("Relu", ["hb"], ["r"], name="relu"),
    helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1, name="fc2"),
    helper.make_node("Softmax", ["y"], ["p"], axis=-1, name="softmax"),
]
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [256, 256]),
          helper.make_tensor_value_info("w1", TensorProto.FLOAT16, [256, 512]),
          helper.make_tensor_value_info("w2", TensorProto.FLOAT16, [384, 512])]
graph = helper.make_graph(nodes, "mlp16", inputs, [helper.make_tensor_value_info("p", TensorProto.FLOAT16, [256, 384])],
                          inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="qir-tests")
model.ir_version = 7
onnx.save(model, "mlp16.onnx")
