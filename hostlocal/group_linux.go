package hostlocal

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// parentDeathSignal is what a supervised leader receives when its parent
// dies; it then checks that its parent really changed before killing its
// group.
const parentDeathSignal = syscall.SIGUSR2

func groupAttr(supervised bool) *syscall.SysProcAttr {
	sig := syscall.SIGKILL
	if supervised {
		sig = parentDeathSignal
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}

// askParentDeathSignal makes the kernel send parentDeathSignal to this
// process when its parent dies.
func askParentDeathSignal() error {
	return unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(parentDeathSignal), 0, 0, 0)
}

// groupRunning reports whether any process of group pgid is still running.
// Zombies do not count: orphans reparented to an init that reaps slowly
// must not hold up Stop. The answer errs towards "running".
func groupRunning(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		line := string(data)
		i := strings.LastIndexByte(line, ')')
		if i < 0 {
			continue
		}
		// After the command name: state (field 3), ppid (4), pgrp (5).
		f := strings.Fields(line[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid && pid > 0 {
			return true
		}
	}
	return false
}

// foregroundGroup is the foreground process group of the terminal on fd.
func foregroundGroup(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCGPGRP) }

// setForegroundGroup makes pgrp the foreground process group of the
// terminal on fd.
func setForegroundGroup(fd, pgrp int) error { return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgrp) }

// commandAttr makes the supervised command die with its supervisor.
func commandAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
