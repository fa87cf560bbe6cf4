package main

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestQuantilesAreNearestRank(t *testing.T) {
	var s samples
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i))
	}
	if got := s.median(); got != 50 {
		t.Errorf("median of 1..100 = %d, want 50", got)
	}
	if got := s.p99(); got != 99 {
		t.Errorf("p99 of 1..100 = %d, want 99", got)
	}
	if got := (samples{7}).p99(); got != 7 {
		t.Errorf("p99 of one sample = %d", got)
	}
	if got := (samples{}).median(); got != 0 {
		t.Errorf("median of none = %d", got)
	}
	if s[0] != 100 {
		t.Error("quantile sorted the caller's samples")
	}
}

// The worker rows' medians: of floats as of samples, each measure taken
// apart, and a ratio the median of the rounds' own ratios.
func TestWorkerRoundMedians(t *testing.T) {
	if got := medianFloat([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median of 3 1 2 = %v", got)
	}
	if got := medianFloat([]float64{4, 1}); got != 1 {
		t.Errorf("median of 4 1 = %v, want the lower middle as samples.median", got)
	}
	if got := medianFloat(nil); got != 0 {
		t.Errorf("median of none = %v", got)
	}
	m := medianRun([]workerRun{
		{n: 4, rate: 2000, cpuPer1k: 900, serverPer1k: 400},
		{n: 4, rate: 1500, cpuPer1k: 700, serverPer1k: 450},
		{n: 4, rate: 1800, cpuPer1k: 800, serverPer1k: 300},
	})
	if m.n != 4 || m.rate != 1800 || m.cpuPer1k != 800 || m.serverPer1k != 400 {
		t.Errorf("medianRun = %+v", m)
	}
	// Round 1 ran slow for both counts: its ratio is like the others'.
	a, b := []float64{2000, 1000, 2100}, []float64{1800, 900, 1995}
	if got := medianRatio(3, func(r int) float64 { return b[r] / a[r] }); got != 0.9 {
		t.Errorf("median ratio = %v, want 0.9", got)
	}
}

func TestWorkerSpread(t *testing.T) {
	ms := time.Millisecond
	cpu0 := []time.Duration{100 * ms, 10 * ms, 10 * ms, 50 * ms}
	cpu1 := []time.Duration{900 * ms, 30 * ms, 14 * ms, 450 * ms}
	ended0 := []int64{10, 5, 0, 7}
	ended1 := []int64{900, 5, 0, 400}
	s := spreadOf(cpu0, cpu1, ended0, ended1, 2*time.Second)
	// Processes 1 and 2 ended nothing in the window (1 ended tasks before
	// it): 24 ms of CPU in 2 s.
	if s.working != 2 || s.idle != 2 || s.idleCPU != 12*ms {
		t.Errorf("spread = %+v, want 2 working, 2 idle using 12ms a second", s)
	}
}

func TestWritesPer(t *testing.T) {
	got := writesPer([2]uint64{100, 50}, [2]uint64{540, 250}, 100)
	if got != [2]float64{4.4, 2} {
		t.Errorf("writes per task = %v, want [4.4 2]", got)
	}
	// A failed reading (0) says unknown, not the whole stream.
	if got := writesPer([2]uint64{0, 50}, [2]uint64{540, 0}, 100); got != [2]float64{-1, -1} {
		t.Errorf("writes per task with failed readings = %v, want [-1 -1]", got)
	}
}

func TestOrderCyclesThroughEveryPermutation(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		perms := permutations(n)
		want := 1
		for k := 2; k <= n; k++ {
			want *= k
		}
		if len(perms) != want {
			t.Fatalf("permutations(%d): %d, want %d", n, len(perms), want)
		}
		// Over one cycle each side runs right after each other side equally
		// often (within a round).
		after := map[[2]int]int{}
		seen := map[string]bool{}
		for i := range perms {
			p := order(i, n)
			sorted := slices.Sorted(slices.Values(p))
			for j, v := range sorted {
				if v != j {
					t.Fatalf("order(%d, %d) = %v: not a permutation", i, n, p)
				}
			}
			seen[fmt.Sprint(p)] = true
			for j := 1; j < len(p); j++ {
				after[[2]int{p[j-1], p[j]}]++
			}
		}
		if len(seen) != want {
			t.Errorf("n=%d: one cycle gave %d distinct orders, want %d", n, len(seen), want)
		}
		for a := range n {
			for b := range n {
				if a != b && after[[2]int{a, b}] != after[[2]int{0, 1}] {
					t.Errorf("n=%d: %d after %d %d times, 1 after 0 %d times", n, b, a, after[[2]int{a, b}], after[[2]int{0, 1}])
				}
			}
		}
	}
}

func TestGoals(t *testing.T) {
	ms := float64(time.Millisecond)
	cases := []struct {
		name string
		r    row
		has  bool
		met  bool
	}{
		{"no goal", row{baton: val(1)}, false, false},
		{"ratio to floor met", row{baton: val(110), floor: val(100), goal: []cond{toFloorAtMost(1.2)}}, true, true},
		{"ratio to floor missed", row{baton: val(130), floor: val(100), goal: []cond{toFloorAtMost(1.2)}}, true, false},
		{"both ratios, one missed", row{baton: val(110), floor: val(100), etcd: val(300), goal: []cond{toFloorAtMost(1.2), toEtcdAtMost(0.25)}}, true, false},
		{"both ratios met", row{baton: val(110), floor: val(100), etcd: val(500), goal: []cond{toFloorAtMost(1.2), toEtcdAtMost(0.25)}}, true, true},
		{"at least", row{baton: val(30000), etcd: val(5000), goal: []cond{toEtcdAtLeast(3)}}, true, true},
		{"at least missed", row{baton: val(5000), etcd: val(5000), goal: []cond{toEtcdAtLeast(3)}}, true, false},
		{"absolute", row{baton: val(19 * ms), goal: []cond{batonAtMost(20*ms, unitDuration)}}, true, true},
		{"exact", row{baton: val(1), goal: []cond{batonIs(1, unitCount)}}, true, true},
		{"exact missed", row{baton: val(1.01), goal: []cond{batonIs(1, unitCount)}}, true, false},
		{"missing value", row{baton: missing("error"), goal: []cond{batonAtMost(1, unitCount)}}, true, false},
		{"missing peer", row{baton: val(1), goal: []cond{toEtcdAtMost(1)}}, true, false},
		{"broken invariant", row{baton: val(1), goal: []cond{batonAtMost(2, unitCount)}, broken: "two winners"}, true, false},
		{"times floor plus, met", row{baton: val(3.9 * ms), floor: val(2 * ms), goal: []cond{toFloorAtMostPlus(1.5, ms)}}, true, true},
		{"times floor plus, missed", row{baton: val(4.1 * ms), floor: val(2 * ms), goal: []cond{toFloorAtMostPlus(1.5, ms)}}, true, false},
		{"times floor plus, no floor", row{baton: val(ms), goal: []cond{toFloorAtMostPlus(1.5, ms)}}, true, false},
	}
	for _, c := range cases {
		has, met := c.r.met()
		if has != c.has || met != c.met {
			t.Errorf("%s: met() = %v, %v; want %v, %v", c.name, has, met, c.has, c.met)
		}
	}
}

func TestTableAndTally(t *testing.T) {
	rows := []row{
		{metric: "acquire median", unit: unitDuration, baton: dur(230 * time.Microsecond), floor: dur(200 * time.Microsecond), etcd: dur(920 * time.Microsecond),
			goal: []cond{toFloorAtMost(1.2), toEtcdAtMost(0.25)}},
		{metric: "status_100k median", unit: unitDuration, baton: dur(1500 * time.Millisecond), floor: dur(300 * time.Millisecond), etcd: missing("skipped"),
			goal: []cond{batonAtMost(float64(time.Second), unitDuration)}},
		{metric: "rss", unit: unitBytes, baton: val(20 << 20), floor: val(8 << 20), etcd: val(16 << 20)},
		{metric: "join ratio", unit: unitRatio, noRatios: true, baton: val(1.02), floor: val(1), etcd: val(1.5), goal: []cond{batonAtMost(1.1, unitRatio)}},
	}
	var b bytes.Buffer
	writeTable(&b, rows)
	want := `| metric | baton | floor | etcd | baton/floor | baton/etcd | goal | met |
|---|---|---|---|---|---|---|---|
| acquire median | 230 µs | 200 µs | 920 µs | 1.150 | 0.250 | baton/floor ≤ 1.2; baton/etcd ≤ 0.25 | yes |
| status_100k median | 1.50 s | 300.0 ms | skipped | 5.000 | — | baton ≤ 1.00 s | no |
| rss | 20.0 MiB | 8.0 MiB | 16.0 MiB | 2.500 | 1.250 | reported | — |
| join ratio | 1.020 | 1.000 | 1.500 | — | — | baton ≤ 1.100 | yes |
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	if met, goals := tally(rows); met != 2 || goals != 3 {
		t.Errorf("tally = %d of %d, want 2 of 3", met, goals)
	}
}

func TestEtcdctlTxnScripts(t *testing.T) {
	if got, want := etcdctlTxn("create", "/cli/a", "v", 0), "create(\"/cli/a\") = \"0\"\n\nput /cli/a v\n\n\n"; got != want {
		t.Errorf("create: %q, want %q", got, want)
	}
	if got, want := etcdctlTxn("update", "/cli/a", "v", 42), "mod(\"/cli/a\") = \"42\"\n\nput /cli/a v\n\n\n"; got != want {
		t.Errorf("update: %q, want %q", got, want)
	}
	if got, want := etcdctlTxn("delete", "/cli/a", "", 43), "mod(\"/cli/a\") = \"43\"\n\ndel /cli/a\n\n\n"; got != want {
		t.Errorf("delete: %q, want %q", got, want)
	}
	rev, ok, err := parseTxn(`{"header":{"cluster_id":1,"member_id":2,"revision":17,"raft_term":2},"succeeded":true,"responses":[]}`)
	if err != nil || rev != 17 || !ok {
		t.Errorf("parseTxn = %d, %v, %v", rev, ok, err)
	}
	if _, _, err := parseTxn("Error: context deadline exceeded"); err == nil {
		t.Error("parseTxn of an error message: no error")
	}
}

func TestParsePeak(t *testing.T) {
	kib, err := parsePeak("something the command said\npeakrss: 20992 KiB\n")
	if err != nil || kib != 20992 {
		t.Errorf("parsePeak = %d, %v", kib, err)
	}
	if _, err := parsePeak("no peak here"); err == nil {
		t.Error("parsePeak without a peak line: no error")
	}
}
