//go:build !unix

package cmdutil

import (
	"fmt"
	"io/fs"
	"os"
)

// openTraceFile opens path for appending, creating it 0600, and refuses a
// symbolic link (checked before the open: this platform has no O_NOFOLLOW).
func openTraceFile(path string) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s is a symbolic link; baton does not follow it", path)
	}
	return os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
}
