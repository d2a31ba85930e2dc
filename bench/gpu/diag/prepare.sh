#!/bin/sh
# bench/gpu/diag/prepare.sh OPSDIR DIR: where the wgmma GEMM and the batch-32 3x3
# convolutions lose (issue 28), prepared here for one device call (DIR/run.sh, run with
# carry DIR).  OPSDIR: bench/gpu/ops/prepare_ops.py OPSDIR --set hopper --target h200.
# Builds -main programs of BERT-base's QKV GEMM at batch 64 (plans 0 and 3) and of three
# convolution plans, and variants of QKV plan 0 with one part left out: its epilogue's
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
gen qkv0 b64_qkv_f16 0
gen qkv3 b64_qkv_f16 3
gen c64p0 b32_conv3x3_64_f16 0
gen c64p6 b32_conv3x3_64_f16 6
gen c256p0 b32_conv3x3_256_f16 0
gen c256p9 b32_conv3x3_256_f16 9
# the epilogue's stores: direct (6d6e09c, measured 2026-11-27) or 16 bytes from the staging tiles
store='out\[((gm[0-9]* \* 2304) + gn[0-9]*)\] = q_f2h(acc[0-9]*\[i[0-9]*\]);'
vstore='\*(uint4 \*)&out\[((gm[0-9]* \* 2304) + gn[0-9]*)\] = q_v;'
mma='wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {[^}]*}, %64, %65, q_p, 1, 1, 0, 1;'
sed "s/\($store\)/if (0) \1/; s/\($vstore\)/if (0) \1/" qkv0.cu > qkv0_noepi.cu
sed "s/$mma//" qkv0.cu > qkv0_nomma.cu
sed "s/$mma//" qkv0_noepi.cu > qkv0_loadsonly.cu
# mmaonly: no copies, the full barriers' expected bytes 0 (the wgmma read whatever shared memory holds)
sed '/cp.async.bulk.tensor/ s/cp.async.bulk.tensor[^;]*;//; s/"r"(49152)/"r"(0)/' qkv0.cu > qkv0_mmaonly.cu
sed '/cp.async.bulk.tensor/ { s/"r"((int)(b0))/"r"((int)(0))/g; s/(b1 + 64)/(64)/g; s/"r"((int)(b1))/"r"((int)(0))/g }' qkv0.cu > qkv0_hotl2.cu
for v in noepi nomma loadsonly mmaonly hotl2; do
  cmp -s qkv0.cu "qkv0_$v.cu" && { echo "prepare.sh: variant $v left qkv0.cu unchanged (the generated code moved)" >&2; exit 1; }
done
for f in *.cu; do "$nvcc" -O3 -gencode arch=compute_90a,code=sm_90a -cudart static -Xcompiler -s -o "${f%.cu}" "$f" -lcuda; done
rm -f ./*.cu
cp "$here/run.sh" .
echo "prepare.sh: $(ls | wc -l) files in $dir; on the device: sh $dir/run.sh"
