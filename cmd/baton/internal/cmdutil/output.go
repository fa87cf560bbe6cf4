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

// Version is baton's version: the module's (go install of a tag), else
// "dev" with the commit it was built from, as the build recorded it
// ("dev+0123456789ab", ".dirty" when the tree had changes), else "dev".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return VersionOf(bi)
}

// VersionOf is Version from the given build information.
func VersionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v // a module version names its code already
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev+" + rev[:min(len(rev), 12)]
	if dirty {
		v += ".dirty"
	}
	return v
}
