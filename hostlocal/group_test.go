//go:build linux || darwin

package hostlocal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const envGroupHelper = "HOSTLOCAL_GROUP_HELPER"

// TestGroupHelper is not a test: it is the body of helper processes.
//   - supervise: this binary as a supervisor (arguments after "--").
//   - parent: starts a supervised group running a shell that backgrounds a
//     sleep, prints the sleep's pid and the group's, then blocks on stdin.
func TestGroupHelper(t *testing.T) {
	switch os.Getenv(envGroupHelper) {
	case "tty":
		os.Exit(ttyHelper())
	case "supervise":
		i := slices.Index(os.Args, "--")
		os.Exit(SuperviseMain(os.Args[i+1:], os.Stderr))
	case "parent", "standby-parent":
		cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
		cmd.Env = supervisedEnv()
		pipe, _ := cmd.StdoutPipe()
		var out io.Reader = pipe
		var g *Group
		var err error
		if os.Getenv(envGroupHelper) == "parent" {
			g, err = StartGroup(cmd, WithSupervisor(supervisorArgv()...))
		} else {
			// The standby's own output is this process's; the command's
			// stdout is a pipe here, so start it through a file.
			os.Setenv(envGroupHelper, "supervise")
			var s *Standby
			if s, err = StartStandby(os.Stdout, os.Stderr, supervisorArgv()...); err == nil {
				cmd = exec.Command("sh", "-c", "sleep 300 & echo $! > "+os.Getenv("HOSTLOCAL_PIDFILE")+"; wait")
				g, err = s.Start(cmd, nil)
			}
			if err == nil {
				out = pidFileReader(os.Getenv("HOSTLOCAL_PIDFILE"))
			}
		}
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		fmt.Printf("%s %d\n", strings.TrimSpace(line), g.PID())
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	default:
		t.Skip("helper process only")
	}
}

// ttyHelper is the body of the "tty" helper: a process in the foreground of
// its terminal starts a group that reads the terminal.
func ttyHelper() int {
	if !InForeground(0) {
		fmt.Println("helper not in the foreground")
		return 2
	}
	cmd := exec.Command("sh", "-c", `read x; echo "got $x"`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	g, err := StartGroup(cmd, WithForeground(0))
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	if code, _ := g.Wait(); code != 0 {
		fmt.Println("exit", code)
	}
	if InForeground(0) {
		fmt.Println("restored")
	}
	return 0
}

// pidFileReader reads a pid line once a process has written it to path.
func pidFileReader(path string) io.Reader {
	for range 500 {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.NewReader(string(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return strings.NewReader("")
}

func supervisorArgv() []string {
	return []string{os.Args[0], "-test.run=^TestGroupHelper$", "--"}
}

func supervisedEnv() []string { return append(os.Environ(), envGroupHelper+"=supervise") }

// waitGone waits until pid no longer exists (or is a zombie).
func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if !(Process{PID: pid}).Alive() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d still alive after %s", pid, within)
}

// readPIDs reads one line of space-separated pids.
func readPIDs(t *testing.T, r io.Reader) []int {
	t.Helper()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("read pids: %v (%q)", err, line)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad pid line %q", line)
		}
		pids = append(pids, p)
	}
	return pids
}

func TestGroup_ExitCodeIsTheChilds(t *testing.T) {
	for _, supervised := range []bool{false, true} {
		t.Run(fmt.Sprint("supervised=", supervised), func(t *testing.T) {
			cmd := exec.Command("sh", "-c", "exit 7")
			var opts []GroupOption
			if supervised {
				cmd.Env = supervisedEnv()
				opts = append(opts, WithSupervisor(supervisorArgv()...))
			}
			g, err := StartGroup(cmd, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if code, err := g.Wait(); code != 7 || err != nil {
				t.Errorf("wait = %d, %v; want 7", code, err)
			}
		})
	}
}

func TestGroup_KilledBySignalIs128PlusN(t *testing.T) {
	g, err := StartGroup(exec.Command("sh", "-c", "kill -TERM $$; sleep 5"))
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := g.Wait(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d", code, 128+int(syscall.SIGTERM))
	}
}

func TestGroup_MissingProgramFailsToStart(t *testing.T) {
	if _, err := StartGroup(exec.Command("/nonexistent/baton-test-program")); err == nil {
		t.Fatal("started a missing program")
	}
}

func TestGroup_StopReachesGrandchildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
	out, _ := cmd.StdoutPipe()
	g, err := StartGroup(cmd)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := readPIDs(t, out)[0]
	if !(Process{PID: sleeper}).Alive() {
		t.Fatal("grandchild not running")
	}
	if _, err := g.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitGone(t, sleeper, 5*time.Second)
}

func TestGroup_StopEscalatesToKillAfterGrace(t *testing.T) {
	cmd := exec.Command("sh", "-c", `trap "" TERM; echo ready; while :; do sleep 0.05; done`)
	out, _ := cmd.StdoutPipe()
	g, err := StartGroup(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("child said %q", line)
	}
	const grace = 300 * time.Millisecond
	start := time.Now()
	code, _ := g.Stop(grace)
	if code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code %d, want SIGKILL's %d", code, 128+int(syscall.SIGKILL))
	}
	if took := time.Since(start); took < grace {
		t.Errorf("killed after %s, before the %s grace", took, grace)
	}
}

func TestGroup_SupervisedGroupDiesWithItsParent(t *testing.T) { groupDiesWithParent(t, "parent") }

// groupDiesWithParent runs the helper mode (parent or standby-parent) that
// starts a supervised group, SIGKILLs it, and checks that the group dies.
func groupDiesWithParent(t *testing.T, mode string) {
	t.Helper()
	parent := exec.Command(os.Args[0], "-test.run=^TestGroupHelper$")
	parent.Env = append(os.Environ(), envGroupHelper+"="+mode, "HOSTLOCAL_PIDFILE="+t.TempDir()+"/pid")
	parent.Stderr = os.Stderr
	stdin, _ := parent.StdinPipe()
	defer stdin.Close()
	out, _ := parent.StdoutPipe()
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	pids := readPIDs(t, out)
	sleeper, leader := pids[0], pids[1]
	if !(Process{PID: sleeper}).Alive() || !(Process{PID: leader}).Alive() {
		t.Fatal("group not running")
	}
	// SIGKILL gives the parent no chance to clean up: the group must die anyway.
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	waitGone(t, sleeper, 5*time.Second)
	waitGone(t, leader, 5*time.Second)
}

func TestStandby_RunsItsCommandWithItsInputAndEnvironment(t *testing.T) {
	t.Setenv(envGroupHelper, "supervise") // the standby is this binary's helper
	var out, errb strings.Builder
	s, err := StartStandby(&lockedBuilder{b: &out}, &lockedBuilder{b: &errb}, supervisorArgv()...)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `read x; echo "$x $FOO"; exit 3`)
	cmd.Env = append(os.Environ(), "FOO=bar")
	g, err := s.Start(cmd, []byte("hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g.PID() != s.PID() {
		t.Errorf("group %d, standby %d: the standby leads the group", g.PID(), s.PID())
	}
	if code, err := g.Wait(); code != 3 || err != nil {
		t.Fatalf("exit %d, %v; want 3; stderr %q", code, err, errb.String())
	}
	if got := out.String(); got != "hello bar\n" {
		t.Errorf("output %q, want the input and the environment", got)
	}
	if _, err := s.Start(cmd, nil); err == nil {
		t.Error("a standby started twice")
	}
}

// A stop sent to a standby's group before its command came (the holder's
// term ended as it began) must not be lost: the command is never started,
// rather than started deaf to it and left running until a SIGKILL.
func TestStandby_AStopBeforeItsCommandCameIsNotLost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	t.Setenv(envGroupHelper, "supervise")
	var out strings.Builder
	s, err := StartStandby(&lockedBuilder{b: &out}, io.Discard, supervisorArgv()...)
	if err != nil {
		t.Fatal(err)
	}
	// Barrier: the supervisor catches SIGTERM. (Go catches every signal
	// from its start, before the supervisor asks for it: a signal that
	// comes between kills it, and the command is never started either.)
	deadline := time.Now().Add(10 * time.Second)
	for !catches(t, s.PID(), syscall.SIGTERM) {
		if time.Now().After(deadline) {
			t.Fatal("the supervisor never caught SIGTERM")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(-s.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	g, err := s.Start(exec.Command("sh", "-c", "echo started; sleep 30"), nil)
	if errors.Is(err, syscall.EPIPE) {
		return // the stop ended the supervisor before it took the command
	}
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { code, _ := g.Wait(); done <- code }()
	select {
	case code := <-done:
		if code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit %d, want %d (SIGTERM)", code, 128+int(syscall.SIGTERM))
		}
	case <-time.After(10 * time.Second):
		_, _ = g.Stop(0)
		t.Fatal("the command ran on after the stop sent before it came")
	}
	if strings.Contains(out.String(), "started") {
		t.Errorf("the command was started after the stop (it printed %q)", out.String())
	}
}

// Stop called the moment a supervised group starts (a term that ended as it
// began) reaches the command, or keeps it from starting: it never leaves it
// running, deaf to a SIGTERM its supervisor took, until the SIGKILL.
func TestStop_RightAfterTheStartReachesTheCommand(t *testing.T) {
	t.Setenv(envGroupHelper, "supervise")
	for i := range 30 {
		cmd := exec.Command("sleep", "30")
		g, err := StartGroup(cmd, WithSupervisor(supervisorArgv()...))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, err := g.Stop(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); code != 128+int(syscall.SIGTERM) || took > 20*time.Second {
			t.Fatalf("round %d: exit %d after %s; want 143 (SIGTERM) well before the SIGKILL", i, code, took)
		}
	}
}

// catches reports whether process pid has a handler for sig.
func catches(t *testing.T, pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			return err == nil && m&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

func TestStandby_CloseEndsAnUnusedOne(t *testing.T) {
	t.Setenv(envGroupHelper, "supervise")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	s, err := StartStandby(io.Discard, io.Discard, supervisorArgv()...)
	if err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 5*time.Second)
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStandby_ItsGroupDiesWithItsParent(t *testing.T) { groupDiesWithParent(t, "standby-parent") }

// lockedBuilder is a strings.Builder a process's output copier can write
// to while a test reads it.
type lockedBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestSuperviseMain_RejectsBadArguments(t *testing.T) {
	if code := SuperviseMain([]string{"sh"}, io.Discard); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
}
