// Package session gives slots of work one holder each, across hosts.
//
// A session is a record in the JetStream KV bucket <prefix>-sessions, keyed
// by slot, that lives while its holder renews it (Commit) and vanishes when
// its TTL runs out on the server's clock. Join creates it with a
// compare-and-set inside a host-local gate (a flock), so the check of the
// slot, the write of the record and the spawn of the agent are one critical
// section per host, and across hosts the CAS lets exactly one joiner win.
// A join that may wait (WithWait) for a held slot takes a place in the
// slot's line (package waitline) and is served in the order it began to
// wait, holding the gate only while it creates the session.
//
// Guaranteed: at most one live session per slot; a renewal, close or forced
// takeover is a CAS on the revision the caller read (or, for CommitSlot and
// CloseSlot, the one this host last wrote), so it never overwrites
// a record it did not see and never resurrects one that expired or was
// closed; a session of another host is refused, always; a record that does
// not decode is held by nobody-knows-who and never treated as free; ages,
// time left and staleness are judged from the server's clock. Every session
// carries a fence (the revision that created it) that is strictly larger for
// every later holder of the slot.
//
// Not guaranteed: that a holder still holds its slot between two renewals.
// A paused or partitioned holder can lose its session while it works; it
// learns so at its next renewal (ErrLost), and work that must not be done by
// a former holder should check the fence where the work lands. The host
// gate only excludes processes of one host sharing one state directory on a
// local filesystem.
package session
