//go:build !linux

package carry

import "errors"

// execInMemory has no anonymous memory file to run from on this system.
func execInMemory(Payload, []string, []string) error {
	return errors.New("no cache directory to copy the full program into")
}
