#!/usr/bin/env bash
# Installs the nats CLI the context tests save their contexts with
# (internal/natsctx): the NATS team's own writer of the format baton reads.
# It is built from its module with go install and kept in .tools/ under its
# version's name, so a test run finds it without a network.
#
#	scripts/install-natscli.sh	# prints the binary's path
set -euo pipefail
version=v0.5.0
go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.tools/nats-$version
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$root/.tools"
tmp=$(mktemp -d "$root/.tools/natscli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Built outside the module, so baton's go.mod and its -mod setting play no
# part; CGO off as baton itself is built.
(cd "$tmp" && GOBIN=$tmp GOFLAGS=-mod=mod CGO_ENABLED=0 $go install "github.com/nats-io/natscli/nats@$version") >&2
mv -f "$tmp/nats" "$bin"
echo "$bin"
