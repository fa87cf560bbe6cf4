package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/waitline"
)

// With the limits bucket on the server, waiters of a held lease are
// served in the order they began to wait.
func TestAcquire_WaitersAreServedInTheOrderTheyCame(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	b, err := e.client.Ensure(ctx, limits.BucketConfig(lease.DefaultPrefix, 1))
	if err != nil {
		t.Fatal(err)
	}
	holder, err := e.leases("holder", "h0").TryAcquire(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	self, err := hostlocal.Self()
	if err != nil {
		t.Fatal(err)
	}
	line := waitline.New(b, "wait.lease.deploy", "h9", self)
	const n = 6
	var mu sync.Mutex
	var served []int
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := e.leases(fmt.Sprintf("w%d", i), fmt.Sprintf("h%d", i%3+1)).Acquire(ctx, "deploy")
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			served = append(served, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := l.Release(ctx); err != nil {
				errs <- err
			}
		}()
		deadline := time.Now().Add(5 * time.Second)
		for {
			ws, err := line.Waiters(ctx)
			if err == nil && len(ws) == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d is not in line within 5s", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if fmt.Sprint(served) != "[0 1 2 3 4 5]" {
		t.Fatalf("served in the order %v; want the order they came in", served)
	}
	if ws, err := line.Waiters(context.Background()); err != nil || len(ws) != 0 {
		t.Fatalf("after all were served: %d in line, %v", len(ws), err)
	}
}
