package main

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
)

// delayedTask is the records of a task added by revision seq at created
// (with run_at or delay), claimed by revision claim at claimed (0: never;
// then it stays pending) and done 300 ms later.
func delayedTask(id string, seq uint64, created time.Time, runAt time.Time, delay time.Duration, claim uint64, claimed time.Time) []qrev {
	key := "fq.task." + id
	revs := []qrev{{key: key, rev: seq, at: created, live: true,
		task: &taskRev{id: id, state: "pending", seq: seq, runAt: runAt, delay: delay}}}
	if claim == 0 {
		return revs
	}
	return append(revs,
		qrev{key: key, rev: claim, at: claimed, live: true, task: &taskRev{id: id, state: "active", seq: seq, claimed: claim, runAt: runAt, attempts: 1}},
		qrev{key: key, rev: claim + 1, at: claimed.Add(300 * time.Millisecond), live: true, task: &taskRev{id: id, state: "done", seq: seq, claimed: claim, runAt: runAt, attempts: 1}})
}

func TestJudgeDelayed_StartsAfterTheirTimePass(t *testing.T) {
	tasks := map[string][]qrev{
		"in":   delayedTask("in", 100, sec(1), time.Time{}, 5*time.Second, 200, sec(6.01)),
		"at":   delayedTask("at", 110, sec(1.5), sec(8), 0, 210, sec(8.02)),
		"past": delayedTask("past", 120, sec(2), sec(-3), 0, 130, sec(2.01)),
	}
	adds := []delayedAdd{
		{id: "in", in: 5 * time.Second, rev: 100, from: sec(0.9), to: sec(1.1)},
		{id: "at", at: sec(8), rev: 110, from: sec(1.4), to: sec(1.6)},
		{id: "past", at: sec(-3), rev: 120, from: sec(1.9), to: sec(2.1)},
	}
	v := viewOf(tasks)
	cmd := map[string][]time.Time{"in": {sec(6.05)}, "at": {sec(8.06)}}
	c := judgeDelayed(adds, tasks, v, startsOf(tasks, v, cmd), nil)
	if len(c.violations) != 0 {
		t.Fatalf("violations %q", c.violations)
	}
	if c.added != 3 || c.at != 2 || c.in != 1 || c.started != 3 || c.early != 0 || c.never != 0 || c.exact != 3 {
		t.Errorf("counts %+v", c)
	}
	if len(c.lateness) != 3 || c.lateness[0] != 10*time.Millisecond {
		t.Errorf("lateness %v; want 10ms first", c.lateness)
	}
}

func TestJudgeDelayed_AnEarlyStartIsCaught(t *testing.T) {
	// in: added at 1 s with --in 5s, its claim at 5.8 s. at: --at 8 s,
	// its command reported its start at 7.9 s (its claim not seen: the
	// done revision at 8.3 s only bounds it, and is not early). in2: its
	// adding revision not seen; the revision before it came at 3 s, so
	// it may start from 8 s at the earliest: its command at 7.5 s is early.
	tasks := map[string][]qrev{
		"in": delayedTask("in", 100, sec(1), time.Time{}, 5*time.Second, 200, sec(5.8)),
		"at": delayedTask("at", 110, sec(1.5), sec(8), 0, 210, sec(8))[2:],
		"x":  delayedTask("x", 190, sec(3), time.Time{}, 0, 0, time.Time{}),
	}
	adds := []delayedAdd{
		{id: "in", in: 5 * time.Second, rev: 100, from: sec(0.9), to: sec(1.1)},
		{id: "at", at: sec(8), rev: 110, from: sec(1.4), to: sec(1.6)},
		{id: "in2", in: 5 * time.Second, rev: 195, from: sec(2.9), to: sec(3.2)},
	}
	v := viewOf(tasks)
	cmd := map[string][]time.Time{"at": {sec(7.9)}, "in2": {sec(7.5)}}
	c := judgeDelayed(adds, tasks, v, startsOf(tasks, v, cmd), nil)
	if c.early != 3 || len(c.violations) != 3 {
		t.Fatalf("early %d, violations %q; want 3", c.early, c.violations)
	}
	for i, w := range []string{"task in started at", "task at started at", "task in2 started at"} {
		if !strings.Contains(c.violations[i], w) {
			t.Errorf("violation %d: %q; want %q", i, c.violations[i], w)
		}
	}
	if !strings.Contains(c.violations[2], "which came no earlier") || c.exact != 2 {
		t.Errorf("in2 judged against an exact time: %q (exact %d)", c.violations[2], c.exact)
	}
}

func TestJudgeDelayed_NeverStartedAndAsked(t *testing.T) {
	tasks := map[string][]qrev{
		"idle":  delayedTask("idle", 100, sec(1), time.Time{}, 3*time.Second, 0, time.Time{}),
		"gone":  nil,
		"wrong": delayedTask("wrong", 110, sec(2), time.Time{}, 4*time.Second, 200, sec(9)),
	}
	adds := []delayedAdd{
		{id: "idle", in: 3 * time.Second, rev: 100, from: sec(0.9), to: sec(1.1)},
		{id: "gone", in: 3 * time.Second, rev: 105, from: sec(1.2), to: sec(1.3)},
		{id: "wrong", in: 5 * time.Second, rev: 110, from: sec(1.9), to: sec(2.1)},
	}
	v := viewOf(tasks)
	c := judgeDelayed(adds, tasks, v, startsOf(tasks, v, nil), map[string]bool{"gone": true})
	if c.never != 1 || c.started != 1 {
		t.Errorf("never %d, started %d; want 1 and 1 (the removed task is neither)", c.never, c.started)
	}
	if len(c.violations) != 1 || !strings.Contains(c.violations[0], "added --in 5s, holds delay 4s") {
		t.Errorf("violations %q; want the delay not as asked", c.violations)
	}
}

// TestDecodeQrev_ReadsTheRecordsBatonWrites decodes a task and a rate
// record as the queue writes them.
func TestDecodeQrev_ReadsTheRecordsBatonWrites(t *testing.T) {
	task := queue.Task{ID: "tick-20260304T050607Z", Queue: "fq", Key: "qs", Priority: queue.Normal, State: queue.StateActive,
		Attempts: 2, RunAt: qt0, Schedule: "tick", Delay: queue.Duration(3 * time.Second),
		Run: &queue.Run{Attempt: 2, Slot: "qs", Fence: 9, Token: 1}}
	data, err := task.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	r := decodeQrev(kv.Entry{Key: "fq.task." + task.ID, Value: data, Revision: 42, Created: sec(1), Op: kv.OpPut})
	want := taskRev{id: task.ID, key: "qs", schedule: "tick", state: "active", attempts: 2, seq: 42, claimed: 42, runAt: qt0, delay: 3 * time.Second}
	if r.bad || r.task == nil || *r.task != want {
		t.Fatalf("decoded %+v; want %+v", r.task, want)
	}
	rate := decodeQrev(kv.Entry{Key: "fr.rate", Value: []byte(`{"queue":"fr","log":[{"at":"2026-03-04T05:06:07.5Z","n":3}],"last":2}`),
		Revision: 43, Created: sec(2), Op: kv.OpPut})
	if rate.bad || rate.rate == nil || rate.rate.last != 2 || len(rate.rate.log) != 1 || !rate.rate.log[0].at.Equal(sec(0.5)) || rate.rate.log[0].n != 3 {
		t.Fatalf("decoded %+v", rate.rate)
	}
	krate := decodeQrev(kv.Entry{Key: "fr.krate.r1", Value: []byte(`{"queue":"fr","key":"r1","log":[],"last":4}`), Revision: 46, Created: sec(3), Op: kv.OpPut})
	if krate.bad || krate.rate == nil || krate.rate.last != 4 {
		t.Fatalf("a key's rate record decoded %+v", krate.rate)
	}
	if g := decodeQrev(kv.Entry{Key: "fr.rate", Value: []byte("\x00junk"), Revision: 44, Op: kv.OpPut}); !g.bad {
		t.Error("garbage decoded")
	}
	if d := decodeQrev(kv.Entry{Key: "fq.task.x", Revision: 45, Op: kv.OpDelete}); d.live || d.bad {
		t.Errorf("a tombstone: %+v", d)
	}
}
