package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/lease"
)

func election(t *testing.T, e *env, instance, host string, opts ...lease.ElectionOption) *lease.Election {
	t.Helper()
	el, err := e.leases(instance, host).Election("agent", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { el.Withdraw(context.Background()) })
	return el
}

// campaign starts a campaign and returns a channel that delivers its term.
func campaign(ctx context.Context, t *testing.T, el *lease.Election) <-chan *lease.Term {
	ch := make(chan *lease.Term, 1)
	go func() {
		term, err := el.Campaign(ctx)
		if err != nil && ctx.Err() == nil {
			t.Errorf("campaign: %v", err)
		}
		ch <- term
	}()
	return ch
}

func waitTerm(t *testing.T, ch <-chan *lease.Term, within time.Duration) *lease.Term {
	t.Helper()
	select {
	case term := <-ch:
		if term == nil {
			t.Fatal("campaign ended without a term")
		}
		return term
	case <-time.After(within):
		t.Fatalf("no leadership within %s", within)
		return nil
	}
}

func TestCampaign_ExactlyOneOfManyLeads(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxT(t))
	e := newEnv(t)
	const n = 5
	results := make(chan *lease.Term, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		el := election(t, e, fmt.Sprintf("inst-%d", i), "h1")
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			term, _ := el.Campaign(ctx)
			results <- term
		}()
	}
	close(start)
	var leader *lease.Term
	select {
	case leader = <-results:
	case <-time.After(5 * time.Second):
		t.Fatal("nobody leads")
	}
	// Nobody else leads while it does.
	select {
	case other := <-results:
		t.Fatalf("a second campaign ended while the first leads: %v", other)
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	wg.Wait()
	close(results)
	for other := range results {
		if other != nil {
			t.Errorf("two leaders: fences %d and %d", leader.Fence(), other.Fence())
			other.Release(context.Background())
		}
	}
	leader.Release(context.Background())
}

func TestResign_AFollowerLeadsAtOnce(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1")
	ta := waitTerm(t, campaign(ctx, t, a), 5*time.Second)
	bTerm := campaign(ctx, t, election(t, e, "inst-b", "h2"))
	waitCandidates(t, a, 2)
	start := time.Now()
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	tb := waitTerm(t, bTerm, 5*time.Second)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("follower led %s after the resignation", d)
	}
	if tb.Fence() <= ta.Fence() || !errors.Is(ta.Err(), lease.ErrReleased) {
		t.Errorf("fences %d then %d; old term err %v", ta.Fence(), tb.Fence(), ta.Err())
	}
	tb.Release(ctx)
}

func waitCandidates(t *testing.T, el *lease.Election, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cs, err := el.Candidates(context.Background())
		if err == nil && len(cs) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d candidates, want %d (%v)", len(cs), n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTransfer_MovesLeadershipWithNoMomentWithoutALeader(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1")
	b := election(t, e, "inst-b", "h2")
	ta := waitTerm(t, campaign(ctx, t, a), 5*time.Second)
	bTerm := campaign(ctx, t, b)
	waitCandidates(t, a, 2)

	octx, stop := context.WithCancel(ctx)
	defer stop()
	obs, err := election(t, e, "observer", "h3").Observe(octx)
	if err != nil {
		t.Fatal(err)
	}
	if first := <-obs; first.Leader == nil || first.Leader.Holder != "inst-a" {
		t.Fatalf("first observation %+v, want inst-a", first)
	}
	// Anyone asks; the leader sees the request on Yield, stops its work, hands over.
	if err := election(t, e, "operator", "h4").RequestTransfer(ctx, "inst-b"); err != nil {
		t.Fatal(err)
	}
	select {
	case to := <-ta.Yield():
		if to != "inst-b" {
			t.Fatalf("yield to %s, want inst-b", to)
		}
		if err := ta.HandOver(ctx, to); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the leader never saw the transfer request")
	}
	tb := waitTerm(t, bTerm, 5*time.Second)
	next := <-obs
	if next.Leader == nil || next.Leader.Holder != "inst-b" {
		t.Fatalf("observation after the transfer: %+v, want inst-b with no leaderless moment", next)
	}
	if tb.Fence() <= ta.Fence() || next.Leader.Fence != tb.Fence() {
		t.Errorf("fences: old %d, new %d, observed %d", ta.Fence(), tb.Fence(), next.Leader.Fence)
	}
	tb.Release(ctx)
}

func TestObserve_EveryChangeInOrderIncludingNoLeader(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	obs, err := election(t, e, "observer", "h3").Observe(octx)
	if err != nil {
		t.Fatal(err)
	}
	if o := <-obs; o.Leader != nil {
		t.Fatalf("initial observation %+v, want no leader", o)
	}
	a := election(t, e, "inst-a", "h1")
	ta := waitTerm(t, campaign(ctx, t, a), 5*time.Second)
	ta.Release(ctx)
	tb := waitTerm(t, campaign(ctx, t, election(t, e, "inst-b", "h2")), 5*time.Second)
	defer tb.Release(ctx)
	var got []string
	for range 3 {
		select {
		case o := <-obs:
			if o.Leader == nil {
				got = append(got, "none")
			} else {
				got = append(got, o.Leader.Holder)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("observations so far %v", got)
		}
	}
	if fmt.Sprint(got) != "[inst-a none inst-b]" {
		t.Errorf("observations %v, want [inst-a none inst-b]", got)
	}
}

func TestPreferredLeader_TakesOverAfterTheMinimumTerm(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	const minTerm = 700 * time.Millisecond
	a := election(t, e, "inst-a", "h1", lease.Score(1), lease.MinTerm(minTerm))
	started := time.Now() // the term starts after this
	ta := waitTerm(t, campaign(ctx, t, a), 5*time.Second)
	// A candidate with an equal score is no reason to hand over; a clearly
	// better one is, once the minimum term has passed.
	sameCtx, stopSame := context.WithCancel(ctx)
	sameTerm := campaign(sameCtx, t, election(t, e, "inst-same", "h2", lease.Score(1)))
	bTerm := campaign(ctx, t, election(t, e, "inst-best", "h3", lease.Score(5)))
	select {
	case to := <-ta.Yield():
		if to != "inst-best" {
			t.Fatalf("yield to %s, want inst-best", to)
		}
		if d := time.Since(started); d < minTerm {
			t.Errorf("asked to hand over after %s, before the %s minimum term", d, minTerm)
		}
		if err := ta.HandOver(ctx, to); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no handover to the better candidate")
	}
	tb := waitTerm(t, bTerm, 5*time.Second)
	// The new leader has the best score: nobody is offered to it.
	select {
	case to := <-tb.Yield():
		t.Errorf("the best leader was asked to hand over to %s", to)
	case <-time.After(300 * time.Millisecond):
	}
	stopSame()
	if term := <-sameTerm; term != nil {
		t.Errorf("inst-same leads too, fence %d", term.Fence())
	}
	tb.Release(ctx)
}

func TestEligibility_ByCapability(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	gpu := lease.Require("gpu")
	weak := election(t, e, "inst-weak", "h1", gpu)
	if _, err := weak.Campaign(ctx); !errors.Is(err, lease.ErrNotEligible) {
		t.Fatalf("campaign without the capability: %v, want ErrNotEligible", err)
	}
	strong := election(t, e, "inst-strong", "h2", gpu, lease.Capabilities("gpu", "ssd"))
	ts := waitTerm(t, campaign(ctx, t, strong), 5*time.Second)
	defer ts.Release(ctx)
	if err := election(t, e, "op", "h3", gpu).RequestTransfer(ctx, "inst-weak"); !errors.Is(err, lease.ErrNoCandidate) {
		t.Errorf("transfer to an ineligible candidate: %v, want ErrNoCandidate", err)
	}
	cs, _ := strong.Candidates(ctx)
	if len(cs) != 2 || cs[0].Instance != "inst-strong" || !cs[0].Eligible || cs[1].Eligible {
		t.Errorf("candidates %+v, want the eligible one first", cs)
	}
	// An observer that knows no requirement (the dashboard, `baton leader
	// transfer` without --require) still tells them apart: each candidacy
	// records its own election's requirement, and a transfer to the weak one
	// is refused.
	blind := election(t, e, "op2", "h3")
	cs, _ = blind.Candidates(ctx)
	if len(cs) != 2 || cs[0].Instance != "inst-strong" || !cs[0].Eligible || cs[1].Eligible {
		t.Errorf("candidates as an observer without the requirement sees them: %+v", cs)
	}
	if err := blind.RequestTransfer(ctx, "inst-weak"); !errors.Is(err, lease.ErrNoCandidate) {
		t.Errorf("transfer to an ineligible candidate, asked without its requirement: %v, want ErrNoCandidate", err)
	}
}

// An instance id with a dot cannot campaign: candidate.a.b.c would be both
// agent key a.b's candidacy of c and a's of b.c.
func TestCampaign_AnInstanceWithADotIsRefused(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	_, err := election(t, e, "b.c", "h1").Campaign(ctx)
	if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "'.'") {
		t.Fatalf("campaign as b.c: %v, want ErrInvalid naming the dot", err)
	}
	// Observing is fine: only a candidacy's key is at stake.
	if _, err := election(t, e, "b.c", "h1").Leader(ctx); err != nil && !errors.Is(err, lease.ErrNoLeader) {
		t.Errorf("observing as b.c: %v", err)
	}
}

func TestCampaign_ADeadLeaderOnThisHostIsReplacedAtOnce(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dead := deadProcess(t)
	// A leader whose process died without a word, with a long TTL.
	gone, err := e.leases("inst-a", "h1", lease.WithProcess(dead)).Election("agent", lease.ElectTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ta, err := gone.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ta.Orphan()
	start := time.Now()
	tb := waitTerm(t, campaign(ctx, t, election(t, e, "inst-b", "h1", lease.ElectTTL(10*time.Second))), 5*time.Second)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("same-host takeover took %s with a 10s TTL", d)
	}
	if tb.Fence() <= ta.Fence() {
		t.Errorf("fence %d after %d", tb.Fence(), ta.Fence())
	}
	tb.Release(ctx)
	gone.Withdraw(ctx)
}

func TestTerm_DoneClosesWhenTheLeaseIsTaken(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1")
	ta := waitTerm(t, campaign(ctx, t, a), 5*time.Second)
	ls := e.leases("operator", "h9")
	if err := ls.Bucket().Delete(ctx, lease.LeaderKey("agent"), ta.Revision(), nil); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(ta.Done(), 2*time.Second) || !errors.Is(ta.Err(), lease.ErrLost) {
		t.Errorf("term after its lease was deleted: err %v", ta.Err())
	}
}
