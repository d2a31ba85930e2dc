#!/bin/sh
# gen-ops.sh: builds docs/ops.md, the op reference, from
#   docs/ops.md.in         the prose, with directives (below)
#   qir/ops.def            operand / result / region counts and flags of every op
#   docs/examples/ops/*.qir one example module per op, and what `qopt -lower`
#                          makes of it (its tensor-expression form)
#
#   docs/gen-ops.sh                 rewrite docs/ops.md
#   docs/gen-ops.sh -o FILE         write FILE instead ('-' = stdout)
#   docs/gen-ops.sh --run-examples  run every example with qrun before and after
#                                   -lower and compare (a check, writes nothing)
#
# Tools come from $QIR_BIN (default build/bin).  Directives, each alone on a line:
#   @@index@@          the list of all ops by ops.def section, with links
#   @@op NAME@@        the heading of op NAME and its ops.def facts
#   @@example NAME@@   docs/examples/ops/NAME.qir and its lowered compute ops
#   @@roller NAME@@    the lines `qopt -roller` changes in that example
# The script fails when an op of ops.def has no @@op, an @@op names no op, an
# example is missing, does not verify or is not in canonical (printer) form,
# so a new op or a changed printer cannot leave the page silently stale.
# test/lit/docs/ops-md.test diffs docs/ops.md against this script's output.
# shellcheck disable=SC2016 # backquotes in printf formats are markdown, not expansions
set -eu
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=${QIR_BIN:-$repo/build/bin}
qopt=$bin/qopt
qrun=$bin/qrun
template=$here/ops.md.in
opsdef=$repo/qir/ops.def
examples=$here/examples/ops
out=$here/ops.md
mode=generate

while [ $# -gt 0 ]; do
  case $1 in
  -o) [ $# -ge 2 ] || { echo "gen-ops.sh: -o needs a file" >&2; exit 2; }; out=$2; shift 2 ;;
  --run-examples) mode=run; shift ;;
  -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "gen-ops.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

for t in "$qopt" "$qrun"; do
  [ -x "$t" ] || { echo "gen-ops.sh: $t not found (build first, or set QIR_BIN)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# ops.def rows as "section|name|min|max|results|regions|flags", in table order.
awk '
  /^\/\* ---- / { s = $0; sub(/^\/\* ---- /, "", s); sub(/ *[;:(].*/, "", s); sub(/ *\*\/.*/, "", s); section = s }
  /^QIR_OP\(/ {
    line = $0; sub(/^QIR_OP\(/, "", line); sub(/\).*/, "", line)
    n = split(line, f, ",")
    for (i = 1; i <= n; i++) gsub(/^ +| +$|"/, "", f[i])
    printf "%s|%s|%s|%s|%s|%s|%s\n", section, f[2], f[3], f[4], f[5], f[6], f[7]
  }' "$opsdef" > "$tmp/ops"
[ -s "$tmp/ops" ] || { echo "gen-ops.sh: no QIR_OP rows in $opsdef" >&2; exit 1; }

# ---------------------------------------------------------------- --run-examples
if [ $mode = run ]; then
  status=0
  for f in "$examples"/*.qir; do
    name=$(basename "$f" .qir)
    n=$(grep -c '^  output ' "$f" || true)
    outs=''
    exps=''
    k=0
    while [ $k -lt "$n" ]; do
      outs="$outs --out $tmp/o$k.npy"
      exps="$exps --expect $tmp/o$k.npy"
      k=$((k + 1))
    done
    "$qopt" -lower "$f" -o "$tmp/lowered.qir"
    # shellcheck disable=SC2086 # word splitting of the option lists is meant
    if "$qrun" "$f" $outs >/dev/null && "$qrun" "$tmp/lowered.qir" $exps --rtol 1e-5 --atol 1e-6 > "$tmp/cmp" 2>&1; then
      echo "ok: $name"
    else
      echo "MISMATCH: $name"
      sed 's/^/  /' "$tmp/cmp"
      status=1
    fi
  done
  exit $status
fi

# ---------------------------------------------------------------- generate
fail() { echo "gen-ops.sh: $*" >&2; exit 1; }

facts() { # the ops.def row of $1 as one line of markdown
  awk -F'|' -v op="$1" '
    $2 == op {
      ops = $3 == $4 ? $3 : ($4 == "-1" ? $3 " or more" : $3 " to " $4)
      res = $5; if ($7 ~ /VARIADIC_RESULTS/) res = res " or more"
      fl = $7; gsub(/QIR_OPF_/, "", fl); gsub(/ *\| */, ", ", fl); fl = tolower(fl)
      if (fl == "0") fl = "none"
      printf "*ops.def:* operands %s, results %s, regions %s; flags: %s.\n", ops, res, $6, fl
      found = 1
    }
    END { exit !found }' "$tmp/ops"
}

example() { # the example of $1 and its lowered form
  f=$examples/$1.qir
  [ -f "$f" ] || fail "no example $f for @@example $1"
  "$qopt" "$f" > "$tmp/canon" 2> "$tmp/err" || { cat "$tmp/err" >&2; fail "example $f does not verify"; }
  cmp -s "$tmp/canon" "$f" || fail "example $f is not in canonical form (qopt $f -o $f fixes it)"
  "$qopt" -lower "$f" > "$tmp/lowered" 2> "$tmp/err" || { cat "$tmp/err" >&2; fail "qopt -lower fails on $f"; }
  echo "$1" >> "$tmp/used"
  printf 'Example (`docs/examples/ops/%s.qir`):\n\n```\n' "$1"
  cat "$f"
  printf '```\n\n'
  # the lines -lower adds: the compute ops that replace the named ones
  grep -vxF -f "$tmp/canon" "$tmp/lowered" > "$tmp/new" || true
  if [ -s "$tmp/new" ]; then
    printf 'What `qopt -lower` writes in place of the named ops:\n\n```\n'
    sed 's/^  //' "$tmp/new"
    printf '```\n'
  else
    printf '`qopt -lower` leaves this module unchanged: no named op in it has a compute form.\n'
  fi
}

roller() { # the lines -roller changes in the example $1
  f=$examples/$1.qir
  [ -f "$f" ] || fail "no example $f for @@roller $1"
  "$qopt" "$f" > "$tmp/canon" || fail "example $f does not verify"
  "$qopt" -roller "$f" > "$tmp/planned" || fail "qopt -roller fails on $f"
  printf '```\n'
  grep -vxF -f "$tmp/canon" "$tmp/planned" | sed 's/^  //' || fail "qopt -roller changes nothing in $f"
  printf '```\n'
}

index() {
  awk -F'|' '
    $1 != sec { if (sec != "") printf "\n"; sec = $1; printf "- **%s**:", sec; first = 1 }
    { printf "%s [`%s`](#%s)", first ? "" : ",", $2, $2; first = 0 }
    END { printf "\n" }' "$tmp/ops"
}

: > "$tmp/used"
: > "$tmp/documented"
{
  printf '<!-- Generated by docs/gen-ops.sh from docs/ops.md.in, qir/ops.def and\n'
  printf '     docs/examples/ops/: edit those and rerun the script. -->\n'
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in
    '@@index@@') index ;;
    '@@op '*'@@')
      name=${line#@@op }; name=${name%@@}
      printf '### %s\n\n' "$name"
      facts "$name" || fail "@@op $name: no such op in qir/ops.def"
      echo "$name" >> "$tmp/documented"
      ;;
    '@@example '*'@@')
      name=${line#@@example }; name=${name%@@}
      example "$name"
      ;;
    '@@roller '*'@@')
      name=${line#@@roller }; name=${name%@@}
      roller "$name"
      ;;
    '@@'*) fail "unknown directive: $line" ;;
    *) printf '%s\n' "$line" ;;
    esac
  done < "$template"
} > "$tmp/ops.md"

cut -d'|' -f2 "$tmp/ops" | sort > "$tmp/all"
sort "$tmp/documented" > "$tmp/doc.sorted"
missing=$(comm -23 "$tmp/all" "$tmp/doc.sorted")
[ -z "$missing" ] || fail "ops without an @@op section in $template: $(echo "$missing" | tr '\n' ' ')"
twice=$(uniq -d "$tmp/doc.sorted")
[ -z "$twice" ] || fail "ops documented twice: $(echo "$twice" | tr '\n' ' ')"
for f in "$examples"/*.qir; do basename "$f" .qir; done | sort > "$tmp/files"
unused=$(sort -u "$tmp/used" | comm -13 - "$tmp/files")
[ -z "$unused" ] || fail "examples no @@example uses: $(echo "$unused" | tr '\n' ' ')"

if [ "$out" = - ]; then cat "$tmp/ops.md"; else cp "$tmp/ops.md" "$out"; fi
