package e2e

import (
	"bufio"
	"context"
	"math"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/session"
)

func TestRate_CreateTakeSettleStatusAndLs(t *testing.T) {
	w := newWorld(t)
	h := w.host("h1")
	h.expect(2, []string{"rate", "create", "api"}, "--limit")
	h.expect(2, []string{"rate", "create", "api", "--limit", "5/xx"}, "period")
	h.must("rate", "create", "api", "--takes", "2/1m", "--limit", "1000/1m")
	h.must("rate", "create", "api", "--limit", "1000/1m", "--takes", "2/1m") // the same again
	h.expect(3, []string{"rate", "create", "api", "--takes", "3/1m"}, "never change")
	h.expect(5, []string{"rate", "take", "nope"}, "baton rate create nope")
	if id := strings.TrimSpace(h.must("rate", "take", "api", "--cost", "900", "--id", "req-1").stdout); id != "req-1" {
		t.Fatalf("take printed %q, want its id", id)
	}
	r := h.expect(3, []string{"rate", "take", "api", "--cost", "200", "--json"}, "retry after")
	doc := jsonOf(t, r.stdout)
	if doc["admitted"] != false || num(t, doc, "retry_after_ms") <= 0 || num(t, doc, "retry_after_ms") > 60000 {
		t.Fatalf("refused take --json: %v", doc)
	}
	h.must("rate", "settle", "api", "--id", "req-1", "--cost", "100")
	if doc := jsonOf(t, h.must("rate", "take", "api", "--cost", "200", "--json").stdout); doc["admitted"] != true {
		t.Fatalf("take after settling down: %v", doc)
	}
	h.expect(3, []string{"rate", "take", "api"}, "over the limit")
	h.expect(5, []string{"rate", "settle", "api", "--id", "nope", "--cost", "1"}, "no take nope")
	st := jsonOf(t, h.must("rate", "status", "api", "--json").stdout)
	if len(st["takes"].([]any)) != 2 || len(st["limits"].([]any)) != 2 {
		t.Fatalf("status: %v", st)
	}
	if out := h.must("rate", "ls").stdout; !strings.Contains(out, "2/1m0s takes") || !strings.Contains(out, "1000/1m0s") {
		t.Fatalf("ls:\n%s", out)
	}
}

// Eight processes take from a limiter of 100/s as fast as they are let for
// 10 s: by the server's times of the writes that admitted them, no window
// of one second holds more than 100, and all together are within 5% of
// what the limit allows.
func TestRate_EightProcessesHoldALimitExactly(t *testing.T) {
	w := newWorld(t)
	ls, err := rate.New(w.client)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := ls.Create(ctx, "hot", []rate.Limit{{Max: 100, Period: rate.Duration(time.Second), Per: rate.PerTake}}); err != nil {
		t.Fatal(err)
	}
	bucket := w.client.Bucket(rate.BucketConfig(session.DefaultPrefix, 0))
	stop := rateTimes(t, bucket, "rate.hot")
	const procs = 8
	run := 10 * time.Second
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	started := time.Now()
	for range procs {
		cmd := exec.Command(ratetakerBin)
		cmd.Env = append(w.host("h").environ(), "LIMITER=hot", "RUN_FOR="+run.String())
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errOut strings.Builder
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() != "R" {
					mu.Lock()
					ids = append(ids, sc.Text())
					mu.Unlock()
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("ratetaker: %v: %s", err, errOut.String())
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(started)
	times := stop(len(ids))
	var admitted []time.Time
	for _, id := range ids {
		ts, ok := times[id]
		if !ok {
			t.Fatalf("take %s is in no write", id)
		}
		admitted = append(admitted, ts)
	}
	slices.SortFunc(admitted, func(a, b time.Time) int { return a.Compare(b) })
	worst := 0
	for i, ts := range admitted {
		j := i
		for j >= 0 && admitted[j].After(ts.Add(-time.Second)) {
			j--
		}
		worst = max(worst, i-j)
	}
	span := admitted[len(admitted)-1].Sub(admitted[0])
	t.Logf("%d admitted to %d processes over %s (%s with start-up), at most %d in any second", len(admitted), procs, span.Round(time.Millisecond), elapsed.Round(time.Millisecond), worst)
	if worst > 100 {
		t.Fatalf("%d admitted within one second: the limit is 100", worst)
	}
	// Each taker runs 10 s: a limit of 100/s admits 1000 in that time
	// (a few more where the takers' starts are spread).
	allowed := 100 * run.Seconds()
	if n := float64(len(admitted)); n < 0.95*allowed || n > 100*math.Ceil(span.Seconds()) {
		t.Fatalf("%d admitted over %s: want within 5%% of %.0f, and never more than 100 in each second begun", len(admitted), span, allowed)
	}
}

// rateTimes follows a limiter's record and gathers the server's time of
// every admitted take: a write admits its last take at its own time and
// keeps the earlier ones, with theirs, in its log, so a write the watch
// missed (a key kept with one revision) still shows in the next ones.
// stop waits until it has want takes (or 10s), ends the watch and returns
// them by id.
func rateTimes(t *testing.T, b *kv.Bucket, key string) (stop func(want int) map[string]time.Time) {
	t.Helper()
	w, err := b.Watch(context.Background(), key, kv.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	at := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
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
				at[tk.ID] = tk.At
			}
			if rec.Last != nil {
				at[rec.Last.ID] = e.Created
			}
			mu.Unlock()
		}
	}()
	return func(want int) map[string]time.Time {
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			n := len(at)
			mu.Unlock()
			if n >= want || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		w.Stop()
		<-done
		return at
	}
}
