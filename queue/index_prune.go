package queue

import (
	"time"
)

// What the view forgets. A queue that has seen a million keys must not keep
// a million of anything once their tasks are over:
//   - a key with no task in the view, no lock held and no claim in flight
//     leaves keys (tidy); the revision of its last service stays in rested,
//     a few words where the key took a few hundred bytes, until the
//     queue's retention has passed since, as the last service of a key
//     that a view builds from the bucket is known only while one of its
//     tasks is retained;
//   - the tombstone revisions of removed locks (slotGone), which only save
//     a claim round trips, go with the tombstones' own TTL.

// slotGoneTTL bounds how long a removed lock's tombstone revision is kept:
// the sessions bucket drops the tombstone itself by then, after which a
// claim creates over nothing in one round trip without it.
const slotGoneTTL = MarkerTTL

// tidy forgets key k if nothing of it is left in the view: no task, no
// claim in flight, no live lock on any of its lanes.
func (x *index) tidy(k *ikey, now time.Time) {
	if k == nil || k.n > 0 || k.local > 0 || len(k.claiming) > 0 || x.keys[k.name] != k {
		return
	}
	for p := range k.pos {
		if k.pos[p] >= 0 {
			return // a ready heap holds it (refresh takes it out first)
		}
	}
	for l := range max(x.lanesOf(k), 1) {
		if x.slots[x.cfg.Slot(k.name, l)] != nil {
			return
		}
	}
	delete(x.keys, k.name)
	if k.served > 0 {
		x.rested.set(k.name, k.served, now)
	}
	x.prune(now)
}

// prune drops what expired by now.
func (x *index) prune(now time.Time) {
	x.rested.expire(now, time.Duration(x.cfg.Retention))
	x.finals.expire(now, time.Duration(x.cfg.Retention))
	x.slotGone.expire(now, slotGoneTTL)
}

// expiring is a map whose entries go once ttl has passed since they were
// last set. order holds each key once, oldest first, as of when it was put
// there: a key set again since goes to the back with its later time when
// it reaches the front, so that expiring costs O(1) per entry set.
type expiring[V any] struct {
	m     map[string]expiringEntry[V]
	order []orderEntry
	head  int
}

type expiringEntry[V any] struct {
	v  V
	at time.Time
}

type orderEntry struct {
	key string
	at  time.Time
}

func newExpiring[V any]() expiring[V] { return expiring[V]{m: map[string]expiringEntry[V]{}} }

func (e *expiring[V]) len() int { return len(e.m) }

// get is key's value, if it has one.
func (e *expiring[V]) get(key string) (V, bool) {
	en, ok := e.m[key]
	return en.v, ok
}

// set gives key the value v, as of now.
func (e *expiring[V]) set(key string, v V, now time.Time) {
	if _, ok := e.m[key]; !ok {
		e.order = append(e.order, orderEntry{key: key, at: now})
	}
	e.m[key] = expiringEntry[V]{v: v, at: now}
}

// delete drops key (its place in order goes when it reaches the front).
func (e *expiring[V]) delete(key string) { delete(e.m, key) }

// expire drops the entries set more than ttl before now.
func (e *expiring[V]) expire(now time.Time, ttl time.Duration) {
	for e.head < len(e.order) {
		o := e.order[e.head]
		en, ok := e.m[o.key]
		young := ok && now.Sub(en.at) <= ttl
		if young && en.at.Equal(o.at) {
			break // the oldest is young enough
		}
		e.head++
		switch {
		case young:
			e.order = append(e.order, orderEntry{key: o.key, at: en.at})
		case ok:
			delete(e.m, o.key)
		}
	}
	if e.head > 64 && e.head > len(e.order)/2 {
		e.order = append(e.order[:0], e.order[e.head:]...)
		e.head = 0
	}
}

// slotLast is the tombstone revision of slot's last removed lock (0: not
// known).
func (x *index) slotLast(slot string) uint64 {
	rev, _ := x.slotGone.get(slot)
	return rev
}
