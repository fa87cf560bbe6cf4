package hostlocal

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/ptytest"
)

func TestGroup_ForegroundGroupReadsTheTerminalAndHandsItBack(t *testing.T) {
	master, slave := ptytest.Open(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestGroupHelper$")
	helper.Env = append(os.Environ(), envGroupHelper+"=tty")
	helper.Stdin, helper.Stdout, helper.Stderr = slave, slave, slave
	helper.SysProcAttr = ptytest.Foreground()
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
