package session

import "github.com/batonhq/baton/internal/jsonappend"

// appendJSON writes r's known fields member by member, byte for byte as
// encoding/json writes them (every join, renewal and close writes one; a
// queue's claim and end write a lock's), or reports false for what only
// encoding/json should write (jsonappend). A test and a fuzz target
// compare the two.
func (r *Record) appendJSON() ([]byte, bool) {
	w := jsonappend.New(320 + 32*len(r.Meta))
	w.Raw(`{"slot":`)
	w.Str(r.Slot)
	w.Raw(`,"task_id":`)
	w.Str(r.TaskID)
	w.Raw(`,"agent_id":`)
	w.Str(r.AgentID)
	w.Raw(`,"host":`)
	w.Str(r.Host)
	w.Raw(`,"pid":`)
	w.Int(int64(r.PID))
	if r.PIDStart != "" {
		w.Raw(`,"pid_start":`)
		w.Str(r.PIDStart)
	}
	w.Raw(`,"instance":`)
	w.Str(r.Instance)
	w.Raw(`,"fence":`)
	w.Uint(r.Fence)
	w.Raw(`,"started_at":`)
	w.Time(r.StartedAt)
	w.Raw(`,"renewed_at":`)
	w.Time(r.RenewedAt)
	w.Raw(`,"renewals":`)
	w.Uint(r.Renewals)
	w.Raw(`,"message":`)
	w.Str(r.Message)
	w.Raw(`,"result":`)
	w.Str(r.Result)
	w.Raw(`,"meta":`)
	w.StringMap(r.Meta)
	w.Raw(`}`)
	return w.B, w.OK
}
