package lease

import (
	"testing"
	"time"

	"github.com/batonhq/baton/internal/golden"
	"github.com/batonhq/baton/kv"
)

// goldenLease is the record in testdata/golden/lease-*.json: every field
// the record had when the file was made set (require came after), as a
// leader's lease was written then.
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
// decodes to the same record, and this version writes every field it has,
// under the same name.
func TestGolden_RecordsWrittenBeforeStillDecode(t *testing.T) {
	golden.Check(t, "testdata/golden/lease-*.json", goldenLease, func(b []byte) (Record, error) {
		got, err := decode(kv.Entry{Key: "leader.chat-bot", Value: b, Revision: 12, Op: kv.OpPut})
		if err != nil {
			return Record{}, err
		}
		r := got.Record
		r.unknown = nil
		return r, nil
	})
}
