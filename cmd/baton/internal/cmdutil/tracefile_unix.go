//go:build unix

package cmdutil

import (
	"os"
	"syscall"
)

// openTraceFile opens path for appending, creating it 0600, and refuses a
// symbolic link as its last element (O_NOFOLLOW: no window between a check
// and the open).
func openTraceFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
}
