package hostlocal_test

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
)

func TestWaitExit_ReturnsWhenTheProcessExitsOrTheContextEnds(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no process start times here")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	p, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := hostlocal.WaitExit(ctx, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitExit of a live process until the deadline: %v, want context.DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() { done <- hostlocal.WaitExit(context.Background(), p) }()
	time.Sleep(50 * time.Millisecond)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitExit after the kill: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitExit did not return within 5s of the kill")
	}
	// Gone already, or a recycled pid: at once.
	if err := hostlocal.WaitExit(context.Background(), p); err != nil {
		t.Fatalf("WaitExit of a process gone: %v", err)
	}
	if err := hostlocal.WaitExit(context.Background(), hostlocal.Process{PID: p.PID, Start: p.Start + "0"}); err != nil {
		t.Fatalf("WaitExit of a recycled pid: %v", err)
	}
}
