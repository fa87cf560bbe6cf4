package cmdutil

import (
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
