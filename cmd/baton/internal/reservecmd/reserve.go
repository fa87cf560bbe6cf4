// Package reservecmd is `baton reserve`: path reservations, shared or
// exclusive, all or nothing, across hosts.
package reservecmd

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/reserve"
)

// DefaultTTL is the TTL of a reservation a command line takes and leaves
// (reserve, not reserve run): it is not renewed unless the agent runs
// baton reserve renew, so it is long; a holder that dies frees it at once
// on its own host.
const DefaultTTL = 15 * time.Minute

// Options are the inputs of the reserve verbs.
type Options struct {
	F        *cmdutil.Factory
	Verb     string // reserve, renew, release, run, ls, check
	Space    string
	Patterns []string // reserve, run; the paths of check
	IDs      []string // renew, release
	Shared   bool
	Agent    string
	Task     string
	TTL      *cmdutil.DurationFlag
	Wait     *cmdutil.DurationFlag
	Grace    *cmdutil.DurationFlag
	Meta     []string
	PID      int
	Mine     bool // release: every reservation of the caller's lineage
	Stdin    bool // check: paths from standard input too
	Watch    bool
	Command  []string
}

// NewCmdReserve returns `baton reserve` and its verbs; runF replaces the
// run for tests.
func NewCmdReserve(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	newOpts := func(verb string, ttl time.Duration) *Options {
		return &Options{F: f, Verb: verb, TTL: cmdutil.NewDurationFlag("ttl", ttl),
			Wait: cmdutil.NewDurationFlag("wait", 0), Grace: cmdutil.NewDurationFlag("grace", 10*time.Second)}
	}
	run := func(cmd *cobra.Command, o *Options) error {
		if runF != nil {
			return runF(o)
		}
		return reserveRun(cmd.Context(), o)
	}
	res := newOpts("reserve", DefaultTTL)
	cmd := &cobra.Command{
		Use:   "reserve SPACE PATTERN... [--shared] [--wait DUR] [--ttl DUR] [--task ID] [--agent ID]",
		Short: "Reserve the paths an agent will edit, shared or exclusive, all or nothing",
		Long: `Reserve every PATTERN in SPACE (a repository's id, say), or none. A pattern is
a path relative to the space's root, with * (any characters but /), ? (one
character) and ** (any number of directories); reserving a directory reserves
everything beneath it. An exclusive reservation (the default) is refused if any
pattern overlaps one held by another, or one waiting for its turn; a shared one
(--shared) only if it overlaps an exclusive one. A refusal exits 3 and names
each holder: agent, task, host, pid, its pattern and for how long.

The reservation is not renewed: it lives until baton reserve release, or for
--ttl (renew it with baton reserve renew). Its holder is the process that
called baton (--pid): if that process dies, its reservations are freed at once
on this host, and when their TTL runs out elsewhere. Each reservation has a
fence, higher for every later one in the space. For a command that runs while
it holds paths, use baton reserve run.

With --wait, a refused request waits up to DUR in line: requests that overlap
are served in the order they began to wait, and the release of a holder hands
its paths to the first waiter in the same write.`,
		Example: `  baton reserve github.com/acme/app 'src/parser/**' docs/api.md --task T-12
  baton reserve github.com/acme/app docs/api.md --shared --wait 5m
  id=$(baton reserve app 'src/**' --json | jq -r .id); ...; baton reserve release app "$id"
  baton reserve ls app
  baton reserve check app src/parser/lexer.go   # exit 3 if another holds it`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return cmdutil.Usagef("want a space and at least one pattern: baton reserve SPACE PATTERN... (or a verb: renew, release, run, ls, check)")
			}
			return validSpace(args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			res.Space, res.Patterns = args[0], args[1:]
			if err := checkPatterns(res); err != nil {
				return err
			}
			return run(cmd, res)
		},
	}
	holderFlags(cmd, res, "wait up to this long in line for the paths (default: refuse at once)")
	cmd.Flags().IntVar(&res.PID, "pid", 0, "process that holds the reservation (default: the process that called baton)")

	renew := newOpts("renew", 0)
	cmd.AddCommand(&cobra.Command{
		Use:   "renew SPACE [ID...]",
		Short: "Renew reservations: their TTL starts again",
		Long: `Renew each reservation ID of SPACE (default: those in BATON_RESERVATION, which
baton reserve run sets): each lives for its TTL again. A reservation that is
gone (released, expired, its holder dead) exits 3.`,
		Example: `  baton reserve renew app r3f9c2a1b7d4e`,
		Args:    spaceAnd("baton reserve renew SPACE [ID...]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			renew.Space, renew.IDs = args[0], args[1:]
			return run(cmd, renew)
		},
	})

	rel := newOpts("release", 0)
	relCmd := &cobra.Command{
		Use:   "release SPACE [ID...] [--mine]",
		Short: "Release reservations; one already gone is a no-op",
		Long: `Release each reservation ID of SPACE (default: those in BATON_RESERVATION). With
--mine, release every reservation of SPACE held on this host by the process
that called baton or one of its ancestors: what an agent reserved, however.
Releasing a reservation that is gone already is a no-op (exit 0) and says so.`,
		Example: `  baton reserve release app r3f9c2a1b7d4e
  baton reserve release app --mine`,
		Args: spaceAnd("baton reserve release SPACE [ID...]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			rel.Space, rel.IDs = args[0], args[1:]
			if rel.Mine && len(rel.IDs) > 0 {
				return cmdutil.Usagef("--mine releases every reservation of the caller: give no ID with it")
			}
			return run(cmd, rel)
		},
	}
	relCmd.Flags().BoolVar(&rel.Mine, "mine", false, "release every reservation held by the caller or its ancestors on this host")
	cmd.AddCommand(relCmd)

	rn := newOpts("run", reserve.DefaultTTL)
	runCmd := &cobra.Command{
		Use:   "run SPACE PATTERN... [--shared] [--wait DUR] [--ttl DUR] -- CMD [ARG...]",
		Short: "Hold a reservation while a command runs",
		Long: `Reserve every PATTERN in SPACE, waiting in line for them as long as it takes (or
up to --wait; --wait 0 does not wait), start CMD, renew the reservation every
third of its TTL while CMD runs, and release it when CMD exits; baton exits with
CMD's exit code. CMD sees BATON_SPACE, BATON_RESERVATION (its id) and
BATON_FENCE; baton reserve check run by CMD (a git hook) counts the
reservation as CMD's own.

If the reservation is lost while CMD runs, CMD's process group gets SIGTERM,
then SIGKILL after --grace, and baton exits 3. If renewals keep failing, baton
stops CMD in time for it to be dead before another could be granted the paths.
SIGINT and SIGTERM sent to baton are passed to CMD; before CMD starts they
cancel the wait.`,
		Example: `  baton reserve run app 'src/parser/**' -- claude -p "refactor the parser"
  baton reserve run app docs/api.md --shared --wait 10m -- ./gen-docs.sh`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() < 2 || len(args) <= cmd.ArgsLenAtDash() {
				return cmdutil.Usagef("want SPACE, at least one pattern, then -- and the command: baton reserve run SPACE PATTERN... -- CMD [ARG...]")
			}
			return validSpace(args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			rn.Space, rn.Patterns, rn.Command = args[0], args[1:dash], args[dash:]
			if err := checkPatterns(rn); err != nil {
				return err
			}
			return run(cmd, rn)
		},
	}
	holderFlags(runCmd, rn, "wait up to this long in line for the paths (default: as long as it takes)")
	runCmd.Flags().Var(rn.Grace, "grace", "time between SIGTERM and SIGKILL when CMD must stop")
	cmd.AddCommand(runCmd)

	ls := newOpts("ls", 0)
	lsCmd := &cobra.Command{
		Use:   "ls [SPACE] [--watch]",
		Short: "List a space's reservations, held and waiting (or every space)",
		Example: `  baton reserve ls app
  baton reserve ls app --watch --json
  baton reserve ls`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cmdutil.Usagef("want at most one space: baton reserve ls [SPACE]")
			}
			if len(args) == 1 {
				return validSpace(args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				ls.Space = args[0]
			}
			if ls.Watch && ls.Space == "" {
				return cmdutil.Usagef("--watch follows one space: baton reserve ls SPACE --watch")
			}
			return run(cmd, ls)
		},
	}
	lsCmd.Flags().BoolVar(&ls.Watch, "watch", false, "print it again at every change (JSON lines with --json)")
	cmd.AddCommand(lsCmd)

	chk := newOpts("check", 0)
	chkCmd := &cobra.Command{
		Use:   "check SPACE PATH... [--stdin] [--shared]",
		Short: "Exit 3 if another holds any of the paths (for a git pre-commit hook)",
		Long: `Check that no one else holds a reservation covering any PATH (a file or a
directory of SPACE, taken literally): exit 0 if none does, exit 3 naming each
holder otherwise. Reservations held on this host by the process that called
baton or one of its ancestors, and those named in BATON_RESERVATION, are the
caller's own and never in its way: a hook run by git run by an agent passes
the agent's own paths. With --shared, only exclusive reservations are in the
way (checking for reading). With --stdin, paths are read from standard input
too, one per line or NUL-separated (git diff --cached --name-only -z).`,
		Example: `  baton reserve check app src/parser/lexer.go docs/api.md
  git diff --cached --name-only -z | baton reserve check app --stdin`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return cmdutil.Usagef("want a space and paths: baton reserve check SPACE PATH... (or --stdin)")
			}
			return validSpace(args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			chk.Space, chk.Patterns = args[0], args[1:]
			if len(chk.Patterns) == 0 && !chk.Stdin {
				return cmdutil.Usagef("want at least one path, or --stdin: baton reserve check SPACE PATH...")
			}
			return run(cmd, chk)
		},
	}
	chkCmd.Flags().BoolVar(&chk.Stdin, "stdin", false, "read paths from standard input too (lines, or NUL-separated)")
	chkCmd.Flags().BoolVar(&chk.Shared, "shared", false, "check for reading: only exclusive reservations are in the way")
	cmd.AddCommand(chkCmd)
	return cmd
}

// holderFlags are the flags of reserve and run.
func holderFlags(cmd *cobra.Command, o *Options, wait string) {
	cmd.Flags().BoolVar(&o.Shared, "shared", false, "a shared reservation: only exclusive ones are in its way")
	cmd.Flags().StringVar(&o.Task, "task", "", "the task the paths are reserved for (shown to whoever they are in the way of)")
	cmd.Flags().StringVar(&o.Agent, "agent", "", "the agent they are reserved for (env BATON_AGENT)")
	cmd.Flags().Var(o.TTL, "ttl", "the reservation's TTL, in whole seconds")
	cmd.Flags().Var(o.Wait, "wait", wait)
	cmd.Flags().StringArrayVar(&o.Meta, "meta", nil, "KEY=VALUE to record with the reservation (repeatable)")
}

func validSpace(space string) error {
	if err := reserve.ValidSpace(space); err != nil {
		return cmdutil.Usagef("%s", cmdutil.Text(err))
	}
	return nil
}

func spaceAnd(usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < 1 {
			return cmdutil.Usagef("want a space: %s", usage)
		}
		return validSpace(args[0])
	}
}

// checkPatterns checks the patterns and the TTL of reserve and run before
// they run.
func checkPatterns(o *Options) error {
	if _, err := reserve.ParsePatterns(o.Patterns); err != nil {
		return cmdutil.Usagef("%s", cmdutil.Text(err))
	}
	if err := kv.ValidateTTL(o.TTL.D); err != nil {
		return cmdutil.Usagef("--ttl %s: a TTL is a whole number of seconds, at least 1s", o.TTL.D)
	}
	if len(o.Task) > 128 || len(o.Agent) > 128 {
		return cmdutil.Usagef("--task and --agent: at most 128 bytes each")
	}
	return nil
}
