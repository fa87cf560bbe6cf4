package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// queuePrefix keeps the queue workloads' buckets apart from the others'.
const queuePrefix = "bq"

// queueEnv is a connection and a queue handle on b.nats, with the raw
// buckets the floor writes to.
type queueEnv struct {
	c      *kv.Client
	qs     *queue.Queues
	js     jetstream.JetStream
	floor  jetstream.KeyValue // the floor's queue-shaped bucket
	fw     *floorWriter
	qb     string // the queues bucket's name
	sb     string // the sessions bucket's name
	stateD string
}

func (b *bench) queueEnv(ctx context.Context, name string) (*queueEnv, error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-"+name))
	if err != nil {
		return nil, err
	}
	qs, state, err := queueHandle(c, mkdir(b.shm, "queue-"+name))
	if err != nil {
		c.Close()
		return nil, err
	}
	if err := qs.Sessions().Ensure(ctx, 1); err != nil {
		c.Close()
		return nil, err
	}
	if err := qs.Ensure(ctx, 1); err != nil {
		c.Close()
		return nil, err
	}
	floor, err := floorBucket(ctx, c, "floor-queue")
	if err != nil {
		c.Close()
		return nil, err
	}
	fw, err := newFloorWriter(c, "floor-queue")
	if err != nil {
		c.Close()
		return nil, err
	}
	js, err := jetstream.New(c.Conn())
	if err != nil {
		c.Close()
		return nil, err
	}
	return &queueEnv{c: c, qs: qs, js: js, floor: floor, fw: fw, stateD: state,
		qb: queue.BucketConfig(queuePrefix, 0).Name, sb: session.BucketConfig(queuePrefix, 0).Name}, nil
}

// queueHandle is a queue handle of prefix bq on c, as one host.
func queueHandle(c *kv.Client, state string) (*queue.Queues, string, error) {
	sd, err := hostlocal.OpenStateDir(state)
	if err != nil {
		return nil, "", err
	}
	m, err := session.NewManager(c, session.WithPrefix(queuePrefix), session.WithHostID("bench-host"), session.WithStateDir(sd))
	if err != nil {
		return nil, "", err
	}
	qs, err := queue.New(m)
	return qs, state, err
}

// taskRecord is a pending task's record as Add writes it, for the floor and
// for storing tasks in bulk.
func taskRecord(q, id, key string, payload []byte) []byte {
	now := time.Now().UTC()
	t := queue.Task{ID: id, Queue: q, Key: key, Priority: queue.Normal, Payload: payload, State: queue.StatePending, AddedAt: now, UpdatedAt: now}
	data, _ := t.MarshalJSON()
	return data
}

// queueRows measures the work queue: add beside a raw publish, dispatch to
// a handler and to a command, throughput beside the raw writes a task
// needs, throughput and CPU as worker processes are added, dispatch beside
// 100k waiting tasks, and the status of 100k.
func (b *bench) queueRows(ctx context.Context) ([]row, error) {
	e, err := b.queueEnv(ctx, "main")
	if err != nil {
		return nil, err
	}
	defer e.c.Close()
	// The buckets go at the end, so that the 100k tasks weigh on nothing after.
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		for _, name := range []string{e.qb, e.sb, "floor-queue"} {
			_ = e.c.DeleteBucket(dctx, name)
		}
	}()
	var rows []row
	for _, part := range []struct {
		name string
		fn   func(context.Context, *queueEnv) ([]row, error)
	}{
		{"queue add", b.queueAddRows},
		{"queue add --batch", b.queueBatchRows},
		{"queue dispatch", b.queueDispatchRows},
		{"queue dispatch through baton queue work", b.queueCLIDispatchRows},
		{"queue throughput", b.queueThroughputRows},
		{"queue throughput vs workers", b.queueWorkerRows},
		{"queue at " + kilo(b.pending) + " tasks", b.queueScaleRows},
		{"queue rate limit at " + kilo(b.pending) + " tasks", b.queueRateRows},
	} {
		if strings.HasPrefix(b.only, "queue ") && !strings.Contains(part.name, b.only) {
			continue
		}
		b.progress("  %s", part.name)
		r, err := part.fn(ctx, e)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", part.name, err)
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// queueAddRows: Add on a handle that knows the queue, beside a plain
// JetStream publish of the same record on the same connection and etcd's
// create-if-absent of it, interleaved.
func (b *bench) queueAddRows(ctx context.Context, e *queueEnv) ([]row, error) {
	if _, _, err := e.qs.Create(ctx, queue.DefaultConfig("add")); err != nil {
		return nil, err
	}
	if _, err := e.qs.Config(ctx, "add"); err != nil {
		return nil, err
	}
	var counter msgCounter
	ec, err := etcdClient(b.etcd.endpoint, &counter)
	if err != nil {
		return nil, err
	}
	defer ec.Close()
	payload := []byte(strings.Repeat("p", 100))
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var lat [3]samples
	var msgs [3]int64
	sent := []func() int64{
		func() int64 { return int64(e.c.Conn().Stats().OutMsgs) },
		func() int64 { return int64(e.c.Conn().Stats().OutMsgs) },
		func() int64 { return counter.sent.Load() },
	}
	for i := range b.ops {
		id := fmt.Sprintf("a-%s-%d", run, i)
		key := fmt.Sprintf("k%d", i%100)
		rec := taskRecord("add", id, key, payload)
		steps := []func() error{
			func() error { _, _, err := e.qs.Add(ctx, "add", key, payload, queue.WithID(id)); return err },
			func() error { _, err := e.js.Publish(ctx, "$KV.floor-queue.add.task."+id, rec); return err },
			func() error {
				k := "/queue/add/" + id
				_, err := ec.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(clientv3.OpPut(k, string(rec))).Commit()
				return err
			},
		}
		for _, s := range order(i, 3) {
			before := sent[s]()
			d, err := timeIt(steps[s])
			if err != nil {
				return nil, fmt.Errorf("add %d on %s: %w", i, sideNames[s], err)
			}
			lat[s] = append(lat[s], d)
			msgs[s] += sent[s]() - before
		}
	}
	n := float64(b.ops)
	return []row{
		{metric: "queue add median", unit: unitDuration, baton: dur(lat[0].median()), floor: dur(lat[1].median()), etcd: dur(lat[2].median()),
			goal: []cond{toFloorAtMost(1.2)}},
		{metric: "queue add " + tail(b.ops), unit: unitDuration, baton: dur(lat[0].p99()), floor: dur(lat[1].p99()), etcd: dur(lat[2].p99())},
		{metric: "round_trips_queue_add", unit: unitCount, noRatios: true,
			baton: val(float64(msgs[0]) / n), floor: val(float64(msgs[1]) / n), etcd: val(float64(msgs[2]) / n),
			goal: []cond{batonIs(1, unitCount)}},
	}, nil
}

// startWorker runs a library worker of q on its own connection until the
// returned stop is called.
func (b *bench) startWorker(ctx context.Context, q, name string, h queue.Handler, opts ...queue.WorkerOption) (stop func() error, err error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-worker-"+name))
	if err != nil {
		return nil, err
	}
	qs, _, err := queueHandle(c, mkdir(b.shm, "queue-worker-"+name))
	if err != nil {
		c.Close()
		return nil, err
	}
	w, err := qs.NewWorker(q, h, opts...)
	if err != nil {
		c.Close()
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	return func() error {
		cancel()
		err := <-done
		c.Close()
		return err
	}, nil
}

// dispatcher is a library worker whose handler reports when it starts; a
// task ends when its handler returns, which ended reports.
type dispatcher struct {
	started chan time.Time
	ended   chan struct{}
}

func newDispatcher() *dispatcher {
	return &dispatcher{started: make(chan time.Time, 16), ended: make(chan struct{}, 16)}
}

func (d *dispatcher) Work(context.Context, *queue.Task) error {
	d.started <- time.Now()
	return nil
}

func (d *dispatcher) event(ev queue.Event) {
	if ev.Kind == queue.EventEnded {
		d.ended <- struct{}{}
	}
}

// await waits for the handler of the task just added to start, and for it
// to end, and returns when it started.
func (d *dispatcher) await(ctx context.Context) (time.Time, error) {
	var at time.Time
	select {
	case at = <-d.started:
	case <-time.After(opTimeout):
		return at, errors.New("no task started within 30s")
	case <-ctx.Done():
		return at, ctx.Err()
	}
	select {
	case <-d.ended:
		return at, nil
	case <-time.After(opTimeout):
		return at, errors.New("a task did not end within 30s")
	case <-ctx.Done():
		return at, ctx.Err()
	}
}

// floorDispatch is the raw KV work of one dispatch, done back to back: the
// add's publish, its delivery by a watch of the bucket, then the three
// compare-and-set writes of a claim (a lock, a token, the task).
type floorDispatch struct {
	e     *queueEnv
	w     jetstream.KeyWatcher
	keyed int
}

func newFloorDispatch(ctx context.Context, e *queueEnv, prefix string) (*floorDispatch, error) {
	w, err := e.floor.Watch(ctx, prefix+".task.*", jetstream.UpdatesOnly())
	if err != nil {
		return nil, err
	}
	return &floorDispatch{e: e, w: w}, nil
}

func (f *floorDispatch) stop() { _ = f.w.Stop() }

// one dispatches task id of prefix and returns when its "handler" starts.
func (f *floorDispatch) one(ctx context.Context, prefix, id string, rec []byte) (time.Time, error) {
	ack, err := f.e.js.Publish(ctx, "$KV.floor-queue."+prefix+".task."+id, rec)
	if err != nil {
		return time.Time{}, err
	}
	for seen := false; !seen; {
		select {
		case ent := <-f.w.Updates():
			// nil marks the end of the (no) initial values.
			seen = ent != nil && ent.Revision() == ack.Sequence
		case <-time.After(opTimeout):
			return time.Time{}, errors.New("the floor's watch did not deliver the task within 30s")
		}
	}
	f.keyed++
	lock := fmt.Sprintf("%s.lock.%d", prefix, f.keyed)
	if _, err := f.e.floor.Create(ctx, lock, rec, jetstream.KeyTTL(30*time.Second)); err != nil {
		return time.Time{}, err
	}
	if _, err := f.e.floor.Create(ctx, fmt.Sprintf("%s.cap.%d", prefix, f.keyed), rec, jetstream.KeyTTL(30*time.Second)); err != nil {
		return time.Time{}, err
	}
	if _, err := f.e.floor.Update(ctx, prefix+".task."+id, rec, ack.Sequence); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// idlePause is how long the worker and the floor's watch sit idle before
// an idle dispatch: on a virtual machine an idle process's first round
// trip pays the wake-up of its CPU (a raw publish: 40 µs back to back,
// 450 µs after 100 ms idle here), on both sides alike.
const idlePause = 100 * time.Millisecond

// queueDispatchRows: from Add to the handler's start on a worker with no
// task running (max_active 16, so the claim takes a token), beside the
// floor, one task at a time, interleaved: back to back, then each after
// idlePause.
func (b *bench) queueDispatchRows(ctx context.Context, e *queueEnv) ([]row, error) {
	cfg := queue.DefaultConfig("lat")
	cfg.MaxActive = 16
	if _, _, err := e.qs.Create(ctx, cfg); err != nil {
		return nil, err
	}
	d := newDispatcher()
	stop, err := b.startWorker(ctx, "lat", "lat", d, queue.WithEvents(d.event))
	if err != nil {
		return nil, err
	}
	defer stop()
	fd, err := newFloorDispatch(ctx, e, "lat")
	if err != nil {
		return nil, err
	}
	defer fd.stop()
	payload := []byte("x")
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	seq := 0
	measure := func(n int, pause time.Duration) ([2]samples, error) {
		var lat [2]samples
		// A few unmeasured rounds: the worker's view is complete, connections warm.
		for i := -5; i < n; i++ {
			seq++
			id := fmt.Sprintf("d-%s-%d", run, seq)
			for _, s := range order(max(i, 0), 2) {
				time.Sleep(pause)
				t0 := time.Now()
				var at time.Time
				var err error
				if s == 0 {
					if _, _, err = e.qs.Add(ctx, "lat", fmt.Sprintf("k%d", seq%50), payload, queue.WithID(id)); err == nil {
						at, err = d.await(ctx)
					}
				} else {
					at, err = fd.one(ctx, "lat", id, taskRecord("lat", id, "k", payload))
				}
				if err != nil {
					return lat, fmt.Errorf("dispatch %d on %s: %w", i, sideNames[s], err)
				}
				if i >= 0 {
					lat[s] = append(lat[s], at.Sub(t0))
				}
			}
		}
		return lat, nil
	}
	busy, err := measure(b.dispatches, 0)
	if err != nil {
		return nil, err
	}
	idle, err := measure(b.cliDispatches, idlePause)
	if err != nil {
		return nil, err
	}
	// Delayed: a task added to run 30 ms later, from that time to its
	// handler's start (the server runs on this machine: its clock is
	// this one's). A start before the time breaks the row.
	var delayed samples
	early := ""
	for i := range b.cliDispatches {
		seq++
		runAt := time.Now().Add(30 * time.Millisecond)
		if _, _, err := e.qs.Add(ctx, "lat", fmt.Sprintf("k%d", seq%50), payload, queue.WithID(fmt.Sprintf("d-%s-%d", run, seq)), queue.WithRunAt(runAt)); err != nil {
			return nil, fmt.Errorf("delayed dispatch %d: %w", i, err)
		}
		at, err := d.await(ctx)
		if err != nil {
			return nil, fmt.Errorf("delayed dispatch %d: %w", i, err)
		}
		if at.Before(runAt) && early == "" {
			early = fmt.Sprintf("a delayed task started %s before its time", runAt.Sub(at))
		}
		delayed = append(delayed, at.Sub(runAt))
	}
	// add --wait: AddWait (the task's watch set up beside its add) until
	// the task ended, beside the
	// sum of what it is made of, measured apart: the dispatch (add →
	// handler starts, the busy median above) and a raw write of the task's
	// record (its end).
	var waited, writes samples
	for i := range b.dispatches {
		seq++
		id := fmt.Sprintf("d-%s-%d", run, seq)
		t0 := time.Now()
		wctx, cancel := context.WithTimeout(ctx, opTimeout)
		_, _, err := e.qs.AddWait(wctx, "lat", fmt.Sprintf("k%d", seq%50), payload, queue.WithID(id))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("add --wait %d: %w", i, err)
		}
		waited = append(waited, time.Since(t0))
		if _, err := d.await(ctx); err != nil { // the handler's start and end, seen
			return nil, fmt.Errorf("add --wait %d: %w", i, err)
		}
		rec := taskRecord("lat", id, "k", payload)
		w0 := time.Now()
		if _, err := e.floor.Put(ctx, "wait."+id, rec); err != nil {
			return nil, fmt.Errorf("add --wait %d, the floor's write: %w", i, err)
		}
		writes = append(writes, time.Since(w0))
	}
	return []row{
		{metric: "queue dispatch (add → handler starts) median", unit: unitDuration,
			baton: dur(busy[0].median()), floor: dur(busy[1].median()), etcd: missing("—"),
			// The same writes as the floor, and the claim's bookkeeping.
			goal: []cond{toFloorAtMost(1.5)}},
		{metric: "queue dispatch (add → handler starts) " + tail(b.dispatches), unit: unitDuration,
			baton: dur(busy[0].p99()), floor: dur(busy[1].p99()), etcd: missing("—")},
		{metric: "queue dispatch (add → handler starts), each after 100 ms idle, median", unit: unitDuration,
			baton: dur(idle[0].median()), floor: dur(idle[1].median()), etcd: missing("—")},
		// A timer from the index, not a poll: the task starts within a
		// dispatch of its time.
		{metric: "delayed dispatch (run-at time → handler starts) median", unit: unitDuration,
			baton: dur(delayed.median()), floor: missing("—"), etcd: missing("—"), noRatios: true,
			goal: []cond{batonAtMost(float64(5*time.Millisecond), unitDuration)}, broken: early},
		{metric: "queue add --wait of a no-op task (library AddWait: the add, a watch set up beside it, until the task ended; floor: the dispatch median above plus a raw write of its record) median", unit: unitDuration,
			baton: dur(waited.median()), floor: dur(busy[0].median() + writes.median()), etcd: missing("—"),
			goal: []cond{toFloorAtMost(1.2)}},
	}, nil
}

// queueCLIDispatchRows: from Add to the start of the command of a `baton
// queue work` process (the stamp binary, which prints when it started),
// beside the floor: the raw writes of a dispatch (floorDispatch.one, as in
// queueDispatchRows), then starting that binary directly. Both sides do
// the dispatch's round trips and a program's start; what baton adds is its
// own work: the claim's bookkeeping and the supervisor.
func (b *bench) queueCLIDispatchRows(ctx context.Context, e *queueEnv) ([]row, error) {
	cfg := queue.DefaultConfig("cli")
	cfg.MaxActive = 16 // a claim takes a token, as the floor's does
	if _, _, err := e.qs.Create(ctx, cfg); err != nil {
		return nil, err
	}
	fd, err := newFloorDispatch(ctx, e, "cli")
	if err != nil {
		return nil, err
	}
	defer fd.stop()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(wctx, b.baton, "queue", "work", "cli", "--", b.stamp)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + mkdir(b.shm, "queue-cli-home"), "BATON_URL=" + b.nats.url,
		"BATON_STATE_DIR=" + mkdir(b.shm, "queue-cli-state"), "BATON_HOST_ID=cli-host", "BATON_PREFIX=" + queuePrefix}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errb := &lockedWriter{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	stamps := make(chan int64, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64); err == nil {
				stamps <- n
			}
		}
		close(stamps)
	}()
	await := func() (time.Time, error) {
		select {
		case n, ok := <-stamps:
			if !ok {
				return time.Time{}, fmt.Errorf("baton queue work ended: %s", strings.TrimSpace(errb.String()))
			}
			return time.Unix(0, n), nil
		case <-time.After(opTimeout):
			return time.Time{}, errors.New("no command started within 30s")
		}
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var lat [2]samples
	for i := -3; i < b.cliDispatches; i++ {
		for _, s := range order(max(i, 0), 2) {
			t0 := time.Now()
			var at time.Time
			if s == 0 {
				if _, _, err := e.qs.Add(ctx, "cli", fmt.Sprintf("k%d", i+3), nil, queue.WithID(fmt.Sprintf("c-%s-%d", run, i+3))); err != nil {
					return nil, err
				}
				if at, err = await(); err != nil {
					return nil, err
				}
			} else {
				id := fmt.Sprintf("f-%s-%d", run, i+3)
				if _, err := fd.one(ctx, "cli", id, taskRecord("cli", id, "k", nil)); err != nil {
					return nil, err
				}
				c := exec.CommandContext(ctx, b.stamp)
				o, err := c.Output()
				if err != nil {
					return nil, err
				}
				n, _ := strconv.ParseInt(strings.TrimSpace(string(o)), 10, 64)
				at = time.Unix(0, n)
			}
			if i >= 0 {
				lat[s] = append(lat[s], at.Sub(t0))
			}
		}
		// The task ends before the next, and the worker is idle again: its
		// supervisor for the next task started ahead (a program start).
		time.Sleep(idlePause)
	}
	return []row{
		{metric: "queue dispatch through baton queue work, idle (add → command starts; floor: a dispatch's raw writes, then starting it directly) median", unit: unitDuration,
			baton: dur(lat[0].median()), floor: dur(lat[1].median()), etcd: missing("—"),
			goal: []cond{toFloorAtMost(1.4)}},
	}, nil
}

// queueThroughputRows: no-op tasks, 4 workers (each on its own connection,
// 4 at a time), 1000 keys, max_active 16, all tasks waiting at the start;
// beside the floor: 16 goroutines doing the raw writes of one task's life
// (lock, token, task active, task done, lock gone, token gone) back to back.
func (b *bench) queueThroughputRows(ctx context.Context, e *queueEnv) ([]row, error) {
	cfg := queue.DefaultConfig("tp")
	cfg.MaxActive = 16
	if _, _, err := e.qs.Create(ctx, cfg); err != nil {
		return nil, err
	}
	n := b.queueTasks
	if err := storeTasks(ctx, e.c.Conn(), e.qb, "tp", 0, n, 1000); err != nil {
		return nil, err
	}
	var first atomic.Int64
	var ended atomic.Int64
	all := make(chan time.Time, 1)
	h := queue.HandlerFunc(func(context.Context, *queue.Task) error {
		first.CompareAndSwap(0, time.Now().UnixNano())
		return nil
	})
	ev := func(ev queue.Event) {
		if ev.Kind == queue.EventEnded && ended.Add(1) == int64(n) {
			all <- time.Now()
		}
	}
	var stops []func() error
	defer func() {
		for _, s := range stops {
			_ = s()
		}
	}()
	for i := range 4 {
		stop, err := b.startWorker(ctx, "tp", fmt.Sprintf("tp%d", i), h, queue.WithConcurrency(4), queue.WithEvents(ev))
		if err != nil {
			return nil, err
		}
		stops = append(stops, stop)
	}
	var end time.Time
	select {
	case end = <-all:
	case <-time.After(5 * time.Minute):
		return nil, fmt.Errorf("%d of %d tasks ended within 5m", ended.Load(), n)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	rate := float64(n) / end.Sub(time.Unix(0, first.Load())).Seconds()

	// The floor: the same writes per task, 16 at once.
	rec := taskRecord("tpf", "x", "k", nil)
	fn := max(n/4, 1000)
	t0 := time.Now()
	var next atomic.Int64
	err := parallel(ctx, 16, 16, func(ctx context.Context, _ int) error {
		for {
			i := next.Add(1)
			if i > int64(fn) {
				return nil
			}
			p := fmt.Sprintf("tpf.%d", i)
			if err := e.floorTask(ctx, p, rec); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	floorRate := float64(fn) / time.Since(t0).Seconds()
	return []row{
		{metric: fmt.Sprintf("queue throughput (%d no-op tasks, 4 workers, 1000 keys, max_active 16; floor: a task's writes, 16 at once)", n), unit: unitRate,
			baton: val(rate), floor: val(floorRate), etcd: missing("—"),
			// A third of the rate of the bare writes: each task also
			// carries its key lock's session and the worker's watch.
			goal: []cond{toFloorAtLeast(0.33)}},
	}, nil
}

// queueScaleRows: dispatch to a worker whose queue holds 100k waiting tasks
// (on 1000 keys whose locks are held, so that none can run) beside one whose
// queue is empty, alternating; then `baton queue status` of those 100k as a
// process, beside a raw listing of them.
func (b *bench) queueScaleRows(ctx context.Context, e *queueEnv) ([]row, error) {
	for _, name := range []string{"q0", "q100k"} {
		cfg := queue.DefaultConfig(name)
		cfg.MaxActive = 16
		cfg.SlotPrefix = name + "."
		if _, _, err := e.qs.Create(ctx, cfg); err != nil {
			return nil, err
		}
	}
	const keys = 1000
	if err := storeHeldLocks(ctx, e.c.Conn(), e.sb, "q100k.", keys); err != nil {
		return nil, err
	}
	if err := storeTasks(ctx, e.c.Conn(), e.qb, "q100k", 0, b.pending, keys); err != nil {
		return nil, err
	}
	var ds [2]*dispatcher
	for i, name := range []string{"q0", "q100k"} {
		ds[i] = newDispatcher()
		stop, err := b.startWorker(ctx, name, name, ds[i], queue.WithEvents(ds[i].event))
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	var lat [2]samples
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := -5; i < b.dispatches; i++ {
		for _, s := range order(max(i, 0), 2) {
			q := []string{"q0", "q100k"}[s]
			t0 := time.Now()
			// A key of its own, free: the task can run at once.
			if _, _, err := e.qs.Add(ctx, q, fmt.Sprintf("free%d", i+5), nil, queue.WithID(fmt.Sprintf("s-%s-%d", run, i+5))); err != nil {
				return nil, err
			}
			at, err := ds[s].await(ctx)
			if err != nil {
				return nil, fmt.Errorf("dispatch in %s: %w", q, err)
			}
			if i >= 0 {
				lat[s] = append(lat[s], at.Sub(t0))
			}
		}
	}
	// Status of the 100k as a user runs it, beside the raw listing of them.
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + mkdir(b.shm, "queue-status-home"), "BATON_URL=" + b.nats.url,
		"BATON_STATE_DIR=" + mkdir(b.shm, "queue-status-state"), "BATON_PREFIX=" + queuePrefix}
	var status [2]samples
	for i := range b.statusQReps {
		for _, s := range order(i, 2) {
			var d time.Duration
			if s == 0 {
				r, err := runProc(ctx, env, nil, b.baton, "queue", "status", "q100k", "--json")
				if err != nil {
					return nil, err
				}
				if !strings.Contains(r.stdout, fmt.Sprintf(`"pending": %d`, b.pending)) {
					return nil, fmt.Errorf("queue status does not count %d pending: %.300s", b.pending, r.stdout)
				}
				d = r.wall
			} else {
				// Its tens of megabytes counted as they come, as status's
				// listings are (runProcCounting).
				r, out, err := runProcCounting(ctx, env, b.kvlist, b.nats.url, e.qb, "q100k.>")
				if err != nil {
					return nil, err
				}
				if out.lines < b.pending {
					return nil, fmt.Errorf("kvlist listed %d of %d", out.lines, b.pending)
				}
				d = r.wall
			}
			status[s] = append(status[s], d)
		}
	}
	rel := val(float64(lat[1].median()) / float64(lat[0].median()))
	return []row{
		{metric: "queue dispatch_at_" + kilo(b.pending) + " / dispatch_at_0 (medians)", unit: unitRatio, noRatios: true,
			baton: rel, floor: missing("—"), etcd: missing("—"), goal: []cond{batonAtMost(1.1, unitRatio)}},
		{metric: "queue dispatch at " + kilo(b.pending) + " waiting median", unit: unitDuration, baton: dur(lat[1].median()), floor: missing("—"), etcd: missing("—")},
		{metric: "queue status of " + kilo(b.pending) + " tasks (process; floor: kvlist prints the queue's keys) median", unit: unitDuration,
			baton: dur(status[0].median()), floor: dur(status[1].median()), etcd: missing("—"),
			goal: []cond{toFloorAtMost(1.3)}},
	}, nil
}

// storeTasks publishes pending tasks t<from>..t<to-1> of queue q over keys
// k0000.. (round robin), as fast as the server takes them.
func storeTasks(ctx context.Context, nc *nats.Conn, bucket, q string, from, to, keys int) error {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	for i := from; i < to; i++ {
		id := fmt.Sprintf("t%06d", i)
		msg := nats.NewMsg("$KV." + bucket + "." + q + ".task." + id)
		msg.Data = taskRecord(q, id, fmt.Sprintf("k%04d", i%keys), nil)
		if _, err := js.PublishMsgAsync(msg); err != nil {
			return err
		}
	}
	return awaitAsync(ctx, js, "task records")
}

// storeHeldLocks publishes live sessions on slots <prefix>k0000.. so that
// those keys cannot run: held by something else, for an hour.
func storeHeldLocks(ctx context.Context, nc *nats.Conn, bucket, prefix string, keys int) error {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	for i := range keys {
		slot := fmt.Sprintf("%sk%04d", prefix, i)
		msg := nats.NewMsg("$KV." + bucket + "." + slot)
		msg.Header.Set("Nats-TTL", "1h")
		msg.Data = sessionRecord(slot)
		if _, err := js.PublishMsgAsync(msg); err != nil {
			return err
		}
	}
	return awaitAsync(ctx, js, "sessions")
}

func awaitAsync(ctx context.Context, js jetstream.JetStream, what string) error {
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("%d %s not acknowledged within 2m", js.PublishAsyncPending(), what)
	case <-ctx.Done():
		return ctx.Err()
	}
	if n := js.PublishAsyncPending(); n != 0 {
		return fmt.Errorf("%d %s not acknowledged", n, what)
	}
	return nil
}

// watchCount lists the values of keys matching pattern, as nats.go does.
func watchCount(ctx context.Context, kvb jetstream.KeyValue, pattern string) (int, error) {
	w, err := kvb.Watch(ctx, pattern, jetstream.IgnoreDeletes())
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	n := 0
	for e := range w.Updates() {
		if e == nil {
			return n, nil
		}
		n++
	}
	return n, fmt.Errorf("watch ended after %d entries", n)
}

// lockedWriter serializes writes from a process's output copier and reads
// of what it wrote.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// floorTask does the raw writes of one task's life under key prefix p:
// task added, lock and token created, task active then done, lock and
// token gone.
func (e *queueEnv) floorTask(ctx context.Context, p string, rec []byte) error {
	trev, err := e.floor.Create(ctx, p+".task", rec)
	if err != nil {
		return err
	}
	lrev, err := e.floor.Create(ctx, p+".lock", rec, jetstream.KeyTTL(30*time.Second))
	if err != nil {
		return err
	}
	crev, err := e.floor.Create(ctx, p+".cap", rec, jetstream.KeyTTL(30*time.Second))
	if err != nil {
		return err
	}
	if trev, err = e.floor.Update(ctx, p+".task", rec, trev); err != nil {
		return err
	}
	if _, err = e.floor.Update(ctx, p+".task", rec, trev); err != nil {
		return err
	}
	if err := e.floor.Delete(ctx, p+".lock", jetstream.LastRevision(lrev)); err != nil {
		return err
	}
	return e.floor.Delete(ctx, p+".cap", jetstream.LastRevision(crev))
}
