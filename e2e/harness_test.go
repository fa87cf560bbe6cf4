// Package e2e runs the baton binary as a user does, against real NATS
// servers, and checks what a user sees: exit codes, output and effects.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/carry"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

// batonBin is the binary under test, built once by TestMain; qtaskBin is
// the queue tests' task command (e2e/qtask).
var batonBin, qtaskBin, semtaskBin, ratetakerBin, resvtaskBin string

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) != "" {
		os.Exit(helperMain())
	}
	dir, err := os.MkdirTemp("", "baton-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// baton as `make build` makes it: the client program with the full
	// program packed after it (ADR 0030).
	batonBin = filepath.Join(dir, "baton")
	for _, prog := range []struct{ out, tags string }{
		{filepath.Join(dir, "baton-full"), ""},
		{filepath.Join(dir, "baton-client"), "baton_client"},
	} {
		args := []string{"build", "-o", prog.out, "-tags", prog.tags}
		if raceEnabled {
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, "github.com/batonhq/baton/cmd/baton")...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build baton:", err)
			os.Exit(1)
		}
	}
	if err := carry.Pack(batonBin, filepath.Join(dir, "baton-client"), filepath.Join(dir, "baton-full")); err != nil {
		fmt.Fprintln(os.Stderr, "pack baton:", err)
		os.Exit(1)
	}
	// The queue tests' task command: small and without -race, so that
	// starting hundreds of tasks costs little.
	qtaskBin, semtaskBin, ratetakerBin = filepath.Join(dir, "qtask"), filepath.Join(dir, "semtask"), filepath.Join(dir, "ratetaker")
	resvtaskBin = filepath.Join(dir, "resvtask")
	for _, prog := range []struct{ out, pkg string }{{qtaskBin, "qtask"}, {semtaskBin, "semtask"}, {ratetakerBin, "ratetaker"}, {resvtaskBin, "resvtask"}} {
		build := exec.Command("go", "build", "-o", prog.out, "github.com/batonhq/baton/e2e/"+prog.pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build "+prog.pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// world is one test's server and the hosts that use it.
type world struct {
	t      testing.TB
	srv    *kvserver.Server
	url    string
	client *kv.Client
}

// newWorld starts a server and creates baton's buckets on it.
func newWorld(t testing.TB) *world {
	t.Helper()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	for _, cfg := range []kv.BucketConfig{session.BucketConfig(session.DefaultPrefix, 1), lease.BucketConfig(lease.DefaultPrefix, 1), queue.BucketConfig(session.DefaultPrefix, 1),
		sem.BucketConfig(session.DefaultPrefix, 1)} {
		if _, err := c.Ensure(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	return &world{t: t, srv: s, url: s.ClientURL(), client: c}
}

// host is a machine as baton sees it: a host id and a state directory.
type host struct {
	w     *world
	id    string
	state string
	env   []string
}

func (w *world) host(id string) *host {
	return &host{w: w, id: id, state: w.t.TempDir()}
}

// environ is the environment baton runs with on this host.
func (h *host) environ() []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + h.state,
		"BATON_URL=" + h.w.url,
		"BATON_HOST_ID=" + h.id,
		"BATON_STATE_DIR=" + h.state,
		// A race-enabled binary sleeps a second at exit by default; a race
		// it finds still fails the test (exit 66 is no exit the test expects).
		"GORACE=atexit_sleep_ms=0",
	}
	return append(env, h.env...)
}

// result is how a baton process ended.
type result struct {
	code   int
	stdout string
	stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// command returns an unstarted baton process of this host.
func (h *host) command(args ...string) *exec.Cmd {
	cmd := exec.Command(batonBin, args...)
	cmd.Env = h.environ()
	// A process baton failed to stop may hold our output pipes: do not
	// wait for it forever, fail instead.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// baton runs baton to completion.
func (h *host) baton(args ...string) result {
	h.w.t.Helper()
	cmd := h.command(args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.w.t.Fatalf("run baton %v: %v", args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// must runs baton and fails the test unless it exits 0.
func (h *host) must(args ...string) result {
	h.w.t.Helper()
	r := h.baton(args...)
	if r.code != 0 {
		h.w.t.Fatalf("baton %v: %s", args, r)
	}
	return r
}

// expect runs baton and checks its exit code and that stderr mentions each
// of wants.
func (h *host) expect(code int, args []string, wants ...string) result {
	h.w.t.Helper()
	r := h.baton(args...)
	if r.code != code {
		h.w.t.Fatalf("baton %v: want exit %d, got %s", args, code, r)
	}
	for _, want := range wants {
		if !strings.Contains(r.stderr, want) {
			h.w.t.Errorf("baton %v: stderr does not mention %q:\n%s", args, want, r.stderr)
		}
	}
	return r
}

// jsonOf decodes a --json document.
func jsonOf(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return m
}

func num(t testing.TB, m map[string]any, k string) int64 {
	t.Helper()
	v, ok := m[k].(float64)
	if !ok {
		t.Fatalf("%s is %v (%T), want a number in %v", k, m[k], m[k], m)
	}
	return int64(v)
}

// sessions is `baton status --json`'s sessions by slot.
func (h *host) sessions() map[string]map[string]any {
	h.w.t.Helper()
	doc := jsonOf(h.w.t, h.must("status", "--json").stdout)
	out := map[string]map[string]any{}
	for _, row := range doc["sessions"].([]any) {
		r := row.(map[string]any)
		out[r["slot"].(string)] = r
	}
	return out
}

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool { return hostlocal.Process{PID: pid}.Alive() }

// waitFor polls cond every 10ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processState is the state letter of /proc/<pid>/stat.
func processState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// exitCode of a finished command.
func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// interrupt is Ctrl-C.
var interrupt = syscall.SIGINT

// readJSONDoc reads one indented JSON document (up to a line "}").
func readJSONDoc(r *bufio.Reader) (map[string]any, error) {
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		b.WriteString(line)
		if line == "}\n" {
			break
		}
	}
	var m map[string]any
	err := json.Unmarshal([]byte(b.String()), &m)
	return m, err
}
