package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
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

// WithWait waits up to d for the host gate when another process of this host
// is joining the slot. Default: 0, fail at once with ErrGateBusy.
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

	gate, err := m.takeGate(ctx, slot, cfg)
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
	s, err := m.create(ctx, rec, cfg)
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

func (m *Manager) takeGate(ctx context.Context, slot string, cfg joinConfig) (*hostlocal.Lock, error) {
	h := hostlocal.Holder{Host: m.host, Instance: m.instance, Purpose: cfg.purpose}
	var (
		l   *hostlocal.Lock
		err error
	)
	if cfg.wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, cfg.wait)
		l, err = m.state.Lock(wctx, gateName(slot), h)
		cancel()
	} else {
		l, err = m.state.TryLock(gateName(slot), h)
	}
	if errors.Is(err, hostlocal.ErrLocked) {
		return nil, fmt.Errorf("%w: %w", ErrGateBusy, err)
	}
	return l, err
}

// create is the decision of Join: create, or find out who is in the way and
// (forced, same host) replace it.
func (m *Manager) create(ctx context.Context, rec Record, cfg joinConfig) (*Session, error) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		s, err := m.Create(ctx, rec, cfg.ttl)
		var ce *kv.ConflictError
		if !errors.As(err, &ce) || ce.Current == nil || !ce.Current.Live() {
			return s, err
		}
		cur, derr := Decode(*ce.Current)
		switch {
		case derr != nil:
			return nil, &HeldError{Slot: rec.Slot, Revision: ce.Current.Revision, Reason: ErrUndecodable, Decode: derr}
		case cur.Host != m.host:
			return nil, &HeldError{Slot: rec.Slot, Holder: cur, Revision: cur.Revision, Reason: ErrForeignHost}
		case !cfg.force:
			return nil, &HeldError{Slot: rec.Slot, Holder: cur, Revision: cur.Revision, Reason: ErrHeld}
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
