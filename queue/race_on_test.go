//go:build race

package queue

// raceOn says the tests run with the race detector, which slows the
// single-goroutine index tests tenfold and has nothing to find in them.
const raceOn = true
