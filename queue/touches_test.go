package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/reserve"
)

// limitsFor makes the limits bucket path reservations live in, and a
// handle of another process of host.
func limitsFor(t *testing.T, e *env, host string) *reserve.Spaces {
	t.Helper()
	sp, err := reserve.New(e.client, reserve.WithHostID(host))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestTouches_AClashingTaskWaitsAndOthersGoOn: a task whose paths overlap
// a running one's waits for it to end, while a task of another key whose
// paths are free starts at once; the running task holds its paths as a
// reservation, named by its task.
func TestTouches_AClashingTaskWaitsAndOthersGoOn(t *testing.T) {
	e := newEnv(t)
	sp := limitsFor(t, e, "h9")
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	if _, _, err := qs.Add(ctxT(t, 5*time.Second), "q", "k", nil, queue.WithTouches("app", "/etc")); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("touches of an absolute path: %v, want ErrInvalid", err)
	}
	rec := newRecorder(true)
	w, _ := qs.NewWorker("q", rec, queue.WithConcurrency(4))
	start(t, w)
	add(t, qs, "q", "a", "A", queue.WithTouches("app", "src/**"))
	if got := rec.next(t, 5*time.Second); got.ID != "A" {
		t.Fatalf("%s started, want A", got.ID)
	}
	st, err := sp.Status(ctxT(t, 5*time.Second), "app")
	if err != nil {
		t.Fatal(err)
	}
	if st.Held() != 1 || st.Reservations[0].Task != "A" || st.Reservations[0].Patterns[0] != "src/**" {
		t.Fatalf("while A runs, the space holds %+v; want A's src/**", st.Reservations)
	}
	add(t, qs, "q", "b", "B", queue.WithTouches("app", "src/parser/x.go"))
	add(t, qs, "q", "c", "C", queue.WithTouches("app", "docs/**"))
	if got := rec.next(t, 5*time.Second); got.ID != "C" {
		t.Fatalf("%s started while A runs, want C (B's paths clash with A's)", got.ID)
	}
	rec.none(t, 300*time.Millisecond)
	rec.end("A", nil)
	if got := rec.next(t, 5*time.Second); got.ID != "B" {
		t.Fatalf("%s started after A ended, want B", got.ID)
	}
	if b := waitState(t, qs, "q", "B", queue.StateActive, time.Second); b.Attempts != 1 || b.Result != nil {
		t.Fatalf("B on attempt %d, last result %+v; want 1 and none: the dispatcher held it back, no worker was refused its paths", b.Attempts, b.Result)
	}
	rec.end("B", nil)
	rec.end("C", nil)
	waitState(t, qs, "q", "B", queue.StateDone, 5*time.Second)
	waitState(t, qs, "q", "C", queue.StateDone, 5*time.Second)
	if st, _ := sp.Status(ctxT(t, 5*time.Second), "app"); st.Held() != 0 {
		t.Fatalf("after every task ended, the space holds %+v", st.Reservations)
	}
}

// TestTouches_PathsAnAgentHoldsHoldTheTaskBack: a task whose paths an
// agent outside the queue reserved is given back, its attempt not
// counted, and runs once the agent releases them.
func TestTouches_PathsAnAgentHoldsHoldTheTaskBack(t *testing.T) {
	e := newEnv(t)
	sp := limitsFor(t, e, "h9")
	agent, err := sp.TryReserve(ctxT(t, 5*time.Second), "app", []string{"src/**"}, reserve.WithAgent("alice"))
	if err != nil {
		t.Fatal(err)
	}
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxAttempts = 1 })
	rec := newRecorder(false)
	w, _ := qs.NewWorker("q", rec)
	start(t, w)
	add(t, qs, "q", "a", "A", queue.WithTouches("app", "src/a.go"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		task, err := qs.Get(ctxT(t, 5*time.Second), "q", "A")
		if err != nil {
			t.Fatal(err)
		}
		if task.Result != nil && task.Result.Reason == queue.ReasonPathsHeld {
			if task.State != queue.StatePending || task.Attempts != 0 {
				t.Fatalf("given back as %s with %d attempts; want pending, 0", task.State, task.Attempts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A: %+v; want it given back with reason paths_held", task)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec.none(t, 300*time.Millisecond)
	if err := agent.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := rec.next(t, 10*time.Second); got.ID != "A" {
		t.Fatalf("%s started, want A", got.ID)
	}
	waitState(t, qs, "q", "A", queue.StateDone, 5*time.Second) // its one attempt was not spent waiting
}
