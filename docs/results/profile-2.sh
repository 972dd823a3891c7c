#!/bin/bash
# profile-2: where one instance's CPU goes while `load` sells one hot SKU
# with `lua`, then with `lua-batch`, through nginx at 64 connections, on
# `up --bench-bare` (two instances). perf samples instance a alone
# (999 Hz, DWARF call graphs) for 6 s, 3 s into a 15 s run; the report
# counts each function with everything it calls (--children).
# Needs root (perf) and the admin token of `up`:
#   STOCKLOCK_ADMIN_TOKEN=... docs/results/profile-2.sh PID_OF_INSTANCE_A
set -eu
pid=$1
out=${OUT:-/tmp/profile-2}
mkdir -p $out
for variant in lua lua-batch; do
  timeout 60 stocklock load --variant $variant --sku hot-$variant --stock 100000000 \
    --duration 15s --concurrency 64 > $out/load-$variant.txt 2>&1 &
  load=$!
  sleep 3
  perf record -F 999 --call-graph dwarf,16384 -p $pid -o $out/$variant.data -- sleep 6
  wait $load
  perf report -i $out/$variant.data --children --stdio -g none --sort symbol \
    --percent-limit 0.05 2>/dev/null | grep -v '^#' | grep -v '^$' \
    | sed -E 's/ {2,}/ /g' | cut -c1-200 > $out/$variant.txt
done
