//go:build linux

package hostlocal

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waitExit waits on a pidfd of p in the runtime's poller; done is false if
// it cannot (no pidfds, or the poller does not take it), and the caller
// polls.
func waitExit(ctx context.Context, p Process) (done bool, err error) {
	fd, err := unix.PidfdOpen(p.PID, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return true, nil
	}
	if err != nil {
		return false, nil
	}
	if p.Start != "" && !p.Alive() {
		_ = unix.Close(fd)
		return true, nil // recycled, or gone
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false, nil
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool {
		// Readable once p exited: ask without blocking; else the poller
		// waits for it.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, perr := unix.Poll(fds, 0)
		return perr == nil && n > 0 && fds[0].Revents != 0
	})
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return true, ctx.Err()
	default:
		return false, nil // not pollable here: the caller polls
	}
}
