package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/waitline"
)

// DefaultTTL is a joined session's time to live when none is given: long
// enough for an agent that commits at its own pace. `baton run` renews on
// its own and uses a shorter one.
const DefaultTTL = 15 * time.Minute

// MaxTaskLen bounds task, agent and message strings.
const MaxTaskLen = 1024

// JoinOption configures Join.
type JoinOption func(*joinConfig) error

type joinConfig struct {
	agent   string
	proc    hostlocal.Process
	ttl     time.Duration
	force   bool
	wait    time.Duration
	meta    map[string]string
	spawn   func(context.Context, *Session) error
	purpose string
}

// WithAgent records the agent id. Default: none.
func WithAgent(id string) JoinOption {
	return func(c *joinConfig) error {
		if len(id) > MaxTaskLen {
			return fmt.Errorf("%w: agent id longer than %d bytes", ErrInvalid, MaxTaskLen)
		}
		c.agent = id
		return nil
	}
}

// WithProcess records the process that works the slot (its pid and start
// token). Default: the calling process.
func WithProcess(p hostlocal.Process) JoinOption {
	return func(c *joinConfig) error {
		if p.PID <= 0 {
			return fmt.Errorf("%w: pid %d", ErrInvalid, p.PID)
		}
		c.proc = p
		return nil
	}
}

// WithTTL sets the session's time to live: a whole number of seconds, at
// least 1s. Default: DefaultTTL.
func WithTTL(d time.Duration) JoinOption {
	return func(c *joinConfig) error {
		if err := kv.ValidateTTL(d); err != nil {
			return fmt.Errorf("%w: ttl: %w", ErrInvalid, err)
		}
		c.ttl = d
		return nil
	}
}

// WithForce replaces a live session of this host (a CAS delete, then a
// create, so the new session has a larger fence). Sessions of other hosts
// are refused even when forced. Default: refuse.
func WithForce(force bool) JoinOption {
	return func(c *joinConfig) error { c.force = force; return nil }
}

// WithWait lets Join wait up to d in all: for the host gate while another
// process of this host is joining the slot, and for a slot held by a live
// session it may not replace (of another holder, of another host, or one
// that does not decode), in the slot's line until the slot is free and no
// one who began to wait before is still waiting. Default: 0, fail at once
// with ErrGateBusy or the *HeldError.
func WithWait(d time.Duration) JoinOption {
	return func(c *joinConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: wait %s is negative", ErrInvalid, d)
		}
		c.wait = d
		return nil
	}
}

// WithMeta records free-form key/value pairs. Default: none.
func WithMeta(meta map[string]string) JoinOption {
	return func(c *joinConfig) error {
		for k := range meta {
			if k == "" {
				return fmt.Errorf("%w: meta keys must not be empty", ErrInvalid)
			}
		}
		c.meta = maps.Clone(meta)
		return nil
	}
}

// WithSpawn runs fn after the session is created and before the host gate
// is released, so no other process of this host can join the slot between
// the check and the spawn. If fn fails, the session is deleted again and
// Join returns fn's error. Default: none.
func WithSpawn(fn func(ctx context.Context, s *Session) error) JoinOption {
	return func(c *joinConfig) error { c.spawn = fn; return nil }
}

// WithPurpose is what the gate file says its holder is doing, for the
// message another joiner gets. Default: "join SLOT".
func WithPurpose(p string) JoinOption {
	return func(c *joinConfig) error { c.purpose = p; return nil }
}

// gateName is the host gate of a slot: <state-dir>/locks/slot-SLOT.lock.
func gateName(slot string) string { return "slot-" + slot }

// Join takes the slot for task: inside the slot's host gate it creates the
// session with a CAS create, and runs the spawn if one is given.
//
// A live session of another host is refused with ErrForeignHost, always. A
// live session of this host is refused with ErrHeld unless WithForce, which
// replaces it. A record that does not decode is refused with ErrUndecodable.
// All three come as a *HeldError naming the holder. A busy gate is
// ErrGateBusy; bad input is ErrInvalid.
//
// With WithWait, a slot found held is waited for instead, up to the wait:
// the joiner takes a place in the slot's line (package waitline, the line
// wait.slot.SLOT of the limits bucket) and, once no one who began to wait
// before it is still waiting, watches the slot and creates the session the
// moment it is closed or expires. Joiners are served in the order they
// began to wait, and a close wakes only the first in line. A waiter holds
// the host gate only around each try to create, never while it waits, so
// other joins of the slot on this host are not held up behind it. Where the
// server has no limits bucket, or the user may not use it, waiters watch
// the slot and race for it (adr/0042). When the wait runs out, the error is
// the *HeldError naming the holder then, with Waited set; when ctx ends
// first, it wraps both the *HeldError and ctx's error. A join that does not
// wait takes a free slot whoever waits, as before.
func (m *Manager) Join(ctx context.Context, slot, task string, opts ...JoinOption) (*Session, error) {
	if err := validSlot(slot); err != nil {
		return nil, err
	}
	if task == "" {
		return nil, fmt.Errorf("%w: a task id is required", ErrInvalid)
	}
	if len(task) > MaxTaskLen {
		return nil, fmt.Errorf("%w: task id of %d bytes: at most %d", ErrInvalid, len(task), MaxTaskLen)
	}
	cfg := joinConfig{ttl: DefaultTTL, purpose: "join " + slot}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.proc.PID == 0 {
		self, err := hostlocal.Self()
		if err != nil {
			return nil, err
		}
		cfg.proc = self
	}
	if cfg.wait == 0 {
		return m.attempt(ctx, ctx, slot, task, cfg, 0)
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.wait)
	defer cancel()
	s, err := m.attempt(ctx, wctx, slot, task, cfg, 0)
	var held *HeldError
	if !errors.As(err, &held) {
		return s, err
	}
	return m.joinInLine(ctx, wctx, slot, task, cfg, held)
}

// attempt is one try of Join: inside the host gate (waited for until wctx
// is done, when Join may wait), create the session over last (a tombstone's
// revision seen, or 0) and run the spawn. The gate is held for this alone.
func (m *Manager) attempt(ctx, wctx context.Context, slot, task string, cfg joinConfig, last uint64) (*Session, error) {
	gate, err := m.takeGate(wctx, slot, cfg)
	if err != nil {
		return nil, err
	}
	defer gate.Unlock()

	now := m.now().UTC()
	rec := Record{
		Slot: slot, TaskID: task, AgentID: cfg.agent, Host: m.host,
		PID: cfg.proc.PID, PIDStart: cfg.proc.Start, Instance: m.instance,
		StartedAt: now, RenewedAt: now, Meta: cfg.meta,
	}
	s, err := m.create(ctx, rec, cfg, last)
	if err != nil {
		return nil, err
	}
	m.writePIDFile(s, m.now().UTC())
	if cfg.spawn != nil {
		if err := cfg.spawn(ctx, s); err != nil {
			m.undo(s, ResultSpawnFailed)
			return nil, err
		}
	}
	return s, nil
}

// takeGate takes the slot's host gate: waiting until wctx is done when
// Join may wait, else with one try.
func (m *Manager) takeGate(wctx context.Context, slot string, cfg joinConfig) (*hostlocal.Lock, error) {
	h := hostlocal.Holder{Host: m.host, Instance: m.instance, Purpose: cfg.purpose}
	var (
		l   *hostlocal.Lock
		err error
	)
	if cfg.wait > 0 {
		l, err = m.state.Lock(wctx, gateName(slot), h)
	} else {
		l, err = m.state.TryLock(gateName(slot), h)
	}
	if errors.Is(err, hostlocal.ErrLocked) {
		return nil, fmt.Errorf("%w: %w", ErrGateBusy, err)
	}
	return l, err
}

// create is the decision of Join: create (over last, a tombstone's
// revision, when known), or find out who is in the way and (forced, same
// host) replace it.
func (m *Manager) create(ctx context.Context, rec Record, cfg joinConfig, last uint64) (*Session, error) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		s, err := m.CreateAfter(ctx, rec, cfg.ttl, last)
		last = 0
		var ce *kv.ConflictError
		if !errors.As(err, &ce) || ce.Current == nil || !ce.Current.Live() {
			return s, err
		}
		cur, held := m.inTheWay(*ce.Current)
		if !errors.Is(held, ErrHeld) || !cfg.force {
			return nil, held
		}
		note := cur.Record.clone()
		note.Result = ResultReplaced
		err = m.Delete(ctx, rec.Slot, cur.Revision, &note)
		if err != nil && (!errors.Is(err, kv.ErrConflict) || attempt == attempts) {
			return nil, err
		}
		if err == nil {
			m.removePIDFile(rec.Slot, cur.Fence)
		}
	}
}

// inTheWay is the *HeldError of a live record found on a slot: its session
// (nil if it does not decode) and why it is in the way: ErrUndecodable,
// ErrForeignHost, or ErrHeld (of this host, replaceable by force).
func (m *Manager) inTheWay(e kv.Entry) (*Session, *HeldError) {
	cur, derr := Decode(e)
	switch {
	case derr != nil:
		return nil, &HeldError{Slot: e.Key, Revision: e.Revision, Reason: ErrUndecodable, Decode: derr}
	case cur.Host != m.host:
		return cur, &HeldError{Slot: e.Key, Holder: cur, Revision: cur.Revision, Reason: ErrForeignHost}
	}
	return cur, &HeldError{Slot: e.Key, Holder: cur, Revision: cur.Revision, Reason: ErrHeld}
}

// lineName is the slot's line of waiters in the limits bucket.
func lineName(slot string) string { return "wait.slot." + slot }

// joinInLine waits for a held slot in its line and, once first, for the
// slot to be free (awaitFree), until wctx is done; the place is given up
// on every way out. Without the limits bucket (an older server, or a user
// not allowed it) it waits as awaitFree alone does: racing the others.
func (m *Manager) joinInLine(ctx, wctx context.Context, slot, task string, cfg joinConfig, held *HeldError) (*Session, error) {
	// The ticket names the process that waits (and renews it), so that a
	// waiter killed on this host is removed from the line at once.
	self, err := hostlocal.Self()
	if err != nil {
		return nil, err
	}
	line := waitline.New(m.bucket.Client().Bucket(limits.BucketConfig(m.prefix, 0)), lineName(slot), m.host, self)
	place, err := line.Wait(wctx, 1)
	switch {
	case errors.Is(err, kv.ErrBucketNotFound) || errors.Is(err, kv.ErrPermission):
		return m.awaitFree(ctx, wctx, slot, task, cfg, held)
	case err != nil:
		return nil, m.waitEnded(ctx, wctx, cfg, held, err)
	}
	defer place.LeaveDetached(ctx)
	return m.awaitFree(ctx, wctx, slot, task, cfg, held)
}

// awaitFree watches the slot and takes it (attempt) as soon as it is
// closed or expires, until wctx is done. A try lost to another joiner
// (one that did not wait, or did not see the line) waits on for the
// session that joiner made.
func (m *Manager) awaitFree(ctx, wctx context.Context, slot, task string, cfg joinConfig, held *HeldError) (*Session, error) {
	w, err := m.bucket.Watch(wctx, slot)
	if err != nil {
		return nil, m.waitEnded(ctx, wctx, cfg, held, err)
	}
	defer w.Stop()
	seen := false // a revision of the slot came before the end of the current values
	for {
		var e *kv.Entry
		select {
		case u, ok := <-w.Updates():
			if !ok {
				return nil, m.waitEnded(ctx, wctx, cfg, held, wctx.Err())
			}
			e = u
		case <-wctx.Done():
			return nil, m.waitEnded(ctx, wctx, cfg, held, wctx.Err())
		}
		var last uint64
		switch {
		case e == nil && seen:
			continue
		case e == nil: // no record at all (its tombstone expired): try
		case e.Live():
			seen = true
			_, held = m.inTheWay(*e)
			continue
		default: // closed or expired: create over its tombstone
			seen, last = true, e.Revision
		}
		s, err := m.attempt(ctx, wctx, slot, task, cfg, last)
		var he *HeldError
		if errors.As(err, &he) {
			held = he // another joiner was first: its write is the next update
			continue
		}
		if err != nil && wctx.Err() != nil && errors.Is(err, ErrGateBusy) {
			return nil, m.waitEnded(ctx, wctx, cfg, held, wctx.Err())
		}
		return s, err
	}
}

// waitEnded is the error of a wait for a held slot that ended with err:
// when the wait ran out, the held error naming the holder as it is now,
// with Waited set (one read of the slot: a waiter behind the first does
// not watch it); when ctx ended, the held error and ctx's; else err.
func (m *Manager) waitEnded(ctx, wctx context.Context, cfg joinConfig, held *HeldError, err error) error {
	switch {
	case ctx.Err() != nil:
		return errors.Join(held, ctx.Err())
	case wctx.Err() == nil:
		return fmt.Errorf("waiting for slot %s: %w", held.Slot, err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.bucket.Client().Timeout())
	defer cancel()
	if e, rerr := m.bucket.Latest(rctx, held.Slot); rerr == nil && e.Live() {
		_, held = m.inTheWay(e)
	}
	out := *held
	out.Waited = cfg.wait
	return &out
}

// undo deletes a session Join created, with a bounded context of its own:
// the caller's may be the reason for undoing.
func (m *Manager) undo(s *Session, result string) {
	ctx, cancel := context.WithTimeout(context.Background(), m.bucket.Client().Timeout())
	defer cancel()
	note := s.Record.clone()
	note.Result = result
	if err := m.Delete(ctx, s.Slot, s.Revision, &note); err == nil {
		m.removePIDFile(s.Slot, s.Fence)
	}
}
