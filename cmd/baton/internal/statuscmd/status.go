// Package statuscmd is `baton status`.
package statuscmd

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/view"
)

// Options are status's inputs.
type Options struct {
	F          *cmdutil.Factory
	Watch      bool
	StaleAfter *cmdutil.DurationFlag
}

// NewCmdStatus returns `baton status`; runF replaces the run for tests.
func NewCmdStatus(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f, StaleAfter: cmdutil.NewDurationFlag("stale-after", 0)}
	cmd := &cobra.Command{
		Use:   "status [--watch]",
		Short: "Show every session, leader, lease and queue in the cluster: who holds what, for how long",
		Long: `Show every session (slot, host, pid, task, fence), every leader of an agent
key (with its number of candidates) and every plain lease, each with its age
since its last renewal and time left, both from the server's clock, and its
state: live, stale (not renewed for --stale-after, by default half its TTL)
or expiring (its TTL has run out; the server removes it within a moment). A
record that does not decode is shown as held by "?". Each queue gets one line
of counts (baton queue status QUEUE shows one in full).

With --watch, print the sessions and leases present, then every join,
commit, close and expiry of a session, and every acquire, release and expiry
of a lease or leadership (renewals of leases are left out), until
interrupted. JSON lines of leases have events lease_present, lease_acquire,
lease_release and lease_expire.`,
		Example: `  baton status
  baton status --json | jq '.sessions[] | select(.state != "live")'
  baton status --watch --json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(o)
			}
			if o.Watch {
				return watchRun(cmd.Context(), o)
			}
			return statusRun(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "stream changes until interrupted")
	cmd.Flags().Var(o.StaleAfter, "stale-after", "call a session stale when not renewed for this long (default: half its TTL)")
	return cmd
}

func statusRun(ctx context.Context, o *Options) error {
	defer o.F.ListingGC()()
	m, err := o.F.Sessions(ctx)
	if err != nil {
		return err
	}
	ls, err := o.F.Leases(ctx, "", nil)
	if err != nil {
		return err
	}
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	// The three listings at once: the leases and queues are read while the
	// sessions arrive, not after.
	var (
		l                 *session.Listing
		leases            *lease.Listing
		queues            []queue.Summary
		queuesNotShown    error
		lerr, lserr, qerr error
		wg                sync.WaitGroup
	)
	wg.Go(func() { l, lerr = m.List(ctx) })
	wg.Go(func() { leases, lserr = ls.List(ctx) })
	wg.Go(func() { queues, queuesNotShown, qerr = queueSummaries(ctx, qs) })
	wg.Wait()
	if err := cmp.Or(lerr, lserr, qerr); err != nil {
		return err
	}
	if queuesNotShown != nil {
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton: status: queues not shown: %s\n", cmdutil.Text(queuesNotShown))
	}
	v := view.SplitLeases(leases)
	// Buffered: a table's writer pads each cell with writes of its own,
	// which unbuffered would be a system call each (millions for 100k
	// sessions).
	out := bufio.NewWriterSize(o.F.IO.Out, 64<<10)
	if o.F.Config.JSON {
		if err := printJSON(out, l, v, queues, o.StaleAfter.D); err != nil {
			return err
		}
		return out.Flush()
	}
	if err := printTables(out, l, v, o.StaleAfter.D, len(queues) > 0); err != nil {
		return err
	}
	if err := printQueues(out, queues, len(l.Sessions)+len(l.Undecodable)+len(v.Plain)+len(v.Leaders)+len(v.Undecodable) > 0); err != nil {
		return err
	}
	return out.Flush()
}

// queueSummaries reads one line per queue. A server without the queues
// bucket has none; a user refused it is to be told so (notShown), and
// status goes on with what it may see.
func queueSummaries(ctx context.Context, qs *queue.Queues) (sums []queue.Summary, notShown, err error) {
	sums, err = qs.Summaries(ctx)
	if errors.Is(err, kv.ErrPermission) {
		return nil, err, nil
	}
	return sums, nil, err
}

// printQueues writes one line per queue.
func printQueues(out io.Writer, sums []queue.Summary, after bool) error {
	if len(sums) == 0 {
		return nil
	}
	if after {
		cmdutil.Fprintf(out, "\n")
	}
	for _, s := range sums {
		active := fmt.Sprintf("%d active", s.Active)
		if s.MaxActive > 0 {
			active = fmt.Sprintf("%d/%d active", s.Active, s.MaxActive)
		}
		cmdutil.Fprintf(out, "queue %s: %d pending, %s, %d done, %d failed, %d dead, %d cancelled\n",
			s.Queue, s.Pending, active, s.Done, s.Failed, s.Dead, s.Cancelled)
	}
	return nil
}

func printJSON(out io.Writer, l *session.Listing, v view.Leases, queues []queue.Summary, staleAfter time.Duration) error {
	doc, err := view.StatusJSON(l, v, queues, staleAfter)
	if err != nil {
		return err
	}
	return cmdutil.PrintJSON(out, doc)
}

func printTables(out io.Writer, l *session.Listing, v view.Leases, staleAfter time.Duration, queues bool) error {
	if len(l.Sessions) == 0 && len(l.Undecodable) == 0 && len(v.Plain) == 0 && len(v.Leaders) == 0 && len(v.Undecodable) == 0 {
		if !queues {
			cmdutil.Fprintf(out, "no sessions, leases, leaders or queues (server time %s)\n", cmdutil.Since(l.ServerTime))
		}
		return nil
	}
	sep := func() {} // a blank line between tables
	if len(l.Sessions) > 0 || len(l.Undecodable) > 0 {
		sep = func() { cmdutil.Fprintf(out, "\n") }
		t := cmdutil.NewTable("SLOT", "HOST", "PID", "TASK", "AGENT", "FENCE", "AGE", "LEFT", "STATE")
		t.Grow(len(l.Sessions) + len(l.Undecodable))
		for _, s := range l.Sessions {
			// Cell by cell: nothing is made per session but its cells'
			// bytes.
			tm := s.Timing(l.ServerTime, staleAfter)
			t.Add(s.Slot)
			t.Add(s.Host)
			t.AddInt(int64(s.PID))
			t.Add(dash(s.TaskID))
			t.Add(dash(s.AgentID))
			t.AddUint(s.Fence)
			t.AddDuration(tm.Age)
			t.AddDuration(tm.Left)
			t.Add(string(tm.State))
		}
		for _, u := range l.Undecodable {
			tm := session.TimingAt(u.Written, u.TTL, l.ServerTime, staleAfter)
			t.Row(u.Slot, "?", "?", "?", "?", strconv.FormatUint(u.Revision, 10), cmdutil.Describe(tm.Age), cmdutil.Describe(tm.Left), "undecodable")
		}
		if _, err := t.WriteTo(out); err != nil {
			return err
		}
	}
	if len(v.Leaders) > 0 {
		sep()
		sep = func() { cmdutil.Fprintf(out, "\n") }
		t := cmdutil.NewTable("AGENT KEY", "LEADER", "HOST", "PID", "FENCE", "CANDIDATES", "AGE", "LEFT", "STATE")
		for _, in := range v.Leaders {
			agent := strings.TrimPrefix(in.Key, "leader.")
			tm := session.TimingAt(in.Written, in.TTL, v.ServerTime, staleAfter)
			t.Row(agent, in.Holder, in.Host, strconv.Itoa(in.PID), strconv.FormatUint(in.Fence, 10),
				strconv.Itoa(len(v.Candidates[agent])), cmdutil.Describe(tm.Age), cmdutil.Describe(tm.Left), string(tm.State))
		}
		if _, err := t.WriteTo(out); err != nil {
			return err
		}
	}
	if len(v.Plain) > 0 || len(v.Undecodable) > 0 {
		sep()
		t := cmdutil.NewTable("LEASE", "HOLDER", "HOST", "PID", "FENCE", "AGE", "LEFT", "STATE")
		for _, in := range v.Plain {
			tm := session.TimingAt(in.Written, in.TTL, v.ServerTime, staleAfter)
			t.Row(in.Key, in.Holder, in.Host, strconv.Itoa(in.PID), strconv.FormatUint(in.Fence, 10),
				cmdutil.Describe(tm.Age), cmdutil.Describe(tm.Left), string(tm.State))
		}
		for _, u := range v.Undecodable {
			tm := session.TimingAt(u.Written, u.TTL, v.ServerTime, staleAfter)
			t.Row(u.Key, "?", "?", "?", strconv.FormatUint(u.Revision, 10), cmdutil.Describe(tm.Age), cmdutil.Describe(tm.Left), "undecodable")
		}
		_, err := t.WriteTo(out)
		return err
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func watchRun(ctx context.Context, o *Options) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var mu sync.Mutex // events and connection notices share stdout
	notify := func(connected bool) {
		if !o.F.Config.JSON {
			return // the notice on stderr says it
		}
		kind := "disconnected"
		if connected {
			kind = "reconnected"
		}
		mu.Lock()
		defer mu.Unlock()
		_ = cmdutil.PrintJSONLine(o.F.IO.Out, map[string]any{"event": kind, "time": time.Now().UTC()})
	}
	m, err := o.F.Sessions(ctx, o.F.LongLived("status", notify)...)
	if err != nil {
		return err
	}
	ls, err := o.F.Leases(ctx, "", nil)
	if err != nil {
		return err
	}
	events, err := m.Watch(ctx)
	if err != nil {
		return err
	}
	leases, err := ls.Watch(ctx)
	if err != nil {
		return err
	}
	// One "synced" once both have said what is present.
	pending := 2
	synced := func() error {
		if pending--; pending > 0 {
			return nil
		}
		return printEvent(o, session.Event{Kind: session.EventSynced})
	}
	for events != nil || leases != nil {
		var print func() error
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				events = nil
			case ev.Kind == session.EventSynced:
				print = synced
			default:
				print = func() error { return printEvent(o, ev) }
			}
		case ev, ok := <-leases:
			switch {
			case !ok:
				leases = nil
			case ev.Kind == lease.EventSynced:
				print = synced
			default:
				print = func() error { return printLeaseEvent(o, ev) }
			}
		}
		if print == nil {
			continue
		}
		mu.Lock()
		err := print()
		mu.Unlock()
		if err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil // interrupted: a normal end
	}
	return fmt.Errorf("the watch ended: the connection to the server was lost")
}

// printLeaseEvent shows acquires, releases and expiries of plain leases
// and leaders (renewals and candidacies are routine and left out).
func printLeaseEvent(o *Options, ev lease.Event) error {
	if ev.Kind == lease.EventRenew || strings.HasPrefix(ev.Key, "candidate.") {
		return nil
	}
	if o.F.Config.JSON {
		doc := map[string]any{"event": "lease_" + string(ev.Kind), "key": ev.Key, "revision": ev.Revision, "time": ev.Time}
		if ev.Lease != nil {
			rec, err := view.RecordJSON(ev.Lease.Record, nil)
			if err != nil {
				return err
			}
			doc["lease"] = rec
		}
		if ev.Err != nil {
			doc["undecodable"], doc["error"] = true, ev.Err.Error()
		}
		return cmdutil.PrintJSONLine(o.F.IO.Out, doc)
	}
	line := fmt.Sprintf("%s %-7s lease %s", ev.Time.UTC().Format("15:04:05.000"), ev.Kind, ev.Key)
	if l := ev.Lease; l != nil {
		line += fmt.Sprintf(" holder=%s host=%s pid=%d fence=%d", l.Holder, l.Host, l.PID, l.Fence)
	}
	cmdutil.Fprintf(o.F.IO.Out, "%s\n", line)
	return nil
}

func printEvent(o *Options, ev session.Event) error {
	out := o.F.IO.Out
	if o.F.Config.JSON {
		doc := map[string]any{"event": string(ev.Kind)}
		if ev.Kind != session.EventSynced {
			doc["slot"], doc["revision"], doc["time"] = ev.Slot, ev.Revision, ev.Time
		}
		if ev.Session != nil {
			s, err := view.SessionJSON(ev.Session, nil)
			if err != nil {
				return err
			}
			doc["session"] = s
		}
		if ev.Err != nil {
			doc["undecodable"], doc["error"] = true, ev.Err.Error()
		}
		return cmdutil.PrintJSONLine(out, doc)
	}
	if ev.Kind == session.EventSynced {
		cmdutil.Fprintf(out, "-- watching for changes (Ctrl-C to stop)\n")
		return nil
	}
	line := fmt.Sprintf("%s %-7s %s", ev.Time.UTC().Format("15:04:05.000"), ev.Kind, ev.Slot)
	if s := ev.Session; s != nil {
		line += fmt.Sprintf(" host=%s pid=%d task=%s fence=%d", s.Host, s.PID, s.TaskID, s.Fence)
		if ev.Kind == session.EventCommit && s.Message != "" {
			line += fmt.Sprintf(" message=%q", s.Message)
		}
		if ev.Kind == session.EventClose && s.Result != "" {
			line += " result=" + s.Result
		}
	}
	if ev.Err != nil {
		line += " (record does not decode)"
	}
	cmdutil.Fprintf(out, "%s\n", line)
	return nil
}
