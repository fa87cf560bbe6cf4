//go:build unix

package carry

import (
	"io/fs"
	"syscall"
)

// errNoExec is nil: this system can replace a process's program.
func errNoExec() error { return nil }

// execFile replaces this process's program with the file at path.
func execFile(path string, argv, env []string) error {
	return syscall.Exec(path, argv, env)
}

// fileOwner returns the uid that owns fi.
func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
