#!/bin/bash
# history-4: the 30-minute soak of history-3 again (seed 7), alone on the
# machine, after the order variants' returns were recorded in each round's
# history (a594a47); its whole history file then checked again by
# `stocklock history check`, timed.
# Usage: docs/results/history-4.sh BIN OUT_DIR
set -u
bin=${1:-target/release/stocklock}
out=${2:-/tmp/history-4}
mkdir -p "$out"
uptime > "$out/uptime.txt"
/usr/bin/time -f "soak: wall %e s, max RSS %M KiB" "$bin" soak --minutes 30 --seed 7 \
  --json "$out/soak.json" --history "$out/soak.jsonl" > "$out/soak.txt" 2> "$out/soak.err"
echo "soak: exit $?"
uptime >> "$out/uptime.txt"
/usr/bin/time -f "check: wall %e s, max RSS %M KiB" "$bin" history check "$out/soak.jsonl" \
  --json "$out/soak-check.json" > "$out/soak-check.txt" 2> "$out/check.err"
echo "check: exit $? (2: some SKU unsafe, as the variants that oversell are)"
python3 - "$out/soak-check.json" <<'PY'
import json, sys
from collections import Counter
d = json.load(open(sys.argv[1]))
skus = d["skus"]
print(f"{sum(s['ops'] for s in skus)} operations, {len(skus)} SKUs, largest {max(s['ops'] for s in skus)}")
print("verdicts:", dict(Counter(s["verdict"] for s in skus)))
print(f"checked in {d['elapsed_ms']} ms")
PY
