#!/usr/bin/env bash
# Copies the NATS team's natscontext package (github.com/nats-io/jsm.go's,
# the code the nats CLI reads its contexts with) into internal/natscontext,
# less its one method that needs the rest of jsm.go (JSMOptions). Importing
# the upstream package links all of jsm.go, whose package initialisation
# costs every baton process several milliseconds and megabytes (ADR 0028).
#
#	scripts/vendor-natscontext.sh [VERSION]
#
# Run it to move to a newer jsm.go; review the diff; keep the tests green.
set -euo pipefail
version=${1:-v0.5.1}
go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/internal/natscontext
src=$($go mod download -json "github.com/nats-io/jsm.go@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -d "$src/natscontext" ]; then
	echo "vendor-natscontext: cannot download github.com/nats-io/jsm.go@$version" >&2
	exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"
for f in "$src"/natscontext/*.go; do
	case $f in *_test.go) continue ;; esac
	cp "$f" "$dest/"
done
cp "$src/LICENSE" "$dest/LICENSE"
chmod -R u+w "$dest"
# Drop JSMOptions (its doc comment, signature and body) and the jsm import.
awk '
	/^\/\/ JSMOptions / { skip = 1 }
	skip && /^}$/ { skip = 0; drop_blank = 1; next }
	skip { next }
	drop_blank && /^$/ { drop_blank = 0; next }
	{ drop_blank = 0 }
	/^\t"github.com\/nats-io\/jsm.go"$/ { next }
	{ print }
' "$src/natscontext/context.go" >"$dest/context.go"
cat >"$dest/VENDORED.md" <<EOF
# natscontext, vendored

A copy of \`github.com/nats-io/jsm.go/natscontext\` at jsm.go $version
(Apache License 2.0, see LICENSE), made by \`scripts/vendor-natscontext.sh\`.
The one change: \`Context.JSMOptions\` is removed, so that importing the
package does not link the rest of jsm.go (see ADR 0028). Do not edit these
files by hand; run the script again.
EOF
gofmt -l "$dest" | { if read -r bad; then echo "vendor-natscontext: $bad is not gofmt-clean" >&2; exit 1; fi; }
if grep -rq 'nats-io/jsm.go"' "$dest"; then
	echo "vendor-natscontext: the copy still imports jsm.go" >&2
	exit 1
fi
echo "internal/natscontext: jsm.go $version's natscontext without JSMOptions"
