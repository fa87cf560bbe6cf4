package lease_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/lease"
)

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
	if err := e.leases("setup", "h0").Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// leases is a process of host acting as instance.
func (e *env) leases(instance, host string, opts ...lease.Option) *lease.Leases {
	e.t.Helper()
	ls, err := lease.New(e.client, append([]lease.Option{lease.WithInstance(instance), lease.WithHostID(host)}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return ls
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// deadProcess is the identity of a process that has exited.
func deadProcess(t testing.TB) hostlocal.Process {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read x")
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	in.Close()
	cmd.Wait()
	return p
}

// closedWithin waits for ch to close.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}
