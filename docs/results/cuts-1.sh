#!/bin/bash
# cuts-1: the bench's CPU rows on two builds (the binaries' paths), in
# turn, three times, each on an `up --bench-bare` of its own:
#   docs/results/cuts-1.sh /tmp/stocklock-e868264 /tmp/stocklock-eeab77e
set -u
out=${OUT:-/tmp/cuts-1}
mkdir -p "$out"
for round in 1 2 3; do
  for bin in "$@"; do
    build=$(basename $bin)
    $bin up --port 18080 --bench-bare > "$out/up.out" 2>&1 &
    up=$!
    for i in $(seq 1 300); do grep -aq "admin token:" "$out/up.out" && break; sleep 0.1; done
    token=$(grep -a "admin token:" "$out/up.out" | awk '{print $3}')
    redis=$(grep -a "^redis:" "$out/up.out" | awk '{print $4}')
    STOCKLOCK_ADMIN_TOKEN=$token $bin bench --target http://127.0.0.1:18080 --redis-url "$redis" \
      --rows lua-cpu-vs-bare,lua-batch-cpu-vs-bare --runs 3 --duration 3s \
      --json "$out/$build-$round.json" > "$out/$build-$round.txt" 2>&1
    kill -TERM $up; wait $up
  done
done
