// Package joincmd is `baton join`.
package joincmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/session"
)

// Options are join's inputs.
type Options struct {
	F     *cmdutil.Factory
	Slot  string
	Flags *cmdutil.JoinFlags
}

// NewCmdJoin returns `baton join`; runF replaces the run for tests.
func NewCmdJoin(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "join SLOT --task ID",
		Short: "Take a slot: create its session, or say who holds it",
		Long: `Take a slot for a task. Inside this host's gate for the slot (a flock, so a
second spawner on this host is refused at once), baton creates the slot's
session with a compare-and-set. A live session of another host is refused
(exit 4), always; a live one of this host is refused (exit 3) unless --force
replaces it. The session lives for --ttl after each renewal: keep it with
` + "`baton commit`" + `, end it with ` + "`baton close`" + `.

With --wait DUR, a held slot is waited for, up to DUR: joiners that wait
are served in the order they began to wait, each as the one before it
closes the slot (or its session expires), and the gate is held only while
the session is created, never while waiting. A wait that runs out is
refused as above (exit 3, or 4 for another host's session), naming the
holder. A join without --wait takes a free slot whoever waits.

The session's fence (printed, and in --json) grows with every new holder of
the slot. Pass it to commit and close (--fence N) so they are refused once
the session was replaced, and to whatever the agent writes, so a holder that
lost its slot while paused can be refused there too.`,
		Example: `  # take the slot "rendering" for task T-42, for 15 minutes between commits
  baton join rendering --task T-42 --agent claude-1

  # a shorter lease, and wait up to 2s if another spawner on this host is mid-join
  baton join rendering --task T-42 --ttl 60s --wait 2s --json

  # wait in line up to 30 minutes for whoever holds the slot to close it
  baton join rendering --task T-43 --wait 30m`,
		Args: cmdutil.OneSlot("baton join SLOT --task ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Slot = args[0]
			if runF != nil {
				return runF(o)
			}
			return joinRun(cmd.Context(), o)
		},
	}
	o.Flags = cmdutil.AddJoinFlags(cmd, session.DefaultTTL)
	return cmd
}

func joinRun(ctx context.Context, o *Options) error {
	opts, err := o.Flags.JoinOptions()
	if err != nil {
		return err
	}
	proc, err := o.Flags.Process()
	if err != nil {
		return err
	}
	m, err := o.F.Sessions(ctx)
	if err != nil {
		return err
	}
	opts = append(opts, session.WithProcess(proc), session.WithPurpose("baton join "+o.Slot))
	s, err := m.Join(ctx, o.Slot, o.Flags.Task, opts...)
	if err != nil {
		return err
	}
	return cmdutil.PrintSession(o.F, "joined", s)
}
