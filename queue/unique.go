package queue

// A key's unique pending task (adr/0053): `add --unique keep|replace|
// debounce` keeps at most one pending task per key among the tasks added
// so. Its id is the key's and a generation's, <key>.u<gen>, so that two
// adders of the same generation create one task between them (a
// compare-and-set create); the generation moves on, by compare-and-set on
// the record <queue>.unique.<key>, only once that task is no longer
// pending (it runs or ended).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/batonhq/baton/kv"
)

// How an add with WithUnique treats the key's pending unique task.
const (
	// UniqueKeep keeps the pending task as it is; the add adds nothing.
	UniqueKeep = "keep"
	// UniqueReplace replaces its payload (its place in line stays).
	UniqueReplace = "replace"
	// UniqueDebounce replaces its payload and makes it wait the debounce
	// again, counted from this add.
	UniqueDebounce = "debounce"
)

// uniqueGen is the record <queue>.unique.<key>: the generation whose task
// is the key's unique one.
//
//jsonrec:codec
type uniqueGen struct {
	Queue string `json:"queue"`
	Key   string `json:"key"`
	Gen   uint64 `json:"gen"`
}

func uniqueKey(q, key string) string             { return q + ".unique." + key }
func uniqueTaskID(key string, gen uint64) string { return key + ".u" + strconv.FormatUint(gen, 10) }

// WithUnique keeps at most one pending task of the key among those added
// with it: with one there already, mode UniqueKeep adds nothing and
// returns it, UniqueReplace replaces its payload, UniqueDebounce replaces
// its payload and makes it wait debounce from this add (a new task waits
// it too). The task's id is the key's unique one (<key>.u<generation>),
// so WithID does not go with it.
func WithUnique(mode string, debounce time.Duration) AddOption {
	return func(c *addConfig) error {
		switch {
		case mode != UniqueKeep && mode != UniqueReplace && mode != UniqueDebounce:
			return fmt.Errorf("%w: unique %q: use keep, replace or debounce", ErrInvalid, mode)
		case mode == UniqueDebounce && debounce <= 0:
			return fmt.Errorf("%w: unique debounce needs a positive duration", ErrInvalid)
		case mode != UniqueDebounce && debounce != 0:
			return fmt.Errorf("%w: a debounce duration goes with unique debounce only", ErrInvalid)
		}
		c.unique, c.debounce = mode, debounce
		return nil
	}
}

// addUnique adds t (made by newTask from opts, its id to be set) as key's
// unique pending task, or acts on the one there: it returns the task and
// whether it was created.
func (qs *Queues) addUnique(ctx context.Context, cfg Config, t *Task, opts []AddOption) (*Task, bool, error) {
	ac, err := addOptions(opts)
	if err != nil {
		return nil, false, err
	}
	mode, debounce := ac.unique, ac.debounce
	for attempt := 1; attempt <= 8; attempt++ {
		gen, genRev, genLast, err := qs.uniqueGen(ctx, cfg.Queue, t.Key)
		if err != nil {
			return nil, false, err
		}
		id := uniqueTaskID(t.Key, gen)
		e, err := qs.bucket.Latest(ctx, taskKey(cfg.Queue, id))
		switch {
		case errors.Is(err, kv.ErrNotFound) || err == nil && !e.Live():
			// None of this generation yet: create it (one adder wins).
			var last uint64
			if err == nil {
				last = e.Revision
			}
			n := *t
			n.ID = id
			if mode == UniqueDebounce {
				n.Delay, n.RunAt = Duration(debounce), time.Time{}
			}
			data, err := encodeTask(&n)
			if err != nil {
				return nil, false, err
			}
			rev, err := qs.bucket.CreateAfter(ctx, taskKey(cfg.Queue, id), data, 0, last)
			if errors.Is(err, kv.ErrConflict) {
				continue // another adder made it: act on it
			}
			got, added, err := added(cfg.Queue, &n, rev, err)
			return got, added, err
		case err != nil:
			return nil, false, err
		}
		cur, err := decodeTask(cfg.Queue, e)
		if err != nil {
			return nil, false, fmt.Errorf("%w: task %s: %w", ErrUndecodable, id, err)
		}
		if cur.State != StatePending {
			// It runs or ended: the next generation is the key's.
			next := uniqueGen{Queue: cfg.Queue, Key: t.Key, Gen: gen + 1}
			data, ok := next.encodeFast()
			if !ok {
				return nil, false, fmt.Errorf("queue: unique record of key %s does not encode", t.Key)
			}
			if genRev == 0 {
				_, err = qs.bucket.CreateAfter(ctx, uniqueKey(cfg.Queue, t.Key), data, 0, genLast)
			} else {
				_, err = qs.bucket.Update(ctx, uniqueKey(cfg.Queue, t.Key), data, 0, genRev)
			}
			if err != nil && !errors.Is(err, kv.ErrConflict) {
				return nil, false, err
			}
			continue
		}
		if mode == UniqueKeep {
			return cur, false, nil
		}
		n := cur.clone()
		n.Payload = t.Payload
		if mode == UniqueDebounce {
			n.Delay, n.RunAt = Duration(debounce), time.Time{} // counted from this write
		} else if n.Delay > 0 {
			n.RunAt, n.Delay = cur.NotBefore(), 0 // replace keeps its time: a delay would count again from this write
		}
		out, err := qs.write(ctx, cfg, n)
		if errors.Is(err, kv.ErrConflict) {
			continue // claimed or changed meanwhile: look again
		}
		if err != nil {
			return nil, false, err
		}
		return out, false, nil
	}
	return nil, false, fmt.Errorf("%w: key %s's unique task changed under 8 attempts in a row; try again", kv.ErrConflict, t.Key)
}

// uniqueGen reads key's unique generation: it, the record's revision (0:
// none) and the tombstone's a create follows.
func (qs *Queues) uniqueGen(ctx context.Context, q, key string) (gen, rev, last uint64, err error) {
	e, err := qs.bucket.Latest(ctx, uniqueKey(q, key))
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return 0, 0, 0, nil
	case err != nil:
		return 0, 0, 0, err
	case !e.Live():
		return 0, 0, e.Revision, nil
	}
	var g uniqueGen
	if !g.decodeFast(e.Value, 0) || g.Key != key {
		return 0, 0, 0, fmt.Errorf("%w: unique record %s", ErrUndecodable, e.Key)
	}
	return g.Gen, e.Revision, 0, nil
}
