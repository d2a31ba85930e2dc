#!/bin/sh
# bench/cpu/run.sh [--smoke] [--threads N] [--rounds R] [--passes '-canonicalize ...'] [--keep DIR]
# qir's generated C (qcodegen -c -main, cc -O3 -march=native -fopenmp) against
# ONNX Runtime on the CPU, same models, inputs and thread count; outputs are
# compared before anything is timed.  Installs onnxruntime-node into
# bench/cpu/node_modules on first use (CUDA provider download skipped).
# --smoke: one small model, one short round (make check).
top=$(cd "$(dirname "$0")/../.." && pwd)
exec python3 "$top/bench/cpu/cpu_bench.py" "$@"
