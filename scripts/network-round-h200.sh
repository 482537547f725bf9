#!/usr/bin/env bash
# A validator and an agent on one GPU host, over loopback, as a network runs them: the
# validator's default per-model plan (GEMM and memory proofs), its ledger and pricing, the agent
# on the GPU prover. Waits for ROUNDS proof records, then checks what the records say: each
# round leaves one record of each kind, under the ledger's 64 KiB entry limit, accepted and
# speaking for the model; the agent took the validator's plans (its bounds admit them); the
# score reads them. With STORAGE_SIZE (e.g. 32G) the agent also claims that much storage in a
# folder under STORAGE_ROOT (default: the temp dir): the validator has it build the data set
# in the background, audits it and walks it, and the run waits for an accepted walk (issue 23:
# a real-size build through the agent). Writes records.json, score.json, checks.txt under the
# output folder.
#
# Usage: scripts/network-round-h200.sh OUT_DIR   (POG: the binary; ROUNDS, default 3;
# WAIT_S: the longest wait for them; VALIDATOR_ARGS, AGENT_ARGS: more flags for each, e.g.
# AGENT_ARGS="--ram-claim 32G" for a proof of RAM in the rounds)
set -u
POG=${POG:-target/release/pog}
OUT=$1; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}
work=$(mktemp -d "${STORAGE_ROOT:-${TMPDIR:-/tmp}}/pog-network.XXXXXX")
storage=()
[ -n "${STORAGE_SIZE:-}" ] && storage=(--storage-dir "$work/storage" --storage-size "$STORAGE_SIZE")
WAIT_S=${WAIT_S:-$(( 20 * ROUNDS + 120 ))}
"$POG" --data-dir "$work/validator" validator --listen 127.0.0.1:7171 --challenge-every 20 \
  --allow-private-endpoints ${VALIDATOR_ARGS:-} >"$OUT/validator.log" 2>&1 &
validator=$!
for _ in $(seq 1 100); do
  key=$(grep -o 'validator key: [0-9a-f]*' "$OUT/validator.log" | awk '{print $3}')
  [ -n "$key" ] && break; sleep 0.2
done
"$POG" --data-dir "$work/agent" agent --listen 127.0.0.1:7170 --validator http://127.0.0.1:7171 \
  --trust "$key" --prover gpu "${storage[@]}" ${AGENT_ARGS:-} >"$OUT/agent.log" 2>&1 &
agent=$!
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
started=$(date +%s)
while [ $(( $(date +%s) - started )) -lt "$WAIT_S" ]; do
  curl -s "http://127.0.0.1:7171/v1/records/$uuid?limit=1000" >"$OUT/records.json"
  # Rounds recorded, and (with a storage claim) whether a walk of the data set was accepted.
  read -r n walked < <(python3 -c 'import json,sys
try:
    rs = json.load(open(sys.argv[1]))["records"]
    print(sum(r["envelope"]["kind"] == "record" for r in rs),
          int(any(r["envelope"]["kind"] == "storage-record" and r["record"]["accepted"] for r in rs)))
except Exception: print(0, 0)' "$OUT/records.json")
  [ "$n" -ge "$ROUNDS" ] && { [ -z "${STORAGE_SIZE:-}" ] || [ "$walked" = 1 ]; } && break
  sleep 5
done
du -sh "$work/storage" >"$OUT/storage-du.txt" 2>/dev/null
sleep 15 # the last round's memory proof and health request
curl -s "http://127.0.0.1:7171/v1/records/$uuid?limit=1000" >"$OUT/records.json"
curl -s "http://127.0.0.1:7171/v1/scores/$uuid" >"$OUT/score.json"
kill "$agent" "$validator" 2>/dev/null; wait 2>/dev/null
rm -rf "$work"
python3 - "$OUT" "${STORAGE_SIZE:-}" <<'PY' | tee "$OUT/checks.txt"
import json, sys
out = sys.argv[1]
records = json.load(open(f"{out}/records.json"))["records"]
kinds = {}
for r in records:
    kinds.setdefault(r["envelope"]["kind"], []).append(r)
print("records by kind:", {k: len(v) for k, v in kinds.items()})
ok = True
for r in records:
    size = len(json.dumps(r["envelope"], separators=(",", ":")))
    body = r["record"]
    line = f'{r["envelope"]["kind"]:14} {size:6} bytes'
    if size > 65535:
        ok = False; line += "  OVER THE LEDGER'S ENTRY LIMIT"
    if r["envelope"]["kind"] in ("record", "memory-record"):
        o = body.get("outcome") or {}
        line += (f'  accepted {body["accepted"]} proves {body.get("proves_model", body.get("proves_memory"))}'
                 f'  ratio {(o.get("time") or {}).get("ratio")}  wrong {o.get("rejected_total")}'
                 f'  failure {(body.get("failure") or {}).get("message")}')
        ok &= body["accepted"]
        # The policy as run: a per-model plan's shape and bound, not zeros.
        pol = body["policy"]
        shape = (pol["size"], pol["batch"], pol["expected_ms"]) if r["envelope"]["kind"] == "record" \
            else (pol["memory"]["items"], pol["memory"]["walkers"], pol["memory"]["steps"])
        line += f'  policy {shape}'
        ok &= all(x > 0 for x in shape)
    if r["envelope"]["kind"] in ("cpu-record", "ram-record"):
        line += f'  accepted {body["accepted"]}  failure {(body.get("failure") or {}).get("message")}'
    if r["envelope"]["kind"] == "storage-record":
        audit, walk = body.get("audit") or {}, body.get("round") or {}
        line += (f'  accepted {body["accepted"]} proves {body["proves_storage"]}'
                 f'  claim {body["claim"]["bytes"] / 2**30:.1f} GiB {body["claim"]["class"]}'
                 f'  build {audit.get("build_ms")} ms audit {audit.get("accepted")}'
                 f'  walk ratio {(walk.get("time") or {}).get("ratio")}'
                 f'  failure {(body.get("failure") or {}).get("message")}')
    print(line)
if sys.argv[2]:
    walks = [r["record"] for r in kinds.get("storage-record", []) if r["record"]["accepted"]]
    print(f"storage claim {sys.argv[2]}: {len(walks)} accepted walk(s)")
    ok &= bool(walks)
score = json.load(open(f"{out}/score.json"))
a = score["assessment"]
print(f'score {score["score"]:.3f}, proofs {a["proofs_passed"]}/{a["proofs_total"]}, uptime {a["uptime"]}')
print("reasons:", score["reasons"])
passed = bool(ok and kinds.get("record") and kinds.get("memory-record"))
print("NETWORK ROUND", "PASS" if passed else "FAIL")
sys.exit(0 if passed else 1)
PY
status=${PIPESTATUS[0]}
grep -i "refus\|beyond\|error" "$OUT/agent.log" | head -5
exit "$status"
