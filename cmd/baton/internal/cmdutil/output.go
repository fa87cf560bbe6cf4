package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"time"
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

// Version is baton's version: the module's, or "dev" for a local build.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
