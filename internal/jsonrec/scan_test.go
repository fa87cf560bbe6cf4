package jsonrec

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// The scanner's times are time.Time's UnmarshalText's, representation
// included: a time written in UTC by MarshalJSON, at any precision, over
// the years it writes.
func TestScannerTime_IsUnmarshalTexts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lo := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	var inputs []string
	for i := range 20000 {
		tm := time.Unix(lo+r.Int64N(hi-lo+1), r.Int64N(1e9)).UTC()
		switch i % 4 {
		case 0:
			tm = tm.Truncate(time.Second)
		case 1:
			tm = tm.Truncate(time.Millisecond)
		}
		b, err := tm.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
	}
	inputs = append(inputs, `"1970-01-01T00:00:00Z"`, `"0000-01-01T00:00:00Z"`, `"0000-02-29T12:00:00Z"`, `"2000-02-29T00:00:00Z"`,
		`"2024-02-29T23:59:59.999999999Z"`, `"9999-12-31T23:59:59.999999999Z"`, `"2026-11-26T04:51:59.5Z"`,
		// Not MarshalJSON's UTC layout: UnmarshalText decides, or both refuse.
		`"1900-02-29T00:00:00Z"`, `"2023-02-29T00:00:00Z"`, `"2026-04-31T00:00:00Z"`, `"2026-13-01T00:00:00Z"`,
		`"2026-00-01T00:00:00Z"`, `"2026-01-00T00:00:00Z"`, `"2026-01-01T24:00:00Z"`, `"2026-01-01T00:60:00Z"`,
		`"2026-01-01T00:00:60Z"`, `"2026-01-01T00:00:00.Z"`, `"2026-01-01T00:00:00.1234567891Z"`, `"2026-01-01T00:00:00,5Z"`,
		`"2026-01-01T00:00:00+01:00"`, `"2026-01-01T00:00:00.5+00:00"`, `"2026-01-01t00:00:00Z"`, `"2026-01-01T00:00:00z"`,
		`"+026-01-01T00:00:00Z"`, `"2026-1-01T00:00:00Z"`, `"2026-01-01T00:00:0aZ"`, `"2026-01-01T00:00:00.-5Z"`, `""`)
	for _, in := range inputs {
		var want time.Time
		werr := want.UnmarshalJSON([]byte(in))
		var got time.Time
		ok := NewScanner([]byte(in)).Time(&got)
		if ok != (werr == nil) || got != want {
			t.Fatalf("Time(%s) = %v (%#v), %v; UnmarshalJSON: %v (%#v), %v", in, got, got, ok, want, want, werr)
		}
	}
}

// Strings are set by Done, sharing one allocation; those past what it
// holds at once, and empty ones, are set at once.
func TestScannerStrings_SetByDone(t *testing.T) {
	data := []byte(`["a","","bc","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r"]`)
	s := NewScanner(data)
	got := make([]string, 18)
	if !s.Lit("[") {
		t.Fatal("no [")
	}
	for i := range got {
		if i > 0 && !s.Lit(",") {
			t.Fatalf("no comma before %d", i)
		}
		got[i] = "unset"
		if !s.Str(&got[i]) {
			t.Fatalf("string %d", i)
		}
	}
	if got[0] != "unset" || got[1] != "" || got[16] != "unset" || got[17] != "r" {
		t.Fatalf("before Done: %q", got)
	}
	if s.Done() || !s.Lit("]") || !s.Done() {
		t.Fatal("Done before the end, or not at it")
	}
	want := []string{"a", "", "bc", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	three, dst := []byte(`"abc","de","f"`), new([3]string)
	if allocs := testing.AllocsPerRun(100, func() {
		s := NewScanner(three)
		_ = s.Str(&dst[0]) && s.Lit(",") && s.Str(&dst[1]) && s.Lit(",") && s.Str(&dst[2]) && s.Done()
	}); allocs > 1 || *dst != [3]string{"abc", "de", "f"} {
		t.Errorf("three strings took %v allocations, want one (%q)", allocs, *dst)
	}
}

// A scanner of NewScannerIn reads every string as a part of its copy of
// the data, at once, past sixteen too, and makes none of its own.
func TestScannerIn_StringsArePartsOfSrc(t *testing.T) {
	data := []byte(`{"a":["x","yz"],"b":{"k":"v"},"c":"` + strings.Repeat("s", 20) + `"}`)
	src := string(data)
	var strs []string
	var m map[string]string
	var c string
	read := func() bool {
		s := NewScannerIn(data, src)
		return s.Lit(`{"a":`) && s.Strings(&strs) && s.Lit(`,"b":`) && s.StringMap(&m, false) &&
			s.Lit(`,"c":`) && s.Str(&c) && s.Lit(`}`) && s.Len() == 0 && s.Done()
	}
	if !read() {
		t.Fatal("not read")
	}
	within := func(v string) bool {
		p, base := uintptr(unsafe.Pointer(unsafe.StringData(v))), uintptr(unsafe.Pointer(unsafe.StringData(src)))
		return p >= base && p+uintptr(len(v)) <= base+uintptr(len(src))
	}
	if strs[0] != "x" || strs[1] != "yz" || m["k"] != "v" || c != strings.Repeat("s", 20) {
		t.Fatalf("read %q %q %q", strs, m, c)
	}
	for k, v := range m {
		if !within(k) || !within(v) {
			t.Errorf("map member %q: %q not a part of src", k, v)
		}
	}
	if !within(strs[0]) || !within(strs[1]) || !within(c) {
		t.Errorf("strings %q, %q not parts of src", strs, c)
	}
	// The strings slice and the map are allocated; the strings are not.
	if allocs := testing.AllocsPerRun(100, func() { _ = read() }); allocs > 6 {
		t.Errorf("%v allocations, want the slice's, the map's and the scanner's only", allocs)
	}
}

// StrRef's strings come from String once Done has made them, in the one
// allocation Str's share, past that too; the value they go to need not be
// on the heap.
func TestScannerStrRef(t *testing.T) {
	var b strings.Builder
	b.WriteString(`["x"`)
	for i := range 20 {
		fmt.Fprintf(&b, `,"s%d"`, i)
	}
	b.WriteString(`]`)
	s := NewScanner([]byte(b.String()))
	var first string
	refs := make([]Ref, 20)
	ok := s.Lit("[") && s.Str(&first)
	for i := range refs {
		ok = ok && s.Lit(",") && s.StrRef(&refs[i])
	}
	if !ok || !s.Lit("]") || !s.Done() || first != "x" {
		t.Fatalf("scan: %v, first %q", ok, first)
	}
	for i, r := range refs {
		if got := s.String(r); got != fmt.Sprintf("s%d", i) {
			t.Errorf("String(refs[%d]) = %q", i, got)
		}
	}
	three := []byte(`"abc","de","f"`)
	type view struct{ a, b, c string }
	var out view
	if allocs := testing.AllocsPerRun(100, func() {
		var v view // on the stack: StrRef keeps no pointer into it
		var r [3]Ref
		s := NewScanner(three)
		if s.StrRef(&r[0]) && s.Lit(",") && s.StrRef(&r[1]) && s.Lit(",") && s.StrRef(&r[2]) && s.Done() {
			v.a, v.b, v.c = s.String(r[0]), s.String(r[1]), s.String(r[2])
		}
		out = v
	}); allocs > 1 || out != (view{"abc", "de", "f"}) {
		t.Errorf("three strings took %v allocations, want one (%q)", allocs, out)
	}
}

// special finds a quote, a backslash, a control character or a byte
// outside ASCII wherever it is among the eight, whatever the others are.
func TestSpecial_FindsEverySpecialByte(t *testing.T) {
	isSpecial := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	r := rand.New(rand.NewPCG(5, 6))
	plain := func() byte {
		for {
			if c := byte(r.IntN(256)); !isSpecial(c) {
				return c
			}
		}
	}
	var w [8]byte
	check := func() {
		t.Helper()
		want := false
		for _, c := range w {
			want = want || isSpecial(c)
		}
		if got := special(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("special(%q) = %v, want %v", w[:], got, want)
		}
	}
	for c := range 256 {
		for pos := range w {
			for i := range w {
				w[i] = plain()
			}
			w[pos] = byte(c)
			check()
		}
	}
	for range 100000 {
		for i := range w {
			w[i] = byte(r.IntN(256))
			if r.IntN(2) == 0 {
				w[i] = plain()
			}
		}
		check()
	}
}
