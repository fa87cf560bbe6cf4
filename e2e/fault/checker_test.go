package main

import (
	"strings"
	"testing"
	"time"
)

func TestChecker_AcceptsOnlyTheLargestFenceAndFlagsASharedOne(t *testing.T) {
	c := newChecker()
	t0 := time.Now()
	steps := []struct {
		fence  uint64
		writer string
		want   bool
	}{
		{5, "a/1", true},
		{5, "a/1", true},  // the same holder again
		{7, "b/2", true},  // a later holder
		{5, "a/1", false}, // the former holder, late: refused
		{7, "b/2", true},
		{0, "c/3", false}, // no fence at all
		{7, "d/4", true},  // accepted (the fence is current) but shared: a violation
	}
	for i, s := range steps {
		if got := c.write("k", s.fence, s.writer, t0.Add(time.Duration(i)*time.Second)); got != s.want {
			t.Errorf("step %d: write(%d, %s) = %v, want %v", i, s.fence, s.writer, got, s.want)
		}
	}
	acc, rej, v := c.counts()
	if acc != 5 || rej != 2 {
		t.Errorf("accepted %d, rejected %d; want 5 and 2", acc, rej)
	}
	if len(v) != 2 || !strings.Contains(v[0], "without a fence") || !strings.Contains(v[1], "fence 7 accepted from b/2 and from d/4") {
		t.Errorf("violations %q", v)
	}
	// Another key is a resource of its own.
	if !c.write("other", 1, "e/5", t0) {
		t.Error("a first write to another key was refused")
	}
}

func TestChecker_LastWriteAndLongestGap(t *testing.T) {
	c := newChecker()
	t0 := time.Now()
	c.write("k", 3, "lead-1/10", t0)
	c.write("k", 3, "lead-1/10", t0.Add(100*time.Millisecond))
	c.write("k", 9, "lead-2/11", t0.Add(2*time.Second))
	c.write("k", 3, "lead-1/10", t0.Add(3*time.Second)) // refused, but still an attempt
	if last, top := c.lastWrite("lead-1", 3); !last.Equal(t0.Add(3*time.Second)) || top != 3 {
		t.Errorf("lastWrite(lead-1, 3) = %v, %d", last.Sub(t0), top)
	}
	if last, _ := c.lastWrite("lead-2", 3); !last.IsZero() {
		t.Errorf("lead-2 never wrote under fence 3, got %v", last)
	}
	if g := c.longestGap("k", t0, t0.Add(2500*time.Millisecond)); g != 1900*time.Millisecond {
		t.Errorf("longest gap %v, want 1.9s (from 0.1s to the write at 2s)", g)
	}
	if g := c.longestGap("none", t0, t0.Add(time.Second)); g != time.Second {
		t.Errorf("a key never written: gap %v, want the whole window", g)
	}
}
