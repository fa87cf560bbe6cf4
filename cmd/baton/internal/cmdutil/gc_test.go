package cmdutil

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// A listing verb collects less often, and puts the collector back after;
// a GOGC the user set stands.
func TestListingGC_RaisesGOGCUnlessSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	restore := (&Factory{Getenv: func(string) string { return "" }}).ListingGC()
	if got := debug.SetGCPercent(listingGCPercent); got != listingGCPercent {
		t.Errorf("GOGC during a listing %d, want %d", got, listingGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after a listing %d, want 100 back", got)
	}

	restore = (&Factory{Getenv: func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	}}).ListingGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set by the user became %d", got)
	}
	restore()
}

// A queue worker runs on one thread unless GOMAXPROCS is set, and puts the
// setting back after.
func TestOneThread_UnlessGOMAXPROCSIsSet(t *testing.T) {
	before := runtime.GOMAXPROCS(3)
	defer runtime.GOMAXPROCS(before)

	restore := (&Factory{Getenv: func(string) string { return "" }}).OneThread()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS in a worker %d, want 1", got)
	}
	restore()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("GOMAXPROCS after %d, want 3 back", got)
	}

	restore = (&Factory{Getenv: func(k string) string {
		if k == "GOMAXPROCS" {
			return "3"
		}
		return ""
	}}).OneThread()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("GOMAXPROCS set by the user became %d", got)
	}
	restore()
}
