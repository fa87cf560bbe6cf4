package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hold is a command that held units from..to (ms after t0) under fence.
func hold(permit string, fence uint64, units []int, from, to int) *semHold {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &semHold{run: permit + "-run", actor: "sem-" + permit, permit: permit, fence: fence, units: units, index: minOf(units),
		weight: len(units), start: t0.Add(time.Duration(from) * time.Millisecond), last: t0.Add(time.Duration(to) * time.Millisecond)}
}

func minOf(xs []int) int {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func TestJudgeSem(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		holds                []*semHold
		exclusion, over, bad int
	}{
		{"one after another", []*semHold{
			hold("a", 10, []int{0, 1}, 0, 500), hold("b", 12, []int{0}, 600, 900), hold("c", 15, []int{1, 2}, 700, 1200),
		}, 0, 0, 0},
		{"side by side, every unit", []*semHold{
			hold("a", 10, []int{0, 1}, 0, 500), hold("b", 12, []int{2}, 100, 900), hold("c", 15, []int{0}, 501, 800),
		}, 0, 0, 0},
		{"a unit twice", []*semHold{
			hold("a", 10, []int{0, 1}, 0, 500), hold("b", 12, []int{1}, 400, 900),
		}, 1, 0, 0},
		{"a cut-off holder acted on after the next one started", []*semHold{
			hold("a", 10, []int{2}, 0, 3000), hold("b", 12, []int{2}, 2000, 2500), hold("c", 20, []int{2}, 2900, 3500),
		}, 2, 0, 0},
		{"a later holder of a unit with a smaller fence", []*semHold{
			hold("a", 10, []int{0}, 0, 500), hold("b", 9, []int{0}, 600, 900),
		}, 1, 0, 0},
		{"a unit past max: over max too", []*semHold{
			hold("a", 10, []int{0, 1}, 0, 500), hold("b", 12, []int{2}, 0, 500), hold("c", 14, []int{3}, 100, 400),
		}, 0, 1, 1},
		{"no fence", []*semHold{hold("a", 0, []int{0}, 0, 500)}, 0, 0, 1},
		{"one fence for two permits", []*semHold{hold("a", 10, []int{0}, 0, 500), hold("b", 10, []int{1}, 0, 500)}, 0, 0, 1},
		{"one permit, two commands", []*semHold{hold("a", 10, []int{0}, 0, 500), hold("a", 10, []int{0}, 600, 900)}, 1, 0, 1},
	} {
		excl, over, bad := judgeSem(tc.holds, 3)
		if len(excl) != tc.exclusion || len(over) != tc.over || len(bad) != tc.bad {
			t.Errorf("%s: %d exclusion, %d over, %d bad; want %d, %d, %d:\n%s", tc.name, len(excl), len(over), len(bad),
				tc.exclusion, tc.over, tc.bad, strings.Join(append(append(excl, over...), bad...), "\n"))
		}
	}
}

// A permit whose units are not what it asked for or was promised is bad.
func TestJudgeSem_BadPermits(t *testing.T) {
	wrongWeight := hold("a", 10, []int{0}, 0, 500)
	wrongWeight.weight = 2
	wrongIndex := hold("b", 11, []int{1, 2}, 0, 500)
	wrongIndex.index = 2
	twice := hold("c", 12, []int{0, 0}, 600, 900)
	noPermit := hold("", 13, []int{1}, 600, 900)
	for _, hd := range []*semHold{wrongWeight, wrongIndex, twice, noPermit} {
		if _, _, bad := judgeSem([]*semHold{hd}, 3); len(bad) != 1 {
			t.Errorf("permit %q units %v index %d weight %d: %d bad, want 1: %v", hd.permit, hd.units, hd.index, hd.weight, len(bad), bad)
		}
	}
}

// The ledger keeps a command's earliest and latest report whatever their
// order of arrival, and writes to the checker under each unit's key.
func TestSemLedger_RecordsAndWritesEachUnit(t *testing.T) {
	chk := newChecker()
	l := newSemLedger(chk)
	srv := httptest.NewServer(l)
	defer srv.Close()
	t0 := time.Now()
	post := func(event string, at time.Time, fence uint64) int {
		q := url.Values{"event": {event}, "run": {"7@1"}, "actor": {"sem-h1-0-0"}, "permit": {"p1"}, "fence": {strconv.FormatUint(fence, 10)},
			"units": {"1,2"}, "index": {"1"}, "weight": {"2"}, "at": {strconv.FormatInt(at.UnixNano(), 10)}}
		resp, err := http.Post(srv.URL+"?"+q.Encode(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	post("write", t0.Add(100*time.Millisecond), 40)
	post("end", t0.Add(900*time.Millisecond), 40)
	post("start", t0, 40) // late
	if code := post("write", time.Time{}, 40); code != http.StatusBadRequest {
		t.Errorf("a report without its time: %d, want 400", code)
	}
	hs := l.all()
	if len(hs) != 1 || !hs[0].start.Equal(t0) || !hs[0].last.Equal(t0.Add(900*time.Millisecond)) || !hs[0].ended || hs[0].weight != 2 {
		t.Fatalf("holds %+v", hs[0])
	}
	// The next holder of unit 2 with a larger fence, then the first late.
	chk.write(semKey(2), 41, "sem-h2-1-0/8@1", time.Time{})
	post("write", t0.Add(950*time.Millisecond), 40)
	// Accepted: both units, the next holder's, and unit 1 late (nobody
	// else wrote it); refused: unit 2 late.
	if acc, rej, v := chk.counts(); acc != 4 || rej != 1 || len(v) != 0 {
		t.Errorf("checker: %d accepted, %d rejected, %v; want 4 and 1", acc, rej, v)
	}
}

// checkSem leaves out a command whose sem run was paused while it ran, and
// counts the rest.
func TestCheckSem_LeavesOutPausedHolders(t *testing.T) {
	h := &harness{stats: newStats(), sled: newSemLedger(newChecker())}
	a, b := hold("a", 10, []int{0}, 0, 5000), hold("b", 12, []int{0}, 4000, 4500)
	for _, hd := range []*semHold{a, b} {
		h.sled.event(*hd, "start", hd.start)
		h.sled.event(*hd, "end", hd.last)
	}
	if sc := h.checkSem(); sc.exclusion != 1 || sc.served != 2 {
		t.Fatalf("without a pause: %+v, want 1 exclusion violation of 2 served", sc)
	}
	h.stats = newStats()
	h.pauses = []pauseCheck{{actor: a.actor, fence: 10, paused: a.start.Add(time.Second), resumed: a.start.Add(5 * time.Second)}}
	if sc := h.checkSem(); sc.exclusion != 0 || sc.paused != 1 {
		t.Fatalf("with a's sem run paused: %+v, want a left out", sc)
	}
}
