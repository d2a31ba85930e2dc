"""Convolutions of unusual shapes for roller/relayout.test: a dilation of 2, two groups,
an asymmetric 5x3 window, a 1-D convolution, a stride of 2 (with a bias) and a 1x1
convolution of stride 2."""
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(3)
def w(name, shape): return numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(np.float32), name)
N, C, H, W = 8, 64, 30, 26
inits = [w("wd", (128, C, 3, 3)), w("wg", (128, C // 2, 3, 3)), w("wa", (64, C, 5, 3)), w("w1", (64, C, 3)),
         w("ws", (96, C, 3, 3)), w("bs", (96,)), w("wp", (256, 128, 1, 1))]
nodes = [
    helper.make_node("Conv", ["x", "wd"], ["dil"], pads=[2, 2, 2, 2], dilations=[2, 2]),
    helper.make_node("Conv", ["x", "wg"], ["grp"], pads=[1, 1, 1, 1], group=2),
    helper.make_node("Conv", ["x", "wa"], ["asym"], pads=[2, 1, 1, 0]),
    helper.make_node("Reshape", ["x", "shp"], ["x1"]),
    helper.make_node("Conv", ["x1", "w1"], ["c1d"], pads=[1, 1]),
    helper.make_node("Conv", ["x", "ws", "bs"], ["s2"], pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Conv", ["xp", "wp"], ["p2"], strides=[2, 2]),
]
inits.append(numpy_helper.from_array(np.array([N, C, H * W], dtype=np.int64), "shp"))
outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["dil", "grp", "asym", "c1d", "s2", "p2"]]
g = helper.make_graph(nodes, "odd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, H, W]),
                                     helper.make_tensor_value_info("xp", TensorProto.FLOAT, [16, 128, 28, 28])], outs, inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
