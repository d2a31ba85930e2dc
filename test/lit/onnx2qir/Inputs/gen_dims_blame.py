"""Models whose failing node depends on several defaulted dimensions, for
dims-blame.test: python3 gen_dims_blame.py OUTDIR."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(path, nodes, dims, inits):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(a, n) for n, a in inits.items()]
    graph = helper.make_graph(nodes, os.path.basename(path)[:-5], [x], [y], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


out = sys.argv[1]
axis1 = np.array([1], np.int64)
# Audio: [batch_size, samples] -> [B,1,S] -> a 512-wide convolution; only samples decides.
save(os.path.join(out, "conv1d.onnx"),
     [helper.make_node("Unsqueeze", ["x", "axis1"], ["u"], name="unsqueeze"),
      helper.make_node("Conv", ["u", "w"], ["y"], name="conv", strides=[256])],
     ["batch_size", "samples"], {"axis1": axis1, "w": np.ones((4, 1, 512), np.float32)})
# The mean over samples reshaped to a fixed batch of 4: only batch_size decides.
save(os.path.join(out, "reshape.onnx"),
     [helper.make_node("ReduceMean", ["x"], ["m"], name="mean", axes=[1], keepdims=1),
      helper.make_node("Reshape", ["m", "shape"], ["y"], name="reshape")],
     ["batch_size", "samples"], {"shape": np.array([4, 1], np.int64)})
# A 300x300 window over [batch, height, width]: height and width both decide, batch not.
save(os.path.join(out, "pool2d.onnx"),
     [helper.make_node("Unsqueeze", ["x", "axis1"], ["u"], name="unsqueeze"),
      helper.make_node("MaxPool", ["u"], ["y"], name="pool", kernel_shape=[300, 300])],
     ["batch", "height", "width"], {"axis1": axis1})
# A reshape to a fixed [4,8]: any batch_size * samples of 32 works, so both decide.
save(os.path.join(out, "reshape-both.onnx"),
     [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
     ["batch_size", "samples"], {"shape": np.array([4, 8], np.int64)})
# A matmul whose inner extent must be 7: samples decides, batch_size not.
save(os.path.join(out, "matmul.onnx"),
     [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")],
     ["batch_size", "samples"], {"w": np.ones((7, 4), np.float32)})
# A weight made for 2 channels on a 1-channel signal: no size of either
# dimension helps, so the note cannot single one out and names both.
save(os.path.join(out, "channels.onnx"),
     [helper.make_node("Unsqueeze", ["x", "axis1"], ["u"], name="unsqueeze"),
      helper.make_node("Conv", ["u", "w"], ["y"], name="conv")],
     ["batch_size", "samples"], {"axis1": axis1, "w": np.ones((4, 2, 3), np.float32)})
