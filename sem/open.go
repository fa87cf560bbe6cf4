package sem

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/batonhq/baton/kv"
)

// Semaphore is one semaphore kept open by a process that takes permits of
// it often (a gateway, a harness): an uncontended TryAcquire is one
// compare-and-set create per unit, where Semaphores.TryAcquire reads the
// semaphore first.
//
// It goes by what it knows of the units (read when it is opened, then its
// own permits' writes) and watches only the semaphore's line: it takes
// units it believes free at once, and reads the semaphore when that
// belief is wrong (a create loses to another process's permit) or when it
// believes too few are free. While anyone waits in the line it takes
// nothing, as TryAcquire does not. Close it when done.
type Semaphore struct {
	s    *Semaphores
	c    Config
	w    *kv.Watcher
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	known   []knownUnit         // by unit
	waiting map[string]struct{} // the live tickets of the line
	err     error               // the watch ended
}

// knownUnit is what a Semaphore last knew of a unit: its revision, and
// whether it was held then.
type knownUnit struct {
	rev  uint64
	live bool
}

// Open reads semaphore name and the bucket's settings, and starts the
// watch of its line.
func (s *Semaphores) Open(ctx context.Context, name string) (*Semaphore, error) {
	c, err := s.Config(ctx, name)
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	w, err := s.bucket.Watch(wctx, lineName(s.space(c))+".*")
	if err != nil {
		stop()
		return nil, err
	}
	h := &Semaphore{s: s, c: c, w: w, stop: stop, done: make(chan struct{}), known: make([]knownUnit, c.Units()), waiting: map[string]struct{}{}}
	ready := make(chan struct{})
	go h.follow(ready)
	select {
	case <-ready:
	case <-h.done:
		h.Close()
		return nil, h.err
	case <-ctx.Done():
		h.Close()
		return nil, ctx.Err()
	}
	v, err := s.read(ctx, c)
	if err != nil {
		h.Close()
		return nil, err
	}
	h.learn(v)
	// Releases are deletes: a handle that knows the bucket keeps one
	// revision sends them without a rollup (adr/0038).
	if err := s.bucket.LearnHistory(ctx); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// follow keeps the line's tickets from the watch until it ends.
func (h *Semaphore) follow(ready chan struct{}) {
	defer close(h.done)
	started := false
	for e := range h.w.Updates() {
		h.mu.Lock()
		switch {
		case e == nil:
			if !started {
				started = true
				close(ready)
			}
		case e.Live() && !strings.Contains(strings.TrimPrefix(e.Key, lineName(h.s.space(h.c))+"."), "."):
			h.waiting[e.Key] = struct{}{}
		default:
			delete(h.waiting, e.Key)
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.err = errors.New("sem: the semaphore's watch ended")
	h.mu.Unlock()
}

// learn takes what a read of the semaphore showed.
func (h *Semaphore) learn(v view) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, u := range v.units {
		h.known[u.unit] = knownUnit{rev: u.rev, live: u.live}
	}
}

// took and freed record this handle's own writes.
func (h *Semaphore) took(p *Permit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, u := range p.held() {
		h.known[u.unit] = knownUnit{rev: u.rev, live: true}
	}
}

// free is the first n units believed free, unless fewer are or anyone
// waits. A unit is believed free if it was when last seen, or a permit of
// this process has released it since (its tombstone is newer).
func (h *Semaphore) free(n int) ([]int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.waiting) > 0 {
		return nil, false
	}
	var units []int
	for i, k := range h.known {
		key := unitKey(h.s.space(h.c), i)
		tomb := h.s.tomb(key)
		switch {
		case tomb > k.rev:
			h.known[i] = knownUnit{rev: tomb}
		case k.live:
			continue
		case k.rev > 0 && tomb == 0:
			h.s.setTomb(key, k.rev)
		}
		units = append(units, i)
		if len(units) == n {
			return units, true
		}
	}
	return nil, false
}

// Name is the semaphore's name.
func (h *Semaphore) Name() string { return h.c.Name }

// Max is the semaphore's max: its units in all, or on this host for a
// per-host one.
func (h *Semaphore) Max() int { return h.c.Units() }

// Waiting is how many wait in the semaphore's line, as the watch shows.
func (h *Semaphore) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiting)
}

// Status reads the semaphore.
func (h *Semaphore) Status(ctx context.Context) (Status, error) {
	v, err := h.s.read(ctx, h.c)
	if err != nil {
		return Status{}, err
	}
	h.learn(v)
	return h.s.statusHere(h.c, v), nil
}

// TryAcquire is Semaphores.TryAcquire, costing one compare-and-set create
// per unit while what the handle knows is right.
func (h *Semaphore) TryAcquire(ctx context.Context, opts ...AcquireOption) (*Permit, error) {
	cfg, err := h.s.options(opts)
	if err != nil {
		return nil, err
	}
	if cfg.weight > h.c.Units() {
		return nil, h.s.tooHeavy(h.c, cfg.weight)
	}
	if units, ok := h.free(cfg.weight); ok {
		p, err := h.s.take(ctx, h.c, cfg, units, nil)
		switch {
		case err == nil:
			h.took(p)
			return p, nil
		case !errors.Is(err, kv.ErrConflict):
			return nil, err
		}
	}
	p, v, err := h.s.try(ctx, h.c, cfg, nil)
	h.learn(v)
	switch {
	case err == nil:
		h.took(p)
		return p, nil
	case errors.Is(err, kv.ErrConflict):
		return nil, h.s.full(h.c, cfg.weight, v)
	}
	return nil, err
}

// Acquire is Semaphores.Acquire: it waits in the semaphore's line.
func (h *Semaphore) Acquire(ctx context.Context, opts ...AcquireOption) (*Permit, error) {
	p, err := h.s.Acquire(ctx, h.c.Name, opts...)
	if err == nil {
		h.took(p)
	}
	return p, err
}

// Close ends the watch.
func (h *Semaphore) Close() {
	h.stop()
	h.w.Stop()
	<-h.done
}
