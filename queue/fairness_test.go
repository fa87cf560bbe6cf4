package queue_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// Hatchet's GROUP_ROUND_ROBIN example: five tasks each for A, B and C, added
// in that order, one at a time: they run A, B, C, A, B, C, ...
func TestFairness_RoundRobinAcrossKeys(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "rr", func(c *queue.Config) { c.MaxActive = 1 })
	for _, k := range []string{"A", "B", "C"} {
		for i := range 5 {
			add(t, qs, "rr", k, fmt.Sprintf("%s%d", k, i))
		}
	}
	rec := newRecorder(false)
	w, err := qs.NewWorker("rr", rec)
	if err != nil {
		t.Fatal(err)
	}
	start(t, w)
	for range 15 {
		rec.next(t, 10*time.Second)
	}
	got := strings.Join(rec.Keys(), "")
	if want := strings.Repeat("ABC", 5); got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
	// FIFO within a key.
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, k := range []string{"A", "B", "C"} {
		var ids []string
		for _, id := range rec.order {
			if strings.HasPrefix(id, k) {
				ids = append(ids, id)
			}
		}
		if !slices.IsSorted(ids) {
			t.Errorf("key %s ran %v, want its tasks in the order added", k, ids)
		}
	}
}

// A high task added last runs next, before every normal one waiting.
func TestFairness_HighPriorityGoesFirst(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "prio", func(c *queue.Config) { c.MaxActive = 1 })
	for i := range 4 {
		add(t, qs, "prio", fmt.Sprintf("k%d", i), fmt.Sprintf("n%d", i))
	}
	add(t, qs, "prio", "k9", "low", queue.WithPriority(queue.Low))
	rec := newRecorder(true)
	w, err := qs.NewWorker("prio", rec)
	if err != nil {
		t.Fatal(err)
	}
	start(t, w)
	if got := rec.next(t, 10*time.Second); got.ID != "n0" {
		t.Fatalf("first %s, want n0", got.ID)
	}
	add(t, qs, "prio", "k5", "urgent", queue.WithPriority(queue.High))
	// End n0 by cancelling it, not from here: the worker reads the bucket in
	// order, so it acts on the cancel only after it has seen the urgent task
	// (an add is acknowledged before every watcher has it).
	if _, err := qs.Cancel(ctxT(t, 10*time.Second), "prio", "n0"); err != nil {
		t.Fatal(err)
	}
	if got := rec.next(t, 10*time.Second); got.ID != "urgent" {
		t.Fatalf("after n0: %s, want the high task", got.ID)
	}
	rest, prev := []string{}, "urgent"
	for range 4 {
		rec.end(prev, nil)
		prev = rec.next(t, 10*time.Second).ID
		rest = append(rest, prev)
	}
	if want := []string{"n1", "n2", "n3", "low"}; !slices.Equal(rest, want) {
		t.Fatalf("then %v, want %v (low last)", rest, want)
	}
	rec.end(prev, nil)
}

// A key whose lock is held is skipped without holding up the others:
// 100 tasks for A, then one for B; with max_active 2 B starts among the
// first three.
func TestFairness_HeldKeyDoesNotBlockOthers(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "hol", func(c *queue.Config) { c.MaxActive = 2 })
	for i := range 100 {
		add(t, qs, "hol", "A", fmt.Sprintf("a%03d", i))
	}
	add(t, qs, "hol", "B", "b")
	rec := newRecorder(true)
	w, err := qs.NewWorker("hol", rec, queue.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	start(t, w)
	var first []string
	for range 2 {
		first = append(first, rec.next(t, 10*time.Second).ID)
	}
	rec.none(t, 200*time.Millisecond) // A's lane is held, capacity is 2: nothing else may start
	rec.end("a000", nil)
	first = append(first, rec.next(t, 10*time.Second).ID)
	if want := []string{"a000", "b", "a001"}; !slices.Equal(first, want) && !slices.Equal(first, []string{"b", "a000", "a001"}) {
		t.Fatalf("first three started %v, want %v: B among them, A's one at a time", first, want)
	}
	rec.end("b", nil)
	rec.end("a001", nil)
}
