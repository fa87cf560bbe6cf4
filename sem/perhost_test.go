package sem_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/sem"
)

// TestPerHost_EachHostHasItsOwnUnits: a per-host semaphore of 2 lets each
// host hold 2 at once, with indices 0 and 1 on each, waits and lines of
// its own per host; its status is one host's, Statuses and List every
// host's; its record says max 0 (a baton that predates it refuses it).
func TestPerHost_EachHostHasItsOwnUnits(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	odd := "ci/runner*1" // a host id that is no key token: hashed
	a, b, c := e.sems("h1"), e.sems("h2"), e.sems(odd)
	if _, err := a.Create(ctx, "build", 2, sem.PerHost()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "build", 2); !errors.Is(err, sem.ErrExists) || !strings.Contains(err.Error(), "on each host") {
		t.Fatalf("the same name for every host = %v; want ErrExists naming its per-host max", err)
	}
	if _, err := b.Create(ctx, "build", 2, sem.PerHost()); err != nil {
		t.Fatalf("the same per-host semaphore again: %v", err)
	}
	raw, err := e.client.Bucket(sem.BucketConfig("baton", 0)).Get(ctx, "sem.build")
	if err != nil || !strings.Contains(string(raw.Value), `"max":0`) || !strings.Contains(string(raw.Value), `"max_per_host":2`) {
		t.Fatalf("the record %s (%v): want max 0 and max_per_host 2", raw.Value, err)
	}

	var held []*sem.Permit
	defer func() {
		for _, p := range held {
			_ = p.Release(context.Background())
		}
	}()
	for _, s := range []*sem.Semaphores{a, b, c} {
		idx := map[int]bool{}
		for range 2 {
			p, err := s.TryAcquire(ctx, "build")
			if err != nil {
				t.Fatalf("host %s: %v", s.Host(), err)
			}
			held = append(held, p)
			idx[p.Index()] = true
		}
		if !idx[0] || !idx[1] {
			t.Errorf("host %s: indices %v, want 0 and 1", s.Host(), idx)
		}
		if _, err := s.TryAcquire(ctx, "build"); !errors.Is(err, sem.ErrFull) {
			t.Fatalf("host %s: a third permit = %v; want ErrFull", s.Host(), err)
		}
	}
	if _, err := a.TryAcquire(ctx, "build", sem.WithWeight(3)); !errors.Is(err, sem.ErrInvalid) {
		t.Fatalf("weight 3 of 2 per host = %v; want ErrInvalid", err)
	}

	// h1's waiter is served by h1's release, in h1's line; h2 is not held
	// up by it.
	served := make(chan *sem.Permit, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		p, err := a.Acquire(wctx, "build")
		if err != nil {
			t.Error(err)
		}
		served <- p
	}()
	if !waitFor(10*time.Second, func() bool { st, _ := a.Status(ctx, "build"); return len(st.Waiters) == 1 }) {
		t.Fatal("the waiter did not show in h1's line")
	}
	if st, err := b.Status(ctx, "build"); err != nil || len(st.Waiters) != 0 || st.Host != "h2" || !st.PerHost || st.Held != 2 || st.Max != 2 {
		t.Fatalf("h2's status %+v %v: want its own, full, nobody waiting", st, err)
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	p := <-served
	if p == nil {
		t.FailNow()
	}
	held = append(held, p)

	sts, err := c.Statuses(ctx, "build")
	if err != nil || len(sts) != 3 {
		t.Fatalf("statuses %+v %v; want three hosts", sts, err)
	}
	hosts := []string{sts[0].Host, sts[1].Host, sts[2].Host}
	if strings.Join(hosts, ",") != odd+",h1,h2" {
		t.Errorf("hosts %v", hosts)
	}
	for _, st := range sts {
		if st.Held != 2 || st.Max != 2 || !st.PerHost || len(st.Holders) != 2 || st.Holders[0].Host != st.Host {
			t.Errorf("host %s: %+v", st.Host, st)
		}
	}
	list, bad, err := a.List(ctx)
	if err != nil || bad != 0 || len(list) != 3 || list[0].Name != "build" {
		t.Fatalf("list %+v, %d bad, %v", list, bad, err)
	}
	// Nobody anywhere: one status, of no host.
	for _, p := range held {
		_ = p.Release(ctx)
	}
	held = nil
	if sts, err := a.Statuses(ctx, "build"); err != nil || len(sts) != 1 || sts[0].Host != "" || sts[0].Held != 0 || sts[0].Max != 2 {
		t.Fatalf("statuses of an idle per-host semaphore %+v %v", sts, err)
	}
}

// TestPerHost_InspectReadsItsKeys: the doctor's reading of the bucket
// knows a per-host semaphore's units: a dead holder of this host and a
// unit that does not decode are found there.
func TestPerHost_InspectReadsItsKeys(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	dead := deadProcess(t)
	s := e.sems("h1", sem.WithProcess(dead))
	if _, err := s.Create(ctx, "cpu", 2, sem.PerHost()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(ctx, "cpu", sem.WithoutKeepAlive()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Bucket(sem.BucketConfig("baton", 0)).Create(ctx, "sem.cpu.h.h1.1", []byte("not json"), time.Minute); err != nil {
		t.Fatal(err)
	}
	probs, err := e.sems("h1").Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var deadUnit, badUnit bool
	for _, p := range probs {
		deadUnit = deadUnit || p.Key == "sem.cpu.h.h1.0" && p.Kind == sem.KindUnit && p.Err == nil && p.PID == dead.PID
		badUnit = badUnit || p.Key == "sem.cpu.h.h1.1" && p.Kind == sem.KindUnit && errors.Is(p.Err, sem.ErrUndecodable)
	}
	if !deadUnit || !badUnit {
		t.Fatalf("problems %+v: want the dead holder's unit and the undecodable one", probs)
	}
}
