package sem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/sem"
)

// An open semaphore's uncontended acquire and release are one message
// each: a compare-and-set create and delete of the unit.
func TestOpen_AcquireAndReleaseAreOneRoundTripEach(t *testing.T) {
	e := newEnv(t)
	e.create("db", 2)
	ctx := ctxT(t)
	h, err := e.sems("h1").Open(ctx, "db")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sent := func() uint64 { return e.client.Conn().Stats().OutMsgs }
	for round := range 3 {
		before := sent()
		p, err := h.TryAcquire(ctx, sem.WithoutKeepAlive())
		if err != nil {
			t.Fatal(err)
		}
		if n := sent() - before; round > 0 && n != 1 {
			// The first create over a key never written is one message too;
			// after a release the view has the tombstone to create after.
			t.Errorf("round %d: acquire sent %d messages, want 1", round, n)
		}
		before = sent()
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := sent() - before; n != 1 {
			t.Errorf("round %d: release sent %d messages, want 1", round, n)
		}
		// The view sees the release before the next round.
		if !waitFor(5*time.Second, func() bool { return h.Status().Free == 2 }) {
			t.Fatalf("the view did not see the release: %+v", h.Status())
		}
	}
}

// The view sees other processes' permits and waiters: full is said
// without asking the server, and a view that is behind falls back to a
// read.
func TestOpen_TheViewFollowsOthers(t *testing.T) {
	e := newEnv(t)
	e.create("db", 1)
	ctx := ctxT(t)
	h, err := e.sems("h1").Open(ctx, "db")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	other, err := e.sems("h2").TryAcquire(ctx, "db")
	if err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return h.Status().Held == 1 }) {
		t.Fatal("the view did not see another process's permit")
	}
	if _, err := h.TryAcquire(ctx); !errors.Is(err, sem.ErrFull) {
		t.Fatalf("try while another holds the unit = %v; want ErrFull", err)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Right after the release, whatever the view shows, the try finds the
	// unit free (from the view, or by reading).
	p, err := h.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("try after the release = %v", err)
	}
	defer p.Release(context.Background())
	if p.Index() != 0 {
		t.Fatalf("index %d", p.Index())
	}
}
