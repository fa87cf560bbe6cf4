package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// env is a server with baton's buckets and a way to make queue handles
// that act as processes of some host.
type env struct {
	t      testing.TB
	srv    *kvserver.Server
	client *kv.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	e := &env{t: t, srv: s, client: c}
	qs := e.queues("setup")
	if err := qs.Sessions().Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if err := qs.Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// queues is a handle of a process of host, with a state directory of its
// own.
func (e *env) queues(host string, opts ...queue.Option) *queue.Queues {
	e.t.Helper()
	sd, err := hostlocal.OpenStateDir(e.t.TempDir())
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := session.NewManager(e.client, session.WithHostID(host), session.WithStateDir(sd))
	if err != nil {
		e.t.Fatal(err)
	}
	qs, err := queue.New(m, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return qs
}

// create makes queue name with the defaults changed by fn.
func (e *env) create(qs *queue.Queues, name string, fn func(*queue.Config)) queue.Config {
	e.t.Helper()
	cfg := queue.DefaultConfig(name)
	cfg.Backoff = 0
	if fn != nil {
		fn(&cfg)
	}
	out, _, err := qs.Create(context.Background(), cfg)
	if err != nil {
		e.t.Fatalf("create %s: %v", name, err)
	}
	return out
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// running is a worker's Run in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t testing.TB, w *queue.Worker) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop drains the worker and waits for Run to return.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop within 30s")
		return nil
	}
}

// recorder is a handler that records the order tasks start in and, when
// it holds them, lets the test end each one (end).
type recorder struct {
	mu      sync.Mutex
	order   []string // task ids
	keys    []string
	ends    map[string]chan error
	started chan *queue.Task
	hold    bool
}

func newRecorder(hold bool) *recorder {
	return &recorder{started: make(chan *queue.Task, 1024), ends: map[string]chan error{}, hold: hold}
}

func (r *recorder) endOf(id string) chan error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ends[id] == nil {
		r.ends[id] = make(chan error, 1)
	}
	return r.ends[id]
}

func (r *recorder) Work(ctx context.Context, t *queue.Task) error {
	r.mu.Lock()
	r.order = append(r.order, t.ID)
	r.keys = append(r.keys, t.Key)
	r.mu.Unlock()
	end := r.endOf(t.ID)
	r.started <- t
	if !r.hold {
		return nil
	}
	select {
	case err := <-end:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// end makes the held task id return err.
func (r *recorder) end(id string, err error) { r.endOf(id) <- err }

func (r *recorder) Keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

// next waits for the next task to start.
func (r *recorder) next(t testing.TB, within time.Duration) *queue.Task {
	t.Helper()
	select {
	case task := <-r.started:
		return task
	case <-time.After(within):
		t.Fatalf("no task started within %s", within)
		return nil
	}
}

// none checks that no task starts within d.
func (r *recorder) none(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case task := <-r.started:
		t.Fatalf("task %s (key %s) started, want none", task.ID, task.Key)
	case <-time.After(d):
	}
}

// waitState waits until task id is in state s.
func waitState(t testing.TB, qs *queue.Queues, q, id string, s queue.State, within time.Duration) *queue.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	task, err := qs.WaitTask(ctx, q, id, func(t *queue.Task) bool { return t.State == s })
	if err != nil {
		got := "nothing"
		if task != nil {
			got = string(task.State)
		}
		t.Fatalf("task %s: not %s within %s (last seen %s): %v", id, s, within, got, err)
	}
	return task
}

func add(t testing.TB, qs *queue.Queues, q, key, id string, opts ...queue.AddOption) *queue.Task {
	t.Helper()
	task, created, err := qs.Add(context.Background(), q, key, []byte("payload of "+id), append([]queue.AddOption{queue.WithID(id)}, opts...)...)
	if err != nil || !created {
		t.Fatalf("add %s: created %v, %v", id, created, err)
	}
	return task
}
