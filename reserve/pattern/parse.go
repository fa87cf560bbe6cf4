package pattern

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLen and MaxSegments bound a pattern.
const (
	MaxLen      = 1024
	MaxSegments = 64
)

// Tokens of a glob segment: a rune stands for itself; these two are
// wildcards.
const (
	tokOne  int32 = -1 // '?': one character
	tokMany int32 = -2 // '*': any run of characters
)

// seg is one segment of a pattern.
type seg struct {
	any  bool    // "**": any number of whole segments
	lit  bool    // no wildcard: text is the segment
	text string  // the segment as written (normalised)
	toks []int32 // a glob's tokens; nil for a literal or "**"
}

// Pattern is a parsed pattern. It is immutable and safe for concurrent
// use. The zero Pattern covers nothing and overlaps nothing.
type Pattern struct {
	src  string
	segs []seg
}

// Parse reads a pattern, normalised as the package says.
func Parse(s string) (Pattern, error) {
	parts, err := split(s)
	if err != nil {
		return Pattern{}, err
	}
	segs := make([]seg, 0, len(parts))
	for _, p := range parts {
		if p == "**" {
			if len(segs) > 0 && segs[len(segs)-1].any {
				continue // a/**/**/b is a/**/b
			}
			segs = append(segs, seg{any: true, text: "**"})
			continue
		}
		segs = append(segs, globSeg(p))
	}
	if len(segs) == 0 {
		segs = append(segs, seg{any: true, text: "**"})
	}
	return Pattern{src: join(segs), segs: segs}, nil
}

// MustParse is Parse that panics on a bad pattern: for tests and
// constants.
func MustParse(s string) Pattern {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Literal reads a plain path as a pattern that matches it alone (and
// covers what is beneath it): '*' and '?' in it stand for themselves. It
// normalises and refuses as Parse does; "." is refused, since a path
// names something.
func Literal(s string) (Pattern, error) {
	parts, err := split(s)
	if err != nil {
		return Pattern{}, err
	}
	if len(parts) == 0 {
		return Pattern{}, fmt.Errorf("%w: path %q names no file or directory: give a path relative to the root", ErrBadPattern, s)
	}
	segs := make([]seg, len(parts))
	for i, p := range parts {
		segs[i] = seg{lit: true, text: p}
	}
	return Pattern{src: join(segs), segs: segs}, nil
}

// split checks s and returns its segments, "" and "." dropped.
func split(s string) ([]string, error) {
	switch {
	case s == "":
		return nil, fmt.Errorf("%w: an empty pattern: give a path relative to the root, such as src/** or docs/api.md", ErrBadPattern)
	case len(s) > MaxLen:
		return nil, fmt.Errorf("%w: a pattern of %d bytes: at most %d", ErrBadPattern, len(s), MaxLen)
	case !utf8.ValidString(s):
		return nil, fmt.Errorf("%w: %q is not valid UTF-8", ErrBadPattern, s)
	case strings.HasPrefix(s, "/"):
		return nil, fmt.Errorf("%w: %q is an absolute path: give it relative to the root (%s)", ErrBadPattern, s, strings.TrimLeft(s, "/"))
	case strings.ContainsRune(s, '\\'):
		return nil, fmt.Errorf("%w: %q holds a backslash: separate directories with /", ErrBadPattern, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return nil, fmt.Errorf("%w: %q holds a control character", ErrBadPattern, s)
		}
	}
	var out []string
	for _, p := range strings.Split(s, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("%w: %q holds a .. segment: give a path within the root", ErrBadPattern, s)
		}
		out = append(out, p)
	}
	if len(out) > MaxSegments {
		return nil, fmt.Errorf("%w: %q has %d segments: at most %d", ErrBadPattern, s, len(out), MaxSegments)
	}
	return out, nil
}

// globSeg compiles one segment that is not "**"; runs of '*' are one.
func globSeg(p string) seg {
	if !strings.ContainsAny(p, "*?") {
		return seg{lit: true, text: p}
	}
	var toks []int32
	var b strings.Builder
	for _, r := range p {
		switch r {
		case '*':
			if len(toks) > 0 && toks[len(toks)-1] == tokMany {
				continue
			}
			toks = append(toks, tokMany)
		case '?':
			toks = append(toks, tokOne)
		default:
			toks = append(toks, r)
		}
		b.WriteRune(r)
	}
	text := b.String()
	for strings.Contains(text, "**") {
		text = strings.ReplaceAll(text, "**", "*")
	}
	return seg{text: text, toks: toks}
}

func join(segs []seg) string {
	var b strings.Builder
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(s.text)
	}
	return b.String()
}

// String is the pattern in its normalised form.
func (p Pattern) String() string { return p.src }

// Plain is the pattern's i-th segment (from 0) when it and every one
// before it have no wildcard, and false otherwise. Every path the pattern
// covers has those segments: two patterns whose plain segments differ at
// some place never overlap.
func (p Pattern) Plain(i int) (string, bool) {
	if i < 0 || i >= len(p.segs) {
		return "", false
	}
	for k := range i + 1 {
		if !p.segs[k].lit {
			return "", false
		}
	}
	return p.segs[i].text, true
}

// IsLiteral reports whether the pattern has no wildcard: it names one
// path (and covers what is beneath it).
func (p Pattern) IsLiteral() bool {
	for _, s := range p.segs {
		if !s.lit {
			return false
		}
	}
	return len(p.segs) > 0
}
