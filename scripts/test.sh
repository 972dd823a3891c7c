#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need when missing
# (redis-server, nginx; docker-compose to validate the compose file;
# etcd-server, whose members the etcd lock's tests start;
# redis-sentinel, whose Sentinels the failover tests start (up --replica);
# prometheus, whose server scrapes a stack and whose promtool checks the
# shipped config and dashboard; nodejs, which checks the pages' scripts; chromium, its driver and a CJK font for
# the browser test; zookeeper, whose servers the ZooKeeper lock's tests
# start; postgresql, whose servers the orders' tests start), checks the code's form (rustfmt, clippy
# with warnings as errors, rustdoc without warnings), then cargo test. The tests start their own
# redis-server, nginx, prometheus, PostgreSQL and chromedriver on free loopback ports
# and stop them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh nodejs docker-compose prometheus etcd-server redis-sentinel chromium chromium-driver fonts-wqy-microhei zookeeper postgresql
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  # A minimal rustup profile has neither; the default one has both.
  rustup component add rustfmt clippy ||
    { echo "rustfmt and clippy are needed: rustup component add rustfmt clippy" >&2; exit 1; }
fi
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# The documentation of both crates builds without a warning (the lock
# library's examples are doctests, compiled by cargo test; its examples/
# are built by cargo test too). The workspace: the application and the
# lock library (crates/stocklock-lock), tested together.
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps
exec cargo test --locked --workspace "$@"
