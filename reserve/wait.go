package reserve

// Waiting in line: a request that cannot be granted now takes a place in
// the space's record, waiting, and renews it while it waits. Every write
// of the space makes held the waiting entries now free, in order, so a
// release hands the paths on in the same write. The waiter watches the
// record to learn it holds them, and writes itself when a reservation in
// its way expires (its timer) or its holder's process exits on this host,
// since nobody else may.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
)

// Reserve is TryReserve that waits while the patterns are held by others,
// until ctx is done: requests whose patterns clash are served in the order
// they began to wait, and one whose patterns clash with nothing before it
// is served at once. A wait that ends with ctx is refused (a *HeldError
// with Waited set, joined with ctx's error), having left the line.
func (s *Spaces) Reserve(ctx context.Context, space string, patterns []string, opts ...ReserveOption) (*Reservation, error) {
	req, err := s.newRequest(space, patterns, opts)
	if err != nil {
		return nil, err
	}
	// Watch before deciding, so that no write after the decision is missed.
	w, err := s.bucket.Watch(ctx, Key(space))
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	sent := time.Now()
	st, err := s.change(ctx, space, req.entry.ID, time.Time{}, func(r *Record, cs []compiled, d time.Time) error {
		e := req.entry
		e.Waiting = len(blockers(cs, req.pats, req.cfg.shared, len(cs), "")) > 0
		r.Entries = append(r.Entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := s.hold(space, req, st, sent)
	select {
	case <-res.granted:
		return res, nil
	default:
	}
	if err := s.await(ctx, res, req, w, st); err != nil {
		return nil, err
	}
	if !res.live() {
		// Granted, but seen only past the local deadline (a waiter cut off
		// from the servers): another may hold the paths by now.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.bucket.Client().Timeout())
		_ = res.Release(lctx)
		cancel()
		err := res.Err()
		if err == nil || errors.Is(err, ErrReleased) {
			err = errors.New("granted only after its local deadline: not renewed in time")
		}
		return nil, &LostError{Space: res.space, ID: res.id, Cause: err}
	}
	if !req.cfg.keepAlive {
		res.cancel() // it renewed its place in line; held, it lives by its TTL
		<-res.kept
	}
	return res, nil
}

// await waits for res to be granted: until then it renews res's place,
// writes when a reservation in its way may have expired or lost its
// process, and leaves the line if ctx ends first.
func (s *Spaces) await(ctx context.Context, res *Reservation, req *request, w *kv.Watcher, st *state) error {
	exits := hostlocal.NewExitWatch(ctx)
	defer exits.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var in []blocker // what is in the way, as last seen
	look := func(st *state) error {
		if !res.observe(st) {
			return &LostError{Space: res.space, ID: res.id, Cause: errors.New("its place in line is gone: it expired, or was cleared")}
		}
		in = s.inTheWay(st, req, res.id)
		next := time.Duration(-1)
		for _, b := range in {
			if b.entry.Host == s.host && b.entry.PID > 0 {
				exits.Add(hostlocal.Process{PID: b.entry.PID, Start: b.entry.PIDStart})
				if b.entry.ChildPID > 0 {
					exits.Add(hostlocal.Process{PID: b.entry.ChildPID, Start: b.entry.ChildPIDStart})
				}
			}
			if exp := b.entry.ExpiresAt(); !exp.IsZero() && st.exact {
				if left := exp.Sub(st.at); next < 0 || left < next {
					next = left
				}
			}
		}
		if next >= 0 {
			timer.Reset(max(next, 0) + 20*time.Millisecond)
		}
		return nil
	}
	if err := look(st); err != nil {
		res.end(err)
		return err
	}
	for {
		select {
		case <-res.done: // before granted: a grant seen once it ended does not count
			return res.Err()
		default:
		}
		select {
		case <-res.granted:
			return nil
		case <-res.done:
			return res.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return s.leave(ctx, res, req, in, errors.New("reserve: the watch of the space ended"))
			}
			if e == nil || e.Revision < st.rev {
				continue // from before the request took its place
			}
			seen, err := stateOf(res.space, *e)
			if err != nil {
				return s.leave(ctx, res, req, in, err)
			}
			s.remember(res.space, seen)
			if err := look(seen); err != nil {
				res.end(err)
				return err
			}
		case <-timer.C:
			// A reservation in the way may have expired: decide at the
			// server's clock.
			now, err := s.bucket.ServerTime(ctx)
			if err == nil {
				err = res.update(ctx, now, func(e *Entry) { e.Renewed = time.Time{} })
			}
			if err != nil && ctx.Err() == nil && errors.Is(err, ErrLost) {
				return err
			}
		case <-exits.C():
			s.markGone(exits.Exited())
			if err := res.renew(ctx); err != nil && ctx.Err() == nil && errors.Is(err, ErrLost) {
				return err
			}
		case <-ctx.Done():
			return s.leave(ctx, res, req, in, ctx.Err())
		}
		select {
		case <-res.granted:
			return nil
		default:
		}
	}
}

// inTheWay is what is in the way of res's entry in st: every held entry
// its patterns clash with, and every waiting one before it.
func (s *Spaces) inTheWay(st *state, req *request, id string) []blocker {
	cs, err := s.compileShared(&st.rec)
	if err != nil {
		return nil
	}
	i := slices.IndexFunc(cs, func(c compiled) bool { return c.e.ID == id })
	if i < 0 {
		return nil
	}
	return blockers(cs, req.pats, req.cfg.shared, i, id)
}

// leave takes res out of the line (or releases it, if it was granted in
// the meantime) and returns the refusal, joined with why the wait ended.
func (s *Spaces) leave(ctx context.Context, res *Reservation, req *request, in []blocker, why error) error {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.bucket.Client().Timeout())
	defer cancel()
	_ = res.Release(lctx)
	at := time.Now()
	if st, err := s.last(lctx, res.space); err == nil && st.exact {
		at = st.at
	}
	return errors.Join(heldError(res.space, req, in, at, true), why)
}
