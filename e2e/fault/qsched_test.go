package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// sec is qt0 (a whole second) plus s seconds.
func sec(s float64) time.Time { return qt0.Add(time.Duration(s * float64(time.Second))) }

// tickTasks builds the records of a schedule's tasks: for each tick (in
// seconds after qt0), its task created at the time created gives (nil:
// 5 ms after its tick), by revision 1000 + 10 × its tick, then claimed
// and done 100 ms and 200 ms later.
func tickTasks(name string, ticks []int, created func(tick int) time.Time) map[string][]qrev {
	out := map[string][]qrev{}
	for _, s := range ticks {
		tick := sec(float64(s))
		at := tick.Add(5 * time.Millisecond)
		if created != nil {
			at = created(s)
		}
		id := fmt.Sprintf("%s-%s", name, tick.UTC().Format("20060102T150405Z"))
		seq := uint64(1000 + 10*s)
		tr := func(state string, claimed uint64) *taskRev {
			return &taskRev{id: id, schedule: name, state: state, seq: seq, claimed: claimed, runAt: tick}
		}
		out[id] = []qrev{
			{key: "fq.task." + id, rev: seq, at: at, live: true, task: tr("pending", 0)},
			{key: "fq.task." + id, rev: seq + 1, at: at.Add(100 * time.Millisecond), live: true, task: tr("active", seq+1)},
			{key: "fq.task." + id, rev: seq + 2, at: at.Add(200 * time.Millisecond), live: true, task: tr("done", seq+1)},
		}
	}
	return out
}

// viewOf is the view of a watch that saw every revision of tasks.
func viewOf(tasks ...map[string][]qrev) qview {
	v := qview{byKey: map[string][]qrev{}}
	for _, ts := range tasks {
		for _, revs := range ts {
			for _, r := range revs {
				v.byKey[r.key] = append(v.byKey[r.key], r)
				v.times = append(v.times, revTime{r.rev, r.at})
			}
		}
	}
	slices.SortFunc(v.times, func(a, b revTime) int { return cmpU(a.rev, b.rev) })
	return v
}

func span1to(n int) []int {
	var out []int
	for i := 1; i <= n; i++ {
		out = append(out, i)
	}
	return out
}

func testSpec(quiet ...span) schedSpec {
	return schedSpec{name: "tick", every: time.Second, late: 9 * time.Second, createdLo: qt0, quiet: quiet}
}

func TestJudgeTicks_EachTickOnceWithNoGapPasses(t *testing.T) {
	tasks := tickTasks("tick", span1to(30), nil)
	c := judgeTicks(testSpec(span{sec(15), sec(31)}), tasks, viewOf(tasks))
	if len(c.violations) != 0 || len(c.notes) != 0 {
		t.Fatalf("violations %q, notes %q", c.violations, c.notes)
	}
	// Judged in the quiet stretch: after tick 15 (the first added in it)
	// up to 9 s before its end.
	if c.ticks != 30 || c.gaps != 0 || c.quietJudged != 7 || c.lostQuiet != 0 {
		t.Errorf("ticks %d, gaps %d, judged %d, lost %d; want 30, 0, 7, 0", c.ticks, c.gaps, c.quietJudged, c.lostQuiet)
	}
}

func TestJudgeTicks_ATickCreatedTwiceIsDoubled(t *testing.T) {
	tasks := tickTasks("tick", span1to(10), nil)
	// Tick 5's task, done and gone, added again by revision 5000.
	id := "tick-" + sec(5).Format("20060102T150405Z")
	revs := tasks[id]
	again := revs[0]
	again.rev, again.at = 5000, sec(40)
	again.task = &taskRev{id: id, schedule: "tick", state: "pending", seq: 5000, runAt: sec(5)}
	tasks[id] = append(revs, again)
	c := judgeTicks(testSpec(), tasks, viewOf(tasks))
	if c.doubled != 1 || len(c.violations) != 1 || !strings.Contains(c.violations[0], "was created 2 times (revisions [1050 5000])") {
		t.Fatalf("doubled %d, violations %q; want tick 5's task created twice", c.doubled, c.violations)
	}
}

func TestJudgeTicks_TasksForNoTickOrTooSoonAreMisplaced(t *testing.T) {
	tasks := tickTasks("tick", span1to(5), func(s int) time.Time {
		if s == 3 {
			return sec(2.5) // added before its tick
		}
		return sec(float64(s) + 0.005)
	})
	before := tickTasks("tick", []int{0}, nil) // the schedule was made at qt0: its first tick is 1
	for id, revs := range before {
		tasks[id] = revs
	}
	tasks["tick-garbage"] = []qrev{{key: "fq.task.tick-garbage", rev: 9000, at: sec(7), live: true,
		task: &taskRev{id: "tick-garbage", schedule: "tick", state: "pending", seq: 9000}}}
	id4 := "tick-" + sec(4).Format("20060102T150405Z")
	tasks[id4][1].task.runAt = sec(3) // a revision whose run_at is another tick's
	c := judgeTicks(testSpec(), tasks, viewOf(tasks))
	want := []string{"before the schedule was made", "before its tick", "names no tick", "holds schedule \"tick\" and run_at"}
	all := strings.Join(c.violations, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no violation says %q: %q", w, c.violations)
		}
	}
	if c.misplaced != 4 || c.doubled != 0 {
		t.Errorf("misplaced %d, doubled %d; want 4 and 0", c.misplaced, c.doubled)
	}
}

func TestJudgeTicks_GapsAreFiguresAndOnlyTheQuietStretchIsJudged(t *testing.T) {
	// Ticks 1-10; 11-19 missed while no dispatcher ran, 20 added 9.5 s
	// late (catch-up one); 21-29; 30 and 31 missing, 32 added at once;
	// 32-35; then a quiet stretch from 40 s to 70 s with ticks from 41,
	// in which tick 50 is missing.
	ticks := slices.Concat(span1to(10), []int{20}, []int{21, 22, 23, 24, 25, 26, 27, 28, 29}, []int{32, 33, 34, 35})
	for s := 41; s <= 65; s++ {
		if s != 50 {
			ticks = append(ticks, s)
		}
	}
	tasks := tickTasks("tick", ticks, func(s int) time.Time {
		if s == 20 {
			return sec(29.5)
		}
		return sec(float64(s) + 0.005)
	})
	c := judgeTicks(testSpec(span{sec(40), sec(70)}), tasks, viewOf(tasks))
	if c.gaps != 4 || c.missing != 9+2+5+1 || c.caughtUp != 1 {
		t.Errorf("gaps %d, missing %d, caught up %d; want 4, 17, 1", c.gaps, c.missing, c.caughtUp)
	}
	// The gaps at 30-31, 36-40 and 50 are noted: the tick after each was
	// added at once, not as catch-up adds a missed one.
	if len(c.notes) != 3 || !strings.Contains(c.notes[0], "2 ticks missing after") {
		t.Errorf("notes %q; want the gaps at 30-31, 36-40 and 50", c.notes)
	}
	if c.lostQuiet != 1 || c.quietJudged != 20 || len(c.violations) != 1 || !strings.Contains(c.violations[0], "has no task, though a worker lived") {
		t.Errorf("lost %d of %d judged, violations %q; want tick 50 lost of 20 (42-61)", c.lostQuiet, c.quietJudged, c.violations)
	}
}

func TestJudgeTicks_AQuietStretchWithNoTickAddedIsALoss(t *testing.T) {
	tasks := tickTasks("tick", span1to(10), nil)
	c := judgeTicks(testSpec(span{sec(20), sec(50)}), tasks, viewOf(tasks))
	if c.lostQuiet != 1 || len(c.violations) != 1 || !strings.Contains(c.violations[0], "no tick added from") {
		t.Fatalf("lost %d, violations %q", c.lostQuiet, c.violations)
	}
}

func TestJudgeTickStarts_AStartBeforeItsTickIsEarly(t *testing.T) {
	tasks := tickTasks("tick", span1to(3), nil)
	id2 := "tick-" + sec(2).Format("20060102T150405Z")
	starts := startsOf(tasks, viewOf(tasks), map[string][]time.Time{id2: {sec(1.9)}})
	early, vs := judgeTickStarts("tick", tasks, starts)
	if early != 1 || len(vs) != 1 || !strings.Contains(vs[0], "100ms before its tick") {
		t.Fatalf("early %d, violations %q", early, vs)
	}
	early, vs = judgeTickStarts("tick", tasks, startsOf(tasks, viewOf(tasks), nil))
	if early != 0 {
		t.Fatalf("claims after their ticks judged early: %q", vs)
	}
}
