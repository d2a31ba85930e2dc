#!/bin/sh
# check-man.sh: the man pages in docs/man/ against the tools.
#   - every option and pass a tool's --help lists appears in docs/man/TOOL.1
#     (spelled as roff writes it, \-\-name), so a new flag cannot stay
#     undocumented;
#   - each page formats without warnings (groff -man -ww), where groff exists.
# Prints one line per tool; exits 1 on any problem.  Tools come from $QIR_BIN
# (default build/bin).  test/lit/docs/man-pages.test runs it.
set -eu
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
bin=${QIR_BIN:-$here/../build/bin}
status=0

for tool in onnx2qir qopt qcodegen qviz qrun; do
  page=$here/man/$tool.1
  if [ ! -f "$page" ]; then
    echo "$tool: no man page $page"
    status=1
    continue
  fi
  # the first word of every help line that starts with a dash: "-o", "--help,", "-fold-limit=N"
  opts=$("$bin/$tool" --help | sed -n 's/^ \{1,\}\(-[^ ]*\).*/\1/p' | tr ',' '\n' | sed 's/=.*//' | grep -- '^-.' | sort -u)
  n=0
  missing=
  for o in $opts; do
    n=$((n + 1))
    roff=$(printf '%s' "$o" | sed 's/-/\\-/g')
    grep -qF -- "$roff" "$page" || missing="$missing $o"
  done
  if [ "$n" -eq 0 ]; then
    echo "$tool: --help lists no options"
    status=1
  elif [ -n "$missing" ]; then
    echo "$tool: not in $tool.1:$missing"
    status=1
  else
    echo "$tool: $n options from --help, all in $tool.1"
  fi
done

if command -v groff >/dev/null 2>&1; then
  for page in "$here"/man/*.1; do
    warnings=$(groff -man -ww -z "$page" 2>&1 || true)
    if [ -n "$warnings" ]; then
      echo "$(basename "$page"): groff warnings:"
      echo "$warnings"
      status=1
    fi
  done
  echo "groff: pages format cleanly"
else
  echo "groff: not installed, formatting not checked"
fi
exit $status
