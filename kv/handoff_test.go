package kv_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/lease"
)

// casWriter holds a key by updating it every period, each write a
// compare-and-set on the revision the previous one returned, and records

// roll is a rolling restart's set-up: a 3-server cluster, a bucket on all
// three whose key a casWriter holds, a lease with a 2s TTL, and the order
// in which to restart the servers (the written stream's leader first).
type roll struct {
	cl      *kvtest.Cluster
	b       *kv.Bucket
	held    *lease.Lease
	buckets []string
	streams []string
	w       *casWriter
	order   []int
}

func startRoll(tb testing.TB, tolerant bool) *roll {
	tb.Helper()
	ctx := context.Background()
	cl := kvtest.StartCluster(tb, 3)
	c := kvtest.Connect(tb, cl.URLs())
	cfg := kv.BucketConfig{Name: "roll", MarkerTTL: time.Minute, Replicas: 3}
	b, err := c.Ensure(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ls, err := lease.New(c, lease.WithInstance("holder"), lease.WithHostID("h"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := ls.Ensure(ctx, 3); err != nil {
		tb.Fatal(err)
	}
	held, err := ls.Acquire(ctx, "held", lease.WithTTL(2*time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = held.Release(context.Background()) })
	r := &roll{cl: cl, b: b, held: held,
		buckets: []string{cfg.Name, ls.Bucket().Name()},
		streams: []string{"KV_" + cfg.Name, "KV_" + ls.Bucket().Name()}}
	r.w = startCASWriter(tb, b, "k", 50*time.Millisecond, tolerant)
	r.w.acks(tb, 3)
	r.order = []int{cl.StreamLeader(r.streams[0])}
	for i := range cl.Servers {
		if i != r.order[0] {
			r.order = append(r.order, i)
		}
	}
	return r
}

// the acknowledgements.
type casWriter struct {
	b        *kv.Bucket
	key      string
	tolerant bool // go on after an error (from the key's latest revision): benchmarks
	stop     chan struct{}
	done     chan struct{}

	mu      sync.Mutex
	rev     uint64
	value   string
	acked   int
	last    time.Time
	maxGap  time.Duration
	errs    []error
	waiters []chan struct{} // closed at the next acknowledgement
}

func startCASWriter(tb testing.TB, b *kv.Bucket, key string, period time.Duration, tolerant bool) *casWriter {
	tb.Helper()
	rev, err := b.Create(context.Background(), key, []byte("w0"), 0)
	if err != nil {
		tb.Fatal(err)
	}
	w := &casWriter{b: b, key: key, tolerant: tolerant, stop: make(chan struct{}), done: make(chan struct{}), rev: rev, value: "w0", last: time.Now()}
	go w.run(period)
	tb.Cleanup(w.halt)
	return w
}

func (w *casWriter) run(period time.Duration) {
	defer close(w.done)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		value := fmt.Sprintf("w%d", i)
		w.mu.Lock()
		rev := w.rev
		w.mu.Unlock()
		newRev, err := w.b.Update(context.Background(), w.key, []byte(value), 0, rev)
		w.mu.Lock()
		if err != nil {
			// A wrong answer shows here: a conflict means an earlier write
			// reported lost had landed, or one reported landed had not.
			w.errs = append(w.errs, fmt.Errorf("update %d on revision %d: %w", i, rev, err))
			w.mu.Unlock()
			if !w.tolerant {
				return
			}
			if e, err := w.b.Get(context.Background(), w.key); err == nil {
				w.mu.Lock()
				w.rev, w.value = e.Revision, string(e.Value)
				w.mu.Unlock()
			}
			continue
		}
		now := time.Now()
		w.maxGap = max(w.maxGap, now.Sub(w.last))
		w.last, w.rev, w.value = now, newRev, value
		w.acked++
		for _, ch := range w.waiters {
			close(ch)
		}
		w.waiters = nil
		w.mu.Unlock()
	}
}

// acks waits for n more acknowledgements.
func (w *casWriter) acks(t testing.TB, n int) {
	t.Helper()
	for range n {
		w.mu.Lock()
		if len(w.errs) > 0 && !w.tolerant {
			w.mu.Unlock()
			t.Fatalf("the writer stopped: %v", w.errs)
		}
		ch := make(chan struct{})
		w.waiters = append(w.waiters, ch)
		w.mu.Unlock()
		select {
		case <-ch:
		case <-w.done:
			t.Fatalf("the writer stopped: %v", w.errs)
		case <-time.After(30 * time.Second):
			t.Fatal("no write acknowledged in 30s")
		}
	}
}

func (w *casWriter) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// A rolling restart of a 3-server cluster, each server stopped after
// HandOff (as `baton up` does): the stream leader first, then the others in
// turn. A key CAS-updated every 50 ms never sees a wrong answer or a long
// pause, and a lease with a 2s TTL is never lost. (How fast a handoff is
// is measured by BenchmarkRollingRestart, not here.)
func TestHandOff_RollingRestartPausesNoWriteAndLosesNoLease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	r := startRoll(t, false)
	cl, b, held, buckets, streams, w, order := r.cl, r.b, r.held, r.buckets, r.streams, r.w, r.order
	if order[0] < 0 {
		t.Fatal("no stream leader")
	}
	for _, i := range order {
		name := cl.Servers[i].Name()
		// As `baton up` does: its own client, connected to the server.
		own := kvtest.Connect(t, cl.Servers[i].ClientURL(), kv.WithNATSOptions(nats.DontRandomize()))
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		moved, err := own.HandOff(hctx, name, buckets...)
		cancel()
		if err != nil {
			t.Fatalf("hand off %s: %v", name, err)
		}
		for _, h := range moved {
			t.Logf("%s handed %s to %s in %s", name, h.Stream, h.To, h.Took)
			if h.From != name || h.To == name || h.To == "" {
				t.Errorf("handoff %+v", h)
			}
		}
		for _, st := range streams {
			if cl.StreamLeader(st) == i {
				t.Errorf("%s still leads %s after its handoff", name, st)
			}
		}
		own.Close()
		cl.Stop(i)
		w.acks(t, 5) // writes go on without it
		cl.Restart(i)
		cl.WaitCurrent(i, 30*time.Second, streams...)
		w.acks(t, 5)
	}
	w.halt()

	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%d writes acknowledged; the longest gap between two: %s", w.acked, w.maxGap)
	if len(w.errs) > 0 {
		t.Fatalf("writes answered wrongly or not at all: %v", w.errs)
	}
	e, err := b.Get(ctx, "k")
	if err != nil || e.Revision != w.rev || string(e.Value) != w.value {
		t.Errorf("the key holds %q at %d (%v), the last acknowledged write was %q at %d", e.Value, e.Revision, err, w.value, w.rev)
	}
	// Well under the lease's TTL, which a gap of one election (4-9s) or of
	// an attempt's timeout (2.5s) would not be; loose enough for a loaded
	// machine under -race.
	if w.maxGap > 1500*time.Millisecond {
		t.Errorf("writes paused for %s during the rolling restart", w.maxGap)
	}
	select {
	case <-held.Done():
		t.Errorf("the lease was lost during the rolling restart: %v", held.Err())
	default:
	}
}

// A server that leads nothing has nothing to move; one whose streams
// cannot do without it (a bucket with one replica) is ErrHandOff at once.
func TestHandOff_MovesOnlyWhatTheServerHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs())
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "r1", MarkerTTL: time.Minute, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	leader, r1 := cl.StreamLeader("KV_r3"), cl.StreamLeader("KV_r1")
	if leader < 0 || r1 < 0 {
		t.Fatal("no stream leader")
	}
	follower := (leader + 1) % 3

	// Bounded as `baton up` bounds it: the quorum of a fresh stream's copies
	// shows within a heartbeat.
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	moved, err := c.HandOff(hctx, cl.Servers[follower].Name(), "r3")
	if err != nil || len(moved) != 0 {
		t.Errorf("a follower's handoff: %+v, %v; want nothing moved", moved, err)
	}
	if cl.StreamLeader("KV_r3") != leader {
		t.Errorf("a follower's handoff moved the leader")
	}

	start := time.Now()
	moved, err = c.HandOff(hctx, cl.Servers[r1].Name(), "r1", "r3")
	if !errors.Is(err, kv.ErrHandOff) {
		t.Errorf("handoff of a single copy: %v, want ErrHandOff", err)
	}
	for _, h := range moved {
		if h.Bucket != "r3" || r1 != leader {
			t.Errorf("moved %+v", h)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("a single copy was waited for %s", time.Since(start))
	}
	if _, err := c.HandOff(ctx, "", "r3"); !errors.Is(err, kv.ErrInvalidConfig) {
		t.Errorf("no server: %v, want ErrInvalidConfig", err)
	}
	if _, err := c.HandOff(hctx, cl.Servers[0].Name(), "missing"); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("missing bucket: %v, want ErrBucketNotFound", err)
	}
}

// Stopping the whole cluster: once a server is down, the others cannot
// keep their streams' quorum without themselves, and say so once it has
// been offline for 3 s, instead of waiting out their bound.
func TestHandOff_DoesNotWaitForStoppedServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs())
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	leader := cl.StreamLeader("KV_r3")
	others := slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == leader })
	cl.Stop(others[0])
	cl.WaitCurrent(leader, 30*time.Second) // a meta leader without the stopped server
	start := time.Now()
	hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := c.HandOff(hctx, cl.Servers[leader].Name(), "r3")
	if !errors.Is(err, kv.ErrHandOff) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("handoff with a copy on a stopped server: %v, want ErrHandOff at once", err)
	}
	t.Logf("%v after %s", err, time.Since(start))
}
