#!/usr/bin/env bash
# Every GPU check pog has, in one call on a GPU machine (see docs/benchmarks.md for how to
# run it through the device tool). Writes each command's output under $OUT and prints a
# short table last.
#
#   POG=.gpu/pog OUT=/tmp/out scripts/gpu-run.sh
set -uo pipefail
POG=${POG:-.gpu/pog}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
summary=()

# run NAME EXPECTED_EXIT CMD... : runs a command, keeps its output, records the exit code.
run() {
  local name=$1 expected=$2; shift 2
  local started=$(date +%s%N)
  "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
  local code=$?
  local ms=$(( ($(date +%s%N) - started) / 1000000 ))
  local ok=ok; [ "$code" = "$expected" ] || ok=UNEXPECTED
  summary+=("$(printf '%-28s exit %-3s expected %-3s %-10s %6d ms' "$name" "$code" "$expected" "$ok" "$ms")")
}

nvidia-smi -q -x >"$OUT/nvidia-smi-q.xml" 2>&1

# The real host as it is: must come out genuine (exit 0).
run inspect 0 "$POG" inspect
run inspect-json 0 "$POG" inspect --json
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

# The short table, last.
echo
echo "== pog GPU run: $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,pci.bus_id --format=csv,noheader | tr '\n' ';')"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
