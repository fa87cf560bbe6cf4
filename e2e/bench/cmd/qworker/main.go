// Command qworker runs one library worker of a queue, with a handler that
// does nothing, as a process of its own: the benchmark starts 1 to 64 of
// them to measure what a task costs as workers are added. It prints "R"
// once it runs, "E <n>" when n more tasks ended (at most every 20 ms, so
// that the count costs the worker next to nothing), with -stamps "S <unix
// ns>" when a task's handler starts, and drains and exits on SIGTERM.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

func main() {
	server := flag.String("server", "", "the NATS server's URL")
	prefix := flag.String("prefix", "bq", "baton's bucket prefix")
	q := flag.String("queue", "", "the queue to work")
	state := flag.String("state", "", "the worker's state directory")
	host := flag.String("host", "bench-host", "the worker's host id")
	concurrency := flag.Int("concurrency", 4, "tasks run at once")
	stamps := flag.Bool("stamps", false, "print when each task's handler starts")
	flag.Parse()
	if *server == "" || *q == "" || *state == "" {
		fmt.Fprintln(os.Stderr, "usage: qworker -server URL -queue Q -state DIR [-host ID] [-concurrency N]")
		os.Exit(2)
	}
	// One thread, as `baton queue work` runs (ADR 0037): this is its
	// stand-in, with the queue package's worker and a no-op handler.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	// QWORKER_CPUPROFILE_DIR, when set, gets this process's CPU profile
	// (for looking into what a worker spends its time on).
	if dir := os.Getenv("QWORKER_CPUPROFILE_DIR"); dir != "" {
		if f, err := os.Create(filepath.Join(dir, *q+"-"+strconv.Itoa(os.Getpid())+".prof")); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	if err := run(*server, *prefix, *q, *state, *host, *concurrency, *stamps); err != nil {
		fmt.Fprintln(os.Stderr, "qworker:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(server, prefix, q, state, host string, concurrency int, stamps bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	c, err := kv.Connect(ctx, kv.WithURL(server), kv.WithName("qworker"))
	if err != nil {
		return err
	}
	defer c.Close()
	sd, err := hostlocal.OpenStateDir(state)
	if err != nil {
		return err
	}
	m, err := session.NewManager(c, session.WithPrefix(prefix), session.WithHostID(host), session.WithStateDir(sd))
	if err != nil {
		return err
	}
	qs, err := queue.New(m)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = out.WriteString(line)
		_ = out.Flush()
	}
	h := queue.HandlerFunc(func(context.Context, *queue.Task) error {
		if stamps {
			say("S " + strconv.FormatInt(time.Now().UnixNano(), 10) + "\n")
		}
		return nil
	})
	// Ends are counted, and said 20 ms after the first one not said yet:
	// an idle worker does not wake for them.
	var ended, said atomic.Int64
	var pending atomic.Bool
	flush := func() {
		pending.Store(false)
		n := ended.Load()
		if d := n - said.Swap(n); d > 0 {
			say("E " + strconv.FormatInt(d, 10) + "\n")
		}
	}
	ev := func(e queue.Event) {
		if e.Kind == queue.EventEnded {
			ended.Add(1)
			if pending.CompareAndSwap(false, true) {
				time.AfterFunc(20*time.Millisecond, flush)
			}
		}
	}
	w, err := qs.NewWorker(q, h, queue.WithConcurrency(concurrency), queue.WithEvents(ev))
	if err != nil {
		return err
	}
	say("R\n")
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
