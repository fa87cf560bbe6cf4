#!/usr/bin/env bash
# Runs `make test` RUNS times in a row (default 10) while one busy loop per
# core takes the CPU, as a loaded CI machine would; stops at the first
# failure. Each run's log is kept in $LOGDIR (default a temp dir).
set -u
runs=${RUNS:-10}
logdir=${LOGDIR:-$(mktemp -d -t baton-hog-XXXXXX)}
hogs=()
for _ in $(seq "$(nproc)"); do
	yes >/dev/null &
	hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
for i in $(seq "$runs"); do
	start=$(date +%s)
	if make test >"$logdir/run-$i.log" 2>&1; then
		echo "run $i of $runs: ok in $(($(date +%s) - start))s"
	else
		echo "run $i of $runs: FAILED in $(($(date +%s) - start))s; log: $logdir/run-$i.log"
		grep -- '--- FAIL' "$logdir/run-$i.log"
		exit 1
	fi
done
echo "make test passed $runs times in a row beside $(nproc) busy loops; logs in $logdir"
