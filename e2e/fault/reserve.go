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

	"github.com/batonhq/baton/reserve/pattern"
)

// The path reservation workload: `baton reserve run` daemons on every
// host reserve random overlapping patterns of a small tree in one space,
// a third of them shared, waiting in line; the client faults kill and
// pause them like the others. Each command reports to the reservation
// ledger what it holds, and an exclusive holder writes to the checker
// under its fence for every path of the tree it covers: the files it
// edits, which take a write only with a fence at least the largest seen.
var (
	resvSpace  = "fresv"
	resvTTL    = 3 * time.Second
	resvActors = 4
)

// resvTree is the tree the reservations are judged over: three top
// directories, two below each, two files in each of those.
func resvTree() []string {
	var paths []string
	for _, a := range []string{"a", "b", "c"} {
		paths = append(paths, a)
		for _, x := range []string{"x", "y"} {
			paths = append(paths, a+"/"+x)
			for _, f := range []string{"1.go", "2.md"} {
				paths = append(paths, a+"/"+x+"/"+f)
			}
		}
	}
	return paths
}

// resvPool is the patterns the actors draw from: files, directories and
// globs that overlap them and each other.
var resvPool = []string{"a/x/1.go", "a/y/2.md", "b/x", "c", "a/**", "**/1.go", "*/x/*.go", "b/?/2.md", "**/*.md", "c/*/1.go", "*/y"}

// resvHold is one command that `reserve run` started.
type resvHold struct {
	run, actor, id string
	fence          uint64
	shared         bool
	patterns       []string
	start, last    time.Time
	ended          bool
}

// resvLedger records the holders' reports (POST /revent) and passes an
// exclusive holder's writes on to the checker, under key fresv.<path> for
// every path of the tree its patterns cover.
type resvLedger struct {
	chk   *checker
	tree  []string
	mu    sync.Mutex
	holds map[string]*resvHold // by the command's procID
}

func newResvLedger(chk *checker) *resvLedger {
	return &resvLedger{chk: chk, tree: resvTree(), holds: map[string]*resvHold{}}
}

// covered are the paths of the tree the patterns cover (a pattern that
// does not parse covers none: the ledger counts it as bad).
func (l *resvLedger) covered(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		pat, err := pattern.Parse(p)
		if err != nil {
			continue
		}
		for _, path := range l.tree {
			if pat.Covers(path) && !slices.Contains(out, path) {
				out = append(out, path)
			}
		}
	}
	return out
}

// ServeHTTP takes POST /revent?event=start|write|end&run=R&actor=A&id=ID&fence=F&mode=x|s&patterns=P&at=NS,
// P the patterns space-separated and NS when the command did it (its own
// time, as the semaphore's ledger takes it).
func (l *resvLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fence, err1 := strconv.ParseUint(q.Get("fence"), 10, 64)
	ns, err2 := strconv.ParseInt(q.Get("at"), 10, 64)
	if err := firstErr(err1, err2); err != nil || q.Get("run") == "" || q.Get("actor") == "" || ns <= 0 {
		http.Error(w, "want run, actor, id, fence, mode, patterns and at", http.StatusBadRequest)
		return
	}
	h := resvHold{run: q.Get("run"), actor: q.Get("actor"), id: q.Get("id"), fence: fence, shared: q.Get("mode") == "s",
		patterns: strings.Fields(q.Get("patterns"))}
	at := time.Unix(0, ns)
	l.event(h, q.Get("event"), at)
	if q.Get("event") == "write" && !h.shared {
		writer := h.actor + "/" + h.run
		for _, path := range l.covered(h.patterns) {
			l.chk.write(resvSpace+"."+path, fence, writer, time.Time{})
		}
	}
	w.WriteHeader(http.StatusOK)
}

// event records what command h.run reported at at (reports may arrive out
// of order).
func (l *resvLedger) event(h resvHold, kind string, at time.Time) {
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
func (l *resvLedger) all() []*resvHold {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*resvHold, 0, len(l.holds))
	for _, h := range l.holds {
		c := *h
		out = append(out, &c)
	}
	return out
}

// resvActor runs `baton reserve run` on host again and again, with one to
// three patterns of the pool, a third of the time shared; its command
// holds them for 0.2 to 1.5 s and ends by itself. A run that waits 10 s in
// line gives up (exit 3); one still running after 20 s is ended.
func (h *harness) resvActor(ctx context.Context, host string, j int) {
	for n := 0; ctx.Err() == nil; n++ {
		actor := fmt.Sprintf("resv-%s-%d-%d", host, j, n)
		var pats []string
		for range 1 + h.intn(3) {
			if p := resvPool[h.intn(len(resvPool))]; !slices.Contains(pats, p) {
				pats = append(pats, p)
			}
		}
		mode := "x"
		args := []string{"reserve", "run", resvSpace}
		args = append(args, pats...)
		if h.intn(3) == 0 {
			mode = "s"
			args = append(args, "--shared")
		}
		hold := h.between(200*time.Millisecond, 1500*time.Millisecond)
		args = append(args, "--ttl", resvTTL.String(), "--grace", "2s", "--wait", "10s", "--agent", actor,
			"--", h.self, "resvhold", "-mode", mode, "-patterns", strings.Join(pats, " "), "-hold", hold.String())
		d, err := h.spawn(actor, host, resvTTL, args...)
		if err != nil {
			h.stats.stick("start reserve run %s: %v", actor, err)
			return
		}
		h.hold(ctx, d, 20*time.Second)
		sleep(ctx, h.between(50*time.Millisecond, 500*time.Millisecond))
	}
}

// resvCounts are the reservation workload's outcome.
type resvCounts struct {
	served, ended, shared int
	clashes, badFences    int
	paused                int // holds left out of the judgement: their baton was paused
}

// violations counts what the judge found.
func (rc resvCounts) violations() int { return rc.clashes + rc.badFences }

// verdict is the reservations' part of the closing line.
func (rc resvCounts) verdict() string {
	return fmt.Sprintf("reserve: %d reservations served (%d shared), %d clashes, %d bad fences", rc.served, rc.shared, rc.clashes, rc.badFences)
}

// checkResv judges the reservation ledger once every daemon has stopped.
func (h *harness) checkResv() resvCounts {
	h.mu.Lock()
	paused := map[string][]pauseCheck{}
	for _, p := range h.pauses {
		paused[p.actor] = append(paused[p.actor], p)
	}
	h.mu.Unlock()
	var rc resvCounts
	var holds []*resvHold
	for _, hd := range h.rled.all() {
		rc.served++
		if hd.ended {
			rc.ended++
		}
		if hd.shared {
			rc.shared++
		}
		if wasPaused(paused[hd.actor], hd.start, hd.last) {
			rc.paused++
			continue
		}
		holds = append(holds, hd)
	}
	clashes, bad := judgeResv(holds, h.rled.covered)
	for _, v := range slices.Concat(clashes, bad) {
		h.stats.violation("%s", v)
	}
	rc.clashes, rc.badFences = len(clashes), len(bad)
	return rc
}

// judgeResv judges the commands that held reservations, over the time
// each ran (from its first report to its last, by its own clock): no path
// of the tree covered by two of them at once unless both were shared, and
// of two that clash, the one that started later has the larger fence;
// every command has a fence. Two may share one: the write that frees a
// path grants every waiter it frees, and those clash with no one else
// then; the clash check holds their fences apart where it matters.
//
// Why it is sound, as the semaphore's judge is: a command's time lies
// within its reservation's life by the server's clock, from the write that
// granted it (before the command started) to the write that removed it:
// its release, after the command exited; a write by another decided past
// its expiry, which its holder's keepalive comes before by the stop budget
// and the clock margin, stopping the command; or a write on its host once
// its baton and its command are both gone. The record is one key: two
// clashing reservations are never both in a revision, and the later one
// was granted after the earlier was removed, by a later revision (its
// fence). Paused holders are left out by the caller, as for semaphores.
func judgeResv(holds []*resvHold, covered func([]string) []string) (clashes, bad []string) {
	paths := map[*resvHold][]string{}
	for _, hd := range holds {
		if hd.fence == 0 {
			bad = append(bad, fmt.Sprintf("reserve: %s (%s) ran its command without a fence", hd.id, hd.actor))
		}
		paths[hd] = covered(hd.patterns)
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].start.Before(holds[j].start) })
	for i, a := range holds {
		for _, b := range holds[i+1:] { // b started no earlier than a
			if a.shared && b.shared {
				continue
			}
			var common string
			for _, p := range paths[a] {
				if slices.Contains(paths[b], p) {
					common = p
					break
				}
			}
			switch {
			case common == "":
			case b.start.Before(a.last):
				clashes = append(clashes, fmt.Sprintf("reserve: %s (%s, fence %d, %s) started %s before %s (%s, fence %d, %s) stopped; both cover %s",
					b.id, b.actor, b.fence, strings.Join(b.patterns, " "), a.last.Sub(b.start).Round(time.Millisecond), a.id, a.actor, a.fence, strings.Join(a.patterns, " "), common))
			case b.fence <= a.fence:
				bad = append(bad, fmt.Sprintf("reserve: %s (%s) was granted fence %d after %s (%s), which clashes with it on %s, held fence %d",
					b.id, b.actor, b.fence, a.id, a.actor, common, a.fence))
			}
		}
	}
	return clashes, bad
}

// resvholdMain is the command of the reservations' holders (`reserve run`
// runs it): for -hold it reports to the ledger every 50 ms what it holds,
// then ends; at SIGTERM it reports its end and exits 143.
func resvholdMain(args []string) int {
	fs := flag.NewFlagSet("resvhold", flag.ContinueOnError)
	mode := fs.String("mode", "x", "x: exclusive, s: shared")
	patterns := fs.String("patterns", "", "the patterns its reserve run asked for, space-separated")
	hold := fs.Duration("hold", time.Second, "how long it holds them")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	q := url.Values{
		"run":      {procID()},
		"actor":    {os.Getenv("FAULT_ACTOR")},
		"id":       {os.Getenv("BATON_RESERVATION")},
		"fence":    {os.Getenv("BATON_FENCE")},
		"mode":     {*mode},
		"patterns": {*patterns},
	}
	if q.Get("fence") == "" {
		q.Set("fence", "0")
	}
	ledger := os.Getenv("FAULT_RESV")
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
