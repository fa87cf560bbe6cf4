package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/lease"
)

func TestHandOver_KeepsTheNewLeadersTTL(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1", lease.ElectTTL(time.Second))
	b := election(t, e, "inst-b", "h2", lease.ElectTTL(10*time.Second))
	ta := waitTerm(t, campaign(ctx, t, a), 5*time.Second)
	bTerm := campaign(ctx, t, b)
	waitCandidates(t, a, 2)
	if err := ta.HandOver(ctx, "inst-b"); err != nil {
		t.Fatal(err)
	}
	tb := waitTerm(t, bTerm, 5*time.Second)
	defer tb.Release(ctx)
	// Well past the old leader's 1s TTL, the new leader still leads.
	if closedWithin(tb.Done(), 2500*time.Millisecond) {
		t.Fatalf("the new leader lost its term: %v", tb.Err())
	}
	in, err := b.Leader(ctx)
	if err != nil || in.Holder != "inst-b" || in.TTL != 10*time.Second {
		t.Errorf("leader %+v, %v; want inst-b with its own 10s TTL", in, err)
	}
}

func TestHandOver_ToACandidateThatDiedFreesTheLeadershipForOthers(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1", lease.ElectTTL(10*time.Second))
	ta := waitTerm(t, campaign(ctx, t, a), 5*time.Second)
	// inst-b registered and then stopped campaigning without withdrawing
	// (as a process that died): its candidacy lives on for a while.
	b := election(t, e, "inst-b", "h2", lease.ElectTTL(10*time.Second))
	bctx, stopB := context.WithCancel(ctx)
	bTerm := campaign(bctx, t, b)
	waitCandidates(t, a, 2)
	stopB()
	<-bTerm
	cTerm := campaign(ctx, t, election(t, e, "inst-c", "h3", lease.ElectTTL(10*time.Second)))
	waitCandidates(t, a, 3)
	start := time.Now()
	if err := ta.HandOver(ctx, "inst-b"); !errors.Is(err, lease.ErrNoCandidate) {
		t.Fatalf("handover to a candidate that does not take it: %v, want ErrNoCandidate", err)
	}
	tc := waitTerm(t, cTerm, 5*time.Second)
	defer tc.Release(ctx)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a live candidate led %s after the failed handover; the TTL is 10s", d)
	}
}

func TestTransfer_AChosenLeaderIsNotTakenBackByAHigherScore(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	hi := election(t, e, "inst-hi", "h1", lease.Score(9))
	lo := election(t, e, "inst-lo", "h2", lease.Score(1))
	th := waitTerm(t, campaign(ctx, t, hi), 5*time.Second)
	loTerm := campaign(ctx, t, lo)
	waitCandidates(t, hi, 2)
	if err := election(t, e, "operator", "h3").RequestTransfer(ctx, "inst-lo"); err != nil {
		t.Fatal(err)
	}
	select {
	case to := <-th.Yield():
		if err := th.HandOver(ctx, to); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no transfer")
	}
	tl := waitTerm(t, loTerm, 5*time.Second)
	againCtx, stopAgain := context.WithCancel(ctx)
	hiAgain := campaign(againCtx, t, hi) // the former leader campaigns again, with its higher score
	select {
	case to := <-tl.Yield():
		t.Errorf("the chosen leader was asked to hand back to %s", to)
	case <-time.After(500 * time.Millisecond):
	}
	stopAgain()
	if term := <-hiAgain; term != nil {
		t.Errorf("the former leader leads again, fence %d", term.Fence())
		term.Release(ctx)
	}
	tl.Release(ctx)
}

func TestRequestTransfer_RefusesALeaderThatIsNoCandidate(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	// A leader's lease taken by hand, not by a campaign.
	byHand, err := e.leases("ghost", "h1").TryAcquire(ctx, lease.LeaderKey("agent"), lease.WithTTL(30*time.Second), lease.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	c := election(t, e, "inst-c", "h2")
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	_ = campaign(cctx, t, c)
	waitCandidates(t, c, 1)
	if err := election(t, e, "operator", "h3").RequestTransfer(ctx, "inst-c"); !errors.Is(err, lease.ErrNoCandidate) {
		t.Fatalf("transfer from a leader that is no candidate: %v, want ErrNoCandidate", err)
	}
	in, _ := c.Leader(ctx)
	if in.Revision != byHand.Revision() {
		t.Errorf("the refused request rewrote the lease (revision %d, was %d)", in.Revision, byHand.Revision())
	}
}

func TestAcquire_AnotherProcessOfTheSameInstanceGetsANewFence(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dead := deadProcess(t)
	old, err := e.leases("inst-x", "h1", lease.WithProcess(dead)).TryAcquire(ctx, "job", lease.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.leases("inst-x", "h1").TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Fence() <= old.Fence() {
		t.Errorf("fence %d after a dead process's %d: a new process is a new holder", l.Fence(), old.Fence())
	}
	// A live other process of the same instance is not displaced.
	_, err = e.leases("inst-x", "h9", lease.WithProcess(dead)).TryAcquire(ctx, "job")
	if !errors.Is(err, lease.ErrHeld) {
		t.Errorf("same instance from another host: %v, want ErrHeld", err)
	}
}
