package queue

import (
	"bytes"
	"errors"

	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// A worker's index reads every version of every task of its queue, and a
// status reads every task: each keeps a few of a task's fields. Each such
// view is a struct of the fields it keeps; recgen writes its decoder from
// Task's layout (codec_gen.go), reading the fields it does not keep as
// strictly without keeping them, and from, which takes them from a Task
// decoded the general way.

// indexFields is what a worker's index keeps of a task record.
//
//jsonrec:view Task
type indexFields struct {
	ID              string
	Queue           string
	Key             string
	Priority        Priority
	State           State
	Attempts        int
	Seq             uint64
	Run             *Run
	Result          *Result
	CancelRequested bool
	RetryAfter      Duration
	RunAt           time.Time
	Delay           Duration
	After           []string
	Touches         []string
	Space           string
}

// indexTask decodes what the index keeps of a task entry, checked as
// decodeTask checks a task.
func indexTask(q string, e kv.Entry) (taskVersion, error) {
	if t := bytes.TrimLeft(e.Value, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return taskVersion{}, errors.New("the record is not a JSON object")
	}
	var v indexFields
	if !v.decodeFast(e.Value) {
		var t Task
		if err := jsonrec.ViewWithoutBytes(e.Value, (*taskFields)(&t)); err != nil {
			return taskVersion{}, err
		}
		v.from(&t)
	}
	if err := checkFields(q, e, v.ID, v.Queue, v.Priority, v.State, v.Run != nil); err != nil {
		return taskVersion{}, err
	}
	d := taskVersion{id: v.ID, key: v.Key, priority: v.Priority, state: v.State, attempts: v.Attempts, seq: v.Seq,
		run: v.Run, cancel: v.CancelRequested, retryAfter: v.RetryAfter, runAt: v.RunAt, delay: v.Delay, after: v.After, touches: v.Touches, space: v.Space, rev: e.Revision, written: e.Created}
	settleRevision(e.Revision, &d.seq, d.run)
	switch {
	case d.run != nil:
		d.claimed = d.run.Claimed
	case v.Result != nil:
		d.claimed = v.Result.Claimed
	}
	if v.Result != nil {
		d.endFence, d.endReason = v.Result.Fence, v.Result.Reason
	}
	return d, nil
}

// statusFields is what a queue's status keeps of a task it does not list.
//
//jsonrec:view Task
type statusFields struct {
	ID       string
	Queue    string
	Key      string
	Priority Priority
	State    State
	AddedAt  time.Time
	RunAt    time.Time
	Delay    Duration
}

// statusLine is what a queue's status sums up of a task: the task itself
// when it runs, or when the status lists every task; else what
// statusFields keeps of it.
type statusLine struct {
	task     *Task // nil: only the fields below were decoded
	id, key  string
	priority Priority
	state    State
	addedAt  time.Time
	// notBefore is a pending task's Task.NotBefore.
	notBefore time.Time
	// keyCfg is, instead of a task, a key's settings; sched a schedule.
	keyCfg *KeyConfig
	sched  *Schedule
}

// lineOf decodes the task in e, of queue q, for a status: only its
// statusFields unless full or it runs, else as decodeTask (full) or
// viewTask do. It fails where they fail.
func lineOf(q string, e kv.Entry, full bool) (statusLine, error) {
	if !full {
		var v statusFields
		if v.decodeFast(e.Value) && v.State != StateActive && checkFields(q, e, v.ID, v.Queue, v.Priority, v.State, false) == nil {
			t := Task{RunAt: v.RunAt, Delay: v.Delay, Written: e.Created}
			return statusLine{id: v.ID, key: v.Key, priority: v.Priority, state: v.State, addedAt: v.AddedAt, notBefore: t.NotBefore()}, nil
		}
	}
	decode := viewTask
	if full {
		decode = decodeTask
	}
	t, err := decode(q, e)
	if err != nil {
		return statusLine{}, err
	}
	return statusLine{task: t, id: t.ID, key: t.Key, priority: t.Priority, state: t.State, addedAt: t.AddedAt, notBefore: t.NotBefore()}, nil
}

// lockView is a key lock's session as the session package reads it; one
// that does not decode is held by nobody-knows-who (fence 0: unreadable).
func lockView(e kv.Entry) *session.Session {
	if s, err := session.Decode(e); err == nil {
		return s
	}
	return &session.Session{Record: session.Record{Slot: e.Key}, Revision: e.Revision, Written: e.Created, TTL: e.TTL}
}

// unreadable reports whether s is lockView's stand-in for a live record that
// does not decode: every session that decodes has a fence (session.Decode
// gives one stored without it its revision). Such a record may be anyone's,
// the running attempt's own lock among them (adr/0005).
func unreadable(s *session.Session) bool { return s.Fence == 0 }
