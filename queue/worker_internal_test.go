package queue

import (
	"testing"
	"time"
)

// The loop sleeps until something can change, never on a deadline already
// past: a worker idles without spinning.
func TestLoop_WakesOnlyForDeadlinesAhead(t *testing.T) {
	now := time.Now()
	l := &loop{w: &Worker{maxTasks: 1, idle: 100 * time.Millisecond}, d: &dispatcher{x: newIndex("q", DefaultConfig("q"))}}
	l.ready, l.readyAt = true, now.Add(-time.Second) // the idle deadline has passed...
	l.started = 1                                    // ...but a task was taken: it no longer applies
	l.paused = now.Add(-time.Second)                 // a pause after a failed claim, over
	if d := l.wake(now); d < time.Minute {
		t.Fatalf("wake in %s with only past deadlines, want a long sleep", d)
	}
	l.started = 0
	l.readyAt = now.Add(-50 * time.Millisecond)
	if d := l.wake(now); d < 40*time.Millisecond || d > 60*time.Millisecond {
		t.Fatalf("wake in %s, want the idle deadline 50ms ahead", d)
	}
	l.paused = now.Add(10 * time.Millisecond)
	if d := l.wake(now); d > 10*time.Millisecond {
		t.Fatalf("wake in %s, want the end of the pause", d)
	}
}
