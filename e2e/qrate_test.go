package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// A rate limit of 20 a second across three `queue work` processes on two
// host ids, for 10 s with more tasks than it allows: no one-second window,
// sliding, by the server's times of the rate record's writes, holds more
// than 20 starts, and the total is within 5% of 200.
func TestQueue_RateLimitHoldsAcrossWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s")
	}
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	a.must("queue", "create", "rl", "--rate", "20/1s")
	if cfg := jsonOf(t, a.must("queue", "config", "rl", "--json").stdout); fmt.Sprint(cfg["rate"]) != "map[max:20 period:1s]" {
		t.Fatalf("config's rate: %v", cfg["rate"])
	}
	a.expect(2, []string{"queue", "config", "rl", "--rate", "20/soon"}, "--rate")
	qs := w.queues(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tasks := make([]queue.NewTask, 400)
	for i := range tasks {
		tasks[i] = queue.NewTask{Key: fmt.Sprintf("k%d", i%100)}
	}
	if _, err := qs.AddBatch(ctx, "rl", tasks); err != nil {
		t.Fatal(err)
	}
	watch, err := qs.Bucket().Watch(ctx, "rl.rate")
	if err != nil {
		t.Fatal(err)
	}
	type admission struct {
		at time.Time
		n  int
	}
	var as []admission
	for i, h := range []*host{a, b, a} {
		h.startWorker(t, "rl", "--concurrency", fmt.Sprint(2+i), "--", "true")
	}
	var first time.Time
	for end := time.Now().Add(30 * time.Second); ; {
		select {
		case e := <-watch.Updates():
			if e == nil || !e.Live() {
				continue
			}
			var rec struct {
				Last int `json:"last"`
			}
			if json.Unmarshal(e.Value, &rec) != nil || rec.Last == 0 {
				continue
			}
			if first.IsZero() {
				first = e.Created
			}
			if e.Created.Before(first.Add(10 * time.Second)) {
				as = append(as, admission{e.Created, rec.Last})
				continue
			}
		case <-time.After(time.Until(end)):
			t.Fatalf("the workers admitted starts for %d windows in 30 s", len(as))
		}
		if !first.IsZero() && time.Since(first) > 10*time.Second {
			break
		}
	}
	sort.Slice(as, func(i, j int) bool { return as[i].at.Before(as[j].at) })
	total := 0
	for i, x := range as {
		total += x.n
		n := 0
		for _, y := range as[:i+1] {
			if y.at.After(x.at.Add(-time.Second)) {
				n += y.n
			}
		}
		if n > 20 {
			t.Errorf("%d starts in the second ending %s", n, x.at.Format("15:04:05.000"))
		}
	}
	if total < 190 || total > 200 {
		t.Errorf("%d starts in 10 s, want 200 within 5%%", total)
	}
	done := waitDone(t, qs, "rl", total-20, 20*time.Second)
	t.Logf("%d starts admitted in 10 s by %d writes; %d tasks done", total, len(as), done[queue.StateDone])
}

// A key rate from the CLI: every key 4 a second, one key's own 8 a second,
// two `queue work` processes on two host ids for 3 s: no key's sliding
// second holds more than its limit, by the server's times of its record's
// writes, and each key uses its own limit.
func TestQueue_KeyRateHoldsPerKey(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	a.must("queue", "create", "kr", "--key-rate", "4/1s", "--per-key", "2")
	a.expect(3, []string{"queue", "create", "kr", "--key-rate", "5/1s", "--per-key", "2"}, "")
	if ls := jsonOf(t, a.must("queue", "key", "set", "kr", "vip", "--rate", "8/1s", "--json").stdout); fmt.Sprint(ls["rate"]) != "map[max:8 period:1s]" {
		t.Fatalf("key set --json: rate %v, want it as in the record", ls["rate"])
	}
	a.expect(2, []string{"queue", "key", "set", "kr", "vip", "--rate", "8/soon"}, "--rate")
	a.expect(2, []string{"queue", "key", "set", "kr", "vip", "--weight", "0"}, "--weight")
	if out := a.must("queue", "key", "set", "kr", "vip", "--rate", "8/1s").stdout; !strings.Contains(out, "rate 8/1s") {
		t.Fatalf("key set says %q", out)
	}
	if out := a.must("queue", "key", "set", "kr", "other", "--per-key", "1").stdout; !strings.Contains(out, "rate 4/1s (the queue's key_rate)") {
		t.Fatalf("key set says %q", out)
	}
	if ls := a.must("queue", "key", "ls", "kr").stdout; !regexp.MustCompile(`(?m)^vip\s+queue's\s+1\s+8/1s\s`).MatchString(ls) {
		t.Fatalf("key ls:\n%s", ls)
	}
	if st := a.must("queue", "status", "kr").stdout; !strings.Contains(st, "key_rate  4/1s: at most 4 starts of each key in any 1s") || !strings.Contains(st, "key rate  vip: 8/1s, at most 8 starts in any 1s") {
		t.Fatalf("status:\n%s", st)
	}
	qs := w.queues(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tasks []queue.NewTask
	for i := range 120 {
		tasks = append(tasks, queue.NewTask{Key: []string{"vip", "a", "b"}[i%3]})
	}
	if _, err := qs.AddBatch(ctx, "kr", tasks); err != nil {
		t.Fatal(err)
	}
	watch, err := qs.Bucket().Watch(ctx, "kr.krate.>")
	if err != nil {
		t.Fatal(err)
	}
	type admission struct {
		at time.Time
		n  int
	}
	as := map[string][]admission{}
	a.startWorker(t, "kr", "--concurrency", "4", "--", "true")
	b.startWorker(t, "kr", "--concurrency", "4", "--", "true")
	var first time.Time
	for end := time.Now().Add(30 * time.Second); first.IsZero() || time.Since(first) < 3500*time.Millisecond; {
		select {
		case e := <-watch.Updates():
			if e == nil || !e.Live() {
				continue
			}
			var rec struct {
				Key  string `json:"key"`
				Last int    `json:"last"`
			}
			if json.Unmarshal(e.Value, &rec) != nil || rec.Last == 0 {
				continue
			}
			if first.IsZero() {
				first = e.Created
			}
			as[rec.Key] = append(as[rec.Key], admission{e.Created, rec.Last})
		case <-time.After(time.Until(end)):
			t.Fatal("no key's starts were admitted in 30 s")
		}
	}
	for key, limit := range map[string]int{"vip": 8, "a": 4, "b": 4} {
		xs := as[key]
		sort.Slice(xs, func(i, j int) bool { return xs[i].at.Before(xs[j].at) })
		inFirst3 := 0
		for i, x := range xs {
			if x.at.Before(first.Add(3 * time.Second)) {
				inFirst3 += x.n
			}
			n := 0
			for _, y := range xs[:i+1] {
				if y.at.After(x.at.Add(-time.Second)) {
					n += y.n
				}
			}
			if n > limit {
				t.Errorf("key %s: %d starts in the second ending %s, limit %d", key, n, x.at.Format("15:04:05.000"), limit)
			}
		}
		if inFirst3 < 3*limit-limit/2 || inFirst3 > 3*limit {
			t.Errorf("key %s: %d starts in the first 3 s, want about %d", key, inFirst3, 3*limit)
		}
		t.Logf("key %s: %d starts in the first 3 s by %d writes", key, inFirst3, len(xs))
	}
}
