package reserve

// The decision every write makes, as pure functions of the space as read
// and a decision time no later than the write's own server time (adr/0056):
// which reservations have expired, which conflict with a request, and which
// waiting ones are now free to hold.

import (
	"slices"
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
func (e Entry) ttl() time.Duration { return time.Duration(e.TTL) }

// expired reports whether e is past its TTL at server time d. An entry
// renewed by the revision that holds it (Renewed zero) is not.
func (e Entry) expired(d time.Time) bool {
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
	return slices.DeleteFunc(entries, func(e Entry) bool {
		return e.expired(d) || (dead != nil && dead(&e))
	})
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
	for j := range cs {
		o := &cs[j]
		if o.e.ID == skip || (o.e.Waiting && j >= before) {
			continue
		}
		if c, ok := clash(pats, shared, o.pats, o.e.Shared); ok {
			out = append(out, blocker{entry: o.e, conflict: c})
		}
	}
	return out
}

// blocker is an entry in a request's way.
type blocker struct {
	entry *Entry
	conflict
}
