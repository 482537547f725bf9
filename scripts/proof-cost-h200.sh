#!/usr/bin/env bash
# Issue 23's figures in one call on a GPU machine (docs/protocol.md, "Cost"): the validator's
# verification cost and bytes (`verify_cost`), RUNS proofs a precision at the validator's plan
# (commit against the bound, the agent's overhead beside the GEMM, the in-process
# verification, bytes each way), pog's standard suite against PyTorch's cuBLAS in the same
# lease (TORCH_REF, and at n = 16384 PyTorch timed from rest as pog is,
# torch_gemm_from_rest.py beside this script), a GEMM co-tenant all of the time, 40 % and 20 %
# during the per-model challenge, and the proof of memory's evidence (capacity cheats, a
# bandwidth thief, whole rounds). Each part runs only while the call's time allows (BUDGET_S,
# default 575: about 565 s in all on an H200, estimated from each part's time in the calls of
# 2026-12-06, so give the call 600), the later ones keeping the time they need.
# Leaves table.txt (printed last) and all.tar.gz (every JSON and log) under $OUT.
#
#   POG=.gpu/pog VERIFY_COST=.gpu/verify_cost MEMORY_TESTS=.gpu/memory_proof \
#     TORCH_REF=.gpu/torch_reference.py OUT=/tmp/out [RUNS=20] [BUDGET_S=575] scripts/proof-cost-h200.sh
#
# VERIFY_COST: cargo build --release -p pog-proof --example verify_cost (target/release/examples/).
# MEMORY_TESTS: cargo test --release -p pog-device --test memory_proof --no-run (the executable it names).
set -u
POG=${POG:-.gpu/pog}
VERIFY_COST=${VERIFY_COST:-.gpu/verify_cost}
MEMORY_TESTS=${MEMORY_TESTS:-.gpu/memory_proof}
TORCH_REF=${TORCH_REF:-.gpu/torch_reference.py}
OUT=${OUT:-$(mktemp -d)}
RUNS=${RUNS:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s); deadline=$((start + ${BUDGET_S:-575}))
left() { echo $((deadline - $(date +%s))); }
work="$OUT/c"; mkdir -p "$work"
table="$work/table.txt"
log="$work/log.txt"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | head -1 | tee "$table"
note() { echo "$* (after $(( $(date +%s) - start )) s)" | tee -a "$table"; }

# The validator's cost to verify one challenge of each H200 plan, and the answer's size.
[ -x "$VERIFY_COST" ] && "$VERIFY_COST" 2>&1 | tee -a "$table"

# prove NAME [ARGS...]: one `pog prove --proof gemm --json`, kept as NAME.json.
prove() { local name=$1; shift; "$POG" prove --proof gemm --json "$@" >"$work/$name.json" 2>>"$log"; }
# Each round of three about 10 s; the parts after it need about 355 s.
for i in $(seq 1 "$RUNS"); do
  [ "$(left)" -gt 355 ] || break
  for p in bf16 fp16 int8; do prove "plan-$p-$i" --precision "$p"; done
done
note "proofs done"

# pog against PyTorch in the same lease (issue 23, item 5): PyTorch's reference, then pog's
# standard suite, then PyTorch at n = 16384 timed from rest as pog is (about 105 s); a second
# round only where the cheats below keep their time (about 250 s).
for round in 1 2; do
  [ "$(left)" -gt $(( round == 1 ? 265 : 360 )) ] || break
  python3 "$TORCH_REF" >"$work/torch-$round.json" 2>>"$log"
  "$POG" bench --suite standard --no-host --sustained-seconds 0 --copy-mib 1024 --json >"$work/bench-$round.json" 2>>"$log"
  python3 "$HERE/torch_gemm_from_rest.py" bf16 fp16 tf32 >"$work/torch-rest-$round.json" 2>>"$log"
  note "comparison round $round done"
done

# The cheats that must still be caught (item 6): a co-tenant on the GPU, two proofs each, the
# two that must be rejected first (20 % is accepted by design: docs/protocol.md); about 20 s a
# duty, keeping the memory evidence's 190 s.
. "$HERE/cotenant.sh"
for duty in 1.0 0.4 0.2; do
  [ "$(left)" -gt 210 ] || break
  if cotenant_start "$work/tenant-$duty.txt" gemm 600 --duty "$duty"; then
    for i in 1 2; do prove "tenant-$duty-$i"; done
    cotenant_stop
  else
    note "co-tenant $duty never started: its proofs not run"
  fi
  grep -h '^{' "$work/tenant-$duty.txt" | sed "s/^/co-tenant $duty: /" >>"$table"
done
if [ "$(left)" -gt 190 ]; then
  POG="$POG" MEMORY_TESTS="$MEMORY_TESTS" HONEST_RUNS=3 OUT="$work/memory" \
    timeout $(( $(left) - 20 )) bash "$HERE/memory-proof-h200.sh" >"$work/memory.txt" 2>&1
  note "memory evidence: exit $?"
fi

# The table: each kind of proof's range, then each GEMM against PyTorch.
python3 - "$work" "$HERE" <<'PY' | tee -a "$table"
import collections, glob, json, os, sys
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from pog_torch_keys import gemm_key, gemms
rows = collections.defaultdict(list)
for f in sorted(glob.glob(f"{d}/*.json")):
    name = os.path.basename(f)
    if not (name.startswith("plan-") or name.startswith("tenant-")):
        continue
    kind = name.rsplit("-", 1)[0]
    try:
        proofs = json.load(open(f)).get("proofs", [])
    except ValueError:
        print(f"{name}: no JSON (see log.txt)"); continue
    for p in proofs:
        c = p.get("check")
        if not c:
            print(f"{kind}: ERROR {p.get('error')}"); continue
        dev = c["device"] or {}
        rows[kind].append((c["commit_ms"] / c["expected_ms"], 100 * dev.get("overhead", 0), c["verify_ms"],
                           c["bytes_to_agent"], c["bytes_from_agent"], c["outcome"]["accepted"]))
for kind, v in rows.items():
    col = lambda i: [x[i] for x in v]
    span = lambda xs, f: f"{f.format(min(xs))}-{f.format(max(xs))}"
    print(f"{kind}: {len(v)} proofs, {sum(col(5))} accepted; commit/bound {span(col(0), '{:.3f}')} "
          f"({max(col(0)) / 1.1:.3f} of the limit at most); overhead {span(col(1), '{:.1f}')} %; "
          f"verify {span(col(2), '{:.1f}')} ms; bytes to/from the agent {max(col(3))}/{max(col(4))}")
for r in (1, 2):
    try:
        t = json.load(open(f"{d}/torch-{r}.json"))
        b = {(p, n): tflops for p, n, tflops in gemms(json.load(open(f"{d}/bench-{r}.json")))}
    except (OSError, ValueError, KeyError):
        continue
    try:
        rest = json.load(open(f"{d}/torch-rest-{r}.json"))
    except (OSError, ValueError):
        rest = {}
    for (prec, n), pog in sorted(b.items()):
        key = gemm_key(prec, n)
        if key in t and pog:
            line = f"round {r} {prec:5} n={n:5}: pog {pog:.1f} torch_reference {t[key]:.1f} ratio {pog / t[key]:.3f}"
            if n >= 16384:
                # pog times each run here from rest, torch_reference back to back: like with like below.
                like = rest.get(f"{prec}_from_rest")
                line += f"; PyTorch from rest {like:.1f} ratio {pog / like:.3f}" if like else "; (torch_reference back to back: not like with like)"
            print(line)
PY
[ -f "$work/memory/summary.txt" ] && cat "$work/memory/summary.txt" >>"$table"
note "done"
( cd "$work" && tar -czf ../all.tar.gz . ) && cp "$table" "$OUT/table.txt" && rm -rf "$work"
tail -60 "$OUT/table.txt"
