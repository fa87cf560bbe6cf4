package kv

import (
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
)

// A request whose answer will not come waits out its attempt's timeout
// (half the client's timeout) before the call sends it again. Three events
// say early that an answer will not come, and end the attempts in flight at
// once, through the waiters refusals keeps, so that the call goes on at
// once, as after the timeout:
//
//   - the connection was lost (nats.go's disconnect handler): the requests
//     sent on it may never be answered; nats.go reconnects to another
//     server, and the call's next attempt goes there;
//   - the server announced lame-duck mode (it is about to stop): when
//     another server is known, the client reconnects to it at once
//     (ForceReconnect) rather than when the server drops it;
//   - a stream elected a new leader (the server's LEADER_ELECTED advisory,
//     followed for the streams of the buckets this client handles): a
//     request that reached the old leader is dropped by it without an
//     answer, and only the new leader answers.
//
// Ending an attempt never decides a call. A read is sent again; a write
// whose attempt ended is a lost answer, which the write re-reads to find out
// whether it landed (casWrite), exactly as after a timeout; a compare-and-set
// cannot be applied twice, since both copies expect the same revision. An
// attempt ended needlessly (its answer was on its way) costs one round trip.

// advisoryLeaderElected prefixes the subject on which a stream's new leader
// announces itself, in the stream's account.
const advisoryLeaderElected = "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED."

// interruptedError ends a request attempt whose answer will not come. It
// matches nats.ErrTimeout: the call goes on as after the attempt's timeout,
// only sooner.
type interruptedError struct{ why string }

func (e *interruptedError) Error() string {
	return "nats: " + e.why + " (the request's answer will not come)"
}

// Is makes an interruption count as the attempt's timeout.
func (e *interruptedError) Is(target error) bool { return target == nats.ErrTimeout }

// interrupt ends the request attempts in flight that match (all, when
// match is nil) with why.
func (r *refusals) interrupt(why string, match func(subject string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ie *interruptedError
	for w := range r.waiting {
		if w.stop == nil || w.err != nil || match != nil && !match(w.publish) {
			continue // a whole call (watch), or already ended
		}
		if ie == nil {
			ie = &interruptedError{why: why}
		}
		w.err = ie
		w.stop()
	}
}

// disconnected ends every attempt in flight on a connection that was lost.
func (r *refusals) disconnected(nc *nats.Conn) {
	if nc.IsClosed() {
		return // closed by its owner: the requests fail as closed
	}
	r.interrupt("the connection to the server was lost", nil)
}

// lameDuckOption makes the connection move to another server as soon as its
// server announces lame-duck mode, ending the attempts in flight. A handler
// given earlier among the options is still called.
func (r *refusals) lameDuckOption() nats.Option {
	return func(o *nats.Options) error {
		prev := o.LameDuckModeHandler
		o.LameDuckModeHandler = func(nc *nats.Conn) {
			r.lameDuck(nc)
			if prev != nil {
				prev(nc)
			}
		}
		return nil
	}
}

// lameDuck moves nc to another server, if it knows one: the server in
// lame-duck mode still serves until it closes the connection, so with no
// other server to go to, the client stays.
func (r *refusals) lameDuck(nc *nats.Conn) {
	if !otherServer(nc) {
		return
	}
	// Reconnect first, so that the attempts sent again go to the new
	// server (nats.go buffers them until it is connected).
	if err := nc.ForceReconnect(); err != nil {
		return // closed meanwhile
	}
	r.interrupt("the server entered lame-duck mode", nil)
}

// otherServer reports whether nc knows a server other than the one it is
// connected to.
func otherServer(nc *nats.Conn) bool {
	cur, err := url.Parse(nc.ConnectedUrl())
	if err != nil || cur.Host == "" {
		return false
	}
	for _, s := range nc.Servers() {
		if u, err := url.Parse(s); err == nil && u.Host != "" && u.Host != cur.Host {
			return true
		}
	}
	return false
}

// follow subscribes, once per stream, to the stream's leader-elected
// advisories, so that a leader change ends the attempts in flight on the
// stream. It does nothing on a server outside a cluster, whose streams
// never change leader. A user whose permissions do not cover the advisory
// subject works as before: the server's refusal of the subscription is
// not passed on (refused), and attempts wait out their timeout.
func (r *refusals) follow(stream string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.nc == nil || r.follows[stream] != nil || r.nc.ConnectedClusterName() == "" {
		return
	}
	sub, err := r.nc.Subscribe(advisoryLeaderElected+stream, func(*nats.Msg) { r.leaderElected(stream) })
	if err == nil {
		r.follows[stream] = sub
	}
}

// following reports whether subject is that of an advisory r follows.
// r.mu is held.
func (r *refusals) following(subject string) bool {
	stream, ok := strings.CutPrefix(subject, advisoryLeaderElected)
	return ok && r.follows[stream] != nil
}

// leaderElected ends the attempts in flight on stream: its writes and the
// API requests its leader answers.
func (r *refusals) leaderElected(stream string) {
	writes := "$KV." + strings.TrimPrefix(stream, "KV_") + "."
	get, info := apiPrefix+"STREAM.MSG.GET."+stream, apiPrefix+"STREAM.INFO."+stream
	r.interrupt("stream "+stream+" elected a new leader", func(subject string) bool {
		return strings.HasPrefix(subject, writes) || subject == get || subject == info
	})
}

// close unsubscribes from the advisories followed; it is idempotent.
func (r *refusals) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	subs := r.follows
	r.follows, r.closed = map[string]*nats.Subscription{}, true
	r.mu.Unlock()
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
}
