#!/bin/sh
# Issue 23 step 3 on the device: times Roller's top-10 plans per operator (plan_timer),
# PyTorch's cuBLAS/cuDNN on the same operators (torch_ops.py, with the float64 oracle on
# plan 0's output), and writes the report.
#   bench/gpu/ops/run_ops.sh [OPSDIR] [RESULTDIR]
# OPSDIR: what prepare_ops.py built here (default bench/gpu/ops/out); RESULTDIR: default
# $OUT/ops (the device's result folder) or bench/gpu/ops/results.
# TIMER_TIMEOUT, PLAN_DEADLINE, TORCH_TIMEOUT (seconds: 240, 150, 180) bound the steps
# (bench/gpu/device.py gives them less, inside its own budget).
OPS=${1:-bench/gpu/ops/out}
RES=${2:-${OUT:+$OUT/ops}}
RES=${RES:-bench/gpu/ops/results}
HERE=$(dirname "$0")
DUMP=${TMPDIR:-/tmp}/qir_ops_dump
mkdir -p "$RES" && rm -rf "$DUMP"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$RES/device.txt" 2>&1
# libcudart.so.13 for the plan libraries (plan_timer's RUNPATH names the same folder);
# only for plan_timer: torch brings its own CUDA libraries. Without the toolkit's, the
# one in torch's nvidia wheels.
CUDART_DIR=/usr/local/cuda/lib64
if [ ! -e "$CUDART_DIR/libcudart.so.13" ]; then
  NV=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia"))' 2>/dev/null)
  F=$(find "$NV" -name 'libcudart.so.13*' 2>/dev/null | head -n 1)
  [ -n "$F" ] && CUDART_DIR=$(dirname "$F")
fi
echo "libcudart from $CUDART_DIR" > "$RES/plan_timer.log"
chmod +x "$OPS/plan_timer" 2>/dev/null
LD_LIBRARY_PATH=$CUDART_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  timeout "${TIMER_TIMEOUT:-240}" "$OPS/plan_timer" "$OPS/manifest.json" "$RES/ops_results.json" --dump "$DUMP" \
  --deadline "${PLAN_DEADLINE:-150}" \
  >> "$RES/plan_timer.log" 2>&1
echo "plan_timer exit $?" >> "$RES/plan_timer.log"
timeout "${TORCH_TIMEOUT:-180}" python3 "$HERE/torch_ops.py" "$OPS/manifest.json" "$RES/ops_torch.json" --dump "$DUMP" \
  > "$RES/torch_ops.log" 2>&1
echo "torch_ops exit $?" >> "$RES/torch_ops.log"
python3 "$HERE/report_ops.py" "$RES/ops_results.json" "$RES/ops_torch.json" \
  --manifest "$OPS/manifest.json" --csv "$RES/ops_plans.csv" > "$RES/ops_report.md" 2>&1
tail -n 40 "$RES/plan_timer.log" "$RES/torch_ops.log"
cat "$RES/ops_report.md"
