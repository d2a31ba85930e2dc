#!/bin/sh
# install-check.sh: `make install` into a temporary prefix, then `make
# uninstall` from it (make check runs this).  Checks that every tool lands in
# PREFIX/bin and runs from there, that every man page lands in
# PREFIX/share/man/man1 (and man finds it, where man is installed), and that
# uninstall leaves no file behind.  Ends with "N passed, N failed, N skipped".
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
tools="onnx2qir qopt qcodegen qviz qrun"
prefix=$(mktemp -d "${TMPDIR:-/tmp}/qir-install-XXXXXX")
trap 'rm -rf "$prefix"' EXIT
pass=0 fail=0 skip=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

if ! make -s install PREFIX="$prefix" >"$prefix.log" 2>&1; then
  cat "$prefix.log"; rm -f "$prefix.log"
  bad "make install PREFIX=$prefix"
  echo "$pass passed, $fail failed, $skip skipped"
  exit 1
fi
rm -f "$prefix.log"
for t in $tools; do
  if [ -x "$prefix/bin/$t" ] && "$prefix/bin/$t" --help >/dev/null 2>&1; then ok "bin/$t runs"; else bad "bin/$t missing or does not run"; fi
  page=$prefix/share/man/man1/$t.1
  if [ -f "$page" ] && cmp -s "$page" "docs/man/$t.1"; then ok "share/man/man1/$t.1"; else bad "share/man/man1/$t.1 missing or not docs/man/$t.1"; fi
  if command -v man >/dev/null 2>&1; then
    if [ "$(MANPATH="$prefix/share/man" man -w "$t" 2>/dev/null)" = "$page" ]; then ok "man -w $t finds the page"; else bad "man -w $t with MANPATH=$prefix/share/man"; fi
  else
    skip=$((skip + 1)); echo "SKIPPED: man -w $t (no man)"
  fi
done
if make -s uninstall PREFIX="$prefix" >/dev/null 2>&1 && [ -z "$(find "$prefix" -type f)" ]; then
  ok "make uninstall leaves no file"
else
  bad "make uninstall left: $(find "$prefix" -type f | tr '\n' ' ')"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
