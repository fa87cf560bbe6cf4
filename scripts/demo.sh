#!/usr/bin/env bash
# A short story of baton, unattended, on a server of its own: agents take
# slots, three instances of one bot elect a leader, the leader is killed and
# another takes over, leadership is handed over, and status and doctor show
# it all; a work queue drains fairly and a killed worker's tasks run again.
# It cleans up after itself.
set -uo pipefail

BATON=${BATON:-$(cd "$(dirname "$0")/.." && pwd)/bin/baton}
PATH=$(dirname "$BATON"):$PATH
dir=$(mktemp -d)
export BATON_STATE_DIR=$dir/state BATON_HOST_ID=host-a
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

bold=$'\033[1m' dim=$'\033[2m' off=$'\033[0m'
[ -t 1 ] || { bold='' dim='' off=''; }
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$off"; }
run() { printf '%s$ %s%s\n' "$dim" "$*" "$off"; "$@"; echo "${dim}(exit $?)${off}"; }
leader_of() { baton leader "$1" --json | sed -n 's/^    "holder": "\(.*\)",$/\1/p'; }
leader_pid() { baton leader "$1" --json | sed -n 's/^    "pid": \([0-9]*\),$/\1/p'; }
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds
  local until=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $until ] && { echo "demo: timed out waiting for: $*" >&2; exit 1; }
    sleep 0.1
  done
}

say "Start a server: baton up (JetStream, on a free loopback port)"
baton up --listen 127.0.0.1:-1 >"$dir/up.log" 2>&1 &
pids+=($!)
wait_for 20 grep -q serving "$dir/up.log"
cat "$dir/up.log"

say "Two agents take slots; a third is refused, and told who holds it"
run baton join rendering --task T-1 --agent alice
run baton join lint --task T-2 --agent bob
run baton join rendering --task T-3 --agent carol
run env BATON_HOST_ID=host-b baton join rendering --task T-3 --force

say "Three instances of one chat bot: exactly one leads (the others follow)"
bot() { # bot INSTANCE HOST
  BATON_INSTANCE=$1 BATON_HOST_ID=$2 baton lead chat-bot --ttl 2s -- \
    sh -c 'echo "[$BATON_INSTANCE] leading with fence $BATON_FENCE"; while sleep 0.5; do :; done' \
    >"$dir/$1.log" 2>&1 &
  pids+=($!)
}
bot bot-1 host-a; sleep 0.3
bot bot-2 host-a
bot bot-3 host-b
wait_for 10 sh -c "[ \"\$(baton leader chat-bot --json | grep -c '\"instance\"')\" -eq 3 ]"
run baton leader chat-bot

say "The leader is killed with SIGKILL: a follower on its host takes over at once"
first=$(leader_of chat-bot)
kill -9 "$(leader_pid chat-bot)"
wait_for 10 sh -c "[ -n \"\$(baton leader chat-bot --json | grep '\"holder\"' | grep -v $first)\" ]"
run baton leader chat-bot
grep -h leading "$dir"/bot-*.log

say "Hand leadership to bot-3 on host-b: no moment without a leader, a larger fence"
run baton leader transfer chat-bot --to bot-3
grep -h leading "$dir"/bot-*.log

say "Everyone sees who holds what, by the server's clock"
run baton status

say "An agent dies without closing its slot: doctor notices"
sleep 300 & agent=$!
baton join review --task T-4 --pid "$agent" >/dev/null
kill "$agent"; wait "$agent" 2>/dev/null
run baton doctor

say "A work queue: one task per user at a time, at most two at once, fairly"
run baton queue create agents --max-active 2 --backoff 1s
for user in alice bob carol; do
  for n in 1 2; do
    baton queue add agents --key "$user" --id "$user-$n" --payload "task $n of $user" >/dev/null
  done
done
worker() { # worker N: a queue worker whose command says what it runs
  baton queue work agents --concurrency 2 -- \
    sh -c "echo \"  worker $1 runs \$BATON_TASK (\$(cat); fence \$BATON_FENCE, attempt \$BATON_ATTEMPT)\"; sleep 1" \
    2>"$dir/worker$1.log" &
  pids+=($!)
}
worker 1; w1=$!; sleep 0.3
worker 2
wait_for 10 sh -c "baton queue status agents --json | grep -q '\"used\": 2'"
run baton queue status agents

say "Worker 1 is killed with SIGKILL: worker 2, on its host, runs its tasks again (attempt 2)"
kill -9 "$w1"; wait "$w1" 2>/dev/null
wait_for 30 sh -c "baton queue status agents --json | grep -q '\"done\": 6'"
run baton queue status agents --tasks

say "Done: close the slots"
run baton close rendering --result success
run baton close lint --result fork
run baton close review --result fail
run baton status
