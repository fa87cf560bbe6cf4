package lease

// Watching an election: Observe streams each change of leader, in order,
// including terms that began and ended between two reads of the watch;
// WaitLeader waits for a given instance to lead.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batonhq/baton/kv"
)

// WaitLeader waits until instance leads, or ctx is done.
func (e *Election) WaitLeader(ctx context.Context, instance string) (*Info, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs, err := e.Observe(ctx)
	if err != nil {
		return nil, err
	}
	for o := range obs {
		if o.Leader != nil && o.Leader.Holder == instance {
			return o.Leader, nil
		}
	}
	return nil, fmt.Errorf("waiting for %s to lead %s: %w", instance, e.key, context.Cause(ctx))
}

// missedTerm returns the term that the entry en ends but that the watch
// never saw (its last known leader is last), when en names it.
func missedTerm(en kv.Entry, in, last *Info) *Info {
	var holder string
	var fence uint64
	switch {
	case in != nil && in.PrevFence != 0:
		holder, fence = in.PrevHolder, in.PrevFence
	case in == nil && en.Op == kv.OpDelete:
		var note releaseNote
		if json.Unmarshal(en.Value, &note) != nil || note.Fence == 0 {
			return nil
		}
		holder, fence = note.Holder, note.Fence
	default:
		return nil
	}
	if last != nil && last.Fence >= fence || in != nil && in.Fence == fence {
		return nil
	}
	return &Info{Record: Record{Key: en.Key, Holder: holder, Fence: fence}, Revision: fence}
}

// Observation is one leadership change: a new leader, or none.
type Observation struct {
	// Leader is the new leader's lease; nil when there is no leader.
	Leader *Info
	// How the previous leadership ended when there is no leader: "expired"
	// or "released".
	How string
	// Time is the server's time of the change.
	Time     time.Time
	Revision uint64
}

// Observe streams every change of leadership, in order: the current state
// first (a leader, or none), then each new leader and each moment without
// one. Renewals are not changes. The channel closes when ctx is done.
func (e *Election) Observe(ctx context.Context) (<-chan Observation, error) {
	w, err := e.ls.bucket.Watch(ctx, e.leaderKey)
	if err != nil {
		return nil, err
	}
	out := make(chan Observation, 16)
	go func() {
		defer close(out)
		defer w.Stop()
		send := func(o Observation) bool {
			select {
			case out <- o:
				return true
			case <-ctx.Done():
				return false
			}
		}
		var last *Info // nil: no leader
		synced := false
		for en := range w.Updates() {
			if en == nil { // end of the current state: say it
				synced = true
				o := Observation{Leader: last}
				if last != nil {
					o.Time, o.Revision = last.Written, last.Revision
				}
				if !send(o) {
					return
				}
				continue
			}
			var in *Info
			if en.Live() {
				in, _ = decode(*en)
			}
			// With one revision kept per key, a term that began and ended
			// before this watch received it is gone from the stream; the
			// record that ended it still names it (a release's tombstone,
			// a handover's prev_holder): say it first, in order.
			if missed := missedTerm(*en, in, last); synced && missed != nil {
				if !send(Observation{Leader: missed, Time: en.Created, Revision: missed.Revision}) {
					return
				}
				last = missed
			}
			changed := (in == nil) != (last == nil) || in != nil && (in.Holder != last.Holder || in.Fence != last.Fence)
			last = in
			if !synced || !changed {
				continue // the current state so far, a renewal, or a tombstone of no leader
			}
			o := Observation{Leader: in, Time: en.Created, Revision: en.Revision}
			if in == nil {
				o.How = "released"
				if en.Op == kv.OpExpire {
					o.How = "expired"
				}
			}
			if !send(o) {
				return
			}
		}
	}()
	return out, nil
}
