//go:build !unix

package hostlocal

import (
	"io/fs"
	"os"
)

// fileOwner reports that ownership is unknown on this platform.
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }

// openNoFollow opens path for reading, refusing a symbolic link (checked
// before the open: this platform has no O_NOFOLLOW here).
func openNoFollow(path string) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, symlinkError(path)
	}
	return os.Open(path)
}
