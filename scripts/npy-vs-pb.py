#!/usr/bin/python3
"""npy-vs-pb.py GOT.npy WANT.pb [ATOL RTOL]: compares a tensor a generated
program wrote with an ONNX TensorProto (an onnxruntime reference); prints
max_abs_err and OK or MISMATCH (exit 1).  Needs Debian's python3-onnx."""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

got = np.load(sys.argv[1])
t = onnx.TensorProto()
with open(sys.argv[2], "rb") as f:
    t.ParseFromString(f.read())
want = numpy_helper.to_array(t)
atol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-6
rtol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-4
if got.shape != want.shape:
    print("shape %s, want %s: MISMATCH" % (got.shape, want.shape))
    sys.exit(1)
err = np.abs(got.astype(np.float64) - want.astype(np.float64))
ok = bool(np.all(err <= atol + rtol * np.abs(want.astype(np.float64))))
print("max_abs_err=%.3g %s" % (float(err.max()) if err.size else 0.0, "OK" if ok else "MISMATCH"))
sys.exit(0 if ok else 1)
