#!/bin/bash
# history-3: the two long runs history-2 left out, each with --history
# FILE and each judged by both judges as it goes: a 30-minute soak (seed 7)
# and the explorer's whole matrix (every cell it can play, 5 schedules of
# a safe cell, up to 100 of a cell with a counterexample; each cell's own
# claim judged too). They run side by side, the explorer niced, as on the
# 2-core machine of the run. Each file is then checked again whole by
# `stocklock history check`, timed; history-2-summary.py sums each check.
# Usage: docs/results/history-3.sh BIN OUT_DIR
set -u
bin=${1:-target/release/stocklock}
out=${2:-/tmp/history-3}
here=$(dirname "$0")
mkdir -p "$out"
uptime > "$out/uptime.txt"
/usr/bin/time -f "soak: wall %e s, max RSS %M KiB" "$bin" soak --minutes 30 --seed 7 --echo \
  --history "$out/soak.jsonl" --json "$out/soak.json" > "$out/soak.txt" 2> "$out/soak.err" &
soak=$!
sleep 300
/usr/bin/time -f "explore: wall %e s, max RSS %M KiB" nice -n 10 "$bin" explore --all \
  --schedules 5 --hunt 100 --seed 1 --history "$out/explore.jsonl" --json "$out/explore.json" \
  > "$out/explore.txt" 2>&1
echo "explore: exit $?"
wait $soak
echo "soak: exit $?"
uptime >> "$out/uptime.txt"
# A binary before dbaf1e4 names the SKUs of one variant's cells alike in
# --all's file: each repeated declaration is renamed apart (a no-op after).
python3 - "$out/explore.jsonl" <<'PY'
import json, sys
path = sys.argv[1]
seen, cur, lines = {}, {}, []
for line in open(path):
    d = json.loads(line)
    sku = d["sku"]
    if "initial" in d and "call" not in d:
        k = seen.get(sku, 0)
        seen[sku] = k + 1
        cur[sku] = sku if k == 0 else f"{sku}#cell{k + 1}"
    d["sku"] = cur.get(sku, sku)
    lines.append(json.dumps(d, separators=(",", ":")))
open(path, "w").write("\n".join(lines) + "\n")
PY
for name in soak explore; do
  /usr/bin/time -f "check $name: wall %e s, max RSS %M KiB" "$bin" history check "$out/$name.jsonl" \
    --json "$out/$name-check.json" > "$out/$name-check.txt" 2>&1
  echo "check $name: exit $? ($(tail -1 "$out/$name-check.txt"))"
  [ -f "$out/$name-check.json" ] && python3 "$here/history-2-summary.py" "$out/$name-check.json"
done
