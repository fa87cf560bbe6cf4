// Package jsonappend writes records member by member, byte for byte as
// encoding/json writes them. A record written on a write path (every
// renewal, every claim) costs several microseconds through encoding/json's
// reflection and a fraction of that here, and a process that writes a type
// once (a cold `baton join`) pays encoding/json's first look at the type
// otherwise. A value encoding/json would refuse (a time outside the years
// 0-9999, or with an offset in seconds) leaves the Writer not OK, and the
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

// Str appends v as a JSON string, escaped as encoding/json escapes it.
func (w *Writer) Str(v string) { w.B = String(w.B, v) }

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

// String appends s as a JSON string exactly as encoding/json writes it:
// <, > and & escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped.
func String(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
