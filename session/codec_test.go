package session

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/jsonrec/jsonrectest"
)

// The codecs written from the records' fields write and read every one
// of them as encoding/json does.
func TestRecord_Codec(t *testing.T) {
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Record]{
		Encode: (*Record).encodeFast,
		Decode: func(r *Record, b []byte) bool { return r.decodeFast(b, 0) },
		Known:  recordKnown,
	})
	jsonrectest.CheckCodec(t, jsonrectest.Codec[pidRecord]{Encode: (*pidRecord).encodeFast, Known: pidRecordKnown})
}

// checkAppendJSON fails t unless r's member-by-member writing, where it
// writes r at all, is byte for byte encoding/json's; it reports whether it
// did.
func checkAppendJSON(t *testing.T, r Record) bool {
	t.Helper()
	if len(r.unknown) > 0 {
		return false
	}
	if r.Meta == nil {
		r.Meta = map[string]string{}
	}
	fast, ok := r.encodeFast()
	if !ok {
		return false
	}
	general, err := json.Marshal(recordFields(r))
	if err != nil || string(fast) != string(general) {
		t.Fatalf("written member by member\n%s\nencoding/json (%v)\n%s", fast, err, general)
	}
	return true
}

// The records join, commit, close and a queue's claim write are written
// member by member, as encoding/json writes them; others the general way.
func TestRecordAppendJSON_AsEncodingJSON(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 5, 6, 789, time.UTC)
	for _, r := range []Record{
		{Slot: "s", TaskID: "T-1", AgentID: "a", Host: "h", PID: 12, PIDStart: "b:1", Instance: "i", StartedAt: now, RenewedAt: now},
		{Slot: "q.k", TaskID: "t1", AgentID: "queue q", Host: "h", PID: 12, Instance: "i", Fence: 9, StartedAt: now, RenewedAt: now.Add(time.Second),
			Renewals: 3, Message: "m", Result: ResultSuccess, Meta: map[string]string{"queue": "q", "task": "t1", "attempt": "1"}},
		// Strings encoding/json escapes are escaped alike.
		{Slot: "s", Message: "<b> \"q\" \n \u2028 \xff", StartedAt: now, RenewedAt: now},
		{Slot: "s", Meta: map[string]string{"é": "1", "<": "&"}},
	} {
		if !checkAppendJSON(t, r) {
			t.Errorf("%+v is not written member by member", r)
		}
	}
	for _, r := range []Record{
		{Slot: "s", StartedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Slot: "s", RenewedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("odd", 61))},
	} {
		if _, ok := r.encodeFast(); ok {
			t.Errorf("%+v is written member by member; only encoding/json should", r)
		}
		got, gerr := r.MarshalJSON()
		if r.Meta == nil {
			r.Meta = map[string]string{}
		}
		want, werr := json.Marshal(recordFields(r))
		if string(got) != string(want) || (gerr == nil) != (werr == nil) {
			t.Errorf("%+v: wrote %s (%v), encoding/json %s (%v)", r, got, gerr, want, werr)
		}
	}
}

// FuzzRecordAppendJSON: a record decoded from anything is written member
// by member, where it is, as encoding/json writes it.
func FuzzRecordAppendJSON(f *testing.F) {
	for _, seed := range decodeSeeds() {
		f.Add([]byte(seed.value))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		var r Record
		if r.unmarshalGeneral(value) != nil {
			return
		}
		checkAppendJSON(t, r)
	})
}
