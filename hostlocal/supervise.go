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
// It runs PROGRAM in its own process
// group with the same I/O and environment, returns PROGRAM's exit code (128+N
// when signal N killed it), and kills the whole group with SIGKILL as soon
// as PID is no longer its parent. Signals sent to the group reach PROGRAM
// directly; the supervisor itself ignores them and outlives PROGRAM only to
// report its exit code.
func SuperviseMain(args []string, stderr io.Writer) int {
	parent, argv, err := parseSuperviseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return 2
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, parentDeathSignal, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
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
		// closed it, or died).
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
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return 127
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

// parseSuperviseArgs returns the parent's pid and the program to run, or a
// nil program for a standby (--await).
func parseSuperviseArgs(args []string) (int, []string, error) {
	standby := len(args) == 3 && args[0] == "--parent" && args[2] == "--await"
	if !standby && (len(args) < 4 || args[0] != "--parent" || args[2] != "--") {
		return 0, nil, fmt.Errorf("usage: --parent PID -- PROGRAM [ARGS...], or --parent PID --await")
	}
	pid, err := strconv.Atoi(args[1])
	if err != nil || pid <= 0 {
		return 0, nil, fmt.Errorf("bad parent pid %q", args[1])
	}
	if standby {
		return pid, nil, nil
	}
	return pid, args[3:], nil
}
