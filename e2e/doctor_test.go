package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/session"
)

// findings is `baton doctor --json`'s findings by kind, and its exit code.
func (h *host) findings(args ...string) (map[string][]map[string]any, map[string]any, int) {
	h.w.t.Helper()
	r := h.baton(append([]string{"doctor", "--json"}, args...)...)
	doc := jsonOf(h.w.t, r.stdout)
	out := map[string][]map[string]any{}
	for _, f := range doc["findings"].([]any) {
		m := f.(map[string]any)
		for _, k := range []string{"kind", "key", "detail", "action", "fixed"} {
			if _, ok := m[k]; !ok {
				h.w.t.Errorf("finding lacks %q: %v", k, m)
			}
		}
		out[m["kind"].(string)] = append(out[m["kind"].(string)], m)
	}
	return out, doc, r.code
}

func TestDoctor_HealthyIsExit0(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.must("join", "s", "--task", "T-1")
	if r := h.must("doctor"); !strings.Contains(r.stdout, "no problems") {
		t.Errorf("doctor said %q", r.stdout)
	}
	if _, doc, _ := h.findings(); doc["ok"] != true {
		t.Errorf("doctor --json = %v", doc)
	}
}

func TestDoctor_FindsAndFixesStaleDeadOrphanedAndGarbage(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	// A session whose agent died.
	agent := exec.Command("sleep", "300")
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	h.must("join", "dead", "--task", "T-1", "--pid", fmt.Sprint(agent.Process.Pid))
	agent.Process.Kill()
	agent.Wait()
	// A gate whose holder died holding it.
	holder := holdGate(t, h, "crashed")
	holder.Process.Kill()
	holder.Wait()
	// Garbage bytes written straight to the bucket.
	b := w.client.Bucket(session.BucketConfig(session.DefaultPrefix, 1))
	if _, err := b.Create(context.Background(), "junk", []byte("\x00\x01 not a record"), 0); err != nil {
		t.Fatal(err)
	}
	// Nobody takes the garbage slot.
	h.expect(3, []string{"join", "junk", "--task", "T-2"}, "does not decode", "baton doctor")
	if r := h.must("status"); !strings.Contains(r.stdout, "undecodable") {
		t.Errorf("status hides the garbage record:\n%s", r.stdout)
	}

	found, doc, code := h.findings()
	if code != 7 || doc["ok"] != false {
		t.Fatalf("doctor: exit %d, %v; want 7", code, doc)
	}
	for kind, key := range map[string]string{"dead_holder": "dead", "orphan_gate": "slot-crashed", "undecodable": "junk"} {
		if len(found[kind]) != 1 || found[kind][0]["key"] != key {
			t.Errorf("%s finding for %s missing: %v", kind, key, found)
		}
	}
	r := h.baton("doctor")
	if r.code != 7 || !strings.Contains(r.stdout, "dead_holder dead") || !strings.Contains(r.stdout, "not running") {
		t.Errorf("doctor text: %s", r)
	}

	// With a tiny stale-after every session is stale: --fix reaps them,
	// clears the orphaned gate and removes the garbage.
	found, _, code = h.findings("--fix", "--stale-after", "1ms")
	for kind, fs := range found {
		for _, f := range fs {
			if f["fixed"] != true {
				t.Errorf("%s %s not fixed: %v", kind, f["key"], f)
			}
		}
	}
	if code != 0 {
		t.Errorf("doctor --fix exit %d, want 0 once all is fixed", code)
	}
	if r := h.must("doctor"); !strings.Contains(r.stdout, "no problems") {
		t.Errorf("after --fix: %s", r)
	}
	h.must("join", "junk", "--task", "T-2")
}

func TestDoctor_StaleIsReportedUntilFixed(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.must("join", "quiet", "--task", "T-1", "--ttl", "60s")
	found, _, code := h.findings("--stale-after", "1ms")
	if code != 7 || len(found["stale"]) != 1 || !strings.Contains(found["stale"][0]["detail"].(string), "not renewed") {
		t.Fatalf("doctor --stale-after 1ms: exit %d, %v", code, found)
	}
	// Default stale-after is half the TTL: a fresh session is fine.
	if _, _, code := h.findings(); code != 0 {
		t.Errorf("fresh session reported with the default stale-after")
	}
}

func TestDoctor_BucketWithTheWrongTTL(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	js, _ := jetstream.New(w.client.Conn())
	if _, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "odd-sessions", TTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	found, _, code := h.findings("--prefix", "odd")
	if code != 7 || len(found["bucket_config"]) != 1 || !strings.Contains(found["bucket_config"][0]["detail"].(string), "ttl is 5s") {
		t.Fatalf("doctor of a bucket with a 5s TTL: exit %d, %v", code, found)
	}
	h.expect(6, []string{"join", "s", "--task", "T", "--prefix", "odd"}, "baton doctor")
	h.must("doctor", "--fix", "--prefix", "odd")
	h.must("join", "s", "--task", "T", "--prefix", "odd")
}

func TestDoctor_UnreachableServerIsExit6NamingTheURL(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.env = append(h.env, "BATON_URL=nats://127.0.0.1:1")
	h.expect(6, []string{"doctor"}, "nats://127.0.0.1:1")
	found, doc, code := h.findings()
	if code != 6 || doc["ok"] != false || len(found["server_unreachable"]) != 1 || found["server_unreachable"][0]["key"] != "nats://127.0.0.1:1" {
		t.Errorf("doctor --json of an unreachable server: exit %d, %v", code, doc)
	}
}

func TestDoctor_MissingBucketsAreCreatedByFix(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	found, _, code := h.findings("--prefix", "fresh")
	if code != 7 || len(found["bucket_missing"]) != 4 || !strings.Contains(found["bucket_missing"][0]["action"].(string), "baton up") {
		t.Fatalf("doctor without buckets: exit %d, %v", code, found)
	}
	h.must("doctor", "--fix", "--prefix", "fresh")
	h.must("join", "s", "--task", "T", "--prefix", "fresh")
	h.must("queue", "create", "q", "--prefix", "fresh")
	h.must("sem", "create", "s", "--max", "1", "--prefix", "fresh")
}

// TestDoctor_ReservationsPastTheirTTLArePrunedByFix: a space nobody writes
// keeps a reservation past its TTL; doctor reports it (exit 7) and --fix
// rewrites the space without it, leaving the live one.
func TestDoctor_ReservationsPastTheirTTLArePrunedByFix(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.must("reserve", "app", "src/**", "--agent", "alice", "--ttl", "5m")
	h.must("reserve", "app", "docs/**", "--agent", "bob", "--ttl", "1s")
	time.Sleep(1100 * time.Millisecond)
	found, _, code := h.findings()
	if code != 7 || len(found["expired_visible"]) != 1 || found["expired_visible"][0]["key"] != "app" ||
		!strings.Contains(found["expired_visible"][0]["detail"].(string), `agent "bob"`) {
		t.Fatalf("doctor with an expired reservation: exit %d, %v", code, found)
	}
	if found, _, code = h.findings("--fix"); code != 0 || found["expired_visible"][0]["fixed"] != true {
		t.Fatalf("doctor --fix: exit %d, %v", code, found)
	}
	st := jsonOf(t, h.must("reserve", "ls", "app", "--json").stdout)
	if rs := st["reservations"].([]any); len(rs) != 1 || rs[0].(map[string]any)["agent"] != "alice" {
		t.Errorf("after --fix: %v; want alice's alone", st)
	}
}
