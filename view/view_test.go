package view

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/batonhq/baton/session"
)

// SessionRowJSON writes what encoding/json writes for SessionRow's map: the
// same keys in the same (sorted) order with the same values, unknown fields
// of the record and an unknown field named like an added one included.
func TestSessionRowJSON_IsSessionRowMarshalled(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, stored := range []string{
		`{"slot":"s1","task_id":"T-1","agent_id":"a","host":"h","pid":42,"pid_start":"x:1","instance":"i","fence":7,` +
			`"started_at":"2026-11-23T11:59:00Z","renewed_at":"2026-11-23T11:59:30.5Z","renewals":3,"message":"<half>","result":"","meta":{"z":"1","a":"2"}}`,
		`{"slot":"s2","fence":1,"future":{"b":[1,2.5,null],"a":"x"},"state":"from the record","zz":"\u2028"}`,
		`{"slot":"s3"}`,
		`{"slot":"s4","meta":{},"a<b>&c":[],"\u00e9t\u00e9":{"y":1,"x":[{"b":2,"a":1}]}}`,
	} {
		var r session.Record
		if err := r.UnmarshalJSON([]byte(stored)); err != nil {
			t.Fatal(err)
		}
		s := &session.Session{Record: r, Revision: 9, Written: now.Add(-1500 * time.Millisecond), TTL: 10 * time.Second}
		m, err := SessionRow(s, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := SessionRowJSON(s, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(raw) // as the document is written
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("stored %s:\n got %s\nwant %s", stored, got, want)
		}
	}
}
