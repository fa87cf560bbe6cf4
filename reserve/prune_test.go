package reserve_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/reserve"
)

// TestPrune_DropsTheExpiredAndTheDeadAndServesTheLine: a space nobody
// writes keeps a reservation past its TTL and one whose holder died on
// this host; Prune drops both in one compare-and-set, and the waiting
// entry behind them is then held. A second Prune writes nothing.
func TestPrune_DropsTheExpiredAndTheDeadAndServesTheLine(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	h1, h2 := e.spaces("h1"), e.spaces("h2")
	mustReserve(t, h2, "repo", []string{"README.md"}, reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
	mustReserve(t, h2, "repo", []string{"docs/**"}, reserve.WithTTL(time.Second), reserve.WithoutKeepAlive())
	cmd, p := child(t)
	mustReserve(t, e.spaces("h1", reserve.WithProcess(p)), "repo", []string{"src/**"}, reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// A waiter of another host, behind the dead holder: nothing wakes it
	// but a write of the space.
	got := make(chan *reserve.Reservation, 1)
	go func() {
		r, err := h2.Reserve(ctx, "repo", []string{"src/main.go"})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	for len(ids(t, h2, "repo", "waiting")) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(1100 * time.Millisecond) // docs/** expires
	if got := ids(t, h2, "repo", "expired"); len(got) != 1 {
		t.Fatalf("expired before the prune: %v", got)
	}
	before, err := h2.Status(ctx, "repo")
	if err != nil {
		t.Fatal(err)
	}
	if !h1.HolderGone(&before.Reservations[2].Entry) || h2.HolderGone(&before.Reservations[2].Entry) || h1.HolderGone(&before.Reservations[0].Entry) || h1.HolderGone(&before.Reservations[3].Entry) {
		t.Error("HolderGone: want the dead holder gone on its own host only")
	}

	n, err := h1.Prune(ctx, "repo")
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2 dropped", n, err)
	}
	after, err := h2.Status(ctx, "repo")
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Reservations) != 2 || after.Reservations[0].Patterns[0] != "README.md" || after.Reservations[1].State != "held" || after.Revision == before.Revision {
		t.Fatalf("after the prune: %+v", after)
	}
	if r := <-got; r == nil || r.Fence() != after.Revision {
		t.Fatalf("the waiter: %v; want it granted by the prune's write", r)
	} else {
		t.Cleanup(func() { _ = r.Release(context.Background()) })
	}
	if n, err := h1.Prune(ctx, "repo"); err != nil || n != 0 {
		t.Fatalf("second Prune = %d, %v; want nothing to drop", n, err)
	}
	if again, _ := h2.Status(ctx, "repo"); again.Revision != after.Revision {
		t.Errorf("a Prune with nothing to drop wrote revision %d", again.Revision)
	}
	if n, err := h1.Prune(ctx, "never-written"); err != nil || n != 0 {
		t.Errorf("Prune of an empty space = %d, %v", n, err)
	}
}
