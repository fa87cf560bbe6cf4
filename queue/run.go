package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/keepalive"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/session"
)

// runState is one task running on this worker: its handler, and the
// keepalive of its key lock and capacity token.
type runState struct {
	l       *loop
	cfg     Config
	id      string
	slot    string
	fence   uint64
	token   int
	attempt int

	ctx    context.Context
	cancel context.CancelCauseFunc
	rc     *runCtx
	sched  *keepalive.Machine
	kept   chan struct{} // closed when the keepalive has stopped
	kctx   context.Context
	stopK  context.CancelFunc
	// keepAt starts the keepalive when its first renewal is due (nil: it
	// never runs); keepDone is told when it is over or will never run.
	keepAt   *time.Timer
	keepDone func()

	// writing serializes the writes of the lock (renewals, the child's
	// pid); mu guards the fields below and is never held across a write.
	writing sync.Mutex
	mu      sync.Mutex
	task    *Task                // the latest version known
	paths   *reserve.Reservation // the paths it touches, while it runs (touches.go)
	sess    *session.Session
	tok     *token
	stopped error // the first reason to stop
	ending  bool  // the work is over: nothing to stop
}

func newRunState(l *loop, cfg Config, c *claimed) *runState {
	r := &runState{
		l: l, cfg: cfg, id: c.task.ID, slot: c.task.Run.Slot, fence: c.task.Run.Fence, token: c.task.Run.Token, attempt: c.task.Run.Attempt,
		task: c.task, sess: c.sess, tok: c.tok, kept: make(chan struct{}),
		rc: &runCtx{within: l.w.grace},
	}
	r.ctx, r.cancel = context.WithCancelCause(withRunCtx(context.Background(), r.rc))
	r.kctx, r.stopK = context.WithCancel(context.Background())
	r.rc.child = r.setChild
	// The renewal schedule counts from when the claim was sent: the lock
	// was written after it, so the server cannot expire it sooner.
	r.sched = keepalive.New(time.Duration(cfg.TTL), l.w.grace, c.sent)
	return r
}

func (r *runState) tokenRev() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tok == nil {
		return 0
	}
	return r.tok.rev
}

// stop asks the work to stop for cause, giving it within; the first cause
// wins.
func (r *runState) stop(cause error, within time.Duration) {
	r.mu.Lock()
	first := r.stopped == nil && !r.ending
	if first {
		r.stopped = cause
	}
	t := r.task
	r.mu.Unlock()
	if !first {
		return
	}
	defer r.l.w.emit(Event{Kind: EventStopping, Task: t, Attempt: r.attempt, Fence: r.fence, Slot: r.slot, Err: cause})
	r.rc.mu.Lock()
	r.rc.within = within
	r.rc.mu.Unlock()
	r.cancel(cause)
}

// observe takes a new version of the task from the watch: a cancel
// request stops the work; a version that no longer runs under this
// attempt's lock means the lock was lost.
func (r *runState) observe(e kv.Entry, grace time.Duration) {
	if !e.Live() {
		r.stop(ErrLockLost, grace)
		return
	}
	r.mu.Lock()
	known := r.task != nil && e.Revision <= r.task.Revision
	ending := r.ending
	r.mu.Unlock()
	if known || ending {
		return // its own write, or older; or the work is over: nothing to stop
	}
	t, err := decodeTask(r.l.w.q, e)
	if err != nil {
		return
	}
	r.mu.Lock()
	newer := r.task == nil || t.Revision > r.task.Revision
	if newer {
		r.task = t
	}
	r.mu.Unlock()
	switch {
	case !newer:
	case t.State != StateActive || t.Run == nil || t.Run.Fence != r.fence:
		r.stop(ErrLockLost, grace)
	case t.CancelRequested:
		r.stop(ErrCancelled, grace)
	}
}

// startKeep starts the keepalive when its first renewal is due (a third of
// the TTL after the claim), and tells done when it is over: a task that
// ends before then, as most do, costs no goroutine, and its end does not
// wait for one to be scheduled and stop.
func (r *runState) startKeep(done func()) {
	r.keepDone = done
	r.keepAt = time.AfterFunc(time.Until(r.sched.Wake()), func() {
		defer done()
		r.keep()
	})
}

// stopKeep stops the keepalive and waits until it has stopped.
func (r *runState) stopKeep() {
	r.stopK()
	if r.keepAt != nil && r.keepAt.Stop() {
		close(r.kept) // it never ran
		r.keepDone()
		return
	}
	<-r.kept
}

// keep renews the key lock and the token on the keepalive schedule until
// the work is over. Renewals that keep failing until the local deadline,
// or a renewal that finds either gone, stop the work: with at most a
// quarter of the TTL left before the server could expire them, or with the
// grace when they are known gone.
func (r *runState) keep() {
	defer close(r.kept)
	var observe func(time.Duration, error)
	if fn := r.l.w.qs.renewed; fn != nil {
		observe = func(took time.Duration, err error) { fn(r.slot, took, err) }
	}
	err := keepalive.Run(r.kctx, r.sched, r.renew, func(err error) bool {
		return errors.Is(err, session.ErrLost) || errors.Is(err, errTokenLost)
	}, observe)
	switch {
	case errors.Is(err, keepalive.ErrDeadline):
		r.stop(ErrLockLost, r.sched.StopBudget())
	case err != nil:
		r.stop(ErrLockLost, r.l.w.grace)
	}
}

// renew is one renewal of the lock and, beside it, the token.
func (r *runState) renew(ctx context.Context) error {
	var wg sync.WaitGroup
	var serr, terr error
	wg.Go(func() {
		r.writing.Lock()
		defer r.writing.Unlock()
		s, err := r.l.w.qs.m.Commit(ctx, r.session(), "")
		if err == nil {
			r.setSession(s)
		}
		serr = err
	})
	if r.token >= 0 {
		wg.Go(func() { terr = r.renewToken(ctx) })
	}
	wg.Wait()
	return errors.Join(serr, terr)
}

func (r *runState) renewToken(ctx context.Context) error {
	r.mu.Lock()
	tok := *r.tok
	r.mu.Unlock()
	tok.Renewed = r.l.stampNow()
	data, err := tok.encode()
	if err != nil {
		return err
	}
	rev, err := r.l.w.qs.bucket.Update(ctx, tokenKey(r.cfg.Queue, r.token), data, tok.ttl, tok.rev)
	if errors.Is(err, kv.ErrConflict) {
		return errTokenLost
	}
	if err != nil {
		return err
	}
	tok.rev = rev
	r.mu.Lock()
	r.tok = &tok
	r.mu.Unlock()
	return nil
}

// setChild records the process that does the work in the lock's meta,
// for a worker of this host to check should this one die.
func (r *runState) setChild(p hostlocal.Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.l.w.qs.bucket.Client().Timeout())
	defer cancel()
	r.writing.Lock()
	defer r.writing.Unlock()
	cur := r.session()
	next := *cur
	next.Record.Meta = maps.Clone(cur.Meta)
	if next.Record.Meta == nil {
		next.Record.Meta = map[string]string{}
	}
	next.Meta["child_pid"] = strconv.Itoa(p.PID)
	next.Meta["child_pid_start"] = p.Start
	next.RenewedAt = r.l.stampNow()
	s, err := r.l.w.qs.m.Update(ctx, &next)
	if err != nil {
		return fmt.Errorf("queue: recording the task's process %d in its key lock: %w", p.PID, err)
	}
	r.setSession(s)
	return nil
}

func (r *runState) session() *session.Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sess
}

func (r *runState) setSession(s *session.Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sess = s
}

// work runs the handler, then settles the attempt.
func (l *loop) work(r *runState) {
	r.mu.Lock()
	t := r.task.clone()
	r.mu.Unlock()
	if len(t.Touches) > 0 {
		res, err := l.reservePaths(r.ctx, r, t)
		if err != nil {
			l.finish(r, err, 0)
			return
		}
		r.mu.Lock()
		r.paths = res
		r.mu.Unlock()
		go func() {
			select {
			case <-res.Done():
				if !errors.Is(res.Err(), reserve.ErrReleased) {
					r.stop(fmt.Errorf("%w: %w", ErrPathsLost, res.Err()), l.w.grace)
				}
			case <-r.kctx.Done():
			}
		}()
	}
	timeout := time.AfterFunc(t.TimeoutIn(r.cfg), func() { r.stop(ErrTimeout, l.w.grace) })
	l.w.emit(Event{Kind: EventStarted, Task: t, Attempt: r.attempt, Fence: r.fence, Slot: r.slot})
	began := time.Now()
	err := l.w.h.Work(r.ctx, t)
	timeout.Stop()
	l.finish(r, err, time.Since(began))
}

// outcomeOf turns how the handler returned into how the attempt ended.
func (r *runState) outcomeOf(err error) outcome {
	r.mu.Lock()
	cause, timeout := r.stopped, r.task.TimeoutIn(r.cfg)
	r.mu.Unlock()
	switch {
	case err == nil:
		return exitOutcome(0)
	case errors.Is(err, ErrStartFailed):
		return outcome{reason: ReasonStartFailed, err: err.Error(), giveBack: true}
	case errors.Is(err, errPathsHeld):
		return outcome{reason: ReasonPathsHeld, err: err.Error(), giveBack: true, wait: pathsHeldWait}
	case errors.Is(cause, ErrPathsLost):
		return outcome{reason: ReasonLost, err: context.Cause(r.ctx).Error()}
	case errors.Is(cause, ErrLockLost):
		return outcome{reason: ReasonLost, err: err.Error()}
	case errors.Is(cause, ErrTimeout):
		return outcome{reason: ReasonTimeout, err: "ran longer than its timeout " + timeout.String()}
	case errors.Is(cause, ErrCancelled):
		return outcome{reason: ReasonCancelled, err: err.Error()}
	case errors.Is(cause, ErrDraining):
		return outcome{reason: ReasonDrained, err: err.Error(), giveBack: true}
	}
	code := 1
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	o := exitOutcome(code)
	o.err = err.Error()
	return o
}

// finish settles the attempt and frees what it held: first the task (so
// that no worker puts it back once its lock is gone), then the lock, then
// the token. A lock that was lost is not touched.
func (l *loop) finish(r *runState, err error, took time.Duration) {
	// Stop renewing: the writes below end the lock and token. Watch events
	// from here on are this run's own writes.
	r.mu.Lock()
	r.ending = true
	r.mu.Unlock()
	r.stopKeep()
	o := r.outcomeOf(err)
	o.output, o.cut = r.rc.result()
	ctx, cancel := context.WithTimeout(context.Background(), 2*l.w.qs.bucket.Client().Timeout())
	defer cancel()
	r.mu.Lock()
	t, sess, tok := r.task, r.sess, r.tok
	res := r.paths
	r.mu.Unlock()
	if res != nil {
		// Before the end is written: the dispatcher offers a task whose
		// paths clash only once it sees this one end, and its worker must
		// find them free. The work has stopped; nothing edits them now.
		_ = res.Release(ctx)
	}
	out, werr := l.w.qs.endAttempt(ctx, r.cfg, t, r.fence, o)
	// Both are compare-and-sets on what this run wrote last: a lock or
	// token that was lost (taken, expired) is left alone, one given up at
	// the local deadline is freed if the server can be reached now.
	note := sess.Record
	note.Result = session.ResultSuccess
	if o.reason != ReasonExit || o.exitCode == nil || *o.exitCode != 0 {
		note.Result = session.ResultFail
	}
	note.RenewedAt = l.stampNow()
	if out != nil {
		// The task's end is written: the tombstone says at which revision,
		// so that other workers, seeing the lock gone before the queue's
		// watch brings that end, do not take the task for an orphan.
		note.Meta = maps.Clone(note.Meta)
		if note.Meta == nil {
			note.Meta = map[string]string{}
		}
		note.Meta[metaEnded] = strconv.FormatUint(out.Revision, 10)
	}
	// The lock and the token go at once, once the task is settled: a
	// crash between them leaves one of them to its TTL (or to a worker of
	// this host), as a crash after either would (adr/0020).
	var tokTomb uint64
	tokErr := errors.New("no token")
	var tokWG sync.WaitGroup
	if tok != nil {
		tokWG.Add(1)
		l.pool.Go(func() {
			defer tokWG.Done()
			tokTomb, tokErr = l.w.qs.bucket.DeleteRevision(ctx, tokenKey(r.cfg.Queue, r.token), tok.rev, nil)
		})
	}
	lockTomb, lerr := l.w.qs.m.DeleteRevision(ctx, sess.Slot, sess.Revision, &note)
	tokWG.Wait()
	ev := Event{Kind: EventEnded, Task: out, Attempt: r.attempt, Fence: r.fence, Slot: r.slot, Reason: o.reason, ExitCode: o.exitCode, Took: took}
	if werr != nil {
		ev.Err = werr
	} else if o.err != "" {
		ev.Err = errors.New(o.err)
	}
	l.post(func() {
		l.untrack(r)
		if x := l.x(); x != nil {
			now := time.Now()
			if out != nil && out.Revision > x.qSeq {
				d := versionOf(out)
				x.applyRecord(&d, nil, now)
			}
			if werr != nil {
				x.suspect(r.id) // not settled: put back once its lock is gone
			}
			if lerr == nil {
				x.freed(r.slot, sess.Revision, lockTomb, -1, 0, 0, now)
			}
			if tokErr == nil {
				x.freed("", 0, 0, r.token, tok.rev, tokTomb, now)
			}
		}
		if o.reason == ReasonStartFailed && l.fatal == nil {
			l.fatal = err
		}
	})
	l.w.emit(ev)
}
