package main

import (
	"testing"
	"time"
)

// A session answered lost after garbage landed over it is not counted as
// an acknowledged session lost, however late the garbage landed: the mark
// set when the garbage is found and removed covers it. Without any mark,
// the same loss is counted.
func TestSlots_GarbageFoundLateExcusesTheLoss(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt bool
		lost    int
	}{{"garbage found over it", true, 0}, {"no garbage", false, 1}} {
		t.Run(c.name, func(t *testing.T) {
			h := &harness{slots: map[string]*slotState{}, stats: newStats()}
			t0 := time.Now().Add(-5 * time.Second)
			h.joined("c2", "cli2", 7, result{start: t0, end: t0.Add(10 * time.Millisecond)})
			h.renewed("c2", "cli2", 7, result{start: t0.Add(time.Second), end: t0.Add(time.Second + 5*time.Millisecond)})
			if c.corrupt {
				// What removeGarbage does when it finds the junk live, after
				// the renewal: the publish's own marks were long before.
				h.markCorrupt("baton-sessions", "c2")
			}
			h.gone("c2", "cli2", 7, result{code: 3, start: time.Now(), end: time.Now()}, "commit", false)
			if got := len(h.stats.lost); got != c.lost {
				t.Errorf("%d sessions counted lost, want %d: %q", got, c.lost, h.stats.lost)
			}
		})
	}
}
