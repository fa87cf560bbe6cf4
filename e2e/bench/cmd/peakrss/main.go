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
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peakrss CMD [ARG...]")
		os.Exit(2)
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
