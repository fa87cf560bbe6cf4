package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
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
