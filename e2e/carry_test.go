package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The baton file runs its client program; up, ui, mcp and --metrics go to
// the full program it carries (ADR 0030), copied once into the user's
// cache and shared by every later start.
func TestCarry_TheFullProgramIsCopiedOnceAndShared(t *testing.T) {
	h := newWorld(t).host("host-a")
	r := h.must("up", "--help")
	if !strings.Contains(r.stdout, "Run a NATS server with JetStream in the foreground") {
		t.Fatalf("up --help is not the full program's help:\n%s", r)
	}
	copies, _ := filepath.Glob(filepath.Join(h.state, ".cache", "baton", "*", "baton"))
	if len(copies) != 1 {
		t.Fatalf("%d copies of the full program in the cache, want 1: %q", len(copies), copies)
	}
	first, err := os.Stat(copies[0])
	if err != nil {
		t.Fatal(err)
	}
	if r := h.must("help", "mcp"); !strings.Contains(r.stdout, "MCP") {
		t.Fatalf("help mcp:\n%s", r)
	}
	again, err := os.Stat(copies[0])
	if err != nil || !os.SameFile(first, again) {
		t.Errorf("the second start copied the full program again (%v)", err)
	}
	// The client's own verbs never start it.
	if r := h.must("join", "--help"); !strings.Contains(r.stdout, "Take a slot") {
		t.Errorf("join --help:\n%s", r)
	}
}

// The full program runs in the process the caller started (exec keeps the
// pid, which up writes to server.json, lead takes for its own and the
// caller waits on), its supervisors are the client program, and the
// commands it runs do not inherit the variable that told it so.
func TestCarry_TheFullProgramRunsInTheCallersProcess(t *testing.T) {
	h := newWorld(t).host("host-a")
	script := `echo "grandparent $(cut -d' ' -f4 /proc/$PPID/stat)"; echo "supervisor $(readlink /proc/$PPID/exe)"; echo "client-env [$BATON_CLIENT_EXE]"`
	cmd := h.command("run", "s", "--task", "T-1", "--metrics", "127.0.0.1:0", "--", "sh", "-c", script)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if err := cmd.Wait(); err != nil {
		t.Fatalf("baton run --metrics: %v\nstdout: %s\nstderr: %s", err, &out, &errOut)
	}
	if !strings.Contains(errOut.String(), "metrics at http://127.0.0.1:") {
		t.Errorf("run --metrics did not serve metrics (the full program's): stderr %q", &errOut)
	}
	for _, want := range []string{"grandparent " + strconv.Itoa(pid), "supervisor " + batonBin, "client-env []"} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("the command said %q; want a line %q", &out, want)
		}
	}
}

// Where the cache cannot be written, the full program runs from memory.
func TestCarry_AnUnwritableCacheRunsFromMemory(t *testing.T) {
	h := newWorld(t).host("host-a")
	h.env = append(h.env, "XDG_CACHE_HOME=/proc/baton-cannot-write-here")
	if r := h.must("up", "--help"); !strings.Contains(r.stdout, "Run a NATS server with JetStream in the foreground") {
		t.Fatalf("up --help:\n%s", r)
	}
}
