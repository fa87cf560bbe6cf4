package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// resultAbandoned is the closing result of a key lock taken for a claim
// that did not complete (the token or the task was taken meanwhile).
const resultAbandoned = "abandoned"

// Why a claim did not land.
var (
	errLockHeld    = errors.New("queue: the key lock is held")
	errTokenTaken  = errors.New("queue: the capacity token was taken")
	errTaskChanged = errors.New("queue: the task changed")
	// errTaskGarbage: the record the view indexed does not decode in full
	// (a payload of the wrong type, say): it is never run.
	errTaskGarbage = errors.New("queue: the task's record does not decode")
	errTokenLost   = errors.New("queue: capacity token lost")
)

// claimError carries what a lost claim learnt of the record in its way.
type claimError struct {
	err  error
	sess *session.Session // the lock's holder, for errLockHeld
	tok  *token           // the token's holder, for errTokenTaken
}

func (e *claimError) Error() string { return e.err.Error() }
func (e *claimError) Unwrap() error { return e.err }

// claim takes pk's task for this worker, in an order that leaves nothing
// behind for long at any crash point (see adr/0020):
//
//  1. the key lock: the session of the lane's slot, created by
//     compare-and-set (a crash leaves it to expire, or to a worker of this
//     host that sees this process dead);
//  2. the capacity token, naming the lock's fence (a crash leaves it to
//     expire, likewise);
//  3. the task, pending to active, by compare-and-set on the revision the
//     pick saw, counting the attempt (a crash leaves an active task whose
//     lock expires: every worker then puts it back to pending).
//
// A step that loses undoes the ones before it.
func (qs *Queues) claim(ctx context.Context, cfg Config, pk pick, worker string, started time.Time) (*claimed, error) {
	t, err := qs.pickedTask(ctx, cfg.Queue, pk)
	if err != nil {
		return nil, err
	}
	attempt := t.Attempts + 1
	now := qs.stamp()
	// A compare-and-set create, without the host gate of Join: the work
	// starts after two more writes, outside any gate, and the create alone
	// decides between workers (and against baton run and join).
	sent := time.Now()
	s, err := qs.m.CreateAfter(ctx, session.Record{
		Slot: pk.slot, TaskID: t.ID, AgentID: "queue " + cfg.Queue, Host: qs.m.Host(),
		PID: qs.proc.PID, PIDStart: qs.proc.Start, Instance: qs.m.Instance(), StartedAt: now, RenewedAt: now,
		Meta: map[string]string{"queue": cfg.Queue, "task": t.ID, "attempt": strconv.Itoa(attempt)},
	}, time.Duration(cfg.TTL), pk.slotLast)
	var ce *kv.ConflictError
	switch {
	case errors.As(err, &ce):
		held := &claimError{err: fmt.Errorf("%w: %w", errLockHeld, err)}
		if ce.Current != nil && ce.Current.Live() {
			held.sess = lockView(*ce.Current)
		}
		return nil, held
	case err != nil:
		return nil, err
	}
	undoLock := func() { qs.abandon(s) }
	c := &claimed{sess: s, sent: sent}
	if pk.token >= 0 {
		tok := &token{
			Queue: cfg.Queue, Index: pk.token, Task: t.ID, Key: t.Key, Slot: pk.slot, Fence: s.Fence,
			Host: qs.m.Host(), PID: qs.proc.PID, PIDStart: qs.proc.Start, Instance: qs.m.Instance(),
			Acquired: started, Renewed: started,
		}
		data, err := tok.encode()
		if err != nil {
			undoLock()
			return nil, err
		}
		rev, err := qs.bucket.CreateAfter(ctx, tokenKey(cfg.Queue, pk.token), data, time.Duration(cfg.TTL), pk.tokenLast)
		var ce *kv.ConflictError
		switch {
		case errors.As(err, &ce):
			undoLock()
			ce2 := &claimError{err: fmt.Errorf("%w: %w", errTokenTaken, err)}
			if ce.Current != nil && ce.Current.Live() {
				ce2.tok, _ = decodeToken(*ce.Current)
			}
			return nil, ce2
		case err != nil:
			undoLock()
			return nil, err
		}
		tok.rev, tok.ttl = rev, time.Duration(cfg.TTL)
		c.tok = tok
	}
	n := t.clone()
	n.State, n.Attempts, n.RetryAfter, n.Delay = StateActive, attempt, 0, 0
	tokIdx := pk.token
	n.Run = &Run{
		Attempt: attempt, Slot: pk.slot, Lane: pk.lane, Fence: s.Fence, Token: tokIdx,
		Host: qs.m.Host(), PID: qs.proc.PID, PIDStart: qs.proc.Start, Instance: qs.m.Instance(), Worker: worker,
		StartedAt: started,
	}
	out, err := qs.write(ctx, cfg, n)
	if err != nil {
		if c.tok != nil {
			_ = qs.bucket.Delete(context.WithoutCancel(ctx), tokenKey(cfg.Queue, pk.token), c.tok.rev, nil)
		}
		undoLock()
		if errors.Is(err, kv.ErrConflict) {
			return nil, &claimError{err: fmt.Errorf("%w: %w", errTaskChanged, err)}
		}
		return nil, err
	}
	c.task = out
	return c, nil
}

// pickedTask is the task pk picked, at the revision the pick saw: from the
// record kept in the view, or read.
func (qs *Queues) pickedTask(ctx context.Context, q string, pk pick) (*Task, error) {
	var e kv.Entry
	if pk.body != nil {
		e = kv.Entry{Key: taskKey(q, pk.id), Value: pk.body, Revision: pk.rev}
	} else {
		var err error
		if e, err = qs.bucket.Get(ctx, taskKey(q, pk.id)); errors.Is(err, kv.ErrNotFound) {
			return nil, &claimError{err: fmt.Errorf("%w: %w", errTaskChanged, err)}
		} else if err != nil {
			return nil, err
		}
		if e.Revision != pk.rev {
			return nil, &claimError{err: fmt.Errorf("%w: revision %d, not %d", errTaskChanged, e.Revision, pk.rev)}
		}
	}
	t, err := decodeTask(q, e)
	if err != nil {
		return nil, &claimError{err: fmt.Errorf("%w: %w", errTaskGarbage, err)}
	}
	if t.State != StatePending && t.State != StateFailed {
		return nil, &claimError{err: fmt.Errorf("%w: it is %s", errTaskChanged, t.State)}
	}
	return t, nil
}

// abandon closes a key lock taken for a claim that did not complete, with
// a bounded context of its own.
func (qs *Queues) abandon(s *session.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), qs.bucket.Client().Timeout())
	defer cancel()
	_ = qs.m.Close(ctx, s, resultAbandoned)
}
