package queue

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/batonhq/baton/session"
)

// indexed is what the view reads of a task, and the queue it names.
type indexed struct {
	v     taskVersion
	queue string
}

// generalIndex is how the view reads a task without the fast way.
func generalIndex(data []byte) (indexed, error) {
	var v taskIndexView
	if err := json.Unmarshal(data, &v); err != nil {
		return indexed{}, err
	}
	d, q := v.version()
	return indexed{d, q}, nil
}

// fastIndex is how the view reads a task the fast way.
func fastIndex(data []byte) (indexed, bool) {
	d, q, ok := indexTaskFast(data)
	return indexed{d, q}, ok
}

// TestQuotedNames holds the names read without a copy to the lists.
func TestQuotedNames(t *testing.T) {
	for i, p := range Priorities {
		if quotedPriorities[i] != `"`+string(p)+`"` {
			t.Errorf("priority %d: %s, want %q", i, quotedPriorities[i], p)
		}
	}
	for i, st := range States {
		if quotedStates[i] != `"`+string(st)+`"` {
			t.Errorf("state %d: %s, want %q", i, quotedStates[i], st)
		}
	}
	if len(quotedPriorities) != len(Priorities) || len(quotedStates) != len(States) {
		t.Errorf("%d priorities and %d states quoted, for %d and %d", len(quotedPriorities), len(quotedStates), len(Priorities), len(States))
	}
}

// Every task this version writes with plain strings, in every state, is
// read the fast way into the view, as the general way reads it.
func TestIndexTaskFast_WhatThisVersionWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	plain := []string{"", "a", "alice", "T-42", "x y", "é", "~!@#$%^*()"}
	str := func() string { return plain[rng.IntN(len(plain))] }
	now := time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC)
	fast := 0
	for round := range 3000 {
		task := &Task{ID: str(), Queue: "q", Key: str(), Priority: Priorities[rng.IntN(3)], State: States[rng.IntN(len(States))],
			Attempts: rng.IntN(5), Seq: rng.Uint64N(1 << 40), AddedAt: now, UpdatedAt: now, CancelRequested: rng.IntN(4) == 0}
		if rng.IntN(2) == 0 {
			task.Labels = map[string]string{str(): str()}
		}
		if rng.IntN(2) == 0 {
			task.Payload = []byte(str())
		}
		if rng.IntN(2) == 0 {
			task.Run = &Run{Attempt: rng.IntN(3), Slot: str(), Lane: rng.IntN(2), Fence: rng.Uint64N(100), Token: rng.IntN(3) - 1,
				Host: str(), PID: rng.IntN(9), PIDStart: str(), Instance: str(), Claimed: rng.Uint64N(100), StartedAt: now}
		}
		if rng.IntN(2) == 0 {
			task.Result = &Result{Attempt: rng.IntN(3), Reason: str(), Error: str(), Slot: str(), Fence: rng.Uint64N(3), Host: str(),
				PID: rng.IntN(3), Instance: str(), Claimed: rng.Uint64N(3), EndedAt: now}
			if rng.IntN(2) == 0 {
				task.Result.StartedAt = now
				code := rng.IntN(3) - 1
				task.Result.ExitCode = &code
			}
		}
		if rng.IntN(3) == 0 {
			task.RetryAfter = Duration(time.Duration(rng.IntN(100)) * time.Second)
		}
		b, err := encodeTask(task)
		if err != nil {
			t.Fatal(err)
		}
		want, err := generalIndex(b)
		if err != nil {
			t.Fatalf("round %d: %s: %v", round, b, err)
		}
		got, ok := fastIndex(b)
		if !ok {
			t.Fatalf("round %d: not read the fast way: %s", round, b)
		}
		fast++
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: %s\n got %#v\nwant %#v", round, b, got, want)
		}
	}
}

// Whatever the fast way reads into the view, the general way reads alike.
func FuzzIndexTaskFast(f *testing.F) {
	code := 0
	for _, task := range []*Task{
		{ID: "t1", Queue: "q", Key: "k", Priority: Normal, State: StatePending},
		{ID: "t1", Queue: "q", Key: "k", Priority: High, State: StateActive, Attempts: 1, Seq: 5, Labels: map[string]string{"a": "b"},
			Run: &Run{Attempt: 1, Slot: "k", Fence: 7, Token: 3, Host: "h", PID: 9, PIDStart: "b:1", Instance: "i"}, CancelRequested: true},
		{ID: "t1", Queue: "q", Key: "k", Priority: Low, State: StateFailed, Attempts: 1, Seq: 5, RetryAfter: Duration(time.Second),
			Result: &Result{Attempt: 1, Reason: ReasonExit, ExitCode: &code, Error: "e", Slot: "k", Fence: 7, Host: "h", PID: 9, Instance: "i", Claimed: 8}},
	} {
		b, _ := encodeTask(task)
		f.Add(b)
	}
	f.Add([]byte(`{"id":"t1","queue":"q","key":"k","priority":"normal","labels":null,"payload":null,"state":"pending","attempts":0,"seq":0,"added_at":"x","updated_at":"","cancel_requested":false,"retry_after":"-1h"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := fastIndex(data)
		if !ok {
			return
		}
		want, err := generalIndex(data)
		if err != nil {
			t.Fatalf("%q: read the fast way, refused the general way: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// Tokens this version writes are read the fast way as the general way
// reads them, and whatever the fast way reads, the general way reads alike.
func FuzzDecodeTokenFast(f *testing.F) {
	now := time.Date(2026, 11, 26, 4, 5, 6, 789, time.UTC)
	for _, tok := range []*token{
		{Queue: "q", Index: 3, Task: "t1", Key: "k", Slot: "k", Fence: 9, Host: "h", PID: 7, PIDStart: "b:1", Instance: "i", Acquired: now, Renewed: now},
		{Queue: "q", Task: "t1", Acquired: now, Renewed: now.Add(time.Second)},
	} {
		b, _ := tok.encode()
		if _, ok := decodeTokenFast(b); !ok {
			f.Fatalf("%s is not read the fast way", b)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeTokenFast(data)
		if !ok {
			return
		}
		var want token
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q: read the fast way, refused the general way: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// generalTask is how UnmarshalJSON reads a task without the fast way.
func generalTask(data []byte) (Task, error) {
	var t Task
	err := t.unmarshalGeneral(data)
	return t, err
}

// Every task this version writes, in every state, is read whole the fast
// way as the general way reads it.
func TestDecodeTaskFast_WhatThisVersionWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	plain := []string{"", "a", "alice", "T-42", "x y", "é", "~!@#$%^*()"}
	str := func() string { return plain[rng.IntN(len(plain))] }
	now := time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC)
	for round := range 3000 {
		task := &Task{ID: str(), Queue: "q", Key: str(), Priority: Priorities[rng.IntN(3)], State: States[rng.IntN(len(States))],
			Attempts: rng.IntN(5), Seq: rng.Uint64N(1 << 40), AddedAt: now, UpdatedAt: now.Add(time.Second), CancelRequested: rng.IntN(4) == 0}
		if rng.IntN(2) == 0 {
			task.Labels = map[string]string{str(): str()}
		}
		if n := rng.IntN(3); n > 0 {
			task.Payload = make([]byte, rng.IntN(50)*(n-1))
			for i := range task.Payload {
				task.Payload[i] = byte(rng.IntN(256))
			}
		}
		if rng.IntN(2) == 0 {
			task.Run = &Run{Attempt: rng.IntN(3), Slot: str(), Lane: rng.IntN(2), Fence: rng.Uint64N(100), Token: rng.IntN(3) - 1,
				Host: str(), PID: rng.IntN(9), PIDStart: str(), Instance: str(), Claimed: rng.Uint64N(100), StartedAt: now}
		}
		if rng.IntN(2) == 0 {
			task.Result = &Result{Attempt: rng.IntN(3), Reason: str(), Error: str(), Slot: str(), Fence: rng.Uint64N(3), Host: str(),
				PID: rng.IntN(3), Instance: str(), Claimed: rng.Uint64N(3), EndedAt: now}
			if rng.IntN(2) == 0 {
				task.Result.StartedAt = now
				code := rng.IntN(3) - 1
				task.Result.ExitCode = &code
			}
		}
		if rng.IntN(3) == 0 {
			task.RetryAfter = Duration(time.Duration(rng.IntN(100)) * time.Second)
		}
		b, err := encodeTask(task)
		if err != nil {
			t.Fatal(err)
		}
		want, err := generalTask(b)
		if err != nil {
			t.Fatalf("round %d: %s: %v", round, b, err)
		}
		got, ok := decodeTaskFast(b)
		if !ok {
			t.Fatalf("round %d: not read the fast way: %s", round, b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: %s\n got %#v\nwant %#v", round, b, got, want)
		}
	}
}

// Whatever the fast way reads whole, the general way reads alike.
func FuzzDecodeTaskFast(f *testing.F) {
	code := 0
	for _, task := range []*Task{
		{ID: "t1", Queue: "q", Key: "k", Priority: Normal, State: StatePending, Payload: []byte{}},
		{ID: "t1", Queue: "q", Key: "k", Priority: High, State: StateActive, Attempts: 1, Seq: 5, Labels: map[string]string{"a": "b"}, Payload: []byte("xyz"),
			Run: &Run{Attempt: 1, Slot: "k", Fence: 7, Token: 3, Host: "h", PID: 9, PIDStart: "b:1", Instance: "i"}, CancelRequested: true},
		{ID: "t1", Queue: "q", Key: "k", Priority: Low, State: StateFailed, Attempts: 1, Seq: 5, RetryAfter: Duration(time.Second),
			Result: &Result{Attempt: 1, Reason: ReasonExit, ExitCode: &code, Error: "e", Slot: "k", Fence: 7, Host: "h", PID: 9, Instance: "i", Claimed: 8}},
	} {
		b, _ := encodeTask(task)
		f.Add(b)
	}
	f.Add([]byte(`{"id":"t1","queue":"q","key":"k","priority":"normal","labels":null,"payload":"eA","state":"pending","attempts":0,"seq":0,"added_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeTaskFast(data)
		if !ok {
			return
		}
		want, err := generalTask(data)
		if err != nil {
			t.Fatalf("%q: read the fast way, refused the general way: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// Key locks and their tombstones' notes as session writes them are read
// the fast way; whatever the fast way reads, encoding/json reads alike.
func FuzzScanLock(f *testing.F) {
	now := time.Date(2026, 11, 26, 4, 5, 6, 789, time.UTC)
	for _, r := range []session.Record{
		{Slot: "k", TaskID: "t1", AgentID: "queue q", Host: "h", PID: 9, PIDStart: "b:1", Instance: "i", StartedAt: now, RenewedAt: now,
			Meta: map[string]string{"queue": "q", "task": "t1", "attempt": "1"}},
		{Slot: "k", Host: "h", Fence: 7, Result: session.ResultSuccess, Message: "m", Renewals: 2,
			Meta: map[string]string{"queue": "q", "task": "t1", metaEnded: "12", "child_pid": "5"}},
		{Slot: "k"},
	} {
		b, _ := r.MarshalJSON()
		if _, ok := scanLock(b); !ok {
			f.Fatalf("%s is not read the fast way", b)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := scanLock(data)
		if !ok {
			return
		}
		var want lockFields
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q: read the fast way, refused by encoding/json: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}
