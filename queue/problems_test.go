package queue

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/session"
)

// problemsEnv is a server with the buckets and a queue q (TTL 2s), and a
// handle of host h on it.
func problemsEnv(t *testing.T) (*Queues, Config) {
	t.Helper()
	srv := kvtest.StartServer(t)
	c := kvtest.Connect(t, srv.ClientURL())
	sd, err := hostlocal.OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(c, session.WithHostID("h"), session.WithStateDir(sd))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	qs, err := New(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := qs.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig("q")
	cfg.TTL, cfg.MaxActive = Duration(2*time.Second), 4
	if cfg, _, err = qs.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return qs, cfg
}

func kinds(ps []Problem) map[string]Problem {
	out := map[string]Problem{}
	for _, p := range ps {
		out[p.Kind+"/"+p.Task] = p
	}
	return out
}

func TestProblems_LostTaskOrphanTokenStaleLockAndTheirFixes(t *testing.T) {
	qs, cfg := problemsEnv(t)
	ctx := context.Background()
	// Task "lost": active under a lock that does not exist, with a token.
	lost := &Task{ID: "lost", Queue: "q", Key: "a", Priority: Normal, State: StateActive, Attempts: 1,
		Run: &Run{Attempt: 1, Slot: "a", Fence: 1_000_000, Token: 1, Host: "elsewhere", PID: 1, Instance: "gone"}}
	data, _ := encodeTask(lost)
	if _, err := qs.bucket.Create(ctx, taskKey("q", "lost"), data, 0); err != nil {
		t.Fatal(err)
	}
	tok, _ := json.Marshal(token{Queue: "q", Index: 1, Task: "lost", Key: "a", Slot: "a", Fence: 1_000_000, Host: "elsewhere", Instance: "gone"})
	if _, err := qs.bucket.Create(ctx, tokenKey("q", 1), tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Task "stale": active under a live lock that nobody renews.
	s, err := qs.m.Create(ctx, session.Record{Slot: "b", TaskID: "stale", Host: "elsewhere", PID: 1,
		Meta: map[string]string{"queue": "q", "task": "stale", "attempt": "1"}}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stale := &Task{ID: "stale", Queue: "q", Key: "b", Priority: Normal, State: StateActive, Attempts: 1,
		Run: &Run{Attempt: 1, Slot: "b", Fence: s.Fence, Token: -1, Host: "elsewhere", PID: 1, Instance: "gone"}}
	data, _ = encodeTask(stale)
	if _, err := qs.bucket.Create(ctx, taskKey("q", "stale"), data, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // past half the TTL: the lock is stale, the token old

	l, err := qs.m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := qs.Problems(ctx, "q", l, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := kinds(ps)
	for _, want := range []string{ProblemLostTask + "/lost", ProblemOrphanToken + "/lost", ProblemStaleLock + "/stale"} {
		if p, ok := got[want]; !ok || p.Fix == nil {
			t.Errorf("no fixable %s among %v", want, ps)
		}
	}
	if len(ps) != 3 {
		t.Errorf("%d problems, want 3: %v", len(ps), ps)
	}
	for _, p := range ps {
		if err := p.Fix(ctx); err != nil && !IsConflict(err) {
			t.Errorf("fix %s: %v", p.Kind, err)
		}
	}
	for _, id := range []string{"lost", "stale"} {
		task, err := qs.Get(ctx, "q", id)
		if err != nil || task.State != StatePending || task.Result.Reason != ReasonLost {
			t.Errorf("task %s after the fixes: %+v, %v; want pending, reason lost", id, task, err)
		}
	}
	if _, err := qs.bucket.Get(ctx, tokenKey("q", 1)); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("the orphan token is still there: %v", err)
	}
	if _, err := qs.m.Get(ctx, "b"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("the stale lock is still there: %v", err)
	}
	l, _ = qs.m.List(ctx)
	if ps, err := qs.Problems(ctx, "q", l, 0); err != nil || len(ps) != 0 {
		t.Errorf("after the fixes: %v, %v", ps, err)
	}
	_ = cfg
}

// A token that decodes but was written with no TTL (not by baton) holds a
// unit of max_active until it is removed: doctor says it never expires and
// its fix removes it.
func TestProblems_AForeignTokenWithNoTTL(t *testing.T) {
	qs, _ := problemsEnv(t)
	ctx := context.Background()
	tok, _ := json.Marshal(token{Queue: "q", Index: 0, Task: "foreign", Key: "a", Slot: "a", Fence: 5, Host: "elsewhere", Instance: "x"})
	if _, err := qs.bucket.Create(ctx, tokenKey("q", 0), tok, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // past half the TTL: older than any token a live worker renews
	l, err := qs.m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := qs.Problems(ctx, "q", l, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := kinds(ps)[ProblemOrphanToken+"/foreign"]
	if !ok || p.Fix == nil || !strings.Contains(p.Detail, "never expires") {
		t.Fatalf("problems %+v, want a fixable orphan token that never expires", ps)
	}
	if err := p.Fix(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := qs.bucket.Get(ctx, tokenKey("q", 0)); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("the foreign token after the fix: %v", err)
	}
}

// A fix checks again what it fixes: a task whose lock is back (a claim that
// raced the check) is left alone.
func TestProblems_AFixLeavesATaskWhoseLockLives(t *testing.T) {
	qs, cfg := problemsEnv(t)
	ctx := context.Background()
	s, err := qs.m.Create(ctx, session.Record{Slot: "a", TaskID: "t", Host: "h", PID: 1,
		Meta: map[string]string{"queue": "q", "task": "t"}}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	task := &Task{ID: "t", Queue: "q", Key: "a", Priority: Normal, State: StateActive, Attempts: 1,
		Run: &Run{Attempt: 1, Slot: "a", Fence: s.Fence, Token: -1}}
	data, _ := encodeTask(task)
	if _, err := qs.bucket.Create(ctx, taskKey("q", "t"), data, 0); err != nil {
		t.Fatal(err)
	}
	// As if the check had read the sessions before the lock was created.
	ps, err := qs.Problems(ctx, "q", &session.Listing{ServerTime: time.Now()}, 0)
	if err != nil || len(ps) != 1 || ps[0].Kind != ProblemLostTask {
		t.Fatalf("problems %v, %v", ps, err)
	}
	if err := ps[0].Fix(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := qs.Get(ctx, "q", "t"); got.State != StateActive {
		t.Fatalf("the fix put back a task whose lock lives: %+v", got)
	}
	_ = cfg
}

// A worker's presence or inbox that does not decode, or that decodes but
// has no TTL (not written by baton: a ghost worker's presence, a copy of an
// inbox), is reported, and its fix removes it: a live worker writes its
// presence again, the dispatcher its inbox.
func TestProblems_WorkerRecordsGarbledOrWithNoTTL(t *testing.T) {
	qs, _ := problemsEnv(t)
	ctx := context.Background()
	ghost, _ := json.Marshal(presence{Queue: "q", Worker: "0123456789abcdef", Host: "elsewhere", PID: 1, Instance: "x", Concurrency: 2})
	in, _ := json.Marshal(inbox{Queue: "q", Worker: "fedcba9876543210", Dispatcher: "0123456789abcdef", Offers: []*offer{}})
	live, _ := json.Marshal(presence{Queue: "q", Worker: "00000000000000aa", Host: "h", PID: 2, Instance: "y", Concurrency: 1})
	records := []struct {
		key  string
		data []byte
		ttl  time.Duration
		kind string
		says string
	}{
		{presenceKey("q", "0123456789abcdef"), ghost, 0, ProblemNoTTL, "still offers it tasks"},
		{inboxKey("q", "fedcba9876543210"), in, 0, ProblemNoTTL, "never expires"},
		{presenceKey("q", "1111111111111111"), []byte("\x00garbage"), time.Minute, ProblemUndecodable, "cannot renew its presence"},
		{inboxKey("q", "2222222222222222"), []byte(`{"queue":"q","wor`), time.Minute, ProblemUndecodable, "takes no offer"},
		{presenceKey("q", "00000000000000aa"), live, time.Minute, "", ""}, // as baton writes it
	}
	for _, r := range records {
		if _, err := qs.bucket.Create(ctx, r.key, r.data, r.ttl); err != nil {
			t.Fatal(err)
		}
	}
	l, err := qs.m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := qs.Problems(ctx, "q", l, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		var found *Problem
		for i := range ps {
			if strings.Contains(ps[i].Detail, r.key+",") {
				found = &ps[i]
			}
		}
		switch {
		case r.kind == "" && found != nil:
			t.Errorf("%s, as baton writes it: reported %+v", r.key, *found)
		case r.kind == "":
		case found == nil:
			t.Errorf("%s: not reported in %+v", r.key, ps)
		case found.Kind != r.kind || !strings.Contains(found.Detail, r.says) || found.Fix == nil:
			t.Errorf("%s: %+v, want a fixable %s saying %q", r.key, *found, r.kind, r.says)
		default:
			if err := found.Fix(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := qs.bucket.Get(ctx, r.key); !errors.Is(err, kv.ErrNotFound) {
				t.Errorf("%s after the fix: %v", r.key, err)
			}
		}
	}
}
