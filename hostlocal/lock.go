package hostlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

const (
	// locksDir is the state directory's folder of gate files.
	locksDir = "locks"
	// lockExt is the extension of a gate file.
	lockExt = ".lock"
	// maxHolderSize bounds what is read of a gate file.
	maxHolderSize = 64 << 10
	// holderReadWindow is how long a busy gate's file is re-read while it
	// does not hold a whole holder (its holder may be mid-write, or have
	// been descheduled between taking the flock and writing itself).
	holderReadWindow = 50 * time.Millisecond
	// holderReadPause is the pause between two such reads.
	holderReadPause = 500 * time.Microsecond
	// Lock polls a busy gate with a backoff from lockMinBackoff doubling up
	// to lockMaxBackoff.
	lockMinBackoff = time.Millisecond
	lockMaxBackoff = 25 * time.Millisecond
)

//go:generate go run ../internal/jsonrec/recgen

// Holder is what the holder of a gate writes into the gate file. It is
// informational: the kernel's flock, not this record, decides who holds a
// gate.
//
//jsonrec:codec encode
type Holder struct {
	// PID is the holding process (0 in TryLock: the calling process).
	PID int `json:"pid"`
	// Start is the holding process's start token (see Process.Start).
	Start string `json:"start,omitempty"`
	// Host is the host id of the holder.
	Host string `json:"host,omitempty"`
	// Instance is the holder's instance id.
	Instance string `json:"instance,omitempty"`
	// Since is when the gate was taken (zero in TryLock: now).
	Since time.Time `json:"since"`
	// Purpose says why, e.g. "baton join rendering".
	Purpose string `json:"purpose,omitempty"`
}

// MarshalJSON writes h as encoding/json would write its fields, without
// its reflection: a join writes one holder, and pays encoding/json's first
// look at a type otherwise.
func (h Holder) MarshalJSON() ([]byte, error) {
	if b, ok := h.encodeFast(); ok {
		return b, nil
	}
	type fields Holder // without this method
	return json.Marshal(fields(h))
}

// Process returns the holding process as a Process, to check with Alive.
func (h Holder) Process() Process { return Process{PID: h.PID, Start: h.Start} }

// Lock is a held gate. Release it with Unlock; the kernel releases it when
// the process exits, however it exits.
type Lock struct {
	name, path string

	mu sync.Mutex
	fd int // -1 once released
}

// TryLock takes the gate name without waiting and records h in its file,
// <state>/locks/<name>.lock (created with mode 0600). A zero h.PID is
// filled with the calling process (and its start token) and a zero h.Since
// with the current time.
//
// When another holder has the gate, TryLock returns at once an error
// wrapping ErrLocked: a *LockedError naming that holder. An invalid name
// returns an error wrapping ErrInvalidName, an unusable state directory one
// wrapping ErrStateDir, and a platform without flock one wrapping
// ErrUnsupported.
func (d *StateDir) TryLock(name string, h Holder) (*Lock, error) {
	if err := validName("gate", name); err != nil {
		return nil, err
	}
	return d.tryLock(name, h.withProcess())
}

// Lock takes the gate name like TryLock, waiting while it is held until it
// is released or ctx is done. It polls with a short backoff (1 ms, doubling
// up to 25 ms) and leaves no goroutine behind. It makes at least one attempt,
// so a free gate is taken even when ctx is already done.
//
// When ctx is done first, the error wraps both the last *LockedError (so
// errors.Is(err, ErrLocked) holds and errors.As finds the holder) and
// ctx.Err() (context.DeadlineExceeded or context.Canceled). Other errors are
// those of TryLock.
func (d *StateDir) Lock(ctx context.Context, name string, h Holder) (*Lock, error) {
	return d.lockWait(ctx, name, h, nil)
}

// lockWait is Lock; onBusy, when not nil, is called after each attempt that
// found the gate held (tests use it as a barrier).
func (d *StateDir) lockWait(ctx context.Context, name string, h Holder, onBusy func(*LockedError)) (*Lock, error) {
	if err := validName("gate", name); err != nil {
		return nil, err
	}
	h = h.withProcess()
	backoff := lockMinBackoff
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		l, err := d.tryLock(name, h)
		var locked *LockedError
		if !errors.As(err, &locked) {
			return l, err
		}
		if onBusy != nil {
			onBusy(locked)
		}
		if timer == nil {
			timer = time.NewTimer(backoff)
		} else {
			timer.Reset(backoff)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", locked, ctx.Err())
		case <-timer.C:
		}
		backoff = min(2*backoff, lockMaxBackoff)
	}
}

// tryLock is TryLock on a valid name with h's process filled in.
func (d *StateDir) tryLock(name string, h Holder) (*Lock, error) {
	dir, err := d.subdir(locksDir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+lockExt)
	fd, err := openGate(path, true)
	if errors.Is(err, fs.ErrNotExist) { // the locks directory was removed meanwhile
		d.forget(dir)
		if _, err = d.subdir(locksDir); err == nil {
			fd, err = openGate(path, true)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("hostlocal: gate %s: %w", name, err)
	}
	ok, holder, err := flockOrHolder(fd)
	if err != nil {
		_ = closeFD(fd)
		return nil, fmt.Errorf("hostlocal: gate %s: flock %s: %w", name, path, err)
	}
	if !ok {
		_ = closeFD(fd)
		return nil, &LockedError{Name: name, Path: path, Holder: holder}
	}
	if h.Since.IsZero() {
		h.Since = time.Now().UTC()
	}
	if err := writeHolder(fd, h); err != nil {
		// Leave no half-written holder behind: an empty file is a clean gate.
		_ = truncateFD(fd)
		_ = closeFD(fd)
		return nil, fmt.Errorf("hostlocal: gate %s: write holder to %s: %w", name, path, err)
	}
	return &Lock{name: name, path: path, fd: fd}, nil
}

// withProcess fills a zero PID with the calling process and its start token.
func (h Holder) withProcess() Holder {
	if h.PID != 0 {
		return h
	}
	if p, err := Self(); err == nil {
		h.PID, h.Start = p.PID, p.Start
	} else {
		// No start token on this platform: the pid alone still tells people
		// who holds the gate.
		h.PID = os.Getpid()
	}
	return h
}

// writeHolder replaces the file behind fd with h's JSON: truncate, then one
// write at offset 0.
func writeHolder(fd int, h Holder) error {
	b, err := h.MarshalJSON()
	if err != nil {
		return err
	}
	if err := truncateFD(fd); err != nil {
		return err
	}
	return writeAtZero(fd, append(b, '\n'))
}

// readHolder returns the holder recorded in the file behind fd, or nil when
// it holds none; a file that does not parse (its holder may be between
// truncating and writing it) is re-read for up to ~50 ms.
func readHolder(fd int) *Holder {
	deadline := time.Now().Add(holderReadWindow)
	for {
		if b, err := readFD(fd, maxHolderSize); err == nil {
			if h := parseHolder(b); h != nil {
				return h
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(holderReadPause)
	}
}

// flockOrHolder takes the flock behind fd without waiting or, when it is
// held, returns the holder recorded in the file. A held gate whose file has
// no whole holder is in one of two short windows: its holder has just taken
// it and not yet written itself, or is releasing it (the file is emptied
// just before the flock goes). For up to ~50 ms both the flock and the file
// are tried again, so a gate being released is taken rather than reported
// as held by an unknown process. A holder descheduled for longer than that
// (a loaded host) is named by the pid the kernel's lock table gives, where
// the platform has one (/proc/locks on Linux).
func flockOrHolder(fd int) (bool, *Holder, error) {
	deadline := time.Now().Add(holderReadWindow)
	for {
		ok, err := tryFlock(fd, true)
		if ok || err != nil {
			return ok, nil, err
		}
		if b, err := readFD(fd, maxHolderSize); err == nil {
			if h := parseHolder(b); h != nil {
				return false, h, nil
			}
		}
		if time.Now().After(deadline) {
			if pid := flockHolderPID(fd); pid > 0 {
				h := &Holder{PID: pid}
				if p, err := LookupProcess(pid); err == nil {
					h.Start = p.Start
				}
				return false, h, nil
			}
			return false, nil, nil
		}
		time.Sleep(holderReadPause)
	}
}

// parseHolder decodes a gate file's content, or returns nil.
func parseHolder(b []byte) *Holder {
	if len(b) == 0 {
		return nil
	}
	var h Holder
	if err := json.Unmarshal(b, &h); err != nil {
		return nil
	}
	return &h
}

// Unlock releases the gate: it empties the gate file (a cleanly released
// gate leaves an empty file, while one whose holder died keeps the holder's
// record, which is how orphans are recognised), then closes it, which
// releases the flock. The file is never removed. Unlock is idempotent and
// safe for concurrent use: calls after the first return nil. The gate is
// released even when emptying the file fails; the error says so.
func (l *Lock) Unlock() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return nil
	}
	fd := l.fd
	l.fd = -1
	var errs []error
	if err := truncateFD(fd); err != nil {
		errs = append(errs, fmt.Errorf("hostlocal: gate %s: empty %s: %w", l.name, l.path, err))
	}
	if err := closeFD(fd); err != nil {
		errs = append(errs, fmt.Errorf("hostlocal: gate %s: close %s: %w", l.name, l.path, err))
	}
	return errors.Join(errs...)
}

// Name returns the gate's name.
func (l *Lock) Name() string { return l.name }

// Path returns the gate file's path.
func (l *Lock) Path() string { return l.path }
