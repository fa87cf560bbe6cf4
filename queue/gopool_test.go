package queue

import (
	"sync"
	"testing"
	"time"
)

// The pool runs every function, keeps at most keep goroutines idle, hands
// new work to them, and ends them on Close.
func TestGoPool_KeepsGoroutinesForTheNextCalls(t *testing.T) {
	p := newGoPool(2)
	var wg sync.WaitGroup
	release := make(chan struct{})
	ran := make(chan int, 8)
	for i := range 4 {
		wg.Add(1)
		p.Go(func() {
			defer wg.Done()
			<-release // barrier: all four run at once
			ran <- i
		})
	}
	close(release)
	wg.Wait()
	if len(ran) != 4 {
		t.Fatalf("%d of 4 functions ran", len(ran))
	}
	waitIdle(t, p, 2) // two stay, the other two end

	// The next two calls go to the idle goroutines.
	done := make(chan struct{})
	p.Go(func() { done <- struct{}{} })
	<-done
	waitIdle(t, p, 2)

	p.Close()
	if n := p.idleCount(); n != 0 {
		t.Fatalf("%d goroutines idle after Close", n)
	}
	// After Close, Go still runs f (on a goroutine that then ends).
	p.Go(func() { done <- struct{}{} })
	<-done
}

func waitIdle(t *testing.T, p *goPool, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.idleCount() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines idle, want %d", p.idleCount(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
