package session

import (
	"bytes"
	"testing"
	"time"
)

// encodeSeeds are records for FuzzEncodeRecordFast.
func encodeSeeds() []Record {
	at := time.Date(2026, 11, 26, 5, 4, 3, 123456789, time.UTC)
	return []Record{
		{},
		{Slot: "rendering", TaskID: "T-42", AgentID: "claude-1", Host: "build-7", PID: 4242, PIDStart: "boot:123", Instance: "i-1",
			Fence: 7, StartedAt: at, RenewedAt: at.Add(time.Second), Renewals: 3, Message: "halfway", Result: "success",
			Meta: map[string]string{"b": "2", "a": "1", "<&>": "\u2028\xff"}},
		{Slot: "s", TaskID: "quote \" and \\ and \n", Host: "h", PID: -1, StartedAt: at.In(time.FixedZone("x", -7200)), Meta: map[string]string{}},
	}
}

func TestEncodeRecordFast_IsTheGeneralWay(t *testing.T) {
	for _, r := range encodeSeeds() {
		checkFastEncode(t, r)
	}
	// A record with fields of a later version takes the general way.
	var r Record
	if err := r.UnmarshalJSON([]byte(`{"slot":"s","future":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok := encodeRecordFast(r); ok {
		t.Error("a record with unknown fields was encoded the fast way")
	}
	// So does a time encoding/json refuses, which the general way reports.
	if _, ok := encodeRecordFast(Record{StartedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); ok {
		t.Error("a year past 9999 was encoded the fast way")
	}
}

func checkFastEncode(t *testing.T, r Record) {
	t.Helper()
	fast, ok := encodeRecordFast(r)
	general, err := r.marshalGeneral()
	if !ok {
		if err == nil {
			t.Fatalf("%+v: the fast way refused a record the general way writes: %s", r, general)
		}
		return
	}
	if err != nil || !bytes.Equal(fast, general) {
		t.Fatalf("%+v:\nfast    %s\ngeneral %s (%v)", r, fast, general, err)
	}
}

func FuzzEncodeRecordFast(f *testing.F) {
	for _, r := range encodeSeeds() {
		f.Add(r.Slot, r.TaskID, r.Message, r.PIDStart, int64(r.PID), r.Fence, r.StartedAt.UnixNano(), "k", "v")
	}
	f.Fuzz(func(t *testing.T, slot, task, msg, pidStart string, pid int64, fence uint64, at int64, k, v string) {
		tm := time.Unix(0, at).UTC()
		checkFastEncode(t, Record{Slot: slot, TaskID: task, Message: msg, PIDStart: pidStart, PID: int(pid), Fence: fence,
			StartedAt: tm, RenewedAt: tm, Meta: map[string]string{k: v, "z" + k: v + "z"}})
	})
}
