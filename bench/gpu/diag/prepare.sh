#!/bin/sh
# bench/gpu/diag/prepare.sh OPSDIR DIR: where the wgmma GEMM and the batch-32 3x3
# convolutions lose (issue 28), prepared here for one device call (DIR/run.sh, run with
# carry DIR).  OPSDIR: bench/gpu/ops/prepare_ops.py OPSDIR --set hopper --target h200.
# Builds -main programs of BERT-base's QKV GEMM at batch 64 (Roller's first plan, and its
# first wgmma plan) and of the first wgmma and mma.sync plans of two batch-32 convolutions
# (64 channels at 56x56, 256 at 14x14), and variants of the first with one part left out: its epilogue's
# stores (noepi), its wgmma (nomma), both (loadsonly), its copies (mmaonly), and its loads' coordinates (hotl2:
# every block copies the same tiles: what L2's bandwidth costs).  The variants are made
# by editing the generated .cu (they are measurements, not programs to trust).
set -eu
ops=$1 dir=$2
bin=${QIR_BIN:-build/bin}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
cd "$dir"
gen() { "$bin/qcodegen" -cuda -main "$ops/$2/op_plan$3.qir" -o "$1.cu"; }
# the first of an operator's ranked plans whose mma matches (wgmma: "64, "; mma.sync: "16, 8, 16")
first() { for k in 0 1 2 3 4 5 6 7 8 9; do
  f="$ops/$1/op_plan$k.qir"; [ -f "$f" ] && grep -q "mma = \[$2" "$f" && { echo "$k"; return; }; done; echo none; }
gen qkv0 b64_qkv_f16 0                     # Roller's first plan (the variants below edit it)
k=$(first b64_qkv_f16 "64, "); [ "$k" = none ] || gen qkvw b64_qkv_f16 "$k"
for op in 64 256; do
  for kind in w s; do
    k=$(first b32_conv3x3_${op}_f16 "$( [ $kind = w ] && echo '64, ' || echo '16, 8, 16')")
    [ "$k" = none ] || gen "c${op}$kind" b32_conv3x3_${op}_f16 "$k"
  done
done
grep -q "wgmma.mma_async" qkv0.cu || { echo "prepare.sh: the QKV GEMM's first plan is no wgmma kernel: no variants" >&2; exit 1; }
# the epilogue's stores: direct (6d6e09c, measured 2026-11-27) or 16 bytes from the staging tiles
store='out\[((gm[0-9]* \* [0-9]*) + gn[0-9]*)\] = q_f2h(acc[0-9]*\[i[0-9]*\]);'
vstore='\*(uint4 \*)&out\[((gm[0-9]* \* [0-9]*) + gn[0-9]*)\] = q_v;'
mma='wgmma.mma_async.sync.aligned.m64n[0-9]*k16.f32.[a-z0-9]*.[a-z0-9]* {[^}]*}, %[0-9]*, %[0-9]*, q_p, 1, 1, [01], [01];'
sed "s/\($store\)/if (0) \1/; s/\($vstore\)/if (0) \1/" qkv0.cu > qkv0_noepi.cu
sed "s/$mma//" qkv0.cu > qkv0_nomma.cu
sed "s/$mma//" qkv0_noepi.cu > qkv0_loadsonly.cu
# mmaonly: no copies, the full barriers' expected bytes 0 (the wgmma read whatever shared memory holds)
sed '/cp.async.bulk.tensor/ s/cp.async.bulk.tensor[^;]*;//; /expect_tx/ s/"r"([0-9]*) : "memory"/"r"(0) : "memory"/' qkv0.cu > qkv0_mmaonly.cu
sed '/cp.async.bulk.tensor/ { s/"r"((int)(b0))/"r"((int)(0))/g; s/(b1 + [0-9]*)/(64)/g; s/"r"((int)(b1))/"r"((int)(0))/g }' qkv0.cu > qkv0_hotl2.cu
for v in noepi nomma loadsonly mmaonly hotl2; do
  cmp -s qkv0.cu "qkv0_$v.cu" && { echo "prepare.sh: variant $v left qkv0.cu unchanged (the generated code moved)" >&2; exit 1; }
done
for f in *.cu; do "$nvcc" -O3 -gencode arch=compute_90a,code=sm_90a -cudart static -Xcompiler -s -o "${f%.cu}" "$f" -lcuda; done
rm -f ./*.cu
cp "$here/run.sh" .
echo "prepare.sh: $(ls | wc -l) files in $dir; on the device: sh $dir/run.sh"
