package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/batonhq/baton/session"
)

// PrintJSON writes v as one indented JSON document.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// PrintJSONLine writes v as one line of JSON (for --watch streams).
func PrintJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
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

// Since formats a time for people, UTC, to the second.
func Since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// Fprintf writes to w, ignoring errors (for chatter).
func Fprintf(w io.Writer, format string, a ...any) {
	_, _ = fmt.Fprintf(w, format, a...)
}
