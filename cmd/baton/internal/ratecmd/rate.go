// Package ratecmd is `baton rate`: rate limiters shared by a fleet.
package ratecmd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/rate"
)

// Options are the inputs of the rate verbs.
type Options struct {
	F      *cmdutil.Factory
	Verb   string
	Name   string
	Limits []string
	Takes  []string
	Burst  int64
	// Parsed are the limits of create, read from Limits, Takes and Burst.
	Parsed []rate.Limit
	Cost   int64
	ID     string
	Wait   *cmdutil.DurationFlag
}

// NewCmdRate returns `baton rate` and its verbs; runF replaces the run for
// tests.
func NewCmdRate(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rate <create|take|settle|status|ls>",
		Short: "Rate limiters: at most N per period across hosts (an LLM provider's requests and tokens a minute)",
		Long: `A rate limiter admits takes while every one of its limits holds: at most N in
any window of its period (plus a burst), counting each take's cost (--limit) or
each take as one (--takes), judged by the server's clock, across every host. Its
limits are fixed when it is created. A take that does not fit is refused with
how long until it would (exit 3); --wait waits that long and tries again.`,
		Example: `  baton rate create openai --takes 50/1m --limit 40000/1m
  baton rate take openai --cost 1200 --id req-7 --wait 30s   # reserve an estimate of 1200 tokens
  baton rate settle openai --id req-7 --cost 950             # the real count, once known
  baton rate status openai`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef("unknown verb %q for baton rate: use create, take, settle, status or ls", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	run := func(cmd *cobra.Command, o *Options) error {
		if runF != nil {
			return runF(o)
		}
		return rateRun(cmd.Context(), o)
	}
	oneName := func(usage string) cobra.PositionalArgs {
		return func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.Usagef("want one limiter name: %s", usage)
			}
			return rate.ValidName(args[0])
		}
	}
	newOpts := func(verb string) *Options {
		return &Options{F: f, Verb: verb, Wait: cmdutil.NewDurationFlag("wait", 0)}
	}

	cr := newOpts("create")
	crCmd := &cobra.Command{
		Use:   "create NAME --limit N/PERIOD[+BURST] [--takes N/PERIOD[+BURST]]... [--burst B]",
		Short: "Make a rate limiter (its limits never change)",
		Long: `Make limiter NAME. --limit N/PERIOD counts each take's cost (tokens, bytes),
--takes N/PERIOD counts takes; give as many of each as the thing limited has
(50 requests and 40,000 tokens a minute). A limit admits at most N plus its
burst in any window of PERIOD (1ms to 24h); +BURST after a limit, or --burst for
every limit without one. Creating one that exists with the same limits changes
nothing; with others it is refused (exit 3).`,
		Example: "  baton rate create openai --takes 50/1m --limit 40000/1m\n  baton rate create ci-api --takes 100/1s+10",
		Args:    oneName("baton rate create NAME --limit N/PERIOD"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cr.Name = args[0]
			var err error
			if cr.Parsed, err = parseLimits(cr); err != nil {
				return err
			}
			return run(cmd, cr)
		},
	}
	crCmd.Flags().StringArrayVar(&cr.Limits, "limit", nil, "N/PERIOD[+BURST]: at most N of cost in any window of PERIOD (repeatable)")
	crCmd.Flags().StringArrayVar(&cr.Takes, "takes", nil, "N/PERIOD[+BURST]: at most N takes in any window of PERIOD (repeatable)")
	crCmd.Flags().Int64Var(&cr.Burst, "burst", 0, "more than N a window may admit, for limits that do not give their own")
	cmd.AddCommand(crCmd)

	tk := newOpts("take")
	tkCmd := &cobra.Command{
		Use:   "take NAME [--cost C] [--id ID] [--wait DUR]",
		Short: "Admit a take if it fits every limit now (exit 3 and when to retry if not)",
		Long: `Admit a take of cost C (default 1). It prints the take's id (--id, or a new
one), for settle. A take that does not fit is exit 3, saying how long until it
would (--json: retry_after_ms); with --wait it sleeps that long and tries again,
up to DUR.`,
		Example: "  baton rate take openai --cost 1200 --id req-7\n  baton rate take ci-api --wait 10s --json",
		Args:    oneName("baton rate take NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tk.Name = args[0]
			if tk.Cost < 0 {
				return cmdutil.Usagef("--cost %d is negative", tk.Cost)
			}
			if tk.ID != "" && len(tk.ID) > 128 {
				return cmdutil.Usagef("--id: at most 128 characters")
			}
			return run(cmd, tk)
		},
	}
	tkCmd.Flags().Int64Var(&tk.Cost, "cost", 1, "what the take costs, in what the limits count")
	tkCmd.Flags().StringVar(&tk.ID, "id", "", "the take's id, for settle (default: a new one)")
	tkCmd.Flags().Var(tk.Wait, "wait", "wait up to this long for the take to fit")
	cmd.AddCommand(tkCmd)

	st := newOpts("settle")
	stCmd := &cobra.Command{
		Use:     "settle NAME --id ID --cost C",
		Short:   "Set an admitted take's cost once the real one is known",
		Example: "  baton rate settle openai --id req-7 --cost 950",
		Args:    oneName("baton rate settle NAME --id ID --cost C"),
		RunE: func(cmd *cobra.Command, args []string) error {
			st.Name = args[0]
			if st.ID == "" || !cmd.Flags().Changed("cost") {
				return cmdutil.Usagef("--id and --cost are required: the take's id, as take printed it, and its real cost")
			}
			if st.Cost < 0 {
				return cmdutil.Usagef("--cost %d is negative", st.Cost)
			}
			return run(cmd, st)
		},
	}
	stCmd.Flags().StringVar(&st.ID, "id", "", "the take's id")
	stCmd.Flags().Int64Var(&st.Cost, "cost", 0, "its real cost")
	cmd.AddCommand(stCmd)

	ss := newOpts("status")
	cmd.AddCommand(&cobra.Command{
		Use:     "status NAME",
		Short:   "Show a limiter's limits, what each has used now and the takes in them",
		Example: "  baton rate status openai --json",
		Args:    oneName("baton rate status NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ss.Name = args[0]
			return run(cmd, ss)
		},
	})
	ls := newOpts("ls")
	cmd.AddCommand(&cobra.Command{
		Use:     "ls",
		Short:   "List the rate limiters with what each limit has used now",
		Example: "  baton rate ls",
		Args:    cmdutil.NoArgs,
		RunE:    func(cmd *cobra.Command, args []string) error { return run(cmd, ls) },
	})
	return cmd
}

// parseLimit reads N/PERIOD[+BURST].
func parseLimit(flag, s string, burst int64, per string) (rate.Limit, error) {
	spec, b, hasBurst := strings.Cut(s, "+")
	n, p, ok := strings.Cut(spec, "/")
	max, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || max < 1 {
		return rate.Limit{}, cmdutil.Usagef("%s %q: want N/PERIOD[+BURST], e.g. 50/1m or 100/1s+10", flag, s)
	}
	period, err := time.ParseDuration(p)
	if err != nil || period <= 0 {
		return rate.Limit{}, cmdutil.Usagef("%s %q: the period after / is a duration, e.g. 1s, 1m, 1h", flag, s)
	}
	if hasBurst {
		if burst, err = strconv.ParseInt(b, 10, 64); err != nil || burst < 0 {
			return rate.Limit{}, cmdutil.Usagef("%s %q: the burst after + is a whole number", flag, s)
		}
	}
	return rate.Limit{Max: max, Period: rate.Duration(period), Burst: burst, Per: per}, nil
}

func rateRun(ctx context.Context, o *Options) error {
	ls, err := o.F.Limiters(ctx)
	if err != nil {
		return err
	}
	switch o.Verb {
	case "create":
		return createRun(ctx, o, ls)
	case "take":
		return takeRun(ctx, o, ls)
	case "settle":
		if err := ls.Settle(ctx, o.Name, o.ID, o.Cost); err != nil {
			return err
		}
		if o.F.Config.JSON {
			return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"name": o.Name, "id": o.ID, "cost": o.Cost, "settled": true})
		}
		cmdutil.Fprintf(o.F.IO.Out, "settled take %s of %s at cost %d\n", o.ID, o.Name, o.Cost)
		return nil
	case "status":
		st, err := ls.Status(ctx, o.Name)
		if err != nil {
			return err
		}
		if o.F.Config.JSON {
			return cmdutil.PrintJSON(o.F.IO.Out, st)
		}
		printStatus(o, st)
		return nil
	default:
		all, bad, err := ls.List(ctx)
		if err != nil {
			return err
		}
		if o.F.Config.JSON {
			if all == nil {
				all = []rate.Status{}
			}
			return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"limiters": all, "undecodable": bad})
		}
		if len(all) == 0 && bad == 0 {
			cmdutil.Fprintf(o.F.IO.Out, "no rate limiters; make one with baton rate create NAME --limit N/PERIOD\n")
			return nil
		}
		t := cmdutil.NewTable("NAME", "LIMIT", "USED", "LEFT")
		for _, st := range all {
			for _, u := range st.Uses {
				t.Row(st.Name, rate.Describe([]rate.Limit{u.Limit}), strconv.FormatInt(u.Used, 10), strconv.FormatInt(u.Left, 10))
			}
		}
		_, err = t.WriteTo(o.F.IO.Out)
		if bad > 0 {
			cmdutil.Fprintf(o.F.IO.ErrOut, "%d limiter record(s) do not decode; run baton doctor\n", bad)
		}
		return err
	}
}

// parseLimits reads create's limits.
func parseLimits(o *Options) ([]rate.Limit, error) {
	if o.Burst < 0 {
		return nil, cmdutil.Usagef("--burst %d is negative", o.Burst)
	}
	var lim []rate.Limit
	for _, s := range o.Limits {
		l, err := parseLimit("--limit", s, o.Burst, rate.PerCost)
		if err != nil {
			return nil, err
		}
		lim = append(lim, l)
	}
	for _, s := range o.Takes {
		l, err := parseLimit("--takes", s, o.Burst, rate.PerTake)
		if err != nil {
			return nil, err
		}
		lim = append(lim, l)
	}
	if len(lim) == 0 {
		return nil, cmdutil.Usagef("give at least one --limit N/PERIOD or --takes N/PERIOD")
	}
	for _, l := range lim {
		if time.Duration(l.Period) < time.Millisecond || time.Duration(l.Period) > 24*time.Hour {
			return nil, cmdutil.Usagef("period %s: from 1ms to 24h", time.Duration(l.Period))
		}
	}
	return lim, nil
}

func createRun(ctx context.Context, o *Options, ls *rate.Limiters) error {
	lim := o.Parsed
	rec, err := ls.Create(ctx, o.Name, lim)
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"name": rec.Name, "limits": rec.Limits, "created_at": rec.CreatedAt})
	}
	cmdutil.Fprintf(o.F.IO.Out, "rate limiter %s: %s\n", rec.Name, rate.Describe(rec.Limits))
	return nil
}

func takeRun(ctx context.Context, o *Options, ls *rate.Limiters) error {
	opts := []rate.TakeOption{rate.WithCost(o.Cost)}
	if o.ID != "" {
		opts = append(opts, rate.WithID(o.ID))
	}
	var a *rate.Admission
	var err error
	if o.Wait.D > 0 {
		wctx, cancel := context.WithTimeout(ctx, o.Wait.D)
		a, err = ls.TakeWait(wctx, o.Name, opts...)
		cancel()
	} else {
		a, err = ls.Take(ctx, o.Name, opts...)
	}
	var le *rate.LimitedError
	if errors.As(err, &le) {
		if o.F.Config.JSON {
			if perr := cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"name": o.Name, "admitted": false, "cost": o.Cost,
				"retry_after_ms": le.RetryAfter.Milliseconds(), "retry_after": le.RetryAfter.Round(time.Millisecond).String()}); perr != nil {
				return perr
			}
		}
		return err
	}
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"name": a.Name, "admitted": true, "id": a.ID, "cost": a.Cost, "revision": a.Revision})
	}
	cmdutil.Fprintf(o.F.IO.Out, "%s\n", a.ID)
	return nil
}

func printStatus(o *Options, st rate.Status) {
	out := o.F.IO.Out
	cmdutil.Fprintf(out, "%s: %d take(s) in its longest period (server time %s)\n", st.Name, len(st.Takes), st.ServerTime.Format(time.RFC3339))
	t := cmdutil.NewTable("LIMIT", "USED", "LEFT")
	for _, u := range st.Uses {
		t.Row(rate.Describe([]rate.Limit{u.Limit}), strconv.FormatInt(u.Used, 10), strconv.FormatInt(u.Left, 10))
	}
	_, _ = t.WriteTo(out)
}
