package cmdutil

// What join shares with run (its flags) and with commit (the printed
// session).

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/view"
)

// JoinFlags are the flags join shares with run.
type JoinFlags struct {
	Task  string
	Agent string
	PID   int
	TTL   *DurationFlag
	Force bool
	Wait  *DurationFlag
	Meta  []string
}

// AddJoinFlags registers the join flags on cmd with a default TTL.
func AddJoinFlags(cmd *cobra.Command, defTTL time.Duration) *JoinFlags {
	fl := &JoinFlags{TTL: NewDurationFlag("ttl", defTTL), Wait: NewDurationFlag("wait", 0)}
	fs := cmd.Flags()
	fs.StringVar(&fl.Task, "task", "", "id of the task the slot is taken for (required)")
	fs.StringVar(&fl.Agent, "agent", "", "id of the agent taking the slot")
	fs.IntVar(&fl.PID, "pid", 0, "process that works the slot (default, or 0: the process that called baton)")
	fs.Var(fl.TTL, "ttl", "session lifetime without a renewal, in whole seconds")
	fs.BoolVar(&fl.Force, "force", false, "replace a live session of this host (never another host's)")
	fs.Var(fl.Wait, "wait", "wait up to this long for a held slot, in line behind those that began to wait before (and for another baton on this host that is joining it)")
	fs.StringArrayVar(&fl.Meta, "meta", nil, "KEY=VALUE to record with the session (repeatable; keys up to 128 bytes, values up to 1024, 64 pairs)")
	return fl
}

// JoinOptions turns the flags into session.JoinOptions. pid 0 means the
// parent of this process.
func (fl *JoinFlags) JoinOptions() ([]session.JoinOption, error) {
	if fl.Task == "" {
		return nil, Usagef("--task is required: the id of the task the slot is taken for")
	}
	if err := validTTL(fl.TTL.D); err != nil {
		return nil, err
	}
	meta, err := ParseMeta(fl.Meta)
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
func (fl *JoinFlags) Process() (hostlocal.Process, error) {
	pid := fl.PID
	if pid == 0 {
		pid = os.Getppid()
	} else if pid < 0 {
		return hostlocal.Process{}, Usagef("--pid %d: must be a positive process id", pid)
	}
	p, err := hostlocal.LookupProcess(pid)
	if err != nil {
		return hostlocal.Process{}, Usagef("--pid %d: no such process on this host", pid)
	}
	return p, nil
}

func validTTL(d time.Duration) error {
	if d < time.Second || d%time.Second != 0 {
		return Usagef("--ttl %s: a TTL is a whole number of seconds, at least 1s", d)
	}
	return nil
}

// PrintSession shows a session written by join or commit (verb says
// which: "joined", "committed").
func PrintSession(f *Factory, verb string, s *session.Session) error {
	if f.Config.JSON {
		doc, err := view.SessionJSON(s, nil)
		if err != nil {
			return err
		}
		return PrintJSON(f.IO.Out, doc)
	}
	Fprintf(f.IO.Out, "%s %s: fence %d, ttl %s, task %s, host %s, pid %d\n",
		verb, s.Slot, s.Fence, s.TTL, s.TaskID, s.Host, s.PID)
	return nil
}
