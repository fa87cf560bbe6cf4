package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/rate"
)

var rt0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// chain is the revisions a correct limiter's record goes through when takes
// t0..tn are admitted at the given offsets (ms after rt0), one revision
// each from revision 2 (revision 1 made the limiter): each revision's last
// is its take, its log the earlier takes within the period, as rate's
// decide keeps them. Takes are named t0, t1, ...
func chain(period time.Duration, offsets ...int) []rateObs { return chainLate(period, 0, offsets...) }

// chainLate is chain with each take logged late after its admission, as
// a Handle logs its own takes (at an upper bound of their times), and
// kept as long as that time says.
func chainLate(period, late time.Duration, offsets ...int) []rateObs {
	obs := []rateObs{{rev: 1, at: rt0.Add(-time.Hour)}}
	var takes []rate.Take
	for i, ms := range offsets {
		at := rt0.Add(time.Duration(ms) * time.Millisecond)
		var log []rate.Take
		for _, t := range takes {
			if t.At.After(at.Add(-period)) {
				log = append(log, t)
			}
		}
		id := fmt.Sprintf("t%d", i)
		obs = append(obs, rateObs{rev: uint64(i + 2), at: at, last: id, log: log})
		takes = append(takes, rate.Take{ID: id, Cost: 1, At: at.Add(late)})
	}
	return obs
}

func every(n, stepMS int) []int {
	var out []int
	for i := range n {
		out = append(out, i*stepMS)
	}
	return out
}

func shift(ms []int, by int) []int {
	out := slices.Clone(ms)
	for i := range out {
		out[i] += by
	}
	return out
}

// acksOf is the acknowledgements of obs's takes, each to a call from 5 ms
// before its admission to 5 ms after.
func acksOf(obs []rateObs) []rateAck {
	var acks []rateAck
	for _, o := range obs {
		if o.last != "" {
			acks = append(acks, ack(o.last, o.rev, o.at))
		}
	}
	return acks
}

func ack(id string, rev uint64, at time.Time) rateAck {
	return rateAck{id: id, rev: rev, from: at.Add(-5 * time.Millisecond), to: at.Add(5 * time.Millisecond)}
}

func without(obs []rateObs, revs ...uint64) []rateObs {
	return slices.DeleteFunc(slices.Clone(obs), func(o rateObs) bool { return slices.Contains(revs, o.rev) })
}

func TestJudgeRate_Windows(t *testing.T) {
	for _, tc := range []struct {
		name        string
		offsets     []int
		over, worst int
	}{
		// 21 takes 50 ms apart span exactly 1 s: the window (t-1s, t]
		// ending at the last leaves the first out.
		{"21 over exactly a second", every(21, 50), 0, 20},
		{"21 within a second", every(21, 49), 1, 21},
		{"two bursts of 20 a second apart", append(every(20, 1), shift(every(20, 1), 1000)...), 0, 20},
		{"two bursts of 20 less than a second apart", append(every(20, 1), 999, 1000, 1001), 3, 21},
	} {
		obs := chain(time.Second, tc.offsets...)
		rc := judgeRate(obs, acksOf(obs), 20, time.Second)
		if rc.over != tc.over || rc.worst != tc.worst || rc.admitted != len(tc.offsets) {
			t.Errorf("%s: %d windows over, at most %d, %d admitted; want %d, %d, %d:\n%s", tc.name, rc.over, rc.worst, rc.admitted,
				tc.over, tc.worst, len(tc.offsets), strings.Join(rc.violations, "\n"))
		}
		if tc.over == 0 && (len(rc.violations) != 0 || rc.lost != 0 || rc.unplaced != 0) {
			t.Errorf("%s: a correct chain judged: %+v", tc.name, rc)
		}
	}
}

// A revision the watch missed is still counted, from the next one's log,
// and its take is not lost.
func TestJudgeRate_AMissedRevisionShowsInTheNextLog(t *testing.T) {
	all := chain(time.Second, every(21, 49)...)
	obs := without(all, 5, 6)
	rc := judgeRate(obs, acksOf(all), 20, time.Second)
	if rc.admitted != 21 || rc.over != 1 || rc.lost != 0 || rc.unplaced != 0 || rc.dropped != 0 {
		t.Errorf("%+v: want 21 admitted, 1 window over, nothing lost", rc)
	}
}

func TestJudgeRate_Lost(t *testing.T) {
	all := chain(time.Second, 0, 100, 200, 1500, 1600)
	// Revision 4 (t2, at 200 ms) acknowledged and missed by the watch: the
	// next revision seen, 5 (t3, at 1500 ms), rightly shows nothing of a
	// second before it, so where t2 was cannot be told.
	rc := judgeRate(without(all, 4), acksOf(all), 20, time.Second)
	if rc.lost != 0 || rc.unplaced != 1 || len(rc.violations) != 0 {
		t.Errorf("revision 4 missed, revision 5 1.4 s after revision 3: %+v; want t2 unplaced, not lost", rc)
	}
	// Had revision 5 come within the period of revision 3, it would have
	// had to show t2: a write in between dropped it.
	near := []rateObs{all[0], all[1], all[2], {rev: 5, at: rt0.Add(300 * time.Millisecond), last: "t3",
		log: []rate.Take{{ID: "t0", Cost: 1, At: rt0}, {ID: "t1", Cost: 1, At: rt0.Add(100 * time.Millisecond)}}}}
	rc = judgeRate(near, []rateAck{ack("t2", 4, all[3].at)}, 20, time.Second)
	if rc.lost != 1 || rc.unplaced != 0 {
		t.Errorf("revision 4 missed, revision 5 0.2 s after revision 3 without t2: %+v; want t2 lost", rc)
	}
	// The same with a call that started long before: revision 3 bounds t2.
	long := ack("t2", 4, all[3].at)
	long.from = long.from.Add(-10 * time.Second)
	rc = judgeRate(near, []rateAck{long}, 20, time.Second)
	if rc.lost != 1 || rc.unplaced != 0 {
		t.Errorf("revision 4 missed (its call 10 s long), revision 5 0.2 s after revision 3 without t2: %+v; want t2 lost", rc)
	}
	// An acknowledgement naming a revision the watch saw admit another take.
	rc = judgeRate(all, []rateAck{ack("t9", 4, all[3].at)}, 20, time.Second)
	if rc.lost != 1 {
		t.Errorf("t9 acknowledged at revision 4, which admitted t2: %+v; want lost", rc)
	}
	// An acknowledgement past every revision seen: the watch fell behind.
	rc = judgeRate(all, []rateAck{ack("t9", 99, rt0.Add(5*time.Second))}, 20, time.Second)
	if rc.lost != 0 || rc.unplaced != 1 {
		t.Errorf("t9 acknowledged at revision 99: %+v; want unplaced", rc)
	}
}

func TestJudgeRate_Dropped(t *testing.T) {
	all := chain(time.Second, 0, 100, 200, 1150)
	bad := slices.Clone(all)
	bad[3].log = bad[3].log[:1] // revision 4 (t2 at 200 ms) keeps t0 and drops t1
	if rc := judgeRate(bad, nil, 20, time.Second); rc.dropped != 1 {
		t.Errorf("t1 dropped by revision 4: %+v", rc)
	}
	// Revision 5 (t3 at 1150) rightly keeps only t2: t0 and t1 are older
	// than a second. And a revision the watch missed changes nothing.
	if rc := judgeRate(without(all, 3), nil, 20, time.Second); rc.dropped != 0 || len(rc.violations) != 0 {
		t.Errorf("a correct chain: %+v", rc)
	}
}

// A log may place a take later than its admission (a Handle logs its own
// takes at an upper bound of their times), never earlier, and every log
// places it alike.
func TestJudgeRate_ATakeAtTwoTimes(t *testing.T) {
	obs := chain(time.Second, 0, 100, 200)
	obs[3].log[1].At = obs[3].log[1].At.Add(time.Millisecond) // t1 as revision 4's log has it
	if rc := judgeRate(obs, acksOf(obs), 20, time.Second); len(rc.violations) != 0 {
		t.Errorf("t1 logged 1 ms after its admission: %v; want no violation", rc.violations)
	}
	obs = chain(time.Second, 0, 100, 200)
	obs[3].log[1].At = obs[3].log[1].At.Add(-time.Millisecond)
	rc := judgeRate(obs, acksOf(obs), 20, time.Second)
	if len(rc.violations) != 1 || !strings.Contains(rc.violations[0], "t1 logged at") {
		t.Errorf("t1 logged before its admission: %v", rc.violations)
	}
	obs = chain(time.Second, 0, 100, 200, 300)
	obs[4].log[0].At = obs[4].log[0].At.Add(time.Millisecond) // t0 as revision 5's log has it; revision 4's says otherwise
	rc = judgeRate(obs, acksOf(obs), 20, time.Second)
	if len(rc.violations) != 1 || !strings.Contains(rc.violations[0], "t0 admitted at") {
		t.Errorf("t0 at two times in two logs: %v", rc.violations)
	}
	twice := chain(time.Second, 0, 100)
	twice[2].last = "t0"
	rc = judgeRate(twice, nil, 20, time.Second)
	if len(rc.violations) == 0 {
		t.Errorf("t0 admitted by two revisions: no violation")
	}
}

// A take the watch saw only in logs, at an upper bound of its time, counts
// in the windows that hold its call up to that bound: 21 in a second are
// over the limit; the bound of a take just before a window does not put it
// in the window.
func TestJudgeRate_TakesPlacedByALogAlone(t *testing.T) {
	all := chainLate(time.Second, 300*time.Microsecond, every(21, 40)...)
	// Every revision missed but the last, whose log holds the others at
	// their times plus 300 us.
	seen := []rateObs{all[0], all[len(all)-1]}
	if rc := judgeRate(seen, acksOf(all), 20, time.Second); rc.over == 0 || rc.worst != 21 || len(rc.losses) != 0 {
		t.Errorf("21 takes in 0.8 s, 20 seen only in a log: %+v; want windows over the limit", rc)
	}
	// 20 a second, steady, for two seconds: a bound 300 us late never
	// makes 21.
	all = chainLate(time.Second, 300*time.Microsecond, every(40, 50)...)
	var seen2 []rateObs
	for i, o := range all {
		if i%2 == 0 { // every other revision missed: its take is in the next one's log
			seen2 = append(seen2, o)
		}
	}
	if rc := judgeRate(seen2, acksOf(all), 20, time.Second); rc.over != 0 || len(rc.violations) != 0 || len(rc.losses) != 0 {
		t.Errorf("20 a second, logged 300 us late: %+v", rc)
	}
}

// Takes the watch missed altogether are counted in the windows that hold
// their whole calls: 21 within a second are found over the limit; calls
// too long to place in one window are not counted against it.
func TestJudgeRate_TakesTheWatchMissedCountByTheirCalls(t *testing.T) {
	all := chain(time.Second, every(21, 40)...)
	seen := all[:1] // only the revision that made the limiter
	rc := judgeRate(seen, acksOf(all), 20, time.Second)
	if rc.over == 0 || rc.worst != 21 || rc.unplaced != 21 || rc.lost != 0 {
		t.Errorf("21 takes in 0.8 s, none seen: %+v; want windows over the limit", rc)
	}
	var wide []rateAck
	for _, a := range acksOf(all) {
		a.from = a.from.Add(-time.Second)
		wide = append(wide, a)
	}
	if rc := judgeRate(seen, wide, 20, time.Second); rc.over != 0 || rc.worst != 0 {
		t.Errorf("21 takes none seen, each call over a second long: %+v; want none counted", rc)
	}
}

// A take's call bounds it: the first revision seen after it, less than the
// period after the call started, must show it, whenever the last one seen
// before it came; and a take seen outside its call is a violation.
func TestJudgeRate_TheCallBoundsTheTake(t *testing.T) {
	all := chain(time.Second, 0, 2000, 2100, 2200)
	// The watch saw revision 2 (t0 at 0) and revision 5 (t3 at 2200) only;
	// revision 5 rightly shows t2 (2100) but not t1 (2000, acknowledged to a
	// call from 1995 ms): its time is after 1995 ms, so revision 5 must
	// show it.
	bad := []rateObs{all[0], all[1], all[4]}
	bad[2].log = slices.DeleteFunc(slices.Clone(bad[2].log), func(t rate.Take) bool { return t.ID == "t1" })
	rc := judgeRate(bad, acksOf(all), 20, time.Second)
	if rc.lost != 1 || !strings.Contains(strings.Join(rc.losses, ""), "take t1 ") {
		t.Errorf("t1 missing from revision 5: %+v", rc)
	}
	if rc := judgeRate([]rateObs{all[0], all[1], all[4]}, acksOf(all), 20, time.Second); rc.lost != 0 || rc.unplaced != 0 || len(rc.violations) != 0 {
		t.Errorf("revision 5 showing t1 and t2: %+v", rc)
	}
	late := acksOf(all)
	late[1].from, late[1].to = late[1].from.Add(time.Second), late[1].to.Add(time.Second)
	if rc := judgeRate(all, late, 20, time.Second); len(rc.violations) != 1 || !strings.Contains(rc.violations[0], "outside the call") {
		t.Errorf("t1 acknowledged to a call a second after it: %v", rc.violations)
	}
}
