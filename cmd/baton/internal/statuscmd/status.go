// Package statuscmd is `baton status`.
package statuscmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/session"
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
		Short: "Show every session in the cluster: who holds what, for how long",
		Long: `Show every session: slot, host, pid, task, fence, age since its last renewal
and time left, both from the server's clock, and its state: live, stale (not
renewed for --stale-after, by default half its TTL) or expiring (its TTL has
run out; the server removes it within a moment). A record that does not
decode is shown as held by "?".

With --watch, print the sessions present, then every join, commit, close and
expiry as it happens, until interrupted.`,
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

// Row is one session in `status --json`.
func Row(s *session.Session, now time.Time, staleAfter time.Duration) (map[string]any, error) {
	t := s.Timing(now, staleAfter)
	age, left := timingMS(t, s.TTL)
	return cmdutil.SessionJSON(s, map[string]any{
		"age_ms": age, "ttl_left_ms": left, "state": string(t.State), "renewed_server_at": s.Written,
	})
}

// timingMS is age and time left in whole milliseconds that add up to the
// TTL, as they do exactly on the server's clock.
func timingMS(t session.Timing, ttl time.Duration) (age, left int64) {
	age = t.Age.Milliseconds()
	return age, ttl.Milliseconds() - age
}

func statusRun(ctx context.Context, o *Options) error {
	m, err := o.F.Sessions(ctx)
	if err != nil {
		return err
	}
	l, err := m.List(ctx)
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		return printJSON(o, l)
	}
	return printTable(o.F.IO.Out, l, o.StaleAfter.D)
}

func printJSON(o *Options, l *session.Listing) error {
	rows := make([]map[string]any, 0, len(l.Sessions)+len(l.Undecodable))
	for _, s := range l.Sessions {
		row, err := Row(s, l.ServerTime, o.StaleAfter.D)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	for _, u := range l.Undecodable {
		t := session.TimingAt(u.Written, u.TTL, l.ServerTime, o.StaleAfter.D)
		age, left := timingMS(t, u.TTL)
		var leftMS any = left
		if u.TTL == 0 {
			leftMS = nil // written without a TTL: it never expires
		}
		rows = append(rows, map[string]any{
			"slot": u.Slot, "revision": u.Revision, "ttl_ms": u.TTL.Milliseconds(),
			"age_ms": age, "ttl_left_ms": leftMS, "state": string(t.State),
			"undecodable": true, "error": u.Err.Error(), "renewed_server_at": u.Written,
		})
	}
	return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{
		"sessions":    rows,
		"leases":      []any{},
		"leaders":     []any{},
		"server_time": l.ServerTime,
	})
}

func printTable(out io.Writer, l *session.Listing, staleAfter time.Duration) error {
	if len(l.Sessions) == 0 && len(l.Undecodable) == 0 {
		cmdutil.Fprintf(out, "no sessions (server time %s)\n", cmdutil.Since(l.ServerTime))
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SLOT\tHOST\tPID\tTASK\tAGENT\tFENCE\tAGE\tLEFT\tSTATE")
	for _, s := range l.Sessions {
		t := s.Timing(l.ServerTime, staleAfter)
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", s.Slot, s.Host, s.PID, dash(s.TaskID), dash(s.AgentID),
			s.Fence, cmdutil.Describe(t.Age), cmdutil.Describe(t.Left), t.State)
	}
	for _, u := range l.Undecodable {
		t := session.TimingAt(u.Written, u.TTL, l.ServerTime, staleAfter)
		fmt.Fprintf(w, "%s\t?\t?\t?\t?\t%d\t%s\t%s\tundecodable\n", u.Slot, u.Revision, cmdutil.Describe(t.Age), cmdutil.Describe(t.Left))
	}
	return w.Flush()
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
	events, err := m.Watch(ctx)
	if err != nil {
		return err
	}
	for ev := range events {
		mu.Lock()
		err := printEvent(o, ev)
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

func printEvent(o *Options, ev session.Event) error {
	out := o.F.IO.Out
	if o.F.Config.JSON {
		doc := map[string]any{"event": string(ev.Kind)}
		if ev.Kind != session.EventSynced {
			doc["slot"], doc["revision"], doc["time"] = ev.Slot, ev.Revision, ev.Time
		}
		if ev.Session != nil {
			s, err := cmdutil.SessionJSON(ev.Session, nil)
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
