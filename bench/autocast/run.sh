#!/bin/sh
# bench/autocast/run.sh [--quick] [--filter NAME] [--modes f16,bf16,tf32] [run.py options]:
# issue 26's mixed-precision goal table (see bench/autocast/README.md and run.py).
top=$(cd "$(dirname "$0")/../.." && pwd)
: "${QIR_BIN:=$top/build/bin}"
: "${ONNX_TESTS:=$top/../shared/onnx-tests}"
export QIR_BIN ONNX_TESTS
exec python3 "$top/bench/autocast/run.py" "$@"
