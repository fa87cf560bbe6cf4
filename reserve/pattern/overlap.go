package pattern

import (
	"slices"
	"unicode/utf8"
)

// Overlaps reports whether some path is covered by both p and q.
func (p Pattern) Overlaps(q Pattern) bool {
	if len(p.segs) == 0 || len(q.segs) == 0 {
		return false
	}
	// Both cover everything beneath what they match, so the walk goes down
	// both at once: a "**" in either takes all that is left of the other
	// (and what follows it in its own is matched beneath that), as does a
	// pattern that ends; two ordinary segments must admit one segment.
	for i := 0; ; i++ {
		if i == len(p.segs) || i == len(q.segs) || p.segs[i].any || q.segs[i].any {
			return true
		}
		if !segMeet(&p.segs[i], &q.segs[i]) {
			return false
		}
	}
}

// Covers reports whether p covers path (a plain path, normalised as
// Literal does: '*' and '?' in it stand for themselves): p matches it or
// a directory above it. A path Literal refuses is covered by nothing.
func (p Pattern) Covers(path string) bool {
	l, err := Literal(path)
	if err != nil || len(p.segs) == 0 {
		return false
	}
	return meet(p.segs, true, l.segs, false)
}

// anySeg is the "**" a covering pattern ends with: what is beneath.
var anySeg = seg{any: true, text: "**"}

// meet reports whether a path of one or more segments is matched by both
// p and q, each followed by an implicit "**" when its tail is set. It is
// a walk of the product of the two patterns' automata: a state is a
// position in each and whether a segment was matched yet; "**" may match
// no segment (move on) or one (stay), and two ordinary segments move
// together when some segment matches both (segMeet).
func meet(p []seg, pTail bool, q []seg, qTail bool) bool {
	// The literal segments both begin with decide at once where they
	// differ, and need no table.
	k := 0
	for k < len(p) && k < len(q) && p[k].lit && q[k].lit {
		if p[k].text != q[k].text {
			return false
		}
		k++
	}
	n, m := len(p), len(q)
	if pTail {
		n++
	}
	if qTail {
		m++
	}
	at := func(s []seg, i int) *seg {
		if i < len(s) {
			return &s[i]
		}
		return &anySeg
	}
	w := m + 1
	size := (n + 1) * w * 2
	var small [18 * 18 * 2]bool
	var reach []bool
	if size <= len(small) {
		reach = small[:size]
	} else {
		reach = make([]bool, size)
	}
	idx := func(i, j, e int) int { return (i*w+j)*2 + e }
	e0 := 0
	if k > 0 {
		e0 = 1
	}
	reach[idx(k, k, e0)] = true
	for i := k; i <= n; i++ {
		for j := k; j <= m; j++ {
			if i < n && j < m && at(p, i).any && at(q, j).any && reach[idx(i, j, 0)] {
				reach[idx(i, j, 1)] = true // both match one segment and stay
			}
			for e := 0; e < 2; e++ {
				if !reach[idx(i, j, e)] {
					continue
				}
				var x, y *seg
				if i < n {
					x = at(p, i)
				}
				if j < m {
					y = at(q, j)
				}
				if x != nil && x.any {
					reach[idx(i+1, j, e)] = true
				}
				if y != nil && y.any {
					reach[idx(i, j+1, e)] = true
				}
				if x == nil || y == nil {
					continue
				}
				switch {
				case x.any && y.any:
				case x.any:
					reach[idx(i, j+1, 1)] = true // p's ** matches the segment q's matches
				case y.any:
					reach[idx(i+1, j, 1)] = true
				case segMeet(x, y):
					reach[idx(i+1, j+1, 1)] = true
				}
			}
		}
	}
	return reach[idx(n, m, 1)]
}

// segMeet reports whether some segment (a non-empty string without '/')
// is matched by both a and b, neither of them "**".
func segMeet(a, b *seg) bool {
	switch {
	case a.lit && b.lit:
		return a.text == b.text
	case a.lit:
		return globMatch(b.toks, a.text)
	case b.lit:
		return globMatch(a.toks, b.text)
	}
	return globsMeet(a.toks, b.toks)
}

// globMatch reports whether the glob toks matches s whole: the classic
// walk that goes back to the last '*' on a mismatch.
func globMatch(toks []int32, s string) bool {
	ti, si := 0, 0
	starT, starS := -1, 0
	for si < len(s) {
		r, size := utf8.DecodeRuneInString(s[si:])
		if ti < len(toks) {
			switch t := toks[ti]; {
			case t == tokMany:
				starT, starS = ti, si
				ti++
				continue
			case t == tokOne || t == r:
				ti++
				si += size
				continue
			}
		}
		if starT < 0 {
			return false
		}
		// Let the last '*' take one more character.
		_, size = utf8.DecodeRuneInString(s[starS:])
		starS += size
		ti, si = starT+1, starS
	}
	for ti < len(toks) && toks[ti] == tokMany {
		ti++
	}
	return ti == len(toks)
}

// globsMeet reports whether some non-empty string is matched by both
// globs. With a '*' in each, their fixed starts (before the first '*')
// and ends (after the last) must agree where both have them: the stars
// take everything between. With a '*' in one only, the other is a string
// of fixed length whose '?' take any character: the first is matched
// against it (tokMatch). With none, they must agree character for
// character. No case needs more than a pass over the two.
func globsMeet(a, b []int32) bool {
	sa, sb := slices.Index(a, tokMany), slices.Index(b, tokMany)
	switch {
	case sa >= 0 && sb >= 0:
		ea, eb := len(a)-1-lastStar(a), len(b)-1-lastStar(b)
		return agree(a[:sa], b[:sb], false) && agree(a[len(a)-ea:], b[len(b)-eb:], true)
	case sa >= 0:
		return tokMatch(a, b)
	case sb >= 0:
		return tokMatch(b, a)
	}
	return len(a) == len(b) && agree(a, b, false)
}

func lastStar(toks []int32) int {
	for i := len(toks) - 1; i >= 0; i-- {
		if toks[i] == tokMany {
			return i
		}
	}
	return -1
}

// agree reports whether two runs of tokens without '*' admit a common
// string where they overlap: from their starts, or from their ends.
func agree(x, y []int32, fromEnd bool) bool {
	n := min(len(x), len(y))
	for i := range n {
		a, b := x[i], y[i]
		if fromEnd {
			a, b = x[len(x)-n+i], y[len(y)-n+i]
		}
		if a != b && a != tokOne && b != tokOne {
			return false
		}
	}
	return true
}

// tokMatch reports whether glob g matches some string of the fixed-length
// token run f (no '*'; a '?' in f stands for any character): the walk of
// globMatch, going back to the last '*' on a mismatch, with a '?' on
// either side matching anything.
func tokMatch(g, f []int32) bool {
	gi, fi := 0, 0
	starG, starF := -1, 0
	for fi < len(f) {
		if gi < len(g) {
			switch t := g[gi]; {
			case t == tokMany:
				starG, starF = gi, fi
				gi++
				continue
			case t == tokOne || f[fi] == tokOne || t == f[fi]:
				gi++
				fi++
				continue
			}
		}
		if starG < 0 {
			return false
		}
		starF++
		gi, fi = starG+1, starF
	}
	for gi < len(g) && g[gi] == tokMany {
		gi++
	}
	return gi == len(g)
}

// Apart reports, from two patterns as written and without parsing them,
// that they do not overlap: at some place both have a plain segment (a
// name without '*', '?' or anything Parse would change or refuse), the
// two differ, and every segment before it is plain and the same in both.
// False says nothing: they may overlap, or not parse. It is for a reader
// that would otherwise parse many patterns to meet a few paths.
func Apart(p, q string) bool {
	if len(p) > MaxLen || len(q) > MaxLen {
		return false
	}
	for {
		a, pRest, pMore := cutSlash(p)
		b, qRest, qMore := cutSlash(q)
		if !plainName(a) || !plainName(b) {
			return false
		}
		if a != b {
			return true
		}
		if !pMore || !qMore {
			return false // one covers what is beneath the other
		}
		p, q = pRest, qRest
	}
}

// cutSlash is s's first segment, what follows its slash, and whether a
// slash was there.
func cutSlash(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// plainName reports whether a segment, as written, is a name Parse keeps
// as it is and reads literally.
func plainName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '*' || c == '?' || c == '\\' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
