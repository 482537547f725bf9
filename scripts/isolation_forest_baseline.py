#!/usr/bin/env python3
"""scikit-learn's IsolationForest on the same evaluation set as pog's detectors.

Trains on the real H200 trace (crates/monitor/tests/data/h200-healthy.csv), replays every
episode of crates/monitor/eval/ (labels.csv) and scores it exactly as
`cargo run --release -p pog-monitor --example evaluate` does: healthy time is the healthy
episodes and the fault episodes before their fault; the window of an event is its start to
30 s after its end.

Two variants:
  default  IsolationForest() with every default (100 trees, 256 rows per tree,
           contamination="auto": a sample is anomalous when its score passes 0.5), on the raw
           numeric fields. Each run of anomalous samples is one alarm.
  tuned    the same forest, anomalous only above the highest training score, and only after
           3 anomalous samples in a row (what pog's own multivariate detector does).

An event counts as caught when any sample from its start to 30 s after its end is flagged,
even inside a run that began before it (generous to the forest); false alarms are the runs
that start in healthy time.

Raw fields: every numeric column of the trace except t and energy_mj (a counter that only
grows: every later sample would be new), plus the number of XIDs in the row.

Run with any python3: the script makes its own virtual environment (target/sklearn-venv) and
installs scikit-learn there with pip, then runs itself inside it.
"""

import csv
import os
import subprocess
import sys
import venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("POG_SKLEARN_VENV", os.path.join(ROOT, "target", "sklearn-venv"))
SKLEARN = "scikit-learn==1.9.1"
TRAIN = os.path.join(ROOT, "crates", "monitor", "tests", "data", "h200-healthy.csv")
EVAL = os.path.join(ROOT, "crates", "monitor", "eval")
GRACE_S = 30.0
FIELDS = [
    "temp_gpu", "temp_mem", "power_w", "util_gpu", "util_mem", "mem_used_mib", "sm_clock",
    "mem_clock", "clock_reasons", "pcie_tx_kbs", "pcie_rx_kbs", "pcie_replay", "ecc_corr",
    "ecc_uncorr",
]


def ensure_venv():
    """Re-runs this script inside a venv that has scikit-learn."""
    python = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(python):
        print(f"creating {VENV} and installing {SKLEARN}", file=sys.stderr)
        venv.create(VENV, with_pip=True)
    check = subprocess.run([python, "-c", "import sklearn"], capture_output=True)
    if check.returncode != 0:
        subprocess.run([python, "-m", "pip", "install", "--quiet", SKLEARN], check=True)
    os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])


def load(path):
    """The trace's times and raw-field rows (None where a cell is empty)."""
    times, rows = [], []
    with open(path, newline="") as f:
        for rec in csv.DictReader(f):
            times.append(float(rec["t"]))
            row = []
            for name in FIELDS:
                cell = rec.get(name, "")
                if name == "clock_reasons" and cell.lower().startswith("0x"):
                    row.append(float(int(cell, 16)))
                else:
                    row.append(float(cell) if cell != "" else None)
            xid = rec.get("xid", "") or ""
            row.append(float(len([c for c in xid.replace(";", " ").split() if c])))
            rows.append(row)
    return times, rows


def main():
    ensure_venv()
    import numpy as np
    import sklearn
    from sklearn.ensemble import IsolationForest

    _, train_rows = load(TRAIN)
    columns = list(zip(*train_rows))
    fill = [float(np.median([v for v in col if v is not None])) for col in columns]

    def matrix(rows):
        return np.array([[fill[i] if v is None else v for i, v in enumerate(r)] for r in rows])

    x_train = matrix(train_rows)
    forest = IsolationForest(random_state=0).fit(x_train)
    highest = float((-forest.score_samples(x_train)).max())

    with open(os.path.join(EVAL, "labels.csv"), newline="") as f:
        labels = list(csv.DictReader(f))

    # Per episode and variant: each sample's flag. A run of flagged samples is one alarm,
    # raised at its first sample (at its third for "tuned").
    variants = {"default": [], "tuned": []}
    for label in labels:
        times, rows = load(os.path.join(EVAL, "episodes", label["episode"] + ".csv"))
        x = matrix(rows)
        scores = -forest.score_samples(x)
        flags = forest.predict(x) == -1
        alarms = [t for i, t in enumerate(times) if flags[i] and (i == 0 or not flags[i - 1])]
        variants["default"].append((label, times, flags, alarms))
        run, tuned_flags, alarms = 0, [], []
        for t, score in zip(times, scores):
            run = run + 1 if score > highest else 0
            tuned_flags.append(run >= 3)
            if run == 3:
                alarms.append(t)
        variants["tuned"].append((label, times, tuned_flags, alarms))

    print(f"scikit-learn {sklearn.__version__}, numpy {np.__version__}; "
          f"trained on {len(train_rows)} samples, highest training score {highest:.3f}")
    for name, episodes in variants.items():
        healthy_s, false_alarms, healthy_samples, healthy_flagged = 0.0, 0, 0, 0
        per_kind = {}
        for label, times, flags, alarms in episodes:
            kind = label["kind"]
            start = float(label["start_t"]) if kind != "healthy" else float("inf")
            clean = [f for t, f in zip(times, flags) if t < start]
            healthy_samples += len(clean)
            healthy_flagged += sum(bool(f) for f in clean)
            if kind == "healthy":
                healthy_s += times[-1] - times[0]
                false_alarms += len(alarms)
                continue
            end = float(label["end_t"])
            healthy_s += start - times[0]
            false_alarms += len([a for a in alarms if a < start])
            # Generous to the forest: any flagged sample in the window catches the event,
            # even inside a run of flags that began before the fault.
            hits = [t for t, f in zip(times, flags) if f and start <= t <= end + GRACE_S]
            k = per_kind.setdefault(kind, {"events": 0, "caught": 0, "delays": []})
            k["events"] += 1
            if hits:
                k["caught"] += 1
                k["delays"].append(hits[0] - start)
        print()
        print(f"### sklearn IsolationForest, {name}")
        print()
        print("| fault kind | events | caught | recall | median time to detect (s) |")
        print("|---|---|---|---|---|")
        events = caught = 0
        delays = []
        for kind in sorted(per_kind):
            k = per_kind[kind]
            events += k["events"]
            caught += k["caught"]
            delays += k["delays"]
            med = f"{np.median(k['delays']):.1f}" if k["delays"] else "-"
            print(f"| {kind} | {k['events']} | {k['caught']} | "
                  f"{100 * k['caught'] / k['events']:.0f} % | {med} |")
        med = f"{np.median(delays):.1f}" if delays else "-"
        print(f"| **all** | {events} | {caught} | **{100 * caught / events:.1f} %** | **{med}** |")
        hours = healthy_s / 3600
        print()
        print(f"false alarms: {false_alarms} in {hours:.2f} h of healthy data = "
              f"**{false_alarms / hours:.2f} per hour**; "
              f"{100 * healthy_flagged / healthy_samples:.1f} % of healthy samples flagged")


if __name__ == "__main__":
    main()
