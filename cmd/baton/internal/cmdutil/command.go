package cmdutil

import (
	"context"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"github.com/batonhq/baton/hostlocal"
)

// SuperviseVerb is the hidden verb that supervises a command run by run or
// lead, so that the command's whole process group dies with baton.
const SuperviseVerb = "__supervise"

// Command is a command line to run for a slot or a leadership.
type Command struct {
	path string
	argv []string
	exe  string
}

// LookCommand resolves argv[0] and the supervisor's program (f.Supervisor,
// else this program's own file). A command that cannot be found is a usage
// error.
func (f *Factory) LookCommand(argv []string) (*Command, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, Usagef("command %q: %v", argv[0], err)
	}
	exe := f.Supervisor
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	return &Command{path: path, argv: argv, exe: exe}, nil
}

// Start runs the command with baton's standard streams and the extra
// environment, as a process group under the supervisor, in the
// terminal's foreground when baton is.
func (c *Command) Start(env ...string) (*hostlocal.Group, error) {
	cmd := exec.Command(c.path, c.argv[1:]...)
	cmd.Args[0] = c.argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	opts := []hostlocal.GroupOption{hostlocal.WithSupervisor(c.exe, SuperviseVerb)}
	if hostlocal.InForeground(0) {
		// An interactive command gets the terminal (and Ctrl-C) itself.
		opts = append(opts, hostlocal.WithForeground(0))
	}
	return hostlocal.StartGroup(cmd, opts...)
}

// Standby starts a supervisor ahead of a command it will run with
// StartOn: for work that must start fast, such as a queue's tasks.
func (c *Command) Standby() (*hostlocal.Standby, error) {
	return hostlocal.StartStandby(os.Stdout, os.Stderr, c.exe, SuperviseVerb)
}

// StandbyTo is Standby with the command's standard output going to
// stdout (a pipe the caller reads, say).
func (c *Command) StandbyTo(stdout io.Writer) (*hostlocal.Standby, error) {
	return hostlocal.StartStandby(stdout, os.Stderr, c.exe, SuperviseVerb)
}

// StartOn runs the command under the standby supervisor s, with stdin as
// its standard input and the extra environment, never in the terminal's
// foreground: for work that is not interactive, several at once.
func (c *Command) StartOn(s *hostlocal.Standby, stdin []byte, env ...string) (*hostlocal.Group, error) {
	cmd := exec.Command(c.path, c.argv[1:]...)
	cmd.Args[0] = c.argv[0]
	cmd.Env = append(os.Environ(), env...)
	return s.Start(cmd, stdin)
}

// Signals relays SIGINT, SIGTERM and SIGHUP sent to baton: while no command
// runs they cancel the context (Interrupted says by which), while one runs
// they are passed on to it through Forward.
type Signals struct {
	ch      chan os.Signal
	fwd     chan os.Signal
	mu      sync.Mutex // guards running and by; held while a signal is routed
	running bool
	by      syscall.Signal
	cancel  context.CancelFunc
	done    chan struct{}
}

// NotifySignals starts relaying; Stop ends it.
func NotifySignals(ctx context.Context) (*Signals, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	s := &Signals{ch: make(chan os.Signal, 4), fwd: make(chan os.Signal, 4), cancel: cancel, done: make(chan struct{})}
	signal.Notify(s.ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		defer close(s.done)
		for {
			select {
			case sig := <-s.ch:
				// Deciding and sending under mu, so that Idle never runs
				// between the two and leaves a signal behind in fwd.
				s.mu.Lock()
				if s.running {
					select {
					case s.fwd <- sig:
					default: // the command has signals pending already
					}
				} else {
					s.interruptLocked(sig)
				}
				s.mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
	return s, ctx
}

// Running says whether a command runs (signals go to it) or not (they
// cancel).
func (s *Signals) Running(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = on
}

// Forward delivers the signals meant for the running command.
func (s *Signals) Forward() <-chan os.Signal { return s.fwd }

// Idle says the command is gone: signals cancel from now on, and one that
// came for the command but was never delivered to it interrupts now. A
// stop request that raced with the command's end is not lost.
func (s *Signals) Idle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = false
	for {
		select {
		case sig := <-s.fwd:
			s.interruptLocked(sig)
		default:
			return
		}
	}
}

// Interrupt records sig as the interruption (the first one wins) and
// cancels the context.
func (s *Signals) Interrupt(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interruptLocked(sig)
}

func (s *Signals) interruptLocked(sig os.Signal) {
	if ss, ok := sig.(syscall.Signal); ok && s.by == 0 {
		s.by = ss
	}
	s.cancel()
}

// Interrupted says whether a signal cancelled the context, and which.
func (s *Signals) Interrupted() (syscall.Signal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by, s.by != 0
}

// Stop ends the relay; signals act as before it.
func (s *Signals) Stop() {
	signal.Stop(s.ch)
	s.cancel()
	<-s.done
}
