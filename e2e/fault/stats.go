package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// stats counts what the run did and what went wrong.
type stats struct {
	mu         sync.Mutex
	ops        int
	byVerb     map[string]map[int]int // verb -> exit code -> count
	faults     map[string]int
	killed     map[string]int // server name -> SIGKILLs
	violations []string
	lost       []string
	stuck      []string
	recovery   []time.Duration // server kill -> first acknowledged session write
	leadGaps   []time.Duration // longest gap in a leader's accepted writes after a server kill
	sessionOK  []span          // acknowledged session writes

	isolationsChecked map[string]int // holders cut off whose successor acted, by verb
	roll              rollResult
	lin               linResult

	// The full disks: why the fault is skipped ("" if it runs), the window
	// open while a disk is full, and each one's outcome.
	diskSkipped string
	diskWin     *diskWindow
	disks       []diskResult
}

func newStats() *stats {
	return &stats{byVerb: map[string]map[int]int{}, faults: map[string]int{}, killed: map[string]int{}}
}

func (s *stats) op(verb string, r result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops++
	if s.byVerb[verb] == nil {
		s.byVerb[verb] = map[int]int{}
	}
	code := r.code
	if r.stuck {
		code = -2
		what := r.what
		if what == "" {
			what = verb
		}
		s.stuck = append(s.stuck, fmt.Sprintf("%s did not end within %s (started %s)", what, stuckAfter, r.start.Format(time.TimeOnly)))
	}
	s.byVerb[verb][code]++
	if w := s.diskWin; w != nil && isWrite(verb) && !r.start.Before(w.from) {
		switch r.code {
		case 0:
			w.acked++
		case 6:
			w.refused++
			if strings.Contains(r.stderr, "disk is full") || strings.Contains(r.stderr, "storage is full") {
				w.named++
			}
		}
	}
	if r.code == 0 && (verb == "join" || verb == "commit" || verb == "close" || verb == "lib-join" || verb == "lib-commit") {
		s.sessionOK = append(s.sessionOK, span{r.start, r.end})
	}
}

// openDiskWindow starts counting client writes: a disk fills now.
func (s *stats) openDiskWindow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.diskWin = &diskWindow{from: time.Now()}
}

// closeDiskWindow stops counting and returns the writes acknowledged and
// failed with exit 6 (and of those, the ones that said the disk is full).
func (s *stats) closeDiskWindow() (acked, refused, named int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.diskWin
	s.diskWin = nil
	if w == nil {
		return 0, 0, 0
	}
	return w.acked, w.refused, w.named
}

func (s *stats) diskDone(r diskResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disks = append(s.disks, r)
}

func (s *stats) fault(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[kind]++
}

func (s *stats) serverKilled(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killed[name]++
}

func (s *stats) violation(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

func (s *stats) lose(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost = append(s.lost, fmt.Sprintf(format, args...))
}

func (s *stats) stick(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stuck = append(s.stuck, fmt.Sprintf(format, args...))
}

// span is when an operation started and when it was answered.
type span struct{ start, end time.Time }

// firstWriteAfter is the time from t to the answer of the first
// acknowledged session write that started after t.
func (s *stats) firstWriteAfter(t time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best time.Time
	for _, w := range s.sessionOK {
		if w.start.After(t) && (best.IsZero() || w.end.Before(best)) {
			best = w.end
		}
	}
	if best.IsZero() {
		return 0, false
	}
	return best.Sub(t), true
}

// undecided names histories the checker could not decide in time: they
// fail the run, since a check that does not finish cannot fail.
func undecided(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d undecided", n)
}

func durations(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.Round(10*time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}

func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	med := ds[(len(ds)-1)/2]
	return fmt.Sprintf("median %s, max %s (n=%d)", med.Round(10*time.Millisecond), ds[len(ds)-1].Round(10*time.Millisecond), len(ds))
}

// queueCounts are the queue workload's outcome.
type queueCounts struct {
	done, exclusion, overCapacity, lost int
	// garbaged counts the tasks whose record the harness overwrote with
	// garbage that does not decode; removed, those whose garbage it removed
	// instead of putting the task back: not counted as lost if not done.
	// Those it put back must be done.
	garbaged, removed int
}

// report prints the figures, then the closing line last.
func (s *stats) report(w io.Writer, accepted, rejected int, checkerViolations []string, q queueCounts, sc semCounts, rc rateCounts, rv resvCounts, f flowCounts, elapsed time.Duration) (ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	violations := append(slices.Clone(s.violations), checkerViolations...)
	fmt.Fprintf(w, "\n## fault run (%s)\n\n", elapsed.Round(time.Second))
	var verbs []string
	for v := range s.byVerb {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	fmt.Fprintln(w, "operations by verb and exit code (-2: stuck, killed after 30s):")
	for _, v := range verbs {
		var codes []int
		for c := range s.byVerb[v] {
			codes = append(codes, c)
		}
		sort.Ints(codes)
		var parts []string
		for _, c := range codes {
			parts = append(parts, fmt.Sprintf("%d:%d", c, s.byVerb[v][c]))
		}
		fmt.Fprintf(w, "  %-12s %s\n", v, strings.Join(parts, " "))
	}
	var kinds []string
	faults := 0
	for k, n := range s.faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		faults += n
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "faults: %s\n", strings.Join(kinds, ", "))
	var names []string
	for n, k := range s.killed {
		names = append(names, fmt.Sprintf("%s %d", n, k))
	}
	sort.Strings(names)
	fmt.Fprintf(w, "servers killed: %s\n", strings.Join(names, ", "))
	fmt.Fprintf(w, "protected resource: %d writes accepted, %d rejected for a stale fence\n", accepted, rejected)
	fmt.Fprintf(w, "server killed -> first acknowledged session write: %s\n", quantiles(s.recovery))
	fmt.Fprintf(w, "server killed -> longest gap in a leader's accepted writes (30 s window): %s\n", quantiles(s.leadGaps))
	fmt.Fprintf(w, "holders cut off from the servers whose successor then acted, each checked to have stopped before the successor's first accepted write: %d lead, %d run\n",
		s.isolationsChecked["lead"], s.isolationsChecked["run"])
	r := s.roll
	fmt.Fprintf(w, "rolling restart (SIGTERM, one server at a time, %d holders at TTL %s): %d restarts in %s, slowest exit %s, %d unclean; longest write pause %s (per restart: %s; goal <= 1s)\n",
		r.holders, rollTTL, r.restarts, r.took.Round(100*time.Millisecond), r.slowestExit.Round(10*time.Millisecond), r.unclean, r.pause.Round(10*time.Millisecond), durations(r.pauses))
	for _, l := range r.lost {
		fmt.Fprintf(w, "LOST (rolling restart): %s\n", l)
	}
	fmt.Fprintf(w, "semaphore %s (max %d, TTL %s, %d sem run actors of weight 1 and 2): %d commands given a permit, %d of them ended by themselves; %d left out of the exclusion check (their sem run was paused while they ran)\n",
		semName, semMax, semTTL, semActors, sc.served, sc.ended, sc.paused)
	fmt.Fprintf(w, "rate limiter %s (%d/%s): %d admissions in %d revisions seen by its watch (%d watches), %d acknowledged to takers, %d refused; at most %d in any %s; %d acknowledged admissions the watch missed (each counted in the windows that hold its whole call)\n",
		rateName, rateMax, ratePeriod, rc.admitted, rc.revisions, rc.watches, rc.acked, rc.refused, rc.worst, ratePeriod, rc.unplaced)
	fmt.Fprintf(w, "path reservations in space %s (TTL %s, %d reserve run actors over a tree of %d paths): %d commands given a reservation (%d shared), %d of them ended by themselves; %d left out of the clash check (their reserve run was paused while they ran)\n",
		resvSpace, resvTTL, resvActors, len(resvTree()), rv.served, rv.shared, rv.ended, rv.paused)
	f.report(w)
	l := s.lin
	fmt.Fprintf(w, "linearizability: %d KV operations (%d of unknown outcome) in %d histories: %d linearizable, %d not, %d too long to check within %s; %d reads answered while a server was cut off from the majority left out, %d of them stale (adr/0015), and %d creates refused then taken as of unknown outcome (adr/0026)\n",
		l.Ops, l.Unknown, l.Histories, l.Linearizable, l.NotLinearizable, l.TimedOut, l.Timeout.Round(time.Second), l.Exempt, l.Stale, l.Refused)
	for _, f := range l.Failures {
		fmt.Fprintf(w, "NOT LINEARIZABLE: %s\n", f)
	}
	for _, v := range violations {
		fmt.Fprintf(w, "VIOLATION: %s\n", v)
	}
	for _, l := range s.lost {
		fmt.Fprintf(w, "LOST: %s\n", l)
	}
	for _, st := range s.stuck {
		fmt.Fprintf(w, "STUCK: %s\n", st)
	}
	diskProblems := 0
	for _, d := range s.disks {
		fmt.Fprintf(w, "full disk: %s\n", d)
		for _, p := range d.problems {
			fmt.Fprintf(w, "FULL DISK: %s\n", p)
		}
		diskProblems += len(d.problems)
	}
	semViolations := sc.exclusion + sc.overMax + sc.badPermit
	fmt.Fprintf(w, "fault: %d ops, %d faults, %d exclusion violations, %d acknowledged sessions lost, %d stuck operations, %d histories linearizable, %d not%s; queue: %d tasks done, %d key exclusion violations, %d over capacity, %d acknowledged tasks lost; %s, %d task records unreadable (%d put back, %d removed); %s; rolling restart: %d holders lost, longest write pause %s; %s; %s; %s; %s\n",
		s.ops, faults, len(violations)-q.exclusion-q.overCapacity-semViolations-len(rc.violations)-f.violations()-rv.violations(), len(s.lost)-q.lost-len(rc.losses), len(s.stuck), l.Linearizable, l.NotLinearizable, undecided(l.TimedOut), q.done, q.exclusion, q.overCapacity, q.lost,
		queueGarbage(s.faults), q.garbaged, q.garbaged-q.removed, q.removed, diskVerdict(s.diskSkipped, s.disks), len(r.lost), r.pause.Round(10*time.Millisecond),
		sc.verdict(), rc.verdict(), f.verdict(), rv.verdict())
	return len(violations) == 0 && len(s.lost) == 0 && len(s.stuck) == 0 && len(r.lost) == 0 && l.NotLinearizable == 0 && l.TimedOut == 0 && diskProblems == 0
}

// queueRecords are the kinds of the queue's records that garbage hits
// (garbage_queue_<kind>_<how>), in the order the verdict names them.
var queueRecords = []string{"config", "token", "task", "lock", "worker", "inbox"}

// queueGarbage sums the garbage written over the queue's records by the
// kind of record: "queue records garbaged: N (config a, token b, ...)".
func queueGarbage(faults map[string]int) string {
	by := map[string]int{}
	total := 0
	for k, n := range faults {
		rest, ok := strings.CutPrefix(k, "garbage_queue_")
		if !ok {
			continue
		}
		kind, _, _ := strings.Cut(rest, "_")
		by[kind] += n
		total += n
	}
	var parts []string
	for _, kind := range queueRecords {
		name := kind
		if kind == "lock" {
			name = "key lock"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, by[kind]))
	}
	return fmt.Sprintf("queue records garbaged: %d (%s)", total, strings.Join(parts, ", "))
}

// verdict is the semaphore's part of the closing line.
func (sc semCounts) verdict() string {
	return fmt.Sprintf("sem: %d permits served, %d unit exclusion violations, %d over max, %d bad permits", sc.served, sc.exclusion, sc.overMax, sc.badPermit)
}

// verdict is the rate limiter's part of the closing line. Besides the
// windows over the limit and the acknowledged takes lost, takes dropped
// from the record while in their period and any other violation it found
// (a take at two times, a record that does not decode) count as problems.
func (rc rateCounts) verdict() string {
	other := len(rc.violations) - rc.over - rc.dropped
	return fmt.Sprintf("rate: %d admitted, %d refused, at most %d in %s (limit %d), %d windows over limit, %d takes dropped, %d other problems, %d acknowledged takes lost",
		rc.admitted, rc.refused, rc.worst, ratePeriod, rateMax, rc.over, rc.dropped, other, rc.lost)
}
