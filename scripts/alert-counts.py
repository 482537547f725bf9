"""Counts a health monitor's JSON alerts (`pog monitor run --json`, one per line) by kind and
severity, for the GPU scripts' summaries; with --each, prints every alert's message first.

    python3 alert-counts.py ALERTS.jsonl [--each]
"""
import collections
import json
import sys

kinds = collections.Counter()
for line in open(sys.argv[1]):
    try:
        a = json.loads(line)
    except ValueError:
        continue
    kinds[(a.get("kind"), a.get("severity"))] += 1
    if "--each" in sys.argv[2:]:
        print("  ", a.get("kind"), a.get("severity"), a.get("message", "")[:160])
for (kind, severity), n in sorted(kinds.items(), key=str):
    print(f"  alert {kind} ({severity}): {n}")
