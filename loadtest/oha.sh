#!/usr/bin/env bash
# The oha runs a workshop types, against a running stack (./scripts/up.sh).
#   TOKEN=<admin token printed by up> loadtest/oha.sh [variant ...]
# For each variant: reset its own SKU to 50, fire 400 requests 64 at a time
# with 2 ms of business work, and print the ledger. Needs oha
# (cargo install oha) and curl.
set -euo pipefail
URL=${URL:-http://127.0.0.1:8080}
: "${TOKEN:?set TOKEN to the admin token stocklock up printed}"
command -v oha >/dev/null || { echo "oha is not installed: cargo install oha" >&2; exit 1; }
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(none local-mutex setnx setnx-expiry token watchdog fenced redlock etcd zookeeper lua lua-batch lua-sharded lua-then-queue lua-stream)
for v in "${variants[@]}"; do
  buckets=0; [ "$v" = lua-sharded ] && buckets=8
  curl -sf -X POST "$URL/api/admin/reset" -H "Authorization: Bearer $TOKEN" \
       -H 'content-type: application/json' -d "{\"sku\":\"$v\",\"stock\":50,\"buckets\":$buckets}" >/dev/null
  oha --no-tui -n 400 -c 64 "$URL/deductStock/$v?sku=$v&work_ms=2" | grep -E 'Requests/sec|\[[0-9]{3}\]'
  echo "$v: $(curl -s "$URL/api/state?sku=$v")"
done
