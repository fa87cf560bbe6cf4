package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
