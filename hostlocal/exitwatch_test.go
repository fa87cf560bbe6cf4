package hostlocal_test

import (
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
)

func TestExitWatch_ReportsTheProcessesThatExited(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no process start times here")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	self, err := hostlocal.Self()
	if err != nil {
		t.Fatal(err)
	}
	w := hostlocal.NewExitWatch()
	defer w.Close()
	w.Watch("child", child)
	w.Watch("self", self)
	// The same pid with another start token: a recycled pid, not the
	// process recorded.
	w.Watch("recycled", hostlocal.Process{PID: self.PID, Start: self.Start + "0"})
	if got := w.Exited(); !slices.Equal(got, []string{"recycled"}) {
		t.Fatalf("exited %v before the kill, want [recycled]", got)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := w.Exited()
		if slices.Equal(got, []string{"child", "recycled"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exited %v after the kill, want [child recycled]", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.Forget("child")
	if got := w.Names(); !slices.Equal(got, []string{"recycled", "self"}) {
		t.Fatalf("names %v after Forget, want [recycled self]", got)
	}
}
