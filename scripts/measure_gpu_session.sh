#!/usr/bin/env bash
# One lease of a GPU machine, every issue-#20 recording in order of value, each step under its own time limit
# so that a slow one cannot starve the rest. Raw results go to $RESULTS (default /tmp/gpuplan-measure) and,
# after each step, into one archive $OUT/results.tgz (the device tool returns at most 8 files).
#
#   bash scripts/measure_gpu_session.sh          # on the GPU machine, from the repository root
#   bash scripts/measure_gpu_session.sh followup # copy bandwidth by size, torch.compile decode, shape search
#
# Needs python3 with torch and transformers (peft, bitsandbytes optional); gpuplan runs from src/ with its
# own dependencies taken from .whl/ when that folder exists (the machine has no network).
set -u
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$NAME" in  # gpuplan's catalog id of the GPU (the SXM parts are the ones named plainly)
  *H200*NVL*) DEFAULT_ID=h200-nvl-141gb ;; *H200*) DEFAULT_ID=h200-sxm-141gb ;;
  *H100*PCIe*) DEFAULT_ID=h100-pcie-80gb ;; *H100*NVL*) DEFAULT_ID=h100-nvl-94gb ;; *H100*) DEFAULT_ID=h100-sxm-80gb ;;
  *) DEFAULT_ID="" ;;
esac
GPU_ID=${GPU_ID:-$DEFAULT_ID}
RESULTS=${RESULTS:-/tmp/gpuplan-measure}
OUT=${OUT:-$RESULTS.out}
mkdir -p "$RESULTS" "$OUT"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
LOG=$RESULTS/log.txt
pack() { tar -czf "$OUT/results.tgz" -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"; cp "$LOG" "$OUT/log.txt"; }
step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "=== $name (limit ${limit}s) $(date -u +%H:%M:%S)" | tee -a "$LOG"
  timeout --kill-after=5 "$limit" "$@" >>"$LOG" 2>&1
  echo "=== $name rc=$? in $((SECONDS - t0))s" | tee -a "$LOG"
  pack
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
  python3 -c "import peft; print('peft', peft.__version__)" 2>&1 | tail -1
  python3 -c "import bitsandbytes; print('bitsandbytes', bitsandbytes.__version__)" 2>&1 | tail -1
} >"$RESULTS/versions.txt" 2>&1
nvidia-smi -q >"$RESULTS/nvidia-smi-q.txt" 2>&1
cat "$RESULTS/versions.txt" | tee -a "$LOG"

if [ "${1:-all}" = followup ]; then  # a second, shorter lease: what the first one raised
  step copy 40 python3 scripts/measure_copy_bandwidth.py --out "$RESULTS/copy_bandwidth.json"
  step compiled 240 python3 scripts/measure_inference.py ${GPU_ID:+--gpu-id "$GPU_ID"} --torch-compile --steps 24 \
    --model llama-3.1-8b --batches 1,8,64 --prompts 2048 --out "$RESULTS/inference_compiled.json"
  step matmul-search 100 python3 scripts/measure_matmul_search.py --lattice 4096 --max-dim 16384 \
    --out "$RESULTS/matmul_search.json"
  echo "=== done $(date -u +%H:%M:%S)" | tee -a "$LOG"
  pack
  exit 0
fi
step detect 30 sh -c "python3 -m gpuplan local detect --json > $RESULTS/local_detect.json"
step training 150 python3 scripts/measure_training_memory.py ${GPU_ID:+--gpu-id "$GPU_ID"} --out "$RESULTS/training_memory.json"
step inference 110 python3 scripts/measure_inference.py ${GPU_ID:+--gpu-id "$GPU_ID"} --steps 24 --out "$RESULTS/inference.json"
step bench 160 python3 -m gpuplan local bench all --dtype bf16 --dtype fp8 --path /tmp --offline \
  --save "$RESULTS/local_bench.json" --json
for kind in healthy input-bound launch-bound memory-bound; do
  step "watch-$kind" 22 python3 -m gpuplan local watch --interval 500ms --out "$RESULTS/watch_$kind.jsonl" \
    --log-regex 'step (?P<step>\d+) (?P<step_ms>[\d.]+) ms' -- python3 scripts/watch_workloads.py "$kind" --seconds 12
done
echo "=== done $(date -u +%H:%M:%S)" | tee -a "$LOG"
pack
