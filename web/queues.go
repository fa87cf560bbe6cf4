package web

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
)

// queues keeps a snapshot of every queue, read again when a watch of the
// queues bucket says it changed: at most once a second per queue, and no
// more often than four times the last read took, so a queue of 100k tasks
// under constant change costs the server a bounded share of its time.
type queues struct {
	qs       *queue.Queues
	onChange func(kind, key string)
	observe  func(q string, wait time.Duration) // a task started after waiting

	mu    sync.RWMutex
	snaps map[string]*queue.Snapshot
	errs  map[string]string    // the last read's error, by queue
	added map[string]time.Time // server time each pending task was first seen added, by bucket key
}

func newQueues(qs *queue.Queues, onChange func(kind, key string), observe func(string, time.Duration)) *queues {
	return &queues{
		qs: qs, onChange: onChange, observe: observe,
		snaps: map[string]*queue.Snapshot{}, errs: map[string]string{}, added: map[string]time.Time{},
	}
}

// Snapshot is the latest snapshot of queue q (nil: none read yet).
func (t *queues) Snapshot(q string) *queue.Snapshot {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.snaps[q]
}

// Names lists the queues known, sorted.
func (t *queues) Names() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.namesLocked()
}

// Summaries is one line per queue, as `baton status --json` has them.
func (t *queues) Summaries() []queue.Summary {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := []queue.Summary{}
	for _, q := range t.namesLocked() {
		s := t.snaps[q]
		out = append(out, queue.Summary{
			Queue: q, Pending: s.Pending.Total, Active: s.Counts[queue.StateActive], MaxActive: s.Config.MaxActive,
			Done: s.Counts[queue.StateDone], Failed: s.Counts[queue.StateFailed], Dead: s.Counts[queue.StateDead],
			Cancelled: s.Counts[queue.StateCancelled],
		})
	}
	return out
}

func (t *queues) namesLocked() []string { return slices.Sorted(maps.Keys(t.snaps)) }

// run follows the queues bucket and keeps the snapshots until ctx is done.
func (t *queues) run(ctx context.Context, onErr func(error)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	// A queue is read again when it changed, at most once a second.
	pace := newPacer(time.Second, func(ctx context.Context, q string) { t.read(ctx, q, onErr) })
	wg.Go(func() { pace.run(ctx) })
	watchLoop(ctx, onErr, func(ctx context.Context) error {
		w, err := t.qs.Bucket().Watch(ctx, "")
		if errors.Is(err, kv.ErrBucketNotFound) {
			return nil // no queue yet; looked at again after the pause
		}
		if err != nil {
			return err
		}
		defer w.Stop()
		synced := false
		for e := range w.Updates() {
			if e == nil {
				synced = true
				continue
			}
			q, _, ok := strings.Cut(e.Key, ".")
			if !ok {
				continue
			}
			t.follow(*e, synced)
			pace.mark(q)
		}
		return nil
	})
}

// follow notes when tasks are added and observes, for each claim seen, how
// long the task waited (from the server time of its add, when it was seen,
// else from the adder's clock).
func (t *queues) follow(e kv.Entry, synced bool) {
	if !e.Live() {
		t.mu.Lock()
		delete(t.added, e.Key)
		t.mu.Unlock()
		return
	}
	task, err := queue.TaskOf(e)
	if err != nil || task == nil {
		return
	}
	switch task.State {
	case queue.StatePending:
		t.mu.Lock()
		if _, ok := t.added[e.Key]; !ok {
			at := task.AddedAt
			if synced && task.Attempts == 0 {
				at = e.Created
			}
			// A delayed task waits from its time on.
			if nb := task.NotBefore(); nb.After(at) {
				at = nb
			}
			t.added[e.Key] = at
		}
		t.mu.Unlock()
	case queue.StateActive:
		t.mu.Lock()
		at, ok := t.added[e.Key]
		delete(t.added, e.Key)
		t.mu.Unlock()
		if !synced || task.Run == nil || task.Run.Claimed != e.Revision {
			return // present before the dashboard started, or a rewrite of a running task
		}
		if !ok {
			at = task.AddedAt
		}
		if t.observe != nil && !at.IsZero() && e.Created.After(at) {
			t.observe(task.Queue, e.Created.Sub(at))
		}
	default:
		t.mu.Lock()
		delete(t.added, e.Key)
		t.mu.Unlock()
	}
}

func (t *queues) read(ctx context.Context, q string, onErr func(error)) {
	s, err := t.qs.Snapshot(ctx, q)
	t.mu.Lock()
	switch {
	case errors.Is(err, queue.ErrQueueNotFound):
		delete(t.snaps, q) // its records are gone, or it is not a queue
		delete(t.errs, q)
	case err != nil:
		t.errs[q] = err.Error()
	default:
		t.snaps[q] = s
		delete(t.errs, q)
	}
	t.mu.Unlock()
	if err != nil && !errors.Is(err, queue.ErrQueueNotFound) && onErr != nil && ctx.Err() == nil {
		onErr(err)
	}
	t.onChange(KindQueue, q)
	t.onChange(KindOverview, "")
}
