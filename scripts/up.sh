#!/usr/bin/env bash
# Brings the whole stack up on http://127.0.0.1:8080/ : installs redis-server
# and nginx when missing (etcd-server and ZooKeeper too, for the CP lock
# stores, redis-sentinel for `--replica`, and postgresql for the orders,
# or says it could not; it names each package and its rough size first,
# ZooKeeper's ~250 MB with a Java runtime the largest), builds stocklock
# (release), and runs
# `stocklock up`.
# Extra arguments go to `stocklock up` (see `stocklock up --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh etcd-server zookeeper redis-sentinel postgresql
cargo build --release --locked
exec target/release/stocklock up "$@"
