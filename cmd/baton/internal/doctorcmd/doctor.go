// Package doctorcmd is `baton doctor`.
package doctorcmd

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/doctor"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
)

// Options are doctor's inputs.
type Options struct {
	F          *cmdutil.Factory
	Fix        bool
	StaleAfter *cmdutil.DurationFlag
	Replicas   int
}

// NewCmdDoctor returns `baton doctor`; runF replaces the run for tests.
func NewCmdDoctor(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f, StaleAfter: cmdutil.NewDurationFlag("stale-after", 0)}
	cmd := &cobra.Command{
		Use:   "doctor [--fix]",
		Short: "Find stale sessions and leases, dead holders, leftovers, bad settings and clock skew",
		Long: `Report problems, one per line with what to do: sessions and leases not
renewed for --stale-after (default half their TTL), sessions of this host
whose process is dead, records that do not decode, leases the server should
have expired, leaders that are no candidate any more, gate and pid files left
on this host by processes that died, gate paths baton cannot use (a symbolic
link or other non-file planted there), buckets missing or set up otherwise than
baton expects, and clock skew between this host and the server. For each
queue: tasks whose worker died (active, their lock gone), key locks not
renewed or held by a dead process of this host, tasks past the queue's
timeout, dead tasks, and capacity tokens whose lock is gone. For each path
reservation space: a record that does not decode, reservations past their
TTL still in it, reservations held by a dead process of this host, and a
record past half the server's largest message. An unreachable server is
exit 6, naming the URL; problems are exit 7.

--fix removes stale sessions and leases and stale undecodable records with a
compare-and-set on what was seen, so one renewed meanwhile survives; frees
stale key locks and orphaned tokens and puts their tasks back to pending,
likewise; rewrites a reservation space without its expired reservations and
those of dead processes of this host (compare-and-set); clears leftover
files; creates missing buckets and applies baton's bucket settings. Dead tasks, tasks past their timeout and unusable gate
paths are only reported.`,
		Example: `  baton doctor
  baton doctor --fix --stale-after 10m
  baton doctor --json | jq '.findings[].kind'`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Replicas < 0 || o.Replicas > 5 {
				return cmdutil.Usagef("--replicas %d: use 1 to 5 (0: do not check)", o.Replicas)
			}
			if runF != nil {
				return runF(o)
			}
			return doctorRun(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Fix, "fix", false, "fix what can be fixed safely")
	cmd.Flags().Var(o.StaleAfter, "stale-after", "report sessions not renewed for this long (default: half their TTL)")
	cmd.Flags().IntVar(&o.Replicas, "replicas", 0, "expect buckets on this many servers, and create missing ones so (default: do not check)")
	return cmd
}

func doctorRun(ctx context.Context, o *Options) error {
	m, err := o.F.Sessions(ctx)
	if err != nil {
		return unreachable(o, err)
	}
	ls, err := o.F.Leases(ctx, "", nil)
	if err != nil {
		return unreachable(o, err)
	}
	qs, err := queue.New(m)
	if err != nil {
		return err
	}
	ss, err := o.F.Semaphores(ctx, nil)
	if err != nil {
		return unreachable(o, err)
	}
	rl, err := o.F.Limiters(ctx)
	if err != nil {
		return unreachable(o, err)
	}
	rs, err := o.F.Spaces(ctx, nil)
	if err != nil {
		return unreachable(o, err)
	}
	c := doctor.New(m, doctor.WithStaleAfter(o.StaleAfter.D), doctor.WithReplicas(o.Replicas), doctor.WithLeases(ls), doctor.WithQueues(qs),
		doctor.WithSemaphores(ss), doctor.WithLimiters(rl), doctor.WithReservations(rs))
	r, err := c.Run(ctx)
	if err != nil {
		return unreachable(o, err)
	}
	if o.Fix {
		c.Fix(ctx, r)
	}
	if o.F.Config.JSON {
		if r.Findings == nil {
			r.Findings = []doctor.Finding{}
		}
		if err := cmdutil.PrintJSON(o.F.IO.Out, r); err != nil {
			return err
		}
	} else {
		printReport(o, r, m.Bucket().Client().URL())
	}
	if r.Remaining() > 0 {
		return cmdutil.Exit(cmdutil.ExitProblems, nil)
	}
	return nil
}

func printReport(o *Options, r *doctor.Report, url string) {
	out := o.F.IO.Out
	if len(r.Findings) == 0 {
		cmdutil.Fprintf(out, "ok: no problems found on %s\n", url)
		return
	}
	for _, f := range r.Findings {
		switch {
		case f.Fixed:
			cmdutil.Fprintf(out, "fixed %s %s: %s\n", f.Kind, f.Key, f.Detail)
		case f.FixError != "":
			cmdutil.Fprintf(out, "%s %s: %s; not fixed: %s\n", f.Kind, f.Key, f.Detail, f.FixError)
		default:
			cmdutil.Fprintf(out, "%s %s: %s; %s\n", f.Kind, f.Key, f.Detail, f.Action)
		}
	}
	if n := r.Remaining(); n > 0 {
		cmdutil.Fprintf(out, "%d problem(s)\n", n)
	}
}

// unreachable reports a server doctor could not ask: in JSON as a finding
// too, and always with exit 6 when it is the substrate's fault.
func unreachable(o *Options, err error) error {
	if cmdutil.Code(err) != cmdutil.ExitUnavailable {
		return err
	}
	if o.F.Config.JSON {
		kind := "server_unreachable"
		switch {
		case errors.Is(err, kv.ErrJetStreamDisabled):
			kind = "jetstream_off"
		case errors.Is(err, kv.ErrPermission):
			kind = "permission_denied"
		}
		_ = cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"ok": false, "findings": []map[string]any{{
			"kind": kind, "key": kv.RedactURL(o.F.ServerURL()), "detail": err.Error(), "action": cmdutil.Hint(err), "fixed": false,
		}}})
	}
	return err
}
