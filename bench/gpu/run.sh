#!/bin/sh
# bench/gpu/run.sh OUTDIR [bench.py options]
#
# qir against PyTorch on one GPU machine (H100/H200 with PyTorch, transformers,
# torchvision, nvcc; no network), everything in one run of under 10 minutes:
# builds BERT-base (batch 1 and 64, seq 128), ViT-B/16, ResNet-50 and
# MobileNetV2 (batch 1 and 64), an LSTM and a Seq2Seq decoder loop with random
# weights, exports them to ONNX, compiles them with our tools and nvcc, checks
# every output against PyTorch, then times ours against PyTorch eager and
# torch.compile (default, CUDA graphs), single operators against
# torch.matmul / F.conv2d, and peak device memory.  Prints one table last;
# OUTDIR gets log.txt (everything), table.md and results.json.
#
# Our tools must run there without Debian's libraries: build them statically
# here and carry the build folder, e.g.
#   make BUILD=build/static STATIC=1 -j2
#   run: sh bench/gpu/run.sh bench/out/gpu      carry: build/static
# QIR_BIN overrides where the tools are (default build/static/bin, then build/bin);
# PYTHON the interpreter that has torch (default python3).
#
# bench/gpu/run.sh --prepare DIR [prepare.py options]  (issue 23: on a machine with no GPU)
# builds the static tools and every program the one device call runs
# (bench/gpu/prepare.py: models, light/ networks, transformer layers, device
# loops, each with -canonicalize -roller and with the whole pipeline; the
# Roller top-10 operators), into DIR, under 60 MiB.  Then, on the device:
#   sh DIR/run-device.sh OUT            (bench/gpu/device.py; about 7 minutes)
# and here, first, the rehearsal that touches no GPU:
#   PYTHON=/usr/bin/python3 sh DIR/run-device.sh OUT --dry-run
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = "--prepare" ]; then
  [ $# -ge 2 ] || { echo "usage: bench/gpu/run.sh --prepare DIR" >&2; exit 2; }
  sh "$top/scripts/deps.sh" || exit 2
  make -C "$top" BUILD=build/static STATIC=1 -j2 >/dev/null || exit 2
  # onnxruntime-node (the oracle for the generated transformer layers; without
  # node and npm, prepare.py leaves those layers out and says so)
  if [ ! -d "$top/bench/cpu/node_modules/onnxruntime-node" ] && command -v npm >/dev/null; then
    (cd "$top/bench/cpu" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund \
      --onnxruntime-node-install=skip >/dev/null) || echo "run.sh: npm install failed: no transformer layers" >&2
  fi
  dir=$2
  shift 2
  rm -rf "$dir" && mkdir -p "$dir" || exit 2
  QIR_BIN=$top/build/static/bin exec python3 "$top/bench/gpu/prepare.py" "$dir" "$@"
fi
if [ $# -lt 1 ]; then
  echo "usage: bench/gpu/run.sh OUTDIR [bench.py options]" >&2
  exit 2
fi
out=$1
shift
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
log=$out/log.txt
: >"$log"
say() { echo "$*" | tee -a "$log"; }

bin=${QIR_BIN:-}
if [ -z "$bin" ]; then
  for d in "$top/build/static/bin" "$top/build/bin"; do
    if [ -x "$d/onnx2qir" ]; then bin=$d; break; fi
  done
fi
if [ -z "$bin" ]; then
  say "run.sh: no tools found (build/static/bin or build/bin); build them statically and carry them:"
  say "  make BUILD=build/static STATIC=1 -j2"
  exit 2
fi
for t in onnx2qir qopt qcodegen; do
  if ! "$bin/$t" --help >/dev/null 2>>"$log"; then
    say "run.sh: $bin/$t does not run here (see $log): link it statically (make STATIC=1)"
    exit 2
  fi
done

if [ -z "${QIR_COMMIT:-}" ]; then
  QIR_COMMIT=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$top" diff --quiet HEAD 2>/dev/null || QIR_COMMIT="$QIR_COMMIT+dirty"
fi
export QIR_COMMIT
say "qir GPU benchmark: tools $bin, commit $QIR_COMMIT, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
{ nvidia-smi 2>&1 || echo "nvidia-smi: not available"; } >>"$log"
PATH=$PATH:/usr/local/cuda/bin
export PATH

# The Python driver keeps its own budget (540 s); the timeout is the backstop
# that still leaves it time to print the table (SIGINT first).
rm -f "$out/.rc"
{
  timeout --signal=INT --kill-after=15 575 "${PYTHON:-python3}" -u "$top/bench/gpu/bench.py" --out "$out" --bin "$bin" "$@"
  echo $? >"$out/.rc"
} 2>&1 | tee -a "$log"
rc=$(cat "$out/.rc" 2>/dev/null || echo 1)
rm -f "$out/.rc"
say "full log: $log"
exit $rc
