//go:build linux

package hostlocal

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileKey identifies a file the way /proc/locks prints it.
type fileKey struct {
	major, minor uint32
	ino          uint64
}

// flockTable maps each file on which some process holds a flock to the
// pid that took it (the kernel's fl_pid; with a shared lock, one of them).
type flockTable map[fileKey]int

// kernelFlocks reads the flocks held on this host from /proc/locks.
func kernelFlocks() (flockTable, error) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, err
	}
	return parseProcLocks(b), nil
}

// parseProcLocks returns the files and pids of the FLOCK lines of /proc/locks, for
// example "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF" (major and
// minor in hex, inode in decimal). Lines for waiters ("2: -> FLOCK ...")
// and other kinds of locks are skipped, as is anything that does not parse.
func parseProcLocks(b []byte) flockTable {
	table := flockTable{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		parts := strings.Split(f[5], ":")
		if len(parts) != 3 {
			continue
		}
		major, err1 := strconv.ParseUint(parts[0], 16, 32)
		minor, err2 := strconv.ParseUint(parts[1], 16, 32)
		ino, err3 := strconv.ParseUint(parts[2], 10, 64)
		pid, err4 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue
		}
		table[fileKey{major: uint32(major), minor: uint32(minor), ino: ino}] = pid
	}
	return table
}

// holds reports whether the table has a flock on the file fi describes.
func (t flockTable) holds(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	_, held := t[keyOf(st)]
	return held
}

// pid returns the pid holding a flock on the file fi describes, or 0.
func (t flockTable) pid(fi fs.FileInfo) int {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	return t[keyOf(st)]
}

// keyOf is the table's key for a file's stat.
func keyOf(st *syscall.Stat_t) fileKey {
	dev := uint64(st.Dev) // Dev is not uint64 on every GOARCH.
	return fileKey{major: unix.Major(dev), minor: unix.Minor(dev), ino: uint64(st.Ino)}
}

// flockHolderPID returns the pid holding a flock on the file behind fd,
// from /proc/locks, or 0 when it cannot tell.
func flockHolderPID(fd int) int {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0
	}
	table, err := kernelFlocks()
	if err != nil {
		return 0
	}
	if pid := table[keyOf(&st)]; pid > 0 {
		return pid
	}
	return 0
}
