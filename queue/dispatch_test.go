package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
)

// busy starts a worker of q with concurrency 1 and gives it a task that
// runs until the test ends: the first worker dispatches, and with it busy
// every later task is offered to another worker.
func busy(t *testing.T, e *env, q string) (*queue.Queues, *recorder) {
	t.Helper()
	qs := e.queues("h1")
	e.create(qs, q, nil)
	rec := newRecorder(true)
	w, err := qs.NewWorker(q, rec, queue.WithConcurrency(1), queue.WithGrace(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start(t, w)
	add(t, qs, q, "busy", "busy")
	if got := rec.next(t, 10*time.Second); got.ID != "busy" {
		t.Fatalf("first task %s, want busy", got.ID)
	}
	return qs, rec
}

// One worker dispatches (it holds the queue's election); the others run
// what it offers them, each task under its own worker's id.
func TestDispatch_OneWorkerOffersTheOthersTheirTasks(t *testing.T) {
	e := newEnv(t)
	qs, _ := busy(t, e, "q")
	recs := []*recorder{newRecorder(true), newRecorder(true)}
	for _, rec := range recs {
		w, err := e.queues("h2").NewWorker("q", rec, queue.WithConcurrency(1), queue.WithGrace(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		start(t, w)
	}
	add(t, qs, "q", "a", "a")
	add(t, qs, "q", "b", "b")
	workers := map[string]bool{}
	for _, rec := range recs {
		got := rec.next(t, 10*time.Second)
		if got.Run.Worker == "" || workers[got.Run.Worker] {
			t.Fatalf("task %s ran under worker %q, want a worker id of its own", got.ID, got.Run.Worker)
		}
		workers[got.Run.Worker] = true
	}
	ls, err := lease.New(qs.Bucket().Client(), lease.WithPrefix("baton"))
	if err != nil {
		t.Fatal(err)
	}
	el, err := ls.Election(queue.DispatchElection("q"))
	if err != nil {
		t.Fatal(err)
	}
	leader, err := el.Leader(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatalf("the queue's dispatcher election: %v", err)
	}
	if workers[leader.Holder] {
		t.Errorf("the dispatcher %s ran an offered task, though it was busy", leader.Holder)
	}
}

// A task cancelled while a worker that does not dispatch runs it is
// stopped: the dispatcher sees the request and tells that worker.
func TestDispatch_CancelReachesAWorkerThatDoesNotDispatch(t *testing.T) {
	e := newEnv(t)
	qs, _ := busy(t, e, "q")
	rec := newRecorder(true)
	w, err := e.queues("h2").NewWorker("q", rec, queue.WithConcurrency(1), queue.WithGrace(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start(t, w)
	add(t, qs, "q", "k", "c")
	rec.next(t, 10*time.Second)
	t0 := time.Now()
	if _, err := qs.Cancel(ctxT(t, 10*time.Second), "q", "c"); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, qs, "q", "c", queue.StateCancelled, 10*time.Second)
	if got.Result == nil || got.Result.Reason != queue.ReasonCancelled {
		t.Fatalf("result %+v, want reason cancelled", got.Result)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("the task stopped %s after the cancel, want within the grace", d)
	}
}

// An offer that is not claimed (its worker paused, or cut off) expires,
// and the task goes to a worker that shows life; the silent one is
// offered nothing more until it renews its presence.
func TestDispatch_AnOfferNotClaimedGoesToAnotherWorker(t *testing.T) {
	e := newEnv(t)
	qs, _ := busy(t, e, "q")
	// A worker that is present but never claims: its id sorts first, so
	// that it is offered the task before the live one.
	ghost, _ := json.Marshal(map[string]any{"queue": "q", "worker": "0000000000000000", "host": "h9", "pid": 1,
		"instance": "ghost", "concurrency": 4, "started_at": time.Now(), "renewed_at": time.Now()})
	if _, err := qs.Bucket().Create(ctxT(t, 10*time.Second), "q.worker.0000000000000000", ghost, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(true)
	w, err := e.queues("h2").NewWorker("q", rec, queue.WithConcurrency(1), queue.WithGrace(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start(t, w)
	time.Sleep(200 * time.Millisecond) // both present in the dispatcher's view
	t0 := time.Now()
	add(t, qs, "q", "k", "x")
	got := rec.next(t, 10*time.Second)
	if d := time.Since(t0); d < time.Second {
		t.Logf("the task started %s after it was added: the live worker was offered it first", d)
	} else if d > 5*time.Second {
		t.Errorf("the task started %s after it was added, want once the ghost's offer expired (2s)", d)
	}
	if got.ID != "x" || got.Attempts != 1 {
		t.Fatalf("ran %s attempt %d, want x's first", got.ID, got.Attempts)
	}
	// A second task goes straight to the live worker: the ghost is stalled.
	rec.end("x", nil)
	t1 := time.Now()
	add(t, qs, "q", "k2", "y")
	rec.next(t, 10*time.Second)
	if d := time.Since(t1); d > time.Second {
		t.Errorf("the next task started %s after it was added: offered to the silent worker again", d)
	}
}
