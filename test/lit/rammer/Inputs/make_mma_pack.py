"""A matmul (on the matrix units with -autocast) beside an elementwise chain:
-rammer packs them into one rprogram whose block is the chain's 256 threads,
the matmul's kernel fewer (test/lit/rammer/mma-fewer-threads.test)."""
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(7)
w = numpy_helper.from_array((rng.standard_normal((512, 256)) * 0.1).astype(np.float32), "w")
nodes = [helper.make_node("MatMul", ["a", "w"], ["m"]),
         helper.make_node("Relu", ["m"], ["r"]),
         helper.make_node("Sigmoid", ["b"], ["s"]),
         helper.make_node("Mul", ["s", "b"], ["t"])]
g = helper.make_graph(nodes, "mmapack",
                      [helper.make_tensor_value_info("a", TensorProto.FLOAT, [256, 512]),
                       helper.make_tensor_value_info("b", TensorProto.FLOAT, [256, 1024])],
                      [helper.make_tensor_value_info("r", TensorProto.FLOAT, [256, 256]),
                       helper.make_tensor_value_info("t", TensorProto.FLOAT, [256, 1024])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
