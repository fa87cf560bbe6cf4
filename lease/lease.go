package lease

// The held lease: its keepalive and the watch that tells it at once that it
// was lost, its renewals and rewrites by compare-and-set, and how it ends
// (Release, Orphan, a handover). Acquiring one is acquire.go's.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/keepalive"
	"github.com/batonhq/baton/kv"
)

// Lease is a held lease. Its methods are safe for concurrent use.
type Lease struct {
	ls    *Leases
	key   string
	fence uint64
	ttl   time.Duration

	mu  sync.Mutex // guards rec, rev, err; held across writes
	rec Record
	rev uint64
	err error

	done    chan struct{}
	stop    context.CancelFunc
	bg      sync.WaitGroup
	sched   *keepalive.Machine
	changes chan Record // this lease's record rewritten by others (a transfer request)
}

func (ls *Leases) handle(rec Record, rev, fence uint64, ttl time.Duration, sent time.Time, cfg acquireConfig) *Lease {
	rec.Fence = fence
	rec.TTL = Duration(ttl)
	return &Lease{
		ls: ls, key: rec.Key, fence: fence, ttl: ttl, rec: rec, rev: rev,
		done: make(chan struct{}), stop: func() {}, changes: make(chan Record, 1),
		sched: keepalive.New(ttl, cfg.grace, sent),
	}
}

// hold returns the lease just written at rev, renewing it unless told not to.
func (ls *Leases) hold(rec Record, rev, fence uint64, ttl time.Duration, sent time.Time, cfg acquireConfig) *Lease {
	l := ls.handle(rec, rev, fence, ttl, sent, cfg)
	l.start(cfg)
	return l
}

// start runs the keepalive and the watch that detects a loss at once.
func (l *Lease) start(cfg acquireConfig) {
	if !cfg.keepAlive {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	l.bg.Add(2)
	go func() {
		defer l.bg.Done()
		var observe func(time.Duration, error)
		if fn := l.ls.renewed; fn != nil {
			observe = func(took time.Duration, err error) { fn(l.key, took, err) }
		}
		err := keepalive.Run(ctx, l.sched, l.Renew, func(err error) bool { return errors.Is(err, ErrLost) }, observe)
		switch {
		case errors.Is(err, keepalive.ErrDeadline):
			l.end(&LostError{Key: l.key, Fence: l.fence, How: LostUnrenewed})
		case err != nil:
			l.end(err)
		}
	}()
	go func() {
		defer l.bg.Done()
		l.watch(ctx)
	}()
}

// watch ends the lease as soon as the KV shows it gone or held by another,
// and passes on rewrites of its record by others (transfer requests).
func (l *Lease) watch(ctx context.Context) {
	w, err := l.ls.bucket.Watch(ctx, l.key)
	if err != nil {
		return // renewals still find out
	}
	defer w.Stop()
	for e := range w.Updates() {
		if e == nil || e.Revision <= l.Revision() {
			continue
		}
		if e.Live() {
			if in, err := decode(*e); err == nil && in.Holder == l.ls.instance && in.Fence == l.fence {
				l.notify(in.Record)
				continue
			}
		}
		l.end(lostBy(l.key, l.fence, *e))
		return
	}
}

// lostBy says how the entry e ended the lease with fence.
func lostBy(key string, fence uint64, e kv.Entry) *LostError {
	lost := &LostError{Key: key, Fence: fence, How: LostTaken}
	switch {
	case e.Op == kv.OpExpire:
		lost.How = LostExpired
	case !e.Live():
		lost.How = LostReleased
	default:
		if in, err := decode(e); err == nil {
			lost.Now = &in.Record
			if in.Fence == fence {
				lost.How = LostHandedOver
			}
		}
	}
	return lost
}

// end records why the lease ended and closes Done, once.
func (l *Lease) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked(err)
}

func (l *Lease) endLocked(err error) {
	if l.err != nil {
		return
	}
	if errors.Is(err, ErrLost) {
		l.ls.markLost(l.key, l.fence)
	}
	l.err = err
	close(l.done)
	l.stop()
}

// stopBackground ends the keepalive and watch and waits for them.
func (l *Lease) stopBackground() {
	l.stop()
	l.bg.Wait()
}

// Key is the leased key.
func (l *Lease) Key() string { return l.key }

// Fence is the revision at which this holder got the lease: stable while
// it is held, strictly larger for every later holder.
func (l *Lease) Fence() uint64 { return l.fence }

// TTL is the lease's time to live.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Done is closed when the lease ends: lost, released, handed over or
// orphaned. Err then says which. Holding a lease whose Done is open is not
// proof of holding it: see the package doc.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err is nil while the lease is held, ErrReleased after Release, HandOver
// or Orphan, and a *LostError (ErrLost) once it was lost.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Record is the lease's record as last written or read.
func (l *Lease) Record() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.clone()
}

// Revision is the KV revision of the record as last written or read.
func (l *Lease) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// Changes delivers this lease's record when another writer (a transfer
// request) rewrites it while it is held; the newest when several come.
func (l *Lease) Changes() <-chan Record { return l.changes }

// Renew is one renewal: a CAS update that restarts the TTL. A lease that
// expired, was released by another or taken is a *LostError and the lease
// ends; a lease already ended returns its Err.
func (l *Lease) Renew(ctx context.Context) error {
	now := l.ls.now().UTC()
	return l.modify(ctx, func(r *Record) {
		r.Renewals++
		r.RenewedAt = now
	})
}

// SetChild records the process the holder runs for the lease, so that a
// follower on this host can tell when both are dead.
func (l *Lease) SetChild(ctx context.Context, child hostlocal.Process) error {
	return l.modify(ctx, func(r *Record) { r.ChildPID, r.ChildPIDStart = child.PID, child.Start })
}

// modify rewrites the record with fn applied, by CAS on the revision held.
// If another writer changed the record but it is still this lease (same
// holder and fence), fn is applied to that version and the write retried.
func (l *Lease) modify(ctx context.Context, fn func(*Record)) error {
	return l.modifyTTL(ctx, l.ttl, fn)
}

// modifyTTL is modify writing the key's TTL as ttl.
func (l *Lease) modifyTTL(ctx context.Context, ttl time.Duration, fn func(*Record)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	for attempt := 1; ; attempt++ {
		next := l.rec.clone()
		next.Fence = l.fence
		fn(&next)
		data, err := encode(next)
		if err != nil {
			return err
		}
		rev, err := l.ls.bucket.Update(ctx, l.key, data, ttl, l.rev)
		if err == nil {
			l.rec, l.rev = next, rev
			return nil
		}
		var ce *kv.ConflictError
		if !errors.As(err, &ce) {
			return err
		}
		if ce.Current == nil || !ce.Current.Live() {
			lost := &LostError{Key: l.key, Fence: l.fence, How: LostGone}
			if ce.Current != nil {
				lost = lostBy(l.key, l.fence, *ce.Current)
			}
			l.endLocked(lost)
			return lost
		}
		in, derr := decode(*ce.Current)
		if derr != nil || in.Holder != l.ls.instance || in.Fence != l.fence {
			lost := lostBy(l.key, l.fence, *ce.Current)
			l.endLocked(lost)
			return lost
		}
		if attempt == 4 {
			return fmt.Errorf("lease %s: the record kept changing: %w", l.key, kv.ErrConflict)
		}
		if in.TransferTo != "" && in.TransferTo != l.rec.TransferTo {
			l.notify(in.Record) // a transfer request this write ran into
		}
		l.rec, l.rev = in.Record, in.Revision
	}
}

// notify passes a rewrite of this lease's record by another writer on to
// Changes, replacing one not yet taken.
func (l *Lease) notify(r Record) {
	select {
	case <-l.changes:
	default:
	}
	select {
	case l.changes <- r:
	default:
	}
}

// Release ends the lease: the keepalive stops and the record is deleted by
// CAS, so a successor's record is never touched. The tombstone names the
// holder and fence it ends. It is idempotent: calls
// after the first, and calls after the lease was lost, return nil.
func (l *Lease) Release(ctx context.Context) error {
	l.stopBackground()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil
	}
	// The tombstone names the holder it ends, small: a watcher that never
	// saw this term still learns of it.
	note, err := releaseNote{Key: l.key, Holder: l.rec.Holder, Fence: l.fence, Released: l.ls.now().UTC()}.encode()
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := l.ls.bucket.Delete(ctx, l.key, l.rev, note)
		if err == nil {
			l.endLocked(ErrReleased)
			return nil
		}
		var ce *kv.ConflictError
		if !errors.As(err, &ce) {
			return err
		}
		in, derr := (*Info)(nil), error(nil)
		if ce.Current != nil && ce.Current.Live() {
			in, derr = decode(*ce.Current)
		}
		if in == nil || derr != nil || in.Holder != l.ls.instance || in.Fence != l.fence || attempt == 4 {
			l.endLocked(ErrReleased) // not ours any more: nothing to release
			return nil
		}
		l.rec, l.rev = in.Record, in.Revision
	}
}

// Orphan stops renewing the lease and leaves its record: it ends when its
// TTL runs out, unless renewed (Renew, or `baton lease renew`) meanwhile.
// Done closes and Err is ErrReleased. Idempotent.
func (l *Lease) Orphan() {
	l.stopBackground()
	l.end(ErrReleased)
}

// handOver gives the lease to another instance by a CAS update that names
// it holder, in the same write that ends this holder's term, so there is
// no moment without a holder. The key is written with the new holder's
// TTL. The new holder's fence is the revision of that write, returned.
func (l *Lease) handOver(ctx context.Context, to Record) (uint64, error) {
	l.stopBackground()
	acquired := l.ls.now().UTC()
	ttl := time.Duration(to.TTL)
	if ttl < time.Second {
		ttl = l.ttl
	}
	err := l.modifyTTL(ctx, ttl, func(r *Record) {
		prev, fence, chosen := r.Holder, r.Fence, r.TransferTo == to.Holder
		*r = to.clone()
		r.Key, r.Fence, r.TransferTo, r.TTL = l.key, 0, "", Duration(ttl)
		r.PrevHolder, r.PrevFence, r.Chosen = prev, fence, chosen
		r.AcquiredAt, r.RenewedAt, r.Renewals = acquired, acquired, 0
	})
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked(ErrReleased)
	return l.rev, nil
}
