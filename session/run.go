package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/batonhq/baton/kv"
)

// DefaultRunTTL is the TTL of a Run's session when none is given: Run
// renews on its own every third of it, so it can be short, and a crashed
// runner's slot frees itself soon.
const DefaultRunTTL = 30 * time.Second

// DefaultGrace is how long stopped work gets between SIGTERM and SIGKILL.
const DefaultGrace = 10 * time.Second

// Child is the work a Run supervises; hostlocal.Group implements it.
type Child interface {
	// Wait blocks until the work exits and returns its exit code.
	Wait() (int, error)
	// Done is closed when the work has exited.
	Done() <-chan struct{}
	// Signal sends sig to the work and everything it started.
	Signal(sig syscall.Signal) error
	// Stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
	Stop(grace time.Duration) (int, error)
}

// RunOption configures Run.
type RunOption func(*runConfig) error

type runConfig struct {
	join    []JoinOption
	grace   time.Duration
	signals <-chan os.Signal
}

// WithJoinOptions passes options to the Join that starts the run. The TTL
// defaults to DefaultRunTTL rather than DefaultTTL.
func WithJoinOptions(opts ...JoinOption) RunOption {
	return func(c *runConfig) error { c.join = append(c.join, opts...); return nil }
}

// WithGrace sets the time between SIGTERM and SIGKILL when the work must
// stop. Default: DefaultGrace.
func WithGrace(d time.Duration) RunOption {
	return func(c *runConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: grace %s is negative", ErrInvalid, d)
		}
		c.grace = d
		return nil
	}
}

// WithSignals forwards every signal received on ch to the work (for a
// command line: Ctrl-C reaches the work, which decides how to end). Default:
// none.
func WithSignals(ch <-chan os.Signal) RunOption {
	return func(c *runConfig) error { c.signals = ch; return nil }
}

// RunResult is how a run ended.
type RunResult struct {
	// Session is the last version of the session the run held.
	Session *Session
	// ExitCode is the work's exit code (128+N if signal N killed it).
	ExitCode int
}

// Run joins slot for task, starts the work with start inside the host gate,
// renews the session every third of its TTL while the work runs, and closes
// it with the work's result ("success" for exit code 0, "fail" otherwise).
//
// The moment the session is lost (deleted, expired, taken over, or not
// renewed by a local deadline that falls before the server's), the work is
// stopped (SIGTERM, then SIGKILL after the grace) and Run returns a
// *LostError (ErrLost): the work never goes on without the session. When ctx
// is done, the work is stopped the same way, the session closed with "fail"
// and ctx's error returned. Join's errors are returned as they are.
func (m *Manager) Run(ctx context.Context, slot, task string, start func(*Session) (Child, error), opts ...RunOption) (RunResult, error) {
	cfg := runConfig{grace: DefaultGrace}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return RunResult{}, err
		}
	}
	var child Child
	joinOpts := append([]JoinOption{WithTTL(DefaultRunTTL), WithPurpose("run " + slot)}, cfg.join...)
	joinOpts = append(joinOpts, WithSpawn(func(_ context.Context, s *Session) error {
		var err error
		child, err = start(s)
		return err
	}))
	joinSent := time.Now()
	s, err := m.Join(ctx, slot, task, joinOpts...)
	if err != nil {
		return RunResult{}, err
	}

	k := &keeper{m: m, cur: s, lost: make(chan error, 2)}
	kctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); k.renew(kctx, joinSent) }()
	go func() { defer wg.Done(); k.watch(kctx) }()
	stopKeeper := func() { stop(); wg.Wait() }

	for {
		select {
		case <-child.Done():
			code, _ := child.Wait()
			stopKeeper()
			select {
			case lost := <-k.lost: // lost as the work ended: do not close another's
				return RunResult{Session: k.session(), ExitCode: code}, lost
			default:
			}
			result := "success"
			if code != 0 {
				result = "fail"
			}
			return RunResult{Session: k.session(), ExitCode: code}, m.closeAfterRun(k.session(), result)
		case lost := <-k.lost:
			stopKeeper()
			code, _ := child.Stop(cfg.grace)
			return RunResult{Session: k.session(), ExitCode: code}, lost
		case sig := <-cfg.signals:
			if ss, ok := sig.(syscall.Signal); ok {
				_ = child.Signal(ss)
			}
		case <-ctx.Done():
			code, _ := child.Stop(cfg.grace)
			stopKeeper()
			cerr := m.closeAfterRun(k.session(), "fail")
			return RunResult{Session: k.session(), ExitCode: code}, errors.Join(ctx.Err(), cerr)
		}
	}
}

// closeAfterRun closes the session with a bounded context of its own (the
// run's may be done). A session already gone is not an error.
func (m *Manager) closeAfterRun(s *Session, result string) error {
	ctx, cancel := context.WithTimeout(context.Background(), m.bucket.Client().Timeout())
	defer cancel()
	if err := m.Close(ctx, s, result); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("the work ended but closing the session failed: %w", err)
	}
	return nil
}

// keeper renews a run's session and watches it for loss.
type keeper struct {
	m    *Manager
	mu   sync.Mutex
	cur  *Session
	lost chan error // buffered: one report from each goroutine at most
}

func (k *keeper) session() *Session {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cur
}

// localDeadline is when a holder must consider its session lost if it could
// not renew it: the TTL counted from when the last successful renewal was
// sent (the server starts counting later than that), less a margin for
// clock-rate differences and for stopping the work.
func localDeadline(sent time.Time, ttl time.Duration) time.Time {
	margin := min(max(ttl/10, 100*time.Millisecond), 2*time.Second)
	return sent.Add(ttl - margin)
}

// renew commits the session every third of its TTL. Transient failures are
// retried at the next tick until the local deadline, which ends the run.
func (k *keeper) renew(ctx context.Context, lastSent time.Time) {
	s := k.session()
	every := s.TTL / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	deadline := time.NewTimer(time.Until(localDeadline(lastSent, s.TTL)))
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			k.lost <- &LostError{Slot: s.Slot, Fence: s.Fence, How: LostUnrenewed}
			return
		case <-tick.C:
		}
		sent := time.Now()
		cctx, cancel := context.WithDeadline(ctx, localDeadline(lastSent, s.TTL))
		next, err := k.m.Commit(cctx, k.session(), "")
		cancel()
		switch {
		case err == nil:
			k.mu.Lock()
			k.cur = next
			k.mu.Unlock()
			lastSent = sent
			deadline.Reset(time.Until(localDeadline(lastSent, s.TTL)))
		case errors.Is(err, ErrLost):
			k.lost <- err
			return
		}
	}
}

// watch reports the loss of the session as soon as the KV watch shows
// another version that is not the session's: a delete, an expiry, or a
// record with another fence.
func (k *keeper) watch(ctx context.Context) {
	s := k.session()
	w, err := k.m.bucket.Watch(ctx, s.Slot)
	if err != nil {
		return // the renewals still detect a loss
	}
	defer w.Stop()
	for e := range w.Updates() {
		if e == nil || e.Revision < s.Revision {
			continue
		}
		if e.Live() {
			if cur, err := decode(*e); err == nil && cur.Fence == s.Fence {
				continue
			}
		}
		lost := &LostError{Slot: s.Slot, Fence: s.Fence, How: LostTaken, At: e.Created}
		switch {
		case e.Op == kv.OpExpire:
			lost.How = LostExpired
		case !e.Live():
			lost.How = LostClosed
		default:
			lost.Now, _ = decode(*e)
		}
		k.lost <- lost
		return
	}
}
