package reserve

// The decision every write makes, as pure functions of the space as read
// and a decision time no later than the write's own server time (adr/0056):
// which reservations have expired, which conflict with a request, and which
// waiting ones are now free to hold.

import (
	"fmt"
	"time"

	"github.com/batonhq/baton/reserve/pattern"
)

// resolve writes out the zeros of the entries of rec that stand for the
// revision rev that holds it: the fence of each held entry always (a
// writer learns its revision from the answer), the times when at is that
// revision's exact server time. A time left zero counts from the next
// revision that holds it: later than the real one, never earlier, so an
// entry counts as alive a little longer than it must, never shorter.
func resolve(rec *Record, rev uint64, at time.Time, exact bool) {
	for i := range rec.Entries {
		e := &rec.Entries[i]
		if !e.Waiting && e.Fence == 0 {
			e.Fence = rev
		}
		if exact {
			if e.Since.IsZero() {
				e.Since = at
			}
			if e.Renewed.IsZero() {
				e.Renewed = at
			}
		}
	}
}

// ttl is an entry's TTL.
func (e *Entry) ttl() time.Duration { return time.Duration(e.TTL) }

// expired reports whether e is past its TTL at server time d. An entry
// renewed by the revision that holds it (Renewed zero) is not.
func (e *Entry) expired(d time.Time) bool {
	return !e.Renewed.IsZero() && !d.Before(e.Renewed.Add(e.ttl()))
}

// ExpiresAt is the server time the entry's TTL runs out (zero while its
// last renewal's time is unknown: the revision that holds it).
func (e Entry) ExpiresAt() time.Time {
	if e.Renewed.IsZero() {
		return time.Time{}
	}
	return e.Renewed.Add(e.ttl())
}

// compiled is an entry with its patterns parsed.
type compiled struct {
	e    *Entry
	pats []pattern.Pattern
	pres []prefix // of pats
}

// conflict is a pair of patterns in the way of each other.
type conflict struct {
	mine, theirs int // indexes into the request's and the entry's patterns
}

// clash reports the first pair of patterns, one of a and one of b, that
// overlap, when the two reservations cannot both be held: both shared
// never clash.
func clash(a []pattern.Pattern, aShared bool, b []pattern.Pattern, bShared bool) (conflict, bool) {
	if aShared && bShared {
		return conflict{}, false
	}
	for i, p := range a {
		for j, q := range b {
			if p.Overlaps(q) {
				return conflict{mine: i, theirs: j}, true
			}
		}
	}
	return conflict{}, false
}

// prune removes the entries expired at d, and those dead reports (holders
// whose process is gone on this host); it returns the entries kept.
func prune(entries []Entry, d time.Time, dead func(*Entry) bool) []Entry {
	kept := keep(entries[:0], entries, d, dead)
	clear(entries[len(kept):])
	return kept
}

// keep appends to dst the entries of src that prune keeps, and returns
// it (dst may be src[:0]). Runs of entries kept are copied at once.
func keep(dst, src []Entry, d time.Time, dead func(*Entry) bool) []Entry {
	from := 0 // the run of kept entries not yet copied begins here
	for i := range src {
		if e := &src[i]; e.expired(d) || dead != nil && dead(e) {
			dst = append(dst, src[from:i]...)
			from = i + 1
		}
	}
	return append(dst, src[from:]...)
}

// promote makes held every waiting entry that clashes with no held entry
// and no waiting entry before it, in order; each gets the revision being
// written as its fence and time (zeros). It returns how many it promoted.
func promote(cs []compiled) int {
	n := 0
	for i := range cs {
		w := &cs[i]
		if !w.e.Waiting {
			continue
		}
		free := true
		for j := range cs {
			if j == i {
				continue
			}
			o := &cs[j]
			if o.e.Waiting && j > i {
				continue
			}
			if _, ok := clash(w.pats, w.e.Shared, o.pats, o.e.Shared); ok {
				free = false
				break
			}
		}
		if free {
			w.e.Waiting = false
			w.e.Fence = 0
			w.e.Since = time.Time{}
			n++
		}
	}
	return n
}

// blockers are the entries of cs a request of pats (shared or not)
// clashes with: every held one, and every waiting one before position
// before (len(cs) for a request not yet in line), each with the pair of
// patterns in the way.
func blockers(cs []compiled, pats []pattern.Pattern, shared bool, before int, skip string) []blocker {
	var out []blocker
	ways := waysOf(pats)
	for j := range cs {
		o := &cs[j]
		if o.e.ID == skip || (o.e.Waiting && j >= before) || ways.apart(o.pres) {
			continue
		}
		if c, ok := clash(pats, shared, o.pats, o.e.Shared); ok {
			out = append(out, blocker{entry: o.e, conflict: c})
		}
	}
	return out
}

// blockersIn is blockers of the entries of r, a record no other goroutine
// sees, each compiled as it comes (memoised, as compile does): one pass,
// in which most entries are set apart by their memoised prefixes alone.
func (s *Spaces) blockersIn(r *Record, pats []pattern.Pattern, shared bool) ([]blocker, error) {
	var out []blocker
	ways := waysOf(pats)
	for j := range r.Entries {
		e := &r.Entries[j]
		ps, _, err := e.compiledPatterns(s.parse, true) // memoised in e.memo
		if err != nil {
			return nil, fmt.Errorf("%w: space %s, reservation %s: %w", ErrUndecodable, r.Space, e.ID, err)
		}
		if ways.apartMemo(e.memo) {
			continue
		}
		if c, ok := clash(pats, shared, ps, e.Shared); ok {
			out = append(out, blocker{entry: e, conflict: c})
		}
	}
	return out, nil
}

// ways are a request's patterns as a quick test of which entries they
// may meet, by their first two plain segments (pattern.Plain): most
// entries of a space are apart from a request by those alone, and are
// not tested pattern by pattern. Nil when a pattern has none: every
// entry is tested.
type ways []prefix

// prefix is a pattern's first n (up to 2) plain segments, with their
// keys.
type prefix struct {
	prefixKey
	s0, s1 string
}

// prefixKey is how many plain segments a pattern begins with (up to 2)
// and a key of each: the length and first seven bytes of the segment.
// Two segments of different keys differ.
type prefixKey struct {
	n      int
	k0, k1 uint64
}

func prefixOf(p pattern.Pattern) prefix {
	s0, ok := p.Plain(0)
	if !ok {
		return prefix{}
	}
	if s1, ok := p.Plain(1); ok {
		return prefix{prefixKey: prefixKey{n: 2, k0: keyOf(s0), k1: keyOf(s1)}, s0: s0, s1: s1}
	}
	return prefix{prefixKey: prefixKey{n: 1, k0: keyOf(s0)}, s0: s0}
}

// keyOf is a segment's length and first seven bytes.
func keyOf(s string) uint64 {
	k := uint64(min(len(s), 255)) << 56
	for i := 0; i < len(s) && i < 7; i++ {
		k |= uint64(s[i]) << (8 * i)
	}
	return k
}

// apart reports whether the keys alone tell two patterns apart: a plain
// segment of one differs from the other's.
func (p prefixKey) apart(q prefixKey) bool {
	return p.n != 0 && q.n != 0 && (p.k0 != q.k0 || p.n == 2 && q.n == 2 && p.k1 != q.k1)
}

// meets reports whether p and q, patterns of these prefixes, may
// overlap: no plain segment of one differs from the other's.
func (p *prefix) meets(q *prefix) bool {
	if p.n == 0 || q.n == 0 {
		return true
	}
	if p.k0 != q.k0 || p.s0 != q.s0 {
		return false
	}
	return p.n < 2 || q.n < 2 || p.k1 == q.k1 && p.s1 == q.s1
}

func waysOf(pats []pattern.Pattern) ways {
	out := make(ways, 0, len(pats))
	for _, p := range pats {
		pre := prefixOf(p)
		if pre.n == 0 {
			return nil
		}
		out = append(out, pre)
	}
	return out
}

// apart reports whether none of the patterns of these prefixes can
// overlap the request's: each differs from each of the request's in a
// plain segment.
func (w ways) apart(pres []prefix) bool {
	if w == nil {
		return false
	}
	for i := range pres {
		for j := range w {
			if w[j].meets(&pres[i]) {
				return false
			}
		}
	}
	return true
}

// apartMemo is apart of an entry's memoised patterns, told by the keys
// the memo holds of the first two where they differ (most entries): the
// prefixes themselves are read only where keys are alike.
func (w ways) apartMemo(m *memo) bool {
	if w == nil {
		return false
	}
	for i := range m.pats {
		var q prefixKey
		if i < len(m.keys) {
			q = m.keys[i]
		} else {
			q = m.pres[i].prefixKey
		}
		for j := range w {
			if !w[j].prefixKey.apart(q) && w[j].meets(&m.pres[i]) {
				return false
			}
		}
	}
	return true
}

// blocker is an entry in a request's way.
type blocker struct {
	entry *Entry
	conflict
}
