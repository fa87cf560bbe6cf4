// Package view turns records into the JSON documents of docs/CONTRACT.md:
// the rows `baton status --json` and `baton leader --json` print, which the
// dashboard's API serves too, so a script reads one shape from either.
//
// Ages and times left are whole milliseconds on the server's clock (the
// caller passes the server's time); they add up to the TTL.
package view

import (
	"encoding/json"
	"time"

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
