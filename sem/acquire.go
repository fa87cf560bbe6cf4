package sem

// Acquiring a permit: one try (TryAcquire) or a wait woken by the
// semaphore's watch and by the exit of holders on this host (Acquire).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/waitline"
)

// AcquireOption configures Acquire and TryAcquire.
type AcquireOption func(*acquireConfig) error

type acquireConfig struct {
	weight    int
	ttl       time.Duration
	meta      map[string]string
	keepAlive bool
	grace     time.Duration
}

// WithWeight sets how many units the permit holds. Default: 1.
func WithWeight(w int) AcquireOption {
	return func(c *acquireConfig) error {
		if w < 1 {
			return fmt.Errorf("%w: weight %d: at least 1", ErrInvalid, w)
		}
		c.weight = w
		return nil
	}
}

// WithTTL sets the permit's TTL: a whole number of seconds, at least 1s.
// Default: DefaultTTL.
func WithTTL(d time.Duration) AcquireOption {
	return func(c *acquireConfig) error {
		if err := kv.ValidateTTL(d); err != nil {
			return fmt.Errorf("%w: ttl: %w", ErrInvalid, err)
		}
		c.ttl = d
		return nil
	}
}

// WithMeta records free-form key/value pairs with the permit. Default:
// none.
func WithMeta(meta map[string]string) AcquireOption {
	return func(c *acquireConfig) error { c.meta = maps.Clone(meta); return nil }
}

// WithoutKeepAlive returns a permit that is not renewed in the background:
// for a command line that acquires and exits. Release and the TTL are its
// life. Default: renewed every third of its TTL until released.
func WithoutKeepAlive() AcquireOption {
	return func(c *acquireConfig) error { c.keepAlive = false; return nil }
}

// WithGrace is the time the holder needs to stop its work once it must
// give the permit up: renewals that keep failing end it that long (at most
// a quarter of the TTL) before the server could expire its units.
// Default: 0.
func WithGrace(d time.Duration) AcquireOption {
	return func(c *acquireConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: grace %s is negative", ErrInvalid, d)
		}
		c.grace = d
		return nil
	}
}

// maxTries bounds the tries of one TryAcquire that lose races to other
// acquirers while enough units looked free.
const maxTries = 4

// TryAcquire takes a permit of semaphore name if enough units are free
// and nobody waits for them, without waiting: a *FullError (ErrFull) when
// they are not. Units held by dead processes of this host are freed on the
// way.
func (s *Semaphores) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Permit, error) {
	cfg, c, err := s.prepare(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	p, v, err := s.try(ctx, c, cfg, nil)
	if errors.Is(err, kv.ErrConflict) {
		// Others took the units it went for, maxTries times over.
		return nil, s.full(c, cfg.weight, v)
	}
	return p, err
}

// Acquire takes a permit of semaphore name, waiting while too few units
// are free, until ctx is done. Waiters are served in the order they began
// to wait: each takes a place in the semaphore's line (package waitline),
// and only the first in line takes units; a waiter asking for more units
// than are free holds up those behind it rather than be passed forever.
// The first in line is woken by the semaphore's watch when a unit is
// released or expires, and by the exit of a holder's process on this host;
// the others by the waiter ahead of them leaving. When ctx ends first, the
// error wraps both the *FullError and ctx's error.
func (s *Semaphores) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Permit, error) {
	cfg, c, err := s.prepare(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	p, _, err := s.try(ctx, c, cfg, nil)
	switch {
	case p != nil:
		return p, nil
	case !errors.Is(err, ErrFull) && !errors.Is(err, kv.ErrConflict):
		return nil, err
	}
	for {
		place, err := s.line(c).Wait(ctx, cfg.weight)
		if err != nil {
			if ctx.Err() != nil {
				err = errors.Join(s.waiting(c, cfg.weight), err)
			}
			return nil, err
		}
		p, err := s.first(ctx, c, cfg, place)
		place.LeaveDetached(ctx) // a no-op once its take has left
		if errors.Is(err, errBackInLine) {
			continue
		}
		return p, err
	}
}

// errBackInLine is a first in line that lost its place: its take lost a
// unit to an acquirer that had not seen the line after it had left the
// line, a handoff committed to it could not be whole, or its ticket
// expired. It waits again, at the back.
var errBackInLine = errors.New("sem: the place in line was lost (a unit taken by one that did not see the line, a handoff that failed, or the ticket expired); waiting again")

// waiting is the *FullError of a waiter whose wait ended.
func (s *Semaphores) waiting(c Config, weight int) error {
	return &FullError{Name: c.Name, Max: c.Units(), Weight: weight, Free: -1}
}

// first takes the permit as the first in line: it tries, and waits for a
// unit to be freed or a holder of this host to exit, until it has it; or
// a holder that releases hands it units directly (handoff.go).
func (s *Semaphores) first(ctx context.Context, c Config, cfg acquireConfig, place *waitline.Place) (p *Permit, err error) {
	// The watch starts before the try, so that a release between the two
	// is not missed. It sees the ticket too: its renewals, told to the
	// holders, and the delete that commits a handoff.
	w, err := s.bucket.WatchPatterns(ctx, []string{"sem." + s.space(c) + ".*", place.Key()}, kv.UpdatesOnly())
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	exits := hostlocal.NewExitWatch(ctx)
	defer exits.Stop()
	h := s.newHanded(c, cfg, place)
	defer func() {
		if p == nil {
			h.abandon(ctx)
		} else {
			h.tookItself(ctx)
		}
	}()
	var late <-chan time.Time  // once a commit came, the wait for the units it names
	var stale <-chan time.Time // once units were written for it, the wait for their commit
	for {
		p, v, err := s.try(ctx, c, cfg, place)
		switch {
		case p != nil:
			return p, nil
		case !errors.Is(err, ErrFull) && !errors.Is(err, kv.ErrConflict):
			return nil, err
		}
		s.watchExits(exits, v.units)
		h.tell(place.Revision())
		// Sleep until a unit is freed (released, expired), a holder
		// commits a handoff, or a holder of this host exits; a unit taken
		// or renewed frees nothing. Units written for it are only noted
		// until the commit: the waiter may still take freed ones itself
		// meanwhile, and then the commit is refused (its ticket is gone).
		for woke := false; !woke; {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return nil, errors.Join(err, ctx.Err())
				}
				if e == nil {
					continue
				}
				if e.Key == place.Key() {
					if e.Live() {
						h.tell(e.Revision) // renewed: tell the new revision
						continue
					}
					if !h.commit(*e) {
						return nil, errBackInLine // the ticket expired: the place is lost
					}
					// A holder committed a handoff: its units came before
					// the commit, unless a write of one was sent again.
					if p, done, err := h.settle(); done {
						return p, err
					}
					late = time.After(s.bucket.Client().Timeout())
					continue
				}
				i, ok := unitOf(s.space(c), e.Key)
				if !ok || i >= c.Units() {
					continue
				}
				h.saw(i, *e)
				if h.committed != "" {
					if p, done, err := h.settle(); done {
						return p, err
					}
					continue // its ticket is gone: it takes nothing of its own
				}
				if e.Live() {
					if len(h.units) > 0 && stale == nil {
						stale = time.After(s.bucket.Client().Timeout())
					}
					continue
				}
				s.setTomb(e.Key, e.Revision)
				if cfg.weight > 1 {
					woke = true // read what else is free
					continue
				}
				// The unit just freed is the one it needs: take it at once,
				// over the tombstone the watch brought, without a read.
				return s.take(ctx, c, cfg, []int{i}, place)
			case <-exits.C():
				woke = h.committed == ""
			case <-late:
				return nil, errBackInLine // a unit the commit names never came: freed as the wait ends
			case <-stale:
				stale = nil
				if h.committed == "" {
					h.uncommitted(ctx)
				}
			case <-ctx.Done():
				return nil, errors.Join(err, ctx.Err())
			}
		}
	}
}

func (s *Semaphores) options(opts []AcquireOption) (acquireConfig, error) {
	cfg := acquireConfig{weight: 1, ttl: DefaultTTL, keepAlive: true}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// perHost says "on each host" of a per-host semaphore, for messages.
func perHost(c Config) string {
	if c.PerHost() {
		return " on each host"
	}
	return ""
}

func (s *Semaphores) tooHeavy(c Config, weight int) error {
	return fmt.Errorf("%w: weight %d: semaphore %s has %d units%s", ErrInvalid, weight, c.Name, c.Units(), perHost(c))
}

func (s *Semaphores) prepare(ctx context.Context, name string, opts []AcquireOption) (acquireConfig, Config, error) {
	cfg, err := s.options(opts)
	if err != nil {
		return cfg, Config{}, err
	}
	c, err := s.Config(ctx, name)
	if err != nil {
		return cfg, c, err
	}
	if cfg.weight > c.Units() {
		return cfg, c, s.tooHeavy(c, cfg.weight)
	}
	return cfg, c, nil
}

// try reads the semaphore and creates weight free units, the lowest
// first, all at once; a create that loses undoes the others and, while
// enough units still look free, tries again (maxTries in all: then the
// conflict is returned). Unless it is the first in line (place), it takes
// nothing while anyone waits; the first in line leaves the line once it
// has taken (takeLeaving). It returns the semaphore as last read, for a
// waiter.
func (s *Semaphores) try(ctx context.Context, c Config, cfg acquireConfig, place *waitline.Place) (*Permit, view, error) {
	for attempt := 1; ; attempt++ {
		v, err := s.read(ctx, c)
		if err != nil {
			return nil, v, err
		}
		s.reap(ctx, c, v.units)
		var free []int
		for _, u := range v.units {
			if !u.live {
				free = append(free, u.unit)
			}
		}
		if len(free) < cfg.weight || (place == nil && len(v.waiters) > 0) {
			return nil, v, s.full(c, cfg.weight, v)
		}
		// A listing shows no tombstones: the creates may go over ones not
		// known here, and then their first tries fail. So the first in
		// line leaves only once it has the units (where a unit just seen
		// freed leaves in the same pipeline: first), and a unit lost to
		// an acquirer that had not seen the line leaves it first in line.
		p, err := s.take(ctx, c, cfg, free[:cfg.weight], nil)
		if err == nil {
			if place != nil {
				place.LeaveDetached(ctx)
			}
			return p, v, nil
		}
		if !errors.Is(err, kv.ErrConflict) || attempt == maxTries {
			return nil, v, err
		}
	}
}

// reap frees, at the revision seen, units held by dead processes of this
// host, and marks them free in st (a renewal since makes the delete fail:
// then the unit is live, and the create over it loses).
func (s *Semaphores) reap(ctx context.Context, c Config, st []unitState) {
	for i := range st {
		u := &st[i]
		if !u.live || !s.deadOnThisHost(u.rec) {
			continue
		}
		if rev, err := s.bucket.DeleteRevision(ctx, unitKey(s.space(c), u.unit), u.rev, nil); err == nil {
			u.live, u.rev, u.rec = false, rev, nil
		}
	}
}

// take creates the units of a new permit, all at once (one pipeline); if
// any is lost the others are deleted again. The first in line (place)
// leaves the line in the same pipeline, its ticket's delete behind the
// creates: the next waiter, woken by the delete, finds the units held and
// never races this one for them, and a process that exits at once (baton
// sem acquire --wait) leaves no ticket behind to hold up the line. If a
// create loses (kv.ErrConflict), the place is left all the same: then the
// error is errBackInLine.
func (s *Semaphores) take(ctx context.Context, c Config, cfg acquireConfig, units []int, place *waitline.Place) (*Permit, error) {
	id := newPermitID()
	now := s.now().UTC()
	recs := make([]Unit, len(units))
	ws := make([]kv.Write, len(units))
	for i, n := range units {
		recs[i] = Unit{Sem: c.Name, Unit: n, Permit: id, Index: units[0], Weight: cfg.weight,
			Host: s.host, PID: s.proc.PID, PIDStart: s.proc.Start, AcquiredAt: now, RenewedAt: now, Meta: cfg.meta}
		data, err := recs[i].MarshalJSON()
		if err != nil {
			return nil, err
		}
		key := unitKey(s.space(c), n)
		ws[i] = kv.Write{Kind: kv.WriteCreate, Key: key, Value: data, TTL: cfg.ttl, Rev: s.tomb(key)}
	}
	sent := time.Now()
	var res []kv.WriteResult
	switch {
	case place != nil:
		res = place.LeaveAfter(ctx, ws)
	case len(ws) == 1:
		rev, err := s.bucket.CreateAfter(ctx, ws[0].Key, ws[0].Value, ws[0].TTL, ws[0].Rev)
		res = []kv.WriteResult{{Rev: rev, Err: err}}
	default:
		res = s.bucket.Pipeline(ctx, ws)
	}
	revs := make([]uint64, len(units))
	errs := make([]error, len(units))
	for i, r := range res {
		revs[i], errs[i] = r.Rev, r.Err
		if r.Err == nil {
			s.setTomb(ws[i].Key, 0)
		}
	}
	if err := errors.Join(errs...); err != nil {
		var undo []heldUnit
		for i, n := range units {
			if errs[i] == nil {
				undo = append(undo, heldUnit{unit: n, rev: revs[i]})
			}
		}
		_ = s.undoUnits(ctx, s.space(c), undo)
		if place != nil && errors.Is(err, kv.ErrConflict) {
			return nil, fmt.Errorf("%w: %w", errBackInLine, err)
		}
		return nil, err
	}
	held := make([]heldUnit, len(units))
	for i := range units {
		held[i] = heldUnit{unit: units[i], rev: revs[i], rec: recs[i]}
	}
	return s.hold(c, id, cfg, held, sent), nil
}

// full is the *FullError of a try that found too few free units, or
// others waiting for them.
func (s *Semaphores) full(c Config, weight int, v view) error {
	free := 0
	for _, u := range v.units {
		if !u.live {
			free++
		}
	}
	return &FullError{Name: c.Name, Max: c.Units(), Weight: weight, Free: free, Waiting: len(v.waiters), Holders: holdersOf(v.units)}
}

// watchExits waits for the process, and the command, of each live holder
// in st on this host.
func (s *Semaphores) watchExits(x *hostlocal.ExitWatch, st []unitState) {
	for _, u := range st {
		if !u.live || u.rec == nil || u.rec.Host != s.host || u.rec.PID <= 0 {
			continue
		}
		x.Add(hostlocal.Process{PID: u.rec.PID, Start: u.rec.PIDStart})
		if u.rec.ChildPID > 0 {
			x.Add(hostlocal.Process{PID: u.rec.ChildPID, Start: u.rec.ChildPIDStart})
		}
	}
}

// holdersOf groups the live units of st by permit, lowest index first; a
// unit that does not decode is a holder of its own.
func holdersOf(st []unitState) []Holder {
	at := map[string]int{} // permit -> its place in out
	var out []Holder
	for _, u := range st {
		if !u.live {
			continue
		}
		if u.rec == nil {
			out = append(out, Holder{Index: u.unit, Weight: 1, Units: []int{u.unit}, Revision: u.rev, Undecodable: u.err.Error()})
			continue
		}
		i, ok := at[u.rec.Permit]
		if !ok {
			i = len(out)
			at[u.rec.Permit] = i
			out = append(out, Holder{Permit: u.rec.Permit, Index: u.rec.Index, Weight: u.rec.Weight, Host: u.rec.Host,
				PID: u.rec.PID, PIDStart: u.rec.PIDStart, AcquiredAt: u.rec.AcquiredAt, RenewedAt: u.rec.RenewedAt, Meta: u.rec.Meta})
		}
		out[i].Units = append(out[i].Units, u.unit)
		out[i].Revision = max(out[i].Revision, u.rev)
	}
	slices.SortStableFunc(out, func(a, b Holder) int { return a.Index - b.Index })
	return out
}
