package lease

// Acquiring a lease: the options, one try (TryAcquire) or a wait woken by
// the key's watch (Acquire), and what is decided about a live lease found
// in the way: this process's own is taken back, a dead holder's on this
// host is displaced, another's is held. The held lease is lease.go's.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/waitline"
)

// AcquireOption configures Acquire and TryAcquire.
type AcquireOption func(*acquireConfig) error

type acquireConfig struct {
	ttl       time.Duration
	meta      map[string]string
	score     int
	caps      []string
	require   []string
	child     hostlocal.Process
	keepAlive bool
	grace     time.Duration
}

// WithTTL sets the lease's TTL: a whole number of seconds, at least 1s.
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

// WithMeta records free-form key/value pairs. Default: none.
func WithMeta(meta map[string]string) AcquireOption {
	return func(c *acquireConfig) error { c.meta = maps.Clone(meta); return nil }
}

// WithScore records a score (elections prefer higher). Default: 0.
func WithScore(n int) AcquireOption {
	return func(c *acquireConfig) error { c.score = n; return nil }
}

// WithCapabilities records what the holder can do. Default: none.
func WithCapabilities(caps ...string) AcquireOption {
	return func(c *acquireConfig) error { c.caps = slices.Clone(caps); return nil }
}

// withRequire records the capabilities the holder's election requires of a
// leader (a candidacy's, so that any reader can tell whether it may lead).
func withRequire(caps ...string) AcquireOption {
	return func(c *acquireConfig) error { c.require = slices.Clone(caps); return nil }
}

// WithChild records the process the holder runs for the lease. Default:
// none (see Lease.SetChild).
func WithChild(p hostlocal.Process) AcquireOption {
	return func(c *acquireConfig) error { c.child = p; return nil }
}

// WithoutKeepAlive returns a lease that is not renewed in the background:
// for a command line that acquires and exits. Renew, Release and the TTL
// are its life. Default: renewed every third of its TTL until released.
func WithoutKeepAlive() AcquireOption {
	return func(c *acquireConfig) error { c.keepAlive = false; return nil }
}

// WithGrace is the time the holder needs to stop its work once it must
// give the lease up: renewals that keep failing end the lease that long
// (at most a quarter of the TTL) before the server could expire it.
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

func (ls *Leases) config(opts []AcquireOption) (acquireConfig, error) {
	cfg := acquireConfig{ttl: DefaultTTL, keepAlive: true}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func (ls *Leases) newRecord(key string, cfg acquireConfig) Record {
	now := ls.now().UTC()
	return Record{
		Key: key, Holder: ls.instance, Host: ls.host, PID: ls.proc.PID, PIDStart: ls.proc.Start,
		ChildPID: cfg.child.PID, ChildPIDStart: cfg.child.Start, TTL: Duration(cfg.ttl),
		AcquiredAt: now, RenewedAt: now, Score: cfg.score, Capabilities: cfg.caps, Require: cfg.require, Meta: cfg.meta,
	}
}

// TryAcquire takes the lease on key if it is free, with one try: one round
// trip on a key never used or whose tombstone expired. A lease held by
// another instance is a *HeldError (ErrHeld, or ErrUndecodable). One held
// by this process is taken back with its fence, unless this process lost it
// (its local deadline passed, so its work was told to stop): then, as for
// one left by a dead process of this instance, the lease is taken anew
// with a new fence.
func (ls *Leases) TryAcquire(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	return ls.acquireKey(ctx, key, noWait, opts)
}

// Acquire takes the lease on key, waiting while another instance holds it,
// until ctx is done. It is woken by the KV watch when the lease is released
// or expires, not by polling; a holder on this host whose process and child
// are both dead is displaced at once (a CAS delete at the revision seen).
// When ctx ends first, the error wraps both the *HeldError and ctx's error.
//
// Waiters are served in the order they began to wait: each takes a place
// in the key's line (package waitline, in the limits bucket), and only the
// first in line waits on the key. Where the server has no limits bucket,
// or the user may not use it, waiters race for the key as they did before
// lines (adr/0040). An acquire that does not wait (TryAcquire) takes a free
// key whoever waits.
func (ls *Leases) Acquire(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	return ls.acquireKey(ctx, key, waitInLine, opts)
}

// How an acquire waits for a held key.
type waitMode int

const (
	noWait     waitMode = iota
	waitRacing          // woken with every other waiter (an election's candidates: the best-scored wins)
	waitInLine          // in the key's line, first come first served
)

// acquireKey is acquire of a key already valid (leader and candidate keys
// are built from valid ones and may be longer).
func (ls *Leases) acquireKey(ctx context.Context, key string, wait waitMode, opts []AcquireOption) (*Lease, error) {
	cfg, err := ls.config(opts)
	if err != nil {
		return nil, err
	}
	rec := ls.newRecord(key, cfg)
	data, err := encode(rec)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		sent := time.Now()
		rev, err := ls.bucket.Create(ctx, key, data, cfg.ttl)
		if err == nil {
			return ls.hold(rec, rev, rev, cfg.ttl, sent, cfg), nil
		}
		var ce *kv.ConflictError
		if !errors.As(err, &ce) || ce.Current == nil || !ce.Current.Live() {
			return nil, err
		}
		l, freed, held := ls.inTheWay(ctx, *ce.Current, cfg)
		if freed && attempt < 3 {
			continue
		}
		switch {
		case l != nil || wait == noWait:
			return l, held
		case wait == waitInLine:
			return ls.awaitInLine(ctx, key, data, cfg, held)
		}
		return ls.await(ctx, key, data, cfg, held)
	}
}

// inTheWay decides about a live lease found on a wanted key: this
// process's own (taken back, same fence), unless this process lost it; one
// this process lost, or a dead process of this instance left (freed with a
// CAS delete at its revision, so the caller creates it anew with a new
// fence); else held (the error names the holder).
func (ls *Leases) inTheWay(ctx context.Context, e kv.Entry, cfg acquireConfig) (l *Lease, freed bool, err error) {
	in, derr := decode(e)
	if derr != nil {
		return nil, false, &HeldError{Key: e.Key, Revision: e.Revision, Reason: ErrUndecodable, Decode: derr}
	}
	held := &HeldError{Key: e.Key, Holder: &in.Record, Revision: in.Revision, Reason: ErrHeld}
	if in.Holder != ls.instance {
		return nil, false, held
	}
	if ls.sameProcess(in.Record) && !ls.wasLost(e.Key, in.Fence) {
		l, err := ls.adopt(ctx, in, cfg)
		if errors.Is(err, ErrLost) {
			// It expired or was taken between the read and the renewal
			// (a handover to this process that came while it was paused):
			// not this process's any more, so try again.
			return nil, true, held
		}
		return l, false, err
	}
	if in.PID == 0 || ls.deadOnThisHost(in.Record) || ls.sameProcess(in.Record) {
		// Another process with this instance id held it and is gone, or
		// this process lost it (its work was told to stop) before the
		// server expired it: this is a new holding and gets a new fence,
		// so the resource refuses what the earlier one's work still sends.
		if err := ls.bucket.Delete(ctx, e.Key, in.Revision, nil); err != nil && !errors.Is(err, kv.ErrConflict) {
			return nil, false, err
		}
		return nil, true, held
	}
	return nil, false, held
}

// markLost notes that this process's lease on key with fence was lost.
func (ls *Leases) markLost(key string, fence uint64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.lost == nil {
		ls.lost = map[string]uint64{}
	}
	ls.lost[key] = fence
}

// wasLost reports whether this process lost its lease on key with fence:
// such a record, still on the server, is not taken back as it is.
func (ls *Leases) wasLost(key string, fence uint64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.lost[key] == fence
}

// sameProcess reports whether r was written by (or for, in a handover)
// this very process.
func (ls *Leases) sameProcess(r Record) bool {
	return r.Host == ls.host && r.PID == ls.proc.PID && r.PIDStart == ls.proc.Start
}

// adopt takes this process's own live lease: a renewal with this call's
// TTL starts its schedule here (a handover names this process holder with
// the TTL of the one that handed over).
func (ls *Leases) adopt(ctx context.Context, in *Info, cfg acquireConfig) (*Lease, error) {
	l := ls.handle(in.Record, in.Revision, in.Fence, cfg.ttl, time.Now(), cfg)
	if err := l.Renew(ctx); err != nil {
		return nil, err
	}
	l.start(cfg)
	return l, nil
}

// samehostPoll is how often a waiter checks the child's process group of a
// holder on its own host whose process has exited (baton lead's
// supervisor may outlive it by a moment).
const samehostPoll = 50 * time.Millisecond

// await waits for the key, woken by its watch, and takes it. A holder that
// is a process of this host is waited on (hostlocal.WaitExit: no polling
// where the kernel has pidfds), so that its death frees the key at once.
func (ls *Leases) await(ctx context.Context, key string, data []byte, cfg acquireConfig, held error) (*Lease, error) {
	w, err := ls.bucket.Watch(ctx, key)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	exits := newHolderWait(ctx, ls)
	defer exits.stop()
	var pollC <-chan time.Time // while a dead holder's child group runs
	var cur *Info              // the live holder last seen
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.Join(held, ctx.Err())
			}
			if e == nil {
				continue
			}
			if !e.Live() {
				cur = nil
				exits.watch(nil)
				sent := time.Now()
				rev, err := ls.bucket.CreateAfter(ctx, key, data, cfg.ttl, e.Revision)
				if err == nil {
					return ls.hold(ls.recordOf(data), rev, rev, cfg.ttl, sent, cfg), nil
				}
				if !errors.Is(err, kv.ErrConflict) {
					return nil, err
				}
				continue // another waiter won: its write is the next update
			}
			l, freed, err := ls.inTheWay(ctx, *e, cfg)
			if l != nil || !errors.Is(err, ErrHeld) && !errors.Is(err, ErrUndecodable) {
				return l, err
			}
			held = err
			if freed {
				cur = nil // its tombstone is the next update
				exits.watch(nil)
				continue
			}
			cur, _ = decode(*e)
			exits.watch(cur)
		case <-exits.c:
			pollC = nil
			if cur != nil && ls.reapIfDead(ctx, key, cur) {
				cur = nil
			} else if cur != nil && cur.ChildPID > 0 {
				t := time.NewTicker(samehostPoll) // the child's group runs on
				defer t.Stop()
				pollC = t.C
			}
		case <-pollC:
			if cur == nil || ls.reapIfDead(ctx, key, cur) {
				cur, pollC = nil, nil
			}
		case <-ctx.Done():
			return nil, errors.Join(held, ctx.Err())
		}
	}
}

// awaitInLine takes a place in the key's line and, once first, waits for
// the key (await); the place is given up once it has the key or stops
// waiting. Without the limits bucket (an older server, or a user not
// allowed it) it waits as await alone does.
func (ls *Leases) awaitInLine(ctx context.Context, key string, data []byte, cfg acquireConfig, held error) (*Lease, error) {
	line := waitline.New(ls.bucket.Client().Bucket(limits.BucketConfig(ls.prefix, 0)), "wait.lease."+key, ls.host, ls.proc)
	place, err := line.Wait(ctx, 1)
	switch {
	case errors.Is(err, kv.ErrBucketNotFound) || errors.Is(err, kv.ErrPermission):
		return ls.await(ctx, key, data, cfg, held)
	case err != nil:
		return nil, errors.Join(held, err)
	}
	defer place.LeaveDetached(ctx)
	return ls.await(ctx, key, data, cfg, held)
}

// reapIfDead frees key if its holder in is a process of this host that is
// gone, at the revision seen (a renewal since makes this fail, and then
// it lives).
func (ls *Leases) reapIfDead(ctx context.Context, key string, in *Info) bool {
	if !ls.deadOnThisHost(in.Record) {
		return false
	}
	_ = ls.bucket.Delete(ctx, key, in.Revision, nil)
	return true
}

// holderWait waits, in a goroutine of its own, for the process of the
// holder last given to watch (if of this host) to exit, and then sends on
// c. A holder's renewal (the same process) keeps the wait going.
type holderWait struct {
	ctx    context.Context
	ls     *Leases
	c      chan struct{}
	p      hostlocal.Process
	cancel context.CancelFunc
	done   chan struct{}
}

func newHolderWait(ctx context.Context, ls *Leases) *holderWait {
	return &holderWait{ctx: ctx, ls: ls, c: make(chan struct{}, 1)}
}

func (h *holderWait) watch(in *Info) {
	var p hostlocal.Process
	if in != nil && in.Host == h.ls.host && in.PID > 0 {
		p = hostlocal.Process{PID: in.PID, Start: in.PIDStart}
		if !p.ThisBoot() {
			p = hostlocal.Process{}
		}
	}
	if p == h.p && (p.PID == 0 || h.cancel != nil) {
		return
	}
	h.stop()
	h.p = p
	if p.PID == 0 {
		return
	}
	ctx, cancel := context.WithCancel(h.ctx)
	h.cancel, h.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		if hostlocal.WaitExit(ctx, p) == nil {
			select {
			case h.c <- struct{}{}:
			default:
			}
		}
	}(h.done)
}

// stop ends the wait and waits for its goroutine.
func (h *holderWait) stop() {
	if h.cancel != nil {
		h.cancel()
		<-h.done
		h.cancel, h.done = nil, nil
	}
	h.p = hostlocal.Process{}
	select {
	case <-h.c:
	default:
	}
}

// recordOf decodes what acquire encoded (it cannot fail).
func (ls *Leases) recordOf(data []byte) Record {
	var r Record
	_ = r.UnmarshalJSON(data)
	return r
}

// deadOnThisHost reports whether r's holder runs on this host and both its
// process and its child's whole process group are dead. Processes whose start tokens were not
// taken on this machine since its boot are never judged (a host id shared
// by mistake with another machine must not let this one displace it).
func (ls *Leases) deadOnThisHost(r Record) bool {
	if r.Host != ls.host || r.PID <= 0 {
		return false
	}
	p := hostlocal.Process{PID: r.PID, Start: r.PIDStart}
	if !p.ThisBoot() || p.Alive() {
		return false
	}
	if r.ChildPID > 0 {
		// The child leads a process group (baton lead's supervisor): the
		// group must be gone, not only its leader.
		c := hostlocal.Process{PID: r.ChildPID, Start: r.ChildPIDStart}
		if !c.ThisBoot() || c.Alive() || hostlocal.GroupRunning(r.ChildPID) {
			return false
		}
	}
	return true
}
