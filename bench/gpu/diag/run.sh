#!/bin/sh
# bench/gpu/diag/run.sh (made by prepare.sh beside the programs): one device call: where the wgmma GEMM (BERT-base QKV at batch 64) and the batch-32 3x3
# convolutions lose against cuBLAS/cuDNN. Kernel times by ncu (gpu__time_duration, launches
# 3..7), variants of the GEMM with one part left out, ncu sections of each kernel and of
# PyTorch's. Writes $OUT/diag.tar.gz and prints a summary.
set -u
cd "$(dirname "$0")"
D=$OUT/diag; mkdir -p $D
PATH=$PATH:/usr/local/cuda/bin
python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
def w(n, shape): np.save(n, (rng.random(shape, dtype=np.float32) * 2 - 1).astype(np.float16))
w('qx.npy', (8192, 768)); w('qw.npy', (768, 2304)); w('c64x.npy', (32, 64, 56, 56)); w('c64w.npy', (64, 64, 3, 3))
w('c256x.npy', (32, 256, 14, 14)); w('c256w.npy', (256, 256, 3, 3))
PY
args() { case $1 in qkv*) echo "--in x=qx.npy --in w=qw.npy";; c64*) echo "--in x=c64x.npy --in w=c64w.npy";; c256*) echo "--in x=c256x.npy --in w=c256w.npy";; esac; }
for p in qkv0 qkv0_noepi qkv0_nomma qkv0_loadsonly qkv0_mmaonly qkv0_hotl2 qkvw c64w c64s c256w c256s; do
  [ -x "./$p" ] || continue
  timeout 60 ncu --clock-control none --print-units base --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,dram__bytes.sum --csv -k regex:^k --launch-skip 2 --launch-count 5 ./$p $(args $p) --bench 8 > $D/time_$p.csv 2> $D/time_$p.err
  echo "$p: exit $?"
done
for p in qkv0 qkvw c64w c64s c256w; do
  [ -x "./$p" ] || continue
  timeout 60 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats -k regex:^k --launch-skip 1 --launch-count 1 ./$p $(args $p) --bench 2 > $D/sec_$p.txt 2>&1
  echo "sections $p: exit $?"
done
cat > torch_ops.py <<'PY'
import torch, torch.nn.functional as F
torch.backends.cudnn.benchmark = True
h = dict(device="cuda", dtype=torch.float16)
a, b = torch.randn(8192, 768, **h), torch.randn(768, 2304, **h)
x, w = torch.randn(32, 64, 56, 56, **h), torch.randn(64, 64, 3, 3, **h)
x2, w2 = torch.randn(32, 256, 14, 14, **h), torch.randn(256, 256, 3, 3, **h)
for i in range(4):
    c = a @ b
    y = F.conv2d(x, w, padding=1)
    y2 = F.conv2d(x2, w2, padding=1)
torch.cuda.synchronize()
PY
timeout 120 ncu --clock-control none --print-units base --metrics gpu__time_duration.sum,lts__t_bytes.sum,dram__bytes.sum --csv python3 torch_ops.py > $D/torch_kernels.csv 2> $D/torch_kernels.err; echo "torch kernels: exit $?"
timeout 90 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats -k regex:nvjet --launch-skip 3 --launch-count 1 python3 torch_ops.py > $D/sec_torch_gemm.txt 2>&1; echo "torch gemm sections: exit $?"
python3 - "$D" <<'PY'
import csv, glob, os, sys, io
D = sys.argv[1]
def rows(path):
    txt = open(path).read()
    i = txt.find('"ID"')
    return list(csv.DictReader(io.StringIO(txt[i:]))) if i >= 0 else []
print("| program | kernel us (min of 5) | L2 bytes/launch MB | DRAM MB | sm thr % |")
print("|---|---:|---:|---:|---:|")
for f in sorted(glob.glob(D + "/time_*.csv")):
    r = rows(f); p = os.path.basename(f)[5:-4]
    by = {}
    for x in r:
        by.setdefault(x["ID"], {})[x["Metric Name"]] = x["Metric Value"].replace(",", "")
    if not by: print("| %s | no data |" % p); continue
    def val(k, m): 
        try: return float(by[k].get(m, "nan"))
        except ValueError: return float("nan")
    best = min(by, key=lambda k: val(k, "gpu__time_duration.sum"))
    unit = 1e-3
    print("| %s | %.1f | %.1f | %.1f | %.0f |" % (p, val(best, "gpu__time_duration.sum") * unit, val(best, "lts__t_bytes.sum") / 1e6,
          val(best, "dram__bytes.sum") / 1e6, val(best, "sm__throughput.avg.pct_of_peak_sustained_elapsed")))
r = rows(D + "/torch_kernels.csv")
seen = {}
for x in r:
    if x["Metric Name"] == "gpu__time_duration.sum":
        seen.setdefault(x["Kernel Name"][:110], []).append(float(x["Metric Value"].replace(",", "")) / 1e3)
print("\nPyTorch kernels (us, min over launches):")
for k, v in seen.items(): print("  %8.1f x%d  %s" % (min(v), len(v), k))
PY
tar czf $OUT/diag.tar.gz -C $OUT diag
