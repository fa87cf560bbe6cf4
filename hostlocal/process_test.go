package hostlocal

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// skipWithoutStartTimes skips on platforms without process start times.
func skipWithoutStartTimes(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no process start times on " + runtime.GOOS)
	}
}

func TestSelf_IsAlive(t *testing.T) {
	skipWithoutStartTimes(t)
	p, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != os.Getpid() || p.Start == "" {
		t.Fatalf("Self() = %+v, want pid %d with a start token", p, os.Getpid())
	}
	if !p.Alive() {
		t.Error("Self().Alive() = false")
	}
	if !(Process{PID: p.PID}).Alive() {
		t.Error("a Process with no start token and this pid is not Alive")
	}
	if again, _ := Self(); again != p {
		t.Errorf("Self() changed: %+v then %+v", p, again)
	}
}

func TestProcess_SamePIDOtherStartIsNotAlive(t *testing.T) {
	skipWithoutStartTimes(t)
	p, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	p.Start += "-recycled"
	if p.Alive() {
		t.Errorf("%+v is Alive, want a recycled pid to be dead", p)
	}
}

func TestProcess_ReapedChildIsNotAlive(t *testing.T) {
	skipWithoutStartTimes(t)
	cmd := exec.Command("cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start cat: %v", err)
	}
	p, err := LookupProcess(cmd.Process.Pid)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	if !p.Alive() {
		t.Error("a running child is not Alive")
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if p.Alive() {
		t.Errorf("reaped child %v is Alive", p)
	}
	if _, err := LookupProcess(p.PID); !errors.Is(err, ErrNoProcess) {
		t.Errorf("LookupProcess(reaped child) = %v, want ErrNoProcess", err)
	}
}

func TestProcess_ExitedTrueIsNotAlive(t *testing.T) {
	skipWithoutStartTimes(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	if p := (Process{PID: cmd.Process.Pid}); p.Alive() {
		t.Errorf("%v, started and reaped, is Alive", p)
	}
}

func TestLookupProcess_RejectsNonPositivePIDs(t *testing.T) {
	for _, pid := range []int{0, -1, -4242, math.MinInt, math.MaxInt} {
		if _, err := LookupProcess(pid); !errors.Is(err, ErrNoProcess) {
			t.Errorf("LookupProcess(%d) = %v, want ErrNoProcess", pid, err)
		}
		if (Process{PID: pid}).Alive() {
			t.Errorf("pid %d is Alive", pid)
		}
	}
}

func TestProcess_String(t *testing.T) {
	if got := (Process{PID: 4242, Start: "x"}).String(); got != "pid 4242" {
		t.Errorf("String() = %q, want %q", got, "pid 4242")
	}
}

func TestProcess_ThisBoot(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Skip(err)
	}
	if !self.ThisBoot() {
		t.Errorf("Self() %q is not of this boot", self.Start)
	}
	for _, p := range []Process{{PID: self.PID}, {PID: self.PID, Start: "another-boot:12345"}} {
		if p.ThisBoot() {
			t.Errorf("%+v reported as of this boot", p)
		}
	}
}
