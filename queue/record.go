package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv"
)

// Priority orders tasks: every runnable high task goes before any normal
// one, and normal before low.
type Priority string

// The priorities, highest first.
const (
	High   Priority = "high"
	Normal Priority = "normal"
	Low    Priority = "low"
)

// Priorities lists the priorities, highest first.
var Priorities = []Priority{High, Normal, Low}

// rank is 0 for high, 1 for normal, 2 for low, -1 for anything else.
func (p Priority) rank() int {
	switch p {
	case High:
		return 0
	case Normal, "":
		return 1
	case Low:
		return 2
	}
	return -1
}

// ParsePriority reads "high", "normal" or "low".
func ParsePriority(s string) (Priority, error) {
	p := Priority(s)
	if s == "" || p.rank() < 0 {
		return "", fmt.Errorf("%w: priority %q: use high, normal or low", ErrInvalid, s)
	}
	return p, nil
}

// State is where a task is in its life.
//
//	pending ──claim──▶ active ──exit 0──▶ done
//	   ▲                │ ──exit≠0, timeout──▶ failed ──backoff──▶ (runs again)
//	   │                │ ──worker died, lock lost──▶ pending (attempt counted)
//	   └── retry ───────┤ ──out of attempts──▶ dead
//	                    └ ──cancel──▶ cancelled
type State string

// The states of a task.
const (
	// StatePending: waiting to run.
	StatePending State = "pending"
	// StateActive: running under its key's lock.
	StateActive State = "active"
	// StateDone: its last attempt exited 0. Final.
	StateDone State = "done"
	// StateFailed: its last attempt failed (exit code, timeout); it runs
	// again once its backoff has passed.
	StateFailed State = "failed"
	// StateDead: out of attempts. Final until retried.
	StateDead State = "dead"
	// StateCancelled: cancelled before or while it ran. Final.
	StateCancelled State = "cancelled"
)

// States lists every state.
var States = []State{StatePending, StateActive, StateDone, StateFailed, StateDead, StateCancelled}

// Final reports whether a task in s never runs again by itself.
func (s State) Final() bool { return s == StateDone || s == StateDead || s == StateCancelled }

// Why an attempt ended (Result.Reason).
const (
	// ReasonExit: the work returned (exit code in Result.ExitCode).
	ReasonExit = "exit"
	// ReasonTimeout: stopped after the queue's timeout.
	ReasonTimeout = "timeout"
	// ReasonLost: the worker died or lost the key lock; the attempt counts.
	ReasonLost = "lost"
	// ReasonCancelled: stopped or dropped by a cancel.
	ReasonCancelled = "cancelled"
	// ReasonDrained: the worker stopped; the attempt does not count.
	ReasonDrained = "drained"
	// ReasonReleased: an operator released the key (Queues.Release).
	ReasonReleased = "released"
	// ReasonStartFailed: the work could not be started; the attempt does
	// not count.
	ReasonStartFailed = "start_failed"
	// ReasonPathsHeld: another held the paths the task touches when its
	// worker came to reserve them; the attempt does not count, and the
	// task waits a second before its next turn (adr/0056).
	ReasonPathsHeld = "paths_held"
)

//go:generate go run ../internal/jsonrec/recgen

// Task is a unit of work as stored in KV (key <queue>.task.<id>). JSON
// fields evolve additively: unknown fields are kept when it is rewritten.
// Its layout is its fields and their tags (and Run's and Result's);
// codec_gen.go is written from them.
//
//jsonrec:codec
type Task struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
	// Key serializes tasks: at most the queue's per_key tasks of one key
	// run at once, each under a key lock.
	Key      string            `json:"key"`
	Priority Priority          `json:"priority"`
	Labels   map[string]string `json:"labels"`
	Payload  []byte            `json:"payload"`
	State    State             `json:"state"`
	// Attempts counts the attempts started (each claim counts one; one
	// stopped by a drain or a start failure is given back).
	Attempts int `json:"attempts"`
	// Seq is the revision that added the task, its place in its key's FIFO.
	// The first revision stores 0, meaning "this revision".
	Seq     uint64    `json:"seq"`
	AddedAt time.Time `json:"added_at"`
	// UpdatedAt is the client time of the last write (informational).
	UpdatedAt time.Time `json:"updated_at"`
	// Run is the attempt in progress (state active).
	Run *Run `json:"run,omitempty"`
	// Result is the last attempt that ended.
	Result *Result `json:"result,omitempty"`
	// CancelRequested asks the worker of an active task to stop it.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// RetryAfter is, for a failed task, how long after this revision's
	// server time it may run again.
	RetryAfter Duration `json:"retry_after,omitempty"`
	// RunAt is, for a pending task, the server time before which it does
	// not start (zero: at once); Delay is, for a pending task, how long
	// after this revision's server time it may start. A claim clears Delay
	// (RunAt, past then, stays as it was asked for).
	RunAt time.Time `json:"run_at,omitzero"`
	Delay Duration  `json:"delay,omitempty"`
	// Schedule names the schedule that added the task at its tick (RunAt).
	Schedule string `json:"schedule,omitempty"`
	// Timeout and MaxAttempts, when set, replace the queue's for this
	// task (Task.TimeoutIn, Task.AttemptsIn).
	Timeout     Duration `json:"timeout,omitempty"`
	MaxAttempts int      `json:"max_attempts,omitempty"`
	// After are the tasks this one waits for: it runs once all are done,
	// and is cancelled when one is dead or cancelled.
	After []string `json:"after,omitempty"`
	// Touches are the paths the task edits (patterns of package
	// reserve/pattern) in the reservation space Space: a worker reserves
	// them, exclusively, before the task starts and holds them while it
	// runs; a task whose paths clash with a running one's waits
	// (adr/0056).
	Touches []string `json:"touches,omitempty"`
	Space   string   `json:"space,omitempty"`
	// Unique is how the task was added as its key's unique pending task
	// (UniqueKeep, UniqueReplace, UniqueDebounce; empty: not so).
	Unique string `json:"unique,omitempty"`

	// Revision of this version of the record and its server time (not
	// stored).
	Revision uint64    `json:"-"`
	Written  time.Time `json:"-"`
	// Expires is when the server removes a finished task (zero: never).
	Expires time.Time `json:"-"`

	unknown jsonrec.Unknown
}

// Run is an attempt in progress: who runs it, under which lock.
type Run struct {
	Attempt int `json:"attempt"`
	// Slot is the session that is the key lock; Lane its index (0 to
	// per_key-1); Fence the session's fence.
	Slot  string `json:"slot"`
	Lane  int    `json:"lane"`
	Fence uint64 `json:"fence"`
	// Token is the capacity token held (-1: the queue has no max_active).
	Token    int    `json:"token"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	PIDStart string `json:"pid_start,omitempty"`
	Instance string `json:"instance"`
	// Worker is the worker that runs the attempt, as its presence in the
	// queue names it (empty in records of earlier versions).
	Worker string `json:"worker,omitempty"`
	// Claimed is the revision of the write that started the attempt (0 in
	// that write itself): the key's place in the round robin.
	Claimed   uint64    `json:"claimed"`
	StartedAt time.Time `json:"started_at"`
}

// Result is how an attempt ended.
type Result struct {
	Attempt int `json:"attempt"`
	// Reason is one of the Reason constants.
	Reason string `json:"reason"`
	// ExitCode is the work's exit code (ReasonExit; 128+N when signal N
	// ended a command).
	ExitCode *int `json:"exit_code,omitempty"`
	// Error says what went wrong, when something did.
	Error     string    `json:"error,omitempty"`
	Slot      string    `json:"slot,omitempty"`
	Fence     uint64    `json:"fence,omitempty"`
	Host      string    `json:"host,omitempty"`
	PID       int       `json:"pid,omitempty"`
	Instance  string    `json:"instance,omitempty"`
	Claimed   uint64    `json:"claimed,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at"`
	// Output is what the work returned (SetResult; the command's stdout
	// for `queue work`), at most MaxResult bytes; OutputTruncated says
	// there was more.
	Output          []byte `json:"output,omitempty"`
	OutputTruncated bool   `json:"output_truncated,omitempty"`
}

// taskFields is Task without its methods, for encoding/json.
type taskFields Task

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (t Task) MarshalJSON() ([]byte, error) {
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if len(t.unknown) == 0 {
		if b, ok := t.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(taskFields(t), t.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (t *Task) UnmarshalJSON(data []byte) error {
	if t.decodeFast(data, 0) {
		return nil
	}
	return t.unmarshalGeneral(data)
}

// unmarshalGeneral is UnmarshalJSON for any record, of any version.
func (t *Task) unmarshalGeneral(data []byte) error {
	var f taskFields
	unknown, err := jsonrec.Unmarshal(data, &f, taskKnown)
	if err != nil {
		return err
	}
	*t = Task(f)
	t.unknown = unknown
	return nil
}

// TimeoutIn is how long the task may run in queue config cfg: its own
// timeout, else the queue's.
func (t *Task) TimeoutIn(cfg Config) time.Duration {
	if t.Timeout > 0 {
		return time.Duration(t.Timeout)
	}
	return time.Duration(cfg.Timeout)
}

// AttemptsIn is how many attempts the task has in queue config cfg: its
// own max_attempts, else the queue's.
func (t *Task) AttemptsIn(cfg Config) int {
	if t.MaxAttempts > 0 {
		return t.MaxAttempts
	}
	return cfg.MaxAttempts
}

// ExitCode is the exit code of a task that ended, as `baton queue add
// --wait` exits with it: 0 done, its last attempt's exit code, 124 when it
// timed out, 3 when its lock was lost or released, 130 cancelled, 1
// otherwise (and for a task that has not ended).
func (t *Task) ExitCode() int {
	r := t.Result
	switch {
	case t.State == StateDone:
		return 0
	case t.State == StateCancelled:
		return 130
	case r == nil:
		return 1
	case r.ExitCode != nil && *r.ExitCode != 0:
		return *r.ExitCode
	case r.Reason == ReasonTimeout:
		return 124
	case r.Reason == ReasonLost || r.Reason == ReasonReleased:
		return 3
	}
	return 1
}

// NotBefore is the server time before which a pending task does not
// start: the later of RunAt and its revision's time plus Delay (zero: it
// may start at once). A task not read from the bucket (Written zero) with
// a Delay counts it from now, on this host's clock.
func (t *Task) NotBefore() time.Time {
	nb := t.RunAt
	if t.Delay > 0 {
		from := t.Written
		if from.IsZero() {
			from = time.Now()
		}
		if d := from.Add(time.Duration(t.Delay)); d.After(nb) {
			nb = d
		}
	}
	return nb
}

// clone copies t deeply enough that changing the copy leaves t alone (the
// payload is shared: it is never changed in place).
func (t *Task) clone() *Task {
	c := *t
	c.Labels = maps.Clone(t.Labels)
	if t.Run != nil {
		r := *t.Run
		c.Run = &r
	}
	if t.Result != nil {
		r := *t.Result
		if r.ExitCode != nil {
			code := *r.ExitCode
			r.ExitCode = &code
		}
		c.Result = &r
	}
	c.unknown = t.unknown.Clone()
	return &c
}

// Fence is the fence of the task's current or last attempt (0 if it never
// ran).
func (t *Task) Fence() uint64 {
	switch {
	case t.Run != nil:
		return t.Run.Fence
	case t.Result != nil:
		return t.Result.Fence
	}
	return 0
}

// claimedRev is the revision that started the task's current or last
// attempt (0 if it never ran).
func (t *Task) claimedRev() uint64 {
	switch {
	case t.Run != nil:
		return t.Run.Claimed
	case t.Result != nil:
		return t.Result.Claimed
	}
	return 0
}

// Key names in the queues bucket.
func configKey(q string) string        { return q + ".config" }
func taskKey(q, id string) string      { return q + ".task." + id }
func tokenKey(q string, i int) string  { return q + ".cap." + strconv.Itoa(i) }
func presenceKey(q, w string) string   { return q + ".worker." + w }
func inboxKey(q, w string) string      { return q + ".inbox." + w }
func workerOf(q, key string) string    { return strings.TrimPrefix(key, q+".worker.") }
func isPresenceKey(q, key string) bool { return strings.HasPrefix(key, q+".worker.") }
func isInboxKey(q, key string) bool    { return strings.HasPrefix(key, q+".inbox.") }
func queuePattern(q string) string     { return q + ".>" }
func isTaskKey(q, key string) bool     { return strings.HasPrefix(key, q+".task.") }
func taskIDOf(q, key string) string    { return strings.TrimPrefix(key, q+".task.") }
func isConfigKey(q, key string) bool   { return key == q+".config" }
func queueOfConfig(key string) string  { return strings.TrimSuffix(key, ".config") }
func tokenIndexOf(q, key string) int {
	rest, ok := strings.CutPrefix(key, q+".cap.")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return -1 // not a key baton writes ("01", "+1"): not a token
	}
	return i
}

// dispatchPatterns are the keys a dispatcher watches: all of the queue's
// but the inboxes, which only it writes (and a host's watcher removes);
// their revisions come back with its own writes, or with a conflict.
func dispatchPatterns(q string) []string {
	return []string{configKey(q), taskKey(q, ">"), q + ".cap.>", presenceKey(q, ">"), keyConfigPattern(q), schedulePattern(q), rateKey(q), keyRatePattern(q)}
}

// decodeTask turns a live entry into a task, failing on garbage or a
// record stored under another id. The task keeps the fields this version
// does not know, to write them back.
func decodeTask(q string, e kv.Entry) (*Task, error) {
	var t Task
	if err := t.UnmarshalJSON(e.Value); err != nil {
		return nil, err
	}
	return checkTask(q, e, &t)
}

// viewTask is decodeTask for a reader that does not rewrite the record
// (status, a worker's view): the payload skipped, unknown fields dropped.
func viewTask(q string, e kv.Entry) (*Task, error) {
	if t := bytes.TrimLeft(e.Value, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("the record is not a JSON object")
	}
	t := new(Task) // decoded in place: a status decodes 100k of them
	if !t.decodeFast(e.Value, taskFieldPayload) {
		*t = Task{}
		if err := jsonrec.ViewWithoutBytes(e.Value, (*taskFields)(t)); err != nil {
			return nil, err
		}
	}
	return checkTask(q, e, t)
}

// checkTask completes and checks a task decoded from e.
func checkTask(q string, e kv.Entry, t *Task) (*Task, error) {
	if err := checkFields(q, e, t.ID, t.Queue, t.Priority, t.State, t.Run != nil); err != nil {
		return nil, err
	}
	settleRevision(e.Revision, &t.Seq, t.Run)
	t.Revision, t.Written = e.Revision, e.Created
	t.Expires = e.ExpiresAt()
	return t, nil
}

// checkFields checks what every reader checks of a task record stored in
// e: that it names that task of queue q, a known priority and a known
// state (active with a run).
func checkFields(q string, e kv.Entry, id, queue string, p Priority, st State, running bool) error {
	if id != taskIDOf(q, e.Key) || queue != q {
		return fmt.Errorf("record names task %q of queue %q, stored as %q", id, queue, e.Key)
	}
	if p.rank() < 0 {
		return fmt.Errorf("priority %q", p)
	}
	if !slices.Contains(States, st) {
		return fmt.Errorf("state %q", st)
	}
	if st == StateActive && !running {
		return errors.New("active without a run")
	}
	return nil
}

// settleRevision fills what the first revision of a record leaves to its
// revision: a task's seq, and its run's claim.
func settleRevision(rev uint64, seq *uint64, run *Run) {
	if *seq == 0 {
		*seq = rev
	}
	if run != nil && run.Claimed == 0 {
		run.Claimed = rev
	}
}

func encodeTask(t *Task) ([]byte, error) {
	b, err := t.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("queue: encode task %s: %w", t.ID, err)
	}
	return b, nil
}

// decodeConfig turns a live entry into a config.
func decodeConfig(e kv.Entry) (Config, error) {
	var c Config
	if err := c.UnmarshalJSON(e.Value); err != nil {
		return Config{}, fmt.Errorf("%w: config %s: %w", ErrUndecodable, e.Key, err)
	}
	if c.Queue != queueOfConfig(e.Key) {
		return Config{}, fmt.Errorf("%w: config %s names queue %q", ErrUndecodable, e.Key, c.Queue)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w: config %s: %w", ErrUndecodable, e.Key, err)
	}
	c.Revision = e.Revision
	return c, nil
}

// token is a capacity token (key <queue>.cap.<i>): held while a task of
// the queue runs, by the worker that runs it. There are max_active of them.
//
//jsonrec:codec
type token struct {
	Queue    string    `json:"queue"`
	Index    int       `json:"index"`
	Task     string    `json:"task"`
	Key      string    `json:"key"`
	Slot     string    `json:"slot"`
	Fence    uint64    `json:"fence"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	PIDStart string    `json:"pid_start,omitempty"`
	Instance string    `json:"instance"`
	Acquired time.Time `json:"acquired_at"`
	// Renewed is the client time of the last renewal; it also makes every
	// renewal's value differ, as kv.Update wants.
	Renewed time.Time `json:"renewed_at"`

	rev     uint64    // revision (not stored)
	written time.Time // server time of rev (not stored)
	ttl     time.Duration
}

// decodeToken turns a live entry into a token.
func decodeToken(e kv.Entry) (*token, error) {
	var t token
	if !t.decodeFast(e.Value, 0) {
		t = token{}
		if err := json.Unmarshal(e.Value, &t); err != nil {
			return nil, err
		}
	}
	if t.Task == "" {
		return nil, fmt.Errorf("token %s names no task", e.Key)
	}
	t.rev, t.written, t.ttl = e.Revision, e.Created, e.TTL
	return &t, nil
}

// encode is json.Marshal(tok), member by member where it can be.
func (tok *token) encode() ([]byte, error) {
	if b, ok := tok.encodeFast(); ok {
		return b, nil
	}
	return json.Marshal(tok)
}

// TaskOf decodes a live entry of the queues bucket that holds a task
// (without its payload), for readers that follow the bucket themselves, as
// the dashboard does. It returns nil and no error for any other entry.
func TaskOf(e kv.Entry) (*Task, error) {
	q, rest, ok := strings.Cut(e.Key, ".")
	if !ok || !strings.HasPrefix(rest, "task.") || !e.Live() {
		return nil, nil
	}
	return viewTask(q, e)
}
