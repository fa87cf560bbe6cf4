package cmdutil

import "runtime"

// OneThread runs Go code on one thread at a time (GOMAXPROCS 1) unless
// GOMAXPROCS is set, and returns what sets it back. For `baton queue
// work`: a worker waits on the network and on its commands, which run as
// processes of their own, and with more than one thread its runtime spends
// its time handing goroutines between threads and spinning for work
// instead; ADR 0037 has the measurements.
func (f *Factory) OneThread() (restore func()) {
	if f.Getenv != nil && f.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	old := runtime.GOMAXPROCS(1)
	return func() { runtime.GOMAXPROCS(old) }
}
