package queuecmd

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/queue"
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
	payloadSet  bool
}

func newCmdAdd(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	o := &AddOptions{F: f}
	cmd := &cobra.Command{
		Use:   "add QUEUE --key K [--priority high|normal|low] [--id ID] [--label k=v]... [--payload STR | --payload-file F | -]",
		Short: "Add a task for a key; print its id",
		Long: `Add a task to the queue and print its id. The task runs once no other task of
its key holds the key's lock (per_key of them may at once), within the
queue's max_active; higher priorities go first.

The payload is opaque bytes handed to the worker's command on stdin: from
--payload, from --payload-file FILE, or from this command's stdin with - (or
--payload-file -). It may be as large as the server takes in one record.

Adding is idempotent on --id: adding an id the queue holds already adds
nothing, says so on stderr, prints the id and exits 0. Without --id a new
uuid is the id. Labels are reported by status (active by label).`,
		Example: `  baton queue add agents --key alice --payload "fix issue 12"
  git diff | baton queue add reviews --key repo-1 --id pr-42 --priority high -
  baton queue add agents --key bob --label project=p1 --payload-file task.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
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

func addRun(ctx context.Context, o *AddOptions) error {
	if o.Key == "" {
		return cmdutil.Usagef("--key is required: the key that serializes the task")
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
	t, added, err := qs.Add(ctx, o.Queue, o.Key, payload, opts...)
	if err != nil {
		return err
	}
	if !added {
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue add: task %s is in queue %s already (key %s, %s); nothing added\n", t.ID, o.Queue, t.Key, t.State)
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, AddOutput{ID: t.ID, Queue: o.Queue, Key: t.Key, Priority: string(t.Priority), State: string(t.State), Added: added, Revision: t.Revision})
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
