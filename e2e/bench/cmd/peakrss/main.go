// Command peakrss runs a command and prints its peak resident set size.
//
//	peakrss CMD [ARG...]
//
// It exists because a child's ru_maxrss counts the memory of the process
// that started it when that process forked with CLONE_VM (as Go's os/exec
// does): run from the benchmark, every command would seem as large as the
// benchmark. peakrss is small, so what it reports is the command's own peak
// unless that is below peakrss's own size (`peakrss /bin/true` shows it).
// The command's stdio is peakrss's; the peak goes to stderr as the last
// line, "peakrss: N KiB". peakrss exits with the command's exit code.
//
// Before starting the command, peakrss drops its executable from the page
// cache. A peak counts the executable's pages the process mapped, and how
// many a fault maps depends on how the file sits in the cache: a binary
// written moments ago (as make bench builds baton) was measured at 25 MiB
// where the same file read back from disk made 17 MiB. Dropped first, every
// executable is read the way a cold start reads it, whichever was built
// last.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peakrss CMD [ARG...]")
		os.Exit(2)
	}
	if err := dropFromCache(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		fmt.Fprintf(os.Stderr, "peakrss: %d KiB\n", ru.Maxrss)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}

// dropFromCache asks the kernel to drop the cached pages of the executable
// name (looked up on PATH as exec does).
func dropFromCache(name string) error {
	path, err := exec.LookPath(name)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
