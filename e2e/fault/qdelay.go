package main

import (
	"fmt"
	"slices"
	"time"
)

// Delayed tasks (adr/0047): the queue's adders add one task in four with
// --in (1-12 s) and one in eight with --at (a whole second from 3 s ago to
// 12 s ahead). Neither may start before its time by the server's clock:
// --at's time, or --in's delay after the server time of the revision that
// added the task. Every process here reads the one machine's clock, the
// servers included, so a command's own time of its start and a revision's
// server time compare directly.

// delayedAdd is an acknowledged add of a task that waits for a time.
type delayedAdd struct {
	id       string
	at       time.Time     // --at (zero for --in)
	in       time.Duration // --in
	rev      uint64        // the revision that added it, as add --json said (0: unknown)
	from, to time.Time     // the add call
}

// delayCounts are the delayed tasks' outcome.
type delayCounts struct {
	added, at, in int
	started       int             // with a start seen (a claim, or the command's start) or done
	early         int             // started before their time
	never         int             // never started (each also an acknowledged task lost, unless removed as garbage)
	exact         int             // whose time is known exactly (not only a lower bound of it)
	lateness      []time.Duration // from the time to the first start, for those known exactly
	violations    []string
}

// startsOf gathers when each task of a queue started: each attempt's
// claim, at an upper bound of its server time (exactly its own when the
// claiming revision was seen, else that of a later revision that names
// it), and the times its commands reported their start (cmd).
func startsOf(tasks map[string][]qrev, v qview, cmd map[string][]time.Time) map[string][]time.Time {
	out := map[string][]time.Time{}
	for id, revs := range tasks {
		claims := map[uint64]time.Time{}
		for _, r := range revs {
			if r.task == nil || r.task.claimed == 0 {
				continue
			}
			at := r.at
			if t, ok := v.timeOf(r.task.claimed); ok {
				at = t
			}
			if prev, ok := claims[r.task.claimed]; !ok || at.Before(prev) {
				claims[r.task.claimed] = at
			}
		}
		for _, at := range claims {
			out[id] = append(out[id], at)
		}
	}
	for id, ts := range cmd {
		out[id] = append(out[id], ts...)
	}
	for id := range out {
		slices.SortFunc(out[id], func(a, b time.Time) int { return a.Compare(b) })
	}
	return out
}

// notBefore is the time a delayed add's task may start from, or a lower
// bound of it, and whether it is exact. An --in counts from the server
// time of the revision that added the task: exactly that, when the watch
// saw that revision; else no earlier than the add's call began nor than
// the revision seen just before it.
func notBefore(a delayedAdd, v qview) (time.Time, bool) {
	if !a.at.IsZero() {
		return a.at, true
	}
	if a.rev != 0 {
		if t, ok := v.timeOf(a.rev); ok {
			return t.Add(a.in), true
		}
		if lo, _ := v.bounds(a.rev); lo.After(a.from) {
			return lo.Add(a.in), false
		}
	}
	return a.from.Add(a.in), false
}

// judgeDelayed judges the acknowledged delayed adds: no start before the
// task's time (a claim whose revision is no later than a time before it,
// or a command that reported its start before it), every one started, and
// the record holding the time asked for (the revision that added it, when
// seen). tasks are the queue's tasks' revisions by id, starts what
// startsOf gathered, gone the tasks whose garbage the harness removed
// (never run, and not counted as never started).
func judgeDelayed(adds []delayedAdd, tasks map[string][]qrev, v qview, starts map[string][]time.Time, gone map[string]bool) (c delayCounts) {
	for _, a := range adds {
		c.added++
		if a.at.IsZero() {
			c.in++
		} else {
			c.at++
		}
		nb, exact := notBefore(a, v)
		if exact {
			c.exact++
		}
		revs := tasks[a.id]
		done := false
		for _, r := range revs {
			if r.task == nil {
				continue
			}
			done = done || r.task.state == "done"
			if r.rev != a.rev {
				continue
			}
			switch {
			case !a.at.IsZero() && !r.task.runAt.Equal(a.at):
				c.violations = append(c.violations, fmt.Sprintf("delayed task %s, added --at %s, holds run_at %s", a.id, fmtTime(a.at), fmtTime(r.task.runAt)))
			case a.at.IsZero() && r.task.delay != a.in:
				c.violations = append(c.violations, fmt.Sprintf("delayed task %s, added --in %s, holds delay %s", a.id, a.in, r.task.delay))
			}
		}
		ss := starts[a.id]
		switch {
		case len(ss) > 0 || done:
			c.started++
		case !gone[a.id]:
			c.never++
		}
		if len(ss) == 0 {
			continue
		}
		if ss[0].Before(nb) {
			c.early++
			c.violations = append(c.violations, fmt.Sprintf("delayed task %s started at %s, %s before its time %s (%s)",
				a.id, fmtTime(ss[0]), nb.Sub(ss[0]).Round(time.Millisecond), fmtTime(nb), describeAdd(a, exact)))
			continue
		}
		if exact {
			c.lateness = append(c.lateness, ss[0].Sub(nb))
		}
	}
	return c
}

func describeAdd(a delayedAdd, exact bool) string {
	if !a.at.IsZero() {
		return "--at"
	}
	if exact {
		return fmt.Sprintf("--in %s after revision %d", a.in, a.rev)
	}
	return fmt.Sprintf("--in %s after revision %d, which came no earlier", a.in, a.rev)
}

// judgeTickStarts counts the tasks of a schedule that started before
// their tick, their run_at.
func judgeTickStarts(name string, tasks map[string][]qrev, starts map[string][]time.Time) (early int, violations []string) {
	for _, id := range sortedKeys(tasks) {
		tick, ok := tickOf(name, id)
		ss := starts[id]
		if !ok || len(ss) == 0 || !ss[0].Before(tick) {
			continue
		}
		early++
		violations = append(violations, fmt.Sprintf("schedule %s: task %s started at %s, %s before its tick", name, id, fmtTime(ss[0]), tick.Sub(ss[0]).Round(time.Millisecond)))
	}
	return early, violations
}

// verdict is the delayed tasks' part of the closing line.
func (c delayCounts) verdict() string {
	return fmt.Sprintf("delayed: %d added (%d --at, %d --in), %d started, %d started early, %d never started", c.added, c.at, c.in, c.started, c.early, c.never)
}
