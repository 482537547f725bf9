#!/usr/bin/env bash
# Every GPU check and benchmark pog has, in one call on a GPU machine, with the PyTorch
# reference measured in the same call (see docs/benchmarks.md for how to run it through the
# device tool). Writes at most 8 files under $OUT and prints a short table last.
#
#   POG=.gpu/pog TORCH_REF=.gpu/torch_reference.py OUT=/tmp/out scripts/gpu-run.sh
set -uo pipefail
POG=${POG:-.gpu/pog}
TORCH_REF=${TORCH_REF:-.gpu/torch_reference.py}
SUITE=${SUITE:-standard}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
LOG="$OUT/runs.log"   # every command's output, one after another
: >"$LOG"
summary=()

# run NAME EXPECTED_EXIT CMD... : runs a command, appends its output to runs.log (stdout of
# the *-json runs goes to NAME.json instead), records the exit code and wall time.
run() {
  local name=$1 expected=$2; shift 2
  local started=$(date +%s%N)
  echo "=== $name: $*" >>"$LOG"
  if [[ $name == *json ]]; then "$@" >"$OUT/$name.json" 2>>"$LOG"; else "$@" >>"$LOG" 2>&1; fi
  local code=$?
  local ms=$(( ($(date +%s%N) - started) / 1000000 ))
  local ok=ok; [ "$code" = "$expected" ] || ok=UNEXPECTED
  summary+=("$(printf '%-26s exit %-3s expected %-3s %-10s %8d ms' "$name" "$code" "$expected" "$ok" "$ms")")
}

# The real host as it is: must come out genuine and pass (exit 0).
run inspect 0 "$POG" inspect
run check 0 "$POG" check
run check-json 0 "$POG" check --json

# Attacks on the real host: each must fail (exit 1).
run attack-ld-preload 1 env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libm.so.6 "$POG" inspect
fake_dir=$(mktemp -d)
real_smi=$(command -v nvidia-smi)
cat >"$fake_dir/nvidia-smi" <<FAKE
#!/bin/sh
"$real_smi" "\$@" | sed 's/NVIDIA H200/NVIDIA H100 80GB HBM3/; s/<total>143771 MiB/<total>81559 MiB/'
FAKE
chmod +x "$fake_dir/nvidia-smi"
run attack-fake-nvidia-smi 1 "$POG" inspect --nvidia-smi "$fake_dir/nvidia-smi"
# A hung nvidia-smi must not hang pog: it is cut off after 2 s and reported (a warning).
printf '#!/bin/sh\nsleep 120\n' >"$fake_dir/hung-smi"; chmod +x "$fake_dir/hung-smi"
run hung-nvidia-smi 0 "$POG" inspect --nvidia-smi "$fake_dir/hung-smi" --nvidia-smi-timeout 2

# Benchmarks, then the PyTorch reference in the same call.
run bench 0 "$POG" bench --suite "$SUITE"
run bench-json 0 "$POG" bench --suite "$SUITE" --no-host --json
if [ -f "$TORCH_REF" ]; then
  run torch-reference-json 0 python3 "$TORCH_REF"
fi

# The short table, last.
{
  echo
  echo "== pog GPU run: $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,pci.bus_id,uuid --format=csv,noheader | tr '\n' ';')"
  printf '%s\n' "${summary[@]}"
} | tee "$OUT/summary.txt"
if [ -f "$OUT/torch-reference-json.json" ] && [ -f "$OUT/bench-json.json" ]; then
  python3 - "$OUT/bench-json.json" "$OUT/torch-reference-json.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
bench, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
names = {"fp64": "fp64", "fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "bf16": "bf16", "fp8": "fp8", "int8": "int8"}
print(f"{'figure':28} {'pog':>10} {'torch':>10} {'ratio':>7}")
for g in bench["gpus"]:
    for r in g["gemm"]:
        p = r["precision"]; n = r["size"]
        key = f"gemm_{p}_{n}_tops" if p == "int8" else f"gemm_{p}_{n}_tflops"
        if key in ref and r["tflops_median"]:
            print(f"{p + ' n=' + str(n):28} {r['tflops_median']:10.1f} {ref[key]:10.1f} {r['tflops_median'] / ref[key]:7.3f}")
    keys = {"device_to_device": "d2d_copy_GBps_read_plus_write", "host_to_device_pinned": "h2d_pinned_GBps",
            "device_to_host_pinned": "d2h_pinned_GBps", "bidirectional_pinned": "bidir_pinned_GBps_total",
            "host_to_device_pageable": "h2d_pageable_GBps"}
    for c in g["copies"]:
        k = keys.get(c["kind"])
        if k in ref and c["gbs_median"]:
            print(f"{c['kind']:28} {c['gbs_median']:10.1f} {ref[k]:10.1f} {c['gbs_median'] / ref[k]:7.3f}")
PY
fi
