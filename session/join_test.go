package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

func TestJoin_CreatesSessionWithFence(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	s, err := m.Join(ctx, "rendering", "T1", session.WithAgent("a1"), session.WithTTL(20*time.Second),
		session.WithMeta(map[string]string{"k": "v"}))
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if s.Fence == 0 || s.Fence != s.Revision || s.Host != "h1" || s.TaskID != "T1" || s.AgentID != "a1" || s.TTL != 20*time.Second {
		t.Errorf("session = %+v", s)
	}
	got, err := m.Get(ctx, "rendering")
	if err != nil {
		t.Fatal(err)
	}
	if got.Fence != s.Fence || got.Meta["k"] != "v" || got.Written.IsZero() || got.TTL != 20*time.Second {
		t.Errorf("read back %+v, want fence %d, meta, server time and TTL", got, s.Fence)
	}
}

func TestJoin_SecondJoinOnSameHostIsHeldNamingHolder(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	first, err := e.manager("h1", dir).Join(ctx, "slot", "T1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.manager("h1", dir).Join(ctx, "slot", "T2")
	var he *session.HeldError
	if !errors.Is(err, session.ErrHeld) || !errors.As(err, &he) {
		t.Fatalf("second join: %v, want ErrHeld", err)
	}
	if he.Holder == nil || he.Holder.Fence != first.Fence || he.Holder.TaskID != "T1" {
		t.Errorf("holder = %+v, want the first session", he.Holder)
	}
	if !strings.Contains(err.Error(), "task T1") || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", first.PID)) {
		t.Errorf("message %q does not name the holder", err)
	}
}

func TestJoin_ForeignHostIsRefusedEvenForced(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	if _, err := e.manager("h1", t.TempDir()).Join(ctx, "slot", "T1"); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		_, err := e.manager("h2", t.TempDir()).Join(ctx, "slot", "T2", session.WithForce(force))
		if !errors.Is(err, session.ErrForeignHost) || !strings.Contains(err.Error(), "h1") {
			t.Errorf("join from h2 (force=%v): %v, want ErrForeignHost naming h1", force, err)
		}
	}
}

func TestJoin_ForceOnSameHostReplacesWithLargerFence(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	first, err := e.manager("h1", dir).Join(ctx, "slot", "T1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.manager("h1", dir).Join(ctx, "slot", "T2", session.WithForce(true))
	if err != nil {
		t.Fatalf("forced join: %v", err)
	}
	if second.Fence <= first.Fence {
		t.Errorf("fence after takeover %d, want > %d", second.Fence, first.Fence)
	}
	got, _ := e.manager("h1", dir).Get(ctx, "slot")
	if got.TaskID != "T2" {
		t.Errorf("slot holds task %s, want T2", got.TaskID)
	}
}

func TestJoin_ConcurrentJoinersExactlyOneWins(t *testing.T) {
	for _, sameHost := range []bool{true, false} {
		t.Run(fmt.Sprint("same host ", sameHost), func(t *testing.T) {
			ctx := ctxT(t)
			e := newEnv(t)
			const n = 20
			managers := make([]*session.Manager, n)
			for i := range managers {
				host := "h1"
				if !sameHost {
					host = fmt.Sprintf("h%d", i)
				}
				// Separate state dirs: the host gate does not serialise them,
				// so the KV CAS alone decides.
				managers[i] = e.manager(host, t.TempDir())
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, n)
			for i, m := range managers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[i] = m.Join(ctx, "contended", fmt.Sprintf("T%d", i))
				}()
			}
			close(start)
			wg.Wait()
			wins := 0
			want := session.ErrHeld
			if !sameHost {
				want = session.ErrForeignHost
			}
			for _, err := range errs {
				switch {
				case err == nil:
					wins++
				case !errors.Is(err, want):
					t.Errorf("loser: %v, want %v", err, want)
				}
			}
			if wins != 1 {
				t.Fatalf("%d winners, want 1", wins)
			}
		})
	}
}

func TestJoin_BusyGateFailsAtOnceOrWaits(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	sd, _ := hostlocal.OpenStateDir(dir)
	gate, err := sd.TryLock("slot-slot", hostlocal.Holder{Purpose: "other spawner"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.manager("h1", dir).Join(ctx, "slot", "T1")
	if !errors.Is(err, session.ErrGateBusy) || !errors.Is(err, hostlocal.ErrLocked) || !strings.Contains(err.Error(), "other spawner") {
		t.Fatalf("join with a busy gate: %v, want ErrGateBusy naming the holder", err)
	}
	// With a wait, the join waits while the gate is held and proceeds once
	// it is released.
	done := make(chan error, 1)
	go func() {
		_, err := e.manager("h1", dir).Join(ctx, "slot", "T1", session.WithWait(20*time.Second))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("join with a wait returned while the gate was held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	gate.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("join with wait: %v", err)
	}
}

func TestJoin_UndecodableRecordIsNeverFree(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	if _, err := m.Bucket().Create(ctx, "slot", []byte("\x00garbage"), 0); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		if _, err := m.Join(ctx, "slot", "T1", session.WithForce(force)); !errors.Is(err, session.ErrUndecodable) {
			t.Errorf("join over garbage (force=%v): %v, want ErrUndecodable", force, err)
		}
	}
	if _, err := m.Get(ctx, "slot"); !errors.Is(err, session.ErrUndecodable) {
		t.Errorf("get: %v, want ErrUndecodable", err)
	}
}

func TestJoin_SpawnRunsInsideTheGate(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	m := e.manager("h1", dir)
	var inside error
	_, err := m.Join(ctx, "slot", "T1", session.WithSpawn(func(ctx context.Context, s *session.Session) error {
		// Another process of this host trying now finds the gate busy.
		_, inside = e.manager("h1", dir).Join(ctx, "slot", "T2")
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(inside, session.ErrGateBusy) {
		t.Errorf("join during the spawn: %v, want ErrGateBusy", inside)
	}
}

func TestJoin_FailedSpawnUndoesTheSession(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	boom := errors.New("boom")
	_, err := m.Join(ctx, "slot", "T1", session.WithSpawn(func(context.Context, *session.Session) error { return boom }))
	if !errors.Is(err, boom) {
		t.Fatalf("join: %v, want the spawn's error", err)
	}
	if _, err := m.Get(ctx, "slot"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("after a failed spawn: %v, want no session", err)
	}
}

func TestJoin_InvalidInput(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	for _, tc := range []struct {
		slot, task string
		opts       []session.JoinOption
	}{
		{"a..b", "T", nil},
		{".a", "T", nil},
		{"a b", "T", nil},
		{strings.Repeat("x", 129), "T", nil},
		{"ok", "", nil},
		{"ok", "T", []session.JoinOption{session.WithTTL(1500 * time.Millisecond)}},
		{"ok", "T", []session.JoinOption{session.WithTTL(0)}},
		{"ok", "T", []session.JoinOption{session.WithWait(-time.Second)}},
	} {
		if _, err := m.Join(ctx, tc.slot, tc.task, tc.opts...); !errors.Is(err, session.ErrInvalid) {
			t.Errorf("join(%q, %q): %v, want ErrInvalid", tc.slot, tc.task, err)
		}
	}
}

func TestJoin_MissingBucket(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir(), session.WithPrefix("other"))
	if _, err := m.Join(ctx, "slot", "T1"); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("join without a bucket: %v, want kv.ErrBucketNotFound", err)
	}
}
