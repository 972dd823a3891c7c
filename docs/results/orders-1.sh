#!/bin/bash
# orders-1: a new user's first try of the order pipeline, on the build
# before the batch insert (`base`) and the one with it (`new`), alternated
# three times, each on a default `up` stack of its own. The two builds were
# made first:
#   git worktree add /tmp/base c7d3edb && (cd /tmp/base && CARGO_TARGET_DIR=/work/main/target cargo build --release)
#   cp target/release/stocklock /tmp/stocklock-base
#   git checkout 3e09d5e && touch src/orders/insert.rs && cargo build --release && cp target/release/stocklock /tmp/stocklock-new
set -u
out=${1:-/tmp/orders-1}
mkdir -p "$out"
for round in 1 2 3; do
  for build in base new; do
    bin=/tmp/stocklock-$build
    $bin up --port 18080 > "$out/up.out" 2>&1 &
    up=$!
    for i in $(seq 1 300); do grep -q "admin token:" "$out/up.out" && break; sleep 0.1; done
    token=$(grep "admin token:" "$out/up.out" | awk '{print $3}')
    uptime > "$out/$build-$round.txt"
    STOCKLOCK_ADMIN_TOKEN=$token $bin load --target http://127.0.0.1:18080 --variant lua-stream \
      --stock 20000 --requests 20000 --concurrency 64 --json "$out/$build-$round.json" >> "$out/$build-$round.txt" 2>&1
    kill -TERM $up; wait $up
  done
done
