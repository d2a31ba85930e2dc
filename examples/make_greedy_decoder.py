#!/usr/bin/python3
"""Writes greedy_decoder.onnx: a greedy GRU decoder (our own model, random
weights from a fixed seed).  An ONNX Loop of at most 24 steps feeds each step's
ArgMax token back through an embedding and a GRU cell and stops when the token
is the end token, so the token scan output is shorter than 24 rows (14 with the
bundled input).  Needs Debian's python3-onnx and python3-numpy; the .onnx and
the test data set (its output_N.pb from onnxruntime: /work/shared/onnx-tests/
oracle/gen_ref.js) are checked in, so users never run this.

usage: make_greedy_decoder.py [EOS] (default 0, first emitted at step 13; -1 never stops)"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

V, E, H, MAX_STEPS = 8, 6, 8, 24
EOS = int(sys.argv[1]) if len(sys.argv) > 1 else 0
rng = np.random.default_rng(11)


def w(name, *shape, scale=0.6):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


inits = [w("emb", V, E, scale=1.0), w("gru.W", 1, 3 * H, E), w("gru.R", 1, 3 * H, H), w("gru.B", 1, 6 * H, scale=0.2),
         w("out.W", H, V, scale=1.0),
         numpy_helper.from_array(np.array(MAX_STEPS, np.int64), "max_steps"),
         numpy_helper.from_array(np.array(True), "go"),
         numpy_helper.from_array(np.array([0], np.int64), "start_token"),
         numpy_helper.from_array(np.array([EOS], np.int64), "eos"),
         numpy_helper.from_array(np.array([0], np.int64), "axis0"),
         numpy_helper.from_array(np.array([1, H], np.int64), "row_shape")]

body = helper.make_graph(
    [helper.make_node("Gather", ["emb", "tok_in"], ["x"], axis=0),                 # [1, E]
     helper.make_node("Unsqueeze", ["x", "axis0"], ["x3"]),                         # [1, 1, E]
     helper.make_node("GRU", ["x3", "gru.W", "gru.R", "gru.B", "", "h_in"], ["", "h_out"], hidden_size=H),
     helper.make_node("Reshape", ["h_out", "row_shape"], ["h2"]),                   # [1, H]
     helper.make_node("MatMul", ["h2", "out.W"], ["logits"]),                       # [1, V]
     helper.make_node("ArgMax", ["logits"], ["tok_out"], axis=1, keepdims=0),       # [1]
     helper.make_node("Equal", ["tok_out", "eos"], ["is_end"]),
     helper.make_node("Not", ["is_end"], ["cond_out"]),
     helper.make_node("Identity", ["tok_out"], ["tok_scan"])],
    "step",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []),
     helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
     helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, 1, H]),
     helper.make_tensor_value_info("tok_in", TensorProto.INT64, [1])],
    [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [1]),
     helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, 1, H]),
     helper.make_tensor_value_info("tok_out", TensorProto.INT64, [1]),
     helper.make_tensor_value_info("tok_scan", TensorProto.INT64, [1])])

graph = helper.make_graph(
    [helper.make_node("Loop", ["max_steps", "go", "h0", "start_token"], ["h_final", "last_token", "tokens"], body=body,
                      name="decode")],
    "greedy_decoder",
    [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 1, H])],
    [helper.make_tensor_value_info("h_final", TensorProto.FLOAT, [1, 1, H]),
     helper.make_tensor_value_info("last_token", TensorProto.INT64, [1]),
     helper.make_tensor_value_info("tokens", TensorProto.INT64, ["steps", 1])],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], producer_name="qir-examples")
model.ir_version = 8
onnx.checker.check_model(model)
here = os.path.dirname(os.path.abspath(__file__))
onnx.save(model, os.path.join(here, "greedy_decoder.onnx"))
ds = os.path.join(here, "greedy_decoder_data")
os.makedirs(ds, exist_ok=True)
h0 = numpy_helper.from_array((rng.standard_normal((1, 1, H)) * 0.5).astype(np.float32), "h0")
with open(os.path.join(ds, "input_0.pb"), "wb") as f:
    f.write(h0.SerializeToString())
