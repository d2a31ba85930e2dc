#!/bin/sh
# run-c.sh MODULE PLANNED DIR [QRUN-OPTIONS]: compiles PLANNED (MODULE after
# qopt) with the C back end, runs it on inputs qrun generates for MODULE, and
# has qrun (the interpreter, on the unplanned MODULE) check every output.
# Then the same plan once more under the race, bounds and barrier checker
# (qcodegen -c -check, plus $CHECK_FLAGS, e.g. -wavefront64 for plans made for
# a 64-lane target): it must print nothing on stderr, and qrun checks its
# outputs too, or finds them byte for byte the plain program's (exit status 1
# on a hazard or a mismatch).
set -e
module=$1 planned=$2 dir=$3
shift 3
rm -rf "$dir" && mkdir -p "$dir/in"
qcodegen -c -main "$planned" -o "$dir/prog.c"
${CC:-cc} -O2 -fopenmp -o "$dir/prog" "$dir/prog.c" -lm
qrun "$module" --save-inputs "$dir/in" --inputs-only
ins="" outs="" expects="" couts="" cexpects=""
for f in "$dir"/in/*.npy; do n=$(basename "$f" .npy); ins="$ins --in $n=$f"; done
for n in $(sed -n 's/^ *output %[A-Za-z0-9_]* {name = "\([A-Za-z0-9_]*\)"}.*/\1/p' "$module"); do
  outs="$outs --out $n=$dir/$n.npy"
  expects="$expects --expect $n=$dir/$n.npy"
  couts="$couts --out $n=$dir/$n.checked.npy"
  cexpects="$cexpects --expect $n=$dir/$n.checked.npy"
done
"$dir/prog" $ins $outs
qrun "$module" $ins "$@" $expects
qcodegen -c -check ${CHECK_FLAGS:-} -main "$planned" -o "$dir/checked.c"
${CC:-cc} -O1 -o "$dir/checked" "$dir/checked.c" -lm
"$dir/checked" $ins $couts 2> "$dir/checked.err" || { cat "$dir/checked.err"; exit 1; }
if [ -s "$dir/checked.err" ]; then cat "$dir/checked.err"; exit 1; fi
# The checked program computes what the plain one does, in the same order: the
# same bytes need no second interpretation (qrun is slow on these modules);
# anything else is checked against qrun as the plain outputs were.
same=true
for n in $(sed -n 's/^ *output %[A-Za-z0-9_]* {name = "\([A-Za-z0-9_]*\)"}.*/\1/p' "$module"); do
  cmp -s "$dir/$n.npy" "$dir/$n.checked.npy" || same=false
done
if ! $same; then
  qrun "$module" $ins "$@" $cexpects > "$dir/checked.qrun" || { cat "$dir/checked.qrun"; exit 1; }
fi
