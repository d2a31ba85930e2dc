#!/bin/sh
# A qopt that miscompiles on purpose, for pass-check.test: runs the real qopt
# ($REAL_QOPT), then, if the pipeline lowers, turns every product in a compute
# expression into a sum.  The text stays canonical, so only the numbers tell.
"$REAL_QOPT" "$@" || exit
lowers=0 out=
while [ $# -gt 0 ]; do
  case $1 in
    -lower) lowers=1 ;;
    -o) shift; out=$1 ;;
  esac
  shift
done
if [ "$lowers" = 1 ] && [ -n "$out" ]; then
  sed -e '/compute/s/ \* / + /g' "$out" > "$out.tmp" && mv "$out.tmp" "$out"
fi
