#!/usr/bin/env bash
# The dashboard in headless Chromium: installs what it needs (Debian's chromium, playwright-core
# from npm under target/), starts `pog monitor run` fed by the committed H200 traces as a host of
# eight GPUs (one of them with an XID 79 at its 120th row, so that an alert is drawn), and runs
# scripts/dashboard_e2e.mjs against it, which ends by killing the monitor to see the page say so,
# then loads the validator's fleet overview page (crates/validator/src/overview.html) on answers
# the browser gives it.
# Prints "N passed, N failed"; exits non-zero on a failure.
#
# Usage: scripts/dashboard_e2e.sh [SCREENSHOT_DIR]   (default target/dashboard-e2e; `docs` refreshes
#        the screenshots the docs show)   POG: the binary, default the debug build
set -euo pipefail
cd "$(dirname "$0")/.."
POG=${POG:-${CARGO_TARGET_DIR:-target}/debug/pog}
SHOTS=${1:-target/dashboard-e2e}
export PLAYWRIGHT_HOME="$PWD/target/dashboard-e2e"
if ! command -v chromium > /dev/null; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium > /dev/null
fi
mkdir -p "$PLAYWRIGHT_HOME" "$SHOTS"
if [ ! -d "$PLAYWRIGHT_HOME/node_modules/playwright-core" ]; then
    (cd "$PLAYWRIGHT_HOME" && { [ -f package.json ] || npm init -y > /dev/null; } \
        && npm install --no-audit --no-fund --silent playwright-core@1)
fi
[ -x "$POG" ] || cargo build -q -p pog
DATA=crates/monitor/tests/data
WORK=$(mktemp -d)
LOG="$WORK/monitor.log"
MONITOR=""
trap '[ -z "$MONITOR" ] || kill "$MONITOR" 2> /dev/null || true; rm -rf "$WORK"' EXIT
# GPU 1: the second healthy H200 recording with an XID 79 ("fallen off the bus") at row 120
# (66 s into it, 12 s into the run).
awk '{ sub(/\r$/, "") } NR == 1 { print $0 ",xid"; next } NR == 121 { print $0 ",79"; next } { print $0 "," }' \
    "$DATA/h200-healthy-2.csv" > "$WORK/with-xid.csv"
# The H200's limits as its nvidia-smi reports them (../shared/fixtures/h200/nvidia-smi-q.txt):
# 700 W, and slowdown 2 °C past its 87 °C T.Limit.
"$POG" monitor run --no-history --train "$DATA/h200-healthy.csv" --interval 0.1 --duration 100 \
    --from-trace "$DATA/h200-healthy.csv" --from-trace "$WORK/with-xid.csv" \
    --from-trace "$DATA/h200-healthy-3.csv" --from-trace "$DATA/h200-healthy.csv" \
    --from-trace "$DATA/h200-healthy-2.csv" --from-trace "$DATA/h200-healthy-3.csv" \
    --from-trace "$DATA/h200-healthy.csv" --from-trace "$DATA/h200-healthy-2.csv" \
    --trace-power-limit 700 --trace-slowdown-temp 89 \
    --metrics-listen 127.0.0.1:0 > /dev/null 2> "$LOG" &
MONITOR=$!
disown "$MONITOR" # the test kills it: no job notice
for _ in $(seq 50); do
    ADDRESS=$(grep -o '127.0.0.1:[0-9]*' "$LOG" | head -1 || true)
    [ -n "$ADDRESS" ] && break
    sleep 0.1
done
[ -n "${ADDRESS:-}" ] || { echo "pog monitor did not start:"; cat "$LOG"; exit 1; }
sleep 8 # the first phases of the traces on the charts, the load starting
node scripts/dashboard_e2e.mjs "http://$ADDRESS/?window=600" "$SHOTS" "$MONITOR" 8
