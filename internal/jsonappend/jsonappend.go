// Package jsonappend writes records member by member, byte for byte as
// encoding/json writes them, for records written on a write path (every
// renewal, every claim): encoding/json's reflection is a visible share of
// a write's client CPU (adr/0017), and a process that writes a type once
// (a cold `baton join`) would pay its first look at the type. A value
// encoding/json would refuse (a time outside the years 0-9999, or with an
// offset in seconds) leaves the Writer not OK, and the caller writes the
// record the general way; tests compare the two.
package jsonappend

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
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
	var ok bool
	if w.B, ok = Time(w.B, v); !ok {
		w.OK = false
	}
}

// Time appends v as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds), or reports false, appending nothing, for a time it refuses:
// a year outside 0-9999, an offset with seconds.
func Time(dst []byte, v time.Time) ([]byte, bool) {
	if v.Location() == time.UTC {
		// The years MarshalJSON writes, without working out the date
		// twice: records' times are in UTC.
		if u := v.Unix(); u < firstJSONSecond || u > lastJSONSecond {
			return dst, false
		}
	} else {
		if y := v.Year(); y < 0 || y > 9999 {
			return dst, false
		}
		if _, off := v.Zone(); off%60 != 0 {
			return dst, false // MarshalJSON refuses an offset with seconds
		}
	}
	dst = append(dst, '"')
	dst = v.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), true
}

// The first and last seconds of the years 0-9999 in UTC, as Unix times.
const (
	firstJSONSecond = -62167219200 // 0000-01-01T00:00:00Z
	lastJSONSecond  = 253402300799 // 9999-12-31T23:59:59Z
)

// Bytes appends v as base64, as encoding/json writes a []byte; nil is
// null.
func (w *Writer) Bytes(v []byte) {
	if v == nil {
		w.B = append(w.B, "null"...)
		return
	}
	w.B = append(w.B, '"')
	w.B = base64.StdEncoding.AppendEncode(w.B, v)
	w.B = append(w.B, '"')
}

// RawJSON appends v as encoding/json writes a json.RawMessage: compacted,
// with <, >, &, U+2028 and U+2029 escaped; nil is null. A v that is not
// JSON leaves the Writer not OK.
func (w *Writer) RawJSON(v []byte) {
	if v == nil {
		w.B = append(w.B, "null"...)
		return
	}
	var c bytes.Buffer
	if err := json.Compact(&c, v); err != nil {
		w.OK = false
		return
	}
	var e bytes.Buffer
	json.HTMLEscape(&e, c.Bytes())
	w.B = append(w.B, e.Bytes()...)
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
	dst, _ = StringValid(dst, s)
	return dst
}

// StringValid is String, and reports whether s was valid UTF-8 (false
// when it wrote U+FFFD in s's place somewhere).
func StringValid(dst []byte, s string) ([]byte, bool) {
	i := plainPrefix(s)
	dst = append(dst, '"')
	if i == len(s) { // most strings: copied as they are
		dst = append(dst, s...)
		return append(dst, '"'), true
	}
	const hex = "0123456789abcdef"
	valid := true
	start := 0
	for i < len(s) {
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
			valid = false
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
	return append(dst, '"'), valid
}

// plainPrefix is the length of the longest prefix of s that String copies
// as it is: eight bytes at a time while none needs a look, then byte by
// byte.
func plainPrefix(s string) int {
	i := 0
	for ; i+8 <= len(s) && !special(binary.LittleEndian.Uint64([]byte(s[i:i+8]))); i += 8 {
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			break
		}
	}
	return i
}

// special reports whether any of the eight bytes of w is one String may
// not copy as it is: below 0x20, above 0x7f, or one of " \ < > & (by the
// bit tricks of "Bit Twiddling Hacks": a byte is zero in x-0x01.. & ^x &
// 0x80.. exactly where x has a zero byte, and below n in x-n.. & ^x &
// 0x80.. for n <= 0x80).
func special(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs, lt, gt, amp := w^(ones*'"'), w^(ones*'\\'), w^(ones*'<'), w^(ones*'>'), w^(ones*'&')
	return ((w-ones*0x20)&^w|(q-ones)&^q|(bs-ones)&^bs|(lt-ones)&^lt|(gt-ones)&^gt|(amp-ones)&^amp|w)&highs != 0
}
