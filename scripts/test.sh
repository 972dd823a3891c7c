#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need when missing
# (redis-server, nginx; docker-compose to validate the compose file;
# chromium, its driver and a CJK font for the browser test), then cargo test.
# The tests start their own redis-server, nginx and chromedriver on free
# loopback ports and stop them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh docker-compose chromium chromium-driver fonts-wqy-microhei
exec cargo test --locked "$@"
