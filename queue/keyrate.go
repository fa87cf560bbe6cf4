package queue

// Per-key rate limits (adr/0055): each key whose starts a rate bounds
// (the queue's key_rate, or the key's own) has a record of its own,
// <queue>.krate.<key>, a log of its admissions written as the queue's
// <queue>.rate is (rate.go), by the dispatcher, by compare-and-set, before
// the key's picks are claimed or offered. The record carries a TTL longer
// than its period, so the records of keys that rest go away.

import (
	"container/heap"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batonhq/baton/kv"
)

func keyRateKey(q, key string) string   { return q + ".krate." + key }
func isKeyRateKey(q, key string) bool   { return strings.HasPrefix(key, q+".krate.") }
func keyOfKeyRate(q, key string) string { return strings.TrimPrefix(key, q+".krate.") }
func keyRatePattern(q string) string    { return q + ".krate.>" }

// keyRateTTL is the TTL of a key's rate record written under a rate of
// period: whole seconds, past the period, so that every admission it logs
// is older than the period when the server removes it.
func keyRateTTL(period time.Duration) time.Duration {
	return period.Truncate(time.Second) + 2*time.Second
}

// keyRates is the dispatcher's view of its keys' rate records and of the
// keys it holds back.
type keyRates struct {
	state map[string]*rateState
	// wake orders the keys held until their window has room.
	wake wakeHeap
}

// keyState is key name's rate state, made on first use.
func (d *dispatcher) keyState(name string) *rateState {
	if d.krates.state == nil {
		d.krates.state = map[string]*rateState{}
	}
	ks := d.krates.state[name]
	if ks == nil {
		ks = &rateState{known: true}
		d.krates.state[name] = ks
	}
	return ks
}

// applyKeyRate takes a version of a key's rate record from the watch.
func (d *dispatcher) applyKeyRate(l *loop, e kv.Entry) {
	name := keyOfKeyRate(l.w.q, e.Key)
	ks := d.keyState(name)
	ks.seen = max(ks.seen, e.Revision)
	if !e.Live() {
		if !ks.admitting && !d.x.rateHeld[name] {
			// Its key rests: forget it (the next create writes over the
			// marker, which kv's create reads when it is in the way).
			delete(d.krates.state, name)
			return
		}
		ks.rev, ks.gone, ks.log, ks.written = 0, e.Revision, rateLog{}, time.Time{}
	} else {
		var rl rateLog
		if !rl.decodeFast(e.Value, 0) {
			l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("%w: rate record of key %s of queue %s: not a rate log", ErrUndecodable, name, l.w.q)})
			rl = rateLog{} // written over by the key's next admission
		}
		ks.rev, ks.log, ks.written = e.Revision, rl, e.Created
	}
	if ks.admitting && ks.waitRev != 0 && e.Revision >= ks.waitRev {
		ks.admitting, ks.waitRev = false, 0
		d.settleKey(name, ks, time.Now())
	}
}

// settleKey lets key name back into the index's heaps unless an
// admission is in flight or its window is full.
func (d *dispatcher) settleKey(name string, ks *rateState, now time.Time) {
	if !ks.admitting && !ks.until.After(now) {
		ks.until = time.Time{}
		d.x.holdKey(name, false)
	}
}

// keyRatesChanged decides every held key again: the queue's key_rate was
// set, changed or lifted.
func (d *dispatcher) keyRatesChanged(now time.Time) {
	for name := range d.x.rateHeld {
		d.keyRateChanged(name, now)
	}
}

// keyRateChanged decides key name again: its own rate changed.
func (d *dispatcher) keyRateChanged(name string, now time.Time) {
	if ks := d.krates.state[name]; ks != nil {
		ks.until = time.Time{}
		d.settleKey(name, ks, now)
	} else if d.x.rateHeld[name] {
		d.x.holdKey(name, false)
	}
}

// wakeKeys lets back the keys whose window has room by now.
func (d *dispatcher) wakeKeys(now time.Time) {
	h := &d.krates.wake
	for h.Len() > 0 && !(*h)[0].at.After(now) {
		it := heap.Pop(h).(wakeItem)
		if ks := d.krates.state[it.key]; ks != nil && ks.until.Equal(it.at) {
			ks.until = time.Time{}
			d.settleKey(it.key, ks, now)
		}
	}
}

// keyWake is when the first key held for its window has room, if after
// now (zero: none; the loop lets back the keys whose time has come before
// it sleeps).
func (d *dispatcher) keyWake(now time.Time) time.Time {
	h := &d.krates.wake
	for h.Len() > 0 {
		it := (*h)[0]
		if ks := d.krates.state[it.key]; ks == nil || !ks.until.Equal(it.at) {
			heap.Pop(h) // stale: the key was let back otherwise
			continue
		}
		if !it.at.After(now) {
			return now.Add(time.Millisecond) // due: the loop's next turn lets it back
		}
		return it.at
	}
	return time.Time{}
}

// keyAdmission is what one admission takes for one key.
type keyAdmission struct {
	name  string
	lim   *RateLimit
	room  int
	picks []pick
	ws    []rateWindow // the record's windows, oldest first
	sent  uint64       // the revision the watch had delivered at the decision
}

// keyRoom decides whether key name may take one more start in the
// admission being made (batch), at server time at. A key without room is
// held: until its window frees, or until its admission in flight is seen
// back.
func (d *dispatcher) keyRoom(l *loop, batch map[string]*keyAdmission, name string, lim *RateLimit, at, now time.Time) *keyAdmission {
	if ka := batch[name]; ka != nil {
		return ka
	}
	ks := d.keyState(name)
	if ks.admitting {
		d.x.holdKey(name, true)
		return nil
	}
	period := time.Duration(lim.Period)
	used, ws := ks.inWindow(at, period)
	if used >= lim.Max {
		ks.until = freeAt(ws, at, period, lim.Max).Add(-l.offset + l.early)
		if !ks.until.After(now) {
			ks.until = now.Add(time.Millisecond)
		}
		heap.Push(&d.krates.wake, wakeItem{at: ks.until, key: name})
		d.x.holdKey(name, true)
		return nil
	}
	ka := &keyAdmission{name: name, lim: lim, room: lim.Max - used, ws: ws, sent: ks.seen}
	batch[name] = ka
	return ka
}

// keyWrite is the write of key ka's record that admits its picks, at
// server time at.
func (d *dispatcher) keyWrite(q string, ka *keyAdmission, at time.Time) (kv.Write, bool) {
	period := time.Duration(ka.lim.Period)
	next := rateLog{Queue: q, Key: ka.name, Last: len(ka.picks), Writer: d.writer()}
	for _, w := range ka.ws {
		if w.At.After(at.Add(-period)) {
			next.Log = append(next.Log, w)
		}
	}
	data, ok := next.encodeFast()
	if !ok {
		return kv.Write{}, false
	}
	ks := d.keyState(ka.name)
	w := kv.Write{Key: keyRateKey(q, ka.name), Value: data, TTL: keyRateTTL(period)}
	if ks.rev == 0 {
		w.Kind, w.Rev = kv.WriteCreate, ks.gone
	} else {
		w.Kind, w.Rev = kv.WriteUpdate, ks.rev
	}
	return w, true
}

// keyWritten takes the outcome of key ka's write: true if it admitted
// ka's picks.
func (d *dispatcher) keyWritten(l *loop, ka *keyAdmission, res kv.WriteResult, now time.Time) bool {
	ks := d.keyState(ka.name)
	if res.Err == nil {
		if ks.seen >= res.Rev {
			ks.admitting = false // the watch delivered it already
			d.settleKey(ka.name, ks, now)
		} else {
			ks.waitRev = res.Rev
		}
		return true
	}
	ks.admitting = false
	var ce *kv.ConflictError
	switch {
	case errors.As(res.Err, &ce):
		ks.refused(ce, ka.sent)
	default:
		l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("rate limit of key %s of queue %s: %w", ka.name, l.w.q, res.Err)})
		ks.until = now.Add(100 * time.Millisecond)
		heap.Push(&d.krates.wake, wakeItem{at: ks.until, key: ka.name})
	}
	d.settleKey(ka.name, ks, now)
	return false
}

// wakeItem is a key held until at.
type wakeItem struct {
	at  time.Time
	key string
}

func (w wakeItem) when() time.Time { return w.at }

// wakeHeap orders the keys held for their window.
type wakeHeap = timeHeap[wakeItem]
