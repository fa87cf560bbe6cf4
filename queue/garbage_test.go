package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// rawPut writes value under key of bucket through the raw NATS API, as
// anything with write access to the bucket can: unconditionally, with no
// TTL.
func (e *env) rawPut(bucket, key string, value []byte) {
	e.t.Helper()
	msg, err := e.client.Conn().Request("$KV."+bucket+"."+key, value, 5*time.Second)
	if err != nil {
		e.t.Fatalf("raw put %s %s: %v", bucket, key, err)
	}
	if len(msg.Data) == 0 || msg.Data[0] != '{' || string(msg.Data[:min(len(msg.Data), 10)]) == `{"error":` {
		e.t.Fatalf("raw put %s %s: %s", bucket, key, msg.Data)
	}
}

// Garbage written over the key lock of a running task stops that task's
// work, and the task goes back to pending; but the lock's holder is alive
// and its work takes its time to stop, so its capacity token stays taken
// until the work has stopped: no other task starts in its place meanwhile
// (max_active holds). The key stays blocked while the garbage is there
// (adr/0005), and runs again once it is removed.
func TestGarbage_OverALockKeepsItsTokenUntilTheWorkStops(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxActive = 1; c.TTL = queue.Duration(10 * time.Second) })
	add(t, qs, "q", "k1", "t1")
	type run struct {
		task *queue.Task
		at   time.Time
	}
	var mu sync.Mutex
	var stopped time.Time // when t1's first run returned
	var cause error
	started := make(chan run, 8)
	// t1's first run is a command that takes a second to stop.
	slow := queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		started <- run{task, time.Now()}
		if task.ID != "t1" || task.Attempts > 1 {
			return nil
		}
		<-ctx.Done()
		time.Sleep(time.Second)
		mu.Lock()
		stopped, cause = time.Now(), context.Cause(ctx)
		mu.Unlock()
		return ctx.Err()
	})
	w1, _ := qs.NewWorker("q", slow, queue.WithGrace(5*time.Second))
	start(t, w1)
	first := (<-started).task
	// A worker of another host, and a task of another key waiting for the
	// one unit of capacity.
	w2, _ := e.queues("h2").NewWorker("q", slow, queue.WithGrace(5*time.Second))
	start(t, w2)
	add(t, qs, "q", "k2", "t2")
	select {
	case r := <-started:
		t.Fatalf("%s started while t1 held the only unit of capacity", r.task.ID)
	case <-time.After(300 * time.Millisecond):
	}

	e.rawPut(session.BucketConfig(session.DefaultPrefix, 1).Name, first.Run.Slot, []byte("\x00garbage"))
	// doctor does not take the task for one whose lock is gone either.
	ctx := ctxT(t, 10*time.Second)
	l, err := qs.Sessions().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	probs, err := qs.Problems(ctx, "q", l, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		if p.Kind == queue.ProblemLostTask {
			t.Errorf("doctor: %s: %s", p.Kind, p.Detail)
		}
	}
	var got run
	select {
	case got = <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("t2 did not start within 20s of t1's lock turning to garbage")
	}
	mu.Lock()
	st, c := stopped, cause
	mu.Unlock()
	if got.task.ID != "t2" {
		t.Fatalf("%s (attempt %d) started, want t2", got.task.ID, got.task.Attempts)
	}
	if st.IsZero() || got.at.Before(st) {
		t.Fatalf("t2 started while t1's work was still stopping (max_active 1): t1's run stopped %v", st)
	}
	if !errors.Is(c, queue.ErrLockLost) {
		t.Errorf("t1's run stopped with %v, want ErrLockLost", c)
	}
	// Put back to pending by its own worker, it does not run while the
	// garbage holds its key's slot; once the garbage is removed, it does.
	waitState(t, qs, "q", "t1", queue.StatePending, 10*time.Second)
	select {
	case r := <-started:
		t.Fatalf("%s (attempt %d) started while garbage held its key's slot", r.task.ID, r.task.Attempts)
	case <-time.After(500 * time.Millisecond):
	}
	sessions := qs.Sessions().Bucket()
	junk, err := sessions.Latest(ctx, first.Run.Slot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.DeleteRevision(ctx, first.Run.Slot, junk.Revision, nil); err != nil {
		t.Fatal(err)
	}
	done := waitState(t, qs, "q", "t1", queue.StateDone, 10*time.Second)
	if done.Attempts != 2 || done.Fence() <= first.Run.Fence {
		t.Errorf("t1 done after %d attempts under fence %d, want 2 under a fence above %d", done.Attempts, done.Fence(), first.Run.Fence)
	}
}
