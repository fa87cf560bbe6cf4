package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// A handle that waits again and again shares one watch of the queue among
// its waits: each wait gets its own task's end and result, one at a time
// and eight at once; a task cancelled or removed while waited for is told;
// the watch goes once no wait has come for a while.
func TestAddWait_SharesOneWatchAmongWaits(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	queue.SetEndWatchIdle(qs, 300*time.Millisecond)
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	holding := make(chan struct{})
	w, _ := e.queues("h2").NewWorker("q", queue.HandlerFunc(func(ctx context.Context, tk *queue.Task) error {
		if string(tk.Payload) == "hold" {
			close(holding)
			<-ctx.Done() // until cancelled
			return ctx.Err()
		}
		queue.SetResult(ctx, append([]byte("did "), tk.Payload...))
		return nil
	}), queue.WithConcurrency(8))
	start(t, w)
	check := func(tk *queue.Task, err error, want string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if tk.State != queue.StateDone || tk.Result == nil || string(tk.Result.Output) != "did "+want {
			t.Fatalf("task %s ended %s with %+v, want done with %q", tk.ID, tk.State, tk.Result, "did "+want)
		}
	}
	for i := range 5 {
		p := fmt.Sprint("one-", i)
		tk, added, err := qs.AddWait(ctx, "q", fmt.Sprint("k", i), []byte(p))
		if !added {
			t.Fatalf("wait %d: not added", i)
		}
		check(tk, err, p)
	}
	if n := queue.SharedEndWatches(qs); n != 1 {
		t.Fatalf("%d shared watches after five waits, want 1", n)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprint("many-", i)
			tk, _, err := qs.AddWait(ctx, "q", fmt.Sprint("m", i), []byte(p))
			check(tk, err, p)
		}()
	}
	wg.Wait()
	// A task that is there already: its end as it is.
	done, _, err := qs.AddWait(ctx, "q", "k0", []byte("again"), queue.WithID("fixed"))
	check(done, err, "again")
	tk, added, err := qs.AddWait(ctx, "q", "k0", []byte("other"), queue.WithID("fixed"))
	if added {
		t.Error("the same id added twice")
	}
	check(tk, err, "again")
	// Cancelled while waited for.
	res := make(chan *queue.Task, 1)
	go func() {
		tk, _, err := qs.AddWait(ctx, "q", "h", []byte("hold"), queue.WithID("held"))
		if err != nil {
			t.Error(err)
		}
		res <- tk
	}()
	select {
	case <-holding:
	case <-ctx.Done():
		t.Fatal("the held task did not start")
	}
	if _, err := qs.Cancel(ctx, "q", "held"); err != nil {
		t.Fatal(err)
	}
	if tk := <-res; tk == nil || tk.State != queue.StateCancelled {
		t.Fatalf("a cancelled task's wait returned %+v", tk)
	}
	// Idle: the shared watch goes.
	deadline := time.Now().Add(5 * time.Second)
	for queue.SharedEndWatches(qs) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the shared watch outlived its waits by 5 s, want 300 ms")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A wait with a deadline that comes first says so.
	if _, err := qs.SetConfig(ctx, "q", func(c *queue.Config) error { c.Paused = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, _, err := qs.AddWait(sctx, "q", "p", []byte("x"), queue.WithID(fmt.Sprint("paused-", i)))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait %d on a paused queue: %v, want the deadline", i, err)
		}
	}
}

// A task whose payload and result together pass what the server takes in
// one record still ends: without its output, marked cut, instead of
// losing attempt after attempt.
func TestResult_TooLargeWithThePayloadEndsWithoutIt(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	max := int(e.client.Conn().MaxPayload())
	// The record holds both in base64: the payload fits alone with room to
	// spare, not with the result.
	payload := make([]byte, (max-40<<10)*3/4)
	w, _ := qs.NewWorker("q", queue.HandlerFunc(func(ctx context.Context, tk *queue.Task) error {
		queue.SetResult(ctx, make([]byte, queue.MaxResult))
		return nil
	}))
	start(t, w)
	tk, _, err := qs.AddWait(ctx, "q", "k", payload)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != queue.StateDone || tk.Attempts != 1 || tk.Result == nil || len(tk.Result.Output) != 0 || !tk.Result.OutputTruncated {
		t.Fatalf("task ended %s after %d attempts, result %+v; want done at once, no output, marked cut", tk.State, tk.Attempts, tk.Result)
	}
}

// IfState: a bulk cancel or retry leaves alone a task that moved on since
// it was listed (a pending task that started is not stopped by a cancel
// of pending tasks), and says so.
func TestIfState_LeavesATaskThatMovedOn(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 10*time.Second)
	tk, _, err := qs.Add(ctx, "q", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := qs.Cancel(ctx, "q", tk.ID, queue.IfState(queue.StateFailed, queue.StateDead))
	if !errors.Is(err, queue.ErrStateMoved) || !errors.Is(err, queue.ErrState) || got == nil || got.State != queue.StatePending {
		t.Fatalf("Cancel if failed or dead of a pending task: %v, %v", got, err)
	}
	if !strings.Contains(err.Error(), "no longer failed or dead; left alone") {
		t.Errorf("message: %v", err)
	}
	if now, _ := qs.Get(ctx, "q", tk.ID); now.State != queue.StatePending || now.CancelRequested {
		t.Fatalf("the task was changed: %s, cancel requested %v", now.State, now.CancelRequested)
	}
	if got, err = qs.Cancel(ctx, "q", tk.ID, queue.IfState(queue.StatePending)); err != nil || got.State != queue.StateCancelled {
		t.Fatalf("Cancel if pending of a pending task: %v, %v", got, err)
	}
	if got, err = qs.Retry(ctx, "q", tk.ID, queue.IfState(queue.StateDead)); !errors.Is(err, queue.ErrStateMoved) || got.State != queue.StateCancelled {
		t.Fatalf("Retry if dead of a cancelled task: %v, %v", got, err)
	}
}
