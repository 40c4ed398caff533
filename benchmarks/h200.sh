#!/usr/bin/env bash
# One script on the GPU machine: install, GPU tests, sanitizers, benchmarks.
#   bash benchmarks/h200.sh [PHASE ...]
# Default phases (DEFAULT_PHASES below), in this order:
#   install tests sanitize overhead bench shapes memory
# Extra phases: EXTRA_PHASES below (each reads its *_ARGS); a phase of neither list is an
# error before anything runs (a misspelt phase would otherwise cost a device call for
# nothing). MEMORY_ARGS=--softmax-rows makes the memory phase the softmax row-length suite.
#
# What comes back through $OUT (at most 8 files): the committed results
#   h200.json  h200-roofline.png  h200-shapes.json  h200-shapes.png  h200-memory.json
#   launch_overhead.json  gemm_call_overhead.json
# and logs.tar.gz: every phase's whole log (pytest, each sanitizer, bench progress and
# report, the shape suite's progress, ...), the extra phases' JSON/PNG, and phases.txt
# (each phase's exit status and seconds). The tar is rewritten after every phase, so a run
# cut short still brings back what finished.
#
# Time: every phase has a timeout (env *_TIMEOUT); LIMIT (default 570 s, one device call
# is 600 s at most) bounds the whole run: a phase starts only with its minimum time left
# and its timeout is cut to what remains -- a skipped phase is named at the end.
# Expected on the H200 (warm disk cache after the first phases; thirtieth round, sanitize twentieth):
#   install ~6 s, tests 265-340 s on 6 xdist workers (<= 480; 1,827 tests), sanitize ~450 s (<= 3 x (75 + 35) + 120 + 300),
#   overhead ~18 s (<= 2 x 90), bench ~95 s (<= 240), shapes 85-105 s (<= 300, its own
#   budget 250), memory ~60 s (<= 120; with MEMORY_ARGS=--softmax-rows 40-60 s): ~17 min
#   in all, so three calls:
#     bash benchmarks/h200.sh install tests
#     bash benchmarks/h200.sh install sanitize
#     bash benchmarks/h200.sh install overhead bench shapes memory
# CALL_OVERHEAD_ARGS="--shapes" adds gemm()'s call cost on rotating buffers per shape to the
# overhead phase; ktimes (KTIMES_ARGS: shapes) is each kernel's GPU time under ncu.
# PYTEST_TIMEOUT is each GPU test's limit (120 s; a rung's 200-case property test may need more).
# SANITIZE_RUNGS limits the sanitizers to some rungs, SAN_TOOLS to some tools, SANITIZE_SOFTMAX=0 skips the softmax
# pass, SANITIZE_GEMM=0 the GEMM pass, SANITIZE_SOFTMAX_RUNGS limits the softmax pass to some
# kernels (and auto); SHAPES_ARGS=--quick runs the reduced shape suite.
set -uo pipefail
DEFAULT_PHASES="install tests sanitize overhead bench shapes memory"
EXTRA_PHASES="compile dependent rung20 sweep autotune wgmma profile mma clock wgsweep ncu
  shortrows packed pipelined splitprobe softncu rowlanes near128 splitheld rwphases tinyrows
  routegaps splittimeline beforeafter rung30 power family ktimes viewsbefore views"
phases=${*:-$DEFAULT_PHASES}
for p in $phases; do
  if [[ " $(echo $DEFAULT_PHASES $EXTRA_PHASES) " != *" $p "* ]]; then
    echo "h200.sh: unknown phase '$p'; phases are: $(echo $DEFAULT_PHASES $EXTRA_PHASES)" >&2
    exit 2
  fi
done
# REQUIRE_GPU=H200 ends the run before any phase when the GPU's name lacks that text (exit
# 3): a device call that may land on another card then costs its start alone.
if [[ -n "${REQUIRE_GPU:-}" ]]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  if [[ "$gpu" != *"$REQUIRE_GPU"* ]]; then
    echo "h200.sh: REQUIRE_GPU=$REQUIRE_GPU, this GPU is '${gpu:-none}': nothing run" >&2
    exit 3
  fi
fi
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG=${LOG_DIR:-/tmp/h200-logs}; rm -rf "$LOG"; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=gpu DRVGEMM_CACHE_DIR=${DRVGEMM_CACHE_DIR:-/tmp/drvgemm-cache}
LIMIT=${LIMIT:-570}
SAN=${SAN:-/usr/local/cuda/bin/compute-sanitizer}
t0=$(date +%s)
skipped=""
failed=""
have() { [[ " $phases " == *" $1 "* ]]; }
elapsed() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "== $1 at +$(elapsed)s" | tee -a "$LOG/phases.txt"; }
pack() { tar -czf "$OUT/logs.tar.gz.tmp" -C "$LOG" . 2>/dev/null && mv "$OUT/logs.tar.gz.tmp" "$OUT/logs.tar.gz"; }
# budget WANT [MIN]: the timeout a step may have now (WANT cut to what LIMIT leaves, minus
# 10 s for packing); prints 0 when less than MIN (default 20 s) is left.
budget() {
  local want=$1 min=${2:-20} left=$(( LIMIT - $(elapsed) - 10 ))
  (( left < want )) && want=$left
  (( want < min )) && want=0
  echo "$want"
}
# begin NAME WANT [MIN]: start a phase if it has time (sets $T, its timeout), else skip it.
begin() {
  T=$(budget "$2" "${3:-20}")
  if (( T == 0 )); then
    skipped="$skipped $1"; echo "== $1 skipped: $(( LIMIT - $(elapsed) ))s left of LIMIT=$LIMIT" \
      | tee -a "$LOG/phases.txt"; return 1
  fi
  stamp "$1 (timeout ${T}s)"; P0=$(date +%s)
}
# end NAME RC: record the phase's exit status and time, pack the logs.
end() {
  echo "   $1: exit $2 in $(( $(date +%s) - P0 ))s" | tee -a "$LOG/phases.txt"
  [[ $2 == 0 ]] || failed="$failed $1"
  pack
}

if have install && begin install 120; then
  { timeout "$T" python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
    python3 -c "import drvgemm; print(drvgemm.device())"; } 2>&1 | tee "$LOG/install.log"
  end install "${PIPESTATUS[0]}"
fi
if have compile && begin compile "${COMPILE_TIMEOUT:-300}"; then
  timeout "$T" python3 -m drvgemm compile > "$LOG/compile_report.txt" 2>&1; rc=$?
  tail -40 "$LOG/compile_report.txt"; end compile $rc
fi
if have tests && begin tests "${TEST_TIMEOUT:-480}" 60; then
  # pytest-xdist where the machine has it (TEST_WORKERS, default 6; 0 = one process):
  # the whole GPU suite took 276 s on 6 workers (seventeenth round)
  W=${TEST_WORKERS:-6}; python3 -c "import xdist" 2>/dev/null || W=0
  # SIGINT 10 s before the limit (T >= 60, begin's minimum), SIGKILL at it: a run cut
  # short still prints its counts and every skip's reason (SIGTERM ended it with neither,
  # forty-seventh round)
  timeout -s INT -k 10 "$(( T - 10 ))" python3 -m pytest -m gpu -q -rsfEP --timeout=${PYTEST_TIMEOUT:-120} -p no:cacheprovider \
    --continue-on-collection-errors $( (( W > 0 )) && echo "-n $W" ) ${TESTS:-} ${TEST_K:+-k "$TEST_K"} \
    > "$LOG/pytest_gpu.log" 2>&1
  rc=$?; tail -40 "$LOG/pytest_gpu.log"; end tests $rc
fi
if have sanitize && begin sanitize 60 30; then
  src=0
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
    if [[ ${SANITIZE_GEMM:-1} == 1 ]]; then
      # racecheck needs more than the others: 35 of 39 rungs in 75 s (twentieth round)
      want=${SAN_TIMEOUT:-75}; [[ $tool == racecheck ]] && want=${SAN_RACE_TIMEOUT:-120}
      T=$(budget "$want" 20)
      if (( T == 0 )); then skipped="$skipped sanitize:$tool"; continue; fi
      timeout "$T" $SAN --tool $tool --error-exitcode 9 python3 benchmarks/sanitize.py ${SANITIZE_RUNGS:-} \
        > "$LOG/sanitize_$tool.log" 2>&1; rc=$?; (( rc )) && src=$rc
      echo "-- $tool: exit $rc"; tail -3 "$LOG/sanitize_$tool.log"
    fi
    [[ ${SANITIZE_SOFTMAX:-1} == 1 ]] || continue
    # softmax racecheck: ~140 s on the H200 (twentieth round), 248 s on an H100 (forty-seventh)
    want=${SAN_SOFTMAX_TIMEOUT:-35}; [[ $tool == racecheck ]] && want=${SAN_RACE_SOFTMAX_TIMEOUT:-300}
    T=$(budget "$want" 15)
    if (( T == 0 )); then skipped="$skipped sanitize:softmax-$tool"; continue; fi
    timeout "$T" $SAN --tool $tool --error-exitcode 9 python3 benchmarks/sanitize.py --softmax ${SANITIZE_SOFTMAX_RUNGS:-} \
      > "$LOG/sanitize_softmax_$tool.log" 2>&1; rc=$?; (( rc )) && src=$rc
    echo "-- softmax $tool: exit $rc"; tail -2 "$LOG/sanitize_softmax_$tool.log"
  done
  end sanitize $src
fi
if have overhead && begin overhead 90 30; then
  timeout "$T" python3 benchmarks/launch_overhead.py --json "$OUT/launch_overhead.json" \
    > "$LOG/launch_overhead.log" 2>&1; rc=$?; tail -12 "$LOG/launch_overhead.log"
  if [[ -f benchmarks/gemm_call_overhead.py ]]; then
    T=$(budget "${CALL_OVERHEAD_TIMEOUT:-90}" 30)
    if (( T > 0 )); then
      timeout "$T" python3 benchmarks/gemm_call_overhead.py --json "$OUT/gemm_call_overhead.json" ${CALL_OVERHEAD_ARGS:-} \
        > "$LOG/gemm_call_overhead.log" 2>&1; rc2=$?; (( rc2 )) && rc=$rc2
      tail -15 "$LOG/gemm_call_overhead.log"
    else
      skipped="$skipped overhead:gemm_call"
    fi
  else
    echo "benchmarks/gemm_call_overhead.py is not in this tree: gemm() call overhead not measured" \
      | tee "$LOG/gemm_call_overhead.log"
  fi
  end overhead $rc
fi
if have bench && begin bench "${BENCH_TIMEOUT:-240}" 60; then
  timeout "$T" python3 -m drvgemm bench ${BENCH_ARGS:-} --json "$OUT/h200.json" \
    --plot "$OUT/h200-roofline.png" 2> "$LOG/bench_progress.log" > "$LOG/bench_report.txt"
  rc=$?; tail -60 "$LOG/bench_report.txt"; tail -3 "$LOG/bench_progress.log"; end bench $rc
fi
if have shapes && begin shapes "${SHAPES_TIMEOUT:-300}" 60; then
  # The suite stops starting shapes when its own budget is spent (records say so), well
  # before the timeout, so the JSON is always written.
  timeout "$T" python3 -m drvgemm bench --shapes --budget $(( T > 60 ? T - 50 : 10 )) ${SHAPES_ARGS:-} \
    --json "$OUT/h200-shapes.json" --plot "$OUT/h200-shapes.png" > "$LOG/shapes_report.txt" \
    2> "$LOG/shapes_progress.log"; rc=$?
  cat "$LOG/shapes_report.txt"; tail -3 "$LOG/shapes_progress.log"; end shapes $rc
fi
if have memory && begin memory "${MEMORY_TIMEOUT:-120}" 30; then
  timeout "$T" python3 -m drvgemm bench --memory ${MEMORY_ARGS:-} --json "$OUT/h200-memory.json" \
    > "$LOG/memory.log" 2>&1
  rc=$?; tail -30 "$LOG/memory.log"; end memory $rc
fi
# A phase that runs one Python script: script_phase NAME TIMEOUT TAIL SCRIPT ARGS...
# (its whole output in the logs as NAME.log, the last TAIL lines on the console; its
# JSON/PNG go into the logs too: $OUT has room for the results above only)
script_phase() {
  local name=$1 limit=$2 lines=$3; shift 3
  if have "$name" && begin "$name" "$limit" 30; then
    timeout "$T" python3 "$@" > "$LOG/$name.log" 2>&1; local rc=$?
    tail -"$lines" "$LOG/$name.log"; end "$name" $rc
  fi
}
# dependent: gemm's kernels as dependent launches against plain launches of the same
# code, same run (DEPENDENT_ARGS: --shapes ...; benchmarks/dependent_launch.py)
script_phase dependent "${DEPENDENT_TIMEOUT:-300}" 30 benchmarks/dependent_launch.py \
  ${DEPENDENT_ARGS:-} --json "$LOG/dependent_launch.json"
# rung20: rung 20's members against an earlier source of theirs, same run (RUNG20_OLD_DIR
# holds it, RUNG20_ARGS: --shapes PREC:MxNxK[:MEMBER[:SPLIT]] ...; see
# benchmarks/rung20_before_after.py)
script_phase rung20 "${RUNG20_TIMEOUT:-300}" 30 benchmarks/rung20_before_after.py \
  "${RUNG20_OLD_DIR:-.gpu/old20}" ${RUNG20_ARGS:-} --json "$LOG/rung20_before_after.json"
script_phase sweep "${SWEEP_TIMEOUT:-120}" 45 benchmarks/occupancy_sweep.py --plot "$LOG/occupancy_sweep.png" \
  --json "$LOG/occupancy_sweep.json"
script_phase autotune "${AUTOTUNE_TIMEOUT:-400}" 30 benchmarks/autotune_warp_tiled.py \
  --json "$LOG/autotune_warp_tiled.json" ${AUTOTUNE_ARGS:-}
script_phase wgmma "${WGMMA_TIMEOUT:-300}" 40 benchmarks/wgmma_steps.py \
  --json "$LOG/wgmma_steps.json" ${WGMMA_ARGS:-}
if have profile && begin profile 240 30; then
  for k in ${PROFILE_RUNGS:-08_warp_tiled 12_mma_bf16}; do
    T=$(budget 120 30); (( T == 0 )) && { skipped="$skipped profile:$k"; continue; }
    timeout "$T" python3 -m drvgemm profile $k --size 4096 > "$LOG/profile_$k.txt" 2>&1
    tail -25 "$LOG/profile_$k.txt"
  done
  end profile 0
fi
script_phase mma "${MMA_TIMEOUT:-400}" 30 benchmarks/mma_sweep.py --json "$LOG/mma_sweep.json" ${MMA_ARGS:-}
# clock: SM clock and board power while each TF32 mma.sync rung and the ceiling run back to back
script_phase clock "${CLOCK_TIMEOUT:-120}" 10 benchmarks/clock_probe.py --json "$LOG/clock_probe.json" \
  --kernels ${CLOCK_KERNELS:-15_mma_tf32_rotating 16_mma_tf32_rotating_ptx 11_mma_tf32}
script_phase wgsweep "${WGSWEEP_TIMEOUT:-400}" 40 benchmarks/wgmma_sweep.py \
  --json "$LOG/wgmma_sweep.json" ${WGSWEEP_ARGS:-}
script_phase ncu "${NCU_TIMEOUT:-300}" 45 benchmarks/ncu_compare.py --raw "$LOG/ncu_compare.csv" ${NCU_ARGS:-}
# shortrows: softmax rung 10 against the rungs auto chose before it on short rows
script_phase shortrows "${SHORTROWS_TIMEOUT:-150}" 30 benchmarks/softmax_short_rows.py \
  --json "$LOG/softmax_short_rows.json" ${SHORTROWS_ARGS:-}
# packed: 16-bit rows held packed against the unpacked configs auto took before
script_phase packed "${PACKED_TIMEOUT:-200}" 80 benchmarks/softmax_packed.py \
  --json "$LOG/softmax_packed.json" ${PACKED_ARGS:-}
# pipelined: softmax rung 11 against the configs auto took before it on the long rows
script_phase pipelined "${PIPELINED_TIMEOUT:-200}" 80 benchmarks/softmax_pipelined.py \
  --json "$LOG/softmax_pipelined.json" ${PIPELINED_ARGS:-}
# splitprobe: softmax rung 09's fixed costs and split configs on few long rows
script_phase splitprobe "${SPLITPROBE_TIMEOUT:-150}" 80 benchmarks/softmax_split_probe.py \
  --json "$LOG/softmax_split_probe.json" ${SPLITPROBE_ARGS:-}
# softncu: softmax's auto kernel and torch.softmax under ncu on the shapes below 0.85 of copy
script_phase softncu "${SOFTNCU_TIMEOUT:-240}" 40 benchmarks/softmax_ncu.py \
  --raw "$LOG/softmax_ncu.csv" ${SOFTNCU_ARGS:-}
# rowlanes: softmax rung 10 on 16-bit rows one past a config's slots, fewer lanes against more
script_phase rowlanes "${ROWLANES_TIMEOUT:-150}" 60 benchmarks/softmax_row_tile_lanes.py \
  --json "$LOG/softmax_row_tile_lanes.json" ${ROWLANES_ARGS:-}
# near128: fp32 / bf16 rows of 127 and 128, rung 10 with more lanes a row against auto, rung 07
# and torch.softmax (NEAR128_ARGS: --shapes / --precisions)
script_phase near128 "${NEAR128_TIMEOUT:-200}" 80 benchmarks/softmax_rows_near_128.py \
  --torch --json "$LOG/softmax_rows_near_128.json" ${NEAR128_ARGS:-}
# splitheld: split rows held packed (16-bit, with or without a shared part) or partly in shared
# memory (fp32) on rung 09, one 1024-thread block an SM against two of 512, 16-bit rows of
# 1048576 on one cluster of 16 (rung 08), against what auto took before them (SPLITHELD_ARGS:
# --shapes / --precisions / --torch / --b2b / --reps)
script_phase splitheld "${SPLITHELD_TIMEOUT:-180}" 80 benchmarks/softmax_split_held.py \
  --json "$LOG/softmax_split_held.json" ${SPLITHELD_ARGS:-}
# rwphases: a device copy against a read then a write of the same bytes (torch), what a
# read-all-then-write-all pass can reach (RWPHASES_ARGS: --sizes ...)
script_phase rwphases "${RWPHASES_TIMEOUT:-90}" 20 benchmarks/read_write_phases.py \
  --json "$LOG/read_write_phases.json" ${RWPHASES_ARGS:-}
# tinyrows: rows of 1..3 on rung 04 (auto) against rung 10's row tile (TINYROWS_ARGS: --torch ...)
script_phase tinyrows "${TINYROWS_TIMEOUT:-120}" 60 benchmarks/softmax_tiny_rows.py \
  --json "$LOG/softmax_tiny_rows.json" ${TINYROWS_ARGS:-}
# routegaps: row lengths outside the suite where auto's route may be weak (rung 08 between
# the rung-11 slices and with 64-256 rows, ~200K 16-bit on a slice 0.76 full, 16-bit past
# 262144 on rung 04's stream) against rung 11 / rung 09 candidates (ROUTEGAPS_ARGS: --shapes /
# --torch / --b2b)
script_phase routegaps "${ROUTEGAPS_TIMEOUT:-300}" 80 benchmarks/softmax_route_gaps.py \
  --json "$LOG/softmax_route_gaps.json" ${ROUTEGAPS_ARGS:-}
# views: softmax() on column slices (x at a pitch wider than the row) against contiguous rows,
# y contiguous or at x's pitch (VIEWS_ARGS: --shapes PREC:RxC ... / --pad N / --reps N).
# VIEWS_BEFORE=DIR (a copy of an earlier tree's drvgemm/ and cu/, e.g. under the ignored .gpu/,
# carried): phase viewsbefore runs the same script on that package first, on the same machine.
if have viewsbefore && [[ -n "${VIEWS_BEFORE:-}" ]]; then
  cp drvgemm/runtime/_fastlaunch*.so "$VIEWS_BEFORE/drvgemm/runtime/" 2>/dev/null
  PYTHONPATH="$VIEWS_BEFORE" script_phase viewsbefore "${VIEWS_TIMEOUT:-200}" 40 \
    "$VIEWS_BEFORE/benchmarks/softmax_views.py" --json "$LOG/softmax_views_before.json" ${VIEWS_ARGS:-}
fi
script_phase views "${VIEWS_TIMEOUT:-200}" 40 benchmarks/softmax_views.py \
  --json "$LOG/softmax_views.json" ${VIEWS_ARGS:-}
# splittimeline: when each block of the split-row rung reaches each phase of a row, stamped
# inside the kernel (SPLITTIMELINE_ARGS: [--shapes PREC:RxC ...] [--reps N])
script_phase splittimeline "${SPLITTIMELINE_TIMEOUT:-150}" 80 benchmarks/softmax_split_timeline.py \
  --json "$LOG/softmax_split_timeline.json" ${SPLITTIMELINE_ARGS:-}
# beforeafter: a softmax kernel from the tree against an earlier source of it (BEFOREAFTER_ARGS:
# OLD_DIR [--shapes PREC:RxC[:KERNEL] ...]; see benchmarks/softmax_before_after.py; an OLD_DIR
# under the ignored .gpu/ travels only when the device call carries it)
script_phase beforeafter "${BEFOREAFTER_TIMEOUT:-200}" 40 benchmarks/softmax_before_after.py \
  ${BEFOREAFTER_ARGS:-} --json "$LOG/softmax_before_after.json"
# rung30: rung 30's geometry knobs and split counts on the decode shapes, against cuBLAS
script_phase rung30 "${RUNG30_TIMEOUT:-300}" 60 benchmarks/rung30_sweep.py \
  --json "$LOG/rung30_sweep.json" ${RUNG30_ARGS:-}
# power: rung 20's bf16 entry and variants against cuBLAS, each back to back for seconds, with
# the SM clock and board power (POWER_ARGS: --variants, --sizes, --seconds, --rounds)
script_phase power "${POWER_TIMEOUT:-240}" 60 benchmarks/wgmma_power.py \
  --json "$LOG/wgmma_power.json" ${POWER_ARGS:-}
# family: rung 20's members (or FAMILY_ARGS="--members ...": any entries) x split counts, against cuBLAS
script_phase family "${FAMILY_TIMEOUT:-300}" 80 benchmarks/wgmma_family.py \
  --json "$LOG/wgmma_family.json" ${FAMILY_ARGS:-}
# ktimes: each kernel's GPU time (ncu) under gemm() and torch.matmul on small shapes
script_phase ktimes "${KTIMES_TIMEOUT:-240}" 60 benchmarks/kernel_times.py --json "$LOG/kernel_times.json" ${KTIMES_ARGS:-}

stamp done
[[ -n $skipped ]] && echo "NOT RUN (time):$skipped -- run them in another call" | tee -a "$LOG/phases.txt"
pack
n=$(find "$OUT" -type f | wc -l)
(( n > 8 )) && echo "WARNING: $n files in \$OUT; only 8 come back"
grep -E "exit|skipped|NOT RUN" "$LOG/phases.txt"
[[ -z $failed ]] || { echo "FAILED:$failed"; exit 1; }
exit 0
