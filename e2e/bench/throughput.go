package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

const (
	tpSessions = 1024
	tpWorkers  = 32
)

// worker renews session n (one of its own) once.
type tpSide struct {
	newWorker func(ctx context.Context) (renew func(ctx context.Context, n int) error, stop func(), err error)
	ops       int64
	took      time.Duration
}

// throughputRows renews 1024 sessions from 32 goroutines for a while per
// side: baton's commit, nats.go's KV Update, and etcd's keep-alive plus a
// compare-and-set txn (what a session's heartbeat is there: the lease stays
// alive and the record changes). Slices alternate between the sides.
func (b *bench) throughputRows(ctx context.Context, srv *natsServer, suffix string) ([]row, error) {
	c, err := kv.Connect(ctx, kv.WithURL(srv.url), kv.WithName("bench-throughput"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	prefix := "tp"
	sd, err := hostlocal.OpenStateDir(mkdir(b.shm, "tp-state"+fmt.Sprint(time.Now().UnixNano())))
	if err != nil {
		return nil, err
	}
	m, err := session.NewManager(c, session.WithHostID("tp-host"), session.WithStateDir(sd), session.WithPrefix(prefix))
	if err != nil {
		return nil, err
	}
	if err := m.Ensure(ctx, 1); err != nil {
		return nil, err
	}
	floorKV, err := floorBucket(ctx, c, "floor-tp")
	if err != nil {
		return nil, err
	}
	floor, err := newFloorWriter(c, "floor-tp")
	if err != nil {
		return nil, err
	}
	ec, err := etcdClient(b.etcd.endpoint, nil)
	if err != nil {
		return nil, err
	}
	defer ec.Close()

	run := time.Now().UnixNano()
	slot := func(n int) string { return fmt.Sprintf("tp-%d-%d", run, n) }
	rec := sessionRecord("throughput")
	sessions := make([]*session.Session, tpSessions)
	floorRevs := make([]uint64, tpSessions)
	leases := make([]clientv3.LeaseID, tpSessions)
	etcdRevs := make([]int64, tpSessions)
	err = parallel(ctx, tpSessions, tpWorkers, func(ctx context.Context, n int) (err error) {
		if sessions[n], err = m.Join(ctx, slot(n), "bench", session.WithTTL(5*time.Minute)); err != nil {
			return err
		}
		if floorRevs[n], err = floorKV.Create(ctx, slot(n), rec, jetstream.KeyTTL(5*time.Minute)); err != nil {
			return err
		}
		g, err := ec.Grant(ctx, 300)
		if err != nil {
			return err
		}
		leases[n] = g.ID
		p, err := ec.Put(ctx, "/tp/"+slot(n), string(rec), clientv3.WithLease(g.ID))
		if err != nil {
			return err
		}
		etcdRevs[n] = p.Header.Revision
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = parallel(context.WithoutCancel(ctx), tpSessions, tpWorkers, func(ctx context.Context, n int) error {
			if sessions[n] == nil {
				return nil
			}
			return m.Close(ctx, sessions[n], "success")
		})
	}()

	sides := []*tpSide{
		{newWorker: func(context.Context) (func(context.Context, int) error, func(), error) {
			return func(ctx context.Context, n int) error {
				s, err := m.Commit(ctx, sessions[n], "")
				if err == nil {
					sessions[n] = s
				}
				return err
			}, func() {}, nil
		}},
		{newWorker: func(context.Context) (func(context.Context, int) error, func(), error) {
			return func(ctx context.Context, n int) error {
				rev, err := floor.update(ctx, slot(n), rec, floorRevs[n], 5*time.Minute)
				if err == nil {
					floorRevs[n] = rev
				}
				return err
			}, func() {}, nil
		}},
		{newWorker: func(ctx context.Context) (func(context.Context, int) error, func(), error) {
			ka, err := pb.NewLeaseClient(ec.ActiveConnection()).LeaseKeepAlive(ctx)
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context, n int) error {
				if err := ka.Send(&pb.LeaseKeepAliveRequest{ID: int64(leases[n])}); err != nil {
					return err
				}
				if r, err := ka.Recv(); err != nil || r.TTL <= 0 {
					return fmt.Errorf("etcd keep-alive of lease %x: ttl %d, %v", leases[n], r.GetTTL(), err)
				}
				k := "/tp/" + slot(n)
				resp, err := ec.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", etcdRevs[n])).
					Then(clientv3.OpPut(k, string(rec), clientv3.WithLease(leases[n]))).Commit()
				if err != nil {
					return err
				}
				if !resp.Succeeded {
					return fmt.Errorf("etcd txn on %s: revision moved", k)
				}
				etcdRevs[n] = resp.Header.Revision
				return nil
			}, func() { _ = ka.CloseSend() }, nil
		}},
	}
	for r := range b.throughputRounds {
		for _, k := range order(r, 3) { // 6 rounds go through every order
			s := sides[k]
			ops, took, err := slice(ctx, b.throughputSlice, s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", sideNames[k], err)
			}
			s.ops += ops
			s.took += took
		}
	}
	rate := func(s *tpSide) value { return val(float64(s.ops) / s.took.Seconds()) }
	r := row{metric: "throughput_renew (1024 sessions, 32 goroutines)" + suffix, unit: unitRate,
		baton: rate(sides[0]), floor: rate(sides[1]), etcd: rate(sides[2])}
	if suffix == "" {
		// The goal is set against the default durability; with an fsync
		// before every acknowledgement both sides are bound by the disk, and
		// the row shows that trade.
		r.goal = []cond{toEtcdAtLeast(3)}
	}
	return []row{r}, nil
}

// slice runs tpWorkers workers of side s for d, each renewing its own
// share of the sessions in turn, and returns the renewals done.
func slice(ctx context.Context, d time.Duration, s *tpSide) (int64, time.Duration, error) {
	var ops atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, tpWorkers)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	deadline := t0.Add(d)
	for w := range tpWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			renew, stop, err := s.newWorker(sctx)
			if err != nil {
				errs[w] = err
				return
			}
			defer stop()
			for n := w; time.Now().Before(deadline); n += tpWorkers {
				if n >= tpSessions {
					n = w
				}
				if err := renew(sctx, n); err != nil {
					errs[w] = err
					cancel()
					return
				}
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	return ops.Load(), took, nil
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first
// error; after one, the others stop taking work.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err() // the caller's context ended
	}
	return first
}
