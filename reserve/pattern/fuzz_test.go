package pattern

import (
	"strings"
	"sync"
	"testing"
)

// fuzzOracle is built once: every path of up to 8 characters.
var fuzzOracle = sync.OnceValue(func() *oracle { return newOracle(8) })

// patternOf turns fuzz bytes into a pattern of up to three segments over
// {a, b, *, ?}, with "**" segments.
func patternOf(data []byte) string {
	var segs []string
	var cur strings.Builder
	for _, c := range data {
		if len(segs) == 3 {
			break
		}
		switch c % 7 {
		case 0:
			cur.WriteByte('a')
		case 1:
			cur.WriteByte('b')
		case 2:
			cur.WriteByte('*')
		case 3:
			cur.WriteByte('?')
		case 4:
			if cur.Len() > 0 {
				segs = append(segs, cur.String())
				cur.Reset()
			}
		case 5:
			if cur.Len() == 0 {
				segs = append(segs, "**")
			}
		case 6:
			cur.WriteByte('a')
		}
		if cur.Len() >= 3 {
			segs = append(segs, cur.String())
			cur.Reset()
		}
	}
	if cur.Len() > 0 && len(segs) < 3 {
		segs = append(segs, cur.String())
	}
	if len(segs) == 0 {
		return "a"
	}
	return strings.Join(segs, "/")
}

// FuzzOverlap checks Overlaps against the brute force: never "no overlap"
// where a common path exists, and the same answer both ways round.
func FuzzOverlap(f *testing.F) {
	for _, s := range [][2]string{{"\x00\x04\x05", "\x05\x04\x01"}, {"\x02\x00", "\x01\x02"}, {"\x05\x04\x00\x00", "\x00\x01\x04\x00\x01"}, {"\x03", "\x00\x00"}} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ps, qs := patternOf(a), patternOf(b)
		p, err := Parse(ps)
		if err != nil {
			t.Fatalf("Parse(%q): %v", ps, err)
		}
		q, err := Parse(qs)
		if err != nil {
			t.Fatalf("Parse(%q): %v", qs, err)
		}
		got := p.Overlaps(q)
		if got != q.Overlaps(p) {
			t.Fatalf("%q overlaps %q is not symmetric", ps, qs)
		}
		if w := fuzzOracle().witness(p, q); w != "" && !got {
			t.Fatalf("%q and %q both cover %q, yet Overlaps says no", ps, qs, w)
		}
		if w := fuzzOracle().witness(p, q); w != "" && (!p.Covers(w) || !q.Covers(w)) {
			t.Fatalf("Covers disagrees with the brute force on %q for %q and %q", w, ps, qs)
		}
	})
}

// FuzzParse: Parse never panics; a parsed pattern's string parses to the
// same string, and covers what it did.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"src/**", "./a//b/", "a/../b", "**/*.md", "app/[id]/x.tsx", ".", "a\x00", "x/***"} {
		f.Add(s, "a/b")
	}
	f.Fuzz(func(t *testing.T, s, path string) {
		p, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(p.String())
		if err != nil || again.String() != p.String() {
			t.Fatalf("Parse(%q) = %q, which parses to %q, %v", s, p, again, err)
		}
		if p.Covers(path) != again.Covers(path) {
			t.Fatalf("%q and its normal form %q disagree on %q", s, p, path)
		}
		if !p.Overlaps(p) {
			t.Fatalf("%q does not overlap itself", s)
		}
	})
}
