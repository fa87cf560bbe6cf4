package hostlocal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

func TestGroup_ForegroundGroupReadsTheTerminalAndHandsItBack(t *testing.T) {
	master, slave := openPTY(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestGroupHelper$")
	helper.Env = append(os.Environ(), envGroupHelper+"=tty")
	helper.Stdin, helper.Stdout, helper.Stderr = slave, slave, slave
	helper.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- helper.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
		close(lines)
	}()
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"got hello": false, "restored": false}
	timeout := time.After(10 * time.Second)
	for !want["got hello"] || !want["restored"] {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("terminal closed; saw %v", want)
			}
			if _, ok := want[l]; ok {
				want[l] = true
			}
		case <-timeout:
			helper.Process.Kill()
			t.Fatalf("the group could not read the terminal or did not hand it back: %v", want)
		}
	}
	if err := <-done; err != nil {
		t.Errorf("helper: %v", err)
	}
}
