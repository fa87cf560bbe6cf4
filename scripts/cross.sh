#!/usr/bin/env bash
# Vets and builds baton for the platforms it is released for (ADR 0036),
# one platform at a time: both programs (the full program and the client,
# -tags baton_client) built as `make release` builds them (CGO_ENABLED=0,
# -trimpath, so that a release after it finds them compiled), and go vet
# of the module and of the client program. The binaries are thrown away.
#
#	scripts/cross.sh                        # every released platform but this one
#	PLATFORMS="darwin/arm64 linux/amd64" scripts/cross.sh
#
# This machine's own platform is left out unless PLATFORMS names it: make
# lint vets it and make build builds both programs for it.
#
# go vet's verdict depends on the files a platform's build selects, and in
# this module those differ by operating system only (amd64 and arm64 take
# the same files): each set of files is vetted once, on the first platform
# that selects it, and not at all when it is this machine's own set and
# this machine's platform is not listed (make lint vets that). A set that
# differed by architecture would be vetted again. Windows vets the library
# and both programs; the end-to-end tests (e2e/) drive the built binary
# through flock gates, signals and process groups, which Windows lacks, so
# they are vetted on Unix only.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
host=$($go env GOHOSTOS)/$($go env GOHOSTARCH)
released="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"
platforms=${PLATFORMS:-$(tr ' ' '\n' <<<"$released" | grep -vx "$host" | tr '\n' ' ')}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Nothing from the caller's environment may change what is built (GOFLAGS
# could turn -trimpath off, and with it the sharing with make release).
unset GOFLAGS GOOS GOARCH
export CGO_ENABLED=0

# vetpkgs: the packages go vet checks for the current GOOS.
vetpkgs() {
	if [ "$GOOS" = windows ]; then
		$go list ./... | grep -v '/e2e\(/\|$\)'
	else
		echo ./...
	fi
}

# fileset PKGS...: a checksum of the files go vet reads in PKGS and in the
# client program for the current GOOS and GOARCH.
fileset() {
	local f='{{.ImportPath}} {{.GoFiles}} {{.TestGoFiles}} {{.XTestGoFiles}} {{.EmbedFiles}}'
	{ $go list -f "$f" "$@" && $go list -tags baton_client -f "$f" ./cmd/baton; } | cksum | cut -d' ' -f1
}

vetted=" "
if [[ " $platforms " != *" $host "* ]]; then
	# shellcheck disable=SC2046 # one word per package
	vetted+="$(export GOOS=${host%/*} GOARCH=${host#*/} && fileset $(vetpkgs)) "
fi
all=$SECONDS
for p in $platforms; do
	start=$SECONDS
	export GOOS=${p%/*} GOARCH=${p#*/}
	$go build -trimpath -o "$out/baton-full" ./cmd/baton
	$go build -trimpath -tags baton_client -o "$out/baton-client" ./cmd/baton
	pkgs=$(vetpkgs)
	# shellcheck disable=SC2086 # one word per package
	set=$(fileset $pkgs)
	what=built
	if [[ $vetted != *" $set "* ]]; then
		# shellcheck disable=SC2086
		$go vet -trimpath $pkgs
		$go vet -trimpath -tags baton_client ./cmd/baton
		vetted+="$set "
		what="vetted and built"
	fi
	echo "cross: $p: $what in $((SECONDS - start))s"
done
echo "cross: $(wc -w <<<"$platforms") platforms in $((SECONDS - all))s"
