package cmdutil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"runtime/debug"
	"slices"
	"time"
)

// PrintJSON writes v as one indented JSON document, as a json.Encoder
// with a two-space indent writes it. A map[string]any document is written
// member by member, and the elements of its slice members one by one, so
// that a document of 100k rows is never held whole (status --json once
// spent more growing that one buffer than listing the sessions).
func PrintJSON(w io.Writer, v any) error {
	doc, ok := v.(map[string]any)
	if !ok {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	if len(doc) == 0 {
		_, err := io.WriteString(w, "{}\n")
		return err
	}
	var buf bytes.Buffer
	var laid []byte
	write := func(prefix string, v any) error {
		if r, ok := v.(indentAppender); ok {
			var ok bool
			if laid, ok = r.AppendIndentJSON(laid[:0], prefix, "  "); ok {
				_, err := w.Write(laid)
				return err
			}
		}
		b, ok := v.(json.RawMessage)
		if !ok || len(b) == 0 || needsMarshal(b) {
			// Marshal validates a raw message, escapes for HTML what it
			// holds unescaped and drops the space around it; a raw message
			// without any of that only needs Indent, which validates it
			// too.
			var err error
			if b, err = json.Marshal(v); err != nil {
				return err
			}
		}
		buf.Reset()
		if err := json.Indent(&buf, b, prefix, "  "); err != nil {
			return err
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	for i, k := range slices.Sorted(maps.Keys(doc)) {
		sep := "{\n  "
		if i > 0 {
			sep = ",\n  "
		}
		name, err := json.Marshal(k)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s%s: ", sep, name); err != nil {
			return err
		}
		rv := reflect.ValueOf(doc[k])
		if rv.Kind() != reflect.Slice || rv.Len() == 0 || rv.Type().Elem().Kind() == reflect.Uint8 {
			if err := write("  ", doc[k]); err != nil {
				return err
			}
			continue
		}
		for j := range rv.Len() {
			sep := "[\n    "
			if j > 0 {
				sep = ",\n    "
			}
			if _, err := io.WriteString(w, sep); err != nil {
				return err
			}
			if err := write("    ", rv.Index(j).Interface()); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, "\n  ]"); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "\n}\n")
	return err
}

// indentAppender is a value that lays itself out as json.Indent would lay
// out its MarshalJSON, in one pass (false: it cannot; marshal it).
type indentAppender interface {
	AppendIndentJSON(b []byte, prefix, indent string) ([]byte, bool)
}

// needsMarshal reports whether a raw message holds what json.Marshal would
// change: characters it escapes for HTML (<, >, &, U+2028, U+2029) or
// space after the value (Indent would keep it).
func needsMarshal(b []byte) bool {
	for _, c := range b {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 { // 0xE2: U+2028 and U+2029 begin with it
			return true
		}
	}
	switch b[len(b)-1] {
	case ' ', '\t', '\r', '\n':
		return true
	}
	return false
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
