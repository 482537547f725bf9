#!/usr/bin/env bash
# The proof of memory's evidence on a real GPU, in one call (docs/protocol.md, "Proof of
# memory"): honest runs against the bound, the capacity cheats (test binary), the bandwidth
# cheat (a PyTorch co-tenant streaming device copies), and the GPU time of a whole round
# (GEMM and memory proofs). Writes summary.txt and results.jsonl under $OUT.
#
#   POG=.gpu/pog MEMORY_TESTS=.gpu/memory_proof OUT=/tmp/out [HONEST_RUNS=20] scripts/memory-proof-h200.sh
#
# MEMORY_TESTS is pog-device's memory_proof test binary (cargo test --release -p pog-device
# --test memory_proof --no-run; copy the executable it names).
set -uo pipefail
POG=${POG:-.gpu/pog}
MEMORY_TESTS=${MEMORY_TESTS:-.gpu/memory_proof}
OUT=${OUT:-$(mktemp -d)}
HONEST_RUNS=${HONEST_RUNS:-20}
mkdir -p "$OUT"
work=$(mktemp -d)
HERE=$(cd "$(dirname "$0")" && pwd)
results="$OUT/results.jsonl"
: >"$results"
nvidia-smi --query-gpu=name,uuid,memory.total --format=csv,noheader | tee "$OUT/summary.txt"

# prove NAME [ARGS...]: one `pog prove --json` run, its proofs appended to results.jsonl.
prove() {
  local name=$1; shift
  "$POG" prove --json "$@" >"$work/$name.json" 2>"$work/$name.err"
  python3 - "$work/$name.json" "$name" >>"$results" <<'PY'
import json, sys
path, name = sys.argv[1], sys.argv[2]
try:
    report = json.load(open(path))
except Exception as e:
    print(json.dumps({"run": name, "error": f"no JSON: {e}"})); sys.exit()
if "proofs" not in report:  # pog could not run (exit 2): its envelope says why
    print(json.dumps({"run": name, "error": report.get("error") or report.get("summary")})); sys.exit()
for p in report["proofs"]:
    row = {"run": name}
    m, c = p.get("memory"), p.get("check")
    if m:
        d = m.get("device") or {}
        row.update(memory_accepted=m["outcome"]["accepted"], memory_ratio=m["commit_ms"] / m["expected_ms"],
                   memory_commit_ms=m["commit_ms"], memory_expected_ms=m["expected_ms"], build_ms=m["build_ms"],
                   walk_ms=d.get("walk_ms"), walk_gbs=d.get("walk_gbs"), memory_verify_ms=m["verify_ms"],
                   memory_bytes=[m["bytes_to_agent"], m["bytes_from_agent"]])
    if c:
        row.update(gemm_accepted=c["outcome"]["accepted"], gemm_ratio=c["commit_ms"] / c["expected_ms"],
                   gemm_commit_ms=c["commit_ms"], gemm_open_ms=c["open_ms"])
    for k in ("error", "memory_error"):
        if p.get(k):
            row[k] = p[k]
    print(json.dumps(row))
PY
}

# 1. Honest: the validator's per-model memory challenge, HONEST_RUNS times.
for i in $(seq "$HONEST_RUNS"); do prove "honest-$i" --proof memory; done

# 2. Capacity cheats: 80 GB held, the rest recomputed or read from host memory.
if [ -x "$MEMORY_TESTS" ]; then
  timeout 300 "$MEMORY_TESTS" --ignored --nocapture --test-threads 1 2>&1 | grep '^{' >>"$results"
fi

# 3. Bandwidth cheat: a second process on the GPU streaming 2 GiB device-to-device copies,
# busy DUTY of the time (0.3: about what separates 4.8 from 3.35 TB/s), during honest proofs
# (cotenant.py beside this script; its last line, JSON, goes to the results).
. "$HERE/cotenant.sh"
for duty in 0.3 1.0; do
  if ! cotenant_start "$work/cotenant-$duty.txt" copy 25 --duty "$duty"; then
    echo "bandwidth co-tenant $duty never started: its proofs not run" | tee -a "$OUT/summary.txt"
    continue
  fi
  for i in 1 2 3; do prove "cotenant-$duty-$i" --proof memory; done
  cotenant_stop
  grep '^{' "$work/cotenant-$duty.txt" >>"$results"
done

# 4. A whole round's GPU time: the GEMM challenge and the memory challenge.
for i in 1 2 3; do prove "round-$i" --proof all; done

python3 - "$results" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# Rows of `pog prove` runs have "run"; the memory_proof test binary's rows have "what" instead.
run = lambda r: r.get("run", "")
honest = [r for r in rows if run(r).startswith("honest") and "memory_ratio" in r]
if honest:
    ratios = [r["memory_ratio"] for r in honest]
    walks = [r["walk_gbs"] for r in honest if r.get("walk_gbs") is not None]  # none on the CPU
    walk_gbs = f"{st.median(walks):.0f}" if walks else "–"
    print(f"honest: {sum(r['memory_accepted'] for r in honest)}/{len(honest)} accepted, commit/bound {min(ratios):.3f}-{max(ratios):.3f} "
          f"(mean {st.mean(ratios):.4f}, sd {st.pstdev(ratios):.4f}), build {st.median(r['build_ms'] for r in honest):.0f} ms, "
          f"walk {walk_gbs} GB/s, verify {max(r['memory_verify_ms'] for r in honest):.1f} ms max, "
          f"bytes {honest[0]['memory_bytes']}")
for r in rows:
    if r.get("what") in ("honest", "recompute", "host-memory", "walk-rate"):
        print(json.dumps(r))
for r in rows:
    if run(r).startswith("cotenant"):
        print(run(r), {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != "run"})
for r in rows:
    if run(r).startswith("round"):
        gpu = r.get("gemm_commit_ms", 0) + r.get("build_ms", 0) + r.get("memory_commit_ms", 0)
        print(f"{run(r)}: GEMM {r.get('gemm_commit_ms', 0):.0f} ms (x{r.get('gemm_ratio', 0):.3f}) + memory build {r.get('build_ms', 0):.0f} + walk {r.get('memory_commit_ms', 0):.0f} ms = {gpu:.0f} ms, "
              f"accepted {r.get('gemm_accepted')}/{r.get('memory_accepted')} {r.get('error', '')}{r.get('memory_error', '')}")
    elif "error" in r or "memory_error" in r:
        print(run(r), r.get("error"), r.get("memory_error"))
PY
