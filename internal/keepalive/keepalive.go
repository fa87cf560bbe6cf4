// Package keepalive decides when a holder renews a key that lives by its
// TTL, and when it must stop acting as if it held it.
//
// The server counts a key's TTL from its own write, which happens after the
// holder sent the renewal; so counting from the send, less a margin for
// clock-rate differences, gives a bound the server cannot beat: it cannot
// expire the key before ExpiryBound. A holder that has not renewed by its
// local Deadline (ExpiryBound less the time it needs to stop its work)
// gives the key up, so its work is over before anyone else can be given the
// key.
//
// Machine is the pure state machine (time comes in as arguments, so it is
// tested with any clock); Run drives it with real timers.
package keepalive

import (
	"context"
	"errors"
	"time"
)

// ErrDeadline means renewals kept failing until the local deadline.
var ErrDeadline = errors.New("keepalive: not renewed in time")

// Action is what a holder must do now.
type Action int

const (
	// Wait: nothing to do before Machine.Wake.
	Wait Action = iota
	// Renew: send a renewal now.
	Renew
	// Lost: the local deadline has passed without a renewal.
	Lost
)

func (a Action) String() string {
	return [...]string{"wait", "renew", "lost"}[a]
}

// Machine is a held key's renewal schedule.
type Machine struct {
	ttl        time.Duration
	stopBudget time.Duration
	lastSent   time.Time // when the last successful write was sent
	retryAt    time.Time // after a failed renewal: when to try again
}

// New returns the schedule of a key with ttl whose last successful write
// was sent at sent. stopBudget is the time the holder keeps, before the
// server could expire the key, to stop its work; it is capped at a quarter
// of the TTL, so that renewals keep most of the TTL to succeed in.
func New(ttl, stopBudget time.Duration, sent time.Time) *Machine {
	return &Machine{ttl: ttl, stopBudget: min(max(stopBudget, 0), ttl/4), lastSent: sent}
}

// Margin is the share of the TTL kept for clock-rate differences between
// this host and the server: a tenth, between 100 ms and 2 s.
func Margin(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 100*time.Millisecond), 2*time.Second)
}

// StopBudget is the time kept, between giving the key up and the server's
// earliest expiry, to stop the work.
func (m *Machine) StopBudget() time.Duration { return m.stopBudget }

// ExpiryBound is the earliest time the server can expire the key.
func (m *Machine) ExpiryBound() time.Time { return m.lastSent.Add(m.ttl - Margin(m.ttl)) }

// Deadline is when the holder gives the key up if it has not renewed it.
func (m *Machine) Deadline() time.Time { return m.ExpiryBound().Add(-m.stopBudget) }

// Interval is the time between two renewals: a third of the TTL.
func (m *Machine) Interval() time.Duration { return m.ttl / 3 }

// RetryInterval is the time between attempts after a failed renewal: a
// tenth of the TTL, between 100 ms and 1 s.
func (m *Machine) RetryInterval() time.Duration {
	return min(max(m.ttl/10, 100*time.Millisecond), time.Second)
}

// Renewed records a successful renewal sent at sent.
func (m *Machine) Renewed(sent time.Time) {
	if sent.After(m.lastSent) {
		m.lastSent = sent
	}
	m.retryAt = time.Time{}
}

// Failed records a renewal that failed (without losing the key) at now.
func (m *Machine) Failed(now time.Time) { m.retryAt = now.Add(m.RetryInterval()) }

// Due says what to do at now.
func (m *Machine) Due(now time.Time) Action {
	switch {
	case !now.Before(m.Deadline()):
		return Lost
	case !now.Before(m.next()):
		return Renew
	default:
		return Wait
	}
}

// Wake is when Due's answer can next change.
func (m *Machine) Wake() time.Time {
	if n, d := m.next(), m.Deadline(); n.Before(d) {
		return n
	}
	return m.Deadline()
}

func (m *Machine) next() time.Time {
	if !m.retryAt.IsZero() {
		return m.retryAt
	}
	return m.lastSent.Add(m.Interval())
}

// Run renews with renew until ctx is done (it returns nil) or the key is
// lost: renew returned an error for which lost is true (that error is
// returned), or the local deadline passed (ErrDeadline). Each renewal gets a
// context bounded by the local deadline. observe, if not nil, is told of
// each renewal that ran to an answer (a success, even as ctx ends; a
// failure unless ctx ended, which may have caused it): how long it took and
// its error (nil when it succeeded).
func Run(ctx context.Context, m *Machine, renew func(context.Context) error, lost func(error) bool, observe func(took time.Duration, err error)) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := time.Now()
		switch m.Due(now) {
		case Lost:
			return ErrDeadline
		case Renew:
			rctx, cancel := context.WithDeadline(ctx, m.Deadline())
			err := renew(rctx)
			cancel()
			// An answer is observed; a failure that may only be ctx's end
			// is not.
			if observe != nil && (err == nil || ctx.Err() == nil) {
				observe(time.Since(now), err)
			}
			if ctx.Err() != nil {
				return nil
			}
			switch {
			case err == nil:
				m.Renewed(now)
			case lost(err):
				return err
			default:
				m.Failed(time.Now())
			}
			continue
		}
		timer.Reset(time.Until(m.Wake()))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
	}
}
