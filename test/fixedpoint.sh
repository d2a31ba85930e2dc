#!/bin/sh
# fixedpoint.sh: every .qir under test/ reaches the printer's fixed point:
# parse, print, parse, print gives the same bytes twice.  Files whose RUN lines
# expect qopt to fail (`not qopt`) are skipped; any other file that does not
# parse is an offender too, unless it sits in an Inputs/ folder (inputs of
# other tests, which may be broken on purpose).  No verifier runs: this checks
# the text form only.  Exits non-zero listing the offenders.
#   sh test/fixedpoint.sh            (builds its checker into build/fixedpoint)
set -u
cd "$(dirname "$0")/.."
OUT=${FIXEDPOINT_BUILD:-build/fixedpoint}
GEN=$OUT/gen
mkdir -p "$GEN"
bison -Wall -Werror -d -o "$GEN/qir.tab.c" grammar/qir.y &&
flex --header-file="$GEN/lex.yy.h" -o "$GEN/lex.yy.c" grammar/qir.l &&
${CC:-cc} -std=c11 -O1 -g -D_POSIX_C_SOURCE=200809L -I qir -I "$GEN" \
  test/fuzz/standalone_main.c test/fuzz/fuzz_parse.c qir/parse.c qir/print.c qir/ir.c qir/diag.c qir/symdim.c \
  "$GEN/qir.tab.c" "$GEN/lex.yy.c" -lm -o "$OUT/roundtrip" || { echo "fixedpoint.sh: build failed" >&2; exit 2; }

checked=0 skipped=0 bad=""
for f in $(find test -name '*.qir' | sort); do
  if grep -q 'not  *qopt' "$f"; then
    skipped=$((skipped + 1))
    continue
  fi
  res=$("$OUT/roundtrip" "$f" 2>"$OUT/err")
  rc=$?
  if [ $rc -eq 1 ] && case $f in */Inputs/*) true ;; *) false ;; esac; then
    skipped=$((skipped + 1))
    continue
  fi
  checked=$((checked + 1))
  if [ $rc -ne 0 ]; then
    bad="$bad $f"
    echo "OFFENDER: $f: ${res:-not a fixed point}" >&2
    head -20 "$OUT/err" >&2
  fi
done
echo "fixedpoint.sh: $checked files reach the fixed point check, $skipped skipped"
if [ -n "$bad" ]; then
  echo "fixedpoint.sh: offenders:$bad" >&2
  exit 1
fi
