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
// layout, or reports false.
func indexTaskFast(data []byte) (taskIndexView, bool) {
	s := jsonrec.NewScanner(data)
	var v taskIndexView
	var priority, state string
	var labels map[string]string
	var n int
	ok := s.Lit(`{"id":`) && s.Str(&v.ID) &&
		s.Lit(`,"queue":`) && s.Str(&v.Queue) &&
		s.Lit(`,"key":`) && s.Str(&v.Key) &&
		s.Lit(`,"priority":`) && s.Str(&priority) &&
		s.Lit(`,"labels":`) && (s.Lit("{}") || s.StringMap(&labels, true)) &&
		s.Lit(`,"payload":`) && (s.Lit("null") || s.SkipStr()) &&
		s.Lit(`,"state":`) && s.Str(&state) &&
		s.Lit(`,"attempts":`) && s.Int(&v.Attempts) &&
		s.Lit(`,"seq":`) && s.Uint(&v.Seq) &&
		s.Lit(`,"added_at":`) && s.SkipStr() &&
		s.Lit(`,"updated_at":`) && s.SkipStr()
	if !ok {
		return taskIndexView{}, false
	}
	v.Priority, v.State = Priority(priority), State(state)
	if s.Lit(`,"run":{"attempt":`) {
		r := &runIndexView{}
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
			return taskIndexView{}, false
		}
		v.Run = r
	}
	if s.Lit(`,"result":{"attempt":`) {
		r := &resultIndexView{}
		var u uint64
		ok = s.Int(&n) &&
			s.Lit(`,"reason":`) && s.SkipStr() &&
			(!s.Lit(`,"exit_code":`) || s.Int(&n)) &&
			(!s.Lit(`,"error":`) || s.SkipStr()) &&
			(!s.Lit(`,"slot":`) || s.SkipStr()) &&
			(!s.Lit(`,"fence":`) || s.Uint(&u)) &&
			(!s.Lit(`,"host":`) || s.SkipStr()) &&
			(!s.Lit(`,"pid":`) || s.Int(&n)) &&
			(!s.Lit(`,"instance":`) || s.SkipStr()) &&
			(!s.Lit(`,"claimed":`) || s.Uint(&r.Claimed)) &&
			(!s.Lit(`,"started_at":`) || s.SkipStr()) &&
			s.Lit(`,"ended_at":`) && s.SkipStr() &&
			s.Lit(`}`)
		if !ok {
			return taskIndexView{}, false
		}
		v.Result = r
	}
	if s.Lit(`,"cancel_requested":`) {
		switch {
		case s.Lit("true"):
			v.CancelRequested = true
		case !s.Lit("false"):
			return taskIndexView{}, false
		}
	}
	if s.Lit(`,"retry_after":`) {
		var d string
		if !s.Str(&d) {
			return taskIndexView{}, false
		}
		after, err := time.ParseDuration(d)
		if err != nil {
			return taskIndexView{}, false
		}
		v.RetryAfter = Duration(after)
	}
	if !s.Lit(`}`) || !s.Done() {
		return taskIndexView{}, false
	}
	return v, true
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
