// Package root assembles the baton command line and runs it.
package root

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/cmd/baton/internal/closecmd"
	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/commitcmd"
	"github.com/batonhq/baton/cmd/baton/internal/doctorcmd"
	"github.com/batonhq/baton/cmd/baton/internal/joincmd"
	"github.com/batonhq/baton/cmd/baton/internal/leadcmd"
	"github.com/batonhq/baton/cmd/baton/internal/leadercmd"
	"github.com/batonhq/baton/cmd/baton/internal/leasecmd"
	"github.com/batonhq/baton/cmd/baton/internal/queuecmd"
	"github.com/batonhq/baton/cmd/baton/internal/ratecmd"
	"github.com/batonhq/baton/cmd/baton/internal/reservecmd"
	"github.com/batonhq/baton/cmd/baton/internal/runcmd"
	"github.com/batonhq/baton/cmd/baton/internal/semcmd"
	"github.com/batonhq/baton/cmd/baton/internal/statuscmd"
)

// NewCmdRoot returns the baton command with every verb, the full
// program's verbs (full) running in process.
func NewCmdRoot(f *cmdutil.Factory, full []FullVerb) *cobra.Command {
	return newCmdRoot(f, nil, "", full)
}

// RunStub stands in for every verb's run, for tests: it gets the verb
// ("join", "leader transfer", ...) and its options (*joincmd.Options, ...)
// once the command line is parsed and checked, and runs nothing.
type RunStub func(verb string, opts any) error

// Stubbed is a verb's runF calling stub; nil (the verb runs) when stub is.
func Stubbed[O any](stub RunStub, verb string) func(O) error {
	if stub == nil {
		return nil
	}
	return func(o O) error { return stub(verb, o) }
}

// FullVerb is a verb that links what the client program does not (the
// server, the dashboard, the MCP SDK): the full program passes its
// constructor to Main; the client program lists the verb (fullVerbs) and
// passes its command lines to the full program (ADR 0030).
type FullVerb struct {
	Name string
	// New builds the verb, its run replaced by stub unless stub is nil.
	New func(f *cmdutil.Factory, stub RunStub) *cobra.Command
}

// fullVerbs are the verbs only the full program runs, with the summary the
// client program lists them by (a test checks it is the full program's).
var fullVerbs = []struct{ name, short string }{
	{"up", "Run an embedded NATS server with JetStream and baton's buckets"},
	{"ui", "Serve the web dashboard of a cluster: leaders, sessions, leases, queues, doctor, /metrics"},
	{"mcp", "Serve baton's tools to a coding agent over MCP (stdio)"},
}

// passToFull is a full-program verb in the client program: whatever its
// arguments (help and completion included), the command line goes to the
// full program as it was given (f.Full), which parses it, checks it and
// runs it.
func passToFull(f *cmdutil.Factory, name, short string) *cobra.Command {
	cmd := &cobra.Command{
		Use:                name,
		Short:              short,
		DisableFlagParsing: true,
		// Not even the global flags are resolved here: the full program
		// resolves them, and reports what is wrong with them.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE:              func(*cobra.Command, []string) error { return full(f) },
		ValidArgsFunction: func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
			cmdutil.Fprintf(cmd.ErrOrStderr(), "%s\n", cmdutil.Message(name, full(f)))
			return nil, cobra.ShellCompDirectiveError
		},
	}
	cmd.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		cmdutil.Fprintf(cmd.ErrOrStderr(), "%s\n", cmdutil.Message(name, full(f)))
	})
	return cmd
}

// full passes the command line to the full program: it returns only an
// error.
func full(f *cmdutil.Factory) error {
	if f.Full == nil {
		return errors.New("this program does not carry the full program; run the baton that `make build` writes")
	}
	return f.Full()
}

// newCmdRoot is NewCmdRoot with every verb's run replaced by stub, unless
// stub is nil. With only naming a verb, that verb is the only one built:
// a process runs one verb, and building every other's flags is time and
// memory each process pays (help, completion and unknown verbs need them
// all, and get them). A verb of fullVerbs that full does not build passes
// its command lines to the full program.
func newCmdRoot(f *cmdutil.Factory, stub RunStub, only string, full []FullVerb) *cobra.Command {
	root := &cobra.Command{
		Use:   "baton <command>",
		Short: "Keep a fleet of coding agents from stepping on each other",
		Long: `baton keeps fleets of coding agents from stepping on each other, across hosts:
one holder per slot, one spawn at a time per host, and a record of who holds
what. Sessions live in NATS JetStream KV (a TTL per session, compare-and-set on
every ownership write); each host's check-then-spawn runs inside a flock.

Start a server with ` + "`baton up`" + `, then join, commit and close slots from any
process on any host that can reach it; run an agent's instances under
` + "`baton lead`" + ` so that exactly one of them acts.

Exit codes: 0 done, 1 unexpected failure, 2 bad input, 3 conflict (held,
gate busy, lost), 4 refused: another host's session, 5 not found,
6 server unavailable, 7 doctor found problems.`,
		Example: `  baton up &
  baton join rendering --task T-42
  baton commit rendering -m "halfway"
  baton status
  baton close rendering --result success`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		Version:           cmdutil.Version(),
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return f.Config.Resolve(f.Getenv)
		},
	}
	f.Config.Register(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		var iv *pflag.InvalidValueError
		if errors.As(err, &iv) && errors.Is(err, cmdutil.ErrUsage) {
			return iv.Unwrap() // our own value's message already names the flag and the rule
		}
		return cmdutil.Usagef("%v", err)
	})
	var leaderF func(string, *leadercmd.Options) error
	supervise := runcmd.NewCmdSupervise(f)
	if stub != nil {
		leaderF = func(sub string, o *leadercmd.Options) error { return stub("leader "+sub, o) }
		supervise.RunE = func(_ *cobra.Command, args []string) error { return stub(cmdutil.SuperviseVerb, args) }
	}
	verbs := []struct {
		name string
		cmd  func() *cobra.Command
	}{
		{"join", func() *cobra.Command { return joincmd.NewCmdJoin(f, Stubbed[*joincmd.Options](stub, "join")) }},
		{"commit", func() *cobra.Command { return commitcmd.NewCmdCommit(f, Stubbed[*commitcmd.Options](stub, "commit")) }},
		{"close", func() *cobra.Command { return closecmd.NewCmdClose(f, Stubbed[*closecmd.Options](stub, "close")) }},
		{"run", func() *cobra.Command { return runcmd.NewCmdRun(f, Stubbed[*runcmd.Options](stub, "run")) }},
		{"lead", func() *cobra.Command { return leadcmd.NewCmdLead(f, Stubbed[*leadcmd.Options](stub, "lead")) }},
		{"leader", func() *cobra.Command { return leadercmd.NewCmdLeader(f, leaderF) }},
		{"lease", func() *cobra.Command { return leasecmd.NewCmdLease(f, Stubbed[*leasecmd.Options](stub, "lease")) }},
		{"queue", func() *cobra.Command { return queuecmd.NewCmdQueue(f, queueVerbs(stub)) }},
		{"sem", func() *cobra.Command { return semcmd.NewCmdSem(f, semVerbs(stub)) }},
		{"rate", func() *cobra.Command { return ratecmd.NewCmdRate(f, rateVerbs(stub)) }},
		{"reserve", func() *cobra.Command { return reservecmd.NewCmdReserve(f, reserveVerbs(stub)) }},
		{"status", func() *cobra.Command { return statuscmd.NewCmdStatus(f, Stubbed[*statuscmd.Options](stub, "status")) }},
		{"doctor", func() *cobra.Command { return doctorcmd.NewCmdDoctor(f, Stubbed[*doctorcmd.Options](stub, "doctor")) }},
		{cmdutil.SuperviseVerb, func() *cobra.Command { return supervise }},
	}
	for _, fv := range fullVerbs {
		build := func() *cobra.Command { return passToFull(f, fv.name, fv.short) }
		for _, v := range full {
			if v.Name == fv.name {
				build = func() *cobra.Command { return v.New(f, stub) }
			}
		}
		verbs = append(verbs, struct {
			name string
			cmd  func() *cobra.Command
		}{fv.name, build})
	}
	built := false
	for _, v := range verbs {
		if v.name == only {
			root.AddCommand(v.cmd())
			built = true
		}
	}
	if !built {
		for _, v := range verbs {
			root.AddCommand(v.cmd())
		}
	}
	var mark func(c *cobra.Command)
	mark = func(c *cobra.Command) {
		markRunErrors(c)
		for _, sub := range c.Commands() {
			mark(sub)
		}
	}
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		mark(c)
		if c.ValidArgsFunction == nil && strings.Contains(c.Use, "SLOT") {
			c.ValidArgsFunction = slotCompletion(f)
		}
	}
	return root
}

// queueVerbs is the queue verbs' runF calling stub as "queue VERB"; nil
// (the verbs run) when stub is.
func queueVerbs(stub RunStub) queuecmd.Verbs {
	if stub == nil {
		return nil
	}
	return func(verb string, o any) error { return stub("queue "+verb, o) }
}

func semVerbs(stub RunStub) func(*semcmd.Options) error {
	if stub == nil {
		return nil
	}
	return func(o *semcmd.Options) error { return stub("sem "+o.Verb, o) }
}

func reserveVerbs(stub RunStub) func(*reservecmd.Options) error {
	if stub == nil {
		return nil
	}
	return func(o *reservecmd.Options) error {
		if o.Verb == "reserve" {
			return stub("reserve", o)
		}
		return stub("reserve "+o.Verb, o)
	}
}

func rateVerbs(stub RunStub) func(*ratecmd.Options) error {
	if stub == nil {
		return nil
	}
	return func(o *ratecmd.Options) error { return stub("rate "+o.Verb, o) }
}

// runError marks an error returned by a verb's own run, as opposed to one
// cobra returned while parsing the command line (which is bad input).
type runError struct{ err error }

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

func markRunErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return runError{err}
			}
			return nil
		}
	}
	if pre := c.Args; pre != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := pre(cmd, args); err != nil {
				return runError{err}
			}
			return nil
		}
	}
}

// slotCompletion completes SLOT with the slots that have sessions.
func slotCompletion(f *cmdutil.Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if err := f.Config.Resolve(f.Getenv); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		m, err := f.Sessions(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		l, err := m.List(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, s := range l.Sessions {
			if strings.HasPrefix(s.Slot, toComplete) {
				out = append(out, s.Slot+"\t"+s.Host+" "+s.TaskID)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// Main runs the command line args and returns the exit code. Errors are
// printed as one line on f.IO.ErrOut. full are the verbs of the full
// program; the client program passes none, and passes them to f.Full.
func Main(ctx context.Context, f *cmdutil.Factory, args []string, full []FullVerb) cmdutil.ExitCode {
	defer f.Close()
	only := ""
	if len(args) > 0 {
		only = args[0] // a verb, or a flag or word no verb is named
	}
	return execute(ctx, f, newCmdRoot(f, nil, only, full), args)
}

// execute runs root (newCmdRoot's) on args and maps the outcome to the exit
// code, printing an error's one line.
func execute(ctx context.Context, f *cmdutil.Factory, root *cobra.Command, args []string) cmdutil.ExitCode {
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return cmdutil.ExitOK
	}
	var re runError
	if !errors.As(err, &re) {
		err = cmdutil.Usagef("%v", err) // cobra's own parsing errors
	}
	code := cmdutil.Code(err)
	var ee *cmdutil.ExitError
	if errors.As(err, &ee) && ee.Err == nil {
		return code
	}
	if cmd == root {
		// No verb to name: an unknown one, or a bad global flag. cobra says
		// `unknown command "x" for "baton"`; the line says baton once.
		line := strings.Replace(cmdutil.Message("", err), ` for "`+root.Name()+`"`, "", 1)
		if before, after, ok := strings.Cut(line, " Did you mean this? "); ok {
			// cobra's suggestions: `  Did you mean this?\n\tjoin\n` (as spaces by now).
			names, hint, _ := strings.Cut(after, ";")
			line = strings.TrimSpace(before) + " (did you mean " + strings.Join(strings.Fields(names), " or ") + "?);" + hint
		}
		cmdutil.Fprintf(f.IO.ErrOut, "%s\n", line)
		return code
	}
	verb := strings.TrimPrefix(cmd.CommandPath(), root.Name()+" ")
	cmdutil.Fprintf(f.IO.ErrOut, "%s\n", cmdutil.Message(verb, err))
	return code
}
