package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tasks added with --in and --at start at their time by the server's
// clock, within 50 ms after it and never before, in fair order with the
// others, although a worker (the queue's dispatcher) and the server leading
// the queues stream were killed while they waited; a task whose --at is
// past, like one with no time, runs at once.
func TestQueue_DelayedTasksStartAtTheirTime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	servers := startUpCluster(t)
	urls := servers[0].url + "," + servers[1].url + "," + servers[2].url
	w := &world{t: t, url: urls}
	a, b := w.host("host-a"), w.host("host-b")
	a.must("queue", "create", "dq", "--max-active", "4", "--ttl", "2s", "--backoff", "0s")
	log := filepath.Join(t.TempDir(), "starts")
	// Each command appends its task and the instant it began (this
	// machine's clock, which is the servers' too: they run here).
	record := []string{"--", "sh", "-c", `echo "$BATON_TASK $(date +%s%N)" >> ` + log}
	first := a.startWorker(t, append([]string{"dq", "--concurrency", "2"}, record...)...)
	waitFor(t, 10*time.Second, "host-a's worker dispatches", func() bool {
		r := a.baton("leader", "queue.dq", "--json")
		return r.code == 0 && strings.Contains(r.stdout, "host-a")
	})
	second := b.startWorker(t, append([]string{"dq", "--concurrency", "2"}, record...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host-b's worker said:\n%s", second.errs)
			t.Logf("queue status:\n%s", b.baton("queue", "status", "dq", "--tasks"))
			t.Logf("leader:\n%s", b.baton("leader", "queue.dq"))
		}
	})

	// The times: 14-16 s from now, past the kills and the failovers (a
	// stream's new leader is elected 4-9 s after its server dies, by
	// nats-server's election timeouts).
	now := time.Now()
	due := map[string]time.Time{}
	for i := range 4 {
		id := fmt.Sprintf("in%d", i)
		in := 14*time.Second + time.Duration(i)*250*time.Millisecond
		a.must("queue", "add", "dq", "--key", fmt.Sprintf("k%d", i), "--id", id, "--in", in.String())
		due[id] = notBefore(t, a, "dq", id)
		at := now.Add(14500*time.Millisecond + time.Duration(i)*250*time.Millisecond).UTC()
		id = fmt.Sprintf("at%d", i)
		a.must("queue", "add", "dq", "--key", fmt.Sprintf("j%d", i), "--id", id, "--at", at.Format(time.RFC3339Nano))
		if got := notBefore(t, a, "dq", id); !got.Equal(at) {
			t.Fatalf("task %s: not_before %s, want the --at %s", id, got, at)
		}
		due[id] = at
	}
	a.must("queue", "add", "dq", "--key", "p", "--id", "past", "--at", now.Add(-time.Hour).UTC().Format(time.RFC3339))
	a.must("queue", "add", "dq", "--key", "n", "--id", "now")
	status := jsonOf(t, a.must("queue", "status", "dq", "--json").stdout)
	if got := status["pending"].(map[string]any)["delayed"]; got != float64(8) {
		t.Errorf("status says %v tasks wait for their time, want 8", got)
	}
	for _, id := range []string{"past", "now"} {
		a.waitTaskState(t, "dq", id, "done", 10*time.Second)
	}

	// Kill the dispatcher, then the server leading the queues stream.
	first.kill()
	leader := streamLeader(t, urls, "KV_baton-queues")
	for _, s := range servers {
		if s.name == leader {
			_ = s.cmd.Process.Kill()
		}
	}
	// host-b's worker dispatches once the servers left have elected the
	// streams' leaders and the dispatcher's term has expired.
	waitFor(t, 13*time.Second, "host-b's worker dispatches after the kills", func() bool {
		r := b.baton("leader", "queue.dq", "--json")
		return r.code == 0 && strings.Contains(r.stdout, "host-b")
	})
	if left := time.Until(now.Add(14 * time.Second)); left < 0 {
		t.Fatalf("the cluster recovered %s after the first task was due: the test's times leave too little room", -left)
	}
	// Reads wait for the two servers left to elect the stream's leader.
	for id := range due {
		waitFor(t, 30*time.Second, "task "+id+" done", func() bool {
			r := b.baton("queue", "get", "dq", id, "--json")
			if r.code == 6 {
				return false
			}
			if r.code != 0 {
				t.Fatalf("queue get %s: %s", id, r)
			}
			return jsonOf(t, r.stdout)["state"] == "done"
		})
	}
	began := map[string]time.Time{}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(l)
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if _, ok := began[f[0]]; ok {
			t.Errorf("task %s started twice", f[0])
		}
		began[f[0]] = time.Unix(0, ns)
	}
	for id, at := range due {
		late := began[id].Sub(at)
		switch {
		case late < 0:
			t.Errorf("task %s started %s before its time", id, -late)
		case late > 50*time.Millisecond:
			t.Errorf("task %s started %s after its time, want within 50ms", id, late)
		default:
			t.Logf("task %s started %s after its time", id, late.Round(100*time.Microsecond))
		}
	}
	for _, id := range []string{"past", "now"} {
		if d := began[id].Sub(now); d > 2*time.Second {
			t.Errorf("task %s started %s after it was added, want at once", id, d)
		}
	}
}

// notBefore is a pending task's not_before, from queue get --json.
func notBefore(t *testing.T, h *host, q, id string) time.Time {
	t.Helper()
	doc := h.taskJSON(t, q, id)
	s, ok := doc["not_before"].(string)
	if !ok {
		t.Fatalf("task %s has no not_before: %v", id, doc)
	}
	nb, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return nb
}

// queue pause stops new starts across workers while status shows it;
// resume starts them again; a key's pause holds only that key.
func TestQueue_PauseAndResume(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	a.must("queue", "create", "pq", "--backoff", "0s")
	for _, h := range []*host{a, b} {
		h.startWorker(t, "pq", "--", "true")
	}
	a.must("queue", "pause", "pq")
	b.must("queue", "pause", "pq", "--key", "bob")
	for i, key := range []string{"alice", "bob", "carol"} {
		a.must("queue", "add", "pq", "--key", key, "--id", fmt.Sprintf("t%d", i))
	}
	status := a.must("queue", "status", "pq").stdout
	if !strings.Contains(status, "PAUSED") || !strings.Contains(status, "paused    keys bob") {
		t.Errorf("status of a paused queue with bob paused:\n%s", status)
	}
	time.Sleep(time.Second) // a dispatch is milliseconds: nothing may start meanwhile
	if c := a.counts(t, "pq"); c["pending"] != 3 {
		t.Fatalf("counts %v while paused, want 3 pending", c)
	}
	a.must("queue", "resume", "pq")
	a.waitTaskState(t, "pq", "t0", "done", 10*time.Second)
	a.waitTaskState(t, "pq", "t2", "done", 10*time.Second)
	if task := a.taskJSON(t, "pq", "t1"); task["state"] != "pending" {
		t.Fatalf("bob's task is %v while bob is paused, want pending", task["state"])
	}
	keys := jsonOf(t, a.must("queue", "key", "ls", "pq", "--json").stdout)
	if got := mustJSON(t, keys["keys"]); !strings.Contains(got, `"key":"bob","paused":true`) {
		t.Errorf("key ls: %s", got)
	}
	a.must("queue", "resume", "pq", "--key", "bob")
	a.waitTaskState(t, "pq", "t1", "done", 10*time.Second)
	if got := a.must("queue", "key", "ls", "pq").stdout; !strings.Contains(got, "no key of queue pq") {
		t.Errorf("key ls after the resume: %s", got)
	}
	a.expect(5, []string{"queue", "pause", "nosuch"}, "nosuch")
	// A key resumed while its queue is paused is told that its tasks wait
	// for the queue.
	a.must("queue", "pause", "pq")
	a.must("queue", "pause", "pq", "--key", "dave")
	if out := a.must("queue", "resume", "pq", "--key", "dave").stdout; !strings.Contains(out, "the queue itself is paused") {
		t.Errorf("resume --key on a paused queue says %q", out)
	}
	a.expect(2, []string{"queue", "add", "pq", "--key", "k", "--max-attempts", "0"}, "--max-attempts 0: use 1 or more")
}

// add --wait returns the result and exit code of a task run by a worker
// on another host id; get --result prints it again; --timeout bounds the
// wait.
func TestQueue_AddWaitReturnsTheResult(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	a.must("queue", "create", "rq", "--max-attempts", "1")
	// Nothing runs yet: the wait runs out, the task goes on.
	r := a.baton("queue", "add", "rq", "--key", "k", "--id", "early", "--payload", "x", "--wait", "--timeout", "300ms")
	if r.code != 3 || !strings.Contains(r.stderr, "did not end within 300ms") {
		t.Fatalf("add --wait with no worker: %s", r)
	}
	b.startWorker(t, "rq", "--", "sh", "-c", `read p; echo "summary of $p"; [ "$p" != fail ] || exit 7`)
	r = a.baton("queue", "add", "rq", "--key", "k", "--id", "ok", "--payload", "pr-42", "--wait", "--timeout", "20s")
	if r.code != 0 || r.stdout != "summary of pr-42\n" {
		t.Fatalf("add --wait of a task that succeeds: %s", r)
	}
	r = a.baton("queue", "add", "rq", "--key", "k", "--id", "bad", "--payload", "fail", "--wait")
	if r.code != 7 || r.stdout != "summary of fail\n" {
		t.Fatalf("add --wait of a task that exits 7: %s; want its output and exit 7", r)
	}
	if got := a.must("queue", "get", "rq", "ok", "--result").stdout; got != "summary of pr-42\n" {
		t.Errorf("get --result: %q", got)
	}
	doc := jsonOf(t, a.must("queue", "get", "rq", "ok", "--json").stdout)
	if res, _ := doc["result"].(map[string]any); res == nil || res["output"] != "c3VtbWFyeSBvZiBwci00Mgo=" {
		t.Errorf("get --json's result: %v; want the output, base64 as the payload is", doc["result"])
	}
	a.waitTaskState(t, "rq", "early", "done", 10*time.Second)
	a.expect(2, []string{"queue", "add", "rq", "--key", "k", "--timeout", "1s"}, "--timeout bounds --wait")
}

// retry and cancel take many tasks by state (and key); a task's own
// timeout and attempts replace the queue's.
func TestQueue_BulkRetryAndCancel(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a")
	a.must("queue", "create", "bq", "--max-attempts", "3", "--backoff", "0s")
	for i, key := range []string{"a", "a", "a", "b", "b"} {
		a.must("queue", "add", "bq", "--key", key, "--id", fmt.Sprintf("%s%d", key, i), "--max-attempts", "1")
	}
	worker := a.startWorker(t, "bq", "--", "false")
	for _, id := range []string{"a0", "a1", "a2", "b3", "b4"} {
		a.waitTaskState(t, "bq", id, "dead", 10*time.Second)
	}
	worker.kill()
	r := a.must("queue", "retry", "bq", "--state", "dead", "--key", "a")
	if got := strings.Count(r.stdout, " is pending\n"); got != 3 {
		t.Fatalf("retry --state dead --key a: %q; want three tasks pending", r.stdout)
	}
	if task := a.taskJSON(t, "bq", "b3"); task["state"] != "dead" || task["attempts"] != float64(1) {
		t.Errorf("b3 is %v after %v attempts and a retry of key a's, want dead after its own one attempt", task["state"], task["attempts"])
	}
	doc := jsonOf(t, a.must("queue", "cancel", "bq", "--state", "pending", "--json").stdout)
	if tasks, _ := doc["tasks"].([]any); len(tasks) != 3 {
		t.Fatalf("cancel --state pending: %v; want the three", doc)
	}
	if c := a.counts(t, "bq"); c["cancelled"] != 3 || c["dead"] != 2 {
		t.Errorf("counts %v, want 3 cancelled and 2 dead", c)
	}
	a.expect(2, []string{"queue", "retry", "bq", "--state", "done"}, "retry takes")
	a.expect(2, []string{"queue", "retry", "bq", "a0", "--state", "dead"}, "give a task's ID, or --state")
	if r := a.baton("queue", "retry", "bq", "--state", "dead", "--key", "zz"); r.code != 0 || !strings.Contains(r.stderr, "no task of queue bq matches") {
		t.Errorf("a retry that matches nothing: %s", r)
	}
}

// add --unique keeps one pending task per key: keep, replace, debounce.
func TestQueue_AddUnique(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a")
	a.must("queue", "create", "uq")
	if id := strings.TrimSpace(a.must("queue", "add", "uq", "--key", "k", "--unique", "keep", "--payload", "a").stdout); id != "k.u0" {
		t.Fatalf("first unique add printed %q, want k.u0", id)
	}
	r := a.must("queue", "add", "uq", "--key", "k", "--unique", "keep", "--payload", "b")
	if !strings.Contains(r.stderr, "kept as it is") || a.must("queue", "get", "uq", "k.u0", "--payload").stdout != "a" {
		t.Errorf("keep: %s", r)
	}
	r = a.must("queue", "add", "uq", "--key", "k", "--unique", "debounce=1h", "--payload", "c")
	if !strings.Contains(r.stderr, "has the new payload") || a.must("queue", "get", "uq", "k.u0", "--payload").stdout != "c" {
		t.Errorf("debounce: %s", r)
	}
	if nb := notBefore(t, a, "uq", "k.u0"); time.Until(nb) < 59*time.Minute {
		t.Errorf("after debounce=1h the task runs at %s, want an hour from now", nb)
	}
	a.expect(2, []string{"queue", "add", "uq", "--key", "k", "--unique", "debounce"}, "debounce=DUR")
	if c := a.counts(t, "uq"); c["pending"] != 1 {
		t.Errorf("counts %v, want one pending task", c)
	}
}

// --after: a diamond added from the CLI (A; B and C after A; D after B
// and C) runs in that order on two workers.
func TestQueue_AfterRunsADiamondInOrder(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	a.must("queue", "create", "dq2", "--max-active", "4")
	log := filepath.Join(t.TempDir(), "order")
	for _, h := range []*host{a, b} {
		h.startWorker(t, "dq2", "--concurrency", "2", "--", "sh", "-c", `sleep 0.2; echo "$BATON_TASK" >> `+log)
	}
	a.must("queue", "add", "dq2", "--key", "a", "--id", "A")
	a.must("queue", "add", "dq2", "--key", "b", "--id", "B", "--after", "A")
	a.must("queue", "add", "dq2", "--key", "c", "--id", "C", "--after", "A")
	a.must("queue", "add", "dq2", "--key", "d", "--id", "D", "--after", "B,C")
	a.expect(2, []string{"queue", "add", "dq2", "--key", "e", "--after", "nosuch"}, "no such task")
	if state := a.must("queue", "get", "dq2", "D").stdout; !strings.Contains(state, "after B, C") {
		t.Errorf("get D: %s", state)
	}
	a.waitTaskState(t, "dq2", "D", "done", 20*time.Second)
	order := strings.Fields(string(must(os.ReadFile(log))))
	pos := map[string]int{}
	for i, id := range order {
		pos[id] = i
	}
	if len(order) != 4 || pos["A"] != 0 || pos["D"] != 3 {
		t.Errorf("ran %v; want A first, then B and C, then D", order)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A command that leaves a process holding its stdout (outside its group)
// still ends its task within a second or so, with its output as the
// result; a batch refuses add's own per-task flags.
func TestQueue_ResultOfACommandThatLeavesAProcessBehind(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a")
	a.must("queue", "create", "lq")
	a.startWorker(t, "lq", "--", "sh", "-c", `setsid sleep 3 & echo hi`)
	began := time.Now()
	r := a.baton("queue", "add", "lq", "--key", "k", "--wait", "--timeout", "15s")
	if r.code != 0 || r.stdout != "hi\n" {
		t.Fatalf("add --wait: %s", r)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the task took %s to end: the process left behind held it", took)
	}
	a.expect(2, []string{"queue", "add", "lq", "--batch", "-", "--in", "1h"}, "--batch takes each task's fields from its lines")
}
