#!/bin/bash
# alloc-4: allocations per answer in the one instance of
# `up --instances 1 --bench-bare` (chaos mode on), for `lua`, `lua-batch`,
# the bench's bare route and `/healthz`, each path loaded with 5 000
# requests one at a time (`load --path`, every answer a 200), for each
# build given (the binaries' paths), three rounds, the builds in turn.
# Each malloc, calloc and realloc of the instance's process is counted by
# a perf uprobe on libc. Needs root for the probes:
#   perf probe -x /lib/x86_64-linux-gnu/libc.so.6 --add malloc   (and calloc, realloc)
#   docs/results/alloc-4.sh /tmp/stocklock-A /tmp/stocklock-B
set -u
out=${OUT:-/tmp/alloc-4}
mkdir -p $out
paths="/deductStock/lua?sku=a4 /deductStock/lua-batch?sku=a4b /bench/bare?sku=a4 /healthz"
for round in 1 2 3; do
  for bin in "$@"; do
    build=$(basename $bin)
    $bin up --port 18080 --instances 1 --bench-bare --etcd 0 --zookeeper 0 --orders off --redlock 0 > $out/up.out 2>&1 &
    up=$!
    for i in $(seq 1 300); do grep -aq "admin token:" $out/up.out && break; sleep 0.1; done
    token=$(grep -a "admin token:" $out/up.out | awk '{print $3}')
    for sku in a4 a4b; do
      curl -s -X POST -H "Authorization: Bearer $token" -H 'content-type: application/json' \
        -d "{\"sku\":\"$sku\",\"stock\":100000000}" http://127.0.0.1:18080/api/admin/reset > /dev/null
    done
    pid=$(pgrep -f "$build serve")
    n=0
    for path in $paths; do
      n=$((n + 1))
      perf stat -x, -e probe_libc:malloc,probe_libc:calloc,probe_libc:realloc -p $pid -o $out/$build-$round-$n.perf &
      perf=$!
      sleep 0.5
      $bin load --target http://127.0.0.1:18080 --path "$path" --requests 5000 --concurrency 1 > $out/$build-$round-$n.txt 2>&1
      kill -INT $perf; wait $perf
    done
    kill -TERM $up; wait $up
  done
done
python3 - "$out" "$@" <<'PY'
import os, re, statistics, sys
out, bins = sys.argv[1], sys.argv[2:]
names = ["lua", "lua-batch", "bare", "/healthz"]
for bin in bins:
    build = os.path.basename(bin)
    cells = []
    for n, name in enumerate(names, 1):
        per = []
        for r in (1, 2, 3):
            calls = sum(int(l.split(",")[0]) for l in open(f"{out}/{build}-{r}-{n}.perf") if l.count(",") > 3)
            text = open(f"{out}/{build}-{r}-{n}.txt").read()
            ok = int(re.search(r"\| 200 (\d+)", text).group(1))
            assert ok == 5000, text
            per.append(calls / ok)
        cells.append(f"{name} {statistics.median(per):.1f} ({' / '.join(f'{x:.1f}' for x in per)})")
    print(f"{build}: " + ", ".join(cells))
PY
