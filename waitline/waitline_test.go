package waitline_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/waitline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func bucket(t *testing.T) *kv.Bucket {
	t.Helper()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	b, err := c.Ensure(context.Background(), kv.BucketConfig{Name: "w", MarkerTTL: time.Minute, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func self(t *testing.T) hostlocal.Process {
	p, err := hostlocal.Self()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTurn_ComesInTheOrderOfJoining(t *testing.T) {
	b := bucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := waitline.New(b, "l", "h1", self(t))
	a, err := l.Join(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Join(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Leave(context.Background())
	if err := a.Turn(ctx); err != nil {
		t.Fatalf("the first's turn: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := c.Turn(short); err == nil {
		t.Fatal("the second's turn came while the first waits")
	}
	ws, err := l.Waiters(ctx)
	if err != nil || len(ws) != 2 || ws[0].Weight != 1 || ws[1].Weight != 2 || ws[0].Place() >= ws[1].Place() {
		t.Fatalf("waiters = %+v, %v", ws, err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Turn(ctx) }()
	a.Leave(ctx)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second's turn did not come within 5s of the first leaving")
	}
}

// A ticket left by a dead process of this host is removed at once, not
// after its TTL.
func TestTurn_ADeadWaiterOfThisHostIsRemovedAtOnce(t *testing.T) {
	b := bucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dead, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// The dead one's ticket, written as its process would have (not
	// renewed once it is gone).
	data, _ := waitline.Ticket{ID: "gone", Host: "h1", PID: dead.PID, PIDStart: dead.Start, Since: time.Now()}.MarshalJSON()
	if _, err := b.Create(ctx, "l.gone", data, waitline.TTL); err != nil {
		t.Fatal(err)
	}
	me, err := waitline.New(b, "l", "h1", self(t)).Join(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer me.Leave(context.Background())
	done := make(chan error, 1)
	go func() { done <- me.Turn(ctx) }()
	time.Sleep(100 * time.Millisecond) // it waits behind the live process
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second): // the ticket's TTL is 3s
		t.Fatal("the turn did not come within 2s of the waiter ahead dying")
	}
}

// Wait takes a new place at the back when its ticket is lost, and leaves
// the line when its wait ends.
func TestWait_RejoinsWhenItsTicketIsLostAndLeavesOnAnError(t *testing.T) {
	b := bucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := waitline.New(b, "x", "h1", self(t))
	ahead, err := l.Join(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *waitline.Place, 1)
	errs := make(chan error, 1)
	go func() {
		p, err := l.Wait(ctx, 1)
		if err != nil {
			errs <- err
			return
		}
		got <- p
	}()
	var first waitline.Waiter
	for len(first.Key) == 0 {
		ws, err := l.Waiters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 2 {
			first = ws[1]
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Its ticket is removed (as an expiry would): it takes a new one.
	if err := b.Delete(ctx, first.Key, first.Revision, nil); err != nil {
		t.Fatal(err)
	}
	for {
		ws, err := l.Waiters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 2 && ws[1].Key != first.Key {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	ahead.Leave(ctx)
	var p *waitline.Place
	select {
	case p = <-got:
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the waiter that lost its ticket was not served")
	}
	p.Leave(ctx)

	// A wait that ends leaves no ticket behind.
	ahead, err = l.Join(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer ahead.Leave(ctx)
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	if _, err := l.Wait(short, 1); err == nil {
		t.Fatal("a wait behind a live ticket that ran out returned a place")
	}
	if ws, err := l.Waiters(ctx); err != nil || len(ws) != 1 {
		t.Fatalf("after the wait ended: %d tickets (%v); want only the one ahead", len(ws), err)
	}
}

// LeaveAfter sends the writes and the ticket's delete in one pipeline:
// the waiter behind, whose turn the delete brings, finds the writes
// applied; on a place already left it only makes the writes.
func TestLeaveAfter_TheNextFindsTheWritesApplied(t *testing.T) {
	b := bucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := waitline.New(b, "l", "h1", self(t))
	a, err := l.Join(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	next, err := l.Join(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Leave(context.Background())
	// The next waiter reads the write the moment its turn comes, whether
	// or not LeaveAfter has returned.
	turn := make(chan error, 1)
	go func() {
		if err := next.Turn(ctx); err != nil {
			turn <- err
			return
		}
		e, err := b.Get(ctx, "taken")
		if err == nil && string(e.Value) != "a" {
			err = fmt.Errorf("taken = %q", e.Value)
		}
		turn <- err
	}()
	res := a.LeaveAfter(ctx, []kv.Write{{Kind: kv.WriteCreate, Key: "taken", Value: []byte("a")}})
	if len(res) != 1 || res[0].Err != nil || res[0].Rev == 0 {
		t.Fatalf("LeaveAfter's results = %+v; want the create's revision", res)
	}
	if err := <-turn; err != nil {
		t.Fatalf("the write, read once the next waiter's turn came: %v", err)
	}
	ws, err := l.Waiters(ctx)
	if err != nil || len(ws) != 1 {
		t.Fatalf("the line after LeaveAfter: %d waiters, %v; want the next one alone", len(ws), err)
	}
	again := a.LeaveAfter(ctx, []kv.Write{{Kind: kv.WriteCreate, Key: "later", Value: []byte("b")}})
	if len(again) != 1 || again[0].Err != nil {
		t.Fatalf("LeaveAfter on a place left = %+v; want the write made", again)
	}
}
