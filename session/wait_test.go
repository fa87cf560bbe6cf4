package session_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/waitline"
)

// withLimits adds the limits bucket, where slots' lines live, to e's
// server, and returns the line of slot as a reader of host h9 sees it.
func (e *env) withLimits(slot string) *waitline.Line {
	e.t.Helper()
	b, err := e.client.Ensure(context.Background(), limits.BucketConfig(session.DefaultPrefix, 1))
	if err != nil {
		e.t.Fatal(err)
	}
	self, err := hostlocal.Self()
	if err != nil {
		e.t.Fatal(err)
	}
	return waitline.New(b, "wait.slot."+slot, "h9", self)
}

// inLine waits until line holds n waiters.
func inLine(t *testing.T, ctx context.Context, line *waitline.Line, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, err := line.Waiters(ctx)
		if err == nil && len(ws) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d in line within 10s (%v), want %d", len(ws), err, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ten joiners that begin to wait 50 ms apart for a held slot, on three
// hosts, are served in that order as each closes the slot after joining.
func TestJoinWait_WaitersAreServedInTheOrderTheyCame(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	line := e.withLimits("slot")
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	holder, err := e.manager("h0", dirs[0]).Join(ctx, "slot", "T-holder")
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	var mu sync.Mutex
	var served []int
	joined := make([]time.Time, n)
	closed := make([]time.Time, n+1) // closed[0]: the holder's close
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Hosts h0-h2, each with its own state directory (its gate)
			// shared by its joiners.
			m := e.manager(fmt.Sprintf("h%d", i%3), dirs[i%3])
			s, err := m.Join(ctx, "slot", fmt.Sprintf("T-%d", i), session.WithWait(20*time.Second))
			if err != nil {
				errs <- fmt.Errorf("waiter %d: %w", i, err)
				return
			}
			at := time.Now()
			mu.Lock()
			served = append(served, i)
			joined[i] = at
			mu.Unlock()
			if err := m.Close(ctx, s, session.ResultSuccess); err != nil {
				errs <- fmt.Errorf("waiter %d: close: %w", i, err)
			}
			mu.Lock()
			closed[i+1] = time.Now()
			mu.Unlock()
		}()
		inLine(t, ctx, line, i+1) // the next begins to wait 50 ms after this one did
		time.Sleep(50 * time.Millisecond)
	}
	if err := e.manager("h0", dirs[0]).Close(ctx, holder, session.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	closed[0] = time.Now()
	mu.Unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if fmt.Sprint(served) != "[0 1 2 3 4 5 6 7 8 9]" {
		t.Fatalf("served in the order %v; want the order they came in", served)
	}
	if ws, err := line.Waiters(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("after all were served: %d in line, %v", len(ws), err)
	}
	handoffs := make([]time.Duration, n)
	for i := range n {
		handoffs[i] = joined[i].Sub(closed[i])
	}
	slices.Sort(handoffs)
	t.Logf("handoff from a close to the next join: median %s, max %s", handoffs[n/2], handoffs[n-1])
}

// A waiter whose context ends leaves the line at once (it does not wait
// for its ticket's TTL), and the one behind it is served next.
func TestJoinWait_ACancelledWaiterLeavesTheLine(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	line := e.withLimits("slot")
	dir := t.TempDir()
	holder, err := e.manager("h1", dir).Join(ctx, "slot", "T-holder")
	if err != nil {
		t.Fatal(err)
	}
	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	aDone := make(chan error, 1)
	go func() {
		_, err := e.manager("h1", dir).Join(actx, "slot", "T-a", session.WithWait(20*time.Second))
		aDone <- err
	}()
	inLine(t, ctx, line, 1)
	bDone := make(chan error, 1)
	var b *session.Session
	mb := e.manager("h2", t.TempDir())
	go func() {
		var err error
		b, err = mb.Join(ctx, "slot", "T-b", session.WithWait(20*time.Second))
		bDone <- err
	}()
	inLine(t, ctx, line, 2)

	cancelA()
	err = <-aDone
	if !errors.Is(err, context.Canceled) || !errors.Is(err, session.ErrHeld) || !strings.Contains(err.Error(), "T-holder") {
		t.Fatalf("cancelled waiter: %v; want ctx's error and the held error naming the holder", err)
	}
	// Its ticket is gone now, not after its TTL.
	ws, err := line.Waiters(ctx)
	if err != nil || len(ws) != 1 || ws[0].Host != "h2" {
		t.Fatalf("after the cancel the line is %+v, %v; want the second waiter alone", ws, err)
	}
	if err := e.manager("h1", dir).Close(ctx, holder, session.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("the waiter behind: %v", err)
	}
	if b.TaskID != "T-b" || b.Fence <= holder.Fence {
		t.Errorf("the waiter behind got %+v", b)
	}
	inLine(t, ctx, line, 0)
}

// A wait that runs out is the held error as a join without a wait gets it,
// naming the holder and how long it waited, and leaves the line.
func TestJoinWait_RunsOutWithTheHeldError(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	line := e.withLimits("slot")
	dir := t.TempDir()
	if _, err := e.manager("h1", dir).Join(ctx, "slot", "T-holder"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		dir  string
		want error
	}{
		{"h1", dir, session.ErrHeld},
		{"h2", t.TempDir(), session.ErrForeignHost},
	} {
		const wait = 300 * time.Millisecond
		began := time.Now()
		_, err := e.manager(tc.host, tc.dir).Join(ctx, "slot", "T-2", session.WithWait(wait))
		took := time.Since(began)
		var he *session.HeldError
		if !errors.Is(err, tc.want) || !errors.As(err, &he) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("join from %s with a wait: %v; want %v alone", tc.host, err, tc.want)
		}
		if he.Waited != wait || he.Holder == nil || he.Holder.TaskID != "T-holder" ||
			!strings.Contains(err.Error(), "waited 300ms") || !strings.Contains(err.Error(), "task T-holder") {
			t.Errorf("held error %q (waited %s), want it to say it waited 300ms and name the holder", err, he.Waited)
		}
		if took < wait || took > wait+2*time.Second {
			t.Errorf("join from %s gave up after %s, want about %s", tc.host, took, wait)
		}
		inLine(t, ctx, line, 0)
	}
}

// A waiter does not hold the host gate while it waits: another join of the
// slot on its host is told who holds the slot, not that the gate is busy.
func TestJoinWait_AWaiterDoesNotHoldTheGate(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	line := e.withLimits("slot")
	dir := t.TempDir()
	holder, err := e.manager("h1", dir).Join(ctx, "slot", "T-holder")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.manager("h1", dir).Join(ctx, "slot", "T-waiter", session.WithWait(20*time.Second))
		done <- err
	}()
	inLine(t, ctx, line, 1)
	if _, err := e.manager("h1", dir).Join(ctx, "slot", "T-3"); !errors.Is(err, session.ErrHeld) {
		t.Fatalf("a join beside a waiter: %v; want ErrHeld (the gate free)", err)
	}
	if err := e.manager("h1", dir).Close(ctx, holder, session.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A join that does not wait takes a free slot whoever waits (as a lease's
// TryAcquire does); one that waits queues behind the waiters.
func TestJoinWait_AJoinWithoutAWaitDoesNotLookAtTheLine(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	line := e.withLimits("slot")
	b, err := e.client.Ensure(ctx, limits.BucketConfig(session.DefaultPrefix, 1))
	if err != nil {
		t.Fatal(err)
	}
	// A live waiter of another host, ahead of everyone: its ticket outlives
	// the test.
	self, _ := hostlocal.Self()
	data, _ := waitline.Ticket{ID: "ahead", Host: "h9", PID: self.PID, PIDStart: self.Start, Since: time.Now()}.MarshalJSON()
	aheadRev, err := b.Create(ctx, "wait.slot.slot.ahead", data, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.manager("h1", t.TempDir()).Join(ctx, "slot", "T-1")
	if err != nil {
		t.Fatalf("a join without a wait of a free slot: %v", err)
	}
	// A waiter behind the ticket ahead is not served though the slot frees.
	done := make(chan error, 1)
	go func() {
		_, err := e.manager("h2", t.TempDir()).Join(ctx, "slot", "T-2", session.WithWait(20*time.Second))
		done <- err
	}()
	inLine(t, ctx, line, 2)
	if err := e.manager("h1", t.TempDir()).Close(ctx, s, session.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the waiter behind another was served first: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := b.Delete(ctx, "wait.slot.slot.ahead", aheadRev, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("once the waiter ahead left: %v", err)
	}
}

// The ticket of a waiter that died on this host does not hold up the line
// (waitline removes it at once; here its TTL would outlast the test).
func TestJoinWait_ADeadWaiterOfThisHostDoesNotHoldUpTheLine(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	line := e.withLimits("slot")
	b, err := e.client.Ensure(ctx, limits.BucketConfig(session.DefaultPrefix, 1))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dead, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	data, _ := waitline.Ticket{ID: "gone", Host: "h1", PID: dead.PID, PIDStart: dead.Start, Since: time.Now()}.MarshalJSON()
	if _, err := b.Create(ctx, "wait.slot.slot.gone", data, time.Minute); err != nil {
		t.Fatal(err)
	}
	inLine(t, ctx, line, 1)
	holder, err := e.manager("h2", t.TempDir()).Join(ctx, "slot", "T-holder")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.manager("h1", t.TempDir()).Join(ctx, "slot", "T-1", session.WithWait(20*time.Second))
		done <- err
	}()
	// The slot is closed once the waiter is in line (this process's ticket).
	self, _ := hostlocal.Self()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ws, _ := line.Waiters(ctx)
		if slices.ContainsFunc(ws, func(w waitline.Waiter) bool { return w.PID == self.PID }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter is not in line within 10s")
		}
	}
	if err := e.manager("h2", t.TempDir()).Close(ctx, holder, session.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter behind a dead one was not served within 10s")
	}
	inLine(t, ctx, line, 0)
}

// Without the limits bucket (a server an older baton up made), a waiter
// still waits for the slot, watching it, and takes it when it is closed.
func TestJoinWait_WithoutTheLimitsBucketWaitersWatchTheSlot(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	if _, err := e.client.Bucket(limits.BucketConfig(session.DefaultPrefix, 0)).Latest(ctx, "x"); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Fatalf("limits bucket: %v; want none", err)
	}
	holder, err := e.manager("h1", t.TempDir()).Join(ctx, "slot", "T-holder")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.manager("h2", t.TempDir()).Join(ctx, "slot", "T-2", session.WithWait(20*time.Second))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the waiter returned while the slot was held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := e.manager("h1", t.TempDir()).Close(ctx, holder, session.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := e.manager("h2", t.TempDir()).Join(ctx, "slot", "T-3", session.WithWait(200*time.Millisecond)); !errors.Is(err, session.ErrHeld) {
		t.Fatalf("a wait that runs out without the bucket: %v; want ErrHeld", err)
	}
}
