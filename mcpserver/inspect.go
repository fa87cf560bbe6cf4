package mcpserver

import (
	"context"
	"encoding/base64"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/doctor"
	"github.com/batonhq/baton/queue"
)

// DoctorInput is doctor's arguments (none).
type DoctorInput struct{}

// FindingInfo is one problem doctor found.
type FindingInfo struct {
	Kind   string `json:"kind" jsonschema:"what kind of problem: stale, dead_holder, undecodable, orphan_gate, clock_skew, bucket_missing, ..."`
	Key    string `json:"key" jsonschema:"the slot, lease, queue or file it concerns"`
	Detail string `json:"detail" jsonschema:"what is wrong"`
	Action string `json:"action" jsonschema:"what an operator should do"`
}

// DoctorOutput is doctor's result.
type DoctorOutput struct {
	OK       bool          `json:"ok" jsonschema:"true when nothing is wrong"`
	Findings []FindingInfo `json:"findings"`
	Lost
}

// QueueAddInput is queue_add's arguments.
type QueueAddInput struct {
	Queue       string            `json:"queue" jsonschema:"the queue (created with baton queue create)"`
	Key         string            `json:"key" jsonschema:"the key tasks are serialised by (a user, a repository): one task per key runs at a time"`
	Payload     string            `json:"payload,omitempty" jsonschema:"the task's input, given to its command on stdin"`
	ID          string            `json:"id,omitempty" jsonschema:"the task's id; adding an id that exists adds nothing (idempotent); default: a fresh one"`
	Priority    string            `json:"priority,omitempty" jsonschema:"high, normal or low; default normal"`
	Labels      map[string]string `json:"labels,omitempty" jsonschema:"key-value pairs to record with the task"`
	At          string            `json:"at,omitempty" jsonschema:"run no earlier than this time, RFC 3339 (2026-12-01T09:00:00Z), by the server's clock; a past time runs it at once"`
	InMS        int64             `json:"in_ms,omitempty" jsonschema:"run no earlier than this many milliseconds after the server writes the task"`
	WaitSeconds int               `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (0 to 3600) for the task to end, and return its result and exit code"`
	Touches     []string          `json:"touches,omitempty" jsonschema:"the paths the task edits (as reserve_paths takes them): it runs only once its worker holds them, and waits while a running task or an agent holds any"`
	Space       string            `json:"space,omitempty" jsonschema:"the reservation space of touches (the repository's id); default: the queue's name"`
}

// TaskInfo is a task as the tools show it.
type TaskInfo struct {
	ID        string            `json:"id"`
	Queue     string            `json:"queue"`
	Key       string            `json:"key"`
	Priority  string            `json:"priority"`
	State     string            `json:"state" jsonschema:"pending, active, done, failed, dead or cancelled"`
	Attempts  int               `json:"attempts"`
	AddedAt   time.Time         `json:"added_at"`
	Labels    map[string]string `json:"labels,omitempty"`
	Result    *TaskResult       `json:"result,omitempty" jsonschema:"how its last attempt ended"`
	NotBefore *time.Time        `json:"not_before,omitempty" jsonschema:"a pending task's time: it does not start before it (server's clock)"`
}

// TaskResult is how an attempt ended.
type TaskResult struct {
	Attempt  int    `json:"attempt"`
	Reason   string `json:"reason"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Error    string `json:"error,omitempty"`
}

func taskInfoOf(t *queue.Task) *TaskInfo {
	info := &TaskInfo{ID: t.ID, Queue: t.Queue, Key: t.Key, Priority: string(t.Priority), State: string(t.State),
		Attempts: t.Attempts, AddedAt: t.AddedAt, Labels: t.Labels}
	if r := t.Result; r != nil {
		info.Result = &TaskResult{Attempt: r.Attempt, Reason: r.Reason, ExitCode: r.ExitCode, Error: r.Error}
	}
	if nb := t.NotBefore(); t.State == queue.StatePending && !nb.IsZero() {
		info.NotBefore = &nb
	}
	return info
}

// QueueAddOutput is queue_add's result.
type QueueAddOutput struct {
	Task  *TaskInfo `json:"task,omitempty"`
	Added bool      `json:"added" jsonschema:"false when a task with that id already existed"`
	// With wait_seconds: whether it ended in time, its exit code and result.
	Ended           bool   `json:"ended,omitempty" jsonschema:"with wait_seconds: the task ended (done, dead or cancelled) within the wait"`
	ExitCode        *int   `json:"exit_code,omitempty" jsonschema:"with wait_seconds, once ended: 0 done, the command's code, 124 timed out, 130 cancelled"`
	Result          string `json:"result,omitempty" jsonschema:"with wait_seconds, once ended: what the task's command wrote on stdout (up to 64 KiB; base64 when not text)"`
	ResultBase64    bool   `json:"result_base64,omitempty" jsonschema:"the result is base64: it was not UTF-8 text"`
	ResultTruncated bool   `json:"result_truncated,omitempty" jsonschema:"the result was longer and was cut"`
	Lost
}

// QueueInput names a queue.
type QueueInput struct {
	Queue string `json:"queue" jsonschema:"the queue"`
}

// QueueStatusOutput is queue_status's result.
type QueueStatusOutput struct {
	Queue      string            `json:"queue"`
	Counts     map[string]int    `json:"counts" jsonschema:"tasks by state"`
	Waiting    int               `json:"waiting" jsonschema:"tasks waiting to run"`
	Delayed    int               `json:"delayed" jsonschema:"of the waiting tasks, those whose run-at time has not come yet"`
	Paused     bool              `json:"paused" jsonschema:"nothing new starts (an operator paused the queue)"`
	PausedKeys []string          `json:"paused_keys" jsonschema:"keys whose tasks do not start (paused one by one)"`
	Schedules  []ScheduleInfo    `json:"schedules" jsonschema:"the queue's schedules: each adds a task at its ticks"`
	Running    int               `json:"running" jsonschema:"tasks running"`
	MaxActive  int               `json:"max_active" jsonschema:"most tasks that run at once across all workers (0: no limit)"`
	Rate       string            `json:"rate,omitempty" jsonschema:"at most N starts of the queue's tasks in any window of PERIOD (N/PERIOD), if set"`
	KeyRate    string            `json:"key_rate,omitempty" jsonschema:"at most N starts of each key's tasks in any window of PERIOD (N/PERIOD), unless the key has its own (key_rates)"`
	KeyRates   map[string]string `json:"key_rates,omitempty" jsonschema:"keys with a rate of their own, N/PERIOD"`
	ServerTime time.Time         `json:"server_time"`
	Lost
}

// ScheduleInfo is a schedule as queue_status shows it.
type ScheduleInfo struct {
	Name     string     `json:"name"`
	Key      string     `json:"key"`
	Cron     string     `json:"cron,omitempty"`
	Every    string     `json:"every,omitempty"`
	Paused   bool       `json:"paused"`
	NextTick *time.Time `json:"next_tick,omitempty"`
}

// QueueGetInput names a task.
type QueueGetInput struct {
	Queue string `json:"queue" jsonschema:"the queue"`
	ID    string `json:"id" jsonschema:"the task's id"`
}

// QueueGetOutput is queue_get's result.
type QueueGetOutput struct {
	Task *TaskInfo `json:"task,omitempty"`
	Lost
}

func (s *Server) addInspectTools() {
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "doctor",
		Title:       "Check baton's health",
		Description: `Report problems (stale sessions and leases, holders whose process died, unreadable records, leftovers, bucket settings, clock skew, queue tasks whose worker died), each with what an operator should do. It only reports: it fixes nothing.`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.doctor))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:  "queue_add",
		Title: "Add a task to a queue",
		Description: `Add a task to a work queue; the queue's workers (baton queue work) run it, one task per key at a time, fairly across keys.
Pass an id to make the call safe to repeat. To run it later, pass at (a time) or in_ms (a delay): it waits, then takes its turn. To get its result, pass wait_seconds: the call returns once the task ended, with its exit code and what its command printed. An error "not found" means the queue does not exist: an operator creates it with baton queue create.`,
	}, tool(s, s.queueAdd))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "queue_status",
		Title:       "A queue's status",
		Description: `Say how many tasks of a queue wait, run, are done, failed or dead, and whether it (or some of its keys) is paused.`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.queueStatus))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "queue_get",
		Title:       "A task",
		Description: `Show one task of a queue: its state, attempts and how its last attempt ended.`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.queueGet))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:  "queue_pause",
		Title: "Pause or resume a queue, or one key of it",
		Description: `Stop new starts of a queue's tasks (or, with key, of that key's tasks), or with resume let them start again. Running tasks go on and adds go on.
Pause a key whose tasks keep failing for a reason outside them (a repository's CI down, a user's quota spent), and resume it once that is fixed; a whole queue's pause is for an incident and stops every agent's work.`,
	}, tool(s, s.queuePause))
}

// QueuePauseInput names what to pause or resume.
type QueuePauseInput struct {
	Queue  string `json:"queue" jsonschema:"the queue"`
	Key    string `json:"key,omitempty" jsonschema:"only this key's tasks; default: the whole queue"`
	Resume bool   `json:"resume,omitempty" jsonschema:"true: let them start again"`
}

// QueuePauseOutput is queue_pause's result.
type QueuePauseOutput struct {
	Queue  string `json:"queue"`
	Key    string `json:"key,omitempty"`
	Paused bool   `json:"paused"`
	Lost
}

func (s *Server) queuePause(ctx context.Context, _ *mcp.CallToolRequest, in QueuePauseInput) (*mcp.CallToolResult, QueuePauseOutput, error) {
	lost := s.drainLost()
	out := QueuePauseOutput{Queue: in.Queue, Key: in.Key, Paused: !in.Resume, Lost: lost}
	qs, err := s.queues(ctx)
	if err != nil {
		return withLost(unavailable("queue pause", err), lost), out, nil
	}
	what := "queue " + in.Queue
	if in.Key != "" {
		what = "key " + in.Key + " of queue " + in.Queue
		set := qs.PauseKey
		if in.Resume {
			set = qs.ResumeKey
		}
		_, err = set(ctx, in.Queue, in.Key)
	} else {
		set := qs.Pause
		if in.Resume {
			set = qs.Resume
		}
		_, err = set(ctx, in.Queue)
	}
	if err != nil {
		return withLost(queueRefusal("queue pause", err), lost), out, nil
	}
	if in.Resume {
		return summary(lost, "%s resumed: its tasks start again", what), out, nil
	}
	return summary(lost, "%s paused: nothing new starts; running tasks go on", what), out, nil
}

func (s *Server) doctor(ctx context.Context, _ *mcp.CallToolRequest, _ DoctorInput) (*mcp.CallToolResult, DoctorOutput, error) {
	lost := s.drainLost()
	out := DoctorOutput{Findings: []FindingInfo{}, Lost: lost}
	c, err := s.connected(ctx)
	if err != nil {
		return withLost(unavailable("doctor", err), lost), out, nil
	}
	opts := []doctor.Option{}
	if c.Leases != nil {
		opts = append(opts, doctor.WithLeases(c.Leases))
	}
	if c.Queues != nil {
		opts = append(opts, doctor.WithQueues(c.Queues))
	}
	r, err := doctor.New(c.Sessions, opts...).Run(ctx)
	if err != nil {
		return withLost(unavailable("doctor", err), lost), out, nil
	}
	out.OK = r.OK
	for _, f := range r.Findings {
		out.Findings = append(out.Findings, FindingInfo{Kind: f.Kind, Key: f.Key, Detail: f.Detail, Action: f.Action})
	}
	if r.OK {
		return summary(lost, "no problems found"), out, nil
	}
	return summary(lost, "%d problems found; each says what an operator should do", len(out.Findings)), out, nil
}

// queues returns the queues, connecting first if need be.
func (s *Server) queues(ctx context.Context) (*queue.Queues, error) {
	c, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	if c.Queues == nil {
		return nil, errors.New("this server was started without queues")
	}
	return c.Queues, nil
}

// queueRefusal explains a queue call's error.
func queueRefusal(what string, err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, queue.ErrQueueNotFound):
		return refusal("not found: %v; an operator creates a queue with `baton queue create`", err)
	case errors.Is(err, queue.ErrTaskNotFound):
		return refusal("not found: %v", err)
	case errors.Is(err, queue.ErrInvalid):
		return refusal("invalid arguments: %v", err)
	default:
		return unavailable(what, err)
	}
}

func (s *Server) queueAdd(ctx context.Context, _ *mcp.CallToolRequest, in QueueAddInput) (*mcp.CallToolResult, QueueAddOutput, error) {
	lost := s.drainLost()
	out := QueueAddOutput{Lost: lost}
	qs, err := s.queues(ctx)
	if err != nil {
		return withLost(unavailable("queue add", err), lost), out, nil
	}
	var opts []queue.AddOption
	if in.ID != "" {
		opts = append(opts, queue.WithID(in.ID))
	}
	if in.Priority != "" {
		p, err := queue.ParsePriority(in.Priority)
		if err != nil {
			return withLost(refusal("invalid arguments: %v", err), lost), out, nil
		}
		opts = append(opts, queue.WithPriority(p))
	}
	if len(in.Labels) > 0 {
		opts = append(opts, queue.WithLabels(in.Labels))
	}
	switch {
	case in.At != "" && in.InMS != 0:
		return withLost(refusal("invalid arguments: give at or in_ms, not both"), lost), out, nil
	case in.At != "":
		at, err := time.Parse(time.RFC3339Nano, in.At)
		if err != nil {
			return withLost(refusal("invalid arguments: at %q is not an RFC 3339 time such as 2026-12-01T09:00:00Z", in.At), lost), out, nil
		}
		opts = append(opts, queue.WithRunAt(at))
	case in.InMS != 0:
		opts = append(opts, queue.WithDelay(time.Duration(in.InMS)*time.Millisecond))
	}
	if len(in.Touches) > 0 {
		space := in.Space
		if space == "" {
			space = in.Queue
		}
		opts = append(opts, queue.WithTouches(space, in.Touches...))
	} else if in.Space != "" {
		return withLost(refusal("invalid arguments: space names the space of touches: give the paths too"), lost), out, nil
	}
	if in.WaitSeconds < 0 || in.WaitSeconds > 3600 {
		return withLost(refusal("invalid arguments: wait_seconds %d: use 0 to 3600", in.WaitSeconds), lost), out, nil
	}
	if in.WaitSeconds > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitSeconds)*time.Second)
		ended, added, werr := qs.AddWait(wctx, in.Queue, in.Key, []byte(in.Payload), opts...)
		cancel()
		if ended != nil {
			out.Task, out.Added = taskInfoOf(ended), added
		}
		if werr != nil && ended != nil && ctx.Err() == nil && wctx.Err() != nil {
			return summary(lost, "task %s of queue %s did not end within %ds; it goes on: call queue_get later", ended.ID, in.Queue, in.WaitSeconds), out, nil
		}
		if werr != nil {
			return withLost(queueRefusal("queue add", werr), lost), out, nil
		}
		t := ended
		code := ended.ExitCode()
		out.Task, out.Ended, out.ExitCode = taskInfoOf(ended), true, &code
		if r := ended.Result; r != nil {
			out.ResultTruncated = r.OutputTruncated
			if utf8.Valid(r.Output) {
				out.Result = string(r.Output)
			} else {
				out.Result, out.ResultBase64 = base64.StdEncoding.EncodeToString(r.Output), true
			}
		}
		return summary(lost, "task %s of queue %s ended %s (exit %d)", t.ID, in.Queue, ended.State, code), out, nil
	}
	t, added, err := qs.Add(ctx, in.Queue, in.Key, []byte(in.Payload), opts...)
	if err != nil {
		return withLost(queueRefusal("queue add", err), lost), out, nil
	}
	out.Task, out.Added = taskInfoOf(t), added
	if !added {
		return summary(lost, "task %s was already in queue %s (%s)", t.ID, in.Queue, t.State), out, nil
	}
	return summary(lost, "added task %s to queue %s for key %s", t.ID, in.Queue, in.Key), out, nil
}

func (s *Server) queueStatus(ctx context.Context, _ *mcp.CallToolRequest, in QueueInput) (*mcp.CallToolResult, QueueStatusOutput, error) {
	lost := s.drainLost()
	out := QueueStatusOutput{Queue: in.Queue, Counts: map[string]int{}, Lost: lost}
	qs, err := s.queues(ctx)
	if err != nil {
		return withLost(unavailable("queue status", err), lost), out, nil
	}
	snap, err := qs.Snapshot(ctx, in.Queue)
	if err != nil {
		return withLost(queueRefusal("queue status", err), lost), out, nil
	}
	for st, n := range snap.Counts {
		out.Counts[string(st)] = n
	}
	out.Waiting, out.Running, out.MaxActive, out.ServerTime = snap.Pending.Total, snap.Active.Used, snap.Active.Max, snap.ServerTime
	out.Delayed, out.Paused, out.PausedKeys = snap.Pending.Delayed, snap.Config.Paused, snap.PausedKeys()
	if r := snap.Config.Rate; r != nil {
		out.Rate = r.String()
	}
	if r := snap.Config.KeyRate; r != nil {
		out.KeyRate = r.String()
	}
	for _, k := range snap.Keys {
		if k.Rate != nil {
			if out.KeyRates == nil {
				out.KeyRates = map[string]string{}
			}
			out.KeyRates[k.Key] = k.Rate.String()
		}
	}
	out.Schedules = []ScheduleInfo{}
	for _, sc := range snap.Schedules {
		info := ScheduleInfo{Name: sc.Name, Key: sc.Key, Cron: sc.Cron, Paused: sc.Paused}
		if sc.Every > 0 {
			info.Every = time.Duration(sc.Every).String()
		}
		if next := sc.NextTick(snap.ServerTime); !next.IsZero() {
			info.NextTick = &next
		}
		out.Schedules = append(out.Schedules, info)
	}
	return summary(lost, "queue %s: %d waiting, %d running, %d done", in.Queue, out.Waiting, out.Running, out.Counts[string(queue.StateDone)]), out, nil
}

func (s *Server) queueGet(ctx context.Context, _ *mcp.CallToolRequest, in QueueGetInput) (*mcp.CallToolResult, QueueGetOutput, error) {
	lost := s.drainLost()
	out := QueueGetOutput{Lost: lost}
	qs, err := s.queues(ctx)
	if err != nil {
		return withLost(unavailable("queue get", err), lost), out, nil
	}
	t, err := qs.Get(ctx, in.Queue, in.ID)
	if err != nil {
		return withLost(queueRefusal("queue get", err), lost), out, nil
	}
	out.Task = taskInfoOf(t)
	return summary(lost, "task %s of queue %s is %s after %d attempts", t.ID, in.Queue, t.State, t.Attempts), out, nil
}
