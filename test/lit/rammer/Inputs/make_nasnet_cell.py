#!/usr/bin/python3
"""Writes nasnet_cell.onnx for nasnet-cell.test: one NASNet-A normal cell
(Zoph et al., "Learning Transferable Architectures", 2018), our own small
instance.  Two inputs (the cell's h_i and h_{i-1}) are squeezed to C channels
by relu + 1x1 conv; five blocks each add two branches (separable 3x3 / 5x5
convolutions as relu, depthwise conv, pointwise conv; 3x3 average pooling;
identity); the cell's output concatenates the previous input's squeeze with
the five block outputs.  Weights are random initializers from a fixed seed.
Also writes nasnet_cell_data/input_0.pb and input_1.pb (fixed seed);
output_0.pb is onnxruntime's answer, made with the shared oracle:
    node gen_ref.js nasnet_cell.onnx nasnet_cell_data
Needs Debian's python3-onnx and python3-numpy; the files are checked in, so
the tests never run this."""
import os
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

C, H, W = 16, 12, 12
rng = np.random.default_rng(13)
inits, nodes = [], []
count = [0]


def fresh(prefix):
    count[0] += 1
    return "%s%d" % (prefix, count[0])


def param(name, *shape, scale=0.2):
    inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
    return name


def relu(x):
    y = fresh("relu")
    nodes.append(helper.make_node("Relu", [x], [y]))
    return y


def conv(x, cin, cout, k, group=1):
    y = fresh("conv")
    w = param(y + "_w", cout, cin // group, k, k, scale=1.0 / np.sqrt(cin // group * k * k))
    b = param(y + "_b", cout, scale=0.1)
    p = k // 2
    nodes.append(helper.make_node("Conv", [x, w, b], [y], kernel_shape=[k, k], pads=[p, p, p, p], group=group))
    return y


def squeeze(x):
    return conv(relu(x), C, C, 1)


def sep(x, k):
    return conv(conv(relu(x), C, C, k, group=C), C, C, 1)


def avg3(x):
    y = fresh("avg")
    nodes.append(helper.make_node("AveragePool", [x], [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                  count_include_pad=0))
    return y


def add(a, b):
    y = fresh("add")
    nodes.append(helper.make_node("Add", [a, b], [y]))
    return y


h, p = squeeze("h_cur"), squeeze("h_prev")
blocks = [
    add(sep(h, 3), h),
    add(sep(p, 3), sep(h, 5)),
    add(avg3(h), p),
    add(avg3(p), avg3(p)),
    add(sep(p, 5), sep(p, 3)),
]
nodes.append(helper.make_node("Concat", [p] + blocks, ["cell"], axis=1))
info = lambda n, c: helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, c, H, W])
graph = helper.make_graph(nodes, "nasnet_cell", [info("h_cur", C), info("h_prev", C)], [info("cell", 6 * C)], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="qir-tests")
model.ir_version = 7
onnx.checker.check_model(model)
here = os.path.dirname(os.path.abspath(__file__))
onnx.save(model, os.path.join(here, "nasnet_cell.onnx"))
data = os.path.join(here, "nasnet_cell_data")
os.makedirs(data, exist_ok=True)
for i, name in enumerate(["h_cur", "h_prev"]):
    t = numpy_helper.from_array(rng.uniform(-1, 1, (1, C, H, W)).astype(np.float32), name)
    with open(os.path.join(data, "input_%d.pb" % i), "wb") as f:
        f.write(t.SerializeToString())
