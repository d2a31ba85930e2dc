#!/bin/sh
# run-c.sh MODULE PLANNED DIR [QRUN-OPTIONS]: compiles PLANNED (MODULE after
# qopt) with the C back end, runs it on inputs qrun generates for MODULE, and
# has qrun (the interpreter, on the unplanned MODULE) check every output.
set -e
module=$1 planned=$2 dir=$3
shift 3
rm -rf "$dir" && mkdir -p "$dir/in"
qcodegen -c -main "$planned" -o "$dir/prog.c"
${CC:-cc} -O2 -fopenmp -o "$dir/prog" "$dir/prog.c" -lm
qrun "$module" --save-inputs "$dir/in" > /dev/null
ins="" outs="" expects=""
for f in "$dir"/in/*.npy; do n=$(basename "$f" .npy); ins="$ins --in $n=$f"; done
for n in $(sed -n 's/^ *output %[A-Za-z0-9_]* {name = "\([A-Za-z0-9_]*\)"}.*/\1/p' "$module"); do
  outs="$outs --out $n=$dir/$n.npy"
  expects="$expects --expect $n=$dir/$n.npy"
done
"$dir/prog" $ins $outs
qrun "$module" $ins "$@" $expects
