#!/usr/bin/env bash
# The live monitor at its default cadence on a GPU host (issue 13): 45 s at 1 s with a trace
# recorded, then the same trace replayed. Prints in how many rows energy and PCIe throughput
# were read (every 10th: the rows between leave them empty) and how often a frozen sensor was
# reported live and in the replay (at an idle GPU's power: never, if carried readings are
# told apart from a stopped counter).
#
# Usage: scripts/monitor-live-check-h200.sh OUT_DIR   (POG: the binary)
set -u
POG=${POG:-target/release/pog}
OUT=$1; mkdir -p "$OUT"
"$POG" monitor run --interval 1 --duration 45 --record "$OUT/trace.csv" --no-history --json > "$OUT/run.json" 2> "$OUT/run.err"; echo "run exit $?"
"$POG" monitor replay "$OUT/trace.csv" --json > "$OUT/replay.json" 2> "$OUT/replay.err"; echo "replay exit $?"
python3 - "$OUT" <<'PY'
import csv, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/trace.csv")))
energy = [r for r in rows if r["energy_mj"]]
pcie = [r for r in rows if r["pcie_tx_kbs"]]
power = [float(r["power_w"]) for r in rows if r["power_w"]]
print(f"rows {len(rows)}, energy read in {len(energy)} (t = {[r['t'] for r in energy]}), pcie read in {len(pcie)}, power {min(power):.1f}-{max(power):.1f} W")
print("energy readings:", [r["energy_mj"] for r in energy])
for name in ("run.json", "replay.json"):
    text = open(f"{out}/{name}").read()
    print(name, "bytes", len(text), "frozen mentions", text.count("sensor_frozen"))
PY
tail -5 "$OUT/run.err"; head -c 600 "$OUT/run.json"; echo; head -c 400 "$OUT/replay.json"; echo
