// Package joincmd is `baton join`.
package joincmd

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/web/view"
)

// Options are join's inputs.
type Options struct {
	F     *cmdutil.Factory
	Slot  string
	Flags *Flags
}

// Flags are the flags join shares with run.
type Flags struct {
	Task  string
	Agent string
	PID   int
	TTL   *cmdutil.DurationFlag
	Force bool
	Wait  *cmdutil.DurationFlag
	Meta  []string
}

// AddFlags registers the join flags on cmd with a default TTL.
func AddFlags(cmd *cobra.Command, defTTL time.Duration) *Flags {
	fl := &Flags{TTL: cmdutil.NewDurationFlag("ttl", defTTL), Wait: cmdutil.NewDurationFlag("wait", 0)}
	fs := cmd.Flags()
	fs.StringVar(&fl.Task, "task", "", "id of the task the slot is taken for (required)")
	fs.StringVar(&fl.Agent, "agent", "", "id of the agent taking the slot")
	fs.IntVar(&fl.PID, "pid", 0, "process that works the slot (default, or 0: the process that called baton)")
	fs.Var(fl.TTL, "ttl", "session lifetime without a renewal, in whole seconds")
	fs.BoolVar(&fl.Force, "force", false, "replace a live session of this host (never another host's)")
	fs.Var(fl.Wait, "wait", "wait up to this long for another baton on this host that is joining the same slot")
	fs.StringArrayVar(&fl.Meta, "meta", nil, "KEY=VALUE to record with the session (repeatable; keys up to 128 bytes, values up to 1024, 64 pairs)")
	return fl
}

// JoinOptions turns the flags into session.JoinOptions. pid 0 means the
// parent of this process.
func (fl *Flags) JoinOptions() ([]session.JoinOption, error) {
	if fl.Task == "" {
		return nil, cmdutil.Usagef("--task is required: the id of the task the slot is taken for")
	}
	if err := validTTL(fl.TTL.D); err != nil {
		return nil, err
	}
	meta, err := cmdutil.ParseMeta(fl.Meta)
	if err != nil {
		return nil, err
	}
	opts := []session.JoinOption{
		session.WithAgent(fl.Agent), session.WithTTL(fl.TTL.D), session.WithForce(fl.Force),
		session.WithWait(fl.Wait.D), session.WithMeta(meta),
	}
	return opts, nil
}

// Process resolves --pid (default: the parent of this process, the agent
// that called baton) with its start token.
func (fl *Flags) Process() (hostlocal.Process, error) {
	pid := fl.PID
	if pid == 0 {
		pid = os.Getppid()
	} else if pid < 0 {
		return hostlocal.Process{}, cmdutil.Usagef("--pid %d: must be a positive process id", pid)
	}
	p, err := hostlocal.LookupProcess(pid)
	if err != nil {
		return hostlocal.Process{}, cmdutil.Usagef("--pid %d: no such process on this host", pid)
	}
	return p, nil
}

func validTTL(d time.Duration) error {
	if d < time.Second || d%time.Second != 0 {
		return cmdutil.Usagef("--ttl %s: a TTL is a whole number of seconds, at least 1s", d)
	}
	return nil
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

The session's fence (printed, and in --json) grows with every new holder of
the slot. Pass it to commit and close (--fence N) so they are refused once
the session was replaced, and to whatever the agent writes, so a holder that
lost its slot while paused can be refused there too.`,
		Example: `  # take the slot "rendering" for task T-42, for 15 minutes between commits
  baton join rendering --task T-42 --agent claude-1

  # a shorter lease, and wait up to 2s if another spawner on this host is mid-join
  baton join rendering --task T-42 --ttl 60s --wait 2s --json`,
		Args: cmdutil.OneSlot("baton join SLOT --task ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Slot = args[0]
			if runF != nil {
				return runF(o)
			}
			return joinRun(cmd.Context(), o)
		},
	}
	o.Flags = AddFlags(cmd, session.DefaultTTL)
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
	return Print(o.F, "joined", s)
}

// Print shows a session written by join or commit.
func Print(f *cmdutil.Factory, verb string, s *session.Session) error {
	if f.Config.JSON {
		doc, err := view.SessionJSON(s, nil)
		if err != nil {
			return err
		}
		return cmdutil.PrintJSON(f.IO.Out, doc)
	}
	cmdutil.Fprintf(f.IO.Out, "%s %s: fence %d, ttl %s, task %s, host %s, pid %d\n",
		verb, s.Slot, s.Fence, s.TTL, s.TaskID, s.Host, s.PID)
	return nil
}
