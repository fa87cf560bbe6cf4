package queue

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv"
)

// Every waiting task this version writes is viewed the fast way, as the
// general way views it.
func TestViewTaskFast_WhatThisVersionWritesAsTheGeneralWayViewsIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	plain := []string{"", "a", "alice", "T-42", "x y", "é", "漢字", "~!@#$%^*()"}
	tricky := []string{"<b>", "a&b", `q"q`, `back\slash`, "tab\t", "\u2028", "\xff"}
	str := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(2) {
			if rng.IntN(30) == 0 {
				b.WriteString(tricky[rng.IntN(len(tricky))])
			} else {
				b.WriteString(plain[rng.IntN(len(plain))])
			}
		}
		return b.String()
	}
	times := []time.Time{{}, time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))}
	fast := 0
	for round := range 3000 {
		task := Task{
			ID: str(), Queue: "q1", Key: str(), Priority: Priorities[rng.IntN(3)], State: StatePending,
			Attempts: rng.IntN(5), Seq: rng.Uint64N(1 << 40), AddedAt: times[rng.IntN(len(times))], UpdatedAt: times[rng.IntN(len(times))],
		}
		if rng.IntN(2) == 0 {
			task.Labels = map[string]string{str(): str(), "project": "p"}
		}
		if n := rng.IntN(3); n > 0 {
			task.Payload = make([]byte, rng.IntN(200)*(n-1))
			for i := range task.Payload {
				task.Payload[i] = byte(rng.IntN(256))
			}
		}
		switch rng.IntN(6) {
		case 0:
			task.State, task.Run = StateActive, &Run{Attempt: 1, Slot: "s", Fence: 9}
		case 1:
			task.CancelRequested = true
		}
		b, err := task.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var want taskView
		if err := jsonrec.View(b, &want); err != nil {
			t.Fatalf("round %d: %s: %v", round, b, err)
		}
		var got Task
		if !viewTaskFast(b, &got) {
			if task.Run == nil && !task.CancelRequested && !strings.Contains(string(b), `\`) {
				t.Errorf("round %d: not viewed the fast way: %s", round, b)
			}
			continue
		}
		fast++
		if !reflect.DeepEqual(got, want.task()) {
			t.Fatalf("round %d: %s\n got %#v\nwant %#v", round, b, got, want.task())
		}
	}
	if fast < 1500 {
		t.Errorf("only %d of 3000 tasks viewed the fast way", fast)
	}
}

// Whatever the fast way views, the general way views alike.
func FuzzViewTaskFast(f *testing.F) {
	for _, s := range []string{
		`{"id":"t1","queue":"q1","key":"alice","priority":"normal","labels":{},"payload":"aGk=","state":"pending","attempts":0,"seq":12,"added_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05.5+01:00"}`,
		`{"id":"t1","queue":"q1","key":"","priority":"x","labels":null,"payload":null,"state":"done","attempts":-1,"seq":0,"added_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z"}`,
		`{"id":"t1","queue":"q1","key":"k","priority":"high","labels":{"a":"b","a":"c"},"payload":"","state":"pending","attempts":01,"seq":1e2,"added_at":"x","updated_at":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := Task{ID: "left over", Payload: []byte("left over"), Labels: map[string]string{"left": "over"}}
		if !viewTaskFast(data, &got) {
			if !reflect.DeepEqual(got, Task{}) {
				t.Fatalf("%q: not viewed the fast way, but left %#v", data, got)
			}
			return
		}
		var want taskView
		if err := jsonrec.View(data, &want); err != nil {
			t.Fatalf("%q: viewed the fast way, refused the general way: %v", data, err)
		}
		if !reflect.DeepEqual(got, want.task()) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want.task())
		}
	})
}

// A status's line of a task is the task's own fields as viewTask reads
// them, whichever way it was decoded; the fast way takes what this version
// writes of a task that does not run, and leaves the rest (and anything
// viewTask refuses) to viewTask.
func TestLineOf_TheFieldsViewTaskReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	now := time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC)
	ids := []string{"t1", "t-2", "é", "a\"b", ""}
	fast := 0
	for round := range 3000 {
		task := Task{ID: ids[rng.IntN(len(ids))], Queue: []string{"q", "q", "other"}[rng.IntN(3)], Key: []string{"k", "", "k<1>", "漢"}[rng.IntN(4)],
			Priority: []Priority{High, Normal, Low, "", "urgent"}[rng.IntN(5)],
			State:    []State{StatePending, StateFailed, StateDone, StateDead, StateCancelled, StateActive, "lost"}[rng.IntN(7)],
			Attempts: rng.IntN(3), AddedAt: now.Add(time.Duration(rng.IntN(1000)) * time.Second), UpdatedAt: now}
		if rng.IntN(3) == 0 {
			task.Labels = map[string]string{"a": "b"}
		}
		if task.State == StateActive && rng.IntN(2) == 0 {
			task.Run = &Run{Slot: "s", Fence: 3}
		}
		b, err := task.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		key := "q.task." + task.ID
		if rng.IntN(4) == 0 {
			key = "q.task.x"
		}
		e := kv.Entry{Key: key, Value: b, Revision: 9, Created: now}
		want, werr := viewTask("q", e)
		var l taskLine
		if taskLineFast("q", e, &l) {
			fast++
			if werr != nil {
				t.Fatalf("round %d: %s under %s: the fast way took what viewTask refuses (%v)", round, b, key, werr)
			}
			if l.task != nil || l.id != want.ID || l.key != want.Key || l.priority != want.Priority || l.state != want.State || !l.addedAt.Equal(want.AddedAt) || l.addedAt != want.AddedAt {
				t.Fatalf("round %d: %s: line %+v, viewTask %+v", round, b, l, want)
			}
		}
		got, gerr := lineOf("q", e, false)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("round %d: %s: lineOf: %v, viewTask: %v", round, b, gerr, werr)
		}
		if werr == nil && (got.id != want.ID || got.key != want.Key || got.priority != want.Priority || got.state != want.State || got.addedAt != want.AddedAt) {
			t.Fatalf("round %d: %s: line %+v, viewTask %+v", round, b, got, want)
		}
	}
	if fast < 300 {
		t.Errorf("only %d of 3000 lines decoded the fast way", fast)
	}
}

// Whatever the fast way takes, viewTask takes alike.
func FuzzTaskLineFast(f *testing.F) {
	for _, s := range []string{
		`{"id":"t1","queue":"q","key":"alice","priority":"normal","labels":{},"payload":"aGk=","state":"pending","attempts":0,"seq":12,"added_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05.5+01:00"}`,
		`{"id":"t1","queue":"q","key":"","priority":"","labels":null,"payload":null,"state":"done","attempts":-1,"seq":0,"added_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z"}`,
		`{"id":"t1","queue":"q","key":"k","priority":"high","labels":{"a":"b","a":"c"},"payload":"","state":"active","attempts":1,"seq":1,"added_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`,
	} {
		f.Add([]byte(s), "q.task.t1")
	}
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		e := kv.Entry{Key: key, Value: data, Revision: 3}
		var l taskLine
		if !taskLineFast("q", e, &l) {
			return
		}
		want, err := viewTask("q", e)
		if err != nil {
			t.Fatalf("%q under %q: taken the fast way, refused by viewTask: %v", data, key, err)
		}
		if l.id != want.ID || l.key != want.Key || l.priority != want.Priority || l.state != want.State || l.addedAt != want.AddedAt {
			t.Fatalf("%q: line %+v, viewTask %+v", data, l, want)
		}
	})
}

// A waiting task, an ended one (with its result) and a failed one waiting
// out its retry delay are status lines the fast way, and as viewTask
// reads them; a running one is not.
func TestTaskLineFast_TakesWaitingAndEndedTasks(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		task Task
		fast bool
	}{
		{Task{State: StatePending}, true},
		{Task{State: StateDone, Attempts: 1, Result: &Result{Attempt: 1, Reason: "success", EndedAt: now}}, true},
		{Task{State: StateFailed, Attempts: 1, Result: &Result{Attempt: 1, Reason: "failed", EndedAt: now}, RetryAfter: Duration(time.Second)}, true},
		{Task{State: StateCancelled, CancelRequested: true}, true},
		{Task{State: StateActive, Attempts: 1, Run: &Run{Attempt: 1, Slot: "s", Fence: 4, Instance: "i", Claimed: 2}}, false},
	} {
		tk := c.task
		tk.ID, tk.Queue, tk.Key, tk.Priority, tk.Seq, tk.AddedAt, tk.UpdatedAt = "t1", "q", "alice", High, 3, now, now
		b, err := encodeTask(&tk)
		if err != nil {
			t.Fatal(err)
		}
		e := kv.Entry{Key: "q.task.t1", Value: b, Revision: 3}
		var l taskLine
		if got := taskLineFast("q", e, &l); got != c.fast {
			t.Errorf("%s: taken the fast way %v, want %v: %s", tk.State, got, c.fast, b)
			continue
		}
		if !c.fast {
			continue
		}
		want, err := viewTask("q", e)
		if err != nil {
			t.Fatalf("%s: %v", tk.State, err)
		}
		if l.id != want.ID || l.key != want.Key || l.priority != want.Priority || l.state != want.State || l.addedAt != want.AddedAt {
			t.Errorf("%s: line %+v, viewTask %+v", tk.State, l, want)
		}
	}
}
