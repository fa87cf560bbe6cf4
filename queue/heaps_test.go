package queue

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A key's FIFO gives its tasks back in the order of the revisions that
// added them, whatever the order they were pushed in.
func TestTaskHeap_GivesTasksBackInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var h taskHeap
		var want []uint64
		for range rng.IntN(40) {
			seq := rng.Uint64N(100)
			want = append(want, seq)
			h.push(fifoItem{t: &itask{seq: seq}})
		}
		slices.Sort(want)
		var got []uint64
		for h.Len() > 0 {
			got = append(got, h[0].t.seq)
			h.popTop()
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: %v, want %v", round, got, want)
		}
	}
}
