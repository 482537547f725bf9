# Sourced by the GPU scripts that time a proof beside a second process on the GPU
# (gpu-run.sh, proof-cost-h200.sh, memory-proof-h200.sh): starts cotenant.py and returns once
# its work is warm, so that what is measured beside it starts only then.
#
#   . "$HERE/cotenant.sh"
#   if cotenant_start OUT_FILE gemm 600 --duty 0.4; then ...the proofs...; cotenant_stop; fi
#
# OUT_FILE takes the co-tenant's output (a line a second, its JSON line last, and its errors).

COTENANT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# cotenant_start OUT_FILE ARGS...: cotenant.py ARGS in the background (its pid in
# COTENANT_PID); waits up to 30 s for it to be warm, then 2 s more. Returns 1, with nothing
# left running, if it ended or never got warm.
cotenant_start() {
  local out=$1; shift
  rm -f "$out.ready"
  python3 "$COTENANT_DIR/cotenant.py" "$@" --ready "$out.ready" >"$out" 2>&1 &
  COTENANT_PID=$!
  local try
  for try in $(seq 60); do
    { [ -f "$out.ready" ] || ! kill -0 "$COTENANT_PID" 2>/dev/null; } && break
    sleep 0.5
  done
  if [ ! -f "$out.ready" ]; then
    cotenant_stop
    return 1
  fi
  rm -f "$out.ready"
  sleep 2
}

# cotenant_stop: ends the co-tenant (SIGTERM: it still prints its JSON line) and waits for it.
cotenant_stop() {
  kill -TERM "$COTENANT_PID" 2>/dev/null
  wait "$COTENANT_PID" 2>/dev/null
}
