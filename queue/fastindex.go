package queue

import (
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
)

// A worker decodes every version of every task of its queue as its watch
// delivers them: three or more an attempt, and each worker of the queue
// does. encoding/json took a fifth of a worker's time for it. The layouts
// below are what this version writes (pending, active, ended; encode.go):
// read member by member, as the general way reads them into the view (a
// test and a fuzz target compare the two); anything else goes the general
// way.

// indexTaskFast reads what the view needs of a task record of a known
// layout, and the queue it names, or reports false.
func indexTaskFast(data []byte) (taskVersion, string, bool) {
	s := jsonrec.NewScanner(data)
	var v taskVersion
	var queue string
	var n int
	ok := s.Lit(`{"id":`) && s.Str(&v.id) &&
		s.Lit(`,"queue":`) && s.Str(&queue) &&
		s.Lit(`,"key":`) && s.Str(&v.key) &&
		s.Lit(`,"priority":`) && scanPriority(s, &v.priority) &&
		s.Lit(`,"labels":`) && s.SkipStringMap(true) &&
		s.Lit(`,"payload":`) && (s.Lit("null") || s.SkipStr()) &&
		s.Lit(`,"state":`) && scanState(s, &v.state) &&
		s.Lit(`,"attempts":`) && s.Int(&v.attempts) &&
		s.Lit(`,"seq":`) && s.Uint(&v.seq) &&
		s.Lit(`,"added_at":`) && s.SkipStr() &&
		s.Lit(`,"updated_at":`) && s.SkipStr()
	if !ok {
		return taskVersion{}, "", false
	}
	if s.Lit(`,"run":{"attempt":`) {
		r := &Run{}
		ok = s.Int(&r.Attempt) &&
			s.Lit(`,"slot":`) && s.Str(&r.Slot) &&
			s.Lit(`,"lane":`) && s.Int(&r.Lane) &&
			s.Lit(`,"fence":`) && s.Uint(&r.Fence) &&
			s.Lit(`,"token":`) && s.Int(&r.Token) &&
			s.Lit(`,"host":`) && s.SkipStr() &&
			s.Lit(`,"pid":`) && s.Int(&n) &&
			(!s.Lit(`,"pid_start":`) || s.SkipStr()) &&
			s.Lit(`,"instance":`) && s.Str(&r.Instance) &&
			s.Lit(`,"claimed":`) && s.Uint(&r.Claimed) &&
			s.Lit(`,"started_at":`) && s.SkipStr() &&
			s.Lit(`}`)
		if !ok {
			return taskVersion{}, "", false
		}
		v.run = r
	}
	if !taskTail(s, &v) || !s.Done() {
		return taskVersion{}, "", false
	}
	return v, queue, true
}

// taskTail reads what may follow a task record's updated_at and run, as
// this version writes it: its result, its cancel request and its retry
// delay, into v, then the closing brace.
func taskTail(s *jsonrec.Scanner, v *taskVersion) bool {
	var n int
	if s.Lit(`,"result":{"attempt":`) {
		var u uint64
		ok := s.Int(&n) &&
			s.Lit(`,"reason":`) && s.SkipStr() &&
			(!s.Lit(`,"exit_code":`) || s.Int(&n)) &&
			(!s.Lit(`,"error":`) || s.SkipStr()) &&
			(!s.Lit(`,"slot":`) || s.SkipStr()) &&
			(!s.Lit(`,"fence":`) || s.Uint(&u)) &&
			(!s.Lit(`,"host":`) || s.SkipStr()) &&
			(!s.Lit(`,"pid":`) || s.Int(&n)) &&
			(!s.Lit(`,"instance":`) || s.SkipStr()) &&
			(!s.Lit(`,"claimed":`) || s.Uint(&v.claimed)) &&
			(!s.Lit(`,"started_at":`) || s.SkipStr()) &&
			s.Lit(`,"ended_at":`) && s.SkipStr() &&
			s.Lit(`}`)
		if !ok {
			return false
		}
	}
	if s.Lit(`,"cancel_requested":`) {
		switch {
		case s.Lit("true"):
			v.cancel = true
		case !s.Lit("false"):
			return false
		}
	}
	if s.Lit(`,"retry_after":`) {
		d, ok := s.Raw() // now: Str's strings come only with Done
		if !ok {
			return false
		}
		after, err := time.ParseDuration(string(d))
		if err != nil {
			return false
		}
		v.retryAfter = Duration(after)
	}
	return s.Lit(`}`)
}

// Priorities and States as JSON strings, in their order, to be read
// without a copy (a test holds them to the lists).
var (
	quotedPriorities = [...]string{`"high"`, `"normal"`, `"low"`}
	quotedStates     = [...]string{`"pending"`, `"active"`, `"done"`, `"failed"`, `"dead"`, `"cancelled"`}
)

// scanPriority reads a priority, one of the constants without a copy.
func scanPriority(s *jsonrec.Scanner, dst *Priority) bool {
	for i, q := range quotedPriorities {
		if s.Lit(q) {
			*dst = Priorities[i]
			return true
		}
	}
	return s.Str((*string)(dst)) // stored by Done
}

// scanState reads a state, one of the constants without a copy.
func scanState(s *jsonrec.Scanner, dst *State) bool {
	for i, q := range quotedStates {
		if s.Lit(q) {
			*dst = States[i]
			return true
		}
	}
	return s.Str((*string)(dst)) // stored by Done
}

// decodeTokenFast reads a token of the layout this version writes, or
// reports false.
func decodeTokenFast(data []byte) (token, bool) {
	s := jsonrec.NewScanner(data)
	var t token
	ok := s.Lit(`{"queue":`) && s.Str(&t.Queue) &&
		s.Lit(`,"index":`) && s.Int(&t.Index) &&
		s.Lit(`,"task":`) && s.Str(&t.Task) &&
		s.Lit(`,"key":`) && s.Str(&t.Key) &&
		s.Lit(`,"slot":`) && s.Str(&t.Slot) &&
		s.Lit(`,"fence":`) && s.Uint(&t.Fence) &&
		s.Lit(`,"host":`) && s.Str(&t.Host) &&
		s.Lit(`,"pid":`) && s.Int(&t.PID) &&
		(!s.Lit(`,"pid_start":`) || s.Str(&t.PIDStart)) &&
		s.Lit(`,"instance":`) && s.Str(&t.Instance) &&
		s.Lit(`,"acquired_at":`) && s.Time(&t.Acquired) &&
		s.Lit(`,"renewed_at":`) && s.Time(&t.Renewed) &&
		s.Lit(`}`) && s.Done()
	if !ok {
		return token{}, false
	}
	return t, true
}

// scanLock reads the lockFields of a session record of the layout this
// version writes (session's encoding), or reports false.
func scanLock(data []byte) (lockFields, bool) {
	s := jsonrec.NewScanner(data)
	var v lockFields
	var n uint64
	ok := s.Lit(`{"slot":`) && s.Str(&v.Slot) &&
		s.Lit(`,"task_id":`) && s.SkipStr() &&
		s.Lit(`,"agent_id":`) && s.SkipStr() &&
		s.Lit(`,"host":`) && s.Str(&v.Host) &&
		s.Lit(`,"pid":`) && s.Int(&v.PID) &&
		(!s.Lit(`,"pid_start":`) || s.Str(&v.PIDStart)) &&
		s.Lit(`,"instance":`) && s.Str(&v.Instance) &&
		s.Lit(`,"fence":`) && s.Uint(&v.Fence) &&
		s.Lit(`,"started_at":`) && s.SkipStr() &&
		s.Lit(`,"renewed_at":`) && s.SkipStr() &&
		s.Lit(`,"renewals":`) && s.Uint(&n) &&
		s.Lit(`,"message":`) && s.SkipStr() &&
		s.Lit(`,"result":`) && s.SkipStr() &&
		s.Lit(`,"meta":`) && s.StringMap(&v.Meta, true) &&
		s.Lit(`}`) && s.Done()
	if !ok {
		return lockFields{}, false
	}
	return v, true
}
