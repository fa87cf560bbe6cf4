package reserve

// A held reservation: its renewal, its release, and its end.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/keepalive"
)

// Reservation is a holding of paths in a space, or a place in its line
// while Reserve waits. It is renewed in the background (unless taken
// WithoutKeepAlive) until it is released or lost; Done closes then.
type Reservation struct {
	s     *Spaces
	space string
	id    string
	ttl   time.Duration

	// renewing serialises the writes of the entry (keepalive, Renew,
	// SetChild).
	renewing sync.Mutex
	mu       sync.Mutex
	entry    Entry // as last written or seen
	granted  chan struct{}
	err      error // why it ended, once done is closed
	// lastSent is when the last write that renewed the entry was sent,
	// and budget the stop budget: the holder's local deadline is
	// lastSent + TTL - the clock margin - budget (internal/keepalive).
	lastSent time.Time
	budget   time.Duration

	done   chan struct{}
	cancel context.CancelFunc // stops the keepalive
	kept   chan struct{}      // closed when the keepalive has returned
}

// hold makes the reservation of req, written in st (held, or waiting),
// and starts its keepalive; sent is when the write that made it was sent.
func (s *Spaces) hold(space string, req *request, st *state, sent time.Time) *Reservation {
	r := &Reservation{s: s, space: space, id: req.entry.ID, ttl: req.cfg.ttl, entry: req.entry,
		granted: make(chan struct{}), done: make(chan struct{}), kept: make(chan struct{}),
		lastSent: sent, budget: keepalive.New(req.cfg.ttl, req.cfg.grace, sent).StopBudget()}
	r.observe(st)
	if !req.cfg.keepAlive && !r.entry.Waiting {
		close(r.kept)
		r.cancel = func() {}
		return r
	}
	r.keep(req.cfg.grace, sent)
	return r
}

// keep starts the keepalive.
func (r *Reservation) keep(grace time.Duration, sent time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	m := keepalive.New(r.ttl, grace, sent)
	go func() {
		defer close(r.kept)
		err := keepalive.Run(ctx, m, r.renew, func(err error) bool { return errors.Is(err, ErrLost) }, nil)
		if err != nil {
			r.end(&LostError{Space: r.space, ID: r.id, Cause: err})
		}
	}()
}

// observe takes the reservation's entry from a state of its space: its
// fence once granted. It reports whether the entry is there.
func (r *Reservation) observe(st *state) bool {
	i := st.rec.find(r.id)
	if i < 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entry = st.rec.Entries[i]
	if !r.entry.Waiting {
		select {
		case <-r.granted:
		default:
			close(r.granted)
		}
	}
	return true
}

// end closes Done with err, once.
func (r *Reservation) end(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		return
	default:
	}
	r.err = err
	close(r.done)
}

// Space is the reservation's space.
func (r *Reservation) Space() string { return r.space }

// ID is the reservation's id, unique in its space.
func (r *Reservation) ID() string { return r.id }

// TTL is the reservation's TTL.
func (r *Reservation) TTL() time.Duration { return r.ttl }

// Entry is the reservation as last written or seen: its patterns, mode,
// holder and fence.
func (r *Reservation) Entry() Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry.bare()
	e.Patterns = slices.Clone(e.Patterns)
	return e
}

// Patterns are the reservation's patterns, in canonical form.
func (r *Reservation) Patterns() []string { return r.Entry().Patterns }

// Shared reports whether the reservation is shared.
func (r *Reservation) Shared() bool { return r.Entry().Shared }

// Fence is the revision at which the reservation was granted: every
// reservation granted later in the space has a higher one. Pass it to
// what the holder writes, and have that refuse a fence lower than the
// highest it has seen. 0 while it waits.
func (r *Reservation) Fence() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entry.Waiting {
		return 0
	}
	return r.entry.Fence
}

// Done is closed when the reservation ends: released, or lost.
func (r *Reservation) Done() <-chan struct{} { return r.done }

// Err is why the reservation ended (ErrReleased, or a *LostError), nil
// while it lasts.
func (r *Reservation) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Renew writes the reservation again, restarting its TTL. It returns a
// *LostError (ErrLost) if the reservation is gone.
func (r *Reservation) Renew(ctx context.Context) error {
	return r.renew(ctx)
}

// renew writes the entry with a renewal time of its own revision.
func (r *Reservation) renew(ctx context.Context) error {
	sent := time.Now()
	err := r.update(ctx, time.Time{}, func(e *Entry) { e.Renewed = time.Time{} })
	if err == nil {
		r.mu.Lock()
		if sent.After(r.lastSent) {
			r.lastSent = sent
		}
		r.mu.Unlock()
	}
	return err
}

// live reports whether the reservation still counts as held here: not
// ended, and its local deadline not passed. A waiter told it holds the
// paths after its deadline (cut off while it was granted) must not act:
// the server may have let another take them already.
func (r *Reservation) live() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		return false
	default:
	}
	return time.Now().Before(r.lastSent.Add(r.ttl - keepalive.Margin(r.ttl) - r.budget))
}

// update changes the reservation's entry with f, at a decision time of at
// least floor.
func (r *Reservation) update(ctx context.Context, floor time.Time, f func(e *Entry)) error {
	r.renewing.Lock()
	defer r.renewing.Unlock()
	st, err := r.s.changeWith(ctx, r.space, r.id, floor, false, func(rec *Record, _ []compiled, _ time.Time) error {
		i := rec.find(r.id)
		if i < 0 {
			return &LostError{Space: r.space, ID: r.id, Cause: fmt.Errorf("%w: it expired, or its holder was found dead, or it was released", ErrNoReservation)}
		}
		f(&rec.Entries[i])
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrLost) {
			r.end(err)
		}
		return err
	}
	r.observe(st)
	return nil
}

// SetChild records c as the command run under the reservation: this host
// frees it at once only once c's process group is gone too.
func (r *Reservation) SetChild(ctx context.Context, c hostlocal.Process) error {
	return r.update(ctx, time.Time{}, func(e *Entry) {
		e.ChildPID, e.ChildPIDStart = c.PID, c.Start
		e.Renewed = time.Time{}
	})
}

// Release removes the reservation and stops its renewal. Releasing one
// that is gone already returns a *LostError (ErrLost); Done is closed
// either way.
func (r *Reservation) Release(ctx context.Context) error {
	r.cancel()
	<-r.kept
	r.renewing.Lock()
	defer r.renewing.Unlock()
	_, err := r.s.changeWith(ctx, r.space, r.id, time.Time{}, false, func(rec *Record, _ []compiled, _ time.Time) error {
		i := rec.find(r.id)
		if i < 0 {
			return &LostError{Space: r.space, ID: r.id, Cause: fmt.Errorf("%w: it expired, or its holder was found dead, or it was released", ErrNoReservation)}
		}
		rec.Entries = slices.Delete(rec.Entries, i, i+1)
		return nil
	})
	switch {
	case err == nil:
		r.end(ErrReleased)
	case errors.Is(err, ErrLost):
		r.end(err)
	}
	return err
}

// Resume takes up reservation id of space, as Reserve left it (a command
// line that renews or releases what another reserved): it is not renewed
// in the background. It returns ErrNoReservation if the space holds no
// such reservation.
func (s *Spaces) Resume(ctx context.Context, space, id string) (*Reservation, error) {
	if err := ValidSpace(space); err != nil {
		return nil, err
	}
	st, err := s.read(ctx, space)
	if err != nil {
		return nil, err
	}
	i := st.rec.find(id)
	if i < 0 {
		return nil, fmt.Errorf("%w: %s holds no reservation %s (released, or expired)", ErrNoReservation, space, id)
	}
	e := st.rec.Entries[i]
	r := &Reservation{s: s, space: space, id: id, ttl: e.ttl(), entry: e,
		granted: make(chan struct{}), done: make(chan struct{}), kept: make(chan struct{}), cancel: func() {}}
	close(r.kept)
	r.observe(st)
	return r, nil
}
