// Package closecmd is `baton close`.
package closecmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/session"
)

// Options are close's inputs.
type Options struct {
	F      *cmdutil.Factory
	Slot   string
	Result string
	Strict bool
	Fence  uint64
}

// Results are the values --result accepts.
var Results = []string{session.ResultSuccess, session.ResultFail, session.ResultFork}

// NewCmdClose returns `baton close`; runF replaces the run for tests.
func NewCmdClose(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "close SLOT [--result success|fail|fork]",
		Short: "End this host's session of a slot, freeing it",
		Long: `End this host's session of a slot with a compare-and-set delete; the result is
kept in the tombstone that watchers see. Closing a slot that has no session is
a no-op (exit 0, or 5 with --strict). A session of another host is refused
(exit 4).`,
		Example: `  baton close rendering --result success

  # fail loudly if there was nothing to close
  baton close rendering --strict`,
		Args: cmdutil.OneSlot("baton close SLOT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Slot = args[0]
			if !validResult(o.Result) {
				return cmdutil.Usagef("--result %q: use success, fail or fork", o.Result)
			}
			if runF != nil {
				return runF(o)
			}
			return closeRun(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Result, "result", "success", "how the work ended: success, fail or fork")
	cmd.Flags().BoolVar(&o.Strict, "strict", false, "exit 5 if the slot has no session")
	cmdutil.FenceFlag(cmd, &o.Fence)
	_ = cmd.RegisterFlagCompletionFunc("result", cobra.FixedCompletions(Results, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func validResult(r string) bool {
	for _, v := range Results {
		if r == v {
			return true
		}
	}
	return false
}

func closeRun(ctx context.Context, o *Options) error {
	fence, err := o.F.Fence(o.Slot, o.Fence)
	if err != nil {
		return err
	}
	m, err := o.F.Sessions(ctx)
	if err != nil {
		return err
	}
	s, err := m.CloseSlot(ctx, o.Slot, o.Result, session.WithFence(fence))
	var lost *session.LostError
	switch {
	case err == nil:
		return report(o, true, s.Fence, fmt.Sprintf("closed %s (fence %d, result %s)", o.Slot, s.Fence, o.Result))
	case errors.As(err, &lost) && lost.How == session.LostTaken:
		return err
	case errors.Is(err, session.ErrNotFound), errors.Is(err, session.ErrLost):
		m.RemovePIDFile(o.Slot, 0)
		if o.Strict {
			return cmdutil.Exit(cmdutil.ExitNotFound, fmt.Errorf("%w: %s: nothing to close", session.ErrNotFound, noSession(o.Slot, err)))
		}
		return report(o, false, 0, "nothing to close: "+noSession(o.Slot, err))
	default:
		return err
	}
}

// report prints the outcome: a line, or with --json
// {"slot","closed","fence","result","detail"}.
func report(o *Options, closed bool, fence uint64, detail string) error {
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{
			"slot": o.Slot, "closed": closed, "fence": fence, "result": o.Result, "detail": detail,
		})
	}
	cmdutil.Fprintf(o.F.IO.Out, "%s\n", detail)
	return nil
}

func noSession(slot string, err error) string {
	var lost *session.LostError
	if errors.As(err, &lost) {
		return lost.Error()
	}
	return "slot " + slot + " has no session"
}
