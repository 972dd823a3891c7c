#!/bin/bash
# rss-2: what each row of the bench leaves in the instances' resident
# memory: a fresh `up --bench-bare`, then the rows one at a time (2 runs of
# 3 s each), each instance's VmRSS after each.
#   docs/results/rss-2.sh target/release/stocklock
set -u
bin=${1:-target/release/stocklock}
log=/tmp/rss-2.up
rss() {
  for p in $(grep -a -E "^instance (a|b):" $log | awk '{print $4}'); do
    grep VmRSS /proc/$p/status | awk '{printf "%s kB ", $2}'
  done
}
$bin up --port 18080 --bench-bare > $log 2>&1 &
up=$!
for i in $(seq 1 300); do grep -aq "admin token:" $log && break; sleep 0.1; done
export STOCKLOCK_ADMIN_TOKEN=$(grep -a "admin token:" $log | awk '{print $3}')
redis=$(grep -a "^redis:" $log | awk '{print $4}')
echo "at start: $(rss)"
for row in lua-vs-healthz lua-cpu-vs-bare lua-batch-vs-lua timeline-cost sold-out-vs-healthz \
    watchdog-vs-handoff-ceiling redlock-vs-watchdog orders-vs-sales; do
  $bin bench --target http://127.0.0.1:18080 --redis-url "$redis" --rows $row --runs 2 \
    --duration 3s > /dev/null 2>&1
  echo "after $row: $(rss)"
done
kill -TERM $up; wait $up
