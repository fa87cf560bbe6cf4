package session_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/session"
)

// waitEvent reads events until one of kind for slot arrives.
func waitEvent(t *testing.T, ch <-chan session.Event, kind session.EventKind, slot string, within time.Duration) session.Event {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch ended before %s of %s", kind, slot)
			}
			if ev.Kind == kind && ev.Slot == slot {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s of %s within %s", kind, slot, within)
		}
	}
}

func TestWatch_StreamsPresentJoinCommitCloseExpire(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	before, err := m.Join(ctx, "before", "T0")
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-w; ev.Kind != session.EventPresent || ev.Slot != "before" || ev.Session.Fence != before.Fence {
		t.Fatalf("first event %+v, want present before", ev)
	}
	if ev := <-w; ev.Kind != session.EventSynced {
		t.Fatalf("second event %+v, want synced", ev)
	}
	s, _ := m.Join(ctx, "a", "T1", session.WithTTL(time.Second))
	if ev := <-w; ev.Kind != session.EventJoin || ev.Slot != "a" || ev.Session.TaskID != "T1" {
		t.Errorf("join event %+v", ev)
	}
	s, _ = m.Commit(ctx, s, "hello")
	if ev := <-w; ev.Kind != session.EventCommit || ev.Session.Message != "hello" {
		t.Errorf("commit event %+v", ev)
	}
	m.Close(ctx, before, "fork")
	if ev := <-w; ev.Kind != session.EventClose || ev.Slot != "before" || ev.Session.Result != "fork" {
		t.Errorf("close event %+v", ev)
	}
	ev := waitEvent(t, w, session.EventExpire, "a", 5*time.Second)
	if ev.Session == nil || ev.Session.Fence != s.Fence {
		t.Errorf("expire event %+v, want the last known session", ev)
	}
}

func TestList_AgesComeFromTheServerClock(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	// This host's clock is two hours fast: records say so, ages do not.
	skewed := func() time.Time { return time.Now().Add(2 * time.Hour) }
	m := e.manager("h1", t.TempDir(), session.WithClock(skewed))
	if _, err := m.Join(ctx, "a", "T1", session.WithTTL(60*time.Second)); err != nil {
		t.Fatal(err)
	}
	m.Bucket().Create(ctx, "junk", []byte("not json"), 0)
	l, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sessions) != 1 || len(l.Undecodable) != 1 || l.Undecodable[0].Slot != "junk" {
		t.Fatalf("listing %+v", l)
	}
	s := l.Sessions[0]
	tm := s.Timing(l.ServerTime, 0)
	if tm.Age < 0 || tm.Age > 10*time.Second || tm.Left <= 50*time.Second || tm.Left > 60*time.Second || tm.State != session.StateLive {
		t.Errorf("timing %+v at server time %s, want a fresh live session", tm, l.ServerTime)
	}
	if tm.Age+tm.Left != 60*time.Second {
		t.Errorf("age %s + left %s != TTL", tm.Age, tm.Left)
	}
}

func TestTimingAt_States(t *testing.T) {
	w := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at         time.Duration
		staleAfter time.Duration
		want       session.State
	}{
		{0, 0, session.StateLive},
		{4 * time.Second, 0, session.StateLive},
		{5 * time.Second, 0, session.StateStale},
		{9 * time.Second, 0, session.StateStale},
		{10 * time.Second, 0, session.StateExpiring},
		{2 * time.Second, time.Second, session.StateStale},
	} {
		got := session.TimingAt(w, 10*time.Second, w.Add(tc.at), tc.staleAfter)
		if got.State != tc.want || got.Age != tc.at || got.Left != 10*time.Second-tc.at {
			t.Errorf("at %s (stale after %s): %+v, want %s", tc.at, tc.staleAfter, got, tc.want)
		}
	}
}
