package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The full disk's tmpfs: filled, it has no room for one more page, at no
// more memory than the store held plus fillSlack; freed, it has its size
// back.
func TestSmallDisk_FillsAndFrees(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the tmpfs is mounted by the test, which needs root")
	}
	dir := filepath.Join(t.TempDir(), "n1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := mountTmpfs(dir, diskSize, 0); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("%v: the test needs the right to mount", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	d := &smallDisk{dir: dir, filler: filepath.Join(dir, ".batonfault-filler")}
	store := filepath.Join(dir, "store")
	if err := os.WriteFile(store, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	held, err := d.fill()
	if err != nil {
		t.Fatal(err)
	}
	if held < 3<<20 || held > 4<<20 {
		t.Errorf("fill says the store held %d bytes, want about 3 MiB", held)
	}
	used, _ := d.used()
	if used > held+2*fillSlack {
		t.Errorf("the filled disk holds %d bytes, want at most %d", used, held+2*fillSlack)
	}
	f, err := os.OpenFile(store, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 8<<10)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write to the filled disk: %v, want ENOSPC", err)
	}
	if err := d.free(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 8<<10)); err != nil {
		t.Fatalf("a write once the disk is freed: %v", err)
	}
}

func TestDiskVerdict(t *testing.T) {
	if got := diskVerdict("not root", nil); got != "full disk SKIPPED (not root)" {
		t.Errorf("skipped: %s", got)
	}
	got := diskVerdict("", []diskResult{
		{server: "n2", acked: 40, refused: 1, resumed: 700 * time.Millisecond},
		{server: "n1", acked: 12, resumed: 2 * time.Second, problems: []string{"x"}},
	})
	want := "full disk: 2 (n2 n1), 52 writes acknowledged and 1 failed with exit 6 while full, resumed within 2s of the space coming back, 1 problems"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !strings.HasPrefix(diskVerdict("", nil), "full disk: none") {
		t.Errorf("no full disk: %s", diskVerdict("", nil))
	}
}

// A full disk is held against its server only for what it had time to say:
// a fault the run's end cut short before the server said its disk is full
// asks nothing of it, one it said so in asks for the room again message.
func TestDiskProblems(t *testing.T) {
	for _, c := range []struct {
		saidFull, saidRoom, cut bool
		want                    string
	}{
		{true, true, false, ""},
		{true, true, true, ""},
		{false, false, false, "n3's disk was full for 30s and it did not say so on stderr"},
		{false, false, true, ""},
		{true, false, false, "n3 did not say within 15s that its disk has room again"},
		{true, false, true, "n3 did not say within 15s that its disk has room again"},
	} {
		got := strings.Join(diskProblems("n3", c.saidFull, c.saidRoom, c.cut), "; ")
		if got != c.want {
			t.Errorf("said full %v, said room %v, cut %v: %q, want %q", c.saidFull, c.saidRoom, c.cut, got, c.want)
		}
	}
	cut := diskResult{server: "n3", held: 7 << 20, full: 400 * time.Millisecond, acked: 4, cut: true}
	if s := cut.String(); !strings.Contains(s, "cut short by the run's end") || strings.Contains(s, "said so after") {
		t.Errorf("a cut fault reads %q", s)
	}
	silent := diskResult{server: "n3", held: 7 << 20, full: 30 * time.Second, problems: diskProblems("n3", false, false, false)}
	if s := silent.String(); strings.Contains(s, "cut short") {
		t.Errorf("a fault the run did not cut short reads %q", s)
	}
}
