// Package runcmd is `baton run`.
package runcmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/procmetrics"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/session"
)

// Options are run's inputs.
type Options struct {
	F       *cmdutil.Factory
	Slot    string
	Command []string
	Flags   *cmdutil.JoinFlags
	Grace   *cmdutil.DurationFlag
	Metrics string
}

// NewCmdRun returns `baton run`; runF replaces the run for tests.
func NewCmdRun(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f, Grace: cmdutil.NewDurationFlag("grace", session.DefaultGrace)}
	cmd := &cobra.Command{
		Use:   "run SLOT --task ID [join flags] -- CMD [ARG...]",
		Short: "Hold a slot while a command runs: join, run, heartbeat, close",
		Long: `Join the slot, start CMD (inside this host's gate, so no other spawner on this
host can start in between), renew the session every third of its TTL while
CMD runs, and close it with CMD's result (exit 0 = success). baton exits with
CMD's exit code.

If the session is lost while CMD runs (closed, taken over or expired), CMD's
whole process group gets SIGTERM, then SIGKILL after --grace, and baton exits
3. If renewals keep failing (the server cannot be reached), baton gives the
session up in time for CMD to be dead, with at most a quarter of the TTL
between SIGTERM and SIGKILL, before the server could expire it. If baton
itself is killed, even with SIGKILL, CMD's process group is killed with it.
When CMD exits, whatever it left running in its process group is stopped
before the session is closed. In a terminal, CMD runs in the foreground, so
an interactive agent reads the terminal and gets Ctrl-C itself; SIGINT and
SIGTERM sent to baton are passed to CMD. The session is closed when CMD
exits. Before CMD starts, these signals cancel the join.

With --wait DUR, a held slot is waited for in line, up to DUR, as join
does; CMD starts once the slot is this run's.

CMD sees BATON_SLOT, BATON_FENCE and BATON_INSTANCE in its environment.
baton run prints nothing of its own but errors (--json changes nothing):
the output is CMD's. --metrics serves this process's renewal latency and
failures for Prometheus while CMD runs.`,
		Example: `  baton run rendering --task T-42 -- make render

  # a 10s TTL, and 3s for the command to stop when the slot is lost
  baton run rendering --task T-42 --ttl 10s --grace 3s -- ./agent.sh --resume`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash != 1 || len(args) < 2 {
				return cmdutil.Usagef("want SLOT, then -- and the command: baton run SLOT --task ID -- CMD [ARG...]")
			}
			return cmdutil.ValidSlot("slot", args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Slot, o.Command = args[0], args[1:]
			if err := procmetrics.CheckAddr(o.Metrics); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return runRun(cmd.Context(), o)
		},
	}
	o.Flags = cmdutil.AddJoinFlags(cmd, session.DefaultRunTTL)
	cmd.Flags().Var(o.Grace, "grace", "time between SIGTERM and SIGKILL when CMD must stop")
	cmd.Flags().Lookup("pid").Hidden = true // run records its own pid
	procmetrics.AddFlag(cmd.Flags(), &o.Metrics)
	return cmd
}

func runRun(ctx context.Context, o *Options) error {
	if o.Flags.PID != 0 {
		return cmdutil.Usagef("--pid does not apply to run: run records its own pid")
	}
	joinOpts, err := o.Flags.JoinOptions()
	if err != nil {
		return err
	}
	command, err := o.F.LookCommand(o.Command)
	if err != nil {
		return err
	}
	_, stopMetrics, err := procmetrics.Start(ctx, o.F, "run", o.Metrics, procmetrics.Kind(procmetrics.KindSession), procmetrics.KindSession)
	if err != nil {
		return err
	}
	defer stopMetrics()
	m, err := o.F.Sessions(ctx, o.F.LongLived("run", nil)...)
	if err != nil {
		return err
	}
	// From here on, SIGINT, SIGTERM and SIGHUP do not kill baton: before the
	// command starts they cancel the join, after it they are passed to it.
	sigs, ctx := cmdutil.NotifySignals(ctx)
	defer sigs.Stop()
	start := func(s *session.Session) (session.Child, error) {
		g, err := command.Start(
			"BATON_SLOT="+s.Slot,
			"BATON_FENCE="+strconv.FormatUint(s.Fence, 10),
			"BATON_INSTANCE="+s.Instance)
		sigs.Running(err == nil)
		return g, err
	}
	res, err := m.Run(ctx, o.Slot, o.Flags.Task, start,
		session.WithJoinOptions(append(joinOpts, session.WithPurpose("baton run "+o.Slot))...),
		session.WithGrace(o.Grace.D), session.WithSignals(sigs.Forward()))
	if sig, ok := sigs.Interrupted(); ok && res.Session == nil {
		return cmdutil.Exit(cmdutil.ExitCode(128+int(sig)), fmt.Errorf("interrupted by %s before the command started; nothing was started", sig))
	}
	var lost *session.LostError
	switch {
	case errors.As(err, &lost):
		return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("%w; stopped the command (exit %d)", err, res.ExitCode))
	case err != nil && res.Session == nil:
		return err // the join failed: nothing ran
	case err != nil:
		cmdutil.Fprintf(o.F.IO.ErrOut, "%s\n", cmdutil.Message("run", err))
	}
	if res.ExitCode != 0 {
		return cmdutil.Exit(cmdutil.ExitCode(res.ExitCode), nil)
	}
	return nil
}

// NewCmdSupervise returns the hidden verb that supervises a command of run
// or lead.
func NewCmdSupervise(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:                cmdutil.SuperviseVerb,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			code := hostlocal.SuperviseMain(args, f.IO.ErrOut)
			if code != 0 {
				return cmdutil.Exit(cmdutil.ExitCode(code), nil)
			}
			return nil
		},
	}
}
