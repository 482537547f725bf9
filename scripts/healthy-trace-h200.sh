#!/usr/bin/env bash
# A healthy trace of varied load for the health monitor's evaluation (issue 26): `pog monitor
# run` records every second (baseline trained on the committed healthy H200 trace, so its
# alerts are the false alarms of loads it never saw) while PyTorch puts a schedule of loads on
# the GPU: idle, BF16 matmuls at full and at half duty, a memory-bound copy, FP32 matmuls, and
# idle again between each. Leaves trace.csv, alerts.jsonl, loads.txt (each phase's start, unix
# s) and summary.txt under OUT.
#
#   POG=.gpu/pog OUT=/tmp/trace PHASE_SECONDS=60 bash scripts/healthy-trace-h200.sh
set -uo pipefail
POG=${POG:-.gpu/pog}
OUT=${OUT:-$(mktemp -d)}
PHASE=${PHASE_SECONDS:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
"$POG" monitor run --interval 1 --record "$OUT/trace.csv" --no-history \
  --train "$HERE/../crates/monitor/tests/data/h200-healthy.csv" \
  --json >"$OUT/alerts.jsonl" 2>"$OUT/monitor.log" &
monitor=$!
python3 - "$PHASE" >"$OUT/loads.txt" 2>"$OUT/loads.log" <<'PY'
import sys, time
import torch
phase = float(sys.argv[1])
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
af, bf = a.float(), b.float()
src = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(src)
def run(name, step, duty=1.0):
    print(f"{time.time():.0f} {name}", flush=True)
    end = time.time() + phase
    while time.time() < end:
        started = time.time()
        while time.time() - started < 0.1 * duty:
            step(); torch.cuda.synchronize()
        time.sleep(0.1 * (1 - duty))
idle = lambda: time.sleep(0.05)
for name, step, duty in [
    ("idle", idle, 1.0),
    ("bf16-matmul", lambda: a @ b, 1.0),
    ("idle", idle, 1.0),
    ("bf16-matmul-half-duty", lambda: a @ b, 0.5),
    ("idle", idle, 1.0),
    ("memory-copy", lambda: dst.copy_(src), 1.0),
    ("idle", idle, 1.0),
    ("fp32-matmul", lambda: af @ bf, 1.0),
    ("idle", idle, 1.0),
]:
    run(name, step, duty)
PY
kill -TERM "$monitor"; wait "$monitor"
{
  echo "healthy trace on $(nvidia-smi --query-gpu=name,uuid --format=csv,noheader): $(($(wc -l <"$OUT/trace.csv") - 1)) samples, $(wc -l <"$OUT/alerts.jsonl") alerts"
  cat "$OUT/loads.txt"
  python3 "$HERE/alert-counts.py" "$OUT/alerts.jsonl" --each
} | tee "$OUT/summary.txt"
