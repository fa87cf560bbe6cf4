#!/usr/bin/env bash
# Installs the peer the benchmark compares against: etcd and etcdctl from
# Debian's packages (etcd-server, etcd-client), unless both are on PATH.
# The package would start a system etcd on :2379; a policy-rc.d that denies
# service starts for the length of the install keeps it from doing so (the
# benchmark starts its own etcd on free loopback ports).
set -euo pipefail
if command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1; then
  exit 0
fi
sudo=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-etcd: need root or sudo to apt-get install etcd-server etcd-client" >&2; exit 1; }
  sudo=sudo
fi
policy=/usr/sbin/policy-rc.d
restore=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  restore=1
fi
trap '[ -n "$restore" ] && $sudo rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends etcd-server etcd-client >/dev/null
# Stop a system etcd if one was started anyway (no systemd here, or an older policy).
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
  $sudo systemctl stop etcd || true
fi
etcd --version | head -1
