#!/bin/sh
# docs-pictures.sh: redraws the pictures README.md shows, from real models of
# $ONNX_TESTS (the test data beside the checkout):
#   docs/img/silero_vad_v5-graph.svg   qviz -graph of Silero VAD v5 after
#                                      qopt -canonicalize -roller (LSTM as a loop
#                                      region, constants folded, tile summaries)
#   docs/img/squeezenet-tiles.svg      qviz -tiles -top 8 of SqueezeNet: Roller's
#                                      plan for the 8 most expensive operators
# Needs the tools (QIR_BIN, default build/bin) and Graphviz's dot.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${QIR_BIN:-$top/build/bin}
: "${ONNX_TESTS:=$top/../shared/onnx-tests}"
out=$top/docs/img
for t in onnx2qir qopt qviz; do
  [ -x "$bin/$t" ] || { echo "docs-pictures: no $bin/$t (build first: make)" >&2; exit 1; }
done
[ -d "$ONNX_TESTS" ] || { echo "docs-pictures: no test data at ONNX_TESTS=$ONNX_TESTS" >&2; exit 1; }
command -v dot >/dev/null 2>&1 || { echo "docs-pictures: Graphviz's dot is not installed" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/docs-pictures.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$out"

# plan MODEL_DIR NAME: import with the test data's input shapes, then plan.
plan() {
  model=$1 name=$2
  set --
  python3 "$top/bench/onnx_inputs.py" "$model" >"$work/flags"
  while IFS= read -r flag; do set -- "$@" "$flag"; done <"$work/flags"
  "$bin/onnx2qir" "$@" "$model/model.onnx" -o "$work/m.qir"
  "$bin/qopt" -canonicalize -roller "$work/m.qir" -o "$work/$name.qir"
}

plan "$ONNX_TESTS/models/silero_vad_v5" silero
"$bin/qviz" -graph -T svg -o "$out/silero_vad_v5-graph.svg" "$work/silero.qir"
plan "$ONNX_TESTS/light/light_squeezenet" squeezenet
"$bin/qviz" -tiles -top 8 -T svg -o "$out/squeezenet-tiles.svg" "$work/squeezenet.qir"
echo "docs-pictures: wrote $out/silero_vad_v5-graph.svg $out/squeezenet-tiles.svg"
