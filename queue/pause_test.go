package queue_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// A paused queue starts nothing on any worker while its running task goes
// on to its end; resumed, its tasks start again.
func TestPause_StopsStartsAndResumeRestartsThem(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	rec := newRecorder(true)
	// Two workers: the second is offered tasks through its inbox.
	for range 2 {
		w, _ := qs.NewWorker("q", rec, queue.WithConcurrency(2))
		start(t, w)
	}
	add(t, qs, "q", "k0", "running")
	if task := rec.next(t, 5*time.Second); task.ID != "running" {
		t.Fatalf("task %s started, want running", task.ID)
	}
	if _, err := qs.Pause(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		add(t, qs, "q", "k-"+id, id)
	}
	rec.none(t, 700*time.Millisecond)
	snap, err := qs.Snapshot(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Config.Paused || snap.Pending.Total != 3 || snap.Counts[queue.StateActive] != 1 {
		t.Fatalf("paused %v, pending %d, active %d; want paused, 3 and the running task", snap.Config.Paused, snap.Pending.Total, snap.Counts[queue.StateActive])
	}
	rec.end("running", nil) // a running task goes on to its end
	waitState(t, qs, "q", "running", queue.StateDone, 5*time.Second)
	rec.none(t, 300*time.Millisecond)
	if _, err := qs.Resume(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		task := rec.next(t, 5*time.Second)
		got = append(got, task.ID)
		rec.end(task.ID, nil)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("started %v after the resume, want a, b and c", got)
	}
}

// A paused key's tasks wait while the other keys' run; resumed, they run,
// and the key's settings record is gone again.
func TestPause_AKeyWaitsWhileTheOthersRun(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	if _, err := qs.PauseKey(ctx, "q", "bob"); err != nil {
		t.Fatal(err)
	}
	keys, bad, err := qs.Keys(ctx, "q")
	if err != nil || len(bad) != 0 || len(keys) != 1 || keys[0].Key != "bob" || !keys[0].Paused {
		t.Fatalf("keys %+v, %v, %v; want bob paused", keys, bad, err)
	}
	rec := newRecorder(false)
	for range 2 {
		w, _ := qs.NewWorker("q", rec)
		start(t, w)
	}
	add(t, qs, "q", "bob", "b1")
	add(t, qs, "q", "alice", "a1")
	add(t, qs, "q", "bob", "b2")
	add(t, qs, "q", "alice", "a2")
	for _, want := range []string{"a1", "a2"} {
		if task := rec.next(t, 5*time.Second); task.ID != want {
			t.Fatalf("task %s started, want %s (bob is paused)", task.ID, want)
		}
	}
	rec.none(t, 500*time.Millisecond)
	snap, err := qs.Snapshot(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.PausedKeys(); !slices.Equal(got, []string{"bob"}) {
		t.Fatalf("status says paused keys %v, want bob", got)
	}
	if _, err := qs.ResumeKey(ctx, "q", "bob"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"b1", "b2"} {
		if task := rec.next(t, 5*time.Second); task.ID != want {
			t.Fatalf("task %s started, want %s", task.ID, want)
		}
	}
	if keys, _, err := qs.Keys(ctx, "q"); err != nil || len(keys) != 0 {
		t.Fatalf("keys %+v, %v after the resume; want none (nothing set)", keys, err)
	}
	if _, err := qs.PauseKey(ctx, "nosuch", "bob"); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("pause a key of a missing queue: %v, want ErrQueueNotFound", err)
	}
}
