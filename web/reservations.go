package web

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/reserve"
)

// spacesTracker keeps the path reservation spaces as the dashboard shows
// them, from one watch of resv.> in the limits bucket: a space is one
// record (adr/0056), which the watch brings whole, decoded once per
// revision. Ages, times left and expiries are counted at each view from
// the server's time as the model estimates it: an entry expires with no
// write to say so.
type spacesTracker struct {
	bucket   *kv.Bucket
	now      func() time.Time // the server's clock, as the model estimates it
	onChange func(kind, key string)

	mu     sync.RWMutex
	spaces map[string]*spaceState // by KV key
}

// spaceState is one space's record as last delivered.
type spaceState struct {
	name string         // the space, as its record names it (or its key, undecodable)
	st   reserve.Status // at its revision's server time
	err  string         // the record does not decode
}

func newSpacesTracker(rs *reserve.Spaces, now func() time.Time, onChange func(kind, key string)) *spacesTracker {
	return &spacesTracker{bucket: rs.Bucket(), now: now, onChange: onChange, spaces: map[string]*spaceState{}}
}

// run follows the spaces' records until ctx is done.
func (t *spacesTracker) run(ctx context.Context, onErr func(error)) {
	watchLoop(ctx, onErr, func(ctx context.Context) error {
		w, err := t.bucket.Watch(ctx, reserve.KeyPrefix+">")
		if errors.Is(err, kv.ErrBucketNotFound) {
			return nil // no limits bucket yet; looked at again after the pause
		}
		if err != nil {
			return err
		}
		defer w.Stop()
		seen := map[string]bool{}
		synced := false
		for e := range w.Updates() {
			if e == nil {
				if !synced {
					t.forgetBut(seen) // gone while the watch was down
				}
				synced = true
				continue
			}
			if !synced {
				seen[e.Key] = true
			}
			t.follow(*e)
		}
		return nil
	})
}

// forgetBut drops the spaces whose keys are not in keep.
func (t *spacesTracker) forgetBut(keep map[string]bool) {
	t.mu.Lock()
	var gone []string
	for k, s := range t.spaces {
		if !keep[k] {
			gone = append(gone, s.name)
			delete(t.spaces, k)
		}
	}
	t.mu.Unlock()
	for _, name := range gone {
		t.onChange(KindSpace, name)
	}
	if len(gone) > 0 {
		t.onChange(KindOverview, "")
	}
}

// follow keeps one revision of a space's key.
func (t *spacesTracker) follow(e kv.Entry) {
	t.mu.Lock()
	old := t.spaces[e.Key]
	if !e.Live() {
		delete(t.spaces, e.Key)
		t.mu.Unlock()
		if old != nil {
			t.onChange(KindSpace, old.name)
			t.onChange(KindOverview, "")
		}
		return
	}
	s := decodeSpace(e)
	t.spaces[e.Key] = s
	t.mu.Unlock()
	if old != nil && old.name != s.name {
		t.onChange(KindSpace, old.name)
	}
	t.onChange(KindSpace, s.name)
	t.onChange(KindOverview, "")
}

// decodeSpace reads a live revision of a space's key. A record that does
// not decode, or names a space whose key is another, is kept as
// undecodable: nobody can write the space until it is removed, and its
// paths are never free.
func decodeSpace(e kv.Entry) *spaceState {
	bad := func(err error) *spaceState {
		return &spaceState{name: strings.TrimPrefix(e.Key, reserve.KeyPrefix), err: err.Error(),
			st: reserve.Status{Revision: e.Revision, ServerTime: e.Created, Size: len(e.Value), Reservations: []reserve.Row{}}}
	}
	var rec reserve.Record
	if err := rec.UnmarshalJSON(e.Value); err != nil {
		return bad(err)
	}
	if reserve.Key(rec.Space) != e.Key {
		return bad(fmt.Errorf("%s holds space %q, whose key is %s", e.Key, rec.Space, reserve.Key(rec.Space)))
	}
	st, err := reserve.StatusOf(rec.Space, e, e.Created)
	if err != nil {
		return bad(err)
	}
	return &spaceState{name: rec.Space, st: st}
}

// SpaceSummary is a reservation space in counts: `baton reserve ls
// --json`'s row, plus the dashboard's fields.
type SpaceSummary struct {
	Space    string `json:"space"`
	Key      string `json:"key"`
	Revision uint64 `json:"revision"`
	// Size is the record's size in bytes: the space holds as many
	// reservations as fit in one message of the server's.
	Size int `json:"size"`
	// Held counts the reservations held (not expired), HeldShared those
	// of them that are shared.
	Held       int `json:"held"`
	HeldShared int `json:"held_shared"`
	Waiting    int `json:"waiting"`
	// Expired counts the reservations past their TTL that the record
	// still holds: they hold nothing, and the space's next write drops
	// them.
	Expired int `json:"expired"`
	// OldestWaitMS is how long the longest waiter has waited (0: none
	// waits).
	OldestWaitMS int64 `json:"oldest_wait_ms"`
	// Undecodable says why the record does not decode: nobody can reserve
	// in the space until it is removed (baton doctor names it).
	Undecodable string `json:"undecodable,omitempty"`
}

// SpaceView is a reservation space as the dashboard shows it: `baton
// reserve ls SPACE --json` (reservations in the order they came, so the
// waiting ones in their line's order) with the counts of its summary.
type SpaceView struct {
	SpaceSummary
	ServerTime   time.Time     `json:"server_time"`
	Reservations []reserve.Row `json:"reservations"`
}

// viewAt is the space at server time now.
func (s *spaceState) viewAt(key string, now time.Time) SpaceView {
	st := s.st.At(now)
	v := SpaceView{SpaceSummary: SpaceSummary{Space: s.name, Key: key, Revision: st.Revision, Size: st.Size, Undecodable: s.err},
		ServerTime: now, Reservations: st.Reservations}
	for _, r := range st.Reservations {
		switch r.State {
		case "held":
			v.Held++
			if r.Shared {
				v.HeldShared++
			}
		case "waiting":
			v.Waiting++
			v.OldestWaitMS = max(v.OldestWaitMS, r.AgeMS)
		case "expired":
			v.Expired++
		}
	}
	return v
}

// Spaces lists every space, by name, in counts.
func (t *spacesTracker) Spaces() []SpaceSummary {
	vs := t.views()
	out := make([]SpaceSummary, len(vs))
	for i, v := range vs {
		out[i] = v.SpaceSummary
	}
	return out
}

// views is every space now, by name.
func (t *spacesTracker) views() []SpaceView {
	now := t.now()
	t.mu.RLock()
	out := make([]SpaceView, 0, len(t.spaces))
	for k, s := range t.spaces {
		out = append(out, s.viewAt(k, now))
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b SpaceView) int { return strings.Compare(a.Space, b.Space) })
	return out
}

// Space is one space now (nil: it holds no reservation). An undecodable
// record whose key is a hash is found by that key's end (=HEX).
func (t *spacesTracker) Space(name string) *SpaceView {
	now := t.now()
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, key := range []string{reserve.Key(name), reserve.KeyPrefix + name} {
		if s := t.spaces[key]; s != nil && s.name == name {
			v := s.viewAt(key, now)
			return &v
		}
	}
	return nil
}

// ReservationsSummary is the reservation spaces in counts, for the
// overview.
type ReservationsSummary struct {
	Spaces       int   `json:"spaces"`
	Held         int   `json:"held"`
	Waiting      int   `json:"waiting"`
	OldestWaitMS int64 `json:"oldest_wait_ms"`
	Undecodable  int   `json:"undecodable"`
}

func (t *spacesTracker) Summary() ReservationsSummary {
	var s ReservationsSummary
	for _, v := range t.Spaces() {
		s.Spaces++
		s.Held += v.Held
		s.Waiting += v.Waiting
		s.OldestWaitMS = max(s.OldestWaitMS, v.OldestWaitMS)
		if v.Undecodable != "" {
			s.Undecodable++
		}
	}
	return s
}
