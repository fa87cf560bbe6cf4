// Package leasecmd is `baton lease`: plain leases for scripts.
package leasecmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/view"
)

// Options are the inputs of the lease verbs.
type Options struct {
	F        *cmdutil.Factory
	Verb     string
	Key      string
	Instance string
	TTL      *cmdutil.DurationFlag
	Wait     *cmdutil.DurationFlag
	Meta     []string
	PID      int
}

// holder resolves --pid (default: the parent of this process).
func holder(pid int) (hostlocal.Process, error) {
	if pid == 0 {
		pid = os.Getppid()
	}
	p, err := hostlocal.LookupProcess(pid)
	if err != nil {
		return hostlocal.Process{}, cmdutil.Usagef("--pid %d: no such process on this host", pid)
	}
	return p, nil
}

// NewCmdLease returns `baton lease` and its verbs; runF replaces the run
// for tests.
func NewCmdLease(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease <acquire|renew|release|get> KEY",
		Short: "Plain TTL leases for scripts: acquire, renew, release, get",
		Long: `A lease is held by one instance at a time until it is released or its TTL
runs out without a renewal. The holder is an instance id: --instance ID (env
BATON_INSTANCE); acquire prints it when it makes one up. Renew and release are
compare-and-sets refused to anyone but the holder. The fence printed on acquire
is larger for every later holder: pass it to what the holder writes. Keys
starting with leader. and candidate. belong to elections (baton lead).`,
		Example: `  id=$(baton lease acquire nightly-backup --ttl 60s --json | jq -r .holder)
  baton lease renew nightly-backup --instance "$id"
  baton lease release nightly-backup --instance "$id"`,
		// Alone it shows its help; with anything but one of its verbs it is
		// bad input (cobra would show the help and exit 0).
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef("unknown verb %q for baton lease: use acquire, renew, release or get", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	for _, v := range []struct{ name, short, example string }{
		{"acquire", "Take a lease if it is free (or wait up to --wait for it)", "  baton lease acquire deploy --ttl 30s --wait 10s"},
		{"renew", "Renew a lease this instance holds (restarts its TTL)", "  baton lease renew deploy --instance $BATON_INSTANCE"},
		{"release", "Release a lease this instance holds; nothing held is a no-op", "  baton lease release deploy --instance $BATON_INSTANCE"},
		{"get", "Show a lease", "  baton lease get deploy --json"},
	} {
		o := &Options{F: f, Verb: v.name, TTL: cmdutil.NewDurationFlag("ttl", lease.DefaultTTL), Wait: cmdutil.NewDurationFlag("wait", 0)}
		sub := &cobra.Command{
			Use:     v.name + " KEY",
			Short:   v.short,
			Example: v.example,
			Args:    cmdutil.OneKey("baton lease " + v.name + " KEY"),
			RunE: func(cmd *cobra.Command, args []string) error {
				o.Key = args[0]
				if runF != nil {
					return runF(o)
				}
				return leaseRun(cmd.Context(), o)
			},
		}
		if v.name != "get" {
			sub.Flags().StringVar(&o.Instance, "instance", "", "the holder's instance id (env BATON_INSTANCE)")
		}
		if v.name == "acquire" {
			sub.Flags().Var(o.TTL, "ttl", "lease lifetime without a renewal, in whole seconds")
			sub.Flags().Var(o.Wait, "wait", "wait up to this long for the lease to be free")
			sub.Flags().StringArrayVar(&o.Meta, "meta", nil, "KEY=VALUE to record with the lease (repeatable)")
			sub.Flags().IntVar(&o.PID, "pid", 0, "process that works under the lease (default: the process that called baton)")
		}
		cmd.AddCommand(sub)
	}
	return cmd
}

func leaseRun(ctx context.Context, o *Options) error {
	instance := o.Instance
	if instance == "" {
		instance = o.F.Getenv("BATON_INSTANCE")
	}
	if instance == "" && (o.Verb == "renew" || o.Verb == "release") {
		return cmdutil.Usagef("--instance is required (or BATON_INSTANCE): the holder's instance id, as acquire printed it")
	}
	var opts []lease.Option
	if o.Verb == "acquire" {
		// The holder is the process that works under the lease: by default
		// the one that called baton, not this short-lived command.
		proc, err := holder(o.PID)
		if err != nil {
			return err
		}
		opts = append(opts, lease.WithProcess(proc))
	}
	ls, err := o.F.Leases(ctx, instance, opts)
	if err != nil {
		return err
	}
	switch o.Verb {
	case "acquire":
		return acquire(ctx, o, ls)
	case "renew":
		l, err := ls.Resume(ctx, o.Key)
		if err != nil {
			return err
		}
		if err := l.Renew(ctx); err != nil {
			return err
		}
		return printLease(o, "renewed", l.Record(), l.Revision())
	case "release":
		l, err := ls.Resume(ctx, o.Key)
		if errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrLost) {
			return report(o, "nothing to release: "+cmdutil.Text(err))
		}
		if err != nil {
			return err
		}
		if err := l.Release(ctx); err != nil {
			return err
		}
		return report(o, fmt.Sprintf("released %s (fence %d)", o.Key, l.Fence()))
	default:
		in, err := ls.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		return printLease(o, "", in.Record, in.Revision)
	}
}

func acquire(ctx context.Context, o *Options, ls *lease.Leases) error {
	meta, err := cmdutil.ParseMeta(o.Meta)
	if err != nil {
		return err
	}
	if err := kv.ValidateTTL(o.TTL.D); err != nil {
		return cmdutil.Usagef("--ttl %s: a TTL is a whole number of seconds, at least 1s", o.TTL.D)
	}
	opts := []lease.AcquireOption{lease.WithTTL(o.TTL.D), lease.WithMeta(meta), lease.WithoutKeepAlive()}
	var l *lease.Lease
	if o.Wait.D > 0 {
		wctx, cancel := context.WithTimeout(ctx, o.Wait.D)
		defer cancel()
		l, err = ls.Acquire(wctx, o.Key, opts...)
	} else {
		l, err = ls.TryAcquire(ctx, o.Key, opts...)
	}
	if err != nil {
		return err
	}
	return printLease(o, "acquired", l.Record(), l.Revision())
}

// printLease shows a lease: a line with how to renew it, or with --json the
// record plus revision.
func printLease(o *Options, verb string, r lease.Record, rev uint64) error {
	if o.F.Config.JSON {
		doc, err := view.RecordJSON(r, map[string]any{"revision": rev})
		if err != nil {
			return err
		}
		return cmdutil.PrintJSON(o.F.IO.Out, doc)
	}
	if verb == "" {
		cmdutil.Fprintf(o.F.IO.Out, "%s: held by instance %s (host %s, pid %d), fence %d, ttl %s, renewed %s\n",
			r.Key, r.Holder, r.Host, r.PID, r.Fence, time.Duration(r.TTL), cmdutil.Since(r.RenewedAt))
		return nil
	}
	cmdutil.Fprintf(o.F.IO.Out, "%s %s: fence %d, ttl %s, instance %s\n", verb, r.Key, r.Fence, time.Duration(r.TTL), r.Holder)
	if verb == "acquired" {
		cmdutil.Fprintf(o.F.IO.ErrOut, "renew with: baton lease renew %s --instance %s\n", r.Key, r.Holder)
	}
	return nil
}

func report(o *Options, detail string) error {
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"key": o.Key, "detail": detail})
	}
	cmdutil.Fprintf(o.F.IO.Out, "%s\n", detail)
	return nil
}
