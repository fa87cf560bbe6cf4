//go:build !linux && !darwin

package hostlocal

import (
	"fmt"
	"runtime"
)

func errNoFlock() error {
	return fmt.Errorf("%w: flock gates on %s", ErrUnsupported, runtime.GOOS)
}

func openGate(string, bool) (int, error) { return -1, errNoFlock() }
func tryFlock(int, bool) (bool, error)   { return false, errNoFlock() }
func truncateFD(int) error               { return errNoFlock() }
func writeAtZero(int, []byte) error      { return errNoFlock() }
func readFD(int, int) ([]byte, error)    { return nil, errNoFlock() }
func fileSize(int) (int64, error)        { return 0, errNoFlock() }
func closeFD(int) error                  { return errNoFlock() }
