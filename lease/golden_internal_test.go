package lease

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
)

// goldenLease is the record in testdata/golden/lease-*.json: every field
// set, as a leader's lease was written when the file was made.
var goldenLease = Record{
	Key: "leader.chat-bot", Holder: "bot-2", Host: "build-1", PID: 4242,
	PIDStart: "3f0c9e1a-5b7d-4c1e-9a2b-6d8e7f6a5b4c:1234567", ChildPID: 4243, ChildPIDStart: "3f0c9e1a-5b7d-4c1e-9a2b-6d8e7f6a5b4c:1234570",
	Fence: 11, TTL: Duration(5 * time.Second), AcquiredAt: time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC),
	RenewedAt: time.Date(2026, 11, 23, 15, 0, 3, 0, time.UTC), Renewals: 2, TransferTo: "bot-3",
	PrevHolder: "bot-1", PrevFence: 9, Chosen: true, Score: 10, Capabilities: []string{"gpu"},
	Meta: map[string]string{"zone": "a"},
}

// TestGolden_RecordsWrittenBeforeStillDecode reads every lease record
// checked in under testdata/golden (as earlier versions wrote them): each
// decodes to the same lease, and this version writes every field it has,
// under the same name. A change may add fields; it may not drop, rename or
// reinterpret one.
func TestGolden_RecordsWrittenBeforeStillDecode(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/lease-*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden lease records: %v", err)
	}
	written, err := json.Marshal(goldenLease)
	if err != nil {
		t.Fatal(err)
	}
	var now map[string]any
	if err := json.Unmarshal(written, &now); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in, err := decode(kv.Entry{Key: "leader.chat-bot", Value: b, Revision: 12, Op: kv.OpPut})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got := in.Record
		got.unknown = nil
		if !reflect.DeepEqual(got, goldenLease) {
			t.Errorf("%s decodes to\n%+v\nwant\n%+v", f, got, goldenLease)
		}
		var old map[string]any
		if err := json.Unmarshal(b, &old); err != nil {
			t.Fatal(err)
		}
		for _, k := range slices.Sorted(maps.Keys(old)) {
			if _, ok := now[k]; !ok {
				t.Errorf("%s has %q, which this version no longer writes", f, k)
			}
		}
	}
}
