//go:build linux

package hostlocal

import "golang.org/x/sys/unix"

// exitHandle is a pidfd (fd -1: none).
type exitHandle struct{ fd int }

func (h exitHandle) valid() bool { return h.fd >= 0 }

func (h exitHandle) close() {
	if h.fd >= 0 {
		_ = unix.Close(h.fd)
	}
}

// openExit opens a pidfd of p, checking after the open that the pid is
// still p's (it may have been recycled before); a kernel without pidfds,
// or a process hidden from this one, gets none.
func openExit(p Process) exitHandle {
	fd, err := unix.PidfdOpen(p.PID, unix.PIDFD_NONBLOCK)
	if err != nil {
		return exitHandle{fd: -1}
	}
	if p.Start != "" && !p.Alive() {
		// Recycled, or gone: a handle that says so at once is what Exited
		// needs, and Alive says it.
		_ = unix.Close(fd)
		return exitHandle{fd: -1}
	}
	return exitHandle{fd: fd}
}

// pollExits checks the pidfds in one poll(2): a pidfd is readable once its
// process has exited. If poll fails, none is reported.
func pollExits(hs []exitHandle) []bool {
	out := make([]bool, len(hs))
	if len(hs) == 0 {
		return out
	}
	fds := make([]unix.PollFd, len(hs))
	for i, h := range hs {
		fds[i] = unix.PollFd{Fd: int32(h.fd), Events: unix.POLLIN}
	}
	for {
		_, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return out
		}
		break
	}
	for i := range fds {
		out[i] = fds[i].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
	}
	return out
}
