#!/bin/bash
# alloc-3: the instances' CPU per answer with glibc's allocator and with
# mimalloc, the two builds of one commit (61e51b9, and 61e51b9 with
# mimalloc as the global allocator) alternated, each on an `up --bench-bare`
# of its own, measured by the bench's CPU rows:
#   git stash; cargo build --release; cp target/release/stocklock /tmp/stocklock-glibc
#   git stash pop; cargo build --release; cp target/release/stocklock /tmp/stocklock-mi
set -u
out=${1:-/tmp/alloc-3}
mkdir -p "$out"
for round in 1 2 3; do
  for build in glibc mi; do
    bin=/tmp/stocklock-$build
    $bin up --port 18080 --bench-bare > "$out/up.out" 2>&1 &
    up=$!
    for i in $(seq 1 300); do grep -q "admin token:" "$out/up.out" && break; sleep 0.1; done
    token=$(grep "admin token:" "$out/up.out" | awk '{print $3}')
    redis=$(grep "^redis:" "$out/up.out" | awk '{print $4}')
    STOCKLOCK_ADMIN_TOKEN=$token $bin bench --target http://127.0.0.1:18080 --redis-url "$redis" \
      --rows lua-cpu-vs-bare,lua-batch-cpu-vs-bare --runs 3 --duration 3s \
      --json "$out/$build-$round.json" > "$out/$build-$round.txt" 2>&1
    kill -TERM $up; wait $up
  done
done
