//go:build !linux

package hostlocal

import (
	"fmt"
	"io/fs"
	"runtime"
)

// flockTable is the kernel's table of flocks, which this platform does not
// expose.
type flockTable struct{}

// kernelFlocks reports that there is no lock table to read, so Locks probes.
func kernelFlocks() (flockTable, error) {
	return flockTable{}, fmt.Errorf("%w: a kernel lock table on %s", ErrUnsupported, runtime.GOOS)
}

func (flockTable) holds(fs.FileInfo) bool { return false }
func (flockTable) pid(fs.FileInfo) int    { return 0 }

// flockHolderPID cannot tell who holds a flock on this platform.
func flockHolderPID(int) int { return 0 }
