package queue

// A handle that adds and waits for many tasks of a queue (AddWait, again
// and again) shares one watch of the queue's task changes among its
// waits, as BullMQ's QueueEvents does: a JetStream consumer per wait costs
// the server more than the task's own dispatch, and slows it. A handle
// that waits once (the CLI's `queue add --wait`) watches its one task, so
// that it is not sent every change of a busy queue.

import (
	"context"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
)

// endWatchIdle is how long a shared watch outlives its last wait, and how
// close together two waits must come for the second to share one.
const endWatchIdle = 5 * time.Second

// endWatch is a watch of queue q's tasks (changes only), routing the
// final version of each task (or its removal) to the waits for it.
type endWatch struct {
	q      string
	w      *kv.Watcher
	stop   context.CancelFunc
	waits  map[string][]chan *kv.Entry
	n      int
	idle   *time.Timer
	closed bool
}

// endWatches are a handle's shared watches, by queue, and when each
// queue was last waited on.
type endWatches struct {
	mu      sync.Mutex
	byQueue map[string]*endWatch
	last    map[string]time.Time
	idle    time.Duration // 0: endWatchIdle
}

func (ws *endWatches) idleFor() time.Duration {
	if ws.idle > 0 {
		return ws.idle
	}
	return endWatchIdle
}

// sharedEnd registers a wait for the end of task id of queue q on the
// handle's shared watch of q, set up first if there is none: the task's
// changes written after it returns are delivered. It returns nil when q
// was not waited on recently (the caller watches the task alone) or the
// watch could not be set up. release ends the wait.
func (qs *Queues) sharedEnd(ctx context.Context, q, id string) (ch <-chan *kv.Entry, release func()) {
	ws := &qs.ends
	ws.mu.Lock()
	defer ws.mu.Unlock()
	now := time.Now()
	if ws.last == nil {
		ws.byQueue, ws.last = map[string]*endWatch{}, map[string]time.Time{}
	}
	recent := now.Sub(ws.last[q]) < ws.idleFor()
	ws.last[q] = now
	ew := ws.byQueue[q]
	if ew == nil {
		if !recent {
			return nil, nil
		}
		wctx, stop := context.WithCancel(context.Background())
		w, err := qs.bucket.Watch(wctx, taskKey(q, ">"), kv.UpdatesOnly())
		if err != nil {
			stop()
			return nil, nil
		}
		ew = &endWatch{q: q, w: w, stop: stop, waits: map[string][]chan *kv.Entry{}}
		ws.byQueue[q] = ew
		go qs.routeEnds(ew)
	}
	if ew.idle != nil {
		ew.idle.Stop()
		ew.idle = nil
	}
	c := make(chan *kv.Entry, 1)
	ew.waits[id] = append(ew.waits[id], c)
	ew.n++
	return c, func() { qs.endWait(ew, id, c) }
}

// endWait removes a wait; the watch stops once it has had none for
// endWatchIdle.
func (qs *Queues) endWait(ew *endWatch, id string, c chan *kv.Entry) {
	ws := &qs.ends
	ws.mu.Lock()
	defer ws.mu.Unlock()
	cs := ew.waits[id]
	for i, x := range cs {
		if x == c {
			ew.waits[id] = append(cs[:i], cs[i+1:]...)
			ew.n--
			break
		}
	}
	if len(ew.waits[id]) == 0 {
		delete(ew.waits, id)
	}
	if ew.n == 0 && !ew.closed && ew.idle == nil {
		ew.idle = time.AfterFunc(ws.idleFor(), func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			if ew.n == 0 && ew.idle != nil {
				if ws.byQueue[ew.q] == ew {
					delete(ws.byQueue, ew.q)
				}
				ew.stop() // routeEnds ends
			}
		})
	}
}

// routeEnds hands each final version of a waited task to its waits, until
// the watch ends; then it closes every wait's channel (they watch their
// task alone from there) and forgets the watch.
func (qs *Queues) routeEnds(ew *endWatch) {
	ws := &qs.ends
	for e := range ew.w.Updates() {
		if e == nil {
			continue
		}
		id := taskIDOf(ew.q, e.Key)
		ws.mu.Lock()
		cs := ew.waits[id]
		ws.mu.Unlock()
		if len(cs) == 0 {
			continue
		}
		if e.Live() {
			t, err := decodeTask(ew.q, *e)
			if err == nil && !t.State.Final() {
				continue
			}
		}
		ws.mu.Lock()
		for _, c := range ew.waits[id] {
			select {
			case c <- e:
			default: // it has its end already
			}
		}
		ws.mu.Unlock()
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ew.closed = true
	ew.stop()
	if ws.byQueue[ew.q] == ew {
		delete(ws.byQueue, ew.q)
	}
	for id, cs := range ew.waits {
		for _, c := range cs {
			close(c)
		}
		delete(ew.waits, id)
	}
	ew.n = 0
}
