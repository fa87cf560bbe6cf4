package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/queue"
)

// workerCounts are the numbers of worker processes the throughput rows
// compare.
var workerCounts = []int{1, 4, 16, 64}

// workerConcurrency is how many tasks each worker process runs at once.
const workerConcurrency = 4

// qworkers are worker processes of one queue (cmd/qworker), their output
// read as it comes: ended counts the tasks they ended, started gets the
// time each handler started.
type qworkers struct {
	b      *bench
	q      string
	host   func(i int) string
	stamps bool // the workers say when each handler starts
	procs  []*proc
	ready  chan struct{}
	nReady atomic.Int64
	ended  atomic.Int64
	// endedBy counts the tasks each process slot ended (spawn replaces a
	// slot's process and keeps counting).
	endedBy [maxQworkers]atomic.Int64
	started chan int64
	spawned int
}

// maxQworkers bounds the worker processes of one queue.
const maxQworkers = 128

// startQworkers starts n worker processes of queue q, each with its own
// connection, on host (the same host id for all unless host says
// otherwise); the workers of a host share its state directory, as they do
// by default.
func (b *bench) startQworkers(ctx context.Context, q string, n int, host func(i int) string, stamps bool) (*qworkers, error) {
	if n > maxQworkers {
		return nil, fmt.Errorf("%d worker processes: at most %d", n, maxQworkers)
	}
	ws := &qworkers{b: b, q: q, host: host, stamps: stamps, ready: make(chan struct{}), started: make(chan int64, 1024)}
	for i := range n {
		if err := ws.spawn(ctx, i, n); err != nil {
			ws.stop()
			return nil, err
		}
	}
	select {
	case <-ws.ready:
		return ws, nil
	case <-time.After(time.Minute):
		ws.stop()
		return nil, fmt.Errorf("%d of %d workers of %s ready within 1m", ws.nReady.Load(), n, q)
	case <-ctx.Done():
		ws.stop()
		return nil, ctx.Err()
	}
}

// spawn starts worker process i (it replaces the one at i, if any); the
// ready channel closes once readyAt have said they are ready.
func (ws *qworkers) spawn(ctx context.Context, i, readyAt int) error {
	b := ws.b
	ws.spawned++
	cmd := exec.CommandContext(ctx, b.qworker, "-server", b.nats.url, "-prefix", queuePrefix, "-queue", ws.q,
		"-state", mkdir(b.shm, fmt.Sprintf("qw-%s-%s", ws.q, ws.host(i))), "-host", ws.host(i),
		"-concurrency", strconv.Itoa(workerConcurrency), "-stamps="+strconv.FormatBool(ws.stamps))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p, err := startLogged("qworker", cmd, mkdir(b.work, "qworkers")+fmt.Sprintf("/%s-%d-%d.log", ws.q, i, ws.spawned))
	if err != nil {
		return err
	}
	if i < len(ws.procs) {
		ws.procs[i] = p
	} else {
		ws.procs = append(ws.procs, p)
	}
	go ws.read(out, i, readyAt)
	return nil
}

func (ws *qworkers) read(out interface{ Read([]byte) (int, error) }, i, n int) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "E "):
			if n, err := strconv.ParseInt(line[2:], 10, 64); err == nil {
				ws.ended.Add(n)
				ws.endedBy[i].Add(n)
			}
		case line == "R":
			if ws.nReady.Add(1) == int64(n) {
				close(ws.ready)
			}
		case strings.HasPrefix(line, "S "):
			if ns, err := strconv.ParseInt(line[2:], 10, 64); err == nil {
				select {
				case ws.started <- ns:
				default: // nobody times starts now
				}
			}
		}
	}
}

// total is the sum of ds.
func total(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum
}

// cpuEach is the CPU time each worker process has used so far.
func (ws *qworkers) cpuEach() []time.Duration {
	ds := make([]time.Duration, len(ws.procs))
	for i, p := range ws.procs {
		ds[i], _ = procCPU(p.pid())
	}
	return ds
}

// endedEach is how many tasks each worker process has ended so far.
func (ws *qworkers) endedEach() []int64 {
	ns := make([]int64, len(ws.procs))
	for i := range ns {
		ns[i] = ws.endedBy[i].Load()
	}
	return ns
}

// workerSpread is how a run's work and CPU fell on its processes: how
// many ended tasks in the window, and the CPU per second of those that
// ended none.
type workerSpread struct {
	working int
	idleCPU time.Duration // per second, all idle processes together
	idle    int
}

func spreadOf(cpu0, cpu1 []time.Duration, ended0, ended1 []int64, took time.Duration) workerSpread {
	var s workerSpread
	var idle time.Duration
	for i := range cpu1 {
		if ended1[i] > ended0[i] {
			s.working++
			continue
		}
		s.idle++
		if cpu1[i] > cpu0[i] { // 0: its CPU could not be read
			idle += cpu1[i] - cpu0[i]
		}
	}
	if took > 0 {
		s.idleCPU = time.Duration(float64(idle) / took.Seconds())
	}
	return s
}

func (ws *qworkers) stop() {
	for _, p := range ws.procs {
		if !p.exited() {
			_ = p.cmd.Process.Signal(os.Interrupt)
		}
	}
	for _, p := range ws.procs {
		if !p.exited() {
			p.stop()
		}
	}
}

// procCPU is the user and system CPU time process pid has used, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:]) // from field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// workerRun is what a throughput run of n workers measured.
type workerRun struct {
	n           int
	rate        float64       // tasks per second
	cpuPer1k    time.Duration // CPU of the workers and the server per 1000 tasks
	serverPer1k time.Duration // the server's part of it
	completed   int64
	spread      workerSpread
	// writes are the writes per task to the queues and the sessions
	// buckets in the window (their streams' sequences).
	writes [2]float64
}

// lastSeqs are the last sequences of the queues and sessions buckets'
// streams (0 where unknown).
func (e *queueEnv) lastSeqs(ctx context.Context) [2]uint64 {
	var seqs [2]uint64
	for i, b := range []string{e.qb, e.sb} {
		if s, err := e.js.Stream(ctx, "KV_"+b); err == nil {
			seqs[i] = s.CachedInfo().State.LastSeq
		}
	}
	return seqs
}

// writesPer is the writes per task between two lastSeqs readings, -1
// where either reading failed.
func writesPer(seq0, seq1 [2]uint64, done int64) [2]float64 {
	var w [2]float64
	for i := range w {
		w[i] = -1
		if seq0[i] > 0 && seq1[i] >= seq0[i] && done > 0 {
			w[i] = float64(seq1[i]-seq0[i]) / float64(done)
		}
	}
	return w
}

// workerWindow is how long each throughput run is timed, after warmUp
// tasks have ended.
func (b *bench) workerWindow() (window time.Duration, warmUp int64, tasks int) {
	// Tasks enough for the workers' start, the warm-up and the window at
	// well over the rates seen (2,000-2,200 a second at 64 workers): a run
	// that ends them all measures nothing.
	if b.quick {
		return 3 * time.Second, 300, 30000
	}
	return 10 * time.Second, 1000, 80000
}

// workerThroughput runs n worker processes on a queue of no-op tasks, all
// waiting at the start on 1000 keys, max_active 16, and times them over
// the window once warmUp tasks have ended: tasks per second, and CPU
// seconds per 1000 tasks of the workers and the server together.
func (b *bench) workerThroughput(ctx context.Context, e *queueEnv, n, round int) (workerRun, error) {
	q := fmt.Sprintf("tw%dr%d", n, round)
	window, warmUp, tasks := b.workerWindow()
	cfg := queue.DefaultConfig(q)
	cfg.MaxActive = 16
	if _, _, err := e.qs.Create(ctx, cfg); err != nil {
		return workerRun{}, err
	}
	if err := storeTasks(ctx, e.c.Conn(), e.qb, q, 0, tasks, 1000); err != nil {
		return workerRun{}, err
	}
	ws, err := b.startQworkers(ctx, q, n, func(int) string { return "bench-host" }, false)
	if err != nil {
		return workerRun{}, err
	}
	defer ws.stop()
	// The tasks left go with the run, so that the next one's stream is no
	// larger than this one's was.
	defer func() {
		if s, err := e.js.Stream(context.WithoutCancel(ctx), "KV_"+e.qb); err == nil {
			_ = s.Purge(context.WithoutCancel(ctx), jetstream.WithPurgeSubject("$KV."+e.qb+"."+q+".>"))
		}
	}()
	// The window starts once every worker has joined (its presence is
	// written) and warmUp tasks more have ended: a worker's start is not
	// what a task costs. Workers that have not warmed up within two
	// minutes are timed as they are: what they do is the measurement.
	if err := waitPresent(ctx, e, q, n); err != nil {
		return workerRun{}, err
	}
	ended := ws.ended.Load()
	if err := waitFor(ctx, 2*time.Minute, func() (bool, error) { return ws.ended.Load() >= ended+warmUp, nil }); err != nil && ctx.Err() != nil {
		return workerRun{}, err
	}
	seq0 := e.lastSeqs(ctx) // before the window: its reads are not the tasks' work
	server0, _ := procCPU(b.nats.pid())
	each0, by0, ended0, t0 := ws.cpuEach(), ws.endedEach(), ws.ended.Load(), time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return workerRun{}, ctx.Err()
	}
	server1, _ := procCPU(b.nats.pid())
	each1, by1, ended1, t1 := ws.cpuEach(), ws.endedEach(), ws.ended.Load(), time.Now()
	seq1 := e.lastSeqs(ctx)
	done := ended1 - ended0
	if ended1 >= int64(tasks) {
		return workerRun{}, fmt.Errorf("%d workers ended every task within the window: store more", n)
	}
	if done == 0 {
		return workerRun{}, fmt.Errorf("%d workers ended no task in %s", n, window)
	}
	cpu := (total(each1) - total(each0)) + (server1 - server0)
	return workerRun{n: n, rate: float64(done) / t1.Sub(t0).Seconds(), completed: done,
		cpuPer1k: cpu * 1000 / time.Duration(done), serverPer1k: (server1 - server0) * 1000 / time.Duration(done),
		spread: spreadOf(each0, each1, by0, by1, t1.Sub(t0)),
		writes: writesPer(seq0, seq1, done)}, nil
}

// waitPresent waits until n workers of queue q have written their
// presence.
func waitPresent(ctx context.Context, e *queueEnv, q string, n int) error {
	return waitFor(ctx, time.Minute, func() (bool, error) {
		es, err := e.qs.Bucket().ListMatching(ctx, q+".worker.>")
		return len(es) >= n, err
	})
}

// workerFloor is the raw writes of a task's life (lock, token, task
// active, task done, lock gone, token gone), 16 at once, timed over the
// window: tasks per second, and CPU per 1000 tasks of this process and the
// server. Each round writes keys of its own.
func (b *bench) workerFloor(ctx context.Context, e *queueEnv, round int) (workerRun, error) {
	window, _, _ := b.workerWindow()
	rec := taskRecord("twf", "x", "k", nil)
	var next atomic.Int64
	deadline := time.Now().Add(window)
	server0, _ := procCPU(b.nats.pid())
	self0, _ := procCPU(os.Getpid())
	t0 := time.Now()
	err := parallel(ctx, 16, 16, func(ctx context.Context, _ int) error {
		for time.Now().Before(deadline) {
			p := fmt.Sprintf("twf%d.%d", round, next.Add(1))
			if err := e.floorTask(ctx, p, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return workerRun{}, fmt.Errorf("floor: %w", err)
	}
	took := time.Since(t0)
	server1, _ := procCPU(b.nats.pid())
	self1, _ := procCPU(os.Getpid())
	done := next.Load() - 16 // each goroutine's last number was not written
	if done <= 0 {
		return workerRun{}, fmt.Errorf("floor: no task in %s", window)
	}
	cpu := (self1 - self0) + (server1 - server0)
	return workerRun{rate: float64(done) / took.Seconds(), completed: done, cpuPer1k: cpu * 1000 / time.Duration(done),
		serverPer1k: (server1 - server0) * 1000 / time.Duration(done)}, nil
}

// workerDispatch times, for idle worker processes of a queue, an Add to
// the start of a handler (in whichever process), n at a time.
func (b *bench) workerDispatch(ctx context.Context, e *queueEnv, q string, ws *qworkers, i int) (time.Duration, error) {
	for len(ws.started) > 0 {
		<-ws.started // a start left over from an earlier task
	}
	return b.dispatchFrom(ctx, e, q, ws, i, time.Now())
}

// dispatchFrom adds a task to q and times, from t0, the start of its
// handler.
func (b *bench) dispatchFrom(ctx context.Context, e *queueEnv, q string, ws *qworkers, i int, t0 time.Time) (time.Duration, error) {
	if _, _, err := e.qs.Add(ctx, q, fmt.Sprintf("k%d", i%100), nil, queue.WithID(fmt.Sprintf("d%06d", i))); err != nil {
		return 0, err
	}
	select {
	case ns := <-ws.started:
		return time.Unix(0, ns).Sub(t0), nil
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("the task added to %s did not start within 30s", q)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// workerRounds is how many times the floor and each worker count are
// measured, in turn. On the shared 2-core machine one measurement moves by
// 10-25% from one minute to the next (the floor alone gave 3,048 and 3,962
// tasks/s in two runs of the same build): the rows report the medians of
// the rounds, and each ratio between worker counts is the median of the
// ratios within a round, so that drift over the minutes the rows take
// falls on both sides of a ratio alike.
func (b *bench) workerRounds() int {
	if b.quick {
		return 1
	}
	return 3
}

// medianRun is the median of each of rs's measures (taken apart).
func medianRun(rs []workerRun) workerRun {
	var rate []float64
	var cpu, server samples
	for _, r := range rs {
		rate, cpu, server = append(rate, r.rate), append(cpu, r.cpuPer1k), append(server, r.serverPer1k)
	}
	m := workerRun{rate: medianFloat(rate), cpuPer1k: cpu.median(), serverPer1k: server.median()}
	if len(rs) > 0 {
		m.n = rs[0].n
	}
	return m
}

// medianRatio is the median over rounds of f(round).
func medianRatio(rounds int, f func(round int) float64) float64 {
	var rs []float64
	for r := range rounds {
		rs = append(rs, f(r))
	}
	return medianFloat(rs)
}

// queueWorkerRows measures what a task costs as worker processes are
// added: throughput and CPU per 1000 tasks at 1, 4, 16 and 64 workers
// beside the floor, and dispatch to 64 idle workers beside dispatch to one.
// The floor and the worker counts are measured in rounds (workerRounds),
// the counts in a rotated order each round.
func (b *bench) queueWorkerRows(ctx context.Context, e *queueEnv) ([]row, error) {
	counts := workerCounts
	if len(b.workers) > 0 {
		counts = b.workers
	}
	if b.idleWorkers > 0 {
		cfg := queue.DefaultConfig("tidle")
		if _, _, err := e.qs.Create(ctx, cfg); err != nil {
			return nil, err
		}
		idle, err := b.startQworkers(ctx, "tidle", b.idleWorkers, func(int) string { return "bench-host" }, false)
		if err != nil {
			return nil, err
		}
		defer idle.stop()
		b.progress("queue workers: %d idle worker processes of queue tidle run beside them", b.idleWorkers)
	}
	rounds := b.workerRounds()
	var floors []workerRun
	all := map[int][]workerRun{}
	for round := range rounds {
		f, err := b.workerFloor(ctx, e, round)
		if err != nil {
			return nil, err
		}
		floors = append(floors, f)
		for i := range counts {
			n := counts[(i+round)%len(counts)]
			b.progress("queue workers, round %d of %d: %d worker processes", round+1, rounds, n)
			r, err := b.workerThroughput(ctx, e, n, round)
			if err != nil {
				return nil, err
			}
			b.progress("queue workers, round %d of %d: %d: %.0f tasks/s, %s of CPU per 1000 tasks, %s of it the server's (floor %.0f tasks/s, %s, %s); %d processes ended tasks, %d none (their CPU %s a second); writes per task %.2f to the queues bucket, %.2f to the sessions",
				round+1, rounds, n, r.rate, r.cpuPer1k.Round(time.Millisecond), r.serverPer1k.Round(time.Millisecond),
				f.rate, f.cpuPer1k.Round(time.Millisecond), f.serverPer1k.Round(time.Millisecond),
				r.spread.working, r.spread.idle, r.spread.idleCPU.Round(time.Millisecond), r.writes[0], r.writes[1])
			all[n] = append(all[n], r)
		}
	}
	floor := medianRun(floors)
	runs := map[int]workerRun{}
	for n, rs := range all {
		runs[n] = medianRun(rs)
	}
	// A ratio of two counts not both measured is left out (-workers).
	ratio := func(n, of int, f func(workerRun) float64) float64 {
		if len(all[n]) < rounds || len(all[of]) < rounds {
			return 0
		}
		return medianRatio(rounds, func(r int) float64 { return f(all[n][r]) / f(all[of][r]) })
	}
	var rows []row
	for _, n := range workerCounts {
		r := rows
		var goal []cond
		if n >= 16 {
			goal = []cond{toFloorAtLeast(0.6)}
		}
		rows = append(r, row{
			metric: fmt.Sprintf("queue throughput, %d worker process%s × %d (no-op tasks, 1000 keys, max_active 16; floor: a task's writes, 16 at once)",
				n, plural(n), workerConcurrency),
			unit: unitRate, baton: val(runs[n].rate), floor: val(floor.rate), etcd: missing("—"), goal: goal,
		})
	}
	for _, n := range []int{16, 64} {
		rows = append(rows, row{
			metric: fmt.Sprintf("queue throughput at %d workers / at 4", n), unit: unitRatio, noRatios: true,
			baton: val(ratio(n, 4, func(r workerRun) float64 { return r.rate })), floor: missing("—"), etcd: missing("—"),
			goal: []cond{batonAtLeast(0.9, unitRatio)},
		})
	}
	for _, n := range workerCounts {
		rows = append(rows, row{
			metric: fmt.Sprintf("queue CPU per 1000 tasks, %d worker process%s (the workers and the server; floor: its client and the server)", n, plural(n)),
			unit:   unitDuration, baton: dur(runs[n].cpuPer1k), floor: dur(floor.cpuPer1k), etcd: missing("—"),
		})
	}
	rows = append(rows, row{
		metric: "queue CPU per 1000 tasks at 64 workers / at 4", unit: unitRatio, noRatios: true,
		baton: val(ratio(64, 4, func(r workerRun) float64 { return float64(r.cpuPer1k) })), floor: missing("—"), etcd: missing("—"),
		goal: []cond{batonAtMost(1.5, unitRatio)},
	})

	lat, err := b.idleDispatchRows(ctx, e)
	if err != nil {
		return nil, err
	}
	fo, err := b.dispatcherFailoverRows(ctx, e)
	if err != nil {
		return nil, err
	}
	return append(append(rows, lat...), fo...), nil
}

// idleDispatchRows: Add to a handler's start with 1 idle worker process
// and with 64, alternating.
func (b *bench) idleDispatchRows(ctx context.Context, e *queueEnv) ([]row, error) {
	counts := []int{1, 64}
	var sets [2]*qworkers
	for i, n := range counts {
		q := fmt.Sprintf("td%d", n)
		cfg := queue.DefaultConfig(q)
		cfg.MaxActive = 16
		if _, _, err := e.qs.Create(ctx, cfg); err != nil {
			return nil, err
		}
		ws, err := b.startQworkers(ctx, q, n, func(int) string { return "bench-host" }, true)
		if err != nil {
			return nil, err
		}
		defer ws.stop()
		sets[i] = ws
	}
	var lat [2]samples
	reps := b.dispatches / 3
	for i := -5; i < reps; i++ {
		for _, s := range order(max(i, 0), 2) {
			d, err := b.workerDispatch(ctx, e, fmt.Sprintf("td%d", counts[s]), sets[s], i+5)
			if err != nil {
				return nil, err
			}
			if i >= 0 {
				lat[s] = append(lat[s], d)
			}
		}
	}
	return []row{
		{metric: "queue dispatch to 64 idle worker processes median", unit: unitDuration, baton: dur(lat[1].median()),
			floor: missing("—"), etcd: missing("—")},
		{metric: "queue dispatch to 1 idle worker process median", unit: unitDuration, baton: dur(lat[0].median()),
			floor: missing("—"), etcd: missing("—")},
		{metric: "queue dispatch to 64 idle workers / to 1 (medians)", unit: unitRatio, noRatios: true,
			baton: val(float64(lat[1].median()) / float64(lat[0].median())), floor: missing("—"), etcd: missing("—"),
			goal: []cond{batonAtMost(1.2, unitRatio)}},
	}, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}
