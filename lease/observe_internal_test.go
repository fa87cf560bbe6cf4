package lease

import (
	"encoding/json"
	"testing"

	"github.com/batonhq/baton/kv"
)

// A watch that lags can find a term already gone from the stream (one
// revision is kept per key); the record that ended it still names it.
func TestMissedTerm(t *testing.T) {
	note, _ := json.Marshal(releaseNote{Key: "leader.k", Holder: "a", Fence: 5})
	tomb := kv.Entry{Key: "leader.k", Op: kv.OpDelete, Revision: 7, Value: note}
	handover := &Info{Record: Record{Key: "leader.k", Holder: "b", Fence: 9, PrevHolder: "a", PrevFence: 5}, Revision: 9}
	seenA := &Info{Record: Record{Holder: "a", Fence: 5}}
	for _, tc := range []struct {
		name string
		en   kv.Entry
		in   *Info
		last *Info
		want string
	}{
		{"release of a term never seen", tomb, nil, nil, "a/5"},
		{"release of the term seen", tomb, nil, seenA, ""},
		{"handover from a term never seen", kv.Entry{Key: "leader.k", Revision: 9}, handover, nil, "a/5"},
		{"handover from the term seen", kv.Entry{Key: "leader.k", Revision: 9}, handover, seenA, ""},
		{"expiry names nothing", kv.Entry{Key: "leader.k", Op: kv.OpExpire, Revision: 8}, nil, nil, ""},
		{"a plain new leader names nothing", kv.Entry{Key: "leader.k", Revision: 9}, &Info{Record: Record{Holder: "c", Fence: 9}}, nil, ""},
	} {
		got := missedTerm(tc.en, tc.in, tc.last)
		s := ""
		if got != nil {
			s = got.Holder + "/" + itoa(got.Fence)
		}
		if s != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, s, tc.want)
		}
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
