"""A second process on the GPU (PyTorch), for the GPU runs that need one: the lease checks
beside a paying tenant and the cheats of a co-tenant stealing time or bandwidth from a proof
(gpu-run.sh, memory-proof-h200.sh).

    python3 cotenant.py KIND SECONDS [--duty D] [--fill F] [--ready FILE]

KIND is `gemm` (BF16 matmuls, n = 8192, 20 to a burst) or `copy` (2 GiB device-to-device
copies, one to a burst). --duty D keeps the GPU busy D of the wall time (a pause of
burst × (1 − D) / D after each burst; 1 by default). --fill F holds F of the GPU's free memory
besides the work's own buffers. --ready FILE is written once the work is warm, so a caller can
start what it measures only then. Prints one line a second (unix time and the rate over that
second: TFLOP/s for gemm, GB/s read + write for copy) and, last, one JSON line with the share of
the wall time the GPU was busy for it and its rate while busy. SIGTERM ends it early and still
prints the JSON line.
"""
import argparse
import json
import signal
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("kind", choices=["gemm", "copy"])
parser.add_argument("seconds", type=float)
parser.add_argument("--duty", type=float, default=1.0)
parser.add_argument("--fill", type=float, default=0.0)
parser.add_argument("--ready")
args = parser.parse_args()
if not 0 < args.duty <= 1:
    parser.error("--duty must be in (0, 1]")

stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)

if args.kind == "gemm":
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    work_bytes = 3 * n * n * 2

    def burst():
        for _ in range(20):
            a @ b
        return 20 * 2 * n**3 / 1e12  # TFLOP
else:
    a = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    work_bytes = 2 * a.numel()

    def burst():
        b.copy_(a)
        return 2 * a.numel() / 1e9  # GB read + written

free, _ = torch.cuda.mem_get_info()
held = torch.empty(max(int(free * args.fill) - work_bytes, 0), dtype=torch.uint8, device="cuda") if args.fill else None
for _ in range(3):
    burst()
torch.cuda.synchronize()
if args.ready:
    open(args.ready, "w").write("ready")

started = time.time()
busy = done = 0.0
second_start, second_done = started, 0.0
while not stop and time.time() - started < args.seconds:
    t = time.time()
    amount = burst()
    torch.cuda.synchronize()
    dt = time.time() - t
    busy += dt
    done += amount
    second_done += amount
    if args.duty < 1:
        time.sleep(dt * (1 - args.duty) / args.duty)
    now = time.time()
    if now - second_start >= 1.0:
        print(f"{now:.3f} {second_done / (now - second_start):.1f}", flush=True)
        second_start, second_done = now, 0.0
elapsed = time.time() - started
print(json.dumps({"run": f"cotenant-{args.kind}-{args.duty}", "busy_share": busy / elapsed if elapsed else 0,
                  "rate_while_busy": done / busy if busy else 0,
                  "unit": "TFLOP/s" if args.kind == "gemm" else "GB/s"}), flush=True)
del held
