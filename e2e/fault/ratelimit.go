package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/rate"
)

// The rate limiter workload: a limiter of rateMax takes a second on the
// cluster, taken from through `baton rate take` by one actor per host, and
// by one library client of the harness that takes whenever it is let (so
// that the limiter is full and the CLI's takes are refused often). A watch
// of the limiter's record gathers every admission with the server's time
// of the write that admitted it.
var (
	rateName   = "frate"
	rateMax    = 20
	ratePeriod = time.Second
)

// rateObs is one revision of the limiter's record as the watch brought
// it: the take it admitted (Last, at the revision's server time) and the
// takes before it still inside the period (Log, each at its own).
type rateObs struct {
	rev  uint64
	at   time.Time
	last string // "" for the revision that made the limiter
	log  []rate.Take
}

// rateAck is an admission acknowledged to a taker: its take id, the
// revision that, it was told, admitted it, and when the call that was told
// started and returned. The admitting write's server time lies between the
// two: the server stamps a write after it was sent and before it answers,
// and every process here, servers included, reads one machine's clock.
type rateAck struct {
	id       string
	rev      uint64
	from, to time.Time
}

// rateLedger is what the rate workload saw: the record's revisions, the
// admissions acknowledged and the takes refused.
type rateLedger struct {
	mu          sync.Mutex
	obs         map[uint64]rateObs
	acks        []rateAck
	refused     int
	undecodable int      // revisions the watch brought that did not decode
	bad         []string // admissions a taker was told of that do not make sense
	watches     int      // watches started (more than one: the watch ended and was started again)
}

func newRateLedger() *rateLedger { return &rateLedger{obs: map[uint64]rateObs{}} }

func (l *rateLedger) observe(o rateObs) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.obs[o.rev] = o
}

func (l *rateLedger) ack(a rateAck) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks = append(l.acks, a)
}

func (l *rateLedger) refuse() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused++
}

// seen is the highest revision the watch brought and the highest one
// acknowledged to a taker.
func (l *rateLedger) seen() (watched, acked uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for rev := range l.obs {
		watched = max(watched, rev)
	}
	for _, a := range l.acks {
		acked = max(acked, a.rev)
	}
	return watched, acked
}

// createRate makes the run's limiter, retrying while the cluster is not
// answering (exit 6) for up to a minute.
func (h *harness) createRate(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		r := h.cli("h1", "rate", "create", rateName, "--limit", fmt.Sprintf("%d/%s", rateMax, ratePeriod))
		if r.code == 0 {
			return nil
		}
		if r.code != 6 || time.Now().After(deadline) {
			return fmt.Errorf("rate create: exit %d: %s", r.code, r.stderr)
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// rateWatch follows the limiter's record until ctx is done, recording each
// revision; a watch that ends (its connection lost for good) is started
// again. A watch can still miss revisions: the bucket keeps one per key,
// and an ordered consumer recreated after a server was lost resumes after
// the last revision it delivered, past those overwritten meanwhile. That
// is why judgeRate reads each revision's log as well, and judges an
// acknowledged take missing only where the watch shows it must be there.
func (h *harness) rateWatch(ctx context.Context) {
	c, err := kv.Connect(ctx, kv.WithURL(h.cl.urls()), kv.WithTimeout(3*time.Second), kv.WithName("batonfault rate watch"))
	if err != nil {
		h.stats.stick("rate watch: %v", err)
		return
	}
	defer c.Close()
	b := c.Bucket(rate.BucketConfig(rate.DefaultPrefix, 3))
	for ctx.Err() == nil {
		w, err := b.Watch(ctx, "rate."+rateName)
		if err != nil {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		h.rates.mu.Lock()
		h.rates.watches++
		h.rates.mu.Unlock()
		for e := range w.Updates() {
			if e == nil || !e.Live() {
				continue
			}
			var rec rate.Limiter
			if err := rec.UnmarshalJSON(e.Value); err != nil {
				h.rates.mu.Lock()
				h.rates.undecodable++
				h.rates.mu.Unlock()
				continue
			}
			o := rateObs{rev: e.Revision, at: e.Created, log: rec.Log}
			if rec.Last != nil {
				o.last = rec.Last.ID
			}
			h.rates.observe(o)
		}
		w.Stop()
	}
}

// rateTaker takes from the limiter through the CLI on host again and
// again; an admission (exit 0) is acknowledged with its take id and the
// revision that admitted it.
func (h *harness) rateTaker(ctx context.Context, host string) {
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("cli-%s-%d", host, n)
		r := h.cli(host, "rate", "take", rateName, "--id", id, "--json")
		var doc struct {
			Admitted bool   `json:"admitted"`
			ID       string `json:"id"`
			Revision uint64 `json:"revision"`
		}
		switch r.code {
		case 0:
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || !doc.Admitted || doc.ID != id || doc.Revision == 0 {
				h.rates.mu.Lock()
				h.rates.bad = append(h.rates.bad, fmt.Sprintf("rate take %s on %s: exit 0 without its admission in its JSON: %q", id, host, r.stdout))
				h.rates.mu.Unlock()
				break
			}
			h.rates.ack(rateAck{id: id, rev: doc.Revision, from: r.start, to: r.end})
		case 3:
			if json.Unmarshal([]byte(r.stdout), &doc) == nil && !doc.Admitted {
				h.rates.refuse()
			}
		}
		sleep(ctx, h.between(100*time.Millisecond, 600*time.Millisecond))
	}
}

// rateFiller takes from the limiter through the library (a Handle, which
// logs its own takes at an upper bound of their times) whenever it is let: it sleeps as long as each refusal says
// and up to 150 ms more, so that the limiter stays full and the CLI's
// takers, which ask a few times a second, still get a share of it (with
// no slack the filler took 99% of the admissions). Its client is traced,
// like every writer of the record.
func (h *harness) rateFiller(ctx context.Context) {
	tr, err := h.tr.tracer("lib-rate")
	if err != nil {
		h.stats.stick("rate filler: %v", err)
		return
	}
	c, err := kv.Connect(ctx, kv.WithURL(h.cl.urls()), kv.WithTimeout(3*time.Second), kv.WithName("batonfault rate"), kv.WithTracer(tr))
	if err != nil {
		h.stats.stick("rate filler: %v", err)
		return
	}
	defer c.Close()
	ls, err := rate.New(c)
	if err != nil {
		h.stats.stick("rate filler: %v", err)
		return
	}
	var hd *rate.Handle
	for hd == nil {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		hd, err = ls.Open(octx, rateName)
		cancel()
		if err != nil && !sleep(ctx, 500*time.Millisecond) {
			return
		}
	}
	defer hd.Close()
	for n := 0; ctx.Err() == nil; n++ {
		id := "lib-" + strconv.Itoa(n)
		var a *rate.Admission
		r, err := h.libOp("lib-rate-take", func(ctx context.Context) (err error) {
			a, err = hd.Take(ctx, rate.WithID(id))
			return err
		})
		var le *rate.LimitedError
		switch {
		case err == nil:
			h.rates.ack(rateAck{id: id, rev: a.Revision, from: r.start, to: r.end})
		case errors.As(err, &le):
			h.rates.refuse()
			sleep(ctx, min(le.RetryAfter, time.Second)+h.between(0, 150*time.Millisecond))
		default:
			sleep(ctx, 200*time.Millisecond)
		}
	}
}

// rateCounts are the rate workload's outcome.
type rateCounts struct {
	admitted, acked, refused int
	worst                    int // the most admissions in any window of the period
	over                     int // windows of the period holding more than the limit
	dropped                  int // takes a later write of the record left out while still in its period
	lost                     int // acknowledged admissions that the record does not show, where it must
	unplaced                 int // acknowledged admissions the watch cannot place (it missed too much)
	revisions, watches       int
	violations, losses       []string
}

// checkRate waits (up to 15 s) for the watch to bring the last revision
// acknowledged, stops it and judges what it saw.
func (h *harness) checkRate(stopWatch func()) rateCounts {
	deadline := time.Now().Add(15 * time.Second)
	for {
		watched, acked := h.rates.seen()
		if watched >= acked || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopWatch()
	h.rates.mu.Lock()
	obs := make([]rateObs, 0, len(h.rates.obs))
	for _, o := range h.rates.obs {
		obs = append(obs, o)
	}
	acks := slices.Clone(h.rates.acks)
	refused, undecodable, watches, bad := h.rates.refused, h.rates.undecodable, h.rates.watches, slices.Clone(h.rates.bad)
	h.rates.mu.Unlock()
	rc := judgeRate(obs, acks, rateMax, ratePeriod)
	rc.refused, rc.watches = refused, watches
	rc.violations = append(rc.violations, bad...)
	if undecodable > 0 {
		rc.violations = append(rc.violations, fmt.Sprintf("rate: %d revisions of the limiter's record did not decode", undecodable))
	}
	for _, v := range rc.violations {
		h.stats.violation("%s", v)
	}
	for _, l := range rc.losses {
		h.stats.lose("%s", l)
	}
	return rc
}

// judgeRate judges the revisions of a limiter of limit takes per period
// that a watch saw, and the admissions acknowledged to its takers.
//
// Every admission is a revision of the record: its Last, at the server's
// time of that revision (the stream message's timestamp); the takes before
// it still within the period are in its Log, each with its own revision's
// time, so a revision the watch missed still shows in the next one it saw
// if that came within the period. The admissions seen are gathered from
// both, by take id; one id at two times (admitted twice, or a log that
// moved a take) is a violation, and so is one acknowledged to a call that
// was over before it was admitted or started after.
//
// Revisions' times grow with their numbers here: one clock, and a stream
// leader stamps in order (a new leader's first write comes after its
// predecessor's last).
//
// Windows: the library promises at most limit admissions in any window
// (t-period, t] by the servers' times of the admitting writes (rate/doc.go).
// The fullest window ends at an admission, so the windows ending at each
// admission are counted. An admission acknowledged but not seen (the watch
// missed its revision and every later one within the period: it stalls
// while its server is cut off, and the bucket keeps one revision per key)
// has a time known to lie in [from, to]: it is counted in the windows that
// hold that whole span, and those ending at its to are counted too. So a
// window is only ever counted short, and one over the limit is a real one.
//
// Dropped: every write of the record is a compare-and-set on the revision
// before it, so the revisions form one chain, and each write decides at a
// server time d no later than its own and keeps in its log every take
// after d-period. So for two revisions the watch saw, p before o, every
// take p shows (its log and its last) at a time after o's time less the
// period must be in o's log; one that is not was dropped by a write in
// between, which then admitted against too few.
//
// Lost: an admission acknowledged at revision R whose revision the watch
// saw must be that revision's Last. One whose id the watch saw nowhere was
// admitted no earlier than lo, the later of its call's start and the time
// of the last revision seen before R; if the first revision seen after R
// came less than the period after lo, its log must show it, and it is
// lost. Otherwise the watch missed too much to tell: unplaced.
func judgeRate(obs []rateObs, acks []rateAck, limit int, period time.Duration) (rc rateCounts) {
	obs = slices.Clone(obs)
	slices.SortFunc(obs, func(a, b rateObs) int { return cmp.Compare(a.rev, b.rev) })
	rc.revisions = len(obs)
	// A take's time is its admitting revision's, when the watch saw that
	// revision (at); else what a later revision's log says (logged): that
	// time exactly, or, for a take of a Handle that moved its own last take
	// into the log, an upper bound of it (the server tells a writer no
	// time), never earlier.
	at := map[string]time.Time{}     // take id -> its admission's time
	logged := map[string]time.Time{} // take id -> its time in the logs
	atRev := map[string]uint64{}     // take id -> the revision whose Last it is
	twice := map[string]bool{}       // ids already reported at two times
	note := func(times map[string]time.Time, id string, t time.Time) {
		prev, ok := times[id]
		switch {
		case !ok:
			times[id] = t
		case !prev.Equal(t) && !twice[id]:
			twice[id] = true
			rc.violations = append(rc.violations, fmt.Sprintf("rate: take %s admitted at %s and at %s", id, fmtTime(prev), fmtTime(t)))
		}
	}
	for _, o := range obs {
		if o.last != "" {
			note(at, o.last, o.at)
			if r, ok := atRev[o.last]; ok && r != o.rev {
				rc.violations = append(rc.violations, fmt.Sprintf("rate: take %s admitted by revision %d and by revision %d", o.last, r, o.rev))
			}
			atRev[o.last] = o.rev
		}
		for _, t := range o.log {
			note(logged, t.ID, t.At)
		}
	}
	for id, lt := range logged {
		if t, ok := at[id]; ok && lt.Before(t) && !twice[id] {
			twice[id] = true
			rc.violations = append(rc.violations, fmt.Sprintf("rate: take %s logged at %s, before its admission at %s", id, fmtTime(lt), fmtTime(t)))
		}
	}
	rc.admitted = len(at)
	for id := range logged {
		if _, ok := at[id]; !ok {
			rc.admitted++
		}
	}

	// Acknowledged admissions: seen where they must be, or lost, or
	// placed in time only by their calls (vague).
	byRev := map[uint64]rateObs{}
	for _, o := range obs {
		byRev[o.rev] = o
	}
	type span struct{ lo, hi time.Time }
	var vague []span
	rc.acked = len(acks)
	acked := map[string]bool{}
	for _, a := range acks {
		acked[a.id] = true
		if o, ok := byRev[a.rev]; ok && o.last != a.id {
			rc.lost++
			rc.losses = append(rc.losses, fmt.Sprintf("rate: take %s acknowledged as admitted by revision %d, which admitted %q", a.id, a.rev, o.last))
			continue
		}
		if t, ok := at[a.id]; ok {
			if r, ok := atRev[a.id]; ok && r != a.rev {
				rc.lost++
				rc.losses = append(rc.losses, fmt.Sprintf("rate: take %s acknowledged as admitted by revision %d, admitted by revision %d", a.id, a.rev, r))
			}
			if t.Before(a.from) || t.After(a.to) {
				rc.violations = append(rc.violations, fmt.Sprintf("rate: take %s admitted at %s, outside the call told of it (%s to %s)",
					a.id, fmtTime(t), fmtTime(a.from), fmtTime(a.to)))
			}
			continue
		}
		if lt, ok := logged[a.id]; ok {
			// Placed by a log alone: at most its logged time, and within
			// its call.
			if lt.Before(a.from) {
				rc.violations = append(rc.violations, fmt.Sprintf("rate: take %s logged at %s, before the call told of it began (%s)", a.id, fmtTime(lt), fmtTime(a.from)))
			}
			vague = append(vague, span{a.from, minTime(a.to, lt)})
			continue
		}
		i := sort.Search(len(obs), func(i int) bool { return obs[i].rev > a.rev })
		lo, hi := a.from, a.to
		if i > 0 && obs[i-1].at.After(lo) {
			lo = obs[i-1].at
		}
		if i < len(obs) && obs[i].at.Before(lo.Add(period)) {
			rc.lost++
			rc.losses = append(rc.losses, fmt.Sprintf("rate: take %s acknowledged as admitted by revision %d (between %s and %s) is in no revision: revision %d came at %s and does not show it",
				a.id, a.rev, fmtTime(lo), fmtTime(hi), obs[i].rev, fmtTime(obs[i].at)))
			continue
		}
		if i < len(obs) && obs[i].at.Before(hi) {
			hi = obs[i].at
		}
		rc.unplaced++
		vague = append(vague, span{lo, hi})
	}

	// A take placed by a log alone that no call was told of (its call
	// failed after its write) is at most its logged time, and at least the
	// period before: counted in no window, as one only a bound places.
	for id, lt := range logged {
		if _, ok := at[id]; !ok && !acked[id] {
			vague = append(vague, span{lt.Add(-period), lt})
		}
	}

	// Windows of the period, each ending at an admission seen or at the
	// latest time of one not seen.
	times := make([]time.Time, 0, len(at))
	for _, t := range at {
		times = append(times, t)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	ends := slices.Clone(times)
	for _, v := range vague {
		ends = append(ends, v.hi)
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	ends = slices.CompactFunc(ends, func(a, b time.Time) bool { return a.Equal(b) })
	for _, e := range ends {
		from := e.Add(-period)
		// Seen: in (from, e].
		n := sort.Search(len(times), func(i int) bool { return times[i].After(e) }) -
			sort.Search(len(times), func(i int) bool { return times[i].After(from) })
		for _, v := range vague {
			if v.lo.After(from) && !v.hi.After(e) {
				n++
			}
		}
		rc.worst = max(rc.worst, n)
		if n > limit {
			rc.over++
			rc.violations = append(rc.violations, fmt.Sprintf("rate: %d admitted in the %s up to %s (limit %d)", n, period, fmtTime(e), limit))
		}
	}

	// Dropped: what each revision seen shows must be in the next one seen,
	// while in its period.
	for i := 1; i < len(obs); i++ {
		p, o := obs[i-1], obs[i]
		shows := slices.Clone(p.log)
		if p.last != "" {
			shows = append(shows, rate.Take{ID: p.last, At: p.at})
		}
		kept := map[string]bool{}
		for _, t := range o.log {
			kept[t.ID] = true
		}
		for _, t := range shows {
			if t.At.After(o.at.Add(-period)) && !kept[t.ID] {
				rc.dropped++
				rc.violations = append(rc.violations, fmt.Sprintf("rate: take %s (admitted %s) is not in revision %d (%s), within %s of it",
					t.ID, fmtTime(t.At), o.rev, fmtTime(o.at), period))
			}
		}
	}
	return rc
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func fmtTime(t time.Time) string { return t.Local().Format("15:04:05.000000") }
