package queuecmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/view"
)

// TaskOptions are the inputs of get, cancel and retry.
type TaskOptions struct {
	F       *cmdutil.Factory
	Queue   string
	ID      string
	Payload bool
	Result  bool
	Wait    *cmdutil.DurationFlag
	// States and Key choose the tasks of a bulk cancel or retry.
	States []string
	Key    string
}

func taskArgs(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := queueArgs("QUEUE and ID: baton queue "+verb+" QUEUE ID", 1)(cmd, args); err != nil {
			return err
		}
		return cmdutil.ValidSlot("task id", args[1])
	}
}

func newCmdGet(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &TaskOptions{F: f}
	cmd := &cobra.Command{
		Use:   "get QUEUE ID [--payload | --result]",
		Short: "Show a task: key, priority, state, attempts, its last result",
		Long: `Show a task. A missing task is exit 5 (finished tasks go after the queue's
retention). With --payload, print only the payload, as it was added; with
--result, only its last attempt's result (what its command wrote on
stdout, up to 64 KiB), nothing if it has none yet.`,
		Example: `  baton queue get agents pr-42
  baton queue get agents pr-42 --payload > task.txt
  baton queue get agents pr-42 --json | jq .result`,
		Args: taskArgs("get"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue, o.ID = args[0], args[1]
			if runF != nil {
				return runF("get", o)
			}
			return getRun(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Payload, "payload", false, "print only the payload")
	cmd.Flags().BoolVar(&o.Result, "result", false, "print only the last attempt's result")
	return cmd
}

func getRun(ctx context.Context, o *TaskOptions) error {
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	t, err := qs.Get(ctx, o.Queue, o.ID)
	if err != nil {
		return err
	}
	if o.Payload && o.Result {
		return cmdutil.Usagef("give --payload or --result, not both")
	}
	if o.Payload {
		_, err := o.F.IO.Out.Write(t.Payload)
		return err
	}
	if o.Result {
		if t.Result == nil {
			return nil
		}
		_, err := o.F.IO.Out.Write(t.Result.Output)
		return err
	}
	cfg, err := qs.Config(ctx, o.Queue)
	if err != nil {
		return err
	}
	return printTask(o.F, cfg, t)
}

func printTask(f *cmdutil.Factory, cfg queue.Config, t *queue.Task) error {
	if f.Config.JSON {
		m, err := view.TaskJSON(t)
		if err != nil {
			return err
		}
		return cmdutil.PrintJSON(f.IO.Out, m)
	}
	w := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(w, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("task", "%s", t.ID)
	row("queue", "%s", t.Queue)
	row("key", "%s", t.Key)
	row("priority", "%s", t.Priority)
	state := string(t.State)
	switch t.State {
	case queue.StatePending:
		if nb := t.NotBefore(); !nb.IsZero() {
			state += " (runs at " + cmdutil.Since(nb) + ", by the server's clock)"
		}
		if len(t.After) > 0 {
			state += " (after " + strings.Join(t.After, ", ") + ")"
		}
	case queue.StateFailed:
		state += fmt.Sprintf(" (runs again %s after %s)", t.RetryAfter, cmdutil.Since(t.Written))
	case queue.StateActive:
		if t.CancelRequested {
			state += " (cancel asked)"
		}
	}
	row("state", "%s", state)
	row("attempts", "%d of %d", t.Attempts, t.AttemptsIn(cfg))
	if t.Timeout > 0 {
		row("timeout", "%s (its own)", time.Duration(t.Timeout))
	}
	if len(t.Touches) > 0 {
		row("touches", "%s (in space %s)", strings.Join(t.Touches, " "), t.Space)
	}
	if len(t.Labels) > 0 {
		var ls []string
		for k, v := range t.Labels {
			ls = append(ls, k+"="+v)
		}
		sort.Strings(ls)
		row("labels", "%s", strings.Join(ls, " "))
	}
	switch {
	case len(t.Payload) == 0:
		row("payload", "none")
	case len(t.Payload) <= 60 && utf8.Valid(t.Payload) && !strings.ContainsAny(string(t.Payload), "\n\r\t"):
		row("payload", "%q", t.Payload)
	default:
		row("payload", "%d bytes (--payload prints it)", len(t.Payload))
	}
	row("added", "%s", cmdutil.Since(t.AddedAt))
	if r := t.Run; r != nil {
		row("running", "attempt %d on host %s pid %d, slot %s, fence %d, since %s", r.Attempt, r.Host, r.PID, r.Slot, r.Fence, cmdutil.Since(r.StartedAt))
	}
	if t.Result != nil {
		row("last run", "attempt %d: %s", t.Result.Attempt, describeEnd(t.Result))
		if out := t.Result.Output; len(out) > 0 {
			cut := ""
			if t.Result.OutputTruncated {
				cut = ", cut there"
			}
			row("result", "%d bytes%s (--result prints it)", len(out), cut)
		}
	}
	if !t.Expires.IsZero() {
		row("expires", "%s", cmdutil.Since(t.Expires))
	}
	return w.Flush()
}

// bulkArgs takes QUEUE and ID, or QUEUE alone with --state.
func bulkArgs(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 && cmd.Flags().Changed("state") {
			return queueArgs("QUEUE: baton queue "+verb+" QUEUE --state S", 0)(cmd, args)
		}
		if cmd.Flags().Changed("state") || cmd.Flags().Changed("key") {
			return cmdutil.Usagef("give a task's ID, or --state (and --key) to choose many: baton queue %s QUEUE ID | QUEUE --state S [--key K]", verb)
		}
		return taskArgs(verb)(cmd, args)
	}
}

// bulk applies fn (Cancel or Retry) to every task of o.Queue in one of
// o.States (and of o.Key, when given), allowed being the states the verb
// takes; one line per task, or a JSON list.
func bulk(ctx context.Context, o *TaskOptions, verb string, allowed []queue.State, fn func(ctx context.Context, q, id string, opts ...queue.ChangeOption) (*queue.Task, error)) error {
	var states []queue.State
	for _, s := range o.States {
		st := queue.State(s)
		if !slices.Contains(allowed, st) {
			return cmdutil.Usagef("--state %s: %s takes %v", s, verb, allowed)
		}
		states = append(states, st)
	}
	if o.Key != "" {
		if err := cmdutil.ValidSlot("--key", o.Key); err != nil {
			return err
		}
	}
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	tasks, err := qs.Matching(ctx, o.Queue, states, o.Key)
	if err != nil {
		return err
	}
	var docs []map[string]any
	var first error
	failed := 0
	if len(states) == 0 {
		states = allowed
	}
	for _, t := range tasks {
		// Each only if it is still in a state it was listed by: a pending
		// task that started meanwhile is not stopped by cancel --state pending.
		got, err := fn(ctx, o.Queue, t.ID, queue.IfState(states...))
		if errors.Is(err, queue.ErrStateMoved) {
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue %s: task %s is %s now, no longer %s as listed; left alone\n", verb, t.ID, got.State, t.State)
			continue
		}
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue %s: task %s: %s\n", verb, t.ID, cmdutil.Text(err))
			continue
		}
		if o.F.Config.JSON {
			m, err := view.TaskJSON(got)
			if err != nil {
				return err
			}
			delete(m, "payload")
			docs = append(docs, m)
			continue
		}
		cmdutil.Fprintf(o.F.IO.Out, "task %s is %s\n", got.ID, got.State)
	}
	if o.F.Config.JSON {
		if docs == nil {
			docs = []map[string]any{}
		}
		if err := cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"queue": o.Queue, "tasks": docs}); err != nil {
			return err
		}
	} else if len(tasks) == 0 {
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue %s: no task of queue %s matches; nothing done\n", verb, o.Queue)
	}
	if first != nil {
		return fmt.Errorf("%d of %d tasks not done (said above); the first: %w", failed, len(tasks), first)
	}
	return nil
}

func newCmdCancel(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &TaskOptions{F: f, Wait: cmdutil.NewDurationFlag("wait", 30*time.Second)}
	cmd := &cobra.Command{
		Use:   "cancel QUEUE ID [--wait DUR] | cancel QUEUE --state pending|failed|active... [--key K]",
		Short: "Cancel a task; an active one's command is stopped",
		Long: `Cancel a task. A pending or failed task is cancelled at once and never runs.
An active one is asked to stop: its worker stops the command (SIGTERM, then
SIGKILL after its grace) and records it cancelled; cancel waits up to --wait
for that (exit 3 if it has not happened by then; the worker still does it
when it sees the request). Cancelling a cancelled task is a no-op; a done or
dead one is exit 3.

With --state (repeatable) instead of an ID, every task of the queue in one
of those states (pending, failed, active) is cancelled, of --key K only
when given; active ones are asked to stop and not waited for. One line per
task (with --json, a list).`,
		Example: `  baton queue cancel agents pr-42
  baton queue cancel agents --state pending --state failed --key bob`,
		Args: bulkArgs("cancel"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue = args[0]
			if len(args) == 2 {
				o.ID = args[1]
			}
			if runF != nil {
				return runF("cancel", o)
			}
			if o.ID == "" {
				return bulk(cmd.Context(), o, "cancel", []queue.State{queue.StatePending, queue.StateFailed, queue.StateActive}, o.cancelOne)
			}
			return cancelRun(cmd.Context(), o)
		},
	}
	cmd.Flags().Var(o.Wait, "wait", "how long to wait for an active task's worker to stop it")
	cmd.Flags().StringArrayVar(&o.States, "state", nil, "cancel every task in this state (pending, failed, active; repeatable) instead of one ID")
	cmd.Flags().StringVar(&o.Key, "key", "", "with --state, only the tasks of this key")
	return cmd
}

func cancelRun(ctx context.Context, o *TaskOptions) error {
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	t, err := qs.Cancel(ctx, o.Queue, o.ID)
	if err != nil {
		return err
	}
	if t.State == queue.StateActive && o.Wait.D > 0 {
		wctx, cancel := context.WithTimeout(ctx, o.Wait.D)
		t2, err := qs.WaitTask(wctx, o.Queue, o.ID, func(t *queue.Task) bool { return t.State != queue.StateActive })
		cancel()
		switch {
		case err == nil:
			t = t2
		case errors.Is(err, context.DeadlineExceeded):
			return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("task %s: cancel asked, but its worker (host %s pid %d) has not stopped it within %s; it will when it sees the request", o.ID, t.Run.Host, t.Run.PID, o.Wait.D))
		default:
			return err
		}
	}
	return reportState(o.F, "cancel", t)
}

// reportState prints a task's state after a change: one line, or the task
// with --json.
func reportState(f *cmdutil.Factory, verb string, t *queue.Task) error {
	if f.Config.JSON {
		m, err := view.TaskJSON(t)
		if err != nil {
			return err
		}
		return cmdutil.PrintJSON(f.IO.Out, m)
	}
	line := fmt.Sprintf("task %s is %s", t.ID, t.State)
	if t.State == queue.StateActive && t.CancelRequested {
		line += "; cancel asked, its worker stops it when it sees the request"
	}
	cmdutil.Fprintf(f.IO.Out, "%s\n", line)
	return nil
}

func newCmdRetry(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &TaskOptions{F: f}
	cmd := &cobra.Command{
		Use:   "retry QUEUE ID | retry QUEUE --state dead|failed|cancelled... [--key K]",
		Short: "Put a failed, dead or cancelled task back to pending, with fresh attempts",
		Long: `Make a failed (waiting for its retry), dead or cancelled task pending again,
at once, with its count of attempts started afresh; its last result stays
until it runs. A pending task is left as it is (exit 0); an active or done
one is exit 3.

With --state (repeatable) instead of an ID, every task of the queue in one
of those states (dead, failed, cancelled) is retried, of --key K only when
given. One line per task (with --json, a list).`,
		Example: `  baton queue retry agents pr-42
  baton queue retry agents --state dead --key alice`,
		Args: bulkArgs("retry"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue = args[0]
			if len(args) == 2 {
				o.ID = args[1]
			}
			if runF != nil {
				return runF("retry", o)
			}
			qs, err := o.F.Queues(cmd.Context())
			if err != nil {
				return err
			}
			if o.ID == "" {
				return bulk(cmd.Context(), o, "retry", []queue.State{queue.StateDead, queue.StateFailed, queue.StateCancelled}, qs.Retry)
			}
			t, err := qs.Retry(cmd.Context(), o.Queue, o.ID)
			if err != nil {
				return err
			}
			return reportState(o.F, "retry", t)
		},
	}
	cmd.Flags().StringArrayVar(&o.States, "state", nil, "retry every task in this state (dead, failed, cancelled; repeatable) instead of one ID")
	cmd.Flags().StringVar(&o.Key, "key", "", "with --state, only the tasks of this key")
	return cmd
}

// cancelOne cancels a task of a bulk cancel, without waiting.
func (o *TaskOptions) cancelOne(ctx context.Context, q, id string, opts ...queue.ChangeOption) (*queue.Task, error) {
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return nil, err
	}
	return qs.Cancel(ctx, q, id, opts...)
}

// ReleaseOptions are release's inputs.
type ReleaseOptions struct {
	F     *cmdutil.Factory
	Queue string
	Key   string
	Force bool
}

func newCmdRelease(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &ReleaseOptions{F: f}
	cmd := &cobra.Command{
		Use:   "release QUEUE KEY [--force]",
		Short: "Free a key whose lock holder is dead or stale",
		Long: `Free the locks of a key (one per lane) whose holder is dead (a process of this
host that is gone) or stale (not renewed for half its TTL): each is removed
by a compare-and-set on what was read, so a holder that renewed meanwhile
keeps it. The task that held it goes back to pending, its attempt counted,
and its capacity token is freed. A live holder is refused (exit 3) unless
--force, which stops its task at once (its worker sees the lock go). A key
without a lock is a no-op (exit 0).`,
		Example: `  baton queue release agents alice
  baton queue release agents alice --force`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := queueArgs("QUEUE and KEY: baton queue release QUEUE KEY", 1)(cmd, args); err != nil {
				return err
			}
			return cmdutil.ValidSlot("key", args[1])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue, o.Key = args[0], args[1]
			if runF != nil {
				return runF("release", o)
			}
			return releaseRun(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "free the key even from a live holder, stopping its task")
	return cmd
}

func releaseRun(ctx context.Context, o *ReleaseOptions) error {
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	rel, err := qs.Release(ctx, o.Queue, o.Key, o.Force)
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		if rel == nil {
			rel = []queue.Released{}
		}
		return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"queue": o.Queue, "key": o.Key, "released": rel})
	}
	if len(rel) == 0 {
		cmdutil.Fprintf(o.F.IO.Out, "key %s of queue %s holds no lock; nothing to release\n", o.Key, o.Queue)
		return nil
	}
	for _, r := range rel {
		l := r.Lock
		line := fmt.Sprintf("released slot %s (fence %d, host %s pid %d, %s)", l.Slot, l.Fence, l.Host, l.PID, l.State)
		if r.Task != nil {
			line += fmt.Sprintf("; task %s is %s", r.Task.ID, r.Task.State)
		}
		cmdutil.Fprintf(o.F.IO.Out, "%s\n", line)
	}
	return nil
}

// LsOptions are ls's inputs.
type LsOptions struct{ F *cmdutil.Factory }

func newCmdLs(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &LsOptions{F: f}
	return &cobra.Command{
		Use:     "ls",
		Short:   "List the queues with their counts",
		Example: `  baton queue ls --json`,
		Args:    cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF("ls", o)
			}
			return lsRun(cmd.Context(), o)
		},
	}
}

func lsRun(ctx context.Context, o *LsOptions) error {
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	configs, bad, err := qs.List(ctx)
	if err != nil {
		return err
	}
	sums, err := qs.Summaries(ctx)
	if err != nil {
		return err
	}
	byName := map[string]queue.Summary{}
	for _, s := range sums {
		byName[s.Queue] = s
	}
	for _, b := range bad {
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue ls: %s\n", cmdutil.Text(b))
	}
	if o.F.Config.JSON {
		rows := []map[string]any{}
		for _, c := range configs {
			m, err := view.QueueConfigJSON(c)
			if err != nil {
				return err
			}
			m["counts"] = byName[c.Queue]
			rows = append(rows, m)
		}
		return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"queues": rows})
	}
	if len(configs) == 0 {
		cmdutil.Fprintf(o.F.IO.Out, "no queues (create one with `baton queue create QUEUE`)\n")
		return nil
	}
	w := tabwriter.NewWriter(o.F.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "QUEUE\tPENDING\tACTIVE\tMAX\tDONE\tFAILED\tDEAD\tCANCELLED")
	for _, c := range configs {
		s := byName[c.Queue]
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\n", c.Queue, s.Pending, s.Active, maxText(c.MaxActive), s.Done, s.Failed, s.Dead, s.Cancelled)
	}
	return w.Flush()
}

func maxText(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
