#!/usr/bin/env bash
# What the deployment files assume of a GPU host, checked on one (docs/deploy.md, "Measured on
# an H200"): the NVIDIA device nodes and their classes in /proc/devices (the systemd unit's
# DeviceAllow=), their modes (a non-root agent needs them 0666), and an agent that runs as
# the manifests and units run it: a non-root user (65532), no capability in any set, no
# new privileges, its own data dir (mode 0700) and CUDA cache, serving a validator on
# loopback on the per-model plan for ROUNDS rounds. Records the agent's start time (to its
# first /healthz answer), its peak RSS and CPU time, and the CUDA cache's size: the figures
# behind the DaemonSet's probes and resources.
#
# Usage: POG=target/release/pog scripts/deploy-h200.sh OUT_DIR   (ROUNDS, default 2)
#
# NOT RUN YET (2026-12-05): the session that wrote it could not carry a pog binary to a GPU
# machine; scripts/gpu-sandbox-h200.sh checked the same assumptions with CuPy and PyTorch.
# The DaemonSet's resources and probes wait on its figures.
set -u
# NVLink multicast stays off (the GPU machines' rule), here and in the agent's environment.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
POG=$(realpath "${POG:-target/release/pog}")
OUT=$1; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-2}
report="$OUT/deploy-h200.txt"
: >"$report"
say() { echo "$*" | tee -a "$report"; }

say "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
say "driver: $(nvidia-smi --query-gpu=driver_version,name --format=csv,noheader | head -1)"
say "NVIDIA character devices in /proc/devices:"
grep -i nvidia /proc/devices | sed 's/^/  /' | tee -a "$report"
say "device nodes:"
ls -l /dev/nvidia* 2>&1 | sed 's/^/  /' | tee -a "$report"
ls -l /dev/nvidia-caps 2>&1 | sed 's/^/  caps: /' | tee -a "$report"
say "NVRTC / cuBLASLt on the loader path:"
ldconfig -p | grep -E 'libnvrtc\.so|libcublasLt\.so' | sed 's/^/  /' | tee -a "$report"
command -v setpriv >/dev/null || { say "no setpriv here: cannot drop to a non-root user"; exit 1; }

work=$(mktemp -d)
chmod 0755 "$work"
mkdir -p "$work/validator" "$work/agent" "$work/cache"
chown 65532:65532 "$work/agent" "$work/cache"
chmod 0700 "$work/agent" "$work/cache"
# The binary where the unprivileged user can run it.
cp "$POG" "$work/pog"; chmod 0755 "$work/pog"
# As the units and the manifests run the agent: another user, no capabilities, no new privs.
as_agent() {
  setpriv --reuid=65532 --regid=65532 --clear-groups --no-new-privs \
    --inh-caps=-all --bounding-set=-all -- env -i PATH=/usr/bin:/bin \
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" POG_DATA_DIR="$work/agent" \
    CUDA_CACHE_PATH="$work/cache" "$@"
}
as_agent "$work/pog" inspect >"$OUT/inspect.log" 2>&1
say "pog inspect as 65532, no capabilities, no new privileges: exit $?"
as_agent sh -c 'grep -E "^(Uid|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs)" /proc/self/status' \
  | sed 's/^/  /' | tee -a "$report"

"$work/pog" --data-dir "$work/validator" validator --listen 127.0.0.1:7171 \
  --challenge-every 20 --allow-private-endpoints >"$OUT/validator.log" 2>&1 &
validator=$!
for _ in $(seq 1 100); do
  key=$(grep -o 'validator key: [0-9a-f]*' "$OUT/validator.log" | awk '{print $3}')
  [ -n "$key" ] && break; sleep 0.2
done
started=$(date +%s%N)
as_agent "$work/pog" agent --listen 127.0.0.1:7170 --validator http://127.0.0.1:7171 \
  --trust "$key" --prover gpu >"$OUT/agent.log" 2>&1 &
agent=$!
up=""
for _ in $(seq 1 600); do
  if curl -sf http://127.0.0.1:7170/healthz >/dev/null; then
    up=$(( ($(date +%s%N) - started) / 1000000 )); break
  fi
  kill -0 "$agent" 2>/dev/null || break
  sleep 0.1
done
say "agent: first /healthz answer ${up:-never} ms after start"
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
deadline=$(( $(date +%s) + 20 * ROUNDS + 120 ))
n=0
while [ "$(date +%s)" -lt "$deadline" ] && kill -0 "$agent" 2>/dev/null; do
  curl -s "http://127.0.0.1:7171/v1/records/$uuid?limit=1000" >"$OUT/records.json"
  n=$(python3 -c 'import json,sys
try: print(sum(r["envelope"]["kind"]=="memory-record" and r["record"]["accepted"] for r in json.load(open(sys.argv[1]))["records"]))
except Exception: print(0)' "$OUT/records.json")
  [ "$n" -ge "$ROUNDS" ] && break
  sleep 2
done
python3 - "$OUT/records.json" <<'PY' 2>&1 | tee -a "$report"
import json, sys
try:
    rs = json.load(open(sys.argv[1]))["records"]
except Exception as e:
    rs = []
    print("no records:", e)
print("records:", ", ".join(r["envelope"]["kind"] + " accepted=" + str(r["record"].get("accepted")) for r in rs))
PY
say "rounds with an accepted memory proof: $n of $ROUNDS"
if kill -0 "$agent" 2>/dev/null; then
  grep -E '^(VmHWM|VmRSS)' "/proc/$agent/status" | sed 's/^/agent /' | tee -a "$report"
  ticks=$(getconf CLK_TCK)
  read -r utime stime < <(awk '{print $14, $15}' "/proc/$agent/stat")
  secs=$(( ($(date +%s%N) - started) / 1000000000 ))
  say "agent CPU: $(( (utime + stime) * 1000 / ticks )) ms in ${secs} s"
else
  say "agent exited early: see agent.log"
fi
say "CUDA cache: $(du -sk "$work/cache" | cut -f1) KiB, $(find "$work/cache" -type f | wc -l) files"
say "agent data dir: $(ls -ln "$work/agent" | tail -n +2 | awk '{print $1, $3, $9}' | tr '\n' ';')"
kill "$agent" "$validator" 2>/dev/null; wait 2>/dev/null
tail -5 "$OUT/agent.log" | sed 's/^/agent.log: /' | tee -a "$report"
[ "$n" -ge "$ROUNDS" ] && [ -n "$up" ]
