package queuecmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/reserve"
)

// BatchLine is one line of add --batch: the fields add takes.
type BatchLine struct {
	Key      string            `json:"key"`
	Payload  *string           `json:"payload,omitempty"`
	ID       string            `json:"id,omitempty"`
	Priority string            `json:"priority,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// At (RFC 3339) or In (a duration: "90s") delay the task, as add's
	// --at and --in.
	At string `json:"at,omitempty"`
	In string `json:"in,omitempty"`
	// Timeout (a duration) and MaxAttempts replace the queue's for the
	// task, as add's --task-timeout and --max-attempts.
	Timeout     string `json:"timeout,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	// Unique is add's --unique: keep, replace or debounce=DUR.
	Unique string `json:"unique,omitempty"`
	// After are the tasks it waits for, as add's --after (earlier lines'
	// ids or tasks the queue holds).
	After []string `json:"after,omitempty"`
	// Touches and Space are add's --touches and --space.
	Touches []string `json:"touches,omitempty"`
	Space   string   `json:"space,omitempty"`
}

// maxBatch bounds --batch's input, read whole before anything is written.
const maxBatch = 1 << 30

func addBatchRun(ctx context.Context, o *AddOptions) error {
	if o.Key != "" || o.ID != "" || o.payloadSet || o.PayloadFile != "" || o.Stdin || len(o.Labels) > 0 || o.Priority != string(queue.Normal) ||
		o.At != "" || o.In.IsSet() || o.TaskTimeout.IsSet() || o.MaxAttempts != 0 || o.Unique != "" || len(o.After) > 0 || len(o.Touches) > 0 || o.Space != "" || o.Wait || o.Timeout.IsSet() {
		return cmdutil.Usagef("--batch takes each task's fields from its lines: give no --key, --id, --priority, --label, payload, --at, --in, --task-timeout, --max-attempts, --unique, --after, --touches, --space or --wait with it")
	}
	in := o.F.IO.In
	if o.Batch != "-" {
		f, err := os.Open(o.Batch)
		if err != nil {
			return cmdutil.Usagef("--batch: %v", err)
		}
		defer f.Close()
		in = f
	}
	tasks, lines, err := readBatch(o.Queue, in)
	if err != nil {
		return err
	}
	qs, err := o.F.Queues(ctx)
	if err != nil {
		return err
	}
	res, err := qs.AddBatch(ctx, o.Queue, tasks)
	var bad *queue.BatchError
	if errors.As(err, &bad) {
		return cmdutil.Usagef("--batch line %d: %s; nothing added", lines[bad.Index], cmdutil.Text(bad.Err))
	}
	if err != nil {
		return err
	}
	// One line per task: buffered, as a batch may print thousands.
	out := bufio.NewWriter(o.F.IO.Out)
	defer out.Flush()
	var first error
	failed := 0
	for i, r := range res {
		switch {
		case r.Err != nil:
			failed++
			if first == nil {
				first = r.Err
			}
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue add: line %d: %s\n", lines[i], cmdutil.Text(r.Err))
			continue
		case !r.Added:
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton: queue add: line %d: task %s is in queue %s already (key %s, %s); nothing added\n", lines[i], r.Task.ID, o.Queue, r.Task.Key, r.Task.State)
		}
		t := r.Task
		if o.F.Config.JSON {
			if err := cmdutil.PrintJSONLine(out, addOutput(o.Queue, t, r.Added)); err != nil {
				return err
			}
			continue
		}
		cmdutil.Fprintf(out, "%s\n", t.ID)
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if first != nil {
		return fmt.Errorf("%d of %d tasks not added (said above); the first: %w", failed, len(res), first)
	}
	return nil
}

// readBatch reads --batch's lines into tasks, each with the number of its
// line; a line that is not a task is a usage error naming it. The input is
// read whole and decoded as streams, a chunk of lines per core (a decoder
// per line costs several times as much), each object checked to sit on a
// line of its own.
func readBatch(q string, r io.Reader) ([]queue.NewTask, []int, error) {
	in, err := io.ReadAll(io.LimitReader(r, maxBatch+1))
	if err != nil {
		return nil, nil, fmt.Errorf("--batch: %w", err)
	}
	if len(in) > maxBatch {
		return nil, nil, cmdutil.Usagef("--batch: over %d MiB; split it", maxBatch>>20)
	}
	// Chunks of whole lines, one per core, and the line each begins on.
	n := runtime.GOMAXPROCS(0)
	type chunk struct {
		in    []byte
		first int
		lines []BatchLine
		at    []int
		err   error
	}
	var chunks []*chunk
	for start, line := 0, 1; start < len(in); {
		end := min(start+len(in)/n+1, len(in))
		if nl := bytes.IndexByte(in[end:], '\n'); nl >= 0 && end < len(in) {
			end += nl + 1
		} else {
			end = len(in)
		}
		chunks = append(chunks, &chunk{in: in[start:end], first: line})
		line += bytes.Count(in[start:end], []byte("\n"))
		start = end
	}
	var wg sync.WaitGroup
	for _, c := range chunks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.lines, c.at, c.err = decodeLines(c.in, c.first)
		}()
	}
	wg.Wait()
	var tasks []queue.NewTask
	var lines []int
	ids := map[string]int{}
	for _, c := range chunks {
		if c.err != nil {
			return nil, nil, c.err
		}
		for k, l := range c.lines {
			n := c.at[k]
			t, err := batchTask(q, l)
			if err != nil {
				return nil, nil, cmdutil.Usagef("--batch line %d: %s; nothing added", n, err)
			}
			if m, ok := ids[l.ID]; ok && l.ID != "" {
				return nil, nil, cmdutil.Usagef("--batch line %d: id %s is line %d's too; nothing added", n, l.ID, m)
			}
			ids[l.ID] = n
			tasks = append(tasks, t)
			lines = append(lines, n)
		}
	}
	if len(tasks) == 0 {
		return nil, nil, cmdutil.Usagef("--batch: no tasks (one JSON object a line, with at least \"key\")")
	}
	return tasks, lines, nil
}

// decodeLines decodes the objects of in, whole lines beginning on line
// first, as one stream: each object and the line it is on.
func decodeLines(in []byte, first int) ([]BatchLine, []int, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	var out []BatchLine
	var at []int
	line, pos := first, 0 // the line of in[pos]
	advance := func(to int) {
		line += bytes.Count(in[pos:to], []byte("\n"))
		pos = to
	}
	for {
		// The next object starts at the first byte that is not space.
		start := pos + len(in[pos:]) - len(bytes.TrimLeft(in[pos:], " \t\r\n"))
		if start == len(in) {
			return out, at, nil
		}
		advance(start)
		n := line
		var l BatchLine
		if err := dec.Decode(&l); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) && bytes.Contains(in[start:], []byte("\n")) {
				return nil, nil, cmdutil.Usagef("--batch line %d: a task spans lines, or is cut short; put each on one line; nothing added", n)
			}
			return nil, nil, cmdutil.Usagef("--batch line %d: not a task (%v): want {\"key\": K, \"payload\": STR, \"id\": ID, \"priority\": P, \"labels\": {…}, \"at\": TIME, \"in\": DUR}; nothing added", n, err)
		}
		end := int(dec.InputOffset())
		rest := in[end:]
		if nl := bytes.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[:nl]
		}
		switch {
		case bytes.Contains(in[start:end], []byte("\n")):
			return nil, nil, cmdutil.Usagef("--batch line %d: a task spans lines; put each on one line; nothing added", n)
		case len(bytes.TrimSpace(rest)) > 0:
			return nil, nil, cmdutil.Usagef("--batch line %d: more than one JSON value on the line; nothing added", n)
		}
		advance(end)
		out = append(out, l)
		at = append(at, n)
	}
}

// batchTask is the task of one line's fields.
func batchTask(q string, l BatchLine) (queue.NewTask, error) {
	if l.Key == "" {
		return queue.NewTask{}, fmt.Errorf("\"key\" is required: the key that serializes the task")
	}
	t := queue.NewTask{Key: l.Key} // the key and the id are checked by AddBatch
	if l.Payload != nil {
		t.Payload = []byte(*l.Payload)
	}
	if l.Priority != "" {
		p, err := queue.ParsePriority(l.Priority)
		if err != nil {
			return queue.NewTask{}, err
		}
		t.Options = append(t.Options, queue.WithPriority(p))
	}
	if l.ID != "" {
		t.Options = append(t.Options, queue.WithID(l.ID))
	}
	if len(l.Labels) > 0 {
		t.Options = append(t.Options, queue.WithLabels(l.Labels))
	}
	if l.At != "" || l.In != "" {
		var in time.Duration
		if l.In != "" {
			d, err := time.ParseDuration(l.In)
			if err != nil {
				return queue.NewTask{}, fmt.Errorf("\"in\" %q: want a duration such as \"90s\" or \"2h\"", l.In)
			}
			in = d
		}
		when, err := whenOptions([2]string{`"at"`, `"in"`}, l.At, in, l.In != "")
		if err != nil {
			return queue.NewTask{}, err
		}
		t.Options = append(t.Options, when...)
	}
	if l.Timeout != "" {
		d, err := time.ParseDuration(l.Timeout)
		if err != nil {
			return queue.NewTask{}, fmt.Errorf("\"timeout\" %q: want a duration such as \"10m\"", l.Timeout)
		}
		t.Options = append(t.Options, queue.WithTimeout(d))
	}
	if l.MaxAttempts != 0 {
		t.Options = append(t.Options, queue.WithMaxAttempts(l.MaxAttempts))
	}
	if len(l.After) > 0 {
		t.Options = append(t.Options, queue.WithAfter(l.After...))
	}
	if len(l.Touches) > 0 {
		space := l.Space
		if space == "" {
			space = q
		}
		if _, err := reserve.ParsePatterns(l.Touches); err != nil {
			return queue.NewTask{}, fmt.Errorf("\"touches\": %s", cmdutil.Text(err))
		}
		if err := reserve.ValidSpace(space); err != nil {
			return queue.NewTask{}, fmt.Errorf("\"space\": %s", cmdutil.Text(err))
		}
		t.Options = append(t.Options, queue.WithTouches(space, l.Touches...))
	} else if l.Space != "" {
		return queue.NewTask{}, errors.New(`"space" names the space of "touches": give the paths too`)
	}
	if l.Unique != "" {
		u, err := uniqueOption(`"unique"`, l.Unique)
		if err != nil {
			return queue.NewTask{}, err
		}
		t.Options = append(t.Options, u)
	}
	return t, nil
}
