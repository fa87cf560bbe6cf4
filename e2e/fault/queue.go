package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The queue workload: a queue on the cluster, tasks added through the CLI
// by adders on every host, worked by `baton queue work` daemons (which the
// client faults kill and pause like run and lead).
var (
	queueName      = "fq"
	queueKeys      = []string{"q1", "q2", "q3", "q4", "q5", "q6"}
	queueMaxActive = 3
	queueTTL       = 4 * time.Second
	queueAdders    = 2
)

// queueChecker records the tasks' commands: when each started and ended, on
// which key, under which fence, for which worker (the baton process), so
// that key exclusion and capacity can be judged over time, and which adds
// were acknowledged.
type queueChecker struct {
	mu    sync.Mutex
	runs  map[string]*taskRun // by the command's procID, never its pid alone
	added map[string]bool     // acknowledged task ids
	// recent are acknowledged task ids, the latest last (the garbage's
	// targets); hit are the tasks whose record the harness overwrote with
	// garbage that does not decode, gone those whose garbage it then
	// removed rather than put the task back.
	recent []string
	hit    map[string]bool
	gone   map[string]bool
	// delayed are the acknowledged adds of tasks that wait for a time.
	delayed []delayedAdd
}

type taskRun struct {
	key, task, actor string
	fence            uint64
	start, last      time.Time
	ended            bool
}

func newQueueChecker() *queueChecker {
	return &queueChecker{runs: map[string]*taskRun{}, added: map[string]bool{}, hit: map[string]bool{}, gone: map[string]bool{}}
}

// ServeHTTP takes POST /qevent?event=start|write|end&run=R&key=K&task=T&fence=F&actor=A&at=NS,
// where R is the command's procID and NS when the command did it (Unix
// nanoseconds; every process here shares the machine's clock). The time
// is the command's, not the request's arrival: a host cut off from the
// network delivers a request its command sent before it ended, the TCP
// stack retrying it, once the link is back, seconds after that command
// ended, and the run must not seem to have gone on until then.
func (c *queueChecker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fence, err := strconv.ParseUint(q.Get("fence"), 10, 64)
	if err != nil || q.Get("run") == "" {
		http.Error(w, "want run and fence", http.StatusBadRequest)
		return
	}
	ns, err := strconv.ParseInt(q.Get("at"), 10, 64)
	if err != nil || ns <= 0 {
		http.Error(w, "want at, the event's time in Unix nanoseconds", http.StatusBadRequest)
		return
	}
	c.event(q.Get("run"), q.Get("event"), q.Get("key"), q.Get("task"), q.Get("actor"), fence, time.Unix(0, ns))
	w.WriteHeader(http.StatusOK)
}

// event records what the command run (a procID) reported at at: its first
// event starts the run, each later one moves its last sign of life.
func (c *queueChecker) event(run, kind, key, task, actor string, fence uint64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tr := c.runs[run]
	if tr == nil {
		tr = &taskRun{key: key, task: task, actor: actor, fence: fence, start: at, last: at}
		c.runs[run] = tr
	}
	// Reports may arrive out of their order (a late one retried).
	if at.Before(tr.start) {
		tr.start = at
	}
	if at.After(tr.last) {
		tr.last = at
	}
	if kind == "end" {
		tr.ended = true
	}
}

func (c *queueChecker) acked(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.added[id] = true
	c.recent = append(c.recent, id)
}

// recentAcked picks one of the last 20 acknowledged tasks with intn.
func (c *queueChecker) recentAcked(intn func(int) int) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.recent) == 0 {
		return "", false
	}
	last := c.recent[max(0, len(c.recent)-20):]
	return last[intn(len(last))], true
}

// garbaged records that the harness overwrote task id's record with
// garbage: held, never run, until it is put back.
func (c *queueChecker) garbaged(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hit[id] = true
}

// removed records that the harness removed the garbage over task id's
// record instead of putting the task back: the task is gone.
func (c *queueChecker) removed(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone[id] = true
}

// queueAdder adds tasks for random keys through the CLI, each working for
// 200 ms to 1.5 s; an add that exits 0 is acknowledged. One task in four
// waits 1 to 12 s (--in), one in eight until a whole second from 3 s ago
// to 12 s ahead (--at; qdelay.go).
func (h *harness) queueAdder(ctx context.Context, i int) {
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("a%d-%d", i, n)
		key := queueKeys[h.intn(len(queueKeys))]
		work := h.between(200*time.Millisecond, 1500*time.Millisecond)
		args := []string{"queue", "add", queueName, "--key", key, "--id", id,
			"--payload", strconv.Itoa(int(work / time.Millisecond)), "--json"}
		var d delayedAdd
		switch k := h.intn(8); {
		case k < 2:
			d.in = h.between(time.Second, 12*time.Second)
			args = append(args, "--in", d.in.String())
		case k == 2:
			d.at = time.Now().Add(h.between(-3*time.Second, 12*time.Second)).Truncate(time.Second).UTC()
			args = append(args, "--at", d.at.Format(time.RFC3339))
		}
		r := h.cli(hosts[h.intn(len(hosts))], args...)
		if r.code == 0 {
			h.qchk.acked(id)
			if d.in > 0 || !d.at.IsZero() {
				var doc struct {
					Revision uint64 `json:"revision"`
				}
				_ = json.Unmarshal([]byte(r.stdout), &doc)
				d.id, d.rev, d.from, d.to = id, doc.Revision, r.start, r.end
				h.qchk.delay(d)
			}
		}
		sleep(ctx, h.between(500*time.Millisecond, 2*time.Second))
	}
}

// delay records an acknowledged add of a task that waits for a time.
func (c *queueChecker) delay(d delayedAdd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delayed = append(c.delayed, d)
}

// queueWorker runs `baton queue work` on host again and again, each for a
// while, then drains it (SIGTERM).
func (h *harness) queueWorker(ctx context.Context, host string, j int) {
	for n := 0; ctx.Err() == nil; n++ {
		actor := fmt.Sprintf("qw-%s-%d-%d", host, j, n)
		d, err := h.spawn(actor, host, queueTTL, "queue", "work", queueName, "--concurrency", "2", "--grace", "2s",
			"--", h.self, "qtask")
		if err != nil {
			h.stats.stick("start queue work %s: %v", actor, err)
			return
		}
		h.hold(ctx, d, h.between(10*time.Second, 30*time.Second))
		sleep(ctx, h.between(200*time.Millisecond, time.Second))
	}
}

// createQueue makes the run's queue (its bucket is on three replicas, made
// by baton up).
func (h *harness) createQueue() error {
	r := h.cli("h1", "queue", "create", queueName, "--max-active", strconv.Itoa(queueMaxActive), "--ttl", queueTTL.String(),
		"--max-attempts", "1000", "--backoff", "0s", "--timeout", "1m")
	if r.code != 0 {
		return fmt.Errorf("queue create: exit %d: %s", r.code, r.stderr)
	}
	return nil
}

// minDrain is the least time the drain's worker runs: the schedule's
// ticks are judged exactly while it does (qsched.go), with no faults.
const minDrain = 30 * time.Second

// drainQueue runs one worker, with no faults, until every acknowledged task
// has ended (and for minDrain at least), then stops it: what the workload
// left is worked off. It returns the time it ran, with no faults.
func (h *harness) drainQueue(ctx context.Context) (quiet span) {
	d, err := h.spawn("qw-drain", hosts[0], queueTTL, "queue", "work", queueName, "--concurrency", "3", "--grace", "2s",
		"--", h.self, "qtask")
	if err != nil {
		h.stats.stick("start the draining worker: %v", err)
		return span{}
	}
	quiet.start = time.Now()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if states, err := h.queueStates(); err == nil && h.allEnded(states) && time.Since(quiet.start) >= minDrain {
			break
		}
		sleep(ctx, time.Second)
	}
	quiet.end = time.Now()
	if !d.finish() {
		h.stats.stick("the draining worker did not end within %s of SIGTERM", stuckAfter)
	}
	h.untrack(d)
	return quiet
}

// queueStates reads every task's state with `baton queue status --tasks`.
func (h *harness) queueStates() (map[string]string, error) {
	r := h.cli("h1", "queue", "status", queueName, "--tasks", "--json")
	if r.code != 0 {
		return nil, fmt.Errorf("queue status: exit %d: %s", r.code, r.stderr)
	}
	var doc struct {
		Tasks []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range doc.Tasks {
		out[t.ID] = t.State
	}
	return out, nil
}

func (h *harness) allEnded(states map[string]string) bool {
	h.qchk.mu.Lock()
	defer h.qchk.mu.Unlock()
	for id := range h.qchk.added {
		s := states[id]
		if s == "" && h.qchk.gone[id] {
			continue // garbaged, then removed by the harness
		}
		if s != "done" && s != "dead" && s != "cancelled" {
			return false
		}
	}
	return true
}

// checkQueue judges the queue workload once it is drained: every
// acknowledged task done, but those whose record the harness garbaged and
// removed (counted apart); no two commands of one key at once and no more than
// max_active at once, over the time each ran (from its start to its end or
// last write), leaving out commands whose worker was paused then.
func (h *harness) checkQueue() (q queueCounts) {
	states, err := h.queueStates()
	if err != nil {
		h.stats.stick("read the queue's tasks: %v", err)
	}
	h.qchk.mu.Lock()
	defer h.qchk.mu.Unlock()
	q.garbaged, q.removed = len(h.qchk.hit), len(h.qchk.gone)
	for id := range h.qchk.added {
		switch {
		case states[id] == "done":
			q.done++
		case h.qchk.gone[id]:
		default:
			q.lost++
			h.stats.lose("queue task %s was acknowledged and is %q at the end", id, states[id])
		}
	}
	h.mu.Lock()
	paused := map[string][]pauseCheck{}
	for _, p := range h.pauses {
		paused[p.actor] = append(paused[p.actor], p)
	}
	h.mu.Unlock()
	var runs []*taskRun
	for _, run := range h.qchk.runs {
		if !wasPaused(paused[run.actor], run.start, run.last) {
			runs = append(runs, run)
		}
	}
	exclusions, over := judgeRuns(runs, queueMaxActive)
	for _, v := range over {
		h.stats.violation("%s", v)
	}
	for _, v := range exclusions {
		h.stats.violation("%s", v)
	}
	q.exclusion, q.overCapacity = len(exclusions), len(over)
	return q
}

// judgeRuns finds, over the time each run ran (from its start to its last
// event), the moments more than maxActive ran at once and the runs of one
// key that overlapped, each described as a violation.
func judgeRuns(runs []*taskRun, maxActive int) (exclusion, overCapacity []string) {
	type edge struct {
		at    time.Time
		delta int
		run   *taskRun
	}
	var edges []edge
	byKey := map[string][]*taskRun{}
	for _, run := range runs {
		edges = append(edges, edge{run.start, 1, run}, edge{run.last, -1, run})
		byKey[run.key] = append(byKey[run.key], run)
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta
	})
	running := 0
	for _, e := range edges {
		running += e.delta
		if running > maxActive {
			overCapacity = append(overCapacity, fmt.Sprintf("queue: %d commands at once at %s (max_active %d), among them task %s under fence %d",
				running, e.at.Format("15:04:05.000"), maxActive, e.run.task, e.run.fence))
		}
	}
	keys := make([]string, 0, len(byKey))
	for key := range byKey {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		runs := byKey[key]
		sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
		for i := 1; i < len(runs); i++ {
			if prev, cur := runs[i-1], runs[i]; cur.start.Before(prev.last) {
				exclusion = append(exclusion, fmt.Sprintf("queue key %s: task %s (fence %d) started %s before task %s (fence %d) stopped",
					key, cur.task, cur.fence, prev.last.Sub(cur.start).Round(time.Millisecond), prev.task, prev.fence))
			}
		}
	}
	return exclusion, overCapacity
}

// wasPaused reports whether a command that ran from start to last had its
// baton (a queue worker, a sem run) SIGSTOPped meanwhile: a paused baton
// cannot stop its command, which may then overlap the next holder's (the
// fence refuses its writes; checkPauses judges that it stops once resumed).
func wasPaused(ps []pauseCheck, start, last time.Time) bool {
	for _, p := range ps {
		if !start.After(p.resumed.Add(stopAfterResume)) && !last.Before(p.paused) {
			return true
		}
	}
	return false
}

// qtaskMain is the command of the queue workers: it works for the number of
// milliseconds its payload says, writing to the checker under
// $BATON_FENCE every 50 ms for key queue/$BATON_KEY, and reports its start,
// its writes and its end to the queue checker.
func qtaskMain() int {
	url, qurl, actor := os.Getenv("FAULT_CHECKER"), os.Getenv("FAULT_QUEUE"), os.Getenv("FAULT_ACTOR")
	key, task, fence := os.Getenv("BATON_KEY"), os.Getenv("BATON_TASK"), os.Getenv("BATON_FENCE")
	payload, _ := io.ReadAll(os.Stdin)
	ms, err := strconv.Atoi(strings.TrimSpace(string(payload)))
	if err != nil || key == "" || fence == "" {
		fmt.Fprintln(os.Stderr, "qtask: want a payload of milliseconds, BATON_KEY and BATON_FENCE")
		return 2
	}
	run := procID()
	client := &http.Client{Timeout: 2 * time.Second}
	post := func(u string) {
		if resp, err := client.Post(u, "", nil); err == nil {
			resp.Body.Close()
		}
	}
	event := func(kind string) {
		at := strconv.FormatInt(time.Now().UnixNano(), 10)
		post(qurl + "?event=" + kind + "&run=" + run + "&key=" + key + "&task=" + task + "&fence=" + fence + "&actor=" + actor + "&at=" + at)
	}
	event("start")
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	end := time.After(time.Duration(ms) * time.Millisecond)
	for {
		post(url + "?key=queue/" + key + "&fence=" + fence + "&writer=" + actor + "/" + run)
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
