package queue

// Adding many tasks at once: their creates pipelined (kv.Bucket.Pipeline).

import (
	"context"
	"fmt"

	"github.com/batonhq/baton/kv"
)

// NewTask is one task of AddBatch: what Add takes.
type NewTask struct {
	Key     string
	Payload []byte
	Options []AddOption
}

// Added is one task's outcome in AddBatch: as Add returns it.
type Added struct {
	Task  *Task
	Added bool // false: a task of that id was there already (Task is it)
	Err   error
}

// BatchError is a task of AddBatch that cannot be added as given: the
// batch added nothing.
type BatchError struct {
	Index int // the task's place in the batch, from 0
	Err   error
}

func (e *BatchError) Error() string { return fmt.Sprintf("task %d of the batch: %v", e.Index+1, e.Err) }

func (e *BatchError) Unwrap() error { return e.Err }

// AddBatch adds tasks to queue q as Add adds each, their creates sent one
// behind the other without waiting for each answer (4,096 in flight
// at a time: kv.Bucket.Pipeline), in the order given. Every
// task is checked before anything is written: an invalid one (key,
// option, an id twice) makes the whole batch a *BatchError naming its
// place (wrapping ErrInvalid), and adds nothing. Then each task's outcome is its own: one that fails (the server
// unreachable) does not stop the others, and is reported in its Added.
func (qs *Queues) AddBatch(ctx context.Context, q string, tasks []NewTask) ([]Added, error) {
	if err := ValidateName(q); err != nil {
		return nil, err
	}
	qcfg, err := qs.known(ctx, q)
	if err != nil {
		return nil, err
	}
	made := make([]*Task, len(tasks))
	ws := make([]kv.Write, len(tasks))
	seen := make(map[string]int, len(tasks))
	for i, nt := range tasks {
		t, data, err := qs.newTask(qcfg, nt.Key, nt.Payload, nt.Options)
		if err != nil {
			return nil, &BatchError{Index: i, Err: err}
		}
		if j, ok := seen[t.ID]; ok {
			return nil, &BatchError{Index: i, Err: fmt.Errorf("%w: id %s is task %d's too", ErrInvalid, t.ID, j+1)}
		}
		var outside []string
		for _, p := range t.After {
			if _, ok := seen[p]; !ok {
				outside = append(outside, p) // not earlier in the batch: it must exist
			}
		}
		if err := qs.checkAfter(ctx, q, outside); err != nil {
			return nil, &BatchError{Index: i, Err: err}
		}
		seen[t.ID] = i
		made[i] = t
		ws[i] = kv.Write{Kind: kv.WriteCreate, Key: taskKey(q, t.ID), Value: data}
	}
	// Unique tasks are added one by one after the others (each reads its
	// key's unique task first), in their order.
	var piped []kv.Write
	var at []int
	for i, w := range ws {
		if made[i].Unique == "" {
			piped, at = append(piped, w), append(at, i)
		}
	}
	out := make([]Added, len(tasks))
	for j, r := range qs.bucket.Pipeline(ctx, piped) {
		i := at[j]
		out[i].Task, out[i].Added, out[i].Err = added(q, made[i], r.Rev, r.Err)
	}
	for i, t := range made {
		if t.Unique != "" {
			out[i].Task, out[i].Added, out[i].Err = qs.addUnique(ctx, qcfg, t, tasks[i].Options)
		}
	}
	return out, nil
}
