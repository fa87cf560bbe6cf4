package view

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton/session"
)

// appendSessionRow appends SessionRowJSON's row written member by member in
// the order of their names, as encoding/json writes the map of them: no
// marshal of the record, no decode of it, no map. It reports false (and the
// caller takes the general path) for what only encoding/json should write:
// fields of a later version kept as read, a string that needs escaping, a
// time outside the years 0-9999.
func appendSessionRow(b []byte, s *session.Session, t session.Timing, age, left int64) ([]byte, bool) {
	return appendSessionRowIndent(b, s, t, age, left, "", "")
}

// appendSessionRowIndent is appendSessionRow as json.Indent(prefix, indent)
// would lay it out: one member a line, indented; compact when indent is "".
func appendSessionRowIndent(b []byte, s *session.Session, t session.Timing, age, left int64, prefix, indent string) ([]byte, bool) {
	if s.HasUnknownFields() {
		return b, false // kept as read: only the general path writes them
	}
	ok := true
	first := true
	// What goes before a member's name (lead1 for the row's, lead2 for
	// meta's) and after it: laid out once, not member by member.
	var leads [64]byte
	var lead1, lead2 []byte
	sep := `":`
	if indent != "" {
		l := append(leads[:0], '\n')
		l = append(l, prefix...)
		l = append(l, indent...)
		n := len(l)
		l = append(l, l...)
		l = append(l, indent...)
		lead1, lead2 = l[:n], l[n:]
		sep = `": `
	}
	// name starts a member of the row (depth 1) or of meta (depth 2).
	name := func(n string, depth int) {
		if !first {
			b = append(b, ',')
		}
		first = false
		if depth == 1 {
			b = append(b, lead1...)
		} else {
			b = append(b, lead2...)
		}
		b = append(b, '"')
		b = append(b, n...)
		b = append(b, sep...)
	}
	str := func(n, v string) {
		name(n, 1)
		b, ok = appendPlainString(b, v, ok)
	}
	tm := func(n string, v time.Time) {
		name(n, 1)
		b, ok = appendTime(b, v, ok)
	}
	num := func(n string, v int64) {
		name(n, 1)
		b = strconv.AppendInt(b, v, 10)
	}
	unum := func(n string, v uint64) {
		name(n, 1)
		b = strconv.AppendUint(b, v, 10)
	}
	b = append(b, '{')
	num("age_ms", age)
	str("agent_id", s.AgentID)
	unum("fence", s.Fence)
	str("host", s.Host)
	str("instance", s.Instance)
	str("message", s.Message)
	name("meta", 1)
	b = append(b, '{')
	if len(s.Meta) > 0 {
		keys := make([]string, 0, len(s.Meta))
		for k := range s.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		first = true
		for _, k := range keys {
			if !plain(k) {
				return b, false
			}
			name(k, 2)
			b, ok = appendPlainString(b, s.Meta[k], ok)
		}
		b = append(b, lead1...)
	}
	b = append(b, '}')
	num("pid", int64(s.PID))
	if s.PIDStart != "" {
		str("pid_start", s.PIDStart)
	}
	unum("renewals", s.Renewals)
	tm("renewed_at", s.RenewedAt)
	tm("renewed_server_at", s.Written)
	str("result", s.Result)
	unum("revision", s.Revision)
	str("slot", s.Slot)
	tm("started_at", s.StartedAt)
	str("state", string(t.State))
	str("task_id", s.TaskID)
	num("ttl_left_ms", left)
	num("ttl_ms", s.TTL.Milliseconds())
	if indent != "" {
		b = append(b, lead1[:1+len(prefix)]...)
	}
	return append(b, '}'), ok
}

// appendPlainString appends v quoted if encoding/json would write it as it
// is: printable ASCII other than the quote, the backslash and the three it
// escapes for HTML. Otherwise it leaves ok false.
func appendPlainString(b []byte, v string, ok bool) ([]byte, bool) {
	if !plain(v) {
		return b, false
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"'), ok
}

// plain reports whether encoding/json writes v quoted as it is.
func plain(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendTime appends v as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds), for the years it writes; otherwise it leaves ok false.
func appendTime(b []byte, v time.Time, ok bool) ([]byte, bool) {
	if v.Location() == time.UTC {
		// The years MarshalJSON writes, without working out the date
		// twice: sessions' times are in UTC.
		if u := v.Unix(); u < firstJSONSecond || u > lastJSONSecond {
			return b, false
		}
	} else {
		if y := v.Year(); y < 0 || y > 9999 {
			return b, false
		}
		if _, off := v.Zone(); off%60 != 0 {
			return b, false // MarshalJSON refuses an offset with seconds
		}
	}
	b = append(b, '"')
	b = v.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}

// The first and last seconds of the years 0-9999 in UTC, as Unix times.
const (
	firstJSONSecond = -62167219200 // 0000-01-01T00:00:00Z
	lastJSONSecond  = 253402300799 // 9999-12-31T23:59:59Z
)

// sessionRowValue is a row of `status --json`'s sessions: it marshals as
// SessionRowJSON, and lays itself out indented in one pass
// (AppendIndentJSON), which a writer of 100k rows asks for instead of
// indenting what it marshalled.
type sessionRowValue struct {
	s          *session.Session
	now        time.Time
	staleAfter time.Duration
}

// MarshalJSON is SessionRowJSON.
func (r sessionRowValue) MarshalJSON() ([]byte, error) {
	return SessionRowJSON(r.s, r.now, r.staleAfter)
}

// AppendIndentJSON appends the row as json.Indent(prefix, indent) lays out
// its MarshalJSON, where it can (false: marshal and indent it).
func (r sessionRowValue) AppendIndentJSON(b []byte, prefix, indent string) ([]byte, bool) {
	t := r.s.Timing(r.now, r.staleAfter)
	age, left := timingMS(t, r.s.TTL)
	return appendSessionRowIndent(b, r.s, t, age, left, prefix, indent)
}
