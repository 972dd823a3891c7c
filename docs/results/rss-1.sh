#!/bin/bash
# rss-1: an instance's resident memory (and its largest anonymous mapping,
# glibc's arena of the worker thread) at the start of `up --bench-bare` and
# after 8 s of `lua` at 64 connections on a SKU whose timeline is on, for
# each build given (the binaries' paths), each on a stack of its own:
#   docs/results/rss-1.sh /tmp/stocklock-61e51b9 /tmp/stocklock-e868264
set -u
log=/tmp/rss-1.up
rss() {
  for p in $(grep -a -E "^instance (a|b):" $log | awk '{print $4}'); do
    grep VmRSS /proc/$p/status | awk '{printf "%s kB ", $2}'
    awk '/^[0-9a-f]+-[0-9a-f]+ rw-p 00000000 00:00 0 *$/{n=1;next} /^[0-9a-f]+-/{n=0}
         n&&/^Rss:/{if($2>1000) printf "(arena %s kB) ", $2}' /proc/$p/smaps
  done
}
for bin in "$@"; do
  $bin up --port 18080 --bench-bare > $log 2>&1 &
  up=$!
  for i in $(seq 1 300); do grep -aq "admin token:" $log && break; sleep 0.1; done
  token=$(grep -a "admin token:" $log | awk '{print $3}')
  echo "$bin at start: $(rss)"
  STOCKLOCK_ADMIN_TOKEN=$token $bin load --target http://127.0.0.1:18080 --variant lua --sku m \
    --stock 100000000 --duration 8s --concurrency 64 | grep "^lua "
  echo "$bin after 8 s of lua: $(rss)"
  kill -TERM $up; wait $up
done
