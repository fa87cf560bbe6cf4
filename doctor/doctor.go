package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

// Kinds of finding.
const (
	KindBucketMissing = "bucket_missing"
	KindBucketConfig  = "bucket_config"
	KindStale         = "stale"
	KindDeadHolder    = "dead_holder"
	KindUndecodable   = "undecodable"
	KindOrphanGate    = "orphan_gate"
	KindOrphanPIDFile = "orphan_pidfile"
	KindClockSkew     = "clock_skew"
	KindUnusableGate  = "unusable_gate"
	// Leases.
	KindExpiredVisible         = "expired_visible"
	KindLeaderWithoutCandidate = "leader_without_candidate"
)

// Finding is one problem, with what to do about it.
type Finding struct {
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	Detail string `json:"detail"`
	Action string `json:"action"`
	Fixed  bool   `json:"fixed"`
	// FixError says why a fix was not applied, when it was tried.
	FixError string `json:"fix_error,omitempty"`

	fix func(context.Context) error
}

// Fixable reports whether Fix would try to fix f.
func (f Finding) Fixable() bool { return f.fix != nil }

// Report is the outcome of a check.
type Report struct {
	OK       bool      `json:"ok"`
	Findings []Finding `json:"findings"`
}

// Remaining counts the findings not fixed.
func (r *Report) Remaining() int {
	n := 0
	for _, f := range r.Findings {
		if !f.Fixed {
			n++
		}
	}
	return n
}

// DefaultMaxSkew is the clock skew between this host and the server that
// doctor reports.
const DefaultMaxSkew = time.Second

// Checker checks one prefix's sessions from one host.
type Checker struct {
	m          *session.Manager
	ls         *lease.Leases
	qs         *queue.Queues
	ss         *sem.Semaphores
	rl         *rate.Limiters
	rs         *reserve.Spaces
	now        func() time.Time
	staleAfter time.Duration
	maxSkew    time.Duration
	replicas   int
	list       func(context.Context) (*session.Listing, error)
}

// Option configures a Checker.
type Option func(*Checker)

// WithStaleAfter reports sessions not renewed for d as stale. Default: 0,
// half of each session's TTL.
func WithStaleAfter(d time.Duration) Option { return func(c *Checker) { c.staleAfter = d } }

// WithClock sets this host's clock, whose skew from the server's is
// measured. Default: time.Now.
func WithClock(now func() time.Time) Option { return func(c *Checker) { c.now = now } }

// WithMaxSkew sets the skew reported as a problem. Default: DefaultMaxSkew.
func WithMaxSkew(d time.Duration) Option { return func(c *Checker) { c.maxSkew = d } }

// WithReplicas checks that buckets have n replicas and creates missing ones
// with n. Default: 0: replicas are not checked, fixes keep a bucket's count
// and missing buckets are created with 1.
func WithReplicas(n int) Option { return func(c *Checker) { c.replicas = n } }

// WithLeases checks the leases, leaders and candidacies of ls too.
// Default: sessions only.
func WithLeases(ls *lease.Leases) Option { return func(c *Checker) { c.ls = ls } }

// WithQueues checks the queues of qs too: the bucket, tasks whose worker
// died, stale key locks (which the session checks then leave to it), tasks
// past their timeout, dead tasks and orphaned capacity tokens. Default:
// sessions only.
func WithQueues(qs *queue.Queues) Option { return func(c *Checker) { c.qs = qs } }

// WithListing takes the sessions to check from list instead of a listing
// of the bucket: a process that keeps every session from a watch (the
// dashboard) passes its own, and the check reads no record twice. list
// must return sessions as they are in the bucket (their revisions are
// those the fixes compare against), sorted by slot, and the server's time.
// Default: Manager.List.
func WithListing(list func(context.Context) (*session.Listing, error)) Option {
	return func(c *Checker) { c.list = list }
}

// New returns a checker of m's sessions.
func New(m *session.Manager, opts ...Option) *Checker {
	c := &Checker{m: m, now: time.Now, maxSkew: DefaultMaxSkew, list: m.List}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Run checks everything and returns the findings. It returns an error only
// when the server cannot be asked (kv.ErrUnavailable, kv.ErrPermission,
// kv.ErrJetStreamDisabled); a missing bucket is a finding.
func (c *Checker) Run(ctx context.Context) (*Report, error) {
	r := &Report{}
	present, err := c.checkBucket(ctx, r)
	if err != nil {
		return nil, err
	}
	var listing *session.Listing
	if present {
		if listing, err = c.list(ctx); err != nil {
			return nil, err
		}
		queues, err := c.queueLocks(ctx)
		if err != nil {
			return nil, err
		}
		c.checkSessions(r, listing, queues)
		if err := c.checkSkew(ctx, r); err != nil {
			return nil, err
		}
	}
	if err := c.checkGates(r); err != nil {
		return nil, err
	}
	if err := c.checkPIDFiles(r, listing); err != nil {
		return nil, err
	}
	if c.ls != nil {
		if err := c.checkLeases(ctx, r); err != nil {
			return nil, err
		}
	}
	if c.qs != nil {
		if err := c.checkQueues(ctx, r, listing); err != nil {
			return nil, err
		}
	}
	if c.ss != nil {
		if err := c.checkSems(ctx, r); err != nil {
			return nil, err
		}
	}
	if c.rl != nil {
		if err := c.checkLimiters(ctx, r); err != nil && !errors.Is(err, kv.ErrBucketNotFound) {
			return nil, err
		}
	}
	if c.rs != nil {
		if err := c.checkReservations(ctx, r); err != nil {
			return nil, err
		}
	}
	r.OK = len(r.Findings) == 0
	return r, nil
}

// Fix applies the fix of every fixable finding and marks it fixed. A fix
// that loses its compare-and-set leaves the finding unfixed with the reason.
func (c *Checker) Fix(ctx context.Context, r *Report) {
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.fix == nil || f.Fixed {
			continue
		}
		if err := f.fix(ctx); err != nil {
			if errors.Is(err, kv.ErrConflict) {
				f.FixError = "changed since the check (renewed or replaced); left alone"
			} else {
				f.FixError = err.Error()
			}
			continue
		}
		f.Fixed = true
	}
	r.OK = r.Remaining() == 0
}

func (c *Checker) add(r *Report, f Finding) { r.Findings = append(r.Findings, f) }

func (c *Checker) checkBucket(ctx context.Context, r *Report) (bool, error) {
	return c.checkBucketConfig(ctx, r, session.BucketConfig(c.m.Prefix(), c.replicas))
}

func (c *Checker) checkBucketConfig(ctx context.Context, r *Report, want kv.BucketConfig) (bool, error) {
	client := c.m.Bucket().Client()
	err := client.Check(ctx, want)
	var me *kv.MismatchError
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, kv.ErrBucketNotFound):
		c.add(r, Finding{
			Kind: KindBucketMissing, Key: want.Name,
			Detail: fmt.Sprintf("bucket %s does not exist on %s", want.Name, client.URL()),
			Action: "start a server with `baton up`, or create the buckets on this server with `baton doctor --fix`",
			fix: func(ctx context.Context) error {
				_, err := client.Ensure(ctx, want)
				return err
			},
		})
		return false, nil
	case errors.As(err, &me):
		c.add(r, Finding{
			Kind: KindBucketConfig, Key: want.Name,
			Detail: me.Error(),
			Action: "`baton doctor --fix` applies baton's settings to the bucket",
			fix:    func(ctx context.Context) error { return client.Apply(ctx, want) },
		})
		return true, nil
	default:
		return false, err
	}
}

// checkSessions judges every session but the key locks of the queues
// (which checkQueues judges with their tasks).
func (c *Checker) checkSessions(r *Report, l *session.Listing, queues map[string]bool) {
	for _, u := range l.Undecodable {
		u := u
		// A record without a TTL never expires: judge it by the default
		// session TTL.
		ttl := u.TTL
		if ttl == 0 {
			ttl = session.DefaultTTL
		}
		t := session.TimingAt(u.Written, ttl, l.ServerTime, c.staleAfter)
		f := Finding{
			Kind: KindUndecodable, Key: u.Slot,
			Detail: fmt.Sprintf("slot %s holds a record that does not decode (revision %d, written %s ago): %v; nobody can take the slot",
				u.Slot, u.Revision, t.Age.Round(time.Millisecond), u.Err),
			Action: "inspect it (`nats kv get " + c.m.Bucket().Name() + " " + u.Slot + "`); `baton doctor --fix` removes it once it is stale, unless it is rewritten meanwhile",
		}
		if t.State != session.StateLive {
			f.fix = func(ctx context.Context) error { return c.m.Reap(ctx, u.Slot, u.Revision, nil) }
		}
		c.add(r, f)
	}
	for _, s := range l.Sessions {
		s := s
		if q := s.Meta["queue"]; q != "" && queues[q] {
			continue
		}
		t := s.Timing(l.ServerTime, c.staleAfter)
		stale := t.State != session.StateLive
		reap := func(ctx context.Context) error { return c.m.Reap(ctx, s.Slot, s.Revision, &s.Record) }
		if s.Host == c.m.Host() && !(hostlocal.Process{PID: s.PID, Start: s.PIDStart}).Alive() {
			f := Finding{
				Kind: KindDeadHolder, Key: s.Slot,
				Detail: fmt.Sprintf("slot %s is held by pid %d on this host, which is not running (task %s, fence %d, renewed %s ago)",
					s.Slot, s.PID, s.TaskID, s.Fence, t.Age.Round(time.Millisecond)),
				Action: fmt.Sprintf("if its work is over, `baton close %s`; `baton doctor --fix` removes it once it is stale", s.Slot),
			}
			if stale {
				f.fix = reap
			}
			c.add(r, f)
			continue
		}
		if stale {
			c.add(r, Finding{
				Kind: KindStale, Key: s.Slot,
				Detail: fmt.Sprintf("slot %s (host %s, pid %d, task %s, fence %d) not renewed for %s; it expires in %s",
					s.Slot, s.Host, s.PID, s.TaskID, s.Fence, t.Age.Round(time.Millisecond), max(t.Left, 0).Round(time.Millisecond)),
				Action: "its holder should `baton commit " + s.Slot + "`; `baton doctor --fix` removes it unless it is renewed meanwhile",
				fix:    reap,
			})
		}
	}
}

func (c *Checker) checkSkew(ctx context.Context, r *Report) error {
	t0 := c.now()
	server, err := c.m.ServerTime(ctx)
	if err != nil {
		return err
	}
	t1 := c.now()
	rtt := t1.Sub(t0)
	skew := t0.Add(rtt / 2).Sub(server) // > 0: this host is ahead
	if abs(skew) <= c.maxSkew+rtt/2 {
		return nil
	}
	dir := "ahead of"
	if skew < 0 {
		dir = "behind"
	}
	c.add(r, Finding{
		Kind: KindClockSkew, Key: c.m.Host(),
		Detail: fmt.Sprintf("this host's clock is %s %s the server's (measured with a %s round trip); baton decides by the server's clock, but times this host writes are off",
			abs(skew).Round(time.Millisecond), dir, rtt.Round(time.Microsecond)),
		Action: "synchronise the clock (chrony, systemd-timesyncd or ntpd)",
	})
	return nil
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func (c *Checker) checkGates(r *Report) error {
	locks, err := c.m.StateDir().Locks()
	if err != nil {
		return err
	}
	for _, l := range locks {
		if l.Unusable != nil {
			c.add(r, Finding{
				Kind: KindUnusableGate, Key: l.Name,
				Detail: fmt.Sprintf("%v; joins through this gate fail until it is gone", l.Unusable),
				Action: "find out who put it there, then remove it by hand (--fix never removes what baton did not make)",
			})
			continue
		}
		if !l.Orphaned {
			continue
		}
		l := l
		who := "a process that is gone"
		if h := l.Holder; h != nil {
			who = fmt.Sprintf("pid %d", h.PID)
			if h.Purpose != "" {
				who += " (" + h.Purpose + ")"
			}
			if !h.Since.IsZero() {
				who += " since " + h.Since.UTC().Format(time.RFC3339)
			}
		}
		c.add(r, Finding{
			Kind: KindOrphanGate, Key: l.Name,
			Detail: fmt.Sprintf("gate file %s was left by %s, which died holding it; it blocks nobody", l.Path, who),
			Action: "`baton doctor --fix` clears it",
			fix: func(context.Context) error {
				_, err := c.m.StateDir().ClearOrphan(l.Name)
				return err
			},
		})
	}
	return nil
}

func (c *Checker) checkPIDFiles(r *Report, l *session.Listing) error {
	files, err := c.m.PIDFiles()
	if err != nil {
		return err
	}
	live := map[string]*session.Session{}
	if l != nil {
		for _, s := range l.Sessions {
			live[s.Slot] = s
		}
	}
	for _, t := range files {
		s := live[t.Slot]
		if l == nil || (!t.Unreadable && s != nil && s.Fence == t.Fence) {
			continue
		}
		t := t
		why := "its session is gone"
		switch {
		case t.Unreadable:
			why = "it does not decode"
		case s != nil:
			why = fmt.Sprintf("the slot now holds another session (fence %d)", s.Fence)
		}
		c.add(r, Finding{
			Kind: KindOrphanPIDFile, Key: t.Slot,
			Detail: fmt.Sprintf("pid file %s (fence %d, pid %d) outlived its session: %s", t.Name, t.Fence, t.PID, why),
			Action: "`baton doctor --fix` removes it",
			fix:    func(ctx context.Context) error { return c.m.RemoveOrphanPIDFile(ctx, t) },
		})
	}
	return nil
}
