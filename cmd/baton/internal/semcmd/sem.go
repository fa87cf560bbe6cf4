// Package semcmd is `baton sem`: counting semaphores shared by a fleet.
package semcmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/sem"
)

// Options are the inputs of the sem verbs.
type Options struct {
	F       *cmdutil.Factory
	Verb    string
	Name    string
	Max     int
	PerHost bool
	Weight  int
	TTL     *cmdutil.DurationFlag
	Wait    *cmdutil.DurationFlag
	Grace   *cmdutil.DurationFlag
	Meta    []string
	PID     int
	Permit  string
	Watch   bool
	Command []string
}

// NewCmdSem returns `baton sem` and its verbs; runF replaces the run for
// tests.
func NewCmdSem(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sem <create|acquire|release|run|status|ls>",
		Short: "Counting semaphores: cap how many hold a shared thing at once, across hosts",
		Long: `A semaphore has max units, fixed when it is created. A permit holds one or
more of them (--weight) until it is released or its TTL runs out without a
renewal; never more than max units are held at once, across every host. Each
permit gets an index from 0 to max-1 that no other live permit has (derive a
port or a database from it) and a fence that is higher for every later permit.
A permit whose process died is freed at once on its own host, and when its TTL
ends elsewhere. A waiter (--wait) is woken when a unit is freed.`,
		Example: `  baton sem create test-db --max 3
  baton sem run test-db -- ./run-suite.sh          # BATON_SEM_INDEX is 0, 1 or 2
  permit=$(baton sem acquire gpu --weight 2 --wait 10m --json | jq -r .permit)
  baton sem release gpu --permit "$permit"
  baton sem status test-db`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef("unknown verb %q for baton sem: use create, acquire, release, run, status or ls", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	newOpts := func(verb string) *Options {
		return &Options{F: f, Verb: verb, TTL: cmdutil.NewDurationFlag("ttl", sem.DefaultTTL),
			Wait: cmdutil.NewDurationFlag("wait", 0), Grace: cmdutil.NewDurationFlag("grace", 10*time.Second)}
	}
	run := func(cmd *cobra.Command, o *Options) error {
		if runF != nil {
			return runF(o)
		}
		return semRun(cmd.Context(), o)
	}
	oneName := func(usage string) cobra.PositionalArgs {
		return func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.Usagef("want one semaphore name: %s", usage)
			}
			return sem.ValidName(args[0])
		}
	}

	create := newOpts("create")
	createCmd := &cobra.Command{
		Use:   "create NAME --max N [--per-host]",
		Short: "Make a semaphore of N units (its max never changes)",
		Long: `Make semaphore NAME with N units. Creating one that exists with the same max
changes nothing; with another max it is refused (exit 3): callers never count
against different limits.

With --per-host each host has N units of its own, for work bound by one
machine (its cores, its memory): permits, indices 0..N-1, waiting in line and
the instant reclaim of a dead holder's units are as for any semaphore, but
per host. sem status shows this host's; sem ls every host's.`,
		Example: `  baton sem create test-db --max 3
  baton sem create heavy-tests --max 2 --per-host   # two at a time on each machine`,
		Args: oneName("baton sem create NAME --max N"),
		RunE: func(cmd *cobra.Command, args []string) error {
			create.Name = args[0]
			if !cmd.Flags().Changed("max") {
				return cmdutil.Usagef("--max is required: how many units the semaphore has")
			}
			if create.Max < 1 || create.Max > sem.MaxUnits {
				return cmdutil.Usagef("--max %d: a semaphore has 1 to %d units", create.Max, sem.MaxUnits)
			}
			return run(cmd, create)
		},
	}
	createCmd.Flags().IntVar(&create.Max, "max", 0, fmt.Sprintf("how many units (1-%d)", sem.MaxUnits))
	createCmd.Flags().BoolVar(&create.PerHost, "per-host", false, "each host has --max units of its own")
	cmd.AddCommand(createCmd)

	acq := newOpts("acquire")
	acqCmd := &cobra.Command{
		Use:   "acquire NAME [--weight W] [--wait DUR] [--ttl DUR]",
		Short: "Take a permit (prints its id, index and fence); it lives for --ttl",
		Long: `Take a permit of W units of semaphore NAME, waiting up to --wait for enough
to be free (without --wait, a full semaphore is exit 3 at once). The permit is
not renewed: it lives until baton sem release, or for --ttl. Its holder is the
process that called baton (--pid): if that process dies, the permit is freed
at once on this host. For a command that runs while it holds a permit, use
baton sem run.`,
		Example: `  baton sem acquire test-db --ttl 10m
  baton sem acquire gpu --weight 2 --wait 5m --json`,
		Args: oneName("baton sem acquire NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			acq.Name = args[0]
			if err := validPermit(acq); err != nil {
				return err
			}
			return run(cmd, acq)
		},
	}
	acqCmd.Flags().IntVar(&acq.Weight, "weight", 1, "how many units the permit holds")
	acqCmd.Flags().Var(acq.TTL, "ttl", "the permit's lifetime, in whole seconds")
	acqCmd.Flags().Var(acq.Wait, "wait", "wait up to this long for enough units to be free")
	acqCmd.Flags().StringArrayVar(&acq.Meta, "meta", nil, "KEY=VALUE to record with the permit (repeatable)")
	acqCmd.Flags().IntVar(&acq.PID, "pid", 0, "process that holds the permit (default: the process that called baton)")
	cmd.AddCommand(acqCmd)

	rel := newOpts("release")
	relCmd := &cobra.Command{
		Use:     "release NAME --permit ID",
		Short:   "Release a permit; one already gone is a no-op",
		Example: `  baton sem release test-db --permit "$BATON_PERMIT"`,
		Args:    oneName("baton sem release NAME --permit ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			rel.Name = args[0]
			return run(cmd, rel)
		},
	}
	relCmd.Flags().StringVar(&rel.Permit, "permit", "", "the permit's id, as acquire printed it (env BATON_PERMIT)")
	cmd.AddCommand(relCmd)

	rn := newOpts("run")
	runCmd := &cobra.Command{
		Use:   "run NAME [--weight W] [--wait DUR] [--ttl DUR] -- CMD [ARG...]",
		Short: "Hold a permit while a command runs",
		Long: `Take a permit, waiting for it as long as it takes (or up to --wait; --wait 0
does not wait), start CMD, renew the permit every third of its TTL while CMD
runs, and release it when CMD exits; baton exits with CMD's exit code. CMD sees BATON_SEM, BATON_SEM_INDEX, BATON_SEM_UNITS (its
units, comma-separated), BATON_PERMIT and BATON_FENCE.

If the permit is lost while CMD runs (its units expired or were taken), CMD's
process group gets SIGTERM, then SIGKILL after --grace, and baton exits 3. If
renewals keep failing, baton stops CMD in time for it to be dead before the
server could free the units. SIGINT and SIGTERM sent to baton are passed to
CMD; before CMD starts they cancel the wait.`,
		Example: `  baton sem run test-db -- go test ./...
  baton sem run build-slots --weight 2 --wait 30m -- make -j2
  baton sem run test-db --wait 0 -- ./suite.sh   # exit 3 at once if it is full`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return cmdutil.Usagef("want NAME, then -- and the command: baton sem run NAME -- CMD [ARG...]")
			}
			return sem.ValidName(args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			rn.Name, rn.Command = args[0], args[1:]
			if err := validPermit(rn); err != nil {
				return err
			}
			return run(cmd, rn)
		},
	}
	runCmd.Flags().IntVar(&rn.Weight, "weight", 1, "how many units the permit holds")
	runCmd.Flags().Var(rn.TTL, "ttl", "the permit's TTL, in whole seconds (renewed every third of it)")
	runCmd.Flags().Var(rn.Wait, "wait", "wait up to this long for enough units to be free (default: as long as it takes)")
	runCmd.Flags().Var(rn.Grace, "grace", "time between SIGTERM and SIGKILL when CMD must stop")
	runCmd.Flags().StringArrayVar(&rn.Meta, "meta", nil, "KEY=VALUE to record with the permit (repeatable)")
	cmd.AddCommand(runCmd)

	st := newOpts("status")
	stCmd := &cobra.Command{
		Use:   "status NAME [--watch]",
		Short: "Show a semaphore: units held and free, and each permit",
		Example: `  baton sem status test-db
  baton sem status test-db --watch --json`,
		Args: oneName("baton sem status NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			st.Name = args[0]
			return run(cmd, st)
		},
	}
	stCmd.Flags().BoolVar(&st.Watch, "watch", false, "print it again at every change (JSON lines with --json)")
	cmd.AddCommand(stCmd)

	ls := newOpts("ls")
	cmd.AddCommand(&cobra.Command{
		Use:     "ls",
		Short:   "List the semaphores with their units held and free",
		Example: "  baton sem ls --json",
		Args:    cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, ls)
		},
	})
	return cmd
}

// validPermit checks the permit flags of acquire and run before they run.
func validPermit(o *Options) error {
	if o.Weight < 1 {
		return cmdutil.Usagef("--weight %d: a permit holds at least 1 unit", o.Weight)
	}
	if err := kv.ValidateTTL(o.TTL.D); err != nil {
		return cmdutil.Usagef("--ttl %s: a TTL is a whole number of seconds, at least 1s", o.TTL.D)
	}
	return nil
}
