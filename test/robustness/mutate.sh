#!/bin/sh
# Adversarial inputs for every qir tool: damaged .qir files (truncated, random
# and non-UTF-8 bytes, unbalanced brackets, huge numbers, wrong types and
# shapes, undefined values), valid modules with extreme attributes and shapes,
# corrupt and semantically broken ONNX models, and bad .npy / .pb tensors for
# qrun.  Every run must end in exit status 0 or 1 with a located message, no
# sanitizer report, no crash and no hang.  See test/robustness/mutate.py.
#
#   QIR_BIN=build/asan/bin sh test/robustness/mutate.sh [mutate.py options]
#
# Fixed seed and case counts: about a minute on 2 cores with an ASan build.
# Last line: `N passed, N failed, N skipped`; exit status 1 on any failure.
# Failing inputs are kept in build/mutate-failures/ (override with --keep DIR).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${QIR_BIN:=$top/build/bin}"
export QIR_BIN
: "${ONNX_TESTS:=$top/../shared/onnx-tests}"
export ONNX_TESTS
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIPPED: mutate (python3 not found)"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
exec python3 "$here/mutate.py" --seed 1 --cases 800 --semantic-cases 200 --extreme-cases 300 \
  --onnx-cases 250 --onnx-all-cases 200 --tensor-cases 120 -j "${JOBS:-2}" "$@"
