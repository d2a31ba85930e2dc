#!/usr/bin/python3
"""Regenerates test/gpt/refs: ONNX Runtime's outputs for the models of gen_gpt.py.

    /usr/bin/python3 test/gpt/make_refs.py [--oracle DIR]

DIR is the oracle (default /work/shared/onnx-tests/oracle, or $ONNX_TESTS/oracle;
run `npm install` there once).  It writes, each as ONNX's test layout
(input_N.pb in the model's input order, output_N.pb from `node gen_ref.js`):

    refs/prefill_s8/   input_ids [1, 8] -> logits, present_key_0, present_value_0,
                       present_key_1, present_value_1
    refs/decode_p8/    the next token (argmax of prefill_s8's last logits) and
                       prefill_s8's present tensors as the past -> logits, present_*
    refs/decode_p13/   a token and past tensors drawn from the seed -> logits, present_*
    refs/greedy/prompt.txt, tokens.txt
                       a 5-token prompt and the 16 tokens ONNX Runtime generates
                       from it greedily (prefill at 5, then decode at past 5..19,
                       each step's present tensors fed back as the next past)

About 60 KB in all.  Inputs come from a fixed RandomState seed, so rerunning
rewrites the same files (up to ONNX Runtime's own rounding, should its version
change).  The smallest gap between the top two logits along the greedy path is
printed: the compiled programs must agree with ONNX Runtime far more closely
than that for generate.sh's tokens to match.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_gpt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REFS = os.path.join(HERE, "refs")
PROMPT_LEN, NEW_TOKENS = 5, 16
PAST_NAMES = ["past_%s_%d" % (kv, l) for l in range(gen_gpt.LAYERS) for kv in ("key", "value")]


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def run_oracle(oracle, model, feeds, ds):
    """feeds: (name, array) in the model's input order; returns the outputs in its output order."""
    os.makedirs(ds, exist_ok=True)
    for i, (name, arr) in enumerate(feeds):
        with open(os.path.join(ds, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(arr, name).SerializeToString())
    r = subprocess.run(["node", "gen_ref.js", model, ds], cwd=oracle, capture_output=True, text=True)
    if r.returncode != 0 or "ERROR" in r.stdout:
        sys.exit("oracle failed on %s: %s%s" % (ds, r.stdout, r.stderr))
    n = 1 + len(PAST_NAMES)
    return [read_pb(os.path.join(ds, "output_%d.pb" % i)) for i in range(n)]


def top2_gap(row):
    s = np.sort(row)
    return float(s[-1] - s[-2])


def main():
    ap = argparse.ArgumentParser()
    default = os.path.join(os.environ.get("ONNX_TESTS", "/work/shared/onnx-tests"), "oracle")
    ap.add_argument("--oracle", default=default)
    a = ap.parse_args()
    oracle = os.path.abspath(a.oracle)
    if not os.path.isdir(os.path.join(oracle, "node_modules")):
        sys.exit("%s has no node_modules: run `npm install` there" % oracle)
    tmp = tempfile.mkdtemp(prefix="gpt_refs_")
    try:
        gen_gpt.main_write(tmp)
        prefill, decode = os.path.join(tmp, "prefill.onnx"), os.path.join(tmp, "decode.onnx")
        rng = np.random.RandomState(2027)
        shutil.rmtree(REFS, ignore_errors=True)

        ids = rng.randint(0, gen_gpt.VOCAB, size=(1, 8)).astype(np.int64)
        out = run_oracle(oracle, prefill, [("input_ids", ids)], os.path.join(REFS, "prefill_s8"))
        nxt = np.array([[np.argmax(out[0][0, -1])]], dtype=np.int64)
        run_oracle(oracle, decode, [("input_ids", nxt)] + list(zip(PAST_NAMES, out[1:])),
                   os.path.join(REFS, "decode_p8"))

        tok = rng.randint(0, gen_gpt.VOCAB, size=(1, 1)).astype(np.int64)
        past = [(rng.standard_normal((1, gen_gpt.HEADS, 13, gen_gpt.HEAD_DIM)) * 2).astype(np.float32)
                for _ in PAST_NAMES]
        run_oracle(oracle, decode, [("input_ids", tok)] + list(zip(PAST_NAMES, past)),
                   os.path.join(REFS, "decode_p13"))

        prompt = rng.randint(0, gen_gpt.VOCAB, size=(1, PROMPT_LEN)).astype(np.int64)
        out = run_oracle(oracle, prefill, [("input_ids", prompt)], os.path.join(tmp, "g0"))
        tokens, gaps = [int(np.argmax(out[0][0, -1]))], [top2_gap(out[0][0, -1])]
        for step in range(1, NEW_TOKENS):
            feeds = [("input_ids", np.array([[tokens[-1]]], dtype=np.int64))] + list(zip(PAST_NAMES, out[1:]))
            out = run_oracle(oracle, decode, feeds, os.path.join(tmp, "g%d" % step))
            tokens.append(int(np.argmax(out[0][0, -1])))
            gaps.append(top2_gap(out[0][0, -1]))
        os.makedirs(os.path.join(REFS, "greedy"))
        with open(os.path.join(REFS, "greedy", "prompt.txt"), "w") as f:
            f.write(" ".join(str(int(t)) for t in prompt[0]) + "\n")
        with open(os.path.join(REFS, "greedy", "tokens.txt"), "w") as f:
            f.write(" ".join(str(t) for t in tokens) + "\n")
        print("prompt %s -> tokens %s; smallest top-2 logit gap %.3g" %
              (" ".join(str(int(t)) for t in prompt[0]), " ".join(map(str, tokens)), min(gaps)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
