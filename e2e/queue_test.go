package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// qworker is a `baton queue work` process running in the background.
type qworker struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	errs *syncBuffer
	done chan struct{}
	code int
}

// startWorker starts `baton queue work ARGS...` on h.
func (h *host) startWorker(t *testing.T, args ...string) *qworker {
	t.Helper()
	cmd := h.command(append([]string{"queue", "work"}, args...)...)
	w := &qworker{cmd: cmd, out: &syncBuffer{}, errs: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.code = exitCode(cmd.Wait())
		close(w.done)
	}()
	t.Cleanup(func() { w.kill() })
	return w
}

func (w *qworker) pid() int { return w.cmd.Process.Pid }

func (w *qworker) kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
}

// wait waits for the worker to exit and returns its exit code.
func (w *qworker) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
		return w.code
	case <-time.After(within):
		t.Fatalf("baton queue work did not exit within %s; stderr:\n%s", within, w.errs)
		return -1
	}
}

// queues is a library handle on w's server, for what the CLI is not under
// test for (adding hundreds of tasks, waiting for counts).
func (w *world) queues(t *testing.T) *queue.Queues {
	t.Helper()
	sd, err := hostlocal.OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(w.client, session.WithHostID("test"), session.WithStateDir(sd))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := queue.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// counts is the queue's tasks by state, from `baton queue status --json`.
func (h *host) counts(t *testing.T, q string) map[string]int {
	t.Helper()
	doc := jsonOf(t, h.must("queue", "status", q, "--json").stdout)
	out := map[string]int{}
	for k, v := range doc["counts"].(map[string]any) {
		out[k] = int(v.(float64))
	}
	return out
}

// waitDone waits until n tasks of q are done, reading the counts with the
// library (cheaper than a process per poll).
func waitDone(t *testing.T, qs *queue.Queues, q string, n int, within time.Duration) map[queue.State]int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		snap, err := qs.Snapshot(context.Background(), q)
		switch {
		case errors.Is(err, kv.ErrUnavailable) && time.Now().Before(deadline):
			// A cluster electing a stream leader (one was killed) answers
			// nothing for some seconds: ask again.
			t.Logf("snapshot of %s: %v; asking again", q, err)
		case err != nil:
			t.Fatal(err)
		case snap.Counts[queue.StateDone] >= n:
			return snap.Counts
		case time.Now().After(deadline):
			t.Fatalf("%d of %d tasks done within %s: %v", snap.Counts[queue.StateDone], n, within, snap.Counts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// taskJSON is `baton queue get Q ID --json`.
func (h *host) taskJSON(t *testing.T, q, id string) map[string]any {
	t.Helper()
	return jsonOf(t, h.must("queue", "get", q, id, "--json").stdout)
}

// waitTaskState waits until task id of q is in state.
func (h *host) waitTaskState(t *testing.T, q, id, state string, within time.Duration) map[string]any {
	t.Helper()
	var last map[string]any
	waitFor(t, within, fmt.Sprintf("task %s %s", id, state), func() bool {
		last = h.taskJSON(t, q, id)
		return last["state"] == state
	})
	return last
}

// lines waits until file has at least n lines and returns them.
func lines(t *testing.T, file string, n int, within time.Duration) []string {
	t.Helper()
	var got []string
	waitFor(t, within, fmt.Sprintf("%d lines in %s", n, filepath.Base(file)), func() bool {
		b, _ := os.ReadFile(file)
		got = strings.Fields(string(b))
		return len(got) >= n
	})
	return got
}

// Exclusion under churn: 4 workers on two hosts run 400 tasks of 20 keys
// whose command writes to a fence-checking ledger, while workers are
// SIGKILLed and restarted at random. No two attempts of one key overlap,
// no more than max_active run at once, no write is refused for a stale
// fence, every task ends done, and a task runs again only after its worker
// was killed, with a larger fence.
func TestQueue_ExclusionUnderChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("kills workers for a while")
	}
	w := newWorld(t)
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	env := []string{"QLEDGER=" + ledger}
	hosts := []*host{w.host("host-a"), w.host("host-b")}
	for _, h := range hosts {
		h.env = env
	}
	const maxActive, keys, perKey = 6, 20, 20
	hosts[0].must("queue", "create", "churn", "--max-active", strconv.Itoa(maxActive), "--ttl", "2s",
		"--max-attempts", "100", "--backoff", "0s")
	qs := w.queues(t)
	ctx := context.Background()
	for i := range keys * perKey {
		if _, _, err := qs.Add(ctx, "churn", fmt.Sprintf("k%02d", i%keys), []byte(fmt.Sprintf("%dms", 10+rand.IntN(30))),
			queue.WithID(fmt.Sprintf("t%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	cmd := qtaskBin
	var mu sync.Mutex
	killed := map[int]int64{} // worker pid -> when it was killed
	workers := make([]*qworker, 4)
	var all []*qworker // every worker started, killed ones too
	start := func(i int) {
		workers[i] = hosts[i%2].startWorker(t, "churn", "--concurrency", "3", "--grace", "1s", "--", cmd)
		mu.Lock()
		all = append(all, workers[i])
		mu.Unlock()
	}
	for i := range workers {
		start(i)
	}
	stop := make(chan struct{})
	chaos := make(chan int)
	go func() {
		kills := 0
		defer func() { chaos <- kills }()
		for kills < 12 {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(300+rand.IntN(700)) * time.Millisecond):
			}
			i := rand.IntN(len(workers))
			mu.Lock()
			killed[workers[i].pid()] = time.Now().UnixNano()
			mu.Unlock()
			workers[i].kill()
			start(i)
			kills++
		}
	}()
	counts := waitDone(t, qs, "churn", keys*perKey, 120*time.Second)
	close(stop)
	kills := <-chaos
	for _, wk := range workers {
		// A worker started by the last kill may not handle signals yet:
		// SIGTERM would end it before it could drain. Once its presence
		// is written, it does.
		waitFor(t, 10*time.Second, "the worker is present", func() bool { return workerPresent(t, qs, "churn", wk.pid()) })
		_ = wk.cmd.Process.Signal(syscall.SIGTERM)
		if code := wk.wait(t, 10*time.Second); code != 0 {
			t.Errorf("a worker drained with exit %d; stderr:\n%s", code, wk.errs)
		}
	}
	if counts[queue.StateDone] != keys*perKey || counts[queue.StateDead] != 0 {
		t.Fatalf("counts %v: want every task done", counts)
	}
	attempts, rejected, err := readQLedger(ledger)
	if err != nil {
		t.Fatal(err)
	}
	if len(rejected) > 0 {
		t.Errorf("%d writes refused for a stale fence (a holder worked on after its successor began), first: %s", len(rejected), rejected[0])
	}
	// A worker stops a task itself when it cannot keep its key lock (on a
	// starved host, renewals can miss the local deadline): it says so, and
	// the task runs again, under a larger fence, once the lock is free.
	stoppedBy := map[int]string{} // worker pid -> its stderr
	for _, wk := range all {
		stoppedBy[wk.pid()] = wk.errs.String()
	}
	stoppedItself := func(a *attempt) bool {
		return strings.Contains(stoppedBy[a.worker], "stopping task "+a.task+":")
	}
	// An attempt without its end line was killed with its worker, or
	// stopped by it: it ended when the worker was killed, or at the
	// latest when the next attempt of its key began (checked below by
	// fence and by the ledger's refusals).
	stops := 0
	for i, a := range attempts {
		if a.ended {
			continue
		}
		if at, ok := killed[a.worker]; ok {
			a.end = at
			continue
		}
		if !stoppedItself(a) {
			t.Errorf("attempt of task %s (fence %d) has no end, its worker %d was not killed and did not say it stopped it", a.task, a.fence, a.worker)
			continue
		}
		stops++
		a.end = a.start
		for _, next := range attempts[i+1:] {
			if next.key == a.key {
				a.end = next.start
				break
			}
		}
	}
	byKey := map[string][]*attempt{}
	byTask := map[string][]*attempt{}
	for _, a := range attempts {
		byKey[a.key] = append(byKey[a.key], a)
		byTask[a.task] = append(byTask[a.task], a)
	}
	for k, as := range byKey {
		for i := 1; i < len(as); i++ {
			prev, cur := as[i-1], as[i]
			if cur.start < prev.end {
				t.Errorf("key %s: task %s (fence %d) started %s before task %s (fence %d) ended", k, cur.task, cur.fence,
					time.Duration(prev.end-cur.start), prev.task, prev.fence)
			}
			if cur.fence <= prev.fence {
				t.Errorf("key %s: fence %d after fence %d", k, cur.fence, prev.fence)
			}
		}
	}
	// A task runs again only after its worker was killed (before the
	// attempt ended, or after, before it was recorded: at least once).
	reruns := 0
	for id, as := range byTask {
		if len(as) == 0 || !as[len(as)-1].ended {
			t.Errorf("task %s: its last attempt did not run to its end", id)
		}
		for _, a := range as[:len(as)-1] {
			reruns++
			if _, ok := killed[a.worker]; !ok && !stoppedItself(a) {
				t.Errorf("task %s ran again after an attempt (fence %d) whose worker %d was not killed and did not say it stopped it", id, a.fence, a.worker)
			}
		}
	}
	// At most max_active at once.
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, a := range attempts {
		edges = append(edges, edge{a.start, 1}, edge{a.end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta // an end before a start at the same instant
	})
	running, peak := 0, 0
	for _, e := range edges {
		running += e.delta
		peak = max(peak, running)
	}
	if peak > maxActive {
		t.Errorf("%d tasks ran at once, max_active is %d", peak, maxActive)
	}
	t.Logf("%d tasks, %d attempts (%d reruns after %d kills, %d attempts stopped by their worker), at most %d at once", len(byTask), len(attempts), reruns, kills, stops, peak)
}

// The order tasks run in: five tasks each for keys A, B and C, added in
// that order, run A, B, C, A, B, C, ... with max_active 1 (Hatchet's
// GROUP_ROUND_ROBIN example); a high task added last runs before them.
func TestQueue_RoundRobinAcrossKeysAndPriorities(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	order := filepath.Join(t.TempDir(), "order")
	h.must("queue", "create", "rr", "--max-active", "1")
	for _, k := range []string{"A", "B", "C"} {
		for i := range 5 {
			h.must("queue", "add", "rr", "--key", k, "--id", fmt.Sprintf("%s%d", k, i))
		}
	}
	h.must("queue", "add", "rr", "--key", "Z", "--id", "urgent", "--priority", "high")
	wk := h.startWorker(t, "rr", "--", "sh", "-c", `echo "$BATON_KEY" >> `+order)
	got := strings.Join(lines(t, order, 16, 20*time.Second), "")
	if want := "Z" + strings.Repeat("ABC", 5); got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
	_ = wk.cmd.Process.Signal(syscall.SIGTERM)
	if code := wk.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("drain: exit %d; stderr:\n%s", code, wk.errs)
	}
}

// A SIGKILLed worker's task starts again on a worker of the same host at
// once (the TTL is 30s), with attempt 2 and a larger fence. "At once" is
// checked against the TTL, not as a latency (the benchmark measures that):
// within 5s, the time a loaded machine may take to start the second worker
// and its shell, where waiting out the lock would take 30s.
func TestQueue_SameHostCrashRerunsAtOnce(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	starts := filepath.Join(t.TempDir(), "starts")
	h.must("queue", "create", "q", "--ttl", "30s")
	h.must("queue", "add", "q", "--key", "k", "--id", "long")
	script := `echo "$(date +%s%N) $BATON_FENCE $BATON_ATTEMPT" >> ` + starts + `; exec sleep 60`
	a := h.startWorker(t, "q", "--", "sh", "-c", script)
	first := lines(t, starts, 3, 10*time.Second)
	h.startWorker(t, "q", "--", "sh", "-c", script)
	killedAt := time.Now()
	a.kill()
	second := lines(t, starts, 6, 10*time.Second)[3:]
	startNS, _ := strconv.ParseInt(second[0], 10, 64)
	took := time.Unix(0, startNS).Sub(killedAt)
	if took > 5*time.Second {
		t.Errorf("the task started again %s after its worker was SIGKILLed, want within 5s (at once, not after the 30s TTL)", took)
	}
	f1, _ := strconv.Atoi(first[1])
	f2, _ := strconv.Atoi(second[1])
	if second[2] != "2" || f2 <= f1 {
		t.Errorf("rerun: fence %d attempt %s; first run fence %d: want a larger fence, attempt 2", f2, second[2], f1)
	}
	t.Logf("rerun %s after the kill", took)
}

// The command's process group is in its key lock before the command
// begins: a worker killed just after starting it leaves a lock that names
// work still running, which no worker of its host frees while the command
// lives (it was freed, and the task ran twice at once, when the record
// came after the start).
func TestQueue_TheCommandIsInItsLockBeforeItBegins(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	dir := t.TempDir()
	h.must("queue", "create", "q")
	h.must("queue", "add", "q", "--key", "k", "--id", "t1")
	// First the command's process group, then what the lock says.
	script := `cut -d' ' -f5 /proc/$$/stat > ` + dir + `/seen.tmp; "$0" status --json >> ` + dir + `/seen.tmp; mv ` + dir + `/seen.tmp ` + dir + `/seen`
	h.startWorker(t, "q", "--", "sh", "-c", script, batonBin)
	var b []byte
	waitFor(t, 10*time.Second, "the command's report", func() bool {
		var err error
		b, err = os.ReadFile(filepath.Join(dir, "seen"))
		return err == nil
	})
	pgid, doc, _ := strings.Cut(string(b), "\n")
	var st struct {
		Sessions []struct {
			Slot string            `json:"slot"`
			Meta map[string]string `json:"meta"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(doc), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, doc)
	}
	found := false
	for _, s := range st.Sessions {
		if s.Meta["task"] != "t1" {
			continue
		}
		found = true
		if s.Meta["child_pid"] != strings.TrimSpace(pgid) || s.Meta["child_pid_start"] == "" {
			t.Errorf("lock %s as the command began: child_pid %q (start %q), want the command's process group %s",
				s.Slot, s.Meta["child_pid"], s.Meta["child_pid_start"], pgid)
		}
	}
	if !found {
		t.Fatalf("no key lock of task t1 while it ran:\n%s", doc)
	}
}

// A worker that is not the dispatcher (which runs on another host) dies:
// a worker of its host sees its process gone and frees its lock, and the
// task starts again at once, not after the TTL.
func TestQueue_SameHostCrashOfAWorkerThatDoesNotDispatch(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	starts := filepath.Join(t.TempDir(), "starts")
	b.must("queue", "create", "q", "--ttl", "30s")
	script := `echo "$(date +%s%N) $BATON_TASK $BATON_FENCE $BATON_ATTEMPT" >> ` + starts + `; exec sleep 60`
	// host-b's worker starts first: it dispatches, and runs one task.
	b.must("queue", "add", "q", "--key", "kb", "--id", "busy")
	b.startWorker(t, "q", "--concurrency", "1", "--", "sh", "-c", script)
	lines(t, starts, 4, 10*time.Second)
	// The next task can only go to host-a's first worker.
	a1 := a.startWorker(t, "q", "--concurrency", "1", "--", "sh", "-c", script)
	a.must("queue", "add", "q", "--key", "k", "--id", "long")
	first := lines(t, starts, 8, 10*time.Second)[4:]
	if first[1] != "long" {
		t.Fatalf("second start %v, want task long", first)
	}
	a.startWorker(t, "q", "--concurrency", "1", "--", "sh", "-c", script)
	time.Sleep(300 * time.Millisecond) // its pid file written, its presence in view
	killedAt := time.Now()
	a1.kill()
	second := lines(t, starts, 12, 15*time.Second)[8:]
	ns, _ := strconv.ParseInt(second[0], 10, 64)
	took := time.Unix(0, ns).Sub(killedAt)
	if second[1] != "long" || second[3] != "2" {
		t.Errorf("third start %v, want task long's attempt 2", second)
	}
	if took > 5*time.Second {
		t.Errorf("the task started again %s after its worker was SIGKILLed, want within 5s (at once, not after the 30s TTL)", took)
	}
	f1, _ := strconv.Atoi(first[2])
	f2, _ := strconv.Atoi(second[2])
	if f2 <= f1 {
		t.Errorf("rerun fence %d, first run's %d: want a larger fence", f2, f1)
	}
	t.Logf("rerun %s after the kill", took)
}

// On another host, the task starts again once the dead worker's lock
// expires: within the TTL and the server's expiry tick.
func TestQueue_OtherHostCrashRerunsWithinTheTTL(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	starts := filepath.Join(t.TempDir(), "starts")
	a.must("queue", "create", "q", "--ttl", "2s")
	a.must("queue", "add", "q", "--key", "k", "--id", "long")
	script := `echo "$(date +%s%N)" >> ` + starts + `; exec sleep 60`
	wa := a.startWorker(t, "q", "--", "sh", "-c", script)
	lines(t, starts, 1, 10*time.Second)
	b.startWorker(t, "q", "--", "sh", "-c", script)
	time.Sleep(300 * time.Millisecond)
	killedAt := time.Now()
	wa.kill()
	second := lines(t, starts, 2, 10*time.Second)
	ns, _ := strconv.ParseInt(second[1], 10, 64)
	took := time.Unix(0, ns).Sub(killedAt)
	if took > 2400*time.Millisecond {
		t.Errorf("the task started again on host-b %s after host-a's worker was killed, want within TTL 2s + 400ms", took)
	}
	t.Logf("rerun on the other host %s after the kill", took)
}

// A task past the queue's timeout is stopped (its command sees SIGTERM) and
// failed with reason timeout; out of attempts, it is dead.
func TestQueue_TimeoutStopsTheTask(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	got := filepath.Join(t.TempDir(), "got")
	// The timeout leaves the shell time to set its trap on a loaded
	// machine: a SIGTERM before it would end the shell unseen.
	h.must("queue", "create", "q", "--timeout", "2s", "--max-attempts", "1")
	h.must("queue", "add", "q", "--key", "k", "--id", "slow")
	h.startWorker(t, "q", "--", "sh", "-c", `trap 'echo TERM >> `+got+`; exit 143' TERM; sleep 30 & wait`)
	task := h.waitTaskState(t, "q", "slow", "dead", 10*time.Second)
	res := task["result"].(map[string]any)
	if res["reason"] != "timeout" || num(t, task, "attempts") != 1 {
		t.Fatalf("task %v: want dead after one attempt that timed out", task)
	}
	if l := lines(t, got, 1, 5*time.Second); l[0] != "TERM" {
		t.Fatalf("the command saw %v, want SIGTERM", l)
	}
}

// Cancel: a pending task never runs; an active one's command is stopped.
func TestQueue_Cancel(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	dir := t.TempDir()
	h.must("queue", "create", "q", "--max-active", "1")
	h.must("queue", "add", "q", "--key", "a", "--id", "running")
	h.must("queue", "add", "q", "--key", "b", "--id", "waiting")
	started := filepath.Join(dir, "started")
	h.startWorker(t, "q", "--grace", "5s", "--", "sh", "-c",
		`echo "$BATON_TASK" >> `+started+`; trap 'echo "$BATON_TASK TERM" >> `+started+`; exit 143' TERM; sleep 30 & wait`)
	lines(t, started, 1, 10*time.Second)
	if r := h.must("queue", "cancel", "q", "waiting"); !strings.Contains(r.stdout, "cancelled") {
		t.Errorf("cancel of a pending task: %s", r)
	}
	if r := h.must("queue", "cancel", "q", "running"); !strings.Contains(r.stdout, "task running is cancelled") {
		t.Errorf("cancel of an active task: %s", r)
	}
	if got := lines(t, started, 3, 5*time.Second); got[1]+got[2] != "runningTERM" {
		t.Errorf("the command of the cancelled task saw %v, want SIGTERM", got)
	}
	h.must("queue", "cancel", "q", "running") // again: nothing to do
	time.Sleep(300 * time.Millisecond)
	if b, _ := os.ReadFile(started); strings.Contains(string(b), "waiting") {
		t.Errorf("the cancelled pending task ran:\n%s", b)
	}
	if c := h.counts(t, "q"); c["cancelled"] != 2 {
		t.Errorf("counts %v, want two cancelled", c)
	}
}

// A task whose command keeps failing runs max_attempts times, waiting its
// backoff between, then is dead; retry runs it again with fresh attempts.
func TestQueue_DeadAfterMaxAttemptsThenRetry(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	runs := filepath.Join(t.TempDir(), "runs")
	h.must("queue", "create", "q", "--max-attempts", "2", "--backoff", "300ms")
	h.must("queue", "add", "q", "--key", "k", "--id", "flaky")
	// Fails until a retry has happened (the file has two lines).
	h.startWorker(t, "q", "--", "sh", "-c", `echo "$BATON_ATTEMPT" >> `+runs+`; [ "$(wc -l < `+runs+`)" -gt 2 ]`)
	dead := h.waitTaskState(t, "q", "flaky", "dead", 10*time.Second)
	res := dead["result"].(map[string]any)
	if num(t, dead, "attempts") != 2 || res["reason"] != "exit" || num(t, res, "exit_code") != 1 {
		t.Fatalf("dead task %v", dead)
	}
	r := h.expect(7, []string{"doctor"}, "")
	if !strings.Contains(r.stdout, "queue_dead_task") && !strings.Contains(r.stdout, "dead after 2 attempts") {
		t.Errorf("doctor does not report the dead task:\n%s", r)
	}
	h.must("queue", "retry", "q", "flaky")
	done := h.waitTaskState(t, "q", "flaky", "done", 10*time.Second)
	if got := lines(t, runs, 3, time.Second); strings.Join(got, "") != "121" || num(t, done, "attempts") != 1 {
		t.Fatalf("attempts seen %v, task %v: want 1, 2, then 1 after the retry", got, done)
	}
	h.expect(3, []string{"queue", "retry", "q", "flaky"}, "done", "add a new task")
}

// release frees a key whose holder is dead; a live holder is refused unless
// --force, which stops its task.
func TestQueue_Release(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	starts := filepath.Join(t.TempDir(), "starts")
	h.must("queue", "create", "q", "--ttl", "30s")
	h.must("queue", "add", "q", "--key", "k", "--id", "t1")
	script := `echo "$BATON_FENCE" >> ` + starts + `; exec sleep 60`
	wk := h.startWorker(t, "q", "--grace", "1s", "--", "sh", "-c", script)
	lines(t, starts, 1, 10*time.Second)
	h.expect(3, []string{"queue", "release", "q", "k"}, "alive", "--force")
	if task := h.taskJSON(t, "q", "t1"); task["state"] != "active" {
		t.Fatalf("a refused release changed the task: %v", task)
	}
	// Dead holder (this host, no other worker to notice): released at once.
	wk.kill()
	r := h.must("queue", "release", "q", "k")
	if !strings.Contains(r.stdout, "dead") || !strings.Contains(r.stdout, "task t1 is pending") {
		t.Fatalf("release of a dead holder's key: %s", r)
	}
	if r := h.must("queue", "release", "q", "k"); !strings.Contains(r.stdout, "nothing to release") {
		t.Errorf("second release: %s", r)
	}
	// A live holder with --force: its command is stopped, the task runs again.
	h.startWorker(t, "q", "--grace", "1s", "--", "sh", "-c", script)
	lines(t, starts, 2, 10*time.Second)
	h.must("queue", "release", "q", "k", "--force")
	got := lines(t, starts, 3, 10*time.Second)
	if got[2] <= got[1] && len(got[2]) <= len(got[1]) {
		t.Errorf("fences %v: each run after a release must have a larger one", got)
	}
	if task := h.taskJSON(t, "q", "t1"); num(t, task, "attempts") != 3 {
		t.Errorf("attempts %v, want 3 (the released ones count)", task["attempts"])
	}
}

// --once runs one task and exits with its exit code; with nothing to run it
// exits 5, at once or after --wait.
func TestQueue_Once(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.must("queue", "create", "q")
	start := time.Now()
	h.expect(5, []string{"queue", "work", "q", "--once", "--", "true"}, "no task came")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("--once on an empty queue took %s, want at once", took)
	}
	h.must("queue", "add", "q", "--key", "k", "--id", "a", "--payload", "hello")
	h.must("queue", "add", "q", "--key", "k", "--id", "b")
	r := h.baton("queue", "work", "q", "--once", "--", "sh", "-c", `cat; echo " $BATON_QUEUE $BATON_TASK $BATON_KEY $BATON_ATTEMPT $BATON_SLOT"; exit 7`)
	if r.code != 7 || !strings.HasPrefix(r.stdout, "hello q a k 1 k") {
		t.Fatalf("--once: %s; want exit 7 and the payload and environment", r)
	}
	if task := h.taskJSON(t, "q", "b"); task["state"] != "pending" {
		t.Errorf("--once ran more than one task: b is %v", task["state"])
	}
	h.must("queue", "cancel", "q", "b")
	// With --wait, a task added meanwhile is taken.
	added := make(chan result, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		added <- h.baton("queue", "add", "q", "--key", "other", "--id", "late")
	}()
	r = h.baton("queue", "work", "q", "--once", "--wait", "10s", "--", "sh", "-c", `echo "$BATON_TASK"`)
	if a := <-added; a.code != 0 {
		t.Fatalf("add: %s", a)
	}
	if r.code != 0 || strings.TrimSpace(r.stdout) != "late" {
		t.Fatalf("--once --wait: %s; want the task added while it waited", r)
	}
}

// SIGTERM drains: a task that ends within --grace ends done; one that does
// not is stopped and goes back to pending, its attempt not counted.
func TestQueue_DrainOnSIGTERM(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	dir := t.TempDir()
	h.must("queue", "create", "q")
	h.must("queue", "add", "q", "--key", "a", "--id", "short", "--payload", "1")
	h.must("queue", "add", "q", "--key", "b", "--id", "long", "--payload", "60")
	started := filepath.Join(dir, "started")
	wk := h.startWorker(t, "q", "--concurrency", "2", "--grace", "1500ms", "--", "sh", "-c",
		`echo "$BATON_TASK" >> `+started+`; sleep "$(cat)"`)
	lines(t, started, 2, 10*time.Second)
	t0 := time.Now()
	_ = wk.cmd.Process.Signal(syscall.SIGTERM)
	if code := wk.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("drained worker: exit %d; stderr:\n%s", code, wk.errs)
	}
	if took := time.Since(t0); took < time.Second || took > 8*time.Second {
		t.Errorf("the drain took %s, want about the grace (1.5s) and the stop", took)
	}
	if task := h.taskJSON(t, "q", "short"); task["state"] != "done" {
		t.Errorf("the task that ended within the grace is %v, want done", task["state"])
	}
	long := h.taskJSON(t, "q", "long")
	if long["state"] != "pending" || num(t, long, "attempts") != 0 || long["result"].(map[string]any)["reason"] != "drained" {
		t.Errorf("the task stopped by the drain: %v; want pending, attempts 0, reason drained", long)
	}
}

// add is idempotent on --id; bad input is one line with exit 2 (5 for an
// unknown queue) and changes nothing.
func TestQueue_AddIsIdempotentAndBadInputChangesNothing(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.must("queue", "create", "q")
	if r := h.must("queue", "add", "q", "--key", "k", "--id", "x", "--payload", "one"); strings.TrimSpace(r.stdout) != "x" {
		t.Fatalf("add: %s", r)
	}
	r := h.must("queue", "add", "q", "--key", "k", "--id", "x", "--payload", "two")
	if strings.TrimSpace(r.stdout) != "x" || !strings.Contains(r.stderr, "nothing added") {
		t.Fatalf("second add of the same id: %s", r)
	}
	if p := h.must("queue", "get", "q", "x", "--payload").stdout; p != "one" {
		t.Fatalf("payload %q after the second add, want the first's", p)
	}
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{2, []string{"queue", "create", "bad.name"}, "queue name"},
		{2, []string{"queue", "create", "q2", "--ttl", "1500ms"}, "whole number of seconds"},
		{2, []string{"queue", "create", "q2", "--max-active", "-1"}, "max_active"},
		{2, []string{"queue", "create", "q2", "--timeout", "soon"}, "not a duration"},
		{2, []string{"queue", "add", "q", "--key", "a..b"}, "'..'"},
		{2, []string{"queue", "add", "q"}, "--key is required"},
		{2, []string{"queue", "add", "q", "--key", "k", "--priority", "urgent"}, "high, normal or low"},
		{2, []string{"queue", "add", "q", "--key", "k", "--label", "novalue"}, "KEY=VALUE"},
		{2, []string{"queue", "add", "q", "--key", "k", "--payload", "a", "--payload-file", big}, "one way"},
		{2, []string{"queue", "add", "q", "--key", "k", "--payload-file", big}, "larger than the server accepts"},
		{2, []string{"queue", "add", "q", "--key", "k", "--payload-file", "/nonexistent"}, "no such file"},
		{5, []string{"queue", "add", "nosuch", "--key", "k"}, "no such queue"},
		{2, []string{"queue", "work", "q", "--", "/nonexistent/cmd"}, "/nonexistent/cmd"},
		{2, []string{"queue", "work", "q", "--concurrency", "0", "--", "true"}, "--concurrency"},
		{2, []string{"queue", "work", "q", "--wait", "1s", "--", "true"}, "--wait goes with --once"},
		{5, []string{"queue", "get", "q", "nope"}, "no such task"},
		{5, []string{"queue", "status", "nosuch"}, "no such queue"},
	} {
		r := h.expect(c.code, c.args, c.want)
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 || !strings.HasPrefix(r.stderr, "baton: queue ") {
			t.Errorf("baton %v: want one error line, got:\n%s", c.args, r.stderr)
		}
	}
	if c := h.counts(t, "q"); c["pending"] != 1 {
		t.Errorf("counts %v after the bad input: want only the one task added", c)
	}
	if r := h.must("queue", "ls"); !strings.Contains(r.stdout, "q ") || strings.Contains(r.stdout, "q2") {
		t.Errorf("queue ls after the bad input: %s", r)
	}
}

// status --json: the shape scripts read; status shows the queue on one
// line; locks name their holder with server times.
func TestQueue_StatusShowsWaitingRunningAndLocks(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	started := filepath.Join(t.TempDir(), "started")
	h.must("queue", "create", "q", "--max-active", "2", "--slot-prefix", "agents.")
	h.must("queue", "add", "q", "--key", "alice", "--id", "a1", "--label", "project=p1")
	h.must("queue", "add", "q", "--key", "alice", "--id", "a2", "--label", "project=p1")
	h.must("queue", "add", "q", "--key", "bob", "--id", "b1", "--label", "project=p2", "--priority", "high")
	h.startWorker(t, "q", "--concurrency", "2", "--", "sh", "-c", `echo x >> `+started+`; exec sleep 60`)
	lines(t, started, 2, 10*time.Second)
	doc := jsonOf(t, h.must("queue", "status", "q", "--json").stdout)
	active := doc["active"].(map[string]any)
	if num(t, active, "used") != 2 || num(t, active, "max") != 2 || num(t, active, "available") != 0 {
		t.Errorf("active %v", active)
	}
	byLabel := active["by_label"].(map[string]any)["project"].(map[string]any)
	if num(t, byLabel, "p1") != 1 || num(t, byLabel, "p2") != 1 {
		t.Errorf("active by label %v", byLabel)
	}
	pending := doc["pending"].(map[string]any)
	if num(t, pending, "total") != 1 || pending["oldest_id"] != "a2" || num(t, pending["by_key"].(map[string]any)["alice"].(map[string]any), "normal") != 1 {
		t.Errorf("pending %v", pending)
	}
	// The config, three tasks, two tokens, the worker's presence (and its
	// inbox, if it is not the dispatcher).
	recs := doc["records"].(map[string]any)
	if n := num(t, recs, "queue"); n < 7 || n > 8 || num(t, recs, "bucket") < n {
		t.Errorf("records %v, want 7 or 8 of the queue, and as many in the bucket at least", recs)
	}
	locks := doc["locks"].([]any)
	if len(locks) != 2 {
		t.Fatalf("locks %v, want two", locks)
	}
	for _, l := range locks {
		l := l.(map[string]any)
		if !strings.HasPrefix(l["slot"].(string), "agents.") || l["host"] != "host-a" || num(t, l, "fence") == 0 ||
			l["task"] == "" || l["state"] != "live" || l["expires_at"] == nil || num(t, l, "ttl_left_ms") <= 0 {
			t.Errorf("lock %v", l)
		}
	}
	text := h.must("queue", "status", "q", "--by", "project").stdout
	for _, want := range []string{"active    2 of 2", "ACTIVE BY project", "agents.alice", "agents.bob", "pending   1", "records   "} {
		if !strings.Contains(text, want) {
			t.Errorf("status text lacks %q:\n%s", want, text)
		}
	}
	if s := h.must("status").stdout; !strings.Contains(s, "queue q: 1 pending, 2/2 active") || !strings.Contains(s, "agents.alice") {
		t.Errorf("baton status: %s", s)
	}
	sdoc := jsonOf(t, h.must("status", "--json").stdout)
	if qs := sdoc["queues"].([]any); len(qs) != 1 || num(t, qs[0].(map[string]any), "active") != 2 {
		t.Errorf("status --json queues %v", sdoc["queues"])
	}
	// The locks are the slots' sessions: join of one is refused, naming the task.
	h.expect(3, []string{"join", "agents.bob", "--task", "T"}, "task b1")
}

// doctor reports a task whose worker died on another host (its lock
// expired, no worker left to notice) and --fix puts it back.
func TestQueue_DoctorFindsATaskWhoseWorkerDied(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	started := filepath.Join(t.TempDir(), "started")
	a.must("queue", "create", "q", "--ttl", "1s")
	a.must("queue", "add", "q", "--key", "k", "--id", "t1")
	wk := a.startWorker(t, "q", "--", "sh", "-c", `echo x >> `+started+`; exec sleep 60`)
	lines(t, started, 1, 10*time.Second)
	wk.kill()
	var r result
	// The dead worker's dispatcher lease goes with its TTL too; until it
	// has, doctor also says the queue is led by no candidate, which no fix
	// removes.
	waitFor(t, 10*time.Second, "doctor reports the lost task alone", func() bool {
		r = b.baton("doctor")
		return r.code == 7 && strings.Contains(r.stdout, "queue_lost_task") && !strings.Contains(r.stdout, "leader_without_candidate")
	})
	b.must("doctor", "--fix")
	if task := b.taskJSON(t, "q", "t1"); task["state"] != "pending" || task["result"].(map[string]any)["reason"] != "lost" {
		t.Fatalf("after doctor --fix: %v", task)
	}
}

// A 3-node cluster whose queues stream leader is SIGKILLed while workers run
// and tasks are added loses no task whose add was acknowledged: each ends
// done.
func TestQueue_ClusterServerKilledLosesNoTask(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	servers := startUpCluster(t)
	urls := servers[0].url + "," + servers[1].url + "," + servers[2].url
	w := &world{t: t, url: urls}
	w.client = kvtest.Connect(t, urls)
	a, b := w.host("host-a"), w.host("host-b")
	a.must("queue", "create", "cq", "--max-active", "4", "--ttl", "10s", "--backoff", "0s", "--max-attempts", "10")
	qs := w.queues(t)
	ctx := context.Background()
	var acked []string
	addSome := func(from, n int) {
		for i := from; i < from+n; i++ {
			id := fmt.Sprintf("t%03d", i)
			actx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, _, err := qs.Add(actx, "cq", fmt.Sprintf("k%d", i%8), nil, queue.WithID(id))
			cancel()
			if err == nil {
				acked = append(acked, id)
			}
		}
	}
	addSome(0, 40)
	for _, h := range []*host{a, b} {
		h.startWorker(t, "cq", "--concurrency", "2", "--", "sh", "-c", "sleep 0.05")
	}
	waitDone(t, qs, "cq", 10, 30*time.Second)
	// Kill the server that leads the queues stream, and add more meanwhile.
	leader := streamLeader(t, urls, "KV_baton-queues")
	var killed *upServer
	for _, s := range servers {
		if s.name == leader {
			killed = s
		}
	}
	if killed == nil {
		t.Fatalf("no server named %q leads the queues stream", leader)
	}
	_ = killed.cmd.Process.Kill()
	addSome(40, 40)
	if len(acked) < 60 {
		t.Fatalf("only %d of 80 adds acknowledged with two of three servers up", len(acked))
	}
	waitDone(t, qs, "cq", len(acked), 90*time.Second)
	for _, id := range acked {
		task, err := qs.Get(ctx, "cq", id)
		if err != nil || task.State != queue.StateDone {
			t.Errorf("acknowledged task %s: %v, %v; want done", id, task, err)
		}
	}
	t.Logf("killed %s (the queues stream leader); %d acknowledged tasks all done", leader, len(acked))
}

// streamLeader is the name of the server leading stream.
func streamLeader(t *testing.T, urls, stream string) string {
	t.Helper()
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("stream info of %s: %v", stream, err)
	}
	return info.Cluster.Leader
}

// workerPresent reports whether queue q has a presence record of the
// worker process pid.
func workerPresent(t *testing.T, qs *queue.Queues, q string, pid int) bool {
	t.Helper()
	es, err := qs.Bucket().ListMatching(context.Background(), q+".worker.*")
	if err != nil {
		return false
	}
	for _, e := range es {
		var p struct {
			PID int `json:"pid"`
		}
		if json.Unmarshal(e.Value, &p) == nil && p.PID == pid {
			return true
		}
	}
	return false
}
