// Package par spreads independent, CPU-bound work over the CPUs.
package par

import (
	"runtime"
	"sync"
)

// minPerWorker is the least work worth a goroutine of its own: below it,
// starting one costs more than it saves.
const minPerWorker = 256

// Each calls fn(i) for every i in [0, n), splitting the range over up to
// GOMAXPROCS goroutines when n is large enough to pay for them, and returns
// when every call has returned. Calls for different i may run at once.
func Each(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/minPerWorker)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				fn(i)
			}
		})
	}
	wg.Wait()
}
