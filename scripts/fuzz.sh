#!/usr/bin/env bash
# fuzz.sh DURATION: run every fuzz target of the module for DURATION each
# (go test fuzzes one target per invocation), and stop at the first failure,
# naming the target and the file its failing input was saved to
# (PKG/testdata/fuzz/FuzzX/...: commit it as a regression seed once fixed).
# The corpus of interesting inputs stays in $(go env GOCACHE)/fuzz.
#
# FUZZ_MINIMIZE (default 2s) bounds the minimising of each new input, which
# would otherwise take a short run's whole budget.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime runs out under load, having found nothing
# (go.dev/issue/75804, fixed in Go 1.27); such a run is tried again, twice
# at most.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 DURATION (e.g. 3s, 30s)" >&2
  exit 2
fi
duration=$1
minimize=${FUZZ_MINIMIZE:-2s}
GO=${GO:-go}
cd "$(dirname "$0")/.." || exit 1

# The targets, as "package-dir FuzzName", found in the test files of the
# module's packages (go test -list would run each package's TestMain).
targets=$(
  $GO list -f '{{.Dir}}' ./... | while read -r dir; do
    for f in "$dir"/*_test.go; do
      [ -e "$f" ] || continue
      sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F).*/\1/p' "$f" | while read -r name; do
        echo "${dir#"$PWD"/} $name"
      done
    done
  done
) || exit 1
if [ -z "$targets" ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
n=0
start=$SECONDS
# coordinator_race: the run failed with go.dev/issue/75804's signature: a
# bare "context deadline exceeded", no failing input, no failing seed.
coordinator_race() {
  grep -qx '    context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log" &&
    ! grep -q -- '--- FAIL: .*/' "$log"
}

while read -r pkg name; do
  n=$((n + 1))
  t0=$SECONDS
  for try in 1 2 3; do
    $GO test -run '^$' -fuzz "^$name\$" -fuzztime "$duration" -fuzzminimizetime "$minimize" "./$pkg" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] || [ $try -eq 3 ] || ! coordinator_race; then
      break
    fi
    echo "fuzz: $name: Go's coordinator failed at the deadline having found nothing (go.dev/issue/75804); again"
  done
  if [ $rc -ne 0 ]; then
    cat "$log"
    saved=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$log" | head -n 1)
    echo
    echo "fuzz: FAIL: $name in ./$pkg" >&2
    if [ -n "$saved" ]; then
      echo "fuzz: the failing input is $pkg/$saved; rerun it with: $GO test -run=$name/$(basename "$saved") ./$pkg" >&2
    fi
    exit 1
  fi
  echo "fuzz: ok   $name in ./$pkg ($((SECONDS - t0))s)"
done <<<"$targets"
echo "fuzz: $n targets, $duration each, passed in $((SECONDS - start))s"
