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
//
// The same waiters are ended, without failing their call, when their answer
// will not come for another reason: the connection was lost, its server
// entered lame-duck mode, or the stream the request went to elected a new
// leader (failover.go). Only request attempts (begin) are ended so; the
// call sends them again at once, as after the attempt's timeout.
type refusals struct {
	mu      sync.Mutex
	inbox   string     // the connection's reply inbox prefix, ending in "."; set by install
	nc      *nats.Conn // set by install
	waiting map[*refusalWaiter]struct{}
	follows map[string]*nats.Subscription // leader-elected advisories followed, by stream
	closed  bool                          // close was called: follow no more streams
}

// refusalWaiter is one call waiting for its answer. A refusal ends it with
// cancel (the refusal as the context's cause) or, for a call registered by
// begin, with stop, keeping the refusal (or the interruption) in err.
type refusalWaiter struct {
	publish string // the subject the call publishes to
	prefix  bool   // publish is a prefix: a refusal of any subject under it counts
	cancel  context.CancelCauseFunc
	stop    context.CancelFunc
	err     error // a *refusedError or an *interruptedError; guarded by refusals.mu
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

// end unregisters w and returns the refusal or interruption that ended its
// request, or err. A request cut off by a reconnection (nats.go fails the
// requests in flight with ErrDisconnected when the connection is forced to
// reconnect) is an interruption too, unless the connection is closed for
// good.
func (r *refusals) end(w *refusalWaiter, err error) error {
	if r == nil || w == nil {
		return err
	}
	r.mu.Lock()
	delete(r.waiting, w)
	re := w.err
	nc := r.nc
	r.mu.Unlock()
	switch {
	case err == nil:
		return nil
	case re != nil:
		return re
	case (errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionClosed)) && nc != nil && !nc.IsClosed():
		return &interruptedError{why: "the connection was reset"}
	}
	return err
}

// refusalRE parses the server's permission errors, as nats.go passes them on:
// `nats: permissions violation: Permissions Violation for Publish to "S"`,
// `... for Subscription to "S"`.
// It is compiled at the first refusal, not at start-up.
var refusalRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`Permissions Violation for (Publish to|Subscription to) "([^"]+)"`)
})

func newRefusals() *refusals {
	return &refusals{inbox: nats.InboxPrefix, waiting: map[*refusalWaiter]struct{}{}, follows: map[string]*nats.Subscription{}}
}

// install makes nc report its refusals and lost connections to r. The
// handlers the caller set, if any, are still called: the error handler with
// every asynchronous error but the refusals that failed a call, which that
// call returns (each is reported once), and the disconnect handler (or the
// older DisconnectedCB) with every disconnection.
func (r *refusals) install(nc *nats.Conn) {
	r.mu.Lock()
	r.nc = nc
	if p := nc.Opts.InboxPrefix; p != "" {
		r.inbox = p + "."
	}
	r.mu.Unlock()
	prev := nc.ErrorHandler()
	nc.SetErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
		if !r.refused(err) && prev != nil {
			prev(nc, sub, err)
		}
	})
	prevDisconnect := nc.DisconnectErrHandler()
	var prevDisconnected nats.ConnHandler
	if prevDisconnect == nil {
		// Set with nats.DisconnectHandler: nats.go calls it only while no
		// DisconnectErrHandler is set, so the wrapper calls it instead.
		prevDisconnected = nc.Opts.DisconnectedCB
	}
	nc.SetDisconnectErrHandler(func(nc *nats.Conn, err error) {
		r.disconnected(nc)
		switch {
		case prevDisconnect != nil:
			prevDisconnect(nc, err)
		case prevDisconnected != nil:
			prevDisconnected(nc)
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
	m := refusalRE().FindStringSubmatch(err.Error())
	if m == nil {
		return false
	}
	publish, subject := m[1] == "Publish to", m[2]
	r.mu.Lock()
	defer r.mu.Unlock()
	if !publish && r.following(subject) {
		return true // an optional subscription of this package's own (failover.go)
	}
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
