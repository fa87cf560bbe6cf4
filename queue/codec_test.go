package queue

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/internal/jsonrec/jsonrectest"
	"github.com/batonhq/baton/kv"
)

// The codecs written from the records' fields write and read every one of
// them as encoding/json does.
func TestCodecs(t *testing.T) {
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Task]{
		Encode: (*Task).encodeFast,
		Decode: func(v *Task, b []byte) bool { return v.decodeFast(b, 0) },
		Known:  taskKnown,
	})
	jsonrectest.CheckCodec(t, jsonrectest.Codec[token]{
		Encode: (*token).encodeFast,
		Decode: func(v *token, b []byte) bool { return v.decodeFast(b, 0) },
		Known:  tokenKnown,
	})
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Config]{
		Encode: (*Config).encodeFast,
		Decode: func(v *Config, b []byte) bool { return v.decodeFast(b, 0) },
		Known:  configKnown,
	})
	jsonrectest.CheckCodec(t, jsonrectest.Codec[presence]{
		Encode: (*presence).encodeFast,
		Decode: func(v *presence, b []byte) bool { return v.decodeFast(b, 0) },
		Known:  presenceKnown,
	})
	jsonrectest.CheckCodec(t, jsonrectest.Codec[inbox]{
		Encode: (*inbox).encodeFast,
		Decode: func(v *inbox, b []byte) bool { return v.decodeFast(b, 0) },
		Known:  inboxKnown,
	})
}

// The general ways the fast ones are held to.
func generalTask(t *Task, b []byte) error { return t.unmarshalGeneral(b) }

func generalView(t *Task, b []byte) error { return jsonrec.ViewWithoutBytes(b, (*taskFields)(t)) }

func generalIndex(v *indexFields, b []byte) error {
	var t Task
	err := generalView(&t, b)
	v.from(&t)
	return err
}

func generalStatus(v *statusFields, b []byte) error {
	var t Task
	err := generalView(&t, b)
	v.from(&t)
	return err
}

func fastTask(t *Task, b []byte) bool { return t.decodeFast(b, 0) }

func fastView(t *Task, b []byte) bool { return t.decodeFast(b, taskFieldPayload) }

// checkDecoders holds every fast decoder of a task record to its general
// way, on data.
func checkDecoders(t *testing.T, data []byte) {
	t.Helper()
	jsonrectest.CheckFastDecode(t, data, fastTask, generalTask)
	jsonrectest.CheckFastDecode(t, data, fastView, generalView)
	jsonrectest.CheckFastDecode(t, data, (*indexFields).decodeFast, generalIndex)
	jsonrectest.CheckFastDecode(t, data, (*statusFields).decodeFast, generalStatus)
}

// taskGen makes tasks in every state, with every field used, its strings
// plain but for one in tricky of them.
type taskGen struct {
	rng    *rand.Rand
	tricky int
}

func (g *taskGen) str() string {
	plain := []string{"", "a", "alice", "T-42", "x y", "é", "漢字", "~!@#$%^*()"}
	tricky := []string{"<b>", "a&b", `q"q`, `back\slash`, "tab\t", "\u2028", "\xff"}
	if g.tricky > 0 && g.rng.IntN(g.tricky) == 0 {
		return tricky[g.rng.IntN(len(tricky))]
	}
	return plain[g.rng.IntN(len(plain))]
}

func (g *taskGen) task() *Task {
	rng := g.rng
	times := []time.Time{{}, time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))}
	tm := func() time.Time { return times[rng.IntN(len(times))] }
	task := &Task{ID: g.str(), Queue: "q", Key: g.str(), Priority: Priorities[rng.IntN(3)], State: States[rng.IntN(len(States))],
		Attempts: rng.IntN(5), Seq: rng.Uint64N(1 << 40), AddedAt: tm(), UpdatedAt: tm(), CancelRequested: rng.IntN(4) == 0}
	if rng.IntN(2) == 0 {
		task.Labels = map[string]string{g.str(): g.str(), "project": "p"}
	}
	if n := rng.IntN(3); n > 0 {
		task.Payload = make([]byte, rng.IntN(100)*(n-1))
		for i := range task.Payload {
			task.Payload[i] = byte(rng.IntN(256))
		}
	}
	if rng.IntN(2) == 0 {
		task.Run = &Run{Attempt: rng.IntN(3), Slot: g.str(), Lane: rng.IntN(2), Fence: rng.Uint64N(100), Token: rng.IntN(3) - 1,
			Host: g.str(), PID: rng.IntN(9), PIDStart: g.str(), Instance: g.str(), Claimed: rng.Uint64N(100), StartedAt: tm()}
	}
	if rng.IntN(2) == 0 {
		task.Result = &Result{Attempt: rng.IntN(3), Reason: g.str(), Error: g.str(), Slot: g.str(), Fence: rng.Uint64N(3), Host: g.str(),
			PID: rng.IntN(3), Instance: g.str(), Claimed: rng.Uint64N(3), EndedAt: tm()}
		if rng.IntN(2) == 0 {
			task.Result.StartedAt = tm()
			code := rng.IntN(3) - 1
			task.Result.ExitCode = &code
		}
	}
	if rng.IntN(3) == 0 {
		task.RetryAfter = Duration(time.Duration(rng.IntN(100)) * 1500 * time.Millisecond)
	}
	return task
}

// Every task this version writes is written as encoding/json writes it,
// and read the fast way, whole and by each view, as the general way reads
// it; with strings that need no escapes, the fast way always takes it.
func TestTaskCodec_WhatThisVersionWrites(t *testing.T) {
	g := &taskGen{rng: rand.New(rand.NewPCG(7, 8)), tricky: 40}
	for round := range 3000 {
		task := g.task()
		b, err := encodeTask(task)
		if err != nil {
			t.Fatal(err)
		}
		c := task.clone()
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		if want, err := json.Marshal(taskFields(*c)); err != nil || string(b) != string(want) {
			t.Fatalf("round %d: wrote\n%s\nencoding/json (%v)\n%s", round, b, err, want)
		}
		checkDecoders(t, b)
		if strings.Contains(string(b), `\`) {
			continue
		}
		var whole Task
		var ix indexFields
		var st statusFields
		if !whole.decodeFast(b, 0) || !ix.decodeFast(b) || !st.decodeFast(b) {
			t.Fatalf("round %d: not read the fast way: %s", round, b)
		}
	}
}

// A status's line of a task is the task's own fields as viewTask reads
// them, however it was decoded; it is only the fields (no task) for a task
// that does not run (written without escapes), and anything viewTask
// refuses, lineOf refuses.
func TestLineOf_TheFieldsViewTaskReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	now := time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC)
	ids := []string{"t1", "t-2", "é", "a\"b", ""}
	fieldsOnly := 0
	for round := range 3000 {
		task := Task{ID: ids[rng.IntN(len(ids))], Queue: []string{"q", "q", "other"}[rng.IntN(3)], Key: []string{"k", "", "k<1>", "漢"}[rng.IntN(4)],
			Priority: []Priority{High, Normal, Low, "", "urgent"}[rng.IntN(5)],
			State:    []State{StatePending, StateFailed, StateDone, StateDead, StateCancelled, StateActive, "lost"}[rng.IntN(7)],
			Attempts: rng.IntN(3), AddedAt: now.Add(time.Duration(rng.IntN(1000)) * time.Second), UpdatedAt: now}
		if rng.IntN(3) == 0 {
			task.Labels = map[string]string{"a": "b"}
		}
		if rng.IntN(3) == 0 {
			task.Result = &Result{Attempt: 1, Reason: ReasonExit, EndedAt: now}
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
		got, gerr := lineOf("q", e, false)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("round %d: %s: lineOf: %v, viewTask: %v", round, b, gerr, werr)
		}
		if werr != nil {
			continue
		}
		if got.id != want.ID || got.key != want.Key || got.priority != want.Priority || got.state != want.State || got.addedAt != want.AddedAt {
			t.Fatalf("round %d: %s: line %+v, viewTask %+v", round, b, got, want)
		}
		if got.task == nil && want.State == StateActive || got.task != nil && want.State != StateActive && !strings.Contains(string(b), `\`) {
			t.Fatalf("round %d: %s: line of a task in state %s keeps the task: %v", round, b, want.State, got.task != nil)
		}
		if got.task == nil {
			fieldsOnly++
		}
	}
	if fieldsOnly < 300 {
		t.Errorf("only %d of 3000 lines were the fields alone", fieldsOnly)
	}
}

// Whatever a fast decoder of a task takes, whole or by a view, it reads as
// the general way does.
func FuzzTaskDecoders(f *testing.F) {
	g := &taskGen{rng: rand.New(rand.NewPCG(1, 2))}
	for range 6 {
		b, _ := encodeTask(g.task())
		f.Add(b)
	}
	for _, s := range []string{
		`{"id":"t1","queue":"q1","key":"alice","priority":"normal","labels":{},"payload":"aGk=","state":"pending","attempts":0,"seq":12,"added_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05.5+01:00"}`,
		`{"id":"t1","queue":"q1","key":"","priority":"x","labels":null,"payload":null,"state":"done","attempts":-1,"seq":0,"added_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z"}`,
		`{"id":"t1","queue":"q1","key":"k","priority":"high","labels":{"a":"b","a":"c"},"payload":"","state":"pending","attempts":01,"seq":1e2,"added_at":"x","updated_at":""}`,
		`{"id":"t1","queue":"q","key":"k","priority":"normal","labels":null,"payload":"not base64!","state":"pending","attempts":0,"seq":0,"added_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z","cancel_requested":false,"retry_after":"-1h"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDecoders)
}

// What the general decoder reads of anything, the fast encoder writes, where
// it writes it, as encoding/json writes it.
func FuzzTaskEncode(f *testing.F) {
	g := &taskGen{rng: rand.New(rand.NewPCG(3, 4)), tricky: 3}
	for range 4 {
		b, _ := json.Marshal(taskFields(*g.task()))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		task, err := decodeTask("q", kv.Entry{Key: "q.task.t", Value: rec, Revision: 7})
		if err != nil || len(task.unknown) > 0 {
			return
		}
		if task.Labels == nil {
			task.Labels = map[string]string{}
		}
		fast, ok := task.encodeFast()
		if !ok {
			return
		}
		if want, err := json.Marshal(taskFields(*task)); err != nil || string(fast) != string(want) {
			t.Fatalf("wrote\n%s\nencoding/json (%v)\n%s", fast, err, want)
		}
	})
}

// Whatever the fast decoders of a token and a config take, they read as
// encoding/json does.
func FuzzTokenAndConfigDecodeFast(f *testing.F) {
	now := time.Date(2026, 11, 26, 4, 5, 6, 789, time.UTC)
	for _, tok := range []*token{
		{Queue: "q", Index: 3, Task: "t1", Key: "k", Slot: "k", Fence: 9, Host: "h", PID: 7, PIDStart: "b:1", Instance: "i", Acquired: now, Renewed: now},
		{Queue: "q", Task: "t1", Acquired: now, Renewed: now.Add(time.Second)},
	} {
		b, _ := tok.encode()
		f.Add(b)
	}
	cfg := DefaultConfig("q")
	cfg.CreatedAt = now
	b, _ := cfg.MarshalJSON()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		jsonrectest.CheckFastDecode(t, data, func(v *token, b []byte) bool { return v.decodeFast(b, 0) },
			func(v *token, b []byte) error { return json.Unmarshal(b, v) })
		jsonrectest.CheckFastDecode(t, data, func(v *Config, b []byte) bool { return v.decodeFast(b, 0) }, (*Config).unmarshalGeneral)
	})
}

// Tokens are written member by member as encoding/json writes them, and
// the general way where they cannot be.
func TestTokenEncode_AsEncodingJSON(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 5, 6, 789, time.UTC)
	for _, tok := range []*token{
		{Queue: "q", Index: 3, Task: "t1", Key: "k", Slot: "k", Fence: 9, Host: "h", PID: 7, PIDStart: "b:1", Instance: "i", Acquired: now, Renewed: now},
		{Queue: "q", Task: "<t>", Key: strings.Repeat("é", 3), Acquired: now, Renewed: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		got, gerr := tok.encode()
		want, werr := json.Marshal(tok)
		if string(got) != string(want) || (gerr == nil) != (werr == nil) {
			t.Errorf("%+v: wrote %s (%v), encoding/json %s (%v)", tok, got, gerr, want, werr)
		}
	}
}

// A status line of a waiting task costs one allocation, its strings: a
// status reads 100k of them.
func TestLineOf_OneAllocationForAWaitingTask(t *testing.T) {
	now := time.Date(2026, 11, 25, 16, 0, 0, 0, time.UTC)
	b, err := encodeTask(&Task{ID: "t000001", Queue: "q", Key: "alice", Priority: Normal, State: StatePending, Labels: map[string]string{"p": "x"},
		Payload: []byte("hello"), AddedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	e := kv.Entry{Key: "q.task.t000001", Value: b, Revision: 9, Created: now}
	var l statusLine
	if allocs := testing.AllocsPerRun(200, func() { l, _ = lineOf("q", e, false) }); allocs > 1 || l.id != "t000001" || l.key != "alice" || l.task != nil {
		t.Errorf("lineOf took %v allocations, want 1 (%+v)", allocs, l)
	}
}
