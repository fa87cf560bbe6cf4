//go:build unix

package kvserver

import (
	"path/filepath"
	"syscall"
)

// freeSpace is what the filesystem holding dir has free for an unprivileged
// writer, in bytes.
func freeSpace(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Clean(dir), &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
