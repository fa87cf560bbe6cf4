package queuecmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/queue"
)

// TestMain lets this test binary be the supervisor that LookCommand names
// (os.Executable), as the baton binary is in use.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == cmdutil.SuperviseVerb {
		os.Exit(hostlocal.SuperviseMain(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// awaitReady waits until the handler has a standby ready, and returns its
// pid.
func awaitReady(t *testing.T, h *execHandler) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		s := h.ready
		h.mu.Unlock()
		if s != nil {
			return s.PID()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no standby supervisor was ready within 10s")
	return 0
}

func TestExecHandler_RunsEachTaskOnTheStandbyStartedAhead(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	// The payload is the exit code; each run writes its process group (the
	// supervisor's pid) and its environment.
	script := `read code; read -r _ _ _ _ pgid _ < /proc/$$/stat
echo "$pgid $BATON_QUEUE $BATON_TASK $BATON_KEY $BATON_FENCE $BATON_ATTEMPT $BATON_SLOT" >> "$1"; exit "$code"`
	command, err := (&cmdutil.Factory{}).LookCommand([]string{"sh", "-c", script, "sh", out})
	if err != nil {
		t.Fatal(err)
	}
	h := &execHandler{cmd: command, q: "agents"}
	h.refill()
	ctx := context.Background()
	task := func(id, code string, fence uint64) *queue.Task {
		return &queue.Task{ID: id, Queue: "agents", Key: "alice", Payload: []byte(code + "\n"),
			Run: &queue.Run{Attempt: 1, Slot: "alice", Fence: fence}}
	}

	first := awaitReady(t, h)
	if err := h.Work(ctx, task("t1", "0", 11)); err != nil {
		t.Fatalf("exit 0: Work = %v, want nil", err)
	}
	// Once the command ended, the next supervisor is started ahead.
	second := awaitReady(t, h)
	if second == first {
		t.Fatalf("the standby after the first task is the first one again (pid %d)", first)
	}
	err = h.Work(ctx, task("t2", "7", 12))
	var ee *exitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit 7: Work = %v, want an exit error with code 7", err)
	}
	awaitReady(t, h)
	h.close()
	h.mu.Lock()
	left := h.ready
	h.mu.Unlock()
	if left != nil {
		t.Fatal("a standby is still kept after close")
	}
	h.refill() // after close: starts nothing
	h.mu.Lock()
	filling := h.filling
	h.mu.Unlock()
	if filling {
		t.Fatal("refill after close started a supervisor")
	}

	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		strconv.Itoa(first) + " agents t1 alice 11 1 alice",
		strconv.Itoa(second) + " agents t2 alice 12 1 alice",
	}
	if got := strings.Split(strings.TrimSpace(string(data)), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("runs:\n%s\nwant (pgid queue task key fence attempt slot):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The supervisor that will run a task's command is recorded before the
// command begins, and a command whose record fails never begins: a worker
// killed between the two would leave a lock naming no work, which a
// worker of its host frees while the command still runs.
func TestExecHandler_RecordsTheProcessBeforeTheCommandBegins(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	command, err := (&cmdutil.Factory{}).LookCommand([]string{"sh", "-c", `echo "$BATON_TASK" >> "$1"`, "sh", out})
	if err != nil {
		t.Fatal(err)
	}
	h := &execHandler{cmd: command, q: "agents"}
	defer h.close()
	var recorded []int
	refuse := errors.New("the lock was lost")
	var fail bool
	h.started = func(_ context.Context, p hostlocal.Process) error {
		// Held a while: a command started before the record would have
		// written by now.
		time.Sleep(200 * time.Millisecond)
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the command ran before its process %d was recorded (%v)", p.PID, err)
		}
		if p.Start == "" {
			t.Errorf("process %d recorded without its start token", p.PID)
		}
		recorded = append(recorded, p.PID)
		if fail {
			return refuse
		}
		return nil
	}
	task := func(id string) *queue.Task {
		return &queue.Task{ID: id, Queue: "agents", Key: "alice", Run: &queue.Run{Attempt: 1, Slot: "alice", Fence: 1}}
	}

	fail = true
	if err := h.Work(context.Background(), task("refused")); !errors.Is(err, queue.ErrStartFailed) || !errors.Is(err, refuse) {
		t.Fatalf("Work with the record refused = %v, want ErrStartFailed wrapping the refusal", err)
	}
	if len(recorded) != 1 {
		t.Fatalf("a refused record was tried %d times, want once (no second supervisor)", len(recorded))
	}
	if alive(recorded[0]) {
		t.Errorf("the supervisor %d of a refused record still runs", recorded[0])
	}

	fail = false
	h.refill()
	pid := awaitReady(t, h)
	if err := h.Work(context.Background(), task("t1")); err != nil {
		t.Fatalf("Work = %v", err)
	}
	if len(recorded) != 2 || recorded[1] != pid {
		t.Fatalf("recorded %v, want the standby %d second", recorded, pid)
	}
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "t1" {
		t.Fatalf("commands run: %q, want only t1's", b)
	}
}

// alive reports whether pid runs and is not a zombie waiting for us.
func alive(pid int) bool { return hostlocal.Process{PID: pid}.Alive() }
