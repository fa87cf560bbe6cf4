// Package leadcmd is `baton lead`: run a command only while this instance
// leads an agent key.
package leadcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/procmetrics"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
)

// Options are lead's inputs.
type Options struct {
	F            *cmdutil.Factory
	Key          string
	Command      []string
	TTL          *cmdutil.DurationFlag
	MinTerm      *cmdutil.DurationFlag
	Grace        *cmdutil.DurationFlag
	Score        int
	Capabilities []string
	Require      []string
	Metrics      string
}

// DefaultGrace is the time between SIGTERM and SIGKILL when the command
// must stop.
const DefaultGrace = 10 * time.Second

// NewCmdLead returns `baton lead`; runF replaces the run for tests.
func NewCmdLead(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{
		F: f, TTL: cmdutil.NewDurationFlag("ttl", lease.DefaultTTL),
		MinTerm: cmdutil.NewDurationFlag("min-term", 0), Grace: cmdutil.NewDurationFlag("grace", DefaultGrace),
	}
	cmd := &cobra.Command{
		Use:   "lead KEY [flags] -- CMD [ARG...]",
		Short: "Run a command only while this instance leads the agent key",
		Long: `Campaign for the agent key's leadership (the lease leader.KEY) and run CMD
only while this instance leads. Several instances of one agent run the same
baton lead; exactly one runs CMD, the others wait as followers and say who
leads.

CMD gets BATON_FENCE (larger for every new leader: pass it to what CMD
writes, so a former leader's late writes can be refused), BATON_LEADER=1,
BATON_INSTANCE and BATON_KEY. The moment leadership is lost, CMD's process
group gets SIGTERM, then SIGKILL after --grace, and this instance campaigns
again. If baton is killed, CMD dies with it, and a follower on another host
takes over within the TTL, one on this host at once. When CMD exits, baton
hands leadership to the best other candidate (or releases it) and exits with
CMD's code.

A candidate with a score higher than the leader's takes over once the leader
has led for --min-term. Candidates lacking a --require capability only follow.
` + "`baton leader KEY transfer --to INSTANCE`" + ` hands leadership over with no moment
without a leader.`,
		Example: `  # three instances of one bot; only the leader answers
  BATON_INSTANCE=bot-1 baton lead chat-bot -- ./bot --answer
  BATON_INSTANCE=bot-2 baton lead chat-bot --score 10 --min-term 1m -- ./bot --answer

  # only a candidate with a GPU may lead
  baton lead trainer --require gpu --capability gpu --ttl 5s -- ./train.sh

  # Prometheus scrapes baton_is_leader, renewal latency and failures
  baton lead chat-bot --metrics 127.0.0.1:9464 -- ./bot --answer`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return cmdutil.Usagef("want KEY, then -- and the command: baton lead KEY -- CMD [ARG...]")
			}
			return cmdutil.ValidSlot("key", args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Key, o.Command = args[0], args[1:]
			if err := procmetrics.CheckAddr(o.Metrics); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return leadRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.Var(o.TTL, "ttl", "leadership lifetime without a renewal, in whole seconds; a dead leader on another host is replaced within it")
	fs.Var(o.MinTerm, "min-term", "lead at least this long before a candidate with a higher score takes over")
	fs.Var(o.Grace, "grace", "time between SIGTERM and SIGKILL when CMD must stop")
	fs.IntVar(&o.Score, "score", 0, "this candidate's score: higher scores are preferred leaders")
	fs.StringArrayVar(&o.Capabilities, "capability", nil, "a capability this candidate has (repeatable)")
	fs.StringArrayVar(&o.Require, "require", nil, "a capability a leader must have (repeatable); candidates without it only follow")
	procmetrics.AddFlag(fs, &o.Metrics)
	return cmd
}

func leadRun(ctx context.Context, o *Options) error {
	if err := kv.ValidateTTL(o.TTL.D); err != nil {
		return cmdutil.Usagef("--ttl %s: a TTL is a whole number of seconds, at least 1s", o.TTL.D)
	}
	if err := lease.ValidateCandidate(o.F.Instance()); err != nil {
		return fmt.Errorf("%w (the id is BATON_INSTANCE's)", err) // before connecting: nothing is written
	}
	command, err := o.F.LookCommand(o.Command)
	if err != nil {
		return err
	}
	leaderKey := lease.LeaderKey(o.Key)
	pm, stopMetrics, err := procmetrics.Start(ctx, o.F, "lead", o.Metrics, func(key string) string {
		if key == leaderKey {
			return procmetrics.KindLeader
		}
		return procmetrics.KindCandidacy
	}, procmetrics.KindLeader, procmetrics.KindCandidacy)
	if err != nil {
		return err
	}
	defer stopMetrics()
	pm.Watch(o.Key)
	ls, err := o.F.Leases(ctx, "", nil, o.F.LongLived("lead", nil)...)
	if err != nil {
		return err
	}
	el, err := ls.Election(o.Key, lease.ElectTTL(o.TTL.D), lease.MinTerm(o.MinTerm.D), lease.Grace(o.Grace.D),
		lease.Score(o.Score), lease.Capabilities(o.Capabilities...), lease.Require(o.Require...))
	if err != nil {
		return err
	}
	sigs, ctx := cmdutil.NotifySignals(ctx)
	defer sigs.Stop()
	go announce(ctx, o, el, ls.Instance())

	w := &work{o: o, command: command, sigs: sigs, pm: pm}
	say := func(err error) { cmdutil.Fprintf(o.F.IO.ErrOut, "%s\n", cmdutil.Message("lead", err)) }
	err = el.Lead(ctx, w.lead,
		lease.OnCampaignRetry(func(err error, wait time.Duration) {
			// The server is away (restarting, electing a leader).
			say(fmt.Errorf("%w; campaigning again in %s", err, wait))
		}),
		lease.OnNotEligible(say), // then follow until interrupted
		lease.OnHandOver(func(to string, err error) {
			if err != nil {
				say(fmt.Errorf("handing over to %s: %w", to, err))
				return
			}
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton: lead: handed %s over to %s (the command stopped, exit %d)\n", o.Key, to, w.code)
		}))
	switch {
	case w.exited:
		// The command ended and Lead gave leadership up: err is how that went.
		pm.Lost(o.Key, procmetrics.LostExit)
		if err != nil {
			say(fmt.Errorf("the command ended but handing leadership over failed: %w", err))
		}
		if w.code != 0 {
			return cmdutil.Exit(cmdutil.ExitCode(w.code), nil)
		}
		return nil
	case w.notStarted:
		pm.Lost(o.Key, procmetrics.LostExit)
		return err
	case ctx.Err() != nil:
		return interrupted(sigs)
	default:
		return err
	}
}

// work runs the command for each term Lead gives it.
type work struct {
	o       *Options
	command *cmdutil.Command
	sigs    *cmdutil.Signals
	pm      cmdutil.ProcessMetrics

	// Of the last term, for once it ended.
	exited     bool // the command ended on its own: baton exits with code
	notStarted bool // the command could not be started
	code       int  // its exit code, or the code it was stopped with
}

// lead runs the command while the term lasts. It returns nil when the
// command ended on its own (Lead gives leadership up and returns), and its
// context's cause when the term ended and the command was stopped (Lead
// hands over if asked, and campaigns again).
func (w *work) lead(ctx context.Context, term *lease.Term) error {
	o, sigs := w.o, w.sigs
	w.exited, w.notStarted, w.code = false, false, 0
	inst := term.Record().Holder
	w.pm.Gained(o.Key)
	cmdutil.Fprintf(o.F.IO.ErrOut, "baton: lead: leading %s as %s (fence %d)\n", o.Key, inst, term.Fence())
	child, err := w.command.Start(
		"BATON_FENCE="+strconv.FormatUint(term.Fence(), 10),
		"BATON_LEADER=1",
		"BATON_INSTANCE="+inst,
		"BATON_KEY="+o.Key)
	if err != nil {
		w.notStarted = true
		return err
	}
	sigs.Running(true)
	// A signal passed to the command is a request to stop: if the term
	// ends rather than the command, baton stops instead of campaigning
	// again. One that came while the command was being stopped, never
	// delivered, does the same (Idle).
	var forwarded os.Signal
	defer func() {
		sigs.Idle()
		if forwarded != nil {
			sigs.Interrupt(forwarded)
		}
	}()
	if sig, ok := sigs.Interrupted(); ok {
		_ = child.Signal(sig) // it came as the command started: pass it on
	}
	if p, err := hostlocal.LookupProcess(child.PID()); err == nil {
		_ = term.SetChild(ctx, p) // lets a follower on this host see it die
	}
	for {
		select {
		case <-child.Done():
			w.code, _ = child.Wait()
			_, _ = child.Stop(o.Grace.D) // whatever it left running
			w.exited = true
			return nil
		case <-ctx.Done():
			cause := context.Cause(ctx)
			switch {
			case errors.Is(cause, lease.ErrYield):
				w.code, _ = child.Stop(o.Grace.D)
				w.pm.Lost(o.Key, procmetrics.LostHandover)
			case term.Err() != nil:
				grace := o.Grace.D
				var lost *lease.LostError
				if errors.As(term.Err(), &lost) && lost.How == lease.LostUnrenewed {
					grace = min(grace, o.TTL.D/4) // dead before the server could give the lease away
				}
				w.code, _ = child.Stop(grace)
				w.pm.Lost(o.Key, procmetrics.LostExpired)
				next := "campaign again"
				if forwarded != nil {
					next = "stop, as the signal passed to it (" + forwarded.String() + ") asked"
				}
				cmdutil.Fprintf(o.F.IO.ErrOut, "%s\n", cmdutil.Message("lead",
					fmt.Errorf("%s; stopped the command (exit %d) and %s", cmdutil.Text(term.Err()), w.code, next)))
			default: // baton is stopping (signals reach the command while it runs, so not by one of those)
				w.code, _ = child.Stop(o.Grace.D)
				w.pm.Lost(o.Key, procmetrics.LostExit)
			}
			return cause
		case sig := <-sigs.Forward():
			if ss, ok := sig.(syscall.Signal); ok {
				_ = child.Signal(ss)
				forwarded = sig
			}
		}
	}
}

// announce says on stderr who leads, at each change, while this instance
// follows.
func announce(ctx context.Context, o *Options, el *lease.Election, me string) {
	obs, err := el.Observe(ctx)
	if err != nil {
		return
	}
	for ob := range obs {
		switch {
		case ob.Leader == nil:
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton: lead: %s has no leader; campaigning\n", o.Key)
		case ob.Leader.Holder != me:
			l := ob.Leader
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton: lead: following: %s is led by %s on host %s (pid %d, fence %d)\n",
				o.Key, l.Holder, l.Host, l.PID, l.Fence)
		}
	}
}

func interrupted(sigs *cmdutil.Signals) error {
	if sig, ok := sigs.Interrupted(); ok {
		return cmdutil.Exit(cmdutil.ExitCode(128+int(sig)), nil)
	}
	return nil
}
