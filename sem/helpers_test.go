package sem_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/sem"
)

type env struct {
	t      testing.TB
	client *kv.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	s := kvtest.StartServer(t)
	e := &env{t: t, client: kvtest.Connect(t, s.ClientURL())}
	if err := e.sems("h0").Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// sems is a process of host.
func (e *env) sems(host string, opts ...sem.Option) *sem.Semaphores {
	e.t.Helper()
	s, err := sem.New(e.client, append([]sem.Option{sem.WithHostID(host)}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) create(name string, max int) {
	e.t.Helper()
	if _, err := e.sems("h0").Create(ctxT(e.t), name, max); err != nil {
		e.t.Fatal(err)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// child starts a process that lives until it is killed, and its identity.
func child(t testing.TB) (*exec.Cmd, hostlocal.Process) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, p
}

// deadProcess is the identity of a process that has exited.
func deadProcess(t testing.TB) hostlocal.Process {
	t.Helper()
	cmd, p := child(t)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return p
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
