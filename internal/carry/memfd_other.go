//go:build !linux

package carry

import (
	"fmt"
	"runtime"
)

// execInMemory has no anonymous memory file to run from on this system.
func execInMemory(Payload, []string, []string) error {
	return fmt.Errorf("%w: a memory file to run the full program from, on %s", ErrUnsupported, runtime.GOOS)
}
