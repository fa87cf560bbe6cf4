package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
)

// leading is an Election.Lead running in the background. Its work sends
// each term on terms as it starts, then waits: for the test to end it
// (ret), or for its context to end, whose cause it sends on ended and
// returns (it stopped: Lead goes on).
type leading struct {
	terms  chan *lease.Term
	ended  chan error
	ret    chan error
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Lead's, once done is closed
}

func startLead(t *testing.T, el *lease.Election, opts ...lease.LeadOption) *leading {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &leading{
		terms: make(chan *lease.Term, 8), ended: make(chan error, 8), ret: make(chan error, 1),
		cancel: cancel, done: make(chan struct{}),
	}
	work := func(ctx context.Context, term *lease.Term) error {
		r.terms <- term
		select {
		case err := <-r.ret:
			return err
		case <-ctx.Done():
			r.ended <- context.Cause(ctx)
			return context.Cause(ctx)
		}
	}
	go func() {
		defer close(r.done)
		r.err = el.Lead(ctx, work, opts...)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// result waits for Lead to return.
func (r *leading) result(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(10 * time.Second):
		t.Fatal("Lead did not return")
		return nil
	}
}

func (r *leading) running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		var zero T
		return zero
	}
}

func candidateNames(t *testing.T, el *lease.Election) []string {
	t.Helper()
	cs, err := el.Candidates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, c.Instance)
	}
	return out
}

// reapLeader deletes the leader's lease of el from another process, as
// `baton doctor --fix` would a stale one.
func reapLeader(ctx context.Context, t *testing.T, e *env, el *lease.Election) {
	t.Helper()
	ops := e.leases("operator", "h9")
	for {
		in, err := el.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = ops.Reap(ctx, lease.LeaderKey(el.Key()), in.Revision)
		if !errors.Is(err, kv.ErrConflict) { // renewed meanwhile: read again
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}

func TestLead_RunsTheWorkWhileLeadingAndGivesUpWhenItReturns(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1")
	b := election(t, e, "inst-b", "h2")
	ra := startLead(t, a)
	ta := recv(t, ra.terms, "term of a")
	if in, err := a.Leader(ctx); err != nil || in.Holder != "inst-a" || in.Fence != ta.Fence() {
		t.Fatalf("leader %+v, %v; want inst-a with fence %d", in, err, ta.Fence())
	}
	rb := startLead(t, b)
	waitCandidates(t, a, 2)

	boom := errors.New("boom")
	ra.ret <- boom
	if err := ra.result(t); !errors.Is(err, boom) {
		t.Fatalf("Lead returned %v, want the work's error", err)
	}
	tb := recv(t, rb.terms, "term of b")
	if tb.Fence() <= ta.Fence() {
		t.Errorf("fences %d then %d", ta.Fence(), tb.Fence())
	}
	if got := candidateNames(t, b); len(got) != 1 || got[0] != "inst-b" {
		t.Errorf("candidates %v once a's Lead returned, want only inst-b", got)
	}

	rb.ret <- nil
	if err := rb.result(t); err != nil {
		t.Fatalf("Lead returned %v after its work returned nil", err)
	}
	if _, err := b.Leader(ctx); !errors.Is(err, lease.ErrNoLeader) {
		t.Errorf("leader after the last work returned: %v, want ErrNoLeader", err)
	}
}

func TestLead_ALostTermStopsTheWorkAndCampaignsAgain(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1")
	ra := startLead(t, a)
	t1 := recv(t, ra.terms, "first term")

	reapLeader(ctx, t, e, a)
	var lost *lease.LostError
	if cause := recv(t, ra.ended, "end of the first term"); !errors.As(cause, &lost) || lost.How != lease.LostReleased {
		t.Fatalf("the work's context ended with %v, want the term's *LostError (released)", cause)
	}
	t2 := recv(t, ra.terms, "second term")
	if t2.Fence() <= t1.Fence() {
		t.Errorf("fences %d then %d: a new term has a larger fence", t1.Fence(), t2.Fence())
	}
	ra.cancel()
	if err := ra.result(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Lead returned %v, want context.Canceled", err)
	}
}

func TestLead_WorkThatFinishesAsItsTermIsLostEndsLead(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1")
	terms := make(chan *lease.Term, 2)
	done := make(chan error, 1)
	go func() {
		done <- a.Lead(ctx, func(ctx context.Context, term *lease.Term) error {
			terms <- term
			<-ctx.Done()
			return nil // finished, whatever ended the term
		})
	}()
	recv(t, terms, "term")
	reapLeader(ctx, t, e, a)
	if err := recv(t, done, "Lead's return"); err != nil {
		t.Errorf("Lead returned %v after its work finished, want nil", err)
	}
	if len(terms) != 0 {
		t.Error("Lead campaigned again after its work finished")
	}
	if got := candidateNames(t, a); len(got) != 0 {
		t.Errorf("candidates %v after Lead returned, want none", got)
	}
}

// A context error the work met on its own, its term still held, is a
// failure: Lead gives up and returns it rather than lead again at once.
func TestLead_AContextErrorOfTheWorksOwnEndsLead(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1")
	terms := 0
	err := a.Lead(ctx, func(context.Context, *lease.Term) error {
		terms++
		sub, cancel := context.WithCancel(ctx)
		cancel()
		return sub.Err()
	})
	if !errors.Is(err, context.Canceled) || terms != 1 {
		t.Errorf("Lead returned %v after %d terms, want context.Canceled after 1", err, terms)
	}
	if _, err := a.Leader(ctx); !errors.Is(err, lease.ErrNoLeader) {
		t.Errorf("leader after Lead returned: %v, want ErrNoLeader", err)
	}
}

func TestLead_ATransferHandsOverWithNoMomentWithoutALeader(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1")
	b := election(t, e, "inst-b", "h2")
	obs, err := election(t, e, "watcher", "h3").Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type handover struct {
		to  string
		err error
	}
	handed := make(chan handover, 1)
	ra := startLead(t, a, lease.OnHandOver(func(to string, err error) { handed <- handover{to, err} }))
	ta := recv(t, ra.terms, "term of a")
	rb := startLead(t, b)
	waitCandidates(t, a, 2)

	if err := election(t, e, "operator", "h9").RequestTransfer(ctx, "inst-b"); err != nil {
		t.Fatal(err)
	}
	var y *lease.YieldError
	if cause := recv(t, ra.ended, "end of a's term"); !errors.As(cause, &y) || y.To != "inst-b" || !errors.Is(cause, lease.ErrYield) {
		t.Fatalf("a's work ended with %v, want a *YieldError to inst-b", cause)
	}
	tb := recv(t, rb.terms, "term of b")
	if tb.Fence() <= ta.Fence() {
		t.Errorf("fences %d then %d", ta.Fence(), tb.Fence())
	}
	if h := recv(t, handed, "OnHandOver"); h.to != "inst-b" || h.err != nil {
		t.Errorf("OnHandOver(%q, %v), want inst-b and no error", h.to, h.err)
	}
	// The watch saw no leader, then a, then b: never none between them.
	var seen []string
	for o := range obs {
		holder := ""
		if o.Leader != nil {
			holder = o.Leader.Holder
		}
		seen = append(seen, holder)
		if holder == "inst-b" {
			break
		}
	}
	if len(seen) != 3 || seen[0] != "" || seen[1] != "inst-a" {
		t.Errorf("leaders seen %q, want none, inst-a, inst-b", seen)
	}
	if !ra.running() {
		t.Errorf("a's Lead returned (%v) after handing over; it should follow", ra.err)
	}
	select {
	case term := <-ra.terms:
		t.Errorf("a leads again (fence %d) while b does", term.Fence())
	default:
	}
}

func TestLead_CancellingStopsTheWorkHandsOverAndWithdraws(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	a := election(t, e, "inst-a", "h1")
	b := election(t, e, "inst-b", "h2")
	c := election(t, e, "inst-c", "h3")
	ra := startLead(t, a)
	recv(t, ra.terms, "term of a")
	rb := startLead(t, b)
	waitCandidates(t, a, 2)

	ra.cancel()
	if cause := recv(t, ra.ended, "end of a's term"); !errors.Is(cause, context.Canceled) {
		t.Errorf("a's work ended with %v, want context.Canceled", cause)
	}
	if err := ra.result(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Lead returned %v, want context.Canceled", err)
	}
	recv(t, rb.terms, "term of b")
	if got := candidateNames(t, b); len(got) != 1 || got[0] != "inst-b" {
		t.Errorf("candidates %v after a's Lead returned, want only inst-b", got)
	}

	// A follower that is cancelled returns too, and withdraws.
	rc := startLead(t, c)
	waitCandidates(t, b, 2)
	rc.cancel()
	if err := rc.result(t); !errors.Is(err, context.Canceled) {
		t.Errorf("the follower's Lead returned %v, want context.Canceled", err)
	}
	if got := candidateNames(t, b); len(got) != 1 || got[0] != "inst-b" {
		t.Errorf("candidates %v after the follower's Lead returned, want only inst-b", got)
	}

	rb.cancel()
	if err := rb.result(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Lead returned %v, want context.Canceled", err)
	}
	if _, err := b.Leader(ctx); !errors.Is(err, lease.ErrNoLeader) {
		t.Errorf("leader after every Lead returned: %v, want ErrNoLeader", err)
	}
}

func TestLead_BacksOffWhileTheServerIsAway(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	// The bucket of prefix "later" does not exist: every campaign fails
	// with kv.ErrBucketNotFound until it is made.
	ls := e.leases("inst-a", "h1", lease.WithPrefix("later"))
	el, err := ls.Election("agent", lease.ElectTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	type retry struct {
		err  error
		wait time.Duration
		at   time.Time
	}
	var mu sync.Mutex
	var retries []retry
	again := make(chan struct{}, 1)
	onRetry := func(err error, wait time.Duration) {
		mu.Lock()
		retries = append(retries, retry{err, wait, time.Now()})
		n := len(retries)
		mu.Unlock()
		switch {
		case n == 4:
			if err := ls.Ensure(ctx, 1); err != nil {
				t.Error(err)
			}
		case n == 5:
			again <- struct{}{}
		}
	}
	r := startLead(t, el, lease.LeadBackoff(5*time.Millisecond, 20*time.Millisecond), lease.OnCampaignRetry(onRetry))
	recv(t, r.terms, "term once the bucket is there")
	mu.Lock()
	got := append([]retry(nil), retries...)
	mu.Unlock()
	want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("%d retries before leading, want %d", len(got), len(want))
	}
	for i, rt := range got {
		if rt.wait != want[i] || !errors.Is(rt.err, kv.ErrBucketNotFound) {
			t.Errorf("retry %d: wait %s, err %v; want %s and kv.ErrBucketNotFound", i, rt.wait, rt.err, want[i])
		}
		if i > 0 && rt.at.Sub(got[i-1].at) < got[i-1].wait {
			t.Errorf("retry %d came %s after the previous one, which said it would wait %s", i, rt.at.Sub(got[i-1].at), got[i-1].wait)
		}
	}

	// The server goes away again while it leads: the term is lost, and
	// the backoff starts over from its first wait.
	if err := e.client.DeleteBucket(ctx, "later-leases"); err != nil {
		t.Fatal(err)
	}
	var lost *lease.LostError
	if cause := recv(t, r.ended, "end of the term"); !errors.As(cause, &lost) || lost.How != lease.LostUnrenewed {
		t.Errorf("the work ended with %v, want a *LostError (not renewed in time)", cause)
	}
	recv(t, again, "a retry after the lost term")
	mu.Lock()
	if w := retries[4].wait; w != 5*time.Millisecond {
		t.Errorf("first wait after a term: %s, want the backoff's first, 5ms", w)
	}
	mu.Unlock()
	r.cancel()
	if err := r.result(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Lead returned %v, want context.Canceled", err)
	}
}

func TestLead_AnIneligibleCandidateFollowsUntilCancelled(t *testing.T) {
	e := newEnv(t)
	el := election(t, e, "inst-a", "h1", lease.Require("gpu"))
	noted := make(chan error, 1)
	r := startLead(t, el, lease.OnNotEligible(func(err error) { noted <- err }))
	if err := recv(t, noted, "OnNotEligible"); !errors.Is(err, lease.ErrNotEligible) {
		t.Fatalf("OnNotEligible(%v), want ErrNotEligible", err)
	}
	cs, err := el.Candidates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Instance != "inst-a" || cs[0].Eligible {
		t.Errorf("candidates %+v, want inst-a listed as not eligible", cs)
	}
	if !r.running() {
		t.Fatalf("Lead returned (%v) instead of following", r.err)
	}
	r.cancel()
	if err := r.result(t); !errors.Is(err, lease.ErrNotEligible) || !errors.Is(err, context.Canceled) {
		t.Errorf("Lead returned %v, want ErrNotEligible and context.Canceled", err)
	}
	if got := candidateNames(t, el); len(got) != 0 {
		t.Errorf("candidates %v after Lead returned, want none", got)
	}
	if len(r.terms) != 0 {
		t.Error("an ineligible candidate led")
	}
}

func TestLead_RefusesBadInputBeforeWritingAnything(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	el := election(t, e, "inst-a", "h1")
	work := func(context.Context, *lease.Term) error { return nil }
	for name, err := range map[string]error{
		"no work":           el.Lead(ctx, nil),
		"no first wait":     el.Lead(ctx, work, lease.LeadBackoff(0, time.Second)),
		"limit below first": el.Lead(ctx, work, lease.LeadBackoff(2*time.Second, time.Second)),
	} {
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if got := candidateNames(t, el); len(got) != 0 {
		t.Errorf("candidates %v after refused calls, want none", got)
	}
}
