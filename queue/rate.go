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
	Key   string       `json:"key,omitempty"` // a key's record (keyrate.go)
	Log   []rateWindow `json:"log"`
	Last  int          `json:"last"`
	// Writer names the write: its dispatcher term and the admission's
	// number in it. Two writes never carry the same bytes, so kv can tell
	// a write of its own whose answer was lost from a rival's (a new term
	// that computed the same log and count would write them otherwise).
	Writer string `json:"writer,omitempty"`
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
	seen    uint64    // the highest revision the watch delivered, live or not
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
	r.seen = max(r.seen, e.Revision)
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
// a queue with a rate limit (of its own or of its keys), one admitted
// already (none while an admission is asked for).
func (l *loop) nextPick(now time.Time) (pick, bool) {
	d := l.d
	if d.x.cfg.Paused {
		return pick{}, false // admitted picks wait for the resume
	}
	if !d.rated() {
		d.dropAdmitted(now, func(pick) bool { return true }) // the limit was lifted
		return d.x.next()
	}
	if len(d.rate.admitted) == 0 {
		d.admit(l, now) // picks that need no write are admitted at once
	}
	if len(d.rate.admitted) > 0 {
		pk := d.rate.admitted[0]
		d.rate.admitted = d.rate.admitted[1:]
		return pk, true
	}
	return pick{}, false
}

// rated reports whether a rate bounds the starts of the queue or of any
// of its keys.
func (d *dispatcher) rated() bool { return d.x.cfg.Rate != nil || d.x.keyRated() }

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

// admit asks the rate records for starts for the tasks that could start
// now: it takes their picks from the index and writes them into the
// queue's record and their keys' records by compare-and-set, deciding at
// a time no later than the server's clock, so that no window of a period
// ending at any admission's write holds more than its limit. The picks
// are claimed or offered once the writes landed; a refusal gives them
// back (a pick admitted by one record and refused by another is a start
// counted and not made).
func (d *dispatcher) admit(l *loop, now time.Time) {
	r, lim := &d.rate, d.x.cfg.Rate
	if !d.qSynced || !d.x.synced || d.admitting {
		// One admission at a time: its picks are not in freeRoom, so a
		// second would admit more than the workers can take, and those
		// would start late, bunched against the next window's.
		return
	}
	d.wakeKeys(now)
	at := now.Add(l.offset - l.early) // no later than the server's clock
	room := 256
	var ws []rateWindow
	if lim != nil {
		if r.admitting || now.Before(r.until) {
			return
		}
		r.until = time.Time{}
		var used int
		used, ws = r.inWindow(at, time.Duration(lim.Period))
		room = lim.Max - used
		if room <= 0 {
			r.until = freeAt(ws, at, time.Duration(lim.Period), lim.Max).Add(-l.offset + l.early)
			return
		}
	}
	var picks []pick
	var keys []*keyAdmission
	batch := map[string]*keyAdmission{}
	for k, n := min(room, l.freeRoom(), 256), 0; n < k; {
		pk, ok := d.x.next()
		if !ok {
			break
		}
		klim := d.x.keyRateOf(pk.key.name)
		if lim == nil && klim == nil {
			r.admitted = append(r.admitted, pk) // no rate bounds it
			n++
			continue
		}
		if klim != nil {
			ka := d.keyRoom(l, batch, pk.key.name, klim, at, now)
			if ka == nil {
				d.x.release(pk, nil, now) // its key is held now
				continue
			}
			if len(ka.picks) == 0 {
				keys = append(keys, ka)
			}
			ka.picks = append(ka.picks, pk)
			if len(ka.picks) >= ka.room {
				d.x.holdKey(ka.name, true)
			}
		}
		picks = append(picks, pk)
		n++
	}
	if len(picks) == 0 {
		return
	}
	var writes []kv.Write
	if lim != nil {
		next := rateLog{Queue: l.w.q, Last: len(picks), Writer: d.writer()}
		for _, w := range ws {
			if w.At.After(at.Add(-time.Duration(lim.Period))) {
				next.Log = append(next.Log, w)
			}
		}
		data, ok := next.encodeFast()
		if !ok {
			d.giveBack(picks, keys, now)
			return
		}
		w := kv.Write{Kind: kv.WriteUpdate, Key: rateKey(l.w.q), Value: data, Rev: r.rev}
		if r.rev == 0 {
			w.Kind, w.Rev = kv.WriteCreate, r.gone
		}
		writes = append(writes, w)
		r.admitting = true
	}
	for _, ka := range keys {
		w, ok := d.keyWrite(l.w.q, ka, at)
		if !ok {
			r.admitting = false
			d.giveBack(picks, keys, now)
			return
		}
		writes = append(writes, w)
		d.keyState(ka.name).admitting = true
		d.x.holdKey(ka.name, true)
	}
	d.admitting = true
	sent := r.seen
	l.bg.Add(1)
	l.pool.Go(func() {
		defer l.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), l.w.qs.bucket.Client().Timeout())
		defer cancel()
		res := l.w.qs.bucket.Pipeline(ctx, writes)
		l.post(func() {
			if l.d != d {
				return // the term ended: its picks went with its index
			}
			d.admitted(l, lim != nil, sent, picks, keys, res)
		})
	})
}

// admitted takes the outcome of an admission's writes (the queue's
// record's first if queued, then one per key of keys): the picks that
// every write admitted are claimed or offered, the others given back.
func (d *dispatcher) admitted(l *loop, queued bool, sent uint64, picks []pick, keys []*keyAdmission, res []kv.WriteResult) {
	r, now := &d.rate, time.Now()
	d.admitting = false
	ok := true
	if queued {
		qr := res[0]
		res = res[1:]
		if qr.Err != nil {
			ok = false
			r.admitting = false
			var ce *kv.ConflictError
			if errors.As(qr.Err, &ce) {
				r.refused(ce, sent) // the watch brings the record in the way
			} else {
				l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("rate limit of queue %s: %w", l.w.q, qr.Err)})
				r.until = now.Add(100 * time.Millisecond)
			}
		} else if r.seen >= qr.Rev {
			r.admitting = false // the watch delivered it already
		} else {
			r.waitRev = qr.Rev
		}
	}
	refused := map[string]bool{}
	for i, ka := range keys {
		if !d.keyWritten(l, ka, res[i], now) {
			refused[ka.name] = true
		}
	}
	for _, pk := range picks {
		if !ok || refused[pk.key.name] {
			d.x.release(pk, nil, now)
		} else {
			r.admitted = append(r.admitted, pk)
		}
	}
	// A key paused while the writes were in flight keeps its picks back.
	d.dropAdmitted(now, func(pk pick) bool { return pk.key.paused })
}

// refused takes a compare-and-set refused by what the server holds now,
// if the watch has not delivered it yet: a live record is waited for (the
// watch brings it; nothing is admitted meanwhile), a removal is followed
// by the next create. sent is the revision the watch had delivered when
// the write was decided.
func (r *rateState) refused(ce *kv.ConflictError, sent uint64) {
	switch cur := ce.Current; {
	case cur == nil:
		if r.seen == sent {
			// Nothing at all under the key, not even a marker, and the
			// watch said nothing since: the next create expects none.
			r.rev, r.gone, r.log = 0, 0, rateLog{}
		}
	case cur.Revision <= r.seen:
		// Delivered already: the state is as current as the conflict's.
	case cur.Live():
		r.admitting, r.waitRev = true, cur.Revision
	default:
		r.rev, r.gone, r.log = 0, cur.Revision, rateLog{}
	}
}

// giveBack returns an admission's picks to the index, its keys settled.
func (d *dispatcher) giveBack(picks []pick, keys []*keyAdmission, now time.Time) {
	for _, pk := range picks {
		d.x.release(pk, nil, now)
	}
	for _, ka := range keys {
		ks := d.keyState(ka.name)
		ks.admitting = false
		d.settleKey(ka.name, ks, now)
	}
}

// rateWake is this host's time when the queue's window, or a held key's,
// has room again (zero: none is waited for, or that time has come).
func (d *dispatcher) rateWake(now time.Time) time.Time {
	var at time.Time
	if d.x.cfg.Rate != nil && d.rate.until.After(now) {
		at = d.rate.until
	}
	if k := d.keyWake(now); !k.IsZero() && (at.IsZero() || k.Before(at)) {
		at = k
	}
	return at
}
