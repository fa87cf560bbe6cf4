package hostlocal

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
)

// Process identifies a process on this host by its pid and a start token,
// so that a pid the kernel recycled for another program is not mistaken for
// the original.
type Process struct {
	// PID is the process id.
	PID int `json:"pid"`
	// Start is an opaque token that differs between two processes that had
	// the same pid (on Linux the boot id and the start time in clock ticks,
	// on macOS the start time). It is empty when unknown: then only the pid
	// is checked.
	Start string `json:"start,omitempty"`
}

// Self returns the calling process. It returns an error wrapping
// ErrUnsupported on platforms without process start times. The answer is
// read once: a process's own pid and start never change.
func Self() (Process, error) { return self() }

var self = sync.OnceValues(func() (Process, error) { return LookupProcess(os.Getpid()) })

// LookupProcess returns the process with the given pid and its current start
// token. It returns an error wrapping ErrNoProcess for a pid <= 0, a pid
// that does not exist, and a zombie (a process that exited and was not yet
// reaped), and an error wrapping ErrUnsupported on platforms without process
// start times.
//
// A process of another user counts as existing. If the system hides its
// details (Linux /proc mounted with hidepid), the returned Start is empty.
func LookupProcess(pid int) (Process, error) {
	if pid <= 0 || pid > math.MaxInt32 {
		return Process{}, noProcess(pid)
	}
	return lookupProcess(pid)
}

// Alive reports whether p still runs: its pid exists, is not a zombie and,
// when p.Start is set, its current start token equals p.Start (so a recycled
// pid is not alive). When the pid exists but its start token cannot be read,
// Alive errs on the side of the living and returns true. On platforms
// without process start times it returns false.
func (p Process) Alive() bool {
	cur, err := LookupProcess(p.PID)
	if err != nil {
		return false
	}
	return p.Start == "" || cur.Start == "" || cur.Start == p.Start
}

// ThisBoot reports whether p's start token was taken on this machine since
// it last booted, so that its pid can be checked here at all. A record
// written on another machine (say, one that wrongly shares this host's id)
// or before a reboot is not: its pid means nothing here. It is false when
// the token is empty or the platform cannot tell.
func (p Process) ThisBoot() bool { return p.Start != "" && thisBoot(p.Start) }

// String returns "pid <PID>".
func (p Process) String() string {
	return "pid " + strconv.Itoa(p.PID)
}

// noProcess returns ErrNoProcess wrapped with the pid.
func noProcess(pid int) error {
	return fmt.Errorf("%w: pid %d", ErrNoProcess, pid)
}

// Lineage returns the process pid and its ancestors, parent first after
// it, up to the first process of the system (pid 1), each with its start
// token: so that a record naming a process can be matched against the
// caller's ancestry (is this the agent that runs me?). It returns an error
// wrapping ErrNoProcess if pid is not running, and one wrapping
// ErrUnsupported on platforms without process parents.
func Lineage(pid int) ([]Process, error) {
	var out []Process
	for len(out) < 256 { // a cycle cannot happen; bound it anyway
		p, err := LookupProcess(pid)
		if err != nil {
			if len(out) > 0 {
				return out, nil // the parent exited meanwhile: the lineage ends
			}
			return nil, err
		}
		out = append(out, p)
		ppid, err := parentPID(pid)
		if err != nil || ppid <= 0 || ppid == pid {
			if len(out) == 1 && err != nil {
				return nil, err
			}
			return out, nil
		}
		pid = ppid
	}
	return out, nil
}
