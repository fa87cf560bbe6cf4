package queue

// What the loop's watches bring it: changes of the queue and the key locks
// (while it dispatches), its inbox and the queue's config, taken one at a
// time or, after the one the loop woke for, as many as are ready (drain).

import (
	"fmt"
	"slices"
	"time"

	"github.com/batonhq/baton/kv"
)

// drainMax bounds the changes and results one pass of the loop takes in
// after the one it woke for.
const drainMax = 64

// drain takes in what the dispatcher's watches and the attempts' results
// have ready now, up to drainMax, so that the loop's pass (dispatch,
// offers, inbox writes, timers) serves a burst of changes once rather than
// once per change: a task's life is six changes in the dispatcher's
// watches. A watch that ended is left to the loop's select, which handles
// its end.
func (l *loop) drain() {
	for range drainMax {
		var qC, sC <-chan *kv.Entry
		if d := l.d; d != nil {
			qC, sC = d.qw.Updates(), d.sw.Updates()
		}
		select {
		case e, ok := <-qC:
			if !ok {
				return
			}
			l.onQueue(e)
		case e, ok := <-sC:
			if !ok {
				return
			}
			l.onSession(e)
		case f := <-l.results:
			f()
		default:
			return
		}
	}
}

// onQueue takes one entry of the dispatcher's watch of the queue.
func (l *loop) onQueue(e *kv.Entry) {
	d := l.d
	if e == nil {
		d.qSynced = true
		d.maybeSynced(l)
		return
	}
	d.applyQueue(l, *e)
	if r := l.byToken[tokenIndexOf(l.w.q, e.Key)]; r != nil && !isTaskKey(l.w.q, e.Key) && e.Revision > r.tokenRev() {
		if tok, err := decodeToken(*e); !e.Live() || err != nil || tok.Task != r.id || tok.Fence != r.fence {
			r.stop(ErrLockLost, l.w.grace)
		}
	}
	if isTaskKey(l.w.q, e.Key) {
		if r := l.running[taskIDOf(l.w.q, e.Key)]; r != nil {
			r.observe(*e, l.w.grace)
		}
	}
}

// onSession takes one entry of the dispatcher's watch of the key locks.
func (l *loop) onSession(e *kv.Entry) {
	d := l.d
	if e == nil {
		d.sSynced = true
		d.maybeSynced(l)
		return
	}
	d.applySession(l, *e)
	if r := l.bySlot[e.Key]; r != nil && e.Revision > r.fence {
		if !e.Live() {
			r.stop(ErrLockLost, l.w.grace)
		} else if s := d.x.slots[e.Key]; s == nil || s.Fence != r.fence {
			r.stop(ErrLockLost, l.w.grace)
		}
	}
}

// onMine takes one entry of the watch of this worker's inbox and the
// queue's config.
func (l *loop) onMine(e *kv.Entry) {
	switch {
	case e == nil:
	case e.Key == configKey(l.w.q):
		l.onConfig(e)
	default:
		l.onInbox(e)
	}
}

// onInbox takes a version of this worker's inbox: new offers wait to be
// claimed, stop notes stop what they name.
func (l *loop) onInbox(e *kv.Entry) {
	if e == nil || !e.Live() {
		return
	}
	in, err := decodeInbox(l.w.q, l.id, *e)
	if err != nil {
		l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("inbox of worker %s: %w", l.id, err)})
		return
	}
	// A dispatcher with the whole queue in view has written: what it
	// offers is all there is for now.
	l.markReady()
	for _, s := range in.Stops {
		if r := l.running[s.Task]; r != nil && r.fence == s.Fence {
			cause := ErrLockLost
			if s.Cancel {
				cause = ErrCancelled
			}
			r.stop(cause, l.w.grace)
		}
	}
	if l.draining {
		return
	}
	seen := make(map[string]bool, len(in.Offers))
	for _, o := range in.Offers {
		seen[o.Task] = true
		if rev, ok := l.taken[o.Task]; ok && rev >= o.Rev || l.running[o.Task] != nil || l.offered(o.Task) {
			continue
		}
		l.offers = append(l.offers, *o)
	}
	for id := range l.taken {
		if !seen[id] {
			delete(l.taken, id) // the dispatcher knows it was taken
		}
	}
	// An offer the inbox no longer holds was taken back (a pause, or it
	// expired): it is not claimed.
	l.offers = slices.DeleteFunc(l.offers, func(o offer) bool { return !seen[o.Task] })
}

func (l *loop) offered(id string) bool {
	for _, o := range l.offers {
		if o.Task == id {
			return true
		}
	}
	return false
}

// onConfig takes a version of the queue's config.
func (l *loop) onConfig(e *kv.Entry) {
	if e == nil || !e.Live() {
		return
	}
	c, err := decodeConfig(*e)
	if err != nil {
		return // a config that does not decode is left for doctor; the last good one stays
	}
	l.cfg = c
	if x := l.x(); x != nil {
		x.setConfig(c)
	}
}

func (l *loop) markReady() {
	if !l.ready {
		l.ready, l.readyAt = true, time.Now()
	}
}
