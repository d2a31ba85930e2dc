#!/bin/sh
# bench/compile/run.sh [--smoke] [--runs N] [--bin DIR] [--keep DIR]
# Time of each pipeline stage (onnx2qir, each qopt pass, qcodegen) per model
# of $ONNX_TESTS/light and $ONNX_TESTS/models, median of several runs, as a
# table per model and per operator.  --smoke: one small model, one run.
top=$(cd "$(dirname "$0")/../.." && pwd)
exec python3 "$top/bench/compile/compile_bench.py" "$@"
