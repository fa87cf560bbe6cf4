package view

import (
	"slices"
	"strconv"
	"time"

	"github.com/batonhq/baton/internal/jsonappend"
	"github.com/batonhq/baton/session"
)

// appendSessionRow appends SessionRowJSON's row written member by member in
// the order of their names, as encoding/json writes the map of them: no
// marshal of the record, no decode of it, no map. It reports false (and the
// caller takes the general path) for what only encoding/json should write:
// fields of a later version kept as read, a time outside the years 0-9999,
// a string of invalid UTF-8.
// Strings and times are written by jsonappend, as every record is.
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
	// A string of invalid UTF-8 the general path writes as it reads back
	// (U+FFFD itself, where jsonappend writes its escape): it takes it.
	str := func(m member, v string) {
		b = append(b, lay.lead[m]...)
		var valid bool
		b, valid = jsonappend.StringValid(b, v)
		ok = ok && valid
	}
	tm := func(m member, v time.Time) {
		b = append(b, lay.lead[m]...)
		var tok bool
		b, tok = jsonappend.Time(b, v)
		ok = ok && tok
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
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, lay.metaLead...)
			var kv, vv bool
			b, kv = jsonappend.StringValid(b, k)
			b = append(b, lay.sep[1:]...) // the name's closing quote is String's
			b, vv = jsonappend.StringValid(b, s.Meta[k])
			ok = ok && kv && vv
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
	b, tok := jsonappend.Time(b, s.RenewedAt)
	ok = ok && tok
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
