package hostlocal

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// openTestDir opens a state directory in a fresh temporary folder.
func openTestDir(t *testing.T) *StateDir {
	t.Helper()
	d, err := OpenStateDir(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mustLock takes a gate or fails the test.
func mustLock(t *testing.T, d *StateDir, name string, h Holder) *Lock {
	t.Helper()
	l, err := d.TryLock(name, h)
	if err != nil {
		t.Fatalf("TryLock(%q): %v", name, err)
	}
	t.Cleanup(func() { _ = l.Unlock() })
	return l
}

// gateContent returns the content of a gate file.
func gateContent(t *testing.T, l *Lock) []byte {
	t.Helper()
	b, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// asLocked checks that err is contention and returns its *LockedError.
func asLocked(t *testing.T, err error) *LockedError {
	t.Helper()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v (%T), want a *LockedError", err, err)
	}
	return le
}

func TestTryLock_LiveHolderFailsAtOnceNamingIt(t *testing.T) {
	d := openTestDir(t)
	since := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	first := mustLock(t, d, "slot-x", Holder{Host: "h1", Purpose: "baton join x", Since: since})

	_, lockErr := d.TryLock("slot-x", Holder{Purpose: "second"})
	le := asLocked(t, lockErr)
	if le.Name != "slot-x" || le.Path != first.Path() {
		t.Errorf("LockedError names %q at %q, want slot-x at %q", le.Name, le.Path, first.Path())
	}
	if le.Holder == nil || le.Holder.PID != os.Getpid() || le.Holder.Purpose != "baton join x" {
		t.Fatalf("Holder = %+v, want pid %d purpose %q", le.Holder, os.Getpid(), "baton join x")
	}
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if le.Holder.Start != self.Start {
		t.Errorf("Holder.Start = %q, want %q", le.Holder.Start, self.Start)
	}
	want := "gate slot-x is held by pid " + strconv.Itoa(os.Getpid()) + " (baton join x) on host h1 since 2026-11-22T08:00:00Z"
	if lockErr.Error() != want {
		t.Errorf("Error() = %q, want %q", lockErr.Error(), want)
	}
}

func TestLockedError_UnknownHolder(t *testing.T) {
	err := &LockedError{Name: "slot-x"}
	if got, want := err.Error(), "gate slot-x is held by an unknown process"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrLocked) {
		t.Error("LockedError does not wrap ErrLocked")
	}
}

func TestTryLock_HolderFileIsJSONWithMode0600(t *testing.T) {
	d := openTestDir(t)
	h := Holder{PID: 4242, Start: "s", Host: "h1", Instance: "i-1", Since: time.Unix(1, 0).UTC(), Purpose: "p"}
	l := mustLock(t, d, "g", h)
	if want := filepath.Join(d.Path(), "locks", "g.lock"); l.Path() != want || l.Name() != "g" {
		t.Errorf("Path, Name = %q, %q; want %q, g", l.Path(), l.Name(), want)
	}
	fi, err := os.Stat(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("gate file mode = %v, want 0600", fi.Mode().Perm())
	}
	var got Holder
	if err := json.Unmarshal(gateContent(t, l), &got); err != nil {
		t.Fatal(err)
	}
	if got != h {
		t.Errorf("recorded holder = %+v, want %+v", got, h)
	}
}

func TestTryLock_HolderInAnotherProcessKilledFreesGateAndLeavesOrphan(t *testing.T) {
	d := openTestDir(t)
	hp := startHolder(t, d.Path(), "slot-k", "helper holds slot-k")

	_, err := d.TryLock("slot-k", Holder{})
	le := asLocked(t, err)
	if le.Holder == nil || le.Holder.PID != hp.pid() || le.Holder.Purpose != "helper holds slot-k" {
		t.Fatalf("Holder = %+v, want the helper (pid %d)", le.Holder, hp.pid())
	}
	if !le.Holder.Process().Alive() {
		t.Error("the helper holder is not Alive")
	}

	hp.kill(t)
	if le.Holder.Process().Alive() {
		t.Error("the killed helper is still Alive")
	}
	info := lockInfo(t, d, "slot-k")
	if info.Held || !info.Orphaned {
		t.Fatalf("after SIGKILL: Held=%v Orphaned=%v, want not held, orphaned", info.Held, info.Orphaned)
	}
	if info.Holder == nil || info.Holder.PID != hp.pid() {
		t.Errorf("orphan's Holder = %+v, want the dead helper (pid %d)", info.Holder, hp.pid())
	}

	l, err := d.TryLock("slot-k", Holder{Purpose: "next"})
	if err != nil {
		t.Fatalf("TryLock after the holder died: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if info := lockInfo(t, d, "slot-k"); info.Held || info.Orphaned || info.Holder != nil {
		t.Errorf("after a clean Unlock: %+v, want not held, not orphaned, no holder", info)
	}
	if b := gateContent(t, l); len(b) != 0 {
		t.Errorf("a cleanly released gate file holds %q, want it empty", b)
	}
}

func TestTryLock_StaleRecordOfALiveOtherProcessDoesNotBlock(t *testing.T) {
	d := openTestDir(t)
	dir, err := d.subdir("locks")
	if err != nil {
		t.Fatal(err)
	}
	stale := map[string]Holder{
		"pid1":  {PID: 1, Start: "bogus", Purpose: "stale"},
		"mypid": {PID: os.Getpid(), Purpose: "stale"},
	}
	for name, h := range stale {
		b, _ := json.Marshal(h)
		if err := os.WriteFile(filepath.Join(dir, name+".lock"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := d.TryLock(name, Holder{Purpose: "fresh"})
		if err != nil {
			t.Fatalf("TryLock(%q) over a stale record: %v", name, err)
		}
		var got Holder
		if err := json.Unmarshal(gateContent(t, l), &got); err != nil || got.Purpose != "fresh" {
			t.Errorf("%s: recorded holder %+v (%v), want the fresh one", name, got, err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLock_WaitsAndAcquiresWhenHolderReleases(t *testing.T) {
	d := openTestDir(t)
	holder := mustLock(t, d, "g", Holder{Purpose: "first"})

	busy := make(chan struct{})
	var once sync.Once
	type result struct {
		l   *Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := d.lockWait(context.Background(), "g", Holder{Purpose: "waiter"}, func(*LockedError) {
			once.Do(func() { close(busy) })
		})
		done <- result{l, err}
	}()
	<-busy // the waiter has found the gate held
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Lock: %v", r.err)
	}
	defer r.l.Unlock()
	var got Holder
	if err := json.Unmarshal(gateContent(t, r.l), &got); err != nil || got.Purpose != "waiter" {
		t.Errorf("recorded holder %+v (%v), want the waiter", got, err)
	}
}

func TestLock_TimeoutIsLockedAndDeadlineExceeded(t *testing.T) {
	d := openTestDir(t)
	mustLock(t, d, "g", Holder{Purpose: "first"})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	l, err := d.Lock(ctx, "g", Holder{})
	if l != nil {
		t.Fatal("Lock returned a lock on a held gate")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
	if le := asLocked(t, err); le.Holder == nil || le.Holder.Purpose != "first" {
		t.Errorf("Holder = %+v, want the first holder", le.Holder)
	}
	if !strings.Contains(err.Error(), "(first)") {
		t.Errorf("error %q does not name the holder", err)
	}
}

func TestLock_CancelledContextOnFreeGateTakesIt(t *testing.T) {
	d := openTestDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l, err := d.Lock(ctx, "g", Holder{})
	if err != nil {
		t.Fatalf("Lock on a free gate: %v", err)
	}
	_ = l.Unlock()
	mustLock(t, d, "g", Holder{})
	if _, err := d.Lock(ctx, "g", Holder{}); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrLocked) {
		t.Errorf("err = %v, want ErrLocked and Canceled", err)
	}
}

func TestUnlock_IdempotentAndConcurrent(t *testing.T) {
	d := openTestDir(t)
	l, err := d.TryLock("g", Holder{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			errs <- l.Unlock()
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Unlock: %v", err)
		}
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("Unlock again: %v", err)
	}
	if b := gateContent(t, l); len(b) != 0 {
		t.Errorf("released gate file holds %q, want it empty", b)
	}
	mustLock(t, d, "g", Holder{})
}

func TestInvalidNames_AreRejected(t *testing.T) {
	d := openTestDir(t)
	bad := []string{"", ".", "..", ".hidden", "a/b", "a b", "slot\n", "ü", strings.Repeat("a", 201), "../x"}
	for _, name := range bad {
		checks := map[string]error{}
		_, checks["TryLock"] = d.TryLock(name, Holder{})
		_, checks["Lock"] = d.Lock(context.Background(), name, Holder{})
		_, checks["ClearOrphan"] = d.ClearOrphan(name)
		checks["WritePIDFile name"] = d.WritePIDFile("g", name, 1)
		checks["WritePIDFile group"] = d.WritePIDFile(name, "n", 1)
		checks["ReadPIDFile"] = d.ReadPIDFile("g", name, new(int))
		checks["RemovePIDFile"] = d.RemovePIDFile(name, "n")
		_, checks["PIDFiles"] = d.PIDFiles(name)
		for op, err := range checks {
			if !errors.Is(err, ErrInvalidName) {
				t.Errorf("%s(%q) = %v, want ErrInvalidName", op, name, err)
			}
		}
	}
	for _, name := range []string{"a", "slot-x", "A_b=c.d", "x..y", "trailing.", strings.Repeat("z", 200)} {
		if err := validName("gate", name); err != nil {
			t.Errorf("validName(%q) = %v, want nil", name, err)
		}
	}
}
