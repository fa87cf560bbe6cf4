package session

import (
	"encoding/json"
	"testing"
	"time"
)

// A pid file's JSON is what encoding/json writes of its fields.
func TestPIDRecord_MarshalJSONIsEncodingJSONs(t *testing.T) {
	type fields pidRecord // without the method
	rec, err := encodeRecord(Record{Slot: "s", TaskID: "T<1>", Fence: 9, Meta: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 5, 4, 3, 123, time.UTC)
	for _, tr := range []pidRecord{
		{},
		{Slot: "s", Fence: 9, Host: "h\"1", Instance: "i", PID: 7, PIDStart: "b:1", Joined: at, Revision: 12, TTLSeconds: 60, Record: rec},
	} {
		got, err := tr.MarshalJSON()
		want, _ := json.Marshal(fields(tr))
		if err != nil || string(got) != string(want) {
			t.Errorf("%+v:\ngot  %s (%v)\nwant %s", tr, got, err, want)
		}
	}
}
