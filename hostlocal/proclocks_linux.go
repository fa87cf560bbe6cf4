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

// flockTable is the set of files on which some process holds a flock.
type flockTable map[fileKey]struct{}

// kernelFlocks reads the flocks held on this host from /proc/locks.
func kernelFlocks() (flockTable, error) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, err
	}
	return parseProcLocks(b), nil
}

// parseProcLocks returns the files of the FLOCK lines of /proc/locks, for
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
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		table[fileKey{major: uint32(major), minor: uint32(minor), ino: ino}] = struct{}{}
	}
	return table
}

// holds reports whether the table has a flock on the file fi describes.
func (t flockTable) holds(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	dev := uint64(st.Dev) // Dev is not uint64 on every GOARCH.
	_, held := t[fileKey{major: unix.Major(dev), minor: unix.Minor(dev), ino: uint64(st.Ino)}]
	return held
}
