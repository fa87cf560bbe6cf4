//go:build !unix

package carry

import (
	"fmt"
	"io/fs"
	"runtime"
)

// errNoExec says why the client cannot start the full program here: there
// is no exec to run it in the client's process (its pid, streams and
// parent), which is what baton up's pid file and a caller's wait rely on.
func errNoExec() error {
	return fmt.Errorf("%w: starting the full program (up, ui, mcp, --metrics) from the client on %s, which has no exec; use the full program alone, as the release archive for %s ships it (go build ./cmd/baton)",
		ErrUnsupported, runtime.GOOS, runtime.GOOS)
}

// execFile fails: see errNoExec.
func execFile(string, []string, []string) error { return errNoExec() }

// fileOwner reports that ownership is unknown on this system.
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }
