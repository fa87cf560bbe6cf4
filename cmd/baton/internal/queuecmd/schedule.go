package queuecmd

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/queue"
)

// ScheduleOptions are the inputs of the schedule verbs.
type ScheduleOptions struct {
	F           *cmdutil.Factory
	Verb        string
	Queue       string
	Name        string
	Cron        string
	Every       *cmdutil.DurationFlag
	Timezone    string
	Key         string
	Payload     string
	PayloadFile string
	Priority    string
	Labels      []string
	CatchUp     string
	payloadSet  bool
}

func newCmdSchedule(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule <add|ls|rm|pause|resume>",
		Short: "Add a task to a queue on a cron schedule or every period",
		Long: `A schedule adds a task to its queue at each tick: of a cron expression (five
fields, or @hourly, @daily and the like, in --timezone, UTC by default), or
of a period (--every 10m: the multiples of it since the Unix epoch). The
queue's dispatcher (one of its workers: baton queue work) adds the ticks'
tasks; each has the id NAME-<tick as 20060102T150405Z>, created by
compare-and-set, so a tick is added once however many workers and hosts
run, and a crash in the middle of a tick adds it no second time.

A tick late by up to twice the queue's TTL (a dispatcher's failover) is
still added. Ticks missed for longer, while no worker ran, are added once
(--catch-up one, the default: the latest of them) or not at all
(--catch-up none). A tick older than the queue's retention (24h unless
set) is never added: its task, had it been added, could be gone, and the
tick would run twice.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef("unknown verb %q for baton queue schedule: use add, ls, rm, pause or resume", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	add := &ScheduleOptions{F: f, Verb: "add", Every: cmdutil.NewDurationFlag("every", 0)}
	addCmd := &cobra.Command{
		Use:   "add QUEUE NAME (--cron EXPR [--timezone TZ] | --every DUR) --key K [--payload STR | --payload-file F] [--priority P] [--label k=v]... [--catch-up one|none]",
		Short: "Add a schedule: a task for key K at each tick",
		Long: `Add schedule NAME to the queue: at each tick a task for --key K with the
payload, priority and labels given. Adding a schedule that exists with the
same settings changes nothing (exit 0); with other settings it is refused
(exit 3): remove it first. The schedule's tasks carry their tick as their
run-at time and the schedule's name (queue get shows both).`,
		Example: `  baton queue schedule add reports nightly --cron "0 2 * * *" --timezone Europe/Berlin --key reports --payload "build the report"
  baton queue schedule add agents poll-ci --every 5m --key ci --catch-up none`,
		Args: queueArgs("QUEUE and NAME: baton queue schedule add QUEUE NAME --cron EXPR | --every DUR --key K", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			add.Queue, add.Name = args[0], args[1]
			add.payloadSet = cmd.Flags().Changed("payload")
			if runF != nil {
				return runF("schedule add", add)
			}
			return scheduleRun(cmd.Context(), add)
		},
	}
	fs := addCmd.Flags()
	fs.StringVar(&add.Cron, "cron", "", `a cron expression: "MIN HOUR DOM MON DOW" ("0 2 * * *"), or @hourly, @daily, @weekly, @monthly`)
	fs.Var(add.Every, "every", "a period instead (whole seconds, at least 1s): ticks at its multiples since the Unix epoch")
	fs.StringVar(&add.Timezone, "timezone", "", "the cron expression's timezone (an IANA name: Europe/Berlin); default UTC")
	fs.StringVar(&add.Key, "key", "", "the key of each tick's task; required")
	fs.StringVar(&add.Payload, "payload", "", "each task's payload, as text")
	fs.StringVar(&add.PayloadFile, "payload-file", "", "read each task's payload from FILE")
	fs.StringVar(&add.Priority, "priority", string(queue.Normal), "high, normal or low")
	fs.StringArrayVar(&add.Labels, "label", nil, "KEY=VALUE on each task (repeatable)")
	fs.StringVar(&add.CatchUp, "catch-up", queue.CatchUpOne, "ticks missed while no worker ran: one (add the latest once) or none")

	named := func(verb, short, long string) *cobra.Command {
		o := &ScheduleOptions{F: f, Verb: verb}
		return &cobra.Command{
			Use:   verb + " QUEUE NAME",
			Short: short,
			Long:  long,
			Args:  queueArgs("QUEUE and NAME: baton queue schedule "+verb+" QUEUE NAME", 1),
			RunE: func(cmd *cobra.Command, args []string) error {
				o.Queue, o.Name = args[0], args[1]
				if runF != nil {
					return runF("schedule "+verb, o)
				}
				return scheduleRun(cmd.Context(), o)
			},
		}
	}
	ls := &ScheduleOptions{F: f, Verb: "ls"}
	lsCmd := &cobra.Command{
		Use:   "ls QUEUE",
		Short: "List a queue's schedules with their next tick",
		Example: `  baton queue schedule ls reports
  baton queue schedule ls reports --json`,
		Args: queueArgs("QUEUE: baton queue schedule ls QUEUE", 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ls.Queue = args[0]
			if runF != nil {
				return runF("schedule ls", ls)
			}
			return scheduleRun(cmd.Context(), ls)
		},
	}
	cmd.AddCommand(addCmd, lsCmd,
		named("rm", "Remove a schedule (the tasks it added stay)", "Remove the schedule: no tick after it adds a task. The tasks it added stay."),
		named("pause", "Stop a schedule from adding tasks", "Stop the schedule from adding tasks until baton queue schedule resume; the ticks of the pause are not added later."),
		named("resume", "Let a paused schedule add tasks again, from its next tick", "Let the schedule add tasks again, from its next tick on."),
	)
	return cmd
}

// ScheduleRow is a schedule as the verbs print it with --json.
type ScheduleRow struct {
	Queue    string            `json:"queue"`
	Name     string            `json:"name"`
	Cron     string            `json:"cron,omitempty"`
	Every    string            `json:"every,omitempty"`
	Timezone string            `json:"timezone,omitempty"`
	Key      string            `json:"key"`
	Priority string            `json:"priority"`
	Labels   map[string]string `json:"labels,omitempty"`
	CatchUp  string            `json:"catch_up"`
	Paused   bool              `json:"paused"`
	LastTick *time.Time        `json:"last_tick,omitempty"`
	NextTick *time.Time        `json:"next_tick,omitempty"`
	Revision uint64            `json:"revision"`
	Created  *bool             `json:"created,omitempty"`
}

func scheduleRow(s *queue.Schedule, now time.Time) ScheduleRow {
	r := ScheduleRow{Queue: s.Queue, Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, Key: s.Key, Priority: string(s.Priority),
		Labels: s.Labels, CatchUp: s.CatchUp, Paused: s.Paused, Revision: s.Revision}
	if s.Every > 0 {
		r.Every = time.Duration(s.Every).String()
	}
	if !s.LastTick.IsZero() {
		t := s.LastTick
		r.LastTick = &t
	}
	if !now.IsZero() {
		if t := s.NextTick(now); !t.IsZero() {
			r.NextTick = &t
		}
	}
	return r
}

func scheduleRun(ctx context.Context, o *ScheduleOptions) error {
	if o.Name != "" {
		if err := cmdutil.ValidSlot("schedule name", o.Name); err != nil {
			return err
		}
	}
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	out := o.F.IO.Out
	switch o.Verb {
	case "add":
		s, err := o.schedule()
		if err != nil {
			return err
		}
		got, created, err := qs.AddSchedule(ctx, s)
		if err != nil {
			return err
		}
		if !created {
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue schedule add: schedule %s of queue %s is there already with these settings; nothing changed\n", o.Name, o.Queue)
		}
		if o.F.Config.JSON {
			r := scheduleRow(got, time.Now())
			r.Created = &created
			return cmdutil.PrintJSON(out, r)
		}
		r := scheduleRow(got, time.Now())
		cmdutil.Fprintf(out, "schedule %s of queue %s: a task for key %s %s; first tick %s\n", got.Name, got.Queue, got.Key, when(got), cmdutil.Since(deref(r.NextTick)))
		return nil
	case "ls":
		list, bad, err := qs.Schedules(ctx, o.Queue)
		if err != nil {
			return err
		}
		for _, e := range bad {
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue schedule ls: %s (see baton doctor)\n", cmdutil.Text(e))
		}
		now, err := qs.Bucket().ServerTime(ctx)
		if err != nil {
			return err
		}
		if o.F.Config.JSON {
			rows := make([]ScheduleRow, 0, len(list))
			for _, s := range list {
				rows = append(rows, scheduleRow(s, now))
			}
			return cmdutil.PrintJSON(out, map[string]any{"queue": o.Queue, "server_time": now, "schedules": rows})
		}
		if len(list) == 0 {
			cmdutil.Fprintf(out, "queue %s has no schedules\n", o.Queue)
			return nil
		}
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tWHEN\tKEY\tCATCH-UP\tLAST TICK\tNEXT TICK")
		for _, s := range list {
			r := scheduleRow(s, now)
			next := cmdutil.Since(deref(r.NextTick))
			if s.Paused {
				next = "paused"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, when(s), s.Key, s.CatchUp, cmdutil.Since(s.LastTick), next)
		}
		return w.Flush()
	case "rm":
		if err := qs.RemoveSchedule(ctx, o.Queue, o.Name); err != nil {
			return err
		}
		if o.F.Config.JSON {
			return cmdutil.PrintJSON(out, map[string]any{"queue": o.Queue, "name": o.Name, "removed": true})
		}
		cmdutil.Fprintf(out, "schedule %s of queue %s removed; the tasks it added stay\n", o.Name, o.Queue)
		return nil
	default: // pause, resume
		set := qs.ResumeSchedule
		if o.Verb == "pause" {
			set = qs.PauseSchedule
		}
		s, err := set(ctx, o.Queue, o.Name)
		if err != nil {
			return err
		}
		if o.F.Config.JSON {
			return cmdutil.PrintJSON(out, scheduleRow(s, time.Time{}))
		}
		if s.Paused {
			cmdutil.Fprintf(out, "schedule %s of queue %s paused: it adds no task until resumed\n", o.Name, o.Queue)
		} else {
			cmdutil.Fprintf(out, "schedule %s of queue %s adds tasks again from its next tick\n", o.Name, o.Queue)
		}
		return nil
	}
}

// schedule is add's schedule from its flags.
func (o *ScheduleOptions) schedule() (queue.Schedule, error) {
	if o.Key == "" {
		return queue.Schedule{}, cmdutil.Usagef("--key is required: the key of each tick's task")
	}
	if err := cmdutil.ValidSlot("--key", o.Key); err != nil {
		return queue.Schedule{}, err
	}
	if (o.Cron == "") == !o.Every.IsSet() {
		return queue.Schedule{}, cmdutil.Usagef("give --cron EXPR or --every DUR (one of them)")
	}
	pri, err := queue.ParsePriority(o.Priority)
	if err != nil {
		return queue.Schedule{}, err
	}
	labels, err := cmdutil.ParsePairs("--label", o.Labels)
	if err != nil {
		return queue.Schedule{}, err
	}
	ao := &AddOptions{F: o.F, Payload: o.Payload, PayloadFile: o.PayloadFile, payloadSet: o.payloadSet}
	payload, err := ao.payload()
	if err != nil {
		return queue.Schedule{}, err
	}
	return queue.Schedule{
		Queue: o.Queue, Name: o.Name, Cron: o.Cron, Every: queue.Duration(o.Every.D), Timezone: o.Timezone,
		Key: o.Key, Payload: payload, Priority: pri, Labels: labels, CatchUp: o.CatchUp,
	}, nil
}

// when says a schedule's timing.
func when(s *queue.Schedule) string {
	if s.Every > 0 {
		return "every " + time.Duration(s.Every).String()
	}
	tz := s.Timezone
	if tz == "" {
		tz = "UTC"
	}
	return fmt.Sprintf("at %q %s", s.Cron, tz)
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
