//go:build linux || darwin

package hostlocal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// Group is a child process started as the leader of its own process group,
// so that it and everything it starts can be signalled together, and that
// dies with this process: when this process dies, even by SIGKILL, the group
// is killed (through a supervisor, see WithSupervisor).
type Group struct {
	pid  int
	done chan struct{}
	// ready is closed once a supervisor has started the command (or ended
	// without it): a signal sent to the group before would reach only the
	// supervisor. Closed at once for a group without one.
	ready chan struct{}
	code  int
	err   error
}

// GroupOption configures StartGroup.
type GroupOption func(*groupConfig)

type groupConfig struct {
	supervisor []string
	tty        int // >= 0: put the group in the foreground of this terminal
}

// WithSupervisor runs the command under a supervisor: argv is a program and
// arguments that end up calling SuperviseMain with the rest of the command
// line (typically this program re-executed with a hidden verb). The
// supervisor leads the process group, asks the kernel for a signal when its
// parent dies, and then kills the whole group, so a shell wrapper cannot
// leave the real work running. Without it, only the direct child is killed
// when this process dies (Linux) or nothing is (elsewhere). Default: none.
func WithSupervisor(argv ...string) GroupOption {
	return func(c *groupConfig) { c.supervisor = argv }
}

// WithForeground makes the group the foreground process group of the
// terminal open on fd (usually 0) while it runs, so that an interactive
// command can read the terminal and gets Ctrl-C itself; when its leader
// exits, this process's group gets the terminal back. Use it only when this
// process is in the terminal's foreground (see InForeground). Default: the
// group runs in the background of the terminal, if any.
func WithForeground(fd int) GroupOption {
	return func(c *groupConfig) { c.tty = fd }
}

// InForeground reports whether fd is a terminal whose foreground process
// group is this process's.
func InForeground(fd int) bool {
	pgrp, err := foregroundGroup(fd)
	return err == nil && pgrp == syscall.Getpgrp()
}

// StartGroup starts cmd (made with exec.Command, its I/O and environment
// set) as the leader of a new process group. It returns an error from
// exec.Command's lookup or from starting the process.
func StartGroup(cmd *exec.Cmd, opts ...GroupOption) (*Group, error) {
	cfg := groupConfig{tty: -1}
	for _, o := range opts {
		o(&cfg)
	}
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	var ready *os.File
	if len(cfg.supervisor) > 0 {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer w.Close() // the supervisor has its copy once started
		ready = r
		cmd.ExtraFiles = append(cmd.ExtraFiles, w)
		args := append([]string{}, cfg.supervisor...)
		args = append(args, "--parent", strconv.Itoa(os.Getpid()), "--ready", strconv.Itoa(2+len(cmd.ExtraFiles)), "--", cmd.Path)
		cmd.Args = append(args, cmd.Args[1:]...)
		cmd.Path = cfg.supervisor[0]
	}
	cmd.SysProcAttr = groupAttr(len(cfg.supervisor) > 0)
	if cfg.tty >= 0 {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, cfg.tty
	}
	return startGroup(cmd, cfg.tty, ready)
}

// startGroup starts cmd, its attributes set, and waits for it in a
// goroutine of its own. ready, if not nil, is the read end of the pipe on
// which a supervisor tells that its command runs (a byte, or the pipe's
// end when it exits without one); startGroup owns it.
func startGroup(cmd *exec.Cmd, tty int, ready *os.File) (*Group, error) {
	g := &Group{done: make(chan struct{}), ready: make(chan struct{})}
	if ready == nil {
		close(g.ready)
	} else {
		go func() {
			defer close(g.ready)
			defer ready.Close()
			var b [1]byte
			_, _ = ready.Read(b[:]) // a byte, or EOF: either way, nothing more to wait for
		}()
	}
	started := make(chan error, 1)
	go func() {
		// The kernel sends the parent-death signal when the thread that
		// forked the child exits, not the process: keep this thread until
		// the child is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		g.pid = cmd.Process.Pid
		started <- nil
		g.code, g.err = exitStatus(cmd.Wait())
		if tty >= 0 {
			takeForeground(tty)
		}
		close(g.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return g, nil
}

// exitStatus turns cmd.Wait's error into an exit code: the process's own,
// or 128+N when it was killed by signal N, as shells report it.
func exitStatus(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return -1, err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ee.ExitCode(), nil
}

// GroupRunning reports whether any process of the process group pgid is
// still running (zombies do not count). A group whose id was reused counts
// as running: the answer errs towards "running".
func GroupRunning(pgid int) bool { return pgid > 0 && groupRunning(pgid) }

// PID is the group leader's pid, which is also the process group id.
func (g *Group) PID() int { return g.pid }

// Done is closed when the group leader has exited.
func (g *Group) Done() <-chan struct{} { return g.done }

// Wait blocks until the group leader exits and returns its exit code (128+N
// if signal N killed it). The error is set only when waiting itself failed.
func (g *Group) Wait() (int, error) {
	<-g.done
	return g.code, g.err
}

// Signal sends sig to every process of the group. A group that no longer
// exists is not an error.
func (g *Group) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-g.pid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("hostlocal: signal process group %d: %w", g.pid, err)
}

// Stop asks the group to stop with SIGTERM and, if any of it is still
// running after grace, kills it with SIGKILL. It returns once the leader
// has exited and no member is left running (or the grace is over), with the
// leader's exit code. A group already gone is left alone.
func (g *Group) Stop(grace time.Duration) (int, error) {
	if g.exited() && !groupRunning(g.pid) {
		return g.Wait() // nothing left to stop (and the pgid may be free for reuse)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	// A supervisor that has not started the command yet would take the
	// SIGTERM for itself: wait until it has (within the grace).
	select {
	case <-g.ready:
	case <-g.done:
	case <-deadline.C:
		_ = g.Signal(syscall.SIGKILL)
		return g.Wait()
	}
	_ = g.Signal(syscall.SIGTERM)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-deadline.C:
			_ = g.Signal(syscall.SIGKILL)
			return g.Wait()
		case <-poll.C:
			// The leader may be gone while members it started still run.
			if g.exited() && !groupRunning(g.pid) {
				return g.Wait()
			}
		}
	}
}

// takeForeground makes this process's group the foreground of the terminal
// on fd again. A background process must ignore SIGTTOU to do so.
func takeForeground(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = setForegroundGroup(fd, syscall.Getpgrp())
}

func (g *Group) exited() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}
