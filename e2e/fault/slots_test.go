package main

import (
	"testing"
	"time"
)

// A session answered lost after garbage landed over it is not counted as
// an acknowledged session lost, however late the garbage landed, even when
// the harness finds it only after the holder saw it. Garbage published
// after the answer excuses nothing, nor does its absence.
func TestSlots_GarbageFoundLateExcusesTheLoss(t *testing.T) {
	for _, c := range []struct {
		name string
		// garbage, given the renewal's start and the loss's answer.
		garbage func(h *harness, renewed, answered time.Time)
		before  bool // the harness knows of it before the answer
		lost    int
	}{
		{"garbage found over it before the answer", func(h *harness, _, _ time.Time) {
			// What removeGarbage does when it finds the junk live, after
			// the renewal: the publish's own marks were long before.
			h.markCorrupt("baton-sessions", "c2")
		}, true, 0},
		{"garbage published before the renewal, found after the answer", func(h *harness, renewed, answered time.Time) {
			h.garbageLanded("c2", renewed.Add(-3*time.Second), answered.Add(400*time.Millisecond))
		}, false, 0},
		{"garbage published after the answer", func(h *harness, _, answered time.Time) {
			h.garbageLanded("c2", answered.Add(time.Second), answered.Add(2*time.Second))
		}, false, 1},
		{"garbage that was gone before the renewal", func(h *harness, renewed, _ time.Time) {
			h.garbageLanded("c2", renewed.Add(-3*time.Second), renewed.Add(-2*time.Second))
		}, false, 1},
		{"no garbage", func(*harness, time.Time, time.Time) {}, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &harness{slots: map[string]*slotState{}, stats: newStats()}
			t0 := time.Now().Add(-5 * time.Second)
			renewed := t0.Add(time.Second)
			h.joined("c2", "cli2", 7, result{start: t0, end: t0.Add(10 * time.Millisecond)})
			h.renewed("c2", "cli2", 7, result{start: renewed, end: renewed.Add(5 * time.Millisecond)})
			answered := time.Now()
			if c.before {
				c.garbage(h, renewed, answered)
			}
			h.gone("c2", "cli2", 7, result{code: 3, start: answered, end: answered}, "commit", false)
			if !c.before {
				c.garbage(h, renewed, answered)
			}
			if got := len(h.stats.lost); got != 0 {
				t.Fatalf("%d sessions counted lost before judgeLosses: %q", got, h.stats.lost)
			}
			h.judgeLosses()
			if got := len(h.stats.lost); got != c.lost {
				t.Errorf("%d sessions counted lost, want %d: %q", got, c.lost, h.stats.lost)
			}
		})
	}
}
