package session

import (
	"testing"
	"time"

	"github.com/batonhq/baton/internal/golden"
	"github.com/batonhq/baton/kv"
)

// goldenSession is the record in testdata/golden/session-*.json: every
// field set, as a session record was written when the file was made.
var goldenSession = Record{
	Slot: "rendering", TaskID: "T-42", AgentID: "claude-1", Host: "build-1", PID: 4242,
	PIDStart: "3f0c9e1a-5b7d-4c1e-9a2b-6d8e7f6a5b4c:1234567", Instance: "2b8575f5-990f-451e-989d-05b3fb2ee174",
	Fence: 7, StartedAt: time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC), RenewedAt: time.Date(2026, 11, 23, 15, 0, 30, 0, time.UTC),
	Renewals: 3, Message: "halfway", Result: "success", Meta: map[string]string{"ticket": "T-42", "model": "opus"},
}

// TestGolden_RecordsWrittenBeforeStillDecode reads every session record
// checked in under testdata/golden (as earlier versions wrote them): each
// decodes to the same record, and this version writes every field it has,
// under the same name.
func TestGolden_RecordsWrittenBeforeStillDecode(t *testing.T) {
	golden.Check(t, "testdata/golden/session-*.json", goldenSession, func(b []byte) (Record, error) {
		got, err := Decode(kv.Entry{Key: "rendering", Value: b, Revision: 9, Op: kv.OpPut})
		if err != nil {
			return Record{}, err
		}
		r := got.Record
		r.unknown = nil
		return r, nil
	})
}
