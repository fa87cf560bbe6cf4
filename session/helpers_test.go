package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/session"
)

// env is a server with the sessions bucket and a way to make managers that
// act as processes of some host.
type env struct {
	t      testing.TB
	srv    *kvserver.Server
	client *kv.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	e := &env{t: t, srv: s, client: c}
	m := e.manager("setup", t.TempDir())
	if err := m.Ensure(context.Background(), 1); err != nil {
		t.Fatalf("ensure: %v", err)
	}
	return e
}

// manager is a process of host using the state directory dir.
func (e *env) manager(host, dir string, opts ...session.Option) *session.Manager {
	e.t.Helper()
	sd, err := hostlocal.OpenStateDir(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := session.NewManager(e.client, append([]session.Option{session.WithHostID(host), session.WithStateDir(sd)}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
