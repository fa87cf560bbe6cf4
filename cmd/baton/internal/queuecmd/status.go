package queuecmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/view"
)

// StatusOptions are status's inputs.
type StatusOptions struct {
	F     *cmdutil.Factory
	Queue string
	Watch bool
	By    string
	Keys  int
	Tasks bool
}

func newCmdStatus(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &StatusOptions{F: f}
	cmd := &cobra.Command{
		Use:   "status QUEUE [--watch] [--json] [--by LABEL] [--tasks]",
		Short: "Show what waits, what runs under which lock, and what ended",
		Long: `Show a queue: tasks waiting by priority and by key, with the oldest one's age;
capacity used, the max and what is available; tasks running by key and by
label; each key lock with its task, host, pid, fence, when it was taken and
when it expires by the server's clock (and locks that others, such as baton
run, hold on keys with tasks waiting); counts of done, failed (waiting for a
retry), dead and cancelled tasks.

--by LABEL shows the running tasks by that label only. --tasks lists every
task the queue holds (id, key, priority, state, attempts, how its last
attempt ended), oldest first. --watch prints the
status again each time the queue or its locks change (at most four times a
second), until interrupted; with --json, one document per line.`,
		Example: `  baton queue status agents
  baton queue status agents --by project
  baton queue status agents --json | jq .active`,
		Args: queueArgs("exactly one QUEUE: baton queue status QUEUE", 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue = args[0]
			if runF != nil {
				return runF("status", o)
			}
			return statusRun(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "print again on every change until interrupted")
	cmd.Flags().StringVar(&o.By, "by", "", "show running tasks by this label only")
	cmd.Flags().IntVar(&o.Keys, "keys", 20, "keys to list in text (--json lists all)")
	cmd.Flags().BoolVar(&o.Tasks, "tasks", false, "list every task too")
	return cmd
}

func statusRun(ctx context.Context, o *StatusOptions) error {
	if !o.Watch {
		defer o.F.ListingGC()()
		qs, err := o.F.Queues(ctx)
		if err != nil {
			return err
		}
		snap, err := qs.Snapshot(ctx, o.Queue, o.snapshotOptions()...)
		if err != nil {
			return err
		}
		return printStatus(o, snap)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	qs, err := o.F.Queues(ctx, o.F.LongLived("queue status", nil)...)
	if err != nil {
		return err
	}
	if _, err := qs.Config(ctx, o.Queue); err != nil {
		return err
	}
	qw, err := qs.Bucket().Watch(ctx, o.Queue+".>", kv.UpdatesOnly())
	if err != nil {
		return err
	}
	defer qw.Stop()
	sw, err := qs.Sessions().Bucket().Watch(ctx, "", kv.UpdatesOnly())
	if err != nil {
		return err
	}
	defer sw.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	dirty := true
	for {
		if dirty {
			dirty = false
			snap, err := qs.Snapshot(ctx, o.Queue, o.snapshotOptions()...)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			if err := printStatus(o, snap); err != nil {
				return err
			}
		}
		// Wait for a change, then at least until the next tick.
		select {
		case _, ok := <-qw.Updates():
			if !ok {
				return watchEnded(ctx)
			}
		case _, ok := <-sw.Updates():
			if !ok {
				return watchEnded(ctx)
			}
		case <-ctx.Done():
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil
		}
		dirty = true
		drain(qw, sw)
	}
}

func (o *StatusOptions) snapshotOptions() []queue.SnapshotOption {
	if o.Tasks {
		return []queue.SnapshotOption{queue.WithTasks()}
	}
	return nil
}

func watchEnded(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%w: the watch ended", kv.ErrUnavailable)
}

// drain takes what the watches have ready without waiting.
func drain(ws ...*kv.Watcher) {
	for _, w := range ws {
		for more := true; more; {
			select {
			case <-w.Updates():
			default:
				more = false
			}
		}
	}
}

func printStatus(o *StatusOptions, s *queue.Snapshot) error {
	if o.F.Config.JSON {
		doc, err := view.QueueStatusJSON(s, o.By, o.Tasks)
		if err != nil {
			return err
		}
		if o.Watch {
			return cmdutil.PrintJSONLine(o.F.IO.Out, doc)
		}
		return cmdutil.PrintJSON(o.F.IO.Out, doc)
	}
	out := o.F.IO.Out
	if o.Watch {
		cmdutil.Fprintf(out, "-- %s\n", cmdutil.Since(s.ServerTime))
	}
	c := s.Config
	cmdutil.Fprintf(out, "queue %s: max_active %s, per_key %d, max_attempts %d, timeout %s, ttl %s\n",
		c.Queue, maxText(c.MaxActive), c.PerKey, c.MaxAttempts, c.Timeout, c.TTL)
	if c.Rate != nil {
		cmdutil.Fprintf(out, "rate      %s: at most %d starts in any %s (by the server's clock)\n", c.Rate, c.Rate.Max, c.Rate.PeriodText())
	}
	if c.KeyRate != nil {
		cmdutil.Fprintf(out, "key_rate  %s: at most %d starts of each key in any %s, unless the key has its own\n", c.KeyRate, c.KeyRate.Max, c.KeyRate.PeriodText())
	}
	for _, k := range s.Keys {
		if k.Rate != nil {
			cmdutil.Fprintf(out, "key rate  %s: %s, at most %d starts in any %s\n", k.Key, k.Rate, k.Rate.Max, k.Rate.PeriodText())
		}
	}
	if c.Paused {
		cmdutil.Fprintf(out, "PAUSED    nothing new starts; running tasks go on (baton queue resume %s)\n", c.Queue)
	}
	for _, sc := range s.Schedules {
		next := "paused"
		if t := sc.NextTick(s.ServerTime); !t.IsZero() {
			next = "next " + cmdutil.Since(t)
		}
		cmdutil.Fprintf(out, "schedule  %s: key %s %s; %s\n", sc.Name, sc.Key, when(sc), next)
	}
	if keys := s.PausedKeys(); len(keys) > 0 {
		cmdutil.Fprintf(out, "paused    keys %s (baton queue resume %s --key K)\n", strings.Join(keys, ", "), c.Queue)
	}
	p := s.Pending
	line := fmt.Sprintf("pending   %d (high %d, normal %d, low %d)", p.Total, p.ByPriority[queue.High], p.ByPriority[queue.Normal], p.ByPriority[queue.Low])
	if p.OldestID != "" {
		line += fmt.Sprintf("; oldest %s, added %s ago", p.OldestID, cmdutil.Describe(p.OldestAge))
	}
	if p.Delayed > 0 {
		line += fmt.Sprintf("; %d of them wait for their time, the next in %s", p.Delayed, cmdutil.Describe(p.NextAt.Sub(s.ServerTime)))
	}
	cmdutil.Fprintf(out, "%s\n", line)
	if s.Active.Max > 0 {
		cmdutil.Fprintf(out, "active    %d of %d (%d available)\n", s.Active.Used, s.Active.Max, s.Active.Available)
	} else {
		cmdutil.Fprintf(out, "active    %d (no limit)\n", s.Active.Used)
	}
	cmdutil.Fprintf(out, "ended     done %d, failed %d (waiting to retry), dead %d, cancelled %d\n",
		s.Counts[queue.StateDone], s.Counts[queue.StateFailed], s.Counts[queue.StateDead], s.Counts[queue.StateCancelled])
	if len(s.Undecodable) > 0 {
		cmdutil.Fprintf(out, "undecodable task records (never run; see baton doctor): %v\n", s.Undecodable)
	}
	cmdutil.Fprintf(out, "records   %d of this queue; %d in the bucket (every queue, and tombstones for %s)\n", s.Records.Queue, s.Records.Bucket, strings.TrimSuffix(queue.MarkerTTL.String(), "0s"))
	if err := printKeys(out, o.Keys, s); err != nil {
		return err
	}
	if err := printLabels(out, o.By, s); err != nil {
		return err
	}
	if err := printLocks(out, s); err != nil {
		return err
	}
	if o.Tasks {
		return printTaskList(out, s)
	}
	return nil
}

// printTaskList lists every task, oldest first.
func printTaskList(out io.Writer, s *queue.Snapshot) error {
	tasks := append([]*queue.Task(nil), s.Tasks...)
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].Seq < tasks[j].Seq })
	cmdutil.Fprintf(out, "\n")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TASK\tKEY\tPRIORITY\tSTATE\tATTEMPTS\tLAST")
	for _, t := range tasks {
		last := "-"
		if t.Result != nil {
			last = describeEnd(t.Result)
		}
		if t.State == queue.StateActive && t.Run != nil {
			last = fmt.Sprintf("running on host %s pid %d, fence %d", t.Run.Host, t.Run.PID, t.Run.Fence)
		}
		if nb := t.NotBefore(); t.State == queue.StatePending && nb.After(s.ServerTime) {
			last = "runs at " + cmdutil.Since(nb)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", t.ID, t.Key, t.Priority, t.State, t.Attempts, last)
	}
	return w.Flush()
}

// printKeys lists the keys with tasks waiting or running, most waiting
// first.
func printKeys(out io.Writer, limit int, s *queue.Snapshot) error {
	keys := map[string]bool{}
	for k := range s.Pending.ByKey {
		keys[k] = true
	}
	for k := range s.Active.ByKey {
		keys[k] = true
	}
	if len(keys) == 0 {
		return nil
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := s.Pending.ByKey[names[i]].Total(), s.Pending.ByKey[names[j]].Total()
		if a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	cmdutil.Fprintf(out, "\n")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tPENDING\tHIGH\tNORMAL\tLOW\tACTIVE")
	for i, k := range names {
		if limit > 0 && i == limit {
			fmt.Fprintf(w, "... %d more keys (--keys N, or --json for all)\n", len(names)-limit)
			break
		}
		kc := s.Pending.ByKey[k]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\n", k, kc.Total(), kc.High, kc.Normal, kc.Low, s.Active.ByKey[k])
	}
	return w.Flush()
}

func printLabels(out io.Writer, by string, s *queue.Snapshot) error {
	labels := []string{by}
	if by == "" {
		labels = labels[:0]
		for l := range s.Active.ByLabel {
			labels = append(labels, l)
		}
		sort.Strings(labels)
	}
	for _, l := range labels {
		vals := s.Active.ByLabel[l]
		cmdutil.Fprintf(out, "\n")
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintf(w, "ACTIVE BY %s\tTASKS\n", l)
		names := make([]string, 0, len(vals))
		for v := range vals {
			names = append(names, v)
		}
		sort.Strings(names)
		if len(names) == 0 {
			fmt.Fprintln(w, "(none)\t0")
		}
		for _, v := range names {
			fmt.Fprintf(w, "%s\t%d\n", v, vals[v])
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func printLocks(out io.Writer, s *queue.Snapshot) error {
	if len(s.Locks) == 0 {
		return nil
	}
	cmdutil.Fprintf(out, "\n")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tSLOT\tTASK\tHOST\tPID\tFENCE\tACQUIRED\tEXPIRES\tSTATE")
	for _, l := range s.Locks {
		task := l.Task
		if task == "" {
			task = "(not this queue's)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", l.Key, l.Slot, task, l.Host, l.PID, l.Fence,
			cmdutil.Since(l.Acquired), cmdutil.Since(l.Expires), l.State)
	}
	return w.Flush()
}
