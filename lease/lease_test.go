package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/lease"
)

func TestTryAcquire_OneRoundTripFenceAndHolder(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := e.leases("inst-a", "h1")
	before := e.client.Conn().Stats().OutMsgs
	l, err := a.TryAcquire(ctx, "job", lease.WithTTL(5*time.Second), lease.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if sent := e.client.Conn().Stats().OutMsgs - before; sent != 1 {
		t.Errorf("acquire sent %d messages, want 1", sent)
	}
	if l.Fence() == 0 || l.Fence() != l.Revision() || l.Record().Holder != "inst-a" || l.TTL() != 5*time.Second {
		t.Errorf("lease fence %d rev %d record %+v", l.Fence(), l.Revision(), l.Record())
	}
	_, err = e.leases("inst-b", "h2").TryAcquire(ctx, "job")
	var he *lease.HeldError
	if !errors.Is(err, lease.ErrHeld) || !errors.As(err, &he) || he.Holder.Holder != "inst-a" || !strings.Contains(err.Error(), "inst-a") {
		t.Fatalf("second acquire: %v, want ErrHeld naming inst-a", err)
	}
	in, err := a.Get(ctx, "job")
	if err != nil || in.Fence != l.Fence() || in.TTL != 5*time.Second {
		t.Errorf("get: %+v, %v", in, err)
	}
}

func TestAcquire_WaitsAndIsWokenByTheRelease(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	held, err := e.leases("inst-a", "h1").TryAcquire(ctx, "job", lease.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := e.leases("inst-b", "h2").Acquire(ctx, "job", lease.WithTTL(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("acquired while held")
	case <-time.After(200 * time.Millisecond):
	}
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	// Woken by the watch: well within the 30s TTL (and within a poll tick).
	if d := time.Since(released); d > time.Second {
		t.Errorf("acquired %s after the release", d)
	}
	if l.Fence() <= held.Fence() {
		t.Errorf("fence %d after %d: not larger", l.Fence(), held.Fence())
	}
	l.Release(ctx)
}

func TestAcquire_GivesUpWithTheContextNamingTheHolder(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	held, _ := e.leases("inst-a", "h1").TryAcquire(ctx, "job")
	defer held.Release(ctx)
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := e.leases("inst-b", "h2").Acquire(wctx, "job")
	if !errors.Is(err, lease.ErrHeld) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("acquire with a deadline: %v, want ErrHeld and DeadlineExceeded", err)
	}
}

func TestKeepAlive_RenewsPastItsTTLKeepingIt(t *testing.T) {
	if testing.Short() {
		t.Skip("waits through TTLs")
	}
	ctx := ctxT(t)
	e := newEnv(t)
	a := e.leases("inst-a", "h1")
	l, err := a.TryAcquire(ctx, "job", lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if closedWithin(l.Done(), 3*time.Second) {
		t.Fatalf("lease ended while renewed: %v", l.Err())
	}
	in, err := a.Get(ctx, "job")
	if err != nil || in.Renewals < 6 || in.TTL != time.Second || in.Fence != l.Fence() {
		t.Errorf("after 3s: %+v, %v; want ~9 renewals keeping TTL 1s and the fence", in, err)
	}
	l.Release(ctx)
}

func TestDone_ClosesWhenTheRecordIsDeletedOrTaken(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := e.leases("inst-a", "h1")
	l, err := a.TryAcquire(ctx, "job", lease.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Someone deletes it (an operator, doctor).
	if err := a.Bucket().Delete(ctx, "job", l.Revision(), nil); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(l.Done(), 2*time.Second) {
		t.Fatal("Done did not close after the record was deleted")
	}
	var lost *lease.LostError
	if !errors.As(l.Err(), &lost) || lost.How != lease.LostReleased {
		t.Errorf("err %v, want lost: released by another", l.Err())
	}
	// Taken: the next holder has a larger fence; the old one's renewal and
	// release leave it alone.
	b, err := e.leases("inst-b", "h2").TryAcquire(ctx, "job", lease.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	if err := l.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Errorf("renewal by the old holder: %v, want ErrLost", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("release after loss: %v, want nil", err)
	}
	if in, err := a.Get(ctx, "job"); err != nil || in.Holder != "inst-b" || in.Fence != b.Fence() || b.Fence() <= l.Fence() {
		t.Errorf("successor touched: %+v, %v", in, err)
	}
}

func TestRelease_IsIdempotentAndOrphanLeavesTheRecord(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := e.leases("inst-a", "h1")
	l, _ := a.TryAcquire(ctx, "job")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil || !errors.Is(l.Err(), lease.ErrReleased) {
		t.Errorf("second release: %v, err %v", err, l.Err())
	}
	if _, err := a.Get(ctx, "job"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("after release: %v", err)
	}
	o, _ := a.TryAcquire(ctx, "orphan", lease.WithTTL(30*time.Second))
	o.Orphan()
	if !closedWithin(o.Done(), time.Second) {
		t.Error("Done open after Orphan")
	}
	if in, err := a.Get(ctx, "orphan"); err != nil || in.Fence != o.Fence() {
		t.Errorf("orphaned record: %+v, %v; want it left", in, err)
	}
}

func TestAcquire_SameInstanceTakesItsOwnLeaseBack(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	first, _ := e.leases("inst-a", "h1").TryAcquire(ctx, "job", lease.WithoutKeepAlive())
	again, err := e.leases("inst-a", "h1").TryAcquire(ctx, "job")
	if err != nil || again.Fence() != first.Fence() {
		t.Fatalf("re-acquire by the same instance: %v, fence %d want %d", err, again.Fence(), first.Fence())
	}
	again.Release(ctx)
}

func TestAcquire_DisplacesADeadHolderOnThisHostAtOnce(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dead := deadProcess(t)
	// A holder whose process died without releasing, with a long TTL.
	gone := e.leases("inst-a", "h1", lease.WithProcess(dead))
	l, err := gone.TryAcquire(ctx, "job", lease.WithTTL(30*time.Second), lease.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := e.leases("inst-b", "h1").Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release(ctx)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("took %s to displace a dead holder on this host", d)
	}
	if got.Fence() <= l.Fence() {
		t.Errorf("fence %d, want > %d", got.Fence(), l.Fence())
	}
	// On another host the same record is left to its TTL.
	other := e.leases("inst-c", "h1", lease.WithProcess(dead))
	o, _ := other.TryAcquire(ctx, "job2", lease.WithTTL(30*time.Second), lease.WithoutKeepAlive())
	_ = o
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := e.leases("inst-d", "h2").Acquire(wctx, "job2"); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("another host displaced a holder it cannot check: %v", err)
	}
}

func TestKeepAlive_ServerGoneEndsTheLeaseBeforeItsTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a TTL")
	}
	ctx := ctxT(t)
	e := newEnv(t)
	// The renew hook is told of each renewal: some succeed while the server
	// is up, then they fail.
	renewed, failed := make(chan string, 100), make(chan string, 100)
	hook := lease.WithRenewHook(func(key string, took time.Duration, err error) {
		if err == nil {
			renewed <- key
		} else {
			failed <- key
		}
	})
	l, err := e.leases("inst-a", "h1", hook).TryAcquire(ctx, "job", lease.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-renewed:
		if k != "job" {
			t.Errorf("the renew hook was told of key %q, want job", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the renew hook was told of no renewal in 5s with a 2s TTL")
	}
	start := time.Now()
	e.srv.Shutdown()
	if !closedWithin(l.Done(), 5*time.Second) {
		t.Fatal("lease still held without a server")
	}
	if len(failed) == 0 {
		t.Error("the lease was lost unrenewed, but the renew hook was told of no failed renewal")
	}
	if d := time.Since(start); d >= 2*time.Second {
		t.Errorf("lost %s after the server went; the TTL is 2s", d)
	}
	var lost *lease.LostError
	if !errors.As(l.Err(), &lost) || lost.How != lease.LostUnrenewed {
		t.Errorf("err %v, want lost: not renewed in time", l.Err())
	}
	l.Release(context.Background())
}

func TestAcquire_InvalidInputAndGarbage(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := e.leases("inst-a", "h1")
	for _, key := range []string{"", "a..b", ".x", "with space"} {
		if _, err := a.TryAcquire(ctx, key); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("key %q: %v, want ErrInvalid", key, err)
		}
	}
	if _, err := a.TryAcquire(ctx, "k", lease.WithTTL(1500*time.Millisecond)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("ttl 1.5s: %v, want ErrInvalid", err)
	}
	if _, err := a.Bucket().Create(ctx, "junk", []byte("garbage"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.TryAcquire(ctx, "junk"); !errors.Is(err, lease.ErrUndecodable) {
		t.Errorf("acquire over garbage: %v, want ErrUndecodable", err)
	}
}
