#!/usr/bin/env bash
# Installs the browser the dashboard's tests drive (through chromedp):
# Debian's chromium, unless a Chromium or Chrome is on PATH already.
set -euo pipefail
for b in chromium chromium-browser google-chrome google-chrome-stable headless-shell; do
  if command -v "$b" >/dev/null 2>&1; then exit 0; fi
done
sudo=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-chromium: need root or sudo to apt-get install chromium" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
chromium --version
