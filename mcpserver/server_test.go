package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/mcpserver"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/waitline"
)

// env is a server, a Conn of it and an MCP server serving that Conn to an
// in-memory client.
type env struct {
	srv    *kvserver.Server
	conn   *mcpserver.Conn
	cs     *mcp.ClientSession
	served chan error
	stop   context.CancelFunc
}

func newEnv(t *testing.T, s *kvserver.Server) *env {
	t.Helper()
	c := kvtest.Connect(t, s.ClientURL())
	sd, err := hostlocal.OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(c, session.WithHostID("h1"), session.WithStateDir(sd))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	ls, err := lease.New(c, lease.WithHostID("h1"), lease.WithInstance("agent-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	ss, err := sem.New(c, sem.WithHostID("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	rl, err := rate.New(c)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := reserve.New(c, reserve.WithHostID("h1"))
	if err != nil {
		t.Fatal(err)
	}
	conn := &mcpserver.Conn{Sessions: m, Leases: ls, Sems: ss, Limiters: rl, Spaces: sp}
	srv, err := mcpserver.New(func(context.Context) (*mcpserver.Conn, error) { return conn, nil }, mcpserver.WithCloseTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx, stop := context.WithCancel(context.Background())
	e := &env{srv: s, conn: conn, served: make(chan error, 1), stop: stop}
	go func() { e.served <- srv.Serve(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.cs = cs
	t.Cleanup(func() { stop(); _ = cs.Close() })
	return e
}

func (e *env) call(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err.Error(), true
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	return text, res.IsError
}

// Stopping the server ends a call that is waiting (here for a lease held
// by another instance) rather than waiting for it, and Serve returns.
func TestServe_StopEndsACallStillWaiting(t *testing.T) {
	e := newEnv(t, kvtest.StartServer(t))
	other, err := lease.New(kvtest.Connect(t, e.srv.ClientURL()), lease.WithHostID("h2"), lease.WithInstance("other"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := other.TryAcquire(context.Background(), "deploy", lease.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	consumers := func() int {
		js, err := jetstream.New(e.conn.Sessions.Bucket().Client().Conn())
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(context.Background(), "KV_"+lease.BucketConfig(lease.DefaultPrefix, 1).Name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	before := consumers()
	answered := make(chan string, 1)
	go func() {
		text, _ := e.call(t, "acquire_lease", map[string]any{"key": "deploy", "wait_seconds": 120})
		answered <- text
	}()
	// The call waits: its watch of the lease is there.
	for deadline := time.Now().Add(10 * time.Second); consumers() <= before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call never started waiting")
		}
	}
	e.stop()
	select {
	case err := <-e.served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve waited for a call of 120 s")
	}
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call never ended")
	}
}

// A release the baton server does not answer is said to be pending, and
// done in the background once the server is back.
func TestRelease_UnansweredIsRetriedInTheBackground(t *testing.T) {
	addr := kvtest.FreeAddr(t)
	store := t.TempDir()
	s1, err := kvserver.Start(kvserver.WithListen(addr), kvserver.WithStoreDir(store))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, s1)
	if text, isErr := e.call(t, "claim_slot", map[string]any{"slot": "s", "task": "T", "ttl_seconds": 60}); isErr {
		t.Fatalf("claim_slot: %s", text)
	}
	s1.Shutdown()
	text, isErr := e.call(t, "release_slot", map[string]any{"slot": "s"})
	if !isErr || !strings.Contains(text, "keeps trying to close it") {
		t.Fatalf("release_slot without a server: %v %s; want it pending", isErr, text)
	}
	s2, err := kvserver.Start(kvserver.WithListen(addr), kvserver.WithStoreDir(store))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Shutdown()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := e.conn.Sessions.Get(context.Background(), "s")
		if errors.Is(err, session.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot is still there 20 s after the server came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// claim_slot with wait_seconds waits its turn in the slot's line and
// claims the slot once its holder closes it; a wait that runs out says so.
func TestClaim_WaitsInLineForAHeldSlot(t *testing.T) {
	e := newEnv(t, kvtest.StartServer(t))
	ctx := context.Background()
	sd, err := hostlocal.OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := session.NewManager(kvtest.Connect(t, e.srv.ClientURL()), session.WithHostID("h2"), session.WithStateDir(sd))
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.Join(ctx, "s", "T-other", session.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	text, isErr := e.call(t, "claim_slot", map[string]any{"slot": "s", "task": "T", "wait_seconds": 0.3})
	if !isErr || !strings.Contains(text, "after waiting 300ms in line") || !strings.Contains(text, "task T-other") {
		t.Fatalf("claim_slot that waited 0.3 s: %v %s; want refused, saying it waited and who holds it", isErr, text)
	}
	answered := make(chan string, 1)
	go func() {
		text, isErr := e.call(t, "claim_slot", map[string]any{"slot": "s", "task": "T", "wait_seconds": 20})
		if isErr {
			text = "refused: " + text
		}
		answered <- text
	}()
	self, err := hostlocal.Self()
	if err != nil {
		t.Fatal(err)
	}
	line := waitline.New(e.conn.Sems.Bucket(), "wait.slot.s", "h9", self)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ws, err := line.Waiters(ctx); err == nil && len(ws) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim is not in line within 10 s")
		}
	}
	if err := other.Close(ctx, held, session.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	if text := <-answered; !strings.Contains(text, "claimed slot s") {
		t.Fatalf("claim_slot waiting in line: %s", text)
	}
}

// queue_add with wait_seconds returns once the task ended, with its exit
// code and its result.
func TestQueueAdd_WaitsForTheResult(t *testing.T) {
	s := kvtest.StartServer(t)
	e := newEnv(t, s)
	qs, err := queue.New(e.conn.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	if err := qs.Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cfg := queue.DefaultConfig("jobs")
	cfg.MaxAttempts = 1
	if _, _, err := qs.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	e.conn.Queues = qs
	w, err := qs.NewWorker("jobs", queue.ResultFunc(func(ctx context.Context, task *queue.Task) ([]byte, error) {
		if string(task.Payload) == "fail" {
			return []byte("went wrong"), &exit7{}
		}
		return []byte("summary of " + string(task.Payload)), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	res, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "queue_add", Arguments: map[string]any{"queue": "jobs", "key": "k", "payload": "pr-42", "wait_seconds": 20}})
	if err != nil || res.IsError {
		t.Fatalf("queue_add: %v %+v", err, res)
	}
	out, _ := json.Marshal(res.StructuredContent)
	var got mcpserver.QueueAddOutput
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Ended || got.ExitCode == nil || *got.ExitCode != 0 || got.Result != "summary of pr-42" {
		t.Errorf("queue_add with a wait: %s; want ended, exit 0, the result", out)
	}
	text, isErr := e.call(t, "queue_add", map[string]any{"queue": "jobs", "key": "k", "payload": "fail", "wait_seconds": 20})
	if isErr || !strings.Contains(text, "ended dead (exit 7)") {
		t.Errorf("queue_add of a task that fails, with a wait: %q", text)
	}
}

type exit7 struct{}

func (exit7) Error() string { return "exit status 7" }
func (exit7) ExitCode() int { return 7 }
