#!/usr/bin/env bash
# Installs everything actor-worker needs to build, test and run, from
# Debian 12 packages. Safe to re-run: does nothing when all are present.
set -euo pipefail

packages=(
  g++ cmake make pkg-config ccache
  libcaf-dev libpqxx-dev libspdlog-dev libtomlplusplus-dev nlohmann-json3-dev
  libcli11-dev libboost-test-dev libcurl4-openssl-dev libcpp-httplib-dev
  libhowardhinnant-date-dev tzdata
  prometheus-cpp-dev prometheus
  postgresql postgresql-client gawk
  pgbouncer
  libjs-chart.js chromium chromium-driver
  mkdocs doxygen python3
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo (missing: ${missing[*]})" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
