package sem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/sem"
)

// Ten waiters that begin to wait 50 ms apart are served in that order,
// one at a time, as the permit is handed down the line.
func TestAcquire_WaitersAreServedInTheOrderTheyCame(t *testing.T) {
	e := newEnv(t)
	e.create("one", 1)
	ctx := ctxT(t)
	holder, err := e.sems("h0").TryAcquire(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	var mu sync.Mutex
	var served []int
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := e.sems(fmt.Sprintf("h%d", i%3)).Acquire(ctx, "one")
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			served = append(served, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := p.Release(ctx); err != nil {
				errs <- err
			}
		}()
		// The next one begins to wait 50 ms later, once this one is in line.
		s := e.sems("h9")
		if !waitFor(5*time.Second, func() bool {
			st, err := s.Status(ctx, "one")
			return err == nil && len(st.Waiters) == i+1
		}) {
			t.Fatalf("waiter %d is not in line within 5s", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// While they wait, a newcomer that does not wait is refused even if a
	// unit were free: it would pass the line.
	var full *sem.FullError
	if _, err := e.sems("h8").TryAcquire(ctx, "one"); !errors.As(err, &full) || full.Waiting != n {
		t.Fatalf("a newcomer's try while %d wait = %v; want a FullError counting them", n, err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if fmt.Sprint(served) != "[0 1 2 3 4 5 6 7 8 9]" {
		t.Fatalf("served in the order %v; want the order they came in", served)
	}
}

// A waiter of weight 3 first in line is not passed by waiters of weight 1
// behind it, though single units come free: it is served first, then they.
func TestAcquire_AHeavyWaiterIsNotPassed(t *testing.T) {
	e := newEnv(t)
	e.create("pool", 3)
	ctx := ctxT(t)
	var holders []*sem.Permit
	for range 3 {
		p, err := e.sems("h0").TryAcquire(ctx, "pool")
		if err != nil {
			t.Fatal(err)
		}
		holders = append(holders, p)
	}
	order := make(chan string, 3)
	start := func(who string, weight int, waiting int) {
		go func() {
			p, err := e.sems("h1").Acquire(ctx, "pool", sem.WithWeight(weight))
			if err != nil {
				order <- who + ": " + err.Error()
				return
			}
			order <- who
			time.Sleep(10 * time.Millisecond)
			_ = p.Release(ctx)
		}()
		s := e.sems("h9")
		if !waitFor(5*time.Second, func() bool {
			st, err := s.Status(ctx, "pool")
			return err == nil && len(st.Waiters) == waiting
		}) {
			t.Fatalf("%s is not in line within 5s", who)
		}
	}
	start("heavy", 3, 1)
	start("light1", 1, 2)
	start("light2", 1, 3)
	for _, p := range holders {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := []string{<-order, <-order, <-order}
	if got[0] != "heavy" {
		t.Fatalf("served %v; want the heavy waiter first", got)
	}
}

// A waiter whose wait ends leaves the line at once.
func TestAcquire_AWaiterThatGivesUpLeavesTheLine(t *testing.T) {
	e := newEnv(t)
	e.create("x", 1)
	ctx := ctxT(t)
	p, err := e.sems("h0").TryAcquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(context.Background())
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = e.sems("h1").Acquire(wctx, "x")
	if !errors.Is(err, sem.ErrFull) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait that timed out = %v; want ErrFull and the deadline", err)
	}
	if st, err := e.sems("h2").Status(ctx, "x"); err != nil || len(st.Waiters) != 0 {
		t.Fatalf("after the wait: %+v, %v; want nobody in line", st.Waiters, err)
	}
}
