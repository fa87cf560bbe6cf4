// Package view turns records into the JSON documents of docs/CONTRACT.md:
// the rows `baton status --json` and `baton leader --json` print, which the
// dashboard's API serves too, so a script reads one shape from either.
//
// Ages and times left are whole milliseconds on the server's clock (the
// caller passes the server's time); they add up to the TTL.
package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/session"
)

// RecordJSON is a record (any JSON object type) as --json prints it, with
// extra fields added.
func RecordJSON(record any, extra map[string]any) (map[string]any, error) {
	b, err := json.Marshal(record)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range extra {
		m[k] = v
	}
	return m, nil
}

// SessionJSON is a session as --json prints it: its record's fields plus
// revision and ttl_ms, and, when extra is given, those fields too.
func SessionJSON(s *session.Session, extra map[string]any) (map[string]any, error) {
	m, err := RecordJSON(s.Record, extra)
	if err != nil {
		return nil, err
	}
	m["revision"] = s.Revision
	m["ttl_ms"] = s.TTL.Milliseconds()
	for k, v := range extra {
		m[k] = v
	}
	return m, nil
}

// SessionRow is one session of `status --json`: the session plus age_ms,
// ttl_left_ms, state and renewed_server_at at the server time now.
func SessionRow(s *session.Session, now time.Time, staleAfter time.Duration) (map[string]any, error) {
	t := s.Timing(now, staleAfter)
	age, left := timingMS(t, s.TTL)
	return SessionJSON(s, map[string]any{
		"age_ms": age, "ttl_left_ms": left, "state": string(t.State), "renewed_server_at": s.Written,
	})
}

// SessionRowJSON is SessionRow as compact JSON, written as encoding/json
// writes SessionRow's map (keys sorted, values as they marshal) without
// building the map: the record is marshalled once and its members are
// copied as they are, where the map cost a marshal, an unmarshal into
// interfaces and a marshal again per row (adr/0029 has what that cost).
// Top-level numbers keep every digit (the map's float64 kept 53 bits).
func SessionRowJSON(s *session.Session, now time.Time, staleAfter time.Duration) (json.RawMessage, error) {
	t := s.Timing(now, staleAfter)
	age, left := timingMS(t, s.TTL)
	if b, ok := appendSessionRow(make([]byte, 0, 512), s, t, age, left); ok {
		return b, nil
	}
	return sessionRowGeneral(s, t, age, left)
}

// sessionRowGeneral is SessionRowJSON for any record: marshalled, its
// members copied beside the added ones.
func sessionRowGeneral(s *session.Session, t session.Timing, age, left int64) (json.RawMessage, error) {
	rec, err := s.Record.MarshalJSON()
	if err != nil {
		return nil, err
	}
	written, err := s.Written.MarshalJSON()
	if err != nil {
		return nil, err
	}
	state, err := json.Marshal(string(t.State))
	if err != nil {
		return nil, err
	}
	members := map[string][]byte{
		"revision":          strconv.AppendUint(nil, s.Revision, 10),
		"ttl_ms":            strconv.AppendInt(nil, s.TTL.Milliseconds(), 10),
		"age_ms":            strconv.AppendInt(nil, age, 10),
		"ttl_left_ms":       strconv.AppendInt(nil, left, 10),
		"state":             state,
		"renewed_server_at": written,
	}
	return objectWith(rec, members)
}

// objectWith is the JSON object obj with the members extra added (an
// extra member replaces obj's of the same name), compact, its keys sorted.
func objectWith(obj []byte, extra map[string][]byte) (json.RawMessage, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("not a JSON object: %.40q", obj)
	}
	type member struct {
		name  string
		value []byte
	}
	members := make([]member, 0, len(extra)+16)
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next read voids tok
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if _, ok := extra[name]; ok {
			continue
		}
		value := bytes.Clone(v) // v too is only valid until the next read
		if k := v.Kind(); (k == '{' || k == '[') && len(v) > 2 {
			// Nested objects (meta, fields of later versions) are written
			// as encoding/json writes them from a map: keys sorted. Rare
			// and small; a session's own fields are scalars.
			var x any
			if err := json.Unmarshal(v, &x); err != nil {
				return nil, err
			}
			if value, err = json.Marshal(x); err != nil {
				return nil, err
			}
		}
		members = append(members, member{name, value})
	}
	for name, value := range extra {
		members = append(members, member{name, value})
	}
	// Sorted by name; of names given twice, the last is kept, as a map
	// keeps it.
	slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
	b := make([]byte, 0, len(obj)+160)
	b = append(b, '{')
	for i, m := range members {
		if i+1 < len(members) && members[i+1].name == m.name {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		quoted, err := jsontext.AppendQuote(b, m.name)
		if err != nil { // invalid UTF-8: quoted as encoding/json does
			name, err := json.Marshal(m.name)
			if err != nil {
				return nil, err
			}
			quoted = append(b, name...)
		}
		b = append(quoted, ':')
		b = append(b, m.value...)
	}
	return append(b, '}'), nil
}

// LeaseRow is one lease of `status --json`: its record plus revision,
// ttl_ms, age_ms, ttl_left_ms, state and renewed_server_at.
func LeaseRow(in *lease.Info, now time.Time, staleAfter time.Duration) (map[string]any, error) {
	t := session.TimingAt(in.Written, in.TTL, now, staleAfter)
	age, left := timingMS(t, in.TTL)
	return RecordJSON(in.Record, map[string]any{
		"revision": in.Revision, "ttl_ms": in.TTL.Milliseconds(), "age_ms": age, "ttl_left_ms": left,
		"state": string(t.State), "renewed_server_at": in.Written,
	})
}

// UndecodableRow is a record that does not decode, under keyField ("slot"
// or "key"): held by nobody knows whom, shown with what the server says.
func UndecodableRow(key, keyField string, rev uint64, written time.Time, ttl time.Duration, err error, now time.Time, staleAfter time.Duration) map[string]any {
	t := session.TimingAt(written, ttl, now, staleAfter)
	age, left := timingMS(t, ttl)
	var leftMS any = left
	if ttl == 0 {
		leftMS = nil // written without a TTL: it never expires
	}
	return map[string]any{
		keyField: key, "revision": rev, "ttl_ms": ttl.Milliseconds(), "age_ms": age, "ttl_left_ms": leftMS,
		"state": string(t.State), "undecodable": true, "error": err.Error(), "renewed_server_at": written,
	}
}

// LeaderJSON is a leader's lease as `leader --json` prints it: its record
// plus revision, age_ms, ttl_left_ms and ttl_ms.
func LeaderJSON(in *lease.Info, now time.Time) (map[string]any, error) {
	age := now.Sub(in.Written).Milliseconds()
	return RecordJSON(in.Record, map[string]any{
		"revision": in.Revision, "age_ms": age, "ttl_left_ms": in.TTL.Milliseconds() - age, "ttl_ms": in.TTL.Milliseconds(),
	})
}

// CandidateJSON is a candidate as `leader --json` prints it.
func CandidateJSON(c lease.Candidate) map[string]any {
	caps := c.Capabilities
	if caps == nil {
		caps = []string{}
	}
	return map[string]any{
		"instance": c.Instance, "host": c.Host, "pid": c.PID, "since": c.Since, "score": c.Score,
		"capabilities": caps, "eligible": c.Eligible,
	}
}

// timingMS is age and time left in whole milliseconds that add up to the
// TTL, as they do exactly on the server's clock.
func timingMS(t session.Timing, ttl time.Duration) (age, left int64) {
	age = t.Age.Milliseconds()
	return age, ttl.Milliseconds() - age
}
