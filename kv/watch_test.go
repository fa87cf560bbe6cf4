package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

func TestWatch_InitialValuesThenChanges(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	r1, _ := b.Create(ctx, "a", []byte("1"), 0)
	b.Create(ctx, "b", []byte("1"), 0)
	w, err := b.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() *kv.Entry { t.Helper(); return nextUpdate(t, w) }
	if a, bb, end := next(), next(), next(); a == nil || bb == nil || end != nil || a.Key != "a" || bb.Key != "b" {
		t.Fatalf("initial = %v %v %v, want a, b, nil", a, bb, end)
	}
	b.Delete(ctx, "a", r1, []byte("note"))
	if e := next(); e.Key != "a" || e.Op != kv.OpDelete || string(e.Value) != "note" {
		t.Errorf("delete event = %+v", e)
	}
}

func TestWatch_EmptyBucketSignalsEndOfInitialValues(t *testing.T) {
	_, b := testBucket(t)
	w, err := b.Watch(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case e := <-w.Updates():
		if e != nil {
			t.Errorf("first update %+v, want nil marker", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no end-of-initial marker")
	}
}

// A holder that lost its lease stops its watch on the way to stopping its
// work: the watch's clean-up on the server (deleting its consumer, a
// request with a timeout of seconds) must not hold Stop up when the server
// does not answer.
func TestWatch_StopDoesNotWaitForAServerThatIsGone(t *testing.T) {
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	b, err := c.Ensure(context.Background(), kv.BucketConfig{Name: "test", MarkerTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Watch(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if e := <-w.Updates(); e != nil {
		t.Fatalf("initial values of an empty bucket: %+v, want the end marker", e)
	}
	s.Shutdown() // the client reconnects: requests wait in its buffer
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Second): // the consumer delete waits 5 s
		t.Fatal("Stop waited for the server")
	}
	for range w.Updates() {
	}
}

func TestWatch_StopsWithContext(t *testing.T) {
	_, b := testBucket(t)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := b.Watch(ctx, "", kv.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range w.Updates() {
	}
}

// A watch that ends while entries are still being delivered (its context
// done, even while Watch sets it up, Stop, the subscription closed) closes
// Updates once, and never sends on it afterwards.
func TestWatch_EndingWhileDeliveringIsClean(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	for i := range 50 {
		if _, err := b.Create(ctx, fmt.Sprint("k", i), []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		wctx, cancel := context.WithCancel(ctx)
		if i%3 == 0 {
			// Done while the watch is being set up, entries on their way.
			time.AfterFunc(time.Duration(i%50)*20*time.Microsecond, cancel)
		}
		w, err := b.Watch(wctx, "")
		if err != nil {
			cancel()
			continue // ended before it began: nothing to check
		}
		// End it at a different point each time: at once, after some
		// entries, by Stop or by the context.
		read := i % 7
		for e := range w.Updates() {
			if read == 0 {
				break
			}
			read--
			_ = e
		}
		if i%2 == 0 {
			w.Stop()
		}
		cancel()
		for range w.Updates() {
		}
	}
}

// A watch of several patterns gets the current values and the changes of
// the keys matching any of them, and nothing of the others.
func TestWatchPatterns_OnlyTheKeysThatMatch(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	revs := map[string]uint64{}
	for _, k := range []string{"q.task.1", "q.inbox.w1", "q.config", "r.task.1"} {
		rev, err := b.Create(ctx, k, []byte("1"), 0)
		if err != nil {
			t.Fatal(err)
		}
		revs[k] = rev
	}
	w, err := b.WatchPatterns(ctx, []string{"q.task.>", "q.config"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() *kv.Entry { t.Helper(); return nextUpdate(t, w) }
	// The current values, in stream order, then the end marker.
	if a, c, end := next(), next(), next(); a == nil || c == nil || end != nil || a.Key != "q.task.1" || c.Key != "q.config" {
		t.Fatalf("initial = %v %v %v, want q.task.1, q.config, nil", a, c, end)
	}
	if _, err := b.Update(ctx, "q.inbox.w1", []byte("2"), 0, revs["q.inbox.w1"]); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"r.task.2", "q.inbox.w2", "q.task.2"} {
		if _, err := b.Create(ctx, k, []byte("2"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Update(ctx, "q.config", []byte("2"), 0, revs["q.config"]); err != nil {
		t.Fatal(err)
	}
	if e := next(); e.Key != "q.task.2" {
		t.Fatalf("first change: %s, want q.task.2 (no inbox, no other queue)", e.Key)
	}
	if e := next(); e.Key != "q.config" || string(e.Value) != "2" {
		t.Fatalf("second change: %s=%s, want q.config=2", e.Key, e.Value)
	}
	if _, err := b.WatchPatterns(ctx, nil); !errors.Is(err, kv.ErrInvalidKey) {
		t.Fatalf("a watch of no pattern: %v, want ErrInvalidKey", err)
	}
}

// nextUpdate is w's next entry (nil: the end of the current values),
// failing the test if none comes within 5s.
func nextUpdate(t *testing.T, w *kv.Watcher) *kv.Entry {
	t.Helper()
	select {
	case e := <-w.Updates():
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no update")
		return nil
	}
}
