//go:build !linux && !darwin

package hostlocal

import (
	"fmt"
	"runtime"
)

func lookupProcess(pid int) (Process, error) {
	return Process{}, fmt.Errorf("%w: process start times on %s (pid %d)", ErrUnsupported, runtime.GOOS, pid)
}

// thisBoot cannot tell on this platform: a start token does not name the
// machine.
func thisBoot(string) bool { return false }

func parentPID(pid int) (int, error) {
	return 0, fmt.Errorf("%w: process parents on %s (pid %d)", ErrUnsupported, runtime.GOOS, pid)
}
