package par

import (
	"runtime"
	"sync/atomic"
	"testing"
)

func TestEachCallsEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 513, 10_000, 10_007} {
		seen := make([]atomic.Int32, n)
		Each(n, func(i int) { seen[i].Add(1) })
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("n=%d: index %d called %d times", n, i, c)
			}
		}
	}
}

func TestEachUsesSeveralGoroutinesForLargeWork(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one CPU")
	}
	// Every worker blocks until two have started: one goroutine alone
	// would wait forever, so this passes only if the work is split.
	var started atomic.Int32
	release := make(chan struct{})
	Each(2*minPerWorker, func(i int) {
		if i%minPerWorker == 0 {
			if started.Add(1) == 2 {
				close(release)
			}
			<-release
		}
	})
}
