#!/bin/sh
# `make demo`: the whole pipeline on the bundled example examples/tiny_cnn.onnx.
#   onnx2qir -> qopt -canonicalize -roller -welder -rammer -grinder
#   -> qcodegen -c -main -> cc -> run, checked against qrun (the reference
# interpreter), and once more under the race, bounds and barrier checker
# (qcodegen -c -check); CUDA is emitted (and compiled when nvcc is installed).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$top/build/bin
out=$top/build/demo
mkdir -p "$out"
cd "$out"
ex=$top/examples
set -x
"$bin/onnx2qir" -o tiny_cnn.qir "$ex/tiny_cnn.onnx"
"$bin/qopt" -canonicalize -roller -welder -rammer -grinder -stats tiny_cnn.qir -o tiny_cnn.opt.qir
"$bin/qcodegen" -c -main tiny_cnn.opt.qir -o tiny_cnn.c
cc -O2 -fopenmp -o tiny_cnn tiny_cnn.c -lm
./tiny_cnn --in image="$ex/tiny_cnn_input.npy" --out probs=probs.npy
"$bin/qrun" --in image="$ex/tiny_cnn_input.npy" --expect probs=probs.npy --atol 1e-5 tiny_cnn.qir
"$bin/qcodegen" -c -check -main tiny_cnn.opt.qir -o tiny_cnn.checked.c
cc -O1 -o tiny_cnn.checked tiny_cnn.checked.c -lm
./tiny_cnn.checked --in image="$ex/tiny_cnn_input.npy" --out probs=probs.checked.npy
"$bin/qrun" --in image="$ex/tiny_cnn_input.npy" --expect probs=probs.checked.npy --atol 1e-5 tiny_cnn.qir
"$bin/qcodegen" -cuda tiny_cnn.opt.qir -o tiny_cnn.cu
set +x
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  "$nvcc" -arch=sm_90 -c -o tiny_cnn.cu.o tiny_cnn.cu && echo "demo: tiny_cnn.cu compiles with nvcc for sm_90"
else
  echo "demo: nvcc not found; CUDA compile skipped (the .cu is in $out)"
fi
echo "demo: outputs in $out: tiny_cnn.qir (imported), tiny_cnn.opt.qir (tile plans, kernel groups, rprograms), tiny_cnn.c, tiny_cnn.checked.c, tiny_cnn.cu"
sed -n '1,24p' tiny_cnn.opt.qir
