package lease

import (
	"context"
	"time"

	"github.com/batonhq/baton/kv"
)

// EventKind says what happened to a lease.
type EventKind string

const (
	// EventPresent is a lease that existed when the watch started.
	EventPresent EventKind = "present"
	// EventSynced marks the end of the present leases.
	EventSynced EventKind = "synced"
	// EventAcquire is a new holder (an acquire, a takeover or a handover).
	EventAcquire EventKind = "acquire"
	// EventRenew is a renewal (or another rewrite by the same holder).
	EventRenew EventKind = "renew"
	// EventRelease is a lease removed by a client.
	EventRelease EventKind = "release"
	// EventExpire is a lease the server removed when its TTL ran out.
	EventExpire EventKind = "expire"
)

// Event is one change of one lease.
type Event struct {
	Kind EventKind
	Key  string
	// Lease is the new version (present, acquire, renew) or the last known
	// one (release, expire); nil when unknown.
	Lease    *Info
	Revision uint64
	Time     time.Time
	Err      error // the record does not decode
}

// Watch streams the leases present now (EventPresent, then EventSynced),
// then every acquire, renewal, release and expiry, until ctx is done. The
// channel is closed when the watch ends.
func (ls *Leases) Watch(ctx context.Context) (<-chan Event, error) {
	known := map[string]*Info{}
	return kv.WatchEvents(ctx, ls.bucket, "", Event{Kind: EventSynced}, func(e kv.Entry, synced bool) (Event, bool) {
		return classify(e, known, synced)
	})
}

func classify(e kv.Entry, known map[string]*Info, synced bool) (Event, bool) {
	ev := Event{Key: e.Key, Revision: e.Revision, Time: e.Created}
	prev, wasLive := known[e.Key]
	if !e.Live() {
		delete(known, e.Key)
		ev.Kind, ev.Lease = EventRelease, prev
		if e.Op == kv.OpExpire {
			ev.Kind = EventExpire
		}
		return ev, synced && wasLive
	}
	in, err := decode(e)
	ev.Lease, ev.Err = in, err
	known[e.Key] = in // nil: live but undecodable
	switch {
	case !synced:
		ev.Kind = EventPresent
	case err == nil && prev != nil && prev.Holder == in.Holder && prev.Fence == in.Fence:
		ev.Kind = EventRenew
	default:
		ev.Kind = EventAcquire
	}
	return ev, true
}
