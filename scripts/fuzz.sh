#!/bin/sh
# fuzz.sh: fuzz the .qir parser and printer with libFuzzer (clang).
#   FUZZ_SECONDS=600 sh scripts/fuzz.sh      (default 600 seconds)
# Seeds: every .qir under test/lit.  Crashes and the corpus go to build/fuzz/.
set -eu
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-600}
OUT=build/fuzz
GEN=$OUT/gen
CC=${FUZZ_CC:-clang}
mkdir -p "$GEN" "$OUT/corpus" "$OUT/seeds" "$OUT/crashes"

bison -Wall -Werror -d -o "$GEN/qir.tab.c" grammar/qir.y
flex --header-file="$GEN/lex.yy.h" -o "$GEN/lex.yy.c" grammar/qir.l

# The parser and printer with what they need from the library: the IR core and
# diagnostics (the rest of qir/ is not reached from qir_parse/qir_print).
"$CC" -std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I qir -I "$GEN" \
  test/fuzz/fuzz_parse.c qir/parse.c qir/print.c qir/ir.c qir/diag.c qir/symdim.c \
  "$GEN/qir.tab.c" "$GEN/lex.yy.c" -lm -o "$OUT/fuzz_parse"

find test -name '*.qir' -exec cp {} "$OUT/seeds/" \;
echo "fuzz.sh: $(ls "$OUT/seeds" | wc -l) seeds, $FUZZ_SECONDS s"
"$OUT/fuzz_parse" -max_total_time="$FUZZ_SECONDS" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$OUT/crashes/" -print_final_stats=1 "$OUT/corpus" "$OUT/seeds"
