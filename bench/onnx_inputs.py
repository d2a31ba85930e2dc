#!/usr/bin/env python3
"""onnx_inputs.py MODEL_DIR: the onnx2qir flags that fix a model's inputs to
those of its test_data_set_0, printed on one line:

    --shape NAME=D0,D1,... for each input, --bind NAME=FILE for scalar integer
    inputs (control values such as a sample rate, which decide the graph).

Reads the protobuf wire format with scripts/conformance.py (standard library
only): the graph's input names that are not initializers, and each
input_K.pb's TensorProto dims, data_type and name.  Input K of the
data set feeds the K-th graph input that is not an initializer, unless the
TensorProto names one.  As a module: model_inputs(dir) -> [(name, file, dims,
dtype, bound)], and bench_models(onnx_tests, smoke_model) lists the models
the benchmarks run.
"""
import os
import sys

# The protobuf reading is the conformance runner's (scripts/conformance.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from conformance import model_io, tensor_header  # noqa: E402

INT_TYPES = {2, 3, 4, 5, 6, 7, 12, 13}   # ONNX integer data types


def graph_inputs(model_path):
    return model_io(model_path)[0]


def tensor_info(path):
    """(name, dims, data_type) of a TensorProto file."""
    with open(path, "rb") as f:
        return tensor_header(f.read())[:3]


def model_inputs(model_dir, data_set="test_data_set_0"):
    names = graph_inputs(os.path.join(model_dir, "model.onnx"))
    ds = os.path.join(model_dir, data_set)
    files = sorted((f for f in os.listdir(ds) if f.startswith("input_") and f.endswith(".pb")),
                   key=lambda f: int(f[6:-3]))
    out = []
    for k, f in enumerate(files):
        path = os.path.join(ds, f)
        tname, dims, dtype = tensor_info(path)
        name = tname if tname in names else (names[k] if k < len(names) else tname)
        out.append((name, path, dims, dtype, not dims and dtype in INT_TYPES))
    return out


def bench_models(onnx_tests, smoke_model=None):
    """The model folders a benchmark runs: only smoke_model (a path under
    onnx_tests) when given, else every one under light/ and models/."""
    if smoke_model:
        d = os.path.join(onnx_tests, smoke_model)
        return [d] if os.path.isfile(os.path.join(d, "model.onnx")) else []
    out = []
    for group in ("light", "models"):
        root = os.path.join(onnx_tests, group)
        for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            if os.path.isfile(os.path.join(root, name, "model.onnx")):
                out.append(os.path.join(root, name))
    return out


def onnx2qir_flags(model_dir):
    flags = []
    for name, path, dims, dtype, bound in model_inputs(model_dir):
        if bound:
            flags += ["--bind", "%s=%s" % (name, path)]
        else:
            flags += ["--shape", "%s=%s" % (name, ",".join(str(d) for d in dims))]
    return flags


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: onnx_inputs.py MODEL_DIR")
    # One flag per line: names may hold spaces; read with `while read`.
    print("\n".join(onnx2qir_flags(sys.argv[1])))
