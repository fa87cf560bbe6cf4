package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// flowCounts are the outcome of the queue checks of schedules, delayed
// tasks and rate limits.
type flowCounts struct {
	sched   schedCounts
	delayed delayCounts
	rate    qrateCounts
	keyRate keyRateCounts
	watches int // queue watches started (more than one: it ended and was started again)
}

// violations counts every violation the three checks found.
func (f flowCounts) violations() int {
	return len(f.sched.violations) + len(f.delayed.violations) + len(f.rate.violations) + len(f.keyRate.violations)
}

// checkFlow reads the queues' records once more, stops the queue watch
// and judges the schedule, the delayed tasks and the rate-limited queue
// from what it saw; quiet is the drain, when a worker ran with no faults.
func (h *harness) checkFlow(ctx context.Context, stopWatch func(), quiet span) (f flowCounts) {
	if err := h.finalRead(ctx); err != nil {
		h.stats.stick("read the queues' records at the end: %v", err)
	}
	stopWatch()
	v := h.qw.snapshot()
	f.watches = v.watches
	fq := v.tasks(queueName)
	cmd := map[string][]time.Time{}
	h.qchk.mu.Lock()
	for _, r := range h.qchk.runs {
		cmd[r.task] = append(cmd[r.task], r.start)
	}
	adds := slices.Clone(h.qchk.delayed)
	gone := maps.Clone(h.qchk.gone)
	h.qchk.mu.Unlock()
	starts := startsOf(fq, v, cmd)

	spec := schedSpec{name: schedName, every: schedEvery, late: schedLate, createdLo: h.schedFrom, quiet: []span{quiet}}
	if lo, hi := v.bounds(h.schedRev); lo.After(spec.createdLo) {
		spec.createdLo, spec.createdHi = lo, hi
	}
	st := schedTasks(schedName, fq)
	f.sched = judgeTicks(spec, st, v)
	early, ev := judgeTickStarts(schedName, st, starts)
	f.sched.early = early
	f.sched.violations = append(f.sched.violations, ev...)

	f.delayed = judgeDelayed(adds, fq, v, starts, gone)
	f.rate = judgeQueueRate(v.byKey[rateQueue+".rate"], claimsOf(v.tasks(rateQueue)), rateQueueMax, rateQueuePeriod, revTime{at: h.rateFrom})
	f.keyRate = judgeKeyRates(v.keyRates(rateQueue), v.tasks(rateQueue), keyRateLimit, rateQueuePeriod, revTime{at: h.rateFrom})
	for _, vs := range [][]string{f.sched.violations, f.delayed.violations, f.rate.violations, f.keyRate.violations} {
		for _, s := range vs {
			h.stats.violation("%s", s)
		}
	}
	return f
}

// report prints the figures of the three checks.
func (f flowCounts) report(w io.Writer) {
	s := f.sched
	fmt.Fprintf(w, "schedule %s of %s (every %s, catch-up one: a tick later than %s is missed, the latest missed added): %d ticks with a task, from %s to %s; %d gaps (%d ticks missing), %d after an outage (their next tick added at least %s after its time); in the drain, with one worker and no faults, %d ticks judged, %d lost\n",
		schedName, queueName, schedEvery, schedLate, s.ticks, fmtTime(s.first), fmtTime(s.last), s.gaps, s.missing, s.caughtUp, schedLate, s.quietJudged, s.lostQuiet)
	for _, n := range s.notes {
		fmt.Fprintf(w, "gap: %s\n", n)
	}
	d := f.delayed
	fmt.Fprintf(w, "delayed tasks of %s: %d acknowledged (%d --at, %d --in; %d with their time known exactly, the others judged against a lower bound of it), %d started, %d early, %d never; first start after their time: %s\n",
		queueName, d.added, d.at, d.in, d.exact, d.started, d.early, d.never, quantiles(d.lateness))
	r := f.rate
	fmt.Fprintf(w, "rate-limited queue %s (%d/%s, a worker of concurrency 1 per host): %d revisions of its rate record seen (%d queue watches), %d starts admitted, at most %d in any %s over %d windows (%d at the limit); %d claims; %d stretches where the watch may have missed admissions (allowed up to %d more)\n",
		rateQueue, rateQueueMax, rateQueuePeriod, r.revisions, f.watches, r.admitted, r.worst, rateQueuePeriod, r.windows, r.full, r.starts, r.uncertain, r.allowance)
	k := f.keyRate
	fmt.Fprintf(w, "its keys (%d/%s each, %s's own %d): %d keys judged, %d revisions of their records and %d expiries, %d starts admitted, at most %d and %d (%s) in any %s over %d windows (%d and %d at the limit); %d claims; %d stretches where the watch may have missed admissions (allowed up to %d more)\n",
		keyRateMax, rateQueuePeriod, keyRateOwn, keyRateOwnMax, k.keys, k.revisions, k.removed, k.admitted, k.worst[keyRateMax], k.worst[keyRateOwnMax], keyRateOwn, rateQueuePeriod, k.windows,
		k.full[keyRateMax], k.full[keyRateOwnMax], k.starts, k.uncertain, k.allowance)
}

// verdict is the three checks' part of the closing line.
func (f flowCounts) verdict() string {
	return f.sched.verdict() + "; " + f.delayed.verdict() + "; " + f.rate.verdict() + "; " + f.keyRate.verdict()
}
