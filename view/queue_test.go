package view

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// A lock row is written as RecordJSON's map of the lock and ttl_left_ms
// was marshalled, byte for byte.
func TestLockRow_AsTheMapOfIt(t *testing.T) {
	at := time.Date(2026, 11, 26, 5, 4, 3, 123456789, time.UTC)
	for _, l := range []queue.Lock{
		{},
		{Key: "alice", Lane: 1, Slot: "q.alice", Task: "t-1", Attempt: 2, Host: "h<1>", PID: 4242, Instance: "i\"1",
			Fence: 123456789, Acquired: at, Renewed: at.Add(time.Second), Expires: at.Add(time.Minute), State: "live", Revision: 987654321},
		{Key: "ünï", Slot: "ünï", Host: "h", State: "dead", Acquired: at.In(time.FixedZone("x", 3600))},
	} {
		for _, left := range []int64{0, -1500, 29_000} {
			m, err := RecordJSON(l, map[string]any{"ttl_left_ms": left})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(m)
			got, err := json.Marshal(lockRow{l, left})
			if err != nil || string(got) != string(want) {
				t.Errorf("%+v:\ngot  %s (%v)\nwant %s", l, got, err, want)
			}
		}
	}
}

func TestKeyCounts_AsEncodingJSON(t *testing.T) {
	for _, k := range []map[string]queue.KeyCount{nil, {}, {"b": {High: 1}, "a": {Normal: 2, Low: 3}, "<é>": {}}} {
		want, _ := json.Marshal(k)
		got, err := json.Marshal(keyCounts(k))
		if err != nil || string(got) != string(want) {
			t.Errorf("%v: got %s (%v), want %s", k, got, err, want)
		}
	}
}
