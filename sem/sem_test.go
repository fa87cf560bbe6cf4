package sem_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/sem"
)

func TestCreate_MaxIsTheRecordsNeverTheCallers(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s := e.sems("h1")
	c, err := s.Create(ctx, "db", 3)
	if err != nil || c.Max != 3 || c.Name != "db" {
		t.Fatalf("create = %+v, %v", c, err)
	}
	if again, err := e.sems("h2").Create(ctx, "db", 3); err != nil || again.Max != 3 {
		t.Fatalf("create again with the same max = %+v, %v; want it as it is", again, err)
	}
	var ee *sem.ExistsError
	if _, err := e.sems("h2").Create(ctx, "db", 4); !errors.As(err, &ee) || ee.Max != 3 || !errors.Is(err, sem.ErrExists) {
		t.Fatalf("create with another max = %v; want an ExistsError naming max 3", err)
	}
	for _, bad := range []struct {
		name string
		max  int
	}{{"", 1}, {"a.b", 1}, {"a b", 1}, {"ok", 0}, {"ok", sem.MaxUnits + 1}} {
		if _, err := s.Create(ctx, bad.name, bad.max); !errors.Is(err, sem.ErrInvalid) {
			t.Errorf("create %q max %d = %v; want ErrInvalid", bad.name, bad.max, err)
		}
	}
	if _, err := s.TryAcquire(ctx, "nope"); !errors.Is(err, sem.ErrNotFound) {
		t.Fatalf("acquire of a semaphore never created = %v; want ErrNotFound", err)
	}
	if _, err := s.TryAcquire(ctx, "db", sem.WithWeight(4)); !errors.Is(err, sem.ErrInvalid) {
		t.Fatalf("acquire of weight 4 of 3 units = %v; want ErrInvalid", err)
	}
}

func TestAcquire_IndicesWeightsFencesAndAFullSemaphore(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.create("ports", 3)
	a, err := e.sems("h1").TryAcquire(ctx, "ports", sem.WithWeight(2))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(context.Background())
	if a.Index() != 0 || a.Weight() != 2 || fmt.Sprint(a.Units()) != "[0 1]" {
		t.Fatalf("first permit: index %d weight %d units %v; want 0, 2, [0 1]", a.Index(), a.Weight(), a.Units())
	}
	b, err := e.sems("h2").TryAcquire(ctx, "ports")
	if err != nil {
		t.Fatal(err)
	}
	if b.Index() != 2 || b.Fence() <= a.Fence() {
		t.Fatalf("second permit: index %d fence %d (first's %d); want index 2 and a higher fence", b.Index(), b.Fence(), a.Fence())
	}
	var full *sem.FullError
	_, err = e.sems("h3").TryAcquire(ctx, "ports")
	if !errors.As(err, &full) || full.Free != 0 || len(full.Holders) != 2 || full.Holders[0].Permit != a.ID() {
		t.Fatalf("acquire of a full semaphore = %v; want a FullError naming both holders", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(b.Err(), sem.ErrReleased) {
		t.Fatalf("a released permit's Err = %v", b.Err())
	}
	c, err := e.sems("h3").TryAcquire(ctx, "ports")
	if err != nil || c.Index() != 2 || c.Fence() <= b.Fence() {
		t.Fatalf("after a release: %v, %v; want index 2 again with a higher fence", c, err)
	}
	defer c.Release(context.Background())
	st, err := e.sems("h4").Status(ctx, "ports")
	if err != nil || st.Held != 3 || st.Free != 0 || len(st.Holders) != 2 || st.Holders[1].Permit != c.ID() || st.Holders[1].Host != "h3" {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

// Weighted permits from processes of three hosts, acquired, held and
// released over and over: the units held never exceed max, and no two live
// permits share an index.
func TestAcquire_NeverMoreThanMaxUnits(t *testing.T) {
	e := newEnv(t)
	e.create("suite", 5)
	ctx := ctxT(t)
	const workers, rounds = 12, 15
	var held atomic.Int64
	var mu sync.Mutex
	live := map[int]string{} // index -> permit
	var over, dup atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := e.sems(fmt.Sprintf("h%d", w%3))
			weight := 1 + w%3
			<-start
			for range rounds {
				p, err := s.Acquire(ctx, "suite", sem.WithWeight(weight), sem.WithTTL(10*time.Second))
				if err != nil {
					errs <- err
					return
				}
				if n := held.Add(int64(weight)); n > 5 {
					over.Add(1)
				}
				mu.Lock()
				if _, ok := live[p.Index()]; ok {
					dup.Add(1)
				}
				live[p.Index()] = p.ID()
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
				mu.Lock()
				delete(live, p.Index())
				mu.Unlock()
				held.Add(-int64(weight))
				if err := p.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if over.Load() > 0 || dup.Load() > 0 {
		t.Fatalf("%d acquisitions went over 5 units, %d shared a live index", over.Load(), dup.Load())
	}
	st, err := e.sems("h0").Status(ctx, "suite")
	if err != nil || st.Held != 0 {
		t.Fatalf("after every release: %+v, %v; want nothing held", st, err)
	}
}

func TestAcquire_ADeadHoldersUnitsComeBackAtOnceOnItsHost(t *testing.T) {
	e := newEnv(t)
	e.create("gpu", 1)
	ctx := ctxT(t)
	// A permit left by a process of this host that has exited, with a TTL
	// far longer than the test.
	left := e.sems("h1", sem.WithProcess(deadProcess(t)))
	if _, err := left.TryAcquire(ctx, "gpu", sem.WithTTL(5*time.Minute), sem.WithoutKeepAlive()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sems("h2").TryAcquire(ctx, "gpu"); !errors.Is(err, sem.ErrFull) {
		t.Fatalf("another host's acquire = %v; want ErrFull (it cannot see the process)", err)
	}
	p, err := e.sems("h1").TryAcquire(ctx, "gpu")
	if err != nil {
		t.Fatalf("this host's acquire over a dead holder = %v; want the unit", err)
	}
	defer p.Release(context.Background())

	// A waiter on the host of a live holder is served when it exits: woken
	// by the exit, not by the TTL (5 min) nor by polling.
	e.create("gpu2", 1)
	cmd, proc := child(t)
	if _, err := e.sems("h1", sem.WithProcess(proc)).TryAcquire(ctx, "gpu2", sem.WithTTL(5*time.Minute), sem.WithoutKeepAlive()); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	go func() {
		q, err := e.sems("h1").Acquire(wctx, "gpu2")
		if err == nil {
			err = q.Release(context.Background())
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the waiter find the holder alive
	_ = cmd.Process.Kill()
	if err := <-got; err != nil {
		t.Fatalf("waiter on the dead holder's host = %v; want the unit once the holder exits", err)
	}
}

func TestAcquire_OtherHostsAreServedWhenTheTTLEnds(t *testing.T) {
	e := newEnv(t)
	e.create("lic", 1)
	ctx := ctxT(t)
	held, err := e.sems("h1").TryAcquire(ctx, "lic", sem.WithTTL(time.Second), sem.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.sems("h2").Acquire(ctx, "lic")
	if err != nil {
		t.Fatalf("waiter = %v; want the unit once the holder's TTL ended", err)
	}
	defer p.Release(context.Background())
	if err := held.Renew(ctx); !errors.Is(err, sem.ErrLost) {
		t.Fatalf("the expired holder's renewal = %v; want ErrLost", err)
	}
}

func TestPermit_KeptAliveUntilReleasedAndLostWhenTaken(t *testing.T) {
	e := newEnv(t)
	e.create("k", 2)
	ctx := ctxT(t)
	s := e.sems("h1")
	p, err := s.TryAcquire(ctx, "k", sem.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rev := p.Holder().Revision
	if !waitFor(5*time.Second, func() bool { return p.Holder().Revision > rev+1 }) {
		t.Fatalf("the permit was not renewed twice within 5s at TTL 1s (revision %d, then %d)", rev, p.Holder().Revision)
	}
	if p.Err() != nil {
		t.Fatalf("a renewed permit ended: %v", p.Err())
	}
	// Its unit removed by hand: the next renewal finds it gone.
	cur, err := s.Bucket().Get(ctx, "sem.k.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bucket().Delete(ctx, "sem.k.0", cur.Revision, nil); err != nil && !errors.Is(err, kv.ErrConflict) {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the permit whose unit was removed did not end within 5s")
	}
	if !errors.Is(p.Err(), sem.ErrLost) {
		t.Fatalf("Err = %v; want ErrLost", p.Err())
	}
	_ = p.Release(ctx)
}

func TestResume_ReleasesAPermitByItsID(t *testing.T) {
	e := newEnv(t)
	e.create("r", 4)
	ctx := ctxT(t)
	p, err := e.sems("h1").TryAcquire(ctx, "r", sem.WithWeight(3), sem.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	other := e.sems("h1")
	q, err := other.Resume(ctx, "r", p.ID())
	if err != nil || q.Index() != 0 || q.Weight() != 3 || len(q.Units()) != 3 {
		t.Fatalf("resume = %v, %v", q, err)
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Resume(ctx, "r", p.ID()); !errors.Is(err, sem.ErrNoPermit) {
		t.Fatalf("resume of a released permit = %v; want ErrNoPermit", err)
	}
	if st, err := other.Status(ctx, "r"); err != nil || st.Free != 4 {
		t.Fatalf("status after release = %+v, %v", st, err)
	}
}

func TestList_EverySemaphoreWithItsHolders(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.create("b", 2)
	e.create("a", 1)
	p, err := e.sems("h1").TryAcquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(context.Background())
	// A record that does not decode is left out and counted.
	if _, err := e.sems("h1").Bucket().Create(ctx, "sem.zz", []byte("{"), 0); err != nil {
		t.Fatal(err)
	}
	all, bad, err := e.sems("h2").List(ctx)
	if err != nil || bad != 1 || len(all) != 2 || all[0].Name != "a" || all[1].Held != 1 || all[1].Holders[0].Permit != p.ID() {
		t.Fatalf("list = %+v, %d, %v", all, bad, err)
	}
}
