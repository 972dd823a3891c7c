#!/usr/bin/env bash
# Installs with apt what this machine lacks: redis-server and nginx always;
# the packages named as arguments too, but as extras: if one cannot be
# installed (Ubuntu ships Chromium only as a snap, say), it says so and the
# tests that need it skip, visibly (and fail under CI=true, as in .ci/run).
# It says what it installs (with rough sizes) before it does, and after it
# stops only the services and PostgreSQL clusters its own install started
# (Debian starts them; stocklock runs its own): whatever ran before is left
# alone. Used by up.sh, test.sh and CI.
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
# Each package with its rough download and disk size, dependencies
# included (approximate: it depends on what the machine already has).
sized() {
  local package size out=()
  for package in "$@"; do
    case "$package" in
      redis-server | redis-tools | redis-sentinel) size="~2 MB" ;;
      nginx-light) size="~2 MB" ;;
      etcd-server) size="~25 MB" ;;
      zookeeper) size="~250 MB, with a Java runtime" ;;
      postgresql) size="~60 MB" ;;
      prometheus) size="~100 MB" ;;
      chromium | chromium-driver) size="~300 MB" ;;
      docker-compose) size="~40 MB" ;;
      *) size="size unknown" ;;
    esac
    out+=("$package ($size)")
  done
  local IFS=,
  echo "${out[*]}"
}
if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${need[*]} ${extra[*]}; install them with your package manager and run this again" >&2
  [ ${#need[@]} -eq 0 ] && exit 0 || exit 1
fi
# What runs before the install is the machine owner's: recorded, so that
# only what the install itself starts is stopped after it.
services=(nginx redis-server redis-sentinel prometheus etcd zookeeper postgresql)
active_before=()
if command -v systemctl >/dev/null 2>&1; then
  for service in "${services[@]}"; do
    if systemctl is-active --quiet "$service" 2>/dev/null; then active_before+=("$service"); fi
  done
fi
clusters_before=()
if command -v pg_lsclusters >/dev/null 2>&1; then
  while read -r version cluster; do
    clusters_before+=("$version/$cluster")
  done < <(pg_lsclusters --no-header 2>/dev/null | awk '{print $1, $2}')
fi
if [ $((${#active_before[@]} + ${#clusters_before[@]})) -gt 0 ]; then
  echo "running before the install, left alone: ${active_before[*]} ${clusters_before[*]}" >&2
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: $(sized "${need[@]}")" >&2
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ ${#extra[@]} -gt 0 ]; then
  echo "installing: $(sized "${extra[@]}")" >&2
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${extra[@]}" >/dev/null ||
    echo "warning: could not install ${extra[*]}; the tests that need them will say SKIPPED (and fail under CI=true)" >&2
fi
# Debian starts the packaged services it installs; the lab and the tests
# run their own on other ports. Only what this install started is stopped:
# a service active before it, or a PostgreSQL cluster that existed before
# it, is the machine owner's and is left alone.
for service in "${services[@]}"; do
  [[ " ${active_before[*]} " == *" $service "* ]] && continue
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$service" 2>/dev/null; then
    echo "stopping $service: this install started it (stocklock runs its own)" >&2
    "${sudo[@]}" systemctl disable --now "$service" >/dev/null 2>&1 || true
  fi
done
# Without systemd, Debian's postinst starts a new PostgreSQL cluster itself.
if command -v pg_lsclusters >/dev/null 2>&1; then
  pg_lsclusters --no-header 2>/dev/null | awk '$4 == "online" {print $1, $2}' |
    while read -r version cluster; do
      [[ " ${clusters_before[*]} " == *" $version/$cluster "* ]] && continue
      echo "stopping PostgreSQL cluster $version/$cluster: this install created it" >&2
      "${sudo[@]}" pg_ctlcluster "$version" "$cluster" stop >/dev/null 2>&1 || true
    done
fi
