package queue

import (
	"container/heap"
	"time"

	"github.com/batonhq/baton/session"
)

// pick is a claim this worker is about to make.
type pick struct {
	// id and rev are the task's, copied: the loop changes task meanwhile.
	id    string
	rev   uint64
	task  *itask
	key   *ikey
	lane  int
	slot  string
	token int // -1: the queue has no max_active
	body  []byte
	// slotLast and tokenLast are the revisions at which the slot and the
	// token were last removed, as the view saw it (0: unknown).
	slotLast, tokenLast uint64
	// from is the dispatcher term whose index holds the pick (nil: an
	// offer made to this worker).
	from *dispatcher
}

// used is how much of max_active this worker sees taken.
func (x *index) used() int {
	held := len(x.tokens) + len(x.reserved)
	for i := range x.reserved {
		if x.tokens[i] != nil {
			held--
		}
	}
	return max(held, x.nActive+x.inflight)
}

// next picks the task to claim: the highest priority with a task whose key
// has a free lane; among keys of that priority the one served least
// recently (never served first, then by its oldest task); the oldest task
// of that key. It marks the pick in flight (undo with release). It
// returns false when nothing can run: capacity used up, no task waiting
// whose key has a free lane, or the view not complete yet.
func (x *index) next() (pick, bool) {
	if !x.synced || x.cfg.Paused {
		return pick{}, false
	}
	tok := -1
	if x.cfg.MaxActive > 0 {
		if x.used() >= x.cfg.MaxActive || x.free.len() == 0 {
			return pick{}, false
		}
		tok = x.free.random()
	}
	for p := range x.ready {
		h := &x.ready[p]
		// The first key in the order that has a task of this priority
		// waiting and a lane free; a key that cannot run is taken out of
		// the heaps where it is.
		var k *ikey
		for h.Len() > 0 {
			c := h.keys[0]
			if c.peek(p) == nil || x.freeLane(c) < 0 {
				x.refresh(c)
				continue
			}
			if x.pathsBusy(c.peek(p)) {
				x.block(c)
				continue
			}
			k = c
			break
		}
		if k == nil {
			continue
		}
		t := k.peek(p)
		lane := x.freeLane(k)
		slot := x.cfg.Slot(k.name, lane)
		pk := pick{id: t.id, rev: t.rev, task: t, key: k, lane: lane, slot: slot, token: tok, body: t.body, slotLast: x.slotLast(slot)}
		if tok >= 0 {
			pk.tokenLast = x.tokenGone[tok]
		}
		x.hold(pk)
		return pk, true
	}
	return pick{}, false
}

// hold marks a pick in flight.
func (x *index) hold(pk pick) {
	t, k := pk.task, pk.key
	x.dequeue(t)
	t.claiming = true
	x.touch(t, true)
	if k.claiming == nil {
		k.claiming = map[int]bool{}
	}
	k.claiming[pk.lane] = true
	k.local++
	if pk.token >= 0 {
		x.reserved[pk.token] = true
		x.free.remove(pk.token)
	}
	x.inflight++
	x.refresh(k)
}

// claimed is what a claim that landed wrote: the task's new version, the
// key lock's session and the capacity token (nil without max_active).
type claimed struct {
	// sent is when the claim's key lock was sent: its keepalive counts
	// from there.
	sent  time.Time
	task  *Task
	value []byte
	sess  *session.Session
	tok   *token
}

// release ends a pick in flight. A claim that landed (c not nil) tells the
// view what the watches will soon say, so that the worker does not pick
// the same task or lane again meanwhile; what a watch delivered already is
// not overwritten. A claim that did not land puts the task back if it
// still waits.
func (x *index) release(pk pick, c *claimed, now time.Time) {
	t, k := pk.task, pk.key
	t.claiming = false
	delete(k.claiming, pk.lane)
	k.local--
	x.inflight--
	if pk.token >= 0 {
		delete(x.reserved, pk.token)
	}
	if c != nil {
		if c.tok != nil && c.tok.rev > x.qSeq {
			x.tokens[pk.token] = c.tok
			x.free.remove(pk.token)
		}
		if c.sess != nil && c.sess.Revision > x.sessSeq {
			x.setSlot(pk.slot, c.sess, now)
		}
		if c.task != nil && c.task.Revision > x.qSeq {
			d := versionOf(c.task)
			x.applyRecord(&d, c.value, now)
		}
	}
	if pk.token >= 0 && x.tokens[pk.token] == nil && pk.token < x.cfg.MaxActive {
		x.free.add(pk.token)
	}
	if x.tasks[t.id] == t && (t.state == StatePending || t.state == StateFailed) && !t.due.After(now) {
		x.enqueue(t)
	}
	if t.state != StateActive {
		x.touch(t, false)
	}
	x.refresh(k)
	x.tidy(k, now)
}

// freed tells the view that this worker removed its lock on slot (the
// session at revision srev, its tombstone at stomb) or its token (at trev,
// the tombstone at ttomb; tok -1: none), before the watches say so. A view
// that has seen another revision since keeps it.
func (x *index) freed(slot string, srev, stomb uint64, tok int, trev, ttomb uint64, now time.Time) {
	if s := x.slots[slot]; slot != "" && s != nil && s.Revision == srev {
		if stomb > x.sessSeq {
			x.slotGone.set(slot, stomb, now)
		}
		x.setSlot(slot, nil, now)
	}
	if t := x.tokens[tok]; tok >= 0 && t != nil && t.rev == trev {
		delete(x.tokens, tok)
		delete(x.sameHost, tokenKey(x.q, tok))
		if ttomb > x.qSeq {
			x.tokenGone[tok] = ttomb
		}
		if tok < x.cfg.MaxActive && !x.reserved[tok] {
			x.free.add(tok)
		}
	}
}

// nextDue is when a task waiting for its run-at time or its backoff can
// next run (zero: none).
func (x *index) nextDue() time.Time {
	if x.due.Len() == 0 {
		return time.Time{}
	}
	return x.due[0].at
}

// advance makes what was due by now runnable.
func (x *index) advance(now time.Time) {
	for x.due.Len() > 0 && !x.due[0].at.After(now) {
		it := heap.Pop(&x.due).(dueItem)
		if it.task.gen == it.gen && x.tasks[it.task.id] == it.task && (it.task.state == StateFailed || it.task.state == StatePending) {
			x.enqueue(it.task)
		}
	}
}
