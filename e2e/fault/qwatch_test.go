package main

import "testing"

func TestQwatchLedger_KeepsEachRevisionOnceInOrder(t *testing.T) {
	l := newQwatchLedger()
	task := func(key string, rev uint64, s float64, state string) qrev {
		return qrev{key: key, rev: rev, at: sec(s), live: true, task: &taskRev{state: state}}
	}
	// Out of order, and again (a watch started again brings each key's
	// latest revision once more).
	for _, r := range []qrev{task("fr.task.a", 20, 2, "active"), task("fr.task.a", 10, 1, "pending"), task("fr.task.b", 15, 1.5, "done"),
		task("fr.task.a", 20, 2, "active"), task("fq.task.c", 30, 3, "pending")} {
		l.observe(r)
	}
	v := l.snapshot()
	if a := v.byKey["fr.task.a"]; len(a) != 2 || a[0].rev != 10 || a[1].rev != 20 {
		t.Fatalf("fr.task.a: %+v", a)
	}
	if len(v.times) != 4 {
		t.Fatalf("times %+v", v.times)
	}
	if lo, hi := v.bounds(15); !lo.Equal(sec(1.5)) || !hi.Equal(sec(1.5)) {
		t.Errorf("bounds of a revision seen: %s, %s", lo, hi)
	}
	if lo, hi := v.bounds(25); !lo.Equal(sec(2)) || !hi.Equal(sec(3)) {
		t.Errorf("bounds of a revision not seen: %s, %s", lo, hi)
	}
	if lo, hi := v.bounds(99); !lo.Equal(sec(3)) || !hi.IsZero() {
		t.Errorf("bounds past the last: %s, %s", lo, hi)
	}
	if _, ok := v.timeOf(25); ok {
		t.Error("a time for a revision not seen")
	}
	if n := l.backlog("fr"); n != 1 {
		t.Errorf("backlog %d; want 1 (a active, b done)", n)
	}
	if ts := v.tasks("fr"); len(ts) != 2 || ts["a"] == nil {
		t.Errorf("tasks %v", ts)
	}
}
