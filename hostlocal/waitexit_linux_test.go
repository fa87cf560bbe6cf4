//go:build linux

package hostlocal

import (
	"context"
	"errors"
	"testing"
	"time"
)

// On Linux WaitExit waits in the runtime's poller, not by polling: the
// pidfd path itself answers a deadline.
func TestWaitExit_WaitsOnAPidfd(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done, err := waitExit(ctx, self)
	if !done || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waitExit of this process until a deadline: done %v, %v; want true, context.DeadlineExceeded", done, err)
	}
}
