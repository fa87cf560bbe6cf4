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

// A key held for its rate window whose time has come is let back by the
// loop's next turn, and the loop does not sleep for a time already past:
// a queue whose workers are all busy does not spin on a held key.
func TestKeyRate_HeldKeyWakesOnceNotInALoop(t *testing.T) {
	now := time.Now()
	cfg := DefaultConfig("q")
	cfg.KeyRate = &RateLimit{Max: 1, Period: Duration(time.Second)}
	d := &dispatcher{x: newIndex("q", cfg)}
	d.x.synced = true
	l := &loop{w: &Worker{maxTasks: 1, idle: time.Hour}, d: d, started: 1}
	ks := d.keyState("k")
	ks.until = now.Add(-time.Millisecond) // its window freed a moment ago
	d.krates.wake = wakeHeap{{at: ks.until, key: "k"}}
	d.x.holdKey("k", true)
	if w := l.wake(now); w < time.Millisecond {
		t.Fatalf("wake in %s for a key whose time has come", w)
	}
	d.wakeKeys(now) // the loop's next turn
	if d.x.rateHeld["k"] {
		t.Fatal("the key is still held after its time")
	}
	if w := l.wake(now); w < time.Minute {
		t.Fatalf("wake in %s with no key held, want a long sleep", w)
	}
	ks.until = now.Add(300 * time.Millisecond)
	d.krates.wake = wakeHeap{{at: ks.until, key: "k"}}
	d.x.holdKey("k", true)
	if w := l.wake(now); w < 290*time.Millisecond || w > 310*time.Millisecond {
		t.Fatalf("wake in %s, want the key's time 300ms ahead", w)
	}
}
