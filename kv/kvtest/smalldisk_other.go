//go:build !linux

package kvtest

import "testing"

// SmallDisk is a tmpfs on Linux only: elsewhere the test is skipped.
func SmallDisk(tb testing.TB, size int64) string {
	tb.Skip("a small disk is a tmpfs, which this test mounts on Linux only")
	return ""
}

// FillDisk is for SmallDisk's directories.
func FillDisk(tb testing.TB, dir string) string {
	tb.Skip("a small disk is a tmpfs, which this test mounts on Linux only")
	return ""
}
