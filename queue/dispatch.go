package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/batonhq/baton/kv"
)

// offerTimeout is how long an offer holds its task, lane and token for the
// worker it was made to: one that has not claimed it by then (it died, or
// its claim lost) frees them for another.
const offerTimeout = 2 * time.Second

// dispatcher is a worker's state while it holds the queue's dispatcher
// term: the index of the queue and the key locks, the other workers present
// and what it offered them, and the attempts they run.
type dispatcher struct {
	term term
	// nonce and writes name its rate records' writes (writer).
	nonce  string
	writes uint64
	x      *index
	qw, sw *kv.Watcher
	stop   context.CancelFunc // ends the watches
	head   uint64             // the sessions bucket's last revision before its watch

	qSynced, sSynced bool

	workers map[string]*remote // the other workers present, by id
	// dirty are the ids of the workers whose inboxes changed since their
	// last write: flush looks at these, not at every worker present.
	dirty  map[string]struct{}
	offers map[string]*outOffer
	// runs are the attempts other workers run, by task id: what a stop
	// note names.
	runs map[string]remoteRun
	// scheds are the queue's schedules, by name (schedule_fire.go).
	scheds map[string]*schedState
	// rate is the queue's rate record and admissions (rate.go).
	rate   rateState
	krates keyRates
	// admitting: an admission's writes are in flight (rate.go).
	admitting bool
}

// remote is another worker of the queue, as the dispatcher knows it.
type remote struct {
	p      *presence
	offers map[string]*outOffer // by task id
	stops  map[string]stopNote  // by task id
	active int                  // attempts it runs
	// The inbox: its revision (0: none, or gone at last), and whether a
	// write is in flight (whether what it should hold changed since the
	// last write is the dispatcher's dirty set).
	rev     uint64
	gone    uint64
	writing bool
	// stalled says an offer to it expired unclaimed (a process paused, or
	// cut off): it is offered nothing more until it shows life, by
	// renewing its presence or starting a task.
	stalled bool
}

// outOffer is a pick offered to another worker, held in the index until
// the task changes or the offer expires.
type outOffer struct {
	pk     pick
	worker string
	until  time.Time
}

// remoteRun is an attempt another worker runs.
type remoteRun struct {
	worker string
	fence  uint64
	slot   string
	token  int
}

// lead is the election's work while this worker holds the dispatcher term:
// it hands the term to the loop and waits until the loop no longer
// dispatches under it. A worker that stops taking tasks gives the term up
// (nil: the election hands it on); a term that ends otherwise returns its
// context's cause, and the election campaigns again.
func (l *loop) lead(ctx context.Context) error {
	t := term{ctx: ctx, done: make(chan struct{})}
	select {
	case l.terms <- t:
	case <-l.resign:
		return nil
	case <-l.quit:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case <-t.done:
	case <-l.quit:
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// startTerm makes this worker the dispatcher: it reads the sessions
// bucket's head and starts the watches the index is built from.
func (l *loop) startTerm(t term) {
	if l.draining || l.d != nil {
		close(t.done)
		return
	}
	hctx, cancel := context.WithTimeout(t.ctx, l.w.qs.bucket.Client().Timeout())
	head, _, err := l.w.qs.m.Bucket().Head(hctx)
	cancel()
	if err != nil {
		l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("dispatch queue %s: %w", l.w.q, err)})
		close(t.done)
		return
	}
	x := newIndex(l.w.q, l.cfg)
	x.offset, x.early = l.offset, l.early
	x.myHost, x.myPID, x.myStart = l.w.qs.m.Host(), l.w.qs.proc.PID, l.w.qs.proc.Start
	wctx, stop := context.WithCancel(t.ctx)
	qw, err := l.w.qs.bucket.WatchPatterns(wctx, dispatchPatterns(l.w.q))
	if err != nil {
		stop()
		close(t.done)
		return
	}
	sw, err := l.w.qs.m.Bucket().Watch(wctx, "")
	if err != nil {
		stop()
		close(t.done)
		return
	}
	l.d = &dispatcher{term: t, nonce: uuid.NewString()[:8], x: x, qw: qw, sw: sw, stop: stop, head: head,
		workers: map[string]*remote{}, dirty: map[string]struct{}{}, offers: map[string]*outOffer{}, runs: map[string]remoteRun{}, scheds: map[string]*schedState{}}
}

// endTerm stops dispatching, if this worker does.
func (l *loop) endTerm() {
	d := l.d
	if d == nil {
		return
	}
	l.d = nil
	d.stop()
	close(d.term.done)
}

func (d *dispatcher) maybeSynced(l *loop) {
	if d.qSynced && d.sSynced && !d.x.synced {
		d.x.markSynced(d.head)
		for _, r := range l.running {
			l.checkRun(d.x, r)
		}
		// Every worker hears from this dispatcher once, offers or not, so
		// that it knows it has been seen.
		for id := range d.workers {
			d.markDirty(id)
		}
		l.markReady()
	}
}

// applyQueue takes an entry of the queue's watch into the index, and
// follows what it says of the other workers and their attempts.
func (d *dispatcher) applyQueue(l *loop, e kv.Entry) {
	q := l.w.q
	switch {
	case isPresenceKey(q, e.Key):
		d.applyPresence(l, e)
		return
	case isScheduleKey(q, e.Key):
		d.applySchedule(l, e)
		return
	case e.Key == rateKey(q):
		d.applyRate(l, e)
		return
	case isKeyRateKey(q, e.Key):
		d.applyKeyRate(l, e)
		return
	}
	// A rate changed: the keys it holds are decided again (a task's
	// change, most of what comes, costs no look).
	var key string
	var keyRate, ownRate *RateLimit
	switch {
	case isConfigKey(q, e.Key):
		keyRate = d.x.cfg.KeyRate
	case isKeyConfigKey(q, e.Key):
		key = keyOfKeyConfig(q, e.Key)
		ownRate = d.x.keyCfg[key].Rate
	}
	d.x.applyQueue(e, time.Now())
	switch {
	case isConfigKey(q, e.Key) && !d.x.cfg.KeyRate.equal(keyRate):
		d.keyRatesChanged(time.Now())
	case key != "" && !d.x.keyCfg[key].Rate.equal(ownRate):
		d.keyRateChanged(key, time.Now())
	}
	switch {
	case isConfigKey(q, e.Key) && d.rate.until.After(time.Now()):
		d.rate.until = time.Time{} // the rate may have changed: decide again
		if d.x.cfg.Paused {
			d.withdrawWhere(l, func(*outOffer) bool { return true })
		}
	case isConfigKey(q, e.Key) && d.x.cfg.Paused:
		d.withdrawWhere(l, func(*outOffer) bool { return true })
	case isKeyConfigKey(q, e.Key) && d.x.keyCfg[keyOfKeyConfig(q, e.Key)].Paused:
		name := keyOfKeyConfig(q, e.Key)
		d.withdrawWhere(l, func(o *outOffer) bool { return o.pk.key.name == name })
		d.dropAdmitted(time.Now(), func(pk pick) bool { return pk.key.name == name })
	}
	if isTaskKey(q, e.Key) {
		d.followTask(l, taskIDOf(q, e.Key))
	} else if i := tokenIndexOf(q, e.Key); i >= 0 {
		for id, r := range d.runs {
			if r.token == i {
				d.checkRemote(l, id)
			}
		}
	}
}

// applySession takes an entry of the key locks' watch into the index, and
// checks the other workers' attempts under that slot.
func (d *dispatcher) applySession(l *loop, e kv.Entry) {
	d.x.applySession(e, time.Now())
	for id, r := range d.runs {
		if r.slot == e.Key {
			d.checkRemote(l, id)
		}
	}
}

// followTask settles what the dispatcher offered of task id and tracks
// the attempt another worker runs of it.
func (d *dispatcher) followTask(l *loop, id string) {
	t := d.x.tasks[id]
	if o := d.offers[id]; o != nil && (t == nil || t.rev > o.pk.rev) {
		d.withdraw(l, o) // taken, by its worker or another, or changed
	}
	old, had := d.runs[id]
	var run *Run
	if t != nil && t.state == StateActive {
		run = t.run
	}
	switch {
	case run != nil && run.Worker != "" && run.Worker != l.id:
		if had && old.fence == run.Fence {
			break
		}
		if had {
			d.endRemote(l, id, old, true)
		}
		d.runs[id] = remoteRun{worker: run.Worker, fence: run.Fence, slot: run.Slot, token: run.Token}
		if w := d.workers[run.Worker]; w != nil {
			w.active++
			w.stalled = false // alive: it started a task
		}
	case had:
		// The attempt is over. Its worker ended it, or another writer did
		// (a recovery, a release): then the worker must stop it.
		d.endRemote(l, id, old, !d.endedByItsWorker(id, old.fence))
		return
	}
	d.checkRemote(l, id)
}

// endedByItsWorker reports whether the task's latest version is the end
// that the worker of attempt fence wrote.
func (d *dispatcher) endedByItsWorker(id string, fence uint64) bool {
	t := d.x.tasks[id]
	if t == nil {
		// Final, and dropped from the index: its worker ended it, or a
		// recovery found it out of attempts once its lock was gone.
		return true
	}
	return t.endFence == fence && t.endReason != ReasonLost && t.endReason != ReasonReleased
}

// endRemote forgets attempt r of task id; stop says the worker must be
// told to stop it.
func (d *dispatcher) endRemote(l *loop, id string, r remoteRun, stop bool) {
	delete(d.runs, id)
	w := d.workers[r.worker]
	if w == nil {
		return
	}
	w.active--
	if stop {
		w.stops[id] = stopNote{Task: id, Fence: r.fence}
		d.markDirty(r.worker)
	} else {
		delete(w.stops, id) // dropped from the next write
	}
}

// checkRemote tells the worker of task id's attempt to stop it if the
// index shows it cancelled, or its lock or token lost.
func (d *dispatcher) checkRemote(l *loop, id string) {
	r, ok := d.runs[id]
	if !ok {
		return
	}
	w := d.workers[r.worker]
	if w == nil {
		return
	}
	x := d.x
	if !x.synced {
		return
	}
	var note *stopNote
	if _, ending := x.endings[id]; !ending {
		if s := x.slots[r.slot]; s == nil && x.sessSeq >= r.fence || s != nil && s.Fence != r.fence {
			note = &stopNote{Task: id, Fence: r.fence}
		} else if r.token >= 0 {
			if tok := x.tokens[r.token]; tok == nil && x.tokenGone[r.token] > 0 || tok != nil && tok.Task != id {
				note = &stopNote{Task: id, Fence: r.fence}
			}
		}
	}
	if t := x.tasks[id]; note == nil && t != nil && t.cancel {
		note = &stopNote{Task: id, Fence: r.fence, Cancel: true}
	}
	if note != nil {
		if cur, ok := w.stops[id]; !ok || cur != *note {
			w.stops[id] = *note
			d.markDirty(r.worker)
		}
	}
}

// applyPresence follows the other workers coming, renewing, draining and
// going.
func (d *dispatcher) applyPresence(l *loop, e kv.Entry) {
	id := workerOf(l.w.q, e.Key)
	if id == l.id {
		return
	}
	w := d.workers[id]
	if !e.Live() {
		if w != nil {
			for _, o := range w.offers {
				d.withdraw(l, o)
			}
			delete(d.workers, id)
		}
		return
	}
	p, err := decodePresence(l.w.q, e)
	if err != nil {
		return // not a worker this version knows: offered nothing
	}
	if w == nil {
		w = &remote{offers: map[string]*outOffer{}, stops: map[string]stopNote{}}
		d.markDirty(id)
		for _, r := range d.runs {
			if r.worker == id {
				w.active++
			}
		}
		d.workers[id] = w
	}
	if w.p == nil || p.rev > w.p.rev {
		w.stalled = false // alive: it renewed its presence
	}
	w.p = p
	if p.Draining {
		for _, o := range w.offers {
			d.withdraw(l, o)
		}
	}
}

// markDirty says that worker id's inbox must be written again.
func (d *dispatcher) markDirty(id string) {
	d.dirty[id] = struct{}{}
}

// inboxOwner is the worker whose inbox key is key.
func inboxOwner(q, key string) string { return key[len(q)+len(".inbox."):] }

// room is how many more tasks w can be offered.
func (w *remote) room() int {
	if w.p == nil || w.p.Draining || w.stalled {
		return 0
	}
	return w.p.Concurrency - w.active - len(w.offers)
}

// offerAll offers the other workers what they have room for, in the
// index's order. It fills the busiest first: a worker that runs tasks
// already is awake, and one write of its inbox carries several offers,
// where spreading tasks over idle workers wakes a process for each.
func (d *dispatcher) offerAll(l *loop, now time.Time) {
	x := d.x
	if !x.synced || x.cfg.MaxActive > 0 && x.used() >= x.cfg.MaxActive {
		return
	}
	for {
		id, w := d.busiestWithRoom()
		if w == nil {
			return
		}
		for w.room() > 0 {
			pk, ok := l.nextPick(now)
			if !ok {
				return
			}
			pk.from = d
			o := &outOffer{pk: pk, worker: id, until: now.Add(offerTimeout)}
			d.offers[pk.id] = o
			w.offers[pk.id] = o
			d.markDirty(id)
		}
	}
}

// busiestWithRoom is the worker with room that runs or was offered the
// most (the lowest id among equals), or nil.
func (d *dispatcher) busiestWithRoom() (string, *remote) {
	var bestID string
	var best *remote
	for id, w := range d.workers {
		if w.room() <= 0 {
			continue
		}
		load, bestLoad := w.active+len(w.offers), 0
		if best != nil {
			bestLoad = best.active + len(best.offers)
		}
		if best == nil || load > bestLoad || load == bestLoad && id < bestID {
			bestID, best = id, w
		}
	}
	return bestID, best
}

// withdraw ends offer o: the index gets its task, lane and token back
// unless the task moved on.
func (d *dispatcher) withdraw(l *loop, o *outOffer) {
	delete(d.offers, o.pk.id)
	if w := d.workers[o.worker]; w != nil {
		delete(w.offers, o.pk.id)
	}
	d.x.release(o.pk, nil, time.Now())
}

// withdrawWhere takes back the offers that match, writing their workers'
// inboxes again without them: a pause stops what was offered and not yet
// claimed.
func (d *dispatcher) withdrawWhere(l *loop, match func(*outOffer) bool) {
	for _, o := range d.offers {
		if match(o) {
			d.withdraw(l, o)
			d.markDirty(o.worker)
		}
	}
}

// expireOffers withdraws the offers their workers did not take in time.
func (d *dispatcher) expireOffers(l *loop, now time.Time) {
	for _, o := range d.offers {
		if !now.Before(o.until) {
			if w := d.workers[o.worker]; w != nil {
				w.stalled = true
			}
			d.withdraw(l, o)
		}
	}
}

// nextExpiry is when the earliest offer expires (zero: none).
func (d *dispatcher) nextExpiry() time.Time {
	var at time.Time
	for _, o := range d.offers {
		if at.IsZero() || o.until.Before(at) {
			at = o.until
		}
	}
	return at
}

// flush writes the inboxes whose contents changed, one write in flight per
// inbox, by compare-and-set on the revision this dispatcher last saw.
func (d *dispatcher) flush(l *loop) {
	if !d.x.synced {
		return
	}
	for id := range d.dirty {
		w := d.workers[id]
		if w == nil {
			delete(d.dirty, id) // gone
			continue
		}
		if w.writing {
			continue // written again once this write is answered
		}
		delete(d.dirty, id)
		in := inbox{Queue: l.w.q, Worker: id, Dispatcher: l.id, Offers: make([]*offer, 0, len(w.offers))}
		for _, o := range w.offers {
			in.Offers = append(in.Offers, offerOf(o.pk))
		}
		for _, s := range w.stops {
			in.Stops = append(in.Stops, &s)
		}
		data, err := in.encode()
		if err != nil {
			continue
		}
		w.writing = true
		rev, gone, ttl := w.rev, w.gone, time.Duration(l.cfg.TTL)
		l.bg.Add(1)
		l.pool.Go(func() {
			defer l.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), l.w.qs.bucket.Client().Timeout())
			defer cancel()
			var next uint64
			var err error
			for range 3 {
				if rev == 0 {
					next, err = l.w.qs.bucket.CreateAfter(ctx, inboxKey(l.w.q, id), data, ttl, gone)
				} else {
					next, err = l.w.qs.bucket.Update(ctx, inboxKey(l.w.q, id), data, ttl, rev)
				}
				var ce *kv.ConflictError
				if !errors.As(err, &ce) || ce.Current == nil {
					break
				}
				// Another dispatcher wrote it, or this one's view is behind:
				// write over what is there.
				if ce.Current.Live() {
					rev = ce.Current.Revision
				} else {
					rev, gone = 0, ce.Current.Revision
				}
			}
			l.post(func() {
				w.writing = false
				if err != nil {
					d.markDirty(id) // written again with the next pass
					l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("offer tasks to worker %s: %w", id, err)})
					return
				}
				if next > w.rev {
					w.rev = next
				}
			})
		})
	}
}

// writer names one write of this term's rate records.
func (d *dispatcher) writer() string {
	d.writes++
	return d.nonce + "." + strconv.FormatUint(d.writes, 10)
}
