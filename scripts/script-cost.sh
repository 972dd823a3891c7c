#!/usr/bin/env bash
# What the `lua` sale script costs inside Redis, and where it goes: the
# script as the instances send it, its six Redis calls alone (no checks,
# no helpers), the script with the SKU's timeline off (no TIME), and the
# bench's bare decrement (`GET /bench/bare`). Each runs in a redis-server
# of its own (started here, on a Unix socket in a temporary directory, and
# stopped by pid) that nothing else loads: what Redis spends per call on
# its own clock (EVALSHA's usec_per_call in INFO commandstats), without the
# stack's processes competing for the cores. The four are run in turn,
# ROUNDS times (default 5), and the medians printed.
#
#   scripts/script-cost.sh [ROUNDS] [CALLS]
#
# Needs redis-server, redis-cli and redis-benchmark (Debian's redis-server
# and redis-tools). The sale script is assembled as the instances build it
# (src/ledger/mod.rs with_ledger: the ledger's helpers, then the one-buyer
# sale, then deduct.lua).
set -euo pipefail

rounds=${1:-5}
calls=${2:-200000}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
socket=$dir/redis.sock
redis-server --port 0 --unixsocket "$socket" --save '' --appendonly no \
  --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
stop() {
  if [ -f "$dir/redis.pid" ]; then kill "$(cat "$dir/redis.pid")" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap stop EXIT
for _ in $(seq 50); do redis-cli -s "$socket" ping >/dev/null 2>&1 && break; sleep 0.1; done

scripts=$root/src/scripts
{ cat "$scripts/ledger.lua"; echo; cat "$scripts/deduct_one.lua"; echo; cat "$scripts/deduct.lua"; } >"$dir/sale.lua"
cat >"$dir/calls.lua" <<'EOF'
local l = redis.call('HMGET', KEYS[2], 'initial', 'buckets', 'epoch', 'timeline', 'returned')
local t = redis.call('TIME')
local stock = tonumber(redis.call('GET', KEYS[1]))
redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[2], 'sold', '1')
redis.call('BITFIELD', KEYS[3], 'OVERFLOW', 'SAT', 'INCRBY', 'u2', '#' .. (tonumber(l[1]) - stock), '1')
return {1, stock, stock - 1, 0, 0, 0, 0}
EOF

# One run: a fresh SKU of 100 million units (timeline on or off), CALLS
# calls by 4 clients pipelining 16 each, then the script's usec per call.
run() {
  local file=$1 timeline=$2 sha
  sha=$(redis-cli -s "$socket" script load "$(cat "$file")")
  redis-cli -s "$socket" flushall >/dev/null
  redis-cli -s "$socket" set stock 100000000 >/dev/null
  redis-cli -s "$socket" hset ledger initial 100000000 epoch 1 buckets 0 \
    timeline "$timeline" returned 0 sold 0 >/dev/null
  redis-cli -s "$socket" config resetstat >/dev/null
  # deduct.lua's keys and arguments for a sale without a request id.
  redis-benchmark -s "$socket" -n "$calls" -c 4 -P 16 -q evalsha "$sha" 8 \
    stock ledger units served requests request_times orders returned_units \
    a '' 1 '' 3600000 '' 100000 5000 '' >/dev/null
  redis-cli -s "$socket" info commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p'
}

names=("sale script" "its six calls alone" "sale script, timeline off" "bare decrement")
files=("$dir/sale.lua" "$dir/calls.lua" "$dir/sale.lua" "$scripts/bare.lua")
timelines=(1 1 0 1)
declare -a results
for round in $(seq "$rounds"); do
  for i in "${!names[@]}"; do
    results[i]="${results[i]:-} $(run "${files[i]}" "${timelines[i]}")"
  done
  echo "round $round of $rounds done" >&2
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "usec per call inside Redis (EVALSHA usec_per_call), median of $rounds rounds of $calls calls:"
for i in "${!names[@]}"; do
  printf '  %-28s %6s   (runs:%s)\n' "${names[i]}" "$(echo "${results[i]}" | median)" "${results[i]}"
done
