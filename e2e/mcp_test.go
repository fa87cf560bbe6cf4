package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// mcpAgent is an agent process (sh) whose child is `baton mcp`, driven
// over stdio by an MCP client of the SDK, as a coding agent's client would.
type mcpAgent struct {
	t      *testing.T
	cmd    *exec.Cmd // sh: the agent
	cs     *mcp.ClientSession
	stderr *syncBuffer

	mu   sync.Mutex
	logs []map[string]any // logging notifications received
}

// mcpAgent starts an agent named name on h, its client connected.
func (h *host) mcpAgent(t *testing.T, name string) *mcpAgent {
	t.Helper()
	// sh stays as baton mcp's parent (no exec): it is the agent.
	cmd := exec.Command("sh", "-c", `"$0" mcp; :`, batonBin)
	cmd.Env = h.environ()
	a := &mcpAgent{t: t, cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = a.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "test"}, &mcp.ClientOptions{
		//lint:ignore SA1019 baton mcp still sends them to clients that ask (ADR 0027)
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			b, _ := json.Marshal(req.Params.Data)
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			a.mu.Lock()
			a.logs = append(a.logs, m)
			a.mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to baton mcp: %v; stderr: %s", err, a.stderr)
	}
	a.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			t.Logf("baton mcp of %s, stderr:\n%s", name, a.stderr)
		}
	})
	return a
}

// call calls tool and returns its result, its structured content and
// whether it is an error result.
func (a *mcpAgent) call(tool string, args map[string]any) (map[string]any, string, bool) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		a.t.Fatalf("%s: protocol error %v", tool, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			a.t.Fatalf("%s: structured content %s: %v", tool, b, err)
		}
	}
	return out, text, res.IsError
}

// mcpPID is the pid of the agent's `baton mcp` child.
func (a *mcpAgent) mcpPID(t *testing.T) int {
	t.Helper()
	pid := a.cmd.Process.Pid
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
	if err != nil {
		t.Fatalf("children of the agent: %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("the agent has children %q, want baton mcp alone", f)
	}
	child, _ := strconv.Atoi(f[0])
	return child
}

func TestMCP_TwoAgentsOneSlotTheSecondIsToldWhoHoldsIt(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a").mcpAgent(t, "agent-a")
	b := w.host("host-b").mcpAgent(t, "agent-b")
	c := w.host("host-a").mcpAgent(t, "agent-c")

	out, text, isErr := a.call("claim_slot", map[string]any{"slot": "repo-main", "task": "T-1", "meta": map[string]string{"branch": "fix-1"}})
	if isErr || out["claimed"] != true {
		t.Fatalf("claim_slot: %s %v", text, out)
	}
	sess := out["session"].(map[string]any)
	if sess["agent_id"] != "agent-a" || sess["host"] != "host-a" || int(sess["pid"].(float64)) != a.cmd.Process.Pid {
		t.Errorf("session %v: want agent agent-a (the client's name) on host-a, held by the agent's pid %d", sess, a.cmd.Process.Pid)
	}
	// Another host: refused, naming the holder.
	out, text, isErr = b.call("claim_slot", map[string]any{"slot": "repo-main", "task": "T-2"})
	if !isErr || out["claimed"] != false || out["reason"] != "other_host" {
		t.Fatalf("second agent's claim_slot: %s %v; want refused, reason other_host", text, out)
	}
	for _, want := range []string{"host host-a", "pid " + strconv.Itoa(a.cmd.Process.Pid), "agent agent-a", "task T-1", "for about", "claim_slot again later"} {
		if !strings.Contains(text, want) {
			t.Errorf("refusal %q does not say %q", text, want)
		}
	}
	if h := out["holder"].(map[string]any); h["task_id"] != "T-1" || h["fence"] != sess["fence"] {
		t.Errorf("holder %v, want task T-1 at fence %v", h, sess["fence"])
	}
	// The same host, another agent: held (its holder, agent-a, is alive).
	if out, text, isErr = c.call("claim_slot", map[string]any{"slot": "repo-main", "task": "T-3"}); !isErr || out["reason"] != "held" {
		t.Errorf("same-host agent's claim_slot: %s %v; want refused, reason held", text, out)
	}
	// who_holds says who, and that it is not the caller's.
	if out, text, _ = b.call("who_holds", map[string]any{"slot": "repo-main"}); out["held"] != true || out["mine"] != false || !strings.Contains(text, "agent agent-a") {
		t.Errorf("who_holds from b: %s %v", text, out)
	}
	if out, _, _ = a.call("who_holds", map[string]any{"slot": "repo-main"}); out["mine"] != true {
		t.Errorf("who_holds from a: %v, want mine", out)
	}
	// list_sessions, filtered.
	out, _, isErr = b.call("list_sessions", map[string]any{"host": "host-a"})
	if rows, _ := out["sessions"].([]any); isErr || len(rows) != 1 || rows[0].(map[string]any)["state"] != "live" {
		t.Errorf("list_sessions host-a: %v", out)
	}
	if out, _, _ = b.call("list_sessions", map[string]any{"agent": "nobody"}); len(out["sessions"].([]any)) != 0 {
		t.Errorf("list_sessions agent nobody: %v", out)
	}
	// heartbeat records progress; release frees the slot for b.
	if out, text, isErr = a.call("heartbeat", map[string]any{"slot": "repo-main", "message": "tests pass"}); isErr || out["session"].(map[string]any)["message"] != "tests pass" {
		t.Errorf("heartbeat: %s %v", text, out)
	}
	if row := w.host("host-x").sessions()["repo-main"]; row == nil || row["message"] != "tests pass" {
		t.Errorf("status after heartbeat: %v", row)
	}
	if _, text, isErr = b.call("heartbeat", map[string]any{"slot": "repo-main"}); !isErr || !strings.Contains(text, "not held") {
		t.Errorf("heartbeat of a slot not held: %s", text)
	}
	if out, text, isErr = a.call("release_slot", map[string]any{"slot": "repo-main", "result": "success"}); isErr || out["released"] != true {
		t.Fatalf("release_slot: %s %v", text, out)
	}
	if out, text, isErr = b.call("claim_slot", map[string]any{"slot": "repo-main", "task": "T-2"}); isErr || out["claimed"] != true {
		t.Errorf("claim_slot after the release: %s %v", text, out)
	}
}

func TestMCP_ToolsAreListedWithSchemasAndBadArgumentsAreErrors(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a").mcpAgent(t, "agent-a")
	ctx := context.Background()
	res, err := a.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		got[tool.Name] = tool
	}
	for _, name := range []string{"claim_slot", "heartbeat", "release_slot", "who_holds", "list_sessions",
		"acquire_lease", "release_lease", "leader", "acquire_permit", "release_permit", "sem_status", "take_rate", "rate_status", "doctor", "queue_add", "queue_status", "queue_get", "queue_pause",
		"reserve_paths", "release_paths", "check_paths", "list_reservations"} {
		tool := got[name]
		if tool == nil {
			t.Errorf("tools/list has no %s", name)
			continue
		}
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s: description %q, input schema %v, output schema %v; want all three", name, tool.Description, tool.InputSchema, tool.OutputSchema)
		}
	}
	in, _ := json.Marshal(got["claim_slot"].InputSchema)
	if !strings.Contains(string(in), `"required":["slot","task"]`) {
		t.Errorf("claim_slot's input schema does not require slot and task: %s", in)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"claim_slot", map[string]any{"task": "T"}, "slot"},
		{"claim_slot", map[string]any{"slot": "s", "task": "T", "ttl_seconds": "ten"}, "ttl_seconds"},
		{"claim_slot", map[string]any{"slot": "bad slot!", "task": "T"}, "invalid"},
		{"claim_slot", map[string]any{"slot": "s", "task": "T", "ttl_seconds": 0.5}, "ttl_seconds"},
		{"release_slot", map[string]any{"slot": "s", "result": "maybe"}, "success or fail"},
		{"list_sessions", map[string]any{"state": "happy"}, "live, stale or expiring"},
		{"acquire_lease", map[string]any{}, "key"},
		{"queue_add", map[string]any{"queue": "q", "key": "k", "priority": "urgent"}, "high, normal or low"},
		{"queue_get", map[string]any{"queue": "q"}, "id"},
		{"queue_add", map[string]any{"queue": "q", "key": "k", "at": "tomorrow"}, "RFC 3339"},
		{"queue_add", map[string]any{"queue": "q", "key": "k", "at": "2026-12-01T09:00:00Z", "in_ms": 5}, "not both"},
		{"claim_slot", map[string]any{"slot": "s", "task": "T", "wait_seconds": 3600}, "0 to 300"},
	} {
		if _, text, isErr := a.call(c.tool, c.args); !isErr || !strings.Contains(text, c.want) {
			t.Errorf("%s %v: error %v, %q; want an error result mentioning %q", c.tool, c.args, isErr, text, c.want)
		}
	}
	// The server is still there.
	if _, text, isErr := a.call("who_holds", map[string]any{"slot": "s"}); isErr || !strings.Contains(text, "free") {
		t.Errorf("who_holds after bad calls: %s", text)
	}
}

func TestMCP_AClaimedSlotIsRenewedWithoutCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("runs past three TTLs")
	}
	w := newWorld(t)
	h := w.host("host-a")
	a := h.mcpAgent(t, "agent-a")
	// A 3s TTL: each renewal has 2s and more to land on a loaded host.
	out, text, isErr := a.call("claim_slot", map[string]any{"slot": "long", "task": "T-1", "ttl_seconds": 3})
	if isErr {
		t.Fatalf("claim_slot: %s", text)
	}
	fence := out["session"].(map[string]any)["fence"]
	time.Sleep(9500 * time.Millisecond) // three TTLs and more, no call: the time is the test
	row := h.sessions()["long"]
	if row == nil || row["fence"] != fence || num(t, row, "renewals") < 6 || row["state"] != "live" {
		t.Fatalf("after 3 TTLs without a call: %v; want the same session (fence %v), renewed at least 6 times", row, fence)
	}
	if out, _, _ = a.call("heartbeat", map[string]any{"slot": "long"}); out["lost_slots"] != nil {
		t.Errorf("heartbeat reports losses: %v", out)
	}
}

func TestMCP_ClosingTheClientClosesTheSession(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	a := h.mcpAgent(t, "agent-a")
	if _, text, isErr := a.call("claim_slot", map[string]any{"slot": "s", "task": "T-1"}); isErr {
		t.Fatalf("claim_slot: %s", text)
	}
	// Close stdin, as an MCP client does on shutdown; baton mcp must close
	// the session and exit by itself (before any SIGTERM).
	if err := a.cs.Close(); err != nil {
		t.Fatalf("baton mcp did not exit cleanly: %v; stderr: %s", err, a.stderr)
	}
	if _, ok := h.sessions()["s"]; ok {
		t.Fatal("the session outlived the client")
	}
	e, err := w.client.Bucket(session.BucketConfig(session.DefaultPrefix, 1)).Latest(context.Background(), "s")
	if err != nil || e.Op != kv.OpDelete || !strings.Contains(string(e.Value), `"result":"fail"`) {
		t.Errorf("tombstone %+v, %v; want a close with result fail", e, err)
	}
}

func TestMCP_KillingTheAgentFreesTheSlotAtOnce(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	a := h.mcpAgent(t, "agent-a")
	if _, text, isErr := a.call("claim_slot", map[string]any{"slot": "s", "task": "T-1", "ttl_seconds": 600}); isErr {
		t.Fatalf("claim_slot: %s", text)
	}
	server := a.mcpPID(t)
	_ = a.cmd.Process.Kill()
	// baton mcp sees its agent go (its stdio is still open: the client
	// holds it), closes the slot with result fail, and ends.
	waitFor(t, 10*time.Second, "baton mcp exits after its agent", func() bool { return !alive(server) })
	e, err := w.client.Bucket(session.BucketConfig(session.DefaultPrefix, 1)).Latest(context.Background(), "s")
	if err != nil || e.Op != kv.OpDelete || !strings.Contains(string(e.Value), `"result":"fail"`) {
		t.Errorf("the slot after its agent was killed: %+v, %v; want a close with result fail", e, err)
	}
	// Another agent of the host takes it at once, long before its 10 min TTL.
	b := h.mcpAgent(t, "agent-b")
	if _, text, isErr := b.call("claim_slot", map[string]any{"slot": "s", "task": "T-2"}); isErr {
		t.Errorf("claim_slot after the agent was killed: %s", text)
	}
}

// A loss a heartbeat finds (before the watch does) is reported, a later
// heartbeat says the slot was lost, and the server still ends cleanly.
func TestMCP_ALossFoundByAHeartbeatEndsCleanly(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	a := h.mcpAgent(t, "agent-a")
	if _, text, isErr := a.call("claim_slot", map[string]any{"slot": "s", "task": "T-1"}); isErr {
		t.Fatalf("claim_slot: %s", text)
	}
	h.must("join", "s", "--task", "T-9", "--force")
	out, text, isErr := a.call("heartbeat", map[string]any{"slot": "s"})
	if !isErr || !strings.Contains(text, "lost") {
		t.Fatalf("heartbeat after a takeover: %s %v; want lost", text, out)
	}
	if _, text, isErr = a.call("heartbeat", map[string]any{"slot": "s"}); !isErr || !strings.Contains(text, "lost slot s earlier") {
		t.Errorf("second heartbeat: %s; want it to say the slot was lost", text)
	}
	if err := a.cs.Close(); err != nil {
		t.Fatalf("baton mcp did not exit by itself after the client closed: %v; stderr: %s", err, a.stderr)
	}
	if row := h.sessions()["s"]; row == nil || row["task_id"] != "T-9" {
		t.Errorf("the new holder's session: %v; want it left alone", row)
	}
}

func TestMCP_UnreachableServerIsAToolErrorAndTheNextCallWorksOnceItIsBack(t *testing.T) {
	addr := kvtest.FreeAddr(t)
	w := &world{t: t, url: "nats://" + addr}
	h := w.host("host-a")
	a := h.mcpAgent(t, "agent-a")
	for tool, args := range map[string]map[string]any{
		"claim_slot":    {"slot": "s", "task": "T-1"},
		"who_holds":     {"slot": "s"},
		"list_sessions": {},
	} {
		_, text, isErr := a.call(tool, args)
		if !isErr || !strings.Contains(text, "try again") {
			t.Errorf("%s without a server: error %v, %q; want a tool error saying to try again", tool, isErr, text)
		}
	}
	s, err := kvserver.Start(kvserver.WithListen(addr), kvserver.WithStoreDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	c := kvtest.Connect(t, s.ClientURL())
	for _, cfg := range []kv.BucketConfig{session.BucketConfig(session.DefaultPrefix, 1), lease.BucketConfig(lease.DefaultPrefix, 1), queue.BucketConfig(session.DefaultPrefix, 1)} {
		if _, err := c.Ensure(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	if out, text, isErr := a.call("claim_slot", map[string]any{"slot": "s", "task": "T-1"}); isErr || out["claimed"] != true {
		t.Fatalf("claim_slot once the server is up: %s %v", text, out)
	}
}

func TestMCP_ASlotLostWhileHeldIsReported(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	a := h.mcpAgent(t, "agent-a")
	//lint:ignore SA1019 baton mcp still sends them to clients that ask (ADR 0027)
	if err := a.cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}
	if _, text, isErr := a.call("claim_slot", map[string]any{"slot": "s", "task": "T-1"}); isErr {
		t.Fatalf("claim_slot: %s", text)
	}
	h.must("join", "s", "--task", "T-9", "--force")
	waitFor(t, 10*time.Second, "a logging notification of the loss", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.logs) > 0
	})
	a.mu.Lock()
	note := a.logs[0]
	a.mu.Unlock()
	if note["event"] != "slot_lost" || note["slot"] != "s" || note["how"] != session.LostTaken {
		t.Errorf("notification %v, want slot_lost of s, taken over", note)
	}
	if !strings.Contains(a.stderr.String(), "stop working on slot s") {
		t.Errorf("stderr does not report the loss: %s", a.stderr)
	}
	out, text, _ := a.call("list_sessions", nil)
	lost, _ := out["lost_slots"].([]any)
	if len(lost) != 1 || lost[0].(map[string]any)["slot"] != "s" || !strings.Contains(text, "LOST slot s") {
		t.Fatalf("next result: %s %v; want slot s among lost_slots", text, out)
	}
	// Reported once; the slot is no longer the agent's.
	if out, _, _ = a.call("list_sessions", nil); out["lost_slots"] != nil {
		t.Errorf("the loss was reported twice: %v", out)
	}
	if _, text, isErr := a.call("heartbeat", map[string]any{"slot": "s"}); !isErr || !strings.Contains(text, "lost slot s earlier") {
		t.Errorf("heartbeat of a lost slot: %s", text)
	}
}

func TestMCP_LeasesLeadersDoctorAndQueues(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	a := h.mcpAgent(t, "agent-a")
	b := w.host("host-b").mcpAgent(t, "agent-b")

	// Leases: one holder, the other told who; released on request.
	out, text, isErr := a.call("acquire_lease", map[string]any{"key": "deploy", "ttl_seconds": 5})
	if isErr || out["acquired"] != true {
		t.Fatalf("acquire_lease: %s %v", text, out)
	}
	out, text, isErr = b.call("acquire_lease", map[string]any{"key": "deploy"})
	if !isErr || out["reason"] != "held" || !strings.Contains(text, "host host-a") || out["holder"].(map[string]any)["host"] != "host-a" {
		t.Errorf("second acquire_lease: %s %v; want refused naming host-a", text, out)
	}
	if row := jsonOf(t, h.must("lease", "get", "deploy", "--json").stdout); num(t, row, "pid") != int64(a.cmd.Process.Pid) {
		t.Errorf("the lease names pid %v, want the agent's, %d", row["pid"], a.cmd.Process.Pid)
	}
	waitFor(t, 20*time.Second, "the lease renewed for a whole TTL", func() bool {
		return num(t, jsonOf(t, h.must("lease", "get", "deploy", "--json").stdout), "renewals") >= 3
	})
	if out, text, isErr = a.call("release_lease", map[string]any{"key": "deploy"}); isErr || out["released"] != true || out["lost_leases"] != nil {
		t.Fatalf("release_lease after a TTL: %s %v", text, out)
	}
	if out, text, isErr = b.call("acquire_lease", map[string]any{"key": "deploy", "wait_seconds": 2}); isErr || out["acquired"] != true {
		t.Errorf("acquire_lease after the release: %s %v", text, out)
	}

	// leader: who leads baton lead KEY, and the candidates.
	h.lead(t, "bot-1", "ledger", nil, nil, "sleep", "300")
	w.awaitLeader(t, "ledger", 10*time.Second, "bot-1 leads", func(in *lease.Info) bool { return in != nil && in.Holder == "bot-1" })
	out, text, isErr = a.call("leader", map[string]any{"key": "ledger"})
	if isErr || out["leader"].(map[string]any)["holder"] != "bot-1" || len(out["candidates"].([]any)) != 1 || !strings.Contains(text, "bot-1") {
		t.Errorf("leader: %s %v", text, out)
	}

	// doctor: a record that does not decode is reported, nothing fixed.
	sessions := w.client.Bucket(session.BucketConfig(session.DefaultPrefix, 1))
	if _, err := sessions.Create(context.Background(), "junk", []byte{0xff, 'x'}, 0); err != nil {
		t.Fatal(err)
	}
	out, text, isErr = a.call("doctor", nil)
	if isErr || out["ok"] != false || !strings.Contains(mustJSON(t, out["findings"]), "undecodable") {
		t.Errorf("doctor: %s %v; want an undecodable finding", text, out)
	}
	if _, err := sessions.Get(context.Background(), "junk"); err != nil {
		t.Errorf("doctor through MCP removed the record (%v); it only reports", err)
	}

	// Queues: add (idempotent by id), status, get; a missing queue is named.
	h.must("queue", "create", "jobs")
	out, text, isErr = a.call("queue_add", map[string]any{"queue": "jobs", "key": "alice", "payload": "hi", "id": "j1"})
	if isErr || out["added"] != true || out["task"].(map[string]any)["state"] != "pending" {
		t.Fatalf("queue_add: %s %v", text, out)
	}
	if out, _, _ = a.call("queue_add", map[string]any{"queue": "jobs", "key": "alice", "id": "j1"}); out["added"] != false {
		t.Errorf("queue_add again: %v, want added false", out)
	}
	out, text, isErr = a.call("queue_add", map[string]any{"queue": "jobs", "key": "bob", "id": "later", "in_ms": 3600000})
	if isErr || out["task"].(map[string]any)["not_before"] == nil {
		t.Fatalf("queue_add in an hour: %s %v; want the task's not_before", text, out)
	}
	if nb, err := time.Parse(time.RFC3339Nano, out["task"].(map[string]any)["not_before"].(string)); err != nil || time.Until(nb) < 59*time.Minute {
		t.Errorf("queue_add in an hour: not_before %v (%v)", out["task"].(map[string]any)["not_before"], err)
	}
	if out, text, isErr = a.call("queue_status", map[string]any{"queue": "jobs"}); isErr || out["waiting"] != float64(2) || out["delayed"] != float64(1) {
		t.Errorf("queue_status: %s %v", text, out)
	}
	// With wait_seconds, the call returns once the task ended: here it
	// does not, no worker runs.
	if out, text, isErr = a.call("queue_add", map[string]any{"queue": "jobs", "key": "carol", "id": "w1", "wait_seconds": 1}); isErr || out["ended"] == true || !strings.Contains(text, "did not end within 1s") {
		t.Errorf("queue_add with a wait and no worker: %s %v", text, out)
	}
	if _, text, isErr = a.call("queue_add", map[string]any{"queue": "jobs", "key": "carol", "wait_seconds": 7200}); !isErr || !strings.Contains(text, "0 to 3600") {
		t.Errorf("queue_add with a wait too long: %s", text)
	}
	if _, text, isErr = a.call("queue_pause", map[string]any{"queue": "jobs", "key": "bob"}); isErr || !strings.Contains(text, "paused") {
		t.Errorf("queue_pause of a key: %s", text)
	}
	if out, text, isErr = a.call("queue_status", map[string]any{"queue": "jobs"}); isErr || out["paused"] != false || mustJSON(t, out["paused_keys"]) != `["bob"]` {
		t.Errorf("queue_status after a key's pause: %s %v", text, out)
	}
	if _, text, isErr = a.call("queue_pause", map[string]any{"queue": "jobs", "key": "bob", "resume": true}); isErr || !strings.Contains(text, "resumed") {
		t.Errorf("queue_pause resume of a key: %s", text)
	}
	// The rates that bound the starts are told.
	h.must("queue", "config", "jobs", "--rate", "100/1m", "--key-rate", "10/1m")
	h.must("queue", "key", "set", "jobs", "alice", "--rate", "30/1m")
	if out, text, isErr = a.call("queue_status", map[string]any{"queue": "jobs"}); isErr || out["rate"] != "100/1m" || out["key_rate"] != "10/1m" || mustJSON(t, out["key_rates"]) != `{"alice":"30/1m"}` {
		t.Errorf("queue_status of a rated queue: %s %v", text, out)
	}
	if _, text, isErr = a.call("queue_pause", map[string]any{"queue": "nosuch"}); !isErr || !strings.Contains(text, "baton queue create") {
		t.Errorf("queue_pause of a missing queue: %s", text)
	}
	if out, text, isErr = a.call("queue_get", map[string]any{"queue": "jobs", "id": "j1"}); isErr || out["task"].(map[string]any)["key"] != "alice" {
		t.Errorf("queue_get: %s %v", text, out)
	}
	if _, text, isErr = a.call("queue_status", map[string]any{"queue": "nosuch"}); !isErr || !strings.Contains(text, "baton queue create") {
		t.Errorf("queue_status of a missing queue: %s", text)
	}
}

func TestMCP_StatusResourceIsReadAndSubscribersAreToldOfChanges(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	updated := make(chan string, 16)
	cmd := exec.Command("sh", "-c", `"$0" mcp; :`, batonBin)
	cmd.Env = h.environ()
	client := mcp.NewClient(&mcp.Implementation{Name: "watcher", Version: "test"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	h.must("join", "s1", "--task", "T-1")
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "baton://status"})
	if err != nil {
		t.Fatal(err)
	}
	doc := jsonOf(t, res.Contents[0].Text)
	if rows, _ := doc["sessions"].([]any); len(rows) != 1 || rows[0].(map[string]any)["slot"] != "s1" || doc["server_time"] == nil {
		t.Fatalf("baton://status: %s", res.Contents[0].Text)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "baton://status"}); err != nil {
		t.Fatal(err)
	}
	h.must("join", "s2", "--task", "T-2")
	select {
	case uri := <-updated:
		if uri != "baton://status" {
			t.Errorf("updated %q", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no updated notification after a join")
	}
	res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "baton://status"})
	if err != nil || !strings.Contains(res.Contents[0].Text, `"s2"`) {
		t.Errorf("status after the notification: %v, %v", res, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Permits: the agent is their holder, the second agent is told the pool
// is full and waits its turn, and a release hands the unit over.
func TestMCP_PermitsOfASemaphore(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.must("sem", "create", "gpu", "--max", "1")
	a := h.mcpAgent(t, "agent-a")
	b := w.host("host-b").mcpAgent(t, "agent-b")
	out, text, isErr := a.call("acquire_permit", map[string]any{"name": "gpu"})
	if isErr || out["acquired"] != true {
		t.Fatalf("acquire_permit: %s %v", text, out)
	}
	permit := out["permit"].(map[string]any)
	if int(permit["pid"].(float64)) != a.cmd.Process.Pid || permit["index"].(float64) != 0 {
		t.Errorf("the permit: %v; want index 0 held by the agent's pid %d", permit, a.cmd.Process.Pid)
	}
	out, text, isErr = b.call("acquire_permit", map[string]any{"name": "gpu"})
	if !isErr || out["reason"] != "full" {
		t.Fatalf("second acquire_permit: %s %v; want refused: full", text, out)
	}
	got := make(chan map[string]any, 1)
	go func() {
		out, _, _ := b.call("acquire_permit", map[string]any{"name": "gpu", "wait_seconds": 20})
		got <- out
	}()
	waitFor(t, 10*time.Second, "agent-b in line", func() bool {
		return len(jsonOf(t, h.must("sem", "status", "gpu", "--json").stdout)["waiters"].([]any)) == 1
	})
	if out, text, isErr = a.call("release_permit", map[string]any{"permit": permit["permit"]}); isErr || out["released"] != true {
		t.Fatalf("release_permit: %s %v", text, out)
	}
	if out := <-got; out["acquired"] != true {
		t.Fatalf("agent-b's wait: %v; want the permit once agent-a released it", out)
	}
}

// Path reservations: two agents given the MCP server cannot hold the same
// files at once; the second is told who holds them, waits its turn, and is
// handed them when the first releases.
func TestMCP_TwoAgentsCannotReserveTheSameFiles(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a").mcpAgent(t, "agent-a")
	b := w.host("host-b").mcpAgent(t, "agent-b")
	out, text, isErr := a.call("reserve_paths", map[string]any{"space": "github.com/acme/app", "patterns": []string{"src/parser/**"}, "task": "T-1"})
	if isErr || out["reserved"] != true {
		t.Fatalf("reserve_paths: %s %v", text, out)
	}
	if r := out["reservation"].(map[string]any); r["fence"].(float64) == 0 {
		t.Fatalf("the reservation: %v; want a fence", r)
	}
	out, text, isErr = b.call("reserve_paths", map[string]any{"space": "github.com/acme/app", "patterns": []string{"src/parser/lexer.go", "docs/**"}})
	if !isErr || out["reason"] != "held" || !strings.Contains(text, "agent agent-a") || !strings.Contains(text, "task T-1") || !strings.Contains(text, "host host-a") {
		t.Fatalf("agent-b's reserve_paths of agent-a's files: %s %v; want refused naming agent-a", text, out)
	}
	cs := out["conflicts"].([]any)
	if len(cs) != 1 || cs[0].(map[string]any)["theirs"] != "src/parser/**" {
		t.Fatalf("conflicts: %v", cs)
	}
	out, _, _ = b.call("check_paths", map[string]any{"space": "github.com/acme/app", "paths": []string{"src/parser/lexer.go", "docs/a.md"}})
	if out["free"] != false {
		t.Fatalf("agent-b's check_paths: %v; want not free", out)
	}
	got := make(chan map[string]any, 1)
	go func() {
		out, _, _ := b.call("reserve_paths", map[string]any{"space": "github.com/acme/app", "patterns": []string{"src/parser/lexer.go"}, "wait_seconds": 20})
		got <- out
	}()
	h := w.host("host-a")
	waitFor(t, 10*time.Second, "agent-b in line", func() bool {
		return strings.Contains(h.must("reserve", "ls", "github.com/acme/app").stdout, "waiting")
	})
	if out, text, isErr = a.call("release_paths", map[string]any{}); isErr || len(out["released"].([]any)) != 1 {
		t.Fatalf("release_paths: %s %v", text, out)
	}
	if out := <-got; out["reserved"] != true {
		t.Fatalf("agent-b's wait: %v; want the paths once agent-a released them", out)
	}
}
