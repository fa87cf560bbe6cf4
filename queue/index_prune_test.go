package queue

import (
	"fmt"
	"testing"
	"time"
)

// A million distinct keys, each with one task that runs and ends, in
// batches of 10,000 waiting at once: the view never holds more keys than
// wait or run, and once the queue's retention and the tombstones' TTL have
// passed, nothing of any of them is left. (With the race detector, which
// has nothing to find in one goroutine, a tenth: make test runs it in full
// without.)
func TestIndex_AMillionKeysLeaveNothingBehind(t *testing.T) {
	keys, batch := 1_000_000, 10_000
	if testing.Short() || raceOn {
		keys = 100_000
	}
	cfg := DefaultConfig("q")
	cfg.MaxActive = 16
	cfg.Retention = Duration(time.Hour)
	v := newView(t, cfg)
	most := 0
	for b := 0; b < keys; b += batch {
		for i := b; i < b+batch; i++ {
			v.add(fmt.Sprint("t", i), fmt.Sprint("k", i), Normal)
		}
		most = max(most, len(v.x.keys))
		if n := len(v.order()); n != batch {
			t.Fatalf("batch at %d: %d tasks ran, want %d", b, n, batch)
		}
		if len(v.x.keys) != 0 {
			t.Fatalf("after batch at %d: %d keys left in the view, want 0", b, len(v.x.keys))
		}
		v.now = v.now.Add(time.Second)
	}
	if most != batch {
		t.Errorf("the view held %d keys at most, want %d (those waiting)", most, batch)
	}
	if v.x.rested.len() == 0 {
		t.Fatal("no last service kept within the retention")
	}
	v.now = v.now.Add(time.Hour + time.Second)
	v.x.prune(v.now)
	left := map[string]int{
		"keys": len(v.x.keys), "tasks": len(v.x.tasks), "rested": v.x.rested.len(), "slotGone": v.x.slotGone.len(),
		"active": len(v.x.active), "ahead": len(v.x.ahead), "slots": len(v.x.slots), "tokens": len(v.x.tokens),
		"suspects": len(v.x.suspects), "endings": len(v.x.endings), "sameHost": len(v.x.sameHost), "undecodable": len(v.x.undecodable),
		"ready": v.x.ready[0].Len() + v.x.ready[1].Len() + v.x.ready[2].Len(), "due": v.x.due.Len(),
		"rested order": len(v.x.rested.order) - v.x.rested.head, "slotGone order": len(v.x.slotGone.order) - v.x.slotGone.head,
	}
	for what, n := range left {
		if n != 0 {
			t.Errorf("%d %s left after every task ended and the retention passed", n, what)
		}
	}
}

// A key forgotten once its task ended keeps its last service for the
// retention: a new key still goes first; after the retention, it counts
// as never served.
func TestIndex_AForgottenKeyKeepsItsLastServiceForTheRetention(t *testing.T) {
	cfg := DefaultConfig("q")
	cfg.Retention = Duration(time.Minute)
	v := newView(t, cfg)
	v.add("A0", "A", Normal)
	pk, _ := v.claim()
	v.finish(pk)
	if _, ok := v.x.keys["A"]; ok {
		t.Fatal("key A still in the view with nothing left of it")
	}
	v.now = v.now.Add(30 * time.Second)
	v.add("A1", "A", Normal)
	v.add("B0", "B", Normal)
	if got := fmt.Sprint(v.order()); got != "[B0 A1]" {
		t.Fatalf("within the retention: order %s, want B (never served) before A", got)
	}
	v.now = v.now.Add(2 * time.Minute)
	v.x.prune(v.now)
	v.add("A2", "A", Normal) // A's last service is forgotten: A and C are equal
	v.add("C0", "C", Normal)
	if got := fmt.Sprint(v.order()); got != "[A2 C0]" {
		t.Fatalf("after the retention: order %s, want the oldest task first", got)
	}
}

// A key whose lock is held by someone else (baton run) stays in the view
// while the lock lives, though it has no task.
func TestIndex_AKeyWithALiveLockIsKept(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	v.add("A0", "A", Normal)
	slot := v.x.cfg.Slot("A", 0)
	v.lock(slot, 0)
	v.task(Task{ID: "A0", Key: "A", State: StateCancelled})
	if _, ok := v.x.keys["A"]; !ok {
		t.Fatal("key A forgotten while its lock lives")
	}
	v.unlock(slot)
	if _, ok := v.x.keys["A"]; ok {
		t.Fatal("key A kept once its lock is gone and its task ended")
	}
	if v.x.slotLast(slot) == 0 {
		t.Fatal("the lock's tombstone revision is not kept for the next claim")
	}
}

func TestExpiring(t *testing.T) {
	e := newExpiring[int]()
	t0 := time.Unix(0, 0)
	e.set("a", 1, t0)
	e.set("b", 2, t0.Add(time.Second))
	e.set("a", 3, t0.Add(2*time.Second)) // a set again: it lives on
	e.expire(t0.Add(11*time.Second+time.Millisecond), 10*time.Second)
	if v, ok := e.get("a"); !ok || v != 3 {
		t.Fatalf("a = %d, %v; want 3, true", v, ok)
	}
	if _, ok := e.get("b"); ok {
		t.Fatal("b did not expire")
	}
	e.delete("a")
	e.set("a", 4, t0.Add(20*time.Second))
	e.expire(t0.Add(25*time.Second), 10*time.Second)
	if v, _ := e.get("a"); v != 4 {
		t.Fatalf("a = %d after delete and set; want 4", v)
	}
	e.expire(t0.Add(31*time.Second), 10*time.Second)
	if e.len() != 0 || len(e.order)-e.head != 0 {
		t.Fatalf("%d entries and %d in order left", e.len(), len(e.order)-e.head)
	}
}
