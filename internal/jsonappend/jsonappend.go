// Package jsonappend writes records member by member, byte for byte as
// encoding/json writes them, for the values that encoding/json writes
// plainly: strings of printable ASCII that need no escape, times in the
// years 0-9999. A record written on a write path (every renewal, every
// claim) costs several microseconds through encoding/json's reflection and
// a fraction of that here. Anything else leaves the Writer not OK, and the
// caller writes the record the general way; tests compare the two.
package jsonappend

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Writer appends JSON to B. OK stays true while every value was one
// encoding/json writes the same way.
type Writer struct {
	B  []byte
	OK bool
}

// New returns a Writer with room for n bytes.
func New(n int) Writer { return Writer{B: make([]byte, 0, n), OK: true} }

// Raw appends s as it is: punctuation and member names the caller knows
// to be plain (`{"key":`, `,"pid":`).
func (w *Writer) Raw(s string) { w.B = append(w.B, s...) }

// Str appends v as a JSON string.
func (w *Writer) Str(v string) {
	if !Plain(v) {
		w.OK = false
		return
	}
	w.B = append(w.B, '"')
	w.B = append(w.B, v...)
	w.B = append(w.B, '"')
}

// Int appends v.
func (w *Writer) Int(v int64) { w.B = strconv.AppendInt(w.B, v, 10) }

// Uint appends v.
func (w *Writer) Uint(v uint64) { w.B = strconv.AppendUint(w.B, v, 10) }

// Bool appends v.
func (w *Writer) Bool(v bool) { w.B = strconv.AppendBool(w.B, v) }

// Time appends v as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds), for the times it writes.
func (w *Writer) Time(v time.Time) {
	if y := v.Year(); y < 0 || y > 9999 {
		w.OK = false
		return
	}
	if _, off := v.Zone(); off%60 != 0 {
		w.OK = false // MarshalJSON refuses an offset with seconds
		return
	}
	w.B = append(w.B, '"')
	w.B = v.AppendFormat(w.B, time.RFC3339Nano)
	w.B = append(w.B, '"')
}

// Strings appends v as an array of strings; nil is null, as encoding/json
// writes a nil slice.
func (w *Writer) Strings(v []string) {
	if v == nil {
		w.B = append(w.B, "null"...)
		return
	}
	w.B = append(w.B, '[')
	for i, s := range v {
		if i > 0 {
			w.B = append(w.B, ',')
		}
		w.Str(s)
	}
	w.B = append(w.B, ']')
}

// StringMap appends m as an object, its names sorted as encoding/json
// sorts a map's; nil is null.
func (w *Writer) StringMap(m map[string]string) {
	if m == nil {
		w.B = append(w.B, "null"...)
		return
	}
	w.B = append(w.B, '{')
	switch len(m) {
	case 0:
	case 1:
		for k, v := range m {
			w.Str(k)
			w.B = append(w.B, ':')
			w.Str(v)
		}
	default:
		var buf [8]string
		keys := buf[:0]
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				w.B = append(w.B, ',')
			}
			w.Str(k)
			w.B = append(w.B, ':')
			w.Str(m[k])
		}
	}
	w.B = append(w.B, '}')
}

// Plain reports whether encoding/json writes v quoted as it is: printable
// ASCII other than the quote, the backslash and the three it escapes for
// HTML.
func Plain(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
