// Package sem gives a fleet counting semaphores: at most max units of a
// named resource held at once across every host, each holder with an index
// of its own and a fence.
//
// A semaphore is a record sem.<name> in the JetStream KV bucket
// <prefix>-limits holding its max, which never changes once written, so
// that no two callers count against different limits. Each of its units is
// a key sem.<name>.<i>, i from 0 to max-1, that a permit holds by creating
// it (compare-and-set) with the permit's TTL and renews while it works; the
// server removes a unit whose TTL runs out. A permit of weight W holds W
// units, created at once; if any is lost to another acquirer the others
// are deleted again and the acquirer looks afresh. Acquirers that wait do
// so in the semaphore's line (package waitline), served in the order they
// began to wait; only the first in line takes units. A holder that
// releases while the first waiter asks for no more units than it holds
// hands them over instead (adr/0045): it writes them for the waiter and
// deletes the waiter's ticket in one pipeline, and the waiter holds the
// permit when those writes reach it, with no write of its own.
//
// A per-host semaphore (PerHost) has max units on each host apart: each
// host's units and line live under sem.<name>.h.<host>, and everything
// below holds per host (adr/0044).
//
// Guaranteed: at most max units are held at any revision, weights counted,
// since each unit is one key and a key has one live value; a permit's index
// (its lowest unit) is unique among live permits, so a port or a database
// can be derived from it; a permit's fence is higher than that of every
// permit acquired before it on the semaphore; a unit whose holder's process
// is dead on the acquirer's host is freed at once (pid and start time),
// elsewhere when its TTL runs out; a waiting acquirer is woken by the
// semaphore's watch when a unit is freed, and by the exit of a holder's
// process on its host, not by polling. A holder learns it lost its permit
// (Done closes) no later than a local deadline that falls before the
// server could expire its units.
//
// Not guaranteed: that a holder still holds its permit while it works (a
// paused process can resume after its units expired: carry the fence to
// what it writes); that a TryAcquire never passes a waiter whose ticket
// it has not seen yet (one created within the same round trip).
package sem
