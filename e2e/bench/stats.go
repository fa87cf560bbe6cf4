package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// samples are the latencies of one measured operation.
type samples []time.Duration

// quantile is the nearest-rank q-quantile (0 < q ≤ 1): the smallest sample
// that at least q of the samples do not exceed. It is 0 for no samples.
func (s samples) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func (s samples) median() time.Duration { return s.quantile(0.5) }

// medianFloat is the nearest-rank median of xs, as samples.median takes
// it (the lower middle of an even count); 0 for none.
func medianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	return sorted[(len(sorted)-1)/2]
}

// tail names the p99 of n samples: below 100 the nearest-rank p99 is the
// largest sample, and the table says so.
func tail(n int) string {
	if n < 100 {
		return fmt.Sprintf("max of %d", n)
	}
	return "p99"
}
func (s samples) p99() time.Duration { return s.quantile(0.99) }

// unit says how a value prints.
type unit int

const (
	unitDuration unit = iota // nanoseconds, printed as µs, ms or s
	unitCount                // a plain number (messages per op)
	unitRate                 // operations per second
	unitBytes                // bytes, printed in MiB
	unitRatio                // a ratio of two measurements
	unitKiB                  // bytes, printed in KiB (a record's size)
)

// value is one cell: a measurement, or why there is none.
type value struct {
	x    float64
	ok   bool
	none string // shown when !ok: "n/a", "skipped", an error
}

func val(x float64) value            { return value{x: x, ok: true} }
func dur(d time.Duration) value      { return val(float64(d)) }
func missing(why string) value       { return value{none: why} }
func (v value) format(u unit) string { return formatValue(v, u) }

func formatValue(v value, u unit) string {
	if !v.ok {
		if v.none == "" {
			return "—"
		}
		return v.none
	}
	switch u {
	case unitDuration:
		d := time.Duration(v.x)
		switch {
		case d < time.Millisecond:
			return fmt.Sprintf("%.0f µs", v.x/1e3)
		case d < 10*time.Millisecond:
			return fmt.Sprintf("%.2f ms", v.x/1e6)
		case d < time.Second:
			return fmt.Sprintf("%.1f ms", v.x/1e6)
		default:
			return fmt.Sprintf("%.2f s", v.x/1e9)
		}
	case unitCount:
		return fmt.Sprintf("%.2f", v.x)
	case unitRate:
		return fmt.Sprintf("%.0f ops/s", v.x)
	case unitBytes:
		return fmt.Sprintf("%.1f MiB", v.x/(1<<20))
	case unitKiB:
		return fmt.Sprintf("%.1f KiB", v.x/(1<<10))
	default:
		return fmt.Sprintf("%.3f", v.x)
	}
}

// ratio is a/b, or missing when either is.
func ratio(a, b value) value {
	if !a.ok || !b.ok || b.x == 0 {
		return missing("")
	}
	return val(a.x / b.x)
}

// order is the order in which round i runs n sides: every permutation in
// turn, so that over whole cycles each side runs after each other side
// equally often. It matters: a side runs slower right after one that leaves
// the machine busy (etcd's fsyncs and background commits), so a fixed or
// merely rotated order would charge that to whichever side comes next.
func order(i, n int) []int {
	perms := permutations(n)
	return perms[i%len(perms)]
}

// permutations of 0..n-1, in lexicographic order.
func permutations(n int) [][]int {
	if n <= 1 {
		return [][]int{make([]int, n)}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for pos := 0; pos <= len(p); pos++ {
			q := make([]int, 0, n)
			q = append(q, p[:pos]...)
			q = append(q, n-1)
			q = append(q, p[pos:]...)
			out = append(out, q)
		}
	}
	return out
}
