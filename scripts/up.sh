#!/usr/bin/env bash
# Brings the whole stack up on http://127.0.0.1:8080/ : installs redis-server
# and nginx when missing (etcd-server and ZooKeeper too, for the CP lock
# stores, redis-sentinel for `--replica`, and postgresql for the orders,
# or says it could not; it names each package and its rough size first,
# ZooKeeper's ~250 MB with a Java runtime the largest), builds stocklock
# (release), and runs
# `stocklock up`.
# `--minimal` installs redis-server and nginx only and runs `stocklock up`
# without etcd, ZooKeeper and the orders' PostgreSQL: their variants and
# the orders then answer which store is missing and how to add it.
# Extra arguments go to `stocklock up` (see `stocklock up --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
extras=(etcd-server zookeeper redis-sentinel postgresql)
without=()
args=()
for arg in "$@"; do
  if [ "$arg" = --minimal ]; then
    extras=()
    without=(--etcd 0 --zookeeper 0 --orders off)
  else
    args+=("$arg")
  fi
done
scripts/deps.sh "${extras[@]}"
cargo build --release --locked
exec target/release/stocklock up "${without[@]}" "${args[@]}"
