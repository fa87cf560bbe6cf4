package carry

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// execInMemory copies the full program into an anonymous memory file and
// execs it from there: for a process whose cache cannot be written. The
// copy is this process's alone (its memory, until it ends).
func execInMemory(p Payload, argv, env []string) error {
	fd, err := unix.MemfdCreate("baton", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "memfd:baton")
	defer f.Close()
	if err := p.copyTo(f); err != nil {
		return err
	}
	// The kernel opens the file before it closes this process's
	// close-on-exec descriptors, the memory file's among them.
	return syscall.Exec(fmt.Sprintf("/proc/self/fd/%d", fd), argv, env)
}
