package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

func TestReplicated_ReadsComeFromTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	cl := kvtest.StartCluster(t, 3)
	setup := kvtest.Connect(t, cl.URLs())
	if _, err := setup.Ensure(ctx, kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	leader := cl.StreamLeader("KV_r3")
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	// Write through one follower and read through the other.
	var w, r int
	for i := range cl.Servers {
		if i != leader {
			if w == r {
				r = i
			}
			w = i
		}
	}
	wc := kvtest.Connect(t, cl.Servers[w].ClientURL(), kv.WithNATSOptions(nats.DontRandomize()))
	rc := kvtest.Connect(t, cl.Servers[r].ClientURL(), kv.WithNATSOptions(nats.DontRandomize()))
	wb, rb := wc.Bucket(kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute}), rc.Bucket(kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute})
	rev, err := wb.Create(ctx, "k", []byte("0"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 300; i++ {
		if rev, err = wb.Update(ctx, "k", []byte(fmt.Sprint(i)), 0, rev); err != nil {
			t.Fatal(err)
		}
		e, err := rb.Latest(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if e.Revision != rev {
			t.Fatalf("read %d after update %d: revision %d, want %d (stale)", i, i, e.Revision, rev)
		}
	}
}

// A read answered 503 (a stream or the meta group between leaders) is asked
// again until its deadline, then reported unavailable.
func TestRead_ATransientAnswerIsAskedAgain(t *testing.T) {
	ctx := context.Background()
	c, b := testBucket(t)
	rev, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	kv.ReadsUnavailable(c, 3)
	if e, err := b.Get(ctx, "a"); err != nil || e.Revision != rev {
		t.Fatalf("read answered 503 three times: %+v, %v; want revision %d", e, err, rev)
	}
	if got := kv.ReadRetries(c); got != 3 {
		t.Errorf("asked again %d times, want 3", got)
	}
	kv.ReadsUnavailable(c, 1<<30)
	t.Cleanup(func() { kv.ReadsUnavailable(c, 0) })
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := b.Get(dctx, "a"); !errors.Is(err, kv.ErrUnavailable) || !strings.Contains(err.Error(), "temporarily unavailable") {
		t.Fatalf("read answered 503 until its deadline: %v, want ErrUnavailable saying so", err)
	}
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	if _, err := b.Status(sctx); !errors.Is(err, kv.ErrUnavailable) || !strings.Contains(err.Error(), "temporarily unavailable") {
		t.Fatalf("status answered 503 until its deadline: %v, want ErrUnavailable saying so", err)
	}
}

// A caller that knows the key had a revision (its own session's fence) does
// not take an older answer at once in a cluster, where only a cut-off former
// leader gives one: it asks again until the key shows that revision, and
// after the wait it was given takes the answer as it is, from a leader in
// touch with the others. On a single server the answer is current: nothing
// to wait for.
func TestLatestAtLeast_AsksAgainInAClusterUntilTheRevisionIsThere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	_, c, b := r3Bucket(t)
	rev, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := b.LatestAtLeast(ctx, "a", rev, time.Minute); err != nil || e.Revision != rev {
		t.Fatalf("at least %d: %+v, %v", rev, e, err)
	}

	before := kv.ReadRetries(c)
	if e, err := b.LatestAtLeast(ctx, "a", rev+1, 200*time.Millisecond); err != nil || e.Revision != rev {
		t.Fatalf("a revision the key never reached: %+v, %v; want the answer as it is after the wait", e, err)
	}
	if kv.ReadRetries(c) == before {
		t.Error("an answer older than the revision given was not asked again")
	}

	before = kv.ReadRetries(c)
	got := make(chan kv.Entry, 1)
	go func() {
		e, err := b.LatestAtLeast(ctx, "a", rev+1, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	for kv.ReadRetries(c) == before { // it has seen the old revision and asks again
		time.Sleep(time.Millisecond)
	}
	rev2, err := b.Update(ctx, "a", []byte("v2"), 0, rev)
	if err != nil {
		t.Fatal(err)
	}
	if e := <-got; e.Revision != rev2 || string(e.Value) != "v2" {
		t.Fatalf("got %+v, want v2 at %d", e, rev2)
	}
	if _, err := b.LatestAtLeast(ctx, "missing", 5, 200*time.Millisecond); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("a key with no message: %v, want ErrNotFound after the wait", err)
	}

	single, sb := testBucket(t)
	srev, err := sb.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := sb.LatestAtLeast(ctx, "a", srev+1, time.Minute); err != nil || e.Revision != srev || kv.ReadRetries(single) != 0 {
		t.Errorf("single server: %+v, %v, %d retries; want the current answer at once", e, err, kv.ReadRetries(single))
	}
}

// A stream leader cut off from the other copies goes on answering reads
// until it notices, seconds later: an answer older than the revision the
// caller knows the key had is then not taken as it is but is unavailable,
// and says why. Here the two other servers stop, so the leader's answers
// are not stale, but it cannot show they are not.
func TestLatestAtLeast_AnOlderAnswerFromACutOffLeaderIsUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	cl, _, b := r3Bucket(t)
	rev, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	leader := cl.StreamLeader("KV_r3")
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	lc := kvtest.Connect(t, cl.Servers[leader].ClientURL())
	lb := lc.Bucket(b.Config())
	if _, err := lb.Status(ctx); err != nil { // the client learns it is clustered
		t.Fatal(err)
	}
	for i := range cl.Servers {
		if i != leader {
			cl.Stop(i)
		}
	}
	// Wait until the leader reports the others silent (it steps down only
	// after 10 s without a majority).
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := lb.Status(ctx)
		if err != nil {
			t.Fatalf("status of the leader left alone: %v", err)
		}
		if !kv.InTouch(st) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader still reports the stopped servers in touch: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = lb.LatestAtLeast(ctx, "a", rev+1, 100*time.Millisecond)
	if !errors.Is(err, kv.ErrUnavailable) || !strings.Contains(err.Error(), "older than revision") {
		t.Fatalf("read from a leader cut off from the others: %v; want ErrUnavailable naming the revision", err)
	}
	_, err = lb.LatestAtLeast(ctx, "never", 1, 100*time.Millisecond)
	if !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("a key the cut-off leader has no message of: %v; want ErrUnavailable, not ErrNotFound", err)
	}
	if e, err := lb.LatestAtLeast(ctx, "a", rev, 100*time.Millisecond); err != nil || e.Revision != rev {
		t.Fatalf("an answer as recent as the revision known: %+v, %v; want it as it is", e, err)
	}
}
