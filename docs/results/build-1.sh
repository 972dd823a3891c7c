#!/usr/bin/env bash
# build-1: how long the lock library and the application take to build
# from nothing (an empty target directory; the crates' sources already
# downloaded, so no network time), release profile, one at a time:
# the library with its default features RUNS times, with every feature
# RUNS times, then the application once. Prints one line per build.
#
#   docs/results/build-1.sh [RUNS] > docs/results/build-1.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M') UTC, $(git rev-parse --short HEAD), $(rustc --version)"
echo "# $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
build() {
  local name=$1; shift
  rm -rf "$scratch/target"
  local start end
  start=$(date +%s.%N)
  CARGO_TARGET_DIR="$scratch/target" cargo build --release --locked --offline --quiet "$@"
  end=$(date +%s.%N)
  local crates
  crates=$(find "$scratch/target/release/deps" -name '*.rlib' | wc -l)
  printf '%s\t%.1f s\t%s rlibs\n' "$name" "$(echo "$end - $start" | bc)" "$crates"
}
for i in $(seq "$runs"); do build "library (default features) #$i" -p stocklock-lock; done
for i in $(seq "$runs"); do build "library (--features full) #$i" -p stocklock-lock --features full; done
build "application #1" -p stocklock
