package kvtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size bytes on a new directory and returns the
// directory; it is unmounted when the test ends. It needs root (or the
// right to mount): without it the test is skipped, saying so.
func SmallDisk(tb testing.TB, size int64) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("a small disk is a tmpfs mounted by the test, which needs root: run the test as root")
	}
	dir := filepath.Join(tb.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		if errors.Is(err, syscall.EPERM) {
			tb.Skipf("mount a tmpfs on %s: %v: the test needs the right to mount", dir, err)
		}
		tb.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	tb.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes a file of zeros into dir until its filesystem is full
// and returns the file's path: removing it frees the space again.
func FillDisk(tb testing.TB, dir string) string {
	tb.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				tb.Fatalf("fill %s: %v", dir, err)
			}
			break
		}
	}
	// What a short write left, to the last block.
	for _, err := f.Write(buf[:1]); err == nil; _, err = f.Write(buf[:1]) {
	}
	return path
}
