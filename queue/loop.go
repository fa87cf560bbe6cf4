package queue

// The worker's loop: one goroutine that runs the worker's tasks (the ones
// the dispatcher offers it) and, while the worker holds the queue's
// dispatcher term, keeps the index of the queue and the key locks,
// dispatches to every worker and recovers orphans (adr/0035).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/kv"
)

// loop is a running worker's state, owned by the goroutine of run.
type loop struct {
	w      *Worker
	id     string // this worker's id: its presence and inbox keys
	cfg    Config
	offset time.Duration // the server's clock minus this host's
	early  time.Duration // how far offset may be ahead of it
	// stampOffset is offset, for goroutines other than the loop's.
	stampOffset atomic.Int64
	results     chan func()

	// What this worker runs, and what it was offered.
	mine     *kv.Watcher // its inbox and the queue's config, in one watch
	pres     *presence   // as last written
	renewAt  time.Time   // when the presence is renewed next
	presBusy bool        // a write of the presence is in flight
	offers   []offer     // offered, not yet claimed
	taken    map[string]uint64
	// ready says a dispatcher with the whole queue in view has offered this
	// worker what there was (readyAt: when): the idle timeout counts from
	// there.
	ready   bool
	readyAt time.Time

	running map[string]*runState // by task id
	// hostDue is when the pid file is to be written again (zero: it says
	// what runs), hostRuns the attempts it names (hostwatch.go).
	hostDue    time.Time
	hostRuns   map[string]uint64
	bySlot     map[string]*runState
	byToken    map[int]*runState
	claims     int
	started    int
	recovering map[string]bool
	bg         sync.WaitGroup
	// pool runs the goroutines of each task (claim, work, end) and of the
	// inbox writes, kept between tasks; closed once bg is done.
	pool *goPool
	// quit is closed when run returns: goroutines waiting to retry give up.
	quit chan struct{}

	draining    bool
	interrupted bool // Interrupt was called: a drain stops tasks at once
	fatal       error
	pause       time.Duration // after a claim failed unexpectedly
	paused      time.Time

	// The dispatcher, while this worker holds the term (nil otherwise).
	d     *dispatcher
	terms chan term
	// resign is closed once the worker stops taking tasks: a term it holds
	// or is given is handed on.
	resign chan struct{}
}

// term is a dispatcher term the election gave this worker; the loop closes
// done once it no longer dispatches under it.
type term struct {
	ctx  context.Context
	done chan struct{}
}

func (l *loop) run(ctx context.Context) error {
	done := ctx.Done()
	var graceC <-chan time.Time
	interrupt := l.w.interrupt
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	poll := time.NewTicker(samehostPoll)
	defer poll.Stop()
	defer l.pool.Close()
	defer l.bg.Wait()
	defer close(l.quit)
	defer l.endTerm()
	for {
		now := time.Now()
		if l.d != nil {
			l.d.x.advance(now)
			l.d.wakeKeys(now)
			l.d.x.prune(now)
			l.recover()
			l.d.expireOffers(l, now)
			l.d.fireSchedules(l, now)
			l.d.cancelDoomed(l)
		}
		l.dispatch(now)
		if l.d != nil {
			l.d.flush(l)
		}
		l.renewPresence(now)
		l.flushHostFile(now)
		if err, over := l.over(now); over {
			l.stopAll(ErrDraining, 0)
			l.waitIdle()
			return err
		}
		timer.Reset(l.wake(now))
		var pollC <-chan time.Time
		var qC, sC <-chan *kv.Entry
		var termC <-chan struct{}
		if d := l.d; d != nil {
			qC, sC, termC = d.qw.Updates(), d.sw.Updates(), d.term.ctx.Done()
			if len(d.x.sameHost) > 0 && d.x.synced {
				pollC = poll.C
			}
		}
		select {
		case e, ok := <-qC:
			if !ok {
				l.endTerm() // another worker takes over
				break
			}
			l.onQueue(e)
		case e, ok := <-sC:
			if !ok {
				l.endTerm()
				break
			}
			l.onSession(e)
		case <-termC:
			l.endTerm()
		case t := <-l.terms:
			l.startTerm(t)
		case e, ok := <-l.mine.Updates():
			if !ok {
				return l.lost(fmt.Errorf("%w: the watch of this worker's inbox and queue %s's config ended", kv.ErrUnavailable, l.w.q))
			}
			l.onMine(e)
		case f := <-l.results:
			f()
		case <-timer.C:
		case <-pollC:
			l.checkSameHost()
		case <-done:
			done = nil
			l.beginDrain()
			if l.interrupted {
				l.stopAll(ErrDraining, min(l.w.grace, time.Second))
			} else if len(l.running) > 0 {
				graceC = time.After(l.w.grace)
			}
		case <-graceC:
			graceC = nil
			l.stopAll(ErrDraining, l.w.grace)
		case <-interrupt:
			interrupt, l.interrupted = nil, true
			if l.draining {
				l.stopAll(ErrDraining, min(l.w.grace, time.Second))
			}
		}
		l.drain()
	}
}

// beginDrain stops taking tasks: the presence says so, a dispatcher term
// is handed on, offers are left to expire.
func (l *loop) beginDrain() {
	if l.draining {
		return
	}
	l.draining = true
	l.offers = nil
	close(l.resign)
	l.endTerm()
	l.renewAt = time.Time{} // rewrite the presence now, draining
}

// over says whether the loop is done, and with what.
func (l *loop) over(now time.Time) (error, bool) {
	busy := len(l.running) > 0 || l.claims > 0 || len(l.recovering) > 0 || l.presBusy
	switch {
	case (l.draining || l.fatal != nil) && !busy:
		return l.fatal, true
	case l.w.maxTasks > 0 && l.started >= l.w.maxTasks && !busy:
		return nil, true
	case l.w.maxTasks > 0 && l.started == 0 && !busy && l.w.idle >= 0 && l.ready && !now.Before(l.readyAt.Add(l.w.idle)):
		return ErrNoTask, true
	}
	return nil, false
}

// wake is how long the loop may sleep when nothing arrives.
func (l *loop) wake(now time.Time) time.Duration {
	d := time.Hour
	if x := l.x(); x != nil {
		if at := x.nextDue(); !at.IsZero() {
			d = min(d, at.Sub(now))
		}
		if at := x.nextEnding(); !at.IsZero() {
			d = min(d, at.Sub(now))
		}
		if at := l.d.nextExpiry(); !at.IsZero() {
			d = min(d, at.Sub(now))
		}
		if at := l.d.nextSchedule(); !at.IsZero() {
			d = min(d, at.Sub(now))
		}
		if at := l.d.rateWake(now); !at.IsZero() {
			d = min(d, at.Sub(now))
		}
	}
	if l.paused.After(now) {
		d = min(d, l.paused.Sub(now))
	}
	if !l.renewAt.IsZero() {
		d = min(d, l.renewAt.Sub(now))
	}
	if at := l.hostFileDue(); !at.IsZero() {
		d = min(d, at.Sub(now))
	}
	if at := l.readyAt.Add(l.w.idle); l.w.maxTasks > 0 && l.w.idle >= 0 && l.started == 0 && l.ready && at.After(now) {
		d = min(d, at.Sub(now))
	}
	return max(d, time.Millisecond)
}

// post hands f to the loop from a background goroutine; once the loop
// has returned, f is dropped (no one runs it), so that bg.Wait does not
// wait on a send that no one receives.
func (l *loop) post(f func()) {
	select {
	case l.results <- f:
	case <-l.quit:
	}
}

// x is the index while this worker dispatches (nil otherwise).
func (l *loop) x() *index {
	if l.d == nil {
		return nil
	}
	return l.d.x
}

// lost ends the loop when a watch ended: running tasks are stopped, their
// locks left to expire if the server cannot be reached.
func (l *loop) lost(err error) error {
	l.beginDrain() // a claim that lands now is given back, not started
	l.stopAll(ErrLockLost, l.w.grace)
	l.waitIdle()
	return err
}

// waitIdle runs the results of goroutines until none is left.
func (l *loop) waitIdle() {
	for len(l.running) > 0 || l.claims > 0 || len(l.recovering) > 0 || l.presBusy {
		f := <-l.results
		f()
	}
}

// dispatch starts claims while this worker has room: of the tasks offered
// to it, or, while it dispatches, of the tasks it picks for itself; then,
// while it dispatches, offers the other workers what they have room for.
func (l *loop) dispatch(now time.Time) {
	if l.d != nil {
		defer l.d.offerAll(l, now)
	}
	if l.draining || l.fatal != nil || now.Before(l.paused) || l.cfg.Paused {
		return
	}
	for len(l.running)+l.claims < l.w.concurrency && (l.w.maxTasks == 0 || l.started < l.w.maxTasks) {
		var pk pick
		switch {
		case len(l.offers) > 0:
			o := l.offers[0]
			l.offers = l.offers[1:]
			l.taken[o.Task] = o.Rev
			pk = o.pickOf(l.cfg)
		case l.d != nil:
			var ok bool
			if pk, ok = l.nextPick(now); !ok {
				return
			}
			pk.from = l.d
		default:
			return
		}
		l.claims++
		l.started++
		cfg := l.cfg
		l.bg.Add(1)
		l.pool.Go(func() {
			defer l.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*l.w.qs.bucket.Client().Timeout())
			defer cancel()
			c, err := l.w.qs.claim(ctx, cfg, pk, l.id, l.stampNow())
			l.post(func() { l.claimed(pk, cfg, c, err) })
		})
	}
}

// stampNow is this host's clock corrected by the offset measured at start:
// an estimate of the server's time, for the times written into records.
// It is read by the goroutines of running tasks, hence its own copy of
// the offset.
func (l *loop) stampNow() time.Time {
	return time.Now().Add(time.Duration(l.stampOffset.Load())).UTC()
}

func (l *loop) claimed(pk pick, cfg Config, c *claimed, err error) {
	l.claims--
	now := time.Now()
	// A pick of this worker's own term tells the index how it went; one of
	// an earlier term, or an offer, is left to the watches.
	var x *index
	if pk.from != nil && pk.from == l.d {
		x = l.d.x
		x.release(pk, c, now)
	}
	if err != nil {
		l.started--
		var ce *claimError
		switch {
		case errors.Is(err, errTaskGarbage):
			if x != nil {
				x.garbage(pk.id, pk.rev, time.Now())
			}
			l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("task %s is never run: %w", pk.id, err)})
		case errors.As(err, &ce):
			if x == nil {
				break
			}
			if ce.sess != nil && ce.sess.Revision > x.sessSeq {
				x.setSlot(pk.slot, ce.sess, time.Now())
			}
			if ce.tok != nil && ce.tok.rev > x.qSeq {
				x.tokens[pk.token] = ce.tok
				x.free.remove(pk.token)
			}
		default:
			l.pause = min(max(2*l.pause, 50*time.Millisecond), 2*time.Second)
			l.paused = now.Add(l.pause)
			l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("claim task %s: %w", pk.id, err)})
		}
		return
	}
	l.pause, l.paused = 0, time.Time{}
	r := newRunState(l, cfg, c)
	if l.draining || l.fatal != nil {
		// The claim landed as the worker began to stop: give it back.
		l.track(r)
		r.stop(ErrDraining, 0)
		close(r.kept) // no keepalive runs
		l.bg.Add(1)
		l.pool.Go(func() {
			defer l.bg.Done()
			l.finish(r, ErrDraining, 0)
		})
		return
	}
	l.track(r)
	l.bg.Add(2)
	r.startKeep(l.bg.Done)
	l.pool.Go(func() { defer l.bg.Done(); l.work(r) })
	if x := l.x(); x != nil {
		l.checkRun(x, r)
	}
}

// checkRun stops r if the index knows that its lock, token or task
// changed (a cancel request among them).
func (l *loop) checkRun(x *index, r *runState) {
	if s := x.slots[r.slot]; s == nil && x.sessSeq >= r.fence || s != nil && s.Fence != r.fence {
		r.stop(ErrLockLost, l.w.grace)
		return
	}
	if r.token >= 0 {
		if tok := x.tokens[r.token]; tok == nil || tok.Task != r.id {
			r.stop(ErrLockLost, l.w.grace)
			return
		}
	}
	switch t := x.tasks[r.id]; {
	case t == nil || t.state != StateActive || t.run == nil || t.run.Fence != r.fence:
		r.stop(ErrLockLost, l.w.grace)
	case t.cancel:
		r.stop(ErrCancelled, l.w.grace)
	}
}

func (l *loop) track(r *runState) {
	l.hostChanged()
	l.running[r.id] = r
	l.bySlot[r.slot] = r
	if r.token >= 0 {
		l.byToken[r.token] = r
	}
}

func (l *loop) untrack(r *runState) {
	l.hostChanged()
	delete(l.running, r.id)
	if l.bySlot[r.slot] == r {
		delete(l.bySlot, r.slot)
	}
	if r.token >= 0 && l.byToken[r.token] == r {
		delete(l.byToken, r.token)
	}
}

// stopAll asks every running task to stop, giving it within to do so.
func (l *loop) stopAll(cause error, within time.Duration) {
	for _, r := range l.running {
		r.stop(cause, within)
	}
}

// recover settles the attempts whose lock is gone (their worker died or
// lost it), unless this worker runs them (it settles its own; should that
// fail, they are suspects still once its run is over).
func (l *loop) recover() {
	d := l.d
	for _, o := range d.x.orphans(time.Now()) {
		key := "task:" + o.id
		if r := l.running[o.id]; r != nil && r.fence == o.fence || l.recovering[key] {
			continue
		}
		l.recovering[key] = true
		d.x.settling(o.id)
		cfg := l.cfg
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*l.w.qs.bucket.Client().Timeout())
			t, err := l.w.qs.settleOrphan(ctx, cfg, o.id, o.fence, ReasonLost)
			cancel()
			if err != nil && !errors.Is(err, ErrUndecodable) {
				// Try again later, not at once: the server may be away.
				select {
				case <-time.After(time.Second):
				case <-l.quit:
				}
			}
			l.post(func() {
				delete(l.recovering, key)
				if l.d != d {
					return // another term's index
				}
				switch {
				case errors.Is(err, ErrUndecodable):
					d.x.garbage(o.id, o.rev, time.Now())
					l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("put back task %s of a lost lock: %w", o.id, err)})
				case err != nil:
					d.x.suspect(o.id)
					l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("put back task %s of a lost lock: %w", o.id, err)})
				case t != nil && t.Revision > d.x.qSeq:
					v := versionOf(t)
					d.x.applyRecord(&v, nil, time.Now())
				}
			})
		}()
	}
}

// checkSameHost removes the locks and tokens of this queue held by
// processes of this host that are gone, with a compare-and-set on the
// revision seen: a holder that renewed meanwhile keeps them.
func (l *loop) checkSameHost() {
	x := l.d.x
	for k, h := range x.sameHost {
		rk := "holder:" + k
		if l.recovering[rk] {
			continue
		}
		if h.Token >= 0 {
			tok := x.tokens[h.Token]
			// A token goes once its lock is gone: the lock carries the
			// command's process group.
			if tok == nil || x.slots[tok.Slot] != nil && x.slots[tok.Slot].Fence == tok.Fence || x.sessSeq < tok.Fence {
				continue
			}
		}
		l.recovering[rk] = true
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			var err error
			if processGone(h.PID, h.PIDStart, itoa(h.ChildPID), h.ChildStart) {
				ctx, cancel := context.WithTimeout(context.Background(), l.w.qs.bucket.Client().Timeout())
				if h.Token >= 0 {
					err = l.w.qs.bucket.Delete(ctx, k, h.Rev, nil)
				} else {
					err = l.w.qs.m.Reap(ctx, k, h.Rev, nil)
				}
				cancel()
			}
			l.post(func() {
				delete(l.recovering, rk)
				if err != nil && !errors.Is(err, kv.ErrConflict) {
					l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("free %s of a dead process: %w", k, err)})
				}
			})
		}()
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
