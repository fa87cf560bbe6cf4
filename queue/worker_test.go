package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

func TestWorker_TaskEnvironmentAndDone(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	added := add(t, qs, "q", "user-1", "t1", queue.WithLabels(map[string]string{"project": "p1"}))
	rec := newRecorder(false)
	w, _ := qs.NewWorker("q", rec)
	start(t, w)
	got := rec.next(t, 10*time.Second)
	if got.ID != "t1" || got.Key != "user-1" || string(got.Payload) != "payload of t1" || got.Labels["project"] != "p1" {
		t.Fatalf("handler got %+v", got)
	}
	if got.Run == nil || got.Run.Attempt != 1 || got.Run.Fence == 0 || got.Run.Slot != "user-1" || got.State != queue.StateActive {
		t.Fatalf("handler's run: %+v", got.Run)
	}
	done := waitState(t, qs, "q", "t1", queue.StateDone, 10*time.Second)
	r := done.Result
	if r == nil || r.Reason != queue.ReasonExit || r.ExitCode == nil || *r.ExitCode != 0 || r.Fence != got.Run.Fence ||
		r.Host != "h1" || r.Instance == "" || r.PID == 0 || r.EndedAt.IsZero() || done.Attempts != 1 {
		t.Fatalf("result %+v", r)
	}
	if done.Seq != added.Seq || done.Expires.IsZero() {
		t.Errorf("seq %d (added %d), expires %v: a done task keeps its place and expires after the retention", done.Seq, added.Seq, done.Expires)
	}
}

// A task that runs longer than the queue's TTL keeps its key lock and its
// capacity token: they are renewed (the first renewal a third of the TTL
// after the claim) until the task ends done.
func TestWorker_ALongTaskKeepsItsLockAndToken(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.TTL = queue.Duration(time.Second); c.MaxActive = 1 })
	add(t, qs, "q", "user-1", "t1")
	rec := newRecorder(true)
	w, _ := qs.NewWorker("q", rec)
	start(t, w)
	got := rec.next(t, 10*time.Second)
	// Renewed twice: the lock's session is rewritten by its holder.
	ctx := ctxT(t, 10*time.Second)
	watch, err := qs.Sessions().Bucket().Watch(ctx, got.Run.Slot, kv.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	for renewals := 0; renewals < 2; {
		select {
		case e := <-watch.Updates():
			if e == nil || !e.Live() {
				t.Fatalf("the lock ended while its task ran: %+v", e)
			}
			renewals++
		case <-ctx.Done():
			t.Fatalf("the lock was renewed %d times in 10s, want 2 (TTL 1s)", renewals)
		}
	}
	if _, err := qs.Sessions().Get(ctx, got.Run.Slot); err != nil {
		t.Fatalf("the lock after two renewals: %v", err)
	}
	rec.end("t1", nil)
	done := waitState(t, qs, "q", "t1", queue.StateDone, 10*time.Second)
	if done.Attempts != 1 || done.Result.Reason != queue.ReasonExit {
		t.Fatalf("the long task ended %+v, want done in its first attempt", done.Result)
	}
}

// The key lock is the session of the slot named by the key: a running task
// excludes `baton join` of that slot, and a held slot holds its key's tasks
// back while other keys run.
func TestExclusion_TheKeyLockIsTheSlotsSession(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.SlotPrefix = "agents." })
	other := e.queues("h2").Sessions()
	ctx := ctxT(t, 30*time.Second)
	// Someone holds agents.busy: its task waits, another key's runs.
	s, err := other.Join(ctx, "agents.busy", "manual")
	if err != nil {
		t.Fatal(err)
	}
	add(t, qs, "q", "busy", "t-busy")
	add(t, qs, "q", "free", "t-free")
	rec := newRecorder(true)
	w, _ := qs.NewWorker("q", rec, queue.WithConcurrency(2))
	start(t, w)
	if got := rec.next(t, 10*time.Second); got.ID != "t-free" {
		t.Fatalf("started %s, want t-free (agents.busy is held)", got.ID)
	}
	// While t-free runs, its slot refuses a join from another host.
	_, err = other.Join(ctx, "agents.free", "intruder")
	var held *session.HeldError
	if !errors.As(err, &held) || held.Holder.TaskID != "t-free" || held.Holder.Meta["queue"] != "q" {
		t.Fatalf("join of a running task's slot: %v, want refused naming the task", err)
	}
	rec.none(t, 200*time.Millisecond)
	if err := other.Close(ctx, s, session.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	if got := rec.next(t, 10*time.Second); got.ID != "t-busy" {
		t.Fatalf("started %s, want t-busy once its slot was closed", got.ID)
	}
	rec.end("t-free", nil)
	rec.end("t-busy", nil)
}

// Never more than max_active run at once across workers, however many
// workers and keys.
func TestCapacity_NeverMoreThanMaxActive(t *testing.T) {
	e := newEnv(t)
	setup := e.queues("h1")
	e.create(setup, "cap", func(c *queue.Config) { c.MaxActive = 3 })
	const tasks = 60
	for i := range tasks {
		add(t, setup, "cap", fmt.Sprintf("k%d", i%20), fmt.Sprintf("t%02d", i))
	}
	var now, peak, done atomic.Int32
	h := queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		now.Add(-1)
		done.Add(1)
		return nil
	})
	for i := range 3 {
		qs := e.queues(fmt.Sprintf("h%d", i))
		w, _ := qs.NewWorker("cap", h, queue.WithConcurrency(4))
		start(t, w)
	}
	deadline := time.Now().Add(30 * time.Second)
	for done.Load() < tasks && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if done.Load() != tasks {
		t.Fatalf("%d of %d tasks done", done.Load(), tasks)
	}
	if p := peak.Load(); p > 3 || p < 2 {
		t.Fatalf("at most %d ran at once, want 3 (max_active), and more than one", p)
	}
}

// A lock taken from under a running task stops its work at once; the task
// goes back to pending, its attempt counted, and runs again with a larger
// fence.
func TestWorker_LostLockStopsTheWorkAndTheTaskRunsAgain(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxActive = 2 })
	add(t, qs, "q", "k", "t1")
	var mu sync.Mutex
	var causes []error
	var fences []uint64
	started := make(chan struct{}, 4)
	h := queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		mu.Lock()
		fences = append(fences, task.Run.Fence)
		n := len(fences)
		mu.Unlock()
		started <- struct{}{}
		if n > 1 {
			return nil
		}
		<-ctx.Done()
		mu.Lock()
		causes = append(causes, context.Cause(ctx))
		mu.Unlock()
		return ctx.Err()
	})
	w, _ := qs.NewWorker("q", h)
	start(t, w)
	<-started
	ctx := ctxT(t, 30*time.Second)
	op := e.queues("h2")
	if _, err := op.Release(ctx, "q", "k", false); !errors.Is(err, queue.ErrHeld) {
		t.Fatalf("release of a live lock without force: %v, want ErrHeld", err)
	}
	rel, err := op.Release(ctx, "q", "k", true)
	if err != nil || len(rel) != 1 || rel[0].Lock.Task != "t1" {
		t.Fatalf("forced release: %+v, %v", rel, err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the task did not run again")
	}
	done := waitState(t, qs, "q", "t1", queue.StateDone, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(causes) != 1 || !errors.Is(causes[0], queue.ErrLockLost) {
		t.Fatalf("the first run stopped with %v, want ErrLockLost", causes)
	}
	if fences[1] <= fences[0] {
		t.Fatalf("fences %v: the rerun must carry a larger one", fences)
	}
	if done.Attempts != 2 {
		t.Fatalf("attempts %d, want 2 (the lost one counts)", done.Attempts)
	}
}

func TestWorker_TimeoutFailsAndOutOfAttemptsIsDead(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.Timeout = queue.Duration(200 * time.Millisecond); c.MaxAttempts = 2 })
	add(t, qs, "q", "k", "slow")
	var runs atomic.Int32
	h := queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		runs.Add(1)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), queue.ErrTimeout) {
			t.Errorf("cause %v, want ErrTimeout", context.Cause(ctx))
		}
		return ctx.Err()
	})
	w, _ := qs.NewWorker("q", h)
	start(t, w)
	dead := waitState(t, qs, "q", "slow", queue.StateDead, 10*time.Second)
	if runs.Load() != 2 || dead.Attempts != 2 || dead.Result.Reason != queue.ReasonTimeout {
		t.Fatalf("runs %d, task %+v result %+v: want two timed-out attempts, then dead", runs.Load(), dead, dead.Result)
	}
}

func TestWorker_FailedTaskWaitsItsBackoff(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.Backoff = queue.Duration(600 * time.Millisecond) })
	add(t, qs, "q", "k", "flaky")
	var at []time.Time
	var mu sync.Mutex
	h := queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		mu.Lock()
		at = append(at, time.Now())
		n := len(at)
		mu.Unlock()
		if n == 1 {
			return &exitErr{3}
		}
		return nil
	})
	w, _ := qs.NewWorker("q", h)
	start(t, w)
	failed := waitState(t, qs, "q", "flaky", queue.StateFailed, 10*time.Second)
	if failed.Result.ExitCode == nil || *failed.Result.ExitCode != 3 || time.Duration(failed.RetryAfter) != 600*time.Millisecond {
		t.Fatalf("failed task %+v, result %+v", failed, failed.Result)
	}
	waitState(t, qs, "q", "flaky", queue.StateDone, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if gap := at[1].Sub(at[0]); gap < 500*time.Millisecond {
		t.Fatalf("retried after %s, want the 600ms backoff", gap)
	}
}

type exitErr struct{ code int }

func (e *exitErr) Error() string { return fmt.Sprintf("exit status %d", e.code) }
func (e *exitErr) ExitCode() int { return e.code }

func TestCancel_PendingAndActive(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxActive = 1 })
	add(t, qs, "q", "a", "running")
	add(t, qs, "q", "b", "waiting")
	rec := newRecorder(true)
	w, _ := qs.NewWorker("q", rec)
	start(t, w)
	rec.next(t, 10*time.Second)
	ctx := ctxT(t, 30*time.Second)
	c, err := qs.Cancel(ctx, "q", "waiting")
	if err != nil || c.State != queue.StateCancelled {
		t.Fatalf("cancel pending: %+v, %v", c, err)
	}
	c, err = qs.Cancel(ctx, "q", "running")
	if err != nil || c.State != queue.StateActive || !c.CancelRequested {
		t.Fatalf("cancel active: %+v, %v", c, err)
	}
	got := waitState(t, qs, "q", "running", queue.StateCancelled, 10*time.Second)
	if got.Result.Reason != queue.ReasonCancelled {
		t.Fatalf("result %+v", got.Result)
	}
	rec.none(t, 300*time.Millisecond) // the cancelled waiting task never runs
	if _, err := qs.Cancel(ctx, "q", "running"); err != nil {
		t.Fatalf("cancelling a cancelled task: %v, want nothing to do", err)
	}
}

func TestRetry_DeadTaskRunsAgain(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxAttempts = 1 })
	add(t, qs, "q", "k", "t")
	var runs atomic.Int32
	h := queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		if runs.Add(1) == 1 {
			return errors.New("boom")
		}
		return nil
	})
	w, _ := qs.NewWorker("q", h)
	start(t, w)
	dead := waitState(t, qs, "q", "t", queue.StateDead, 10*time.Second)
	if dead.Result.Error != "boom" || *dead.Result.ExitCode != 1 {
		t.Fatalf("result %+v", dead.Result)
	}
	ctx := ctxT(t, 30*time.Second)
	if _, err := qs.Retry(ctx, "q", "t"); err != nil {
		t.Fatal(err)
	}
	done := waitState(t, qs, "q", "t", queue.StateDone, 10*time.Second)
	if done.Attempts != 1 {
		t.Fatalf("attempts %d after a retry, want 1 (counted afresh)", done.Attempts)
	}
	if _, err := qs.Retry(ctx, "q", "t"); !errors.Is(err, queue.ErrState) {
		t.Fatalf("retry of a done task: %v, want ErrState", err)
	}
}

// A worker that stops lets running tasks finish within the grace; those
// that do not are stopped and go back to pending, their attempt given back.
func TestWorker_DrainPutsUnfinishedTasksBack(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	add(t, qs, "q", "k", "t")
	var cause atomic.Value
	started := make(chan struct{})
	h := queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		close(started)
		<-ctx.Done()
		cause.Store(context.Cause(ctx))
		return ctx.Err()
	})
	w, _ := qs.NewWorker("q", h, queue.WithGrace(300*time.Millisecond))
	r := start(t, w)
	<-started
	t0 := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if took := time.Since(t0); took < 250*time.Millisecond || took > 5*time.Second {
		t.Errorf("drain took %s, want about the grace", took)
	}
	if c, _ := cause.Load().(error); !errors.Is(c, queue.ErrDraining) {
		t.Fatalf("cause %v, want ErrDraining", c)
	}
	task, err := qs.Get(ctxT(t, 10*time.Second), "q", "t")
	if err != nil || task.State != queue.StatePending || task.Attempts != 0 || task.Result.Reason != queue.ReasonDrained {
		t.Fatalf("after the drain: %+v %+v, %v; want pending, attempt given back", task, task.Result, err)
	}
}

func TestWorker_MaxTasksAndIdleTimeout(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	w, _ := qs.NewWorker("q", queue.HandlerFunc(func(context.Context, *queue.Task) error { return nil }),
		queue.WithMaxTasks(1), queue.WithIdleTimeout(0))
	if err := w.Run(ctx); !errors.Is(err, queue.ErrNoTask) {
		t.Fatalf("empty queue: %v, want ErrNoTask", err)
	}
	add(t, qs, "q", "k", "a")
	add(t, qs, "q", "k", "b")
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	a, _ := qs.Get(ctx, "q", "a")
	b, _ := qs.Get(ctx, "q", "b")
	if a.State != queue.StateDone || b.State != queue.StatePending {
		t.Fatalf("a %s, b %s: want one task run", a.State, b.State)
	}
}

// deadProcess is a process of this host that has exited.
func deadProcess(t *testing.T) hostlocal.Process {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return p
}

// A worker of this host whose process is dead loses its task at once to a
// worker of the same host: no waiting out the TTL.
func TestCrash_SameHostPeerTakesOverAtOnce(t *testing.T) {
	e := newEnv(t)
	ghost := e.queues("h1", queue.WithProcess(deadProcess(t)))
	e.create(ghost, "q", func(c *queue.Config) { c.MaxActive = 1 }) // TTL 30s
	add(t, ghost, "q", "k", "t")
	held := make(chan uint64, 1)
	// The ghost's goroutines live on, but it takes no second task: as far
	// as anyone can tell, its process is dead.
	gw, _ := ghost.NewWorker("q", queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		held <- task.Run.Fence
		<-ctx.Done()
		return ctx.Err()
	}), queue.WithMaxTasks(1))
	start(t, gw)
	first := <-held
	peer := e.queues("h1")
	rec := newRecorder(false)
	t0 := time.Now()
	pw, _ := peer.NewWorker("q", rec)
	start(t, pw)
	got := rec.next(t, 5*time.Second)
	if took := time.Since(t0); took > 2*time.Second {
		t.Fatalf("taken over after %s, want at once (TTL is 30s)", took)
	}
	if got.Run.Fence <= first || got.Run.Attempt != 2 {
		t.Fatalf("rerun fence %d attempt %d, first fence %d: want a larger fence, attempt 2", got.Run.Fence, got.Run.Attempt, first)
	}
}
