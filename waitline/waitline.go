// Package waitline serves waiters in the order they began to wait.
//
// A waiter writes a ticket, <line>.<id>, with a short TTL it renews while
// it waits; its place is the revision at which the ticket was created
// (written into the ticket from its first renewal on, as a lease's fence
// is). Its turn comes when no live ticket of the line has an earlier place.
// A waiter watches only the ticket just ahead of its own, as etcd's Mutex
// watches its predecessor, so that a waiter leaving wakes the one behind
// it, not the whole line. A ticket whose process is dead on the waiter's
// host is removed at once (pid and start time, waited on with a pidfd); one
// of another host goes with its TTL.
//
// The line orders waiters; it decides nothing else. What is waited for
// (a semaphore's units, a lease, a slot) is still taken by its own
// compare-and-set, by the waiter whose turn it is.
package waitline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/keepalive"
	"github.com/batonhq/baton/kv"
)

// TTL is a ticket's TTL: a waiter that dies on another host holds up the
// line at most this long.
const TTL = 3 * time.Second

// ErrLostPlace means the waiter's ticket is gone (expired while its
// renewals failed, or removed): it has no place in the line any more.
var ErrLostPlace = errors.New("waitline: place in the line lost")

// Line is the waiters of one thing: tickets <name>.<id> in a bucket.
type Line struct {
	b    *kv.Bucket
	name string
	host string
	proc hostlocal.Process
	now  func() time.Time
}

// New returns the line name of bucket b, for waiters of host that are
// process proc.
func New(b *kv.Bucket, name, host string, proc hostlocal.Process) *Line {
	return &Line{b: b, name: name, host: host, proc: proc, now: time.Now}
}

// Waiter is a live ticket as read.
type Waiter struct {
	Ticket
	Key      string
	Revision uint64
}

// Place is the waiter's place in the line: its ticket's creation revision.
func (w Waiter) Place() uint64 {
	if w.First != 0 {
		return w.First
	}
	return w.Revision
}

// Parse is the live tickets of line among es (a listing of the bucket),
// first in line first; tickets that do not decode are left out.
func Parse(line string, es []kv.Entry) []Waiter {
	var out []Waiter
	for _, e := range es {
		id, ok := strings.CutPrefix(e.Key, line+".")
		if !ok || !e.Live() || strings.Contains(id, ".") {
			continue
		}
		var t Ticket
		if err := t.UnmarshalJSON(e.Value); err != nil || t.ID != id {
			continue
		}
		out = append(out, Waiter{Ticket: t, Key: e.Key, Revision: e.Revision})
	}
	slices.SortFunc(out, func(a, b Waiter) int { return cmpUint(a.Place(), b.Place()) })
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Waiters reads the line.
func (l *Line) Waiters(ctx context.Context) ([]Waiter, error) {
	es, err := l.b.Entries(ctx, l.name+".*")
	if err != nil {
		return nil, err
	}
	return Parse(l.name, es), nil
}

// Place is a waiter's ticket, renewed until Leave.
type Place struct {
	l     *Line
	key   string
	first uint64

	mu  sync.Mutex
	rec Ticket
	rev uint64

	cancel context.CancelFunc
	kept   chan struct{}
	lost   chan struct{}
	left   sync.Once
	// leaveErr is the error of the ticket's delete, once left.
	leaveErr error
}

// Join takes a place at the back of the line, asking for weight.
func (l *Line) Join(ctx context.Context, weight int) (*Place, error) {
	id := uuid.NewString()
	t := Ticket{ID: id, Host: l.host, PID: l.proc.PID, PIDStart: l.proc.Start, Weight: weight, Since: l.now().UTC()}
	data, err := t.MarshalJSON()
	if err != nil {
		return nil, err
	}
	key := l.name + "." + id
	sent := time.Now()
	rev, err := l.b.Create(ctx, key, data, TTL)
	if err != nil {
		return nil, fmt.Errorf("waitline: join %s: %w", l.name, err)
	}
	t.First = rev
	kctx, cancel := context.WithCancel(context.Background())
	p := &Place{l: l, key: key, first: rev, rec: t, rev: rev, cancel: cancel, kept: make(chan struct{}), lost: make(chan struct{})}
	m := keepalive.New(TTL, 0, sent)
	go func() {
		defer close(p.kept)
		if keepalive.Run(kctx, m, p.renew, func(err error) bool { return errors.Is(err, kv.ErrConflict) }, nil) != nil {
			close(p.lost)
		}
	}()
	return p, nil
}

func (p *Place) renew(ctx context.Context) error {
	p.mu.Lock()
	rec, rev := p.rec, p.rev
	p.mu.Unlock()
	rec.Renewed = p.l.now().UTC()
	data, err := rec.MarshalJSON()
	if err != nil {
		return err
	}
	nrev, err := p.l.b.Update(ctx, p.key, data, TTL, rev)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.rev = nrev
	p.mu.Unlock()
	return nil
}

// Key is the ticket's key.
func (p *Place) Key() string { return p.key }

// Revision is the ticket's revision as last written.
func (p *Place) Revision() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rev
}

// Drop gives the place up without deleting the ticket, for a waiter whose
// ticket another deleted on its behalf: the renewals stop. Only the first
// of Drop, Leave and LeaveAfter does anything.
func (p *Place) Drop() {
	p.left.Do(func() {
		p.cancel()
		<-p.kept
	})
}

// Leave gives the place up: the renewals stop and the ticket is deleted
// (by compare-and-set on its last revision), which wakes the waiter behind.
// Only the first call does anything.
func (p *Place) Leave(ctx context.Context) {
	p.left.Do(func() {
		p.cancel()
		<-p.kept
		p.mu.Lock()
		rev := p.rev
		p.mu.Unlock()
		err := p.l.b.Delete(ctx, p.key, rev, nil)
		p.mu.Lock()
		p.leaveErr = err
		p.mu.Unlock()
	})
}

// LeaveErr is the error of the ticket's delete when the place was left
// (Leave, LeaveAfter): a kv.ErrConflict means another deleted or renewed
// it first. Nil before, after Drop, or when the delete was made.
func (p *Place) LeaveErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaveErr
}

// LeaveAfter gives the place up as Leave does, with the ticket's delete
// sent right behind the writes ws (kv.Pipeline), and returns their
// results: what the waiter took and its leaving cost one round trip, and
// the waiter behind, woken by the delete, finds ws applied (or refused).
// ws must be writes of the line's bucket, whose one stream orders them.
// The place is left whatever their results; once it is left, LeaveAfter
// only makes ws.
func (p *Place) LeaveAfter(ctx context.Context, ws []kv.Write) []kv.WriteResult {
	var res []kv.WriteResult
	p.left.Do(func() {
		p.cancel()
		<-p.kept
		p.mu.Lock()
		rev := p.rev
		p.mu.Unlock()
		all := append(slices.Clip(ws), kv.Write{Kind: kv.WriteDelete, Key: p.key, Rev: rev})
		res = p.l.b.Pipeline(ctx, all)
		p.mu.Lock()
		p.leaveErr = res[len(ws)].Err
		p.mu.Unlock()
		res = res[:len(ws)]
	})
	if res == nil {
		res = p.l.b.Pipeline(ctx, ws)
	}
	return res
}

// LeaveDetached is Leave for a deferred call, when ctx may be done: it
// keeps ctx's values but not its end, and is bounded by the client's
// timeout.
func (p *Place) LeaveDetached(ctx context.Context) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.l.b.Client().Timeout())
	defer cancel()
	p.Leave(lctx)
}

// Wait takes a place at the back of the line and waits for its turn (Join,
// then Turn), taking a new place at the back whenever its ticket is lost
// (its renewals failed until it expired). It returns the place, first in
// line, for the caller to leave once it has what it waited for or stops
// waiting; on an error it has left the line. A bucket that is missing or
// not permitted is kv.ErrBucketNotFound or kv.ErrPermission, for a caller
// that then waits without a line.
func (l *Line) Wait(ctx context.Context, weight int) (*Place, error) {
	for {
		p, err := l.Join(ctx, weight)
		if err != nil {
			return nil, err
		}
		err = p.Turn(ctx)
		if err == nil {
			return p, nil
		}
		p.LeaveDetached(ctx)
		if !errors.Is(err, ErrLostPlace) {
			return nil, err
		}
	}
}

// Turn waits until no live ticket of the line is ahead of this one, or
// ctx is done. It is ErrLostPlace if this ticket is gone.
func (p *Place) Turn(ctx context.Context) error {
	for {
		ws, err := p.l.Waiters(ctx)
		if err != nil {
			return err
		}
		var ahead *Waiter
		mine := false
		for i := range ws {
			if ws[i].Key == p.key {
				mine = true
				break
			}
			ahead = &ws[i]
		}
		switch {
		case !mine:
			return ErrLostPlace
		case ahead == nil:
			return nil
		}
		if err := p.behind(ctx, *ahead); err != nil {
			return err
		}
	}
}

// behind waits until the ticket ahead is gone, removing it at once if its
// process is dead on this host.
func (p *Place) behind(ctx context.Context, w Waiter) error {
	if p.deadHere(w) {
		_ = p.l.b.Delete(ctx, w.Key, w.Revision, nil)
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	watch, err := p.l.b.Watch(wctx, w.Key)
	if err != nil {
		return err
	}
	defer watch.Stop()
	exited := make(chan struct{})
	if w.Host == p.l.host && w.PID > 0 {
		proc := hostlocal.Process{PID: w.PID, Start: w.PIDStart}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if hostlocal.WaitExit(wctx, proc) == nil {
				close(exited)
			}
		}()
	}
	for {
		select {
		case e, ok := <-watch.Updates():
			if !ok {
				return ctx.Err()
			}
			if e != nil && !e.Live() {
				return nil
			}
			if e != nil {
				w.Revision = e.Revision
			}
		case <-exited:
			_ = p.l.b.Delete(ctx, w.Key, w.Revision, nil) // a renewal since makes this fail: then it lives
			return nil
		case <-p.lost:
			return ErrLostPlace
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// deadHere reports whether w's process is a dead process of this host.
func (p *Place) deadHere(w Waiter) bool {
	if w.Host != p.l.host || w.PID <= 0 {
		return false
	}
	proc := hostlocal.Process{PID: w.PID, Start: w.PIDStart}
	return proc.ThisBoot() && !proc.Alive()
}
