package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// outcome is how an attempt ended, for settle.
type outcome struct {
	reason   string
	exitCode *int
	err      string
	// giveBack: the attempt does not count (a drain, a start failure).
	giveBack bool
	// output is the work's result (SetResult); cut says it was longer.
	output []byte
	cut    bool
	// wait is how long a task given back waits before its next turn.
	wait time.Duration
}

func exitOutcome(code int) outcome { return outcome{reason: ReasonExit, exitCode: &code} }

// settle is t (active) after its attempt ended with o: done after exit 0;
// cancelled if a cancel was asked; pending again, its attempt given back,
// after a drain or a start failure; dead once out of attempts; pending
// after a lost lock or a release; failed, with a backoff, after a failing
// exit or a timeout.
func settle(cfg Config, t *Task, o outcome, ended time.Time) *Task {
	n := t.clone()
	run := n.Run
	if run == nil {
		run = &Run{}
	}
	n.Result = &Result{
		Attempt: run.Attempt, Reason: o.reason, ExitCode: o.exitCode, Error: o.err,
		Slot: run.Slot, Fence: run.Fence, Host: run.Host, PID: run.PID, Instance: run.Instance,
		Claimed: run.Claimed, StartedAt: run.StartedAt, EndedAt: ended,
		Output: o.output, OutputTruncated: o.cut,
	}
	// An attempt ran: a delay the task was added with is spent (it would
	// count again from this revision's time otherwise).
	n.Run, n.RetryAfter, n.Delay = nil, 0, Duration(o.wait)
	if o.reason == ReasonPathsHeld && t.Result != nil && t.Result.Reason == ReasonPathsHeld && t.Delay > 0 {
		n.Delay = Duration(min(2*time.Duration(t.Delay), maxPathsHeldWait)) // held again: wait twice as long
	}
	exit0 := o.reason == ReasonExit && o.exitCode != nil && *o.exitCode == 0
	switch {
	case exit0:
		n.State = StateDone
	case n.CancelRequested || o.reason == ReasonCancelled:
		n.State = StateCancelled
	case o.giveBack:
		n.Attempts = max(n.Attempts-1, 0)
		n.State = StatePending
	case n.Attempts >= n.AttemptsIn(cfg):
		n.State = StateDead
	case o.reason == ReasonLost || o.reason == ReasonReleased:
		n.State = StatePending
	default:
		n.State = StateFailed
		n.RetryAfter = Duration(cfg.backoff(n.Attempts))
	}
	return n
}

// endAttempt settles the attempt of t that ran under fence with o, by a
// compare-and-set that follows benign rewrites (a cancel request). It
// returns the task as written, or nil and no error when the attempt was
// settled already (the task is no longer active under that fence).
func (qs *Queues) endAttempt(ctx context.Context, cfg Config, t *Task, fence uint64, o outcome) (*Task, error) {
	for attempt := 1; ; attempt++ {
		if t.State != StateActive || t.Run == nil || t.Run.Fence != fence {
			return nil, nil
		}
		out, err := qs.write(ctx, cfg, settle(cfg, t, o, qs.stamp()))
		if err == nil {
			return out, nil
		}
		if errors.Is(err, kv.ErrTooLarge) && len(o.output) > 0 {
			// The task's payload and its output pass what the server takes
			// in one record: the end goes without the output, marked cut.
			o.output, o.cut = nil, true
			continue
		}
		var ce *kv.ConflictError
		if !errors.As(err, &ce) || attempt == 4 {
			return nil, err
		}
		if ce.Current == nil || !ce.Current.Live() {
			return nil, nil // gone (removed by an operator)
		}
		if t, err = decodeTask(t.Queue, *ce.Current); err != nil {
			return nil, fmt.Errorf("%w: task %s: %w", ErrUndecodable, ce.Current.Key, err)
		}
	}
}

// stamp is the time written into records: informational, it decides
// nothing.
func (qs *Queues) stamp() time.Time { return qs.now().UTC() }

// Cancel cancels a task. A pending or failed task is cancelled at once; an
// active one gets a cancel request that its worker acts on (it stops the
// work, then records it cancelled), so the returned task may still be
// active: WaitTask waits for the end. Cancelling a cancelled task changes
// nothing; a done or dead one is a *StateError.
func (qs *Queues) Cancel(ctx context.Context, q, id string, opts ...ChangeOption) (*Task, error) {
	return qs.change(ctx, q, id, opts, func(cfg Config, t *Task) (*Task, error) {
		switch t.State {
		case StateCancelled:
			return nil, nil
		case StateDone, StateDead:
			return nil, &StateError{Queue: q, ID: id, State: t.State, Want: "only a pending, failed or active task can be cancelled"}
		case StateActive:
			if t.CancelRequested {
				return nil, nil
			}
			n := t.clone()
			n.CancelRequested = true
			return n, nil
		}
		n := t.clone()
		n.State, n.RetryAfter, n.CancelRequested = StateCancelled, 0, true
		n.Result = &Result{Attempt: n.Attempts, Reason: ReasonCancelled, EndedAt: qs.stamp()}
		return n, nil
	})
}

// Retry makes a failed, dead or cancelled task pending again, with a fresh
// count of attempts (its last result stays). A pending task is left as it
// is; an active or done one is a *StateError.
func (qs *Queues) Retry(ctx context.Context, q, id string, opts ...ChangeOption) (*Task, error) {
	return qs.change(ctx, q, id, opts, func(cfg Config, t *Task) (*Task, error) {
		switch t.State {
		case StatePending:
			return nil, nil
		case StateActive:
			return nil, &StateError{Queue: q, ID: id, State: t.State, Want: "it runs now; cancel it first to run it again"}
		case StateDone:
			return nil, &StateError{Queue: q, ID: id, State: t.State, Want: "a done task is not run again; add a new task"}
		}
		n := t.clone()
		n.State, n.Attempts, n.RetryAfter, n.CancelRequested = StatePending, 0, 0, false
		n.RunAt, n.Delay = time.Time{}, 0 // a retry runs now
		return n, nil
	})
}

// ChangeOption qualifies Cancel and Retry.
type ChangeOption func(*changeOptions)

type changeOptions struct{ states []State }

// IfState makes Cancel or Retry act only on a task in one of states, as
// read by the compare-and-set that changes it; a task in another state is
// returned as it is, with a *StateError that matches ErrStateMoved. Bulk
// cancels and retries pass the states they listed the tasks by, so that a
// task that moved on since (a pending one that started) is left alone.
func IfState(states ...State) ChangeOption {
	return func(o *changeOptions) { o.states = append(o.states, states...) }
}

// change applies fn to the task by compare-and-set, re-reading on
// conflict. fn returns nil to write nothing (the task is returned as read).
func (qs *Queues) change(ctx context.Context, q, id string, opts []ChangeOption, fn func(Config, *Task) (*Task, error)) (*Task, error) {
	var co changeOptions
	for _, o := range opts {
		o(&co)
	}
	cfg, err := qs.Config(ctx, q)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		t, err := qs.Get(ctx, q, id)
		if err != nil {
			return nil, err
		}
		if len(co.states) > 0 && !slices.Contains(co.states, t.State) {
			return t, &StateError{Queue: q, ID: id, State: t.State, Want: fmt.Sprintf("it is no longer %s; left alone", joinStates(co.states)), moved: true}
		}
		n, err := fn(cfg, t)
		if err != nil || n == nil {
			return t, err
		}
		out, err := qs.write(ctx, cfg, n)
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, kv.ErrConflict) || attempt == 4 {
			return nil, err
		}
	}
}

// Matching lists the tasks of queue q in one of states (any state when
// none is given) and of key (any key when empty), in the order they were
// added. It reads every task of the queue, as Snapshot does.
func (qs *Queues) Matching(ctx context.Context, q string, states []State, key string) ([]*Task, error) {
	snap, err := qs.Snapshot(ctx, q, WithTasks())
	if err != nil {
		return nil, err
	}
	var out []*Task
	for _, t := range snap.Tasks {
		if (len(states) == 0 || slices.Contains(states, t.State)) && (key == "" || t.Key == key) {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// WaitTask watches the task until done(t) holds, ctx ends (its error,
// with the last version seen), or the task goes away (ErrTaskNotFound).
func (qs *Queues) WaitTask(ctx context.Context, q, id string, done func(*Task) bool) (*Task, error) {
	w, err := qs.bucket.Watch(ctx, taskKey(q, id))
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	return waitOn(ctx, w, q, id, nil, done)
}

// AddWait is Add, then WaitTask until the task ended (done, dead or
// cancelled): the watch is set up while the task is added, so that its
// round trip is not paid after the add. A handle that waits on the same
// queue again within 5 s shares one watch of the queue's task changes
// among its waits from then on (kept 5 s past the last), in place of a
// watch per task: each of those costs the server more than the task's
// dispatch. It returns the task as it ended,
// whether this call added it, and an error: ctx's when it ended first
// (with the last version seen).
func (qs *Queues) AddWait(ctx context.Context, q, key string, payload []byte, opts ...AddOption) (*Task, bool, error) {
	qcfg, t, data, err := qs.prepare(ctx, q, key, payload, opts)
	if err != nil {
		return nil, false, err
	}
	if t.Unique != "" {
		// Its id is known once added: the watch comes after.
		got, added, err := qs.addUnique(ctx, qcfg, t, opts)
		if err != nil {
			return nil, false, err
		}
		ended, err := qs.WaitTask(ctx, q, got.ID, func(t *Task) bool { return t.State.Final() })
		if ended == nil {
			ended = got
		}
		return ended, added, err
	}
	final := func(t *Task) bool { return t.State.Final() }
	if ch, release := qs.sharedEnd(ctx, q, t.ID); ch != nil {
		defer release()
		rev, err := qs.bucket.Create(ctx, taskKey(q, t.ID), data, 0)
		got, added, err := added(q, t, rev, err)
		if err != nil || !added {
			if err == nil {
				got, err = qs.WaitTask(ctx, q, t.ID, final) // it was there: it may have ended
			}
			return got, added, err
		}
		select {
		case e, ok := <-ch:
			switch {
			case !ok:
				// The shared watch ended: watch the task alone.
				ended, err := qs.WaitTask(ctx, q, t.ID, final)
				return ended, added, err
			case !e.Live():
				return got, added, fmt.Errorf("%w: %s in queue %s was removed", ErrTaskNotFound, t.ID, q)
			}
			ended, err := decodeTask(q, *e)
			if err != nil {
				return got, added, fmt.Errorf("%w: task %s: %w", ErrUndecodable, t.ID, err)
			}
			return ended, added, nil
		case <-ctx.Done():
			return got, added, ctx.Err()
		}
	}
	type watched struct {
		w   *kv.Watcher
		err error
	}
	wc := make(chan watched, 1)
	go func() {
		w, err := qs.bucket.Watch(ctx, taskKey(q, t.ID))
		wc <- watched{w, err}
	}()
	rev, err := qs.bucket.Create(ctx, taskKey(q, t.ID), data, 0)
	got, added, err := added(q, t, rev, err)
	ww := <-wc
	if ww.w != nil {
		defer ww.w.Stop()
	}
	if err != nil {
		return nil, false, err
	}
	if ww.err != nil {
		return got, added, ww.err
	}
	ended, err := waitOn(ctx, ww.w, q, t.ID, got, final)
	return ended, added, err
}

// waitOn follows the task's watch w until done(t) holds; known is a
// version the caller has seen (the watch's first sync may come before
// it: then it is not a missing task).
func waitOn(ctx context.Context, w *kv.Watcher, q, id string, known *Task, done func(*Task) bool) (*Task, error) {
	last := known
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return last, fmt.Errorf("%w: waiting for task %s: the watch ended", kv.ErrUnavailable, id)
			}
			if e == nil {
				if last == nil {
					return nil, fmt.Errorf("%w: %s in queue %s", ErrTaskNotFound, id, q)
				}
				continue
			}
			if !e.Live() {
				return last, fmt.Errorf("%w: %s in queue %s was removed", ErrTaskNotFound, id, q)
			}
			t, err := decodeTask(q, *e)
			if err != nil {
				return last, fmt.Errorf("%w: task %s: %w", ErrUndecodable, id, err)
			}
			last = t
			if done(t) {
				return t, nil
			}
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// Lock is a key lock as status and release show it: the session of one
// lane of a key.
type Lock struct {
	Key  string `json:"key"`
	Lane int    `json:"lane"`
	Slot string `json:"slot"`
	// Task is the queue's task that holds it; empty when something else
	// (baton run, baton join) holds the slot.
	Task     string    `json:"task"`
	Attempt  int       `json:"attempt,omitempty"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Instance string    `json:"instance"`
	Fence    uint64    `json:"fence"`
	Acquired time.Time `json:"acquired_at"`
	// Renewed and Expires are server times: the lock's last write and when
	// the server removes it unless it is renewed.
	Renewed time.Time `json:"renewed_at"`
	Expires time.Time `json:"expires_at"`
	// State is live, stale (not renewed for half its TTL), expiring or
	// dead (its holder's process on this host is gone).
	State    string `json:"state"`
	Revision uint64 `json:"revision"`

	session *session.Session
}

// lockOf describes the session s on lane of key at the server time now.
func (qs *Queues) lockOf(q, key string, lane int, s *session.Session, now time.Time) Lock {
	l := Lock{Key: key, Lane: lane, Slot: s.Slot, Host: s.Host, PID: s.PID, Instance: s.Instance, Fence: s.Fence,
		Acquired: s.StartedAt, Renewed: s.Written, Revision: s.Revision, session: s}
	if s.Meta["queue"] == q {
		l.Task = s.Meta["task"]
		l.Attempt, _ = strconv.Atoi(s.Meta["attempt"])
	}
	if s.TTL > 0 {
		l.Expires = s.Written.Add(s.TTL)
	}
	l.State = string(s.Timing(now, 0).State)
	if qs.deadHere(s) {
		l.State = "dead"
	}
	return l
}

// deadHere reports whether s is held by a process of this host that is
// gone, with the command it ran: its lock protects nothing any more.
func (qs *Queues) deadHere(s *session.Session) bool {
	if s.Host != qs.m.Host() || s.PID <= 0 {
		return false
	}
	return processGone(s.PID, s.PIDStart, s.Meta["child_pid"], s.Meta["child_pid_start"])
}

// processGone reports whether the process pid (with its start token) and
// the process group of child (if any) are gone. Processes whose start
// tokens were not taken on this machine since its boot are never judged.
func processGone(pid int, start, child, childStart string) bool {
	p := hostlocal.Process{PID: pid, Start: start}
	if !p.ThisBoot() || p.Alive() {
		return false
	}
	if c, _ := strconv.Atoi(child); c > 0 {
		cp := hostlocal.Process{PID: c, Start: childStart}
		if !cp.ThisBoot() || cp.Alive() || hostlocal.GroupRunning(c) {
			return false
		}
	}
	return true
}

// Released is a key lock that Release removed, and the task it held (put
// back to pending, or dead when out of attempts).
type Released struct {
	Lock Lock  `json:"lock"`
	Task *Task `json:"task,omitempty"`
}

// Release frees the locks of key: each lane's session whose holder is dead
// (a process of this host that is gone) or stale (not renewed for half its
// TTL), or any holder with force. Each lock is removed by a
// compare-and-set on the revision read, so one renewed meanwhile survives
// (kv.ErrConflict); the task it held goes back to pending with its attempt
// counted, and its capacity token is freed. A live holder without force is
// a *HeldError and nothing is removed. A key without locks returns none.
// A forced release of a live worker's lock makes that worker stop the
// task's work at once.
func (qs *Queues) Release(ctx context.Context, q, key string, force bool) ([]Released, error) {
	cfg, err := qs.Config(ctx, q)
	if err != nil {
		return nil, err
	}
	if err := ValidateKey(cfg, key); err != nil {
		return nil, err
	}
	now, err := qs.m.ServerTime(ctx)
	if err != nil {
		return nil, err
	}
	lanes := cfg.PerKey
	if e, err := qs.bucket.Get(ctx, keyConfigKey(q, key)); err == nil {
		if kc, err := decodeKeyConfig(q, e); err == nil {
			lanes = kc.Lanes(cfg)
		}
	}
	var locks []Lock
	for lane := range lanes {
		s, err := qs.m.Get(ctx, cfg.Slot(key, lane))
		var held *session.HeldError
		switch {
		case errors.Is(err, session.ErrNotFound):
			continue
		case errors.As(err, &held) && errors.Is(err, session.ErrUndecodable):
			s = &session.Session{Revision: held.Revision}
			s.Slot = cfg.Slot(key, lane)
		case err != nil:
			return nil, err
		}
		l := qs.lockOf(q, key, lane, s, now)
		if !force && l.State != "dead" && l.State != string(session.StateStale) && l.State != string(session.StateExpiring) {
			return nil, &HeldError{Queue: q, Key: key, Lock: l}
		}
		locks = append(locks, l)
	}
	var out []Released
	for _, l := range locks {
		note := l.session.Record
		if err := qs.m.Reap(ctx, l.Slot, l.Revision, &note); err != nil {
			return out, err
		}
		r := Released{Lock: l}
		if l.Task != "" {
			t, err := qs.settleOrphan(ctx, cfg, l.Task, l.Fence, ReasonReleased)
			if err != nil {
				return out, err
			}
			r.Task = t
		}
		out = append(out, r)
	}
	return out, nil
}

// settleOrphan ends the attempt of task id that ran under fence, whose
// lock is gone, with reason, and frees its capacity token. It returns the
// task as written, or nil when it was settled already.
func (qs *Queues) settleOrphan(ctx context.Context, cfg Config, id string, fence uint64, reason string) (*Task, error) {
	t, err := qs.Get(ctx, cfg.Queue, id)
	if errors.Is(err, ErrTaskNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if t.State != StateActive || t.Run == nil || t.Run.Fence != fence {
		return nil, nil
	}
	// The lock was created before the task said it ran under it, so if the
	// stream leader does not hold it now, it is gone for good. A record
	// there that does not decode is held by nobody-knows-who (adr/0005): it
	// may have replaced the lock of a holder that is alive and still
	// stopping its work, whose token then still guards max_active; the
	// holder settles its attempt itself, or, once the record is removed,
	// this does.
	switch s, err := qs.m.Get(ctx, t.Run.Slot); {
	case err == nil && s.Fence == fence, errors.Is(err, session.ErrUndecodable):
		return nil, nil
	case err != nil && !errors.Is(err, session.ErrNotFound):
		return nil, err
	}
	tok := t.Run.Token
	out, err := qs.endAttempt(ctx, cfg, t, fence, outcome{reason: reason})
	if err != nil {
		return nil, err
	}
	if tok >= 0 {
		err = qs.freeToken(ctx, cfg.Queue, tok, id, fence)
	}
	return out, err
}

// freeToken removes capacity token i if it still belongs to task id's
// attempt under fence (a compare-and-set on the revision read).
func (qs *Queues) freeToken(ctx context.Context, q string, i int, id string, fence uint64) error {
	e, err := qs.bucket.Get(ctx, tokenKey(q, i))
	if errors.Is(err, kv.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	tok, err := decodeToken(e)
	if err != nil || tok.Task != id || tok.Fence != fence {
		return nil // another attempt's, or garbage that doctor reports
	}
	err = qs.bucket.Delete(ctx, e.Key, e.Revision, nil)
	if errors.Is(err, kv.ErrConflict) {
		return nil
	}
	return err
}

// joinStates is states as "a, b or c".
func joinStates(states []State) string {
	var b strings.Builder
	for i, s := range states {
		switch {
		case i == 0:
		case i == len(states)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(string(s))
	}
	return b.String()
}
