#!/bin/bash
# history-2: the history checker over the histories the live runs record:
# the lab's whole matrix, the explorer's whole matrix and a soak, each run
# with --history FILE (each run judges its cells, schedules or rounds by
# both judges as it goes), then each file checked again whole by
# `stocklock history check`, timed; history-2-summary.py sums each check's
# JSON (operations, SKUs, the largest SKU, verdicts, the checker's time).
# Usage: docs/results/history-2.sh BIN OUT_DIR [SOAK_MINUTES]
set -u
bin=${1:-target/release/stocklock}
out=${2:-/tmp/history-2}
minutes=${3:-2}
here=$(dirname "$0")
mkdir -p "$out"
run() {
  local name=$1; shift
  /usr/bin/time -f "$name: wall %e s, max RSS %M KiB" "$bin" "$@" --history "$out/$name.jsonl" \
    --json "$out/$name.json" > "$out/$name.txt" 2>&1
  echo "$name: exit $? ($(tail -1 "$out/$name.txt"))"
  /usr/bin/time -f "check $name: wall %e s, max RSS %M KiB" "$bin" history check "$out/$name.jsonl" \
    --json "$out/$name-check.json" > "$out/$name-check.txt" 2>&1
  echo "check $name: exit $? ($(tail -1 "$out/$name-check.txt"))"
  [ -f "$out/$name-check.json" ] && python3 "$here/history-2-summary.py" "$out/$name-check.json"
}
run lab lab
run explore explore --all --schedules 100 --hunt 1000 --seed 1
run soak soak --minutes "$minutes" --seed 7
