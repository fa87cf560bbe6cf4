package session_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/session"
)

func TestKeep_RenewsPastSeveralTTLsUntilStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("runs past a TTL")
	}
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	sent := time.Now()
	s, err := m.Join(ctx, "slot", "T1", session.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	kp := m.Keep(s, sent, 0)
	defer kp.Stop()
	// Three TTLs with no call of the holder's.
	select {
	case err := <-kp.Lost():
		t.Fatalf("lost while kept: %v", err)
	case <-time.After(3 * time.Second):
	}
	cur, err := m.Get(ctx, "slot")
	if err != nil || cur.Fence != s.Fence || cur.Renewals < 6 {
		t.Fatalf("after 3 TTLs: %+v, %v; want the same session renewed at least 6 times", cur, err)
	}
	// A commit of the holder's own, with a message, between the renewals.
	next, err := kp.Commit(ctx, "halfway")
	if err != nil || next.Message != "halfway" || kp.Session().Revision < next.Revision {
		t.Fatalf("commit: %+v, %v (keeper at %+v)", next, err, kp.Session())
	}
	if err := kp.Close(session.ResultSuccess, 5*time.Second); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := m.Get(ctx, "slot"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("after close: %v, want ErrNotFound", err)
	}
	if got := tombstoneResult(t, m, "slot"); got != session.ResultSuccess {
		t.Errorf("tombstone result %q, want success", got)
	}
}

func TestKeep_ReportsATakeoverAtOnce(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	m := e.manager("h1", dir)
	s, err := m.Join(ctx, "slot", "T1", session.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	kp := m.Keep(s, time.Now(), 0)
	defer kp.Stop()
	other := e.manager("h1", dir)
	taken, err := other.Join(ctx, "slot", "T2", session.WithForce(true))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-kp.Lost():
		var lost *session.LostError
		if !errors.As(err, &lost) || lost.How != session.LostTaken {
			t.Fatalf("lost: %v, want taken over", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a takeover was not reported")
	}
	// Closing the keeper's session leaves the new holder alone.
	var lost *session.LostError
	if err := kp.Close(session.ResultFail, 5*time.Second); !errors.As(err, &lost) {
		t.Errorf("close after a takeover: %v, want a LostError", err)
	}
	if cur, err := m.Get(ctx, "slot"); err != nil || cur.Fence != taken.Fence {
		t.Errorf("the slot after the old keeper's close: %+v, %v; want fence %d", cur, err, taken.Fence)
	}
}

func TestKeep_ServerGoneIsReportedBeforeTheTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a TTL")
	}
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	const ttl = 2 * time.Second
	sent := time.Now()
	s, err := m.Join(ctx, "slot", "T1", session.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	kp := m.Keep(s, sent, 0)
	defer kp.Stop()
	e.srv.Shutdown()
	select {
	case err := <-kp.Lost():
		var lost *session.LostError
		if !errors.As(err, &lost) || lost.How != session.LostUnrenewed {
			t.Fatalf("lost: %v, want not renewed in time", err)
		}
		// The server counts the TTL from its write of the last renewal (or
		// the join), which came after the keeper stamped it.
		last := kp.Session().RenewedAt
		if last.IsZero() || last.Before(sent) {
			last = sent
		}
		if took := time.Since(last); took >= ttl {
			t.Errorf("reported %s after the last write; the server could expire it at %s", took, ttl)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no loss reported without a server")
	}
}

func TestKeepGroup_OneWatchReportsEachSessionsLoss(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	m := e.manager("h1", dir)
	g := m.KeepGroup()
	defer g.Close()
	keep := func(slot string) *session.Keeper {
		s, err := m.Join(ctx, slot, "T1", session.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return g.Keep(s, time.Now(), 0)
	}
	a, b := keep("a"), keep("b")
	defer a.Stop()
	defer b.Stop()
	other := e.manager("h1", dir)
	if _, err := other.Join(ctx, "b", "T2", session.WithForce(true)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.Lost():
		var lost *session.LostError
		if !errors.As(err, &lost) || lost.How != session.LostTaken || lost.Slot != "b" {
			t.Fatalf("b lost: %v, want taken over", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the takeover of b was not reported")
	}
	// a is untouched, and its own renewals and close are no loss.
	if _, err := a.Commit(ctx, "still here"); err != nil {
		t.Fatalf("commit of a: %v", err)
	}
	if err := a.Close(session.ResultSuccess, 5*time.Second); err != nil {
		t.Fatalf("close of a: %v", err)
	}
	select {
	case err := <-a.Lost():
		t.Fatalf("a reported lost after its own commit and close: %v", err)
	default:
	}
	// A slot kept again after a loss is watched again.
	c := keep("c")
	defer c.Stop()
	if _, err := other.Join(ctx, "c", "T3", session.WithForce(true)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the takeover of c was not reported")
	}
}
