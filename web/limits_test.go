package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/web"
)

// TestLimits_ASemaphoreShowsItsHoldersAndItsLineLive: the page's view of a
// full semaphore has its holders (index, weight, units, host) and its
// waiter; a release serves the waiter and the view and the metrics follow.
func TestLimits_ASemaphoreShowsItsHoldersAndItsLineLive(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.ss.Create(ctx, "testdb", 3); err != nil {
		t.Fatal(err)
	}
	es := openEvents(t, e.http.URL+"/api/v1/events?kinds=semaphore")
	if name, _, err := es.next(); err != nil || name != "hello" {
		t.Fatalf("first event %q %v, want hello", name, err)
	}
	big, err := e.ss.TryAcquire(ctx, "testdb", sem.WithWeight(2))
	if err != nil {
		t.Fatal(err)
	}
	small, err := e.ss.TryAcquire(ctx, "testdb")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = small.Release(context.Background()) }()
	served := make(chan *sem.Permit, 1)
	waitErr := make(chan error, 1)
	go func() {
		p, err := e.ss.Acquire(ctx, "testdb")
		if err != nil {
			waitErr <- err
			return
		}
		served <- p
	}()
	var v web.SemaphoreView
	eventually(t, "two holders and one waiter", func() bool {
		v = web.SemaphoreView{}
		e.get("/api/v1/limits/semaphores/testdb", &v)
		return v.Held == 3 && len(v.Holders) == 2 && len(v.Waiters) == 1
	})
	if v.Max != 3 || v.Free != 0 || v.Holders[0].Host != "h1" || v.Waiters[0].Weight != 1 || v.Waiters[0].Host != "h1" {
		t.Errorf("view %+v", v)
	}
	weights := map[int]int{}
	for _, h := range v.Holders {
		weights[h.Index] = h.Weight
	}
	if weights[big.Index()] != 2 || weights[small.Index()] != 1 {
		t.Errorf("holders by index %v; want %d:2 and %d:1", weights, big.Index(), small.Index())
	}
	fams := scrape(t, e.http.URL+"/metrics", "")
	for name, want := range map[string]float64{"baton_sem_max": 3, "baton_sem_units_held": 3, "baton_sem_permits": 2, "baton_sem_waiters": 1} {
		if got := fams[name].value(map[string]string{"sem": "testdb"}); got != want {
			t.Errorf("%s{sem=testdb} = %v, want %v", name, got, want)
		}
	}
	// The change came as an event too, in the same shape.
	for {
		name, data, err := es.next()
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if name == "changes" && strings.Contains(data, `"kind":"semaphore"`) && strings.Contains(data, `"key":"testdb"`) {
			break
		}
	}

	if err := big.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var p *sem.Permit
	select {
	case p = <-served:
	case err := <-waitErr:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the waiter was not served after the release")
	}
	defer func() { _ = p.Release(context.Background()) }()
	eventually(t, "the waiter served, the line empty", func() bool {
		v = web.SemaphoreView{}
		e.get("/api/v1/limits/semaphores/testdb", &v)
		return v.Held == 2 && len(v.Holders) == 2 && len(v.Waiters) == 0
	})
	var all web.Limits
	e.get("/api/v1/limits", &all)
	if len(all.Semaphores) != 1 || all.Semaphores[0].Name != "testdb" || all.Limiters == nil {
		t.Errorf("limits %+v", all)
	}
	var ov web.Overview
	e.get("/api/v1/overview", &ov)
	if ov.Limits == nil || ov.Limits.Semaphores != 1 || ov.Limits.UnitsMax != 3 {
		t.Errorf("overview limits %+v", ov.Limits)
	}
	var apiErr web.APIError
	if code := e.get("/api/v1/limits/semaphores/nope", &apiErr); code != 404 || apiErr.Code != 5 {
		t.Errorf("no such semaphore: %d %+v", code, apiErr)
	}
}

// TestLimits_ALimiterShowsItsUseAdmittedAndRefused: takes admitted are
// counted from the record, refusals from the takers' notices; a wait that
// is admitted counts as admitted only.
func TestLimits_ALimiterShowsItsUseAdmittedAndRefused(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lim := []rate.Limit{{Max: 10, Period: rate.Duration(time.Minute), Per: rate.PerCost}, {Max: 3, Period: rate.Duration(time.Minute), Per: rate.PerTake}}
	if _, err := e.rl.Create(ctx, "llm", lim); err != nil {
		t.Fatal(err)
	}
	// Seen by the dashboard before the takes: they are counted from then.
	eventually(t, "the limiter seen", func() bool { return e.get("/api/v1/limits/limiters/llm", nil) == 200 })
	for _, cost := range []int64{4, 2, 1} {
		if _, err := e.rl.Take(ctx, "llm", rate.WithCost(cost)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := e.rl.Take(ctx, "llm", rate.WithCost(5)); !errors.Is(err, rate.ErrLimited) {
			t.Fatalf("a fourth take = %v; want refused", err)
		}
	}
	var v web.LimiterView
	eventually(t, "3 admitted and 2 refused", func() bool {
		v = web.LimiterView{}
		e.get("/api/v1/limits/limiters/llm", &v)
		return v.Admitted == 3 && v.Refused == 2
	})
	if v.AdmittedCost != 7 || v.RefusedCost != 10 || v.Takes != 3 || v.LastRefusedAt.IsZero() || v.LastTakeAt.IsZero() {
		t.Errorf("view %+v", v)
	}
	if len(v.Limits) != 2 || v.Limits[0].Used != 7 || v.Limits[0].Left != 3 || v.Limits[1].Used != 3 || v.Limits[1].Left != 0 || v.Limits[1].Per != rate.PerTake || v.Limits[0].PeriodMS != 60000 {
		t.Errorf("limits %+v", v.Limits)
	}
	fams := scrape(t, e.http.URL+"/metrics", "")
	for name, want := range map[string]float64{"baton_rate_admitted_total": 3, "baton_rate_admitted_cost_total": 7, "baton_rate_refused_total": 2, "baton_rate_refused_cost_total": 10} {
		if got := fams[name].value(map[string]string{"limiter": "llm"}); got != want {
			t.Errorf("%s{limiter=llm} = %v, want %v", name, got, want)
		}
	}
	if got := fams["baton_rate_used"].value(map[string]string{"limiter": "llm", "limit": v.Limits[1].Limit}); got != 3 {
		t.Errorf("baton_rate_used for %s = %v, want 3", v.Limits[1].Limit, got)
	}
	if got := fams["baton_rate_limit"].value(map[string]string{"limiter": "llm", "limit": v.Limits[0].Limit}); got != 10 {
		t.Errorf("baton_rate_limit for %s = %v, want 10", v.Limits[0].Limit, got)
	}
	var ov web.Overview
	e.get("/api/v1/overview", &ov)
	if ov.Limits == nil || ov.Limits.Limiters != 1 || ov.Limits.Refused != 2 {
		t.Errorf("overview limits %+v", ov.Limits)
	}
}

// TestLimits_ALimitersUseFallsOnThePageWithNoWrite: a window's use falls
// as time passes, which no write tells: the stream sends the limiter again
// (once a second) until its windows are empty.
func TestLimits_ALimitersUseFallsOnThePageWithNoWrite(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.rl.Create(ctx, "burst", []rate.Limit{{Max: 5, Period: rate.Duration(500 * time.Millisecond), Per: rate.PerCost}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the limiter seen", func() bool { return e.get("/api/v1/limits/limiters/burst", nil) == 200 })
	es := openEvents(t, e.http.URL+"/api/v1/events?kinds=limiter")
	if name, _, err := es.next(); err != nil || name != "hello" {
		t.Fatalf("first event %q %v, want hello", name, err)
	}
	if _, err := e.rl.Take(ctx, "burst", rate.WithCost(2)); err != nil {
		t.Fatal(err)
	}
	used := func() int64 {
		t.Helper()
		for {
			name, data, err := es.next()
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			if name != "changes" {
				continue
			}
			var b struct {
				Changes []struct {
					Key string           `json:"key"`
					Doc *web.LimiterView `json:"doc"`
				} `json:"changes"`
			}
			if err := json.Unmarshal([]byte(data), &b); err != nil {
				t.Fatal(err)
			}
			for _, c := range b.Changes {
				if c.Key == "burst" && c.Doc != nil && len(c.Doc.Limits) == 1 {
					return c.Doc.Limits[0].Used
				}
			}
		}
	}
	for used() != 2 {
	}
	for used() != 0 {
	}
}

// TestLimits_APerHostSemaphoreShowsEachHost: each host's share of a
// per-host semaphore is shown and counted apart.
func TestLimits_APerHostSemaphoreShowsEachHost(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.ss.Create(ctx, "cpu", 1, sem.PerHost()); err != nil {
		t.Fatal(err)
	}
	h2, err := sem.New(e.client, sem.WithHostID("h2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*sem.Semaphores{e.ss, h2} {
		p, err := s.TryAcquire(ctx, "cpu")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Release(context.Background()) }()
	}
	var v web.SemaphoreView
	eventually(t, "both hosts' shares", func() bool {
		v = web.SemaphoreView{}
		e.get("/api/v1/limits/semaphores/cpu", &v)
		return len(v.Hosts) == 2
	})
	if !v.PerHost || v.Max != 1 || v.Held != 2 || v.Hosts[0].Host != "h1" || v.Hosts[1].Host != "h2" || v.Hosts[1].Held != 1 || v.Hosts[1].Holders[0].Host != "h2" {
		t.Errorf("view %+v", v)
	}
	fams := scrape(t, e.http.URL+"/metrics", "")
	for _, host := range []string{"h1", "h2"} {
		if got := fams["baton_sem_units_held"].value(map[string]string{"sem": "cpu", "host": host}); got != 1 {
			t.Errorf("baton_sem_units_held{sem=cpu,host=%s} = %v, want 1", host, got)
		}
	}
}
