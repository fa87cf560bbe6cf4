package queue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// startedAt records when each task's handler began, on this host's clock
// (the server runs in this process: its clock is this host's).
type startedAt struct {
	rec *recorder
	at  chan struct {
		id string
		at time.Time
	}
}

func newStartedAt() *startedAt {
	return &startedAt{rec: newRecorder(false), at: make(chan struct {
		id string
		at time.Time
	}, 64)}
}

func (s *startedAt) Work(ctx context.Context, t *queue.Task) error {
	s.at <- struct {
		id string
		at time.Time
	}{t.ID, time.Now()}
	return s.rec.Work(ctx, t)
}

func (s *startedAt) next(t *testing.T, within time.Duration) (string, time.Time) {
	t.Helper()
	select {
	case x := <-s.at:
		return x.id, x.at
	case <-time.After(within):
		t.Fatalf("no task started within %s", within)
		return "", time.Time{}
	}
}

// A task added with a delay or a run-at time starts at that time by the
// server's clock, not before, and within a few milliseconds after; one
// whose time is past, and one without, start at once.
func TestRunAt_ATaskStartsAtItsTime(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	h := newStartedAt()
	w, _ := qs.NewWorker("q", h)
	start(t, w)

	now, err := qs.Bucket().ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := add(t, qs, "q", "k1", "at", queue.WithRunAt(now.Add(700*time.Millisecond)))
	in := add(t, qs, "q", "k2", "in", queue.WithDelay(400*time.Millisecond))
	add(t, qs, "q", "k3", "past", queue.WithRunAt(now.Add(-time.Hour)))
	add(t, qs, "q", "k4", "now")
	read, err := qs.Get(ctx, "q", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	due := map[string]time.Time{"at": at.NotBefore(), "in": read.NotBefore()}
	if got := read.NotBefore(); !got.Equal(read.Written.Add(400 * time.Millisecond)) {
		t.Fatalf("the delayed task's time is %s, want its write's server time %s plus 400ms", got, read.Written)
	}
	// The two undelayed tasks go first, then "in", then "at".
	for _, want := range []string{"", "", "in", "at"} {
		id, began := h.next(t, 5*time.Second)
		if want == "" {
			if id != "past" && id != "now" {
				t.Fatalf("task %s started before the undelayed ones", id)
			}
			continue
		}
		if id != want {
			t.Fatalf("task %s started, want %s", id, want)
		}
		late := began.Sub(due[id])
		if late < 0 {
			t.Fatalf("task %s started %s before its time", id, -late)
		}
		if late > 100*time.Millisecond {
			t.Errorf("task %s started %s after its time, want within 100ms", id, late)
		}
		t.Logf("task %s started %s after its time", id, late)
	}
}

// A delayed task, once due, takes its fair turn: it goes before the tasks
// of a key served already, not after all of them.
func TestRunAt_ADueTaskTakesItsFairTurn(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxActive = 1 })
	rec := newRecorder(true)
	add(t, qs, "q", "busy", "b0")
	w, _ := qs.NewWorker("q", rec)
	start(t, w)
	if task := rec.next(t, 5*time.Second); task.ID != "b0" {
		t.Fatalf("task %s started, want b0", task.ID)
	}
	add(t, qs, "q", "late", "delayed", queue.WithDelay(300*time.Millisecond))
	for _, id := range []string{"b1", "b2", "b3"} {
		add(t, qs, "q", "busy", id)
	}
	// While it waits, the busy key's tasks run.
	rec.end("b0", nil)
	if task := rec.next(t, 5*time.Second); task.ID != "b1" {
		t.Fatalf("task %s started, want b1", task.ID)
	}
	time.Sleep(400 * time.Millisecond) // the delayed task is due meanwhile
	rec.end("b1", nil)
	if task := rec.next(t, 5*time.Second); task.ID != "delayed" {
		t.Fatalf("task %s started, want the delayed task, due and of a key never served", task.ID)
	}
	rec.end("delayed", nil)
	for _, id := range []string{"b2", "b3"} {
		if task := rec.next(t, 5*time.Second); task.ID != id {
			t.Fatalf("task %s started, want %s", task.ID, id)
		}
		rec.end(id, nil)
	}
}

// A retry runs the task at once, whatever time it was added for; and bad
// times are refused before anything is written.
func TestRunAt_RetryRunsNowAndBadTimesAreRefused(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	for _, o := range []queue.AddOption{queue.WithDelay(-time.Second), queue.WithRunAt(time.Time{})} {
		if _, _, err := qs.Add(ctx, "q", "k", nil, o); !errors.Is(err, queue.ErrInvalid) {
			t.Fatalf("add: %v, want ErrInvalid", err)
		}
	}
	add(t, qs, "q", "k", "later", queue.WithDelay(time.Hour))
	if _, err := qs.Cancel(ctx, "q", "later"); err != nil {
		t.Fatal(err)
	}
	retried, err := qs.Retry(ctx, "q", "later")
	if err != nil {
		t.Fatal(err)
	}
	if !retried.NotBefore().IsZero() {
		t.Fatalf("a retried task waits until %s, want it to run now", retried.NotBefore())
	}
	h := newStartedAt()
	w, _ := qs.NewWorker("q", h)
	start(t, w)
	if id, _ := h.next(t, 5*time.Second); id != "later" {
		t.Fatalf("task %s started, want the retried one", id)
	}
}

// Status counts the tasks that wait for their time apart, with the
// soonest time, and does not call them the oldest waiting.
func TestRunAt_StatusCountsTheDelayed(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	add(t, qs, "q", "k1", "hour", queue.WithDelay(time.Hour))
	add(t, qs, "q", "k2", "minute", queue.WithDelay(time.Minute))
	snap, err := qs.Snapshot(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	p := snap.Pending
	if p.Total != 2 || p.Delayed != 2 || p.OldestID != "" {
		t.Fatalf("pending %d, delayed %d, oldest %q; want 2, 2 and none waiting yet", p.Total, p.Delayed, p.OldestID)
	}
	if left := p.NextAt.Sub(snap.ServerTime); left < 59*time.Second || left > time.Minute {
		t.Fatalf("the next is due in %s, want about a minute", left)
	}
	add(t, qs, "q", "k3", "now")
	if snap, err = qs.Snapshot(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if p := snap.Pending; p.Total != 3 || p.Delayed != 2 || p.OldestID != "now" {
		t.Fatalf("pending %d, delayed %d, oldest %q; want 3, 2 and the undelayed task", p.Total, p.Delayed, p.OldestID)
	}
}

// A handler's result is written with its attempt's end, whatever the
// outcome, cut at MaxResult; WaitTask hands it back.
func TestResult_IsRecordedWithTheEnd(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxAttempts = 1 })
	ctx := ctxT(t, 30*time.Second)
	big := make([]byte, queue.MaxResult+10)
	for i := range big {
		big[i] = 'x'
	}
	h := queue.ResultFunc(func(ctx context.Context, task *queue.Task) ([]byte, error) {
		switch task.ID {
		case "ok":
			return []byte("summary of " + string(task.Payload)), nil
		case "big":
			return big, nil
		default:
			return []byte("half done"), &exitErr{7}
		}
	})
	w, _ := qs.NewWorker("q", h)
	start(t, w)
	for _, id := range []string{"ok", "big", "fails"} {
		add(t, qs, "q", "k-"+id, id)
	}
	for _, c := range []struct {
		id, want string
		state    queue.State
		code     int
		cut      bool
	}{
		{"ok", "summary of payload of ok", queue.StateDone, 0, false},
		{"big", string(big[:queue.MaxResult]), queue.StateDone, 0, true},
		{"fails", "half done", queue.StateDead, 7, false},
	} {
		got, err := qs.WaitTask(ctx, "q", c.id, func(t *queue.Task) bool { return t.State.Final() })
		if err != nil {
			t.Fatal(err)
		}
		if got.State != c.state || got.Result == nil || string(got.Result.Output) != c.want || got.Result.OutputTruncated != c.cut || got.ExitCode() != c.code {
			t.Errorf("task %s: %s, exit %d, result %.40q (cut %v); want %s, %d, %.40q (cut %v)", c.id, got.State, got.ExitCode(), got.Result.Output, got.Result.OutputTruncated, c.state, c.code, c.want, c.cut)
		}
	}
}

// A task's own timeout and attempts replace the queue's.
func TestTask_OwnTimeoutAndAttempts(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxAttempts = 5; c.Timeout = queue.Duration(time.Hour) })
	var runs atomic.Int32
	h := queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		runs.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	w, _ := qs.NewWorker("q", h, queue.WithGrace(100*time.Millisecond))
	start(t, w)
	add(t, qs, "q", "k", "short", queue.WithTimeout(time.Second), queue.WithMaxAttempts(2))
	dead := waitState(t, qs, "q", "short", queue.StateDead, 20*time.Second)
	if runs.Load() != 2 || dead.Attempts != 2 || dead.Result.Reason != queue.ReasonTimeout || dead.ExitCode() != 124 {
		t.Fatalf("runs %d, task %+v, result %+v: want two attempts timed out after 1s each, then dead (exit 124)", runs.Load(), dead, dead.Result)
	}
	for _, o := range []queue.AddOption{queue.WithTimeout(time.Millisecond), queue.WithMaxAttempts(0)} {
		if _, _, err := qs.Add(ctxT(t, 5*time.Second), "q", "k", nil, o); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("add with a bad option: %v, want ErrInvalid", err)
		}
	}
}
