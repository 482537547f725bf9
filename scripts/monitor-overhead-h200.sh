#!/usr/bin/env bash
# The monitor's CPU cost on a GPU host (issue 13), everything in one call so the figures share a
# card and a moment:
#   - `pog monitor run` at 1 s for DURATION seconds: the slow fields every sample (--slow-every 1), at the
#     default cadence, and at the default with the SQLite history on;
#   - the anchors over the same DURATION: `nvidia-smi --query-gpu=<8 fields> -l 1`, and pynvml
#     reading 11 fields each second (scripts/pynvml_sampler.py);
#   - when DEVICE_TESTS names pog-device's test binary: its sampler test, which prints the CPU
#     time of every field.
# Each pog and anchor process runs alone (one after the other) so no one's NVML calls wait on
# another's. Figures: OUT_DIR/overhead.txt (a table) and OUT_DIR/overhead.json.
#
# Usage: scripts/monitor-overhead-h200.sh OUT_DIR   (POG: the binary, DURATION: seconds each, 60)
set -euo pipefail
OUT=${1:?usage: scripts/monitor-overhead-h200.sh OUT_DIR}
POG=${POG:-target/release/pog}
SECONDS_EACH=${DURATION:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
TIMEFORMAT='%U %S %R'
ROWS="$OUT/rows.tsv"
: > "$ROWS"

# CPU ticks (user + system) a process has used so far, from /proc/PID/stat.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2> /dev/null || echo 0; }

# measure NAME COMMAND...: CPU (user + system) over wall time of one process run, whole (start
# up included) and steady (from 5 s in to 2 s before the end, where start-up no longer counts).
measure() {
    local name=$1
    shift
    { time "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"; } 2> "$OUT/$name.time" &
    local shell=$!
    sleep 5
    local pid
    pid=$(pgrep -P "$shell" | head -1 || true)
    # Follow a subshell of `time`, or `timeout`, down to the measured command itself.
    while [ -n "$pid" ] && [ -n "$(pgrep -P "$pid" | head -1 || true)" ] \
        && grep -qxE 'bash|timeout' "/proc/$pid/comm"; do
        pid=$(pgrep -P "$pid" | head -1 || true)
    done
    local t0 s0 t1
    t0=$(ticks "$pid")
    s0=$(date +%s.%N)
    sleep $((SECONDS_EACH - 7))
    t1=$(ticks "$pid")
    local steady
    steady=$(awk -v a="$t0" -v b="$t1" -v s="$s0" -v e="$(date +%s.%N)" -v hz="$(getconf CLK_TCK)" \
        'BEGIN{printf "%.4f", (b - a) / hz / (e - s) * 100}')
    wait "$shell" || true
    read -r user sys wall < "$OUT/$name.time"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$user" "$sys" "$wall" "$steady" >> "$ROWS"
}

measure pog-slow-every-1 "$POG" monitor run --interval 1 --duration "$SECONDS_EACH" --no-history --slow-every 1
measure pog-default "$POG" monitor run --interval 1 --duration "$SECONDS_EACH" --no-history
measure pog-default-with-history "$POG" monitor run --interval 1 --duration "$SECONDS_EACH" --history "$OUT/history.sqlite"
measure nvidia-smi-8-fields timeout "$SECONDS_EACH" nvidia-smi \
    --query-gpu=temperature.gpu,power.draw,utilization.gpu,memory.used,clocks.sm,clocks.mem,clocks_event_reasons.active,pcie.link.gen.current \
    --format=csv -l 1
measure pynvml-11-fields python3 "$HERE/pynvml_sampler.py" "$SECONDS_EACH"
if [ -n "${DEVICE_TESTS:-}" ]; then
    "$DEVICE_TESTS" monitor::tests::samples_a_real_gpu --ignored --nocapture --test-threads 1 \
        > "$OUT/field-costs.txt" 2>&1 || true
fi

python3 - "$ROWS" "$OUT" <<'PY'
import json, sys
rows, out = sys.argv[1], sys.argv[2]
result = []
for line in open(rows):
    name, user, sys_s, wall, steady = line.split("\t")
    user, sys_s, wall = float(user), float(sys_s), float(wall)
    result.append({"name": name, "user_s": user, "sys_s": sys_s, "wall_s": wall,
                   "percent_of_one_core": 100 * (user + sys_s) / wall,
                   "steady_percent_of_one_core": float(steady)})
json.dump(result, open(f"{out}/overhead.json", "w"), indent=1)
with open(f"{out}/overhead.txt", "w") as t:
    t.write(f"{'process':<28} {'user s':>7} {'sys s':>7} {'wall s':>7} {'% core':>7} {'steady %':>9}\n")
    for r in result:
        t.write(f"{r['name']:<28} {r['user_s']:>7.3f} {r['sys_s']:>7.3f} {r['wall_s']:>7.1f} "
                f"{r['percent_of_one_core']:>7.3f} {r['steady_percent_of_one_core']:>9.3f}\n")
print(open(f"{out}/overhead.txt").read())
PY
cat "$OUT/pynvml-11-fields.out" 2> /dev/null || true
grep -E "per sample|field " "$OUT/field-costs.txt" 2> /dev/null || true
