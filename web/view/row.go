package view

import (
	"encoding/binary"
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
	var lay *rowLayout
	switch {
	case prefix == statusRow.prefix && indent == statusRow.indent:
		lay = statusRow
	case prefix == "" && indent == "":
		lay = compactRow
	default:
		lay = newRowLayout(prefix, indent)
	}
	ok := true
	str := func(m member, v string) {
		b = append(b, lay.lead[m]...)
		b, ok = appendPlainString(b, v, ok)
	}
	tm := func(m member, v time.Time) {
		b = append(b, lay.lead[m]...)
		b, ok = appendTime(b, v, ok)
	}
	num := func(m member, v int64) {
		b = append(b, lay.lead[m]...)
		b = strconv.AppendInt(b, v, 10)
	}
	unum := func(m member, v uint64) {
		b = append(b, lay.lead[m]...)
		b = strconv.AppendUint(b, v, 10)
	}
	b = append(b, '{')
	num(ageMS, age)
	str(agentID, s.AgentID)
	unum(fence, s.Fence)
	str(host, s.Host)
	str(instance, s.Instance)
	str(message, s.Message)
	b = append(b, lay.lead[meta]...)
	b = append(b, '{')
	if len(s.Meta) > 0 {
		keys := make([]string, 0, len(s.Meta))
		for k := range s.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if !plain(k) {
				return b, false
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, lay.metaLead...)
			b = append(b, '"')
			b = append(b, k...)
			b = append(b, lay.sep...)
			b, ok = appendPlainString(b, s.Meta[k], ok)
		}
		b = append(b, lay.metaClose...)
	}
	b = append(b, '}')
	num(pid, int64(s.PID))
	if s.PIDStart != "" {
		str(pidStart, s.PIDStart)
	}
	unum(renewals, s.Renewals)
	b = append(b, lay.lead[renewedAt]...)
	renewedFrom := len(b)
	b, ok = appendTime(b, s.RenewedAt, ok)
	renewedTo := len(b)
	tm(renewedServerAt, s.Written)
	str(result, s.Result)
	unum(revision, s.Revision)
	str(slot, s.Slot)
	if s.StartedAt == s.RenewedAt {
		// A session never renewed: the same time, the same text.
		b = append(b, lay.lead[startedAt]...)
		b = append(b, b[renewedFrom:renewedTo]...)
	} else {
		tm(startedAt, s.StartedAt)
	}
	str(state, string(t.State))
	str(taskID, s.TaskID)
	num(ttlLeftMS, left)
	num(ttlMS, s.TTL.Milliseconds())
	b = append(b, lay.close...)
	return append(b, '}'), ok
}

// member is a member of a session row, in the order of their names.
type member int

const (
	ageMS member = iota
	agentID
	fence
	host
	instance
	message
	meta
	pid
	pidStart
	renewals
	renewedAt
	renewedServerAt
	result
	revision
	slot
	startedAt
	state
	taskID
	ttlLeftMS
	ttlMS
	members
)

// memberNames are the members' names, by member.
var memberNames = [members]string{"age_ms", "agent_id", "fence", "host", "instance", "message", "meta", "pid", "pid_start",
	"renewals", "renewed_at", "renewed_server_at", "result", "revision", "slot", "started_at", "state", "task_id", "ttl_left_ms", "ttl_ms"}

// rowLayout is what a row laid out with a prefix and an indent writes
// around its values, made once for every row.
type rowLayout struct {
	prefix, indent string
	// lead is what goes before a member's value: the comma after the
	// member before (none for the first), the line break and indent, the
	// quoted name and the colon.
	lead      [members]string
	metaLead  string // before the name of a member of meta, after its comma
	sep       string // after it
	metaClose string // before meta's closing brace, when it has members
	close     string // before the row's closing brace
}

// The layouts of status --json's rows (elements of a member of the
// document) and of compact rows.
var (
	statusRow  = newRowLayout("    ", "  ")
	compactRow = newRowLayout("", "")
)

func newRowLayout(prefix, indent string) *rowLayout {
	l := &rowLayout{prefix: prefix, indent: indent, sep: `":`}
	line := ""
	if indent != "" {
		line, l.sep = "\n"+prefix, `": `
		l.close = line
		l.metaClose = line + indent
		l.metaLead = line + indent + indent
	}
	for m, n := range memberNames {
		comma := ","
		if m == 0 {
			comma = ""
		}
		if indent != "" {
			comma += line + indent
		}
		l.lead[m] = comma + `"` + n + l.sep
	}
	return l
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
	i := 0
	for ; i+8 <= len(v); i += 8 {
		if unplain(binary.LittleEndian.Uint64([]byte(v[i : i+8]))) {
			return false
		}
	}
	for ; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// unplain reports whether any of the eight bytes of w is one plain
// refuses (by the bit tricks of "Bit Twiddling Hacks": a byte is zero in
// x-0x01.. & ^x & 0x80.. exactly where x has a zero byte, and below n in
// x-n.. & ^x & 0x80.. for n <= 0x80).
func unplain(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(x uint64) uint64 { return (x - ones) &^ x }
	return ((w-ones*0x20)&^w|zero(w^(ones*'"'))|zero(w^(ones*'\\'))|zero(w^(ones*'<'))|zero(w^(ones*'>'))|zero(w^(ones*'&'))|w)&highs != 0
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
