//go:build linux || darwin

package hostlocal

import (
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// startCat starts `cat`, which runs until its stdin closes; the returned
// function closes it and reaps the child.
func startCat(t *testing.T) (stop func()) {
	t.Helper()
	cmd := exec.Command("cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start cat: %v", err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = stdin.Close()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestTryLock_ChildStartedWhileHeldDoesNotInheritGate(t *testing.T) {
	d := openTestDir(t)

	// Control: a descriptor opened without close-on-exec is inherited, and
	// the child keeps the gate held after the parent closes its copy. This
	// shows the check below can fail.
	dir, err := d.subdir("locks")
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(filepath.Join(dir, "leaky.lock"), unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	stopLeaky := startCat(t)
	_ = unix.Close(fd)
	if _, err := d.TryLock("leaky", Holder{}); err == nil {
		t.Fatal("control: the gate was free although the child inherited its descriptor")
	}
	stopLeaky()

	// The gate itself: its descriptor is close-on-exec.
	l, err := d.TryLock("slot-spawn", Holder{Purpose: "spawner"})
	if err != nil {
		t.Fatal(err)
	}
	startCat(t) // runs on until the test ends
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := d.TryLock("slot-spawn", Holder{Purpose: "next"})
	if err != nil {
		t.Fatalf("TryLock while the child spawned under the gate still runs: %v", err)
	}
	_ = l2.Unlock()
}
