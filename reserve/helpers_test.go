package reserve_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/reserve"
)

type env struct {
	t      testing.TB
	client *kv.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	s := kvtest.StartServer(t)
	e := &env{t: t, client: kvtest.Connect(t, s.ClientURL())}
	if err := e.spaces("h0").Ensure(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// spaces is a process of host.
func (e *env) spaces(host string, opts ...reserve.Option) *reserve.Spaces {
	e.t.Helper()
	s, err := reserve.New(e.client, append([]reserve.Option{reserve.WithHostID(host)}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
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

// mustReserve takes patterns at once or fails the test.
func mustReserve(t testing.TB, s *reserve.Spaces, space string, patterns []string, opts ...reserve.ReserveOption) *reserve.Reservation {
	t.Helper()
	r, err := s.TryReserve(ctxT(t), space, patterns, opts...)
	if err != nil {
		t.Fatalf("reserve %v: %v", patterns, err)
	}
	t.Cleanup(func() { _ = r.Release(context.Background()) })
	return r
}

// ids are the ids of a space's reservations in the given state.
func ids(t testing.TB, s *reserve.Spaces, space, state string) []string {
	t.Helper()
	st, err := s.Status(ctxT(t), space)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range st.Reservations {
		if r.State == state {
			out = append(out, r.ID)
		}
	}
	return out
}
