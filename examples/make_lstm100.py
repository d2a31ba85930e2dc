#!/usr/bin/python3
"""Writes an LSTM of 100 steps (batch 1, input 64, hidden 256): DIR/model.onnx
(random weights from a fixed seed, as initializers) and its input
DIR/test_data_set_0/input_0.pb (X, from the same seed).  The model is 1.3 MB,
so it is not checked in: tests run this script; the expected outputs
examples/lstm100_data/output_0.pb (Y_h) and output_1.pb (Y_c) come from
onnxruntime (/work/shared/onnx-tests/oracle/gen_ref.js on this model) and are.
Needs Debian's python3-onnx and python3-numpy.

usage: /usr/bin/python3 make_lstm100.py DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STEPS, IN, H = 100, 64, 256
out_dir = sys.argv[1] if len(sys.argv) > 1 else "lstm100"
rng = np.random.default_rng(100)


def arr(*shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# small recurrent weights keep the 100-step recurrence away from saturation
W = numpy_helper.from_array(arr(1, 4 * H, IN, scale=0.15), "W")
R = numpy_helper.from_array(arr(1, 4 * H, H, scale=0.05), "R")
B = numpy_helper.from_array(arr(1, 8 * H, scale=0.1), "B")
x = arr(STEPS, 1, IN, scale=1.0)

graph = helper.make_graph(
    [helper.make_node("LSTM", ["X", "W", "R", "B"], ["", "Y_h", "Y_c"], hidden_size=H, name="lstm")],
    "lstm100",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, [STEPS, 1, IN])],
    [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, 1, H]),
     helper.make_tensor_value_info("Y_c", TensorProto.FLOAT, [1, 1, H])],
    [W, R, B])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="qir examples/make_lstm100.py")
model.ir_version = 8
onnx.checker.check_model(model)
os.makedirs(os.path.join(out_dir, "test_data_set_0"), exist_ok=True)
onnx.save(model, os.path.join(out_dir, "model.onnx"))
with open(os.path.join(out_dir, "test_data_set_0", "input_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(x, "X").SerializeToString())
