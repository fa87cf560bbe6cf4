#!/usr/bin/env bash
# Installs iproute2 (the `ip` command) for the fault suite's network
# namespaces, when missing and when running as root. Without root the suite
# runs on loopback and says what it skips; nothing to install then.
set -euo pipefail
command -v ip >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-iproute2: not root: the fault suite will run on loopback, without partitions" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends iproute2 >/dev/null
ip -V
