package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
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
	got := watchRateRecords(t, ctx, qs, q+".rate")
	return func() []admission { return got()[""] }
}

// watchRateRecords collects every admission written to the rate records
// that match pattern until ctx is done, by the key a record names ("" for
// the queue's own).
func watchRateRecords(t *testing.T, ctx context.Context, qs *queue.Queues, pattern string) func() map[string][]admission {
	t.Helper()
	w, err := qs.Bucket().Watch(ctx, pattern)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]admission{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e == nil || !e.Live() {
				continue
			}
			var rec struct {
				Queue string `json:"queue"`
				Key   string `json:"key"`
				Last  int    `json:"last"`
			}
			if err := json.Unmarshal(e.Value, &rec); err == nil && rec.Last > 0 {
				if want := rec.Queue + ".krate." + rec.Key; rec.Key != "" && e.Key != want {
					t.Errorf("record %s names key %q", e.Key, rec.Key)
				}
				got[rec.Key] = append(got[rec.Key], admission{e.Created, rec.Last})
			}
		}
	}()
	return func() map[string][]admission {
		<-done
		for _, as := range got {
			sort.Slice(as, func(i, j int) bool { return as[i].at.Before(as[j].at) })
		}
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
	for in, want := range map[string]string{"20/1s": "20/1s", "50/m": "50/1m", "1000/h": "1000/1h", "90/90m": "90/1h30m", "3/250ms": "3/250ms", "none": "none"} {
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

// A key rate of 5 a second for every key, one key's own 15 a second, and a
// queue rate of 40 a second, three workers on three hosts: no window of a
// second holds more than its limit, for the queue or any key; each key
// uses its limit; and a key that reaches its limit does not hold up the
// others.
func TestRate_KeyRatesHoldPerKey(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) {
		c.PerKey = 4
		c.Rate = &queue.RateLimit{Max: 40, Period: queue.Duration(time.Second)}
		c.KeyRate = &queue.RateLimit{Max: 5, Period: queue.Duration(time.Second)}
	})
	ctx := ctxT(t, 30*time.Second)
	if _, err := qs.SetKey(ctx, "q", "fast", func(k *queue.KeyConfig) error {
		k.Rate = &queue.RateLimit{Max: 15, Period: queue.Duration(time.Second)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"fast", "a", "b", "c"}
	var tasks []queue.NewTask
	for i := range 400 {
		tasks = append(tasks, queue.NewTask{Key: keys[i%len(keys)]})
	}
	if _, err := qs.AddBatch(ctx, "q", tasks); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	queueAdm := watchAdmissions(t, wctx, qs, "q")
	keyAdm := watchRateRecords(t, wctx, qs, "q.krate.>")
	for _, h := range []string{"h1", "h2", "h3"} {
		w, _ := e.queues(h).NewWorker("q", queue.HandlerFunc(func(context.Context, *queue.Task) error { return nil }), queue.WithConcurrency(8))
		start(t, w)
	}
	time.Sleep(3500 * time.Millisecond)
	stop()
	qa, ka := queueAdm(), keyAdm()
	for _, over := range overWindows(qa, time.Second, 40) {
		t.Error("queue:", over)
	}
	limit := map[string]int{"fast": 15, "a": 5, "b": 5, "c": 5}
	for _, k := range keys {
		as := ka[k]
		for _, over := range overWindows(as, time.Second, limit[k]) {
			t.Errorf("key %s: %s", k, over)
		}
		if len(as) == 0 {
			t.Fatalf("key %s: no admission", k)
		}
		n := 0
		for _, a := range as {
			if a.at.Before(as[0].at.Add(3 * time.Second)) {
				n += a.n
			}
		}
		// Three whole seconds: three windows' worth, less what the
		// admission's round trips cost at each window's edge (and more
		// under -race beside other packages' tests on two cores).
		if want := 3 * limit[k]; n < want*60/100 || n > want {
			t.Errorf("key %s: %d starts admitted in the first 3 s, want about %d", k, n, want)
		}
		t.Logf("key %s: %d admissions, %d starts in the first 3 s", k, len(as), n)
	}
	// The key records carry a TTL: they go once their keys rest.
	recs, err := qs.Bucket().ListMatching(ctx, "q.krate.>")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.TTL <= time.Second || r.TTL > 4*time.Second {
			t.Errorf("record %s has TTL %s, want the period and 2s, in whole seconds", r.Key, r.TTL)
		}
	}
}

// A key whose window is full waits for it, not for a poll, and a rate
// lifted lets it start at once: 1 an hour starts one task; setting the
// key's own rate to 100 a second starts the other two.
func TestRate_KeyRateLiftedStartsTheHeldKey(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) {
		c.KeyRate = &queue.RateLimit{Max: 1, Period: queue.Duration(time.Hour)}
	})
	ctx := ctxT(t, 20*time.Second)
	if _, err := qs.AddBatch(ctx, "q", []queue.NewTask{{Key: "k"}, {Key: "k"}, {Key: "k"}}); err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 3)
	w, _ := qs.NewWorker("q", queue.HandlerFunc(func(_ context.Context, tk *queue.Task) error { started <- tk.ID; return nil }))
	start(t, w)
	<-started
	select {
	case id := <-started:
		t.Fatalf("task %s started past the key's rate of 1/1h", id)
	case <-time.After(time.Second):
	}
	set := time.Now()
	if _, err := qs.SetKey(ctx, "q", "k", func(k *queue.KeyConfig) error {
		k.Rate = &queue.RateLimit{Max: 100, Period: queue.Duration(time.Second)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the held key did not start once its rate was raised")
		}
	}
	if d := time.Since(set); d > time.Second {
		t.Errorf("the held key started %s after its rate was raised, want at once", d)
	}
}

// A key's own rate with no rate on the queue, beside keys with none: the
// rated key's handlers start no more than its limit in any window a
// little shorter than the period (the margin is a claim's way from its
// admission to its start), though its fair share of the workers (a third
// of 4 tasks of 200 ms at once: about 7 a second) is more than its rate;
// and the other keys are not held back by it.
func TestRate_KeyRateAloneBoundsTheStarts(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", nil)
	ctx := ctxT(t, 30*time.Second)
	if _, err := qs.SetKey(ctx, "q", "a", func(k *queue.KeyConfig) error {
		k.Rate = &queue.RateLimit{Max: 3, Period: queue.Duration(time.Second)}
		k.PerKey = 4
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var tasks []queue.NewTask
	for i := range 400 {
		key := "a"
		if i%3 != 0 {
			key = fmt.Sprint("o", i%3) // two keys beside a: a has a third of the turns
		}
		tasks = append(tasks, queue.NewTask{Key: key})
	}
	if _, err := qs.AddBatch(ctx, "q", tasks); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var starts []time.Time
	others := 0
	w, _ := qs.NewWorker("q", queue.HandlerFunc(func(ctx context.Context, tk *queue.Task) error {
		mu.Lock()
		if tk.Key == "a" {
			starts = append(starts, time.Now())
		} else {
			others++
		}
		mu.Unlock()
		time.Sleep(200 * time.Millisecond)
		return nil
	}), queue.WithConcurrency(4))
	start(t, w)
	time.Sleep(3500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for i := range starts {
		n := 0
		for _, s := range starts[i:] {
			if s.Sub(starts[i]) < 950*time.Millisecond {
				n++
			}
		}
		if n > 3 {
			t.Errorf("%d starts of key a in the 950 ms from %s, its rate is 3/1s", n, starts[i].Format("15:04:05.000"))
		}
	}
	if len(starts) < 7 || len(starts) > 12 {
		t.Errorf("%d starts of key a in 3.5 s, want 9-12 (7 on a loaded machine)", len(starts))
	}
	if others < 30 {
		t.Errorf("%d starts of the other keys in 3.5 s, want them to go on", others)
	}
	t.Logf("key a: %d starts; other keys: %d", len(starts), others)
}
