package main

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
)

// The queue watch: one watch of the queues bucket, kept from before the
// queues are made until the drain is over, that records every revision it
// brings of the records the schedule, delay and rate checks judge: the
// tasks of both queues, the schedule and the rate-limited queue's rate
// record. A watch that ends is started again; it then brings each key's
// latest revision and goes on from there. The bucket keeps one revision
// per key, so a revision overwritten while no watch ran is never seen:
// each check says how it lives with that.

// qrev is one revision of a queue record, as the watch (or the final
// read) brought it: its key, revision and server time, and what it holds.
type qrev struct {
	key  string
	rev  uint64
	at   time.Time
	live bool
	bad  bool     // a live value that does not decode
	task *taskRev // for a task record
	rate *rateRev // for a rate record
}

// taskRev is what the checks read of one revision of a task record.
type taskRev struct {
	id, key, schedule, state string
	attempts                 int
	seq                      uint64 // the revision that added the task
	claimed                  uint64 // the revision that started its current or last attempt (0: none)
	runAt                    time.Time
	delay                    time.Duration
}

// rateRev is one revision of a queue's rate record (queue/rate.go's
// rateLog): the starts its own revision admitted (last, at the revision's
// server time) and the earlier admissions still within the period.
type rateRev struct {
	log  []rateWin
	last int
}

// rateWin is n starts admitted by a write at server time at.
type rateWin struct {
	at time.Time
	n  int
}

// qwatchLedger holds the revisions seen, by key.
type qwatchLedger struct {
	mu      sync.Mutex
	byKey   map[string][]qrev // each key's revisions, in revision order
	times   []revTime         // every revision seen, in revision order
	watches int
}

// revTime is a revision and its server time.
type revTime struct {
	rev uint64
	at  time.Time
}

func newQwatchLedger() *qwatchLedger { return &qwatchLedger{byKey: map[string][]qrev{}} }

// watchPatterns are the keys the queue watch follows.
func watchPatterns() []string {
	return []string{queueName + ".task.>", queueName + ".schedule.>", rateQueue + ".task.>", rateQueue + ".rate", rateQueue + ".krate.>"}
}

// qwatch follows the queue records of watchPatterns until ctx is done,
// recording each revision; a watch that ends is started again.
func (h *harness) qwatch(ctx context.Context) {
	c, err := kv.Connect(ctx, kv.WithURL(h.cl.urls()), kv.WithTimeout(3*time.Second), kv.WithName("batonfault queue watch"))
	if err != nil {
		h.stats.stick("queue watch: %v", err)
		return
	}
	defer c.Close()
	b := c.Bucket(queuesBucket)
	for ctx.Err() == nil {
		w, err := b.WatchPatterns(ctx, watchPatterns())
		if err != nil {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		h.qw.mu.Lock()
		h.qw.watches++
		h.qw.mu.Unlock()
		for e := range w.Updates() {
			if e != nil {
				h.qw.observe(decodeQrev(*e))
			}
		}
		w.Stop()
	}
}

// finalRead reads the latest revision of every key the watch follows and
// records it as the watch would: what the checks judge ends with it.
func (h *harness) finalRead(ctx context.Context) error {
	c, err := kv.Connect(ctx, kv.WithURL(h.cl.urls()), kv.WithTimeout(5*time.Second), kv.WithName("batonfault queue read"))
	if err != nil {
		return err
	}
	defer c.Close()
	b := c.Bucket(queuesBucket)
	for _, p := range watchPatterns() {
		var es []kv.Entry
		for try := 0; ; try++ {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			es, err = b.Entries(rctx, p)
			cancel()
			if err == nil || try == 5 {
				break
			}
			sleep(ctx, time.Second)
		}
		if err != nil {
			return err
		}
		for _, e := range es {
			h.qw.observe(decodeQrev(e))
		}
	}
	return nil
}

// decodeQrev reads what the checks need of an entry of the queues bucket.
func decodeQrev(e kv.Entry) qrev {
	r := qrev{key: e.Key, rev: e.Revision, at: e.Created, live: e.Live()}
	if !r.live {
		return r
	}
	switch {
	case strings.HasSuffix(e.Key, ".rate"), strings.Contains(e.Key, ".krate."):
		var doc struct {
			Log []struct {
				At time.Time `json:"at"`
				N  int       `json:"n"`
			} `json:"log"`
			Last int `json:"last"`
		}
		if err := json.Unmarshal(e.Value, &doc); err != nil {
			r.bad = true
			return r
		}
		r.rate = &rateRev{last: doc.Last}
		for _, w := range doc.Log {
			r.rate.log = append(r.rate.log, rateWin{w.At, w.N})
		}
	case strings.Contains(e.Key, ".task."):
		t, err := queue.TaskOf(e)
		if err != nil || t == nil {
			r.bad = true
			return r
		}
		tr := &taskRev{id: t.ID, key: t.Key, schedule: t.Schedule, state: string(t.State), attempts: t.Attempts, seq: t.Seq,
			runAt: t.RunAt, delay: time.Duration(t.Delay)}
		switch {
		case t.Run != nil:
			tr.claimed = t.Run.Claimed
		case t.Result != nil:
			tr.claimed = t.Result.Claimed
		}
		r.task = tr
	}
	return r
}

// observe records r, once.
func (l *qwatchLedger) observe(r qrev) {
	l.mu.Lock()
	defer l.mu.Unlock()
	revs := l.byKey[r.key]
	i, found := slices.BinarySearchFunc(revs, r.rev, func(a qrev, rev uint64) int { return cmpU(a.rev, rev) })
	if found {
		return
	}
	l.byKey[r.key] = slices.Insert(revs, i, r)
	j, _ := slices.BinarySearchFunc(l.times, r.rev, func(a revTime, rev uint64) int { return cmpU(a.rev, rev) })
	l.times = slices.Insert(l.times, j, revTime{r.rev, r.at})
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// snapshot is a copy of what the ledger holds, for the checks.
func (l *qwatchLedger) snapshot() qview {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := qview{byKey: make(map[string][]qrev, len(l.byKey)), times: slices.Clone(l.times), watches: l.watches}
	for k, revs := range l.byKey {
		v.byKey[k] = slices.Clone(revs)
	}
	return v
}

// backlog counts the tasks of queue q whose latest revision seen is not
// final (pending, active, failed).
func (l *qwatchLedger) backlog(q string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	prefix := q + ".task."
	for k, revs := range l.byKey {
		if !strings.HasPrefix(k, prefix) || len(revs) == 0 {
			continue
		}
		last := revs[len(revs)-1]
		if last.live && last.task != nil && !queue.State(last.task.state).Final() {
			n++
		}
	}
	return n
}

// qview is the revisions seen, by key, and every revision's server time.
type qview struct {
	byKey   map[string][]qrev
	times   []revTime
	watches int
}

// timeOf is revision rev's server time, if the view holds it.
func (v qview) timeOf(rev uint64) (time.Time, bool) {
	i, found := slices.BinarySearchFunc(v.times, rev, func(a revTime, rev uint64) int { return cmpU(a.rev, rev) })
	if !found {
		return time.Time{}, false
	}
	return v.times[i].at, true
}

// bounds are the server times revision rev surely lies within: the time
// of the latest revision seen before it and of the first seen after it
// (each zero when there is none); exactly its own when it was seen. A
// stream stamps its messages in order (one clock here, and a new leader's
// first write comes after its predecessor's last), so revisions' times
// grow with their numbers.
func (v qview) bounds(rev uint64) (lo, hi time.Time) {
	i := sort.Search(len(v.times), func(i int) bool { return v.times[i].rev >= rev })
	if i < len(v.times) && v.times[i].rev == rev {
		return v.times[i].at, v.times[i].at
	}
	if i > 0 {
		lo = v.times[i-1].at
	}
	if i < len(v.times) {
		hi = v.times[i].at
	}
	return lo, hi
}

// tasks is the revisions of queue q's task records, by task id.
func (v qview) tasks(q string) map[string][]qrev { return v.under(q + ".task.") }

// keyRates are the revisions of queue q's keys' rate records, by key.
func (v qview) keyRates(q string) map[string][]qrev { return v.under(q + ".krate.") }

// under is the revisions of the records whose keys start with prefix, by
// the rest of their key.
func (v qview) under(prefix string) map[string][]qrev {
	out := map[string][]qrev{}
	for k, revs := range v.byKey {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = revs
		}
	}
	return out
}
