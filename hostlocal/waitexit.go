package hostlocal

import (
	"context"
	"time"
)

// WaitExit blocks until process p has exited (or its pid is another
// process's now), and returns nil; or until ctx ends, and returns its
// error. On Linux it waits on a pidfd in the Go runtime's poller: no
// thread, no timer, no wake-up while p lives, so that a process can wait
// on many others for nothing. Elsewhere, or where pidfds are not to be
// had, it checks Alive every exitPoll.
func WaitExit(ctx context.Context, p Process) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if done, err := waitExit(ctx, p); done {
		return err
	}
	t := time.NewTicker(exitPoll)
	defer t.Stop()
	for p.Alive() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// exitPoll is how often WaitExit checks a process it cannot wait on.
const exitPoll = 50 * time.Millisecond
