#!/bin/sh
# Greedy generation with KV-cache decoding, each step a compiled C program,
# checked token by token against ONNX Runtime.
#
#   sh examples/generate.sh [N]        N new tokens, 1..16 (default 8)
#
# The model is test/gpt/gen_gpt.py's small GPT-style decoder (vocabulary 96,
# 2 layers, 4 heads, learned positions, tied LM head), made from a fixed seed
# with /usr/bin/python3 and its onnx module: prefill.onnx (input_ids [1, seq]
# -> logits and the present keys and values) and decode.onnx (one token and
# the past keys and values [1, 4, past, 16] -> logits and presents of past + 1,
# a Concat on the sequence axis).  From the prompt in test/gpt/refs/greedy/
# prompt.txt, this script
#   1. compiles the prefill at the prompt's length (onnx2qir --dim seq=L, qopt
#      -canonicalize -roller -welder -rammer -grinder, qcodegen -c -main, cc),
#      runs it and takes the argmax of the last position's logits;
#   2. for each next token, compiles the decode step at that past length
#      (--dim past=P; once per length), feeds the previous step's present
#      tensors back as its past and takes the argmax again;
# and compares each token with the sequence ONNX Runtime generated greedily
# from the same prompt (test/gpt/refs/greedy/tokens.txt, made by
# test/gpt/make_refs.py).  It prints the tokens and "K/N tokens match ONNX
# Runtime"; the exit status is 1 when a token differs.  Tools come from
# $QIR_BIN (default build/bin: run `make` first), the C compiler is $CC
# (default cc); no GPU.  The work files go to a temporary folder, removed at
# the end (set GENERATE_KEEP=DIR to keep them in DIR instead; a program
# already there for a length is reused, so empty DIR after rebuilding the tools).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${QIR_BIN:-$top/build/bin}
cc=${CC:-cc}
python=${PYTHON:-/usr/bin/python3}
refs=$top/test/gpt/refs/greedy
n=${1:-8}

case $n in
''|*[!0-9]*) echo "usage: generate.sh [N] (N new tokens, 1..16)" >&2; exit 2 ;;
esac
want_all=$(cat "$refs/tokens.txt")
max=$(echo $want_all | wc -w)
if [ "$n" -lt 1 ] || [ "$n" -gt "$max" ]; then
    echo "generate.sh: N must be 1..$max (ONNX Runtime's stored sequence has $max tokens)" >&2
    exit 2
fi
for tool in onnx2qir qopt qcodegen; do
    [ -x "$bin/$tool" ] || { echo "generate.sh: $bin/$tool is missing: run make" >&2; exit 2; }
done
if ! "$python" -c "import onnx, numpy" 2>/dev/null; then
    echo "generate.sh: $python with the onnx and numpy modules makes the model: apt-get install python3-onnx python3-numpy" >&2
    exit 2
fi

if [ -n "${GENERATE_KEEP:-}" ]; then
    work=$GENERATE_KEEP
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/qir-generate.XXXXXX")
    trap 'rm -rf "$work"' EXIT
fi

# tokens: writes input_ids as a [1, n] int64 .npy; argmax: the token with
# the largest logit at the last position of a [1, S, V] float32 .npy.
cat > "$work/tokens.c" <<'EOF'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_ids(const char *path, int n, char **ids) {
    char header[128];
    int len = snprintf(header, sizeof header, "{'descr': '<i8', 'fortran_order': False, 'shape': (1, %d), }", n);
    int total = 10 + len + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); return 1; }
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    uint16_t hlen = (uint16_t)(len + pad + 1);
    unsigned char hl[2] = { (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8) };
    fwrite(hl, 1, 2, f);
    fwrite(header, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        int64_t v = strtoll(ids[i], NULL, 10);
        fwrite(&v, sizeof v, 1, f);
    }
    return fclose(f) != 0;
}

static int argmax_last(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return 1; }
    unsigned char pre[10];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] != 1) {
        fprintf(stderr, "%s: not a version 1 .npy file\n", path);
        return 1;
    }
    size_t hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    char *header = calloc(hlen + 1, 1);
    if (!header || fread(header, 1, hlen, f) != hlen || !strstr(header, "'<f4'")) {
        fprintf(stderr, "%s: expected float32 logits\n", path);
        return 1;
    }
    const char *close = strrchr(header, ')'), *p = close;
    while (p > header && p[-1] != ',' && p[-1] != '(') p--;
    long vocab = strtol(p, NULL, 10);
    fseek(f, 0, SEEK_END);
    long count = (ftell(f) - 10 - (long)hlen) / 4;
    if (vocab <= 0 || count < vocab || !close) {
        fprintf(stderr, "%s: cannot read the logits' shape\n", path);
        return 1;
    }
    float *row = malloc((size_t)vocab * sizeof *row);
    fseek(f, 10 + (long)hlen + (count - vocab) * 4, SEEK_SET);
    if (!row || fread(row, sizeof *row, (size_t)vocab, f) != (size_t)vocab) return 1;
    long best = 0;
    for (long i = 1; i < vocab; i++)
        if (row[i] > row[best]) best = i;
    printf("%ld\n", best);
    free(row);
    free(header);
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "ids") == 0) return write_ids(argv[2], argc - 3, argv + 3);
    if (argc == 3 && strcmp(argv[1], "argmax") == 0) return argmax_last(argv[2]);
    fprintf(stderr, "usage: tokens ids OUT.npy ID... | tokens argmax LOGITS.npy\n");
    return 2;
}
EOF
"$cc" -O1 -o "$work/tokens" "$work/tokens.c"
"$python" "$top/test/gpt/gen_gpt.py" --out "$work"

# compile MODEL DIM TAG: the program $work/TAG.exe for MODEL.onnx at --dim DIM
compile() {
    [ -x "$work/$3.exe" ] && return 0
    "$bin/onnx2qir" --dim "$2" "$work/$1.onnx" -o "$work/$3.qir"
    "$bin/qopt" -canonicalize -roller -welder -rammer -grinder "$work/$3.qir" -o "$work/$3.o.qir"
    "$bin/qcodegen" -c -main "$work/$3.o.qir" -o "$work/$3.c" 2>"$work/$3.qcodegen.log"
    "$cc" -O1 -o "$work/$3.exe" "$work/$3.c" -lm
}

kv="present_key_0 present_value_0 present_key_1 present_value_1"
prompt=$(cat "$refs/prompt.txt")
length=$(echo $prompt | wc -w)
echo "prompt ($length tokens): $prompt"

# step 1: the prefill over the prompt
compile prefill "seq=$length" "prefill_s$length"
"$work/tokens" ids "$work/ids.npy" $prompt
outs="--out logits=$work/logits.npy"
for t in $kv; do outs="$outs --out $t=$work/$t.npy"; done
"$work/prefill_s$length.exe" --in "input_ids=$work/ids.npy" $outs
token=$("$work/tokens" argmax "$work/logits.npy")
got=$token
past=$length
step=1
while [ "$step" -lt "$n" ]; do
    # the decode step at this past length: the last token and the presents as the past
    compile decode "past=$past" "decode_p$past"
    ins="--in input_ids=$work/ids.npy"
    for t in $kv; do
        mv "$work/$t.npy" "$work/past_${t#present_}.npy"
        ins="$ins --in past_${t#present_}=$work/past_${t#present_}.npy"
    done
    "$work/tokens" ids "$work/ids.npy" "$token"
    "$work/decode_p$past.exe" $ins $outs
    token=$("$work/tokens" argmax "$work/logits.npy")
    got="$got $token"
    past=$((past + 1))
    step=$((step + 1))
done

want=$(echo $want_all | cut -d' ' -f1-"$n")
match=0
i=1
for t in $got; do
    [ "$t" = "$(echo $want | cut -d' ' -f$i)" ] && match=$((match + 1))
    i=$((i + 1))
done
echo "qir (C):      $got"
echo "ONNX Runtime: $want"
echo "$match/$n tokens match ONNX Runtime"
[ "$match" -eq "$n" ]
