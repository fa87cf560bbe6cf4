package cmdutil

import "runtime/debug"

// listingGCPercent is the garbage collector's GOGC while a verb reads and
// prints a whole listing (ADR 0029).
const listingGCPercent = 400

// ListingGC makes the garbage collector run less often while a verb reads
// and prints a whole listing, unless GOGC is set, and returns what sets it
// back. A listing's heap only grows until it is printed (100k sessions hold
// about 60 MB), so at the default GOGC the collector marks it again and
// again as it grows, for nothing: a fifth of `baton status`'s CPU at 100k
// sessions, against a third more peak memory at 400.
func (f *Factory) ListingGC() (restore func()) {
	if f.Getenv != nil && f.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(listingGCPercent)
	return func() { debug.SetGCPercent(old) }
}
