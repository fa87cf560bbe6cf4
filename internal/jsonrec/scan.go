package jsonrec

import (
	"encoding/binary"
	"strconv"
	"strings"
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
//
// The strings Str reads are made by Done, in one allocation that they
// share: a listing of 100k records made one per string before.
type Scanner struct {
	b     []byte
	strs  [scanStrings]pendingStr
	nstrs int
	size  int // bytes of the pending strings
}

// scanStrings is how many strings of a record Done makes at once; Str
// makes any further one at once.
const scanStrings = 12

// pendingStr is a string Str read, to be stored in dst by Done.
type pendingStr struct {
	dst *string
	v   []byte
}

// NewScanner scans data.
func NewScanner(data []byte) *Scanner { return &Scanner{b: data} }

// Done reports whether everything was read and, if so, stores the strings
// Str read.
func (s *Scanner) Done() bool {
	if len(s.b) != 0 {
		return false
	}
	var all strings.Builder
	all.Grow(s.size)
	for _, p := range s.strs[:s.nstrs] {
		all.Write(p.v)
	}
	rest := all.String()
	for _, p := range s.strs[:s.nstrs] {
		*p.dst, rest = rest[:len(p.v)], rest[len(p.v):]
	}
	s.nstrs, s.size = 0, 0
	return true
}

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
	i := 1
	// Eight bytes at a time while none is a quote, a backslash, a control
	// character or outside ASCII (a record's strings mostly are): what
	// listing 100k records spent a fifth of its decoding on byte by byte.
	for ; i+8 <= len(s.b); i += 8 {
		if special(binary.LittleEndian.Uint64(s.b[i:])) {
			break
		}
	}
	for ; i < len(s.b); i++ {
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

// special reports whether any of the eight bytes of w is a quote, a
// backslash, below 0x20 or above 0x7f (by the bit tricks of "Bit Twiddling
// Hacks": a byte is zero in x-0x01.. & ^x & 0x80.. exactly where x has a
// zero byte, and below n in x-n.. & ^x & 0x80.. for n <= 0x80).
func special(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	return ((w-ones*0x20)&^w|(quote-ones)&^quote|(backslash-ones)&^backslash|w)&highs != 0
}

// Str reads a string into dst, which Done sets: dst must outlive the scan
// (a field of what the decoder returns), and is read only once Done has
// returned true. A string needed before that (to parse it) is Raw's.
func (s *Scanner) Str(dst *string) bool {
	v, ok := s.raw()
	switch {
	case !ok:
	case len(v) == 0:
		*dst = ""
	case s.nstrs == len(s.strs):
		*dst = string(v)
	default:
		s.strs[s.nstrs] = pendingStr{dst, v}
		s.nstrs++
		s.size += len(v)
	}
	return ok
}

// Raw reads a string and returns its bytes, as they are in the record (a
// string Raw reads has nothing to unescape).
func (s *Scanner) Raw() ([]byte, bool) { return s.raw() }

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
	if !ok {
		return false
	}
	if t, ok := utcTime(v); ok {
		*dst = t
		return true
	}
	return dst.UnmarshalText(v) == nil
}

// utcTime reads a time as time.Time's MarshalJSON writes one in UTC,
// 2006-01-02T15:04:05.999999999Z, to the same time.Time that UnmarshalText
// makes of it, in a fraction of its time. ok is false for anything else
// (UnmarshalText then decides).
func utcTime(v []byte) (t time.Time, ok bool) {
	if len(v) < len("2006-01-02T15:04:05Z") || v[4] != '-' || v[7] != '-' || v[10] != 'T' ||
		v[13] != ':' || v[16] != ':' || v[len(v)-1] != 'Z' {
		return time.Time{}, false
	}
	num := func(b []byte) (int, bool) {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	year, ok1 := num(v[0:4])
	month, ok2 := num(v[5:7])
	day, ok3 := num(v[8:10])
	hour, ok4 := num(v[11:13])
	minute, ok5 := num(v[14:16])
	sec, ok6 := num(v[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := v[19 : len(v)-1]; len(frac) > 0 {
		// A dot and one to nine digits.
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		n, ok := num(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	secs := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
	return time.Unix(secs, int64(nsec)).UTC(), true
}

// daysSinceEpoch is the number of days from 1970-01-01 to a date of the
// proleptic Gregorian calendar (negative before it), by Howard Hinnant's
// days_from_civil.
func daysSinceEpoch(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400 // [0, 399]
	m := int64(month)
	if m > 2 {
		m -= 3
	} else {
		m += 9
	}
	doy := (153*m+2)/5 + int64(day) - 1    // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468
}

// daysIn is the number of days of a month.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// StringMap reads an object of strings ({} is an empty map, as decoding
// gives; a name given twice keeps its last value) or, if null is allowed,
// null (a nil map).
func (s *Scanner) StringMap(dst *map[string]string, null bool) bool {
	if null && s.Lit("null") {
		*dst = nil
		return true
	}
	m := map[string]string{}
	if !s.stringMap(func(k, v []byte) { m[string(k)] = string(v) }) {
		return false
	}
	*dst = m
	return true
}

// SkipStringMap reads what StringMap reads, and drops it.
func (s *Scanner) SkipStringMap(null bool) bool {
	return null && s.Lit("null") || s.stringMap(nil)
}

// stringMap reads an object of strings, handing each member to add (if not
// nil).
func (s *Scanner) stringMap(add func(k, v []byte)) bool {
	if !s.Lit("{") {
		return false
	}
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
		if add != nil {
			add(k, v)
		}
	}
	return true
}
