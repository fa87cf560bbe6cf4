package reserve_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/reserve"
)

// fill makes n reservations in space by agents on four hosts, one or two
// patterns each, as a fleet of agents working on a repository does.
func fill(t testing.TB, e *env, space string, n int) {
	t.Helper()
	hosts := make([]*reserve.Spaces, 4)
	for i := range hosts {
		hosts[i] = e.spaces(fmt.Sprintf("fill-%d", i))
	}
	for i := range n {
		pats := []string{fmt.Sprintf("src/pkg%d/**", i)}
		if i%2 == 0 {
			pats = append(pats, fmt.Sprintf("docs/file%d.md", i))
		}
		if _, err := hosts[i%len(hosts)].TryReserve(ctxT(t), space, pats, reserve.WithTTL(time.Hour),
			reserve.WithoutKeepAlive(), reserve.WithAgent(fmt.Sprintf("agent-%d", i)), reserve.WithTask(fmt.Sprintf("T%d", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkTryReserve_Beside1000 is a reserve of 5 patterns and its
// release in a space of 1,000 reservations, on a handle that knows it.
func BenchmarkTryReserve_Beside1000(b *testing.B) {
	e := newEnv(b)
	fill(b, e, "repo", 1000)
	s := e.spaces("bench")
	ctx := context.Background()
	pats := []string{"src/bench/**", "docs/bench.md", "cmd/bench/*.go", "internal/bench/**", "test/bench_test.go"}
	var tr, rl time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		r, err := s.TryReserve(ctx, "repo", pats, reserve.WithoutKeepAlive())
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := r.Release(ctx); err != nil {
			b.Fatal(err)
		}
		tr += t1.Sub(t0)
		rl += time.Since(t1)
	}
	b.ReportMetric(float64(tr.Nanoseconds())/float64(b.N), "reserve-ns/op")
	b.ReportMetric(float64(rl.Nanoseconds())/float64(b.N), "release-ns/op")
}
