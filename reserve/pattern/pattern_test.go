package pattern

import (
	"errors"
	"regexp"
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
// characters over {a, b, c, /} is tried against a regular expression made
// from each pattern independently of the package's automata.
type oracle struct{ paths []string }

func newOracle(maxLen int) *oracle {
	o := &oracle{}
	var gen func(prefix string)
	gen = func(prefix string) {
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			o.paths = append(o.paths, prefix)
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

// regexpOf is the regular expression of the paths a pattern covers,
// matched against "/" + path.
func regexpOf(p Pattern) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, s := range strings.Split(p.String(), "/") {
		if s == "**" {
			b.WriteString("(?:/[^/]+)*")
			continue
		}
		b.WriteString("/")
		for _, r := range s {
			switch r {
			case '*':
				b.WriteString("[^/]*")
			case '?':
				b.WriteString("[^/]")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
	}
	b.WriteString("(?:/[^/]+)*$")
	return regexp.MustCompile(b.String())
}

// witness is a path covered by both, or "".
func (o *oracle) witness(p, q Pattern) string {
	rp, rq := regexpOf(p), regexpOf(q)
	for _, path := range o.paths {
		if rp.MatchString("/"+path) && rq.MatchString("/"+path) {
			return path
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
	if testing.Short() {
		pats = pats[:len(pats)/4]
	}
	o := newOracle(8)
	compiled := make([]Pattern, len(pats))
	for i, s := range pats {
		compiled[i] = MustParse(s)
	}
	rx := make([]*regexp.Regexp, len(pats))
	for i, p := range compiled {
		rx[i] = regexpOf(p)
	}
	// covered[i] is the set of oracle paths pattern i covers.
	covered := make([][]bool, len(pats))
	for i := range pats {
		covered[i] = make([]bool, len(o.paths))
		for k, path := range o.paths {
			covered[i][k] = rx[i].MatchString("/" + path)
		}
	}
	for i := range pats {
		for j := i; j < len(pats); j++ {
			want := false
			for k := range o.paths {
				if covered[i][k] && covered[j][k] {
					want = true
					break
				}
			}
			if got := compiled[i].Overlaps(compiled[j]); got != want {
				t.Fatalf("%q overlaps %q = %v, brute force %v", pats[i], pats[j], got, want)
			}
		}
	}
	t.Logf("%d patterns, %d pairs, %d paths", len(pats), len(pats)*(len(pats)+1)/2, len(o.paths))
}

func BenchmarkOverlaps(b *testing.B) {
	for _, c := range [][2]string{
		{"src/parser/**", "docs/api.md"},
		{"src/parser/**", "src/parser/lexer.go"},
		{"internal/*/x_test.go", "internal/queue/**"},
		{"**/*.go", "docs/**/*.md"},
		{"a*b*c*d*/**/x?y*z", "**/*a*b*/*c?d*/x*z"},
	} {
		p, q := MustParse(c[0]), MustParse(c[1])
		b.Run(c[0]+" vs "+c[1], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Overlaps(q)
			}
		})
	}
}
