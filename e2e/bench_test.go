package e2e

import (
	"fmt"
	"os/exec"
	"sort"
	"testing"
	"time"
)

// BenchmarkCLICold times whole baton processes (start, connect, one verb,
// exit) as an agent pays for them, each on a fresh slot, and reports the
// median and p90 wall time per process in ms. Build without -race for
// meaningful numbers (make bench does).
func BenchmarkCLICold(b *testing.B) {
	if raceEnabled {
		b.Skip("the race detector slows every process down; run without -race")
	}
	w := newWorld(b)
	h := w.host("host-a")
	used := 0 // slots are never reused: b.Run calls the function more than once
	for _, verb := range []string{"join", "commit", "close"} {
		b.Run(verb, func(b *testing.B) {
			times := make([]time.Duration, 0, b.N)
			for range b.N {
				used++
				slot := fmt.Sprintf("%s-%d", verb, used)
				b.StopTimer()
				if verb != "join" {
					h.must("join", slot, "--task", "T")
				}
				args := map[string][]string{
					"join":   {"join", slot, "--task", "T"},
					"commit": {"commit", slot, "-m", "m"},
					"close":  {"close", slot},
				}[verb]
				cmd := exec.Command(batonBin, args...)
				cmd.Env = h.environ()
				b.StartTimer()
				t0 := time.Now()
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("baton %v: %v\n%s", args, err, out)
				}
				times = append(times, time.Since(t0))
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(times[len(times)*9/10].Microseconds())/1000, "p90-ms")
		})
	}
}

// BenchmarkProcessFloor is the cost of starting any process here (/bin/true),
// the floor under every cold CLI number.
func BenchmarkProcessFloor(b *testing.B) {
	times := make([]time.Duration, 0, b.N)
	for range b.N {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
}
