package queue_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// AddBatch adds every task, in the order given, each as Add would: one of
// an id the queue holds already is not added again and comes back as it
// is.
func TestAddBatch_AddsEveryTaskInOrder(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	if _, _, err := qs.Add(ctx, "q", "k0", []byte("first"), queue.WithID("t-0")); err != nil {
		t.Fatal(err)
	}
	const n = 2500 // more than one round of creates in flight
	tasks := make([]queue.NewTask, n)
	for i := range tasks {
		tasks[i] = queue.NewTask{Key: fmt.Sprintf("k%d", i%7), Payload: []byte(fmt.Sprint(i)),
			Options: []queue.AddOption{queue.WithID(fmt.Sprintf("t-%d", i)), queue.WithPriority(queue.High)}}
	}
	res, err := qs.AddBatch(ctx, "q", tasks)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("task %d: %v", i, r.Err)
		}
		if want := fmt.Sprintf("t-%d", i); r.Task.ID != want {
			t.Fatalf("result %d is task %s; want %s", i, r.Task.ID, want)
		}
		if i == 0 {
			if r.Added || string(r.Task.Payload) != "first" {
				t.Fatalf("task t-0, held already: added %v, payload %q; want the one held, not added", r.Added, r.Task.Payload)
			}
			continue
		}
		if !r.Added || r.Task.Revision <= last || r.Task.Priority != queue.High {
			t.Fatalf("task %d: added %v at revision %d after %d, priority %s", i, r.Added, r.Task.Revision, last, r.Task.Priority)
		}
		last = r.Task.Revision
	}
	snap, err := qs.Snapshot(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Counts[queue.StatePending] != n {
		t.Fatalf("%d pending after the batch; want %d", snap.Counts[queue.StatePending], n)
	}
	got, err := qs.Get(ctx, "q", "t-1234")
	if err != nil || string(got.Payload) != "1234" || got.Key != "k2" {
		t.Fatalf("task t-1234 = %+v, %v", got, err)
	}
}

// A batch with a task that cannot be added as given (a bad key, an id
// twice) adds nothing, and names the task.
func TestAddBatch_ABadTaskAddsNothing(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	for _, c := range []struct {
		name  string
		tasks []queue.NewTask
		index int
	}{
		{"bad key", []queue.NewTask{{Key: "a"}, {Key: "b..c"}, {Key: "d"}}, 1},
		{"id twice", []queue.NewTask{{Key: "a", Options: []queue.AddOption{queue.WithID("x")}}, {Key: "b"}, {Key: "c", Options: []queue.AddOption{queue.WithID("x")}}}, 2},
	} {
		_, err := qs.AddBatch(ctx, "q", c.tasks)
		var be *queue.BatchError
		if !errors.As(err, &be) || be.Index != c.index || !errors.Is(err, queue.ErrInvalid) {
			t.Fatalf("%s: %v; want a BatchError naming task %d, ErrInvalid", c.name, err, c.index)
		}
	}
	snap, err := qs.Snapshot(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if n := snap.Counts[queue.StatePending]; n != 0 {
		t.Fatalf("%d tasks after the refused batches; want none", n)
	}
	if _, err := qs.AddBatch(ctx, "nosuch", []queue.NewTask{{Key: "a"}}); !errors.Is(err, queue.ErrQueueNotFound) {
		t.Fatalf("a batch for no queue: %v; want ErrQueueNotFound", err)
	}
}
