#!/usr/bin/python3
"""Small ONNX models for import.test: ops that carry symbolic extents and ops
that refuse them.  Usage: gen_import_cases.py OUTDIR"""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

out = sys.argv[1]
rng = np.random.RandomState(0)


def save(nodes, inputs, outputs, inits, name):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, "%s/%s.onnx" % (out, name))


f = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)
E = nh.from_array(rng.randn(20, 6).astype(np.float32), "E")
# an embedding: Gather along the table's static axis by ids [batch, seq], a
# Split of its static axis, a mean over it
sp = nh.from_array(np.array([1, 4, 1], np.int64), "sp")
save([h.make_node("Gather", ["E", "ids"], ["emb"], axis=0),
      h.make_node("Split", ["emb", "sp"], ["a", "part", "b"], axis=2),
      h.make_node("ReduceMean", ["part"], ["m"], axes=[2], keepdims=0)],
     [h.make_tensor_value_info("ids", T.INT64, ["batch", "seq"])], [f("m", ["batch", "seq"])], [E, sp], "embed")
# Slice along the symbolic axis
st1, en1, ax1 = (nh.from_array(np.array([v], np.int64), n) for v, n in ((1, "st"), (100, "en"), (1, "ax")))
save([h.make_node("Slice", ["x", "st", "en", "ax"], ["y"])], [f("x", [2, "n"])], [f("y", [2, None])], [st1, en1, ax1], "slice")
# Shape of a symbolic extent
save([h.make_node("Shape", ["x"], ["y"])], [f("x", [2, "n"])], [h.make_tensor_value_info("y", T.INT64, [2])], [], "shape")
# SAME padding with a stride
W = nh.from_array(np.ones((1, 1, 3, 3), np.float32), "W")
save([h.make_node("Conv", ["x", "W"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])], [f("x", [1, 1, "h", 8])],
     [f("y", [1, 1, None, 4])], [W], "same")
np.save("%s/ids.npy" % out, np.array([[1, 2, 3], [4, 5, 19]], np.int64))
np.save("%s/embed_want.npy" % out, nh.to_array(E)[np.array([[1, 2, 3], [4, 5, 19]])][:, :, 1:5].mean(axis=2))
