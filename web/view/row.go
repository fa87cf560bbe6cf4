package view

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton/session"
)

// appendSessionRow appends SessionRowJSON's row for a session whose record
// has no fields of a later version, written member by member in the order
// of their names, as encoding/json writes the map of them: no marshal of
// the record, no decode of it, no map. It reports false (and the caller
// takes the general path) for what only encoding/json should write: a
// string that needs escaping, a time outside the years 0-9999.
func appendSessionRow(b []byte, s *session.Session, t session.Timing, age, left int64) ([]byte, bool) {
	ok := true
	str := func(name, v string) {
		b = append(b, name...)
		b, ok = appendPlainString(b, v, ok)
	}
	tm := func(name string, v time.Time) {
		b = append(b, name...)
		b, ok = appendTime(b, v, ok)
	}
	num := func(name string, v int64) {
		b = append(b, name...)
		b = strconv.AppendInt(b, v, 10)
	}
	unum := func(name string, v uint64) {
		b = append(b, name...)
		b = strconv.AppendUint(b, v, 10)
	}
	num(`{"age_ms":`, age)
	str(`,"agent_id":`, s.AgentID)
	unum(`,"fence":`, s.Fence)
	str(`,"host":`, s.Host)
	str(`,"instance":`, s.Instance)
	str(`,"message":`, s.Message)
	b = append(b, `,"meta":{`...)
	keys := make([]string, 0, len(s.Meta))
	for k := range s.Meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b, ok = appendPlainString(b, k, ok)
		b = append(b, ':')
		b, ok = appendPlainString(b, s.Meta[k], ok)
	}
	b = append(b, '}')
	num(`,"pid":`, int64(s.PID))
	if s.PIDStart != "" {
		str(`,"pid_start":`, s.PIDStart)
	}
	unum(`,"renewals":`, s.Renewals)
	tm(`,"renewed_at":`, s.RenewedAt)
	tm(`,"renewed_server_at":`, s.Written)
	str(`,"result":`, s.Result)
	unum(`,"revision":`, s.Revision)
	str(`,"slot":`, s.Slot)
	tm(`,"started_at":`, s.StartedAt)
	str(`,"state":`, string(t.State))
	str(`,"task_id":`, s.TaskID)
	num(`,"ttl_left_ms":`, left)
	num(`,"ttl_ms":`, s.TTL.Milliseconds())
	return append(b, '}'), ok
}

// appendPlainString appends v quoted if encoding/json would write it as it
// is: printable ASCII other than the quote, the backslash and the three it
// escapes for HTML. Otherwise it leaves ok false.
func appendPlainString(b []byte, v string, ok bool) ([]byte, bool) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"'), ok
}

// appendTime appends v as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds), for the years it writes; otherwise it leaves ok false.
func appendTime(b []byte, v time.Time, ok bool) ([]byte, bool) {
	if y := v.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := v.Zone(); off%60 != 0 {
		return b, false // MarshalJSON refuses an offset with seconds
	}
	b = append(b, '"')
	b = v.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}
