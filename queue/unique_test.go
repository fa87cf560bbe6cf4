package queue_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// keep, replace and debounce act on the key's one pending unique task;
// adders racing make one between them; once it ran, the next add makes a
// new one.
func TestUnique_OnePendingTaskPerKey(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	keep := queue.WithUnique(queue.UniqueKeep, 0)
	first, added, err := qs.Add(ctx, "q", "k", []byte("a"), keep)
	if err != nil || !added || first.ID != "k.u0" {
		t.Fatalf("first unique add: %+v, %v, %v; want k.u0 added", first, added, err)
	}
	again, added, err := qs.Add(ctx, "q", "k", []byte("b"), keep)
	if err != nil || added || again.ID != first.ID || string(again.Payload) != "a" {
		t.Fatalf("keep: %+v, %v, %v; want the first kept as it was", again, added, err)
	}
	repl, added, err := qs.Add(ctx, "q", "k", []byte("c"), queue.WithUnique(queue.UniqueReplace, 0))
	if err != nil || added || repl.ID != first.ID || string(repl.Payload) != "c" {
		t.Fatalf("replace: %+v, %v, %v; want the first with payload c", repl, added, err)
	}
	// Eight adders at once: still one pending task of the key.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, _, err := qs.Add(ctx, "q", "k", []byte("d"), queue.WithUnique(queue.UniqueReplace, 0)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ts, err := qs.Matching(ctx, "q", []queue.State{queue.StatePending}, "k"); err != nil || len(ts) != 1 || string(ts[0].Payload) != "d" {
		t.Fatalf("after eight racing adds: %d pending (%v); want one, payload d", len(ts), err)
	}
	if _, _, err := qs.Add(ctx, "q", "k", nil, keep, queue.WithID("x")); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("unique with an id: %v, want ErrInvalid", err)
	}
	rec := newRecorder(false)
	w, _ := qs.NewWorker("q", rec)
	start(t, w)
	if task := rec.next(t, 5*time.Second); task.ID != "k.u0" || string(task.Payload) != "d" {
		t.Fatalf("ran %s (%q), want k.u0 with payload d", task.ID, task.Payload)
	}
	waitState(t, qs, "q", "k.u0", queue.StateDone, 5*time.Second)
	next, added, err := qs.Add(ctx, "q", "k", []byte("e"), keep)
	if err != nil || !added || next.ID != "k.u1" {
		t.Fatalf("after it ran: %+v, %v, %v; want a new one, k.u1", next, added, err)
	}
}

// debounce pushes the task's start back with each add: it runs once,
// the debounce after the last add, with the last payload.
func TestUnique_Debounce(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	h := newStartedAt()
	w, _ := qs.NewWorker("q", h)
	start(t, w)
	deb := queue.WithUnique(queue.UniqueDebounce, 400*time.Millisecond)
	var last time.Time
	for _, p := range []string{"1", "2", "3"} {
		if _, _, err := qs.Add(ctx, "q", "k", []byte(p), deb); err != nil {
			t.Fatal(err)
		}
		last = time.Now()
		time.Sleep(250 * time.Millisecond)
	}
	id, began := h.next(t, 5*time.Second)
	if id != "k.u0" || began.Sub(last) < 400*time.Millisecond {
		t.Fatalf("task %s began %s after the last add, want k.u0 at 400ms or later", id, began.Sub(last))
	}
	task := waitState(t, qs, "q", id, queue.StateDone, 5*time.Second)
	if string(task.Payload) != "3" {
		t.Errorf("ran with payload %q, want the last, 3", task.Payload)
	}
	select {
	case x := <-h.at:
		t.Errorf("a second task %s ran", x.id)
	case <-time.After(300 * time.Millisecond):
	}
}
