#!/bin/bash
# alloc-2: allocations per answer of a request outside any schedule, on
# the build before the gates (a5a4d11), the first build with them
# (2f8a537: the two binaries of gates-1) and the build with every gate of
# the lock protocols (ac6ef0a, /tmp/stocklock-head, a release build), chaos
# mode on (the gates exist only there), one instance.
# Each malloc, calloc and realloc of the instance's process is counted by
# a perf uprobe on libc while `load` sends 5 000 requests one at a time
# (every one of them sold: the same path each time), three rounds, the
# builds in turn. Needs root for the probes:
#   perf probe -x /lib/x86_64-linux-gnu/libc.so.6 --add malloc   (and calloc, realloc)
set -u
out=/tmp/alloc-2
mkdir -p $out
for round in 1 2 3; do
  for build in nogates gates head; do
    bin=/tmp/stocklock-$build
    $bin up --port 18080 --instances 1 --etcd 0 --zookeeper 0 --orders off --redlock 0 > $out/up.out 2>&1 &
    up=$!
    for i in $(seq 1 100); do grep -q "admin token:" $out/up.out && break; sleep 0.1; done
    token=$(grep "admin token:" $out/up.out | awk '{print $3}')
    pid=$(pgrep -f "stocklock-$build serve")
    for variant in lua token watchdog; do
      perf stat -x, -e probe_libc:malloc,probe_libc:calloc,probe_libc:realloc -p $pid -o $out/$build-$round-$variant.perf &
      perf=$!
      sleep 0.5
      STOCKLOCK_ADMIN_TOKEN=$token $bin load --target http://127.0.0.1:18080 --variant $variant \
        --stock 100000000 --requests 5000 --concurrency 1 --json $out/$build-$round-$variant.json > /dev/null 2>&1
      kill -INT $perf; wait $perf
    done
    kill -TERM $up; wait $up
  done
done
# Allocations per answer: (malloc + calloc + realloc) / requests, per run.
python3 - "$out" <<'PY'
import json, sys, statistics
out = sys.argv[1]
for variant in ["lua", "token", "watchdog"]:
    row = {}
    for build in ["nogates", "gates", "head"]:
        per = []
        for r in (1, 2, 3):
            calls = sum(int(line.split(",")[0]) for line in open(f"{out}/{build}-{r}-{variant}.perf") if line.count(",") > 3)
            run = json.load(open(f"{out}/{build}-{r}-{variant}.json"))["runs"][0]
            assert run["sold"] == run["requests"], run
            per.append(calls / run["requests"])
        row[build] = per
    print(variant, " ".join(f"{b}: median {statistics.median(v):.1f} runs {' / '.join(f'{x:.1f}' for x in v)}" for b, v in row.items()))
PY
