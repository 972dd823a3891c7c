#!/bin/bash
# gates-1: the same load on the build before the gates and the build with
# them, alternated three times, each on a stack of its own. The two
# builds were made first:
#   git worktree add /tmp/wt a5a4d11 && (cd /tmp/wt && CARGO_TARGET_DIR=$PWD/target cargo build --release)
#   cp target/release/stocklock /tmp/stocklock-nogates
#   git checkout 2f8a537 && cargo build --release && cp target/release/stocklock /tmp/stocklock-gates
set -u
mkdir -p /tmp/ab
for round in 1 2 3; do
  for build in nogates gates; do
    bin=/tmp/stocklock-$build
    $bin up --port 18080 --no-chaos --instances 2 --etcd 0 --zookeeper 0 --orders off --redlock 0 > /tmp/ab/up.out 2>&1 &
    up=$!
    for i in $(seq 1 100); do grep -q "admin token:" /tmp/ab/up.out && break; sleep 0.1; done
    token=$(grep "admin token:" /tmp/ab/up.out | awk '{print $3}')
    STOCKLOCK_ADMIN_TOKEN=$token $bin load --target http://127.0.0.1:18080 --variant lua,token,watchdog \
      --stock 100000000 --duration 4s --concurrency 64 --json /tmp/ab/$build-$round.json > /tmp/ab/$build-$round.txt 2>&1
    kill -TERM $up; wait $up
  done
done
