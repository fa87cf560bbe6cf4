package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// Kinds of Problem.
const (
	// ProblemLostTask: a task is active but the lock it ran under is gone
	// (its worker died or lost it) and no worker has put it back yet.
	ProblemLostTask = "queue_lost_task"
	// ProblemStaleLock: a key lock of the queue not renewed for the
	// stale-after window, or held by a process of this host that is gone.
	ProblemStaleLock = "queue_stale_lock"
	// ProblemTimeout: an active task past the queue's timeout.
	ProblemTimeout = "queue_timeout"
	// ProblemDeadTask: a task out of attempts.
	ProblemDeadTask = "queue_dead_task"
	// ProblemOrphanToken: a capacity token whose lock is gone.
	ProblemOrphanToken = "queue_orphan_token"
	// ProblemUndecodable: a task, token, presence, inbox, key settings or
	// schedule record that does not decode.
	ProblemUndecodable = "queue_undecodable"
	// ProblemNoTTL: a worker's presence or inbox with no TTL, which baton
	// never writes: it never expires.
	ProblemNoTTL = "queue_no_ttl"
)

// Problem is something wrong with a queue, with what to do about it and,
// when it can be done safely, a fix: a compare-and-set on what was read, so
// a record that changed meanwhile is left alone (the fix then returns
// kv.ErrConflict).
type Problem struct {
	Kind   string
	Queue  string
	Key    string
	Task   string
	Detail string
	Action string
	// Fix is nil when the problem is only reported.
	Fix func(context.Context) error
}

// Problems checks queue q against the sessions listing l (read by the
// caller, with the server's time): tasks whose lock is gone, stale or dead
// locks, tasks past their timeout, dead tasks, tokens whose lock is gone,
// and records that do not decode. staleAfter <= 0 means half of each
// lock's TTL.
func (qs *Queues) Problems(ctx context.Context, q string, l *session.Listing, staleAfter time.Duration) ([]Problem, error) {
	cfg, err := qs.Config(ctx, q)
	if err != nil {
		return nil, err
	}
	entries, err := qs.bucket.Entries(ctx, queuePattern(q))
	if err != nil {
		return nil, err
	}
	now := l.ServerTime
	slots := map[string]*session.Session{}
	for _, s := range l.Sessions {
		slots[s.Slot] = s
	}
	var out []Problem
	add := func(p Problem) {
		p.Queue = q
		out = append(out, p)
	}
	garbled := map[string]bool{}
	for _, u := range l.Undecodable {
		garbled[u.Slot] = true
	}
	// A slot holding a record that does not decode is held by
	// nobody-knows-who (adr/0005): its lock is not taken for gone.
	lockGone := func(slot string, fence uint64) bool {
		s := slots[slot]
		return !garbled[slot] && (s == nil || s.Fence != fence)
	}
	var keys []KeyConfig
	for _, e := range entries {
		if isKeyConfigKey(q, e.Key) {
			if kc, err := decodeKeyConfig(q, e); err == nil {
				keys = append(keys, kc)
			}
		}
	}
	lanes := lanesFrom(cfg, keys)
	for _, e := range entries {
		switch {
		case isTaskKey(q, e.Key):
			t, err := decodeTask(q, e)
			if err != nil {
				add(Problem{Kind: ProblemUndecodable, Task: taskIDOf(q, e.Key),
					Detail: fmt.Sprintf("task record %s does not decode (revision %d): %v; it never runs", e.Key, e.Revision, err),
					Action: fmt.Sprintf("inspect it (`nats kv get %s %s`) and remove it by hand", qs.bucket.Name(), e.Key)})
				continue
			}
			qs.taskProblems(cfg, t, now, lockGone, add)
		case tokenIndexOf(q, e.Key) >= 0:
			tok, err := decodeToken(e)
			if err != nil {
				add(Problem{Kind: ProblemUndecodable,
					Detail: fmt.Sprintf("capacity token %s does not decode (revision %d): %v; it holds a unit of max_active until it expires", e.Key, e.Revision, err),
					Action: fmt.Sprintf("inspect it (`nats kv get %s %s`)", qs.bucket.Name(), e.Key)})
				continue
			}
			if lockGone(tok.Slot, tok.Fence) && now.Sub(e.Created) > time.Duration(cfg.TTL)/2 {
				key, rev := e.Key, e.Revision
				expires := "it expires at " + e.ExpiresAt().Format(time.RFC3339)
				if e.TTL <= 0 {
					expires = "it has no TTL (baton writes none such): it never expires"
				}
				add(Problem{Kind: ProblemOrphanToken, Key: tok.Key, Task: tok.Task,
					Detail: fmt.Sprintf("capacity token %d is held for task %s (host %s pid %d) whose lock %s (fence %d) is gone; %s",
						tok.Index, tok.Task, tok.Host, tok.PID, tok.Slot, tok.Fence, expires),
					Action: "`baton doctor --fix` frees it unless it is renewed meanwhile",
					Fix:    func(ctx context.Context) error { return qs.bucket.Delete(ctx, key, rev, nil) }})
			}
		case isPresenceKey(q, e.Key), isInboxKey(q, e.Key):
			qs.workerRecordProblems(q, e, add)
		case e.Key == rateKey(q):
			var rl rateLog
			if !rl.decodeFast(e.Value, 0) {
				add(Problem{Kind: ProblemUndecodable,
					Detail: fmt.Sprintf("rate record %s does not decode (revision %d); the dispatcher writes over it with an empty log, so one window may admit up to the limit more", e.Key, e.Revision),
					Action: fmt.Sprintf("inspect it (`nats kv get %s %s`); the next admission replaces it", qs.bucket.Name(), e.Key)})
			}
		case isKeyRateKey(q, e.Key):
			var rl rateLog
			if !rl.decodeFast(e.Value, 0) {
				add(Problem{Kind: ProblemUndecodable, Key: keyOfKeyRate(q, e.Key),
					Detail: fmt.Sprintf("rate record %s does not decode (revision %d); the dispatcher writes over it with an empty log, so one window of the key may admit up to its limit more", e.Key, e.Revision),
					Action: fmt.Sprintf("inspect it (`nats kv get %s %s`); the key's next admission replaces it", qs.bucket.Name(), e.Key)})
			}
		case isScheduleKey(q, e.Key):
			if _, err := decodeSchedule(q, e); err != nil {
				add(Problem{Kind: ProblemUndecodable,
					Detail: fmt.Sprintf("%v (revision %d); it adds no task (a dispatcher that read it before keeps its last good version)", err, e.Revision),
					Action: fmt.Sprintf("inspect it (`nats kv get %s %s`), remove it (`baton queue schedule rm %s %s`) and add it again", qs.bucket.Name(), e.Key, q, scheduleNameOf(q, e.Key))})
			}
		case isKeyConfigKey(q, e.Key):
			if _, err := decodeKeyConfig(q, e); err != nil {
				add(Problem{Kind: ProblemUndecodable, Key: keyOfKeyConfig(q, e.Key),
					Detail: fmt.Sprintf("%v (revision %d); the dispatcher keeps the key's last good settings, or the queue's", err, e.Revision),
					Action: fmt.Sprintf("inspect it (`nats kv get %s %s`) and set the key again (`baton queue pause|resume %s --key %s`)", qs.bucket.Name(), e.Key, q, keyOfKeyConfig(q, e.Key))})
			}
		}
	}
	for _, s := range l.Sessions {
		if s.Meta["queue"] != q {
			continue
		}
		t := s.Timing(now, staleAfter)
		dead := qs.deadHere(s)
		if t.State == session.StateLive && !dead {
			continue
		}
		key, lane := keyOfSlot(cfg, s.Slot, lanes)
		why := fmt.Sprintf("not renewed for %s", t.Age.Round(time.Millisecond))
		if dead {
			why = fmt.Sprintf("held by pid %d of this host, which is gone", s.PID)
		}
		s := s
		add(Problem{Kind: ProblemStaleLock, Key: key, Task: s.Meta["task"],
			Detail: fmt.Sprintf("key lock %s (lane %d, task %s, host %s, fence %d) is %s",
				s.Slot, lane, s.Meta["task"], s.Host, s.Fence, why),
			Action: fmt.Sprintf("`baton queue release %s %s` (or `baton doctor --fix`) frees it and puts its task back", q, key),
			Fix: func(ctx context.Context) error {
				note := s.Record
				if err := qs.m.Reap(ctx, s.Slot, s.Revision, &note); err != nil {
					return err
				}
				if id := s.Meta["task"]; id != "" {
					_, err := qs.settleOrphan(ctx, cfg, id, s.Fence, ReasonLost)
					return err
				}
				return nil
			}})
	}
	return out, nil
}

// workerRecordProblems reports a worker's presence or inbox that does not
// decode or has no TTL. Either is safe to remove: a live worker writes its
// presence again, the dispatcher its inbox.
func (qs *Queues) workerRecordProblems(q string, e kv.Entry, add func(Problem)) {
	what, id, err := "presence", workerOf(q, e.Key), error(nil)
	if isPresenceKey(q, e.Key) {
		_, err = decodePresence(q, e)
	} else {
		what, id = "inbox", inboxOwner(q, e.Key)
		_, err = decodeInbox(q, id, e)
	}
	key, rev := e.Key, e.Revision
	fix := func(ctx context.Context) error { return qs.bucket.Delete(ctx, key, rev, nil) }
	var effect string
	switch {
	case err != nil && what == "presence":
		effect = "the dispatcher goes on with what it knew of that worker, which cannot renew its presence over it"
	case err != nil:
		effect = "the worker takes no offer from it until the dispatcher writes its inbox again"
	case what == "presence":
		effect = "it never expires: once its worker is gone, the dispatcher still offers it tasks, each held for " + offerTimeout.String() + " unclaimed"
	default:
		effect = "it never expires"
	}
	action := "`baton doctor --fix` removes it (the worker writes its presence again)"
	if what == "inbox" {
		action = "`baton doctor --fix` removes it (the dispatcher writes it again)"
	}
	switch {
	case err != nil:
		add(Problem{Kind: ProblemUndecodable,
			Detail: fmt.Sprintf("the %s of worker %s, %s, does not decode (revision %d): %v; %s", what, id, e.Key, e.Revision, err, effect),
			Action: action, Fix: fix})
	case e.TTL <= 0:
		add(Problem{Kind: ProblemNoTTL,
			Detail: fmt.Sprintf("the %s of worker %s, %s, has no TTL (baton writes none such): %s", what, id, e.Key, effect),
			Action: action, Fix: fix})
	}
}

func (qs *Queues) taskProblems(cfg Config, t *Task, now time.Time, lockGone func(string, uint64) bool, add func(Problem)) {
	q := cfg.Queue
	switch t.State {
	case StateDead:
		add(Problem{Kind: ProblemDeadTask, Key: t.Key, Task: t.ID,
			Detail: fmt.Sprintf("task %s (key %s) is dead after %d attempts; last: %s", t.ID, t.Key, t.Attempts, lastResult(t.Result)),
			Action: fmt.Sprintf("`baton queue retry %s %s` runs it again; `baton queue get %s %s` shows it", q, t.ID, q, t.ID)})
	case StateActive:
		r := t.Run
		if lockGone(r.Slot, r.Fence) {
			id, fence := t.ID, r.Fence
			add(Problem{Kind: ProblemLostTask, Key: t.Key, Task: t.ID,
				Detail: fmt.Sprintf("task %s (key %s) is active but its lock %s (fence %d, host %s pid %d) is gone: its worker died or lost it, and no worker of the queue has put it back",
					t.ID, t.Key, r.Slot, r.Fence, r.Host, r.PID),
				Action: "start a worker (`baton queue work " + q + " -- CMD`), which puts it back at once; `baton doctor --fix` does it now",
				Fix: func(ctx context.Context) error {
					_, err := qs.settleOrphan(ctx, cfg, id, fence, ReasonLost)
					return err
				}})
			return
		}
		if !r.StartedAt.IsZero() && now.Sub(r.StartedAt) > t.TimeoutIn(cfg)+time.Duration(cfg.TTL) {
			add(Problem{Kind: ProblemTimeout, Key: t.Key, Task: t.ID,
				Detail: fmt.Sprintf("task %s (key %s) has run for %s, past the queue's timeout of %s, on host %s pid %d; its worker should have stopped it",
					t.ID, t.Key, now.Sub(r.StartedAt).Round(time.Second), cfg.Timeout, r.Host, r.PID),
				Action: fmt.Sprintf("`baton queue cancel %s %s` stops it; check that worker", q, t.ID)})
		}
	}
}

func lastResult(r *Result) string {
	if r == nil {
		return "no result"
	}
	if r.Reason == ReasonExit && r.ExitCode != nil {
		s := fmt.Sprintf("exit %d", *r.ExitCode)
		if r.Error != "" {
			s += " (" + r.Error + ")"
		}
		return s
	}
	if r.Error != "" {
		return r.Reason + ": " + r.Error
	}
	return r.Reason
}

// IsConflict reports whether a fix lost its compare-and-set: the record
// changed since it was read.
func IsConflict(err error) bool { return errors.Is(err, kv.ErrConflict) }
