package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/natsctx/natsclitest"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/session"
)

// watcher is a running `baton status --watch --json` whose events can be
// awaited.
type watcher struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	mu     sync.Mutex
	events []map[string]any
	more   chan struct{}
}

func (h *host) watch(t *testing.T) *watcher { return h.watchWithStderr(t) }

// watchWithStderr is watch, keeping what the watcher says on stderr.
func (h *host) watchWithStderr(t *testing.T) *watcher {
	t.Helper()
	cmd := h.command("status", "--watch", "--json")
	out, _ := cmd.StdoutPipe()
	errs := &syncBuffer{}
	cmd.Stderr = errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watcher{cmd: cmd, stderr: errs, more: make(chan struct{}, 1)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			w.mu.Lock()
			w.events = append(w.events, ev)
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
		}
	}()
	w.await(t, "synced", "", 10*time.Second)
	return w
}

// await waits for an event of kind about slot and returns it.
func (w *watcher) await(t *testing.T, kind, slot string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.After(within)
	seen := 0
	for {
		w.mu.Lock()
		for ; seen < len(w.events); seen++ {
			ev := w.events[seen]
			if ev["event"] == kind && (slot == "" || ev["slot"] == slot || ev["key"] == slot) {
				w.mu.Unlock()
				return ev
			}
		}
		w.mu.Unlock()
		select {
		case <-w.more:
		case <-deadline:
			t.Fatalf("no %s event for %q within %s; saw %v", kind, slot, within, w.events)
		}
	}
}

func TestCommit_KeepsASessionPastSeveralTTLsThenItExpires(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	watch := h.watch(t)
	// A TTL of 3s leaves each `baton commit` (a process start) 2.5s of
	// margin on a loaded host.
	const ttl = 3 * time.Second
	h.must("join", "short", "--task", "T-1", "--ttl", ttl.String())
	watch.await(t, "join", "short", 5*time.Second)
	// Renew every 500ms until more than three TTLs have passed.
	var last map[string]any
	commits := 0
	for start := time.Now(); time.Since(start) < 3*ttl+time.Second; {
		time.Sleep(500 * time.Millisecond)
		last = jsonOf(t, h.must("commit", "short", "-m", "working", "--json").stdout)
		commits++
	}
	if num(t, last, "renewals") != int64(commits) || last["message"] != "working" {
		t.Fatalf("after %d commits: %v", commits, last)
	}
	row := h.sessions()["short"]
	if row == nil || row["state"] != "live" {
		t.Fatalf("status after commits: %v", row)
	}
	watch.await(t, "commit", "short", 5*time.Second)
	// Stop committing: it expires, and status and watchers see it go.
	ev := watch.await(t, "expire", "short", ttl+5*time.Second)
	if s, _ := ev["session"].(map[string]any); s == nil || s["fence"] != last["fence"] {
		t.Errorf("expire event %v, want the session's last version", ev)
	}
	if _, ok := h.sessions()["short"]; ok {
		t.Error("status still lists the expired session")
	}
	// A renewal after expiry fails (3) and brings nothing back.
	h.expect(3, []string{"commit", "short"}, "expired", "join it again")
	if _, ok := h.sessions()["short"]; ok {
		t.Error("a late commit resurrected the session")
	}
}

func TestCommit_AfterTakeoverIsExit3AndForeignHostIs4(t *testing.T) {
	w := newWorld(t)
	a := w.host("host-a")
	old := jsonOf(t, a.must("join", "s", "--task", "T-1", "--json").stdout)
	a.must("join", "s", "--task", "T-2", "--force")
	// The replaced holder commits with its fence: refused, the new session untouched.
	a.expect(3, []string{"commit", "s", "--fence", strings.TrimSuffix(jsonNumber(old["fence"]), ".0")}, "taken over")
	if row := a.sessions()["s"]; row["task_id"] != "T-2" || num(t, row, "renewals") != 0 {
		t.Errorf("new session changed by the stale commit: %v", row)
	}
	b := w.host("host-b")
	b.expect(4, []string{"commit", "s"}, "belongs to host host-a")
	b.expect(4, []string{"close", "s"}, "belongs to host host-a")
	b.expect(5, []string{"commit", "never-joined"}, "join it first")
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestClose_IsIdempotentAndStrictSaysNotFound(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	watch := h.watch(t)
	h.must("join", "s", "--task", "T-1")
	r := h.must("close", "s", "--result", "fork")
	if !strings.Contains(r.stdout, "closed s") {
		t.Errorf("close said %q", r.stdout)
	}
	ev := watch.await(t, "close", "s", 5*time.Second)
	if s := ev["session"].(map[string]any); s["result"] != "fork" {
		t.Errorf("close event %v, want result fork", ev)
	}
	if r := h.must("close", "s"); !strings.Contains(r.stdout, "nothing to close") {
		t.Errorf("second close said %q", r.stdout)
	}
	h.expect(5, []string{"close", "s", "--strict"}, "nothing to close")
	h.expect(5, []string{"close", "never", "--strict"}, "no session")
}

func TestStatus_ListsEverySessionWithServerTimes(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	a.must("join", "one", "--task", "T-1", "--ttl", "60s", "--meta", "repo=spark")
	b.must("join", "two", "--task", "T-2", "--ttl", "120s", "--agent", "bot")
	doc := jsonOf(t, a.must("status", "--json").stdout)
	for _, k := range []string{"sessions", "leases", "leaders", "server_time"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("status --json lacks %q: %v", k, doc)
		}
	}
	rows := a.sessions()
	if len(rows) != 2 {
		t.Fatalf("status lists %d sessions, want 2", len(rows))
	}
	for slot, ttl := range map[string]int64{"one": 60000, "two": 120000} {
		r := rows[slot]
		age, left := num(t, r, "age_ms"), num(t, r, "ttl_left_ms")
		if age < 0 || left <= 0 || age+left != ttl || num(t, r, "ttl_ms") != ttl || r["state"] != "live" {
			t.Errorf("%s: age %d + left %d != ttl %d, or not live: %v", slot, age, left, ttl, r)
		}
		if num(t, r, "revision") < 1 || num(t, r, "fence") < 1 {
			t.Errorf("%s: revision and fence missing: %v", slot, r)
		}
	}
	if rows["one"]["meta"].(map[string]any)["repo"] != "spark" || rows["two"]["host"] != "host-b" || rows["two"]["agent_id"] != "bot" {
		t.Errorf("records not shown whole: %v", rows)
	}
	table := a.must("status").stdout
	for _, want := range []string{"SLOT", "one", "two", "host-b", "live"} {
		if !strings.Contains(table, want) {
			t.Errorf("status table lacks %q:\n%s", want, table)
		}
	}
}

func TestUp_ServesFindsItselfAndStopsCleanly(t *testing.T) {
	h := &host{w: &world{t: t}, id: "host-a", state: t.TempDir()}
	up := exec.Command(batonBin, "up", "--listen", "127.0.0.1:-1")
	up.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + h.state, "BATON_STATE_DIR=" + h.state, "BATON_HOST_ID=host-a", "GORACE=atexit_sleep_ms=0"}
	out, _ := up.StdoutPipe()
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Process.Kill(); up.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, "serving nats://127.0.0.1:") {
		t.Fatalf("baton up said %q, %v", line, err)
	}
	// No --server: commands find the server through the state directory.
	run := func(args ...string) result {
		cmd := exec.Command(batonBin, args...)
		cmd.Env = up.Env
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		return result{code: exitCode(cmd.Run()), stdout: o.String(), stderr: e.String()}
	}
	if r := run("join", "s", "--task", "T-1"); r.code != 0 {
		t.Fatalf("join against baton up: %s", r)
	}
	if r := run("doctor"); r.code != 0 || !strings.Contains(r.stdout, "no problems") {
		t.Errorf("doctor against baton up: %s", r)
	}
	if r := run("up", "--listen", "127.0.0.1:-1"); r.code != 3 || !strings.Contains(r.stderr, "already runs") {
		t.Errorf("second baton up on the same state dir: %s", r)
	}
	up.Process.Signal(interrupt)
	done := make(chan error, 1)
	go func() { _, _ = io.Copy(io.Discard, out); done <- up.Wait() }()
	select {
	case err := <-done:
		if exitCode(err) != 0 {
			t.Errorf("baton up exited %v on SIGINT", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("baton up did not stop on SIGINT")
	}
	if r := run("status"); r.code != 6 {
		t.Errorf("status after baton up stopped: %s, want exit 6", r)
	}
}

func TestCommit_AfterAnotherHostTookTheExpiredSlotIsExit3(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	watch := a.watch(t)
	a.must("join", "s", "--task", "T-1", "--ttl", "1s")
	watch.await(t, "expire", "s", 5*time.Second)
	b.must("join", "s", "--task", "T-2")
	// host-a had the slot: its renewal is lost (3), not merely refused (4).
	a.expect(3, []string{"commit", "s"}, "taken over", "host host-b")
	a.expect(3, []string{"close", "s"}, "taken over")
	if row := b.sessions()["s"]; row == nil || row["host"] != "host-b" || num(t, row, "renewals") != 0 {
		t.Errorf("host-b's session was touched: %v", row)
	}
	// A host that never held it is refused as before.
	w.host("host-c").expect(4, []string{"commit", "s"}, "belongs to host host-b")
}

func TestConnect_NatsContextNamesTheServer(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	natsclitest.Save(t, filepath.Join(h.state, ".config"), "dev", "--server", w.url)
	// No BATON_URL: the context alone says where the server is. (Like the
	// nats CLI, contexts live under $XDG_CONFIG_HOME/nats, else under the
	// user's home directory from the passwd database.)
	env := []string{"XDG_CONFIG_HOME=" + filepath.Join(h.state, ".config")}
	for _, kv := range h.environ() {
		if !strings.HasPrefix(kv, "BATON_URL=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(batonBin, "join", "s", "--task", "T-1", "--context", "dev")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("join --context dev: %v\n%s", err, out)
	}
	cmd = exec.Command(batonBin, "status", "--json")
	cmd.Env = append(env, "NATS_CONTEXT=dev")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), `"slot": "s"`) {
		t.Errorf("status with NATS_CONTEXT=dev: %v\n%s", err, out)
	}
	cmd = exec.Command(batonBin, "status", "--context", "nope")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); exitCode(err) != 2 || !strings.Contains(string(out), "nope") {
		t.Errorf("unknown context: exit %d, %s; want 2 naming it", exitCode(err), out)
	}
}

func TestHelp_EveryVerbHasAnExampleAndCompletionWorks(t *testing.T) {
	h := (&world{t: t, url: "nats://127.0.0.1:1"}).host("host-a")
	for _, verb := range []string{"up", "join", "commit", "close", "run", "status", "doctor"} {
		r := h.baton(verb, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "baton "+verb) {
			t.Errorf("baton %s --help: %s", verb, r)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if r := h.baton("completion", shell); r.code != 0 || !strings.Contains(r.stdout, "baton") {
			t.Errorf("baton completion %s: exit %d", shell, r.code)
		}
	}
	if r := h.baton("--help"); r.code != 0 || strings.Contains(r.stdout, "__supervise") {
		t.Errorf("baton --help shows the hidden verb or fails: %s", r)
	}
}

func TestStatusWatch_SaysWhenTheServerGoesAndComesBack(t *testing.T) {
	store := t.TempDir()
	s1, err := kvserver.Start(kvserver.WithListen("127.0.0.1:-1"), kvserver.WithStoreDir(store))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Shutdown()
	c := kvtest.Connect(t, s1.ClientURL())
	for _, cfg := range []kv.BucketConfig{session.BucketConfig(session.DefaultPrefix, 1), lease.BucketConfig(lease.DefaultPrefix, 1)} {
		if _, err := c.Ensure(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	w := &world{t: t, srv: s1, url: s1.ClientURL()}
	h := w.host("host-a")
	watch := h.watchWithStderr(t)
	h.must("join", "before", "--task", "T-1")
	watch.await(t, "join", "before", 5*time.Second)

	s1.Shutdown()
	watch.await(t, "disconnected", "", 10*time.Second)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(w.url, "nats://"))
	s2, err := kvserver.Start(kvserver.WithListen("127.0.0.1:"+port), kvserver.WithStoreDir(store))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Shutdown()
	watch.await(t, "reconnected", "", 15*time.Second)
	h.must("join", "after", "--task", "T-2")
	watch.await(t, "join", "after", 10*time.Second)
	if !strings.Contains(watch.stderr.String(), "lost the connection to "+w.url) {
		t.Errorf("stderr does not say the connection was lost: %q", watch.stderr.String())
	}
}
