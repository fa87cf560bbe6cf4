package lease

import (
	"context"
	"errors"
	"fmt"
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
// several come.
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
	c, in, err := t.e.candidate(ctx, to)
	if err != nil {
		return err
	}
	if !c.Eligible {
		return fmt.Errorf("%w: %s lacks a required capability", ErrNoCandidate, to)
	}
	// Watch before writing, so the new leader's first renewal is not missed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := t.e.ls.bucket.Watch(wctx, t.key, kv.UpdatesOnly())
	if err != nil {
		return err
	}
	defer w.Stop()
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
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e != nil && e.Revision > rev {
				return nil // taken (or changed by someone else): not this term's business any more
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
	cs, err := t.e.Candidates(ctx)
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

func (t *Term) stopBackground() {
	t.stop()
	t.bg.Wait()
}

// watchForSuccessors offers a successor on Yield: a transfer request's
// target, or a clearly better candidate once the minimum term has passed.
func (t *Term) watchForSuccessors(ctx context.Context) {
	w, err := t.e.ls.bucket.Watch(ctx, t.e.candPrefix+">")
	if err != nil {
		return
	}
	defer w.Stop()
	cands := map[string]Candidate{}
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
				if in, err := decode(*e); err == nil && e.Live() {
					cands[instance] = t.e.candidateOf(in)
				} else {
					delete(cands, instance)
				}
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
