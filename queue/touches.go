package queue

// Tasks that touch paths (adr/0056): a task added with the paths it edits
// runs only under a reservation of them. The dispatcher's index holds a
// key back while its next task's paths clash with a task of the queue
// that runs or is being claimed, so other keys go on; the worker reserves
// the paths, exclusively, before the task starts, and holds them while it
// runs. Paths another process holds (an agent's baton reserve) are found
// at that reservation: the task is given back, its attempt not counted,
// and waits a second before its next turn.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/reserve/pattern"
)

// pathsHeldWait is how long a task whose paths another held waits before
// its next turn; twice as long each time they are held again, up to
// maxPathsHeldWait, so that an agent holding them for an hour costs the
// queue a few writes a minute.
const (
	pathsHeldWait    = time.Second
	maxPathsHeldWait = 30 * time.Second
)

// WithTouches says which paths the task edits, as patterns of package
// reserve/pattern in reservation space space (a repository's id; empty:
// the queue's name): a worker runs it only once it holds them,
// exclusively. Default: none.
func WithTouches(space string, patterns ...string) AddOption {
	return func(c *addConfig) error {
		if space == "" {
			return fmt.Errorf("%w: touches: name the reservation space", ErrInvalid)
		}
		if err := reserve.ValidSpace(space); err != nil {
			return fmt.Errorf("%w: touches: %s", ErrInvalid, err)
		}
		pats, err := reserve.ParsePatterns(patterns)
		if err != nil {
			return fmt.Errorf("%w: touches: %s", ErrInvalid, err)
		}
		c.space, c.touches = space, make([]string, len(pats))
		for i, p := range pats {
			c.touches[i] = p.String()
		}
		return nil
	}
}

// paths are a task's touches, compiled.
type paths struct {
	space string
	pats  []pattern.Pattern
	src   []string
}

// pathsOf compiles touches. A pattern that does not parse (a garbled
// record) stands for the whole space, so that it clashes with everything
// rather than with nothing.
func pathsOf(space string, touches []string, was *paths) *paths {
	if len(touches) == 0 {
		return nil
	}
	if was != nil && was.space == space && slices.Equal(was.src, touches) {
		return was
	}
	p := &paths{space: space, src: slices.Clone(touches)}
	for _, s := range touches {
		c, err := pattern.Parse(s)
		if err != nil {
			c = pattern.MustParse("**")
		}
		p.pats = append(p.pats, c)
	}
	return p
}

// clashes reports whether two tasks' paths meet: both in one space, and
// some pattern of each overlapping.
func (p *paths) clashes(q *paths) bool {
	if p == nil || q == nil || p.space != q.space {
		return false
	}
	for _, a := range p.pats {
		for _, b := range q.pats {
			if a.Overlaps(b) {
				return true
			}
		}
	}
	return false
}

// pathsBusy reports whether t's paths clash with a task that runs or is
// being claimed.
func (x *index) pathsBusy(t *itask) bool {
	if t == nil || t.paths == nil {
		return false
	}
	for _, o := range x.touching {
		if o != t && t.paths.clashes(o.paths) {
			return true
		}
	}
	return false
}

// block holds k back until a task that touches paths ends.
func (x *index) block(k *ikey) {
	k.blocked = true
	x.blocked[k.name] = true
	x.refresh(k)
}

// touch notes that t runs or is being claimed (on), or no longer (off).
// A task that touches no paths is not noted; one that stops lets every
// key held back for paths be looked at again.
func (x *index) touch(t *itask, on bool) {
	if t.paths == nil {
		return
	}
	if on {
		x.touching[t.id] = t
		return
	}
	if x.touching[t.id] != t {
		return
	}
	delete(x.touching, t.id)
	for name := range x.blocked {
		if k := x.keys[name]; k != nil && k.blocked {
			k.blocked = false
			x.refresh(k)
		}
	}
	clear(x.blocked)
}

// spaces is the handle the workers reserve paths with, made at first use.
func (qs *Queues) spacesHandle() (*reserve.Spaces, error) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.spaces != nil {
		return qs.spaces, nil
	}
	sp, err := reserve.New(qs.bucket.Client(), reserve.WithPrefix(qs.prefix), reserve.WithHostID(qs.m.Host()), reserve.WithProcess(qs.proc))
	if err != nil {
		return nil, err
	}
	qs.spaces = sp
	return sp, nil
}

// errPathsHeld is a task's paths held by another when its worker came to
// reserve them.
var errPathsHeld = errors.New("queue: the task's paths are held by another")

// reservePaths reserves the paths t touches for its attempt, held by this
// worker's process and renewed with the queue's TTL.
func (l *loop) reservePaths(ctx context.Context, r *runState, t *Task) (*reserve.Reservation, error) {
	sp, err := l.w.qs.spacesHandle()
	if err != nil {
		return nil, err
	}
	res, err := sp.TryReserve(ctx, t.Space, t.Touches, reserve.WithTask(t.ID), reserve.WithAgent(l.w.qs.Instance()),
		reserve.WithTTL(time.Duration(r.cfg.TTL)), reserve.WithGrace(l.w.grace),
		reserve.WithMeta(map[string]string{"queue": r.cfg.Queue, "fence": fmt.Sprint(r.fence)}))
	var held *reserve.HeldError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("%w: %w", errPathsHeld, held)
	}
	return res, err
}
