// Package commitcmd is `baton commit`.
package commitcmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/session"
)

// Options are commit's inputs.
type Options struct {
	F       *cmdutil.Factory
	Slot    string
	Message string
	Fence   uint64
}

// NewCmdCommit returns `baton commit`; runF replaces the run for tests.
func NewCmdCommit(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "commit SLOT [-m MSG]",
		Short: "Renew this host's session of a slot (a heartbeat that restarts its TTL)",
		Long: `Renew this host's session of a slot: a compare-and-set update of its record
(renewal count, last message, renewed time) that restarts its TTL. A session
of another host is refused (exit 4). A session that expired, was closed or
was replaced is lost (exit 3) and is never brought back: join again.`,
		Example: `  baton commit rendering -m "tests pass"

  # in a script that must stop if its session was replaced meanwhile
  baton commit rendering --fence 42 || exit`,
		Args: cmdutil.OneSlot("baton commit SLOT [-m MSG]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Slot = args[0]
			if runF != nil {
				return runF(o)
			}
			return commitRun(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.Message, "message", "m", "", "what was done (default: keep the last message)")
	cmdutil.FenceFlag(cmd, &o.Fence)
	return cmd
}

func commitRun(ctx context.Context, o *Options) error {
	fence, err := o.F.Fence(o.Slot, o.Fence)
	if err != nil {
		return err
	}
	m, err := o.F.Sessions(ctx)
	if err != nil {
		return err
	}
	s, err := m.CommitSlot(ctx, o.Slot, o.Message, session.WithFence(fence))
	if err != nil {
		return err
	}
	return cmdutil.PrintSession(o.F, "committed", s)
}
