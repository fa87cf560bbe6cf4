package queue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton/lease"
)

// DefaultGrace is how long a task's work gets to stop once its worker must
// stop it, and how long a draining worker waits for running tasks.
const DefaultGrace = 10 * time.Second

// samehostPoll is how often a worker checks the processes of this host
// that hold locks or tokens of its queue, so that a dead one's task is
// taken over at once rather than after the TTL.
const samehostPoll = 50 * time.Millisecond

// WorkerOption configures NewWorker.
type WorkerOption func(*Worker) error

// WithConcurrency sets how many tasks the worker runs at once. Default: 1.
func WithConcurrency(n int) WorkerOption {
	return func(w *Worker) error {
		if n < 1 || n > MaxActiveLimit {
			return fmt.Errorf("%w: concurrency %d: use 1 to %d", ErrInvalid, n, MaxActiveLimit)
		}
		w.concurrency = n
		return nil
	}
}

// WithGrace sets how long running tasks get to finish when the worker
// drains, and how long a task's work gets between the request to stop and
// the worker's giving up on it. Default: DefaultGrace.
func WithGrace(d time.Duration) WorkerOption {
	return func(w *Worker) error {
		if d < 0 {
			return fmt.Errorf("%w: grace %s is negative", ErrInvalid, d)
		}
		w.grace = d
		return nil
	}
}

// WithMaxTasks makes the worker take at most n tasks, then stop once they
// are over (Run returns nil). Default: 0, no limit.
func WithMaxTasks(n int) WorkerOption {
	return func(w *Worker) error {
		if n < 0 {
			return fmt.Errorf("%w: max tasks %d is negative", ErrInvalid, n)
		}
		w.maxTasks = n
		return nil
	}
}

// WithIdleTimeout makes a worker with WithMaxTasks give up when it took no
// task within d of having read the queue (Run returns ErrNoTask); 0 gives
// up at once when no task can run then. Default: wait as long as it takes.
func WithIdleTimeout(d time.Duration) WorkerOption {
	return func(w *Worker) error {
		if d < 0 {
			return fmt.Errorf("%w: idle timeout %s is negative", ErrInvalid, d)
		}
		w.idle = d
		return nil
	}
}

// WithEvents calls fn when a task starts and when it ends, from the
// goroutine that runs it (fn must be safe for concurrent use). Default:
// none.
func WithEvents(fn func(Event)) WorkerOption {
	return func(w *Worker) error { w.events = fn; return nil }
}

// EventKind says what an Event reports.
type EventKind string

// The kinds of Event.
const (
	// EventStarted: the worker claimed a task and started its work.
	EventStarted EventKind = "started"
	// EventEnded: the task's attempt ended (Task is the task as written
	// after it, nil if another writer settled it first).
	EventEnded EventKind = "ended"
	// EventStopping: the worker asks the work to stop (Err says why).
	EventStopping EventKind = "stopping"
	// EventError: something failed that the worker retries (Err).
	EventError EventKind = "error"
)

// Event is something that happened to a worker's task.
type Event struct {
	Kind EventKind
	// Task is the task as claimed (started, stopping) or as written at the
	// end (ended).
	Task *Task
	// Attempt, Fence and Slot are those of the run.
	Attempt int
	Fence   uint64
	Slot    string
	// Reason and ExitCode are how it ended (ended).
	Reason   string
	ExitCode *int
	Err      error
	// Took is how long the work ran (ended).
	Took time.Duration
}

// Worker runs a queue's tasks with a Handler, at most its concurrency at
// once, and no more than the queue's max_active across all workers. Make
// one with Queues.NewWorker.
type Worker struct {
	qs          *Queues
	q           string
	h           Handler
	concurrency int
	grace       time.Duration
	maxTasks    int
	idle        time.Duration
	events      func(Event)

	interrupt chan struct{}
	once      sync.Once
}

// NewWorker returns a worker of queue q that runs tasks with h.
func (qs *Queues) NewWorker(q string, h Handler, opts ...WorkerOption) (*Worker, error) {
	if err := ValidateName(q); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: a handler is required", ErrInvalid)
	}
	w := &Worker{qs: qs, q: q, h: h, concurrency: 1, grace: DefaultGrace, idle: -1, interrupt: make(chan struct{})}
	for _, o := range opts {
		if err := o(w); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Interrupt makes a draining worker stop its running tasks now instead of
// waiting out the grace (a second Ctrl-C). Idempotent.
func (w *Worker) Interrupt() { w.once.Do(func() { close(w.interrupt) }) }

func (w *Worker) emit(ev Event) {
	if w.events != nil {
		w.events(ev)
	}
}

// Run works the queue until ctx is done, then drains: it takes no new
// task, lets running ones finish within the grace, then stops them and
// puts them back to pending (their attempt not counted), and returns nil.
// It returns early with an error if the queue does not exist
// (ErrQueueNotFound), its watches end (kv.ErrUnavailable), the work of a
// task cannot start (ErrStartFailed, after draining the others), or, with
// WithMaxTasks and WithIdleTimeout, no task came (ErrNoTask).
//
// The workers of a queue elect one of them its dispatcher (an election of
// the leases bucket, DispatchElection), which keeps an index of the queue
// and the key locks from watches and offers each worker what it is to
// claim: what a task costs does not grow with the number of workers, and
// nothing polls (adr/0035). The others watch only their own inbox and the
// queue's config. Claims and ends are the compare-and-sets they always
// were (adr/0020): an offer the view was wrong about loses its claim, as a
// race between workers did.
func (w *Worker) Run(ctx context.Context) error {
	cfg, err := w.qs.Config(ctx, w.q)
	if err != nil {
		return err
	}
	// A worker deletes a token and a key lock for every task: through
	// buckets known to keep one revision per key those deletes need no
	// rollup, which the server pays for with a walk over every watch of
	// the bucket (adr/0038). Not knowing, they keep it.
	_ = w.qs.bucket.LearnHistory(ctx)
	_ = w.qs.m.Bucket().LearnHistory(ctx)
	// The server's time gives the clock offset for backoffs and for the
	// times written into records.
	// (measured again at each renewal of the worker's presence).
	offset, early, err := measureOffset(ctx, w.qs.bucket)
	if err != nil {
		return err
	}
	l := &loop{
		w: w, id: newWorkerID(), cfg: cfg, offset: offset, early: early,
		results: make(chan func(), 64), taken: map[string]uint64{}, running: map[string]*runState{},
		bySlot: map[string]*runState{}, byToken: map[int]*runState{}, recovering: map[string]bool{},
		quit: make(chan struct{}), terms: make(chan term), resign: make(chan struct{}),
		pool: newGoPool(2*w.concurrency + 2),
	}
	l.stampOffset.Store(int64(offset))
	el, err := w.qs.election(w.q, l.id, time.Duration(cfg.TTL))
	if err != nil {
		return err
	}
	wctx, stopWatches := context.WithCancel(context.Background())
	defer stopWatches()
	// One watch for both: an idle worker costs the server one consumer
	// and its heartbeats, not two.
	if l.mine, err = w.qs.bucket.WatchPatterns(wctx, []string{inboxKey(w.q, l.id), configKey(w.q)}); err != nil {
		return err
	}
	if err := l.enter(ctx); err != nil {
		return err
	}
	defer l.leave()
	if err := l.writeHostFile(); err != nil {
		return fmt.Errorf("queue %s: write this worker's pid file: %w", w.q, err)
	}
	defer l.removeHostFile()
	hctx, stopHostWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		l.watchHost(hctx)
	}()
	defer func() {
		stopHostWatch()
		<-watched
	}()
	// The election runs beside the loop, which it hands a term to; it
	// ends with the loop, giving up a term it holds.
	ectx, stopElection := context.WithCancel(context.Background())
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		// Lead returns when a term's work ended for a reason of its own:
		// the worker stopped taking tasks (then it campaigns no more), or
		// it could not start dispatching (the server away just after the
		// term was won): then it stands again, or the queue would be left
		// without a candidate on this worker for good.
		wait := 100 * time.Millisecond
		for {
			began := time.Now()
			err := el.Lead(ectx, func(ctx context.Context, _ *lease.Term) error { return l.lead(ctx) },
				lease.OnCampaignRetry(func(err error, _ time.Duration) {
					w.emit(Event{Kind: EventError, Err: fmt.Errorf("campaign to dispatch queue %s: %w", w.q, err)})
				}))
			select {
			case <-ectx.Done():
				return
			case <-l.resign:
				return
			default:
			}
			if err != nil {
				w.emit(Event{Kind: EventError, Err: fmt.Errorf("campaign to dispatch queue %s: %w; standing again", w.q, err)})
			}
			if time.Since(began) > 10*time.Second {
				wait = 100 * time.Millisecond // a term that lasted: no failure in a row
			}
			select {
			case <-ectx.Done():
				return
			case <-l.resign:
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
		}
	}()
	defer func() {
		stopElection()
		<-elected
	}()
	return l.run(ctx)
}
