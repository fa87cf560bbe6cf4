package lease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
)

// Term is a leadership: the leader's lease on leader.<key>. Its Fence is
// the leader's fence; Done closes when the term ends, lost or given up.
type Term struct {
	*Lease
	e       *Election
	started time.Time
	yield   chan string

	// known is the candidacies as the successor watch last saw them, once
	// it has seen them all (nil before and after it stops): Resign and
	// HandOver pick from it without a read of their own.
	mu    sync.Mutex
	known map[string]*Info

	stop context.CancelFunc
	bg   sync.WaitGroup
}

func (e *Election) newTerm(l *Lease) *Term {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Term{Lease: l, e: e, started: time.Now(), yield: make(chan string, 1), stop: cancel}
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		defer cancel()
		t.watchForSuccessors(ctx)
	}()
	return t
}

// Yield delivers the instance this term should hand over to: one a
// transfer request named, or a present candidate whose score is higher by
// the election's margin once the minimum term has passed. The leader stops
// its work, then calls HandOver with it. The newest target wins when
// several come. Election.Lead receives from it while its work runs.
func (t *Term) Yield() <-chan string { return t.yield }

// HandOver gives leadership to the candidate to, which must be live and
// eligible (ErrNoCandidate otherwise). It is one CAS update of the leader's
// lease that names the new leader: there is no moment without a leader, and
// the new leader's fence (the revision of that write) is larger than this
// one's. Stop the work before calling it. The term ends (ErrReleased).
//
// HandOver then waits (up to half the TTL, at most 2s) for the new leader
// to take the lease; one that died meanwhile never does, and the lease is
// then deleted (a CAS on the handover's revision) so the other candidates
// take it at once; HandOver returns ErrNoCandidate in that case.
func (t *Term) HandOver(ctx context.Context, to string) error {
	if to == t.e.ls.instance {
		return fmt.Errorf("%w: %s already leads", ErrInvalid, to)
	}
	c, in, ok := t.knownCandidate(to)
	if !ok {
		var err error
		if c, in, err = t.e.candidate(ctx, to); err != nil {
			return err
		}
	}
	if !c.Eligible {
		return fmt.Errorf("%w: %s lacks a required capability", ErrNoCandidate, to)
	}
	t.stopBackground()
	rec := Record{
		Holder: in.Holder, Host: in.Host, PID: in.PID, PIDStart: in.PIDStart, TTL: in.Record.TTL,
		Score: in.Score, Capabilities: in.Capabilities,
	}
	rev, err := t.handOver(ctx, rec)
	if err != nil {
		return err
	}
	wait := min(max(time.Duration(in.Record.TTL)/2, 100*time.Millisecond), 2*time.Second)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// The watch starts after the write, off the new leader's path: it
	// begins with the key's latest revision, so an adoption that came
	// first is seen all the same.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var updates <-chan *kv.Entry
	var poll <-chan time.Time
	if w, err := t.e.ls.bucket.Watch(wctx, t.key); err == nil {
		defer w.Stop()
		updates = w.Updates()
	} else {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// No watch: look every 50 ms instead, until the wait runs out.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		poll = tick.C
	}
	for {
		select {
		case e, ok := <-updates:
			if !ok {
				return nil
			}
			if e != nil && e.Revision > rev {
				return nil // taken (or changed by someone else): not this term's business any more
			}
		case <-poll:
			e, err := t.e.ls.bucket.Latest(ctx, t.key)
			if errors.Is(err, kv.ErrNotFound) || err == nil && e.Revision > rev {
				return nil
			}
		case <-timer.C:
			if err := t.e.ls.bucket.Delete(ctx, t.key, rev, nil); err != nil && !errors.Is(err, kv.ErrConflict) {
				return err
			}
			return fmt.Errorf("%w: %s did not take leadership of %s within %s; it is released for the others", ErrNoCandidate, to, t.e.key, wait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Resign ends this term: it hands leadership over to the best other
// eligible candidate if there is one (no moment without a leader; if that
// candidate does not take it, the lease is released), else releases the
// lease so the next campaigner takes it. Stop the work first.
func (t *Term) Resign(ctx context.Context) error {
	cs, ok := t.knownCandidates()
	var err error
	if !ok {
		cs, err = t.e.Candidates(ctx)
	}
	if err == nil {
		for _, c := range cs {
			if c.Instance == t.e.ls.instance || !c.Eligible {
				continue
			}
			err := t.HandOver(ctx, c.Instance)
			if errors.Is(err, ErrNoCandidate) && t.Err() != nil {
				return nil // handed over to a candidate that died: released for the others
			}
			if !errors.Is(err, ErrNoCandidate) {
				return err
			}
		}
	}
	t.stopBackground()
	return t.Release(ctx)
}

// knownCandidates is the candidates the successor watch knows, best
// first, if it has seen them all.
func (t *Term) knownCandidates() ([]Candidate, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.known == nil {
		return nil, false
	}
	cs := make([]Candidate, 0, len(t.known))
	for _, in := range t.known {
		cs = append(cs, t.e.candidateOf(in))
	}
	sortCandidates(cs)
	return cs, true
}

// knownCandidate is one live candidacy as the successor watch knows it;
// ok is false when the watch does not know (not synced, stopped) or the
// instance is not campaigning as far as it knows.
func (t *Term) knownCandidate(instance string) (Candidate, *Info, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in, ok := t.known[instance]
	if !ok {
		return Candidate{}, nil, false
	}
	return t.e.candidateOf(in), in, true
}

func (t *Term) stopBackground() {
	t.stop()
	t.bg.Wait() // the successor watch has dropped its copy of the candidates
}

// stopAll stops and waits for everything the term runs in the background:
// the successor watch, and its lease's keepalive and watch. For a term that
// ended or was given up; a lease still held then lapses at its TTL.
func (t *Term) stopAll() {
	t.stopBackground()
	t.Lease.stopBackground()
}

// watchForSuccessors offers a successor on Yield: a transfer request's
// target, or a clearly better candidate once the minimum term has passed.
func (t *Term) watchForSuccessors(ctx context.Context) {
	// Once this watch ends, nobody keeps the copy current.
	defer func() {
		t.mu.Lock()
		t.known = nil
		t.mu.Unlock()
	}()
	w, err := t.e.ls.bucket.Watch(ctx, t.e.candPrefix+">")
	if err != nil {
		return
	}
	defer w.Stop()
	cands := map[string]Candidate{}
	infos := map[string]*Info{}
	synced := false
	var requested, offered string
	minTerm := time.NewTimer(time.Until(t.started.Add(t.e.cfg.minTerm)))
	defer minTerm.Stop()
	me := t.Record()
	// A leader an explicit transfer chose keeps its term: preference does
	// not take it back.
	matured := t.e.cfg.minTerm == 0 && !me.Chosen
	requested = me.TransferTo
	evaluate := func() {
		target := ""
		if c, ok := cands[requested]; ok && c.Eligible && requested != me.Holder {
			target = requested
		} else if matured {
			var best *Candidate
			for _, c := range cands {
				if c.Instance == me.Holder || !c.Eligible || c.Score < me.Score+t.e.cfg.margin {
					continue
				}
				if best == nil || c.Score > best.Score || c.Score == best.Score && c.Since.Before(best.Since) {
					best = &c
				}
			}
			if best != nil {
				target = best.Instance
			}
		}
		if target == "" || target == offered {
			return
		}
		offered = target
		select {
		case <-t.yield:
		default:
		}
		t.yield <- target
	}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				instance := e.Key[len(t.e.candPrefix):]
				if in, err := decode(*e); err == nil && e.Live() && t.e.isCandidacy(e.Key, in.Holder) {
					cands[instance] = t.e.candidateOf(in)
					infos[instance] = in
				} else {
					delete(cands, instance)
					delete(infos, instance)
				}
			}
			if e == nil || synced {
				synced = true
				t.mu.Lock()
				t.known = maps.Clone(infos)
				t.mu.Unlock()
			}
			evaluate()
		case r := <-t.Changes():
			requested = r.TransferTo
			evaluate()
		case <-minTerm.C:
			matured = !me.Chosen
			evaluate()
		case <-t.Done():
			return
		case <-ctx.Done():
			return
		}
	}
}
