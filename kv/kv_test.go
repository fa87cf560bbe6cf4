package kv_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
)

func testBucket(t *testing.T) (*kv.Client, *kv.Bucket) {
	t.Helper()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	b, err := c.Ensure(context.Background(), kv.BucketConfig{Name: "test", MarkerTTL: time.Minute})
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	return c, b
}

func outMsgs(c *kv.Client) uint64 { return c.Conn().Stats().OutMsgs }

// r3Bucket starts a 3-server cluster and a client of it (with opts), and
// creates the bucket r3 on all three.
func r3Bucket(t *testing.T, opts ...kv.Option) (*kvtest.Cluster, *kv.Client, *kv.Bucket) {
	t.Helper()
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs(), opts...)
	b, err := c.Ensure(context.Background(), kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	return cl, c, b
}

func TestCreate_FreshKeyIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	c, b := testBucket(t)
	before := outMsgs(c)
	rev, err := b.Create(ctx, "a", []byte("v1"), 5*time.Second)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := outMsgs(c) - before; got != 1 {
		t.Errorf("create sent %d messages, want 1", got)
	}
	e, err := b.Get(ctx, "a")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if e.Revision != rev || string(e.Value) != "v1" || e.TTL != 5*time.Second || e.Op != kv.OpPut {
		t.Errorf("get = %+v, want revision %d value v1 ttl 5s put", e, rev)
	}
}

func TestCreate_LiveKeyConflictCarriesCurrent(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	rev, err := b.Create(ctx, "a", []byte("first"), 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Create(ctx, "a", []byte("second"), 0)
	var ce *kv.ConflictError
	if !errors.Is(err, kv.ErrConflict) || !errors.As(err, &ce) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	if ce.Current == nil || ce.Current.Revision != rev || string(ce.Current.Value) != "first" {
		t.Errorf("conflict current = %+v, want first at %d", ce.Current, rev)
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10071 {
		t.Errorf("conflict does not carry the server error: %v", err)
	}
}

func TestCreate_OverTombstoneGetsLargerRevision(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	r1, err := b.Create(ctx, "a", []byte("x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "a", r1, []byte("bye")); err != nil {
		t.Fatalf("delete: %v", err)
	}
	r2, err := b.Create(ctx, "a", []byte("y"), 0)
	if err != nil {
		t.Fatalf("create over tombstone: %v", err)
	}
	if r2 <= r1 {
		t.Errorf("revision after re-create %d, want > %d", r2, r1)
	}
}

func TestDelete_LeavesExpiringTombstoneWithNote(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	rev, _ := b.Create(ctx, "a", []byte("x"), 0)
	err := b.Delete(ctx, "a", rev+10, []byte("stale"))
	if !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("delete at a wrong revision: %v, want ErrConflict", err)
	}
	if err := b.Delete(ctx, "a", rev, []byte("closed")); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := b.Get(ctx, "a"); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	e, err := b.Latest(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if e.Op != kv.OpDelete || string(e.Value) != "closed" || e.TTL != time.Minute {
		t.Errorf("tombstone = %+v, want delete with note and the marker TTL", e)
	}
	// Deleting again at the old revision is a conflict that shows the
	// tombstone, even with the same note.
	var ce *kv.ConflictError
	if err := b.Delete(ctx, "a", rev, []byte("closed")); !errors.As(err, &ce) || ce.Current == nil || ce.Current.Op != kv.OpDelete {
		t.Errorf("second delete: %v, want a conflict showing the tombstone", err)
	}
}

func TestUpdate_WrongRevisionConflicts(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	r1, _ := b.Create(ctx, "a", []byte("1"), 0)
	r2, err := b.Update(ctx, "a", []byte("2"), 0, r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("update: %d, %v", r2, err)
	}
	var ce *kv.ConflictError
	if _, err := b.Update(ctx, "a", []byte("3"), 0, r1); !errors.As(err, &ce) || ce.Current.Revision != r2 {
		t.Fatalf("stale update: %v, want conflict showing revision %d", err, r2)
	}
	if _, err := b.Update(ctx, "a", []byte("3"), 0, 0); !errors.Is(err, kv.ErrInvalidConfig) {
		t.Errorf("update at revision 0: %v, want ErrInvalidConfig (it would create)", err)
	}
}

func TestUpdate_StaleRevisionConflictsEvenWithTheSameBytes(t *testing.T) {
	// Equal bytes at a later revision mean "my write landed" only after an
	// answer was lost; otherwise a stale writer must see its conflict.
	ctx := context.Background()
	_, b := testBucket(t)
	r1, _ := b.Create(ctx, "a", []byte("same"), 0)
	if err := b.Delete(ctx, "a", r1, []byte("gone")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "a", []byte("same"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, "a", []byte("same"), 0, r1); !errors.Is(err, kv.ErrConflict) {
		t.Errorf("stale update with equal bytes: %v, want ErrConflict", err)
	}
}

func TestUpdate_RenewalKeepsTTLAndExpiryIsSeen(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a TTL")
	}
	ctx := context.Background()
	_, b := testBucket(t)
	w, err := b.Watch(ctx, "a", kv.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev, err := b.Create(ctx, "a", []byte("0"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Renew for three TTLs.
	for i := 1; i <= 8; i++ {
		time.Sleep(400 * time.Millisecond)
		if rev, err = b.Update(ctx, "a", []byte(fmt.Sprint(i)), time.Second, rev); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
	e, err := b.Get(ctx, "a")
	if err != nil || e.TTL != time.Second {
		t.Fatalf("after renewals: %+v, %v; want live with TTL 1s", e, err)
	}
	// Stop renewing: the watcher sees the expiry marker.
	deadline := time.After(3 * time.Second)
	for {
		select {
		case u := <-w.Updates():
			if u != nil && u.Op == kv.OpExpire {
				if u.Key != "a" || u.Revision <= rev {
					t.Errorf("expiry marker %+v", u)
				}
				// A renewal now is refused and does not resurrect the key.
				if _, err := b.Update(ctx, "a", []byte("late"), time.Second, rev); !errors.Is(err, kv.ErrConflict) {
					t.Errorf("renewal after expiry: %v, want ErrConflict", err)
				}
				if _, err := b.Get(ctx, "a"); !errors.Is(err, kv.ErrNotFound) {
					t.Errorf("get after expiry: %v, want ErrNotFound", err)
				}
				return
			}
		case <-deadline:
			t.Fatal("no expiry marker within 3s of a 1s TTL")
		}
	}
}

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
	next := func() *kv.Entry {
		t.Helper()
		select {
		case e := <-w.Updates():
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no update")
			return nil
		}
	}
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

func TestList_LiveEntriesInOneWatch(t *testing.T) {
	ctx := context.Background()
	c, b := testBucket(t)
	const n = 300
	var gone uint64
	for i := range n {
		rev, err := b.Create(ctx, fmt.Sprintf("k%03d", i), []byte("v"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			gone = rev
		}
	}
	if err := b.Delete(ctx, "k007", gone, nil); err != nil {
		t.Fatal(err)
	}
	before := outMsgs(c)
	es, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sent := outMsgs(c) - before; sent > 10 {
		t.Errorf("list sent %d messages for %d keys; want a handful (one watch)", sent, n)
	}
	if len(es) != n-1 {
		t.Fatalf("list has %d entries, want %d", len(es), n-1)
	}
	for i := 1; i < len(es); i++ {
		if es[i-1].Key >= es[i].Key {
			t.Fatalf("not sorted at %d: %s >= %s", i, es[i-1].Key, es[i].Key)
		}
		if es[i].Key == "k007" {
			t.Fatal("deleted key listed")
		}
	}
}

// ListDecoded decodes every live entry once, on several goroutines while
// the listing arrives, keeps each entry's own error, skips tombstones and
// returns the whole in key order; a listing whose context ends fails.
func TestListDecoded_EveryLiveEntryOnceInKeyOrder(t *testing.T) {
	ctx := context.Background()
	_, b := testBucket(t)
	const n = 1000 // several batches
	keys := rand.Perm(n)
	var gone uint64
	for _, i := range keys {
		rev, err := b.Create(ctx, fmt.Sprintf("k%04d", i), []byte(strconv.Itoa(i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			gone = rev
		}
	}
	if err := b.Delete(ctx, "k0007", gone, nil); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	bad := errors.New("a multiple of 100")
	ds, err := kv.ListDecoded(ctx, b, "", func(e kv.Entry) (int, error) {
		calls.Add(1)
		v, err := strconv.Atoi(string(e.Value))
		if err == nil && v%100 == 0 {
			return 0, bad
		}
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != n-1 || calls.Load() != n-1 {
		t.Fatalf("%d results from %d decodes, want %d of each", len(ds), calls.Load(), n-1)
	}
	for i, d := range ds {
		if i > 0 && ds[i-1].Entry.Key >= d.Entry.Key {
			t.Fatalf("not in key order at %d: %s >= %s", i, ds[i-1].Entry.Key, d.Entry.Key)
		}
		if d.Entry.Value != nil {
			t.Fatalf("%s: the listing kept the record's bytes beside what decode made of them", d.Entry.Key)
		}
		want, _ := strconv.Atoi(strings.TrimPrefix(d.Entry.Key, "k"))
		switch {
		case want == 7:
			t.Fatal("a deleted key was listed")
		case want%100 == 0 && !errors.Is(d.Err, bad):
			t.Errorf("%s: error %v, want its decode's", d.Entry.Key, d.Err)
		case want%100 != 0 && (d.Err != nil || d.Out != want):
			t.Errorf("%s decoded to %d, %v; want %d", d.Entry.Key, d.Out, d.Err, want)
		}
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := kv.ListDecoded(done, b, "", func(kv.Entry) (int, error) { return 0, nil }); err == nil {
		t.Error("a listing with its context done succeeded")
	}
}

func TestEnsure_ReportsAndAppliesDifferentSettings(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	js, _ := jetstream.New(c.Conn())
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "odd", TTL: 5 * time.Second, History: 3}); err != nil {
		t.Fatal(err)
	}
	want := kv.BucketConfig{Name: "odd", MarkerTTL: time.Minute}
	_, err := c.Ensure(ctx, want)
	var me *kv.MismatchError
	if !errors.As(err, &me) || !errors.Is(err, kv.ErrBucketMismatch) {
		t.Fatalf("ensure over a different bucket: %v, want MismatchError", err)
	}
	got := map[string]bool{}
	for _, d := range me.Differences {
		got[d.Setting] = true
	}
	for _, s := range []string{"ttl", "history", "marker_ttl"} {
		if !got[s] {
			t.Errorf("difference %q not reported in %v", s, me)
		}
	}
	if err := c.Apply(ctx, want); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if err := c.Check(ctx, want); err != nil {
		t.Errorf("check after apply: %v", err)
	}
}

func TestErrors_MissingBucket(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	b := c.Bucket(kv.BucketConfig{Name: "nope", MarkerTTL: time.Minute})
	if _, err := b.Create(ctx, "a", []byte("x"), 0); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("create: %v", err)
	}
	if _, err := b.Latest(ctx, "a"); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("latest: %v", err)
	}
	if _, err := b.List(ctx); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("list: %v", err)
	}
	if err := c.Check(ctx, b.Config()); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("check: %v", err)
	}
}

func TestErrors_JetStreamDisabled(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.JetStream = false }))
	c := kvtest.Connect(t, s.ClientURL())
	cfg := kv.BucketConfig{Name: "x", MarkerTTL: time.Minute}
	if _, err := c.Ensure(ctx, cfg); !errors.Is(err, kv.ErrJetStreamDisabled) {
		t.Errorf("ensure: %v, want ErrJetStreamDisabled", err)
	}
	if _, err := c.Bucket(cfg).Create(ctx, "a", nil, 0); !errors.Is(err, kv.ErrJetStreamDisabled) {
		t.Errorf("create: %v, want ErrJetStreamDisabled", err)
	}
}

func TestErrors_UnreachableNamesURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := kv.Connect(ctx, kv.WithURL("nats://127.0.0.1:1"), kv.WithTimeout(time.Second))
	if !errors.Is(err, kv.ErrUnavailable) || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Errorf("connect to a closed port: %v, want ErrUnavailable naming the URL", err)
	}
}

func TestReplicated_ConcurrentCreatesOneWinner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	_, _, b := r3Bucket(t)
	const n = 16
	for round := range 20 {
		key := fmt.Sprintf("k%d", round)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = b.Create(ctx, key, []byte(fmt.Sprint(i)), 0)
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, kv.ErrConflict):
				t.Fatalf("round %d: %v, want nil or ErrConflict", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners", round, wins)
		}
	}
}

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

func TestCAS_AWriteWhoseAnswerWasLostIsRecognised(t *testing.T) {
	ctx := context.Background()
	c, b := testBucket(t)

	kv.DropAnswers(c, 1)
	rev, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatalf("create whose answer was lost: %v", err)
	}
	if e, _ := b.Get(ctx, "a"); e.Revision != rev || string(e.Value) != "v1" {
		t.Fatalf("create: got %+v, want v1 at %d", e, rev)
	}

	kv.DropAnswers(c, 1)
	rev2, err := b.Update(ctx, "a", []byte("v2"), 0, rev)
	if err != nil || rev2 <= rev {
		t.Fatalf("update whose answer was lost: %d, %v", rev2, err)
	}

	kv.DropAnswers(c, 1)
	if err := b.Delete(ctx, "a", rev2, []byte("bye")); err != nil {
		t.Fatalf("delete whose answer was lost: %v", err)
	}
	if _, err := b.Get(ctx, "a"); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	// A write whose answer is lost and that lost its CAS too is a conflict,
	// not a success.
	other, _ := b.Create(ctx, "b", []byte("theirs"), 0)
	kv.DropAnswers(c, 1)
	if _, err := b.Update(ctx, "b", []byte("mine"), 0, other+100); !errors.Is(err, kv.ErrConflict) {
		t.Errorf("stale update with a lost answer: %v, want ErrConflict", err)
	}
}

func TestApply_KeepsReplicasUnlessAsked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs())
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	// Another marker TTL, replicas "as they are": applying keeps all three.
	want := kv.BucketConfig{Name: "r3", MarkerTTL: 5 * time.Minute}
	var me *kv.MismatchError
	if err := c.Check(ctx, want); !errors.As(err, &me) || len(me.Differences) != 1 || me.Differences[0].Setting != "marker_ttl" {
		t.Fatalf("check: %v, want only the marker TTL to differ", err)
	}
	if err := c.Apply(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(ctx, kv.BucketConfig{Name: "r3", MarkerTTL: 5 * time.Minute, Replicas: 3}); err != nil {
		t.Errorf("after apply: %v, want 3 replicas kept", err)
	}
}

func TestConnect_NeverEchoesAPassword(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"nats://bob:s3cretpw@bad host:4222",
		"nats://a:4222,nats://bob:s3cret%zz@b:4222",
		"nats://bob:s3cretpw@127.0.0.1:1",
	} {
		_, err := kv.Connect(ctx, kv.WithURL(u), kv.WithTimeout(time.Second))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("connect %q: %v (must fail without the password)", "***", err)
		}
	}
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.Username, o.Password = "alice", "right-one" }))
	_, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithUserPassword("alice", "wrong-one"))
	if !errors.Is(err, kv.ErrPermission) || strings.Contains(err.Error(), "wrong-one") {
		t.Errorf("wrong password: %v, want ErrPermission without the password", err)
	}
	c, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithUserPassword("alice", "right-one"))
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	c.Close()
}

func TestCreateAfter_OverASeenTombstoneIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	c, b := testBucket(t)
	r1, _ := b.Create(ctx, "a", []byte("1"), 0)
	if err := b.Delete(ctx, "a", r1, []byte("gone")); err != nil {
		t.Fatal(err)
	}
	tomb, _ := b.Latest(ctx, "a")
	before := outMsgs(c)
	r2, err := b.CreateAfter(ctx, "a", []byte("2"), 0, tomb.Revision)
	if err != nil || r2 <= tomb.Revision {
		t.Fatalf("create after the tombstone: %d, %v", r2, err)
	}
	if sent := outMsgs(c) - before; sent != 1 {
		t.Errorf("sent %d messages, want 1", sent)
	}
	// A stale tombstone revision falls back to Create's checks: the live
	// value is not overwritten.
	if _, err := b.CreateAfter(ctx, "a", []byte("3"), 0, tomb.Revision); !errors.Is(err, kv.ErrConflict) {
		t.Errorf("create after a stale revision: %v, want ErrConflict", err)
	}
	if e, _ := b.Get(ctx, "a"); string(e.Value) != "2" {
		t.Errorf("value %q, want 2", e.Value)
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

func TestCAS_AWriteRefusedAsInProgressIsSentAgain(t *testing.T) {
	ctx := context.Background()
	c, b := testBucket(t)
	rev, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	kv.RefuseInProgress(c, 3)
	rev2, err := b.Update(ctx, "a", []byte("v2"), 0, rev)
	if err != nil {
		t.Fatalf("update refused three times as in progress: %v, want it sent again until it lands", err)
	}
	if got := kv.InProgressRetries(c); got != 3 {
		t.Errorf("sent again %d times, want 3", got)
	}
	kv.RefuseInProgress(c, 2)
	if _, err := b.Create(ctx, "b", []byte("x"), 0); err != nil {
		t.Fatalf("create refused twice as in progress: %v", err)
	}
	kv.RefuseInProgress(c, 2)
	if err := b.Delete(ctx, "a", rev2, []byte("bye")); err != nil {
		t.Fatalf("delete refused twice as in progress: %v", err)
	}
	if e, err := b.Latest(ctx, "a"); err != nil || e.Op != kv.OpDelete || e.Revision <= rev2 {
		t.Fatalf("after the delete: %+v, %v; want its tombstone", e, err)
	}
}

func TestCAS_RefusedAsInProgressUntilTheDeadlineIsUnavailableNotAConflict(t *testing.T) {
	c, b := testBucket(t)
	rev, err := b.Create(context.Background(), "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	kv.RefuseInProgress(c, 1<<30)
	t.Cleanup(func() { kv.RefuseInProgress(c, 0) })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = b.Update(ctx, "a", []byte("v2"), 0, rev)
	if !errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrConflict) {
		t.Fatalf("update refused until its deadline: %v, want ErrUnavailable (the key did not change)", err)
	}
	if !strings.Contains(err.Error(), "in progress") {
		t.Errorf("error %q does not say why", err)
	}
	kv.RefuseInProgress(c, 0)
	if e, err := b.Get(context.Background(), "a"); err != nil || e.Revision != rev {
		t.Fatalf("after: %+v, %v; want v1 untouched at %d", e, err, rev)
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

// A bucket whose replicas cannot be placed (too few servers of the cluster
// up, or known to the meta leader as the cluster forms) is asked for again
// until the call's deadline; past it, the answer is that the servers are
// unavailable, and says what to do.
func TestEnsure_ReplicasThatCannotBePlacedAreUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Ensure(ctx, kv.BucketConfig{Name: "placed", MarkerTTL: time.Minute, Replicas: 5})
	if !errors.Is(err, kv.ErrUnavailable) || !strings.Contains(err.Error(), "fewer than 5 servers") {
		t.Fatalf("5 replicas on 3 servers: %v, want ErrUnavailable naming the 5 servers", err)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("gave up after %s, before the call's deadline", waited)
	}
}
