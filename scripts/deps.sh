#!/usr/bin/env bash
# Installs, with apt, whatever of redis-server, nginx (and the extras named
# as arguments) this machine lacks. Used by up.sh, test.sh and CI.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
for extra in "$@"; do
  case "$extra" in
    docker-compose) command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose) ;;
    *) dpkg -s "$extra" >/dev/null 2>&1 || need+=("$extra") ;;
  esac
done
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${need[*]}; install them with your package manager and run this again" >&2
  exit 1
fi
echo "installing: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the packaged services; the lab runs its own on other ports.
for service in nginx redis-server; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$service" 2>/dev/null; then
    "${sudo[@]}" systemctl disable --now "$service" >/dev/null 2>&1 || true
  fi
done
