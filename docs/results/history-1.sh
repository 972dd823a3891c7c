#!/bin/bash
# history-1: how long the history checker takes on the issue's size (20 000
# operations, 64 clients, one SKU) and on a variant that oversells, five
# times each, on a stack of its own:
#   - `load --history` of lua: 20 000 requests at 64 connections for a
#     stock of 5 000 (5 000 sales, 15 000 sold-out answers, the books);
#   - the same of none (a unit sold many times: decided without a search);
#   - each file checked again by `stocklock history check`, timed.
# Usage: docs/results/history-1.sh BIN OUT_DIR
set -u
bin=${1:-target/release/stocklock}
out=${2:-/tmp/history-1}
mkdir -p "$out"
$bin up --port 18090 --no-chaos --instances 2 --etcd 0 --zookeeper 0 --orders off --redlock 0 > "$out/up.out" 2>&1 &
up=$!
for i in $(seq 1 300); do grep -q "admin token:" "$out/up.out" && break; sleep 0.1; done
token=$(grep "admin token:" "$out/up.out" | awk '{print $3}')
for round in 1 2 3 4 5; do
  for variant in lua none; do
    file="$out/$variant-$round.jsonl"
    STOCKLOCK_ADMIN_TOKEN=$token $bin load --target http://127.0.0.1:18090 --variant $variant \
      --stock 5000 --requests 20000 --concurrency 64 --history "$file" --json "$out/$variant-$round-load.json" \
      > "$out/$variant-$round-load.txt" 2>&1
    /usr/bin/time -f "wall %e s, max RSS %M KiB" $bin history check "$file" --json "$out/$variant-$round-check.json" \
      > "$out/$variant-$round-check.txt" 2>&1
    echo "$variant round $round: $(tail -2 "$out/$variant-$round-check.txt" | tr '\n' ' ')"
  done
done
kill -TERM $up; wait $up
