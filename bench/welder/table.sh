#!/bin/sh
# bench/welder/table.sh: what -welder does to every model of $ONNX_TESTS/light
# and models, as a markdown table: operators, kernels before and after,
# modelled global-memory bytes and time before and after (the pass's own
# model, `qopt -stats`; no GPU involved), the pass's time, and the whole
# pipeline's wall time (onnx2qir | qopt -canonicalize -roller -welder |
# qcodegen -cuda, as processes), then the generated transformer layers.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
: "${QIR_BIN:=$top/build/bin}"
: "${ONNX_TESTS:=$top/../shared/onnx-tests}"
tmp=$(mktemp -d)
row='/^welder:/ {
    for (i = 1; i <= NF; i++) {
      if ($i == "operators;") ops = $(i - 1)
      if ($i == "kernels") { kb = $(i + 1); ka = $(i + 3); sub(/;/, "", ka) }
      if ($i == "bytes") { bb = $(i + 1); ba = $(i + 3) }
      if ($i == "time") { tb = $(i + 1); ta = $(i + 3) }
      if ($i == "pass") pm = $(i + 1)
    }
    printf "| %s | %d | %d | %d | %.0f%% | %.1f | %.1f | %+.1f%% | %.1f | %.1f | %s | %.2f |\n", n, ops, kb, ka, 100 * ka / ops,
      bb / 1e6, ba / 1e6, (bb > 0 ? 100 * (ba - bb) / bb : 0), tb, ta, pm, t1 - t0
  }'
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "| model | operators | kernels before | kernels after | after/ops | global MB before | after | change | modelled us before | after | -welder ms | pipeline s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for d in "$ONNX_TESTS"/light/*/ "$ONNX_TESTS"/models/*/; do
  [ -f "$d/model.onnx" ] || continue
  n=$(basename "$d")
  args=$(python3 "$top/bench/onnx_inputs.py" "$d" 2>/dev/null) || args=""
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086 # args are separate words
  if ! "$QIR_BIN/onnx2qir" $args "$d/model.onnx" -o "$tmp/m.qir" 2>/dev/null; then
    echo "| $n | import failed |||||||||||"; continue
  fi
  "$QIR_BIN/qopt" -canonicalize -roller -welder -stats "$tmp/m.qir" -o "$tmp/w.qir" 2> "$tmp/stats"
  "$QIR_BIN/qcodegen" -cuda "$tmp/w.qir" -o "$tmp/w.cu" 2>/dev/null
  t1=$(date +%s.%N)
  awk -v n="$n" -v t0="$t0" -v t1="$t1" "$row" "$tmp/stats"
done
# The transformer layers of bench/welder/encoder.py: BERT-base (sequence 128)
# and a ViT-B/16-sized block (197 tokens; with the same mask input), written
# as .qir (no ONNX export here); the pipeline time starts after the generator.
for shape in "bert_base_layer --seq 128" "vit_b16_block --seq 197"; do
  set -- $shape
  n=$1; shift
  python3 "$top/bench/welder/encoder.py" --name "$n" "$@" > "$tmp/m.qir"
  t0=$(date +%s.%N)
  "$QIR_BIN/qopt" -canonicalize -roller -welder -stats "$tmp/m.qir" -o "$tmp/w.qir" 2> "$tmp/stats"
  "$QIR_BIN/qcodegen" -cuda "$tmp/w.qir" -o "$tmp/w.cu" 2>/dev/null
  t1=$(date +%s.%N)
  awk -v n="$n (generated)" -v t0="$t0" -v t1="$t1" "$row" "$tmp/stats"
done
