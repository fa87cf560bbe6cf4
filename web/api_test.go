package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/web"
)

func TestSessions_PageFiltersSortsAndPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	other := e.sessions("h2")
	for i := range 25 {
		m := e.m
		if i%5 == 0 {
			m = other
		}
		if _, err := m.Join(ctx, fmt.Sprintf("slot-%02d", i), fmt.Sprintf("task-%d", i), session.WithMeta(map[string]string{"project": fmt.Sprint("p", i%3)})); err != nil {
			t.Fatal(err)
		}
	}
	var page web.SessionPage
	eventually(t, "25 sessions seen", func() bool { e.get("/api/v1/sessions", &page); return page.Total == 25 })
	if len(page.Rows) != 25 || page.Rows[0]["slot"] != "slot-00" || page.Rows[24]["slot"] != "slot-24" {
		t.Fatalf("first page: %d rows from %v to %v, want 25 by slot", len(page.Rows), page.Rows[0]["slot"], page.Rows[len(page.Rows)-1]["slot"])
	}
	if fmt.Sprint(page.Hosts) != "[h1 h2]" {
		t.Errorf("hosts %v, want [h1 h2]", page.Hosts)
	}
	for _, k := range []string{"slot", "task_id", "host", "pid", "fence", "revision", "age_ms", "ttl_left_ms", "state", "ttl_ms"} {
		if _, ok := page.Rows[0][k]; !ok {
			t.Errorf("row lacks %q (status --json has it): %v", k, page.Rows[0])
		}
	}
	e.get("/api/v1/sessions?host=h2&sort=slot&desc=1", &page)
	if page.Total != 5 || page.Rows[0]["slot"] != "slot-20" || page.Rows[4]["slot"] != "slot-00" {
		t.Errorf("host h2, slot descending: total %d, %v..%v", page.Total, page.Rows[0]["slot"], page.Rows[len(page.Rows)-1]["slot"])
	}
	e.get("/api/v1/sessions?q=P2&limit=3&offset=3", &page)
	// p2: i%3==2 -> 2,5,8,11,14,17,20,23 (8 sessions); the second page of 3.
	if page.Total != 8 || len(page.Rows) != 3 || page.Rows[0]["slot"] != "slot-11" {
		t.Errorf("filter p2, page 2 of 3: total %d, %d rows from %v", page.Total, len(page.Rows), page.Rows[0]["slot"])
	}
	var apiErr web.APIError
	if code := e.get("/api/v1/sessions?sort=nope", &apiErr); code != http.StatusBadRequest || !strings.Contains(apiErr.Error, "sort") || apiErr.Code != 2 {
		t.Errorf("bad sort: %d %+v, want 400 naming the sorts", code, apiErr)
	}
	if code := e.get("/api/v1/sessions?state=dead", &apiErr); code != http.StatusBadRequest {
		t.Errorf("bad state: %d, want 400", code)
	}
	if code := e.get("/api/v1/sessions/nope", &apiErr); code != http.StatusNotFound || apiErr.Code != 5 {
		t.Errorf("unknown slot: %d %+v, want 404", code, apiErr)
	}
}

func TestStatus_IsTheCLIShape(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.m.Join(ctx, "s1", "t1"); err != nil {
		t.Fatal(err)
	}
	l, err := e.ls.Acquire(ctx, "plain", lease.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	var doc map[string]any
	eventually(t, "session and lease seen", func() bool {
		doc = nil
		e.get("/api/v1/status", &doc)
		s, _ := doc["sessions"].([]any)
		l, _ := doc["leases"].([]any)
		return len(s) == 1 && len(l) == 1
	})
	for _, k := range []string{"sessions", "leases", "leaders", "queues", "server_time"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("status lacks %q: %v", k, doc)
		}
	}
	row := doc["leases"].([]any)[0].(map[string]any)
	if row["key"] != "plain" || row["state"] != "live" || row["holder"] == "" {
		t.Errorf("lease row %v", row)
	}
}

func TestAgents_LeaderCandidatesAndChangesWithReasons(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	terms := map[string]*lease.Term{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	els := map[string]*lease.Election{}
	defer func() {
		// The last terms and the candidacies stop renewing only when given
		// up: resign and withdraw, once the campaigns are over.
		cancel()
		wg.Wait()
		bg := context.Background()
		for _, term := range terms {
			_ = term.Resign(bg)
		}
		for _, el := range els {
			_ = el.Withdraw(bg)
		}
	}()
	for _, inst := range []string{"a", "b"} {
		ls, err := lease.New(e.client, lease.WithHostID("h-"+inst), lease.WithInstance(inst))
		if err != nil {
			t.Fatal(err)
		}
		el, err := ls.Election("bot", lease.ElectTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		els[inst] = el
		wg.Go(func() {
			for ctx.Err() == nil {
				term, err := el.Campaign(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				terms[inst] = term
				mu.Unlock()
				// As baton lead does: a transfer asked of the leader is a
				// handover once its work has stopped.
				select {
				case to := <-term.Yield():
					_ = term.HandOver(ctx, to)
					<-term.Done()
				case <-term.Done():
				case <-ctx.Done():
				}
			}
		})
	}
	var v web.AgentView
	eventually(t, "a leader and two candidates", func() bool {
		v = web.AgentView{}
		e.get("/api/v1/agents/bot", &v)
		return v.Leader != nil && len(v.Candidates) == 2
	})
	for _, c := range v.Candidates {
		for _, k := range []string{"instance", "host", "pid", "score", "capabilities", "eligible", "last_seen", "last_seen_ms", "quiet"} {
			if _, ok := c[k]; !ok {
				t.Errorf("candidate lacks %q: %v", k, c)
			}
		}
	}
	first := v.Leader["holder"].(string)
	other := map[string]string{"a": "b", "b": "a"}[first]
	// Make the other the leader, as the page's button does: answered at
	// once, and the leader changes when the lease does.
	code, doc := e.post("/api/v1/agents/bot/transfer", `{"to":"`+other+`"}`, nil)
	if code != http.StatusAccepted || doc["transfer_to"] != other {
		t.Fatalf("transfer: %d %v, want 202", code, doc)
	}
	eventually(t, other+" leads after the transfer", func() bool {
		v = web.AgentView{}
		e.get("/api/v1/agents/bot", &v)
		return v.Leader != nil && v.Leader["holder"] == other
	})
	last := v.Changes[len(v.Changes)-1]
	if last.From != first || last.To != other || last.Reason != web.ReasonTransfer {
		t.Errorf("last change %+v, want %s -> %s by transfer", last, first, other)
	}
	// Resign: the leader steps down for the only other candidate.
	if code, doc := e.post("/api/v1/agents/bot/resign", "", nil); code != http.StatusAccepted || doc["transfer_to"] != first {
		t.Fatalf("resign: %d %v, want 202 naming %s", code, doc, first)
	}
	eventually(t, first+" leads again after the resign", func() bool {
		v = web.AgentView{}
		e.get("/api/v1/agents/bot", &v)
		return v.Leader != nil && v.Leader["holder"] == first
	})
	if code, doc := e.post("/api/v1/agents/bot/transfer", `{"to":"nobody"}`, nil); code != http.StatusNotFound {
		t.Errorf("transfer to a non-candidate: %d %v, want 404", code, doc)
	}
	if code, _ := e.post("/api/v1/agents/bot/transfer", `{}`, nil); code != http.StatusBadRequest {
		t.Errorf("transfer to nobody named: %d, want 400", code)
	}
	// The metrics say who leads and count the changes by reason.
	fams := scrape(t, e.http.URL+"/metrics", "")
	if !hasSample(fams["baton_agent_leader_info"], map[string]string{"agent_key": "bot", "instance": first}) {
		t.Errorf("baton_agent_leader_info does not name %s: %v", first, fams["baton_agent_leader_info"])
	}
	if !hasSample(fams["baton_leadership_changes_total"], map[string]string{"agent_key": "bot", "reason": "transfer"}) {
		t.Errorf("no transfer counted: %v", fams["baton_leadership_changes_total"])
	}
	if !hasSample(fams["baton_agent_ttl_seconds"], map[string]string{"agent_key": "bot"}) {
		t.Errorf("no leadership TTL for bot (alerts compare leaderless_seconds with it): %v", fams["baton_agent_ttl_seconds"])
	}
}

func TestQueues_ShownAndActedOn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := queue.DefaultConfig("jobs")
	cfg.MaxActive = 2
	if _, _, err := e.qs.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"alice", "alice", "bob"} {
		if _, _, err := e.qs.Add(ctx, "jobs", key, nil, queue.WithID(fmt.Sprint("t", i)), queue.WithPriority(queue.High)); err != nil {
			t.Fatal(err)
		}
	}
	var doc map[string]any
	eventually(t, "three pending tasks", func() bool {
		doc = nil
		e.get("/api/v1/queues/jobs", &doc)
		p, _ := doc["pending"].(map[string]any)
		return p != nil && p["total"] == float64(3)
	})
	for _, k := range []string{"queue", "config", "counts", "pending", "active", "locks", "server_time"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("queue status lacks %q (queue status --json has it)", k)
		}
	}
	if code, body := e.post("/api/v1/queues/jobs/tasks/t1/cancel", "", nil); code != http.StatusOK || body["state"] != "cancelled" {
		t.Fatalf("cancel: %d %v", code, body)
	}
	if code, body := e.post("/api/v1/queues/jobs/tasks/t1/cancel", "", nil); code != http.StatusOK || body["state"] != "cancelled" {
		t.Errorf("cancel twice: %d %v, want 200 and still cancelled (as the CLI)", code, body)
	}
	if code, body := e.post("/api/v1/queues/jobs/tasks/nope/cancel", "", nil); code != http.StatusNotFound {
		t.Errorf("cancel of no task: %d %v, want 404", code, body)
	}
	eventually(t, "the cancel counted", func() bool {
		doc = nil
		e.get("/api/v1/queues/jobs", &doc)
		c, _ := doc["counts"].(map[string]any)
		return c != nil && c["cancelled"] == float64(1)
	})
	if code, body := e.post("/api/v1/queues/jobs/pause", "", nil); code != http.StatusOK || body["paused"] != true {
		t.Fatalf("pause: %d %v", code, body)
	}
	if code, body := e.post("/api/v1/queues/jobs/keys/alice/pause", "", nil); code != http.StatusOK || body["key"] != "alice" {
		t.Fatalf("pause a key: %d %v", code, body)
	}
	if code, body := e.post("/api/v1/queues/nope/pause", "", nil); code != http.StatusNotFound {
		t.Errorf("pause of no queue: %d %v, want 404", code, body)
	}
	eventually(t, "the pauses shown", func() bool {
		doc = nil
		e.get("/api/v1/queues/jobs", &doc)
		keys, _ := doc["paused_keys"].([]any)
		return doc["paused"] == true && len(keys) == 1 && keys[0] == "alice"
	})
	fams := scrape(t, e.http.URL+"/metrics", "")
	if !hasSample(fams["baton_queue_pending"], map[string]string{"queue": "jobs", "priority": "high"}) {
		t.Errorf("no pending gauge for jobs: %v", fams["baton_queue_pending"])
	}
	if f := fams["baton_queue_paused"]; f.value(map[string]string{"queue": "jobs"}) != 1 {
		t.Errorf("baton_queue_paused: %v, want 1 for jobs", f)
	}
	if code, _ := e.post("/api/v1/queues/jobs/resume", "", nil); code != http.StatusOK {
		t.Errorf("resume: %d", code)
	}
	var ov web.Overview
	e.get("/api/v1/overview", &ov)
	if len(ov.Queues) != 1 || ov.Queues[0].Queue != "jobs" || ov.Queues[0].Pending != 2 || ov.Queues[0].MaxActive != 2 {
		t.Errorf("overview queues %+v", ov.Queues)
	}
}

// scrape reads /metrics and parses it with Prometheus' own parser.
func scrape(t *testing.T, url, token string) map[string]*dto {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	out := map[string]*dto{}
	for name, f := range fams {
		d := &dto{}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			d.samples = append(d.samples, labels)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			d.values = append(d.values, v)
		}
		out[name] = d
	}
	return out
}

type dto struct {
	samples []map[string]string
	values  []float64 // a gauge's or counter's value, by sample
}

// value is the value of the sample with labels want, or -1 if none has them.
func (d *dto) value(want map[string]string) float64 {
	if d == nil {
		return -1
	}
next:
	for i, s := range d.samples {
		for k, v := range want {
			if s[k] != v {
				continue next
			}
		}
		return d.values[i]
	}
	return -1
}

func (d *dto) String() string {
	if d == nil {
		return "<absent>"
	}
	return fmt.Sprint(d.samples)
}

// hasSample reports whether a sample carries every label in want.
func hasSample(d *dto, want map[string]string) bool {
	if d == nil {
		return false
	}
	for _, s := range d.samples {
		ok := true
		for k, v := range want {
			ok = ok && s[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

// The dashboard's doctor checks the sessions its watch holds (it lists no
// records of its own) and its fix is the CLI's: an undecodable record is
// judged by the TTL the server holds for it (stale after half of it) and
// removed by a delete on the revision read; a live session is left.
func TestDoctor_ChecksTheWatchedSessionsAndFixes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.m.Join(ctx, "healthy", "T", session.WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	const ttl = 4 * time.Second
	rev, err := e.m.Bucket().Create(ctx, "garbage", []byte("<not json>"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	var rep struct {
		Findings []struct {
			Kind  string `json:"kind"`
			Key   string `json:"key"`
			Fixed bool   `json:"fixed"`
		} `json:"findings"`
	}
	eventually(t, "the doctor reports the undecodable record, and only it", func() bool {
		rep.Findings = nil
		e.get("/api/v1/doctor", &rep)
		return len(rep.Findings) == 1 && rep.Findings[0].Kind == "undecodable" && rep.Findings[0].Key == "garbage"
	})
	time.Sleep(time.Until(written.Add(ttl/2 + 200*time.Millisecond))) // stale now, not yet expired
	code, body := e.post("/api/v1/doctor/fix", "", nil)
	if code != http.StatusOK {
		t.Fatalf("fix: %d %v", code, body)
	}
	last, err := e.m.Bucket().Latest(ctx, "garbage")
	if time.Since(written) >= ttl {
		t.Skipf("the fix came after the record's TTL (%s): the machine is too slow to tell a fix from an expiry", time.Since(written))
	}
	if err != nil || last.Op != kv.OpDelete || last.Revision <= rev {
		t.Errorf("the undecodable record after the fix: op %v rev %d (was %d), %v; want deleted by the fix (%v)", last.Op, last.Revision, rev, err, body)
	}
	if s, err := e.m.Bucket().Latest(ctx, "healthy"); err != nil || s.Op != kv.OpPut {
		t.Errorf("the healthy session after the fix: op %v, %v", s.Op, err)
	}
}

// A candidate that lacks a capability its own election requires shows as
// not eligible, and the dashboard's "Make leader" on it is refused (404, as
// for no candidate), though the dashboard knows no requirement itself.
func TestAgents_ACandidateWithoutTheRequiredCapabilityIsNotEligible(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ls, err := lease.New(e.client, lease.WithHostID("h-weak"), lease.WithInstance("weak"))
	if err != nil {
		t.Fatal(err)
	}
	el, err := ls.Election("trainer", lease.ElectTTL(3*time.Second), lease.Require("gpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer el.Withdraw(context.Background())
	if _, err := el.Campaign(ctx); !errors.Is(err, lease.ErrNotEligible) {
		t.Fatalf("campaign without the capability: %v", err)
	}
	var v web.AgentView
	eventually(t, "the weak candidate shown", func() bool {
		v = web.AgentView{}
		e.get("/api/v1/agents/trainer", &v)
		return len(v.Candidates) == 1
	})
	if v.Candidates[0]["eligible"] != false {
		t.Errorf("the candidate without gpu: %v, want eligible false", v.Candidates[0])
	}
	if code, doc := e.post("/api/v1/agents/trainer/transfer", `{"to":"weak"}`, nil); code != http.StatusNotFound {
		t.Errorf("make leader of an ineligible candidate: %d %v, want 404", code, doc)
	}
}
