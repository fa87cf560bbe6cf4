package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/queue"
)

// queueRateRows: a queue with a rate limit of 200 a second and b.pending
// no-op tasks waiting on 1000 keys, two workers: the starts admitted in
// a window after a warm-up, read from the rate record's writes (each at
// its server time), beside the limit; and the most any sliding second
// held, which must not pass it.
func (b *bench) queueRateRows(ctx context.Context, e *queueEnv) ([]row, error) {
	const limit = 200
	q := "qrate"
	cfg := queue.DefaultConfig(q)
	cfg.Rate = &queue.RateLimit{Max: limit, Period: queue.Duration(time.Second)}
	if _, _, err := e.qs.Create(ctx, cfg); err != nil {
		return nil, err
	}
	if err := storeTasks(ctx, e.c.Conn(), e.qb, q, 0, b.pending, 1000); err != nil {
		return nil, err
	}
	defer func() {
		if s, err := e.js.Stream(context.WithoutCancel(ctx), "KV_"+e.qb); err == nil {
			_ = s.Purge(context.WithoutCancel(ctx), jetstream.WithPurgeSubject("$KV."+e.qb+"."+q+".>"))
		}
	}()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := e.qs.Bucket().Watch(wctx, q+".rate")
	if err != nil {
		return nil, err
	}
	noop := queue.HandlerFunc(func(context.Context, *queue.Task) error { return nil })
	for i := range 2 {
		stop, err := b.startWorker(ctx, q, fmt.Sprintf("rate%d", i), noop, queue.WithConcurrency(16))
		if err != nil {
			return nil, err
		}
		defer func() { _ = stop() }()
	}
	window := 10 * time.Second
	if b.quick {
		window = 3 * time.Second
	}
	type admission struct {
		at time.Time
		n  int
	}
	var as []admission
	var first time.Time
	deadline := time.After(2*time.Minute + window)
	for first.IsZero() || len(as) == 0 || as[len(as)-1].at.Before(first.Add(window)) {
		select {
		case en := <-w.Updates():
			if en == nil || !en.Live() {
				continue
			}
			var rec struct {
				Last int `json:"last"`
			}
			if json.Unmarshal(en.Value, &rec) != nil || rec.Last == 0 {
				continue
			}
			// The window opens a second after the first admission: the
			// workers' start is not what the limit holds.
			if first.IsZero() {
				first = en.Created.Add(time.Second)
			}
			as = append(as, admission{en.Created, rec.Last})
		case <-deadline:
			return nil, fmt.Errorf("the rate-limited queue admitted %d writes in %s", len(as), 2*time.Minute+window)
		}
	}
	admitted, most := 0, 0
	for i, a := range as {
		if !a.at.Before(first) && a.at.Before(first.Add(window)) {
			admitted += a.n
		}
		n := 0
		for _, x := range as[:i+1] {
			if x.at.After(a.at.Add(-time.Second)) {
				n += x.n
			}
		}
		most = max(most, n)
	}
	broken := ""
	if most > limit {
		broken = fmt.Sprintf("a second held %d starts", most)
	}
	perSec := float64(admitted) / window.Seconds()
	return []row{
		{metric: fmt.Sprintf("queue rate-limited starts/s (limit %d/1s, %s tasks waiting, 2 workers; floor: the limit)", limit, kilo(b.pending)), unit: unitRate,
			baton: val(perSec), floor: val(limit), etcd: missing("—"),
			goal: []cond{toFloorAtLeast(0.95), toFloorAtMost(1.0)}, broken: broken},
		{metric: "queue rate-limited: most starts in any sliding second (the limit: 200)", unit: unitCount,
			baton: val(float64(most)), floor: missing("—"), etcd: missing("—"), noRatios: true},
	}, nil
}
