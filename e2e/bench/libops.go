package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
)

// leaseRecord is what the floor and etcd write: a lease record of the size
// baton writes, so every side carries the same bytes.
func leaseRecord() []byte {
	now := time.Now().UTC()
	b, _ := json.Marshal(lease.Record{
		Key: "k0000", Holder: "4b0c2f7e-8d43-4c52-9a0e-2f1de0c7a9b1", Host: "bench-host", PID: 123456,
		PIDStart: "22dfbb72-a18f-46a8-b78a-306df6e6b7a6:155166", TTL: lease.Duration(time.Minute),
		AcquiredAt: now, RenewedAt: now,
	})
	return b
}

// opsSide is one side's acquire, renew and release of a fresh key.
type opsSide struct {
	acquire, renew, release func(ctx context.Context, i int) error
	sent                    func() int64 // messages sent so far
	lat                     [3]samples
	msgs                    [3]int64
}

// opsRows measures acquire, renew and release of a fresh key per round on
// srv (baton and the raw KV op on one connection) and on etcd, interleaved
// op by op (see order).
func (b *bench) opsRows(ctx context.Context, srv *natsServer, suffix string) ([]row, error) {
	c, err := kv.Connect(ctx, kv.WithURL(srv.url), kv.WithName("bench-ops"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ls, err := lease.New(c, lease.WithInstance("bench-ops"), lease.WithHostID("bench-host"))
	if err != nil {
		return nil, err
	}
	if err := ls.Ensure(ctx, 1); err != nil {
		return nil, err
	}
	floorKV, err := floorBucket(ctx, c, "floor-ops")
	if err != nil {
		return nil, err
	}
	floorW, err := newFloorWriter(c, "floor-ops")
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
	ka, err := pb.NewLeaseClient(ec.ActiveConnection()).LeaseKeepAlive(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = ka.CloseSend() }()
	rec := leaseRecord()
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	key := func(i int) string { return fmt.Sprintf("ops-%s-%d", run, i) }

	held := map[int]*lease.Lease{}
	baton := &opsSide{
		acquire: func(ctx context.Context, i int) error {
			l, err := ls.TryAcquire(ctx, key(i), lease.WithTTL(time.Minute), lease.WithoutKeepAlive())
			held[i] = l
			return err
		},
		renew:   func(ctx context.Context, i int) error { return held[i].Renew(ctx) },
		release: func(ctx context.Context, i int) error { err := held[i].Release(ctx); delete(held, i); return err },
		sent:    func() int64 { return int64(c.Conn().Stats().OutMsgs) },
	}
	revs := map[int]uint64{}
	floorSide := &opsSide{
		acquire: func(ctx context.Context, i int) (err error) {
			revs[i], err = floorKV.Create(ctx, key(i), rec, jetstream.KeyTTL(time.Minute))
			return err
		},
		// nats.go's Update cannot carry a per-key TTL; baton's renewal does,
		// so the floor's renewal is the same CAS publish with Nats-TTL.
		renew: func(ctx context.Context, i int) (err error) {
			revs[i], err = floorW.update(ctx, key(i), rec, revs[i], time.Minute)
			return err
		},
		release: func(ctx context.Context, i int) error {
			err := floorKV.Delete(ctx, key(i), jetstream.LastRevision(revs[i]))
			delete(revs, i)
			return err
		},
		sent: func() int64 { return int64(c.Conn().Stats().OutMsgs) },
	}
	mutexes := map[int]*concurrency.Mutex{}
	etcd := &opsSide{
		acquire: func(ctx context.Context, i int) error {
			m := concurrency.NewMutex(es, "/"+key(i))
			mutexes[i] = m
			return m.TryLock(ctx)
		},
		// A session's renewal: one keep-alive on an open LeaseKeepAlive
		// stream, as the session's own keep-alive loop sends it.
		renew: func(ctx context.Context, i int) error {
			if err := ka.Send(&pb.LeaseKeepAliveRequest{ID: int64(es.Lease())}); err != nil {
				return err
			}
			r, err := ka.Recv()
			if err == nil && r.TTL <= 0 {
				err = fmt.Errorf("etcd lease %x expired", es.Lease())
			}
			return err
		},
		release: func(ctx context.Context, i int) error {
			err := mutexes[i].Unlock(ctx)
			delete(mutexes, i)
			return err
		},
		sent: func() int64 { return counter.sent.Load() },
	}
	sides := []*opsSide{baton, floorSide, etcd}
	for i := range b.ops {
		for op := range 3 {
			for _, k := range order(i, 3) {
				s := sides[k]
				fn := [3]func(context.Context, int) error{s.acquire, s.renew, s.release}[op]
				before := s.sent()
				t0 := time.Now()
				if err := fn(ctx, i); err != nil {
					return nil, fmt.Errorf("%s %d on %s: %w", opNames[op], i, sideNames[indexOf(sides, s)], err)
				}
				s.lat[op] = append(s.lat[op], time.Since(t0))
				s.msgs[op] += s.sent() - before
			}
		}
	}

	var rows []row
	for op, name := range opNames {
		// What baton adds to the KV op is at most a tenth of it. Where the
		// design allows it (acquire and release are one durable write for
		// both, where etcd's is a Raft round and a WAL entry), baton also
		// takes at most half of etcd's time; renew is not compared so,
		// since etcd's keep-alive is not written to its log at all.
		med := row{metric: name + suffix, unit: unitDuration,
			baton: dur(baton.lat[op].median()), floor: dur(floorSide.lat[op].median()), etcd: dur(etcd.lat[op].median()),
			goal: []cond{toFloorAtMost(1.1)}}
		if suffix == "" {
			if name != "renew" {
				med.goal = append(med.goal, toEtcdAtMost(0.5))
			}
			med.metric += " median"
		} else {
			med.metric = name + " median" + suffix
		}
		rows = append(rows, med)
		if suffix == "" {
			rows = append(rows, row{metric: name + " " + tail(b.ops), unit: unitDuration,
				baton: dur(baton.lat[op].p99()), floor: dur(floorSide.lat[op].p99()), etcd: dur(etcd.lat[op].p99())})
		}
	}
	if suffix == "" {
		n := float64(b.ops)
		for op, name := range opNames {
			rows = append(rows, row{metric: "round_trips_" + name, unit: unitCount, noRatios: true,
				baton: val(float64(baton.msgs[op]) / n), floor: val(float64(floorSide.msgs[op]) / n), etcd: val(float64(etcd.msgs[op]) / n),
				goal: []cond{batonIs(1, unitCount)}})
		}
	}
	return rows, nil
}

var (
	opNames   = [3]string{"acquire", "renew", "release"}
	sideNames = [3]string{"baton", "floor", "etcd"}
)

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// floorWriter is the floor of a renewal: nats.go's CAS publish of the
// value with the expected revision and the per-key TTL (Nats-TTL), one
// round trip, which nats.go's KV Update cannot express.
type floorWriter struct {
	js     jetstream.JetStream
	prefix string
}

func newFloorWriter(c *kv.Client, bucket string) (*floorWriter, error) {
	js, err := jetstream.New(c.Conn())
	return &floorWriter{js: js, prefix: "$KV." + bucket + "."}, err
}

func (f *floorWriter) update(ctx context.Context, key string, value []byte, rev uint64, ttl time.Duration) (uint64, error) {
	m := nats.NewMsg(f.prefix + key)
	m.Data = value
	if ttl > 0 {
		m.Header.Set("Nats-TTL", ttl.String())
	}
	ack, err := f.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// floorBucket is a bucket shaped like baton's (one revision per key,
// per-key TTLs, markers) for the raw nats.go operations.
func floorBucket(ctx context.Context, c *kv.Client, name string) (jetstream.KeyValue, error) {
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: name, MarkerTTL: lease.MarkerTTL}); err != nil {
		return nil, err
	}
	js, err := jetstream.New(c.Conn())
	if err != nil {
		return nil, err
	}
	return js.KeyValue(ctx, name)
}

// del is the floor of a compare-and-set delete: the KV delete marker
// published with the expected revision, one round trip; it returns the
// marker's revision (what the next create expects).
func (f *floorWriter) del(ctx context.Context, key string, rev uint64) (uint64, error) {
	m := nats.NewMsg(f.prefix + key)
	m.Header.Set("KV-Operation", "DEL")
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(rev, 10))
	ack, err := f.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
