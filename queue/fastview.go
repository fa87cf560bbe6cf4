package queue

import "github.com/batonhq/baton/internal/jsonrec"

// viewTaskFast decodes, as viewTask does (the payload skipped), a task
// written by this version of baton that has no attempt in progress or
// ended: its known fields in their order, compact, strings without
// escapes. A queue's status reads every task, and most are waiting: a
// general decoder takes several microseconds a record where this takes a
// fraction of that. Anything else (an attempt, a field of another version,
// an escape, space) it leaves to the general way; what it decodes, it
// decodes as that does (a test and a fuzz target compare them).
func viewTaskFast(data []byte) (taskView, bool) {
	s := jsonrec.NewScanner(data)
	var v taskView
	var priority, state string
	ok := s.Lit(`{"id":`) && s.Str(&v.ID) &&
		s.Lit(`,"queue":`) && s.Str(&v.Queue) &&
		s.Lit(`,"key":`) && s.Str(&v.Key) &&
		s.Lit(`,"priority":`) && s.Str(&priority) &&
		s.Lit(`,"labels":`) && s.StringMap(&v.Labels, true) &&
		s.Lit(`,"payload":`) && (s.Lit("null") || s.SkipStr()) &&
		s.Lit(`,"state":`) && s.Str(&state) &&
		s.Lit(`,"attempts":`) && s.Int(&v.Attempts) &&
		s.Lit(`,"seq":`) && s.Uint(&v.Seq) &&
		s.Lit(`,"added_at":`) && s.Time(&v.AddedAt) &&
		s.Lit(`,"updated_at":`) && s.Time(&v.UpdatedAt) &&
		s.Lit(`}`) && s.Done()
	if !ok {
		return taskView{}, false
	}
	v.Priority, v.State = Priority(priority), State(state)
	return v, true
}
