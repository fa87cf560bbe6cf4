package rate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/rate"
)

func perSecond(max, burst int64) rate.Limit {
	return rate.Limit{Max: max, Burst: burst, Period: rate.Duration(time.Second), Per: rate.PerCost}
}

func setup(t *testing.T) (string, *rate.Limiters) {
	t.Helper()
	s := kvtest.StartServer(t)
	ls, err := rate.New(kvtest.Connect(t, s.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	return s.ClientURL(), ls
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestCreate_LimitsAreTheRecordsNeverTheCallers(t *testing.T) {
	_, ls := setup(t)
	ctx := ctxT(t)
	lim := []rate.Limit{perSecond(10, 2), {Max: 3, Period: rate.Duration(time.Minute), Per: rate.PerTake}}
	if _, err := ls.Create(ctx, "llm", lim); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Create(ctx, "llm", []rate.Limit{lim[1], lim[0]}); err != nil {
		t.Fatalf("the same limits in another order: %v", err)
	}
	if _, err := ls.Create(ctx, "llm", lim[:1]); !errors.Is(err, rate.ErrExists) {
		t.Fatalf("other limits = %v; want ErrExists", err)
	}
	for _, bad := range [][]rate.Limit{nil, {perSecond(0, 0)}, {{Max: 1, Period: 0, Per: rate.PerCost}}, {{Max: 1, Period: rate.Duration(time.Second), Per: "tokens"}}} {
		if _, err := ls.Create(ctx, "bad", bad); !errors.Is(err, rate.ErrInvalid) {
			t.Errorf("create with %v = %v; want ErrInvalid", bad, err)
		}
	}
	if _, err := ls.Take(ctx, "nope"); !errors.Is(err, rate.ErrNotFound) {
		t.Fatalf("take of no limiter = %v", err)
	}
	if _, err := ls.Take(ctx, "llm", rate.WithCost(13)); !errors.Is(err, rate.ErrInvalid) {
		t.Fatalf("a take that can never fit = %v; want ErrInvalid", err)
	}
}

func TestTake_AdmitsUpToTheLimitThenSaysWhenToRetry(t *testing.T) {
	_, ls := setup(t)
	ctx := ctxT(t)
	if _, err := ls.Create(ctx, "api", []rate.Limit{perSecond(3, 1)}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := ls.Take(ctx, "api"); err != nil {
			t.Fatalf("take %d of 3+1: %v", i, err)
		}
	}
	_, err := ls.Take(ctx, "api")
	var le *rate.LimitedError
	if !errors.As(err, &le) || le.RetryAfter <= 0 || le.RetryAfter > time.Second {
		t.Fatalf("the fifth take = %v; want a LimitedError with a retry within 1s", err)
	}
	time.Sleep(le.RetryAfter)
	if _, err := ls.Take(ctx, "api"); err != nil {
		t.Fatalf("a take after RetryAfter = %v", err)
	}
	st, err := ls.Status(ctx, "api")
	if err != nil || len(st.Uses) != 1 || st.Uses[0].Used < 1 || st.Uses[0].Used > 4 {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

func TestSettle_ALowerCostFreesRoom(t *testing.T) {
	_, ls := setup(t)
	ctx := ctxT(t)
	if _, err := ls.Create(ctx, "tokens", []rate.Limit{{Max: 1000, Period: rate.Duration(time.Minute), Per: rate.PerCost}}); err != nil {
		t.Fatal(err)
	}
	a, err := ls.Take(ctx, "tokens", rate.WithCost(900), rate.WithID("req-1"))
	if err != nil || a.ID != "req-1" {
		t.Fatalf("take = %+v, %v", a, err)
	}
	if _, err := ls.Take(ctx, "tokens", rate.WithCost(500)); !errors.Is(err, rate.ErrLimited) {
		t.Fatalf("500 more of 1000 with 900 reserved = %v; want limited", err)
	}
	if err := ls.Settle(ctx, "tokens", "req-1", 300); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Take(ctx, "tokens", rate.WithCost(500)); err != nil {
		t.Fatalf("500 after settling 900 down to 300 = %v", err)
	}
	if err := ls.Settle(ctx, "tokens", "nope", 1); !errors.Is(err, rate.ErrNoTake) {
		t.Fatalf("settle of no take = %v", err)
	}
	st, err := ls.Status(ctx, "tokens")
	if err != nil || st.Uses[0].Used != 800 || len(st.Takes) != 2 {
		t.Fatalf("status = %+v, %v; want 800 used by 2 takes", st, err)
	}
}

// An open limiter's uncontended take is one message.
func TestOpen_ATakeIsOneRoundTrip(t *testing.T) {
	url, ls := setup(t)
	ctx := ctxT(t)
	c := kvtest.Connect(t, url)
	mine, err := rate.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Create(ctx, "gw", []rate.Limit{perSecond(1000, 0)}); err != nil {
		t.Fatal(err)
	}
	h, err := mine.Open(ctx, "gw")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i := range 20 {
		before := c.Conn().Stats().OutMsgs
		if _, err := h.Take(ctx); err != nil {
			t.Fatal(err)
		}
		if n := c.Conn().Stats().OutMsgs - before; n != 1 {
			t.Errorf("take %d sent %d messages, want 1", i, n)
		}
	}
}

// Eight takers on connections of their own, each through an open limiter,
// take as fast as they are let for 3 s from a limiter of 20/s: by the
// server's times of the writes that admitted them, no window of one
// second holds more than 20, and all of them together are within 5% of
// what the limit allows in 3 s.
func TestTake_ExactAcrossTakersByServerTime(t *testing.T) {
	for _, takers := range []int{1, 8} {
		t.Run(fmt.Sprint(takers, " takers"), func(t *testing.T) { exactAcrossTakers(t, takers) })
	}
}

// exactAcrossTakers: with one taker, every take but the first is decided
// from the handle's own last write, whose time it only bounds; with
// eight, most from writes read back from lost compare-and-sets.
func exactAcrossTakers(t *testing.T, takers int) {
	url, ls := setup(t)
	ctx := ctxT(t)
	if _, err := ls.Create(ctx, "hot", []rate.Limit{perSecond(20, 0)}); err != nil {
		t.Fatal(err)
	}
	// The server's time of every admitted take, from the writes: a write
	// admits its Last at its own time, and carries the takes before it,
	// each with its time, in its Log for a second. A watch of a key kept
	// with one revision may miss a write it did not deliver before the
	// next replaced it; the next writes' logs still hold its take.
	w, err := ls.Bucket().Watch(ctx, "rate.hot", kv.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	admittedAt := map[string]time.Time{}
	exact := map[string]bool{} // the time is its write's, not a later log's bound
	var mu sync.Mutex
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			var rec rate.Limiter
			if rec.UnmarshalJSON(e.Value) != nil {
				continue
			}
			mu.Lock()
			for _, tk := range rec.Log {
				if !exact[tk.ID] {
					admittedAt[tk.ID] = tk.At
				}
			}
			if rec.Last != nil {
				admittedAt[rec.Last.ID] = e.Created
				exact[rec.Last.ID] = true
			}
			mu.Unlock()
		}
	}()
	run := 3 * time.Second
	start := make(chan struct{})
	deadline := time.Now().Add(run)
	var wg sync.WaitGroup
	var took atomic.Int64
	var tookIDs sync.Map
	errs := make(chan error, takers)
	for range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, err := rate.New(kvtest.Connect(t, url))
			if err != nil {
				errs <- err
				return
			}
			h, err := mine.Open(ctx, "hot")
			if err != nil {
				errs <- err
				return
			}
			defer h.Close()
			<-start
			for time.Now().Before(deadline) {
				tctx, cancel := context.WithDeadline(ctx, deadline)
				a, err := h.TakeWait(tctx)
				cancel()
				if err == nil {
					took.Add(1)
					tookIDs.Store(a.ID, true)
				} else if !errors.Is(err, context.DeadlineExceeded) {
					errs <- err
					return
				}
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The watch has seen every take once it has seen the last write.
	if !waitFor(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return int64(len(admittedAt)) >= took.Load() }) {
		mu.Lock()
		t.Fatalf("the writes show %d admitted takes, the takers %d", len(admittedAt), took.Load())
	}
	w.Stop()
	<-watched
	var admitted []time.Time
	tookIDs.Range(func(id, _ any) bool {
		at, ok := admittedAt[id.(string)]
		if !ok {
			t.Errorf("take %s is in no write", id)
		}
		admitted = append(admitted, at)
		return true
	})
	slices.SortFunc(admitted, func(a, b time.Time) int { return a.Compare(b) })
	worst := 0
	for i, at := range admitted {
		j := i
		for j >= 0 && admitted[j].After(at.Add(-time.Second)) {
			j--
		}
		worst = max(worst, i-j)
	}
	allowed := 20 * elapsed.Seconds()
	t.Logf("%d admitted in %s by %d takers (the limit allows %.0f), at most %d in a second", len(admitted), elapsed.Round(time.Millisecond), takers, allowed, worst)
	if worst > 20 {
		t.Fatalf("%d takes admitted within one second: the limit is 20", worst)
	}
	// The last window's takes may come in the run's last moment: the run
	// admits between 3 and 4 windows' worth, less what the windows' edges
	// lose to the takers' round trips.
	if n := float64(len(admitted)); n < 0.95*allowed || n > 20*(elapsed.Seconds()+1) {
		t.Fatalf("%d admitted in %s: want within 5%% of %.0f, and never more than a window above it", len(admitted), elapsed, allowed)
	}
}

func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
