package reserve

import (
	"testing"

	"github.com/batonhq/baton/reserve/pattern"
)

// The quick test of a request's ways never sets apart an entry one of its
// patterns overlaps.
func TestWays_NeverApartFromAnOverlap(t *testing.T) {
	pats := []string{"a", "b", "a/b", "abcdefgh/x", "abcdefgi/x", "abcdefg/x", "x/abcdefgh", "x/abcdefgi", "a/c", "a/b/c", "a/*", "*/b", "**", "a/**", "a/b/**", "b/**/c", "a/?", "ab", "a/bc/*.go", "a/b*"}
	for _, r1 := range pats {
		for _, r2 := range pats {
			req := []pattern.Pattern{pattern.MustParse(r1), pattern.MustParse(r2)}
			w := waysOf(req)
			for _, q := range pats {
				qq := []pattern.Pattern{pattern.MustParse(q)}
				if w.apart([]prefix{prefixOf(qq[0])}) && (req[0].Overlaps(qq[0]) || req[1].Overlaps(qq[0])) {
					t.Fatalf("request %q, %q: %q set apart, yet it overlaps", r1, r2, q)
				}
			}
		}
	}
	// The memo's keys tell the same, for entries of one to three patterns.
	for _, r1 := range pats {
		w := waysOf([]pattern.Pattern{pattern.MustParse(r1), pattern.MustParse("a/b/c")})
		for i, q := range pats {
			e := Entry{Patterns: []string{q, pats[(i+1)%len(pats)], pats[(i+5)%len(pats)]}[:1+i%3]}
			_, pres, err := e.compiledPatterns(pattern.Parse, true)
			if err != nil {
				t.Fatal(err)
			}
			if w.apartMemo(e.memo) != w.apart(pres) {
				t.Fatalf("request %q, entry %q: by the memo's keys %v, by the prefixes %v", r1, e.Patterns, w.apartMemo(e.memo), w.apart(pres))
			}
		}
	}
	w := waysOf([]pattern.Pattern{pattern.MustParse("src/bench/**"), pattern.MustParse("docs/bench.md")})
	for q, apart := range map[string]bool{"src/pkg1/**": true, "docs/file1.md": true, "src": false, "src/*.go": false, "src/bench/x": false, "web/**": true, "*/bench/x": false} {
		if got := w.apart([]prefix{prefixOf(pattern.MustParse(q))}); got != apart {
			t.Errorf("%q apart: %v, want %v", q, got, apart)
		}
	}
}
