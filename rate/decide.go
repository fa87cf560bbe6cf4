package rate

import (
	"slices"
	"time"
)

// decide judges a take of cost at server time d against rec, whose last
// take was admitted at recTime (the record's revision's time): admitted,
// the record to write if so (id's take last, the takes before it that are
// still inside the longest period in the log), else how long until the
// take would fit.
//
// d must be no later than the server's time of the write that admits the
// take, and every take's time in rec (recTime for its Last) no earlier than
// the server's time of the write that admitted it: exact, or an upper
// bound (a Handle's own take). The write is a compare-and-set on rec's
// revision, so rec holds every take admitted before it. Take any window of
// a limit's period and the last take L admitted in it: every other take K
// in the window was written after the window's start, so K's time in the
// record is after d_L - period (d_L being no later than L's write, which
// is in the window) and L's decision counted it. So the window holds at
// most Max + Burst. A d earlier than it could be, or a time later than
// the take's, only counts a take for longer.
func decide(rec Limiter, recTime, d time.Time, cost int64, id string) (bool, Limiter, time.Duration) {
	takes := make([]Take, 0, len(rec.Log)+1)
	takes = append(takes, rec.Log...)
	if rec.Last != nil {
		last := *rec.Last
		last.At = recTime
		takes = append(takes, last)
	}
	var longest time.Duration
	for _, l := range rec.Limits {
		longest = max(longest, time.Duration(l.Period))
	}
	var wait time.Duration
	for _, l := range rec.Limits {
		if w, ok := fits(l, takes, d, cost); !ok {
			wait = max(wait, w)
		}
	}
	// The record holds at most MaxLog takes: one more waits for the oldest
	// to leave the longest period.
	if w, ok := fits(Limit{Max: MaxLog - 1, Period: Duration(longest), Per: PerTake}, takes, d, cost); !ok {
		wait = max(wait, w)
	}
	if wait > 0 {
		return false, rec, wait
	}
	next := rec
	next.Log = make([]Take, 0, len(takes))
	for _, t := range takes {
		if t.At.After(d.Add(-longest)) {
			next.Log = append(next.Log, t)
		}
	}
	next.Last = &Take{ID: id, Cost: cost}
	return true, next, 0
}

// fits reports whether a take of cost at d fits limit l beside takes
// (oldest first), and if not, how long after d it would: when enough of
// the takes have left the window.
func fits(l Limit, takes []Take, d time.Time, cost int64) (time.Duration, bool) {
	period := time.Duration(l.Period)
	count := func(c int64) int64 {
		if l.Per == PerTake {
			return 1
		}
		return c
	}
	room := l.Max + l.Burst - count(cost)
	var in []Take
	var used int64
	for _, t := range takes {
		if t.At.After(d.Add(-period)) {
			in = append(in, t)
			used += count(t.Cost)
		}
	}
	if used <= room {
		return 0, true
	}
	slices.SortStableFunc(in, func(a, b Take) int { return a.At.Compare(b.At) })
	for _, t := range in {
		used -= count(t.Cost)
		if used <= room {
			// t leaves the window (At, At+period] once d passes At+period.
			return max(t.At.Add(period).Sub(d), time.Millisecond), false
		}
	}
	return period, false // cannot happen: room < 0 is refused on create
}

// holds reports whether rec admitted a take of id (in its log, or last).
func (rec Limiter) holds(id string) bool {
	if rec.Last != nil && rec.Last.ID == id {
		return true
	}
	return slices.ContainsFunc(rec.Log, func(t Take) bool { return t.ID == id })
}
