#!/usr/bin/env bash
# Writes a release of the commit checked out (HEAD) into DIST (default
# dist/): for each platform an archive holding the baton file `make build`
# makes for it, README.md and LICENSE (where there is one), a CycloneDX
# SBOM of it, and SHA256SUMS of them all (ADR 0036).
#
#	scripts/release.sh [DIST]
#
# Reproducible: the same commit built with the same Go gives the same bytes,
# wherever it is checked out. The release is built from a clone of HEAD in
# a temporary folder (what is not committed is not in it); the programs
# with CGO_ENABLED=0 and -trimpath, stamped with the commit (-buildvcs);
# every archive entry carries the commit's time, owner 0 and a fixed mode,
# in name order; the SBOMs have no serial number and no timestamp.
#
# Windows gets the full program alone, as baton.exe: it has no exec for
# the client to start the full program with, and what the client saves
# (flock gates, process identity) does not work there anyway.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dist=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
go=${GO:-go}
cyclonedx=${CYCLONEDX_GOMOD:?CYCLONEDX_GOMOD names the cyclonedx-gomod to run (make release installs it)}
platforms=${PLATFORMS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"}

# Nothing from the caller's environment may change what is built.
unset GOFLAGS GOEXPERIMENT GOAMD64 GOARM64 GO386 GOARM GOOS GOARCH
export CGO_ENABLED=0 LC_ALL=C

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS

rev=$(git -C "$root" rev-parse HEAD)
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
	echo "release: the work tree has uncommitted changes; releasing HEAD ($rev) without them" >&2
fi
src=$work/src
git clone --quiet --no-checkout "$root" "$src"
git -C "$src" -c advice.detachedHead=false checkout --quiet --detach "$rev"
mtime=$(git -C "$src" log -1 --format=%ct "$rev")

# The host's own programs: the packer and the archiver run here, on
# whatever platform the release is for.
(cd "$src" && $go build -trimpath -o "$work/baton-pack" ./cmd/baton-pack && $go build -trimpath -o "$work/baton-archive" ./cmd/baton-archive)

rm -rf "$dist"/baton_* "$dist/SHA256SUMS"
docs=()
for f in README.md LICENSE LICENSE.md LICENSE.txt; do
	if [ -f "$src/$f" ]; then docs+=("$src/$f"); fi
done

# modules FILE: the modules a Go binary was built from, one a line.
modules() { $go version -m "$1" | awk '$1 == "dep" || $1 == "=>" { print $2 "@" $3 }' | sort; }

for p in $platforms; do
	t=$SECONDS
	os=${p%/*} arch=${p#*/}
	out=$work/$os-$arch
	mkdir -p "$out"
	(
		cd "$src"
		export GOOS=$os GOARCH=$arch
		$go build -trimpath -buildvcs=true -o "$out/baton-full" ./cmd/baton
		$go build -trimpath -buildvcs=true -tags baton_client -o "$out/baton-client" ./cmd/baton
	)
	# The version the binary reports (baton --version): the module version
	# Go stamps from the commit (a tag, or a pseudo-version).
	read -r mod version < <($go version -m "$out/baton-full" | awk '$1 == "mod" { print $2, $3; exit }')
	case $version in v*) ;; *) echo "release: no version stamped in the build ($version)" >&2; exit 1 ;; esac
	# The SBOM is the full program's: the client links a subset of it.
	extra=$(comm -23 <(modules "$out/baton-client") <(modules "$out/baton-full"))
	if [ -n "$extra" ]; then
		echo "release: $p: the client links modules the full program does not, so its SBOM would miss them:" >&2
		echo "$extra" >&2
		exit 1
	fi
	name=baton_${version}_${os}_${arch}
	if [ "$os" = windows ]; then
		"$work/baton-archive" -o "$dist/$name.zip" -dir "$name" -mtime "$mtime" "$out/baton-full=baton.exe" "${docs[@]}"
	else
		"$work/baton-pack" -o "$out/baton" "$out/baton-client" "$out/baton-full"
		"$work/baton-archive" -o "$dist/$name.tar.gz" -dir "$name" -mtime "$mtime" "$out/baton" "${docs[@]}"
	fi
	sbom=$dist/$name.cdx.json
	(
		cd "$src"
		GOOS=$os GOARCH=$arch "$cyclonedx" app -json -licenses -std -noserial -notimestamp \
			-main cmd/baton -output "$sbom" . 2>"$out/sbom.log" ||
			{ cat "$out/sbom.log" >&2; exit 1; }
	)
	# cyclonedx-gomod works the version out from git itself: from the
	# author's time, and below a tag from the tag's commit, where Go stamps
	# HEAD and its committer's time. The SBOM gets the version Go stamped,
	# which the binary reports.
	sbomver=$(grep -o "\"purl\": \"pkg:golang/$mod@[^\"?]*" "$sbom" | head -1 | sed 's|.*@||')
	if [ -n "$sbomver" ] && [ "$sbomver" != "$version" ]; then
		dot='\.' # a literal dot in sed's pattern
		sed "s|${sbomver//./$dot}|$version|g" "$sbom" >"$sbom.tmp"
		mv "$sbom.tmp" "$sbom"
	fi
	# The SBOM must name the version built and exactly the modules the
	# binary says it was built from.
	purls=$(grep -o '"purl": "pkg:golang/[^"?]*' "$sbom" | sed 's|.*pkg:golang/||')
	if ! grep -qx "$mod@$version" <<<"$purls"; then
		echo "release: $p: the SBOM does not name $mod@$version" >&2
		exit 1
	fi
	if ! diff <($go version -m "$out/baton-full" | awk '$1 == "dep" { print $2 "@" $3 }' | sort) \
		<(grep -v -e '^std@' -e "^$mod@" <<<"$purls" | sort) >&2; then
		echo "release: $p: the SBOM's modules (>) differ from the full program's (<)" >&2
		exit 1
	fi
	echo "release: $p: $name in $((SECONDS - t))s"
done

if command -v sha256sum >/dev/null; then sum=(sha256sum); else sum=(shasum -a 256); fi # macOS
(cd "$dist" && "${sum[@]}" -- baton_* >SHA256SUMS)
echo "release: $dist in $((SECONDS - start))s"
cat "$dist/SHA256SUMS"
