#!/bin/sh
# viz-check.sh: every real model draws.  For each model in $ONNX_TESTS/models
# and $ONNX_TESTS/light: onnx2qir (then qopt -roller when qopt has it, so the
# tile tables have plans, and the same after -welder, so kernel groups are
# drawn), then `qviz -graph` and `qviz -tiles`, each piped
# through `dot -Tsvg`; a check passes when dot exits 0 and prints nothing
# (Graphviz warns about bad escapes, bad UTF-8, bad HTML labels).  The
# hand-written modules of test/lit/qviz are drawn the same way, so the check
# means something before the importer exists.
# Ends with the line "N passed, N failed, N skipped".
#   QIR_BIN   where the tools are (default build/bin)
#   ONNX_TESTS the shared test data (default ../shared/onnx-tests)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${QIR_BIN:-$top/build/bin}
: "${ONNX_TESTS:=$top/../shared/onnx-tests}"
pass=0 fail=0 skip=0
work=$(mktemp -d "${TMPDIR:-/tmp}/viz-check.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

if ! command -v dot >/dev/null 2>&1; then
  echo "SKIPPED: Graphviz's dot is not installed (apt-get install graphviz)"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
if [ ! -x "$bin/qviz" ]; then
  echo "FAIL: no $bin/qviz (build first: make)"
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi

# draw NAME VIEW QIR: one qviz view through dot, silent and successful
draw() {
  name=$1 view=$2 qir=$3
  if ! "$bin/qviz" "$view" "$qir" >"$work/out.dot" 2>"$work/qviz.err"; then
    echo "FAIL: $name qviz $view: $(head -n 3 "$work/qviz.err")"
    fail=$((fail + 1))
    return
  fi
  if ! dot -Tsvg -o "$work/out.svg" "$work/out.dot" 2>"$work/dot.err" || [ -s "$work/dot.err" ]; then
    echo "FAIL: $name qviz $view | dot -Tsvg: $(head -n 3 "$work/dot.err")"
    fail=$((fail + 1))
    return
  fi
  echo "PASS: $name $view ($(grep -c -- '->' "$work/out.dot") edges, $(wc -c <"$work/out.svg") bytes of SVG)"
  pass=$((pass + 1))
}

roller="" welder=""
if [ -x "$bin/qopt" ] && "$bin/qopt" -print-passes 2>/dev/null | grep -q '^-roller'; then roller=1; fi
if [ -x "$bin/qopt" ] && "$bin/qopt" -print-passes 2>/dev/null | grep -q '^-welder'; then welder=1; fi

for f in "$top"/test/lit/qviz/*.qir; do
  [ -e "$f" ] || continue
  grep -q 'RUN: qviz -veu' "$f" && draw "lit/$(basename "$f")" -veu "$f"
  draw "lit/$(basename "$f")" -graph "$f"
  draw "lit/$(basename "$f")" -tiles "$f"
done

if [ ! -d "$ONNX_TESTS" ]; then
  echo "SKIPPED: ONNX models: no test data at ONNX_TESTS=$ONNX_TESTS"
  skip=$((skip + 1))
elif [ ! -x "$bin/onnx2qir" ]; then
  echo "SKIPPED: ONNX models: no $bin/onnx2qir yet"
  skip=$((skip + 1))
else
  for dir in "$ONNX_TESTS"/models/*/ "$ONNX_TESTS"/light/*/; do
    [ -f "$dir/model.onnx" ] || continue
    name=$(basename "$dir")
    qir="$work/$name.qir"
    # Fix symbolic input shapes (and bind control scalars) to the test data's.
    set --
    if [ -d "$dir/test_data_set_0" ]; then
      python3 "$top/bench/onnx_inputs.py" "$dir" >"$work/flags" 2>"$work/import.err" || : >"$work/flags"
      while IFS= read -r flag; do set -- "$@" "$flag"; done <"$work/flags"
    fi
    if ! "$bin/onnx2qir" "$@" "$dir/model.onnx" -o "$qir" 2>"$work/import.err"; then
      # The importer's coverage is tested elsewhere; here it only feeds qviz.
      echo "SKIPPED: $name: onnx2qir failed: $(head -n 1 "$work/import.err")"
      skip=$((skip + 2))
      continue
    fi
    if [ -n "$roller" ]; then
      if "$bin/qopt" -roller "$qir" -o "$work/$name.roller.qir" 2>"$work/roller.err"; then
        qir="$work/$name.roller.qir"
      else
        echo "NOTE: $name: qopt -roller failed, drawing the unplanned module: $(head -n 1 "$work/roller.err")"
      fi
    fi
    draw "$name" -graph "$qir"
    draw "$name" -tiles "$qir"
    # Welder's kernel groups drawn as clusters, their tile tables per group
    # (draw assigns name and qir: sh has no locals)
    model=$name welded="$work/$name.welder.qir"
    if [ -n "$welder" ] && "$bin/qopt" -welder "$qir" -o "$welded" 2>"$work/welder.err"; then
      draw "$model+welder" -graph "$welded"
      draw "$model+welder" -tiles "$welded"
    elif [ -n "$welder" ]; then
      echo "FAIL: $model: qopt -welder: $(head -n 1 "$work/welder.err")"
      fail=$((fail + 1))
    fi
  done
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
