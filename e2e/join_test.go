package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/waitline"
)

func TestJoin_SecondJoinIsRefusedNamingTheHolder(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a")
	first := jsonOf(t, a.must("join", "rendering", "--task", "T-1", "--agent", "claude-1", "--json").stdout)
	if first["slot"] != "rendering" || first["host"] != "host-a" || num(t, first, "fence") < 1 || num(t, first, "revision") != num(t, first, "fence") {
		t.Fatalf("join --json = %v", first)
	}
	// Same host: held (3), naming the holder.
	a.expect(3, []string{"join", "rendering", "--task", "T-2"}, "held", "task T-1", "agent claude-1", "--force")
	// Another host: refused (4), even with --force.
	b := w.host("host-b")
	b.expect(4, []string{"join", "rendering", "--task", "T-2"}, "belongs to host host-a")
	b.expect(4, []string{"join", "rendering", "--task", "T-2", "--force"}, "belongs to host host-a")
	// --force on the same host replaces it with a larger fence.
	second := jsonOf(t, a.must("join", "rendering", "--task", "T-3", "--force", "--json").stdout)
	if num(t, second, "fence") <= num(t, first, "fence") || second["task_id"] != "T-3" {
		t.Errorf("forced join = %v, want a larger fence than %v", second, first["fence"])
	}
}

func TestJoin_TwentyProcessesAtOnceOneWins(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	const n = 20
	cmds := make([]*exec.Cmd, n)
	outs := make([]*strings.Builder, n)
	for i := range cmds {
		// Each process stops itself before it becomes baton: once all are
		// stopped, one SIGCONT each releases them together.
		cmd := exec.Command("sh", "-c", `kill -STOP $$; exec "$0" "$@"`, batonBin, "join", "contended", "--task", fmt.Sprintf("T-%d", i))
		cmd.Env = h.environ()
		outs[i] = &strings.Builder{}
		cmd.Stderr = outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for _, cmd := range cmds {
		pid := cmd.Process.Pid
		waitFor(t, 10*time.Second, "process stopped at the barrier", func() bool { return processState(pid) == "T" })
	}
	for _, cmd := range cmds {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	codes := map[int]int{}
	for i, cmd := range cmds {
		code := exitCode(cmd.Wait())
		codes[code]++
		if code != 0 && code != 3 {
			t.Errorf("process %d: exit %d: %s", i, code, outs[i])
		}
		if code == 3 && !strings.Contains(outs[i].String(), "pid ") {
			t.Errorf("process %d: loser's message does not name the holder: %s", i, outs[i])
		}
	}
	if codes[0] != 1 || codes[3] != n-1 {
		t.Fatalf("exit codes %v, want one 0 and %d times 3", codes, n-1)
	}
	if len(h.sessions()) != 1 {
		t.Error("status does not show exactly one session")
	}
}

// holdGate starts a helper process that holds the slot's gate on h, as a
// baton mid-join would.
func holdGate(t *testing.T, h *host, slot string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(h.environ(), envHelper+"=gate", "E2E_STATE="+h.state, "E2E_GATE=slot-"+slot)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("gate helper: %q", line)
	}
	return cmd
}

func TestGate_LiveHolderBlocksDeadOneDoesNot(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	holder := holdGate(t, h, "busy")
	h.expect(3, []string{"join", "busy", "--task", "T-1"},
		"gate slot-busy is held by pid "+fmt.Sprint(holder.Process.Pid), "baton join (e2e helper)", "--wait")
	// --wait gives up after the wait, still naming the holder.
	h.expect(3, []string{"join", "busy", "--task", "T-1", "--wait", "200ms"}, "held by pid")

	// The holder dies without releasing: the kernel frees the gate.
	holder.Process.Kill()
	holder.Wait()
	h.must("join", "busy", "--task", "T-1")

	// A gate file naming a live process that does not hold it (a recycled
	// pid: this test's own pid with another start) blocks nobody.
	lock := filepath.Join(h.state, "locks", "slot-recycled.lock")
	stale := fmt.Sprintf(`{"pid":%d,"start":"not-this-process","purpose":"baton join recycled"}`, os.Getpid())
	if err := os.WriteFile(lock, []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	h.must("join", "recycled", "--task", "T-1")
}

func TestJoin_BadInputIsExit2WithTheRule(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"join", "a..b", "--task", "T"}, "no '..'"},
		{[]string{"join", ".lead", "--task", "T"}, "leading or trailing '.'"},
		{[]string{"join", "has space", "--task", "T"}, "A-Z a-z 0-9"},
		{[]string{"join", strings.Repeat("x", 129), "--task", "T"}, "1-128 characters"},
		{[]string{"join", "ok"}, "--task is required"},
		{[]string{"join", "ok", "--task", "T", "--ttl", "5"}, "use a number with a unit"},
		{[]string{"join", "ok", "--task", "T", "--ttl", "1500ms"}, "whole number of seconds"},
		{[]string{"join", "ok", "--task", "T", "--ttl", "-5s"}, "must not be negative"},
		{[]string{"join", "ok", "--task", "T", "--wait", "soon"}, "not a duration"},
		{[]string{"join", "ok", "--task", "T", "--meta", "novalue"}, "KEY=VALUE"},
		{[]string{"join", "ok", "--task", "T", "--pid", "999999999"}, "no such process"},
		{[]string{"join", "ok", "--task", "T", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"join"}, "want exactly one SLOT"},
		{[]string{"close", "ok", "--result", "maybe"}, "success, fail or fork"},
		{[]string{"status", "extra"}, "takes no arguments"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"status", "--timeout", "0s"}, "must be positive"},
		{[]string{"status", "--prefix", "no/slash"}, "prefix"},
		{[]string{"run", "ok", "--task", "T"}, "-- and the command"},
		{[]string{"run", "ok", "--task", "T", "--", "/no/such/program"}, "/no/such/program"},
	} {
		r := h.expect(2, tc.args, tc.want)
		if !strings.HasPrefix(r.stderr, "baton: ") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("baton %v: error is not one line starting with \"baton: \": %q", tc.args, r.stderr)
		}
	}
	if len(h.sessions()) != 0 {
		t.Error("bad input created a session")
	}
}

func TestSubstrate_ServerDownIsExit6AndMissingBucketsSayRunUp(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.env = append(h.env, "BATON_TIMEOUT=2s")
	h.expect(6, []string{"join", "x", "--task", "T", "--server", "nats://127.0.0.1:1"}, "nats://127.0.0.1:1", "baton up")
	h.expect(6, []string{"status", "--prefix", "fresh"}, "fresh-sessions", "run `baton up`")
	h.expect(6, []string{"join", "x", "--task", "T", "--prefix", "fresh"}, "run `baton up`")
	// A URL's password is never echoed.
	r := h.expect(6, []string{"status", "--server", "nats://alice:s3cret@127.0.0.1:1"})
	if strings.Contains(r.stderr, "s3cret") {
		t.Errorf("the password was echoed: %s", r.stderr)
	}
}

// slotLine is how many joiners wait in slot's line.
func slotLine(t *testing.T, w *world, slot string) int {
	t.Helper()
	self, err := hostlocal.Self()
	if err != nil {
		t.Fatal(err)
	}
	line := waitline.New(w.client.Bucket(limits.BucketConfig(session.DefaultPrefix, 0)), "wait.slot."+slot, "e2e", self)
	ws, err := line.Waiters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(ws)
}

// inSlotLine waits until n joiners wait in slot's line.
func inSlotLine(t *testing.T, w *world, slot string, n int) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("%d joiners in line", n), func() bool { return slotLine(t, w, slot) == n })
}

// Three `join --wait` processes that begin to wait 100 ms apart for a held
// slot get it in that order, each as the holder before it closes it.
func TestJoin_WaitersGetAHeldSlotInTheOrderTheyCame(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	a.must("join", "line", "--task", "T-0")
	// The waiters' hosts, in the order they come; each closes as its own.
	hosts := []*host{a, b, a}
	type waiter struct {
		out  *bytes.Buffer
		errs *bytes.Buffer
		err  error
		done chan struct{} // closed once the process exited, with err
	}
	waiters := make([]waiter, len(hosts))
	for i, h := range hosts {
		cmd := h.command("join", "line", "--task", fmt.Sprintf("T-%d", i+1), "--wait", "20s", "--json")
		wt := &waiters[i]
		wt.out, wt.errs, wt.done = &bytes.Buffer{}, &bytes.Buffer{}, make(chan struct{})
		cmd.Stdout, cmd.Stderr = wt.out, wt.errs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-wt.done })
		go func() { wt.err = cmd.Wait(); close(wt.done) }()
		inSlotLine(t, w, "line", i+1)
		time.Sleep(100 * time.Millisecond)
	}
	closer := a // the holder's host
	var closes, handoffs []time.Duration
	for i := range waiters {
		wt := &waiters[i]
		began := time.Now()
		closer.must("close", "line")
		closes = append(closes, time.Since(began))
		select {
		case <-wt.done:
			if wt.err != nil {
				t.Fatalf("waiter %d: %v: %s", i+1, wt.err, wt.errs)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("waiter %d did not get the slot within 20s of its close", i+1)
		}
		handoffs = append(handoffs, time.Since(began))
		if got := jsonOf(t, wt.out.String()); got["task_id"] != fmt.Sprintf("T-%d", i+1) || got["host"] != hosts[i].id {
			t.Fatalf("waiter %d joined %v", i+1, got)
		}
		for j := i + 1; j < len(waiters); j++ {
			select {
			case <-waiters[j].done:
				t.Fatalf("waiter %d ended (%v: %s) before waiter %d was served", j+1, waiters[j].err, waiters[j].errs, i+1)
			default:
			}
		}
		closer = hosts[i]
	}
	closer.must("close", "line")
	if n := slotLine(t, w, "line"); n != 0 {
		t.Errorf("%d in line once all were served, want 0", n)
	}
	t.Logf("from a `baton close` starting to the next waiter's `baton join` exiting: %v (the close processes took %v)", handoffs, closes)
}

// A wait that runs out on a held slot is exit 3 after about the wait,
// naming the holder and saying how long it waited.
func TestJoin_WaitThatRunsOutIsExit3NamingTheHolder(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a")
	a.must("join", "render", "--task", "T-1", "--agent", "claude-1")
	began := time.Now()
	r := a.expect(3, []string{"join", "render", "--task", "T-2", "--wait", "300ms"}, "held", "task T-1", "agent claude-1", "waited 300ms", "longer --wait")
	took := time.Since(began)
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("join --wait 300ms exited after %s, want about 300ms", took)
	}
	if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("the error is not one line: %q", r.stderr)
	}
	// Another host's session: exit 4 after the wait, as without one.
	a2 := w.host("host-b")
	a2.expect(4, []string{"join", "render", "--task", "T-2", "--wait", "300ms"}, "belongs to host host-a", "waited 300ms")
	if n := slotLine(t, w, "render"); n != 0 {
		t.Errorf("%d in line once the waits ran out, want 0", n)
	}
	t.Logf("join --wait 300ms on a held slot exited 3 after %s: %s", took, strings.TrimSpace(r.stderr))
}

// `run --wait` waits in line for a held slot; Ctrl-C while it waits ends
// it at once (exit 130), starts nothing and leaves the line. Once the slot
// is closed, the next `run --wait` in line runs its command.
func TestJoin_RunWaitsInLineAndCtrlCLeavesIt(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a")
	a.must("join", "busy", "--task", "T-0")
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := a.command("run", "busy", "--task", "T-1", "--wait", "30s", "--", "sh", "-c", "touch "+marker)
	errs := &strings.Builder{}
	cmd.Stderr = errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	inSlotLine(t, w, "busy", 1)
	cmd.Process.Signal(interrupt)
	select {
	case err := <-done:
		if code := exitCode(err); code != 130 {
			t.Errorf("exit %d after Ctrl-C in line, want 130; stderr: %s", code, errs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ctrl-C did not end the wait")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran after Ctrl-C")
	}
	// It left the line before it exited, not after its ticket's TTL.
	if n := slotLine(t, w, "busy"); n != 0 {
		t.Errorf("%d in line once the run that was interrupted exited, want 0", n)
	}

	next := a.command("run", "busy", "--task", "T-2", "--wait", "30s", "--", "sh", "-c", "touch "+marker)
	go func() { done <- next.Run() }()
	inSlotLine(t, w, "busy", 1)
	a.must("close", "busy")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run --wait after the close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run --wait did not run within 20s of the close")
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the command of the run that waited did not run: %v", err)
	}
}
