package queue

import "github.com/batonhq/baton/internal/jsonrec"

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
