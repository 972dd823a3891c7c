#!/usr/bin/env python3
"""Sums a `stocklock history check --json` report: operations, SKUs, the
largest SKU, each verdict's count, the slowest SKU and the checker's time."""
import collections
import json
import sys

report = json.load(open(sys.argv[1]))
skus = report["skus"]
ops = [s["ops"] for s in skus]
verdicts = collections.Counter(s["verdict"] for s in skus)
slowest = max(skus, key=lambda s: s.get("elapsed_ms", 0)) if skus else None
print(
    f"  {sum(ops)} operations in {len(skus)} SKUs, the largest {max(ops) if ops else 0};"
    f" verdicts {dict(sorted(verdicts.items()))};"
    f" checked in {report['elapsed_ms']} ms"
    + (f", the slowest SKU {slowest['sku']} ({slowest['ops']} ops) {slowest.get('elapsed_ms', 0)} ms" if slowest else "")
)
