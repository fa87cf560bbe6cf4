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
	for round := range 4 {
		before := sent()
		p, err := h.TryAcquire(ctx, sem.WithoutKeepAlive())
		if err != nil {
			t.Fatal(err)
		}
		if n := sent() - before; round > 0 && n != 1 {
			// Round 0 also carries the end of Open's read (its listing's
			// consumer is deleted in the background). After a release the
			// handle has the tombstone to create after.
			t.Errorf("round %d: acquire sent %d messages, want 1", round, n)
		}
		before = sent()
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := sent() - before; n != 1 {
			t.Errorf("round %d: release sent %d messages, want 1", round, n)
		}
	}
	if st, err := h.Status(ctx); err != nil || st.Free != 2 {
		t.Fatalf("after the releases: %+v, %v", st, err)
	}
}

// The handle learns of other processes' permits when its create loses,
// sees the line from its watch, and after another's release takes the
// unit (reading, since it did not see the release).
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
	// What the handle knew is wrong now: its create loses, it reads and
	// says full.
	if _, err := h.TryAcquire(ctx); !errors.Is(err, sem.ErrFull) {
		t.Fatalf("try while another holds the unit = %v; want ErrFull", err)
	}
	// A waiter in line: the handle takes nothing, as the watch shows it.
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { _, err := e.sems("h3").Acquire(wctx, "db"); waited <- err }()
	if !waitFor(5*time.Second, func() bool { return h.Waiting() == 1 }) {
		t.Fatal("the handle did not see the waiter")
	}
	cancel()
	<-waited
	if !waitFor(5*time.Second, func() bool { return h.Waiting() == 0 }) {
		t.Fatal("the handle did not see the waiter leave")
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := h.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("try after the release = %v", err)
	}
	defer p.Release(context.Background())
	if p.Index() != 0 {
		t.Fatalf("index %d", p.Index())
	}
}
