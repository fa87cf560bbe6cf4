//go:build linux || darwin

package hostlocal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
)

// Standby is a supervisor started ahead of the command it is to run: it
// leads its process group and watches this process, as WithSupervisor's
// does, and waits for Start. A supervisor is this program started again,
// so starting one ahead takes its start-up off the moment the command must
// run (a queue's task). Start or Close it exactly once.
type Standby struct {
	g     *Group
	spec  *os.File // the command goes here, as JSON
	stdin *os.File // and its standard input here
	once  sync.Once
}

// standbySpec is what a standby supervisor is told to run.
type standbySpec struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
}

// StartStandby starts a supervisor (argv as for WithSupervisor) that waits
// for its command; the command's output goes to stdout and stderr.
func StartStandby(stdout, stderr io.Writer, argv ...string) (*Standby, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("hostlocal: standby: %w: no supervisor", ErrInvalidName)
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		inR.Close()
		inW.Close()
		return nil, err
	}
	args := append(append([]string{}, argv[1:]...), "--parent", strconv.Itoa(os.Getpid()), "--ready", "4", "--await")
	cmd := exec.Command(argv[0], args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, stdout, stderr
	cmd.ExtraFiles = []*os.File{specR, readyW} // fds 3 and 4
	cmd.SysProcAttr = groupAttr(true)
	g, err := startGroup(cmd, -1, readyR)
	specR.Close() // the child has its copies
	inR.Close()
	readyW.Close()
	if err != nil {
		specW.Close()
		inW.Close()
		return nil, err
	}
	return &Standby{g: g, spec: specW, stdin: inW}, nil
}

// PID is the supervisor's pid, which will be the group's.
func (s *Standby) PID() int { return s.g.PID() }

// Start makes the supervisor run cmd (made with exec.Command; its path,
// arguments and environment are used, nil environment meaning this
// process's) with stdin as its standard input, and returns its group. If
// the supervisor has died meanwhile, the error says so.
func (s *Standby) Start(cmd *exec.Cmd, stdin []byte) (*Group, error) {
	err := errors.New("hostlocal: standby already used")
	s.once.Do(func() {
		if cmd.Err != nil {
			err = cmd.Err
			s.close()
			return
		}
		env := cmd.Env
		if env == nil {
			env = os.Environ()
		}
		b, merr := json.Marshal(standbySpec{Path: cmd.Path, Args: cmd.Args, Env: env})
		if merr != nil {
			err = merr
			s.close()
			return
		}
		_, err = s.spec.Write(b)
		s.spec.Close()
		if err != nil {
			s.stdin.Close()
			err = fmt.Errorf("hostlocal: standby supervisor %d: %w", s.g.PID(), err)
			return
		}
		go func() {
			_, _ = s.stdin.Write(stdin)
			s.stdin.Close()
		}()
	})
	if err != nil {
		return nil, err
	}
	return s.g, nil
}

// Close ends an unused standby and waits for it. Idempotent.
func (s *Standby) Close() error {
	s.once.Do(s.close)
	_, err := s.g.Wait()
	return err
}

func (s *Standby) close() {
	s.spec.Close()
	s.stdin.Close()
}
