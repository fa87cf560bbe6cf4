package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// admission is a write of a queue's rate record: n starts at the server
// time of the write.
type admission struct {
	at time.Time
	n  int
}

// watchAdmissions collects every admission written to queue q's rate
// record until ctx is done.
func watchAdmissions(t *testing.T, ctx context.Context, qs *queue.Queues, q string) func() []admission {
	t.Helper()
	w, err := qs.Bucket().Watch(ctx, q+".rate")
	if err != nil {
		t.Fatal(err)
	}
	var got []admission
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e == nil || !e.Live() {
				continue
			}
			var rec struct {
				Last int `json:"last"`
			}
			if err := json.Unmarshal(e.Value, &rec); err == nil && rec.Last > 0 {
				got = append(got, admission{e.Created, rec.Last})
			}
		}
	}()
	return func() []admission {
		<-done
		sort.Slice(got, func(i, j int) bool { return got[i].at.Before(got[j].at) })
		return got
	}
}

// overWindows is every window of period, ending at an admission, that
// admitted more than max.
func overWindows(as []admission, period time.Duration, max int) []string {
	var out []string
	for i, a := range as {
		n := 0
		for _, b := range as[:i+1] {
			if b.at.After(a.at.Add(-period)) {
				n += b.n
			}
		}
		if n > max {
			out = append(out, fmt.Sprintf("%d starts in the %s ending %s", n, period, a.at.Format("15:04:05.000")))
		}
	}
	return out
}

// A rate limit of 20 a second, three workers, more tasks than it allows:
// no window of a second, by the server's times of the admissions, holds
// more than 20 starts, and the limit is used (it does not under-admit).
func TestRate_HoldsTheLimitExactly(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.Rate = &queue.RateLimit{Max: 20, Period: queue.Duration(time.Second)} })
	tasks := make([]queue.NewTask, 200)
	for i := range tasks {
		tasks[i] = queue.NewTask{Key: fmt.Sprintf("k%d", i%50)}
	}
	ctx := ctxT(t, 30*time.Second)
	if _, err := qs.AddBatch(ctx, "q", tasks); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	admissions := watchAdmissions(t, wctx, qs, "q")
	for _, h := range []string{"h1", "h2", "h3"} {
		w, _ := e.queues(h).NewWorker("q", queue.HandlerFunc(func(context.Context, *queue.Task) error { return nil }), queue.WithConcurrency(4))
		start(t, w)
	}
	time.Sleep(3500 * time.Millisecond)
	stop()
	as := admissions()
	for _, over := range overWindows(as, time.Second, 20) {
		t.Error(over)
	}
	if len(as) == 0 {
		t.Fatal("no admission written")
	}
	// Over the three whole seconds after the first admission: 60 starts.
	n := 0
	for _, a := range as {
		if a.at.Before(as[0].at.Add(3 * time.Second)) {
			n += a.n
		}
	}
	if n < 57 || n > 60 {
		t.Errorf("%d starts admitted in the first 3 s, want 57-60 (20 a second)", n)
	}
	t.Logf("%d admissions, %d starts in the first 3 s", len(as), n)
}

// A rate that does not parse, or is out of bounds, is refused.
func TestRate_Parse(t *testing.T) {
	for in, want := range map[string]string{"20/1s": "20/1s", "50/m": "50/1m0s", "1000/h": "1000/1h0m0s", "3/250ms": "3/250ms", "none": "none"} {
		r, err := queue.ParseRate(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, in := range []string{"20", "x/1s", "20/soon", "0/1s", "20/0s", "20/48h", "20000/1s"} {
		if _, err := queue.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q): no error", in)
		}
	}
}
