package kv

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// A server refuses a publish or a subscription it does not permit with an
// asynchronous error, and a request on a refused subject otherwise waits
// for an answer that never comes. refusals routes each refusal to the calls
// waiting on it, so they fail at once with ErrPermission instead of timing
// out. It is installed on the connections Connect makes and NewClient wraps.
type refusals struct {
	inbox string // the connection's reply inbox prefix, ending in "."

	mu      sync.Mutex
	waiting map[*refusalWaiter]struct{}
}

// refusalWaiter is one call waiting for its answer. A refusal ends it with
// cancel (the refusal as the context's cause) or, for a call registered by
// begin, with stop, keeping the refusal in err.
type refusalWaiter struct {
	publish string // the subject the call publishes to
	prefix  bool   // publish is a prefix: a refusal of any subject under it counts
	cancel  context.CancelCauseFunc
	stop    context.CancelFunc
	err     *refusedError // guarded by refusals.mu
}

// begin registers one request to subject, whose context stop cancels: a
// refusal of subject or of the reply inbox calls stop. end unregisters it.
// It is watch for the hot path: no context of its own. A nil r registers
// nothing.
func (r *refusals) begin(subject string, stop context.CancelFunc) *refusalWaiter {
	if r == nil {
		return nil
	}
	w := &refusalWaiter{publish: subject, stop: stop}
	r.mu.Lock()
	r.waiting[w] = struct{}{}
	r.mu.Unlock()
	return w
}

// end unregisters w and returns the refusal that ended its request, or err.
func (r *refusals) end(w *refusalWaiter, err error) error {
	if r == nil || w == nil {
		return err
	}
	r.mu.Lock()
	delete(r.waiting, w)
	re := w.err
	r.mu.Unlock()
	if err != nil && re != nil {
		return re
	}
	return err
}

// refusalRE parses the server's permission errors, as nats.go passes them on:
// `nats: permissions violation: Permissions Violation for Publish to "S"`,
// `... for Subscription to "S"`.
var refusalRE = regexp.MustCompile(`Permissions Violation for (Publish to|Subscription to) "([^"]+)"`)

func newRefusals(nc *nats.Conn) *refusals {
	inbox := nats.InboxPrefix
	if p := nc.Opts.InboxPrefix; p != "" {
		inbox = p + "."
	}
	return &refusals{inbox: inbox, waiting: map[*refusalWaiter]struct{}{}}
}

// install makes nc report its refusals to r. The handler the caller set,
// if any, still gets every asynchronous error but the refusals that failed
// a call, which that call returns: each is reported once.
func (r *refusals) install(nc *nats.Conn) {
	prev := nc.ErrorHandler()
	nc.SetErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
		if !r.refused(err) && prev != nil {
			prev(nc, sub, err)
		}
	})
}

// watch derives from ctx a context that is cancelled, with the server's
// refusal as its cause, when the server refuses a publish to subject (or,
// with prefix, to any subject under it) or a subscription to the reply
// inbox. The caller calls stop when the call is over.
func (r *refusals) watch(ctx context.Context, subject string, prefix bool) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	unregister := r.register(subject, prefix, cancel)
	return ctx, func() {
		unregister()
		cancel(nil)
	}
}

// register calls cancel with the refusal when the server refuses a publish
// to subject (or, with prefix, to any subject under it) or a subscription
// to the reply inbox, until the returned function is called. A nil r (a
// connection the caller made) registers nothing.
func (r *refusals) register(subject string, prefix bool, cancel context.CancelCauseFunc) func() {
	if r == nil {
		return func() {}
	}
	w := &refusalWaiter{publish: subject, prefix: prefix, cancel: cancel}
	r.mu.Lock()
	r.waiting[w] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.waiting, w)
		r.mu.Unlock()
	}
}

// refused fails the calls a refusal concerns, and reports whether there
// were any.
func (r *refusals) refused(err error) bool {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	m := refusalRE.FindStringSubmatch(err.Error())
	if m == nil {
		return false
	}
	publish, subject := m[1] == "Publish to", m[2]
	r.mu.Lock()
	defer r.mu.Unlock()
	failed := false
	for w := range r.waiting {
		switch {
		case publish && (subject == w.publish || w.prefix && strings.HasPrefix(subject, w.publish)),
			!publish && strings.HasPrefix(subject, r.inbox):
			re := &refusedError{err: err}
			if !publish {
				re.inbox = r.inbox
			}
			if w.cancel != nil {
				w.cancel(re)
			} else {
				w.err = re
				w.stop()
			}
			failed = true
		}
	}
	return failed
}

// refusedError is the cause of a call the server refused.
type refusedError struct {
	err   error
	inbox string // the reply inbox prefix, when it was refused rather than the call's own subject
}

func (e *refusedError) Error() string {
	if e.inbox != "" {
		return e.err.Error() + " (this user may not receive replies: the server must let it subscribe to " + e.inbox + ">)"
	}
	return e.err.Error()
}

func (e *refusedError) Unwrap() error { return e.err }

// refusal returns the refusal that ended a call made with ctx, or err.
func refusal(ctx context.Context, err error) error {
	var re *refusedError
	if err != nil && errors.As(context.Cause(ctx), &re) {
		return re
	}
	return err
}
