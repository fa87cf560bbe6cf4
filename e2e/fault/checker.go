package main

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// checker plays the resource that baton's fences protect. It accepts a
// write only with a fence at least as large as any it has seen for the key,
// and records every rejection. A fence is issued to one holder: two writers
// accepted with the same fence on one key is an exclusion violation, and so
// is a write without a fence.
type checker struct {
	mu         sync.Mutex
	keys       map[string]*resource
	writers    map[string]*writerState // by writer id
	accepted   int
	rejected   int
	violations []string
}

type resource struct {
	max    uint64
	owner  map[uint64]string // fence -> the writer accepted with it
	writes []accepted        // accepted writes, in time order
}

// accepted is one write the resource took.
type accepted struct {
	at    time.Time
	fence uint64
}

type writerState struct {
	actor string
	fence uint64
	last  time.Time // last write attempt, accepted or not
}

func newChecker() *checker {
	return &checker{keys: map[string]*resource{}, writers: map[string]*writerState{}}
}

// write is one write by writer (actor/pid) to key under fence; it reports
// whether the resource accepted it. A zero at is the time now, read under
// the lock so that accepted writes stay in time order.
func (c *checker) write(key string, fence uint64, writer string, at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.IsZero() {
		at = time.Now()
	}
	actor, _, _ := strings.Cut(writer, "/")
	c.writers[writer] = &writerState{actor: actor, fence: fence, last: at}
	r := c.keys[key]
	if r == nil {
		r = &resource{owner: map[uint64]string{}}
		c.keys[key] = r
	}
	if fence == 0 {
		c.rejected++
		c.violations = append(c.violations, fmt.Sprintf("%s: %s wrote without a fence", key, writer))
		return false
	}
	if fence < r.max {
		c.rejected++
		return false
	}
	if prev, ok := r.owner[fence]; ok && prev != writer {
		c.violations = append(c.violations, fmt.Sprintf("%s: fence %d accepted from %s and from %s", key, fence, prev, writer))
	}
	r.owner[fence] = writer
	r.max = fence
	r.writes = append(r.writes, accepted{at, fence})
	c.accepted++
	return true
}

// lastWrite is the last time actor wrote with a fence at most fence, and the
// largest fence actor wrote with.
func (c *checker) lastWrite(actor string, fence uint64) (last time.Time, maxFence uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.writers {
		if w.actor != actor {
			continue
		}
		if w.fence > maxFence {
			maxFence = w.fence
		}
		if w.fence <= fence && w.last.After(last) {
			last = w.last
		}
	}
	return last, maxFence
}

// longestGap is the longest time between accepted writes to key within
// [from, to], counting from from and up to to.
func (c *checker) longestGap(key string, from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.keys[key]
	if r == nil {
		return to.Sub(from)
	}
	i := sort.Search(len(r.writes), func(i int) bool { return !r.writes[i].at.Before(from) })
	prev, gap := from, time.Duration(0)
	for ; i < len(r.writes) && !r.writes[i].at.After(to); i++ {
		gap = max(gap, r.writes[i].at.Sub(prev))
		prev = r.writes[i].at
	}
	return max(gap, to.Sub(prev))
}

// firstAbove is the first accepted write to key after from with a fence
// larger than fence: the next holder's first act.
func (c *checker) firstAbove(key string, fence uint64, from time.Time) (time.Time, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.keys[key]
	if r == nil {
		return time.Time{}, 0, false
	}
	i := sort.Search(len(r.writes), func(i int) bool { return !r.writes[i].at.Before(from) })
	for ; i < len(r.writes); i++ {
		if r.writes[i].fence > fence {
			return r.writes[i].at, r.writes[i].fence, true
		}
	}
	return time.Time{}, 0, false
}

func (c *checker) counts() (accepted, rejected int, violations []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted, c.rejected, append([]string(nil), c.violations...)
}

// ServeHTTP takes POST /write?key=K&fence=F&writer=W; 200 is accepted, 409
// rejected.
func (c *checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fence, err := strconv.ParseUint(q.Get("fence"), 10, 64)
	if err != nil || q.Get("key") == "" || q.Get("writer") == "" {
		http.Error(w, "want key, fence and writer", http.StatusBadRequest)
		return
	}
	if c.write(q.Get("key"), fence, q.Get("writer"), time.Time{}) {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusConflict)
}
