package queue

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
)

// checkTaskJSON fails t unless t's member-by-member writing, where it
// writes the task at all, is byte for byte encoding/json's.
func checkTaskJSON(t *testing.T, task *Task) bool {
	t.Helper()
	c := task.clone()
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	fast, ok := c.appendJSON()
	if !ok {
		return false
	}
	general, err := json.Marshal(taskFields(*c))
	if err != nil || string(fast) != string(general) {
		t.Fatalf("written member by member\n%s\nencoding/json (%v)\n%s", fast, err, general)
	}
	return true
}

// Tasks in every state, as a worker, Add and the operator verbs write
// them, are written member by member, as encoding/json writes them.
func TestTaskAppendJSON_AsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	plain := []string{"", "a", "alice", "T-42", "x y", "~!@#$%^*()", "é", "<b>", `q"q`}
	str := func() string { return plain[rng.IntN(len(plain))] }
	times := []time.Time{{}, time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))}
	tm := func() time.Time { return times[rng.IntN(len(times))] }
	fast := 0
	for range 3000 {
		task := &Task{ID: str(), Queue: "q", Key: str(), Priority: Priorities[rng.IntN(3)], State: States[rng.IntN(len(States))],
			Attempts: rng.IntN(5) - 1, Seq: rng.Uint64N(1 << 40), AddedAt: tm(), UpdatedAt: tm(), CancelRequested: rng.IntN(3) == 0}
		if rng.IntN(2) == 0 {
			task.Labels = map[string]string{str(): str(), "project": "p", "z": str()}
		}
		if n := rng.IntN(3); n > 0 {
			task.Payload = make([]byte, rng.IntN(100)*(n-1))
			for i := range task.Payload {
				task.Payload[i] = byte(rng.IntN(256))
			}
		}
		if rng.IntN(2) == 0 {
			task.Run = &Run{Attempt: rng.IntN(3), Slot: str(), Lane: rng.IntN(2), Fence: rng.Uint64N(100), Token: rng.IntN(3) - 1,
				Host: str(), PID: rng.IntN(9), PIDStart: str(), Instance: str(), Claimed: rng.Uint64N(100), StartedAt: tm()}
		}
		if rng.IntN(2) == 0 {
			task.Result = &Result{Attempt: rng.IntN(3), Reason: str(), Error: str(), Slot: str(), Fence: rng.Uint64N(3), Host: str(),
				PID: rng.IntN(3), Instance: str(), Claimed: rng.Uint64N(3), StartedAt: tm(), EndedAt: tm()}
			if rng.IntN(2) == 0 {
				code := rng.IntN(3)
				task.Result.ExitCode = &code
			}
		}
		if rng.IntN(3) == 0 {
			task.RetryAfter = Duration(time.Duration(rng.IntN(3)) * 1500 * time.Millisecond)
		}
		if checkTaskJSON(t, task) {
			fast++
		}
	}
	if fast < 300 {
		t.Errorf("only %d of 3000 tasks written member by member", fast)
	}
	// What a worker writes, with plain names, always is.
	code := 0
	for _, task := range []*Task{
		{ID: "t1", Queue: "q", Key: "k", Priority: Normal, State: StatePending, AddedAt: times[1], UpdatedAt: times[1]},
		{ID: "t1", Queue: "q", Key: "k", Priority: Normal, State: StateActive, Attempts: 1, Seq: 5, AddedAt: times[1], UpdatedAt: times[1],
			Run: &Run{Attempt: 1, Slot: "k", Fence: 7, Token: 3, Host: "h", PID: 9, PIDStart: "b:1", Instance: "i", StartedAt: times[1]}},
		{ID: "t1", Queue: "q", Key: "k", Priority: Normal, State: StateDone, Attempts: 1, Seq: 5, AddedAt: times[1], UpdatedAt: times[1],
			Result: &Result{Attempt: 1, Reason: ReasonExit, ExitCode: &code, Slot: "k", Fence: 7, Host: "h", PID: 9, Instance: "i", Claimed: 8, StartedAt: times[1], EndedAt: times[1]}},
	} {
		if !checkTaskJSON(t, task) {
			t.Errorf("%+v is not written member by member", task)
		}
	}
}

// FuzzTaskAppendJSON: a task decoded from anything is written member by
// member, where it is, as encoding/json writes it.
func FuzzTaskAppendJSON(f *testing.F) {
	code := 1
	for _, task := range []*Task{
		{ID: "t", Queue: "q", Key: "k", Priority: High, Labels: map[string]string{"p": "1"}, Payload: []byte("x"),
			State: StateActive, Attempts: 2, Seq: 3, Run: &Run{Attempt: 2, Slot: "k", Fence: 9, Claimed: 4},
			Result: &Result{Reason: ReasonLost, Claimed: 2, ExitCode: &code}, RetryAfter: Duration(time.Second)},
	} {
		data, _ := json.Marshal(taskFields(*task))
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		task, err := decodeTask("q", kv.Entry{Key: "q.task.t", Value: rec, Revision: 7})
		if err != nil || len(task.unknown) > 0 {
			return
		}
		checkTaskJSON(t, task)
	})
}

// Tokens are written member by member as encoding/json writes them, and
// the general way where they cannot be.
func TestTokenEncode_AsEncodingJSON(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 5, 6, 789, time.UTC)
	for _, tok := range []*token{
		{Queue: "q", Index: 3, Task: "t1", Key: "k", Slot: "k", Fence: 9, Host: "h", PID: 7, PIDStart: "b:1", Instance: "i", Acquired: now, Renewed: now},
		{Queue: "q", Task: "t1", Acquired: now, Renewed: now.Add(time.Second)},
		{Queue: "q", Task: "<t>", Key: strings.Repeat("é", 3), Acquired: now, Renewed: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		got, gerr := tok.encode()
		want, werr := json.Marshal(tok)
		if string(got) != string(want) || (gerr == nil) != (werr == nil) {
			t.Errorf("%+v: wrote %s (%v), encoding/json %s (%v)", tok, got, gerr, want, werr)
		}
	}
}
