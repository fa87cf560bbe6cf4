package jsonrec

import (
	"encoding/base64"
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
// The strings Str and StrRef read are made by Done, in one allocation
// that they share: a listing of 100k records made one per string before.
type Scanner struct {
	b     []byte
	src   string // NewScannerIn's copy of the data: the strings read are parts of it
	n     int    // the data's capacity, where src is
	strs  [scanStrings]pendingStr
	nstrs int
	size  int      // bytes of the pending strings
	more  []string // StrRef's strings past what strs holds
	all   string   // after Done: the pending strings, one after another
}

// scanStrings is how many strings of a record Done makes at once; Str
// makes any further one at once.
const scanStrings = 16

// pendingStr is a string Str or StrRef read, to be stored in dst (if not
// nil) by Done, at off in all.
type pendingStr struct {
	dst *string
	v   []byte
	off int
}

// Ref names a string StrRef read; String returns it once Done has. The
// zero Ref names none (an optional field that was not there): String
// returns "" for it.
type Ref int

// NewScanner scans data.
func NewScanner(data []byte) *Scanner { return &Scanner{b: data} }

// NewScannerIn scans data, of which src is a copy (string(data)): every
// string it reads (Str, Strings, StringMap's) is a part of src, stored at
// once, and none is a copy of its own. For a record of many strings (a
// reservation space's thousands): one copy of the record instead of one
// per string, and the strings keep all of src alive.
func NewScannerIn(data []byte, src string) *Scanner {
	if len(src) != len(data) {
		panic("jsonrec: NewScannerIn: src is not a copy of data")
	}
	return &Scanner{b: data, src: src, n: cap(data)}
}

// str is v, a part of the data, as a string.
func (s *Scanner) str(v []byte) string {
	if s.src == "" || len(v) == 0 {
		return string(v)
	}
	off := s.n - cap(v) // v is data[off:off+len(v)]
	return s.src[off : off+len(v)]
}

// Len is how many bytes of the data are left to read.
func (s *Scanner) Len() int { return len(s.b) }

// Done reports whether everything was read and, if so, makes the strings
// Str and StrRef read and stores Str's.
func (s *Scanner) Done() bool {
	if len(s.b) != 0 {
		return false
	}
	var all strings.Builder
	all.Grow(s.size)
	for i := range s.strs[:s.nstrs] {
		s.strs[i].off = all.Len()
		all.Write(s.strs[i].v)
	}
	s.all = all.String()
	for _, p := range s.strs[:s.nstrs] {
		if p.dst != nil {
			*p.dst = s.all[p.off : p.off+len(p.v)]
		}
	}
	return true
}

// StrRef reads a string that String(ref) returns once Done has returned
// true. Unlike Str, it keeps no pointer to where the string goes, so a
// decoder's value need not live on the heap.
func (s *Scanner) StrRef(ref *Ref) bool {
	v, ok := s.raw()
	switch {
	case !ok:
	case s.nstrs == len(s.strs):
		s.more = append(s.more, string(v))
		*ref = Ref(-len(s.more))
	default:
		s.strs[s.nstrs] = pendingStr{v: v}
		s.nstrs++
		*ref = Ref(s.nstrs)
		s.size += len(v)
	}
	return ok
}

// String is the string StrRef read as ref.
func (s *Scanner) String(ref Ref) string {
	switch {
	case ref < 0:
		return s.more[-ref-1]
	case ref == 0:
		return ""
	}
	p := s.strs[ref-1]
	return s.all[p.off : p.off+len(p.v)]
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

// Str reads a string into dst, which Done sets (a scanner of NewScannerIn
// sets it at once): dst must outlive the scan (a field of what the
// decoder returns), and is read only once Done has returned true. A
// string needed before that (to parse it) is Raw's.
func (s *Scanner) Str(dst *string) bool {
	v, ok := s.raw()
	switch {
	case !ok:
	case len(v) == 0:
		*dst = ""
	case s.src != "":
		*dst = s.str(v)
	case s.nstrs == len(s.strs):
		*dst = string(v)
	default:
		s.strs[s.nstrs] = pendingStr{dst: dst, v: v}
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
	if !s.stringMap(func(k, v []byte) { m[s.str(k)] = s.str(v) }) {
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

// Fields is a set of a record's fields, a bit each, in the order of their
// declaration (recgen's <type>Field<Name> constants): the fields a
// decoder reads without keeping.
type Fields uint64

// AllFields is every field.
const AllFields = ^Fields(0)

// SkipInt reads what Int reads, and drops it.
func (s *Scanner) SkipInt() bool {
	var n int
	return s.Int(&n)
}

// Int64 reads an int64 into dst.
func (s *Scanner) Int64(dst *int64) bool {
	n, ok := s.digits(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	*dst = v
	return err == nil
}

// SkipInt64 reads what Int64 reads, and drops it.
func (s *Scanner) SkipInt64() bool {
	var n int64
	return s.Int64(&n)
}

// SkipUint reads what Uint reads, and drops it.
func (s *Scanner) SkipUint() bool {
	var n uint64
	return s.Uint(&n)
}

// IntPtr reads null (a nil *int) or an int, into a new *int.
func (s *Scanner) IntPtr(dst **int) bool {
	if s.Lit("null") {
		*dst = nil
		return true
	}
	n := new(int)
	*dst = n
	return s.Int(n)
}

// SkipIntPtr reads what IntPtr reads, and drops it.
func (s *Scanner) SkipIntPtr() bool { return s.Lit("null") || s.SkipInt() }

// Bool reads true or false into dst.
func (s *Scanner) Bool(dst *bool) bool {
	switch {
	case s.Lit("true"):
		*dst = true
	case s.Lit("false"):
		*dst = false
	default:
		return false
	}
	return true
}

// SkipBool reads what Bool reads, and drops it.
func (s *Scanner) SkipBool() bool {
	var b bool
	return s.Bool(&b)
}

// SkipTime reads what Time reads, and drops it.
func (s *Scanner) SkipTime() bool {
	var t time.Time
	return s.Time(&t)
}

// Bytes reads null (nil) or bytes as encoding/json writes them: standard
// base64, padded, and nothing a lenient decoder would read differently.
func (s *Scanner) Bytes(dst *[]byte) bool {
	if s.Lit("null") {
		*dst = nil
		return true
	}
	raw, ok := s.raw()
	if !ok {
		return false
	}
	b, err := base64.StdEncoding.Strict().AppendDecode(make([]byte, 0, base64.StdEncoding.DecodedLen(len(raw))), raw)
	if err != nil {
		return false
	}
	*dst = b
	return true
}

// SkipBytes reads null or any string without escapes, and drops it: a
// reader that skips bytes takes them as they come (a view without the
// payload), not as Bytes would.
func (s *Scanner) SkipBytes() bool { return s.Lit("null") || s.SkipStr() }

// Strings reads null (nil) or an array of strings ([] is an empty slice,
// as decoding gives).
func (s *Scanner) Strings(dst *[]string) bool {
	if s.Lit("null") {
		*dst = nil
		return true
	}
	v := []string{}
	if !s.strings(func(b []byte) { v = append(v, s.str(b)) }) {
		return false
	}
	*dst = v
	return true
}

// SkipStrings reads what Strings reads, and drops it.
func (s *Scanner) SkipStrings() bool { return s.Lit("null") || s.strings(nil) }

func (s *Scanner) strings(add func([]byte)) bool {
	if !s.Lit("[") {
		return false
	}
	for i := 0; !s.Lit("]"); i++ {
		if i > 0 && !s.Lit(",") {
			return false
		}
		v, ok := s.raw()
		if !ok {
			return false
		}
		if add != nil {
			add(v)
		}
	}
	return true
}

// Duration reads a duration as Duration's MarshalJSON writes it ("10s").
func (s *Scanner) Duration(dst *Duration) bool {
	raw, ok := s.raw()
	if !ok {
		return false
	}
	d, err := time.ParseDuration(s.str(raw))
	if err != nil {
		return false
	}
	*dst = Duration(d)
	return true
}

// SkipDuration reads what Duration reads, and drops it.
func (s *Scanner) SkipDuration() bool {
	var d Duration
	return s.Duration(&d)
}

// Enum reads a string into dst: one of vals (a type's constants) without a
// copy, anything else as a string of its own. Unlike Str it keeps no
// pointer to dst.
func (s *Scanner) Enum(dst *string, vals []string) bool {
	v, ok := s.raw()
	if !ok {
		return false
	}
	for _, c := range vals {
		if string(v) == c {
			*dst = c
			return true
		}
	}
	*dst = string(v)
	return true
}
