#!/usr/bin/env bash
# Installs with apt what this machine lacks: redis-server and nginx always;
# the packages named as arguments too, but as extras: if one cannot be
# installed (Ubuntu ships Chromium only as a snap, say), it says so and the
# tests that need it skip, visibly (and fail under CI=true, as in .ci/run).
# Used by up.sh, test.sh and CI.
set -euo pipefail

has() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

need=()
has redis-server || need+=(redis-server)
has redis-cli || need+=(redis-tools)
has nginx || need+=(nginx-light)
extra=()
for package in "$@"; do
  case "$package" in
    docker-compose) has docker-compose || extra+=(docker-compose) ;;
    chromium) has chromium || extra+=(chromium) ;;
    chromium-driver) has chromedriver || extra+=(chromium-driver) ;;
    prometheus) has prometheus && has promtool || extra+=(prometheus) ;;
    etcd-server) has etcd || extra+=(etcd-server) ;;
    # The Sentinels of `stocklock up --replica` (and of the failover tests).
    redis-sentinel) has redis-sentinel || extra+=(redis-sentinel) ;;
    # The server's jar and a Java to run it (the package pulls in a JRE).
    zookeeper) has java && [ -f /usr/share/java/zookeeper.jar ] || extra+=(zookeeper) ;;
    # The orders' database: initdb and postgres under /usr/lib/postgresql/N/bin
    # (Debian's packages put them there, not on PATH).
    postgresql) ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || has postgres || extra+=(postgresql) ;;
    *) dpkg -s "$package" >/dev/null 2>&1 || extra+=("$package") ;;
  esac
done
[ ${#need[@]} -eq 0 ] && [ ${#extra[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${need[*]} ${extra[*]}; install them with your package manager and run this again" >&2
  [ ${#need[@]} -eq 0 ] && exit 0 || exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ ${#extra[@]} -gt 0 ]; then
  echo "installing: ${extra[*]}" >&2
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${extra[@]}" >/dev/null ||
    echo "warning: could not install ${extra[*]}; the tests that need them will say SKIPPED (and fail under CI=true)" >&2
fi
# Debian starts the packaged services; the lab and the tests run their own
# on other ports.
for service in nginx redis-server redis-sentinel prometheus etcd zookeeper postgresql; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$service" 2>/dev/null; then
    "${sudo[@]}" systemctl disable --now "$service" >/dev/null 2>&1 || true
  fi
done
# Without systemd, Debian's postinst starts PostgreSQL's main cluster itself.
if [[ " ${extra[*]} " == *" postgresql "* ]] && command -v pg_ctlcluster >/dev/null 2>&1; then
  pg_lsclusters --no-header 2>/dev/null | awk '$4 == "online" {print $1, $2}' |
    while read -r version cluster; do
      "${sudo[@]}" pg_ctlcluster "$version" "$cluster" stop >/dev/null 2>&1 || true
    done
fi
