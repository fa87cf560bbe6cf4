//go:build darwin

package hostlocal

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// szomb is the p_stat of a zombie (SZOMB in <sys/proc.h>).
const szomb = 5

func lookupProcess(pid int) (Process, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		// For a missing pid the kernel answers with no data, which
		// SysctlKinfoProc reports as EIO.
		if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EIO) {
			return Process{}, noProcess(pid)
		}
		return Process{}, fmt.Errorf("hostlocal: process %d: %w", pid, err)
	}
	if int(kp.Proc.P_pid) != pid {
		return Process{}, noProcess(pid)
	}
	if kp.Proc.P_stat == szomb {
		return Process{}, fmt.Errorf("%w: pid %d exited (zombie)", ErrNoProcess, pid)
	}
	st := kp.Proc.P_starttime
	return Process{PID: pid, Start: fmt.Sprintf("%d.%06d", st.Sec, st.Usec)}, nil
}

// thisBoot cannot tell on this platform: a start token does not name the
// machine.
func thisBoot(string) bool { return false }

// parentPID is the parent of pid, as the kernel tells it.
func parentPID(pid int) (int, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return 0, fmt.Errorf("hostlocal: process %d: %w", pid, err)
	}
	return int(kp.Eproc.Ppid), nil
}
