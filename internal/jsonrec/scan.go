package jsonrec

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Scanner reads a record of a known layout (its members in the order its
// writer writes them, compact) a member at a time, for decoders that skip
// the general path for what baton writes itself. Every method consumes what
// it reads and reports false, consuming what it may, on anything the layout
// does not allow or that a general decoder would read differently (an
// escape, invalid UTF-8, a number JSON would not write this way): the
// caller then decodes the record the general way.
type Scanner struct{ b []byte }

// NewScanner scans data.
func NewScanner(data []byte) *Scanner { return &Scanner{b: data} }

// Done reports whether everything was read.
func (s *Scanner) Done() bool { return len(s.b) == 0 }

// Lit reads the bytes lit.
func (s *Scanner) Lit(lit string) bool {
	if len(s.b) < len(lit) || string(s.b[:len(lit)]) != lit {
		return false
	}
	s.b = s.b[len(lit):]
	return true
}

// raw reads a string's contents: no escapes, no control characters, valid
// UTF-8 (otherwise a decoder's unescaping or replacements apply).
func (s *Scanner) raw() ([]byte, bool) {
	if len(s.b) == 0 || s.b[0] != '"' {
		return nil, false
	}
	ascii := true
	for i := 1; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			v := s.b[1:i]
			if !ascii && !utf8.Valid(v) {
				return nil, false
			}
			s.b = s.b[i+1:]
			return v, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// Str reads a string into dst.
func (s *Scanner) Str(dst *string) bool {
	v, ok := s.raw()
	if ok {
		*dst = string(v)
	}
	return ok
}

// SkipStr reads a string and drops it.
func (s *Scanner) SkipStr() bool {
	_, ok := s.raw()
	return ok
}

// digits reads an integer as encoding/json writes one: an optional minus
// (if signed), no leading zero, no fraction or exponent.
func (s *Scanner) digits(signed bool) ([]byte, bool) {
	i := 0
	if signed && len(s.b) > 0 && s.b[0] == '-' {
		i++
	}
	start := i
	for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
		i++
	}
	if i == start || s.b[start] == '0' && i > start+1 {
		return nil, false
	}
	if i < len(s.b) && (s.b[i] == '.' || s.b[i] == 'e' || s.b[i] == 'E') {
		return nil, false
	}
	n := s.b[:i]
	s.b = s.b[i:]
	return n, true
}

// Int reads an int into dst.
func (s *Scanner) Int(dst *int) bool {
	n, ok := s.digits(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(string(n), 10, strconv.IntSize)
	*dst = int(v)
	return err == nil
}

// Uint reads a uint64 into dst.
func (s *Scanner) Uint(dst *uint64) bool {
	n, ok := s.digits(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(string(n), 10, 64)
	*dst = v
	return err == nil
}

// Time reads an RFC 3339 time, as time.Time's UnmarshalJSON does.
func (s *Scanner) Time(dst *time.Time) bool {
	v, ok := s.raw()
	return ok && dst.UnmarshalText(v) == nil
}

// StringMap reads an object of strings ({} is an empty map, as decoding
// gives; a name given twice keeps its last value) or, if null is allowed,
// null (a nil map).
func (s *Scanner) StringMap(dst *map[string]string, null bool) bool {
	if null && s.Lit("null") {
		*dst = nil
		return true
	}
	if !s.Lit("{") {
		return false
	}
	m := map[string]string{}
	for i := 0; !s.Lit("}"); i++ {
		if i > 0 && !s.Lit(",") {
			return false
		}
		k, ok := s.raw()
		if !ok || !s.Lit(":") {
			return false
		}
		v, ok := s.raw()
		if !ok {
			return false
		}
		m[string(k)] = string(v)
	}
	*dst = m
	return true
}
