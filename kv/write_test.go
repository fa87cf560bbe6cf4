package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

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

// A delete through a handle that knows its bucket keeps one revision per
// key is a purge without a rollup (adr/0038): the tombstone still replaces
// the value (and the value's own TTL never fires), and once the
// tombstone's TTL passes the key holds nothing, with no marker added for
// it. A handle that does not know keeps the rollup.
func TestDelete_TombstoneReplacesTheValueAndGoesWithoutAMarker(t *testing.T) {
	ctx := context.Background()
	c, b, js := streamBucket(t, "tomb")
	cfg := b.Config()
	stream, err := js.Stream(ctx, "KV_tomb")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := b.Create(ctx, "a", []byte("held"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "a", rev, []byte("closed")); err != nil {
		t.Fatal(err)
	}
	e, err := b.Latest(ctx, "a")
	if err != nil || e.Op != kv.OpDelete || string(e.Value) != "closed" {
		t.Fatalf("latest after delete = %+v, %v; want the tombstone", e, err)
	}
	tomb := e.Revision
	if rollup := rollupOf(ctx, t, stream, "$KV.tomb.a"); rollup != "" {
		t.Errorf("the tombstone of a handle from Ensure carries Nats-Rollup %q, want none", rollup)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("the stream holds %d messages after the delete, want 1 (the tombstone alone)", info.State.Msgs)
	}
	// The tombstone goes after its second; the value's 2 s would have
	// ended meanwhile had it stayed. Wait past both.
	info = waitEmpty(ctx, t, stream, e.Created.Add(3*time.Second))
	if info.State.LastSeq != tomb {
		t.Errorf("last sequence %d after the tombstone went, want %d: the server added a marker", info.State.LastSeq, tomb)
	}
	if _, err := b.Latest(ctx, "a"); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("latest after the tombstone went: %v, want ErrNotFound", err)
	}

	// A handle that was not told keeps the rollup; LearnHistory tells it.
	plain := c.Bucket(cfg)
	rev, _ = plain.Create(ctx, "b", []byte("held"), 0)
	if err := plain.Delete(ctx, "b", rev, nil); err != nil {
		t.Fatal(err)
	}
	if rollup := rollupOf(ctx, t, stream, "$KV.tomb.b"); rollup != "sub" {
		t.Errorf("the tombstone of a handle that does not know the history carries Nats-Rollup %q, want sub", rollup)
	}
	if err := plain.LearnHistory(ctx); err != nil {
		t.Fatal(err)
	}
	rev, _ = plain.Create(ctx, "c", []byte("held"), 0)
	if err := plain.Delete(ctx, "c", rev, nil); err != nil {
		t.Fatal(err)
	}
	if rollup := rollupOf(ctx, t, stream, "$KV.tomb.c"); rollup != "" {
		t.Errorf("after LearnHistory the tombstone carries Nats-Rollup %q, want none", rollup)
	}
}

// A bucket whose history was raised by hand (nats kv edit --history) keeps
// older revisions under a tombstone unless the delete rolls them up: a
// handle that learns the history keeps the rollup, and the deleted value
// does not come back when the tombstone goes.
func TestDelete_ABucketWithMoreHistoryLosesTheValueForGood(t *testing.T) {
	ctx := context.Background()
	c, ensured, js := streamBucket(t, "hist")
	stream, err := js.Stream(ctx, "KV_hist")
	if err != nil {
		t.Fatal(err)
	}
	sc := stream.CachedInfo().Config
	sc.MaxMsgsPerSubject = 5
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b := c.Bucket(ensured.Config())
	if err := b.LearnHistory(ctx); err != nil {
		t.Fatal(err)
	}
	r1, _ := b.Create(ctx, "a", []byte("v1"), 0)
	r2, err := b.Update(ctx, "a", []byte("v2"), 0, r1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "a", r2, []byte("closed")); err != nil {
		t.Fatal(err)
	}
	if rollup := rollupOf(ctx, t, stream, "$KV.hist.a"); rollup != "sub" {
		t.Errorf("the tombstone in a bucket of history 5 carries Nats-Rollup %q, want sub", rollup)
	}
	waitEmpty(ctx, t, stream, time.Time{})
	if e, err := b.Get(ctx, "a"); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("get after the tombstone went = %+v, %v; want ErrNotFound, not an older revision back", e, err)
	}
}

// streamBucket starts a server and ensures bucket name on it, with a
// marker TTL of a second, for tests that read its stream.
func streamBucket(t *testing.T, name string) (*kv.Client, *kv.Bucket, jetstream.JetStream) {
	t.Helper()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	b, err := c.Ensure(context.Background(), kv.BucketConfig{Name: name, MarkerTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(c.Conn())
	if err != nil {
		t.Fatal(err)
	}
	return c, b, js
}

// waitEmpty waits until stream holds no message and not before, within
// 10 s of being called, and returns its info then.
func waitEmpty(ctx context.Context, t *testing.T, stream jetstream.Stream, notBefore time.Time) *jetstream.StreamInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 && time.Now().After(notBefore) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream still holds %d messages after 10s", info.State.Msgs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rollupOf is the Nats-Rollup header of subject's last stored message.
func rollupOf(ctx context.Context, t *testing.T, s jetstream.Stream, subject string) string {
	t.Helper()
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	return m.Header.Get("Nats-Rollup")
}
