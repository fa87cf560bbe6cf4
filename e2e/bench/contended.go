package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

const contenders = 50

// race runs try on contenders goroutines released together, and returns
// how many won and the time from the release to the last answer.
func race(ctx context.Context, try func(ctx context.Context, i int) (won bool, err error)) (winners int, last time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	answered := make([]time.Time, contenders)
	won := make([]bool, contenders)
	errs := make([]error, contenders)
	ready.Add(contenders)
	done.Add(contenders)
	for i := range contenders {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			won[i], errs[i] = try(ctx, i)
			answered[i] = time.Now()
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	for i := range contenders {
		if errs[i] != nil {
			return 0, 0, errs[i]
		}
		if won[i] {
			winners++
		}
		last = max(last, answered[i].Sub(t0))
	}
	return winners, last, nil
}

// contendedRows has 50 contenders, each with its own connection, host id
// and state dir as if on 50 hosts, join one slot at once: exactly one must
// win; the row is the time until all 50 have their answer. The floor is
// nats.go's KV Create, etcd a create-if-absent txn.
func (b *bench) contendedRows(ctx context.Context) ([]row, error) {
	managers := make([]*session.Manager, contenders)
	floors := make([]jetstream.KeyValue, contenders)
	etcds := make([]*clientv3.Client, contenders)
	for i := range contenders {
		c, err := kv.Connect(ctx, kv.WithURL(b.nats.url))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		sd, err := hostlocal.OpenStateDir(mkdir(b.shm, fmt.Sprintf("contend-%d", i)))
		if err != nil {
			return nil, err
		}
		m, err := session.NewManager(c, session.WithHostID(fmt.Sprintf("contend-host-%d", i)), session.WithStateDir(sd), session.WithPrefix("contend"))
		if err != nil {
			return nil, err
		}
		if i == 0 {
			if err := m.Ensure(ctx, 1); err != nil {
				return nil, err
			}
		}
		managers[i] = m
		if floors[i], err = floorBucket(ctx, c, "floor-contend"); err != nil {
			return nil, err
		}
		if etcds[i], err = etcdClient(b.etcd.endpoint, nil); err != nil {
			return nil, err
		}
		defer etcds[i].Close()
	}
	run := time.Now().UnixNano()
	rec := sessionRecord("contended")
	sides := []func(ctx context.Context, r, i int) (bool, error){
		func(ctx context.Context, r, i int) (bool, error) {
			_, err := managers[i].Join(ctx, fmt.Sprintf("c%d-%d", run, r), "bench", session.WithTTL(time.Minute))
			var held *session.HeldError
			if errors.As(err, &held) {
				return false, nil
			}
			return err == nil, err
		},
		func(ctx context.Context, r, i int) (bool, error) {
			_, err := floors[i].Create(ctx, fmt.Sprintf("c%d-%d", run, r), rec, jetstream.KeyTTL(time.Minute))
			if errors.Is(err, jetstream.ErrKeyExists) {
				return false, nil
			}
			return err == nil, err
		},
		func(ctx context.Context, r, i int) (bool, error) {
			k := fmt.Sprintf("/contend/c%d-%d", run, r)
			resp, err := etcds[i].Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, string(rec))).Else(clientv3.OpGet(k)).Commit()
			if err != nil {
				return false, err
			}
			return resp.Succeeded, nil
		},
	}
	var last [3]samples
	var wrong [3]int
	for r := range b.contendRounds {
		for _, side := range order(r, 3) {
			winners, d, err := race(ctx, func(ctx context.Context, i int) (bool, error) { return sides[side](ctx, r, i) })
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", sideNames[side], r, err)
			}
			if winners != 1 {
				wrong[side]++
			}
			last[side] = append(last[side], d)
		}
	}
	broken := ""
	if wrong[0] > 0 {
		broken = fmt.Sprintf("%d of %d rounds without exactly one winner", wrong[0], b.contendRounds)
	}
	for side := 1; side < 3; side++ {
		if wrong[side] > 0 {
			return nil, fmt.Errorf("%s: %d rounds without exactly one winner", sideNames[side], wrong[side])
		}
	}
	return []row{
		{metric: "contended_join_50 (all answered) median", unit: unitDuration,
			baton: dur(last[0].median()), floor: dur(last[1].median()), etcd: dur(last[2].median()),
			// A loser of baton's join reads the slot's holder to say who
			// it is: one round trip more than the floor's create.
			goal: []cond{toFloorAtMost(2)}, broken: broken},
		{metric: "contended_join_50 (all answered) " + tail(b.contendRounds), unit: unitDuration,
			baton: dur(last[0].p99()), floor: dur(last[1].p99()), etcd: dur(last[2].p99())},
	}, nil
}
