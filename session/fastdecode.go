package session

import "github.com/batonhq/baton/internal/jsonrec"

// decodeRecordFast decodes into r a record as this version of baton
// encodes it: its known fields in their order, compact, strings without
// escapes. It is what listing 100k sessions spends most of its time on,
// and a general decoder, even json v2's, takes several microseconds a
// record where this takes a fraction of that. It reports false, leaving r
// zero, for anything else (another order, an escape, a field of another
// version, space, a number JSON would not write this way): UnmarshalJSON
// then decodes it the general way. What it decodes, it decodes as the
// general way does (a test and a fuzz target compare them).
func decodeRecordFast(data []byte, r *Record) bool {
	s := jsonrec.NewScanner(data)
	ok := s.Lit(`{"slot":`) && s.Str(&r.Slot) &&
		s.Lit(`,"task_id":`) && s.Str(&r.TaskID) &&
		s.Lit(`,"agent_id":`) && s.Str(&r.AgentID) &&
		s.Lit(`,"host":`) && s.Str(&r.Host) &&
		s.Lit(`,"pid":`) && s.Int(&r.PID)
	if ok {
		r.PIDStart = ""
		if s.Lit(`,"pid_start":`) {
			ok = s.Str(&r.PIDStart)
		}
	}
	ok = ok && s.Lit(`,"instance":`) && s.Str(&r.Instance) &&
		s.Lit(`,"fence":`) && s.Uint(&r.Fence) &&
		s.Lit(`,"started_at":`) && s.Time(&r.StartedAt) &&
		s.Lit(`,"renewed_at":`) && s.Time(&r.RenewedAt) &&
		s.Lit(`,"renewals":`) && s.Uint(&r.Renewals) &&
		s.Lit(`,"message":`) && s.Str(&r.Message) &&
		s.Lit(`,"result":`) && s.Str(&r.Result) &&
		s.Lit(`,"meta":`) && s.StringMap(&r.Meta, false) &&
		s.Lit(`}`) && s.Done()
	if !ok {
		*r = Record{}
		return false
	}
	r.unknown = nil
	return true
}
