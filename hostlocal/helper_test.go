package hostlocal

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The helper process is this test binary re-executed with
// -test.run=^TestHelperProcess$ and these variables set: it takes a gate,
// prints "locked" and blocks reading stdin, then releases the gate and exits
// when stdin closes.
const (
	envHelper  = "HOSTLOCAL_TEST_HELPER"
	envState   = "HOSTLOCAL_TEST_STATE"
	envGate    = "HOSTLOCAL_TEST_GATE"
	envPurpose = "HOSTLOCAL_TEST_PURPOSE"
)

// TestHelperProcess is not a test: it is the body of the helper process.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) != "lock" {
		t.Skip("helper process only")
	}
	d, err := OpenStateDir(os.Getenv(envState))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	l, err := d.TryLock(os.Getenv(envGate), Holder{Host: "helper-host", Purpose: os.Getenv(envPurpose)})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := l.Unlock(); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// holderProcess is a helper process that holds a gate.
type holderProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startHolder starts a helper process that takes gate in the state
// directory dir and returns once it holds it. The process is killed and
// reaped at the end of the test if the test did not end it.
func startHolder(t *testing.T, dir, gate, purpose string) *holderProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), envHelper+"=lock", envState+"="+dir, envGate+"="+gate, envPurpose+"="+purpose)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hp := &holderProcess{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper process: got %q, %v; want \"locked\"", line, err)
	}
	return hp
}

// pid returns the helper's pid.
func (hp *holderProcess) pid() int { return hp.cmd.Process.Pid }

// kill SIGKILLs the helper and reaps it.
func (hp *holderProcess) kill(t *testing.T) {
	t.Helper()
	if err := hp.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = hp.cmd.Wait() // "signal: killed"
}
