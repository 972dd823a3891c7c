#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need when missing
# (redis-server, nginx; docker-compose to validate the compose file;
# etcd-server, whose members the etcd lock's tests start;
# redis-sentinel, whose Sentinels the failover tests start (up --replica);
# prometheus, whose server scrapes a stack and whose promtool checks the
# shipped config and dashboard; nodejs, which checks the pages' scripts; chromium, its driver and a CJK font for
# the browser test (and axe-core, from npm's registry: scripts/axe.sh); zookeeper, whose servers the ZooKeeper lock's tests
# start; postgresql, whose servers the orders' tests start), checks the code's form (rustfmt, clippy
# with warnings as errors, rustdoc without warnings), then cargo test. The tests start their own
# redis-server, nginx, prometheus, PostgreSQL and chromedriver on free loopback ports
# and stop them. Each phase's time is printed as it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(curl nodejs docker-compose prometheus etcd-server redis-sentinel chromium chromium-driver fonts-wqy-microhei zookeeper postgresql)
phase() { echo "test.sh: $1 took $((SECONDS - started)) s" >&2; started=$SECONDS; }
started=$SECONDS
installing=""
if [ "${CI:-}" = true ]; then
  # CI (as root, nothing to ask): apt downloads and installs while the code
  # is checked below, which needs none of it; the tests wait for it.
  log=$(mktemp)
  scripts/deps.sh "${packages[@]}" >"$log" 2>&1 &
  installing=$!
else
  scripts/deps.sh "${packages[@]}"
  phase "installing what the tests need"
fi
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  # A minimal rustup profile has neither; the default one has both.
  rustup component add rustfmt clippy ||
    { echo "rustfmt and clippy are needed: rustup component add rustfmt clippy" >&2; exit 1; }
fi
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
phase "rustfmt and clippy"
# The documentation of both crates builds without a warning (the lock
# library's examples are doctests, compiled by cargo test; its examples/
# are built by cargo test too). The workspace: the application and the
# lock library (crates/stocklock-lock), tested together.
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps
phase "rustdoc"
if [ -n "$installing" ]; then
  status=0
  wait "$installing" || status=$?
  cat "$log"
  [ "$status" -eq 0 ] || { echo "test.sh: installing what the tests need failed" >&2; exit "$status"; }
  phase "waiting for the install (begun at the start)"
fi
# The suite's tests wait on servers more than on the CPU: six at a time
# on two cores (the whole stacks among them take turns, four at once, see
# tests/api/helpers). Eight at a time was no faster (suite-10 on
# docs/measurements.md: every test slower, the machine past what it serves).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}"
# axe-core, which the accessibility test runs in Chromium (npm's registry).
scripts/axe.sh
cargo test --locked --workspace "$@"
phase "cargo test (build and run)"
