package queuecmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/view"
)

// AddOptions are add's inputs.
type AddOptions struct {
	F           *cmdutil.Factory
	Queue       string
	Key         string
	Priority    string
	ID          string
	Labels      []string
	Payload     string
	PayloadFile string
	Stdin       bool
	Batch       string
	At          string
	In          *cmdutil.DurationFlag
	Wait        bool
	Timeout     *cmdutil.DurationFlag
	TaskTimeout *cmdutil.DurationFlag
	MaxAttempts int
	Unique      string
	After       []string
	Touches     []string
	Space       string
	payloadSet  bool
	attemptsSet bool
}

func newCmdAdd(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &AddOptions{F: f, In: cmdutil.NewDurationFlag("in", 0), Timeout: cmdutil.NewDurationFlag("timeout", 0), TaskTimeout: cmdutil.NewDurationFlag("task-timeout", 0)}
	cmd := &cobra.Command{
		Use:   "add QUEUE --key K [--priority high|normal|low] [--id ID] [--label k=v]... [--at TIME | --in DUR] [--task-timeout DUR] [--max-attempts N] [--unique keep|replace|debounce=DUR] [--after ID,...] [--touches PATTERN,... [--space S]] [--wait [--timeout DUR]] [--payload STR | --payload-file F | -] | add QUEUE --batch FILE|-",
		Short: "Add a task for a key (or many, --batch); print its id",
		Long: `Add a task to the queue and print its id. The task runs once no other task of
its key holds the key's lock (per_key of them may at once), within the
queue's max_active; higher priorities go first.

The payload is opaque bytes handed to the worker's command on stdin: from
--payload, from --payload-file FILE, or from this command's stdin with - (or
--payload-file -). It may be as large as the server takes in one record.

--at TIME (RFC 3339, e.g. 2026-12-01T09:00:00Z) or --in DUR (e.g. 90s, 2h)
makes the task wait until then, by the server's clock, never this host's:
--in counts from the moment the server writes the task. Then it takes its
fair turn with the others. A time already past runs it at once. status
counts the tasks still waiting for their time; get shows when one runs.

--wait waits for the task to end (done, dead or cancelled: a failed task
that runs again is waited for too), by a watch of its record, then prints
its result (what its command wrote on stdout, up to 64 KiB; with --json,
the task as queue get --json prints it) and exits with its exit code: 0
done, the command's own code, 124 for a timeout, 3 for a lost lock, 130
for a cancel. --timeout DUR bounds the wait (exit 3 when it runs out; the
task goes on).

--task-timeout DUR and --max-attempts N give this task its own timeout and
number of attempts in place of the queue's.

--after ID,... makes the task wait for those tasks of the queue: it runs
once every one is done, and is cancelled, with the reason in its result,
as soon as one is dead or cancelled (a fan-in: a task after N others).

--touches PATTERN,... names the paths the task edits (as baton reserve
takes them) in reservation space --space (default: the queue's name; give
the repository's id to share the space with agents that run baton
reserve): a worker reserves them, exclusively, before the task starts and
holds them while it runs. A task whose paths overlap a running task's
waits for it, while other keys go on; one whose paths an agent holds is
given back (its attempt not counted) and tries again a second later.

--unique keeps at most one pending task of the key among those added with
it (its id is <key>.u<n>): with one waiting, keep adds nothing, replace
replaces its payload, debounce=DUR replaces it and makes it wait DUR again
from this add (a burst of adds runs once, DUR after the last). Once that
task runs, the next add makes a new one.

Adding is idempotent on --id: adding an id the queue holds already adds
nothing, says so on stderr, prints the id and exits 0. Without --id a new
uuid is the id. Labels are reported by status (active by label).

--batch FILE (- for stdin) adds many tasks at once: one JSON object a
line, with the fields add takes ("key", required; "payload", a string;
"id", "priority", "labels", an object; "at", an RFC 3339 time, or "in", a
duration such as "90s"; "timeout", a duration, and "max_attempts", as
--task-timeout and --max-attempts), blank lines skipped. Every line
is checked before anything is added (a bad one names its line and adds
nothing); then the writes go out one behind the other, without waiting for
each answer, and one line is printed per task, in order: its id, or
with --json add's document. A task that fails is said on stderr and the
others go on; the exit code is then the first failure's.`,
		Example: `  baton queue add agents --key alice --payload "fix issue 12"
  git diff | baton queue add reviews --key repo-1 --id pr-42 --priority high -
  baton queue add agents --key bob --label project=p1 --payload-file task.json
  baton queue add reports --key nightly --at 2026-12-01T02:00:00Z --payload "build report"
  baton queue add agents --key alice --in 10m --payload "check CI again"
  summary=$(baton queue add agents --key alice --payload "summarise PR 42" --wait --timeout 30m)
  printf '%s\n' '{"key":"alice","payload":"fix 12"}' '{"key":"bob","id":"b-1"}' | baton queue add agents --batch -`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case cmd.Flags().Changed("batch") && len(args) != 1:
				return cmdutil.Usagef("want QUEUE alone with --batch: baton queue add QUEUE --batch FILE|-")
			case len(args) == 2 && args[1] == "-":
				o.Stdin = true
			case len(args) != 1:
				return cmdutil.Usagef("want QUEUE and, to read the payload from stdin, -: baton queue add QUEUE --key K [-]")
			}
			if err := queue.ValidateName(args[0]); err != nil {
				return cmdutil.Usagef("%s", cmdutil.Text(err))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Queue = args[0]
			o.payloadSet = cmd.Flags().Changed("payload")
			o.attemptsSet = cmd.Flags().Changed("max-attempts")
			if runF != nil {
				return runF("add", o)
			}
			return addRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Key, "key", "", "the key that serializes the task (a user, a project); required")
	fs.StringVar(&o.Priority, "priority", string(queue.Normal), "high, normal or low")
	fs.StringVar(&o.ID, "id", "", "the task's id; adding an id the queue holds already adds nothing (default: a new uuid)")
	fs.StringArrayVar(&o.Labels, "label", nil, "KEY=VALUE reported by status (repeatable)")
	fs.StringVar(&o.Payload, "payload", "", "the payload, as text")
	fs.StringVar(&o.PayloadFile, "payload-file", "", "read the payload from FILE (- for stdin)")
	fs.StringVar(&o.Batch, "batch", "", "add the tasks of FILE (- for stdin), one JSON object a line: key, payload, id, priority, labels, at, in, timeout, max_attempts")
	fs.StringVar(&o.At, "at", "", "run no earlier than TIME, by the server's clock (RFC 3339: 2026-12-01T09:00:00Z)")
	fs.Var(o.In, "in", "run no earlier than DUR after the server writes the task (90s, 2h)")
	fs.Var(o.TaskTimeout, "task-timeout", "this task's own timeout, in place of the queue's")
	fs.StringSliceVar(&o.After, "after", nil, "wait for these tasks (ID,ID...): run once all are done; cancelled if one is dead or cancelled")
	fs.StringSliceVar(&o.Touches, "touches", nil, "the paths the task edits (PATTERN,PATTERN...): it runs only holding them, exclusively")
	fs.StringVar(&o.Space, "space", "", "the reservation space of --touches (default: the queue's name)")
	fs.StringVar(&o.Unique, "unique", "", "the key's one pending unique task: keep (add nothing), replace (its payload) or debounce=DUR (replace it and wait DUR again)")
	fs.IntVar(&o.MaxAttempts, "max-attempts", 0, "this task's own number of attempts, in place of the queue's")
	fs.BoolVar(&o.Wait, "wait", false, "wait for the task to end; print its result and exit with its exit code")
	fs.Var(o.Timeout, "timeout", "with --wait, wait at most DUR (exit 3 when it runs out; the task goes on)")
	return cmd
}

// AddOutput is add's --json document.
type AddOutput struct {
	ID       string `json:"id"`
	Queue    string `json:"queue"`
	Key      string `json:"key"`
	Priority string `json:"priority"`
	State    string `json:"state"`
	Added    bool   `json:"added"`
	Revision uint64 `json:"revision"`
}

// addOutput is add's document for task t of queue q.
func addOutput(q string, t *queue.Task, added bool) AddOutput {
	return AddOutput{ID: t.ID, Queue: q, Key: t.Key, Priority: string(t.Priority), State: string(t.State), Added: added, Revision: t.Revision}
}

func addRun(ctx context.Context, o *AddOptions) error {
	if o.Batch != "" {
		return addBatchRun(ctx, o)
	}
	if o.Key == "" {
		return cmdutil.Usagef("--key is required: the key that serializes the task")
	}
	if o.Timeout.IsSet() && !o.Wait {
		return cmdutil.Usagef("--timeout bounds --wait: give --wait with it")
	}
	if err := cmdutil.ValidSlot("--key", o.Key); err != nil {
		return err
	}
	pri, err := queue.ParsePriority(o.Priority)
	if err != nil {
		return err
	}
	labels, err := cmdutil.ParsePairs("--label", o.Labels)
	if err != nil {
		return err
	}
	opts := []queue.AddOption{queue.WithPriority(pri), queue.WithLabels(labels)}
	when, err := whenOptions([2]string{"--at", "--in"}, o.At, o.In.D, o.In.IsSet())
	if err != nil {
		return err
	}
	opts = append(opts, when...)
	if o.TaskTimeout.IsSet() {
		opts = append(opts, queue.WithTimeout(o.TaskTimeout.D))
	}
	if o.attemptsSet {
		if o.MaxAttempts < 1 {
			return cmdutil.Usagef("--max-attempts %d: use 1 or more (leave it out for the queue's)", o.MaxAttempts)
		}
		opts = append(opts, queue.WithMaxAttempts(o.MaxAttempts))
	}
	if len(o.After) > 0 {
		for _, id := range o.After {
			if err := cmdutil.ValidSlot("--after", id); err != nil {
				return err
			}
		}
		opts = append(opts, queue.WithAfter(o.After...))
	}
	if len(o.Touches) > 0 || o.Space != "" {
		if len(o.Touches) == 0 {
			return cmdutil.Usagef("--space names the space of --touches: give the paths too")
		}
		space := o.Space
		if space == "" {
			space = o.Queue
		}
		if _, err := reserve.ParsePatterns(o.Touches); err != nil {
			return cmdutil.Usagef("--touches: %s", cmdutil.Text(err))
		}
		if err := reserve.ValidSpace(space); err != nil {
			return cmdutil.Usagef("--space: %s", cmdutil.Text(err))
		}
		opts = append(opts, queue.WithTouches(space, o.Touches...))
	}
	if o.Unique != "" {
		u, err := uniqueOption("--unique", o.Unique)
		if err != nil {
			return err
		}
		opts = append(opts, u)
	}
	if o.ID != "" {
		if err := cmdutil.ValidSlot("--id", o.ID); err != nil {
			return err
		}
		opts = append(opts, queue.WithID(o.ID))
	}
	payload, err := o.payload()
	if err != nil {
		return err
	}
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	if o.Wait {
		return addWait(ctx, o, qs, payload, opts)
	}
	t, added, err := qs.Add(ctx, o.Queue, o.Key, payload, opts...)
	if err != nil {
		return err
	}
	switch {
	case added:
	case o.Unique == queue.UniqueKeep:
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue add: task %s is key %s's pending unique task; kept as it is, nothing added\n", t.ID, t.Key)
	case o.Unique != "":
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue add: task %s, key %s's pending unique task, has the new payload; nothing added\n", t.ID, t.Key)
	default:
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue add: task %s is in queue %s already (key %s, %s); nothing added\n", t.ID, o.Queue, t.Key, t.State)
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, addOutput(o.Queue, t, added))
	}
	cmdutil.Fprintf(o.F.IO.Out, "%s\n", t.ID)
	return nil
}

// payload reads the payload from the one source given.
func (o *AddOptions) payload() ([]byte, error) {
	n := 0
	for _, given := range []bool{o.payloadSet, o.PayloadFile != "", o.Stdin} {
		if given {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, cmdutil.Usagef("give the payload one way: --payload STR, --payload-file FILE or -")
	case o.payloadSet:
		return []byte(o.Payload), nil
	case o.Stdin || o.PayloadFile == "-":
		return io.ReadAll(o.F.IO.In)
	case o.PayloadFile != "":
		b, err := os.ReadFile(o.PayloadFile)
		if err != nil {
			return nil, cmdutil.Usagef("--payload-file: %v", err)
		}
		return b, nil
	}
	return nil, nil
}

// whenOptions are the options of at (RFC 3339) or in (a duration, set
// when given): at most one of them. names are how the input calls the two
// (--at and --in, or a batch line's fields).
func whenOptions(names [2]string, at string, in time.Duration, inSet bool) ([]queue.AddOption, error) {
	switch {
	case at != "" && inSet:
		return nil, cmdutil.Usagef("give %s TIME or %s DUR, not both", names[0], names[1])
	case at != "":
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return nil, cmdutil.Usagef("%s %q: want an RFC 3339 time such as 2026-12-01T09:00:00Z (or +01:00 for a zone)", names[0], at)
		}
		return []queue.AddOption{queue.WithRunAt(t)}, nil
	case inSet:
		if in < 0 {
			return nil, cmdutil.Usagef("%s %s: want 0 or a positive duration", names[1], in)
		}
		return []queue.AddOption{queue.WithDelay(in)}, nil
	}
	return nil, nil
}

// addWait adds the task and waits for it to end (done, dead or
// cancelled), up to --timeout (0: no bound), then prints its result (or,
// with --json, the task) and returns its exit code as the command's.
func addWait(ctx context.Context, o *AddOptions, qs *queue.Queues, payload []byte, opts []queue.AddOption) error {
	f, q, timeout := o.F, o.Queue, o.Timeout.D
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t, added, err := qs.AddWait(wctx, q, o.Key, payload, opts...)
	if t != nil && !added {
		switch o.Unique {
		case "":
			cmdutil.Fprintf(f.IO.ErrOut, "baton: queue add: task %s is in queue %s already (key %s); nothing added, waiting for it\n", t.ID, q, t.Key)
		case queue.UniqueKeep:
			cmdutil.Fprintf(f.IO.ErrOut, "baton: queue add: task %s is key %s's pending unique task; kept as it is, waiting for it\n", t.ID, t.Key)
		default:
			cmdutil.Fprintf(f.IO.ErrOut, "baton: queue add: task %s, key %s's pending unique task, has the new payload; waiting for it\n", t.ID, t.Key)
		}
	}
	if err != nil && t != nil && wctx.Err() != nil && ctx.Err() == nil {
		return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("task %s of queue %s did not end within %s (it is %s and goes on); wait again with baton queue get, or a longer --timeout", t.ID, q, timeout, t.State))
	}
	if err != nil {
		return err
	}
	id := t.ID
	if f.Config.JSON {
		m, err := view.TaskJSON(t)
		if err != nil {
			return err
		}
		if err := cmdutil.PrintJSON(f.IO.Out, m); err != nil {
			return err
		}
	} else if r := t.Result; r != nil {
		if _, err := f.IO.Out.Write(r.Output); err != nil {
			return err
		}
		if r.OutputTruncated {
			cmdutil.Fprintf(f.IO.ErrOut, "baton: queue add: task %s's result was cut at %d bytes\n", id, queue.MaxResult)
		}
	}
	if code := t.ExitCode(); code != 0 {
		return cmdutil.Exit(cmdutil.ExitCode(code), nil)
	}
	return nil
}

// uniqueOption reads keep, replace or debounce=DUR (name: how the input
// calls it).
func uniqueOption(name, v string) (queue.AddOption, error) {
	mode, dur, hasDur := strings.Cut(v, "=")
	var d time.Duration
	if hasDur {
		var err error
		if d, err = time.ParseDuration(dur); err != nil || d <= 0 {
			return nil, cmdutil.Usagef("%s %q: want keep, replace or debounce=DUR (such as debounce=30s)", name, v)
		}
	}
	if mode == queue.UniqueDebounce && !hasDur || mode != queue.UniqueDebounce && hasDur {
		return nil, cmdutil.Usagef("%s %q: want keep, replace or debounce=DUR (such as debounce=30s)", name, v)
	}
	if mode != queue.UniqueKeep && mode != queue.UniqueReplace && mode != queue.UniqueDebounce {
		return nil, cmdutil.Usagef("%s %q: want keep, replace or debounce=DUR (such as debounce=30s)", name, v)
	}
	return queue.WithUnique(mode, d), nil
}
