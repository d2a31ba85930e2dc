#!/usr/bin/python3
"""Regenerates test/dynamic: the models of gen_models.py and ONNX Runtime's
outputs for them at several sizes of their symbolic dimensions.

    /usr/bin/python3 test/dynamic/make_refs.py [--oracle DIR]

DIR is the oracle (default /work/shared/onnx-tests/oracle, or $ONNX_TESTS/oracle;
it needs `npm install` once: copy it somewhere writable if it is read-only).
Writes cnn_batch.onnx, decode_step.onnx, seg_hw.onnx next to this script, then
refs/<model>_<tag>/ in ONNX's test layout (input_N.pb in the model's input order,
output_N.pb from `node gen_ref.js`):

    cnn_batch_b1, _b3, _b16      x [batch, 3, 16, 16] -> y, p [batch, 10]
    cnn_batch_b17_out_of_range   x [17, 3, 16, 16], inputs only (past a 1..16 bound)
    decode_step_p1, _p5, _p64    x [1, 1, 32], past_key, past_value [1, 4, past, 8]
                                 -> y [1, 1, 32], present_key, present_value [1, 4, past+1, 8]
    decode_step_p65_out_of_range inputs only, past 65 (past a 1..64 bound)
    seg_hw_h32w32, _h64w96, _h96w64
                                 img [1, 3, H, W] -> prob [1, 1, H, W]

Inputs come from fixed RandomState seeds (one per data set), so a rerun writes
the same files, up to ONNX Runtime's own rounding should its version change.
Each output's shape is checked against the one expected for its size.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_models  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REFS = os.path.join(HERE, "refs")
H, D = gen_models.DEC_HEADS, gen_models.DEC_HEAD_DIM


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def write_inputs(ds, feeds):
    """feeds: (name, array) in the model's input order."""
    os.makedirs(ds, exist_ok=True)
    for i, (name, arr) in enumerate(feeds):
        assert arr.dtype == np.float32
        with open(os.path.join(ds, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(arr, name).SerializeToString())


def run_oracle(oracle, model, ds, want_shapes):
    r = subprocess.run(["node", "gen_ref.js", model, ds], cwd=oracle, capture_output=True, text=True)
    if r.returncode != 0 or "ERROR" in r.stdout:
        sys.exit("oracle failed on %s: %s%s" % (ds, r.stdout, r.stderr))
    outs = [read_pb(os.path.join(ds, "output_%d.pb" % i)) for i in range(len(want_shapes))]
    if os.path.exists(os.path.join(ds, "output_%d.pb" % len(want_shapes))):
        sys.exit("%s: more outputs than expected" % ds)
    for i, (o, want) in enumerate(zip(outs, want_shapes)):
        if tuple(o.shape) != tuple(want) or o.dtype != np.float32 or not np.all(np.isfinite(o)):
            sys.exit("%s: output_%d is %s %s, want float32 %s, finite" % (ds, i, o.dtype, o.shape, want))
    return outs


def summary(tag, outs):
    return "%-28s %s" % (tag, "  ".join("%s [%.3g, %.3g]" % (list(o.shape), o.min(), o.max()) for o in outs))


def main():
    ap = argparse.ArgumentParser()
    default = os.path.join(os.environ.get("ONNX_TESTS", "/work/shared/onnx-tests"), "oracle")
    ap.add_argument("--oracle", default=default)
    a = ap.parse_args()
    oracle = os.path.abspath(a.oracle)
    if not os.path.isdir(os.path.join(oracle, "node_modules")):
        sys.exit("%s has no node_modules: run `npm install` there" % oracle)
    models = gen_models.write_all(HERE)
    shutil.rmtree(REFS, ignore_errors=True)

    def data_set(model, tag, seed, make_feeds, want_shapes):
        ds = os.path.join(REFS, "%s_%s" % (model, tag))
        write_inputs(ds, make_feeds(np.random.RandomState(seed)))
        if want_shapes is None:  # a size past the bound: inputs only
            print("%-28s inputs only" % os.path.basename(ds))
            return
        print(summary(os.path.basename(ds), run_oracle(oracle, models[model], ds, want_shapes)))

    for seed, batch, tag in ((101, 1, "b1"), (103, 3, "b3"), (116, 16, "b16"), (117, 17, "b17_out_of_range")):
        data_set("cnn_batch", tag, seed,
                 lambda rng: [("x", rng.standard_normal((batch, 3, 16, 16)).astype(np.float32))],
                 None if batch > 16 else [(batch, 10), (batch, 10)])

    def decode_feeds(past):
        def make(rng):
            return [("x", rng.standard_normal((1, 1, gen_models.DEC_D)).astype(np.float32)),
                    ("past_key", (rng.standard_normal((1, H, past, D)) * 2).astype(np.float32)),
                    ("past_value", rng.standard_normal((1, H, past, D)).astype(np.float32))]
        return make

    for seed, past, tag in ((201, 1, "p1"), (205, 5, "p5"), (264, 64, "p64"), (265, 65, "p65_out_of_range")):
        data_set("decode_step", tag, seed, decode_feeds(past),
                 None if past > 64 else [(1, 1, gen_models.DEC_D), (1, H, past + 1, D), (1, H, past + 1, D)])

    for seed, (h, w) in ((332, (32, 32)), (364, (64, 96)), (396, (96, 64))):
        data_set("seg_hw", "h%dw%d" % (h, w), seed,
                 lambda rng: [("img", rng.uniform(0, 1, (1, 3, h, w)).astype(np.float32))],
                 [(1, 1, h, w)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
