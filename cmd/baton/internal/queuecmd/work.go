package queuecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/procmetrics"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/queue"
)

// WorkOptions are work's inputs.
type WorkOptions struct {
	F           *cmdutil.Factory
	Queue       string
	Command     []string
	Concurrency int
	Once        bool
	Wait        *cmdutil.DurationFlag
	Grace       *cmdutil.DurationFlag
	Metrics     string
}

func newCmdWork(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &WorkOptions{F: f, Wait: cmdutil.NewDurationFlag("wait", 0), Grace: cmdutil.NewDurationFlag("grace", queue.DefaultGrace)}
	cmd := &cobra.Command{
		Use:   "work QUEUE [--concurrency N] [--once [--wait DUR]] [--grace DUR] -- CMD [ARG...]",
		Short: "Run the queue's tasks with a command, fairly, under their keys' locks",
		Long: `Take the queue's tasks as they become runnable and run CMD for each, at most
--concurrency at once on this worker and the queue's max_active across all
workers. Each task runs while this worker holds its key's lock and a
capacity token, renewed every third of the queue's TTL. CMD gets the
task's payload on stdin and, in its environment, BATON_QUEUE, BATON_TASK,
BATON_KEY, BATON_FENCE (pass it to what the task writes), BATON_ATTEMPT and
BATON_SLOT (the lock's slot). Exit 0 records the task done, anything else
failed: it runs again after the queue's backoff until max_attempts, then it
is dead. A task that runs longer than the queue's timeout is stopped and
failed.

If the key's lock is lost while CMD runs (released, expired, taken), CMD's
process group gets SIGTERM, then SIGKILL after --grace; if renewals keep
failing it is stopped before the server could give the lock to another
worker. If this worker dies, CMD dies with it and the task runs again
elsewhere: at once on this host, within the queue's TTL on others.

SIGTERM or SIGINT drains: no new task starts, running ones get --grace to
finish, then are stopped and put back to pending (that attempt does not
count); baton exits 0. A second signal stops them at once.

With --once it runs one task and exits with that task's exit code (3 if its
lock was lost, 124 if it timed out), or 5 if no task could start within
--wait (default: none, do not wait). Lines about each task go to stderr;
stdout is the commands': what a command writes there (its first 64 KiB)
is also recorded as the task's result, which queue get --result and queue
add --wait print. --metrics serves this worker's task outcomes,
running tasks and renewal latency for Prometheus.

The worker's own Go code runs on one thread (GOMAXPROCS=1: it mostly waits,
and spends less CPU per task that way); set GOMAXPROCS to change it.`,
		Example: `  baton queue work agents -- ./agent.sh
  baton queue work agents --concurrency 4 --grace 30s -- sh -c 'claude -p "$(cat)"'
  baton queue work agents --once --wait 1m -- ./agent.sh`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return cmdutil.Usagef("want QUEUE, then -- and the command: baton queue work QUEUE -- CMD [ARG...]")
			}
			if err := queue.ValidateName(args[0]); err != nil {
				return cmdutil.Usagef("%s", cmdutil.Text(err))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue, o.Command = args[0], args[1:]
			if err := procmetrics.CheckAddr(o.Metrics); err != nil {
				return err
			}
			if runF != nil {
				return runF("work", o)
			}
			return workRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&o.Concurrency, "concurrency", 1, "tasks this worker runs at once")
	fs.BoolVar(&o.Once, "once", false, "run one task, then exit with its exit code")
	fs.Var(o.Wait, "wait", "with --once: wait up to this long for a task (default: do not wait)")
	fs.Var(o.Grace, "grace", "time running tasks get to finish when stopping, and between SIGTERM and SIGKILL")
	procmetrics.AddFlag(fs, &o.Metrics)
	return cmd
}

func workRun(ctx context.Context, o *WorkOptions) error {
	if o.Concurrency < 1 {
		return cmdutil.Usagef("--concurrency %d: use 1 or more", o.Concurrency)
	}
	if o.Wait.IsSet() && !o.Once {
		return cmdutil.Usagef("--wait goes with --once")
	}
	defer o.F.OneThread()()
	command, err := o.F.LookCommand(o.Command)
	if err != nil {
		return err
	}
	pm, stopMetrics, err := procmetrics.Start(ctx, o.F, "queue work", o.Metrics, procmetrics.Kind(procmetrics.KindTask), procmetrics.KindTask)
	if err != nil {
		return err
	}
	defer stopMetrics()
	pm.Serving(o.Queue)
	qs, err := o.F.Queues(ctx, o.F.LongLived("queue work", nil)...)
	if err != nil {
		return err
	}
	if _, err := qs.Config(ctx, o.Queue); err != nil {
		return err
	}
	p := &printer{w: o.F, q: o.Queue}
	events := func(ev queue.Event) {
		pm.TaskEvent(o.Queue, ev)
		p.event(ev)
	}
	opts := []queue.WorkerOption{queue.WithConcurrency(o.Concurrency), queue.WithGrace(o.Grace.D), queue.WithEvents(events)}
	if o.Once {
		opts = append(opts, queue.WithMaxTasks(1), queue.WithIdleTimeout(o.Wait.D))
	}
	handler := &execHandler{cmd: command, q: o.Queue, stdout: o.F.IO.Out}
	handler.refill()
	defer handler.close()
	w, err := qs.NewWorker(o.Queue, handler, opts...)
	if err != nil {
		return err
	}
	// The first SIGINT, SIGTERM or SIGHUP drains; the next stops at once.
	wctx, drain := context.WithCancel(context.Background())
	defer drain()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// The commands' output passes through this process: a reader of its
	// stdout that goes away must not kill it (the results are still kept).
	signal.Ignore(syscall.SIGPIPE)
	defer signal.Stop(sigs)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		n := 0
		for {
			select {
			case sig := <-sigs:
				if n++; n == 1 {
					cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue work: %s: draining (running tasks get %s; signal again to stop them now)\n", sig, o.Grace.D)
					drain()
				} else {
					w.Interrupt()
				}
			case <-ctx.Done():
				drain()
			case <-stopped:
				return
			}
		}
	}()
	if err := w.Run(wctx); err != nil {
		return err
	}
	if o.Once {
		if code := p.lastCode(); code != 0 {
			return cmdutil.Exit(cmdutil.ExitCode(code), nil)
		}
	}
	return nil
}

// execHandler runs a task's command as a process group, with the payload
// on stdin. It keeps one supervisor started ahead (a standby), so that a
// task's command starts without waiting for the supervisor's own start-up.
// The next standby starts once the task's command has started (refillAfter)
// or ended, never beside its start: a supervisor's start-up is a program
// start, and two at once on a small machine slow the command's by as much.
type execHandler struct {
	cmd *cmdutil.Command
	q   string
	// started records the process doing a task's work in its key lock
	// (queue.Started; a test's recorder when set).
	started func(context.Context, hostlocal.Process) error
	// stdout gets what the commands write on their standard output (each
	// task's first queue.MaxResult bytes are also its result).
	stdout io.Writer

	mu      sync.Mutex
	ready   *standby
	filling bool // a standby is being started
	bg      sync.WaitGroup
	done    bool
}

// refillAfter is how long after a task's command was handed to its
// supervisor the next standby starts, if the command has not ended first.
const refillAfter = 50 * time.Millisecond

// standby is a supervisor started ahead, and what its command writes on
// its standard output.
type standby struct {
	*hostlocal.Standby
	out *capture
}

// newStandby starts a supervisor whose command's output is captured.
func (h *execHandler) newStandby() (*standby, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s, err := h.cmd.StandbyTo(pw)
	pw.Close() // the supervisor has its copy
	if err != nil {
		pr.Close()
		return nil, err
	}
	return &standby{Standby: s, out: newCapture(pr, h.stdout)}, nil
}

// take takes the supervisor started ahead, or starts one now.
func (h *execHandler) take() (*standby, error) {
	h.mu.Lock()
	s := h.ready
	h.ready = nil
	h.mu.Unlock()
	if s != nil {
		return s, nil
	}
	return h.newStandby()
}

// refill starts a standby in the background unless one is ready or being
// started, or the worker has stopped.
func (h *execHandler) refill() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ready != nil || h.filling || h.done {
		return
	}
	h.filling = true
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		s, err := h.newStandby()
		h.mu.Lock()
		h.filling = false
		if err == nil && h.ready == nil && !h.done {
			h.ready, s = s, nil
		}
		h.mu.Unlock()
		if s != nil {
			_ = s.Close()
		} // on error the next task starts its own
	}()
}

// close ends the standby left, once the worker has stopped.
func (h *execHandler) close() {
	h.mu.Lock()
	h.done = true
	h.mu.Unlock()
	h.bg.Wait()
	h.mu.Lock()
	s := h.ready
	h.ready = nil
	h.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

// startOn records the standby s in the task's key lock as the process
// doing the work, then has it run the command. The record comes first: a
// worker killed between the two leaves a lock naming a process group that
// lives as long as the command does, so no worker of this host frees the
// lock while the command still runs. s is closed on failure.
func (h *execHandler) startOn(ctx context.Context, s *standby, t *queue.Task, env []string) (*hostlocal.Group, error) {
	p, err := hostlocal.LookupProcess(s.PID())
	if err == nil {
		record := h.started
		if record == nil {
			record = queue.Started
		}
		if err = record(ctx, p); err != nil {
			err = fmt.Errorf("%w: %w", errNotRecorded, err)
		}
	}
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	g, err := h.cmd.StartOn(s.Standby, t.Payload, env...)
	if err != nil {
		_ = s.Close()
	}
	return g, err
}

// exitError is a command's non-zero exit.
type exitError struct{ code int }

func (e *exitError) Error() string { return "exit status " + strconv.Itoa(e.code) }
func (e *exitError) ExitCode() int { return e.code }

func (h *execHandler) Work(ctx context.Context, t *queue.Task) error {
	env := []string{
		"BATON_QUEUE=" + h.q,
		"BATON_TASK=" + t.ID,
		"BATON_KEY=" + t.Key,
		"BATON_FENCE=" + strconv.FormatUint(t.Run.Fence, 10),
		"BATON_ATTEMPT=" + strconv.Itoa(t.Run.Attempt),
		"BATON_SLOT=" + t.Run.Slot,
	}
	s, err := h.take()
	var g *hostlocal.Group
	if err == nil {
		if g, err = h.startOn(ctx, s, t, env); err != nil && !errors.Is(err, errNotRecorded) {
			// The standby died while it waited: start one now.
			if s, err = h.newStandby(); err == nil {
				g, err = h.startOn(ctx, s, t, env)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", queue.ErrStartFailed, err)
	}
	later := time.AfterFunc(refillAfter, h.refill)
	defer func() {
		if later.Stop() {
			h.refill()
		}
	}()
	var code int
	select {
	case <-g.Done():
		code, _ = g.Wait()
		// Whatever it left running in its group goes too.
		_, _ = g.Stop(queue.StopWithin(ctx))
	case <-ctx.Done():
		code, _ = g.Stop(queue.StopWithin(ctx))
	}
	// The command's stdout, once its group is gone (a second at most for
	// the last of it to be read), is the task's result.
	queue.SetResult(ctx, s.out.result(time.Second))
	if code != 0 {
		return &exitError{code}
	}
	return nil
}

// capture copies what a command writes to out (the worker's stdout) and
// keeps its first queue.MaxResult bytes and one more (so that a longer
// output is known to be cut).
type capture struct {
	r    *os.File
	done chan struct{}
	mu   sync.Mutex
	buf  []byte
}

func newCapture(r *os.File, out io.Writer) *capture {
	c := &capture{r: r, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer r.Close()
		b := make([]byte, 32<<10)
		for {
			n, err := r.Read(b)
			if n > 0 {
				if out != nil {
					if _, werr := out.Write(b[:n]); werr != nil {
						out = nil // its reader went away: keep the result, drop the copy
					}
				}
				c.mu.Lock()
				if room := queue.MaxResult + 1 - len(c.buf); room > 0 {
					c.buf = append(c.buf, b[:min(n, room)]...)
				}
				c.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// result is what was captured once the writers closed the pipe, or within
// wait.
func (c *capture) result(wait time.Duration) []byte {
	select {
	case <-c.done:
	case <-time.After(wait):
		// Something outside the command's group holds its stdout: stop
		// reading, so that neither the reader nor the pipe outlives it.
		_ = c.r.Close()
		<-c.done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}

// printer writes a line on stderr for each task that starts and ends.
type printer struct {
	w    *cmdutil.Factory
	q    string
	mu   sync.Mutex
	last *queue.Event
}

func (p *printer) say(format string, a ...any) {
	cmdutil.Fprintf(p.w.IO.ErrOut, "baton: queue work: %s\n", fmt.Sprintf(format, a...))
}

func (p *printer) event(ev queue.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Kind {
	case queue.EventStarted:
		p.say("task %s (key %s) started: attempt %d, fence %d, slot %s", ev.Task.ID, ev.Task.Key, ev.Attempt, ev.Fence, ev.Slot)
	case queue.EventStopping:
		p.say("stopping task %s: %s", ev.Task.ID, cmdutil.Text(ev.Err))
	case queue.EventError:
		p.say("%s", cmdutil.Text(ev.Err))
	case queue.EventEnded:
		e := ev
		p.last = &e
		p.say("%s", ended(ev))
	}
}

// ended says how a task's attempt ended, for people.
func ended(ev queue.Event) string {
	t := ev.Task
	how := ev.Reason
	if ev.ExitCode != nil {
		how = "exit " + strconv.Itoa(*ev.ExitCode)
	}
	head := fmt.Sprintf("attempt %d ended (%s, %s)", ev.Attempt, how, cmdutil.Describe(ev.Took.Round(time.Millisecond)))
	if t == nil {
		if ev.Err != nil && !errors.Is(ev.Err, queue.ErrLockLost) && ev.Reason == "" {
			return head + ": " + cmdutil.Text(ev.Err)
		}
		return head + "; another worker settled the task already"
	}
	head = "task " + t.ID + " " + head
	switch t.State {
	case queue.StateDone:
		return head + ": done"
	case queue.StateFailed:
		return fmt.Sprintf("%s: failed; it runs again in %s", head, t.RetryAfter)
	case queue.StateDead:
		return fmt.Sprintf("%s: dead after %d attempts", head, t.Attempts)
	case queue.StateCancelled:
		return head + ": cancelled"
	case queue.StatePending:
		return head + ": back to pending"
	}
	return head + ": " + string(t.State)
}

// lastCode is the exit code --once reports for the task it ran.
func (p *printer) lastCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev := p.last
	switch {
	case ev == nil:
		return 0
	case ev.ExitCode != nil:
		return *ev.ExitCode
	case ev.Reason == queue.ReasonLost || ev.Reason == queue.ReasonReleased:
		return int(cmdutil.ExitConflict)
	case ev.Reason == queue.ReasonTimeout:
		return 124
	case ev.Reason == queue.ReasonCancelled:
		return 130
	}
	return 1
}
