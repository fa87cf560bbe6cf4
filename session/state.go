package session

import (
	"context"
	"time"

	"github.com/batonhq/baton/kv"
)

// State classifies a session by the server's clock.
type State string

const (
	// StateLive: renewed within its stale-after window.
	StateLive State = "live"
	// StateStale: not renewed for stale-after (by default half its TTL);
	// its holder may be gone, and it expires unless renewed.
	StateStale State = "stale"
	// StateExpiring: its TTL has run out on the server's clock; the server
	// removes it within a moment (it expires keys on a 250 ms tick).
	StateExpiring State = "expiring"
)

// Timing is a session's age and time left at a server time.
type Timing struct {
	// Age is the time since the last write (join or renewal).
	Age time.Duration
	// Left is the time until the server expires it (negative once due).
	Left  time.Duration
	State State
}

// TimingAt classifies a revision written at written with ttl, at the server
// time now. staleAfter <= 0 means half the TTL.
func TimingAt(written time.Time, ttl time.Duration, now time.Time, staleAfter time.Duration) Timing {
	if staleAfter <= 0 {
		staleAfter = ttl / 2
	}
	t := Timing{Age: now.Sub(written), Left: written.Add(ttl).Sub(now), State: StateLive}
	switch {
	case ttl > 0 && t.Left <= 0:
		t.State = StateExpiring
	case t.Age >= staleAfter:
		t.State = StateStale
	}
	return t
}

// Timing classifies s at the server time now (s must come from a read).
func (s *Session) Timing(now time.Time, staleAfter time.Duration) Timing {
	return TimingAt(s.Written, s.TTL, now, staleAfter)
}

// Undecodable is a slot whose record does not decode: held by
// nobody-knows-who.
type Undecodable struct {
	Slot     string
	Revision uint64
	Written  time.Time
	TTL      time.Duration
	Err      error
}

// Listing is every session of the bucket at one moment of the server.
type Listing struct {
	Sessions    []*Session
	Undecodable []Undecodable
	// ServerTime is the server's clock right after the listing was read.
	ServerTime time.Time
}

// List reads every session with one watch of the bucket, then the server's
// time. Sessions are sorted by slot.
func (m *Manager) List(ctx context.Context) (*Listing, error) {
	// Decoding is most of a large listing's cost: it runs on all CPUs while
	// the listing arrives.
	entries, err := kv.ListDecoded(ctx, m.bucket, "", Decode)
	if err != nil {
		return nil, err
	}
	now, err := m.bucket.ServerTime(ctx)
	if err != nil {
		return nil, err
	}
	// Entries come sorted by key, and a session decodes only under its own
	// slot's key: the sessions are in slot order.
	l := &Listing{ServerTime: now, Sessions: make([]*Session, 0, len(entries))}
	for _, d := range entries {
		if d.Err == nil {
			l.Sessions = append(l.Sessions, d.Out)
		} else {
			e := d.Entry
			l.Undecodable = append(l.Undecodable, Undecodable{Slot: e.Key, Revision: e.Revision, Written: e.Created, TTL: e.TTL, Err: d.Err})
		}
	}
	return l, nil
}

// ServerTime is the server's clock (the sessions bucket's stream leader).
func (m *Manager) ServerTime(ctx context.Context) (time.Time, error) {
	return m.bucket.ServerTime(ctx)
}

// Reap removes a session (or an undecodable record) that was found stale,
// with a CAS delete on the revision that was read, and this host's pid file
// of it. A session renewed since (another revision) survives: Reap then
// returns kv.ErrConflict and changes nothing.
func (m *Manager) Reap(ctx context.Context, slot string, rev uint64, note *Record) error {
	if note == nil {
		note = &Record{Slot: slot}
	}
	n := note.clone()
	n.Result = ResultReaped
	if err := m.Delete(ctx, slot, rev, &n); err != nil {
		return err
	}
	if n.Host == m.host && n.Fence != 0 {
		m.removePIDFile(slot, n.Fence)
	}
	return nil
}
