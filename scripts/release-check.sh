#!/usr/bin/env bash
# Checks that a release is reproducible: scripts/release.sh twice, each
# from its own clone in its own folder, the second with an empty Go build
# cache (so every package is compiled again, not read back from the
# first), then compares the two byte for byte (ADR 0036).
#
#	CYCLONEDX_GOMOD=... scripts/release-check.sh	# make release-check
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
"$root/scripts/release.sh" "$tmp/a" >/dev/null
echo "release-check: the first release in $((SECONDS - start))s"
t=$SECONDS
GOCACHE=$tmp/gocache "$root/scripts/release.sh" "$tmp/b" >/dev/null
echo "release-check: the second, with an empty build cache, in $((SECONDS - t))s"
if ! diff -r "$tmp/a" "$tmp/b"; then
	echo "release-check: FAIL: two releases of one commit differ" >&2
	exit 1
fi
cat "$tmp/a/SHA256SUMS"
echo "release-check: the two releases are byte-identical ($(ls "$tmp/a" | wc -l) files, $((SECONDS - start))s)"
