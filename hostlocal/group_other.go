//go:build !linux && !darwin

package hostlocal

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// errNoGroups says what this platform lacks: process groups that die with
// their supervisor (baton run, lead and queue work start commands in one).
func errNoGroups() error {
	return fmt.Errorf("%w: process groups on %s", ErrUnsupported, runtime.GOOS)
}

// Group is not supported on this platform.
type Group struct{}

// GroupOption configures StartGroup.
type GroupOption func()

// WithSupervisor is not supported on this platform.
func WithSupervisor(...string) GroupOption { return func() {} }

// StartGroup returns ErrUnsupported on this platform.
func StartGroup(*exec.Cmd, ...GroupOption) (*Group, error) { return nil, errNoGroups() }

// PID is 0 on this platform.
func (g *Group) PID() int { return 0 }

// Done is never closed on this platform.
func (g *Group) Done() <-chan struct{} { return nil }

// Wait returns ErrUnsupported on this platform.
func (g *Group) Wait() (int, error) { return -1, errNoGroups() }

// Signal returns ErrUnsupported on this platform.
func (g *Group) Signal(syscall.Signal) error { return errNoGroups() }

// Stop returns ErrUnsupported on this platform.
func (g *Group) Stop(time.Duration) (int, error) { return -1, errNoGroups() }

// SuperviseMain is not supported on this platform: it says so and returns 1.
func SuperviseMain(_ []string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "supervise: %v\n", errNoGroups())
	return 1
}

// WithForeground is not supported on this platform.
func WithForeground(int) GroupOption { return func() {} }

// InForeground is false on this platform.
func InForeground(int) bool { return false }

// GroupRunning is false on this platform.
func GroupRunning(int) bool { return false }

// Standby is not supported on this platform.
type Standby struct{}

// StartStandby returns ErrUnsupported on this platform.
func StartStandby(io.Writer, io.Writer, ...string) (*Standby, error) { return nil, errNoGroups() }

// PID is 0 on this platform.
func (s *Standby) PID() int { return 0 }

// Start returns ErrUnsupported on this platform.
func (s *Standby) Start(*exec.Cmd, []byte) (*Group, error) { return nil, errNoGroups() }

// Close does nothing on this platform.
func (s *Standby) Close() error { return nil }
