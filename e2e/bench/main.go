// Command bench measures baton beside the raw JetStream KV operation it
// stands on (the floor) and beside etcd's concurrency package (the peer), in
// one run on servers it starts itself on loopback, and prints one markdown
// table of medians, p99s, ratios and goals. Only ratios measured in the
// same run mean much on a shared machine: every latency workload
// interleaves the three sides op by op.
//
//	bench -baton bin/baton -kvfloor bin/kvfloor -peakrss bin/peakrss [-quick] [-out RESULTS.md]
//
// It needs etcd and etcdctl on PATH (install-etcd.sh installs Debian's).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == campaignVerb {
		os.Exit(etcdCampaignMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// opTimeout bounds one operation, process or round: one that takes longer
// is stuck, and the run says so rather than hang.
const opTimeout = 30 * time.Second

// sizes are how much of each workload a run does.
type sizes struct {
	ops              int           // acquire/renew/release per side
	cli              int           // cold processes per verb and side
	contendRounds    int           // contended joins of 50
	throughputRounds int           // slices per side
	throughputSlice  time.Duration // length of one slice
	statusReps       map[int]int   // listings per size
	scaleMax         int           // sessions the scale and dashboard sections store
	failoverRemote   int           // crashes, cross-host, per side
	failoverSameHost int           // crashes, same host, baton
	etcdSameHost     int           // crashes with a 10 s TTL, etcd
	handovers        int           // graceful handovers per side
	dispatches       int           // queue dispatches per side
	cliDispatches    int           // queue dispatches through baton queue work
	queueTasks       int           // no-op tasks for the queue's throughput
	pending          int           // waiting tasks beside which dispatch is timed
	statusQReps      int           // queue status of the pending tasks
	pageReps         int           // dashboard pages (and listings beside them) per side
}

var fullSizes = sizes{
	ops: 2000, cli: 200, contendRounds: 30, throughputRounds: 6, throughputSlice: time.Second,
	statusReps: map[int]int{1000: 20, 10000: 10, 100000: 5}, scaleMax: 100000,
	failoverRemote: 20, failoverSameHost: 20, etcdSameHost: 3, handovers: 200,
	dispatches: 300, cliDispatches: 100, queueTasks: 20000, pending: 100000, statusQReps: 5, pageReps: 20,
}

var quickSizes = sizes{
	ops: 300, cli: 30, contendRounds: 10, throughputRounds: 1, throughputSlice: time.Second,
	statusReps: map[int]int{1000: 5, 10000: 3, 50000: 7}, scaleMax: 50000,
	failoverRemote: 3, failoverSameHost: 5, etcdSameHost: 1, handovers: 30,
	dispatches: 50, cliDispatches: 20, queueTasks: 4000, pending: 50000, statusQReps: 5, pageReps: 10,
}

type bench struct {
	sizes
	quick   bool
	baton   string // the baton binary
	kvfloor string // the floor's one-op NATS client binary
	peakrss string // runs a command and reports its peak memory
	stamp   string // prints when it started: the command of queue dispatches
	kvlist  string // the floor of a listing verb: lists a bucket, decodes nothing
	qworker string // a queue worker process (cmd/qworker)
	etcdctl string
	self    string // this binary, for the etcd campaign helper
	work    string // scratch: server stores (on disk) and logs
	shm     string // host state dirs (tmpfs when there is one)
	log     io.Writer
	only    string
	// workers overrides the worker process counts of the queue's
	// throughput rows (for profiling one of them).
	workers []int
	// idleWorkers run beside the throughput rows, of a queue of their own.
	idleWorkers int

	nats       *natsServer // default sync interval
	natsAlways *natsServer // sync always
	etcd       *etcdServer

	started time.Time
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "bench %5.1fs: %s\n", time.Since(b.started).Seconds(), fmt.Sprintf(format, args...))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	b := &bench{log: stderr, started: time.Now()}
	etcdBin := fs.String("etcd", "etcd", "etcd server binary")
	fs.StringVar(&b.etcdctl, "etcdctl", "etcdctl", "etcdctl binary")
	fs.StringVar(&b.baton, "baton", "", "baton binary (required)")
	fs.StringVar(&b.kvfloor, "kvfloor", "", "kvfloor binary (required): the floor's one-op NATS client")
	fs.StringVar(&b.peakrss, "peakrss", "", "peakrss binary (required): reports a command's peak memory")
	fs.StringVar(&b.stamp, "stamp", "", "stamp binary: prints when it started (default: beside kvfloor)")
	fs.StringVar(&b.kvlist, "kvlist", "", "kvlist binary: the floor of a listing verb (default: beside kvfloor)")
	fs.StringVar(&b.qworker, "qworker", "", "qworker binary: a queue worker process (default: beside kvfloor)")
	fs.BoolVar(&b.quick, "quick", false, "a smaller run (under 2 minutes) for a smoke test")
	out := fs.String("out", "", "also write the table, versions and machine to this file (RESULTS.md)")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after this long")
	fs.StringVar(&b.only, "only", "", "run only the sections whose names contain this (for working on one)")
	cpuprofile := fs.String("cpuprofile", "", "write the benchmark process's CPU profile to this file")
	fs.Func("workers", "comma-separated worker process counts of the queue throughput rows, instead of 1,4,16,64 (QWORKER_CPUPROFILE_DIR=DIR profiles each worker)", func(s string) error {
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				return fmt.Errorf("a worker count is a number from 1: %q", f)
			}
			b.workers = append(b.workers, n)
		}
		return nil
	})
	fs.IntVar(&b.idleWorkers, "idle-workers", 0, "this many idle worker processes of another queue run beside the queue throughput rows (what idle processes cost the machine, apart from the queue's design)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if b.baton == "" || b.kvfloor == "" || b.peakrss == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "bench: -baton, -kvfloor and -peakrss are required (make bench builds and passes them)")
		return 2
	}
	if b.stamp == "" {
		b.stamp = filepath.Join(filepath.Dir(b.kvfloor), "stamp")
	}
	if b.kvlist == "" {
		b.kvlist = filepath.Join(filepath.Dir(b.kvfloor), "kvlist")
	}
	if b.qworker == "" {
		b.qworker = filepath.Join(filepath.Dir(b.kvfloor), "qworker")
	}
	b.sizes = fullSizes
	if b.quick {
		b.sizes = quickSizes
	}
	for _, bin := range []*string{&b.baton, &b.kvfloor, &b.kvlist, &b.peakrss, &b.stamp, etcdBin, &b.etcdctl} {
		p, err := exec.LookPath(*bin)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v (run e2e/bench/install-etcd.sh for etcd and etcdctl)\n", err)
			return 2
		}
		*bin = p
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	b.self = self

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	rows, info, err := b.runAll(ctx, *etcdBin)
	if err == nil && *out != "" {
		err = writeResults(*out, rows, info, b)
	}
	if err != nil {
		// Before the table, so that the closing line stays the last.
		fmt.Fprintf(stderr, "bench: %v\n", err)
	}
	writeTable(stdout, rows)
	met, goals := tally(rows)
	fmt.Fprintf(stdout, "bench: %d of %d goals met\n", met, goals)
	if err != nil {
		return 1
	}
	return 0
}

// section is one workload; it returns its rows.
type section struct {
	name string
	run  func(ctx context.Context) ([]row, error)
}

func (b *bench) runAll(ctx context.Context, etcdBin string) (rows []row, info runInfo, err error) {
	b.work, err = os.MkdirTemp("", "baton-bench-")
	if err != nil {
		return nil, info, err
	}
	defer os.RemoveAll(b.work)
	b.shm = b.work
	if d, err := os.MkdirTemp("/dev/shm", "baton-bench-"); err == nil {
		b.shm = d
		defer os.RemoveAll(d)
	}

	b.progress("starting baton up (default sync), baton up --sync always and etcd on loopback")
	if b.nats, err = startBatonUp(ctx, b.baton, mkdir(b.work, "nats"), ""); err != nil {
		return nil, info, err
	}
	defer b.nats.stop()
	if b.natsAlways, err = startBatonUp(ctx, b.baton, mkdir(b.work, "nats-always"), "always"); err != nil {
		return nil, info, err
	}
	defer b.natsAlways.stop()
	if b.etcd, err = startEtcd(ctx, etcdBin, mkdir(b.work, "etcd")); err != nil {
		return nil, info, err
	}
	defer b.etcd.stop()
	info = gatherInfo(ctx, b, etcdBin)

	// The scale, queue and dashboard sections run last, so that the 100k
	// records they store do not weigh on the others; their rows still print
	// in their place. The dashboard's reads the scale section's 100k.
	sections := []section{
		{"acquire, renew, release", func(ctx context.Context) ([]row, error) { return b.opsRows(ctx, b.nats, "") }},
		{"semaphore", b.semRows},
		{"rate limiter", b.rateRows},
		{"reservations", b.reserveRows},
		{"cold CLI processes", b.cliRows},
		{"contended join of 50", b.contendedRows},
		{"renewal throughput", func(ctx context.Context) ([]row, error) { return b.throughputRows(ctx, b.nats, "") }},
		{"mcp", b.mcpRows},
		{"scale", nil},
		{"failover", b.failoverRows},
		{"graceful handover", b.handoverRows},
		{"acquire, renew, release (sync always)", func(ctx context.Context) ([]row, error) {
			return b.opsRows(ctx, b.natsAlways, " (sync always)")
		}},
		{"renewal throughput (sync always)", func(ctx context.Context) ([]row, error) {
			return b.throughputRows(ctx, b.natsAlways, " (sync always)")
		}},
		{"queue", nil},
		{"dashboard", nil},
	}
	results := make([][]row, len(sections))
	var errs []error
	runOne := func(i int, s section, fn func(context.Context) ([]row, error)) {
		// -only "queue throughput" runs that part of the queue section.
		if ctx.Err() != nil || !strings.Contains(s.name, b.only) && !strings.HasPrefix(b.only, s.name+" ") {
			return
		}
		b.progress("%s", s.name)
		r, err := fn(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			r = append(r, row{metric: s.name, goal: []cond{batonAtMost(0, unitCount)}, broken: "error: " + oneLine(err)})
		}
		results[i] = r
	}
	for i, s := range sections {
		if s.run != nil {
			runOne(i, s, s.run)
		}
	}
	// Last, so that the records they store weigh on nothing else.
	last := map[string]func(context.Context) ([]row, error){"scale": b.scaleRows, "queue": b.queueRows, "dashboard": b.dashboardRows}
	for i, s := range sections {
		if s.run == nil {
			runOne(i, s, last[s.name])
		}
	}
	for _, r := range results {
		rows = append(rows, r...)
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("stopped before the end: %w", ctx.Err()))
	}
	b.progress("done")
	return rows, info, errors.Join(errs...)
}

func mkdir(parent, name string) string {
	d := parent + "/" + name
	_ = os.MkdirAll(d, 0o700)
	return d
}

func oneLine(err error) string {
	s := err.Error()
	for i, c := range s {
		if c == '\n' || c == '|' {
			return s[:i]
		}
	}
	return s
}
