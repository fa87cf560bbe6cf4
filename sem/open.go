package sem

import (
	"context"
	"errors"
	"sync"

	"github.com/batonhq/baton/internal/waitline"
	"github.com/batonhq/baton/kv"
)

// Semaphore is one semaphore with its units and line kept from a watch,
// for a process that takes permits of it often (a gateway, a harness):
// TryAcquire decides from the view and costs one compare-and-set per
// unit, where Semaphores.TryAcquire reads the semaphore first. Close it
// when done.
type Semaphore struct {
	s    *Semaphores
	c    Config
	w    *kv.Watcher
	stop context.CancelFunc
	done chan struct{}

	mu    sync.Mutex
	units []unitState
	line  map[string]kv.Entry // the live tickets of the line, by key
	ready bool
	err   error // the watch ended
}

// Open returns semaphore name with a view kept from a watch of its
// records; it returns once the view holds them all.
func (s *Semaphores) Open(ctx context.Context, name string) (*Semaphore, error) {
	c, err := s.Config(ctx, name)
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	w, err := s.bucket.Watch(wctx, "sem."+name+".>")
	if err != nil {
		stop()
		return nil, err
	}
	h := &Semaphore{s: s, c: c, w: w, stop: stop, done: make(chan struct{}), units: make([]unitState, c.Max), line: map[string]kv.Entry{}}
	for i := range h.units {
		h.units[i].unit = i
	}
	ready := make(chan struct{})
	go h.follow(ready)
	select {
	case <-ready:
		return h, nil
	case <-h.done:
		h.Close()
		return nil, h.err
	case <-ctx.Done():
		h.Close()
		return nil, ctx.Err()
	}
}

// follow applies the watch to the view until it ends.
func (h *Semaphore) follow(ready chan struct{}) {
	defer close(h.done)
	line := lineName(h.c.Name) + "."
	for e := range h.w.Updates() {
		h.mu.Lock()
		switch {
		case e == nil:
			if !h.ready {
				h.ready = true
				close(ready)
			}
		case len(e.Key) > len(line) && e.Key[:len(line)] == line:
			if e.Live() {
				h.line[e.Key] = *e
			} else {
				delete(h.line, e.Key)
			}
		default:
			if i, ok := unitOf(h.c.Name, e.Key); ok && i < h.c.Max {
				h.units[i] = stateOf(h.c.Name, i, *e)
			}
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.err = errors.New("sem: the semaphore's watch ended")
	h.mu.Unlock()
}

// view is a copy of the view now.
func (h *Semaphore) view() view {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := view{units: make([]unitState, len(h.units))}
	copy(v.units, h.units)
	es := make([]kv.Entry, 0, len(h.line))
	for _, e := range h.line {
		es = append(es, e)
	}
	v.waiters = waitline.Parse(lineName(h.c.Name), es)
	return v
}

// Name is the semaphore's name.
func (h *Semaphore) Name() string { return h.c.Name }

// Max is the semaphore's max.
func (h *Semaphore) Max() int { return h.c.Max }

// Status is the semaphore as the view shows it now.
func (h *Semaphore) Status() Status { return statusOf(h.c, h.view()) }

// TryAcquire is Semaphores.TryAcquire decided from the view: while it shows
// enough units free and nobody waiting, one compare-and-set create per unit
// (over the tombstones it saw). When the view was wrong (another process
// took a unit first) or shows too few free units, it reads the semaphore
// as Semaphores.TryAcquire does, freeing units of dead processes of this
// host on the way.
func (h *Semaphore) TryAcquire(ctx context.Context, opts ...AcquireOption) (*Permit, error) {
	cfg, err := h.s.options(opts)
	if err != nil {
		return nil, err
	}
	if cfg.weight > h.c.Max {
		return nil, h.s.tooHeavy(h.c, cfg.weight)
	}
	v := h.view()
	var free []int
	for _, u := range v.units {
		if !u.live {
			free = append(free, u.unit)
			if u.rev > 0 {
				h.s.setTomb(unitKey(h.c.Name, u.unit), u.rev)
			}
		}
	}
	if len(v.waiters) > 0 {
		return nil, h.s.full(h.c, cfg.weight, v)
	}
	if len(free) >= cfg.weight {
		p, err := h.s.take(ctx, h.c, cfg, free[:cfg.weight])
		if err == nil || !errors.Is(err, kv.ErrConflict) {
			return p, err
		}
	}
	return h.s.TryAcquire(ctx, h.c.Name, opts...)
}

// Acquire is Semaphores.Acquire: it waits in the semaphore's line.
func (h *Semaphore) Acquire(ctx context.Context, opts ...AcquireOption) (*Permit, error) {
	return h.s.Acquire(ctx, h.c.Name, opts...)
}

// Close ends the watch.
func (h *Semaphore) Close() {
	h.stop()
	h.w.Stop()
	<-h.done
}
