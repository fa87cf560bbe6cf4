package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/reserve"
)

// resvLive is how many reservations the space holds while the rows run.
const resvLive = 1000

// resvAgents is how many agents contend for the space at once.
const resvAgents = 200

// resvRequest is the reservation timed: five patterns, none in the way
// of the live ones.
var resvRequest = []string{"src/bench/**", "docs/bench.md", "internal/bench/*.go", "cmd/bench/**", "test/bench_test.go"}

// resvPatterns are the patterns of live reservation i: a package, a
// directory or a file or two, as agents working on a repository take them;
// every tenth shares the top-level docs' index.
func resvPatterns(i int) []string {
	switch i % 4 {
	case 0:
		return []string{fmt.Sprintf("src/pkg%d/**", i)}
	case 1:
		return []string{fmt.Sprintf("src/pkg%d/**", i), fmt.Sprintf("docs/file%d.md", i)}
	case 2:
		return []string{fmt.Sprintf("internal/mod%d/*.go", i)}
	default:
		return []string{fmt.Sprintf("docs/file%d.md", i), fmt.Sprintf("web/page%d/**", i)}
	}
}

// resvEnv is the space the parts of the section share.
type resvEnv struct {
	c     *kv.Client
	ss    *reserve.Spaces // the handle timed: it knows the space
	space string
	rec   []byte // the record with the timed request in it
	ttl   time.Duration
}

// reserveRows measures path reservations in a space of resvLive live
// reservations: a reserve of five patterns and its release on a handle
// that knows the space, beside one raw compare-and-set of a record of the
// same size (what any write of the space costs); baton reserve check as a
// process beside kvfloor reading the record; the record's size; and
// resvAgents agents reserving and releasing paths of their own at once.
func (b *bench) reserveRows(ctx context.Context) ([]row, error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-resv"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ss, err := reserve.New(c, reserve.WithHostID("bench-host"))
	if err != nil {
		return nil, err
	}
	if err := ss.Ensure(ctx, 1); err != nil {
		return nil, err
	}
	e := &resvEnv{c: c, ss: ss, space: fmt.Sprintf("resv%d", time.Now().UnixNano()), ttl: 15*time.Minute + 2*time.Second}
	stopFill, err := b.fillSpace(ctx, e.space, resvLive)
	if err != nil {
		return nil, err
	}
	defer stopFill()
	defer func() {
		// What the space holds would expire with its TTL; the sections
		// after this one need not carry it meanwhile.
		dctx := context.WithoutCancel(ctx)
		if cur, err := ss.Bucket().Latest(dctx, reserve.Key(e.space)); err == nil && cur.Live() {
			_ = ss.Bucket().Delete(dctx, reserve.Key(e.space), cur.Revision, nil)
		}
	}()
	// The handle reads the space once (its first write reads it, as any
	// handle's does), then knows it. The floor writes the record as it is
	// with the request in it, with the record's TTL.
	r, err := ss.TryReserve(ctx, e.space, resvRequest, reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
	if err != nil {
		return nil, err
	}
	cur, err := ss.Bucket().Latest(ctx, reserve.Key(e.space))
	if err != nil {
		return nil, err
	}
	e.rec = cur.Value
	if err := r.Release(ctx); err != nil {
		return nil, err
	}
	rows := []row{{metric: fmt.Sprintf("reservation space record at %s reservations", kilo(resvLive)), unit: unitKiB, noRatios: true,
		baton: val(float64(len(e.rec))), floor: missing("—"), etcd: missing("—")}}
	for _, part := range []struct {
		name  string
		fn    func(context.Context, *resvEnv) ([]row, error)
		named bool // run only when -only names it (says "beside")
	}{
		{"reservations reserve", b.reserveOpRows, false},
		{"reservations check", b.reserveCheckRows, false},
		{"reservations contention", b.reserveContention, false},
		{"reservations contention beside " + kilo(resvLive), b.reserveContentionBeside, true},
	} {
		if strings.HasPrefix(b.only, "reservations ") && !strings.Contains(part.name, b.only) ||
			part.named && !strings.Contains(b.only, "beside") {
			continue
		}
		b.progress("  %s", part.name)
		r, err := part.fn(ctx, e)
		rows = append(rows, r...)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", part.name, err)
		}
	}
	return rows, nil
}

// reserveOpRows times a reserve of five patterns and its release, each
// beside one raw compare-and-set of the record.
func (b *bench) reserveOpRows(ctx context.Context, e *resvEnv) ([]row, error) {
	c, ss := e.c, e.ss
	floorW, err := newFloorWriter(c, "floor-resv")
	if err != nil {
		return nil, err
	}
	if _, err := floorBucket(ctx, c, "floor-resv"); err != nil {
		return nil, err
	}
	var r *reserve.Reservation
	var floorRev uint64
	floorCAS := func(ctx context.Context) (err error) {
		floorRev, err = floorW.update(ctx, e.space, e.rec, floorRev, e.ttl)
		return err
	}
	var lat [2][2]samples // [op][side]
	var msgs [2][2]int64
	sides := [2][2]func(context.Context) error{
		{ // reserve
			func(ctx context.Context) (err error) {
				r, err = ss.TryReserve(ctx, e.space, resvRequest, reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
				return err
			},
			floorCAS,
		},
		{ // release
			func(ctx context.Context) error { return r.Release(ctx) },
			floorCAS,
		},
	}
	for i := range b.ops {
		for op := range 2 {
			for _, k := range order(i, 2) {
				before := int64(c.Conn().Stats().OutMsgs)
				t0 := time.Now()
				if err := sides[op][k](ctx); err != nil {
					return nil, fmt.Errorf("%s %d (%s): %w", [2]string{"reserve", "release"}[op], i, [2]string{"baton", "floor"}[k], err)
				}
				lat[op][k] = append(lat[op][k], time.Since(t0))
				msgs[op][k] += int64(c.Conn().Stats().OutMsgs) - before
			}
		}
	}
	n := float64(b.ops)
	return []row{
		{metric: fmt.Sprintf("reserve of 5 patterns beside %s live reservations median (a handle that knows the space; floor: one CAS of a record of its size)", kilo(resvLive)), unit: unitDuration,
			baton: dur(lat[0][0].median()), floor: dur(lat[0][1].median()), etcd: missing("—"), goal: []cond{toFloorAtMost(1.5)}},
		{metric: "reserve of 5 patterns " + tail(b.ops), unit: unitDuration, baton: dur(lat[0][0].p99()), floor: dur(lat[0][1].p99()), etcd: missing("—")},
		{metric: "round_trips_reserve", unit: unitCount, noRatios: true,
			baton: val(float64(msgs[0][0]) / n), floor: val(float64(msgs[0][1]) / n), etcd: missing("—"), goal: []cond{batonIs(1, unitCount)}},
		{metric: "release of them median", unit: unitDuration,
			baton: dur(lat[1][0].median()), floor: dur(lat[1][1].median()), etcd: missing("—"), goal: []cond{toFloorAtMost(1.5)}},
		{metric: "round_trips_reserve_release", unit: unitCount, noRatios: true,
			baton: val(float64(msgs[1][0]) / n), floor: val(float64(msgs[1][1]) / n), etcd: missing("—"), goal: []cond{batonIs(1, unitCount)}},
	}, nil
}

// fillSpace makes n reservations in space, held by agents of four hosts
// (a quarter on the benchmark's own, by eight processes of it, which
// every write of the space looks up as a live holder's), each with a TTL
// of 15 minutes and not renewed. It returns what stops those processes.
func (b *bench) fillSpace(ctx context.Context, space string, n int) (func(), error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-resv-fill"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var procs []*exec.Cmd
	stop := func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	var here []hostlocal.Process
	for range 8 {
		cmd := exec.Command("sleep", "3600")
		if err := cmd.Start(); err != nil {
			stop()
			return nil, err
		}
		procs = append(procs, cmd)
		p, err := hostlocal.LookupProcess(cmd.Process.Pid)
		if err != nil {
			stop()
			return nil, err
		}
		here = append(here, p)
	}
	var handles []*reserve.Spaces
	for h := range 4 {
		host := fmt.Sprintf("fill-host-%d", h)
		for k := range 8 {
			opts := []reserve.Option{reserve.WithHostID(host)}
			if h == 0 {
				opts = []reserve.Option{reserve.WithHostID("bench-host"), reserve.WithProcess(here[k])}
			}
			s, err := reserve.New(c, opts...)
			if err != nil {
				stop()
				return nil, err
			}
			handles = append(handles, s)
		}
	}
	for i := range n {
		s := handles[(i/25)%len(handles)] // runs of 25 by one agent: few lost compare-and-sets
		if _, err := s.TryReserve(ctx, space, resvPatterns(i), reserve.WithTTL(15*time.Minute), reserve.WithoutKeepAlive(),
			reserve.WithAgent("agent-"+strconv.Itoa(i)), reserve.WithTask("T"+strconv.Itoa(i))); err != nil {
			stop()
			return nil, fmt.Errorf("fill %s: %w", space, err)
		}
	}
	return stop, nil
}

// reserveCheckRows times baton reserve check of a free path in space as
// a process beside kvfloor reading the space's record, interleaved.
func (b *bench) reserveCheckRows(ctx context.Context, e *resvEnv) ([]row, error) {
	space := e.space
	home := mkdir(b.shm, "resv-home")
	batonEnv := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "BATON_URL=" + b.nats.url,
		"BATON_STATE_DIR=" + mkdir(b.shm, "resv-state"), "BATON_HOST_ID=bench-host"}
	plainEnv := []string{"PATH=/usr/bin:/bin", "HOME=" + home}
	bucket := reserve.BucketConfig(reserve.DefaultPrefix, 0).Name
	sides := [2]func(context.Context) (procRun, error){
		func(ctx context.Context) (procRun, error) {
			return runProc(ctx, batonEnv, nil, b.baton, "reserve", "check", space, "src/free/x.go")
		},
		func(ctx context.Context) (procRun, error) {
			return runProc(ctx, plainEnv, nil, b.kvfloor, b.nats.url, "get", "KV_"+bucket, "$KV."+bucket+"."+reserve.Key(space))
		},
	}
	var lat [2]samples
	for i := range b.cli {
		for _, k := range order(i, 2) {
			r, err := sides[k](ctx)
			if err != nil {
				return nil, err
			}
			lat[k] = append(lat[k], r.wall)
		}
	}
	return []row{
		{metric: fmt.Sprintf("baton reserve check of a free path beside %s live reservations, cold process median (floor: kvfloor reads the record)", kilo(resvLive)), unit: unitDuration,
			baton: dur(lat[0].median()), floor: dur(lat[1].median()), etcd: missing("—"), goal: []cond{toFloorAtMost(1.2)}},
		{metric: "baton reserve check " + tail(b.cli), unit: unitDuration, baton: dur(lat[0].p99()), floor: dur(lat[1].p99()), etcd: missing("—")},
	}, nil
}

// casCounter counts a client's compare-and-set writes and those lost.
type casCounter struct{ writes, lost atomic.Int64 }

func (t *casCounter) Call(c kv.TraceCall) {
	if c.Op.Write() {
		t.writes.Add(1)
	}
}

func (t *casCounter) Return(r kv.TraceReturn) {
	if r.Outcome == kv.OutcomeConflict {
		t.lost.Add(1)
	}
}

// reserveContention runs resvAgents agents (handles of their own, on four
// connections), each reserving and releasing a path of its own over and
// over, in a space of their own for a while: the changes a second, each
// change's latency, and the share of compare-and-sets lost. The floor:
// as many goroutines rewriting one key by compare-and-set with a record
// of the space's size (half the agents holding their paths), each going
// on from the revision its last conflict showed.
func (b *bench) reserveContention(ctx context.Context, e *resvEnv) ([]row, error) {
	return b.contend(ctx, e.space+"-agents", nil, "in a space of their own")
}

// reserveContentionBeside is reserveContention in the space of resvLive
// live reservations: the design's limit, run only when named (-only
// "reservations contention beside"), as it takes a minute.
func (b *bench) reserveContentionBeside(ctx context.Context, e *resvEnv) ([]row, error) {
	return b.contend(ctx, e.space, e.rec, "beside "+kilo(resvLive)+" live reservations")
}

// contend runs the agents in space; the floor writes rec, or if nil the
// space's record while half the agents hold their paths.
func (b *bench) contend(ctx context.Context, space string, rec []byte, where string) ([]row, error) {
	window := contentionWindow(b.quick)
	var counter casCounter
	conns := make([]*kv.Client, 4)
	for i := range conns {
		c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName(fmt.Sprintf("bench-resv-%d", i)), kv.WithTracer(&counter))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conns[i] = c
	}
	agents := make([]*reserve.Spaces, resvAgents)
	for i := range agents {
		s, err := reserve.New(conns[i%len(conns)], reserve.WithHostID(fmt.Sprintf("agent-host-%d", i%8)))
		if err != nil {
			return nil, err
		}
		agents[i] = s
	}
	path := func(i int) []string { return []string{fmt.Sprintf("agents/a%d/**", i)} }
	// Every agent reads the space (its first write reads it, as any
	// handle's does), reserving its path; the record the floor writes is
	// the space's once half of them hold theirs. Then they release.
	held := make([]*reserve.Reservation, resvAgents)
	for i, s := range agents {
		r, err := s.TryReserve(ctx, space, path(i), reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
		if err != nil {
			return nil, err
		}
		held[i] = r
		if i == resvAgents/2-1 && rec == nil {
			cur, err := s.Bucket().Latest(ctx, reserve.Key(space))
			if err != nil {
				return nil, err
			}
			rec = cur.Value
		}
	}
	for _, r := range held {
		if err := r.Release(ctx); err != nil {
			return nil, err
		}
	}
	recTTL := 15*time.Minute + 2*time.Second
	type result struct {
		lat samples
		err error
	}
	run := func(op func(ctx context.Context, i int, lat *samples) error) ([]result, time.Duration) {
		out := make([]result, resvAgents)
		var wg sync.WaitGroup
		start := make(chan struct{})
		deadline := time.Now().Add(window + 100*time.Millisecond)
		for i := range resvAgents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for time.Now().Before(deadline) && ctx.Err() == nil {
					if err := op(ctx, i, &out[i].lat); err != nil {
						out[i].err = err
						return
					}
				}
			}()
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		return out, time.Since(t0)
	}
	tally := func(out []result, took time.Duration) (samples, float64, error) {
		var all samples
		for _, r := range out {
			if r.err != nil {
				return nil, 0, r.err
			}
			all = append(all, r.lat...)
		}
		return all, float64(len(all)) / took.Seconds(), nil
	}
	counter.writes.Store(0)
	counter.lost.Store(0)
	out, took := run(func(ctx context.Context, i int, lat *samples) error {
		t0 := time.Now()
		r, err := agents[i].TryReserve(ctx, space, path(i), reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
		if err != nil {
			return err
		}
		t1 := time.Now()
		*lat = append(*lat, t1.Sub(t0))
		if err := r.Release(ctx); err != nil {
			return err
		}
		*lat = append(*lat, time.Since(t1))
		return nil
	})
	batonLat, batonRate, err := tally(out, took)
	if err != nil {
		return nil, fmt.Errorf("%d agents: %w", resvAgents, err)
	}
	writes, lost := counter.writes.Load(), counter.lost.Load()

	// The floor: one key of the record's size, rewritten by as many.
	floorKV, err := floorBucket(ctx, conns[0], "floor-resv")
	if err != nil {
		return nil, err
	}
	key := space + ".hot"
	if _, err := floorKV.Put(ctx, key, rec); err != nil {
		return nil, err
	}
	writers := make([]*floorWriter, len(conns))
	kvs := make([]jetstream.KeyValue, len(conns))
	for i, cc := range conns {
		if writers[i], err = newFloorWriter(cc, "floor-resv"); err != nil {
			return nil, err
		}
		js, err := jetstream.New(cc.Conn())
		if err != nil {
			return nil, err
		}
		if kvs[i], err = js.KeyValue(ctx, "floor-resv"); err != nil {
			return nil, err
		}
	}
	var floorLost, floorWrites atomic.Int64
	revs := make([]uint64, resvAgents)
	out, took = run(func(ctx context.Context, i int, lat *samples) error {
		t0 := time.Now()
		for {
			if revs[i] == 0 {
				e, err := kvs[i%len(kvs)].Get(ctx, key)
				if err != nil {
					return err
				}
				revs[i] = e.Revision()
			}
			floorWrites.Add(1)
			rev, err := writers[i%len(writers)].update(ctx, key, rec, revs[i], recTTL)
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				floorLost.Add(1)
				revs[i] = 0
				continue
			}
			if err != nil {
				return err
			}
			revs[i] = rev
			*lat = append(*lat, time.Since(t0))
			return nil
		}
	})
	floorLat, floorRate, err := tally(out, took)
	if err != nil {
		return nil, fmt.Errorf("%d writers of one key: %w", resvAgents, err)
	}
	share := func(lost, writes int64) value {
		if writes == 0 {
			return missing("none")
		}
		return val(float64(lost) / float64(writes))
	}
	label := fmt.Sprintf("%d agents %s", resvAgents, where)
	return []row{
		{metric: fmt.Sprintf("%s, reserving and releasing a path each: changes/s (floor: get and CAS of one key of the record's size, %s, from as many)", label, kib(len(rec))), unit: unitRate,
			baton: val(batonRate), floor: val(floorRate), etcd: missing("—")},
		// The floor retries at once: its latencies are reported, not
		// compared.
		{metric: label + ": a change's latency median", unit: unitDuration, noRatios: true,
			baton: dur(batonLat.median()), floor: dur(floorLat.median()), etcd: missing("—")},
		{metric: label + ": a change's latency " + tail(len(batonLat)), unit: unitDuration, noRatios: true,
			baton: dur(batonLat.p99()), floor: dur(floorLat.p99()), etcd: missing("—")},
		{metric: label + ": share of compare-and-sets lost", unit: unitRatio, noRatios: true,
			baton: share(lost, writes), floor: share(floorLost.Load(), floorWrites.Load()), etcd: missing("—")},
	}, nil
}

// contentionWindow is how long the agents contend.
func contentionWindow(quick bool) time.Duration {
	if quick {
		return 2 * time.Second
	}
	return 5 * time.Second
}

// kib is a size for a row's label.
func kib(n int) string { return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10)) }
