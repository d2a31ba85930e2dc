#!/usr/bin/env python3
"""onnx_inputs.py MODEL_DIR: the onnx2qir flags that fix a model's inputs to
those of its test_data_set_0, printed on one line:

    --shape NAME=D0,D1,... for each input, --bind NAME=FILE for scalar integer
    inputs (control values such as a sample rate, which decide the graph).

Reads the protobuf wire format directly (Python standard library only):
ModelProto.graph (7) -> GraphProto.input (11) / initializer (5) names, and each
input_K.pb's TensorProto dims (1), data_type (2), name (8).  Input K of the
data set feeds the K-th graph input that is not an initializer, unless the
TensorProto names one.  As a module: model_inputs(dir) -> [(name, file, dims,
dtype, bound)].
"""
import os
import sys

INT_TYPES = {2, 3, 4, 5, 6, 7, 12, 13}   # ONNX integer data types


def _varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf):
    """Yields (field number, wire type, value) of one message; value is an int
    for varints and a memoryview for length-delimited fields."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            ln, i = _varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("unsupported protobuf wire type %d" % wire)
        yield field, wire, v


def _name(msg, field):
    for f, w, v in _fields(msg):
        if f == field and w == 2:
            return bytes(v).decode("utf-8", "replace")
    return ""


def graph_inputs(model_path):
    with open(model_path, "rb") as f:
        buf = memoryview(f.read())
    graph = next((v for f, w, v in _fields(buf) if f == 7 and w == 2), None)
    if graph is None:
        raise ValueError("%s: no graph" % model_path)
    inputs, inits = [], set()
    for f, w, v in _fields(graph):
        if f == 11 and w == 2:
            inputs.append(_name(v, 1))
        elif f == 5 and w == 2:
            inits.add(_name(v, 8))
    return [n for n in inputs if n not in inits]


def tensor_info(path):
    """(name, dims, data_type) of a TensorProto file."""
    with open(path, "rb") as f:
        buf = memoryview(f.read())
    name, dims, dtype = "", [], 0
    for f, w, v in _fields(buf):
        if f == 1 and w == 0:
            dims.append(v)
        elif f == 1 and w == 2:           # packed dims
            j = 0
            while j < len(v):
                d, j = _varint(v, j)
                dims.append(d)
        elif f == 2 and w == 0:
            dtype = v
        elif f == 8 and w == 2:
            name = bytes(v).decode("utf-8", "replace")
    return name, dims, dtype


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
