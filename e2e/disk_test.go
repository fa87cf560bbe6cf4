package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv/kvtest"
)

// A `baton up` whose store's disk fills up mid-run: writes fail with exit 6
// and a message that says the server's disk is full and what to do; reads
// go on; nothing acknowledged before is lost; once the space is freed,
// writes succeed again without a restart, and up says so on stderr. The
// disk is a 4 MiB tmpfs the test mounts (it needs root; skipped otherwise).
func TestUp_AFullDiskFailsWritesWithExit6ThenTheyResume(t *testing.T) {
	disk := kvtest.SmallDisk(t, 4<<20)
	u := launchUp(t, nil, "--store", filepath.Join(disk, "store"))
	h := u.user(t, "BATON_TIMEOUT=2s")
	h.must("queue", "create", "q")
	fences := map[string]float64{} // acknowledged sessions
	var tasks []string             // acknowledged tasks
	join := func(slot string) result {
		r := h.baton("join", slot, "--task", "T", "--json")
		if r.code == 0 {
			fences[slot] = jsonOf(t, r.stdout)["fence"].(float64)
		}
		return r
	}
	for i := range 5 {
		if r := join(fmt.Sprintf("before-%d", i)); r.code != 0 {
			t.Fatalf("join: %s", r)
		}
		id := fmt.Sprintf("task-%d", i)
		h.must("queue", "add", "q", "--key", "k", "--id", id)
		tasks = append(tasks, id)
	}

	filler := kvtest.FillDisk(t, disk)
	// The first writes may still fit in the last page of a file, and the one
	// that meets the full disk may go unanswered; then they are refused.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		r := join(fmt.Sprintf("full-%d", i))
		if r.code == 6 && strings.Contains(r.stderr, "disk is full") {
			t.Logf("join %d on the full disk: %s", i, strings.TrimSpace(r.stderr))
			break
		}
		if r.code != 0 && r.code != 6 {
			t.Fatalf("join on a full disk: %s, want exit 6", r)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write refused for a full disk within 30s; last: %s\nbaton up's stderr: %s", r, u.stderr)
		}
	}
	for _, args := range [][]string{
		{"join", "more", "--task", "T"},
		{"queue", "add", "q", "--key", "k", "--id", "more"},
	} {
		sent := time.Now()
		r := h.expect(6, args, "the server's storage is full", "insufficient resources", "the server's disk is full", "free space on the disk")
		if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("baton %v: more than one line:\n%s", args, r.stderr)
		}
		if took := time.Since(sent); took > 2*time.Second {
			t.Errorf("baton %v took %s to fail, want it at once (no timeout)", args, took.Round(time.Millisecond))
		}
	}
	if !strings.Contains(u.stderr.String(), "is full") {
		t.Errorf("baton up did not say that its disk is full:\n%s", u.stderr)
	}
	checkKept := func(when string) {
		t.Helper()
		rows := h.sessions() // a read
		for slot, fence := range fences {
			if row := rows[slot]; row == nil || row["fence"] != fence {
				t.Errorf("%s: acknowledged session %s (fence %v) is %v", when, slot, fence, row)
			}
		}
		var doc struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal([]byte(h.must("queue", "status", "q", "--tasks", "--json").stdout), &doc); err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, task := range doc.Tasks {
			have[task.ID] = true
		}
		for _, id := range tasks {
			if !have[id] {
				t.Errorf("%s: acknowledged task %s is gone", when, id)
			}
		}
	}
	checkKept("on the full disk")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		r := join("after")
		if r.code == 0 {
			break
		}
		if r.code != 6 || time.Now().After(deadline) {
			t.Fatalf("join once space was freed: %s\nbaton up's stderr: %s", r, u.stderr)
		}
		time.Sleep(100 * time.Millisecond) // the server notices within a quarter of a second
	}
	h.must("queue", "add", "q", "--key", "k", "--id", "after")
	if !strings.Contains(u.stderr.String(), "writes resume") {
		t.Errorf("baton up did not say that writes resume:\n%s", u.stderr)
	}
	checkKept("once space was freed")
	t.Logf("baton up's stderr:\n%s", u.stderr)
}
