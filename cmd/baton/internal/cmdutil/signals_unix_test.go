//go:build unix

package cmdutil

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// A stop request that reached baton while a command was running, but was
// not yet passed on when the command ended (the lease lost at that moment),
// interrupts baton instead of vanishing: `baton lead` would otherwise
// campaign again and ignore it.
func TestSignals_AnUndeliveredSignalInterruptsOnceIdle(t *testing.T) {
	sigs, ctx := NotifySignals(context.Background())
	defer sigs.Stop()
	sigs.Running(true)
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(sigs.Forward()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("SIGTERM was not relayed for the running command")
		}
		time.Sleep(time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("a signal for the running command cancelled baton's context")
	}
	sigs.Idle()
	if ctx.Err() == nil {
		t.Fatal("the undelivered SIGTERM was dropped: baton's context is still live")
	}
	if sig, ok := sigs.Interrupted(); !ok || sig != syscall.SIGTERM {
		t.Errorf("Interrupted() = %v, %v; want SIGTERM", sig, ok)
	}
}

// Without a command, a signal cancels at once.
func TestSignals_IdleSignalCancels(t *testing.T) {
	sigs, ctx := NotifySignals(context.Background())
	defer sigs.Stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGHUP did not cancel")
	}
	if sig, _ := sigs.Interrupted(); sig != syscall.SIGHUP {
		t.Errorf("Interrupted() = %v, want SIGHUP", sig)
	}
}
