package queue

import (
	"strings"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv"
)

// viewTaskFast decodes into t, as viewTask does (the payload skipped), a
// task written by this version of baton that has no attempt in progress or
// ended: its known fields in their order, compact, strings without
// escapes. A queue's status reads every task, and most are waiting: a
// general decoder takes several microseconds a record where this takes a
// fraction of that. Anything else (an attempt, a field of another version,
// an escape, space) it leaves to the general way, and t zero; what it
// decodes, it decodes as that does (a test and a fuzz target compare them).
func viewTaskFast(data []byte, t *Task) bool {
	s := jsonrec.NewScanner(data)
	*t = Task{}
	ok := s.Lit(`{"id":`) && s.Str(&t.ID) &&
		s.Lit(`,"queue":`) && s.Str(&t.Queue) &&
		s.Lit(`,"key":`) && s.Str(&t.Key) &&
		s.Lit(`,"priority":`) && s.Str((*string)(&t.Priority)) &&
		s.Lit(`,"labels":`) && s.StringMap(&t.Labels, true) &&
		s.Lit(`,"payload":`) && (s.Lit("null") || s.SkipStr()) &&
		s.Lit(`,"state":`) && s.Str((*string)(&t.State)) &&
		s.Lit(`,"attempts":`) && s.Int(&t.Attempts) &&
		s.Lit(`,"seq":`) && s.Uint(&t.Seq) &&
		s.Lit(`,"added_at":`) && s.Time(&t.AddedAt) &&
		s.Lit(`,"updated_at":`) && s.Time(&t.UpdatedAt) &&
		s.Lit(`}`) && s.Done()
	if !ok {
		*t = Task{}
	}
	return ok
}

// taskLine is what a queue's status sums up of a task: the task itself when
// it runs or ended in a way this version does not lay out, or when the
// status lists every task; else its id, key, priority, state and when it
// was added, decoded without it.
type taskLine struct {
	task     *Task // nil: decoded the fast way
	id, key  string
	priority Priority
	state    State
	addedAt  time.Time
}

// lineOf decodes the task in e, of queue q, for a status: the fast way
// (taskLineFast) unless full, else as decodeTask (full) or viewTask do. It
// fails where they fail.
func lineOf(q string, e kv.Entry, full bool) (taskLine, error) {
	var l taskLine
	if !full && taskLineFast(q, e, &l) {
		return l, nil
	}
	decode := viewTask
	if full {
		decode = decodeTask
	}
	t, err := decode(q, e)
	if err != nil {
		return taskLine{}, err
	}
	return taskLine{task: t, id: t.ID, key: t.Key, priority: t.Priority, state: t.State, addedAt: t.AddedAt}, nil
}

// taskLineFast decodes into l, in one pass and with one allocation, a task
// of queue q as viewTaskFast reads it that viewTask would take (its id and
// queue those of its key, a known priority) and that is not running. It
// reports false for anything else: viewTask then decides. What it decodes,
// viewTask decodes alike (a test and a fuzz target compare them).
func taskLineFast(q string, e kv.Entry, l *taskLine) bool {
	s := jsonrec.NewScanner(e.Value)
	var (
		id, queue, key, priority, state []byte
		attempts                        int
		seq                             uint64
		updated                         time.Time
		tail                            taskVersion // a result, cancel request or retry delay: checked, not kept
	)
	ok := s.Lit(`{"id":`) && raw(s, &id) &&
		s.Lit(`,"queue":`) && raw(s, &queue) &&
		s.Lit(`,"key":`) && raw(s, &key) &&
		s.Lit(`,"priority":`) && raw(s, &priority) &&
		s.Lit(`,"labels":`) && s.SkipStringMap(true) &&
		s.Lit(`,"payload":`) && (s.Lit("null") || s.SkipStr()) &&
		s.Lit(`,"state":`) && raw(s, &state) &&
		s.Lit(`,"attempts":`) && s.Int(&attempts) &&
		s.Lit(`,"seq":`) && s.Uint(&seq) &&
		s.Lit(`,"added_at":`) && s.Time(&l.addedAt) &&
		s.Lit(`,"updated_at":`) && s.Time(&updated) &&
		taskTail(s, &tail) && s.Done()
	if !ok || string(queue) != q || string(id) != taskIDOf(q, e.Key) {
		return false
	}
	var okP, okS bool
	l.priority, okP = known(priority, Priorities)
	l.state, okS = known(state, States)
	if !okP || !okS || l.state == StateActive {
		return false // unknown, or active (which needs a run)
	}
	var both strings.Builder
	both.Grow(len(id) + len(key))
	both.Write(id)
	both.Write(key)
	l.id, l.key = both.String()[:len(id)], both.String()[len(id):]
	return true
}

// known is the value of vals that b spells (the constant itself: no copy).
func known[T ~string](b []byte, vals []T) (T, bool) {
	for _, v := range vals {
		if string(b) == string(v) {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// raw reads a string's bytes into dst.
func raw(s *jsonrec.Scanner, dst *[]byte) bool {
	v, ok := s.Raw()
	*dst = v
	return ok
}
