package queuecmd

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/view"
)

// CreateOptions are create's and config's inputs.
type CreateOptions struct {
	F      *cmdutil.Factory
	Queue  string
	Config *ConfigFlags
}

func newCmdCreate(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &CreateOptions{F: f}
	cmd := &cobra.Command{
		Use:   "create QUEUE [--max-active N] [--per-key N] [--max-attempts N] [--timeout DUR] [--ttl DUR] [--slot-prefix P] [--backoff DUR] [--retention DUR] [--rate N/PERIOD] [--key-rate N/PERIOD]",
		Short: "Create a queue with its settings (each defaults as --help says)",
		Long: `Create a queue. Its settings are one record in the cluster that every worker
reads, so two workers never disagree about capacity; change them later with
baton queue config. Creating a queue that exists with the same settings is a
no-op (exit 0); with other settings it is refused (exit 3).

Queue names are ` + queue.NameRule + `. The queues bucket is created if the
server lacks it.`,
		Example: `  baton queue create agents --max-active 8 --timeout 2h
  baton queue create builds --per-key 2 --slot-prefix build. --ttl 10s`,
		Args: queueArgs("exactly one QUEUE: baton queue create QUEUE [flags]", 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue = args[0]
			if runF != nil {
				return runF("create", o)
			}
			return createRun(cmd.Context(), o)
		},
	}
	o.Config = addConfigFlags(cmd)
	return cmd
}

func createRun(ctx context.Context, o *CreateOptions) error {
	cfg := queue.DefaultConfig(o.Queue)
	if err := o.Config.apply(&cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	if err := qs.Ensure(ctx, 0); err != nil && !errors.Is(err, kv.ErrBucketMismatch) {
		return err
	}
	got, created, err := qs.Create(ctx, cfg)
	if err != nil {
		return err
	}
	if !created {
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue create: queue %s exists with these settings; nothing changed\n", o.Queue)
	}
	return printCfg(o.F, got)
}

func printCfg(f *cmdutil.Factory, c queue.Config) error {
	if f.Config.JSON {
		m, err := view.QueueConfigJSON(c)
		if err != nil {
			return err
		}
		return cmdutil.PrintJSON(f.IO.Out, m)
	}
	printConfig(f.IO.Out, c)
	return nil
}

func newCmdConfig(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &CreateOptions{F: f}
	cmd := &cobra.Command{
		Use:   "config QUEUE [--max-active N] [--per-key N] [--max-attempts N] [--timeout DUR] [--ttl DUR] [--slot-prefix P] [--backoff DUR] [--retention DUR] [--rate N/PERIOD|none] [--key-rate N/PERIOD|none]",
		Short: "Show a queue's settings, or change the ones given",
		Long: `Without settings, print the queue's config. With some, change just those (a
compare-and-set on the record read, so two changes at once do not undo each
other) and print the result. Workers apply a change as soon as their watch
shows it: lowering --max-active stops new tasks from starting until fewer
run, it does not stop running ones; --ttl and --timeout apply to the tasks
that start after the change.

--rate N/PERIOD allows at most N starts in any window of PERIOD, by the
server's clock, across every worker and host: tasks over it stay pending
and start when the window has room. The queue's dispatcher admits each
start by a compare-and-set on one record (<queue>.rate) before it is
claimed (adr/0052); --rate none removes the limit. --key-rate N/PERIOD
does the same for each key on its own (a customer's requests a minute),
unless the key has a rate of its own (baton queue key set --rate), each
key's starts on a record of its own (adr/0055).`,
		Example: `  baton queue config agents
  baton queue config agents --max-active 16 --max-attempts 5
  baton queue config agents --rate 50/1m   # a provider's 50 requests a minute`,
		Args: queueArgs("exactly one QUEUE: baton queue config QUEUE [flags]", 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue = args[0]
			if runF != nil {
				return runF("config", o)
			}
			return configRun(cmd.Context(), o)
		},
	}
	o.Config = addConfigFlags(cmd)
	return cmd
}

func configRun(ctx context.Context, o *CreateOptions) error {
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	var cfg queue.Config
	if o.Config.changed() {
		cfg, err = qs.SetConfig(ctx, o.Queue, func(c *queue.Config) error { return o.Config.apply(c) })
	} else {
		cfg, err = qs.Config(ctx, o.Queue)
	}
	if err != nil {
		return err
	}
	return printCfg(o.F, cfg)
}
