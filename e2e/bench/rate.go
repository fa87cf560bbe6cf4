package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/rate"
)

// rateRows measures a rate limiter: an uncontended take through an open
// limiter beside the raw compare-and-set it needs (a record of the same
// size rewritten at the revision last seen), and the throughput of one hot
// limiter taken from by 32 goroutines (each with an open limiter of its
// own, on connections of their own) beside the raw compare-and-set
// throughput of one key from as many.
func (b *bench) rateRows(ctx context.Context) ([]row, error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-rate"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ls, err := rate.New(c)
	if err != nil {
		return nil, err
	}
	if err := ls.Ensure(ctx, 1); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("r%d", time.Now().UnixNano())
	// Far above what is taken, so that the row times takes, not refusals,
	// over a short period, so that the record holds a few takes, as a
	// limiter of 50 a minute does.
	if _, err := ls.Create(ctx, name, []rate.Limit{{Max: 5000, Period: rate.Duration(10 * time.Millisecond), Per: rate.PerTake}}); err != nil {
		return nil, err
	}
	h, err := ls.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	floorKV, err := floorBucket(ctx, c, "floor-rate")
	if err != nil {
		return nil, err
	}
	floorW, err := newFloorWriter(c, "floor-rate")
	if err != nil {
		return nil, err
	}
	// The floor writes a record of the size the limiter's is while takes
	// run back to back (its log holds the takes of the last 10 ms).
	for range 50 {
		if _, err := h.Take(ctx); err != nil {
			return nil, err
		}
	}
	cur, err := ls.Bucket().Get(ctx, "rate."+name)
	if err != nil {
		return nil, err
	}
	rec := cur.Value
	var floorRev uint64
	var lat [2]samples
	var msgs [2]int64
	sides := [2]func(context.Context) error{
		func(ctx context.Context) error { _, err := h.Take(ctx); return err },
		func(ctx context.Context) (err error) {
			floorRev, err = floorW.update(ctx, name, rec, floorRev, 0)
			return err
		},
	}
	for i := range b.ops {
		for _, k := range order(i, 2) {
			before := int64(c.Conn().Stats().OutMsgs)
			t0 := time.Now()
			if err := sides[k](ctx); err != nil {
				return nil, fmt.Errorf("rate take %d (%s): %w", i, [2]string{"baton", "floor"}[k], err)
			}
			lat[k] = append(lat[k], time.Since(t0))
			msgs[k] += int64(c.Conn().Stats().OutMsgs) - before
		}
	}
	rows := []row{
		{metric: "rate take median (open limiter, uncontended; floor: one CAS of a record of its size)", unit: unitDuration,
			baton: dur(lat[0].median()), floor: dur(lat[1].median()), etcd: missing("—"), goal: []cond{toFloorAtMost(1.2)}},
		{metric: "rate take " + tail(b.ops), unit: unitDuration, baton: dur(lat[0].p99()), floor: dur(lat[1].p99()), etcd: missing("—")},
		{metric: "round_trips_rate_take", unit: unitCount, noRatios: true,
			baton: val(float64(msgs[0]) / float64(b.ops)), floor: val(float64(msgs[1]) / float64(b.ops)), etcd: missing("—"),
			goal: []cond{batonIs(1, unitCount)}},
	}
	hot, err := b.rateThroughput(ctx, name, floorKV)
	if err != nil {
		return nil, err
	}
	return append(rows, hot...), nil
}

// rateThroughput runs 32 takers of one limiter, then 32 writers of one
// raw key, each for the same time, and reports admitted takes and
// written CAS per second.
func (b *bench) rateThroughput(ctx context.Context, name string, floorKV jetstream.KeyValue) ([]row, error) {
	const goroutines = 32
	window := 3 * time.Second
	if b.quick {
		window = time.Second
	}
	conns := make([]*kv.Client, 4)
	for i := range conns {
		c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName(fmt.Sprintf("bench-rate-%d", i)))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conns[i] = c
	}
	var handles []*rate.Handle
	for i := range goroutines {
		ls, err := rate.New(conns[i%len(conns)])
		if err != nil {
			return nil, err
		}
		h, err := ls.Open(ctx, name)
		if err != nil {
			return nil, err
		}
		defer h.Close()
		handles = append(handles, h)
	}
	run := func(fn func(ctx context.Context, i int) error) (float64, error) {
		var n atomic.Int64
		var wg sync.WaitGroup
		var first error
		var once sync.Once
		deadline := time.Now().Add(window)
		for i := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					if err := fn(ctx, i); err != nil {
						once.Do(func() { first = err })
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / window.Seconds(), first
	}
	batonRate, err := run(func(ctx context.Context, i int) error { _, err := handles[i].Take(ctx); return err })
	if err != nil {
		return nil, fmt.Errorf("hot limiter: %w", err)
	}
	// The floor: the same goroutines rewriting one key by compare-and-set,
	// each going on from the revision its last conflict showed.
	key := name + ".hot"
	if _, err := floorKV.Put(ctx, key, []byte("0")); err != nil {
		return nil, err
	}
	floorRate, err := run(func(ctx context.Context, i int) error {
		kvh := floorKV
		for {
			e, err := kvh.Get(ctx, key)
			if err != nil {
				return err
			}
			if _, err := kvh.Update(ctx, key, []byte("x"), e.Revision()); err == nil || !errors.Is(err, jetstream.ErrKeyExists) {
				return err
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("hot key floor: %w", err)
	}
	return []row{{metric: fmt.Sprintf("rate takes/s of one hot limiter, %d goroutines (floor: get and CAS of one key from as many)", goroutines), unit: unitRate,
		baton: val(batonRate), floor: val(floorRate), etcd: missing("—")}}, nil
}
