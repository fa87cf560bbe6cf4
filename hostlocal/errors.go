package hostlocal

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrLocked means a gate is held by another holder (another process, or
	// another open of the same gate in this process). TryLock and Lock return
	// it wrapped in a *LockedError that names the holder. Contention is this
	// value, never a generic failure.
	ErrLocked = errors.New("hostlocal: gate is held by another process")

	// ErrNoProcess means there is no such process: the pid is not positive,
	// does not exist, is a zombie, or was recycled for a process whose start
	// token differs.
	ErrNoProcess = errors.New("hostlocal: no such process")

	// ErrInvalidName means a gate, pid-file or group name is not 1-200
	// characters of A-Z a-z 0-9 - _ = . or starts with a dot (which also
	// rules out "." and ".."), or a host id override is not usable.
	ErrInvalidName = errors.New("hostlocal: invalid name")

	// ErrUnsupported means the platform lacks what an operation needs (flock
	// gates, process start times). errors.Is(err, errors.ErrUnsupported)
	// holds for it as well.
	ErrUnsupported = fmt.Errorf("hostlocal: %w", errors.ErrUnsupported)

	// ErrStateDir means the state directory is unusable: it cannot be
	// created, is not a directory, or is owned by another user. It is
	// returned wrapped with the path and, when there is one, the OS error.
	ErrStateDir = errors.New("hostlocal: state directory unusable")
)

// LockedError reports a gate held by someone else. It wraps ErrLocked.
type LockedError struct {
	// Name is the gate's name.
	Name string
	// Path is the gate file.
	Path string
	// Holder is what the holder wrote into the gate file. When the file
	// holds no readable holder (a holder that has not finished writing it),
	// it is the pid (and start token) the kernel's lock table names, with
	// nothing else; nil where the platform has no such table.
	Holder *Holder
}

// Error names the gate and its holder, for example
// "gate slot-x is held by pid 4242 (baton join x) on host h1 since 2026-11-22T08:00:00Z".
func (e *LockedError) Error() string {
	h := e.Holder
	if h == nil || h.PID <= 0 {
		return fmt.Sprintf("gate %s is held by an unknown process", e.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gate %s is held by pid %d", e.Name, h.PID)
	if h.Purpose != "" {
		fmt.Fprintf(&b, " (%s)", h.Purpose)
	}
	if h.Host != "" {
		fmt.Fprintf(&b, " on host %s", h.Host)
	}
	if !h.Since.IsZero() {
		fmt.Fprintf(&b, " since %s", h.Since.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// Unwrap returns ErrLocked, so errors.Is(err, ErrLocked) holds.
func (e *LockedError) Unwrap() error { return ErrLocked }
