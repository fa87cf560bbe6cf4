//go:build linux || darwin

package hostlocal

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// parentPoll is how often a supervisor checks that its parent still lives,
// besides the kernel's parent-death signal (Linux), which covers most cases
// at once.
const parentPoll = 250 * time.Millisecond

// SuperviseMain is the body of a supervisor (see WithSupervisor); a program
// calls it from a hidden verb with the arguments StartGroup appended:
// "--parent PID -- PROGRAM ARGS...", or, for a supervisor started ahead
// (StartStandby), "--parent PID --await", which reads the program, its
// arguments and environment from fd 3 (and ends, exit 0, if none comes).
// With "--ready FD" it writes a byte on FD once PROGRAM runs (see Group's
// Stop). It runs PROGRAM in its own process
// group with the same I/O and environment, returns PROGRAM's exit code (128+N
// when signal N killed it), and kills the whole group with SIGKILL as soon
// as PID is no longer its parent. Signals sent to the group reach PROGRAM
// directly; the supervisor itself ignores them and outlives PROGRAM only to
// report its exit code.
func SuperviseMain(args []string, stderr io.Writer) int {
	parent, ready, argv, err := parseSuperviseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return 2
	}
	if ready >= 0 {
		syscall.CloseOnExec(ready) // the command must not hold it open
	}
	// Until the command runs, SIGTERM, SIGINT and SIGHUP keep their
	// default action: one sent to the group then ends this process, so the
	// command is never started and the exit is the signal's, decided by the
	// kernel with nothing to lose on the way. They are caught only once the
	// command runs, and reach it from then on (see below). SIGQUIT, whose
	// default in a Go program is a stack dump, is caught from the start and
	// taken, as far as it has been handed on, as a stop of its own.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, parentDeathSignal, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := askParentDeathSignal(); err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return 1
	}
	if os.Getppid() != parent {
		return 1 // the parent died before we could watch it
	}
	var cmd *exec.Cmd
	if argv == nil {
		// A standby: the command comes on fd 3 (nothing when the parent
		// closed it, or died). What starting it will do once per process
		// is done while it waits: decoding the spec's type, and the
		// runtime's probe of the kernel's pidfd support (a clone).
		warmUp()
		spec := os.NewFile(3, "spec")
		var sp standbySpec
		err := json.NewDecoder(spec).Decode(&sp)
		spec.Close()
		if err != nil || len(sp.Args) == 0 {
			return 0
		}
		cmd = exec.Command(sp.Path, sp.Args[1:]...)
		cmd.Args[0], cmd.Env = sp.Args[0], sp.Env
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, stderr
	// If the supervisor itself is killed, its command goes with it (the
	// rest of the group is what a same-host follower waits for).
	cmd.SysProcAttr = commandAttr()
	if sig := pendingStop(sigs); sig != 0 {
		return 128 + int(sig)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return 127
	}
	// The command runs: a stop sent to the group reaches it, and this
	// process, which outlives it only to report its exit, takes no action.
	// (A stop sent by someone else in the moment between the start and
	// this reaches the command too, and ends this process as before it,
	// and the command with it: a stop all the same. Group.Stop sends none
	// before the ready byte below.)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if ready >= 0 {
		// The command runs: from now on a signal to the group reaches it.
		r := os.NewFile(uintptr(ready), "ready")
		_, _ = r.Write([]byte{1})
		r.Close()
	}
	done := make(chan int, 1)
	go func() {
		code, _ := exitStatus(cmd.Wait())
		done <- code
	}()
	poll := time.NewTicker(parentPoll)
	defer poll.Stop()
	for {
		select {
		case code := <-done:
			return code
		case <-sigs:
		case <-poll.C:
		}
		if os.Getppid() != parent {
			_ = syscall.Kill(0, syscall.SIGKILL) // the whole group, this process too
		}
	}
}

// warmUp does ahead what the first start of a command does once per
// process, so that a standby starts its command as soon as it comes.
func warmUp() {
	var sp standbySpec
	_ = json.Unmarshal([]byte(`{"path":"","args":[],"env":[]}`), &sp)
	if p, err := os.FindProcess(os.Getpid()); err == nil { // the pidfd probe
		_ = p.Release()
	}
}

// pendingStop returns a SIGQUIT received and handed on so far (0: none):
// it asks the command to end, before it started.
func pendingStop(sigs <-chan os.Signal) syscall.Signal {
	for {
		select {
		case sig := <-sigs:
			if s, ok := sig.(syscall.Signal); ok && s == syscall.SIGQUIT {
				return s
			}
		default:
			return 0
		}
	}
}

// parseSuperviseArgs returns the parent's pid, the descriptor on which to
// tell that the command runs (-1: none), and the program to run, or a nil
// program for a standby (--await).
func parseSuperviseArgs(args []string) (int, int, []string, error) {
	usage := fmt.Errorf("usage: --parent PID [--ready FD] -- PROGRAM [ARGS...], or --parent PID [--ready FD] --await")
	if len(args) < 3 || args[0] != "--parent" {
		return 0, 0, nil, usage
	}
	pid, err := strconv.Atoi(args[1])
	if err != nil || pid <= 0 {
		return 0, 0, nil, fmt.Errorf("bad parent pid %q", args[1])
	}
	rest, ready := args[2:], -1
	if len(rest) >= 2 && rest[0] == "--ready" {
		if ready, err = strconv.Atoi(rest[1]); err != nil || ready < 3 {
			return 0, 0, nil, fmt.Errorf("bad ready descriptor %q", rest[1])
		}
		rest = rest[2:]
	}
	switch {
	case len(rest) == 1 && rest[0] == "--await":
		return pid, ready, nil, nil
	case len(rest) >= 2 && rest[0] == "--":
		return pid, ready, rest[1:], nil
	}
	return 0, 0, nil, usage
}
