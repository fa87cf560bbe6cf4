// Package leadercmd is `baton leader`: who leads an agent key, and
// handing leadership over.
package leadercmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/view"
)

// Options are the inputs of the leader verbs.
type Options struct {
	F       *cmdutil.Factory
	Key     string
	Watch   bool
	Require []string
	To      string
	Wait    *cmdutil.DurationFlag
}

// NewCmdLeader returns `baton leader` and its verbs; runF replaces the run
// for tests.
func NewCmdLeader(f *cmdutil.Factory, runF func(string, *Options) error) *cobra.Command {
	show := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "leader KEY [--watch]",
		Short: "Show who leads an agent key and its candidates; hand leadership over",
		Long: `Show the leader of an agent key (the holder of leader.KEY: instance, host,
pid, fence, time left by the server's clock) and every candidate (instance,
host, pid, score, capabilities). With --watch, print every change of
leadership as it happens, including moments without a leader.`,
		Example: `  baton leader chat-bot
  baton leader chat-bot --watch --json
  baton leader transfer chat-bot --to bot-2
  baton leader resign chat-bot`,
		Args: cmdutil.OneKey("baton leader KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			show.Key = args[0]
			if runF != nil {
				return runF("show", show)
			}
			if show.Watch {
				return watchRun(cmd.Context(), show)
			}
			return showRun(cmd.Context(), show)
		},
	}
	cmd.Flags().BoolVarP(&show.Watch, "watch", "w", false, "print every change of leadership until interrupted")
	cmd.Flags().StringArrayVar(&show.Require, "require", nil, "mark candidates without this capability as not eligible (repeatable)")

	transfer := &Options{F: f, Wait: cmdutil.NewDurationFlag("wait", 10*time.Second)}
	tcmd := &cobra.Command{
		Use:   "transfer KEY --to INSTANCE",
		Short: "Hand leadership to a candidate with no moment without a leader",
		Long: `Ask the leader to hand leadership to the candidate INSTANCE, and wait (up to
--wait) until it leads. The leader stops its command, then names INSTANCE
leader in the same write that ends its own term: there is no moment without a
leader, and the new leader's fence is larger.`,
		Example: "  baton leader transfer chat-bot --to bot-2",
		Args:    cmdutil.OneKey("baton leader transfer KEY --to INSTANCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			transfer.Key = args[0]
			if transfer.To == "" {
				return cmdutil.Usagef("--to INSTANCE is required: see the candidates with `baton leader %s`", transfer.Key)
			}
			if runF != nil {
				return runF("transfer", transfer)
			}
			return transferRun(cmd.Context(), transfer)
		},
	}
	tcmd.Flags().StringVar(&transfer.To, "to", "", "the candidate to hand leadership to")
	tcmd.Flags().Var(transfer.Wait, "wait", "how long to wait for the handover")

	resign := &Options{F: f, Wait: cmdutil.NewDurationFlag("wait", 10*time.Second)}
	rcmd := &cobra.Command{
		Use:   "resign KEY",
		Short: "Make the leader step down in favour of the best other candidate",
		Long: `Ask the leader to step down: it hands leadership to the best other eligible
candidate (highest score, then longest waiting), with no moment without a
leader. With no other candidate there is nobody to step down for (exit 5).`,
		Example: "  baton leader resign chat-bot",
		Args:    cmdutil.OneKey("baton leader resign KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resign.Key = args[0]
			if runF != nil {
				return runF("resign", resign)
			}
			return resignRun(cmd.Context(), resign)
		},
	}
	rcmd.Flags().Var(resign.Wait, "wait", "how long to wait for the handover")
	rcmd.Flags().StringArrayVar(&resign.Require, "require", nil, "only hand over to candidates with this capability (repeatable)")
	cmd.AddCommand(tcmd, rcmd)
	return cmd
}

func election(ctx context.Context, o *Options, opts ...lease.ElectionOption) (*lease.Election, error) {
	ls, err := o.F.Leases(ctx, "", nil, opts2nats(o)...)
	if err != nil {
		return nil, err
	}
	return ls.Election(o.Key, append(opts, lease.Require(o.Require...))...)
}

func opts2nats(o *Options) []nats.Option {
	if o.Watch {
		return o.F.LongLived("leader", nil)
	}
	return nil
}

// View is `baton leader KEY --json`.
type View struct {
	Key        string           `json:"key"`
	Leader     map[string]any   `json:"leader"`
	Candidates []map[string]any `json:"candidates"`
	ServerTime time.Time        `json:"server_time"`
}

func showRun(ctx context.Context, o *Options) error {
	el, err := election(ctx, o)
	if err != nil {
		return err
	}
	leader, err := el.Leader(ctx)
	if err != nil && !errors.Is(err, lease.ErrNoLeader) {
		return err
	}
	cands, err := el.Candidates(ctx)
	if err != nil {
		return err
	}
	now, err := el.ServerTime(ctx)
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		v := View{Key: o.Key, Candidates: []map[string]any{}, ServerTime: now}
		if leader != nil {
			if v.Leader, err = view.LeaderJSON(leader, now); err != nil {
				return err
			}
		}
		for _, c := range cands {
			v.Candidates = append(v.Candidates, view.CandidateJSON(c))
		}
		return cmdutil.PrintJSON(o.F.IO.Out, v)
	}
	out := o.F.IO.Out
	if leader == nil {
		cmdutil.Fprintf(out, "%s: no leader\n", o.Key)
	} else {
		age, left := now.Sub(leader.Written), leader.Written.Add(leader.TTL).Sub(now)
		cmdutil.Fprintf(out, "%s: led by %s on host %s (pid %d, fence %d, since %s; renewed %s ago, %s left)\n",
			o.Key, leader.Holder, leader.Host, leader.PID, leader.Fence, cmdutil.Since(leader.AcquiredAt),
			cmdutil.Describe(age), cmdutil.Describe(left))
	}
	if len(cands) == 0 {
		cmdutil.Fprintf(out, "no candidates\n")
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CANDIDATE\tHOST\tPID\tSCORE\tCAPABILITIES\tELIGIBLE\tSINCE")
	for _, c := range cands {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%v\t%s\n", c.Instance, c.Host, c.PID, c.Score,
			dash(strings.Join(c.Capabilities, ",")), c.Eligible, cmdutil.Since(c.Since))
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
	el, err := election(ctx, o)
	if err != nil {
		return err
	}
	obs, err := el.Observe(ctx)
	if err != nil {
		return err
	}
	for ob := range obs {
		if o.F.Config.JSON {
			doc := map[string]any{"event": "none", "key": o.Key, "time": ob.Time, "revision": ob.Revision}
			if ob.Leader != nil {
				doc["event"] = "leader"
				doc["leader"], _ = view.RecordJSON(ob.Leader.Record, nil)
			} else if ob.How != "" {
				doc["how"] = ob.How
			}
			if err := cmdutil.PrintJSONLine(o.F.IO.Out, doc); err != nil {
				return err
			}
			continue
		}
		when := ob.Time.UTC().Format("15:04:05.000")
		if ob.Leader == nil {
			how := ""
			if ob.How != "" {
				how = " (" + ob.How + ")"
			}
			cmdutil.Fprintf(o.F.IO.Out, "%s %s: no leader%s\n", when, o.Key, how)
			continue
		}
		l := ob.Leader
		cmdutil.Fprintf(o.F.IO.Out, "%s %s: led by %s on host %s (pid %d, fence %d)\n", when, o.Key, l.Holder, l.Host, l.PID, l.Fence)
	}
	return nil
}

func transferRun(ctx context.Context, o *Options) error {
	el, err := election(ctx, o)
	if err != nil {
		return err
	}
	if err := el.RequestTransfer(ctx, o.To); err != nil {
		return err
	}
	return awaitHandOver(ctx, o, el, o.To)
}

func resignRun(ctx context.Context, o *Options) error {
	el, err := election(ctx, o)
	if err != nil {
		return err
	}
	to, err := el.RequestResign(ctx)
	if err != nil {
		return err
	}
	return awaitHandOver(ctx, o, el, to)
}

// awaitHandOver waits, up to --wait, for the asked transfer to to happen.
func awaitHandOver(ctx context.Context, o *Options, el *lease.Election, to string) error {
	wctx, cancel := context.WithTimeout(ctx, o.Wait.D)
	defer cancel()
	in, err := el.WaitLeader(wctx, to)
	if err != nil {
		return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("%s does not lead %s after %s: the leader may be busy stopping its command, or gone; see `baton leader %s`", to, o.Key, o.Wait.D, o.Key))
	}
	if o.F.Config.JSON {
		doc, err := view.RecordJSON(in.Record, map[string]any{"revision": in.Revision})
		if err != nil {
			return err
		}
		return cmdutil.PrintJSON(o.F.IO.Out, doc)
	}
	cmdutil.Fprintf(o.F.IO.Out, "%s now leads %s (fence %d)\n", to, o.Key, in.Fence)
	return nil
}
