package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/web"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a server with baton's buckets, a dashboard of it running, and
// handles to act on the cluster as a process of host "h1".
type env struct {
	t      *testing.T
	client *kv.Client
	m      *session.Manager
	ls     *lease.Leases
	qs     *queue.Queues
	ss     *sem.Semaphores
	rl     *rate.Limiters
	rs     *reserve.Spaces
	srv    *web.Server
	http   *httptest.Server
}

func newEnv(t *testing.T, opts ...web.Option) *env {
	t.Helper()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	e := &env{t: t, client: c}
	e.m = e.sessions("h1")
	var err error
	if e.ls, err = lease.New(c, lease.WithHostID("h1")); err != nil {
		t.Fatal(err)
	}
	if e.qs, err = queue.New(e.m); err != nil {
		t.Fatal(err)
	}
	if e.ss, err = sem.New(c, sem.WithHostID("h1")); err != nil {
		t.Fatal(err)
	}
	if e.rl, err = rate.New(c); err != nil {
		t.Fatal(err)
	}
	if e.rs, err = reserve.New(c, reserve.WithHostID("h1")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ensure := range []func(context.Context, int) error{e.m.Ensure, e.ls.Ensure, e.qs.Ensure, e.ss.Ensure} {
		if err := ensure(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if e.srv, err = web.New(e.m, e.ls, e.qs, append([]web.Option{web.WithBatch(10 * time.Millisecond), web.WithLimits(e.ss, e.rl), web.WithReservations(e.rs)}, opts...)...); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.srv.Run(rctx) }()
	e.http = httptest.NewServer(e.srv.Handler())
	t.Cleanup(func() {
		e.http.CloseClientConnections()
		e.http.Close()
		cancel()
		<-done
	})
	e.waitReady()
	return e
}

func (e *env) sessions(host string) *session.Manager {
	e.t.Helper()
	sd, err := hostlocal.OpenStateDir(e.t.TempDir())
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := session.NewManager(e.client, session.WithHostID(host), session.WithStateDir(sd))
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) waitReady() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(e.http.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the dashboard was not ready in 10s (last: %v %v)", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get reads path as JSON into out, and returns the status.
func (e *env) get(path string, out any) int {
	e.t.Helper()
	resp, err := http.Get(e.http.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			e.t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

// post sends body to path as a page of the dashboard would (same origin).
func (e *env) post(path, body string, hdr map[string]string) (int, map[string]any) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.http.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc
}

// eventually polls cond until it holds or 10 s pass (the dashboard is
// eventually consistent with the watches).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
