package queue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// A key of weight 3 is served three times as often as a key of weight 1
// while both have work: 3:1 within 10% over 400 tasks.
func TestKeySet_WeightsBiasTheRoundRobin(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.MaxActive = 1 })
	ctx := ctxT(t, 60*time.Second)
	if _, err := qs.SetKey(ctx, "q", "heavy", func(k *queue.KeyConfig) error { k.Weight = 3; return nil }); err != nil {
		t.Fatal(err)
	}
	var tasks []queue.NewTask
	for i := range 300 {
		tasks = append(tasks, queue.NewTask{Key: "heavy", Options: []queue.AddOption{queue.WithID(fmt.Sprintf("h%d", i))}},
			queue.NewTask{Key: "light", Options: []queue.AddOption{queue.WithID(fmt.Sprintf("l%d", i))}})
	}
	if _, err := qs.AddBatch(ctx, "q", tasks); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	enough := make(chan struct{})
	w, _ := qs.NewWorker("q", queue.HandlerFunc(func(_ context.Context, task *queue.Task) error {
		mu.Lock()
		defer mu.Unlock()
		if order = append(order, task.Key); len(order) == 400 {
			close(enough)
		}
		return nil
	}))
	start(t, w)
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatal("400 tasks did not run within a minute")
	}
	mu.Lock()
	heavy := 0
	for _, k := range order[:400] {
		if k == "heavy" {
			heavy++
		}
	}
	mu.Unlock()
	if ratio := float64(heavy) / float64(400-heavy); ratio < 2.7 || ratio > 3.3 {
		t.Errorf("heavy %d, light %d of the first 400: ratio %.2f, want 3 within 10%%", heavy, 400-heavy, ratio)
	}
	t.Logf("heavy %d, light %d", heavy, 400-heavy)
}

// A key's own per_key of 3 runs three of its tasks at once, never four,
// while the queue's per_key stays 1 for the others.
func TestKeySet_OwnPerKey(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	if _, err := qs.SetKey(ctx, "q", "vip", func(k *queue.KeyConfig) error { k.PerKey = 3; return nil }); err != nil {
		t.Fatal(err)
	}
	var running, most atomic.Int32
	release := make(chan struct{})
	started := make(chan string, 64)
	w, _ := qs.NewWorker("q", queue.HandlerFunc(func(ctx context.Context, task *queue.Task) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		started <- task.Key
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}), queue.WithConcurrency(8))
	start(t, w)
	for i := range 6 {
		add(t, qs, "q", "vip", fmt.Sprintf("v%d", i))
	}
	add(t, qs, "q", "free", "f0")
	add(t, qs, "q", "free", "f1")
	got := map[string]int{}
	for range 4 { // three of vip's, one of free's
		select {
		case k := <-started:
			got[k]++
		case <-time.After(5 * time.Second):
			t.Fatalf("started %v; want three of vip's and one of free's", got)
		}
	}
	select {
	case k := <-started:
		t.Fatalf("a fifth task (key %s) started: vip runs 3 at once, free 1", k)
	case <-time.After(500 * time.Millisecond):
	}
	if got["vip"] != 3 || got["free"] != 1 {
		t.Fatalf("started %v; want three of vip's and one of free's", got)
	}
	close(release)
	for range 4 {
		<-started
	}
	if most.Load() != 4 {
		t.Errorf("at most %d ran at once, want 4 (three of vip's, one of free's)", most.Load())
	}
	if _, err := qs.SetKey(ctx, "q", "vip", func(k *queue.KeyConfig) error { k.PerKey = 2000; return nil }); err == nil {
		t.Error("per_key 2000 accepted, want a refusal")
	}
}
