package cmdutil

import "runtime/debug"

// listingGCPercent is the garbage collector's GOGC while a verb reads and
// prints a whole listing (ADR 0029).
const listingGCPercent = 400

// ListingGC makes the garbage collector run less often while a verb reads
// and prints a whole listing, unless GOGC is set, and returns what sets it
// back. A listing's heap only grows until it is printed, so at the
// default GOGC the collector marks it again and again as it grows, for
// nothing; ADR 0029 has what it cost and what 400 costs in memory.
func (f *Factory) ListingGC() (restore func()) {
	if f.Getenv != nil && f.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(listingGCPercent)
	return func() { debug.SetGCPercent(old) }
}
