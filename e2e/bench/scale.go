package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// scaleRows stores 1k, 10k, then 100k sessions and lists them all at each
// size (baton's List, nats.go's WatchAll of the same bucket, etcd's Get of
// the prefix); then joins fresh slots beside 100k sessions and in an empty
// bucket, and reads the servers' memory.
func (b *bench) scaleRows(ctx context.Context) ([]row, error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-scale"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	manager := func(prefix string) (*session.Manager, jetstream.KeyValue, error) {
		// Every bucket `baton status` reads, for its process rows.
		m, err := b.prefixManager(ctx, c, prefix)
		if err != nil {
			return nil, nil, err
		}
		js, err := jetstream.New(c.Conn())
		if err != nil {
			return nil, nil, err
		}
		raw, err := js.KeyValue(ctx, session.BucketConfig(prefix, 1).Name)
		return m, raw, err
	}
	full, fullKV, err := manager("st")
	if err != nil {
		return nil, err
	}
	empty, emptyKV, err := manager("st0")
	if err != nil {
		return nil, err
	}
	ec, err := etcdClient(b.etcd.endpoint, nil)
	if err != nil {
		return nil, err
	}
	defer ec.Close()
	// etcd starts from an empty keyspace, as the st buckets do.
	del, err := ec.Delete(ctx, "\x00", clientv3.WithFromKey())
	if err != nil {
		return nil, err
	}
	if _, err := ec.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return nil, err
	}
	natsIdle, err := rss(b.nats.pid())
	if err != nil {
		return nil, err
	}

	// join_at_0 for etcd is measured now, in the empty keyspace; baton and
	// the floor join at 0 later, interleaved with their joins at 100k.
	etcdJoin := func(ctx context.Context, key string) (time.Duration, error) {
		t0 := time.Now()
		r, err := ec.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(sessionRecord(key)))).Commit()
		if err == nil && !r.Succeeded {
			err = fmt.Errorf("etcd: %s exists", key)
		}
		return time.Since(t0), err
	}
	var etcdAt0 samples
	for i := range b.ops {
		d, err := etcdJoin(ctx, fmt.Sprintf("/join0/j%d", i))
		if err != nil {
			return nil, err
		}
		etcdAt0 = append(etcdAt0, d)
	}

	var rows []row
	stored := 0
	for _, size := range []int{1000, 10000, b.scaleMax} {
		b.progress("  storing sessions up to %d", size)
		if err := storeSessions(ctx, c.Conn(), session.BucketConfig("st", 1).Name, stored, size); err != nil {
			return nil, err
		}
		if err := storeEtcd(ctx, ec, stored, size); err != nil {
			return nil, err
		}
		stored = size
		var lat [3]samples
		sides := []func() (int, error){
			func() (int, error) {
				l, err := full.List(ctx)
				if err != nil {
					return 0, err
				}
				return len(l.Sessions) + len(l.Undecodable), nil
			},
			func() (int, error) { return watchAllCount(ctx, fullKV) },
			func() (int, error) {
				r, err := ec.Get(ctx, "/st/", clientv3.WithPrefix())
				if err != nil {
					return 0, err
				}
				return len(r.Kvs), nil
			},
		}
		for rep := range b.statusReps[size] {
			for _, side := range order(rep, 3) {
				t0 := time.Now()
				n, err := sides[side]()
				if err != nil {
					return nil, fmt.Errorf("listing %d on %s: %w", size, sideNames[side], err)
				}
				if n != size {
					return nil, fmt.Errorf("listing %d on %s found %d", size, sideNames[side], n)
				}
				lat[side] = append(lat[side], time.Since(t0))
			}
		}
		name := "status_" + kilo(size)
		r := row{metric: name + " median", unit: unitDuration,
			baton: dur(lat[0].median()), floor: dur(lat[1].median()), etcd: dur(lat[2].median())}
		if size == b.scaleMax {
			r.goal = []cond{toFloorAtMost(1.3)}
		}
		rows = append(rows, r, row{metric: name + " " + tail(b.statusReps[size]), unit: unitDuration,
			baton: dur(lat[0].p99()), floor: dur(lat[1].p99()), etcd: dur(lat[2].p99())})
		if size == b.scaleMax {
			pr, err := b.statusProcRows(ctx, size)
			if err != nil {
				return nil, err
			}
			rows = append(rows, pr...)
		}
	}

	// Joins of fresh slots: into the bucket of 100k and into the empty one,
	// alternating, for baton and the floor; etcd at 100k now.
	b.progress("  joins beside %s sessions", kilo(b.scaleMax))
	run := time.Now().UnixNano()
	var at0, at100k [2]samples
	var etcdAt100k samples
	rec := sessionRecord("join")
	for i := range b.ops {
		slot := fmt.Sprintf("j%d-%d", run, i)
		steps := []func() (time.Duration, error){
			func() (time.Duration, error) {
				return timeIt(func() error { _, err := full.Join(ctx, slot, "bench"); return err })
			},
			func() (time.Duration, error) {
				return timeIt(func() error { _, err := empty.Join(ctx, slot, "bench"); return err })
			},
			func() (time.Duration, error) {
				return timeIt(func() error { _, err := fullKV.Create(ctx, "f"+slot, rec, jetstream.KeyTTL(time.Hour)); return err })
			},
			func() (time.Duration, error) {
				return timeIt(func() error { _, err := emptyKV.Create(ctx, "f"+slot, rec, jetstream.KeyTTL(time.Hour)); return err })
			},
			func() (time.Duration, error) { return etcdJoin(ctx, "/join100k/"+slot) },
		}
		for _, step := range order(i, len(steps)) {
			d, err := steps[step]()
			if err != nil {
				return nil, fmt.Errorf("join beside 100k, step %d: %w", step, err)
			}
			switch step {
			case 0:
				at100k[0] = append(at100k[0], d)
			case 1:
				at0[0] = append(at0[0], d)
			case 2:
				at100k[1] = append(at100k[1], d)
			case 3:
				at0[1] = append(at0[1], d)
			case 4:
				etcdAt100k = append(etcdAt100k, d)
			}
		}
	}
	natsFull, err := rss(b.nats.pid())
	if err != nil {
		return nil, err
	}
	etcdFull, err := rss(b.etcd.pid())
	if err != nil {
		return nil, err
	}
	rel := func(a, z samples) value { return val(float64(a.median()) / float64(z.median())) }
	rows = append(rows,
		row{metric: "join_at_" + kilo(b.scaleMax) + " / join_at_0 (medians)", unit: unitRatio, noRatios: true,
			baton: rel(at100k[0], at0[0]), floor: rel(at100k[1], at0[1]), etcd: rel(etcdAt100k, etcdAt0),
			goal: []cond{batonAtMost(1.1, unitRatio)}},
		row{metric: "join_at_" + kilo(b.scaleMax) + " median", unit: unitDuration,
			baton: dur(at100k[0].median()), floor: dur(at100k[1].median()), etcd: dur(etcdAt100k.median())},
		row{metric: "rss_up_" + kilo(b.scaleMax) + " (server; floor: the same server before)", unit: unitBytes,
			baton: val(float64(natsFull)), floor: val(float64(natsIdle)), etcd: val(float64(etcdFull))},
	)
	return rows, nil
}

func timeIt(fn func() error) (time.Duration, error) {
	t0 := time.Now()
	err := fn()
	return time.Since(t0), err
}

// storeSessions publishes session records st-from..st-(to-1) into bucket,
// each with a one-hour TTL, as fast as the server takes them.
func storeSessions(ctx context.Context, nc *nats.Conn, bucket string, from, to int) error {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	for i := from; i < to; i++ {
		slot := fmt.Sprintf("s%06d", i)
		msg := nats.NewMsg("$KV." + bucket + "." + slot)
		msg.Header.Set("Nats-TTL", "1h")
		msg.Data = sessionRecord(slot)
		if _, err := js.PublishMsgAsync(msg); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("%d session records not acknowledged within 2m", js.PublishAsyncPending())
	case <-ctx.Done():
		return ctx.Err()
	}
	if n := js.PublishAsyncPending(); n != 0 {
		return fmt.Errorf("%d session records not acknowledged", n)
	}
	return nil
}

// storeEtcd puts /st/s<from>../st/s<to-1> in txns of 128 puts (etcd's
// default limit of operations per txn), 8 txns at a time.
func storeEtcd(ctx context.Context, ec *clientv3.Client, from, to int) error {
	const batch = 128
	n := (to - from + batch - 1) / batch
	return parallel(ctx, n, 8, func(ctx context.Context, j int) error {
		var ops []clientv3.Op
		for i := from + j*batch; i < min(to, from+(j+1)*batch); i++ {
			slot := fmt.Sprintf("s%06d", i)
			ops = append(ops, clientv3.OpPut("/st/"+slot, string(sessionRecord(slot))))
		}
		_, err := ec.Txn(ctx).Then(ops...).Commit()
		return err
	})
}

// watchAllCount lists every value of the bucket the way nats.go does
// (WatchAll, deletes skipped) and counts them.
func watchAllCount(ctx context.Context, kvb jetstream.KeyValue) (int, error) {
	return watchCount(ctx, kvb, ">")
}

// statusProcRows runs `baton status` and `baton status --json` as a user
// does, beside kvlist (a process that lists the same bucket and prints
// each key and value, decoding nothing), interleaved.
func (b *bench) statusProcRows(ctx context.Context, size int) ([]row, error) {
	env := b.cliEnv("st")
	sides := []func() (procRun, lineCounter, error){
		func() (procRun, lineCounter, error) { return runProcCounting(ctx, env, b.baton, "status") },
		func() (procRun, lineCounter, error) { return runProcCounting(ctx, env, b.baton, "status", "--json") },
		func() (procRun, lineCounter, error) {
			return runProcCounting(ctx, env, b.kvlist, b.nats.url, session.BucketConfig("st", 1).Name)
		},
		func() (procRun, lineCounter, error) {
			return runProcCounting(ctx, env, b.kvlist, "-json", b.nats.url, session.BucketConfig("st", 1).Name)
		},
	}
	var lat [4]samples
	for rep := range b.statusReps[size] {
		for _, side := range order(rep, 4) {
			r, out, err := sides[side]()
			if err != nil {
				return nil, err
			}
			if out.lines < size {
				return nil, fmt.Errorf("status process %d printed %d lines, want at least %d", side, out.lines, size)
			}
			lat[side] = append(lat[side], r.wall)
		}
	}
	name := "status_" + kilo(size) + " process"
	return []row{
		{metric: name + " (text; floor: kvlist prints the bucket) median", unit: unitDuration,
			baton: dur(lat[0].median()), floor: dur(lat[2].median()), etcd: missing("—"), goal: []cond{toFloorAtMost(1.3)}},
		{metric: name + " (--json; floor: kvlist -json prints the bucket as one indented JSON document) median", unit: unitDuration,
			baton: dur(lat[1].median()), floor: dur(lat[3].median()), etcd: missing("—"), goal: []cond{toFloorAtMost(1.0)}},
		{metric: name + " (--json beside kvlist's lines) median", unit: unitDuration,
			baton: dur(lat[1].median()), floor: dur(lat[2].median()), etcd: missing("—")},
	}, nil
}

// kilo names a size in thousands: 100000 is "100k".
func kilo(n int) string { return fmt.Sprintf("%dk", n/1000) }
