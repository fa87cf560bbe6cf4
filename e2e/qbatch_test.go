package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// queue add --batch adds 10,000 tasks from a file, one line out per task
// in order; a bad line adds nothing and names itself; --json prints add's
// document per line, from stdin.
func TestQueue_AddBatchAddsTenThousandTasks(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.must("queue", "create", "q", "--per-key", "2")
	dir := t.TempDir()
	const n = 10000
	var file bytes.Buffer
	for i := range n {
		fmt.Fprintf(&file, `{"key":"user-%d","id":"t-%d","payload":"task %d","priority":"low","labels":{"batch":"b1"}}`+"\n", i%50, i, i)
		if i == 5000 {
			file.WriteString("\n") // a blank line is skipped
		}
	}
	batch := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(batch, file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r := h.must("queue", "add", "q", "--batch", batch)
	ids := strings.Fields(r.stdout)
	if len(ids) != n || ids[0] != "t-0" || ids[n-1] != fmt.Sprintf("t-%d", n-1) || ids[4242] != "t-4242" {
		t.Fatalf("add --batch printed %d ids (first %q); want %d, in the file's order", len(ids), ids[:min(3, len(ids))], n)
	}
	if c := h.counts(t, "q"); c["pending"] != n {
		t.Fatalf("counts %v after the batch; want %d pending", c, n)
	}
	task := h.taskJSON(t, "q", "t-777")
	if task["key"] != "user-27" || task["priority"] != "low" {
		t.Fatalf("task t-777 = %v", task)
	}
	if p := h.must("queue", "get", "q", "t-777", "--payload").stdout; p != "task 777" {
		t.Fatalf("payload of t-777 = %q", p)
	}

	// A bad line anywhere adds nothing and says which.
	for _, c := range []struct{ lines, want string }{
		{`{"key":"a","id":"new-1"}` + "\n" + `{"key":"b..c"}`, "--batch line 2"},
		{`{"key":"a","id":"new-1"}` + "\n" + `{"id":"new-2"}`, `line 2: "key" is required`},
		{`{"key":"a","id":"new-1","colour":"red"}`, "line 1: not a task"},
		{`{"key":"a","id":"new-1"}` + "\n" + `{"key":"b","id":"new-1"}`, "line 2: id new-1 is line 1's too"},
		{`{"key":"a","priority":"urgent"}`, "high, normal or low"},
		{"", "no tasks"},
	} {
		f := filepath.Join(dir, "bad.jsonl")
		if err := os.WriteFile(f, []byte(c.lines), 0o600); err != nil {
			t.Fatal(err)
		}
		h.expect(2, []string{"queue", "add", "q", "--batch", f}, c.want)
	}
	h.expect(2, []string{"queue", "add", "q", "--batch", batch, "--key", "k"}, "--batch takes each task's fields from its lines")
	h.expect(5, []string{"queue", "add", "nosuch", "--batch", batch}, "no such queue")
	if c := h.counts(t, "q"); c["pending"] != n {
		t.Fatalf("counts %v after the bad batches; want them to add nothing", c)
	}

	// From stdin, with --json: add's document per line; a task held
	// already is not added again.
	cmd := h.command("queue", "add", "q", "--batch", "-", "--json")
	cmd.Stdin = strings.NewReader(`{"key":"x","id":"t-1","payload":"again"}` + "\n" + `{"key":"x","id":"s-1"}` + "\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("add --batch - --json: %v\n%s", err, errOut.String())
	}
	docs := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(docs) != 2 {
		t.Fatalf("add --batch --json printed %d lines; want 2:\n%s", len(docs), out.String())
	}
	var first, second map[string]any
	if json.Unmarshal([]byte(docs[0]), &first) != nil || json.Unmarshal([]byte(docs[1]), &second) != nil {
		t.Fatalf("not JSON lines:\n%s", out.String())
	}
	if first["id"] != "t-1" || first["added"] != false || first["key"] != "user-1" || second["id"] != "s-1" || second["added"] != true {
		t.Fatalf("--json lines %v, %v; want t-1 held already (key user-1), s-1 added", first, second)
	}
	if !strings.Contains(errOut.String(), "line 1: task t-1 is in queue q already") {
		t.Fatalf("stderr does not say t-1 was there already:\n%s", errOut.String())
	}
}
