package queue

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// view is an index fed with entries made up by the test, as the watches
// would deliver them, with revisions that only grow.
type view struct {
	t   *testing.T
	x   *index
	rev uint64
	now time.Time
}

func newView(t *testing.T, cfg Config) *view {
	v := &view{t: t, x: newIndex(cfg.Queue, cfg), now: time.Unix(1_000_000, 0)}
	v.x.myHost, v.x.myPID = "here", 1
	v.x.markSynced(0)
	return v
}

func (v *view) next() uint64 { v.rev++; return v.rev }

// task delivers task t at a new revision (its first if seq is 0) and
// returns that revision.
func (v *view) task(t Task) uint64 {
	v.t.Helper()
	t.Queue = v.x.q
	if t.Priority == "" {
		t.Priority = Normal
	}
	if t.State == "" {
		t.State = StatePending
	}
	data, err := encodeTask(&t)
	if err != nil {
		v.t.Fatal(err)
	}
	rev := v.next()
	v.x.applyQueue(kv.Entry{Key: taskKey(v.x.q, t.ID), Value: data, Revision: rev, Created: v.now}, v.now)
	return rev
}

func (v *view) add(id, key string, p Priority) uint64 {
	return v.task(Task{ID: id, Key: key, Priority: p})
}

// lock delivers a live session on slot with fence (0: this revision).
func (v *view) lock(slot string, fence uint64) uint64 {
	v.t.Helper()
	data, _ := json.Marshal(session.Record{Slot: slot, Host: "elsewhere", PID: 9, Fence: fence})
	rev := v.next()
	v.x.applySession(kv.Entry{Key: slot, Value: data, Revision: rev, Created: v.now, TTL: 30 * time.Second}, v.now)
	return rev
}

func (v *view) unlock(slot string) {
	v.x.applySession(kv.Entry{Key: slot, Revision: v.next(), Op: kv.OpDelete, Created: v.now}, v.now)
}

// claim picks, then tells the view the claim landed: the task active under
// a lock whose fence is the revision after, the key served at the claim's
// revision. It returns the pick.
func (v *view) claim() (pick, bool) {
	v.t.Helper()
	pk, ok := v.x.next()
	if !ok {
		return pk, false
	}
	fence := v.next()
	s := &session.Session{Revision: fence}
	s.Slot, s.Fence = pk.slot, fence
	var tok *token
	if pk.token >= 0 {
		tok = &token{Queue: v.x.q, Index: pk.token, Task: pk.id, rev: v.next()}
	}
	claimRev := v.next()
	v.x.release(pk, &claimed{sess: s, tok: tok, task: &Task{ID: pk.id, Queue: v.x.q, Key: pk.key.name, Priority: Priority([]string{"high", "normal", "low"}[pk.task.prio]),
		State: StateActive, Attempts: 1, Seq: pk.task.seq, Revision: claimRev,
		Run: &Run{Slot: pk.slot, Lane: pk.lane, Fence: fence, Token: pk.token, Instance: "me", Claimed: claimRev}}}, v.now)
	return pk, true
}

// finish delivers the end of the task run under pk: done, lock and token
// gone.
func (v *view) finish(pk pick) {
	v.t.Helper()
	v.task(Task{ID: pk.id, Key: pk.key.name, State: StateDone, Seq: pk.task.seq, Result: &Result{Claimed: pk.key.served}})
	v.unlock(pk.slot)
	if pk.token >= 0 {
		v.x.applyQueue(kv.Entry{Key: tokenKey(v.x.q, pk.token), Op: kv.OpDelete, Revision: v.next()}, v.now)
	}
}

// order claims and finishes until nothing can run, and returns the ids.
func (v *view) order() []string {
	var ids []string
	for {
		pk, ok := v.claim()
		if !ok {
			return ids
		}
		ids = append(ids, pk.id)
		v.finish(pk)
	}
}

func TestIndex_RoundRobinByLastServiceThenOldestTask(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	for _, k := range []string{"A", "B", "C"} {
		for i := range 3 {
			v.add(fmt.Sprintf("%s%d", k, i), k, Normal)
		}
	}
	if got := strings.Join(v.order(), " "); got != "A0 B0 C0 A1 B1 C1 A2 B2 C2" {
		t.Fatalf("order %s", got)
	}
}

func TestIndex_AKeyServedLatelyWaitsBehindOthers(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	v.add("A0", "A", Normal)
	pk, _ := v.claim()
	v.finish(pk)
	// A was served; B is new: B first although A's task is older.
	v.add("A1", "A", Normal)
	v.add("B0", "B", Normal)
	if got := strings.Join(v.order(), " "); got != "B0 A1" {
		t.Fatalf("order %s, want B (never served) before A", got)
	}
}

func TestIndex_PriorityFirstThenRoundRobin(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	v.add("n1", "A", Normal)
	v.add("l1", "B", Low)
	v.add("n2", "C", Normal)
	v.add("h1", "D", High)
	v.add("h2", "A", High) // a high task of a key with a normal one waiting
	// High first: D and A never served, D's high task is the older. Then
	// normal: C (never served) before A (served by h2). Low last.
	if got := strings.Join(v.order(), " "); got != "h1 h2 n2 n1 l1" {
		t.Fatalf("order %s", got)
	}
}

func TestIndex_AHeldKeyIsSkippedAndComesBackWhenFreed(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	v.add("a", "A", High)
	v.add("b", "B", Normal)
	v.lock("A", 0) // baton run holds slot A
	pk, ok := v.claim()
	if !ok || pk.id != "b" {
		t.Fatalf("picked %v %v, want b: A is held", pk.id, ok)
	}
	if _, ok := v.claim(); ok {
		t.Fatal("picked while the only key left is held")
	}
	v.unlock("A")
	if pk, ok := v.claim(); !ok || pk.id != "a" {
		t.Fatalf("picked %v %v once A was freed, want a", pk.id, ok)
	}
}

func TestIndex_LanesOfPerKeyAndSlotNames(t *testing.T) {
	cfg := DefaultConfig("q")
	cfg.PerKey, cfg.SlotPrefix = 2, "p-"
	v := newView(t, cfg)
	for i := range 3 {
		v.add(fmt.Sprintf("t%d", i), "K", Normal)
	}
	a, _ := v.claim()
	b, _ := v.claim()
	if a.slot != "p-K" || b.slot != "p-K.1" {
		t.Fatalf("slots %s and %s, want p-K and p-K.1", a.slot, b.slot)
	}
	if _, ok := v.claim(); ok {
		t.Fatal("a third task of K ran with per_key 2")
	}
	// Lane 1 of K is lane 0 of key "K.1" too: K.1 runs on its own lane 1
	// while that slot is held (over-exclusion, never under).
	v.add("other", "K.1", Normal)
	if pk, ok := v.claim(); !ok || pk.slot != "p-K.1.1" {
		t.Fatalf("key K.1: picked %v on slot %q, want its lane 1 (p-K.1.1)", ok, pk.slot)
	}
	v.finish(b)
	if pk, ok := v.claim(); !ok || pk.slot != "p-K.1" || pk.id != "t2" {
		t.Fatalf("picked %s on %q once lane 1 of K was freed, want t2 on p-K.1", pk.id, pk.slot)
	}
}

func TestIndex_CapacityAndTokens(t *testing.T) {
	cfg := DefaultConfig("q")
	cfg.MaxActive = 2
	v := newView(t, cfg)
	for i := range 4 {
		v.add(fmt.Sprintf("t%d", i), fmt.Sprintf("k%d", i), Normal)
	}
	a, _ := v.claim()
	b, _ := v.claim()
	if a.token == b.token || a.token < 0 || b.token < 0 || a.token > 1 || b.token > 1 {
		t.Fatalf("tokens %d and %d, want 0 and 1", a.token, b.token)
	}
	if _, ok := v.x.next(); ok {
		t.Fatal("a third task was picked with max_active 2")
	}
	v.finish(a)
	pk, ok := v.x.next()
	if !ok || pk.token != a.token {
		t.Fatalf("picked %v with token %d, want the freed token %d", ok, pk.token, a.token)
	}
	v.x.release(pk, nil, v.now)
	// max_active was 6 and is 2 now: a token a worker still holds above the
	// new max counts, so nothing more starts until fewer run.
	data, _ := json.Marshal(token{Queue: "q", Index: 5, Task: "x", Instance: "other"})
	v.x.applyQueue(kv.Entry{Key: tokenKey("q", 5), Value: data, Revision: v.next()}, v.now)
	if pk, ok := v.x.next(); ok {
		t.Fatalf("picked %s with token %d while a token above max_active is held", pk.id, pk.token)
	}
}

func TestIndex_AFailedTaskWaitsItsBackoff(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	v.task(Task{ID: "f", Key: "K", State: StateFailed, Attempts: 1, RetryAfter: Duration(time.Minute)})
	if _, ok := v.x.next(); ok {
		t.Fatal("a failed task ran before its backoff")
	}
	if due := v.x.nextDue(); !due.Equal(v.now.Add(time.Minute)) {
		t.Fatalf("due %v, want a minute after its write", due)
	}
	v.x.advance(v.now.Add(time.Minute))
	if pk, ok := v.x.next(); !ok || pk.id != "f" {
		t.Fatal("the failed task did not run after its backoff")
	}
}

// A task is put back only once the lock it ran under is provably gone: the
// sessions watch has delivered a revision at or past the lock's fence and
// the slot holds no live session with that fence.
func TestIndex_OrphansOnlyOnceTheLockIsProvablyGone(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	fence := v.next() + 10 // a lock whose creation the sessions watch has not delivered
	v.task(Task{ID: "t", Key: "K", State: StateActive, Attempts: 1, Run: &Run{Slot: "K", Fence: fence}})
	if o := v.x.orphans(v.now); len(o) != 0 {
		t.Fatalf("orphans %v before the lock's creation was delivered", o)
	}
	v.rev = fence - 1
	v.lock("K", 0) // creation, fence == revision
	if o := v.x.orphans(v.now); len(o) != 0 {
		t.Fatalf("orphans %v while the lock lives", o)
	}
	v.unlock("K")
	if o := v.x.orphans(v.now); len(o) != 1 || o[0].id != "t" || o[0].fence != fence {
		t.Fatalf("orphans %v once the lock was deleted", o)
	}
	// It stays a suspect until a worker starts putting it back.
	if o := v.x.orphans(v.now); len(o) != 1 {
		t.Fatalf("orphans %v on a second look, want it still", o)
	}
	v.x.settling("t")
	// Another holder's lock with another fence proves it gone too.
	v.task(Task{ID: "u", Key: "L", State: StateActive, Attempts: 1, Run: &Run{Slot: "L", Fence: v.next()}})
	v.lock("L", 0)
	if o := v.x.orphans(v.now); len(o) != 1 || o[0].id != "u" {
		t.Fatalf("orphans %v when slot L holds a lock of a later fence", o)
	}
}

// A record that does not decode over a task's lock is held by
// nobody-knows-who (adr/0005): it may be that attempt's lock, unreadable,
// whose holder is still stopping its work. The task is no orphan until the
// record is removed.
func TestIndex_GarbageOverALockIsNoOrphan(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	fence := v.lock("K", 0)
	v.task(Task{ID: "t", Key: "K", State: StateActive, Attempts: 1, Run: &Run{Slot: "K", Fence: fence}})
	v.x.applySession(kv.Entry{Key: "K", Value: []byte("\x00garbage"), Revision: v.next(), Created: v.now}, v.now)
	if o := v.x.orphans(v.now); len(o) != 0 {
		t.Fatalf("orphans %v while garbage holds the lock's slot", o)
	}
	v.unlock("K")
	if o := v.x.orphans(v.now); len(o) != 1 || o[0].id != "t" || o[0].fence != fence {
		t.Fatalf("orphans %v once the garbage was removed", o)
	}
}

// A lock whose tombstone says its holder ended the attempt at a revision
// the queue's watch has not delivered yet does not make the task an
// orphan: that revision ends it. It does once the revision is delivered
// and the task is still active under that lock, or once endingWait passed;
// a tombstone that says nothing, names another attempt or comes from
// another queue leaves the task the orphan it looks.
func TestIndex_AnEndedAttemptIsNoOrphanWhileItsEndIsOnItsWay(t *testing.T) {
	tombstone := func(v *view, slot, task string, fence, ended uint64, q string) uint64 {
		note := session.Record{Slot: slot, Host: "elsewhere", PID: 9, Fence: fence, Result: session.ResultSuccess,
			Meta: map[string]string{"queue": q, "task": task, metaEnded: fmt.Sprint(ended)}}
		data, _ := json.Marshal(note)
		v.x.applySession(kv.Entry{Key: slot, Value: data, Revision: v.next(), Op: kv.OpDelete, Created: v.now}, v.now)
		return ended
	}
	for _, c := range []struct {
		name   string
		ending func(v *view, fence uint64) uint64
		orphan bool
	}{
		{"ended ahead of the watch", func(v *view, fence uint64) uint64 { return tombstone(v, "K", "t", fence, v.rev+5, "q") }, false},
		{"no note", func(v *view, fence uint64) uint64 { v.unlock("K"); return 0 }, true},
		{"another attempt's note", func(v *view, fence uint64) uint64 { return tombstone(v, "K", "t", fence+1, v.rev+5, "q") }, true},
		{"another queue's note", func(v *view, fence uint64) uint64 { return tombstone(v, "K", "t", fence, v.rev+5, "other") }, true},
		{"an end already delivered", func(v *view, fence uint64) uint64 { return tombstone(v, "K", "t", fence, v.rev-1, "q") }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newView(t, DefaultConfig("q"))
			v.add("t", "K", Normal)
			fence := v.lock("K", 0)
			v.task(Task{ID: "t", Key: "K", State: StateActive, Attempts: 1, Run: &Run{Slot: "K", Fence: fence}})
			ended := c.ending(v, fence)
			if o := v.x.orphans(v.now); (len(o) == 1) != c.orphan {
				t.Fatalf("orphans %v, want an orphan: %v", o, c.orphan)
			}
			if c.orphan {
				return
			}
			if at := v.x.nextEnding(); !at.Equal(v.now.Add(endingWait)) {
				t.Fatalf("the loop is to look again at %v, want %v", at, v.now.Add(endingWait))
			}
			if o := v.x.orphans(v.now.Add(endingWait)); len(o) != 1 {
				t.Fatalf("orphans %v once endingWait passed, want the task", o)
			}
			// The end arrives at the revision named: not active any more,
			// nothing to settle.
			v.rev = ended - 1
			v.task(Task{ID: "t", Key: "K", State: StateDone, Attempts: 1, Result: &Result{Fence: fence}})
			if o := v.x.orphans(v.now.Add(endingWait)); len(o) != 0 {
				t.Fatalf("orphans %v once the end was delivered", o)
			}
			if len(v.x.endings) != 0 {
				t.Fatalf("endings %v left once the end was delivered", v.x.endings)
			}
		})
	}
	// The end's revision delivered while the task still looks active under
	// that lock (a record that only looks like such a tombstone): an orphan.
	v := newView(t, DefaultConfig("q"))
	v.add("t", "K", Normal)
	fence := v.lock("K", 0)
	v.task(Task{ID: "t", Key: "K", State: StateActive, Attempts: 1, Run: &Run{Slot: "K", Fence: fence}})
	tombstone(v, "K", "t", fence, v.rev+2, "q")
	v.add("u", "L", Normal) // the queue's watch passes the revision named
	if o := v.x.orphans(v.now); len(o) != 1 {
		t.Fatalf("orphans %v once the named revision passed, want the task", o)
	}
}

// The dispatcher picks in the order alone: the first key in it.
func TestIndex_PicksInTheOrder(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	for i := range 20 {
		v.add(fmt.Sprintf("t%02d", i), fmt.Sprintf("k%02d", i), Normal)
	}
	for i := range 3 {
		if pk, _ := v.x.next(); pk.id != fmt.Sprintf("t%02d", i) {
			t.Fatalf("pick %d: %s, want the next in order", i, pk.id)
		}
	}
}

// An orphan not settled yet and the next task of its key active on the same
// slot are both counted, and both uncounted when they end: capacity never
// leaks (every worker would leak alike, and the queue would stall).
func TestIndex_TwoActiveOnOneSlotCountOnce(t *testing.T) {
	cfg := DefaultConfig("q")
	cfg.MaxActive = 2
	v := newView(t, cfg)
	v.add("a", "K", Normal)
	v.add("b", "K", Normal)
	pa, _ := v.claim()
	v.unlock("K") // a's lock expires: a is an orphan, not settled yet
	pb, ok := v.claim()
	if !ok || pb.id != "b" || pb.slot != pa.slot {
		t.Fatalf("picked %v %v, want b on a's slot", pb.id, ok)
	}
	if v.x.nActive != 2 {
		t.Fatalf("%d active, want 2", v.x.nActive)
	}
	v.task(Task{ID: "a", Key: "K", State: StatePending, Attempts: 1, Seq: pa.task.seq})
	v.x.applyQueue(kv.Entry{Key: tokenKey("q", pa.token), Op: kv.OpExpire, Revision: v.next()}, v.now)
	v.finish(pb)
	if v.x.nActive != 0 || len(v.x.active) != 0 {
		t.Fatalf("%d active (%v) once both ended, want none", v.x.nActive, v.x.active)
	}
	if pk, ok := v.x.next(); !ok || pk.id != "a" {
		t.Fatalf("picked %v %v, want a again", pk.id, ok)
	}
}

// A task this worker ended ahead of the watch is not brought back by the
// watch's older entries of it.
func TestIndex_AnEndAheadOfTheWatchIsNotUndone(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	v.add("a", "K", Normal)
	pk, _ := v.claim()
	d := versionOf(&Task{ID: "a", Queue: "q", Key: "K", State: StateDone, Revision: v.rev + 10})
	v.x.applyRecord(&d, nil, v.now)
	// The watch now delivers the claim (older) it had not delivered yet.
	v.task(Task{ID: "a", Key: "K", State: StateActive, Attempts: 1, Seq: pk.task.seq,
		Run: &Run{Slot: "K", Fence: 2, Instance: "me"}})
	if v.x.tasks["a"] != nil || v.x.nActive != 0 {
		t.Fatalf("the ended task came back: %+v, %d active", v.x.tasks["a"], v.x.nActive)
	}
}

// A record the view took but the claim's full decoding refuses is never
// picked again (until a newer revision).
func TestIndex_AGarbageRecordIsNotPickedAgain(t *testing.T) {
	v := newView(t, DefaultConfig("q"))
	v.add("g", "K", Normal)
	pk, _ := v.x.next()
	v.x.release(pk, nil, v.now)
	v.x.garbage("g", pk.rev, v.now)
	if pk, ok := v.x.next(); ok {
		t.Fatalf("picked %s again", pk.id)
	}
}
