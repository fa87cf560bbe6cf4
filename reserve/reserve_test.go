package reserve_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/reserve"
)

func TestTryReserve_AllOrNothing(t *testing.T) {
	e := newEnv(t)
	a, b := e.spaces("h1"), e.spaces("h2")
	held := mustReserve(t, a, "repo", []string{"src/parser/**"}, reserve.WithAgent("alice"), reserve.WithTask("T1"))
	if held.Fence() == 0 {
		t.Fatal("a granted reservation has fence 0")
	}
	_, err := b.TryReserve(ctxT(t), "repo", []string{"docs/a.md", "src/parser/x.go", "lib/**"}, reserve.WithAgent("bob"))
	var he *reserve.HeldError
	if !errors.As(err, &he) || !errors.Is(err, reserve.ErrHeld) {
		t.Fatalf("a request overlapping a held reservation: %v, want a HeldError", err)
	}
	if len(he.Conflicts) != 1 || he.Conflicts[0].Pattern != "src/parser/x.go" || he.Conflicts[0].Theirs != "src/parser/**" ||
		he.Conflicts[0].Holder.Agent != "alice" || he.Conflicts[0].Holder.Task != "T1" || he.Conflicts[0].Holder.Host != "h1" {
		t.Fatalf("conflicts %+v: want src/parser/x.go against alice's src/parser/**", he.Conflicts)
	}
	for _, want := range []string{"src/parser/x.go", "alice", "task T1", "host h1", "nothing was reserved"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if got := ids(t, a, "repo", "held"); !slices.Equal(got, []string{held.ID()}) {
		t.Fatalf("held after the refusal: %v, want only %s: the refused request took none of its patterns", got, held.ID())
	}
	other := mustReserve(t, b, "repo", []string{"docs/a.md", "lib/**"})
	if other.Fence() <= held.Fence() {
		t.Fatalf("fence %d after %d: want higher", other.Fence(), held.Fence())
	}
}

func TestTryReserve_SharedAndExclusive(t *testing.T) {
	e := newEnv(t)
	a, b := e.spaces("h1"), e.spaces("h2")
	mustReserve(t, a, "repo", []string{"docs/api.md"}, reserve.Shared())
	mustReserve(t, b, "repo", []string{"docs/**"}, reserve.Shared()) // shared with shared: fine
	if _, err := b.TryReserve(ctxT(t), "repo", []string{"docs/api.md"}); !errors.Is(err, reserve.ErrHeld) {
		t.Fatalf("exclusive over shared: %v, want ErrHeld", err)
	}
	x := mustReserve(t, a, "repo", []string{"src/**"})
	if _, err := b.TryReserve(ctxT(t), "repo", []string{"src/a.go"}, reserve.Shared()); !errors.Is(err, reserve.ErrHeld) {
		t.Fatalf("shared over exclusive: %v, want ErrHeld", err)
	}
	if err := x.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mustReserve(t, b, "repo", []string{"src/a.go"}, reserve.Shared())
}

func TestTryReserve_OneWinsARace(t *testing.T) {
	e := newEnv(t)
	const n = 8
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		mu    sync.Mutex
		won   []*reserve.Reservation
	)
	for i := range n {
		s := e.spaces("h" + string(rune('a'+i%3)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := s.TryReserve(ctxT(t), "repo", []string{"src/**", "docs/x.md"})
			switch {
			case err == nil:
				mu.Lock()
				won = append(won, r)
				mu.Unlock()
			case !errors.Is(err, reserve.ErrHeld):
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d of %d racing requests granted, want 1", len(won), n)
	}
	_ = won[0].Release(ctxT(t))
}

func TestTryReserve_AfterTheTTLOnAnotherHost(t *testing.T) {
	e := newEnv(t)
	a, b := e.spaces("h1"), e.spaces("h2")
	mustReserve(t, a, "repo", []string{"src/**"}, reserve.WithTTL(time.Second), reserve.WithoutKeepAlive())
	if _, err := b.TryReserve(ctxT(t), "repo", []string{"src/a.go"}); !errors.Is(err, reserve.ErrHeld) {
		t.Fatalf("before the TTL: %v, want ErrHeld", err)
	}
	time.Sleep(1100 * time.Millisecond) // the TTL is what is tested
	mustReserve(t, b, "repo", []string{"src/a.go"})
}

func TestTryReserve_ADeadHolderOnThisHostIsFreedAtOnce(t *testing.T) {
	e := newEnv(t)
	cmd, p := child(t)
	a := e.spaces("h1", reserve.WithProcess(p))
	mustReserve(t, a, "repo", []string{"src/**"}, reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := e.spaces("h2").TryReserve(ctxT(t), "repo", []string{"src/a.go"}); !errors.Is(err, reserve.ErrHeld) {
		t.Fatalf("another host, before the TTL: %v, want ErrHeld", err)
	}
	mustReserve(t, e.spaces("h1"), "repo", []string{"src/a.go"})
}

func TestReserve_WaitersAreHandedThePathsInOrder(t *testing.T) {
	e := newEnv(t)
	a := e.spaces("h1")
	first := mustReserve(t, a, "repo", []string{"src/**"})
	type got struct {
		who string
		r   *reserve.Reservation
		err error
	}
	out := make(chan got, 2)
	wait := func(who string, s *reserve.Spaces, pats ...string) {
		r, err := s.Reserve(ctxT(t), "repo", pats)
		out <- got{who, r, err}
	}
	go wait("b", e.spaces("h2"), "src/parser/**")
	waitUntil(t, func() bool { return len(ids(t, a, "repo", "waiting")) == 1 })
	go wait("c", e.spaces("h3"), "src/parser/x.go")
	waitUntil(t, func() bool { return len(ids(t, a, "repo", "waiting")) == 2 })
	// A request that clashes only with a waiter is refused too: it would
	// pass the line.
	if _, err := e.spaces("h4").TryReserve(ctxT(t), "repo", []string{"src/parser/y.go"}); !errors.Is(err, reserve.ErrHeld) {
		t.Fatalf("a request behind waiters: %v, want ErrHeld", err)
	}
	mustReserve(t, e.spaces("h4"), "repo", []string{"docs/**"}) // clashes with nobody
	if err := first.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	g := <-out
	if g.err != nil || g.who != "b" {
		t.Fatalf("first served: %s, %v; want b", g.who, g.err)
	}
	if g.r.Fence() <= first.Fence() {
		t.Fatalf("b's fence %d, first's %d: want higher", g.r.Fence(), first.Fence())
	}
	select {
	case g := <-out:
		t.Fatalf("%s served while b holds: %v", g.who, g.err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := g.r.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	g = <-out
	if g.err != nil || g.who != "c" {
		t.Fatalf("second served: %s, %v; want c", g.who, g.err)
	}
	_ = g.r.Release(ctxT(t))
}

func TestReserve_AWaiterIsServedWhenTheHolderExpires(t *testing.T) {
	e := newEnv(t)
	mustReserve(t, e.spaces("h1"), "repo", []string{"src/**"}, reserve.WithTTL(2*time.Second), reserve.WithoutKeepAlive())
	began := time.Now()
	r, err := e.spaces("h2").Reserve(ctxT(t), "repo", []string{"src/a.go"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(context.Background())
	if took := time.Since(began); took > 4*time.Second {
		t.Fatalf("served %s after a holder with 2s left: the waiter should write at the expiry", took)
	}
}

func TestReserve_AWaiterIsServedWhenTheHolderDiesOnItsHost(t *testing.T) {
	e := newEnv(t)
	cmd, p := child(t)
	mustReserve(t, e.spaces("h1", reserve.WithProcess(p)), "repo", []string{"src/**"}, reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
	done := make(chan error, 1)
	var r *reserve.Reservation
	go func() {
		var err error
		r, err = e.spaces("h1").Reserve(ctxT(t), "repo", []string{"src/a.go"})
		done <- err
	}()
	waitUntil(t, func() bool { return len(ids(t, e.spaces("h1"), "repo", "waiting")) == 1 })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Release(context.Background())
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not served within 10s of its blocker's death on its host (its TTL is a minute)")
	}
}

func TestReserve_AWaitThatEndsLeavesTheLine(t *testing.T) {
	e := newEnv(t)
	a := e.spaces("h1")
	mustReserve(t, a, "repo", []string{"src/**"}, reserve.WithAgent("alice"))
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	_, err := e.spaces("h2").Reserve(ctx, "repo", []string{"src/a.go"})
	var he *reserve.HeldError
	if !errors.As(err, &he) || !he.Waited || !errors.Is(err, context.DeadlineExceeded) || len(he.Conflicts) != 1 || he.Conflicts[0].Holder.Agent != "alice" {
		t.Fatalf("a wait that ran out: %v, want a HeldError naming alice and the deadline", err)
	}
	if w := ids(t, a, "repo", "waiting"); len(w) != 0 {
		t.Fatalf("still waiting after the wait ended: %v", w)
	}
}

func TestReservation_LostWhenReleasedByAnother(t *testing.T) {
	e := newEnv(t)
	r := mustReserve(t, e.spaces("h1"), "repo", []string{"src/**"}, reserve.WithTTL(3*time.Second))
	other, err := e.spaces("h2").Resume(ctxT(t), "repo", r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
		if !errors.Is(r.Err(), reserve.ErrLost) {
			t.Fatalf("ended with %v, want ErrLost", r.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a reservation released by another did not end at its next renewal")
	}
	if _, err := e.spaces("h2").Resume(ctxT(t), "repo", r.ID()); !errors.Is(err, reserve.ErrNoReservation) {
		t.Fatalf("resume of a released reservation: %v, want ErrNoReservation", err)
	}
}

func TestCheck_OthersReservationsAreInTheWay(t *testing.T) {
	e := newEnv(t)
	_, p := child(t)
	agent := e.spaces("h1", reserve.WithProcess(p))
	mine := mustReserve(t, agent, "repo", []string{"src/parser/**"})
	mustReserve(t, e.spaces("h2"), "repo", []string{"docs/api.md"}, reserve.Shared(), reserve.WithAgent("bob"))
	c := e.spaces("h1")
	got, err := c.Check(ctxT(t), "repo", []string{"src/parser/x.go", "docs/api.md", "README.md"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("conflicts %+v: want src/parser/x.go and docs/api.md", got)
	}
	got, _ = c.Check(ctxT(t), "repo", []string{"src/parser/x.go", "docs/api.md"}, reserve.Mine(mine.ID()))
	if len(got) != 1 || got[0].Holder.Agent != "bob" {
		t.Fatalf("with the agent's own reservation named: %+v, want only bob's", got)
	}
	got, _ = c.Check(ctxT(t), "repo", []string{"src/parser/x.go"}, reserve.As([]hostlocal.Process{p}))
	if len(got) != 0 {
		t.Fatalf("from a process the holder runs: %+v, want none", got)
	}
	got, _ = c.Check(ctxT(t), "repo", []string{"docs/api.md"}, reserve.ForReading())
	if len(got) != 0 {
		t.Fatalf("reading a path reserved shared: %+v, want none", got)
	}
}

// Paths found free cost check one read; a reservation in the way whose
// TTL ran out after the record's last write is not reported, however old
// the record (nobody writes when a holder merely expires); the caller's
// lineage is looked up only for one of this host in the way.
func TestCheck_OneReadWhenFreeAndNoneExpired(t *testing.T) {
	e := newEnv(t)
	_, p := child(t)
	mustReserve(t, e.spaces("h2"), "repo", []string{"src/**"}, reserve.WithTTL(time.Second), reserve.WithoutKeepAlive())
	mustReserve(t, e.spaces("h1", reserve.WithProcess(p)), "repo", []string{"docs/**"}, reserve.WithoutKeepAlive())
	c := e.spaces("h1")
	sent := func() uint64 { return e.client.Conn().Stats().OutMsgs }
	before := sent()
	got, err := c.Check(ctxT(t), "repo", []string{"README.md", "web/x.ts"})
	if err != nil || len(got) != 0 {
		t.Fatalf("free paths: %+v, %v", got, err)
	}
	if n := sent() - before; n != 1 {
		t.Errorf("a check of free paths sent %d messages, want 1 (the read)", n)
	}
	if got, _ := c.Check(ctxT(t), "repo", []string{"src/a.go"}); len(got) != 1 {
		t.Fatalf("src/a.go while held: %+v", got)
	}
	// docs/** is held by p, which the caller's lineage (its own, here)
	// does not hold: in the way; with p's lineage it is the caller's own.
	if got, _ := c.Check(ctxT(t), "repo", []string{"docs/x.md"}, reserve.AsLineageOf(os.Getpid())); len(got) != 1 {
		t.Fatalf("docs/x.md, held by another process of this host: %+v", got)
	}
	if got, _ := c.Check(ctxT(t), "repo", []string{"docs/x.md"}, reserve.AsLineageOf(p.PID)); len(got) != 0 {
		t.Fatalf("docs/x.md from the holder's lineage: %+v, want none", got)
	}
	time.Sleep(1200 * time.Millisecond) // src/** expires; the record is not written
	if got, err := c.Check(ctxT(t), "repo", []string{"src/a.go"}); err != nil || len(got) != 0 {
		t.Fatalf("src/a.go past its holder's TTL: %+v, %v; want free", got, err)
	}
}

// waitUntil polls cond every 10 ms for up to 10 s.
func waitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10s")
}
