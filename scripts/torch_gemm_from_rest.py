# PyTorch's cuBLAS GEMM at n = 16384 timed as pog's standard suite times that size (three
# warm-up runs; then five times: REST s idle, one untimed run, one timed run; the median) and,
# beside it, back to back as a five-run median usually is: the like-with-like reference for
# pog's figures at n = 16384 on a power-capped card (docs/benchmarks.md, "each run at n = 16384
# a burst from rest"). Prints JSON: {"<precision>_from_rest": TFLOP/s, "..._back_to_back": ...,
# and each way's per-run ms}.
#
#   python3 scripts/torch_gemm_from_rest.py [--rest 0.3] bf16 fp16 tf32
import argparse, json, time
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--rest", type=float, default=0.3, help="idle seconds before each timed run")
parser.add_argument("precisions", nargs="+", choices=["bf16", "fp16", "tf32", "fp32"])
args = parser.parse_args()
dev = torch.device("cuda")
types = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}
n = 16384
res = {}
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for name in args.precisions:
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    a = torch.randn(n, n, device=dev, dtype=types[name])
    b = torch.randn(n, n, device=dev, dtype=types[name])
    for way in ("from_rest", "back_to_back"):
        torch.cuda.synchronize()
        time.sleep(1.0)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        runs = []
        for _ in range(5):
            if way == "from_rest":
                torch.cuda.synchronize()
                time.sleep(args.rest)
                a @ b
            start.record(); a @ b; end.record(); end.synchronize()
            runs.append(start.elapsed_time(end))
        res[f"{name}_{way}"] = round(2 * n**3 / (sorted(runs)[2] / 1e3) / 1e12, 1)
        res[f"{name}_{way}_runs_ms"] = [round(t, 2) for t in runs]
    del a, b
print(json.dumps(res))
