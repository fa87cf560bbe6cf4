package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// The rate-limited queue (adr/0052): a second queue, fr, with a rate of
// rateQueueMax starts per rateQueuePeriod and no max_active, worked by a
// `baton queue work` per host (concurrency 1, each task a `sleep`), which
// the client faults kill and pause like the others; an adder keeps a
// backlog of tasks so that the limit, not the work, sets the pace. A
// queue of its own, so that the fault queue's throughput (every
// acknowledged task done in the drain) is not slowed by the limit. The
// queue garbage does not touch it: a rate record garbled resets its log
// by design (its window may then admit up to the limit more), so the
// record is left whole, and the windows are judged throughout.
//
// The period is long against the gaps the watch may leave: the record
// logs the admissions of the last period, so a revision the watch missed
// is still shown by the next one it sees if that came within the period;
// its watch is down for a few seconds when a stream leader moves.
// Concurrency 1 keeps the batches a dispatcher admits small, so that even
// a full window's admissions spread over the period, rather than all
// coming at once and then none for a whole period.
var (
	rateQueue        = "fr"
	rateQueueKeys    = []string{"r1", "r2", "r3", "r4", "r5", "r6"} // keyRateOwn first
	rateQueueMax     = 20
	rateQueuePeriod  = 10 * time.Second
	rateQueueBacklog = 30
	rateQueueWork    = "0.3" // seconds each task's command sleeps
	// Each key's own limit too (adr/0055): keyRateMax per period for every
	// key, and keyRateOwnMax for keyRateOwn, its own. Six keys at 6 pass
	// the queue's 20, and two keys alone (the adder's narrow turns) have
	// 16, under it, so that each binds at times. The queue's limit is well
	// under what the workers start in a good spell (near 30 in 10 s), so
	// that it binds in spite of the faults.
	keyRateMax    = 6
	keyRateOwn    = "r1"
	keyRateOwnMax = 10
)

// keyRateLimit is the most starts of key per rateQueuePeriod.
func keyRateLimit(key string) int {
	if key == keyRateOwn {
		return keyRateOwnMax
	}
	return keyRateMax
}

// createRateQueue makes the rate-limited queue and returns when the
// create started and its config's revision.
func (h *harness) createRateQueue() (time.Time, error) {
	r := h.cli("h1", "queue", "create", rateQueue, "--ttl", queueTTL.String(), "--max-attempts", "1000", "--backoff", "0s",
		"--timeout", "1m", "--rate", fmt.Sprintf("%d/%s", rateQueueMax, rateQueuePeriod),
		"--key-rate", fmt.Sprintf("%d/%s", keyRateMax, rateQueuePeriod))
	if r.code != 0 {
		return time.Time{}, fmt.Errorf("queue create %s: exit %d: %s", rateQueue, r.code, r.stderr)
	}
	if k := h.cli("h1", "queue", "key", "set", rateQueue, keyRateOwn, "--rate", fmt.Sprintf("%d/%s", keyRateOwnMax, rateQueuePeriod)); k.code != 0 {
		return time.Time{}, fmt.Errorf("queue key set %s %s: exit %d: %s", rateQueue, keyRateOwn, k.code, k.stderr)
	}
	return r.start, nil
}

// rateQueueAdder adds a batch of 4 to 10 tasks (`queue add --batch`) every
// 1 to 2.5 s while fewer than rateQueueBacklog wait, as the watch sees them.
// It takes turns: for 20 to 40 s the tasks go to all the keys (the
// queue's limit binds); then for 25 to 40 s to two keys alone, keyRateOwn and
// another (their own limits bind, and the other keys rest, so that their
// records expire and are made again).
func (h *harness) rateQueueAdder(ctx context.Context) {
	file := filepath.Join(h.dir, "clients", "fr-batch.jsonl")
	keys, turn := rateQueueKeys, time.Now().Add(h.between(20*time.Second, 40*time.Second))
	for n := 0; ctx.Err() == nil; n++ {
		if time.Now().After(turn) {
			if len(keys) == len(rateQueueKeys) {
				keys, turn = []string{keyRateOwn, rateQueueKeys[1]}, time.Now().Add(h.between(25*time.Second, 40*time.Second))
			} else {
				keys, turn = rateQueueKeys, time.Now().Add(h.between(20*time.Second, 40*time.Second))
			}
		}
		if h.qw.backlog(rateQueue) < rateQueueBacklog {
			var b strings.Builder
			for i := range 4 + h.intn(7) {
				fmt.Fprintf(&b, "{\"key\":%q,\"id\":\"b%d-%d\"}\n", keys[h.intn(len(keys))], n, i)
			}
			if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
				h.stats.stick("rate queue adder: %v", err)
				return
			}
			h.cli(hosts[h.intn(len(hosts))], "queue", "add", rateQueue, "--batch", file)
		}
		sleep(ctx, h.between(time.Second, 2500*time.Millisecond))
	}
}

// rateQueueWorker runs `baton queue work` on the rate-limited queue on
// host again and again, each for a while, then drains it (SIGTERM).
func (h *harness) rateQueueWorker(ctx context.Context, host string, j int) {
	for n := 0; ctx.Err() == nil; n++ {
		actor := fmt.Sprintf("rw-%s-%d-%d", host, j, n)
		d, err := h.spawn(actor, host, queueTTL, "queue", "work", rateQueue, "--concurrency", "1", "--grace", "1s",
			"--", "sleep", rateQueueWork)
		if err != nil {
			h.stats.stick("start queue work %s: %v", actor, err)
			return
		}
		h.hold(ctx, d, h.between(10*time.Second, 30*time.Second))
		sleep(ctx, h.between(200*time.Millisecond, time.Second))
	}
}

// qrateCounts are the rate-limited queue's outcome.
type qrateCounts struct {
	revisions   int // revisions of the rate record seen
	admitted    int // starts admitted, seen or shown by a later revision's log
	windows     int // windows of the period judged (one ending at each admission)
	worst       int // the most admitted in any of them
	full        int // windows holding the limit exactly (its pace held back by it)
	over        int // windows holding more than the limit
	removed     int // revisions that removed the record (a key's expires when the key rests)
	dropped     int // admissions a later revision left out while in its period
	starts      int // claims of the queue's tasks seen
	beyond      int // claims beyond the admissions before them
	uncertain   int // stretches the watch may have missed admissions in
	allowance   int // the admissions they may hide, at most
	undecodable int // revisions of the record that did not decode
	other       int // other violations: undecodable revisions, an admission of two sizes, a log entry not before its revision
	violations  []string
}

// judgeQueueRate judges a rate-limited queue from the revisions of its
// rate record and its tasks' claims, for a limit of max starts per
// period; origin is the queue's making (its time no later than that of
// its first admission).
//
// The record (queue/rate.go's rateLog): each revision admits last starts
// at its own server time; its log holds the admissions of earlier
// revisions within the period before its writer's decision, each with its
// revision's server time, which the writer read from its watch. Those
// times are the stream's timestamps, so a log entry names the revision it
// came from by its time exactly, and a revision the watch missed is known
// from the log of a later one. Every write is a compare-and-set on the
// revision before it, and decides at a server time no later than its own
// write's, keeping what came after that time less the period; so of two
// revisions seen, p then o, every admission p shows (log and last) later
// than o's time less the period must be in o's log (else it was dropped,
// and o's writer admitted against too few); and every admission between
// them is shown by o's log if p came no more than a period before o. If
// it came earlier, admissions in (p, o - period] may be unknown (watch
// gaps and quiet spells look alike): an uncertain stretch. A revision
// that removed the record (a key's record expires a period and 2 s after
// its last write) is taken as one with an empty log: nothing admitted was
// still within the period when it went, and the next write starts afresh.
//
// Windows: adr/0052 promises at most max admissions in any window of the
// period by the server's time of the admitting writes; the fullest window
// ends at an admission, so a window ending at each admission known is
// counted. Unknown admissions only make a window look emptier: one over
// the limit is a real one.
//
// Starts: a task is claimed (its record made active, the claim's
// revision) only after its start was admitted by a revision before it,
// so, ordering both by revision, the n-th claim must come after at least
// n admissions (a pick admitted and not claimed, as when its dispatcher
// died, only leaves room). An admission known from a log alone lies
// between the revisions seen around its time and is counted from the
// earlier. An uncertain stretch may hide admissions: as many as its
// windows leave room for, if the limit held there (max less those the
// window ending at the stretch's end holds already, when it is shorter
// than a period; max per period else), counted from its start.
func judgeQueueRate(revs []qrev, claims []uint64, limit int, period time.Duration, origin revTime) (c qrateCounts) {
	var seen []qrev
	for _, r := range revs {
		switch {
		case r.bad:
			c.undecodable++
			c.other++
			c.violations = append(c.violations, fmt.Sprintf("queue rate: revision %d of %s does not decode", r.rev, r.key))
		case r.rate != nil:
			seen = append(seen, r)
		case !r.live:
			// A removal (a key's record expires once its period and 2 s
			// have passed since its last write): no admission was left
			// within the period, and the next write starts a log afresh.
			// Taken as a revision with an empty log: an admission it
			// cuts off while within the period is one dropped, and no
			// admission was made in the period before it.
			r.rate = &rateRev{}
			seen = append(seen, r)
			c.removed++
		}
	}
	slices.SortFunc(seen, func(a, b qrev) int { return cmpU(a.rev, b.rev) })
	c.revisions = len(seen) - c.removed

	// The admissions, by their revision's time: how many, and the
	// earliest revision they may be counted from.
	type adm struct {
		n    int
		from uint64
	}
	adms := map[time.Time]*adm{}
	note := func(at time.Time, n int, from uint64, where string) {
		if a, ok := adms[at]; ok {
			if a.n != n {
				c.other++
				c.violations = append(c.violations, fmt.Sprintf("queue rate: the admission at %s is %d starts and %d (%s)", fmtTime(at), a.n, n, where))
			}
			a.from = min(a.from, from)
			return
		}
		adms[at] = &adm{n: n, from: from}
	}
	for _, o := range seen {
		if o.rate.last > 0 {
			note(o.at, o.rate.last, o.rev, fmt.Sprintf("revision %d's last", o.rev))
		}
	}
	for i, o := range seen {
		for _, w := range o.rate.log {
			if !w.at.Before(o.at) {
				c.other++
				c.violations = append(c.violations, fmt.Sprintf("queue rate: revision %d (%s) logs an admission at %s, not before it", o.rev, fmtTime(o.at), fmtTime(w.at)))
				continue
			}
			// The latest revision seen before it: it came after that one.
			from := origin.rev + 1
			j := sort.Search(i, func(j int) bool { return !seen[j].at.Before(w.at) })
			if j > 0 {
				from = seen[j-1].rev + 1
			}
			if j < i && seen[j].at.Equal(w.at) {
				from = seen[j].rev
			}
			note(w.at, w.n, from, fmt.Sprintf("revision %d's log", o.rev))
		}
	}
	for _, a := range adms {
		c.admitted += a.n
	}

	// Dropped: what p shows within the period before o must be in o.
	for i := 1; i < len(seen); i++ {
		p, o := seen[i-1], seen[i]
		shows := slices.Clone(p.rate.log)
		if p.rate.last > 0 {
			shows = append(shows, rateWin{p.at, p.rate.last})
		}
		kept := map[time.Time]int{}
		for _, w := range o.rate.log {
			kept[w.at] = w.n
		}
		for _, w := range shows {
			n, ok := kept[w.at]
			switch {
			case !w.at.After(o.at.Add(-period)) || ok && n == w.n:
			case !o.live:
				c.dropped++
				c.violations = append(c.violations, fmt.Sprintf("queue rate: %d starts admitted at %s were within %s of the record's removal (revision %d, %s)",
					w.n, fmtTime(w.at), period, o.rev, fmtTime(o.at)))
			default:
				c.dropped++
				c.violations = append(c.violations, fmt.Sprintf("queue rate: %d starts admitted at %s are not in revision %d (%s), within %s of it",
					w.n, fmtTime(w.at), o.rev, fmtTime(o.at), period))
			}
		}
	}

	// Windows ending at each admission.
	times := make([]time.Time, 0, len(adms))
	for at := range adms {
		times = append(times, at)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	inWindow := func(from, to time.Time) int { // admissions in (from, to]
		n := 0
		for i := sort.Search(len(times), func(i int) bool { return times[i].After(from) }); i < len(times) && !times[i].After(to); i++ {
			n += adms[times[i]].n
		}
		return n
	}
	for _, e := range times {
		n := inWindow(e.Add(-period), e)
		c.windows++
		c.worst = max(c.worst, n)
		if n == limit {
			c.full++
		}
		if n > limit {
			c.over++
			c.violations = append(c.violations, fmt.Sprintf("queue rate: %d starts admitted in the %s up to %s (limit %d)", n, period, fmtTime(e), limit))
		}
	}

	// Uncertain stretches, and what they may hide.
	type step struct {
		from uint64 // counted for claims after this revision
		n    int
	}
	var hid []step
	prev := qrev{rev: origin.rev, at: origin.at}
	for _, o := range seen {
		if gap := o.at.Add(-period).Sub(prev.at); gap > 0 {
			n := limit * int((gap+period-1)/period)
			if gap <= period {
				n = max(0, limit-inWindow(o.at.Add(-2*period), prev.at))
			}
			c.uncertain++
			c.allowance += n
			hid = append(hid, step{prev.rev + 1, n})
		}
		prev = o
	}

	// Starts: the n-th claim after n admissions.
	claims = slices.Clone(claims)
	slices.Sort(claims)
	claims = slices.Compact(claims)
	c.starts = len(claims)
	steps := hid
	for _, a := range adms {
		steps = append(steps, step{a.from, a.n})
	}
	slices.SortFunc(steps, func(a, b step) int { return cmpU(a.from, b.from) })
	avail, k := 0, 0
	for i, cl := range claims {
		for k < len(steps) && steps[k].from < cl {
			avail += steps[k].n
			k++
		}
		if i+1 > avail {
			c.beyond++
			c.violations = append(c.violations, fmt.Sprintf("queue rate: claim %d (revision %d) came after %d admissions", i+1, cl, avail))
		}
	}
	return c
}

// claimsOf is every claiming revision the revisions of a queue's tasks
// name (an active record names the claim that started it, a finished one
// the claim of its last attempt).
func claimsOf(tasks map[string][]qrev) []uint64 {
	var out []uint64
	for _, revs := range tasks {
		for _, r := range revs {
			if r.task != nil && r.task.claimed != 0 {
				out = append(out, r.task.claimed)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// keyRateCounts are the rate-limited queue's keys' outcome: each key's
// record judged as the queue's is, against the key's limit.
type keyRateCounts struct {
	keys, revisions, removed, admitted, windows, over, dropped int
	starts, beyond, uncertain, allowance, other                int

	worst      map[int]int // by limit: the most admitted in any window
	full       map[int]int // by limit: windows holding it exactly
	violations []string
}

// judgeKeyRates judges each key of the rate-limited queue from the
// revisions of its record (revs by key) and its tasks' claims: every key
// with a record or a claimed task (a key claimed with no record at all
// has every claim beyond its admissions). A key's record expires once
// the key rests (its TTL is its period and 2 s) and is made again with an
// empty log: every admission the old one logged is older than the period
// by then. judgeQueueRate takes the expiry as a revision with an empty
// log: an admission still within the period when the record went is one
// dropped (as is one missing from the log of a record made again within
// the period), and the expiry tells that no admission came in the period
// before it, so a key's rest is no stretch the watch may have missed.
func judgeKeyRates(revs map[string][]qrev, tasks map[string][]qrev, limit func(string) int, period time.Duration, origin revTime) keyRateCounts {
	c := keyRateCounts{worst: map[int]int{}, full: map[int]int{}}
	claims := map[string][]uint64{}
	for _, trs := range tasks {
		for _, r := range trs {
			if r.task != nil && r.task.claimed != 0 {
				claims[r.task.key] = append(claims[r.task.key], r.task.claimed)
			}
		}
	}
	keys := slices.Sorted(maps.Keys(revs))
	for key := range claims {
		if _, ok := revs[key]; !ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		lim := limit(key)
		k := judgeQueueRate(revs[key], claims[key], lim, period, origin)
		c.keys++
		c.revisions += k.revisions
		c.removed += k.removed
		c.admitted += k.admitted
		c.windows += k.windows
		c.over += k.over
		c.dropped += k.dropped
		c.starts += k.starts
		c.beyond += k.beyond
		c.uncertain += k.uncertain
		c.allowance += k.allowance
		c.other += k.other
		c.worst[lim] = max(c.worst[lim], k.worst)
		c.full[lim] += k.full
		for _, v := range k.violations {
			c.violations = append(c.violations, "key "+key+": "+strings.TrimPrefix(v, "queue rate: "))
		}
	}
	return c
}

// verdict is the keys' part of the closing line.
func (c keyRateCounts) verdict() string {
	return fmt.Sprintf("key rates: %d keys, %d starts admitted, at most %d in %s (limit %d) and %d (limit %d, %s's own) over %d windows, %d windows over limit, %d admissions dropped, %d of %d claims beyond admissions, %d other problems",
		c.keys, c.admitted, c.worst[keyRateMax], rateQueuePeriod, keyRateMax, c.worst[keyRateOwnMax], keyRateOwnMax, keyRateOwn, c.windows, c.over, c.dropped, c.beyond, c.starts, c.other)
}

// verdict is the rate-limited queue's part of the closing line.
func (c qrateCounts) verdict() string {
	return fmt.Sprintf("queue rate: %d starts admitted, at most %d in %s (limit %d) over %d windows, %d windows over limit, %d admissions dropped, %d of %d claims beyond admissions, %d other problems",
		c.admitted, c.worst, rateQueuePeriod, rateQueueMax, c.windows, c.over, c.dropped, c.beyond, c.starts, c.other)
}
