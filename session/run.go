package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/batonhq/baton/internal/keepalive"
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
// When the work's first process exits, whatever it left running in its
// process group is stopped too (SIGTERM, then SIGKILL after the grace)
// before the session is closed.
//
// The moment the session is lost (deleted, expired or taken over), the work
// is stopped (SIGTERM, then SIGKILL after the grace) and Run returns a
// *LostError (ErrLost): the work never goes on without the session. If
// renewals keep failing (the server is unreachable), the session is given
// up at a local deadline early enough that the work, given at most a
// quarter of the TTL between SIGTERM and SIGKILL, is dead before the server
// could expire the session; Run then tries to close it. When ctx is done,
// the work is stopped, the session closed with its result and ctx's error
// returned. Join's errors are returned as they are.
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

	k := &keeper{m: m, cur: s, lost: make(chan error, 2), sched: keepalive.New(s.TTL, cfg.grace, joinSent)}
	kctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); k.renew(kctx) }()
	go func() { defer wg.Done(); k.watch(kctx) }()
	stopKeeper := func() { stop(); wg.Wait() }
	result := func(code int) string {
		if code == 0 {
			return ResultSuccess
		}
		return ResultFail
	}

	for {
		select {
		case <-child.Done():
			code, _ := child.Wait()
			// The command is done: so is whatever it left running in its
			// group, before the slot is given up.
			_, _ = child.Stop(cfg.grace)
			stopKeeper()
			select {
			case lost := <-k.lost: // lost as the work ended: do not close another's
				return RunResult{Session: k.session(), ExitCode: code}, lost
			default:
			}
			return RunResult{Session: k.session(), ExitCode: code}, m.closeAfterRun(k.session(), result(code))
		case lost := <-k.lost:
			// The work stops first: nothing the keeper's goroutines still
			// wait on (a watch's clean-up on a dead link) may delay it.
			stop()
			var le *LostError
			if errors.As(lost, &le) && le.How == LostUnrenewed {
				// The server may still hold the session, and may expire it
				// any moment: stop within the budget kept for that, then
				// free the slot if the server can be reached again.
				code, _ := child.Stop(k.sched.StopBudget())
				wg.Wait()
				_ = m.closeWithin(k.session(), ResultFail, min(m.bucket.Client().Timeout(), time.Second))
				return RunResult{Session: k.session(), ExitCode: code}, lost
			}
			code, _ := child.Stop(cfg.grace)
			wg.Wait()
			return RunResult{Session: k.session(), ExitCode: code}, lost
		case sig := <-cfg.signals:
			if ss, ok := sig.(syscall.Signal); ok {
				_ = child.Signal(ss)
			}
		case <-ctx.Done():
			code, _ := child.Stop(cfg.grace)
			stopKeeper()
			cerr := m.closeAfterRun(k.session(), result(code))
			return RunResult{Session: k.session(), ExitCode: code}, errors.Join(ctx.Err(), cerr)
		}
	}
}

// closeAfterRun closes the session with a bounded context of its own (the
// run's may be done). A session already gone is not an error.
func (m *Manager) closeAfterRun(s *Session, result string) error {
	return m.closeWithin(s, result, m.bucket.Client().Timeout())
}

func (m *Manager) closeWithin(s *Session, result string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := m.Close(ctx, s, result); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("the work ended but closing the session failed: %w", err)
	}
	return nil
}

// keeper renews a run's session and watches it for loss.
type keeper struct {
	m     *Manager
	mu    sync.Mutex
	cur   *Session
	lost  chan error // buffered: one report from each goroutine at most
	sched *keepalive.Machine
}

func (k *keeper) session() *Session {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cur
}

// advance makes next the current version, unless a newer one is already
// (a commit of the holder's own, concurrent with a renewal).
func (k *keeper) advance(next *Session) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if next.Revision > k.cur.Revision {
		k.cur = next
	}
}

// renew commits the session on the keepalive schedule (every third of its
// TTL, sooner after a failure). If no renewal succeeds by the local
// deadline, the session is reported lost (LostUnrenewed) early enough for the
// work to be stopped before the server could give the slot to another.
func (k *keeper) renew(ctx context.Context) {
	s := k.session()
	var observe func(time.Duration, error)
	if k.m.renewed != nil {
		observe = func(took time.Duration, err error) { k.m.renewed(s.Slot, took, err) }
	}
	err := keepalive.Run(ctx, k.sched, func(ctx context.Context) error {
		next, err := k.m.Commit(ctx, k.session(), "")
		if err == nil {
			k.advance(next)
			k.m.rewritePIDFile(next) // a `baton commit` of the slot then writes without a read
		}
		return err
	}, func(err error) bool { return errors.Is(err, ErrLost) }, observe)
	switch {
	case errors.Is(err, keepalive.ErrDeadline):
		k.lost <- &LostError{Slot: s.Slot, Fence: s.Fence, How: LostUnrenewed}
	case err != nil:
		k.lost <- err
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
		if lost := lossOf(e, s); lost != nil {
			k.lost <- lost
			return
		}
	}
}

// lossOf says whether entry e, a version of s's slot, is the loss of s: a
// delete, an expiry, or a record with another fence at or after s's
// revision. It returns nil for s's own versions and older ones.
func lossOf(e *kv.Entry, s *Session) *LostError {
	if e == nil || e.Revision < s.Revision {
		return nil
	}
	if e.Live() {
		if cur, err := Decode(*e); err == nil && cur.Fence == s.Fence {
			return nil
		}
	}
	lost := &LostError{Slot: s.Slot, Fence: s.Fence, How: LostTaken, At: e.Created}
	switch {
	case e.Op == kv.OpExpire:
		lost.How = LostExpired
	case !e.Live():
		lost.How = LostClosed
		if note, err := Decode(*e); err == nil && note.Result == ResultReplaced {
			lost.How = LostTaken // a forced join deleted it to take the slot
		}
	default:
		lost.Now, _ = Decode(*e)
	}
	return lost
}
