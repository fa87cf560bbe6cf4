package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// A diamond (A; B and C after A; D after B and C) runs in order; with A
// dead, B, C and D are cancelled, each saying why.
func TestAfter_ADiamondRunsInOrderAndAFailureCancelsIt(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxAttempts = 1 })
	ctx := ctxT(t, 30*time.Second)
	if _, _, err := qs.Add(ctx, "q", "k", nil, queue.WithAfter("nosuch")); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("after a task that is not there: %v, want ErrInvalid", err)
	}
	rec := newRecorder(false)
	h := queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		_ = rec.Work(ctx, task)
		if task.ID == "2A" { // the second diamond's first fails
			return &exitErr{1}
		}
		return nil
	})
	w, _ := qs.NewWorker("q", h, queue.WithConcurrency(4))
	start(t, w)
	diamond := func(p string) {
		add(t, qs, "q", p+"a", p+"A")
		add(t, qs, "q", p+"b", p+"B", queue.WithAfter(p+"A"))
		add(t, qs, "q", p+"c", p+"C", queue.WithAfter(p+"A"))
		add(t, qs, "q", p+"d", p+"D", queue.WithAfter(p+"B", p+"C"))
	}
	diamond("1")
	got := map[string]int{}
	for i := range 4 {
		got[rec.next(t, 5*time.Second).ID] = i
		if i == 0 {
			waitState(t, qs, "q", "1A", queue.StateDone, 5*time.Second)
		}
	}
	if got["1A"] != 0 || got["1D"] != 3 {
		t.Fatalf("order %v: want 1A first and 1D last", got)
	}
	diamond("2")
	if task := rec.next(t, 5*time.Second); task.ID != "2A" {
		t.Fatalf("task %s ran, want 2A", task.ID)
	}
	for _, id := range []string{"2B", "2C", "2D"} {
		c := waitState(t, qs, "q", id, queue.StateCancelled, 10*time.Second)
		if c.Result == nil || !strings.Contains(c.Result.Error, "it waits for is") {
			t.Errorf("%s cancelled with %+v; want the reason", id, c.Result)
		}
	}
	rec.none(t, 300*time.Millisecond)
}
