#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need when missing
# (redis-server, nginx, docker-compose to validate the compose file), then
# cargo test. The tests start their own redis-server and nginx on free
# loopback ports and stop them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh docker-compose
exec cargo test --locked "$@"
