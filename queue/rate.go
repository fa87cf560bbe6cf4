package queue

// A queue's rate limit (adr/0052): its dispatcher admits starts by
// compare-and-set on one record, <queue>.rate, which logs them with the
// server's time of each write, and claims or offers only what was
// admitted.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/batonhq/baton/kv"
)

// rateLog is the record <queue>.rate: the admissions of the last period
// and the one its own revision made (Last, at the revision's time, which
// its writer cannot know; the next writer logs it with that time).
//
//jsonrec:codec
type rateLog struct {
	Queue string       `json:"queue"`
	Log   []rateWindow `json:"log"`
	Last  int          `json:"last"`
}

// rateWindow is n starts admitted by a write at server time At.
type rateWindow struct {
	At time.Time `json:"at"`
	N  int       `json:"n"`
}

func rateKey(q string) string { return q + ".rate" }

// rateState is the dispatcher's view of its queue's rate record.
type rateState struct {
	known   bool      // the watch has delivered the record's state
	rev     uint64    // its revision (0: none, or a tombstone's at gone)
	gone    uint64    // the tombstone's revision when it was removed
	written time.Time // server time of rev
	log     rateLog
	// admitting: a write is in flight or its revision not yet seen back
	// from the watch (waitRev).
	admitting bool
	waitRev   uint64
	// admitted are picks admitted and not yet claimed or offered.
	admitted []pick
	// until is this host's time before which the window has no room.
	until time.Time
}

// applyRate takes a version of the rate record from the queue's watch.
func (d *dispatcher) applyRate(l *loop, e kv.Entry) {
	r := &d.rate
	r.known = true
	if !e.Live() {
		r.rev, r.gone, r.log, r.written = 0, e.Revision, rateLog{}, time.Time{}
	} else {
		var rl rateLog
		if !rl.decodeFast(e.Value, 0) {
			l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("%w: rate record of queue %s: not a rate log", ErrUndecodable, l.w.q)})
			rl = rateLog{} // written over by the next admission
		}
		r.rev, r.log, r.written = e.Revision, rl, e.Created
	}
	if r.admitting && r.waitRev != 0 && e.Revision >= r.waitRev {
		r.admitting, r.waitRev = false, 0
	}
}

// inWindow is the starts the record counts in the window of period
// ending at server time at, and the record's windows, oldest first.
func (r *rateState) inWindow(at time.Time, period time.Duration) (int, []rateWindow) {
	ws := append([]rateWindow(nil), r.log.Log...)
	if r.log.Last > 0 {
		ws = append(ws, rateWindow{At: r.written, N: r.log.Last})
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].At.Before(ws[j].At) })
	n := 0
	for _, w := range ws {
		if w.At.After(at.Add(-period)) {
			n += w.N
		}
	}
	return n, ws
}

// freeAt is the server time from which the window has room for one more
// start, given the record's windows (oldest first) and at most max.
func freeAt(ws []rateWindow, at time.Time, period time.Duration, max int) time.Time {
	n := 0
	for _, w := range ws {
		if w.At.After(at.Add(-period)) {
			n += w.N
		}
	}
	for _, w := range ws {
		if n < max {
			break
		}
		if w.At.After(at.Add(-period)) {
			n -= w.N
			at = w.At.Add(period)
		}
	}
	return at
}

// nextPick is the next task to claim or offer: the index's next, or, for
// a queue with a rate limit, one admitted already (none while an
// admission is asked for).
func (l *loop) nextPick(now time.Time) (pick, bool) {
	d := l.d
	if d.x.cfg.Paused {
		return pick{}, false // admitted picks wait for the resume
	}
	if d.x.cfg.Rate == nil {
		d.dropAdmitted(now, func(pick) bool { return true }) // the limit was lifted
		return d.x.next()
	}
	if len(d.rate.admitted) > 0 {
		pk := d.rate.admitted[0]
		d.rate.admitted = d.rate.admitted[1:]
		return pk, true
	}
	d.admit(l, now)
	return pick{}, false
}

// dropAdmitted gives the admitted picks that match back to the index
// (their admissions stay counted).
func (d *dispatcher) dropAdmitted(now time.Time, match func(pick) bool) {
	keep := d.rate.admitted[:0]
	for _, pk := range d.rate.admitted {
		if match(pk) {
			d.x.release(pk, nil, now)
		} else {
			keep = append(keep, pk)
		}
	}
	d.rate.admitted = keep
}

// freeRoom is how many more tasks this worker and the others present can
// take now.
func (l *loop) freeRoom() int {
	n := 0
	if !l.draining && l.fatal == nil && !l.cfg.Paused {
		n = max(l.w.concurrency-len(l.running)-l.claims, 0)
		if l.w.maxTasks > 0 {
			n = min(n, max(l.w.maxTasks-l.started, 0))
		}
	}
	for _, w := range l.d.workers {
		n += max(w.room(), 0)
	}
	return n
}

// admit asks the rate record for starts for the tasks that could start
// now: it takes their picks from the index and writes them into the
// record by compare-and-set, deciding at a time no later than the
// server's clock, so that no window of the period ending at any
// admission's write holds more than the limit. The picks are claimed or
// offered once the write landed; a refusal gives them back.
func (d *dispatcher) admit(l *loop, now time.Time) {
	r, lim := &d.rate, d.x.cfg.Rate
	if r.admitting || !(r.known || d.qSynced) || !d.x.synced || now.Before(r.until) {
		return
	}
	r.until = time.Time{}
	period := time.Duration(lim.Period)
	at := now.Add(l.offset - l.early) // no later than the server's clock
	used, ws := r.inWindow(at, period)
	room := lim.Max - used
	if room <= 0 {
		r.until = freeAt(ws, at, period, lim.Max).Add(-l.offset + l.early)
		return
	}
	var picks []pick
	for k := min(room, l.freeRoom(), 256); len(picks) < k; {
		pk, ok := d.x.next()
		if !ok {
			break
		}
		picks = append(picks, pk)
	}
	if len(picks) == 0 {
		return
	}
	next := rateLog{Queue: l.w.q, Last: len(picks)}
	for _, w := range ws {
		if w.At.After(at.Add(-period)) {
			next.Log = append(next.Log, w)
		}
	}
	data, ok := next.encodeFast()
	if !ok {
		for _, pk := range picks {
			d.x.release(pk, nil, now)
		}
		return
	}
	r.admitting = true
	rev, gone := r.rev, r.gone
	l.bg.Add(1)
	l.pool.Go(func() {
		defer l.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), l.w.qs.bucket.Client().Timeout())
		defer cancel()
		var wrote uint64
		var err error
		if rev == 0 {
			wrote, err = l.w.qs.bucket.CreateAfter(ctx, rateKey(l.w.q), data, 0, gone)
		} else {
			wrote, err = l.w.qs.bucket.Update(ctx, rateKey(l.w.q), data, 0, rev)
		}
		l.results <- func() {
			if l.d != d {
				return // the term ended: its picks went with its index
			}
			if err != nil {
				r.admitting = false
				for _, pk := range picks {
					d.x.release(pk, nil, time.Now())
				}
				if !errors.Is(err, kv.ErrConflict) {
					l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("rate limit of queue %s: %w", l.w.q, err)})
					r.until = time.Now().Add(100 * time.Millisecond)
				}
				return // a conflict: the watch brings the record in the way
			}
			if r.rev >= wrote {
				r.admitting = false // the watch delivered it already
			} else {
				r.waitRev = wrote
			}
			r.admitted = append(r.admitted, picks...)
			// A key paused while the write was in flight keeps its picks back.
			d.dropAdmitted(time.Now(), func(pk pick) bool { return pk.key.paused })
		}
	})
}

// rateWake is this host's time when the window has room again (zero:
// none is waited for, or that time has come).
func (d *dispatcher) rateWake(now time.Time) time.Time {
	if d.x.cfg.Rate == nil || !d.rate.until.After(now) {
		return time.Time{}
	}
	return d.rate.until
}
