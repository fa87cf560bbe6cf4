package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReserve_CLI: reserve, a refusal naming the holder, all or nothing,
// shared and exclusive, ls, check, a waiter served on release, renew and
// release, and bad input.
func TestReserve_CLI(t *testing.T) {
	w := newWorld(t)
	h1, h2 := w.host("h1"), w.host("h2")
	h1.expect(2, []string{"reserve", "app"}, "at least one pattern")
	h1.expect(2, []string{"reserve", "app", "/etc/passwd"}, "absolute")
	h1.expect(2, []string{"reserve", "app", "../x"}, "..")
	h1.expect(2, []string{"reserve", "app", "src/**", "--ttl", "500ms"}, "whole number of seconds")

	a := jsonOf(t, h1.must("reserve", "app", "src/parser/**", "docs/api.md", "--agent", "alice", "--task", "T-1", "--json").stdout)
	if a["host"] != "h1" || a["agent"] != "alice" || num(t, a, "fence") == 0 || a["shared"] != false {
		t.Fatalf("reserve: %v", a)
	}
	// All or nothing: one of three patterns is held, none is taken.
	r := h2.expect(3, []string{"reserve", "app", "lib/**", "src/parser/lexer.go", "README.md", "--agent", "bob"},
		"src/parser/lexer.go is reserved exclusively by agent alice, task T-1, host h1", "as src/parser/**", "nothing was reserved", "--wait")
	if strings.Contains(r.stderr, "lib/**") || strings.Contains(r.stderr, "README.md") {
		t.Errorf("the refusal names patterns that are free:\n%s", r.stderr)
	}
	st := jsonOf(t, h2.must("reserve", "ls", "app", "--json").stdout)
	if rs := st["reservations"].([]any); len(rs) != 1 || rs[0].(map[string]any)["id"] != a["id"] || rs[0].(map[string]any)["state"] != "held" {
		t.Fatalf("after a refused request: %v; want alice's alone", st)
	}
	// Shared: with shared, yes; over exclusive, no.
	h2.must("reserve", "app", "README.md", "--shared")
	h1.must("reserve", "app", "README.md", "--shared")
	h1.expect(3, []string{"reserve", "app", "README.md"}, "reserved shared")
	h2.expect(3, []string{"reserve", "app", "docs/**", "--shared"}, "docs/** is reserved exclusively", "as docs/api.md")

	// check: exit 3 naming the holder; the holder's own pass.
	h2.expect(3, []string{"reserve", "check", "app", "src/parser/x.go", "Makefile"}, "src/parser/x.go is reserved exclusively by agent alice")
	h2.must("reserve", "check", "app", "Makefile", "src/main.go")
	h2.must("reserve", "check", "app", "README.md", "--shared") // reading what others share
	cmd := h2.command("reserve", "check", "app", "--stdin")
	cmd.Stdin = strings.NewReader("Makefile\x00src/parser/x.go\x00")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Run(); exitCode(err) != 3 || !strings.Contains(errOut.String(), "alice") {
		t.Fatalf("check --stdin: exit %d, %s", exitCode(err), errOut.String())
	}

	// A waiter is handed the paths by the release.
	waiter := h2.command("reserve", "app", "src/parser/lexer.go", "--wait", "20s", "--json")
	var out bytes.Buffer
	waiter.Stdout = &out
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the waiter in line", func() bool {
		return strings.Contains(h1.must("reserve", "ls", "app").stdout, "waiting")
	})
	h1.expect(3, []string{"reserve", "app", "src/parser/lexer.go"}, "waited for first", "reserved exclusively by agent alice")
	h1.must("reserve", "renew", "app", a["id"].(string))
	if r := h1.must("reserve", "release", "app", a["id"].(string)); !strings.Contains(r.stdout, "released app") {
		t.Fatalf("release: %s", r)
	}
	if err := waiter.Wait(); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	b := jsonOf(t, out.String())
	if num(t, b, "fence") <= num(t, a, "fence") || b["host"] != "h2" {
		t.Fatalf("the waiter's reservation: %v (first: %v)", b, a)
	}
	if r := h1.must("reserve", "release", "app", a["id"].(string)); !strings.Contains(r.stdout, "nothing to release") {
		t.Fatalf("release again: %s", r)
	}
	h1.expect(3, []string{"reserve", "renew", "app", a["id"].(string)}, "no reservation", "reserve the paths again")
	h2.expect(3, []string{"reserve", "app", "src/**", "--wait", "300ms"}, "waited 300ms", "src/parser/lexer.go")

	all := h1.must("reserve", "ls").stdout
	if !strings.Contains(all, "app") {
		t.Fatalf("ls of every space:\n%s", all)
	}
}

// TestReserve_RunHoldsWhileTheCommandRuns: reserve run sets the
// environment, holds the paths while CMD runs, exits with CMD's code and
// releases.
func TestReserve_RunHoldsWhileTheCommandRuns(t *testing.T) {
	w := newWorld(t)
	h1, h2 := w.host("h1"), w.host("h2")
	dir := t.TempDir()
	gate, env := filepath.Join(dir, "go"), filepath.Join(dir, "env")
	run := h1.command("reserve", "run", "app", "src/**", "--ttl", "3s", "--", "sh", "-c",
		`echo "$BATON_SPACE $BATON_RESERVATION $BATON_FENCE" > `+env+`; while [ ! -e `+gate+` ]; do sleep 0.05; done; exit 7`)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Process.Kill(); _ = run.Wait() })
	waitFor(t, 10*time.Second, "the command running", func() bool { b, _ := os.ReadFile(env); return len(b) > 0 })
	b, _ := os.ReadFile(env)
	f := strings.Fields(string(b))
	if len(f) != 3 || f[0] != "app" || f[2] == "0" {
		t.Fatalf("the command's environment: %q", b)
	}
	time.Sleep(2 * time.Second) // past a renewal: the reservation outlives its first TTL's third
	h2.expect(3, []string{"reserve", "app", "src/a.go"}, "src/a.go is reserved exclusively by host h1")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run.Wait(); exitCode(err) != 7 {
		t.Fatalf("reserve run: exit %d, want the command's 7", exitCode(err))
	}
	h2.must("reserve", "app", "src/a.go")
	h1.expect(2, []string{"reserve", "run", "app", "--", "true"}, "at least one pattern")
}

// TestReserve_PreCommitHook: the hook of deploy/git-hooks refuses a commit
// of a path another agent reserved, and lets the holder's own pass, in a
// real git repository.
func TestReserve_PreCommitHook(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: the hook is tested in a real repository")
	}
	w := newWorld(t)
	h := w.host("h1")
	repo := t.TempDir()
	hook, err := filepath.Abs("../deploy/git-hooks/pre-commit")
	if err != nil {
		t.Fatal(err)
	}
	git := func(env []string, args ...string) (string, int) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(h.environ(), append([]string{"BATON=" + batonBin, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x"}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), exitCode(err)
	}
	mustGit := func(args ...string) {
		if out, code := git(nil, args...); code != 0 {
			t.Fatalf("git %v: exit %d\n%s", args, code, out)
		}
	}
	mustGit("init", "-q")
	mustGit("config", "baton.space", "github.com/acme/app")
	hooks := filepath.Join(repo, ".git", "hooks")
	data, err := os.ReadFile(hook)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hooks, "pre-commit"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"src/a.go", "src/b.go", "docs/x.md"} {
		writeTree(t, filepath.Join(repo, f), "v1\n")
	}
	mustGit("add", ".")
	mustGit("commit", "-q", "-m", "first")

	// Agent alice is a shell that reserves src/a.go and waits; it
	// commits when told, through the hook, as its own descendant.
	dir := t.TempDir()
	reserved, commit, done := filepath.Join(dir, "reserved"), filepath.Join(dir, "commit"), filepath.Join(dir, "done")
	alice := exec.Command("sh", "-c", `set -e
"$BATON" reserve github.com/acme/app src/a.go --agent alice > `+reserved+`
while [ ! -e `+commit+` ]; do sleep 0.05; done
echo v3 > src/a.go && git add src/a.go && git commit -q -m alice > `+done+` 2>&1 || { echo "exit $?" >> `+done+`; exit 1; }
echo ok >> `+done)
	alice.Dir = repo
	alice.Env = append(h.environ(), "BATON="+batonBin, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x")
	if err := alice.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alice.Process.Kill(); _ = alice.Wait() })
	waitFor(t, 10*time.Second, "alice's reservation", func() bool { b, _ := os.ReadFile(reserved); return len(b) > 0 })

	// Bob (this test's own process tree) may not commit src/a.go ...
	writeTree(t, filepath.Join(repo, "src/a.go"), "bob's\n")
	mustGit("add", "src/a.go")
	out, code := git(nil, "commit", "-q", "-m", "bob")
	if code == 0 || !strings.Contains(out, "src/a.go is reserved exclusively by agent alice") || !strings.Contains(out, "commit refused") {
		t.Fatalf("bob's commit of alice's path: exit %d\n%s", code, out)
	}
	// ... but may commit a free one.
	mustGit("reset", "-q", "src/a.go")
	mustGit("checkout", "src/a.go")
	writeTree(t, filepath.Join(repo, "src/b.go"), "v2\n")
	mustGit("add", "src/b.go")
	mustGit("commit", "-q", "-m", "bob's own")
	// A deletion of a reserved path is an edit too.
	mustGit("rm", "-q", "src/a.go")
	if out, code := git(nil, "commit", "-q", "-m", "bob deletes"); code == 0 || !strings.Contains(out, "alice") {
		t.Fatalf("bob's delete of alice's path: exit %d\n%s", code, out)
	}
	mustGit("reset", "-q", "HEAD", "src/a.go")
	mustGit("checkout", "src/a.go")

	// Alice commits her own path through the same hook.
	if err := os.WriteFile(commit, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := alice.Wait(); err != nil {
		b, _ := os.ReadFile(done)
		t.Fatalf("alice's commit of her own path: %v\n%s", err, b)
	}
	// With the server gone, the hook refuses rather than let anything through.
	w.srv.Shutdown()
	writeTree(t, filepath.Join(repo, "docs/x.md"), "v2\n")
	mustGit("add", "docs/x.md")
	if out, code := git(nil, "commit", "-q", "-m", "offline"); code == 0 || !strings.Contains(out, "could not check reservations") {
		t.Fatalf("a commit with the server down: exit %d\n%s", code, out)
	}
	if out, code := git([]string{"BATON_HOOK_FAIL_OPEN=1"}, "commit", "-q", "-m", "offline"); code != 0 {
		t.Fatalf("BATON_HOOK_FAIL_OPEN=1: exit %d\n%s", code, out)
	}
}

func writeTree(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReserve_QueueTasksTouchPaths: queue add --touches: tasks of three
// keys on two workers of two hosts; the two whose paths overlap never run
// at once, the third runs beside the first, and each holds its paths in
// the space while it runs, named by its task.
func TestReserve_QueueTasksTouchPaths(t *testing.T) {
	w := newWorld(t)
	h1, h2 := w.host("h1"), w.host("h2")
	h1.must("queue", "create", "q")
	h1.expect(2, []string{"queue", "add", "q", "--key", "a", "--touches", "../x"}, "--touches", "..")
	h1.expect(2, []string{"queue", "add", "q", "--key", "a", "--space", "app"}, "give the paths too")
	dir := t.TempDir()
	// Each task marks its start, waits for its release file, marks its end.
	script := `echo start > ` + dir + `/$BATON_TASK.start; while [ ! -e ` + dir + `/$BATON_TASK.go ]; do sleep 0.02; done; echo end > ` + dir + `/$BATON_TASK.end`
	for _, h := range []*host{h1, h2} {
		h.startWorker(t, "q", "--concurrency", "3", "--", "sh", "-c", script)
	}
	started := func(id string) bool { _, err := os.Stat(filepath.Join(dir, id+".start")); return err == nil }
	release := func(id string) {
		if err := os.WriteFile(filepath.Join(dir, id+".go"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h1.must("queue", "add", "q", "--key", "a", "--id", "A", "--touches", "src/**", "--space", "github.com/acme/app")
	waitFor(t, 10*time.Second, "A running", func() bool { return started("A") })
	h1.must("queue", "add", "q", "--key", "b", "--id", "B", "--touches", "src/parser/x.go,README.md", "--space", "github.com/acme/app")
	h1.must("queue", "add", "q", "--key", "c", "--id", "C", "--touches", "docs/**", "--space", "github.com/acme/app")
	waitFor(t, 10*time.Second, "C running beside A", func() bool { return started("C") })
	ls := jsonOf(t, h2.must("reserve", "ls", "github.com/acme/app", "--json").stdout)
	tasks := map[string]bool{}
	for _, r := range ls["reservations"].([]any) {
		tasks[r.(map[string]any)["task"].(string)] = true
	}
	if len(tasks) != 2 || !tasks["A"] || !tasks["C"] {
		t.Fatalf("the space while A and C run: %v; want A's and C's reservations", ls)
	}
	// An agent cannot take A's paths while A runs.
	h2.expect(3, []string{"reserve", "github.com/acme/app", "src/main.go"}, "task A")
	time.Sleep(300 * time.Millisecond)
	if started("B") {
		t.Fatal("B started while A, whose paths overlap B's, runs")
	}
	release("A")
	waitFor(t, 10*time.Second, "B running once A ended", func() bool { return started("B") })
	release("B")
	release("C")
	for _, id := range []string{"A", "B", "C"} {
		waitFor(t, 10*time.Second, id+" done", func() bool {
			return jsonOf(t, h1.must("queue", "get", "q", id, "--json").stdout)["state"] == "done"
		})
	}
	if b := jsonOf(t, h1.must("queue", "get", "q", "B", "--json").stdout); num(t, b, "attempts") != 1 {
		t.Fatalf("B: %v; want one attempt", b)
	}
}
