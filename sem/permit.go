package sem

// A held permit: its units, their renewal and their release.

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/keepalive"
	"github.com/batonhq/baton/kv"
)

// heldUnit is one unit of a permit, at the revision the permit last wrote.
type heldUnit struct {
	unit int
	rev  uint64
	rec  Unit
}

// Permit is a holding of Weight units of a semaphore. Its units are
// renewed in the background (unless acquired WithoutKeepAlive) until it is
// released or lost; Done closes then.
type Permit struct {
	s      *Semaphores
	name   string
	space  string // where its units are (Config.space)
	id     string
	index  int
	weight int
	fence  uint64
	ttl    time.Duration

	// renewing serialises the writes of the units (keepalive, Renew,
	// SetChild), each a compare-and-set on the revisions the last one left.
	renewing sync.Mutex
	mu       sync.Mutex
	units    []heldUnit
	err      error // why it ended, once done is closed

	done   chan struct{}
	cancel context.CancelFunc // stops the keepalive
	kept   chan struct{}      // closed when the keepalive has returned

	// listening: the permit counts in its handle's claims board until it
	// ends (handoff.go); a resumed permit does not.
	listening bool
	// releasing is set by the first Release.
	releasing bool
}

// hold makes the permit of units just created, and starts its keepalive.
func (s *Semaphores) hold(c Config, id string, cfg acquireConfig, units []heldUnit, sent time.Time) *Permit {
	p := &Permit{s: s, name: c.Name, space: s.space(c), id: id, index: units[0].unit, weight: len(units), ttl: cfg.ttl,
		units: units, done: make(chan struct{}), kept: make(chan struct{})}
	for _, u := range units {
		p.fence = max(p.fence, u.rev)
	}
	s.listen()
	p.listening = true
	if !cfg.keepAlive {
		close(p.kept)
		p.cancel = func() {}
		return p
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	m := keepalive.New(cfg.ttl, cfg.grace, sent)
	go func() {
		defer close(p.kept)
		err := keepalive.Run(ctx, m, p.renew, func(err error) bool { return errors.Is(err, kv.ErrConflict) }, nil)
		if err != nil {
			p.end(&LostError{Name: p.name, Permit: p.id, Cause: err})
		}
	}()
	return p
}

// Name is the semaphore's name.
func (p *Permit) Name() string { return p.name }

// held is a copy of the permit's units as last written.
func (p *Permit) held() []heldUnit {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]heldUnit, len(p.units))
	copy(out, p.units)
	return out
}

// ID is the permit's id, written in each of its units.
func (p *Permit) ID() string { return p.id }

// Index is the permit's lowest unit: 0 to max-1, unique among the live
// permits of the semaphore (a port or database number can be derived from
// it).
func (p *Permit) Index() int { return p.index }

// Weight is how many units the permit holds.
func (p *Permit) Weight() int { return p.weight }

// Units are the units the permit holds, lowest first.
func (p *Permit) Units() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, len(p.units))
	for i, u := range p.units {
		out[i] = u.unit
	}
	return out
}

// Fence is the highest revision at which the permit's units were written
// when it was acquired: every permit acquired later on the semaphore has a
// higher one. Pass it to what the holder writes, and have that refuse a
// fence lower than the highest it has seen.
func (p *Permit) Fence() uint64 { return p.fence }

// TTL is the permit's TTL.
func (p *Permit) TTL() time.Duration { return p.ttl }

// Done is closed when the permit has ended: released, or lost.
func (p *Permit) Done() <-chan struct{} { return p.done }

// Err is why the permit ended (ErrReleased, or a *LostError), nil while
// it is held.
func (p *Permit) Err() error {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	default:
		return nil
	}
}

// end closes done once, with err.
func (p *Permit) end(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
	default:
		p.err = err
		close(p.done)
		if p.listening {
			p.s.unlisten()
		}
	}
}

// Holder is the permit as its records show it.
func (p *Permit) Holder() Holder {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.units[0].rec
	h := Holder{Permit: p.id, Index: p.index, Weight: p.weight, Host: r.Host, PID: r.PID, PIDStart: r.PIDStart,
		AcquiredAt: r.AcquiredAt, RenewedAt: r.RenewedAt, Meta: maps.Clone(r.Meta), Fence: p.fence}
	for _, u := range p.units {
		h.Units = append(h.Units, u.unit)
		h.Revision = max(h.Revision, u.rev)
	}
	return h
}

// SetChild records the command the holder runs under the permit, in each
// unit (one renewal): a holder on this host is then freed only once that
// command's process group is gone too, not when the holder alone died.
func (p *Permit) SetChild(ctx context.Context, c hostlocal.Process) error {
	return p.renewNow(ctx, func(u *Unit) { u.ChildPID, u.ChildPIDStart = c.PID, c.Start })
}

// renew writes every unit again at the revision the permit last wrote,
// restarting their TTLs; a unit that changed meanwhile is a conflict (the
// permit is lost).
func (p *Permit) renew(ctx context.Context) error { return p.write(ctx, nil) }

// write renews every unit, changed by change first if not nil.
func (p *Permit) write(ctx context.Context, change func(*Unit)) error {
	p.renewing.Lock()
	defer p.renewing.Unlock()
	p.mu.Lock()
	units := make([]heldUnit, len(p.units))
	copy(units, p.units)
	p.mu.Unlock()
	now := p.s.now().UTC()
	errs := make([]error, len(units))
	var wg sync.WaitGroup
	for i := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := &units[i]
			rec := u.rec.clone()
			rec.RenewedAt = now
			if change != nil {
				change(&rec)
			}
			data, err := rec.MarshalJSON()
			if err != nil {
				errs[i] = err
				return
			}
			rev, err := p.s.bucket.Update(ctx, unitKey(p.space, u.unit), data, p.ttl, u.rev)
			if err != nil {
				errs[i] = err
				return
			}
			u.rev, u.rec = rev, rec
		}()
	}
	wg.Wait()
	p.mu.Lock()
	for i, u := range units {
		if errs[i] == nil {
			p.units[i] = u
		}
	}
	p.mu.Unlock()
	return errors.Join(errs...)
}

// Renew writes the permit's units again now (a permit acquired
// WithoutKeepAlive lives by these and its TTL).
func (p *Permit) Renew(ctx context.Context) error { return p.renewNow(ctx, nil) }

func (p *Permit) renewNow(ctx context.Context, change func(*Unit)) error {
	if err := p.Err(); err != nil {
		return err
	}
	err := p.write(ctx, change)
	if errors.Is(err, kv.ErrConflict) {
		lost := &LostError{Name: p.name, Permit: p.id, Cause: err}
		p.end(lost)
		return lost
	}
	return err
}

// Release frees the permit's units, each by compare-and-set on the
// revision the permit last wrote, so that a unit lost to another holder is
// never touched; while the first waiter of its semaphore asks for no more
// units than it holds, it hands them to that waiter instead (ADR 0045).
// A unit already lost makes it a *LostError (the others are freed all the
// same). Releasing a released permit does nothing.
func (p *Permit) Release(ctx context.Context) error {
	p.cancel()
	<-p.kept
	select {
	case <-p.done:
		p.mu.Lock()
		err := p.err
		p.mu.Unlock()
		if errors.Is(err, ErrReleased) {
			return nil
		}
	default:
	}
	p.mu.Lock()
	units := make([]heldUnit, len(p.units))
	copy(units, p.units)
	// Only a permit held, released for the first time, hands over: a lost
	// one's writes would be refused while its commit took the waiter's
	// place, and a release tried again may hold stale revisions.
	handing := !p.releasing && p.err == nil
	p.releasing = true
	p.mu.Unlock()
	var err error
	if c, ok := p.claim(); ok && handing {
		err = p.handOff(ctx, units, c)
	} else {
		err = p.free(ctx, units)
	}
	switch {
	case err == nil:
		p.end(ErrReleased)
		return nil
	case errors.Is(err, kv.ErrConflict):
		lost := &LostError{Name: p.name, Permit: p.id, Cause: err}
		p.end(lost)
		return lost
	default:
		return err
	}
}

// free deletes the permit's units, each by compare-and-set on the
// revision the permit last wrote.
func (p *Permit) free(ctx context.Context, units []heldUnit) error {
	return errors.Join(p.s.deleteUnits(ctx, p.space, units)...)
}

// deleteUnits deletes units of space, each by compare-and-set on its
// revision, all in one pipeline (one unit: a plain request, as an
// uncontended release is), and keeps each tombstone's revision for the
// next create (tomb). It returns each unit's error.
func (s *Semaphores) deleteUnits(ctx context.Context, space string, units []heldUnit) []error {
	ws := make([]kv.Write, len(units))
	for i, u := range units {
		ws[i] = kv.Write{Kind: kv.WriteDelete, Key: unitKey(space, u.unit), Rev: u.rev}
	}
	var res []kv.WriteResult
	switch len(ws) {
	case 0:
	case 1:
		res = make([]kv.WriteResult, 1)
		res[0].Rev, res[0].Err = s.bucket.DeleteRevision(ctx, ws[0].Key, ws[0].Rev, nil)
	default:
		res = s.bucket.Pipeline(ctx, ws)
	}
	errs := make([]error, len(units))
	for i, r := range res {
		if errs[i] = r.Err; r.Err == nil {
			s.setTomb(ws[i].Key, r.Rev)
		}
	}
	return errs
}

// undoUnits frees units written that nobody is to hold (a take that lost
// one of its units, a handoff that did not happen), on a context that
// outlives ctx's end, bounded by the client's timeout. A unit changed
// since is left as it is; other errors are returned.
func (s *Semaphores) undoUnits(ctx context.Context, space string, units []heldUnit) error {
	if len(units) == 0 {
		return nil
	}
	undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.bucket.Client().Timeout())
	defer cancel()
	var errs []error
	for _, err := range s.deleteUnits(undo, space, units) {
		if err != nil && !errors.Is(err, kv.ErrConflict) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Resume finds permit id of semaphore name from its units, for a process
// other than the one that acquired it (baton sem release): it is not
// renewed in the background, and its Fence is 0 (renewals have moved its
// units' revisions on). A permit none of whose units is live is
// ErrNoPermit.
func (s *Semaphores) Resume(ctx context.Context, name, id string) (*Permit, error) {
	c, err := s.Config(ctx, name)
	if err != nil {
		return nil, err
	}
	v, err := s.read(ctx, c)
	if err != nil {
		return nil, err
	}
	var held []heldUnit
	var ttl time.Duration
	for _, u := range v.units {
		if u.live && u.rec != nil && u.rec.Permit == id {
			held = append(held, heldUnit{unit: u.unit, rev: u.rev, rec: *u.rec})
			ttl = u.ttl
		}
	}
	if len(held) == 0 {
		return nil, &noPermitError{name: name, id: id}
	}
	p := &Permit{s: s, name: name, space: s.space(c), id: id, index: held[0].rec.Index, weight: held[0].rec.Weight, ttl: ttl,
		units: held, done: make(chan struct{}), kept: make(chan struct{}), cancel: func() {}}
	close(p.kept)
	return p, nil
}

type noPermitError struct{ name, id string }

func (e *noPermitError) Error() string {
	return "sem: no unit of " + e.name + " names permit " + e.id + ": it was released, or its units expired"
}

func (e *noPermitError) Unwrap() error { return ErrNoPermit }
