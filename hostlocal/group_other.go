//go:build !linux && !darwin

package hostlocal

import (
	"io"
	"os/exec"
	"syscall"
	"time"
)

// Group is not supported on this platform.
type Group struct{}

// GroupOption configures StartGroup.
type GroupOption func()

// WithSupervisor is not supported on this platform.
func WithSupervisor(...string) GroupOption { return func() {} }

// StartGroup returns ErrUnsupported on this platform.
func StartGroup(*exec.Cmd, ...GroupOption) (*Group, error) { return nil, ErrUnsupported }

// PID is 0 on this platform.
func (g *Group) PID() int { return 0 }

// Done is never closed on this platform.
func (g *Group) Done() <-chan struct{} { return nil }

// Wait returns ErrUnsupported on this platform.
func (g *Group) Wait() (int, error) { return -1, ErrUnsupported }

// Signal returns ErrUnsupported on this platform.
func (g *Group) Signal(syscall.Signal) error { return ErrUnsupported }

// Stop returns ErrUnsupported on this platform.
func (g *Group) Stop(time.Duration) (int, error) { return -1, ErrUnsupported }

// SuperviseMain is not supported on this platform.
func SuperviseMain([]string, io.Writer) int { return 1 }

// WithForeground is not supported on this platform.
func WithForeground(int) GroupOption { return func() {} }

// InForeground is false on this platform.
func InForeground(int) bool { return false }

// GroupRunning is false on this platform.
func GroupRunning(int) bool { return false }

// Standby is not supported on this platform.
type Standby struct{}

// StartStandby returns ErrUnsupported on this platform.
func StartStandby(io.Writer, io.Writer, ...string) (*Standby, error) { return nil, ErrUnsupported }

// PID is 0 on this platform.
func (s *Standby) PID() int { return 0 }

// Start returns ErrUnsupported on this platform.
func (s *Standby) Start(*exec.Cmd, []byte) (*Group, error) { return nil, ErrUnsupported }

// Close does nothing on this platform.
func (s *Standby) Close() error { return nil }
