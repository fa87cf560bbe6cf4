package queue

import (
	"context"
	"sync"
	"time"

	"github.com/batonhq/baton/hostlocal"
)

// Handler does the work of a task, as http.Handler serves a request. It
// runs while its worker holds the task's key lock and a capacity token.
//
// A nil error records the task done. Any other error records the attempt
// failed: the task runs again after the queue's backoff, until it is out
// of attempts (dead). An error with an ExitCode() int method (such as
// *exec.ExitError) records that exit code.
//
// When the worker must stop the work (the lock was lost, the task timed
// out or was cancelled, the worker is draining), ctx is cancelled and
// context.Cause(ctx) says why (ErrLockLost, ErrTimeout, ErrCancelled,
// ErrDraining). Work must then return within StopWithin(ctx): past a lost
// lock, another worker may be given the task. The worker does not start
// another task in this one's place until Work has returned.
type Handler interface {
	Work(ctx context.Context, t *Task) error
}

// HandlerFunc lets an ordinary function be a Handler.
type HandlerFunc func(ctx context.Context, t *Task) error

// Work calls f(ctx, t).
func (f HandlerFunc) Work(ctx context.Context, t *Task) error { return f(ctx, t) }

// MaxResult bounds a task's result (SetResult): what is past it is cut
// off, and the result says so (Result.OutputTruncated).
const MaxResult = 64 << 10

// runCtx is what a worker hands its handler besides the context.
type runCtx struct {
	mu     sync.Mutex
	within time.Duration
	child  func(hostlocal.Process) error
	// output is the result the work set (SetResult), cut to MaxResult;
	// cut says it was longer.
	output []byte
	cut    bool
}

// SetResult records out as the result of the task the handler works on:
// written with the attempt's end (Result.Output), whatever the outcome,
// for Queues.Get, WaitTask and `queue add --wait` to hand back. At most
// MaxResult bytes are kept; a later call replaces an earlier one. Outside
// a handler it does nothing.
func SetResult(ctx context.Context, out []byte) {
	rc, _ := ctx.Value(runCtxKey{}).(*runCtx)
	if rc == nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.cut = len(out) > MaxResult
	rc.output = append([]byte(nil), out[:min(len(out), MaxResult)]...)
}

// result is what SetResult recorded.
func (rc *runCtx) result() ([]byte, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.output, rc.cut
}

// ResultFunc is a Handler that returns its task's result with its error
// (recorded as SetResult does).
type ResultFunc func(ctx context.Context, t *Task) ([]byte, error)

// Work calls f and records its result.
func (f ResultFunc) Work(ctx context.Context, t *Task) error {
	out, err := f(ctx, t)
	if out != nil {
		SetResult(ctx, out)
	}
	return err
}

type runCtxKey struct{}

func withRunCtx(ctx context.Context, rc *runCtx) context.Context {
	return context.WithValue(ctx, runCtxKey{}, rc)
}

// StopWithin is how long the work has, once its context is cancelled,
// before it must have stopped: the worker's grace, or less when the lock
// could not be renewed and the server may soon give the task to another
// worker. Outside a handler it returns 0.
func StopWithin(ctx context.Context) time.Duration {
	rc, _ := ctx.Value(runCtxKey{}).(*runCtx)
	if rc == nil {
		return 0
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.within
}

// Started tells the worker the process that does the task's work (a
// command's supervisor, leading its own process group). The worker
// records it in the key lock, so that a worker on this host can tell,
// should this one die, when the work is gone too, and take the task over
// at once. Call it before the process begins the task's work (a
// supervisor started ahead, as hostlocal.Standby is, and told what to run
// once Started returns), and start nothing if it fails: a worker that
// dies between the start and the record leaves a lock that names no
// work, and a worker of its host would free it while the work still
// runs. The error is the lock's write failing (kv.ErrConflict when the
// lock was lost). Outside a handler it does nothing and returns nil.
func Started(ctx context.Context, p hostlocal.Process) error {
	if rc, _ := ctx.Value(runCtxKey{}).(*runCtx); rc != nil && rc.child != nil {
		return rc.child(p)
	}
	return nil
}
