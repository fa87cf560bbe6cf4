package session

import (
	"context"
	"time"

	"github.com/batonhq/baton/kv"
)

// EventKind says what happened to a slot.
type EventKind string

const (
	// EventPresent is a session that existed when the watch started.
	EventPresent EventKind = "present"
	// EventSynced marks the end of the present sessions.
	EventSynced EventKind = "synced"
	// EventJoin is a new session (a join, or a forced takeover).
	EventJoin EventKind = "join"
	// EventCommit is a renewal.
	EventCommit EventKind = "commit"
	// EventClose is a session removed by a client: closed, replaced or
	// reaped (Session.Result says which, when the tombstone decodes).
	EventClose EventKind = "close"
	// EventExpire is a session the server removed when its TTL ran out.
	EventExpire EventKind = "expire"
)

// Event is one change of one slot.
type Event struct {
	Kind EventKind
	Slot string
	// Session is the record involved: the new version for present, join
	// and commit; the closing record for close; the last known version for
	// expire. Nil when unknown.
	Session  *Session
	Revision uint64
	// Time is the server's time of the change.
	Time time.Time
	// Err is set when the record does not decode (held by nobody-knows-who).
	Err error
	// TTL is the TTL the server holds for the record written (present,
	// join, commit), 0 when it has none: an undecodable record's only
	// lifetime.
	TTL time.Duration
}

// Watch streams the sessions present now (EventPresent, then EventSynced),
// then every join, commit, close and expiry as it happens, until ctx is
// done. The channel is closed when the watch ends.
func (m *Manager) Watch(ctx context.Context) (<-chan Event, error) {
	known := map[string]*Session{}
	return kv.WatchEvents(ctx, m.bucket, "", Event{Kind: EventSynced}, func(e kv.Entry, synced bool) (Event, bool) {
		return classify(e, known, synced)
	})
}

// classify turns one KV revision into an event, tracking the live sessions
// in known (a nil value is a live record that does not decode). It returns
// false for revisions that say nothing new (the tombstones of slots already
// gone when the watch started).
func classify(e kv.Entry, known map[string]*Session, synced bool) (Event, bool) {
	ev := Event{Slot: e.Key, Revision: e.Revision, Time: e.Created}
	switch e.Op {
	case kv.OpPut:
		s, err := Decode(e)
		prev := known[e.Key]
		switch {
		case !synced:
			ev.Kind = EventPresent
		case err == nil && prev != nil && prev.Fence == s.Fence:
			ev.Kind = EventCommit
		default:
			ev.Kind = EventJoin
		}
		ev.Session, ev.Err, ev.TTL = s, err, e.TTL
		known[e.Key] = s // nil: live but undecodable
		return ev, true
	case kv.OpDelete:
		prev, wasLive := known[e.Key]
		delete(known, e.Key)
		if !synced {
			return ev, false
		}
		ev.Kind = EventClose
		if s, err := Decode(e); err == nil {
			// The tombstone's TTL is how long the tombstone stays: the
			// session's own is the one last seen.
			s.TTL = 0
			if prev != nil {
				s.TTL = prev.TTL
			}
			ev.Session = s
		} else {
			ev.Session = prev
		}
		return ev, wasLive || ev.Session != nil
	default: // kv.OpExpire
		prev, wasLive := known[e.Key]
		delete(known, e.Key)
		ev.Kind, ev.Session = EventExpire, prev
		return ev, synced && wasLive
	}
}
