package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The semaphore workload: a semaphore of semMax units on the cluster,
// taken by `baton sem run` daemons on every host with weights 1 and 2
// (more than it has, so that they wait in line), which the client faults
// kill and pause like run and lead. Each command holds its permit for a
// while, reporting to the semaphore ledger what it holds and writing to
// the checker under its fence, one key per unit.
var (
	semName   = "fsem"
	semMax    = 3
	semTTL    = 3 * time.Second
	semActors = 5
)

// semHold is one command that `sem run` started: the permit it was given
// (as the environment told it), and when it started and last acted, by its
// own clock (every process here shares the machine's).
type semHold struct {
	run, actor, permit string
	fence              uint64
	units              []int
	index, weight      int // weight: what its `sem run` asked for
	start, last        time.Time
	ended              bool
}

// semLedger records the holders' reports (POST /sevent) and passes each
// write on to the checker, under key fsem.<unit> for every unit the permit
// holds: the resource each unit stands for, which takes a write only with
// a fence at least the largest it has seen.
type semLedger struct {
	chk   *checker
	mu    sync.Mutex
	holds map[string]*semHold // by the command's procID
}

func newSemLedger(chk *checker) *semLedger {
	return &semLedger{chk: chk, holds: map[string]*semHold{}}
}

// ServeHTTP takes POST /sevent?event=start|write|end&run=R&actor=A&permit=P&fence=F&units=U&index=I&weight=W&at=NS,
// where R is the command's procID, U its units ("0,2") and NS when it did
// it (Unix nanoseconds): the command's time, not the arrival's, since a
// host cut off delivers its reports late (see queueChecker.ServeHTTP).
func (l *semLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fence, err1 := strconv.ParseUint(q.Get("fence"), 10, 64)
	index, err2 := strconv.Atoi(q.Get("index"))
	weight, err3 := strconv.Atoi(q.Get("weight"))
	ns, err4 := strconv.ParseInt(q.Get("at"), 10, 64)
	units, err5 := parseUnits(q.Get("units"))
	if err := firstErr(err1, err2, err3, err4, err5); err != nil || q.Get("run") == "" || q.Get("actor") == "" || ns <= 0 {
		http.Error(w, "want run, actor, permit, fence, units, index, weight and at", http.StatusBadRequest)
		return
	}
	h := semHold{run: q.Get("run"), actor: q.Get("actor"), permit: q.Get("permit"), fence: fence, units: units, index: index, weight: weight}
	at := time.Unix(0, ns)
	l.event(h, q.Get("event"), at)
	if q.Get("event") == "write" {
		writer := h.actor + "/" + h.run
		for _, u := range units {
			l.chk.write(semKey(u), fence, writer, time.Time{})
		}
	}
	w.WriteHeader(http.StatusOK)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// semKey is the checker's key of one unit of the semaphore.
func semKey(unit int) string { return semName + "." + strconv.Itoa(unit) }

// parseUnits reads BATON_SEM_UNITS: "0", "1,2".
func parseUnits(s string) ([]int, error) {
	var units []int
	for _, f := range strings.Split(s, ",") {
		u, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("units %q: %w", s, err)
		}
		units = append(units, u)
	}
	return units, nil
}

// event records what command h.run reported at at: its first report makes
// the hold, each later one moves its start or last sign of life (reports
// may arrive out of order).
func (l *semLedger) event(h semHold, kind string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.holds[h.run]
	if cur == nil {
		h.start, h.last = at, at
		cur = &h
		l.holds[h.run] = cur
	}
	if at.Before(cur.start) {
		cur.start = at
	}
	if at.After(cur.last) {
		cur.last = at
	}
	if kind == "end" {
		cur.ended = true
	}
}

// all is a copy of every hold.
func (l *semLedger) all() []*semHold {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*semHold, 0, len(l.holds))
	for _, h := range l.holds {
		c := *h
		out = append(out, &c)
	}
	return out
}

// createSem makes the run's semaphore, retrying while the cluster is not
// answering (exit 6) for up to a minute.
func (h *harness) createSem(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		r := h.cli("h1", "sem", "create", semName, "--max", strconv.Itoa(semMax))
		if r.code == 0 {
			return nil
		}
		if r.code != 6 || time.Now().After(deadline) {
			return fmt.Errorf("sem create: exit %d: %s", r.code, r.stderr)
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// semActor runs `baton sem run` of weight on host again and again; its
// command holds the permit for 0.3 to 2 s and ends by itself. A run that
// waits 10 s in line gives up (exit 3); one still running after 20 s (its
// command stopped and never let go) is ended with SIGTERM.
func (h *harness) semActor(ctx context.Context, host string, j, weight int) {
	w := strconv.Itoa(weight)
	for n := 0; ctx.Err() == nil; n++ {
		actor := fmt.Sprintf("sem-%s-%d-%d", host, j, n)
		hold := h.between(300*time.Millisecond, 2*time.Second)
		d, err := h.spawn(actor, host, semTTL, "sem", "run", semName, "--weight", w, "--ttl", semTTL.String(),
			"--grace", "2s", "--wait", "10s", "--", h.self, "semhold", "-weight", w, "-hold", hold.String())
		if err != nil {
			h.stats.stick("start sem run %s: %v", actor, err)
			return
		}
		h.hold(ctx, d, 20*time.Second)
		sleep(ctx, h.between(100*time.Millisecond, 800*time.Millisecond))
	}
}

// semCounts are the semaphore workload's outcome.
type semCounts struct {
	served, ended                 int // commands started, and those that ended by themselves
	exclusion, overMax, badPermit int
	paused                        int // holds left out of the judgement: their baton was paused
}

// checkSem judges the semaphore's ledger once every daemon has stopped.
func (h *harness) checkSem() semCounts {
	h.mu.Lock()
	paused := map[string][]pauseCheck{}
	for _, p := range h.pauses {
		paused[p.actor] = append(paused[p.actor], p)
	}
	h.mu.Unlock()
	var s semCounts
	var holds []*semHold
	for _, hd := range h.sled.all() {
		s.served++
		if hd.ended {
			s.ended++
		}
		if wasPaused(paused[hd.actor], hd.start, hd.last) {
			s.paused++
			continue
		}
		holds = append(holds, hd)
	}
	exclusion, over, bad := judgeSem(holds, semMax)
	for _, v := range slices.Concat(exclusion, over, bad) {
		h.stats.violation("%s", v)
	}
	s.exclusion, s.overMax, s.badPermit = len(exclusion), len(over), len(bad)
	return s
}

// judgeSem judges the commands that held permits of a semaphore of max
// units, over the time each ran (from its first report to its last, by its
// own clock), and returns each violation found, in three kinds:
//
//   - exclusion: a unit held by two commands at once, or a unit's later
//     holder given a fence not larger than its earlier holder's;
//   - over: more than max units (the permits' weights) held at once;
//   - bad: a permit that is not what was asked for or promised: no fence,
//     a unit outside 0..max-1 or twice, as many units as its weight, its
//     index its lowest unit, one permit id or one fence for two commands.
//
// Why it is sound, though a holder cut off by a partition keeps running
// until it notices its loss: a command's time [start, last] lies within
// the life on the server of each of its units, from the create that gave
// the permit (before the command started) to the unit's delete or expiry.
// `sem run` releases the units only once its command has exited; a holder
// that cannot renew gives the permit up at its local deadline, which comes
// before the server could expire the units by at least the stop budget
// (a quarter of the TTL, 750 ms here) plus the margin kept for clock rates
// (a tenth, 300 ms), and stops its command then (the command ends at
// SIGTERM); a `sem run` SIGKILLed leaves its supervisor to kill the
// command, and its units live on until their TTL or a waiter of its host
// sees the command gone. A unit key has one live value at a time, so two
// commands' times on one unit never overlap, and the later one's unit was
// created after the earlier's was gone, after all of the earlier permit's
// creates: its fence (its highest create's revision) is larger. Commands
// whose `sem run` was SIGSTOPped while they ran are left out by the
// caller (wasPaused): a paused holder cannot stop its command, which goes
// on after the units expired; that is what fences are for (the checker
// refuses its writes once the next holder wrote, and checkPauses judges
// that it stops once resumed). No max units at once follows from the
// units being exclusive and below max; it is counted on its own, by
// weight, so that a permit whose units are not what it paid for shows.
func judgeSem(holds []*semHold, max int) (exclusion, over, bad []string) {
	byUnit := map[int][]*semHold{}
	byPermit := map[string]*semHold{}
	byFence := map[uint64]*semHold{}
	for _, hd := range holds {
		switch {
		case hd.fence == 0:
			bad = append(bad, fmt.Sprintf("sem: permit %s (%s) ran its command without a fence", hd.permit, hd.actor))
		case byFence[hd.fence] != nil && byFence[hd.fence].permit != hd.permit:
			bad = append(bad, fmt.Sprintf("sem: fence %d given to permit %s (%s) and to permit %s (%s)",
				hd.fence, byFence[hd.fence].permit, byFence[hd.fence].actor, hd.permit, hd.actor))
		}
		byFence[hd.fence] = hd
		switch prev := byPermit[hd.permit]; {
		case hd.permit == "":
			bad = append(bad, fmt.Sprintf("sem: %s ran its command without a permit id", hd.actor))
		case prev != nil:
			bad = append(bad, fmt.Sprintf("sem: permit %s ran two commands (%s and %s)", hd.permit, prev.actor, hd.actor))
		}
		byPermit[hd.permit] = hd
		units := slices.Clone(hd.units)
		slices.Sort(units)
		switch {
		case len(units) != hd.weight:
			bad = append(bad, fmt.Sprintf("sem: permit %s (%s) of weight %d holds units %v", hd.permit, hd.actor, hd.weight, hd.units))
		case len(units) > 0 && hd.index != units[0]:
			bad = append(bad, fmt.Sprintf("sem: permit %s (%s) has index %d, its units are %v", hd.permit, hd.actor, hd.index, hd.units))
		case len(slices.Compact(units)) != len(hd.units):
			bad = append(bad, fmt.Sprintf("sem: permit %s (%s) holds a unit twice: %v", hd.permit, hd.actor, hd.units))
		}
		for _, u := range slices.Compact(units) {
			if u < 0 || u >= max {
				bad = append(bad, fmt.Sprintf("sem: permit %s (%s) holds unit %d of a semaphore of %d", hd.permit, hd.actor, u, max))
				continue
			}
			byUnit[u] = append(byUnit[u], hd)
		}
	}

	// One unit at a time: in the order the commands started, each must
	// start after every earlier one ended, with a larger fence.
	units := make([]int, 0, len(byUnit))
	for u := range byUnit {
		units = append(units, u)
	}
	sort.Ints(units)
	for _, u := range units {
		hs := byUnit[u]
		sort.Slice(hs, func(i, j int) bool { return hs[i].start.Before(hs[j].start) })
		var latest *semHold // of those started so far, the one that ran longest
		for i, cur := range hs {
			if latest != nil && cur.start.Before(latest.last) {
				exclusion = append(exclusion, fmt.Sprintf("sem unit %d: permit %s (%s, fence %d) started %s before permit %s (%s, fence %d) stopped",
					u, cur.permit, cur.actor, cur.fence, latest.last.Sub(cur.start).Round(time.Millisecond), latest.permit, latest.actor, latest.fence))
			} else if i > 0 && cur.fence <= hs[i-1].fence {
				exclusion = append(exclusion, fmt.Sprintf("sem unit %d: permit %s (%s) was given fence %d after permit %s (%s) held it with fence %d",
					u, cur.permit, cur.actor, cur.fence, hs[i-1].permit, hs[i-1].actor, hs[i-1].fence))
			}
			if latest == nil || cur.last.After(latest.last) {
				latest = cur
			}
		}
	}

	// Every unit at once, by weight.
	type edge struct {
		at    time.Time
		delta int
		hd    *semHold
	}
	var edges []edge
	for _, hd := range holds {
		edges = append(edges, edge{hd.start, len(hd.units), hd}, edge{hd.last, -len(hd.units), hd})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta // one ends before the next starts
	})
	held := 0
	for _, e := range edges {
		held += e.delta
		if e.delta > 0 && held > max {
			over = append(over, fmt.Sprintf("sem: %d units held at once at %s (max %d), as permit %s (%s, weight %d) started",
				held, e.at.Format("15:04:05.000"), max, e.hd.permit, e.hd.actor, len(e.hd.units)))
		}
	}
	return exclusion, over, bad
}

// semholdMain is the command of the semaphore's holders (`sem run` runs
// it): for -hold it reports to the ledger every 50 ms what it holds (the
// ledger writes to the checker for each unit under $BATON_FENCE), then
// ends; at SIGTERM it reports its end and exits 143.
func semholdMain(args []string) int {
	fs := flag.NewFlagSet("semhold", flag.ContinueOnError)
	weight := fs.Int("weight", 0, "the weight its sem run asked for")
	hold := fs.Duration("hold", time.Second, "how long it holds the permit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// Signals first: a SIGTERM that comes as it starts must end it as such.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	q := url.Values{
		"run":    {procID()},
		"actor":  {os.Getenv("FAULT_ACTOR")},
		"permit": {os.Getenv("BATON_PERMIT")},
		"fence":  {os.Getenv("BATON_FENCE")},
		"units":  {os.Getenv("BATON_SEM_UNITS")},
		"index":  {os.Getenv("BATON_SEM_INDEX")},
		"weight": {strconv.Itoa(*weight)},
	}
	if q.Get("fence") == "" {
		q.Set("fence", "0") // run without a fence: the ledger counts it
	}
	ledger := os.Getenv("FAULT_SEM")
	client := &http.Client{Timeout: 2 * time.Second}
	event := func(kind string) {
		q.Set("event", kind)
		q.Set("at", strconv.FormatInt(time.Now().UnixNano(), 10))
		if resp, err := client.Post(ledger+"?"+q.Encode(), "", nil); err == nil {
			resp.Body.Close()
		}
	}
	event("start")
	end := time.After(*hold)
	for {
		event("write")
		select {
		case <-end:
			event("end")
			return 0
		case <-term:
			event("end")
			return 143
		case <-time.After(50 * time.Millisecond):
		}
	}
}
