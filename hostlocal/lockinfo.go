package hostlocal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// LockInfo describes one gate file, as Locks found it.
type LockInfo struct {
	// Name is the gate's name.
	Name string
	// Path is the gate file.
	Path string
	// Held says whether some process holds the gate.
	Held bool
	// Holder is the holder recorded in the file: the live holder when Held,
	// the dead one when Orphaned, and nil when the file holds no readable
	// holder.
	Holder *Holder
	// Orphaned says the gate is not held but its file is not empty: its
	// holder died holding it. TryLock or ClearOrphan clears the mark.
	Orphaned bool
	// Unusable, when not nil, says why the gate's path cannot be used as a
	// gate (a symbolic link planted there, which baton never follows, or
	// something other than a regular file): TryLock of that gate fails, and
	// only removing the path by hand clears it. Held and Holder are then
	// unset.
	Unusable error
}

// gateFile is a gate file as read by Locks.
type gateFile struct {
	info    LockInfo
	fi      fs.FileInfo
	content []byte
}

// Locks lists the gates of the state directory (<state>/locks/*.lock),
// sorted by name; a missing locks folder is an empty list. It does not take
// or disturb any gate on Linux, where it reads the kernel's lock table
// (/proc/locks). Elsewhere, or when that table is unreadable, it probes each
// gate with a brief shared lock, during which a concurrent TryLock of that
// gate would find it busy.
//
// A gate path that cannot be used (see LockInfo.Unusable) is listed with
// the reason rather than failing the whole list.
//
// The list is a snapshot. Orphaned is advisory: ClearOrphan re-checks under
// the gate before it clears anything. On Linux, a gate held by a process
// outside this pid namespace is not visible in /proc/locks and may be
// reported as not held. On platforms without flock it returns an error
// wrapping ErrUnsupported when there is any gate to probe.
func (d *StateDir) Locks() ([]LockInfo, error) {
	dir := filepath.Join(d.path, locksDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hostlocal: list gates: %w", err)
	}
	var gates []gateFile
	var unusable []LockInfo
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), lockExt)
		if !ok || e.IsDir() || validName("gate", name) != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, content, err := readGateFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile (by hand: baton never unlinks a gate)
		}
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("%w: %s is not a regular file (%s); remove it", ErrStateDir, path, fi.Mode().Type())
		}
		if err != nil {
			unusable = append(unusable, LockInfo{Name: name, Path: path, Unusable: fmt.Errorf("hostlocal: gate %s: %w", name, err)})
			continue
		}
		gates = append(gates, gateFile{info: LockInfo{Name: name, Path: path}, fi: fi, content: content})
	}
	// The kernel's table is read after the files, so a gate released in
	// between shows an empty file on the re-read below, not an orphan.
	table, tableErr := kernelFlocks()
	out := make([]LockInfo, 0, len(gates)+len(unusable))
	out = append(out, unusable...)
	for _, g := range gates {
		info := g.info
		if tableErr == nil {
			info.Held = table.holds(g.fi)
		} else {
			held, err := probeHeld(g.info.Path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("hostlocal: gate %s: %w", info.Name, err)
			}
			info.Held = held
		}
		info.Holder = parseHolder(g.content)
		if info.Held && info.Holder == nil {
			info.Holder = rereadHolder(info.Path)
		}
		if info.Held && info.Holder == nil && tableErr == nil {
			// Taken, its record not yet written: the kernel names the pid.
			if pid := table.pid(g.fi); pid > 0 {
				info.Holder = &Holder{PID: pid}
			}
		}
		if !info.Held && len(g.content) > 0 {
			// An orphan's file does not change; a file that changed since
			// it was read belonged to a live holder that released it or to
			// one that has just taken the gate.
			_, again, err := readGateFile(info.Path)
			info.Orphaned = err == nil && bytes.Equal(again, g.content)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// readGateFile returns a gate file's metadata and content, without locking.
func readGateFile(path string) (fs.FileInfo, []byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxHolderSize))
	if err != nil {
		return nil, nil, err
	}
	return fi, b, nil
}

// rereadHolder re-reads a held gate's holder for a few milliseconds, for a
// holder that was mid-write.
func rereadHolder(path string) *Holder {
	fd, err := openGate(path, false)
	if err != nil {
		return nil
	}
	defer closeFD(fd)
	return readHolder(fd)
}

// probeHeld reports whether a gate is held by trying a shared lock on it
// and releasing it at once.
func probeHeld(path string) (bool, error) {
	fd, err := openGate(path, false)
	if err != nil {
		return false, err
	}
	defer closeFD(fd)
	ok, err := tryFlock(fd, false)
	if err != nil {
		return false, fmt.Errorf("flock %s: %w", path, err)
	}
	return !ok, nil
}

// ClearOrphan removes the orphan mark of the gate name: it takes the gate
// without waiting and, if its file is not empty (a holder died holding it),
// empties it and returns true. A gate held by someone returns false, nil,
// as does a clean or missing gate. The file is never removed. An invalid
// name returns an error wrapping ErrInvalidName, and a platform without
// flock one wrapping ErrUnsupported.
func (d *StateDir) ClearOrphan(name string) (bool, error) {
	if err := validName("gate", name); err != nil {
		return false, err
	}
	path := filepath.Join(d.path, locksDir, name+lockExt)
	fd, err := openGate(path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("hostlocal: gate %s: %w", name, err)
	}
	defer closeFD(fd)
	ok, err := tryFlock(fd, true)
	if err != nil {
		return false, fmt.Errorf("hostlocal: gate %s: flock %s: %w", name, path, err)
	}
	if !ok {
		return false, nil
	}
	size, err := fileSize(fd)
	if err != nil {
		return false, fmt.Errorf("hostlocal: gate %s: stat %s: %w", name, path, err)
	}
	if size == 0 {
		return false, nil
	}
	if err := truncateFD(fd); err != nil {
		return false, fmt.Errorf("hostlocal: gate %s: empty %s: %w", name, path, err)
	}
	return true, nil
}
