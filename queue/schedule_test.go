package queue_test

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// scheduled is the run-at times of the tasks schedule name added.
func scheduled(t *testing.T, qs *queue.Queues, q, name string) []time.Time {
	t.Helper()
	snap, err := qs.Snapshot(ctxT(t, 10*time.Second), q, queue.WithTasks())
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, task := range snap.Tasks {
		if task.Schedule != name {
			continue
		}
		if !strings.HasPrefix(task.ID, name+"-") || task.RunAt.IsZero() {
			t.Fatalf("task %s of schedule %s: run_at %v", task.ID, name, task.RunAt)
		}
		out = append(out, task.RunAt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// A schedule every second adds one task a tick, each a second after the
// last, with two workers (one dispatches); its tasks run. Removed, it adds
// no more.
func TestSchedule_EverySecondAddsEachTickOnce(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.TTL = queue.Duration(time.Second) })
	ctx := ctxT(t, 30*time.Second)
	s, created, err := qs.AddSchedule(ctx, queue.Schedule{Queue: "q", Name: "tick", Every: queue.Duration(time.Second), Key: "k", Payload: []byte("p")})
	if err != nil || !created {
		t.Fatalf("add schedule: %v, %v", created, err)
	}
	if _, again, err := qs.AddSchedule(ctx, queue.Schedule{Queue: "q", Name: "tick", Every: queue.Duration(time.Second), Key: "k", Payload: []byte("p")}); err != nil || again {
		t.Fatalf("the same schedule again: created %v, %v; want nothing done", again, err)
	}
	if _, _, err := qs.AddSchedule(ctx, queue.Schedule{Queue: "q", Name: "tick", Every: queue.Duration(time.Minute), Key: "k"}); !errors.Is(err, queue.ErrScheduleExists) {
		t.Fatalf("another schedule of that name: %v, want ErrScheduleExists", err)
	}
	rec := newRecorder(false)
	for _, h := range []string{"h1", "h2"} {
		w, _ := e.queues(h).NewWorker("q", rec)
		start(t, w)
	}
	time.Sleep(3500 * time.Millisecond)
	if err := qs.RemoveSchedule(ctx, "q", "tick"); err != nil {
		t.Fatal(err)
	}
	ticks := scheduled(t, qs, "q", "tick")
	if len(ticks) < 3 {
		t.Fatalf("%d ticks in 3.5 s, want 3 or more: %v", len(ticks), ticks)
	}
	for i, tick := range ticks {
		if tick.Truncate(time.Second) != tick || !tick.After(s.CreatedAt.Add(-time.Second)) {
			t.Errorf("tick %s: not on a second after the schedule was made", tick)
		}
		if i > 0 && tick.Sub(ticks[i-1]) != time.Second {
			t.Errorf("ticks %s then %s: want one a second, none missing", ticks[i-1], tick)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	if after := scheduled(t, qs, "q", "tick"); len(after) > len(ticks)+1 {
		t.Errorf("%d ticks after the schedule was removed, had %d", len(after), len(ticks))
	}
	for _, tick := range ticks {
		id := "tick-" + tick.UTC().Format("20060102T150405Z")
		waitState(t, qs, "q", id, queue.StateDone, 5*time.Second)
	}
}

// Ticks missed while no worker ran are added once (the latest of them)
// with catch-up one, not at all with none; ticks late by less than twice
// the TTL are all added.
func TestSchedule_CatchUp(t *testing.T) {
	e := newEnv(t)
	qs := e.queues("h1")
	e.create(qs, "q", func(c *queue.Config) { c.TTL = queue.Duration(time.Second) }) // late: up to 3 s
	ctx := ctxT(t, 30*time.Second)
	for _, c := range []string{queue.CatchUpOne, queue.CatchUpNone} {
		if _, _, err := qs.AddSchedule(ctx, queue.Schedule{Queue: "q", Name: c, Every: queue.Duration(time.Second), Key: c, CatchUp: c}); err != nil {
			t.Fatal(err)
		}
	}
	made, err := qs.GetSchedule(ctx, "q", queue.CatchUpOne)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second) // no worker: ticks are missed
	started := time.Now()
	w, _ := qs.NewWorker("q", newRecorder(false))
	start(t, w)
	// Read in the middle of a second, at least 600 ms after the start:
	// every tick up to that second's start is written by then (a tick is
	// written a few milliseconds after it), none after it counts.
	at := time.Now().Add(600 * time.Millisecond)
	if mid := at.Truncate(time.Second).Add(500 * time.Millisecond); mid.After(at) {
		at = mid
	} else {
		at = mid.Add(time.Second)
	}
	time.Sleep(time.Until(at))
	upTo := func(ticks []time.Time) []time.Time {
		return slices.DeleteFunc(ticks, func(tick time.Time) bool { return tick.After(at.Truncate(time.Second)) })
	}
	one, none := upTo(scheduled(t, qs, "q", queue.CatchUpOne)), upTo(scheduled(t, qs, "q", queue.CatchUpNone))
	// Both schedules tick on the same seconds and were looked at in the
	// same pass: none has the late ticks, one has the same and, just
	// before them, the latest missed one; the missed ticks before it are
	// in neither.
	t.Logf("schedule made at %s, worker at %s; one: %v; none: %v", made.Written, started, one, none)
	if len(none) < 2 || len(one) != len(none)+1 {
		t.Fatalf("catch-up one: %d ticks, none: %d; want the late ones (2 or more) in both and one more in one", len(one), len(none))
	}
	for i := 1; i < len(none); i++ {
		if none[i].Sub(none[i-1]) != time.Second {
			t.Errorf("late ticks %s then %s: want one a second", none[i-1], none[i])
		}
	}
	for i := range none {
		if !one[i+1].Equal(none[i]) {
			t.Errorf("late tick %d: %s with catch-up one, %s with none; want the same", i, one[i+1], none[i])
		}
	}
	if missed := one[0]; none[0].Sub(missed) != time.Second || missed.Sub(made.Written) < 2*time.Second {
		t.Errorf("catch-up one's missed tick %s: want the one just before %s, with skipped ticks between it and the schedule's making (%s)", missed, none[0], made.Written)
	}
	if none[0].Sub(made.Written) < 3*time.Second {
		t.Errorf("catch-up none's first tick %s, %s after the schedule was made: the missed ticks should be skipped", none[0], none[0].Sub(made.Written))
	}
}
