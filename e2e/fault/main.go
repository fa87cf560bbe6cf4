// Command batonfault runs baton on a three-server JetStream cluster under
// faults and checks that it holds: one holder per slot, leaders fenced,
// acknowledged sessions kept, every operation ending clearly, and every KV
// key's history linearizable.
//
// It starts three `baton up` processes as one cluster. As root (with
// iproute2) each server and each client host runs in a network namespace of
// its own, joined to a bridge, so that links can be cut, split and flapped;
// otherwise everything runs on loopback and those faults are skipped (it
// says so). One host's links go through toxiproxy, to be slowed, throttled,
// reset and stalled. It runs a randomized workload of join, commit, close,
// run and lead processes on several host ids and keys, library clients
// whose clocks are hours off, a work queue (with a schedule that adds a
// task every second, and tasks that wait for a time: --in, --at), a
// second queue with a rate limit (20 starts in 10 s, and each key's), a
// semaphore (`sem run` on every host) and a rate limiter (`rate take` on
// every host, and a library client that keeps it full), while it SIGKILLs and
// SIGSTOPs clients, injects one server or network fault after another
// (server SIGKILLs, the stream leader partitioned with a host on its side,
// 2/1 splits, a host cut off past its holders' TTL, flapping links, slow
// links, and, as root, one server's disk filled: each server's store is on
// a tmpfs of its own), and overwrites records with garbage through the raw
// NATS API (sessions, leaders, and the queue's config, tasks, capacity
// tokens, key locks, workers' presence and inboxes: random bytes, truncated
// copies, foreign records with no TTL). Then it restarts the servers one by
// one with SIGTERM while holders renew at a TTL of 2 s, and reports the
// longest write pause.
//
// A checker plays the protected resource: it accepts a write only with a
// fence at least as large as any it has seen. The semaphore's commands
// report what they hold to a ledger (semaphore.go), and a watch of the
// rate limiter's record gathers each admission with its server time
// (ratelimit.go); both say there why their checks are sound. A watch of
// the queues bucket records every revision of the queues' tasks, the
// schedule and the rate record, from which the schedule's ticks, the
// delayed tasks' starts and the rate-limited queue's windows and claims
// are judged (qsched.go, qdelay.go, qrate.go). Every KV
// operation is traced (BATON_KV_TRACE, and the harness's own clients) and
// each key's history is checked with porcupine; a history that is not
// linearizable is drawn into the run's artifacts directory, which is then
// kept. The last line is
//
//	fault: <ops> ops, <faults> faults, <v> exclusion violations, <l> acknowledged sessions lost, <s> stuck operations, <n> histories linearizable, <x> not; queue: <n> tasks done, <x> key exclusion violations, <c> over capacity, <l> acknowledged tasks lost; queue records garbaged: <g> (config <n>, token <n>, task <n>, key lock <n>, worker <n>, inbox <n>), <u> task records unreadable (<p> put back, <r> removed); full disk: <f> (<servers>), <a> writes acknowledged and <e> failed with exit 6 while full, resumed within <d> of the space coming back, <p> problems; rolling restart: <h> holders lost, longest write pause <d>; sem: <n> permits served, <x> unit exclusion violations, <o> over max, <b> bad permits; rate: <n> admitted, <r> refused, at most <k> in 1s (limit <m>), <w> windows over limit, <d> takes dropped, <p> other problems, <l> acknowledged takes lost; schedule: <n> ticks added, <d> doubled, <m> misplaced, <e> started early, <g> gaps (<k> ticks missing, <o> after an outage), <l> of <j> ticks lost with a worker and no faults; delayed: <n> added (<a> --at, <i> --in), <s> started, <e> started early, <x> never started; queue rate: <n> starts admitted, at most <k> in 10s (limit <m>) over <w> windows, <o> windows over limit, <d> admissions dropped, <b> of <c> claims beyond admissions, <p> other problems; reserve: <n> reservations served (<s> shared), <c> clashes, <b> bad fences
//
// ("full disk SKIPPED (not root)" without the tmpfs), and the exit status
// is non-zero unless every count of what went wrong is 0. See
// adr/0019-what-holds-under-faults.md for what each check means.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "writer" {
		os.Exit(writerMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "qtask" {
		os.Exit(qtaskMain())
	}
	if len(os.Args) > 1 && os.Args[1] == "semhold" {
		os.Exit(semholdMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "resvhold" {
		os.Exit(resvholdMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is one run's knobs.
type config struct {
	bin      string
	duration time.Duration
	seed     uint64
	keep     bool
	verbose  bool
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("batonfault", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.bin, "baton", "bin/baton", "the baton binary under test")
	fs.DurationVar(&cfg.duration, "duration", 4*time.Minute, "how long the workload and faults run")
	fs.Uint64Var(&cfg.seed, "seed", 0, "random seed (0: from the clock; printed so a run can be repeated)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the run's directory (server logs, state dirs)")
	fs.BoolVar(&cfg.verbose, "v", false, "print each fault as it is injected")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	bin, err := filepath.Abs(cfg.bin)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "batonfault: baton binary %s: %v; build it with `make build`\n", cfg.bin, err)
		return 2
	}
	cfg.bin = bin
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h, err := newHarness(cfg, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "batonfault: %v\n", err)
		return 1
	}
	defer h.cleanup()
	ok, err := h.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "batonfault: %v\n", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

// harness is one run: the cluster, the checker, the actors and the counts.
type harness struct {
	cfg        config
	bin        string
	self       string
	dir        string
	out        io.Writer
	cl         *cluster
	net        *network
	px         *proxies
	tr         *traces
	chk        *checker
	qchk       *queueChecker
	sled       *semLedger
	rled       *resvLedger
	rates      *rateLedger
	qw         *qwatchLedger
	checkerURL string
	queueURL   string
	semURL     string
	resvURL    string
	httpSrv    *http.Server
	stats      *stats

	mu      sync.Mutex
	daemons map[*daemon]bool
	slots   map[string]*slotState
	suspect []suspectLoss // judged once the garbage actor is done (judgeLosses)
	pauses  []pauseCheck
	cutOff  []holding
	cuts    []span // when a server was cut off from the majority (reads may be stale)
	kills   []time.Time
	rng     *rand.Rand

	killCount int
	failed    bool // keep the run's directory: it holds what a failure left

	// When the schedule's add began and its revision; when the
	// rate-limited queue's create began.
	schedFrom time.Time
	schedRev  uint64
	rateFrom  time.Time
}

func newHarness(cfg config, out io.Writer) (*harness, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "batonfault-")
	if err != nil {
		return nil, err
	}
	chk := newChecker()
	h := &harness{cfg: cfg, bin: cfg.bin, self: self, dir: dir, out: out, chk: chk, qchk: newQueueChecker(), sled: newSemLedger(chk), rled: newResvLedger(chk), rates: newRateLedger(), qw: newQwatchLedger(),
		stats: newStats(), daemons: map[*daemon]bool{}, slots: map[string]*slotState{}, rng: rand.New(rand.NewPCG(cfg.seed, 0x5eed))}
	if err := os.Mkdir(filepath.Join(dir, "clients"), 0o700); err != nil {
		return nil, err
	}
	if h.tr, err = newTraces(filepath.Join(dir, "traces")); err != nil {
		return nil, err
	}
	h.net = newNetwork(context.Background(), append(serverNames, hosts...))
	if h.cl, err = newCluster(cfg.bin, dir, h.net); err != nil {
		h.net.teardown()
		return nil, err
	}
	if h.px, err = newProxies(h.net.harnessAddr(), h.cl.hostPorts()); err != nil {
		h.net.teardown()
		return nil, err
	}
	return h, nil
}

func (h *harness) cleanup() {
	if h.httpSrv != nil {
		_ = h.httpSrv.Close()
	}
	h.cl.stop()
	h.unmountDisks()
	h.px.stop()
	h.net.teardown()
	h.tr.close()
	if h.cfg.keep || h.failed {
		fmt.Fprintf(os.Stderr, "batonfault: kept %s\n", h.dir) // stdout ends with the closing line
		return
	}
	_ = os.RemoveAll(h.dir)
}

func (h *harness) hostDir(host string) string { return filepath.Join(h.dir, "hosts", host) }

func (h *harness) logf(format string, args ...any) {
	if h.cfg.verbose {
		fmt.Fprintf(h.out, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

// intn and between are the run's seeded randomness, safe for the actors.
func (h *harness) intn(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rng.IntN(n)
}

func (h *harness) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(h.intn(int(hi-lo)/int(time.Millisecond)+1))*time.Millisecond
}

func (h *harness) track(d *daemon) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.daemons[d] = true
}

func (h *harness) untrack(d *daemon) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.daemons, d)
}

func (h *harness) run(ctx context.Context) (bool, error) {
	start := time.Now()
	fmt.Fprintf(h.out, "batonfault: seed %d, %s of workload and faults on a 3-server cluster in %s\n", h.cfg.seed, h.cfg.duration, h.dir)
	for _, host := range hosts {
		if err := os.MkdirAll(h.hostDir(host), 0o700); err != nil {
			return false, err
		}
	}
	if h.net.on {
		fmt.Fprintf(h.out, "batonfault: servers and hosts in network namespaces on bridge %s (%s); %s's links go through toxiproxy\n", h.net.bridge, h.net.gw, slowHost)
	} else {
		fmt.Fprintf(h.out, "batonfault: network namespaces unavailable (%s): every process on loopback; partitions, host isolation and link flaps are SKIPPED (run as root with iproute2 for them); slow links (toxiproxy) still run\n", h.net.why)
	}
	if h.stats.diskSkipped = h.mountDisks(); h.stats.diskSkipped == "" {
		fmt.Fprintf(h.out, "batonfault: each server's store on a tmpfs of its own, one filled mid-run (full_disk)\n")
	} else {
		fmt.Fprintf(h.out, "batonfault: no tmpfs for the servers' stores (%s): the full disk is SKIPPED (run as root for it)\n", h.stats.diskSkipped)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(h.net.harnessAddr(), "0"))
	if err != nil {
		return false, err
	}
	h.checkerURL = "http://" + l.Addr().String() + "/write"
	h.queueURL = "http://" + l.Addr().String() + "/qevent"
	h.semURL = "http://" + l.Addr().String() + "/sevent"
	h.resvURL = "http://" + l.Addr().String() + "/revent"
	mux := http.NewServeMux()
	mux.Handle("/write", h.chk)
	mux.Handle("/qevent", h.qchk)
	mux.Handle("/sevent", h.sled)
	mux.Handle("/revent", h.rled)
	h.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = h.httpSrv.Serve(l) }()

	for i := range h.cl.nodes {
		if err := h.cl.start(ctx, i); err != nil {
			return false, err
		}
	}
	if err := h.waitReady(ctx); err != nil {
		return false, err
	}
	// The queue watch runs from before the queues are made until after
	// the drain (checkFlow stops it).
	qwctx, stopQwatch := context.WithCancel(ctx)
	qwatched := make(chan struct{})
	go func() { defer close(qwatched); h.qwatch(qwctx) }()
	defer stopQwatch()
	if err := h.createQueue(); err != nil {
		return false, err
	}
	if h.rateFrom, err = h.createRateQueue(); err != nil {
		return false, err
	}
	if err := h.createSem(ctx); err != nil {
		return false, err
	}
	if err := h.createRate(ctx); err != nil {
		return false, err
	}
	if h.schedFrom, h.schedRev, err = h.createSchedule(); err != nil {
		return false, err
	}
	// The limiter's watch outlives the workload: it must bring the last
	// admissions acknowledged before it is judged (checkRate stops it).
	rwctx, stopRateWatch := context.WithCancel(ctx)
	rateWatched := make(chan struct{})
	go func() { defer close(rateWatched); h.rateWatch(rwctx) }()
	defer stopRateWatch()
	fmt.Fprintf(h.out, "batonfault: cluster up in %s; running the workload\n", time.Since(start).Round(time.Millisecond))

	wctx, cancel := context.WithTimeout(ctx, h.cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	goActor := func(fn func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); fn(wctx) }()
	}
	for i := range cliActors {
		goActor(func(ctx context.Context) { h.cliSessions(ctx, i) })
	}
	for _, slot := range runSlots {
		for j := range 2 {
			goActor(func(ctx context.Context) { h.runner(ctx, slot, hosts[(j+len(slot))%len(hosts)], j) })
		}
	}
	for _, key := range leadKeys {
		for j, host := range hosts {
			goActor(func(ctx context.Context) { h.leader(ctx, key, host, j) })
		}
	}
	for i, skew := range skews {
		goActor(func(ctx context.Context) { h.skewedSessions(ctx, i, skew) })
		goActor(func(ctx context.Context) { h.skewedLeases(ctx, i, skew) })
	}
	for i := range queueAdders {
		goActor(func(ctx context.Context) { h.queueAdder(ctx, i) })
	}
	for j, host := range hosts {
		goActor(func(ctx context.Context) { h.queueWorker(ctx, host, j) })
		goActor(func(ctx context.Context) { h.rateQueueWorker(ctx, host, j) })
	}
	goActor(h.rateQueueAdder)
	for j := range semActors {
		goActor(func(ctx context.Context) { h.semActor(ctx, hosts[j%len(hosts)], j, 1+j%2) })
	}
	for j := range resvActors {
		goActor(func(ctx context.Context) { h.resvActor(ctx, hosts[j%len(hosts)], j) })
	}
	for _, host := range hosts {
		goActor(func(ctx context.Context) { h.rateTaker(ctx, host) })
	}
	goActor(h.rateFiller)
	goActor(h.clientFaults)
	goActor(h.garbage)
	goActor(h.queueGarbage)
	serverErr := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); serverErr <- h.faultSchedule(wctx) }()

	<-wctx.Done()
	stopping := time.Now()
	fmt.Fprintf(h.out, "batonfault: workload done; stopping every client\n")
	wg.Wait()
	h.finishAll()
	sc := h.checkSem()
	rv := h.checkResv()
	rc := h.checkRate(func() { stopRateWatch(); <-rateWatched })
	h.judgeLosses()
	h.checkPauses()
	h.stats.isolationsChecked = h.checkIsolations()
	if err := <-serverErr; err != nil {
		return false, err
	}
	if ctx.Err() != nil {
		return false, errors.New("interrupted")
	}
	fmt.Fprintf(h.out, "batonfault: every client stopped in %s; restarting the servers one by one (SIGTERM) while holders renew at TTL %s\n", time.Since(stopping).Round(time.Millisecond), rollTTL)
	h.waitHealthy(ctx)
	roll, err := h.rollingRestart(ctx)
	if err != nil {
		return false, err
	}
	h.stats.roll = roll
	fmt.Fprintf(h.out, "batonfault: rolling restart done in %s; draining the queue with one worker, no faults\n", roll.took.Round(time.Millisecond))
	drained := time.Now()
	quiet := h.drainQueue(ctx)
	fmt.Fprintf(h.out, "batonfault: queue drained in %s\n", time.Since(drained).Round(time.Millisecond))
	q := h.checkQueue()
	flow := h.checkFlow(ctx, func() { stopQwatch(); <-qwatched }, quiet)
	checking := time.Now()
	h.mu.Lock()
	cuts := slices.Clone(h.cuts)
	h.mu.Unlock()
	lin, err := checkTraces(h.tr.dir, filepath.Join(h.dir, "artifacts"), linTimeout, cuts)
	if err != nil {
		return false, err
	}
	h.stats.lin = lin
	fmt.Fprintf(h.out, "batonfault: %d KV operations in %d histories checked for linearizability in %s\n", lin.Ops, lin.Histories, time.Since(checking).Round(time.Millisecond))
	accepted, rejected, cv := h.chk.counts()
	ok := h.stats.report(h.out, accepted, rejected, cv, q, sc, rc, rv, flow, time.Since(start))
	h.failed = !ok
	return ok, nil
}

// waitReady waits until the cluster answers a join through the CLI, which
// needs the buckets created and their streams led.
func (h *harness) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := h.cli("h1", "status", "--json")
		if r.code == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster is not ready after 90s: %s", r.stderr)
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// finishAll stops every daemon still running; one that does not end within
// stuckAfter is stuck.
func (h *harness) finishAll() {
	h.mu.Lock()
	var ds []*daemon
	for d := range h.daemons {
		ds = append(ds, d)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !d.finish() {
				h.stats.stick("%s %s did not end within %s of SIGTERM", d.verb, d.actor, stuckAfter)
			}
			h.untrack(d)
		}()
	}
	wg.Wait()
}

// writerMain is the command that `run` and `lead` start: it writes to the
// checker with $BATON_FENCE every 50 ms until it is stopped.
func writerMain(args []string) int {
	fs := flag.NewFlagSet("writer", flag.ContinueOnError)
	key := fs.String("key", "", "the protected resource's key")
	if err := fs.Parse(args); err != nil || *key == "" {
		return 2
	}
	url, actor := os.Getenv("FAULT_CHECKER"), os.Getenv("FAULT_ACTOR")
	fence := os.Getenv("BATON_FENCE")
	if fence == "" {
		fence = "0" // a holder started without a fence: the checker counts it
	}
	writer := actor + "/" + procID()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	client := &http.Client{Timeout: 2 * time.Second}
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"?key="+*key+"&fence="+fence+"&writer="+writer, nil)
		if err != nil {
			return 1
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
		sleep(ctx, 50*time.Millisecond)
	}
	return 0
}
