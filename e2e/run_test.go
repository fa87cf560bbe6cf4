package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// started is a `baton run` whose command has printed its first line.
type started struct {
	cmd  *exec.Cmd
	out  *bufio.Reader
	line string
	errs *strings.Builder
}

// startRun starts `baton run` with args; the command must print one line
// first, which startRun waits for.
func (h *host) startRun(t *testing.T, args ...string) *started {
	t.Helper()
	cmd := h.command(append([]string{"run"}, args...)...)
	out, _ := cmd.StdoutPipe()
	errs := &strings.Builder{}
	cmd.Stderr = errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("baton run printed nothing: %v; stderr: %s", err, errs)
	}
	return &started{cmd: cmd, out: r, line: strings.TrimSpace(line), errs: errs}
}

// wait waits for the run to end and returns its exit code.
func (s *started) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, _ = io.Copy(io.Discard, s.out); done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return exitCode(err)
	case <-time.After(within):
		t.Fatalf("baton run did not end within %s; stderr: %s", within, s.errs)
		return -1
	}
}

func TestRun_TheCommandsExitCodeIsBatons(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	r := h.baton("run", "s", "--task", "T-1", "--", "sh", "-c", `echo "$BATON_SLOT $BATON_FENCE $BATON_INSTANCE"; exit 7`)
	if r.code != 7 {
		t.Fatalf("run: %s, want exit 7", r)
	}
	f := strings.Fields(r.stdout)
	if len(f) != 3 || f[0] != "s" || f[1] == "" || f[2] == "" {
		t.Errorf("command's environment: %q, want slot, fence and instance", r.stdout)
	}
	if _, ok := h.sessions()["s"]; ok {
		t.Error("the session outlived the command")
	}
	if r := h.baton("run", "s", "--task", "T-2", "--", "true"); r.code != 0 {
		t.Errorf("run true: %s", r)
	}
}

func TestRun_LosingTheSessionStopsTheCommand(t *testing.T) {
	for _, how := range []string{"close", "takeover"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t)
			h := w.host("host-a")
			marker := filepath.Join(t.TempDir(), "term")
			run := h.startRun(t, "s", "--task", "T-1", "--", "sh", "-c",
				fmt.Sprintf(`trap 'echo term > %s; exit 0' TERM; echo started; while :; do sleep 0.05; done`, marker))
			switch how {
			case "close":
				h.must("close", "s")
			case "takeover":
				h.must("join", "s", "--task", "T-2", "--force")
			}
			if code := run.wait(t, 10*time.Second); code != 3 {
				t.Fatalf("baton run exited %d after the session was lost, want 3; stderr: %s", code, run.errs)
			}
			if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "term" {
				t.Errorf("the command did not get SIGTERM: %q, %v", b, err)
			}
			if !strings.Contains(run.errs.String(), "stopped the command") {
				t.Errorf("baton run did not say why: %s", run.errs)
			}
		})
	}
}

func TestRun_GraceThenSIGKILL(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	run := h.startRun(t, "s", "--task", "T-1", "--grace", "300ms", "--", "sh", "-c", `trap '' TERM; echo started; while :; do sleep 0.05; done`)
	start := time.Now()
	h.must("close", "s")
	if code := run.wait(t, 10*time.Second); code != 3 {
		t.Fatalf("exit %d, want 3", code)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("killed after %s, before the grace", took)
	}
	if !strings.Contains(run.errs.String(), "exit 137") {
		t.Errorf("stderr %q does not report the SIGKILL (exit 137)", run.errs)
	}
}

func TestRun_CtrlCClosesTheSession(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	watch := h.watch(t)
	run := h.startRun(t, "s", "--task", "T-1", "--", "sh", "-c", `trap 'exit 130' INT; echo started; while :; do sleep 0.05; done`)
	run.cmd.Process.Signal(syscall.SIGINT)
	if code := run.wait(t, 10*time.Second); code != 130 {
		t.Fatalf("exit %d after Ctrl-C, want the command's 130", code)
	}
	ev := watch.await(t, "close", "s", 5*time.Second)
	if s := ev["session"].(map[string]any); s["result"] != "fail" {
		t.Errorf("close event %v, want result fail", ev)
	}
}

func TestRun_SIGKILLOfBatonKillsTheCommandsGroup(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	// A shell wrapper that backgrounds the real work: the whole group must die.
	run := h.startRun(t, "s", "--task", "T-1", "--", "sh", "-c", `sleep 300 & echo $!; wait`)
	worker, err := strconv.Atoi(run.line)
	if err != nil || !alive(worker) {
		t.Fatalf("worker pid %q not running", run.line)
	}
	run.cmd.Process.Kill()
	run.cmd.Wait()
	waitFor(t, 5*time.Second, "the backgrounded worker dies with baton", func() bool { return !alive(worker) })
}

func TestRun_RenewsWhileTheCommandRuns(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	r := h.baton("run", "s", "--task", "T-1", "--ttl", "1s", "--", "sh", "-c", "sleep 2.5")
	if r.code != 0 {
		t.Fatalf("a 2.5s command under a 1s TTL: %s", r)
	}
}

func TestRun_CtrlCBeforeTheCommandStartsStartsNothing(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	holdGate(t, h, "s") // the run waits for the gate
	marker := filepath.Join(t.TempDir(), "ran")
	clients := w.srv.NATS().NumClients()
	cmd := h.command("run", "s", "--task", "T-1", "--wait", "30s", "--", "sh", "-c", "touch "+marker)
	errs := &strings.Builder{}
	cmd.Stderr = errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once baton has connected, it goes on to wait for the gate.
	waitFor(t, 10*time.Second, "baton connects", func() bool { return w.srv.NATS().NumClients() > clients })
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := exitCode(err); code != 130 {
			t.Errorf("exit %d after Ctrl-C during the join, want 130; stderr: %s", code, errs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ctrl-C did not interrupt the join")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran after Ctrl-C")
	}
	if len(h.sessions()) != 0 {
		t.Error("a session was left behind")
	}
}

func TestRun_TheCommandsBackgroundWorkEndsWithIt(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	pidFile := filepath.Join(t.TempDir(), "bg")
	r := h.baton("run", "s", "--task", "T-1", "--grace", "2s", "--", "sh", "-c", "sleep 300 & echo $! > "+pidFile+"; exit 0")
	if r.code != 0 {
		t.Fatalf("run: %s", r)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid == 0 || alive(pid) {
		t.Errorf("background process %d outlived the run", pid)
	}
}
