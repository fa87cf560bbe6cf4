package reserve

// Taking a reservation: at once or refused (TryReserve), or in line until
// its turn (Reserve).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/reserve/pattern"
)

// ReserveOption configures TryReserve and Reserve.
type ReserveOption func(*reserveConfig) error

type reserveConfig struct {
	shared    bool
	agent     string
	task      string
	ttl       time.Duration
	meta      map[string]string
	keepAlive bool
	grace     time.Duration
}

// Shared asks for a shared reservation: it clashes only with exclusive
// ones. Default: exclusive, which clashes with every overlapping one.
func Shared() ReserveOption {
	return func(c *reserveConfig) error { c.shared = true; return nil }
}

// WithAgent names the agent the reservation is for, shown to anyone it is
// in the way of. Default: none.
func WithAgent(id string) ReserveOption {
	return func(c *reserveConfig) error {
		if len(id) > 128 {
			return fmt.Errorf("%w: agent id of %d bytes: at most 128", ErrInvalid, len(id))
		}
		c.agent = id
		return nil
	}
}

// WithTask names the task the reservation is for. Default: none.
func WithTask(id string) ReserveOption {
	return func(c *reserveConfig) error {
		if len(id) > 128 {
			return fmt.Errorf("%w: task id of %d bytes: at most 128", ErrInvalid, len(id))
		}
		c.task = id
		return nil
	}
}

// WithTTL sets the reservation's TTL: a whole number of seconds, at least
// 1s. Default: DefaultTTL.
func WithTTL(d time.Duration) ReserveOption {
	return func(c *reserveConfig) error {
		if err := kv.ValidateTTL(d); err != nil {
			return fmt.Errorf("%w: ttl: %w", ErrInvalid, err)
		}
		c.ttl = d
		return nil
	}
}

// WithMeta records free-form key/value pairs with the reservation.
func WithMeta(meta map[string]string) ReserveOption {
	return func(c *reserveConfig) error { c.meta = maps.Clone(meta); return nil }
}

// WithoutKeepAlive returns a reservation that is not renewed in the
// background: for a command line that reserves and exits. Release, Renew
// and the TTL are its life. Default: renewed every third of its TTL until
// released. A Reserve that waits renews its place in line either way.
func WithoutKeepAlive() ReserveOption {
	return func(c *reserveConfig) error { c.keepAlive = false; return nil }
}

// WithGrace is the time the holder needs to stop its work once it must
// give the reservation up: renewals that keep failing end it that long
// (at most a quarter of the TTL) before the server could let another
// take its paths. Default: 0.
func WithGrace(d time.Duration) ReserveOption {
	return func(c *reserveConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: grace %s is negative", ErrInvalid, d)
		}
		c.grace = d
		return nil
	}
}

// request is a reservation asked for: its entry and compiled patterns.
type request struct {
	cfg   reserveConfig
	entry Entry
	pats  []pattern.Pattern
}

// newRequest checks a request and makes its entry.
func (s *Spaces) newRequest(space string, patterns []string, opts []ReserveOption) (*request, error) {
	if err := ValidSpace(space); err != nil {
		return nil, err
	}
	cfg := reserveConfig{ttl: DefaultTTL, keepAlive: true}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	pats, err := ParsePatterns(patterns)
	if err != nil {
		return nil, err
	}
	strs := make([]string, len(pats))
	for i, p := range pats {
		strs[i] = p.String()
	}
	r := &request{cfg: cfg, pats: pats, entry: Entry{
		ID: "r" + uuid.NewString()[:8] + uuid.NewString()[:4], Patterns: strs, Shared: cfg.shared,
		Agent: cfg.agent, Task: cfg.task, Host: s.host, PID: s.proc.PID, PIDStart: s.proc.Start,
		TTL: jsonrec.Duration(cfg.ttl), Meta: cfg.meta,
	}}
	return r, nil
}

// ParsePatterns parses the patterns of a reservation: 1 to MaxPatterns,
// each as package pattern reads it, duplicates dropped.
func ParsePatterns(patterns []string) ([]pattern.Pattern, error) {
	if len(patterns) == 0 || len(patterns) > MaxPatterns {
		return nil, fmt.Errorf("%w: %d patterns: a reservation has 1 to %d", ErrInvalid, len(patterns), MaxPatterns)
	}
	out := make([]pattern.Pattern, 0, len(patterns))
	seen := map[string]bool{}
	for _, p := range patterns {
		c, err := pattern.Parse(p)
		if err != nil {
			return nil, invalidError{err}
		}
		if !seen[c.String()] {
			seen[c.String()] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// TryReserve takes every pattern of patterns in space, or none: it is
// refused (a *HeldError, ErrHeld) when any of them overlaps a reservation
// held by another (any, for an exclusive request; an exclusive one, for a
// shared request) or one waiting in line, naming each. A free space costs
// one compare-and-set when this handle knows it, a read and one
// compare-and-set when not; a refusal reads the space and the server's
// clock and decides once more, so that it is never made from an old copy.
func (s *Spaces) TryReserve(ctx context.Context, space string, patterns []string, opts ...ReserveOption) (*Reservation, error) {
	req, err := s.newRequest(space, patterns, opts)
	if err != nil {
		return nil, err
	}
	try := func(floor time.Time) (*state, error) {
		return s.changeWith(ctx, space, req.entry.ID, floor, false, func(r *Record, _ []compiled, d time.Time) error {
			bs, err := s.blockersIn(r, req.pats, req.cfg.shared)
			if err != nil {
				return err
			}
			if len(bs) > 0 {
				return heldError(space, req, bs, d, false)
			}
			r.Entries = append(r.Entries, req.entry)
			return nil
		})
	}
	sent := time.Now()
	st, err := try(time.Time{})
	if errors.Is(err, ErrHeld) {
		if _, err := s.read(ctx, space); err != nil {
			return nil, err
		}
		now, err := s.bucket.ServerTime(ctx)
		if err != nil {
			return nil, err
		}
		sent = time.Now()
		st, err = try(now)
		if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return s.hold(space, req, st, sent), nil
}
