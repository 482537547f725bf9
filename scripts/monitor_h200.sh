#!/usr/bin/env bash
# pog monitor on a GPU host (issue 13), in one call:
#   1. the sampler's CPU cost: `pog monitor run` alone for IDLE_SECONDS at 1 s, all fields;
#   2. the anchor: `nvidia-smi --query-gpu=<8 fields> -l 1` for 20 s, as ../shared/h200 measured;
#   3. a trace recorded by `pog monitor run --record` through a sustained `pog bench` load, the
#      alerts it raised, and its /metrics page scraped mid-load;
#   4. the detectors replayed over that trace, trained on the committed healthy H200 trace.
# Everything lands in OUT_DIR; summary.txt has the figures.
#
# Usage: cargo build --release && scripts/monitor_h200.sh OUT_DIR
# Knobs: POG (the binary), IDLE_SECONDS (60), BENCH_ARGS (the load), PORT (9500),
#        MONITOR_SOURCE (extra `monitor run` arguments, e.g. "--gpus 0"; "--from-trace FILE"
#        rehearses the script on a host without a GPU, with BENCH=0 to skip the load).
set -euo pipefail

OUT=${1:?usage: scripts/monitor_h200.sh OUT_DIR}
POG=${POG:-target/release/pog}
IDLE_SECONDS=${IDLE_SECONDS:-60}
BENCH=${BENCH:-1}
BENCH_ARGS=${BENCH_ARGS:---no-host --suite quick --sustained-seconds 60}
PORT=${PORT:-9500}
read -r -a SOURCE <<< "${MONITOR_SOURCE:-}"
HEALTHY=crates/monitor/tests/data/h200-healthy.csv
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
TIMEFORMAT='%U %S %R'

say "== $(date -u +%FT%TZ) on $(hostname); $("$POG" --version)"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$SUMMARY" || true

# 1. The sampler alone: CPU seconds over wall seconds.
{ time "$POG" monitor run "${SOURCE[@]}" --interval 1 --duration "$IDLE_SECONDS" --json --history "$OUT/idle.sqlite" \
    > "$OUT/idle-alerts.jsonl" 2> "$OUT/idle-monitor.log"; } 2> "$OUT/idle-monitor.time" || true
read -r user sys wall < "$OUT/idle-monitor.time"
say "pog monitor run, ${IDLE_SECONDS} s at 1 s: user ${user} s, sys ${sys} s, wall ${wall} s = $(awk -v u="$user" -v s="$sys" -v w="$wall" 'BEGIN{printf "%.3f", 100*(u+s)/w}') % of one core"
grep -E "not supported|reading " "$OUT/idle-monitor.log" | sed 's/^/  /' | tee -a "$SUMMARY" || true

# 2. The anchor.
if command -v nvidia-smi > /dev/null; then
    { time timeout 20 nvidia-smi \
        --query-gpu=temperature.gpu,power.draw,utilization.gpu,memory.used,clocks.sm,clocks.mem,clocks_event_reasons.active,pcie.link.gen.current \
        --format=csv -l 1 > "$OUT/nvidia-smi-loop.csv" 2>&1; } 2> "$OUT/nvidia-smi.time" || true
    read -r user sys wall < "$OUT/nvidia-smi.time"
    say "nvidia-smi -l 1, 8 fields, 20 s: user ${user} s, sys ${sys} s, wall ${wall} s = $(awk -v u="$user" -v s="$sys" -v w="$wall" 'BEGIN{printf "%.3f", 100*(u+s)/w}') % of one core"
fi

# 3. A trace through sustained load, with /metrics scraped mid-way.
"$POG" monitor run "${SOURCE[@]}" --interval 1 --train "$HEALTHY" --record "$OUT/trace.csv" --history "$OUT/load.sqlite" \
    --metrics-listen "127.0.0.1:$PORT" --json > "$OUT/load-alerts.jsonl" 2> "$OUT/load-monitor.log" &
MONITOR=$!
sleep 5
if [ "$BENCH" = 1 ]; then
    read -r -a bench_args <<< "$BENCH_ARGS"
    "$POG" bench "${bench_args[@]}" --json > "$OUT/bench.json" 2> "$OUT/bench.log" &
    LOAD=$!
    sleep 30
    python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics').read().decode())" > "$OUT/metrics.txt"
    wait "$LOAD" || say "pog bench exited $?"
    sleep 10 # the cool-down after the load, in the trace too
else
    sleep 5
    python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics').read().decode())" > "$OUT/metrics.txt"
fi
kill -INT "$MONITOR"
status=0
wait "$MONITOR" || status=$?
say "pog monitor run under load: exit ${status}, $(($(wc -l < "$OUT/trace.csv") - 1)) samples recorded, $(wc -l < "$OUT/load-alerts.jsonl") alert(s)"
sed 's/^/  /' "$OUT/load-alerts.jsonl" | tee -a "$SUMMARY"
say "metrics page: $(grep -c '^DCGM_FI_DEV' "$OUT/metrics.txt") DCGM series, $(grep -c '^pog_' "$OUT/metrics.txt") pog series"

# 4. The same trace replayed (exit 1 means the detectors found something: read the alerts).
"$POG" monitor replay --train "$HEALTHY" "$OUT/trace.csv" > "$OUT/replay.txt" 2>&1 || true
tail -1 "$OUT/replay.txt" | sed 's/^/replay: /' | tee -a "$SUMMARY"
