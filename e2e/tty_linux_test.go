package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/ptytest"
)

// inTerminal starts baton with args as the foreground of a new
// pseudo-terminal, as a user typing in a terminal would; it returns the
// terminal's master side and the process.
func (h *host) inTerminal(t *testing.T, args ...string) (*os.File, *exec.Cmd) {
	t.Helper()
	m, s := ptytest.Open(t)
	cmd := h.command(args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	cmd.SysProcAttr = ptytest.Foreground()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return m, cmd
}

// expectLine reads the terminal until a line containing want.
func expectLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("terminal closed before %q", want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no %q on the terminal", want)
		}
	}
}

func scanLines(f *os.File) <-chan string {
	ch := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}

func TestRun_AnInteractiveCommandOwnsTheTerminal(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	term, cmd := h.inTerminal(t, "run", "s", "--task", "T-1", "--", "sh", "-c",
		`trap 'echo "caught INT"; exit 130' INT; echo ready; read x; echo "got $x"; while :; do sleep 0.05; done`)
	lines := scanLines(term)
	expectLine(t, lines, "ready")
	term.Write([]byte("hello\n"))
	expectLine(t, lines, "got hello")
	term.Write([]byte{3}) // Ctrl-C
	expectLine(t, lines, "caught INT")
	if code := exitCode(cmd.Wait()); code != 130 {
		t.Errorf("baton exited %d after Ctrl-C, want the command's 130", code)
	}
	if len(h.sessions()) != 0 {
		t.Error("the session outlived the interrupted command")
	}
}
