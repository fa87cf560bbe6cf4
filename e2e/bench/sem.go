package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/sem"
)

// semRows measures a semaphore's uncontended acquire and release beside
// the raw compare-and-set each needs and beside etcd, and the handoff from
// a release to the next waiter's permit beside one raw watch delivery.
//
// etcd has no semaphore (its concurrency package has a Mutex and an
// election); its side is the same recipe baton uses, one key per unit, as
// a transaction: create /sem/<name>/0 if its create revision is 0, under
// the session's lease; release deletes it.
func (b *bench) semRows(ctx context.Context) ([]row, error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-sem"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ss, err := sem.New(c, sem.WithHostID("bench-host"))
	if err != nil {
		return nil, err
	}
	if err := ss.Ensure(ctx, 1); err != nil {
		return nil, err
	}
	run := fmt.Sprintf("s%d", time.Now().UnixNano())
	if _, err := ss.Create(ctx, run, 3); err != nil {
		return nil, err
	}
	h, err := ss.Open(ctx, run)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	floorKV, err := floorBucket(ctx, c, "floor-sem")
	if err != nil {
		return nil, err
	}
	floorW, err := newFloorWriter(c, "floor-sem")
	if err != nil {
		return nil, err
	}
	var counter msgCounter
	ec, err := etcdClient(b.etcd.endpoint, &counter)
	if err != nil {
		return nil, err
	}
	defer ec.Close()
	es, err := concurrency.NewSession(ec, concurrency.WithTTL(60))
	if err != nil {
		return nil, err
	}
	defer es.Close()
	rec := leaseRecord()

	var permit *sem.Permit
	baton := &opsSide{
		acquire: func(ctx context.Context, _ int) (err error) {
			permit, err = h.TryAcquire(ctx, sem.WithTTL(time.Minute), sem.WithoutKeepAlive())
			return err
		},
		release: func(ctx context.Context, _ int) error { return permit.Release(ctx) },
		sent:    func() int64 { return int64(c.Conn().Stats().OutMsgs) },
	}
	// The floor: the unit's compare-and-set create over its tombstone (the
	// revision the last delete left), with the TTL, and the delete.
	floorKey := run + ".0"
	var floorRev uint64
	floorSide := &opsSide{
		acquire: func(ctx context.Context, _ int) (err error) {
			floorRev, err = floorW.update(ctx, floorKey, rec, floorRev, time.Minute)
			return err
		},
		release: func(ctx context.Context, _ int) (err error) {
			floorRev, err = floorW.del(ctx, floorKey, floorRev)
			return err
		},
		sent: func() int64 { return int64(c.Conn().Stats().OutMsgs) },
	}
	etcdKey := "/sem/" + run + "/0"
	etcd := &opsSide{
		acquire: func(ctx context.Context, _ int) error {
			r, err := ec.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(etcdKey), "=", 0)).
				Then(clientv3.OpPut(etcdKey, string(rec), clientv3.WithLease(es.Lease()))).Commit()
			if err == nil && !r.Succeeded {
				err = fmt.Errorf("etcd unit %s taken", etcdKey)
			}
			return err
		},
		release: func(ctx context.Context, _ int) error { _, err := ec.Delete(ctx, etcdKey); return err },
		sent:    func() int64 { return counter.sent.Load() },
	}
	sides := []*opsSide{baton, floorSide, etcd}
	for i := range b.ops {
		for op := range 2 {
			for _, k := range order(i, 3) {
				s := sides[k]
				fn := [2]func(context.Context, int) error{s.acquire, s.release}[op]
				before := s.sent()
				t0 := time.Now()
				if err := fn(ctx, i); err != nil {
					return nil, fmt.Errorf("sem %s %d on %s: %w", [2]string{"acquire", "release"}[op], i, sideNames[k], err)
				}
				s.lat[op] = append(s.lat[op], time.Since(t0))
				s.msgs[op] += s.sent() - before
			}
		}
	}
	var rows []row
	n := float64(b.ops)
	for op, name := range [2]string{"acquire", "release"} {
		rows = append(rows,
			row{metric: "sem " + name + " median (open semaphore, uncontended; floor: the unit's CAS; etcd: the same recipe as a txn)", unit: unitDuration,
				baton: dur(baton.lat[op].median()), floor: dur(floorSide.lat[op].median()), etcd: dur(etcd.lat[op].median()),
				goal: []cond{toFloorAtMost(1.1)}},
			row{metric: "sem " + name + " " + tail(b.ops), unit: unitDuration,
				baton: dur(baton.lat[op].p99()), floor: dur(floorSide.lat[op].p99()), etcd: dur(etcd.lat[op].p99())},
			row{metric: "round_trips_sem_" + name, unit: unitCount, noRatios: true,
				baton: val(float64(baton.msgs[op]) / n), floor: val(float64(floorSide.msgs[op]) / n), etcd: val(float64(etcd.msgs[op]) / n),
				goal: []cond{batonIs(1, unitCount)}})
	}
	handoff, err := b.semHandoff(ctx, ss, c, floorKV, ec)
	if err != nil {
		return nil, err
	}
	return append(rows, handoff...), nil
}

// holdFor is how long a holder holds before it releases, in the handoff.
const holdFor = 30 * time.Millisecond

// semHandoff times, with a waiter first in line on a connection of its
// own, a holder's release to the waiter's permit; beside it the floor, a
// put to its delivery to a watch on another connection, and etcd's Mutex
// handed from Unlock to the waiting Lock.
func (b *bench) semHandoff(ctx context.Context, ss *sem.Semaphores, c *kv.Client, floorKV jetstream.KeyValue, ec *clientv3.Client) ([]row, error) {
	c2, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-sem-waiter"))
	if err != nil {
		return nil, err
	}
	defer c2.Close()
	waiter, err := sem.New(c2, sem.WithHostID("bench-host"))
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("h%d", time.Now().UnixNano())
	if _, err := ss.Create(ctx, name, 1); err != nil {
		return nil, err
	}
	n := min(b.ops, 100)
	var batonLat, floorLat, etcdLat samples
	for i := range n {
		held, err := ss.TryAcquire(ctx, name, sem.WithTTL(time.Minute), sem.WithoutKeepAlive())
		if err != nil {
			return nil, err
		}
		got := make(chan error, 1)
		var next *sem.Permit
		go func() {
			var err error
			next, err = waiter.Acquire(ctx, name, sem.WithTTL(time.Minute), sem.WithoutKeepAlive())
			got <- err
		}()
		if err := waitFor(ctx, 5*time.Second, func() (bool, error) {
			st, err := ss.Status(ctx, name)
			return err == nil && len(st.Waiters) == 1, err
		}); err != nil {
			return nil, fmt.Errorf("the waiter did not get in line: %w", err)
		}
		time.Sleep(holdFor) // its turn came; it watches the units
		t0 := time.Now()
		if err := held.Release(ctx); err != nil {
			return nil, err
		}
		if err := <-got; err != nil {
			return nil, fmt.Errorf("handoff %d: %w", i, err)
		}
		batonLat = append(batonLat, time.Since(t0))
		if err := next.Release(ctx); err != nil {
			return nil, err
		}
	}
	// The floor: a put on one connection to its delivery to a watch on
	// another.
	js2, err := jetstream.New(c2.Conn())
	if err != nil {
		return nil, err
	}
	kv2, err := js2.KeyValue(ctx, "floor-sem")
	if err != nil {
		return nil, err
	}
	w, err := kv2.Watch(ctx, name+".x", jetstream.UpdatesOnly())
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	// As a release comes after the holder's work, the put comes after the
	// same pause as the release above (idle, both processes' threads and
	// the server's sleep, and the one event wakes them all); back to back,
	// on threads kept awake, it is reported beside.
	var hotLat samples
	for _, pause := range []time.Duration{holdFor, 0} {
		for range n {
			time.Sleep(pause)
			t0 := time.Now()
			if _, err := floorKV.Put(ctx, name+".x", []byte("x")); err != nil {
				return nil, err
			}
			select {
			case <-w.Updates():
			case <-time.After(5 * time.Second):
				return nil, fmt.Errorf("the floor's watch delivered nothing within 5s")
			}
			if pause > 0 {
				floorLat = append(floorLat, time.Since(t0))
			} else {
				hotLat = append(hotLat, time.Since(t0))
			}
		}
	}
	// etcd: Unlock of a Mutex to the waiting Lock's return.
	s1, err := concurrency.NewSession(ec, concurrency.WithTTL(60))
	if err != nil {
		return nil, err
	}
	defer s1.Close()
	s2, err := concurrency.NewSession(ec, concurrency.WithTTL(60))
	if err != nil {
		return nil, err
	}
	defer s2.Close()
	for i := range n {
		key := fmt.Sprintf("/semh/%s/%d", name, i)
		m1, m2 := concurrency.NewMutex(s1, key), concurrency.NewMutex(s2, key)
		if err := m1.Lock(ctx); err != nil {
			return nil, err
		}
		got := make(chan error, 1)
		go func() { got <- m2.Lock(ctx) }()
		time.Sleep(holdFor)
		t0 := time.Now()
		if err := m1.Unlock(ctx); err != nil {
			return nil, err
		}
		if err := <-got; err != nil {
			return nil, err
		}
		etcdLat = append(etcdLat, time.Since(t0))
		if err := m2.Unlock(ctx); err != nil {
			return nil, err
		}
	}
	return []row{
		{metric: "sem handoff median, after a 30 ms hold (release → the waiter first in line has its permit; floor: a put's delivery to a watch after the same pause; etcd: Mutex Unlock → waiting Lock)", unit: unitDuration,
			baton: dur(batonLat.median()), floor: dur(floorLat.median()), etcd: dur(etcdLat.median()), goal: []cond{toFloorAtMost(2)}},
		{metric: "a put's delivery to a watch median: after a 30 ms pause (baton column) and back to back (floor column), the cost of waking idle threads", unit: unitDuration,
			baton: dur(floorLat.median()), floor: dur(hotLat.median())},
	}, nil
}
