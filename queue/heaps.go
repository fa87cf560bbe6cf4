package queue

import (
	"math"
	"math/rand/v2"
	"time"
)

type fifoItem struct {
	t   *itask
	gen int
}

// taskHeap orders a key's tasks of one priority by the revision that
// added them.
type taskHeap []fifoItem

// Its own push and pop, not container/heap's: those box each item in an
// interface, an allocation for every task a worker's view queues or
// passes over.

func (h taskHeap) Len() int { return len(h) }

func (h taskHeap) less(i, j int) bool { return h[i].t.seq < h[j].t.seq }

// push adds it.
func (h *taskHeap) push(it fifoItem) {
	*h = append(*h, it)
	q := *h
	for j := len(q) - 1; j > 0; {
		i := (j - 1) / 2
		if !q.less(j, i) {
			break
		}
		q[i], q[j] = q[j], q[i]
		j = i
	}
}

// popTop removes the first item.
func (h *taskHeap) popTop() {
	q := *h
	n := len(q) - 1
	q[0] = q[n]
	q[n] = fifoItem{}
	q = q[:n]
	*h = q
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && q.less(r, j) {
			j = r
		}
		if !q.less(j, i) {
			break
		}
		q[i], q[j] = q[j], q[i]
		i = j
	}
}

// keyHeap orders the ready keys of one priority: least recently served
// first (a claim in flight counts as the most recent), then by their
// oldest task.
type keyHeap struct {
	keys  []*ikey
	level int
}

func (h *keyHeap) Len() int { return len(h.keys) }
func (h *keyHeap) Less(i, j int) bool {
	a, b := h.keys[i], h.keys[j]
	sa, sb := a.order(), b.order()
	if sa != sb {
		return sa < sb
	}
	return a.head[h.level] < b.head[h.level]
}
func (h *keyHeap) Swap(i, j int) {
	h.keys[i], h.keys[j] = h.keys[j], h.keys[i]
	h.keys[i].pos[h.level] = i
	h.keys[j].pos[h.level] = j
}
func (h *keyHeap) Push(v any) {
	k := v.(*ikey)
	k.pos[h.level] = len(h.keys)
	h.keys = append(h.keys, k)
}
func (h *keyHeap) Pop() any {
	old := h.keys
	k := old[len(old)-1]
	h.keys = old[:len(old)-1]
	k.pos[h.level] = -1
	return k
}

// order is the key's place in the round robin: the revision of its
// weight-th most recent claim, a claim in flight counting as the most
// recent (0: fewer claims than its weight, as a key never served). A key
// of weight 1 goes by its last claim; one of weight 3 by the one before
// its last two, so it is served three times for one turn of the others.
func (k *ikey) order() uint64 {
	w := max(k.weight, 1)
	if k.local >= w {
		return math.MaxUint64
	}
	i := len(k.recent) - (w - k.local)
	if i < 0 {
		return 0
	}
	return k.recent[i]
}

type dueItem struct {
	at   time.Time
	task *itask
	gen  int
}

func (d dueItem) when() time.Time { return d.at }

// dueHeap orders the tasks waiting for their time (index.advance).
type dueHeap = timeHeap[dueItem]

// timeHeap is a container/heap of items, the earliest first.
type timeHeap[T interface{ when() time.Time }] []T

func (h timeHeap[T]) Len() int           { return len(h) }
func (h timeHeap[T]) Less(i, j int) bool { return h[i].when().Before(h[j].when()) }
func (h timeHeap[T]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap[T]) Push(v any)        { *h = append(*h, v.(T)) }
func (h *timeHeap[T]) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// intSet is a set of ints with O(1) add, remove and random member.
type intSet struct {
	items []int
	pos   map[int]int
}

func (s *intSet) len() int { return len(s.items) }

func (s *intSet) add(i int) {
	if s.pos == nil {
		s.pos = map[int]int{}
	}
	if _, ok := s.pos[i]; ok {
		return
	}
	s.pos[i] = len(s.items)
	s.items = append(s.items, i)
}

func (s *intSet) remove(i int) {
	p, ok := s.pos[i]
	if !ok {
		return
	}
	last := s.items[len(s.items)-1]
	s.items[p] = last
	s.pos[last] = p
	s.items = s.items[:len(s.items)-1]
	delete(s.pos, i)
}

// random is a member chosen at random, so that workers taking tokens at
// once rarely pick the same one.
func (s *intSet) random() int { return s.items[rand.IntN(len(s.items))] }
