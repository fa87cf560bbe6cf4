package lease

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/kv/kvtest"
)

// A process whose lease ended as lost (its local deadline passed while the
// server was away, so its work was told to stop) does not take the record
// back as it is when it campaigns again: that would start new work under the
// fence the stopped work used. It gets a new, larger fence; a lease that was
// not lost is still taken back with its own fence.
func TestAcquire_AfterALossTheSameProcessGetsANewFence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	ls, err := New(c, WithInstance("inst-a"), WithHostID("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	first, err := ls.TryAcquire(ctx, "job", WithTTL(30*time.Second), WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	kept, err := ls.TryAcquire(ctx, "job", WithoutKeepAlive())
	if err != nil || kept.Fence() != first.Fence() {
		t.Fatalf("taking back a live lease of this process: %v, fence %d, want %d", err, kept.Fence(), first.Fence())
	}
	// The keepalive's verdict when the local deadline passes; the record
	// stays on the server with its TTL.
	first.end(&LostError{Key: "job", Fence: first.Fence(), How: LostUnrenewed})
	if in, err := ls.Get(ctx, "job"); err != nil || in.Fence != first.Fence() {
		t.Fatalf("record after the local loss: %+v, %v; want it still there", in, err)
	}
	again, err := ls.TryAcquire(ctx, "job", WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if again.Fence() <= first.Fence() {
		t.Errorf("campaign after a loss got fence %d, want > %d", again.Fence(), first.Fence())
	}
	if in, err := ls.Get(ctx, "job"); err != nil || in.Fence != again.Fence() || in.Holder != "inst-a" {
		t.Errorf("record now: %+v, %v; want fence %d held by inst-a", in, err, again.Fence())
	}
	// That new lease, not lost, is taken back with its own fence.
	same, err := ls.TryAcquire(ctx, "job", WithoutKeepAlive())
	if err != nil || same.Fence() != again.Fence() {
		t.Errorf("taking back the new lease: %v, fence %d, want %d", err, same.Fence(), again.Fence())
	}
}
