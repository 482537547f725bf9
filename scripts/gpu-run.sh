#!/usr/bin/env bash
# Every GPU check and benchmark pog has, in one call on a GPU machine, with the PyTorch
# reference measured in the same call (see docs/benchmarks.md for how to run it through the
# device tool). Leaves two files under $OUT (summary.txt and results.tar.gz with every log and
# JSON) and prints a short table last.
#
#   POG=.gpu/pog TORCH_REF=.gpu/torch_reference.py OUT=/tmp/out [SUITE=standard] [FULL_BENCH=0] [PROVE_ONLY=1] [MONITOR=1] scripts/gpu-run.sh
#
# PROVE_ONLY=1 runs the checks and the proofs only (no benchmark suites, no PyTorch).
# QUICK=1 (with PROVE_ONLY=1), for a short lease: the proofs only, three runs a precision, the
# GPU-against-CPU roots, the memory proof's tests, the verification cost and the proof of CPU
# (about 2 minutes; no check, attacks, network round, fabric or device tests).
# TRACE=1 records the whole call as a health trace (`pog monitor run --record`, 1 s, with the
# committed healthy H200 trace as the baseline): the alerts a healthy card raises under every
# load the run puts on it, /metrics (the GPM profiling fields among them) and the dashboard's
# NVML limits scraped every 20 s, and nvidia-smi's temperature thresholds beside them; under
# $OUT/trace/. RUNS=N proves each precision N times (default 5; 3 with QUICK=1).
# CHEATS=1 adds the cheats a proof must catch: a GEMM co-tenant 20 %, 40 % and all of the time,
# and scripts/memory-proof-h200.sh (capacity cheats, a bandwidth thief, whole rounds).
# MONITOR=1 adds the health monitor's cost beside nvidia-smi and pynvml (5.5 min; the scripts
# monitor-overhead-h200.sh and pynvml_sampler.py beside this one) and its live check, under
# $OUT/monitor/.
# Test binaries carried in .gpu/ (built with `cargo test --release --no-run`, see
# docs/benchmarks.md) run their GPU-only tests, which are #[ignore]d elsewhere, with --ignored.
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
  # Also in the log, so that a call cut off before the table still tells each step's outcome.
  echo "=== $name: exit $code (expected $expected, $ok), $ms ms" >>"$LOG"
}

# NVLink multicast stays off (the machines' rule), and NCCL comes from PyTorch's nvidia-nccl
# wheel: it ships libnccl.so.2, cudarc loads libnccl.so, so a link to it goes on the loader path.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl_dir=$(python3 -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null)
if [ -n "$nccl_dir" ] && [ -f "$nccl_dir/libnccl.so.2" ]; then
  nccl_link=$(mktemp -d)
  ln -s "$nccl_dir/libnccl.so.2" "$nccl_link/libnccl.so"
  export LD_LIBRARY_PATH="$nccl_link:$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

QUICK=${QUICK:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-$([ "$QUICK" = 1 ] && echo 3 || echo 5)}

# The health trace of the whole call, if asked for (stopped before the table).
if [ "${TRACE:-0}" = 1 ]; then
  mkdir -p "$OUT/trace"
  nvidia-smi -q -d TEMPERATURE >"$OUT/trace/nvidia-smi-temperature.txt" 2>&1
  "$POG" monitor run --interval 1 --record "$OUT/trace/trace.csv" --no-history \
    --train "$(dirname "$0")/../crates/monitor/tests/data/h200-healthy.csv" \
    --metrics-listen 127.0.0.1:9401 --json >"$OUT/trace/alerts.jsonl" 2>"$OUT/trace/monitor.log" &
  trace_pid=$!
  ( while sleep 20; do
      now=$(date +%s)
      curl -s --max-time 5 127.0.0.1:9401/metrics >"$OUT/trace/metrics-$now.txt"
      curl -s --max-time 5 127.0.0.1:9401/api/dashboard >"$OUT/trace/dashboard-$now.json"
    done ) &
  scrape_pid=$!
fi

# The real host as it is: must come out genuine and pass (exit 0).
run inspect 0 "$POG" inspect
[ "$QUICK" = 1 ] || run check 0 "$POG" check

# Attacks on the real host: each must fail (exit 1).
[ "$QUICK" = 1 ] || run attack-ld-preload 1 env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libm.so.6 "$POG" inspect
fake_dir=$(mktemp -d)
real_smi=$(command -v nvidia-smi)
# It claims the other model of the pair (an H200 passed off as an H100, an H100 as an H200),
# its name and memory, whichever of the two the host has.
cat >"$fake_dir/nvidia-smi" <<FAKE
#!/bin/sh
"$real_smi" "\$@" | sed -e 's/NVIDIA H200/@H100@/; s/NVIDIA H100 80GB HBM3/NVIDIA H200/; s/@H100@/NVIDIA H100 80GB HBM3/' \
  -e 's/<total>143771 MiB/@81559@/; s/<total>81559 MiB/<total>143771 MiB/; s/@81559@/<total>81559 MiB/'
FAKE
chmod +x "$fake_dir/nvidia-smi"
[ "$QUICK" = 1 ] || run attack-fake-nvidia-smi 1 "$POG" inspect --nvidia-smi "$fake_dir/nvidia-smi"
# A hung nvidia-smi must not hang pog: it is cut off after 2 s and reported (a warning).
printf '#!/bin/sh\nsleep 120\n' >"$fake_dir/hung-smi"; chmod +x "$fake_dir/hung-smi"
[ "$QUICK" = 1 ] || run hung-nvidia-smi 0 "$POG" inspect --nvidia-smi "$fake_dir/hung-smi" --nvidia-smi-timeout 2

# The proof of GPU: the GPU prover against the CPU prover at small sizes (INT8 roots must be
# equal bit for bit; the fast and the byte-wise leaf hashing both), then the validator's
# per-model challenge (BF16 on an H200) and INT8 at full size, as JSON.
run prove-small-int8 0 "$POG" prove --proof gemm --precision int8 --size 64 --batch 3 --expected-ms 60000 --against-cpu
run prove-bytewise-int8 0 "$POG" prove --proof gemm --precision int8 --size 52 --batch 2 --leaf-elements 100 --expected-ms 60000 --against-cpu
run prove-short-leaf-int8 0 "$POG" prove --proof gemm --precision int8 --size 60 --batch 3 --leaf-elements 64 --expected-ms 60000 --against-cpu
run prove-small-bf16 0 "$POG" prove --proof gemm --precision bf16 --size 128 --batch 2 --expected-ms 60000 --against-cpu
run prove-json 0 "$POG" prove --json
# Every proof precision the claimed model can be challenged in, five times in a row each, at
# the validator's plan and bound (FP32 is never planned where a slower model emulates it).
for precision in bf16 fp16 int8; do
  for i in $(seq 1 "$RUNS"); do
    run "prove-$precision-$i-json" 0 "$POG" prove --proof gemm --precision "$precision" --json
  done
done

# The proof of memory: the kernels against the reference, the walk rates and the capacity
# cheats, if the test binary was carried along (cargo test --release -p pog-device --test
# memory_proof --no-run; copy the executable it names to .gpu/memory_proof). The honest runs,
# the bandwidth cheat and whole rounds: scripts/memory-proof-h200.sh.
# The full-size cases plan for this card's model (its name as nvidia-smi reports it).
export POG_MEMORY_MODEL=${POG_MEMORY_MODEL:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)}
[ -x .gpu/memory_proof ] && run memory-proof-tests 0 .gpu/memory_proof --ignored --nocapture --test-threads 1

# A validator and an agent on this host over loopback, as a network runs them (per-model GEMM
# and memory proofs, the host's CPU, the ledger, the score): every round on record, within the
# ledger's entry limit, accepted; the agent's plan bounds admit the validator's plans (issue
# 20). The agent also claims real-size RAM and storage where the host has room (issue 23: a
# third of the free disk, at most 24 GiB; 32 GiB of RAM on a host of 64 GiB or more), so the
# score counts every part from the validator's own records.
free_disk_g=$(df -BG --output=avail "${TMPDIR:-/tmp}" | tail -1 | tr -dc 0-9)
storage_g=$(( free_disk_g / 3 )); [ "$storage_g" -gt 24 ] && storage_g=24
host_ram_g=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1048576 ))
ram_claim=""; [ "$host_ram_g" -ge 64 ] && ram_claim="--ram-claim 32G"
storage_size=""; [ "$storage_g" -ge 1 ] && storage_size="${storage_g}G"
[ "$QUICK" = 1 ] || run network-round 0 env POG="$POG" STORAGE_SIZE="$storage_size" \
  AGENT_ARGS="$ram_claim" bash "$HERE/network-round-h200.sh" "$OUT/network"

# The GPU-to-GPU fabric on every GPU here: peer transfers and latency for each pair, NCCL's
# all-reduce checked for the right sum (one rank on a one-GPU host), if the test binary was
# carried along (cargo test --release -p pog-device --test gpu_fabric --no-run; copy the
# executable it names to .gpu/gpu_fabric).
[ "$QUICK" != 1 ] && [ -x .gpu/gpu_fabric ] && run gpu-fabric 0 .gpu/gpu_fabric --ignored --nocapture
# The device and local crates' GPU-only unit tests (CUDA's report, the GPU prover engine).
[ "$QUICK" != 1 ] && [ -x .gpu/device_tests ] && run device-gpu-tests 0 .gpu/device_tests --ignored
[ -x .gpu/local_tests ] && run local-gpu-engine 0 .gpu/local_tests gpu_engine

# The validator's verification cost on this host's CPU, if the harness was carried along
# (cargo build --release -p pog-proof --example verify_cost; cp target/release/examples/verify_cost .gpu/).
[ -x .gpu/verify_cost ] && run verify-cost 0 .gpu/verify_cost

# The proof of the host's CPU: one lane per hardware thread against one alone, as `pog prove`
# runs it, and the harness's honest and twice-the-cores rows if it was carried along
# (cargo build --release -p pog-proof --example cpu_cost; cp target/release/examples/cpu_cost .gpu/).
run prove-cpu 0 "$POG" prove --proof cpu --json
[ -x .gpu/cpu_cost ] && run cpu-cost 0 .gpu/cpu_cost 5

# The proof of the host's RAM (issue 23): a claim of RAM_SIZE (default 16G) built on every
# thread and walked, three times, as `pog prove --proof ram` runs it, and the attack harness if
# it was carried along (cargo build --release -p pog-local --example ram_attacks; a claim of
# RAM_ATTACK_MIB, default 8192: half held and regenerated, swapped to disk, on a second host).
# RAM=0 skips it.
if [ "${RAM:-1}" = 1 ]; then
  for i in 1 2 3; do
    run "prove-ram-$i-json" 0 "$POG" prove --proof ram --ram-size "${RAM_SIZE:-16G}" --json
  done
  ram_dir=$(mktemp -d /var/tmp/pog-ram.XXXXXX)
  [ -x .gpu/ram_attacks ] && run ram-attacks 0 .gpu/ram_attacks "${RAM_ATTACK_MIB:-8192}" "$ram_dir"
  rm -rf "$ram_dir"
fi

# The validator's check during a lease (issue 25): the per-model precision at n = 2048, one
# product, against the lease's loose bound (1 s), five times on the idle GPU, then ten times
# while a tenant (cotenant.py beside this script, PyTorch) holds 80 % of the GPU's free
# memory and runs BF16 matmuls back to back; the tenant's TFLOP/s each second is in
# lease/tenant.txt (the checks ran between the times in lease/checks.txt). LEASE=0 skips it.
if [ "${LEASE:-1}" = 1 ] && python3 -c 'import torch' 2>/dev/null; then
  mkdir -p "$OUT/lease"
  for i in 1 2 3 4 5; do
    run "lease-idle-$i-json" 0 "$POG" prove --proof gemm --size 2048 --batch 1 --expected-ms 1000 --json
  done
  python3 "$HERE/cotenant.py" gemm 75 --fill 0.8 >"$OUT/lease/tenant.txt" 2>>"$LOG" &
  tenant_pid=$!
  sleep 25
  echo "checks from $(date +%s.%N)" >"$OUT/lease/checks.txt"
  for i in $(seq 1 10); do
    run "lease-busy-$i-json" 0 "$POG" prove --proof gemm --size 2048 --batch 1 --expected-ms 1000 --json
    sleep 1
  done
  echo "checks to $(date +%s.%N)" >>"$OUT/lease/checks.txt"
  wait "$tenant_pid"
fi

# The cheats a proof must still catch (issue 23, item 6), with CHEATS=1: a co-tenant
# (cotenant.py beside this script) running BF16 matmuls on the GPU 20 %, 40 % and all of the
# time during the validator's per-model GEMM challenge, three proofs each: 40 % and all of the
# time expected rejected (exit 1); 20 % costs the proof about 12 % of its time on an H100, within
# the bound's tolerance, so expected accepted (docs/protocol.md, "A co-tenant on the GPU");
# then the proof of memory's evidence (scripts/memory-proof-h200.sh with
# MEMORY_RUNS honest runs, default 5: the capacity cheats of an 80 GB card, a bandwidth thief
# 30 % and all of the time, whole rounds), under $OUT/memory/.
if [ "${CHEATS:-0}" = 1 ] && python3 -c 'import torch' 2>/dev/null; then
  mkdir -p "$OUT/cheats"
  . "$HERE/cotenant.sh"
  for duty in 0.2 0.4 1.0; do
    if ! cotenant_start "$OUT/cheats/gemm-$duty.txt" gemm 600 --duty "$duty"; then
      echo "co-tenant $duty never started: its proofs not run (see cheats/gemm-$duty.txt)" | tee -a "$LOG"
      continue
    fi
    expected=1; [ "$duty" = 0.2 ] && expected=0
    for i in 1 2 3; do
      run "cheat-gemm-$duty-$i-json" "$expected" "$POG" prove --proof gemm --json
    done
    cotenant_stop
  done
  run memory-proof-evidence 0 env POG="$POG" MEMORY_TESTS=.gpu/memory_proof HONEST_RUNS="${MEMORY_RUNS:-5}" \
    OUT="$OUT/memory" bash "$HERE/memory-proof-h200.sh"
fi

# The proof of the host's storage (issue 23): a data set of STORAGE_SIZE (default 2G) built on
# this host's disk under STORAGE_DIR, then walked three times against the NVMe class's bound
# (the first run builds and audits it; the others find it kept), and the attack harness if it
# was carried along (cargo build --release -p pog-local --example storage_attacks; 1 GiB).
# STORAGE=0 skips it.
if [ "${STORAGE:-1}" = 1 ]; then
  storage_dir=${STORAGE_DIR:-$(mktemp -d /var/tmp/pog-storage.XXXXXX)}
  for i in 1 2 3; do
    run "prove-storage-$i-json" 0 "$POG" prove --proof storage --storage-dir "$storage_dir" \
      --storage-size "${STORAGE_SIZE:-2G}" --json
  done
  df -hT "$storage_dir" >>"$LOG" 2>&1
  [ -x .gpu/storage_attacks ] && run storage-attacks 0 .gpu/storage_attacks "$storage_dir" 1024
  [ -z "${STORAGE_DIR:-}" ] && rm -rf "$storage_dir"
fi

# The health monitor's CPU cost at 1 s beside nvidia-smi and pynvml, and a live run at the
# default cadence with its trace replayed (docs/monitor.md, "Cost on the H200").
if [ "${MONITOR:-0}" = 1 ]; then
  run monitor-overhead 0 env POG="$POG" DEVICE_TESTS="${DEVICE_TESTS:-}" bash "$HERE/monitor-overhead-h200.sh" "$OUT/monitor/overhead"
  run monitor-live 0 env POG="$POG" bash "$HERE/monitor-live-check-h200.sh" "$OUT/monitor/live"
fi

# The full suite once, as a table with the host (sustained load included). FULL_BENCH=0 skips
# it when only the comparison with PyTorch is wanted.
if [ "${FULL_BENCH:-1}" != 0 ] && [ "${PROVE_ONLY:-0}" != 1 ]; then
  run bench 0 "$POG" bench --suite "$SUITE"
fi

# pog against PyTorch, interleaved (PyTorch, pog, PyTorch, pog): this card's figures move by
# several percent from run to run, so each side is compared by its better run. pog times each
# run at n = 16384 from rest, TORCH_REF back to back: PyTorch is also timed from rest there
# (torch_gemm_from_rest.py beside this script), so those rows compare like with like.
for round in 1 2; do
  [ "${PROVE_ONLY:-0}" = 1 ] && break
  [ -f "$TORCH_REF" ] && run "torch-$round-json" 0 python3 "$TORCH_REF"
  run "bench-$round-json" 0 "$POG" bench --suite "$SUITE" --no-host --sustained-seconds 0 --json
  [ -f "$TORCH_REF" ] && run "torch-rest-$round-json" 0 python3 "$HERE/torch_gemm_from_rest.py" bf16 fp16 tf32
done

# Stop the trace: SIGTERM lets the monitor flush and print its summary.
if [ -n "${trace_pid:-}" ]; then
  kill "$scrape_pid" 2>/dev/null
  kill -TERM "$trace_pid" 2>/dev/null; wait "$trace_pid"
  echo "trace: exit $?, $(($(wc -l <"$OUT/trace/trace.csv") - 1)) samples, $(wc -l <"$OUT/trace/alerts.jsonl") alerts" >>"$OUT/trace/summary.txt"
  python3 "$HERE/alert-counts.py" "$OUT/trace/alerts.jsonl" >>"$OUT/trace/summary.txt"
fi

# The short table, last.
{
  echo
  echo "== pog GPU run: $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,pci.bus_id,uuid --format=csv,noheader | tr '\n' ';')"
  printf '%s\n' "${summary[@]}"
  [ -f "$OUT/monitor/overhead/overhead.txt" ] && cat "$OUT/monitor/overhead/overhead.txt"
  [ -f "$OUT/network/checks.txt" ] && tail -3 "$OUT/network/checks.txt"
  [ -f "$OUT/trace/summary.txt" ] && cat "$OUT/trace/summary.txt"
  [ -f "$OUT/memory/summary.txt" ] && cat "$OUT/memory/summary.txt"
  for f in "$OUT"/cheats/gemm-*.txt; do [ -s "$f" ] && echo "co-tenant $(basename "$f" .txt): $(grep '^{' "$f")"; done
} | tee "$OUT/summary.txt"
for f in "$OUT"/prove-json.json "$OUT"/lease-*-json.json "$OUT"/prove-bf16-*-json.json "$OUT"/prove-fp16-*-json.json "$OUT"/prove-int8-*-json.json "$OUT"/cheat-gemm-*-json.json; do
  [ -s "$f" ] && python3 - "$f" <<'PY' | tee -a "$OUT/summary.txt"
import json, os, sys
name = os.path.basename(sys.argv[1]).removesuffix("-json.json")
for p in json.load(open(sys.argv[1]))["proofs"]:
    c = p["check"]
    if not c:
        print(f"{name} GPU {p['ordinal']}: ERROR {p['error']}"); continue
    d = c["device"] or {}
    rate = c["batch"] * 2 * c["size"] ** 3 / (c["commit_ms"] * 1e9)
    print(f"{name} GPU {p['ordinal']} {c['precision']} n={c['size']} x{c['batch']}: {rate:.1f} TFLOP/s end to end, commit {c['commit_ms']:.0f} ms of {c['expected_ms']:.0f} ms bound "
          f"({100*c['commit_ms']/c['expected_ms']:.0f} %), GEMM {d.get('gemm_ms', 0):.0f} ms, overhead {100*d.get('overhead', 0):.1f} % "
          f"(fill {d.get('fill_ms', 0):.1f}, hash {d.get('hash_ms', 0):.1f}, tree {d.get('tree_ms', 0):.1f} ms), open {c['open_ms']:.0f} ms, "
          f"verify {c['verify_ms']:.1f} ms, bytes {c['bytes_to_agent']} / {c['bytes_from_agent']}, accepted {c['outcome']['accepted']}")
PY
done
if [ -s "$OUT/lease/tenant.txt" ]; then
  python3 - "$OUT/lease" <<'PY' | tee -a "$OUT/summary.txt"
import statistics, sys
d = sys.argv[1]
marks = [float(l.split()[-1]) for l in open(f"{d}/checks.txt")]
rows = [tuple(map(float, l.split())) for l in open(f"{d}/tenant.txt") if len(l.split()) == 2]
inside = [r for t, r in rows if marks[0] <= t <= marks[-1] + 1]
outside = [r for t, r in rows[2:] if not (marks[0] <= t <= marks[-1] + 1)]
if inside and outside:
    a, b = statistics.median(inside), statistics.median(outside)
    print(f"lease tenant BF16 matmul: {b:.1f} TFLOP/s without checks (median of {len(outside)} s), "
          f"{a:.1f} with a check a ~second ({len(inside)} s): {100 * (1 - a / b):.2f} % of its throughput")
PY
fi
if [ -f "$OUT/torch-1-json.json" ]; then
  python3 - "$OUT" "$HERE" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys, os
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from pog_torch_keys import copies, gemm_key, gemms
load = lambda n: json.load(open(os.path.join(out, n))) if os.path.exists(os.path.join(out, n)) else None
pogs = [b for b in (load("bench-1-json.json"), load("bench-2-json.json")) if b]
refs = [r for r in (load("torch-1-json.json"), load("torch-2-json.json")) if r]
# PyTorch timed from rest at n = 16384, as pog is there: a row of its own beside each
# back-to-back one (`..._from_rest`), the like-with-like comparison.
for ref, rest in zip(refs, (load("torch-rest-1-json.json"), load("torch-rest-2-json.json"))):
    for p in ("bf16", "fp16", "tf32"):
        if rest and f"{p}_from_rest" in rest:
            ref[f"gemm_{p}_16384_tflops_from_rest"] = rest[f"{p}_from_rest"]
def pog_figs(b):
    f = dict(copies(b))
    for p, n, tflops in gemms(b):
        f[gemm_key(p, n)] = tflops
        if n >= 16384:  # timed from rest (plan::LONG_GEMM_SIZE): also the like-with-like row
            f[f"gemm_{p}_{n}_tflops_from_rest"] = tflops
    return f
figs = [pog_figs(b) for b in pogs]
print(f"{'figure':34} {'pog 1':>9} {'pog 2':>9} {'torch 1':>9} {'torch 2':>9} {'best/best':>9}")
for key in refs[0]:
    if not (key.startswith("gemm_") or "GBps" in key):
        continue
    ps = [f.get(key) for f in figs]; ts = [r.get(key) for r in refs]
    if not any(ps) or not any(ts):
        continue
    fmt = lambda v: f"{v:9.1f}" if v else f"{'-':>9}"
    ratio = max(p for p in ps if p) / max(t for t in ts if t)
    print(f"{key:34} {' '.join(fmt(v) for v in ps + [None] * (2 - len(ps)))} {' '.join(fmt(v) for v in ts + [None] * (2 - len(ts)))} {ratio:9.3f}")
PY
fi

# The device tool brings back at most 8 files: everything but the summary goes into one archive
# (tar -xzf results.tar.gz to read runs.log and the JSON).
( cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name summary.txt ! -name results.tar.gz -printf '%P\n' \
    | tar -czf results.tar.gz -T - && find . -mindepth 1 -maxdepth 1 ! -name summary.txt ! -name results.tar.gz -exec rm -rf {} + )
