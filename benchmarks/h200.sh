#!/usr/bin/env bash
# One call on the GPU machine: install, GPU tests, sanitizers, benchmarks.
# Everything worth keeping lands in $OUT (logs and JSON).
#   bash benchmarks/h200.sh [install] [tests] [sanitize] [overhead] [bench] [memory] [extra...]
# extra phases: compile sweep autotune wgmma profile mma wgsweep ncu (each reads its *_ARGS).
# SANITIZE_RUNGS limits the sanitizers to some rungs, SANITIZE_SOFTMAX=0 skips the softmax pass.
# With no arguments, all phases run in that order.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=gpu DRVGEMM_CACHE_DIR=/tmp/drvgemm-cache
phases=${*:-install tests sanitize overhead bench}
SAN=/usr/local/cuda/bin/compute-sanitizer
have() { [[ " $phases " == *" $1 "* ]]; }
t0=$(date +%s)
stamp() { echo "== $1 at +$(( $(date +%s) - t0 ))s"; }

if have install; then
  stamp install
  python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import drvgemm; print(drvgemm.device())"
fi
if have compile; then
  stamp compile
  python3 -m drvgemm compile 2>/dev/null | tee "$OUT/compile_report.txt" | tail -40
fi
if have tests; then
  stamp tests
  timeout ${TEST_TIMEOUT:-420} python3 -m pytest -m gpu -q --timeout=120 -p no:cacheprovider --continue-on-collection-errors ${TESTS:-} ${TEST_K:+-k "$TEST_K"} 2>&1 \
    | tee "$OUT/pytest_gpu.log" | tail -40
fi
if have sanitize; then
  stamp sanitize
  for tool in memcheck racecheck synccheck initcheck; do
    echo "-- $tool"
    timeout ${SAN_TIMEOUT:-300} $SAN --tool $tool --error-exitcode 9 python3 benchmarks/sanitize.py ${SANITIZE_RUNGS:-} \
      > "$OUT/sanitize_$tool.log" 2>&1; echo "exit $?"
    tail -4 "$OUT/sanitize_$tool.log"
    [[ ${SANITIZE_SOFTMAX:-1} == 1 ]] || continue
    timeout ${SAN_TIMEOUT:-300} $SAN --tool $tool --error-exitcode 9 python3 benchmarks/sanitize.py --softmax \
      > "$OUT/sanitize_softmax_$tool.log" 2>&1; echo "softmax exit $?"
    tail -2 "$OUT/sanitize_softmax_$tool.log"
  done
fi
if have overhead; then
  stamp overhead
  python3 benchmarks/launch_overhead.py --json "$OUT/launch_overhead.json" 2>&1 | tail -12
fi
if have bench; then
  stamp bench
  timeout ${BENCH_TIMEOUT:-500} python3 -m drvgemm bench ${BENCH_ARGS:-} --json "$OUT/h200.json" --plot "$OUT/h200-roofline.png" 2> "$OUT/bench_progress.log" \
    | tee "$OUT/bench_report.txt" | tail -60
fi
# A phase that runs one Python script: script_phase NAME TIMEOUT TAIL SCRIPT ARGS...
# (its whole output in $OUT/NAME.log, the last TAIL lines on the console)
script_phase() {
  local name=$1 limit=$2 lines=$3; shift 3
  if have "$name"; then
    stamp "$name"
    timeout "$limit" python3 "$@" 2>&1 | tee "$OUT/$name.log" | tail -"$lines"
  fi
}
script_phase sweep 120 45 benchmarks/occupancy_sweep.py --plot "$OUT/occupancy_sweep.png" \
  --json "$OUT/occupancy_sweep.json"
script_phase autotune "${AUTOTUNE_TIMEOUT:-400}" 30 benchmarks/autotune_warp_tiled.py \
  --json "$OUT/autotune_warp_tiled.json" ${AUTOTUNE_ARGS:-}
script_phase wgmma "${WGMMA_TIMEOUT:-300}" 40 benchmarks/wgmma_steps.py \
  --json "$OUT/wgmma_steps.json" ${WGMMA_ARGS:-}
if have profile; then
  stamp profile
  for k in ${PROFILE_RUNGS:-08_warp_tiled 12_mma_bf16}; do
    timeout 120 python3 -m drvgemm profile $k --size 4096 2>&1 | tee "$OUT/profile_$k.txt" | tail -25
  done
fi
script_phase mma "${MMA_TIMEOUT:-400}" 30 benchmarks/mma_sweep.py --json "$OUT/mma_sweep.json" ${MMA_ARGS:-}
script_phase wgsweep "${WGSWEEP_TIMEOUT:-400}" 40 benchmarks/wgmma_sweep.py \
  --json "$OUT/wgmma_sweep.json" ${WGSWEEP_ARGS:-}
script_phase ncu "${NCU_TIMEOUT:-300}" 45 benchmarks/ncu_compare.py --raw "$OUT/ncu_compare.csv" ${NCU_ARGS:-}
if have memory; then
  stamp memory
  timeout 300 python3 -m drvgemm bench --memory --json "$OUT/h200_memory.json" 2>&1 | tail -30
fi
stamp done
