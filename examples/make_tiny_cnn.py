#!/usr/bin/python3
"""Writes tiny_cnn.onnx, the bundled example of `make demo` (our own model:
random weights from a fixed seed).  Needs Debian's python3-onnx and
python3-numpy; the .onnx it wrote is checked in, so users never run this."""
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

rng = np.random.default_rng(7)
def w(name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

inits = [w("conv1.w", 8, 3, 3, 3), w("conv1.b", 8), w("conv2.w", 16, 8, 3, 3), w("conv2.b", 16),
         w("fc.w", 10, 16 * 4 * 4), w("fc.b", 10)]
nodes = [
    helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
    helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], name="pool2"),
    helper.make_node("Flatten", ["p2"], ["f"], axis=1, name="flatten"),
    helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], transB=1, name="fc"),
    helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
]
graph = helper.make_graph(nodes, "tiny_cnn",
                          [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="qir-examples")
model.ir_version = 7
onnx.checker.check_model(model)
onnx.save(model, "tiny_cnn.onnx")
np.save("tiny_cnn_input.npy", rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
