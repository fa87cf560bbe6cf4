package session

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every record this version writes decodes the fast way, into what the
// general way decodes.
func TestRecordDecodeFast_WhatThisVersionWritesAsTheGeneralWayDecodesIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	plain := []string{"", "a", "rendering", "T-42", "host-1.example", "x y", "é", "漢字", "~!@#$%^*()"}
	tricky := []string{"<b>", "a&b", `q"q`, `back\slash`, "tab\t", "\u2028", "\x7f", "\xff", "\x01"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(3) {
			if rng.IntN(30) == 0 {
				b.WriteString(tricky[rng.IntN(len(tricky))])
			} else {
				b.WriteString(plain[rng.IntN(len(plain))])
			}
		}
		return b.String()
	}
	times := []time.Time{{}, time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -7*3600)), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}
	fast := 0
	for round := range 5000 {
		r := Record{
			Slot: str(), TaskID: str(), AgentID: str(), Host: str(), PID: rng.IntN(1<<22) - 10, Instance: str(),
			Fence: rng.Uint64(), StartedAt: times[rng.IntN(len(times))], RenewedAt: times[rng.IntN(len(times))],
			Renewals: rng.Uint64N(1 << 20), Message: str(), Result: str(),
		}
		if rng.IntN(2) == 0 {
			r.PIDStart = str()
		}
		if rng.IntN(2) == 0 {
			r.Meta = map[string]string{str(): str(), "child_pid": "42"}
		}
		b, err := encodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		var want Record
		if err := want.unmarshalGeneral(b); err != nil {
			t.Fatalf("round %d: %s: %v", round, b, err)
		}
		var got Record
		if !got.decodeFast(b, 0) {
			if !strings.ContainsAny(string(b), `\`) {
				t.Errorf("round %d: not decoded the fast way, with no escape in it: %s", round, b)
			}
			continue
		}
		fast++
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: %s\n got %#v\nwant %#v", round, b, got, want)
		}
	}
	if fast < 3000 {
		t.Errorf("only %d of 5000 records decoded the fast way", fast)
	}
}

// Whatever the fast way decodes, the general way decodes alike; anything
// else is left to it.
func FuzzRecordDecodeFast(f *testing.F) {
	for _, s := range []string{
		`{"slot":"a","task_id":"t","agent_id":"","host":"h","pid":12,"pid_start":"99","instance":"i","fence":3,"started_at":"2026-01-02T03:04:05Z","renewed_at":"2026-01-02T03:04:05.5+01:00","renewals":0,"message":"","result":"","meta":{}}`,
		`{"slot":"a","task_id":"t","agent_id":"","host":"h","pid":-1,"instance":"i","fence":0,"started_at":"0001-01-01T00:00:00Z","renewed_at":"0001-01-01T00:00:00Z","renewals":7,"message":"m","result":"success","meta":{"k":"v","k":"w"}}`,
		`{"slot":"a","task_id":"t","agent_id":"","host":"h","pid":012,"instance":"i","fence":1e3,"started_at":"x","renewed_at":"","renewals":1.0,"message":"é","result":"","meta":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := Record{Slot: "left over", PIDStart: "left over", Meta: map[string]string{"left": "over"}}
		if !got.decodeFast(data, 0) {
			return
		}
		var want Record
		if err := want.unmarshalGeneral(data); err != nil {
			t.Fatalf("%q: decoded the fast way, refused the general way: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}
