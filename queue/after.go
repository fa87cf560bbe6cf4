package queue

// Tasks that wait for others (adr/0054): a pending task with After runs
// once every task it names is done; one of them dead or cancelled cancels
// it, with the reason. The dispatcher's index holds such a task back
// (waiting) and re-checks it when one it waits for ends.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/batonhq/baton/kv"
)

// holdBack reports whether pending task t waits for others: then it is
// out of its key's queue, in x.waiting. A task one of whose parents
// failed is also doomed: the dispatcher cancels it.
func (x *index) holdBack(t *itask) bool {
	if len(t.after) == 0 {
		return false
	}
	blocked, failed := x.parentsOf(t)
	switch {
	case failed != "":
		x.dequeue(t)
		x.doomed[t.id] = failed
		return true
	case blocked:
		x.dequeue(t)
		if _, ok := x.waiting[t.id]; !ok {
			x.waiting[t.id] = t
			for _, p := range t.after {
				if !slices.Contains(x.children[p], t.id) {
					x.children[p] = append(x.children[p], t.id)
				}
			}
		}
		return true
	}
	delete(x.waiting, t.id)
	return false
}

// parentsOf says whether t still waits for one of its parents, and why
// it cannot run at all (a parent dead or cancelled; empty: none). A parent
// the index has not seen waits until the view is complete; once it is, a
// parent it has not seen ended so long ago that it is gone: done.
func (x *index) parentsOf(t *itask) (blocked bool, failed string) {
	for _, p := range t.after {
		if x.tasks[p] != nil {
			blocked = true
			continue
		}
		st, ok := x.finals.get(p)
		switch {
		case ok && st == StateDone:
		case ok:
			return false, fmt.Sprintf("task %s it waits for is %s", p, st)
		case !x.synced:
			blocked = true
		}
	}
	return blocked, ""
}

// parentEnded re-checks the tasks that wait for id, which ended.
func (x *index) parentEnded(id string, now time.Time) {
	kids := x.children[id]
	delete(x.children, id)
	for _, c := range kids {
		if t := x.waiting[c]; t != nil && x.tasks[c] == t {
			x.release1(t, now)
		}
	}
}

// recheckWaiting re-checks every waiting task (the view is complete).
func (x *index) recheckWaiting(now time.Time) {
	ts := make([]*itask, 0, len(x.waiting))
	for id, t := range x.waiting {
		if x.tasks[id] == t {
			ts = append(ts, t)
		}
	}
	for _, t := range ts {
		x.release1(t, now)
	}
}

// release1 lets waiting task t go on if nothing holds it back any more.
func (x *index) release1(t *itask, now time.Time) {
	delete(x.waiting, t.id)
	if !x.holdBack(t) && t.state == StatePending {
		x.wait(t, now)
	}
}

// takeDoomed hands over the waiting tasks to cancel, by id with why.
func (x *index) takeDoomed() map[string]string {
	if len(x.doomed) == 0 {
		return nil
	}
	out := x.doomed
	x.doomed = map[string]string{}
	return out
}

// cancelDoomed cancels, in the background, the waiting tasks one of whose
// parents failed; each cancel's version comes back by the watch and, being
// final, dooms the tasks that wait for it in turn.
func (d *dispatcher) cancelDoomed(l *loop) {
	for id, why := range d.x.takeDoomed() {
		l.bg.Add(1)
		l.pool.Go(func() {
			defer l.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*l.w.qs.bucket.Client().Timeout())
			defer cancel()
			if _, err := l.w.qs.cancelWaiting(ctx, l.w.q, id, why); err != nil && !errors.Is(err, ErrTaskNotFound) {
				l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("cancel task %s of queue %s (%s): %w", id, l.w.q, why, err)})
				l.post(func() {
					if l.d == d {
						d.x.doomed[id] = why // tried again on the next pass
					}
				})
			}
		})
	}
}

// cancelWaiting cancels pending task id because why (a task it waits for
// failed); a task no longer pending is left as it is.
func (qs *Queues) cancelWaiting(ctx context.Context, q, id, why string) (*Task, error) {
	return qs.change(ctx, q, id, nil, func(cfg Config, t *Task) (*Task, error) {
		if t.State != StatePending {
			return nil, nil
		}
		n := t.clone()
		n.State, n.CancelRequested = StateCancelled, true
		n.Result = &Result{Attempt: n.Attempts, Reason: ReasonCancelled, Error: why, EndedAt: qs.stamp()}
		return n, nil
	})
}

// WithAfter makes the task wait for the tasks ids of its queue: it runs
// once every one is done, and is cancelled (the reason in its result) as
// soon as one is dead or cancelled. Add checks that they exist.
func WithAfter(ids ...string) AddOption {
	return func(c *addConfig) error {
		for _, id := range ids {
			if err := kv.ValidateKey(id); err != nil {
				return fmt.Errorf("%w: after: task id %q: %w", ErrInvalid, id, err)
			}
		}
		c.after = slices.Compact(slices.Sorted(slices.Values(ids)))
		return nil
	}
}

// checkAfter refuses parents the queue does not hold.
func (qs *Queues) checkAfter(ctx context.Context, q string, ids []string) error {
	for _, id := range ids {
		if _, err := qs.bucket.Get(ctx, taskKey(q, id)); errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("%w: after %s: queue %s has no such task", ErrInvalid, id, q)
		} else if err != nil {
			return err
		}
	}
	return nil
}
