package hostlocal

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// parentDeathSignal is never sent on macOS, which has no parent-death
// signal: the supervisor polls its parent instead.
const parentDeathSignal = syscall.SIGUSR2

func groupAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func askParentDeathSignal() error { return nil }

// groupRunning reports whether any process of group pgid still exists.
func groupRunning(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// foregroundGroup is the foreground process group of the terminal on fd.
func foregroundGroup(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCGPGRP) }

// setForegroundGroup makes pgrp the foreground process group of the
// terminal on fd.
func setForegroundGroup(fd, pgrp int) error { return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgrp) }

// commandAttr: macOS has no parent-death signal.
func commandAttr() *syscall.SysProcAttr { return nil }
