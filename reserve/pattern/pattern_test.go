package pattern

import (
	"errors"
	"fmt"
	pathpkg "path"
	"strings"
	"testing"
)

func TestParse_Normalises(t *testing.T) {
	for in, want := range map[string]string{
		"src":            "src",
		"./src//a/":      "src/a",
		".":              "**",
		"./":             "**",
		"a/./b":          "a/b",
		"a/**/**/b":      "a/**/b",
		"a**b/c":         "a*b/c",
		"app/[id]/p.tsx": "app/[id]/p.tsx",
		"**":             "**",
		"x/***":          "x/*",
	} {
		p, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if p.String() != want {
			t.Errorf("Parse(%q) = %q, want %q", in, p, want)
		}
	}
}

func TestParse_Refuses(t *testing.T) {
	for in, why := range map[string]string{
		"":                        "empty",
		"/etc/passwd":             "absolute",
		"a/../b":                  "..",
		"..":                      "..",
		`src\a.go`:                "backslash",
		"a\x00b":                  "control",
		"a\nb":                    "control",
		"\xff":                    "UTF-8",
		strings.Repeat("a", 1025): "bytes",
		strings.Repeat("a/", 65):  "segments",
	} {
		_, err := Parse(in)
		if !errors.Is(err, ErrBadPattern) || !strings.Contains(err.Error(), why) {
			t.Errorf("Parse(%q) = %v, want ErrBadPattern saying %q", in, err, why)
		}
	}
	if _, err := Literal("."); !errors.Is(err, ErrBadPattern) {
		t.Errorf("Literal(.) = %v, want ErrBadPattern", err)
	}
}

func TestOverlaps(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"src", "src/parser/x.go", true},
		{"src/", "src/parser/x.go", true},
		{"src/*.go", "src/a/b.go", false},
		{"src/*.go", "src/a.go", true},
		{"a/*/c", "a/b/**", true},
		{"**/x.go", "docs/**", true},
		{"a?", "ab*", true},
		{"a?", "a", false},
		{"*.md", "*.go", false},
		{"a/**/b", "a/c", true},
		{"docs/api.md", "docs/api.md", true},
		{"docs/api.md", "docs/api.mdx", false},
		{"docs", "doc", false},
		{"a/x/1.go", "a/x/2.go", false},
		{"**", "anything/at/all", true},
		{"*/y", "a", true}, // a/y is beneath a
		{"b/?/2.go", "b/yy", false},
		{"b/?/2.go", "b/y", true},
		{"x*", "*y", true},
		{"*a*", "*b*", true},
		{"a*", "b*", false},
		{"?", "??", false},
		{"*", "??", true},
		{"app/[id]/page.tsx", "app/*/page.tsx", true},
		{"a/**/c/d", "a/b/**/e", true}, // a/b/c/d/... no: a/b/c/d covers beneath; a/b/x/e? needs c/d; a/b/c/d/e is under a/b/**/e? yes
		{"a/b", "a/c/**", false},
	} {
		a, b := MustParse(c.a), MustParse(c.b)
		if got := a.Overlaps(b); got != c.want {
			t.Errorf("%q overlaps %q = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := b.Overlaps(a); got != c.want {
			t.Errorf("%q overlaps %q = %v, want %v (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestCovers(t *testing.T) {
	for _, c := range []struct {
		pat, path string
		want      bool
	}{
		{"src", "src/a/b.go", true},
		{"src", "srcx/a.go", false},
		{"src/*.go", "src/a.go", true},
		{"src/*.go", "src/a/b.go", false},
		{"**/*.md", "docs/x/y.md", true},
		{"**/*.md", "y.md", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b/z", true},
		{"a/**/b", "a/x/y/c", false},
		{"x?", "x*", true}, // a path's '*' is a character like any
		{"x", "x*", false},
		{"a", "/a", false}, // not a path
	} {
		if got := MustParse(c.pat).Covers(c.path); got != c.want {
			t.Errorf("%q covers %q = %v, want %v", c.pat, c.path, got, c.want)
		}
	}
	lit, err := Literal("a*b")
	if err != nil {
		t.Fatal(err)
	}
	if lit.Overlaps(MustParse("axb")) || !lit.Overlaps(MustParse("a?b")) || !lit.IsLiteral() {
		t.Errorf("a literal path a*b: its * must stand for itself")
	}
}

func TestOverlaps_ZeroPattern(t *testing.T) {
	var zero Pattern
	if zero.Overlaps(MustParse("**")) || MustParse("**").Overlaps(zero) || zero.Covers("a") {
		t.Error("the zero pattern overlaps or covers something")
	}
}

// oracle decides overlap by brute force: every path of up to maxLen
// characters over {a, b, c, /} is tried against each pattern with a
// matcher of its own (path.Match per segment, "**" by recursion),
// independent of the package's automata.
type oracle struct{ paths [][]string }

func newOracle(maxLen int) *oracle {
	o := &oracle{}
	var gen func(prefix string)
	gen = func(prefix string) {
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			o.paths = append(o.paths, strings.Split(prefix, "/"))
		}
		if len(prefix) == maxLen {
			return
		}
		for _, c := range []string{"a", "b", "c", "/"} {
			if c == "/" && (prefix == "" || strings.HasSuffix(prefix, "/")) {
				continue
			}
			gen(prefix + c)
		}
	}
	gen("")
	return o
}

// coversRef reports whether the pattern's segments pat match a prefix of
// the path's segments (one or more, or all of them).
func coversRef(pat, path []string) bool {
	if len(pat) == 0 {
		return true // the path, or a prefix of it, was matched: beneath is covered
	}
	if pat[0] == "**" {
		for i := 0; i <= len(path); i++ {
			if coversRef(pat[1:], path[i:]) {
				return true
			}
		}
		return false
	}
	if len(path) == 0 {
		return false
	}
	ok, err := pathpkg.Match(pat[0], path[0])
	return err == nil && ok && coversRef(pat[1:], path[1:])
}

// covered is the set of the oracle's paths p covers, as bits.
func (o *oracle) covered(p Pattern) []uint64 {
	segs := strings.Split(p.String(), "/")
	bits := make([]uint64, (len(o.paths)+63)/64)
	for k, path := range o.paths {
		if coversRef(segs, path) {
			bits[k/64] |= 1 << (k % 64)
		}
	}
	return bits
}

// witness is a path covered by both, or "".
func (o *oracle) witness(p, q Pattern) string {
	a, b := o.covered(p), o.covered(q)
	for i := range a {
		if m := a[i] & b[i]; m != 0 {
			for k := i * 64; ; k++ {
				if m&(1<<(k%64)) != 0 {
					return strings.Join(o.paths[k], "/")
				}
			}
		}
	}
	return ""
}

// smallPatterns are every pattern of up to two segments, each "**" or up
// to two tokens of {a, b, *, ?}.
func smallPatterns() []string {
	toks := []string{"a", "b", "*", "?"}
	segs := []string{"**"}
	for _, x := range toks {
		segs = append(segs, x)
		for _, y := range toks {
			if x == "*" && y == "*" {
				continue
			}
			segs = append(segs, x+y)
		}
	}
	var out []string
	for _, s := range segs {
		out = append(out, s)
		for _, t := range segs {
			if s == "**" && t == "**" {
				continue
			}
			out = append(out, s+"/"+t)
		}
	}
	return out
}

// Every pair of small patterns: Overlaps equals the brute force. Paths of
// up to 8 characters suffice for a witness: the longest needed is one
// pattern's two segments with the other's last beneath them (ab/ab/aa for
// **/aa and ab/ab), each segment of at most two characters.
func TestOverlaps_AgreesWithBruteForce(t *testing.T) {
	pats := smallPatterns()
	if testing.Short() || raceEnabled {
		// Every third: the race detector slows the brute force tenfold.
		var some []string
		for i := 0; i < len(pats); i += 3 {
			some = append(some, pats[i])
		}
		pats = some
	}
	o := newOracle(8)
	compiled := make([]Pattern, len(pats))
	covered := make([][]uint64, len(pats))
	for i, s := range pats {
		compiled[i] = MustParse(s)
		covered[i] = o.covered(compiled[i])
	}
	for i := range pats {
		for j := i; j < len(pats); j++ {
			want := false
			for w := range covered[i] {
				if covered[i][w]&covered[j][w] != 0 {
					want = true
					break
				}
			}
			if got := compiled[i].Overlaps(compiled[j]); got != want {
				t.Fatalf("%q overlaps %q = %v, brute force %v", pats[i], pats[j], got, want)
			}
		}
	}
	// Covers agrees with the brute force's matcher on a sample of paths.
	for i, p := range compiled {
		for k := i % 11; k < len(o.paths); k += 11 {
			path := strings.Join(o.paths[k], "/")
			if got, want := p.Covers(path), covered[i][k/64]&(1<<(k%64)) != 0; got != want {
				t.Fatalf("%q covers %q = %v, brute force %v", pats[i], path, got, want)
			}
		}
	}
	t.Logf("%d patterns, %d pairs, %d paths", len(pats), len(pats)*(len(pats)+1)/2, len(o.paths))
}

// Apart never says two patterns that overlap are apart, and says so of
// those whose plain segments differ before any wildcard.
func TestApart(t *testing.T) {
	pats := append(smallPatterns(), "a/b/c", "a/b/**", "a/c", "./a/b", "a//b", "a/", "/a", "a/../b", "a\\b", "**", ".", "a/b/c/*.go")
	for _, p := range pats {
		for _, q := range pats {
			if !Apart(p, q) {
				continue
			}
			pp, err1 := Parse(p)
			qq, err2 := Parse(q)
			if err1 == nil && err2 == nil && pp.Overlaps(qq) {
				t.Fatalf("Apart(%q, %q), yet they overlap", p, q)
			}
		}
	}
	for _, c := range []struct {
		p, q  string
		apart bool
	}{
		{"src/pkg1/**", "src/free/x.go", true},
		{"docs/file2.md", "src/free/x.go", true},
		{"src/pkg1/**", "src/pkg1/x.go", false},
		{"src", "src/x.go", false},
		{"src/*.go", "src/x.go", false},
		{"*/x", "src/x", false},
		{"src/**", "docs", true},
		{"./src", "docs", false},
		{"a//b", "a/c", false},
		{"", "a", false},
	} {
		if got := Apart(c.p, c.q); got != c.apart {
			t.Errorf("Apart(%q, %q) = %v, want %v", c.p, c.q, got, c.apart)
		}
	}
}

// Patterns whose plain segments differ at some place never overlap.
func TestPlain(t *testing.T) {
	pats := append(smallPatterns(), "a/b/c", "ab/**", "b", "a/a/**", "a/b")
	for _, p := range pats {
		for _, q := range pats {
			pp, qq := MustParse(p), MustParse(q)
			for i := range 3 {
				sp, okp := pp.Plain(i)
				sq, okq := qq.Plain(i)
				if okp && okq && sp != sq && pp.Overlaps(qq) {
					t.Fatalf("%q and %q differ in plain segment %d (%q, %q), yet overlap", p, q, i, sp, sq)
				}
			}
		}
	}
	for _, c := range []struct {
		p    string
		i    int
		want string
	}{{"src/**", 0, "src"}, {"./src//a", 1, "a"}, {"**", 0, ""}, {"*.go", 0, ""}, {"s?c/x", 1, ""}, {"a/*/c", 2, ""}, {"a", 1, ""}, {"a", -1, ""}} {
		if got, ok := MustParse(c.p).Plain(c.i); got != c.want || ok != (c.want != "") {
			t.Errorf("%q: plain %d %q, %v; want %q", c.p, c.i, got, ok, c.want)
		}
	}
	if _, ok := (Pattern{}).Plain(0); ok {
		t.Error("the zero Pattern has a plain segment")
	}
}

func BenchmarkOverlaps(b *testing.B) {
	for _, c := range [][2]string{
		{"src/parser/**", "docs/api.md"},
		{"src/parser/**", "src/parser/lexer.go"},
		{"internal/*/x_test.go", "internal/queue/**"},
		{"**/*.go", "docs/**/*.md"},
		{"a*b*c*d*/**/x?y*z", "**/*a*b*/*c?d*/x*z"},
		{strings.Repeat("a", 1000), "*" + strings.Repeat("a", 500) + "b*"},
		{"*" + strings.Repeat("a?", 300) + "*", "*" + strings.Repeat("?a", 300) + "b"},
	} {
		p, q := MustParse(c[0]), MustParse(c[1])
		name := c[0] + " vs " + c[1]
		if len(name) > 60 {
			name = fmt.Sprintf("%d and %d bytes", len(c[0]), len(c[1]))
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Overlaps(q)
			}
		})
	}
}
