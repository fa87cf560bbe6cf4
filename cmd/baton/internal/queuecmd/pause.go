package queuecmd

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/queue"
)

// PauseOptions are the inputs of pause and resume.
type PauseOptions struct {
	F     *cmdutil.Factory
	Queue string
	Key   string
	Pause bool
}

func newCmdPause(f *cmdutil.Factory, runF Verbs, pause bool) *cobra.Command {
	o := &PauseOptions{F: f, Pause: pause}
	verb := "resume"
	short := "Let a paused queue's tasks (or one key's) start again"
	long := `Undo baton queue pause: the queue's tasks (with --key, that key's) start
again at the next dispatch, in their fair turn.`
	example := `  baton queue resume agents
  baton queue resume agents --key alice`
	if pause {
		verb = "pause"
		short = "Stop new starts of a queue's tasks (or of one key's); running ones go on"
		long = `Stop new starts of the queue's tasks, on every worker and host, at the next
dispatch (with --key K, of that key's tasks only; the other keys go on).
Tasks that run go on to their end, adds go on, and tasks keep their place:
baton queue resume lets them start again. status, the dashboard and the
metrics show the pause.

A queue's pause is in its config record: workers stop claiming at once. A
key's is a record of its own (<queue>.key.<key>), which the dispatcher
reads: a start it offered a moment before it saw the pause may still
happen, none after.`
		example = `  baton queue pause agents            # an incident: nothing new starts
  baton queue pause agents --key bob  # bob's tasks wait; the others run`
	}
	cmd := &cobra.Command{
		Use:     verb + " QUEUE [--key K]",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    queueArgs("QUEUE: baton queue "+verb+" QUEUE [--key K]", 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue = args[0]
			if runF != nil {
				return runF(verb, o)
			}
			return pauseRun(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Key, "key", "", "pause or resume only this key's tasks")
	return cmd
}

// PauseOutput is pause's and resume's --json document.
type PauseOutput struct {
	Queue    string `json:"queue"`
	Key      string `json:"key,omitempty"`
	Paused   bool   `json:"paused"`
	Revision uint64 `json:"revision"`
}

func pauseRun(ctx context.Context, o *PauseOptions) error {
	if o.Key != "" {
		if err := cmdutil.ValidSlot("--key", o.Key); err != nil {
			return err
		}
	}
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	out := PauseOutput{Queue: o.Queue, Key: o.Key, Paused: o.Pause}
	what := "queue " + o.Queue
	switch {
	case o.Key != "":
		set := qs.ResumeKey
		if o.Pause {
			set = qs.PauseKey
		}
		k, err := set(ctx, o.Queue, o.Key)
		if err != nil {
			return err
		}
		out.Revision = k.Revision
		what = fmt.Sprintf("key %s of queue %s", o.Key, o.Queue)
	default:
		set := qs.Resume
		if o.Pause {
			set = qs.Pause
		}
		c, err := set(ctx, o.Queue)
		if err != nil {
			return err
		}
		out.Revision = c.Revision
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, out)
	}
	switch {
	case o.Pause:
		cmdutil.Fprintf(o.F.IO.Out, "%s paused: nothing new starts; running tasks go on (baton queue resume undoes it)\n", what)
	case o.Key != "" && queuePaused(ctx, qs, o.Queue):
		cmdutil.Fprintf(o.F.IO.Out, "%s resumed; the queue itself is paused, so its tasks start once it is resumed (baton queue resume %s)\n", what, o.Queue)
	default:
		cmdutil.Fprintf(o.F.IO.Out, "%s resumed: its tasks start again\n", what)
	}
	return nil
}

// queuePaused reports whether queue q is paused (false if unknown).
func queuePaused(ctx context.Context, qs *queue.Queues, q string) bool {
	c, err := qs.Config(ctx, q)
	return err == nil && c.Paused
}

// KeyOptions are the inputs of key ls and key set.
type KeyOptions struct {
	F      *cmdutil.Factory
	Queue  string
	Key    string
	PerKey int
	Weight int
	Rate   string
	fs     interface{ Changed(string) bool }
}

func newCmdKey(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key <set|ls>",
		Short: "Settings of one key of a queue: concurrency, weight, rate (and pause)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef("unknown verb %q for baton queue key: use set or ls", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	o := &KeyOptions{F: f}
	ls := &cobra.Command{
		Use:   "ls QUEUE",
		Short: "List the keys of a queue with settings of their own",
		Long: `List the keys of the queue that have settings of their own: a per_key,
weight or rate (baton queue key set), a pause (baton queue pause QUEUE --key
K). A key not listed has the queue's settings.`,
		Example: `  baton queue key ls agents
  baton queue key ls agents --json`,
		Args: queueArgs("QUEUE: baton queue key ls QUEUE", 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue = args[0]
			if runF != nil {
				return runF("key ls", o)
			}
			return keyLsRun(cmd.Context(), o)
		},
	}
	so := &KeyOptions{F: f}
	set := &cobra.Command{
		Use:   "set QUEUE KEY [--per-key N] [--weight W] [--rate N/PERIOD]",
		Short: "Give one key its own concurrency, weight or rate",
		Long: `Give KEY settings of its own in the queue: --per-key N runs up to N of its
tasks at once (in place of the queue's per_key; 0 gives it back); --weight W
serves it W times for one turn of a key of weight 1 while both have work
(1-100; 1 is the default); --rate N/PERIOD starts at most N of its tasks in
any window of PERIOD, by the server's clock, in place of the queue's
key_rate (none gives it back). The queue's dispatcher applies a change at
once. Settings that set nothing remove the key's record.`,
		Example: `  baton queue key set agents alice --per-key 3 --weight 3 --rate 60/1m   # a paying user
  baton queue key set agents alice --per-key 0 --weight 1 --rate none      # back to the queue's`,
		Args: queueArgs("QUEUE and KEY: baton queue key set QUEUE KEY [--per-key N] [--weight W] [--rate N/PERIOD]", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			so.Queue, so.Key, so.fs = args[0], args[1], cmd.Flags()
			if runF != nil {
				return runF("key set", so)
			}
			return keySetRun(cmd.Context(), so)
		},
	}
	set.Flags().IntVar(&so.PerKey, "per-key", 0, "tasks of this key running at once (0: the queue's per_key)")
	set.Flags().IntVar(&so.Weight, "weight", 1, "times this key is served for one turn of a key of weight 1 (1-100)")
	set.Flags().StringVar(&so.Rate, "rate", "none", "at most N starts of this key in any window of PERIOD: N/PERIOD (20/1s, 60/1m), or none for the queue's key_rate")
	cmd.AddCommand(set, ls)
	return cmd
}

func keySetRun(ctx context.Context, o *KeyOptions) error {
	if err := cmdutil.ValidSlot("key", o.Key); err != nil {
		return err
	}
	if !o.fs.Changed("per-key") && !o.fs.Changed("weight") && !o.fs.Changed("rate") {
		return cmdutil.Usagef("give --per-key N, --weight W or --rate N/PERIOD (or more than one)")
	}
	if o.fs.Changed("weight") && (o.Weight < 1 || o.Weight > queue.MaxWeight) {
		return cmdutil.Usagef("--weight %d: use 1 to %d (1 is the default)", o.Weight, queue.MaxWeight)
	}
	var rate *queue.RateLimit
	if o.fs.Changed("rate") {
		var err error
		if rate, err = queue.ParseRate(o.Rate); err != nil {
			return cmdutil.Usagef("--rate: %s", cmdutil.Text(err))
		}
	}
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	k, err := qs.SetKey(ctx, o.Queue, o.Key, func(k *queue.KeyConfig) error {
		if o.fs.Changed("per-key") {
			k.PerKey = o.PerKey
		}
		if o.fs.Changed("weight") {
			k.Weight = o.Weight
			if o.Weight == 1 {
				k.Weight = 0 // the default
			}
		}
		if o.fs.Changed("rate") {
			k.Rate = rate
		}
		return nil
	})
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, keyRow(k))
	}
	cfg, err := qs.Config(ctx, o.Queue)
	if err != nil {
		return err
	}
	cmdutil.Fprintf(o.F.IO.Out, "key %s of queue %s: per_key %d, weight %d, rate %s%s\n", o.Key, o.Queue, k.Lanes(cfg), max(k.Weight, 1), rateText(k, cfg), pausedText(k.Paused))
	return nil
}

// rateText is the rate that bounds a key's starts, for people.
func rateText(k queue.KeyConfig, cfg queue.Config) string {
	switch {
	case k.Rate != nil:
		return k.Rate.String()
	case cfg.KeyRate != nil:
		return cfg.KeyRate.String() + " (the queue's key_rate)"
	}
	return "none"
}

func pausedText(p bool) string {
	if p {
		return ", paused"
	}
	return ""
}

// KeyRow is one line of key ls --json.
type KeyRow struct {
	Key       string           `json:"key"`
	Paused    bool             `json:"paused"`
	PerKey    int              `json:"per_key,omitempty"`
	Weight    int              `json:"weight"`
	Rate      *queue.RateLimit `json:"rate,omitempty"` // its own, as in its record
	UpdatedAt string           `json:"updated_at"`
	Revision  uint64           `json:"revision"`
}

func keyRow(k queue.KeyConfig) KeyRow {
	row := KeyRow{Key: k.Key, Paused: k.Paused, PerKey: k.PerKey, Weight: max(k.Weight, 1), UpdatedAt: cmdutil.Since(k.UpdatedAt), Revision: k.Revision}
	row.Rate = k.Rate
	return row
}

func keyLsRun(ctx context.Context, o *KeyOptions) error {
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	keys, bad, err := qs.Keys(ctx, o.Queue)
	if err != nil {
		return err
	}
	for _, e := range bad {
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue key ls: %s (see baton doctor)\n", cmdutil.Text(e))
	}
	if o.F.Config.JSON {
		rows := make([]KeyRow, 0, len(keys))
		for _, k := range keys {
			rows = append(rows, keyRow(k))
		}
		return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"queue": o.Queue, "keys": rows})
	}
	if len(keys) == 0 {
		cmdutil.Fprintf(o.F.IO.Out, "no key of queue %s has settings of its own\n", o.Queue)
		return nil
	}
	w := tabwriter.NewWriter(o.F.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tPER_KEY\tWEIGHT\tRATE\tPAUSED\tUPDATED")
	for _, k := range keys {
		per, rate := "queue's", "queue's"
		if k.PerKey > 0 {
			per = fmt.Sprint(k.PerKey)
		}
		if k.Rate != nil {
			rate = k.Rate.String()
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%v\t%s\n", k.Key, per, max(k.Weight, 1), rate, k.Paused, cmdutil.Since(k.UpdatedAt))
	}
	return w.Flush()
}
