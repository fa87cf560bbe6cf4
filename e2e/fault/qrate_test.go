package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

var qt0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// admission is n starts admitted by a revision ms after qt0.
type admission struct{ ms, n int }

// rateChain is the revisions of a rate record that a correct dispatcher
// writes for admissions (each deciding at its write's time), revision
// 100, 120, 140, ... (room between them for the claims), each logging the
// admissions before it within period.
func rateChain(period time.Duration, as ...admission) []qrev {
	var out []qrev
	var log []rateWin
	for i, a := range as {
		at := qt0.Add(time.Duration(a.ms) * time.Millisecond)
		var kept []rateWin
		for _, w := range log {
			if w.at.After(at.Add(-period)) {
				kept = append(kept, w)
			}
		}
		out = append(out, qrev{key: "fr.rate", rev: uint64(100 + 20*i), at: at, live: true, rate: &rateRev{log: kept, last: a.n}})
		log = append(kept, rateWin{at, a.n})
	}
	return out
}

// claimsAfter is n claims of each revision's admissions, at the
// revisions just after it.
func claimsAfter(revs []qrev) []uint64 {
	var out []uint64
	for _, r := range revs {
		for i := range r.rate.last {
			out = append(out, r.rev+1+uint64(i))
		}
	}
	return out
}

// steady is admissions of n every step ms, k of them.
func steady(k, n, stepMS int) []admission {
	var out []admission
	for i := range k {
		out = append(out, admission{i * stepMS, n})
	}
	return out
}

func TestJudgeQueueRate_ACleanHistoryPasses(t *testing.T) {
	// 3 every second for a minute: 30 in every 10 s, the limit exactly.
	revs := rateChain(10*time.Second, steady(60, 3, 1000)...)
	c := judgeQueueRate(revs, claimsAfter(revs), 30, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if len(c.violations) != 0 {
		t.Fatalf("violations: %q", c.violations)
	}
	if c.admitted != 180 || c.worst != 30 || c.windows != 60 || c.starts != 180 || c.uncertain != 0 {
		t.Errorf("admitted %d, worst %d, windows %d, starts %d, uncertain %d; want 180, 30, 60, 180, 0", c.admitted, c.worst, c.windows, c.starts, c.uncertain)
	}
}

func TestJudgeQueueRate_AnOverFullWindowIsCaught(t *testing.T) {
	// 3 a second, and 2 more at 20.5 s: 32 in the 10 s up to then.
	as := steady(40, 3, 1000)
	as = slices.Insert(as, 21, admission{20500, 2})
	revs := rateChain(10*time.Second, as...)
	c := judgeQueueRate(revs, claimsAfter(revs), 30, 10*time.Second, revTime{at: qt0})
	if c.over == 0 || c.worst != 32 {
		t.Fatalf("over %d, worst %d; want windows over the limit, 32 at worst", c.over, c.worst)
	}
	if !strings.Contains(c.violations[0], "32 starts admitted in the 10s") {
		t.Errorf("violations: %q", c.violations)
	}
	if c.dropped != 0 || c.beyond != 0 || c.other != 0 {
		t.Errorf("dropped %d, beyond %d, other %d; want 0", c.dropped, c.beyond, c.other)
	}
}

func TestJudgeQueueRate_AMissedRevisionIsKnownFromTheNextLog(t *testing.T) {
	// The watch missed revisions 140..220 (2 s to 5 s), and the one over
	// the limit among them (10 at 2.5 s): the next revision's log shows
	// them, and the window up to it.
	as := steady(20, 3, 1000)
	as = slices.Insert(as, 3, admission{2500, 10})
	all := rateChain(10*time.Second, as...)
	seen := slices.Concat(all[:2], all[7:])
	c := judgeQueueRate(seen, claimsAfter(all), 30, 10*time.Second, revTime{at: qt0})
	if c.admitted != 70 || c.revisions != len(seen) || c.uncertain != 0 {
		t.Errorf("admitted %d from %d revisions, uncertain %d; want 70 from %d, 0", c.admitted, c.revisions, c.uncertain, len(seen))
	}
	if c.over == 0 || c.beyond != 0 {
		t.Errorf("over %d, beyond %d: want the full window caught, no claim beyond the admissions", c.over, c.beyond)
	}
}

func TestJudgeQueueRate_AnAdmissionDroppedFromTheLogIsCaught(t *testing.T) {
	revs := rateChain(10*time.Second, steady(10, 3, 1000)...)
	// Revision 200 forgets the admission at 2 s, within its period.
	o := revs[5]
	o.rate = &rateRev{last: o.rate.last, log: slices.DeleteFunc(slices.Clone(o.rate.log), func(w rateWin) bool { return w.at.Equal(qt0.Add(2 * time.Second)) })}
	revs[5] = o
	c := judgeQueueRate(revs, claimsAfter(revs), 30, 10*time.Second, revTime{at: qt0})
	if c.dropped != 1 || !strings.Contains(strings.Join(c.violations, "\n"), "are not in revision 200") {
		t.Fatalf("dropped %d, violations %q; want one admission dropped by revision 200", c.dropped, c.violations)
	}
}

func TestJudgeQueueRate_MoreClaimsThanAdmissionsAreCaught(t *testing.T) {
	revs := rateChain(10*time.Second, steady(10, 2, 1000)...)
	claims := claimsAfter(revs)
	// A third claim after revision 120, which admitted two.
	claims = append(claims, 133)
	c := judgeQueueRate(revs, claims, 30, 10*time.Second, revTime{at: qt0})
	if c.beyond == 0 || !strings.Contains(c.violations[0], "claim 5 (revision 133) came after 4 admissions") {
		t.Fatalf("beyond %d, violations %q; want claim 5 at revision 133 after 4 admissions", c.beyond, c.violations)
	}
	// A claim before any admission.
	c = judgeQueueRate(revs, append(claimsAfter(revs), 50), 30, 10*time.Second, revTime{at: qt0})
	if c.beyond == 0 {
		t.Fatal("a claim before the first admission was not caught")
	}
}

func TestJudgeQueueRate_AStretchTheWatchMayHaveMissedAllowsWhatItsWindowLeaves(t *testing.T) {
	// Admissions every second, and the watch saw none from 2 s to 14 s:
	// the first it saw after is more than a period after the last before,
	// so admissions between 2 s and 4 s may be unknown. The window ending
	// there holds 9 known ones (0, 1, 2 s), so 21 may hide there.
	all := rateChain(10*time.Second, steady(30, 3, 1000)...)
	seen := slices.Concat(all[:3], all[14:])
	c := judgeQueueRate(seen, claimsAfter(all), 30, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if c.uncertain != 1 || c.allowance != 21 {
		t.Errorf("uncertain %d, allowance %d; want 1 and 21", c.uncertain, c.allowance)
	}
	if c.beyond != 0 || c.over != 0 {
		t.Errorf("beyond %d, over %d; want 0: violations %q", c.beyond, c.over, c.violations)
	}
}

func TestJudgeQueueRate_AnUndecodableRevisionIsAProblem(t *testing.T) {
	revs := rateChain(10*time.Second, steady(3, 1, 1000)...)
	revs = append(revs, qrev{key: "fr.rate", rev: 500, at: qt0.Add(5 * time.Second), live: true, bad: true})
	c := judgeQueueRate(revs, nil, 30, 10*time.Second, revTime{at: qt0})
	if c.undecodable != 1 || c.other != 1 {
		t.Fatalf("undecodable %d, other %d; want 1 and 1", c.undecodable, c.other)
	}
}

// keyChain is rateChain for key's record, its revisions moved by base.
func keyChain(key string, base uint64, as ...admission) []qrev {
	revs := rateChain(10*time.Second, as...)
	for i := range revs {
		revs[i].key, revs[i].rev = "fr.krate."+key, revs[i].rev+base
	}
	return revs
}

// keyTasks are one task per claim of the revisions' admissions, of key.
func keyTasks(key string, revs []qrev) map[string][]qrev {
	out := map[string][]qrev{}
	for i, cl := range claimsAfter(revs) {
		id := key + "-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		out[id] = []qrev{{key: "fr.task." + id, rev: cl, live: true, task: &taskRev{id: id, key: key, claimed: cl}}}
	}
	return out
}

func TestJudgeKeyRates_AKeyWhoseRecordExpiredAndCameBackPasses(t *testing.T) {
	// 3 and 3 within a period, the record expires (its key rests), then a
	// new record with an empty log: 6 at most in any 10 s, nothing dropped.
	a := keyChain("r2", 0, admission{0, 3}, admission{5000, 3})
	gone := qrev{key: "fr.krate.r2", rev: 400, at: qt0.Add(17 * time.Second)}
	b := keyChain("r2", 1000, admission{20000, 3}, admission{25000, 3})
	revs := append(append(slices.Clone(a), gone), b...)
	tasks := keyTasks("r2", append(slices.Clone(a), b...))
	c := judgeKeyRates(map[string][]qrev{"r2": revs}, tasks, keyRateLimit, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if len(c.violations) != 0 {
		t.Fatalf("violations: %q", c.violations)
	}
	if c.keys != 1 || c.admitted != 12 || c.worst[keyRateMax] != 6 || c.full[keyRateMax] != 2 || c.starts != 12 {
		t.Errorf("keys %d, admitted %d, worst %d, full %d, starts %d; want 1, 12, 6, 2, 12", c.keys, c.admitted, c.worst[keyRateMax], c.full[keyRateMax], c.starts)
	}
	// The expiry says nothing was admitted in the period before it: the
	// key's rest is no stretch the watch may have missed admissions in.
	// (Those between 5 s and 7 s may be unknown, but the window up to 7 s
	// is full already.)
	if c.revisions != 4 || c.removed != 1 || c.allowance != 0 {
		t.Errorf("revisions %d, removed %d, allowance %d; want 4, 1, 0", c.revisions, c.removed, c.allowance)
	}
	// Without the expiry seen (the watch was down), the rest is such a
	// stretch (the claims may have 3 more admissions before them), and
	// still nothing is dropped.
	c = judgeKeyRates(map[string][]qrev{"r2": slices.Concat(a, b)}, tasks, keyRateLimit, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if len(c.violations) != 0 || c.uncertain != 1 || c.allowance != 3 {
		t.Fatalf("uncertain %d, allowance %d, violations %q; want 1, 3 and none", c.uncertain, c.allowance, c.violations)
	}
}

func TestJudgeKeyRates_ARecordGoneWithAdmissionsInItsPeriodIsCaught(t *testing.T) {
	// Expired 3 s after its last write: the 3 admitted at 5 s (and those
	// at 0) were still within the period, so a write after it could
	// admit against too few.
	a := keyChain("r2", 0, admission{0, 3}, admission{5000, 3})
	gone := qrev{key: "fr.krate.r2", rev: 400, at: qt0.Add(8 * time.Second)}
	c := judgeKeyRates(map[string][]qrev{"r2": append(slices.Clone(a), gone)}, keyTasks("r2", a), keyRateLimit, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if c.dropped != 2 || !strings.Contains(strings.Join(c.violations, "\n"), "key r2: 3 starts admitted at") || !strings.Contains(c.violations[0], "of the record's removal (revision 400") {
		t.Fatalf("dropped %d, violations %q; want both admissions dropped by the removal", c.dropped, c.violations)
	}

	// Made again at 9 s with an empty log, the removal unseen: the new
	// record dropped them, and its window holds 9.
	b := keyChain("r2", 1000, admission{9000, 3})
	c = judgeKeyRates(map[string][]qrev{"r2": slices.Concat(a, b)}, keyTasks("r2", slices.Concat(a, b)), keyRateLimit, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if c.dropped != 2 || c.over != 1 || c.worst[keyRateMax] != 9 {
		t.Fatalf("dropped %d, over %d, worst %d, violations %q; want 2, 1, 9", c.dropped, c.over, c.worst[keyRateMax], c.violations)
	}
}

func TestJudgeKeyRates_AKeyOverItsOwnLimitIsCaught(t *testing.T) {
	// 11 in 10 s: over r1's own 10.
	own := keyChain(keyRateOwn, 0, admission{0, 4}, admission{3000, 4}, admission{6000, 3})
	c := judgeKeyRates(map[string][]qrev{keyRateOwn: own}, keyTasks(keyRateOwn, own), keyRateLimit, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if c.over != 1 || c.worst[keyRateOwnMax] != 11 || len(c.violations) != 1 || !strings.Contains(c.violations[0], "key r1: 11 starts admitted in the 10s") || !strings.Contains(c.violations[0], "(limit 10)") {
		t.Fatalf("over %d, worst %v, violations %q; want one window of 11 over r1's 10", c.over, c.worst, c.violations)
	}
}

func TestJudgeKeyRates_AKeyClaimedWithNoRecordIsJudged(t *testing.T) {
	// r4's tasks were claimed, and no record of r4 was ever seen: no
	// admission stands behind those claims.
	revs := keyChain("r3", 0, admission{0, 2})
	tasks := keyTasks("r3", revs)
	tasks["x"] = []qrev{{key: "fr.task.x", rev: 150, live: true, task: &taskRev{id: "x", key: "r4", claimed: 150}}}
	c := judgeKeyRates(map[string][]qrev{"r3": revs}, tasks, keyRateLimit, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if c.keys != 2 || c.beyond != 1 || !strings.HasPrefix(c.violations[0], "key r4: claim 1 (revision 150) came after 0 admissions") {
		t.Fatalf("keys %d, beyond %d, violations %q; want r4 judged, its claim beyond", c.keys, c.beyond, c.violations)
	}
}

func TestJudgeKeyRates_EachKeyAgainstItsOwnLimit(t *testing.T) {
	// 10 in 10 s: within r1's own limit, over every other key's.
	as := []admission{{0, 4}, {3000, 3}, {6000, 3}}
	own, other := keyChain(keyRateOwn, 0, as...), keyChain("r2", 1000, as...)
	tasks := keyTasks(keyRateOwn, own)
	maps.Copy(tasks, keyTasks("r2", other))
	c := judgeKeyRates(map[string][]qrev{keyRateOwn: own, "r2": other}, tasks, keyRateLimit, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if c.keys != 2 || c.worst[keyRateOwnMax] != 10 || c.worst[keyRateMax] != 10 {
		t.Fatalf("keys %d, worst %v", c.keys, c.worst)
	}
	if c.over == 0 || len(c.violations) == 0 || !strings.HasPrefix(c.violations[0], "key r2: ") || !strings.Contains(c.violations[0], "(limit 6)") {
		t.Fatalf("over %d, violations %q; want r2's windows over its limit of 6", c.over, c.violations)
	}
	for _, v := range c.violations {
		if strings.HasPrefix(v, "key "+keyRateOwn+":") {
			t.Errorf("%s is within its own limit: %s", keyRateOwn, v)
		}
	}
}

func TestJudgeKeyRates_MoreClaimsThanAKeysAdmissionsAreCaught(t *testing.T) {
	revs := keyChain("r3", 0, admission{0, 2}, admission{4000, 2})
	tasks := keyTasks("r3", revs)
	tasks["extra"] = []qrev{{key: "fr.task.extra", rev: 103, live: true, task: &taskRev{id: "extra", key: "r3", claimed: 103}}}
	// r4's claim, after r4's admission, counts for r4 alone.
	tasks["other-key"] = []qrev{{key: "fr.task.o", rev: 104, live: true, task: &taskRev{id: "o", key: "r4", claimed: 104}}}
	r4 := []qrev{{key: "fr.krate.r4", rev: 90, at: qt0.Add(-500 * time.Millisecond), live: true, rate: &rateRev{last: 1}}}
	c := judgeKeyRates(map[string][]qrev{"r3": revs, "r4": r4}, tasks, keyRateLimit, 10*time.Second, revTime{at: qt0.Add(-time.Second)})
	if c.beyond == 0 || c.starts != 6 || c.keys != 2 {
		t.Fatalf("beyond %d of %d claims of %d keys, violations %q; want some of 6, of 2 keys", c.beyond, c.starts, c.keys, c.violations)
	}
	for _, v := range c.violations {
		if !strings.HasPrefix(v, "key r3: claim ") {
			t.Errorf("violation %q; want r3's claims alone", v)
		}
	}
}
