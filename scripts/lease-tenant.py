"""A tenant's load for the lease-check measurement in gpu-run.sh: holds FILL of the GPU's free
memory and runs BF16 matmuls (n = 8192) back to back for SECONDS, printing one line a second
(unix time, TFLOP/s over that second) so the tenant's throughput with and without the
validator's lease checks can be compared.

    python3 lease-tenant.py SECONDS [FILL]
"""
import sys
import time

import torch

seconds = float(sys.argv[1])
fill = float(sys.argv[2]) if len(sys.argv) > 2 else 0.8
free, _ = torch.cuda.mem_get_info()
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
held = torch.empty(int(free * fill) - 3 * n * n * 2, dtype=torch.uint8, device="cuda")
end = time.time() + seconds
while time.time() < end:
    started, count = time.time(), 0
    while time.time() - started < 1.0:
        for _ in range(20):
            c = a @ b
        torch.cuda.synchronize()
        count += 20
    elapsed = time.time() - started
    print(f"{time.time():.3f} {count * 2 * n**3 / elapsed / 1e12:.1f}", flush=True)
del held, c
