package queue

// The worker's loop: one goroutine that owns the index, applies both
// watches to it, dispatches what can run, and recovers orphans.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
)

// loop is a running worker's state, owned by the goroutine of run.
type loop struct {
	w       *Worker
	x       *index
	qw, sw  *kv.Watcher
	head    uint64
	results chan func()

	qSynced, sSynced bool
	syncedAt         time.Time

	running    map[string]*runState // by task id
	bySlot     map[string]*runState
	byToken    map[int]*runState
	claims     int
	started    int
	recovering map[string]bool
	bg         sync.WaitGroup
	// quit is closed when run returns: goroutines waiting to retry give up.
	quit chan struct{}

	draining    bool
	interrupted bool // Interrupt was called: a drain stops tasks at once
	fatal       error
	pause       time.Duration // after a claim failed unexpectedly
	paused      time.Time
}

func (l *loop) run(ctx context.Context) error {
	done := ctx.Done()
	var graceC <-chan time.Time
	interrupt := l.w.interrupt
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	poll := time.NewTicker(samehostPoll)
	defer poll.Stop()
	defer l.bg.Wait()
	defer close(l.quit)
	for {
		now := time.Now()
		l.x.advance(now)
		l.recover()
		l.dispatch(now)
		if err, over := l.over(now); over {
			l.stopAll(ErrDraining, 0)
			l.waitIdle()
			return err
		}
		timer.Reset(l.wake(now))
		var pollC <-chan time.Time
		if len(l.x.sameHost) > 0 && l.x.synced {
			pollC = poll.C
		}
		select {
		case e, ok := <-l.qw.Updates():
			if !ok {
				return l.lost(fmt.Errorf("%w: the watch of queue %s ended", kv.ErrUnavailable, l.w.q))
			}
			l.onQueue(e)
		case e, ok := <-l.sw.Updates():
			if !ok {
				return l.lost(fmt.Errorf("%w: the watch of the key locks ended", kv.ErrUnavailable))
			}
			l.onSession(e)
		case f := <-l.results:
			f()
		case <-timer.C:
		case <-pollC:
			l.checkSameHost()
		case <-done:
			done = nil
			l.draining = true
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
	}
}

// over says whether the loop is done, and with what.
func (l *loop) over(now time.Time) (error, bool) {
	busy := len(l.running) > 0 || l.claims > 0 || len(l.recovering) > 0
	switch {
	case (l.draining || l.fatal != nil) && !busy:
		return l.fatal, true
	case l.w.maxTasks > 0 && l.started >= l.w.maxTasks && !busy:
		return nil, true
	case l.w.maxTasks > 0 && l.started == 0 && !busy && l.w.idle >= 0 && !l.syncedAt.IsZero() && !now.Before(l.syncedAt.Add(l.w.idle)):
		return ErrNoTask, true
	}
	return nil, false
}

// wake is how long the loop may sleep when nothing arrives.
func (l *loop) wake(now time.Time) time.Duration {
	d := time.Hour
	if at := l.x.nextDue(); !at.IsZero() {
		d = min(d, at.Sub(now))
	}
	if l.paused.After(now) {
		d = min(d, l.paused.Sub(now))
	}
	if at := l.x.nextEnding(); !at.IsZero() {
		d = min(d, at.Sub(now))
	}
	if at := l.syncedAt.Add(l.w.idle); l.w.maxTasks > 0 && l.w.idle >= 0 && l.started == 0 && !l.syncedAt.IsZero() && at.After(now) {
		d = min(d, at.Sub(now))
	}
	return max(d, time.Millisecond)
}

// lost ends the loop when a watch ended: running tasks are stopped, their
// locks left to expire if the server cannot be reached.
func (l *loop) lost(err error) error {
	l.draining = true // a claim that lands now is given back, not started
	l.stopAll(ErrLockLost, l.w.grace)
	l.waitIdle()
	return err
}

// waitIdle runs the results of goroutines until none is left.
func (l *loop) waitIdle() {
	for len(l.running) > 0 || l.claims > 0 || len(l.recovering) > 0 {
		f := <-l.results
		f()
	}
}

func (l *loop) onQueue(e *kv.Entry) {
	if e == nil {
		l.qSynced = true
		l.maybeSynced()
		return
	}
	l.x.applyQueue(*e, time.Now())
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

func (l *loop) onSession(e *kv.Entry) {
	if e == nil {
		l.sSynced = true
		l.maybeSynced()
		return
	}
	l.x.applySession(*e, time.Now())
	if r := l.bySlot[e.Key]; r != nil && e.Revision > r.fence {
		if !e.Live() {
			r.stop(ErrLockLost, l.w.grace)
		} else if s := l.x.slots[e.Key]; s == nil || s.Fence != r.fence {
			r.stop(ErrLockLost, l.w.grace)
		}
	}
}

func (l *loop) maybeSynced() {
	if l.qSynced && l.sSynced && !l.x.synced {
		l.x.markSynced(l.head)
		l.syncedAt = time.Now()
	}
}

// dispatch starts claims while this worker has room, the queue capacity
// and a task can run.
func (l *loop) dispatch(now time.Time) {
	if l.draining || l.fatal != nil || now.Before(l.paused) {
		return
	}
	for len(l.running)+l.claims < l.w.concurrency && (l.w.maxTasks == 0 || l.started < l.w.maxTasks) {
		pk, ok := l.x.next()
		if !ok {
			return
		}
		l.claims++
		l.started++
		cfg := l.x.cfg
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*l.w.qs.bucket.Client().Timeout())
			defer cancel()
			c, err := l.w.qs.claim(ctx, cfg, pk, l.stampNow())
			l.results <- func() { l.claimed(pk, cfg, c, err) }
		}()
	}
}

// stampNow is this host's clock corrected by the offset measured at start:
// an estimate of the server's time, for the times written into records.
func (l *loop) stampNow() time.Time { return time.Now().Add(l.x.offset).UTC() }

func (l *loop) claimed(pk pick, cfg Config, c *claimed, err error) {
	l.claims--
	now := time.Now()
	l.x.release(pk, c, now)
	if err != nil {
		l.started--
		var ce *claimError
		switch {
		case errors.Is(err, errTaskGarbage):
			l.x.garbage(pk.id, pk.rev)
			l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("task %s is never run: %w", pk.id, err)})
		case errors.As(err, &ce):
			if ce.sess != nil && ce.sess.Revision > l.x.sessSeq {
				l.x.setSlot(pk.slot, ce.sess)
			}
			if ce.tok != nil && ce.tok.rev > l.x.qSeq {
				l.x.tokens[pk.token] = ce.tok
				l.x.free.remove(pk.token)
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
		go func() {
			defer l.bg.Done()
			l.finish(r, ErrDraining, 0)
		}()
		return
	}
	l.track(r)
	l.bg.Add(2)
	r.startKeep(l.bg.Done)
	go func() { defer l.bg.Done(); l.work(r) }()
	l.checkRun(r)
}

// checkRun stops r if the watches delivered, before r was tracked, that its
// lock, token or task changed (a cancel request among them).
func (l *loop) checkRun(r *runState) {
	x := l.x
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
	l.running[r.id] = r
	l.bySlot[r.slot] = r
	if r.token >= 0 {
		l.byToken[r.token] = r
	}
}

func (l *loop) untrack(r *runState) {
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
	for _, o := range l.x.orphans(time.Now()) {
		key := "task:" + o.id
		if r := l.running[o.id]; r != nil && r.fence == o.fence || l.recovering[key] {
			continue
		}
		l.recovering[key] = true
		l.x.settling(o.id)
		cfg := l.x.cfg
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
			l.results <- func() {
				delete(l.recovering, key)
				switch {
				case errors.Is(err, ErrUndecodable):
					l.x.garbage(o.id, o.rev)
					l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("put back task %s of a lost lock: %w", o.id, err)})
				case err != nil:
					l.x.suspect(o.id)
					l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("put back task %s of a lost lock: %w", o.id, err)})
				case t != nil && t.Revision > l.x.qSeq:
					d := versionOf(t)
					l.x.applyRecord(&d, nil, time.Now())
				}
			}
		}()
	}
}

// checkSameHost removes the locks and tokens of this queue held by
// processes of this host that are gone, with a compare-and-set on the
// revision seen: a holder that renewed meanwhile keeps them.
func (l *loop) checkSameHost() {
	for k, h := range l.x.sameHost {
		rk := "holder:" + k
		if l.recovering[rk] {
			continue
		}
		if h.Token >= 0 {
			tok := l.x.tokens[h.Token]
			// A token goes once its lock is gone: the lock carries the
			// command's process group.
			if tok == nil || l.x.slots[tok.Slot] != nil && l.x.slots[tok.Slot].Fence == tok.Fence || l.x.sessSeq < tok.Fence {
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
			l.results <- func() {
				delete(l.recovering, rk)
				if err != nil && !errors.Is(err, kv.ErrConflict) {
					l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("free %s of a dead process: %w", k, err)})
				}
			}
		}()
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
