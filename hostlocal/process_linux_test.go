//go:build linux

package hostlocal

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStat_CommWithSpacesAndParens(t *testing.T) {
	// Fields 3.. of a real line; field 22 (start time) is 98765.
	rest := "S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 12345678 100 18446744073709551615"
	line := "4242 (evil) S 1 2 3 (x) y) " + rest + "\n"
	state, start, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if state != "S" || start != "98765" {
		t.Errorf("parseStat = %q, %q; want S, 98765", state, start)
	}
	for _, bad := range []string{"", "4242 no parens S 1", "4242 (short) S 1 2 3", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 nope 20"} {
		if _, _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}

func TestSelf_StartTokenIsBootIDAndStartTime(t *testing.T) {
	p, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Start, strings.TrimSpace(string(boot))+":") {
		t.Errorf("Start = %q, want it to begin with the boot id", p.Start)
	}
}

// procState returns the state field of /proc/<pid>/stat.
func procState(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	state, _, err := parseStat(string(b))
	return state, err
}

func TestLookupProcess_ZombieIsNoProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start true: %v", err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = cmd.Wait() }()

	// Not reaped yet: wait for the child to become a zombie. Polling a
	// kernel state change has no other barrier; the deadline only bounds it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		state, err := procState(pid)
		if err != nil {
			t.Fatal(err)
		}
		if state == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d still in state %s", pid, state)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := LookupProcess(pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("LookupProcess(zombie) = %v, want ErrNoProcess", err)
	}
	if (Process{PID: pid}).Alive() {
		t.Error("a zombie is Alive")
	}
}

func TestParseProcLocks_KeepsHeldFlocksOnly(t *testing.T) {
	in := `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF
2: -> FLOCK  ADVISORY  WRITE 4343 fd:02:7654321 0 EOF
3: POSIX  ADVISORY  WRITE 999 00:2a:17 0 EOF
4: FLOCK  ADVISORY  READ 12 103:1f:42 0 EOF
5: OFDLCK ADVISORY  WRITE -1 00:2a:18 0 EOF
6: FLOCK  ADVISORY  WRITE 1 <none>:0 0 EOF
garbage
`
	got := parseProcLocks([]byte(in))
	want := flockTable{
		{major: 0xfd, minor: 0x01, ino: 1234567}: 4242,
		{major: 0x103, minor: 0x1f, ino: 42}:     12,
	}
	if len(got) != len(want) {
		t.Fatalf("parseProcLocks = %v, want %v", got, want)
	}
	for k, pid := range want {
		if got[k] != pid {
			t.Errorf("%+v: pid %d, want %d (table %v)", k, got[k], pid, got)
		}
	}
}

func TestKernelFlocks_SeesHeldGateWithoutTakingIt(t *testing.T) {
	d := openTestDir(t)
	held := mustLock(t, d, "held", Holder{})
	free := mustLock(t, d, "free", Holder{})
	if err := free.Unlock(); err != nil {
		t.Fatal(err)
	}
	// Locks decides "held" from this table on Linux and probes only when
	// it cannot be read.
	table, err := kernelFlocks()
	if err != nil {
		t.Fatalf("kernelFlocks: %v", err)
	}
	for _, c := range []struct {
		l    *Lock
		want bool
	}{{held, true}, {free, false}} {
		fi, err := os.Stat(c.l.Path())
		if err != nil {
			t.Fatal(err)
		}
		if got := table.holds(fi); got != c.want {
			t.Errorf("table.holds(%s) = %v, want %v", c.l.Name(), got, c.want)
		}
	}
}

// A holder that has taken the flock but not yet written its record (one
// descheduled on a loaded host) is named by the pid in /proc/locks, not
// reported as unknown.
func TestTryLock_HolderWithoutRecordIsNamedByTheKernel(t *testing.T) {
	d := openTestDir(t)
	hp := startHolder(t, d.Path(), "slot-x", "helper")
	if err := os.Truncate(filepath.Join(d.Path(), "locks", "slot-x.lock"), 0); err != nil {
		t.Fatal(err)
	}
	_, err := d.TryLock("slot-x", Holder{})
	le := asLocked(t, err)
	if le.Holder == nil || le.Holder.PID != hp.pid() {
		t.Fatalf("Holder = %+v, want pid %d from /proc/locks", le.Holder, hp.pid())
	}
	if want := "gate slot-x is held by pid " + strconv.Itoa(hp.pid()); err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if !le.Holder.Process().Alive() {
		t.Errorf("the holder named, %+v, is not alive", le.Holder.Process())
	}
	if info := lockInfo(t, d, "slot-x"); !info.Held || info.Holder == nil || info.Holder.PID != hp.pid() {
		t.Errorf("Locks: %+v, want held by pid %d from /proc/locks", info, hp.pid())
	}
}

func TestLineage_NamesTheCallerAndItsAncestors(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	got, err := Lineage(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 3 || got[0].PID != cmd.Process.Pid || got[1] != self || got[2].PID != os.Getppid() {
		t.Fatalf("lineage of a child of pid %d (parent %d) = %v; want the child, this process, then its parent", self.PID, os.Getppid(), got)
	}
	if last := got[len(got)-1]; last.PID != 1 {
		t.Errorf("lineage ends at %v, want pid 1", last)
	}
	if _, err := Lineage(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("lineage of no process: %v, want ErrNoProcess", err)
	}
}
