#!/usr/bin/env bash
# The dashboard in headless Chromium: installs what it needs (Debian's chromium, playwright-core
# from npm under target/), starts `pog monitor run` fed by the committed H200 trace, and runs
# scripts/dashboard_e2e.mjs against it. Prints "N passed, N failed"; exits non-zero on a failure.
#
# Usage: scripts/dashboard_e2e.sh [SCREENSHOT.png]   (POG: the binary, default the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
POG=${POG:-${CARGO_TARGET_DIR:-target}/debug/pog}
SHOT=${1:-target/dashboard-e2e/dashboard.png}
export PLAYWRIGHT_HOME="$PWD/target/dashboard-e2e"
if ! command -v chromium > /dev/null; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium > /dev/null
fi
mkdir -p "$PLAYWRIGHT_HOME"
if [ ! -d "$PLAYWRIGHT_HOME/node_modules/playwright-core" ]; then
    (cd "$PLAYWRIGHT_HOME" && { [ -f package.json ] || npm init -y > /dev/null; } \
        && npm install --no-audit --no-fund --silent playwright-core@1)
fi
[ -x "$POG" ] || cargo build -q -p pog
TRACE=crates/monitor/tests/data/h200-healthy.csv
LOG=$(mktemp)
"$POG" monitor run --no-history --from-trace "$TRACE" --train "$TRACE" --interval 0.1 \
    --duration 60 --metrics-listen 127.0.0.1:0 > /dev/null 2> "$LOG" &
MONITOR=$!
trap 'kill "$MONITOR" 2> /dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 50); do
    ADDRESS=$(grep -o '127.0.0.1:[0-9]*' "$LOG" | head -1 || true)
    [ -n "$ADDRESS" ] && break
    sleep 0.1
done
[ -n "${ADDRESS:-}" ] || { echo "pog monitor did not start:"; cat "$LOG"; exit 1; }
sleep 3 # a few seconds of samples on the charts
node scripts/dashboard_e2e.mjs "http://$ADDRESS/?window=600" "$SHOT"
