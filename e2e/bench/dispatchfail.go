package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
)

// failoverTTL is the TTL of the queues whose dispatcher is killed: a
// dispatcher on another host is replaced once its term's lease expires.
const failoverTTL = 2 * time.Second

// dispatcherFailoverRows: SIGKILL of a queue's dispatcher to the start of
// a task added at that moment, with four worker processes on the
// dispatcher's host (a worker there sees its process gone) and with four
// on four hosts (the term's lease must expire first).
func (b *bench) dispatcherFailoverRows(ctx context.Context, e *queueEnv) ([]row, error) {
	ls, err := lease.New(e.c, lease.WithPrefix(queuePrefix))
	if err != nil {
		return nil, err
	}
	reps := 5
	if b.quick {
		reps = 3
	}
	var worst [2]time.Duration
	for s, host := range []func(int) string{
		func(int) string { return "bench-host" },
		func(i int) string { return fmt.Sprintf("bench-host-%d", i) },
	} {
		q := fmt.Sprintf("tk%d", s)
		cfg := queue.DefaultConfig(q)
		cfg.MaxActive, cfg.TTL = 16, queue.Duration(failoverTTL)
		if _, _, err := e.qs.Create(ctx, cfg); err != nil {
			return nil, err
		}
		ws, err := b.startQworkers(ctx, q, 4, host, true)
		if err != nil {
			return nil, err
		}
		defer ws.stop()
		el, err := ls.Election(queue.DispatchElection(q))
		if err != nil {
			return nil, err
		}
		for i := range reps {
			d, err := b.dispatcherFailover(ctx, e, ws, el, i)
			if err != nil {
				return nil, fmt.Errorf("dispatcher failover of %s: %w", q, err)
			}
			b.progress("queue dispatcher failover (%s): %s", []string{"same host", "other hosts"}[s], d.Round(time.Millisecond))
			worst[s] = max(worst[s], d)
		}
	}
	return []row{
		{metric: fmt.Sprintf("queue dispatcher SIGKILL to the next task's start, workers on its host (worst of %d)", reps), unit: unitDuration,
			baton: dur(worst[0]), floor: missing("—"), etcd: missing("—"), goal: []cond{batonAtMost(float64(500*time.Millisecond), unitDuration)}},
		{metric: fmt.Sprintf("queue dispatcher SIGKILL to the next task's start, workers on other hosts, TTL %s (worst of %d)", failoverTTL, reps), unit: unitDuration,
			baton: dur(worst[1]), floor: missing("—"), etcd: missing("—"), goal: []cond{batonAtMost(float64(failoverTTL+400*time.Millisecond), unitDuration)}},
	}, nil
}

// dispatcherFailover finds the dispatcher of ws's queue, has it dispatch
// one task (so that it has synced), kills it, adds a task at once and times
// the kill to that task's start in another process; then it starts a
// worker in the dead one's place.
func (b *bench) dispatcherFailover(ctx context.Context, e *queueEnv, ws *qworkers, el *lease.Election, i int) (time.Duration, error) {
	at := -1
	err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		info, err := el.Leader(ctx)
		if errors.Is(err, lease.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for j, p := range ws.procs {
			if p.pid() == info.PID && !p.exited() {
				at = j
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return 0, fmt.Errorf("no dispatcher among the workers: %w", err)
	}
	if _, err := b.workerDispatch(ctx, e, ws.q, ws, 2*i); err != nil {
		return 0, err
	}
	for len(ws.started) > 0 {
		<-ws.started
	}
	t0 := time.Now()
	ws.procs[at].kill()
	d, err := b.dispatchFrom(ctx, e, ws.q, ws, 2*i+1, t0)
	if err != nil {
		return 0, err
	}
	return d, ws.spawn(ctx, at, -1)
}
